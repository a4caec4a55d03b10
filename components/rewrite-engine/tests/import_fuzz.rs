//! Property tests (fuzzing where cargo-fuzz cannot run) of what tenants
//! hand the engine: nginx configs (`subs_filter`, `replace_filter`) and
//! TOML rules, which `edge_config::read_rules_file` turns into
//! `Rule::new(pattern, replacement).with_flags(flags)` (the TOML syntax
//! itself is the `toml` crate's).
//!
//! Whatever the text, nothing panics; the importer either refuses with the
//! line, or gives rules that the rule set either compiles or refuses
//! naming a rule that exists and quoting its pattern or replacement; a set
//! that compiles rewrites any body the same whole or a byte at a time.
//!
//! `make test` runs the default number of cases (256 each);
//! `scripts/fuzz.sh SECONDS` runs them with fresh seeds until the time is
//! up. A failure is saved (shrunk) in `import_fuzz.proptest-regressions`,
//! which is checked in and replayed first by every run.

use proptest::prelude::*;
use rewrite_engine::{Rewriter, Rule, RuleSet, nginx};

/// Pieces of patterns, including what the engine refuses or rewrote
/// badly before: Unicode word assertions, `(?x)` comments, look-around,
/// backreferences, unbalanced brackets, huge repetitions.
const PATTERN_PIECES: &[&str] = &[
    "a",
    "b",
    "ab",
    "é",
    "k",
    "x",
    ".",
    "\\.",
    "\\b",
    "\\B",
    "\\<",
    "\\>",
    "\\b{start}",
    "\\b{end-half}",
    "(?-u:\\b)",
    "(?-u:\\<)",
    "(?x)",
    "(?i)",
    "(?-u)",
    "(?s)",
    "(?m)",
    "#",
    " ",
    "\n",
    "(",
    ")",
    "(?:",
    "(?P<n>",
    "(?<m>",
    "[",
    "]",
    "[^",
    "[a-c]",
    "[]a]",
    "\\d",
    "\\w",
    "\\W",
    "\\p{L}",
    "\\pN",
    "*",
    "+",
    "?",
    "*?",
    "{2}",
    "{1,3}",
    "{50}",
    "{0}",
    "{,",
    "|",
    "^",
    "$",
    "\\A",
    "\\z",
    "\\1",
    "(?=",
    "\\",
    "\\x{FF}",
    "\\xFF",
    "\\n",
    "\\Q",
    "'",
    "\"",
    ";",
    "{",
    "}",
    "$1",
    "\\u{1F600}",
    "\u{1F600}",
    "\u{212A}",
];

/// Pieces of replacements: every kind of `$` reference, good and bad.
const REPLACEMENT_PIECES: &[&str] = &[
    "$", "$$", "$&", "$$&", "${", "}", "$1", "$0", "$9", "$10", "${1}", "${n}", "${m}", "${x}",
    "$host", "a", "é", " ", "\\", "'", "\"", ";", "#",
];

fn joined(pieces: &'static [&'static str], max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(pieces), 0..max).prop_map(|v| v.concat())
}

/// Patterns that are mostly well formed (so most rule sets compile and
/// get rewritten with), nested up to a few levels, some with a construct
/// the engine refuses; and some pieces thrown together.
fn pattern() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        12 => prop::sample::select(&[
            "a", "b", "ab", "é", "k", "x", ".", "\\.", "[a-c]", "[^a]", "\\d", "\\w", "\\W",
            "\\p{L}", "\u{212A}", "\\xFF", "\\x{FF}", "\\n", " ", "#", "\\$", "_",
        ][..]).prop_map(str::to_string),
        3 => prop::sample::select(&[
            "\\b", "\\B", "^", "$", "\\A", "\\z", "(?-u:\\<)", "(?-u:\\b{end})", "(?m:^)",
        ][..]).prop_map(str::to_string),
        1 => prop::sample::select(&[
            "\\<", "\\b{start}", "(?=a)", "\\1", "a{50}{50}", "(?x)# c",
        ][..]).prop_map(str::to_string),
    ];
    let tree = leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            4 => prop::collection::vec(inner.clone(), 1..4).prop_map(|v| v.concat()),
            1 => (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}|{b}")),
            2 => (inner.clone(), prop::sample::select(&[
                "(", "(?P<n>", "(?<m>", "(?:", "(?i:", "(?-u:", "(?x:", "(?s:",
            ][..])).prop_map(|(a, open)| format!("{open}{a})")),
            2 => (inner, prop::sample::select(&["*", "+", "?", "{1,3}", "+?", "{2}"][..]))
                .prop_map(|(a, rep)| format!("(?:{a}){rep}")),
        ]
    });
    prop_oneof![
        // Most end in a letter, so they cannot match the empty string.
        8 => (
            prop::sample::select(&["", "", "", "(?i)", "(?x) ", "(?-u)"][..]),
            tree,
            prop::sample::select(&["a", "b", "x", "é", ".", "", ""][..]),
        )
            .prop_map(|(flags, t, last)| format!("{flags}{t}{last}")),
        1 => joined(PATTERN_PIECES, 8),
    ]
}

/// Replacements that mostly refer to groups that exist.
fn replacement() -> impl Strategy<Value = String> {
    prop_oneof![
        12 => prop::sample::select(&["<$0>", "X", "", "$$", "$$&", "a$$b"][..])
            .prop_map(str::to_string),
        2 => prop::sample::select(&["[${1}]", "<$&>", "${n}", "$1$2"][..])
            .prop_map(str::to_string),
        1 => joined(REPLACEMENT_PIECES, 5),
    ]
}

/// An nginx word: bare, single- or double-quoted (quotes and backslashes
/// inside left as they come, so some words are broken).
fn word(inner: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    (inner, 0..3u8).prop_map(|(w, quote)| match quote {
        0 => w,
        1 => format!("'{w}'"),
        _ => format!("\"{w}\""),
    })
}

fn directive() -> impl Strategy<Value = String> {
    (
        prop::sample::select(
            &[
                "subs_filter",
                "subs_filter",
                "replace_filter",
                "replace_filter",
                "subs_filter_types",
                "proxy_pass",
                "",
            ][..],
        ),
        word(pattern()),
        word(replacement()),
        prop_oneof![
            12 => prop::sample::select(&["", "g", "i", "o", "r", "r", "gir", "ir", "ig", "gr"][..]),
            1 => prop::sample::select(&["x", "gg", "'r'", "g i"][..]),
        ],
        prop_oneof![
            12 => prop::sample::select(&[";", ";\n", " ;\n  "][..]),
            1 => prop::sample::select(&["", "\n", "}", "{"][..]),
        ],
    )
        .prop_map(|(name, src, dst, flags, end)| format!("{name} {src} {dst} {flags}{end}"))
}

fn nginx_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            8 => directive(),
            1 => Just("http {\n".to_string()),
            1 => Just("}\n".to_string()),
            1 => "# [ -~]{0,20}\n",
        ],
        0..5,
    )
    .prop_map(|v| v.concat())
}

/// Bodies to rewrite with rules that compiled.
fn body() -> impl Strategy<Value = String> {
    "[abAB éxk.\n#$_ ]{0,40}"
}

fn check_import(text: &str, body: &str) -> Result<(), TestCaseError> {
    match nginx::import(text) {
        Err(e) => {
            let lines = text.matches('\n').count() + 1;
            prop_assert!((1..=lines).contains(&e.line), "{e} ({lines} lines)");
            prop_assert!(!e.what.is_empty());
            Ok(())
        }
        Ok(rules) => check_rules(&rules, body),
    }
}

fn check_rules(rules: &[Rule], body: &str) -> Result<(), TestCaseError> {
    let set = match RuleSet::new(rules) {
        Ok(set) => set,
        Err(e) => {
            // The rule named exists, and the error quotes what is wrong
            // with it (never a "rule 0" or the automata's own numbering).
            prop_assert!((1..=rules.len()).contains(&e.index), "{e}");
            let rule = &rules[e.index - 1];
            prop_assert!(
                e.what.contains(&format!("{:?}", rule.pattern))
                    || e.what.contains(&format!("{:?}", rule.replacement)),
                "{e}"
            );
            prop_assert!(!e.what.contains("pattern 0"), "{e}");
            return Ok(());
        }
    };
    let body = body.as_bytes();
    let whole = Rewriter::rewrite_all(&set, body);
    let mut bytewise = Vec::new();
    let mut rw = Rewriter::new(&set);
    for b in body {
        rw.write(std::slice::from_ref(b), &mut bytewise);
    }
    rw.finish(&mut bytewise);
    prop_assert_eq!(
        String::from_utf8_lossy(&whole),
        String::from_utf8_lossy(&bytewise)
    );
    Ok(())
}

proptest! {
    /// nginx configs built from directives, quotes and rule pieces.
    #[test]
    fn nginx_configs_import_or_fail_precisely(text in nginx_text(), body in body()) {
        check_import(&text, &body)?;
    }

    /// Any text at all, weighted to the importer's special characters.
    #[test]
    fn any_text_imports_or_fails_precisely(
        text in prop_oneof![
            "[ -~\n\t]{0,120}",
            "(subs_filter|replace_filter| |'|\"|\\\\|;|\\{|\\}|#|\\$|&|\n|a|\\(|\\)){0,40}",
            any::<String>(),
        ],
        body in body(),
    ) {
        check_import(&text, &body)?;
    }

    /// TOML rules as `read_rules_file` builds them: pattern, replacement
    /// and flag letters as written.
    #[test]
    fn toml_rules_compile_or_fail_precisely(
        rules in prop::collection::vec(
            (pattern(), replacement(), prop_oneof![4 => "[gio]{0,2}", 1 => "[giox ]{0,3}"]),
            1..5,
        ),
        body in body(),
    ) {
        let mut built = Vec::new();
        for (pattern, replacement, flags) in &rules {
            match Rule::new(pattern, replacement).with_flags(flags) {
                Ok(rule) => built.push(rule),
                Err(e) => {
                    prop_assert!(e.starts_with("unknown flag"), "{e}");
                    return Ok(());
                }
            }
        }
        check_rules(&built, &body)?;
    }
}
