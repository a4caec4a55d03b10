//! Property tests (fuzzing where cargo-fuzz cannot run) of the engine's
//! query entry points, which take what a user types into a form field:
//! `AddressIndex::suggest_restricted` (with DaData's `locations` and
//! bounds) and `NameIndex::suggest` (with parts and gender).
//!
//! Queries are arbitrary Unicode, pieces of real queries (Cyrillic and
//! Latin words, the other keyboard layout, house numbers, abbreviations)
//! mixed with combining marks, zero-width and bidi controls, emoji,
//! separators and digits, up to the component's cap of 300 characters,
//! and far past it. Whatever the query, the engine returns at most `count`
//! suggestions that resolve to entries, without a panic, within a
//! generous bound (not a timing test: 5 s for a query of the small
//! indexes below, 20 s of the real ones, where one takes milliseconds).
//!
//! The indexes are built here from a few records; `build/hints/*.idx`
//! (`make hints-index`, which `make test` runs first) are searched too
//! when present (`HINTS_INDEX_DIR` names another directory).
//!
//! `make test` runs 64 cases each (`PROPTEST_CASES` overrides);
//! `scripts/fuzz.sh SECONDS` runs them with fresh seeds until the time is
//! up. A failure is saved (shrunk) in `query_fuzz.proptest-regressions`,
//! which is checked in and replayed first by every run.

use hints_engine::address::{AddressIndex, build_address_index};
use hints_engine::names::{Gender, NameIndex, Part, build_name_index};
use hints_engine::restrict::{Kinds, Location, Restrict};
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

const ADDRESSES: &str = r#"
{"kind":"place","id":"gn:1","name":"Москва","type":"г","country":"Россия","country_iso_code":"RU","aliases":["Moscow"],"population":12000000,"lat":55.75,"lon":37.6}
{"kind":"place","id":"gn:2","name":"Мосальск","type":"г","country":"Россия","country_iso_code":"RU","population":4000}
{"kind":"place","id":"gn:3","name":"Хабаровск","type":"г","country":"Россия","country_iso_code":"RU","population":600000}
{"kind":"place","id":"gn:4","name":"Rīga","country":"Latvia","country_iso_code":"LV","population":700000}
{"kind":"place","id":"gn:5","name":"Ёлкино","type":"д","country":"Россия","country_iso_code":"RU","population":12}
{"kind":"street","id":"s:1","parent":"gn:1","name":"Хабаровская","type":"ул","house_range":[1,30]}
{"kind":"street","id":"s:2","parent":"gn:1","name":"Мира","type":"пр-кт","houses":["1","2","12 А","12к2","3/5"]}
{"kind":"street","id":"s:3","parent":"gn:3","name":"Мира","type":"ул","house_range":[1,5]}
{"kind":"street","id":"s:4","parent":"gn:4","name":"Brīvības iela","postal_code":"LV-1010","houses":["1","12"]}
{"kind":"street","id":"s:5","parent":"gn:5","name":"Лесная","type":"ул","house_range":[1,2]}
"#;

const NAMES: &str = r#"
{"part":"surname","text":"Иванов","gender":"m","count":6926}
{"part":"surname","text":"Иванова","gender":"f","count":5206}
{"part":"surname","text":"Петров","gender":"m","count":4000}
{"part":"surname","text":"Ёлкина","gender":"f","count":12}
{"part":"name","text":"Иван","gender":"m","count":90136}
{"part":"name","text":"Анна","gender":"f","count":80000}
{"part":"name","text":"Sergey","gender":"m","count":3}
{"part":"patronymic","text":"Ивановна","gender":"f","count":83965}
{"part":"patronymic","text":"Петрович","gender":"m","count":50000}
"#;

/// The real indexes' directory, if they were built.
fn real_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("HINTS_INDEX_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/hints"));
    (dir.join("address.idx").exists() && dir.join("names.idx").exists()).then_some(dir)
}

/// (index bytes, generous bound per query) for each index searched.
struct Indexes {
    addresses: Vec<(Vec<u8>, Duration)>,
    names: Vec<(Vec<u8>, Duration)>,
}

static INDEXES: LazyLock<Indexes> = LazyLock::new(|| {
    let small = Duration::from_secs(5);
    let mut addresses = vec![(
        build_address_index(ADDRESSES.trim().as_bytes())
            .expect("address index")
            .0,
        small,
    )];
    let mut names = vec![(
        build_name_index(NAMES.trim().as_bytes())
            .expect("name index")
            .0,
        small,
    )];
    match real_dir() {
        Some(dir) => {
            let real = Duration::from_secs(20);
            addresses.push((
                std::fs::read(dir.join("address.idx")).expect("address.idx"),
                real,
            ));
            names.push((
                std::fs::read(dir.join("names.idx")).expect("names.idx"),
                real,
            ));
        }
        None => eprintln!(
            "query_fuzz: build/hints/*.idx not built (`make hints-index`): only the small indexes are searched"
        ),
    }
    Indexes { addresses, names }
});

/// Pieces of what people type, and what breaks text handling.
const PIECES: &[&str] = &[
    "москва",
    "моск",
    "мос",
    "хабар",
    "хабаровская",
    "мира",
    "мир",
    "пр-кт",
    "ул",
    "ул.",
    "г",
    "г.",
    "д",
    "Ёлкино",
    "елкино",
    "лесная",
    "rīga",
    "riga",
    "brīvības",
    "moscow",
    "vjcr",
    "[f,fh",
    "иванов",
    "иванова",
    "ив",
    "анна",
    "ивановна",
    "петрович",
    "sergey",
    "ivanov",
    "bdfyjd",
    "12",
    "12 А",
    "12а",
    "12к2",
    "к2",
    "3/5",
    "1-",
    "-",
    "/",
    ",",
    ".",
    " ",
    "  ",
    "\t",
    "\n",
    "0",
    "999999999999999999999",
    "№",
    "\u{301}",
    "\u{308}",
    "\u{200b}",
    "\u{200d}",
    "\u{202e}",
    "\u{feff}",
    "\u{fe0f}",
    "👩‍👩‍👧",
    "🇷🇺",
    "ﬁ",
    "ẞ",
    "İ",
    "ǅ",
    "\u{0}",
    "\u{7f}",
    "\u{10ffff}",
    "\u{fffd}",
    "ᄀ\u{1161}",
    "a\u{300}\u{301}\u{302}\u{303}",
    "%",
    "*",
    "\"",
    "\\",
];

/// A query: pieces (sometimes with a combining mark stacked on each), or
/// any Unicode text, up to the component's 300 characters; or one of
/// those repeated far past it.
fn query() -> impl Strategy<Value = String> {
    let pieces =
        prop::collection::vec(prop::sample::select(PIECES), 0..12).prop_map(|v| v.join(""));
    let spaced =
        prop::collection::vec(prop::sample::select(PIECES), 0..12).prop_map(|v| v.join(" "));
    let marked = (
        spaced.clone(),
        prop::sample::select(&["\u{301}", "\u{308}", "\u{20dd}"][..]),
    )
        .prop_map(|(s, m)| {
            s.chars()
                .flat_map(|c| [c.to_string(), m.to_string()])
                .collect()
        });
    let short = prop_oneof![
        4 => spaced,
        2 => pieces,
        1 => marked,
        2 => any::<String>(),
        1 => "\\PC{0,300}",
        1 => "[а-яё0-9 ,.-]{0,300}",
    ];
    prop_oneof![
        12 => short.prop_map(|s| s.chars().take(300).collect()),
        1 => (prop::sample::select(PIECES), 300usize..3000).prop_map(|(p, n)| {
            std::iter::repeat_n(format!("{p} "), n).collect::<String>()
        }),
    ]
}

fn location() -> impl Strategy<Value = Location> {
    let field = || {
        prop::option::of(prop_oneof![
            3 => prop::sample::select(&[
                "Москва", "москва", "Хабаровск", "Россия", "RU", "ru", "LV", "*", "", " ", "Ёлкино",
                "Rīga", "Мира",
            ][..]).prop_map(str::to_string),
            1 => any::<String>(),
        ])
    };
    (field(), field(), field(), field(), field()).prop_map(
        |(country_iso_code, country, region, city, street)| Location {
            country_iso_code,
            country,
            region,
            city,
            street,
        },
    )
}

fn restrict() -> impl Strategy<Value = Restrict> {
    let kinds = prop::option::of((any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(places, streets, houses)| Kinds {
            places,
            streets,
            houses,
        },
    ));
    (kinds, prop::collection::vec(location(), 0..4))
        .prop_map(|(kinds, locations)| Restrict::new(kinds, locations))
}

fn parts() -> impl Strategy<Value = Option<Vec<Part>>> {
    prop::option::of(prop::collection::vec(
        prop::sample::select(&[Part::Surname, Part::Name, Part::Patronymic][..]),
        0..4,
    ))
}

fn gender() -> impl Strategy<Value = Option<Gender>> {
    prop::option::of(prop::sample::select(
        &[Gender::Male, Gender::Female, Gender::Unknown][..],
    ))
}

/// Counts the component may ask for (1..=20), and the edges.
fn count() -> impl Strategy<Value = usize> {
    prop_oneof![8 => 1usize..=20, 1 => Just(0usize), 1 => 21usize..200]
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Address queries, restricted or not.
    #[test]
    fn address_queries_answer(q in query(), count in count(), restrict in restrict()) {
        for (bytes, bound) in &INDEXES.addresses {
            let ix = AddressIndex::open(bytes).expect("open address index");
            let started = Instant::now();
            let found = ix.suggest_restricted(&q, count, &restrict);
            let took = started.elapsed();
            prop_assert!(took < *bound, "{:?} took {took:?} for {q:?}", bound);
            prop_assert!(found.len() <= count, "{} suggestions for count {count}", found.len());
            for s in &found {
                prop_assert!(s.score.is_finite(), "score {} for {q:?}", s.score);
                // Every suggestion resolves to an entry with a value.
                let value = ix.address(s).value();
                prop_assert!(!value.is_empty(), "an empty value for {q:?}");
            }
        }
    }

    /// Name queries, with or without parts and gender.
    #[test]
    fn name_queries_answer(q in query(), count in count(), parts in parts(), gender in gender()) {
        for (bytes, bound) in &INDEXES.names {
            let ix = NameIndex::open(bytes).expect("open name index");
            let started = Instant::now();
            let found = ix.suggest(&q, count, parts.as_deref(), gender);
            let took = started.elapsed();
            prop_assert!(took < *bound, "{:?} took {took:?} for {q:?}", bound);
            prop_assert!(found.len() <= count, "{} suggestions for count {count}", found.len());
            for f in &found {
                prop_assert!(f.score.is_finite(), "score {} for {q:?}", f.score);
                prop_assert!(!f.value().is_empty(), "an empty value for {q:?}");
            }
        }
    }

    /// The text helpers every query goes through first.
    #[test]
    fn text_helpers_answer(q in query()) {
        let _ = hints_engine::layout::swap(&q);
        let _ = hints_engine::translit::cyrillic(&q);
        let _ = hints_engine::text::fold(&q);
    }
}

/// Found by `address_queries_answer` and `name_queries_answer`: a count
/// of 0 gave suggestions (the near-prefix fallback and the name search
/// keep room beyond `count`).
#[test]
fn count_zero_suggests_nothing() {
    let ix = AddressIndex::open(&INDEXES.addresses[0].0).expect("address index");
    assert!(ix.suggest("เE", 0).is_empty());
    assert!(ix.suggest("москва", 0).is_empty());
    let names = NameIndex::open(&INDEXES.names[0].0).expect("name index");
    assert!(names.suggest("Ёлкино", 0, None, None).is_empty());
}
