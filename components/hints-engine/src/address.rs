//! Address suggestions.
//!
//! # Model
//! The index is a two-level tree: **places** (cities, towns, villages, with
//! country, region, aliases and population) and their **streets** (with a
//! type and a list of house numbers). An *entry* a user can pick is a place,
//! a street, or one house of a street; houses are stored as lists on their
//! street, not as nodes, so a million houses cost four bytes each.
//!
//! # Query
//! A query is free text in any order and case: `москва хабар 12`,
//! `г. Москва, ул. Хабаровская, д 12`, `riga brivibas`. Every token must
//! match a word of the entry (the place's words count for its streets and
//! houses); the last token, if the user is still typing it, matches as a
//! prefix. Tokens may carry typos ([`crate::fuzzy::max_edits`]:
//! none up to 3 letters, one up to 8, two beyond; a transposition is one
//! edit). Type words in any variant (`улица`, `ул`, `street`) are
//! normalized and optional: an entry of another type costs as much as a
//! typo, but is not excluded. A number that no word matches is looked up among the houses
//! of the matched streets.
//!
//! # Ranking
//! Score = the entry's weight (ln of the place's population; streets rank
//! below their place, houses with their street) − 2 per edit (4 more for
//! an edit that is no slip of the finger or the ear, [`crate::slips`]) −
//! 4 for each earlier token that only began a word; an exactly typed
//! last word, a matched type word and an exact house number add a little.
//! Whole words without typos therefore beat typo matches unless the typo'd
//! entry is far larger (Moscow with one typo still beats a village typed
//! exactly).
//!
//! A place's words are its *name*, its *aliases* and its *context*
//! (country, region, postal code, type); a street's alias is the Latin
//! spelling of a Cyrillic name ([`crate::translit`]). Context words match
//! only without typos, cost 0.5 each, and an entry matched by context
//! words alone costs 3 (`russia` still lists Moscow, `rust` does not). A
//! query that is a place's whole name or alias, without typos, adds 6
//! (from the fourth letter being typed, or once the word is finished):
//! `gilbert` lists the places called Gilbert before the larger
//! Gilbertsville, as a user who typed a whole name expects; an index of
//! whole names finds them however small. A typo in the word being typed
//! costs 10 more while it has at most four letters (most words begin
//! within one edit of four letters: such matches only fill the list after
//! every exact completion), 6 more at five or six and 2 more at seven or
//! eight (tuned on the quality script's query logs: a completion of what
//! was typed is the likelier intent until the word is long).
//!
//! Names are typed from their beginning: a first token that matched the
//! name's first word adds 2.5, and each later token that did not match the
//! name's next word, in order, costs 4 (`la f`: La Flèche before Lauro de
//! Freitas). Each token counts the one of its matches in a node that adds
//! the most. A word with an apostrophe is also kept whole (`vasilyevo` for
//! Vasil’yevo, `maan` for Ma'an), for keyboards have no `’`. A query that
//! ends in a hyphen goes on with the name: an entry whose name ends at the
//! last word costs 4 (`newton-`: Newton-le-Willows before Newton).
//!
//! # Last resorts
//! Words of up to three letters get no typo budget, so one typo there
//! can leave a list empty. When few or no entries match, these readings
//! are tried in turn: the last two words with a letter moved across the
//! space (`king spo`: Kings Point); a word that begins no dictionary word
//! split in two (`sanfrancisco`); all words but one (`nwe lenox`). A word
//! being typed of two or three letters that still found nothing (or,
//! alone, fewer than shown) is read with one edit through the best lists
//! of the prefixes near it (`tky`: Tokyo).
//!
//! # Speed
//! The token dictionary is an FST searched with one Levenshtein automaton per
//! query token. The most selective token (fewest entries) drives: only its
//! entries are checked against the other tokens, and a place drives its
//! streets. Queries of one short prefix (1–3 letters) read a precomputed
//! best-20 list. A driver's expansion leaves out typos in its first letter
//! and, for a word in the dictionary as typed, all typos; when that finds
//! too little, the typo variants or another token drive a second pass.
//! The word being typed walks its typo variants last, and only over the
//! heavy tier of the dictionary that could still enter the list; alone,
//! if its list is still short, it also tries a typo in its first letter
//! (`hahrinav` → Shahrinav).
//!
//! ```
//! use hints_engine::address::{AddressIndex, build_address_index};
//! let data = r#"
//! {"kind":"place","id":"gn:1","name":"Москва","type":"г","country":"Россия","country_iso_code":"RU","aliases":["Moscow"],"population":12000000}
//! {"kind":"place","id":"gn:2","name":"Мосальск","type":"г","country":"Россия","country_iso_code":"RU","population":4000}
//! {"kind":"street","id":"s:1","parent":"gn:1","name":"Хабаровская","type":"ул","house_range":[1,30]}
//! "#;
//! let (blob, _) = build_address_index(data.trim().as_bytes()).unwrap();
//! let index = AddressIndex::open(&blob).unwrap();
//! let value = |q: &str| index.suggest(q, 1).first().map(|s| index.address(s).value());
//! assert_eq!(value("мос").as_deref(), Some("г Москва"));
//! assert_eq!(value("москва хабар 12").as_deref(), Some("г Москва, ул Хабаровская, д 12"));
//! assert_eq!(value("Хабаровскя ул Moscow").as_deref(), Some("г Москва, ул Хабаровская"));
//! ```

use crate::IndexError;
use crate::blob::{Blob, BlobWriter, StrTableBuilder, Strs, U32s};
use crate::fuzzy::{Hit, Matcher, max_edits};
use crate::recent::Recent;
use crate::restrict::Restrict;
use crate::slips::UNLIKELY_TYPO_COST;
use crate::text::{
    address_tokens, canonical_type, capped, char_len, ends_in_word, fold, is_apostrophe,
    joined_tokens, prefixes, without_last_char,
};
use crate::topk::TopK;
use crate::translit::romanize;
use fst::Map;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use std::sync::{Arc, Mutex, OnceLock};

const MAGIC: &[u8; 8] = b"EDGEHA04";
const NONE: u32 = u32::MAX;
/// Streets rank this far (in ln units) below their place.
const STREET_BELOW_PLACE: f32 = 6.0;
/// Precomputed best lists cover prefixes up to this many chars.
const TOP_PREFIX_CHARS: usize = 3;
/// Longer prefixes whose words fill at least this many entries get a
/// best list too: the word being typed alone then needs no walk over its
/// completions (`sant`: thousands of words).
const BROAD_PREFIX_WORK: usize = 1_000;
const MAX_BROAD_PREFIX_CHARS: usize = 16;
/// Weights (ln population: 163k, 22k, 3k) of the heavy dictionary tiers.
const HEAVY_TIERS: [f32; 3] = [12.0, 10.0, 8.0];
const HEAVY_TAGS: [[u8; 4]; 3] = [*b"thv0", *b"thv1", *b"thv2"];
const TOP_LEN: usize = 20;
/// A query token whose words fill more than this many entries is too broad
/// to drive the search.
const EXPANSION_CAP: usize = 50_000;
/// Candidates checked per query at most: they come heaviest first, so a
/// query whose driver is broad and whose other words are rare (`san fa`)
/// gives up only light entries, and no keystroke costs more than a few
/// milliseconds.
const MAX_CHECKED: usize = 1500;
/// Candidates passed over by the first-letter test, at most.
const MAX_SKIPPED: usize = 30_000;

// Ranking, in units of the weight (ln population): 2 is a 7.4 times
// larger place.
/// Per edit.
const EDIT_COST: f32 = 2.0;

/// Below this best score a list holds only far-fetched matches (a typo in
/// a word of at most four letters being typed costs 10 more: `vjcr` finds
/// Vecrīga at −5.8), so the other keyboard layout's reading is tried too
/// (`моск`, Москва at 18.7). On the bench's log 113 of 9,405 queries
/// (66 of them empty) are read twice; no hit changed.
const OTHER_LAYOUT_BELOW: f32 = 0.0;

/// Added to [`EDIT_COST`] for a typo in the word being typed, by its
/// length. Most words begin within one edit of the first four letters
/// typed, and the word meant is rarely one of them: such typo matches only
/// fill the list after every exact one. Later, a typo becomes likelier
/// than a completion of those letters.
fn prefix_typo_cost(chars: usize) -> f32 {
    match chars {
        0..=4 => 10.0,
        5..=6 => 6.0,
        7..=8 => 2.0,
        _ => 0.0,
    }
}
/// A token matched a context word (country, region, postal code, type).
const CONTEXT_COST: f32 = 0.5;
/// More if the context word only began with the token (`los tu` is not
/// about Turkey).
const CONTEXT_PREFIX_COST: f32 = 1.5;
/// The first token matched the first word of the name (`agua d` is rather
/// Agua Dulce than Ojo de Agua): names are typed from their beginning.
/// Tuned on the quality script's logs (0.5 → 2.5: +0.7 points top-5 from
/// three letters on two samples); more gains little and loosens every
/// scan's early stop.
const FIRST_WORD_BONUS: f32 = 2.5;
/// Each further token that did not match the next word of the name, in
/// order (`la f` is rather La Flèche than Lauro de Freitas, `monte mo`
/// Monte Mor than Montevideo). Tuned on the quality script's two logs:
/// 0 → 4, with [`UNFINISHED_WORD_COST`], +0.5 points top-5 from three
/// letters on each.
const OFF_PHRASE_COST: f32 = 4.0;
/// A finished word (another follows, or a space) that only begins the
/// word it matched: `monte ` is not Montevideo, though `nizh novgorod`
/// still finds Nizhniy Novgorod when nothing else does. (Was 0.6, which let
/// a large place beginning with the word outrank the names that have it.)
const UNFINISHED_WORD_COST: f32 = 4.0;
/// No token matched the place's name or aliases, only context words.
const CONTEXT_ONLY_COST: f32 = 3.0;
/// The query is the place's whole name, typed without typos.
/// Enough that every place so called comes before longer names that begin
/// with it (`gilbert`: Gilbert, Arizona and the small Gilberts, then
/// Gilbertsville), as a user who typed a whole name expects.
const EXACT_NAME_BONUS: f32 = 6.0;
/// A word of the query given up ([`AddressIndex::suggest_without_one_word`]):
/// as much as two typos.
const DROPPED_WORD_COST: f32 = 4.0;
/// A query that ends in a hyphen (`newton-`) goes on with the name: an
/// entry whose name ends at the word before it costs as much as a word
/// out of order (Newton-le-Willows before the larger places called Newton).
const NAME_GOES_ON_COST: f32 = 4.0;
/// Query limits (the component refuses longer queries before this).
const MAX_QUERY_TOKENS: usize = 10;

// ---------------------------------------------------------------------------
// Input

/// One line of the builder's JSON Lines input.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum Record {
    Place(PlaceRecord),
    Street(StreetRecord),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlaceRecord {
    id: String,
    name: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    country: Option<String>,
    #[serde(default)]
    country_iso_code: Option<String>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    aliases: Vec<String>,
    #[serde(default)]
    population: Option<f64>,
    #[serde(default)]
    postal_code: Option<String>,
    #[serde(default)]
    lat: Option<f64>,
    #[serde(default)]
    lon: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StreetRecord {
    id: String,
    parent: String,
    name: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    postal_code: Option<String>,
    #[serde(default)]
    houses: Option<Vec<String>>,
    #[serde(default)]
    house_range: Option<[u32; 2]>,
}

/// What the builder read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AddressStats {
    pub places: usize,
    pub streets: usize,
    pub houses: usize,
    pub tokens: usize,
}

impl AddressStats {
    /// Entries a user can pick: places, streets and houses.
    pub fn entries(&self) -> usize {
        self.places + self.streets + self.houses
    }
}

struct NodeDraft {
    parent: u32,
    weight: f32,
    /// The node's words, grouped: its name's, then its aliases', then
    /// context (country, region, postal code, type); each word once.
    tokens: Vec<String>,
    /// How many of `tokens` are the name's and the name's plus aliases'.
    name_words: u16,
    named_words: u16,
    /// A place's name and aliases as a query would fold them
    /// (`san isidro`).
    full_names: Vec<String>,
    name: u32,
    kind: u32,
    country: u32,
    iso: u32,
    region: u32,
    postal: u32,
    source_id: u32,
    lat: f32,
    lon: f32,
    houses: Vec<u32>,
}

/// Builds an address index from JSON Lines (see `edge hints build --help`
/// and docs/HINTS.md for the record format). Errors name the line.
pub fn build_address_index(input: impl BufRead) -> Result<(Vec<u8>, AddressStats), IndexError> {
    let mut strs = StrTableBuilder::default();
    let mut nodes: Vec<NodeDraft> = Vec::new();
    let mut streets: Vec<(usize, StreetRecord)> = Vec::new();
    let mut place_ids: HashMap<String, u32> = HashMap::new();
    let mut stats = AddressStats::default();
    for record in crate::json_lines::<Record>(input) {
        let (line_no, record) = record?;
        match record {
            Record::Place(p) => {
                let bad = |what: &str| {
                    IndexError::Input(format!("line {line_no}: place {:?}: {what}", p.id))
                };
                if p.name.trim().is_empty() {
                    return Err(bad("empty name"));
                }
                let id = nodes.len() as u32;
                if place_ids.insert(p.id.clone(), id).is_some() {
                    return Err(bad("duplicate id"));
                }
                let pop = p.population.unwrap_or(0.0);
                if !(pop.is_finite() && pop >= 0.0) {
                    return Err(bad("population must be a non-negative number"));
                }
                let mut words = WordGroups::default();
                let full_names: Vec<String> = std::iter::once(&p.name)
                    .chain(&p.aliases)
                    .map(|n| address_tokens(n).join(" "))
                    .filter(|n| !n.is_empty())
                    .collect();
                words.add(address_tokens(&p.name));
                words.next_group();
                for a in &p.aliases {
                    words.add(address_tokens(a));
                }
                words.add(joined_words(std::iter::once(&p.name).chain(&p.aliases)));
                words.next_group();
                for extra in [&p.country, &p.region, &p.postal_code]
                    .into_iter()
                    .flatten()
                {
                    words.add(address_tokens(extra));
                }
                words.add(type_token(p.kind.as_deref()));
                let (tokens, name_words, named_words) = words.finish();
                nodes.push(NodeDraft {
                    parent: NONE,
                    weight: (1.0 + pop).ln() as f32,
                    tokens,
                    name_words,
                    named_words,
                    full_names,
                    name: strs.intern(p.name.trim()),
                    kind: strs.intern(p.kind.as_deref().unwrap_or("")),
                    country: strs.intern(p.country.as_deref().unwrap_or("")),
                    iso: strs.intern(p.country_iso_code.as_deref().unwrap_or("")),
                    region: strs.intern(p.region.as_deref().unwrap_or("")),
                    postal: strs.intern(p.postal_code.as_deref().unwrap_or("")),
                    source_id: strs.intern(&p.id),
                    lat: p.lat.map_or(f32::NAN, |v| v as f32),
                    lon: p.lon.map_or(f32::NAN, |v| v as f32),
                    houses: Vec::new(),
                });
                stats.places += 1;
            }
            Record::Street(s) => streets.push((line_no, s)),
        }
    }
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); nodes.len()];
    let mut street_ids: HashSet<String> = HashSet::new();
    for (line_no, s) in streets {
        let bad =
            |what: String| IndexError::Input(format!("line {line_no}: street {:?}: {what}", s.id));
        let parent = *place_ids
            .get(&s.parent)
            .ok_or_else(|| bad(format!("parent place {:?} not found", s.parent)))?;
        if !street_ids.insert(s.id.clone()) || place_ids.contains_key(&s.id) {
            return Err(bad("duplicate id".into()));
        }
        if s.name.trim().is_empty() {
            return Err(bad("empty name".into()));
        }
        let houses: Vec<String> = match (s.houses, s.house_range) {
            (Some(_), Some(_)) => return Err(bad("give houses or house_range, not both".into())),
            (Some(list), None) => list
                .iter()
                .map(|h| house_key(h))
                .filter(|h| !h.is_empty())
                .collect(),
            (None, Some([a, b])) if a <= b && b - a < 100_000 => {
                (a..=b).map(|n| n.to_string()).collect()
            }
            (None, Some(r)) => {
                return Err(bad(format!(
                    "house_range {r:?} must be [low, high] with low ≤ high"
                )));
            }
            (None, None) => Vec::new(),
        };
        let mut words = WordGroups::default();
        words.add(address_tokens(&s.name));
        words.next_group();
        // A Cyrillic name's Latin spelling is the street's alias.
        words.add(romanize(&s.name).iter().flat_map(|r| address_tokens(r)));
        words.add(joined_words([&s.name]));
        words.next_group();
        words.add(type_token(s.kind.as_deref()));
        words.add(s.postal_code.iter().flat_map(|p| address_tokens(p)));
        let (tokens, name_words, named_words) = words.finish();
        let id = nodes.len() as u32;
        children[parent as usize].push(id);
        stats.streets += 1;
        stats.houses += houses.len();
        let p = &nodes[parent as usize];
        let (country, iso, region, weight) =
            (p.country, p.iso, p.region, p.weight - STREET_BELOW_PLACE);
        nodes.push(NodeDraft {
            parent,
            weight,
            tokens,
            name_words,
            named_words,
            full_names: Vec::new(),
            name: strs.intern(s.name.trim()),
            kind: strs.intern(s.kind.as_deref().unwrap_or("")),
            country,
            iso,
            region,
            postal: strs.intern(s.postal_code.as_deref().unwrap_or("")),
            source_id: strs.intern(&s.id),
            lat: f32::NAN,
            lon: f32::NAN,
            houses: houses.iter().map(|h| strs.intern(h)).collect(),
        });
        children.push(Vec::new());
    }

    // Number the nodes heaviest first, so that every posting list (sorted
    // by id) runs from the best entry down and a query can stop early.
    let mut order: Vec<u32> = (0..nodes.len() as u32).collect();
    order.sort_by(|&a, &b| {
        nodes[b as usize]
            .weight
            .total_cmp(&nodes[a as usize].weight)
            .then(a.cmp(&b))
    });
    let mut new_id = vec![0u32; nodes.len()];
    for (new, &old) in order.iter().enumerate() {
        new_id[old as usize] = new as u32;
    }
    let mut slots: Vec<Option<NodeDraft>> = nodes.into_iter().map(Some).collect();
    let mut nodes: Vec<NodeDraft> = order
        .iter()
        .map(|&old| slots[old as usize].take().expect("once"))
        .collect();
    for n in &mut nodes {
        if n.parent != NONE {
            n.parent = new_id[n.parent as usize];
        }
    }
    let mut slots: Vec<Option<Vec<u32>>> = children.into_iter().map(Some).collect();
    let children: Vec<Vec<u32>> = order
        .iter()
        .map(|&old| {
            let mut c: Vec<u32> = slots[old as usize]
                .take()
                .expect("once")
                .iter()
                .map(|&k| new_id[k as usize])
                .collect();
            c.sort_unstable(); // heaviest first
            c
        })
        .collect();

    // The token dictionary (sorted, so a token's id is its rank) with the
    // nodes holding each token.
    let mut postings: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (id, node) in nodes.iter().enumerate() {
        for t in &node.tokens {
            postings.entry(t.clone()).or_default().push(id as u32);
        }
    }
    stats.tokens = postings.len();
    let mut token_ids: HashMap<&str, u32> = HashMap::with_capacity(postings.len());
    let mut fst = fst::MapBuilder::memory();
    let mut tok_strs = StrTableBuilder::default();
    let (mut post_offsets, mut post, mut cost) = (vec![0u32], Vec::new(), Vec::new());
    for (i, (token, nodes_of)) in postings.iter().enumerate() {
        // Checking a place can mean checking all its streets.
        let work: usize = nodes_of
            .iter()
            .map(|&n| 1 + children[n as usize].len())
            .sum();
        cost.push(work.min(u32::MAX as usize) as u32);
        fst.insert(token, i as u64)
            .map_err(|e| IndexError::Format(e.to_string()))?;
        token_ids.insert(token, i as u32);
        let sid = tok_strs.intern(token);
        debug_assert_eq!(sid, i as u32 + 1); // id 0 is ""
        post.extend(nodes_of);
        post_offsets.push(post.len() as u32);
    }

    // The work of expanding each prefix (all dictionary words that begin
    // with it): a short last token may drive when it is rare, and a broad
    // prefix gets a best list instead of a walk over its words.
    let mut prefix_work: HashMap<&str, u64> = HashMap::new();
    for (token, &work) in postings.keys().zip(&cost) {
        for prefix in prefixes(token).take(MAX_BROAD_PREFIX_CHARS) {
            *prefix_work.entry(prefix).or_default() += work as u64;
        }
    }
    let listed = |n: usize, prefix: &str| {
        n < TOP_PREFIX_CHARS
            || prefix_work
                .get(prefix)
                .is_some_and(|&w| w >= BROAD_PREFIX_WORK as u64)
    };

    // Best entries per short or broad prefix, for the first keystrokes.
    let mut tops: HashMap<String, Vec<(f32, u32)>> = HashMap::new();
    for (id, node) in nodes.iter().enumerate() {
        let mut seen: Vec<&str> = Vec::new();
        // Name and alias words only: "rus" should not list every place in
        // Russia.
        for t in &node.tokens[..node.named_words as usize] {
            for (n, prefix) in prefixes(t).take(MAX_BROAD_PREFIX_CHARS).enumerate() {
                if !listed(n, prefix) {
                    break; // a longer prefix is rarer still
                }
                if seen.contains(&prefix) {
                    continue;
                }
                seen.push(prefix);
                let list = tops.entry(prefix.to_owned()).or_default();
                insert_top(list, (node.weight, id as u32));
            }
        }
    }
    let mut tops: Vec<_> = tops.into_iter().collect();
    tops.sort_by(|a, b| a.0.cmp(&b.0));
    let mut top_fst = fst::MapBuilder::memory();
    let (mut top_offsets, mut top_nodes, mut top_cost) = (vec![0u32], Vec::new(), Vec::new());
    for (i, (prefix, list)) in tops.iter().enumerate() {
        top_fst
            .insert(prefix, i as u64)
            .map_err(|e| IndexError::Format(e.to_string()))?;
        top_nodes.extend(list.iter().map(|&(_, id)| id));
        top_offsets.push(top_nodes.len() as u32);
        let work = prefix_work
            .get(prefix.as_str())
            .copied()
            .unwrap_or(u64::MAX);
        top_cost.push(work.min(u32::MAX as u64) as u32);
    }

    // Places by their whole name, heaviest first: a query that is a name
    // finds every place so called, however small (`gilbert`).
    let mut by_name: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (id, node) in nodes.iter().enumerate() {
        for name in &node.full_names {
            let list = by_name.entry(name).or_default();
            if list.len() < TOP_LEN && list.last() != Some(&(id as u32)) {
                list.push(id as u32);
            }
        }
    }
    let mut name_fst = fst::MapBuilder::memory();
    let (mut name_offsets, mut name_nodes) = (vec![0u32], Vec::new());
    for (i, (name, list)) in by_name.iter().enumerate() {
        name_fst
            .insert(name, i as u64)
            .map_err(|e| IndexError::Format(e.to_string()))?;
        name_nodes.extend(list);
        name_offsets.push(name_nodes.len() as u32);
    }

    let mut w = BlobWriter::default();
    w.add(
        b"nfst",
        name_fst
            .into_inner()
            .map_err(|e| IndexError::Format(e.to_string()))?,
    );
    w.add_u32s(b"nmof", &name_offsets);
    w.add_u32s(b"nmnd", &name_nodes);
    w.add(
        b"tfst",
        fst.into_inner()
            .map_err(|e| IndexError::Format(e.to_string()))?,
    );
    w.add_strs(b"tok_", &tok_strs);
    w.add_u32s(b"pofs", &post_offsets);
    w.add_u32s(b"post", &post);
    w.add_u32s(b"tcst", &cost);
    // The dictionary again in tiers of its heavier words (whose heaviest
    // entry weighs at least the tier's weight), for typo walks that only
    // heavy entries could survive.
    for (tier, &min) in HEAVY_TIERS.iter().enumerate() {
        let mut heavy = fst::MapBuilder::memory();
        for (i, (token, nodes_of)) in postings.iter().enumerate() {
            if nodes[nodes_of[0] as usize].weight >= min {
                heavy
                    .insert(token, i as u64)
                    .map_err(|e| IndexError::Format(e.to_string()))?;
            }
        }
        let bytes = heavy
            .into_inner()
            .map_err(|e| IndexError::Format(e.to_string()))?;
        w.add(&HEAVY_TAGS[tier], bytes);
    }
    w.add(
        b"pfst",
        top_fst
            .into_inner()
            .map_err(|e| IndexError::Format(e.to_string()))?,
    );
    w.add_u32s(b"ptof", &top_offsets);
    w.add_u32s(b"ptop", &top_nodes);
    w.add_u32s(b"ptcs", &top_cost);
    w.add_strs(b"str_", &strs);
    let col = |f: &dyn Fn(&NodeDraft) -> u32| nodes.iter().map(f).collect::<Vec<u32>>();
    w.add_u32s(b"npar", &col(&|n| n.parent));
    w.add_f32s(b"nwgt", &nodes.iter().map(|n| n.weight).collect::<Vec<_>>());
    w.add_u32s(b"nnam", &col(&|n| n.name));
    w.add_u32s(b"ntyp", &col(&|n| n.kind));
    w.add_u32s(b"nctr", &col(&|n| n.country));
    w.add_u32s(b"niso", &col(&|n| n.iso));
    w.add_u32s(b"nreg", &col(&|n| n.region));
    w.add_u32s(b"npos", &col(&|n| n.postal));
    w.add_u32s(b"nsid", &col(&|n| n.source_id));
    w.add_f32s(b"nlat", &nodes.iter().map(|n| n.lat).collect::<Vec<_>>());
    w.add_f32s(b"nlon", &nodes.iter().map(|n| n.lon).collect::<Vec<_>>());
    let (tok_off, tok_ids) = flatten(
        nodes
            .iter()
            .map(|n| n.tokens.iter().map(|t| token_ids[t.as_str()])),
    );
    w.add_u32s(b"ntko", &tok_off);
    // First letters of the words a node can match through: its own, its
    // place's (a street) and its streets' (a place).
    let own: Vec<u32> = nodes
        .iter()
        .map(|n| n.tokens.iter().fold(0, |m, t| m | letter_bit(t)))
        .collect();
    let letters: Vec<u32> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let parent = if n.parent == NONE {
                0
            } else {
                own[n.parent as usize]
            };
            children[i]
                .iter()
                .fold(own[i] | parent, |m, &c| m | own[c as usize])
        })
        .collect();
    w.add_u32s(b"nlet", &letters);
    w.add_u32s(
        b"ntgr",
        &col(&|n| (n.name_words as u32) << 16 | n.named_words as u32),
    );
    w.add_u32s(b"ntok", &tok_ids);
    // Each of those words' first four bytes, beside its id: most words a
    // candidate is checked against are ruled out by them, without reading
    // the word from the string table (a cache miss per word).
    let heads: Vec<u32> = nodes
        .iter()
        .flat_map(|n| {
            n.tokens
                .iter()
                .map(|t| crate::fuzzy::word_head(t.as_bytes()))
        })
        .collect();
    w.add_u32s(b"nthd", &heads);
    let (house_off, house_ids) = flatten(nodes.iter().map(|n| n.houses.iter().copied()));
    w.add_u32s(b"nhof", &house_off);
    w.add_u32s(b"nhou", &house_ids);
    let (child_off, child_ids) = flatten(children.iter().map(|c| c.iter().copied()));
    w.add_u32s(b"ncof", &child_off);
    w.add_u32s(b"nchi", &child_ids);
    Ok((w.finish(MAGIC), stats))
}

/// The canonical token of a type abbreviation (`улица` → `ул`).
fn type_token(kind: Option<&str>) -> Option<String> {
    let folded = fold(kind?.trim()).replace('.', "");
    if folded.is_empty() {
        return None;
    }
    Some(canonical_type(&folded).map_or(folded, str::to_owned))
}

/// A house number as stored and matched: folded, without spaces (`12 А` → `12а`).
fn house_key(h: &str) -> String {
    fold(h).chars().filter(|c| !c.is_whitespace()).collect()
}

/// The words that apostrophes join in `names` (`vasilyevo` of
/// `Vasil’yevo`, whose name words are `vasil` and `yevo`), as alias words:
/// most people type such a name without the apostrophe.
fn joined_words<'s>(names: impl IntoIterator<Item = &'s String>) -> Vec<String> {
    names
        .into_iter()
        .filter(|n| n.contains(is_apostrophe))
        .flat_map(|n| joined_tokens(n))
        .collect()
}

/// A bit for the first letter of a word (32 buckets), for a quick test
/// that a node has a word beginning with a letter.
fn letter_bit(word: &str) -> u32 {
    word.chars().next().map_or(0, |c| 1 << (c as u32 % 32))
}

/// A node's words in groups, each word once, in its first group.
#[derive(Default)]
struct WordGroups {
    words: Vec<String>,
    ends: Vec<usize>,
}

impl WordGroups {
    fn add(&mut self, words: impl IntoIterator<Item = String>) {
        for w in words {
            if !self.words.contains(&w) {
                self.words.push(w);
            }
        }
    }

    fn next_group(&mut self) {
        self.ends.push(self.words.len());
    }

    /// (words, words of the first group, words of the first two groups)
    fn finish(self) -> (Vec<String>, u16, u16) {
        let end = |i: usize| {
            self.ends
                .get(i)
                .copied()
                .unwrap_or(self.words.len())
                .min(u16::MAX as usize) as u16
        };
        let (a, b) = (end(0), end(1));
        (self.words, a, b)
    }
}

fn insert_top(list: &mut Vec<(f32, u32)>, item: (f32, u32)) {
    let at = list.partition_point(|e| e.0 > item.0 || (e.0 == item.0 && e.1 < item.1));
    if at < TOP_LEN {
        list.insert(at, item);
        list.truncate(TOP_LEN);
    }
}

fn flatten<I: Iterator<Item = u32>>(lists: impl Iterator<Item = I>) -> (Vec<u32>, Vec<u32>) {
    let (mut offsets, mut values) = (vec![0u32], Vec::new());
    for list in lists {
        values.extend(list);
        offsets.push(values.len() as u32);
    }
    (offsets, values)
}

// ---------------------------------------------------------------------------
// Index

/// An address index over borrowed bytes (see the module docs).
pub struct AddressIndex<'a> {
    tokens: Map<&'a [u8]>,
    token_strs: Strs<'a>,
    post_offsets: U32s<'a>,
    post: U32s<'a>,
    cost: U32s<'a>,
    tops: Map<&'a [u8]>,
    top_offsets: U32s<'a>,
    top_nodes: U32s<'a>,
    /// Per short prefix: the work of expanding it (see `tcst`).
    top_cost: U32s<'a>,
    /// The dictionary's words by [`HEAVY_TIERS`].
    heavy: [Map<&'a [u8]>; 3],
    /// Places by whole name (`san isidro`), heaviest first.
    names: Map<&'a [u8]>,
    name_offsets: U32s<'a>,
    name_nodes: U32s<'a>,
    strs: Strs<'a>,
    parent: U32s<'a>,
    weight: U32s<'a>,
    name: U32s<'a>,
    kind: U32s<'a>,
    country: U32s<'a>,
    iso: U32s<'a>,
    region: U32s<'a>,
    postal: U32s<'a>,
    source_id: U32s<'a>,
    lat: U32s<'a>,
    lon: U32s<'a>,
    tok_off: U32s<'a>,
    tok: U32s<'a>,
    /// The first four bytes of each word of `tok` ([`crate::fuzzy::word_head`]).
    tok_head: U32s<'a>,
    /// Per node: name words << 16 | name and alias words (the first of
    /// its words; the rest are context).
    word_groups: U32s<'a>,
    /// Per node: [`letter_bit`]s of every word it can match through.
    letters: U32s<'a>,
    house_off: U32s<'a>,
    house: U32s<'a>,
    child_off: U32s<'a>,
    child: U32s<'a>,
    /// Expansions of recent query words ([`AddressIndex::expand`]).
    recent: Mutex<Recent<ExpansionKey, Arc<Expansion>>>,
    /// Country names by ISO code, read from the places when first asked.
    countries: OnceLock<HashMap<&'a str, &'a str>>,
}

/// What an expansion depends on: the token's text, whether it is the word
/// being typed, and its edit budget (`None`: the words as typed only).
type ExpansionKey = (String, bool, Option<u8>);

/// Bytes of expansions kept per generation ([`crate::recent`]): a few
/// hundred words' worth, what users typing now ask again.
const RECENT_EXPANSION_BYTES: usize = 256 << 10;

/// One suggestion: a place or street node, and a house of a street.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Suggestion {
    pub node: u32,
    /// String id of the house number, if the entry is a house.
    pub house: Option<u32>,
    pub score: f32,
}

impl Suggestion {
    /// The entry the engine holds as (node, house id or [`NONE`]).
    fn of(node: u32, house: u32, score: f32) -> Self {
        Self {
            node,
            house: (house != NONE).then_some(house),
            score,
        }
    }
}

/// The best entries so far, of those the request lets through.
struct Found<'r> {
    top: TopK<(u32, u32)>,
    /// Whether an entry (node, house or [`NONE`]) passes; `None`: all do.
    keep: Option<&'r dyn Fn(u32, u32) -> bool>,
}

impl Found<'_> {
    fn push(&mut self, score: f32, entry: (u32, u32)) {
        if self.keep.is_none_or(|keep| keep(entry.0, entry.1)) {
            self.top.push(score, entry);
        }
    }
}

impl std::ops::Deref for Found<'_> {
    type Target = TopK<(u32, u32)>;

    fn deref(&self) -> &Self::Target {
        &self.top
    }
}

/// A posting list in [`AddressIndex::scan`]'s merge: its next node and
/// where it is, ordered so that `BinaryHeap`, a max-heap, gives the
/// smallest node (the heaviest) first. Node and position share one `u64`
/// (positions differ, so keys never tie): one compare per step of a sift
/// instead of a tuple's three.
#[derive(Clone, Copy, PartialEq, Eq)]
struct PostingHead {
    /// The node in the high half, its position in the low.
    key: u64,
    /// Where the list ends.
    end: u32,
}

impl PostingHead {
    fn new(node: u32, at: u32, end: u32) -> Self {
        Self {
            key: (u64::from(node) << 32) | u64::from(at),
            end,
        }
    }

    fn node(&self) -> u32 {
        (self.key >> 32) as u32
    }

    fn at(&self) -> u32 {
        self.key as u32
    }
}

impl Ord for PostingHead {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.key.cmp(&self.key)
    }
}

impl PartialOrd for PostingHead {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A query token with its role.
#[derive(Clone)]
struct QueryToken {
    m: Matcher,
    numeric: bool,
    optional: bool,
    last: bool,
    /// Given up by [`AddressIndex::suggest_without_one_word`]: need not
    /// match, costs [`DROPPED_WORD_COST`] where it does not.
    dropped: bool,
    /// The last word, followed by a hyphen: the name goes on after the
    /// word it matches ([`NAME_GOES_ON_COST`]).
    joined: bool,
}

impl QueryToken {
    /// A word the user typed for the entry (not a type word), given up or
    /// not: what the first-word bonus and the phrase order count.
    fn typed_word(&self) -> bool {
        !self.optional || self.dropped
    }
}

/// The words a query token matches.
struct Expansion {
    /// Words the token is (a finished one) or begins (the one being typed).
    exact: Vec<u32>,
    /// Words within its typo budget; for the word being typed, left to
    /// [`AddressIndex::typo_variants`] (empty, and `work` counts the exact
    /// words only).
    typos: Vec<u32>,
    /// The entries to check for all of them ([`AddressIndex::cost`]).
    work: usize,
    /// Stopped at [`EXPANSION_CAP`].
    broad: bool,
}

impl Expansion {
    /// Bytes it keeps on the heap (with a little for its own bookkeeping).
    fn heap_bytes(&self) -> usize {
        64 + 4 * (self.exact.capacity() + self.typos.capacity())
    }
}

/// The token whose words drive a query, and those words.
struct Driver {
    expansion: Arc<Expansion>,
    token: usize,
    /// A finished word as typed, without the typo variants it allows.
    exact_only: bool,
}

/// How a query token matched one of a node's words.
#[derive(Clone, Copy, Debug)]
struct Match {
    hit: Hit,
    /// The word is in the node's name or an alias (not its country,
    /// region, postal code or type).
    named: bool,
    /// The word's place in the node's name ([`NOT_IN_NAME`] if it is not
    /// a name word).
    pos: u8,
    /// The word is the name's last.
    ends_name: bool,
}

/// [`Match::pos`] of a word outside the name.
const NOT_IN_NAME: u8 = u8::MAX;

type Cover = [Option<Match>; MAX_QUERY_TOKENS];

impl<'a> AddressIndex<'a> {
    /// Opens an index built by [`build_address_index`], checking its shape.
    pub fn open(bytes: &'a [u8]) -> Result<Self, IndexError> {
        let b = Blob::parse(bytes, MAGIC)?;
        let fst = |tag: &[u8; 4]| -> Result<Map<&'a [u8]>, IndexError> {
            Map::new(b.section(tag)?)
                .map_err(|e| IndexError::Format(format!("{}: {e}", String::from_utf8_lossy(tag))))
        };
        let index = Self {
            tokens: fst(b"tfst")?,
            token_strs: b.strs(b"tok_")?,
            post_offsets: b.u32s(b"pofs")?,
            post: b.u32s(b"post")?,
            cost: b.u32s(b"tcst")?,
            tops: fst(b"pfst")?,
            top_offsets: b.u32s(b"ptof")?,
            top_nodes: b.u32s(b"ptop")?,
            top_cost: b.u32s(b"ptcs")?,
            heavy: [
                fst(&HEAVY_TAGS[0])?,
                fst(&HEAVY_TAGS[1])?,
                fst(&HEAVY_TAGS[2])?,
            ],
            names: fst(b"nfst")?,
            name_offsets: b.u32s(b"nmof")?,
            name_nodes: b.u32s(b"nmnd")?,
            strs: b.strs(b"str_")?,
            parent: b.u32s(b"npar")?,
            weight: b.u32s(b"nwgt")?,
            name: b.u32s(b"nnam")?,
            kind: b.u32s(b"ntyp")?,
            country: b.u32s(b"nctr")?,
            iso: b.u32s(b"niso")?,
            region: b.u32s(b"nreg")?,
            postal: b.u32s(b"npos")?,
            source_id: b.u32s(b"nsid")?,
            lat: b.u32s(b"nlat")?,
            lon: b.u32s(b"nlon")?,
            tok_off: b.u32s(b"ntko")?,
            word_groups: b.u32s(b"ntgr")?,
            letters: b.u32s(b"nlet")?,
            tok: b.u32s(b"ntok")?,
            tok_head: b.u32s(b"nthd")?,
            house_off: b.u32s(b"nhof")?,
            house: b.u32s(b"nhou")?,
            child_off: b.u32s(b"ncof")?,
            child: b.u32s(b"nchi")?,
            recent: Mutex::new(Recent::new(RECENT_EXPANSION_BYTES)),
            countries: OnceLock::new(),
        };
        let n = index.parent.len();
        let columns = [
            &index.letters,
            &index.word_groups,
            &index.weight,
            &index.name,
            &index.kind,
            &index.country,
            &index.iso,
            &index.region,
        ];
        if columns.iter().any(|c| c.len() != n)
            || [&index.tok_off, &index.house_off, &index.child_off]
                .iter()
                .any(|c| c.len() != n + 1)
            || index.post_offsets.len() != index.tokens.len() + 1
            || index.cost.len() != index.tokens.len()
            || index.top_cost.len() + 1 != index.top_offsets.len()
            || index.name_offsets.len() != index.names.len() + 1
            || index.token_strs.len() != index.tokens.len() + 1
            || index.tok_head.len() != index.tok.len()
        {
            return Err(IndexError::Format(
                "address index columns disagree in length".into(),
            ));
        }
        Ok(index)
    }

    /// Number of place and street nodes.
    pub fn nodes(&self) -> usize {
        self.parent.len()
    }

    /// The best `count` entries for `query`, best first. A query that
    /// finds nothing, or only far-fetched typos, is read again as typed on
    /// the other keyboard layout ([`crate::layout`]: `vjcr` is `моск`),
    /// and the reading whose best entry scores higher wins.
    pub fn suggest(&self, query: &str, count: usize) -> Vec<Suggestion> {
        self.suggest_restricted(query, count, &Restrict::default())
    }

    /// [`Self::suggest`] keeping only the entries `restrict` lets through
    /// (a city field, the streets of the city already chosen).
    pub fn suggest_restricted(
        &self,
        query: &str,
        count: usize,
        restrict: &Restrict,
    ) -> Vec<Suggestion> {
        // The near-prefix fallback fills its own list (room for a few
        // look-alikes) and would return some for none asked.
        if count == 0 {
            return Vec::new();
        }
        if let Some(each) = restrict.each_location() {
            let mut all: Vec<Suggestion> = each
                .flat_map(|r| self.suggest_restricted(query, count, &r))
                .collect();
            all.sort_by(|a, b| b.score.total_cmp(&a.score));
            let mut seen = HashSet::new();
            all.retain(|s| seen.insert((s.node, s.house)));
            all.truncate(count);
            return all;
        }
        let out = self.suggest_as_typed(query, count, restrict);
        if out.first().is_some_and(|s| s.score >= OTHER_LAYOUT_BELOW) {
            return out;
        }
        let Some(swapped) = crate::layout::swap(query) else {
            return out;
        };
        let other = self.suggest_as_typed(&swapped, count, restrict);
        let top = |l: &[Suggestion]| l.first().map_or(f32::NEG_INFINITY, |s| s.score);
        if top(&other) > top(&out) { other } else { out }
    }

    fn suggest_as_typed(&self, query: &str, count: usize, restrict: &Restrict) -> Vec<Suggestion> {
        // Entries of one location are searched from it: its words join
        // the query (`хаб` in Москва is `москва хаб`), so its place drives
        // and its streets are checked, however many heavier entries begin
        // with `хаб` elsewhere.
        let widened = if restrict.is_none() {
            None
        } else {
            let mut words = restrict.words();
            words.extend(
                restrict
                    .country_code_alone()
                    .and_then(|c| self.country_of(c)),
            );
            (!words.is_empty())
                .then(|| format!("{} {query}", words.join(" ")))
                .filter(|w| address_tokens(w).len() <= MAX_QUERY_TOKENS)
        };
        let Some(tokens) = self.query_tokens(widened.as_deref().unwrap_or(query)) else {
            return Vec::new();
        };
        let keep = |node: u32, house: u32| {
            restrict.admits(&self.address(&Suggestion::of(node, house, 0.0)))
        };
        let keep: Option<&dyn Fn(u32, u32) -> bool> = (!restrict.is_none()).then_some(&keep);
        // Room beyond those shown for entries that look alike and are
        // merged (same text). More room only lowers the bar every scan must
        // clear to stop (`2 * count + 4` cost 2.4% more instructions over
        // the bench's log at five shown, for the same lists), so a query
        // whose look-alikes filled it (a dozen Rancho Nuevo in one Mexican
        // state) runs again with more.
        let room = count + 4;
        let (out, full) = self.suggest_within(&tokens, count, room, keep);
        if out.len() < count && full {
            return self.suggest_within(&tokens, count, 4 * room, keep).0;
        }
        let alone = tokens.iter().filter(|t| !t.optional).count() == 1;
        if out.is_empty() || (alone && out.len() < count) {
            let mut top = Found {
                top: TopK::new(room),
                keep,
            };
            for s in &out {
                top.push(s.score, (s.node, s.house.unwrap_or(NONE)));
            }
            self.best_of_near_prefixes(&tokens, &mut top);
            return self.finish(top, count, room).0;
        }
        out
    }

    /// The last resort of a query that found nothing (or, typed alone,
    /// fewer than shown) while its word being typed has two or three
    /// letters, too few for a typo budget ([`max_edits`]): the best lists
    /// of the prefixes one edit away (`tky`: `ky`, `ty`, `tok` for
    /// `toky…`), each entry checked with one edit allowed in that word.
    /// Any list beats an empty one, and the lists are at hand: giving such
    /// words a budget and searching again found the same (+15 hits over
    /// the bench's log) for 13% more instructions in all, as a walk of the
    /// dictionary within one edit of two letters visits much of it.
    fn best_of_near_prefixes(&self, tokens: &[QueryToken], top: &mut Found) {
        let Some(i) = tokens.iter().position(|t| {
            t.last && !t.optional && !t.numeric && t.m.edits() == 0 && char_len(&t.m.text) >= 2
        }) else {
            return;
        };
        let text = &tokens[i].m.text;
        let mut relaxed = tokens.to_vec();
        relaxed[i].m = Matcher::new(text, true, 1);
        let mut lists = Vec::new();
        // Deletions, substitutions and swaps: prefixes one edit from the
        // word as a whole.
        Matcher::new(text, false, 1).for_each_near(&self.tops, |_, list| {
            lists.push(list);
            true
        });
        // Insertions: one letter more than the word's beginning (`tok`,
        // the beginning of `toky`).
        let chars = char_len(text);
        Matcher::new(without_last_char(text), false, 1).for_each_near(&self.tops, |key, list| {
            if std::str::from_utf8(key).is_ok_and(|k| char_len(k) == chars) {
                lists.push(list);
            }
            true
        });
        let bonus = max_bonus(&relaxed) - EDIT_COST - prefix_typo_cost(chars);
        for list in lists {
            for node in self.best_list(list) {
                if self.weight(node) + bonus <= top.threshold() {
                    break; // heaviest first
                }
                self.try_node(node, &relaxed, top, 0.0);
            }
        }
    }

    /// [`Self::suggest`] keeping `room` entries before merging look-alikes;
    /// and whether they filled it.
    fn suggest_within(
        &self,
        tokens: &[QueryToken],
        count: usize,
        room: usize,
        keep: Option<&dyn Fn(u32, u32) -> bool>,
    ) -> (Vec<Suggestion>, bool) {
        let mut top = Found {
            top: TopK::new(room),
            keep,
        };
        let required: Vec<usize> = (0..tokens.len()).filter(|&i| !tokens[i].optional).collect();
        if let [only] = required[..] {
            // The word being typed alone: its best list if it is short or
            // broad, else its completions; then its typo variants if they
            // can still enter what is shown.
            let t = &tokens[only];
            if t.last && !t.numeric {
                // The best lists hold what is best anywhere, of any kind.
                let mut begins_a_word = true;
                if top.keep.is_some() || !self.best_of_prefix(t, tokens, &mut top) {
                    let mut exact = Vec::new();
                    t.m.for_each_exact(&self.tokens, |_, id| {
                        exact.push(id as u32);
                        true // not broad, or it would have a best list
                    });
                    begins_a_word = !exact.is_empty();
                    self.scan(&exact, 0.0, tokens, &mut top);
                }
                // Not for the first three letters: `мо` is Москва being
                // typed before it is Meaux (Мо in Russian).
                if char_len(&t.m.text) > TOP_PREFIX_CHARS {
                    self.whole_names(tokens, &required, &mut top);
                }
                self.typo_variants(t, tokens, count, &mut top, false);
                if top.len() < count || !begins_a_word {
                    // Too little, or what is typed begins no word: the
                    // typo may be in the first letter, and a dropped first
                    // letter (`estaccio` for Testaccio) leaves a full list
                    // of look-alikes that the walk's bound still lets the
                    // word meant into.
                    self.typo_variants(t, tokens, count, &mut top, true);
                }
                if top.is_empty() {
                    self.suggest_split(tokens, &mut top);
                }
                return self.finish(top, count, room);
            }
        }
        self.whole_names(tokens, &required, &mut top);
        // A word without typo budget that begins no dictionary word
        // (`santa crz`: three letters get none) matches no entry: no
        // driver can find one, and the fallbacks below are what can.
        let hopeless = required.iter().any(|&i| {
            let t = &tokens[i];
            !t.numeric && t.m.edits() == 0 && !self.begins_a_word(&t.m.text)
        });
        if !hopeless {
            let Some(first) = self.pick_driver(tokens, &required, false) else {
                return self.finish(top, count, room);
            };
            self.drive(&first, tokens, count, &mut top);
            // Few or no entries: the driver may be the typo. Its typo
            // variants drive if they were left out (`nort om` for North
            // Om…); with no entry at all, another token does, since a
            // driver's expansion leaves out typos in its first letter
            // (`koses lake`).
            if top.len() < count && (first.exact_only || top.is_empty()) {
                let retry = if first.exact_only {
                    self.pick_driver(tokens, &required, true)
                } else {
                    let others: Vec<usize> = required
                        .iter()
                        .copied()
                        .filter(|&i| i != first.token)
                        .collect();
                    self.pick_driver(tokens, &others, false)
                };
                if let Some(next) = retry {
                    self.drive(&next, tokens, count, &mut top);
                }
            }
        }
        if top.len() < count {
            self.suggest_moved_space(tokens, &mut top);
        }
        if top.is_empty() {
            self.suggest_split(tokens, &mut top);
        }
        if top.is_empty() {
            self.suggest_without_one_word(tokens, &required, count, &mut top);
        }
        self.finish(top, count, room)
    }

    /// When nothing matched: a missing space (`sanfrancisco`, `aiellocal`).
    /// A word that begins no dictionary word is tried as two, split after
    /// a dictionary word where the rest begins one, the shortest such
    /// first part first, until a split finds something; three splits at
    /// most, each driven by the words as typed (the missing space was the
    /// typo). Not for a query of [`MAX_QUERY_TOKENS`] words already.
    fn suggest_split(&self, tokens: &[QueryToken], top: &mut Found) {
        if tokens.len() >= MAX_QUERY_TOKENS {
            return;
        }
        let mut tries = 0;
        for (i, t) in tokens.iter().enumerate() {
            if t.optional || t.numeric || char_len(&t.m.text) < 4 || self.begins_a_word(&t.m.text) {
                continue;
            }
            for (at, _) in t.m.text.char_indices().skip(2) {
                let (left, right) = t.m.text.split_at(at);
                if self.tokens.get(left).is_none() || !self.begins_a_word(right) {
                    continue;
                }
                let mut split = tokens.to_vec();
                split[i] = word_token(left, false);
                split.insert(i + 1, word_token(right, t.last));
                self.scan_reading(&split, top);
                tries += 1;
                if !top.is_empty() || tries == 3 {
                    return;
                }
            }
        }
    }

    /// When few entries matched: the space between the last two words typed
    /// a letter early or late (`king spo` for Kings Point, `lagunan ig` for
    /// Laguna Niguel). The two are read with that letter on the other side
    /// of the space where the first then is a dictionary word and the
    /// second begins one (of two letters or more: one letter begins too
    /// much), and driven as typed (the moved space was the typo). Earlier
    /// pairs were tried too, for twice the scans over the bench's log and
    /// no more hits: a typo there has already been typed past, and the
    /// words after it narrow the list.
    fn suggest_moved_space(&self, tokens: &[QueryToken], top: &mut Found) {
        let [.., a, b] = tokens else {
            return;
        };
        if [a, b].iter().any(|t| t.optional || t.numeric) {
            return;
        }
        let (a, b) = (a.m.text.as_str(), b.m.text.as_str());
        let first = b.chars().next().map_or(0, char::len_utf8);
        let last = without_last_char(a).len();
        let readings = [
            (format!("{a}{}", &b[..first]), b[first..].to_owned()),
            (a[..last].to_owned(), format!("{}{b}", &a[last..])),
        ];
        for (left, right) in &readings {
            if left.is_empty()
                || char_len(right) < 2
                || self.tokens.get(left).is_none()
                || !self.begins_a_word(right)
            {
                continue;
            }
            let n = tokens.len();
            let mut moved = tokens.to_vec();
            moved[n - 2] = word_token(left, false);
            moved[n - 1] = word_token(right, tokens[n - 1].last);
            self.scan_reading(&moved, top);
        }
    }

    /// [`Self::scan_as_typed`] for another reading of the query (words
    /// split or rejoined), any of whose required words may drive.
    fn scan_reading(&self, tokens: &[QueryToken], top: &mut Found) {
        let required: Vec<usize> = (0..tokens.len()).filter(|&j| !tokens[j].optional).collect();
        self.scan_as_typed(tokens, &required, top);
    }

    /// Some dictionary word is or begins with `text`.
    fn begins_a_word(&self, text: &str) -> bool {
        use fst::{IntoStreamer, Streamer};
        let mut keys = self.tokens.range().ge(text).into_stream();
        keys.next()
            .is_some_and(|(key, _)| key.starts_with(text.as_bytes()))
    }

    /// A fallback pass: scans the entries of the words one of `candidates`
    /// is or begins as typed, for the token whose words are fewest to check
    /// (numbers only if nothing else has any), without the typo walks of
    /// [`Self::pick_driver`].
    fn scan_as_typed(&self, tokens: &[QueryToken], candidates: &[usize], top: &mut Found) {
        // A letter or two begins a large part of the dictionary: not
        // enumerated when a longer word can drive.
        let Some(longest) = candidates
            .iter()
            .map(|&i| char_len(&tokens[i].m.text))
            .max()
        else {
            return;
        };
        let mut best: Option<((bool, usize), Arc<Expansion>)> = None;
        for &i in candidates {
            let t = &tokens[i];
            if longest > 2 && char_len(&t.m.text) <= 2 {
                continue;
            }
            if let (Some(known), Some(((_, work), _))) = (self.exact_prefix_work(t), &best)
                && known >= *work
            {
                continue;
            }
            let e = self.exact_expansion(t);
            let key = (t.numeric, e.work);
            if !e.exact.is_empty() && best.as_ref().is_none_or(|(b, _)| key < *b) {
                best = Some((key, e));
            }
        }
        if let Some((_, expansion)) = best {
            self.scan(&expansion.exact, 0.0, tokens, top);
        }
    }

    /// When nothing matched the whole query: what all words but one find,
    /// giving up first a word that begins no dictionary word, then a
    /// number, else the shortest, at [`DROPPED_WORD_COST`]. Words of up
    /// to three letters get no typo budget, and a typo there (`Nwe Lenox`,
    /// `Neumarkt ijn der`, `Cedillo f`) left an empty list, the one answer
    /// that never helps. Only two words are tried, driven by the others'
    /// exact words, so such a query costs at most two more scans. (Also
    /// filling lists of one to four entries would find the target of a
    /// few more typo'd keystrokes, +0.1 point, for a third more instructions
    /// over the bench's log: most such lists are complete, a rare name
    /// typed out.)
    fn suggest_without_one_word(
        &self,
        tokens: &[QueryToken],
        required: &[usize],
        count: usize,
        top: &mut Found,
    ) {
        if required.len() < 2 {
            return;
        }
        // A word that no dictionary word begins with is the likely typo
        // (`San Nicolás de lls`: `lls`, not `de`), then a finished word
        // that is none (`Rancho Nuevo fde Dolores`), then a number (a
        // house the data does not have), then the shortest word.
        let mut order = required.to_vec();
        order.sort_by_cached_key(|&i| {
            let t = &tokens[i];
            let typo = !t.numeric && !self.begins_a_word(&t.m.text);
            let no_word = !t.numeric && !t.last && self.tokens.get(&t.m.text).is_none();
            (!typo, !no_word, !t.numeric, char_len(&t.m.text))
        });
        for &i in order.iter().take(2) {
            let mut relaxed = tokens.to_vec();
            relaxed[i].optional = true;
            relaxed[i].dropped = true;
            let rest: Vec<usize> = required.iter().copied().filter(|&j| j != i).collect();
            // Left with only a letter or two, the list would be the
            // heaviest places in those letters, at the price of a broad scan.
            if rest.iter().all(|&j| char_len(&tokens[j].m.text) < 3) {
                continue;
            }
            // The other words as typed: the one typo was likely the word
            // given up, and their typo variants are the dearest part.
            self.scan_as_typed(&relaxed, &rest, top);
            if top.len() >= count {
                return;
            }
        }
    }

    /// Checks every node holding one of the `driver` words, heaviest first
    /// (a merge of posting lists, which run heaviest first): once a node's
    /// best possible score cannot enter the top, neither can any later
    /// one nor its streets (which weigh less).
    ///
    /// Words matched with a typo cost `penalty` at least, which lowers what
    /// a node can score.
    fn scan(&self, driver: &[u32], penalty: f32, tokens: &[QueryToken], top: &mut Found) {
        let bonus = max_bonus(tokens) - penalty;
        // Tokens without typos (other than numbers, which may be houses)
        // need a word with their first letter: most candidates fail that
        // one test (`san j`: few places called San … have a word in j).
        let need = tokens
            .iter()
            .filter(|t| !t.optional && !t.numeric && t.m.edits() == 0)
            .fold(0, |m, t| m | letter_bit(&t.m.text));
        let mut heads: std::collections::BinaryHeap<PostingHead> = driver
            .iter()
            .filter_map(|&t| {
                let (a, b) = (
                    self.post_offsets.get(t as usize),
                    self.post_offsets.get(t as usize + 1),
                );
                (a < b).then(|| PostingHead::new(self.post.get(a as usize), a, b))
            })
            .collect();
        let (mut last, mut checked, mut skipped) = (NONE, 0, 0);
        while let Some(mut head) = heads.peek_mut() {
            // Advance the list in place: one sift instead of a pop and a push.
            let (node, at, end) = (head.node(), head.at(), head.end);
            if at + 1 < end {
                *head = PostingHead::new(self.post.get(at as usize + 1), at + 1, end);
            } else {
                std::collections::binary_heap::PeekMut::pop(head);
            }
            if node == last {
                continue;
            }
            last = node;
            if self.weight(node) + bonus <= top.threshold() {
                break;
            }
            if need & !self.letters.get(node as usize) != 0 {
                skipped += 1;
                if skipped > MAX_SKIPPED {
                    break;
                }
                continue;
            }
            checked += 1;
            if checked > MAX_CHECKED {
                break;
            }
            self.try_node(node, tokens, top, 0.0);
        }
    }

    fn query_tokens(&self, query: &str) -> Option<Vec<QueryToken>> {
        let words = address_tokens(query);
        if words.is_empty() {
            return None;
        }
        let typing = ends_in_word(query);
        let n = words.len().min(MAX_QUERY_TOKENS);
        let original: Vec<String> = words.iter().take(n).map(|w| capped(w)).collect();
        let tokens = original
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let last = i + 1 == n && typing;
                let chars = char_len(w);
                match canonical_type(w) {
                    // A type word typed in full (or a finished abbreviation).
                    Some(canon) if !last || chars >= 2 => QueryToken {
                        m: Matcher::new(canon, false, 0),
                        numeric: false,
                        optional: true,
                        last,
                        dropped: false,
                        joined: false,
                    },
                    _ => word_token(w, last),
                }
            })
            .collect::<Vec<QueryToken>>();
        let mut tokens = tokens;
        if tokens.iter().all(|t| t.optional) {
            // Only type words: the last one is required, as the type
            // ("проспект" → streets of type пр-кт) or, while a short one is
            // being typed ("ул"), as the beginning of any word.
            let t = tokens.last_mut().expect("not empty");
            let word = original.last().expect("same length");
            t.optional = false;
            if t.last && char_len(word) <= 2 {
                t.m = Matcher::new(word, true, 0);
            }
        }
        if query.ends_with('-')
            && n == words.len()
            && let Some(t) = tokens.last_mut()
        {
            t.joined = true;
        }
        Some(tokens)
    }

    /// Word ids matching a token and the work of checking their nodes; the
    /// flag says the expansion stopped at [`EXPANSION_CAP`].
    ///
    /// Unless `full`, a finished word that is in the dictionary drives as
    /// itself only: its typo variants and longer words are still accepted
    /// when another token drives, but expanding `san` to every `san…` is
    /// not worth it.
    fn expand(&self, t: &QueryToken, full: bool) -> Arc<Expansion> {
        if !full
            && !t.m.prefix
            && let Some(id) = self.tokens.get(&t.m.text)
        {
            return Arc::new(Expansion {
                exact: vec![id as u32],
                typos: Vec::new(),
                work: self.cost.get(id as usize) as usize,
                broad: false,
            });
        }
        if t.last {
            // The word being typed: its typo variants only if they can
            // still enter when the driver gets to them (see `drive`).
            return self.exact_expansion(t);
        }
        self.kept(t, Some(t.m.edits()), || self.walk_expansion(t))
    }

    /// The expansion of `t` for `edits` (`None`: the words as typed) kept
    /// in [`Self::recent`], else `walk`'s, kept.
    fn kept(
        &self,
        t: &QueryToken,
        edits: Option<u8>,
        walk: impl FnOnce() -> Expansion,
    ) -> Arc<Expansion> {
        let key = (t.m.text.clone(), t.m.prefix, edits);
        Recent::get_or_make(&self.recent, key, || {
            let e = walk();
            let bytes = e.heap_bytes() + t.m.text.len();
            (Arc::new(e), bytes)
        })
    }

    /// The words `t` matches within its typo budget, up to
    /// [`EXPANSION_CAP`] of work: a walk over the dictionary.
    fn walk_expansion(&self, t: &QueryToken) -> Expansion {
        let (mut exact, mut typos, mut work, mut broad) = (Vec::new(), Vec::new(), 0usize, false);
        let text = t.m.text.as_bytes();
        t.m.for_each_key(&self.tokens, |key, id| {
            work += self.cost.get(id as usize) as usize;
            if key.starts_with(text) {
                exact.push(id as u32);
            } else {
                typos.push(id as u32);
            }
            broad = work > EXPANSION_CAP;
            !broad
        });
        Expansion {
            exact,
            typos,
            work,
            broad,
        }
    }

    /// The words `t` is or begins as typed, up to [`EXPANSION_CAP`] of work.
    fn exact_expansion(&self, t: &QueryToken) -> Arc<Expansion> {
        self.kept(t, None, || self.walk_exact_expansion(t))
    }

    /// [`Self::exact_expansion`], walked.
    fn walk_exact_expansion(&self, t: &QueryToken) -> Expansion {
        let (mut exact, mut work, mut broad) = (Vec::new(), 0usize, false);
        t.m.for_each_exact(&self.tokens, |_, id| {
            work += self.cost.get(id as usize) as usize;
            exact.push(id as u32);
            broad = work > EXPANSION_CAP;
            !broad
        });
        Expansion {
            exact,
            typos: Vec::new(),
            work,
            broad,
        }
    }

    /// The word ids of the most selective required token. Numbers may be
    /// house numbers, which are not in the dictionary, so they drive only
    /// when nothing else can. If every token is broad, the longest one
    /// drives over the part of its expansion within the cap. The flag says
    /// the driver is a finished word as typed whose typo variants `full`
    /// would add.
    fn pick_driver(&self, tokens: &[QueryToken], required: &[usize], full: bool) -> Option<Driver> {
        let words: Vec<usize> = required
            .iter()
            .copied()
            .filter(|&i| !tokens[i].numeric)
            .collect();
        let mut pool: Vec<usize> = if words.is_empty() {
            required.to_vec()
        } else {
            words
        };
        // Longer tokens first: they are cheaper to expand and usually more
        // selective; a 1–2 letter token is expanded only if nothing else is.
        pool.sort_by_key(|&i| std::cmp::Reverse(char_len(&tokens[i].m.text)));
        let longest = char_len(&tokens[*pool.first()?].m.text);
        let mut best: Option<(bool, usize, Driver)> = None;
        for &i in &pool {
            let t = &tokens[i];
            let best_work = best.as_ref().map(|b| b.1);
            if longest > 2 && char_len(&t.m.text) <= 2 && !self.cheap_short(t, best_work) {
                continue;
            }
            // A prefix whose work is known to exceed the best's: no walk
            // (`la c`: every word in c… would be enumerated up to the cap;
            // `san jose`: every jose… and its typo variants).
            if let (Some(known), Some(b)) = (self.exact_prefix_work(t), best_work)
                && known >= b
            {
                continue;
            }
            let e = self.expand(t, full);
            if best
                .as_ref()
                .is_none_or(|(b_broad, b_work, ..)| (e.broad, e.work) < (*b_broad, *b_work))
            {
                let exact_only = !full && !t.m.prefix && t.m.edits() > 0 && e.typos.is_empty();
                let (broad, work) = (e.broad, e.work);
                let driver = Driver {
                    expansion: e,
                    token: i,
                    exact_only,
                };
                best = Some((broad, work, driver));
            }
        }
        best.map(|(_, _, driver)| driver)
    }

    /// Whether the word being typed, of one or two letters, should drive
    /// instead of the best driver so far: only if the words it begins are
    /// known to fill fewer entries (`north om`: `om…` is rarer than
    /// `north`). A finished short word (`de`, `la`) never drives.
    fn cheap_short(&self, t: &QueryToken, best_work: Option<usize>) -> bool {
        self.prefix_work(t)
            .is_some_and(|work| work <= EXPANSION_CAP && best_work.is_none_or(|b| work < b))
    }

    /// The work of expanding the word being typed, if it has no typo
    /// budget and is a precomputed prefix.
    fn prefix_work(&self, t: &QueryToken) -> Option<usize> {
        if t.m.edits() > 0 {
            return None;
        }
        self.exact_prefix_work(t)
    }

    /// The work of the word being typed's exact completions, if it is a
    /// precomputed (short or broad) prefix: a lower bound of its expansion.
    fn exact_prefix_work(&self, t: &QueryToken) -> Option<usize> {
        if !t.m.prefix {
            return None;
        }
        let i = self.tops.get(&t.m.text)?;
        Some(self.top_cost.get(i as usize) as usize)
    }

    /// Every place whose whole name the required tokens are (they earn
    /// [`EXACT_NAME_BONUS`], which the scans therefore need not allow for).
    fn whole_names(&self, tokens: &[QueryToken], required: &[usize], top: &mut Found) {
        if tokens.last().is_some_and(|t| t.joined) {
            return; // `newton-`: a longer name
        }
        let mut key = String::new();
        for &i in required {
            if !key.is_empty() {
                key.push(' ');
            }
            key.push_str(&tokens[i].m.text);
        }
        let Some(i) = self.names.get(&key) else {
            return;
        };
        let (a, b) = (
            self.name_offsets.get(i as usize),
            self.name_offsets.get(i as usize + 1),
        );
        for node in self.name_nodes.range(a as usize, b as usize) {
            self.try_node(node, tokens, top, EXACT_NAME_BONUS);
        }
    }

    /// The first keystrokes: the precomputed heaviest entries with a word
    /// beginning with the one required token (type words may come along).
    /// False if the prefix has no such list.
    fn best_of_prefix(&self, t: &QueryToken, tokens: &[QueryToken], top: &mut Found) -> bool {
        let Some(i) = self.tops.get(&t.m.text) else {
            return false;
        };
        for node in self.best_list(i) {
            self.try_node(node, tokens, top, 0.0);
        }
        true
    }

    /// The nodes of the `i`th best list (a value of [`Self::tops`]),
    /// heaviest first.
    fn best_list(&self, i: u64) -> impl Iterator<Item = u32> + 'a {
        let (a, b) = (
            self.top_offsets.get(i as usize),
            self.top_offsets.get(i as usize + 1),
        );
        self.top_nodes.range(a as usize, b as usize)
    }

    /// The entries of a token's typo variants, unless even the heaviest
    /// entry could not enter the `count` shown with the typo's cost: the
    /// usual ones, or with `first_letter` those with a typo in the first
    /// letter ([`Matcher::for_each_first_letter_typo`]).
    fn typo_variants(
        &self,
        t: &QueryToken,
        tokens: &[QueryToken],
        count: usize,
        top: &mut Found,
        first_letter: bool,
    ) {
        if t.m.edits() == 0 || self.nodes() == 0 {
            return;
        }
        let mut penalty = EDIT_COST;
        if t.last {
            penalty += prefix_typo_cost(char_len(&t.m.text));
        }
        // A word's entries score at most its heaviest's weight plus every
        // bonus minus the typo: only words at least this heavy can enter.
        let heavier_than = top.nth_score(count) - max_bonus(tokens) + penalty;
        if self.weight(0) <= heavier_than {
            return;
        }
        // The smallest tier of the dictionary that holds all of them.
        let words = HEAVY_TIERS
            .iter()
            .zip(&self.heavy)
            .find(|(min, _)| **min <= heavier_than)
            .map_or(&self.tokens, |(_, tier)| tier);
        let (mut ids, mut work) = (Vec::new(), 0);
        let add = |_: &[u8], id: u64| {
            work += self.cost.get(id as usize) as usize;
            ids.push(id as u32);
            work <= EXPANSION_CAP
        };
        if first_letter {
            t.m.for_each_first_letter_typo(words, add);
        } else {
            t.m.for_each_typo(words, add);
        }
        self.scan(&ids, penalty, tokens, top);
    }

    /// Checks a candidate node (and, for uncovered tokens, its streets and
    /// houses) against the query; `bonus` is added to the node's own score.
    fn try_node(&self, node: u32, tokens: &[QueryToken], top: &mut Found, bonus: f32) {
        let mut cover: Cover = [None; MAX_QUERY_TOKENS];
        let own = self.cover(node, tokens, &mut cover);
        let parent = self.parent.get(node as usize);
        if parent != NONE {
            if !own {
                return; // a street must match by its own words, not only its place's
            }
            self.cover(parent, tokens, &mut cover);
        }
        let weight = self.weight(node);
        match uncovered(tokens, &cover) {
            Uncovered::None => top.push(
                weight + bonus + score_adjust(tokens, &cover, false) + name_bonus(tokens, &cover),
                (node, NONE),
            ),
            Uncovered::OneNumber(i) if parent != NONE => {
                self.try_houses(node, weight, i, tokens, &cover, top)
            }
            _ if parent == NONE => {
                for street in self.children(node) {
                    let weight = self.weight(street);
                    if weight + 1.0 <= top.threshold() {
                        continue; // cannot enter even with every bonus
                    }
                    let mut c = cover;
                    if !self.cover(street, tokens, &mut c) {
                        continue;
                    }
                    match uncovered(tokens, &c) {
                        Uncovered::None => {
                            top.push(weight + score_adjust(tokens, &c, false), (street, NONE))
                        }
                        Uncovered::OneNumber(i) => {
                            self.try_houses(street, weight, i, tokens, &c, top)
                        }
                        Uncovered::More => {}
                    }
                }
            }
            _ => {}
        }
    }

    fn try_houses(
        &self,
        street: u32,
        weight: f32,
        i: usize,
        tokens: &[QueryToken],
        cover: &Cover,
        top: &mut Found,
    ) {
        let q = &tokens[i];
        let base = weight + score_adjust(tokens, cover, true);
        let (a, b) = (
            self.house_off.get(street as usize),
            self.house_off.get(street as usize + 1),
        );
        let mut rank = 0.0;
        for house in self.house.range(a as usize, b as usize) {
            let h = self.strs.get(house);
            let score = if h == q.m.text {
                base + 0.5
            } else if q.last && h.starts_with(q.m.text.as_str()) {
                base - rank
            } else {
                continue;
            };
            if score <= top.threshold() && rank > 0.0 {
                break; // houses are in order: later ones only score lower
            }
            top.push(score, (street, house));
            rank += 0.001;
        }
    }

    /// Records the best match of each query token among a node's words;
    /// true if a required token matched one.
    ///
    /// Context words (country, region, …) match only without typos: `rust`
    /// is not `russia` with a typo, and "Moscow" is not a suggestion for it.
    fn cover(&self, node: u32, tokens: &[QueryToken], cover: &mut Cover) -> bool {
        let mut any = false;
        let groups = self.word_groups.get(node as usize);
        let (name_words, named_words) = ((groups >> 16) as usize, (groups & 0xffff) as usize);
        let (a, b) = (
            self.tok_off.get(node as usize) as usize,
            self.tok_off.get(node as usize + 1) as usize,
        );
        for (i, at) in (a..b).enumerate() {
            let named = i < named_words;
            // Most words are ruled out by their first bytes for every
            // token: those are not read from the string table.
            let head = self.tok_head.get(at);
            if !tokens.iter().any(|t| t.m.may_match_head(head, named)) {
                continue;
            }
            let word = self.token_strs.bytes(self.tok.get(at) + 1);
            let pos = if i < name_words {
                i.min(NOT_IN_NAME as usize - 1) as u8
            } else {
                NOT_IN_NAME
            };
            let ends_name = i + 1 == name_words;
            for (j, (t, slot)) in tokens.iter().zip(cover.iter_mut()).enumerate() {
                // Context words (country, region, ...) match only without
                // typos: a comparison, not the automaton.
                let hit = if named {
                    t.m.check_bytes(word)
                } else {
                    t.m.check_exact_bytes(word)
                };
                if let Some(hit) = hit {
                    let m = Match {
                        hit,
                        named,
                        pos,
                        ends_name,
                    };
                    any |= !t.optional;
                    if slot.is_none_or(|s| better(tokens, j, m, s)) {
                        *slot = Some(m);
                    }
                }
            }
        }
        any
    }

    /// Scans a driver's exact words, then its typo variants, which score
    /// lower: the second scan stops sooner.
    fn drive(&self, d: &Driver, tokens: &[QueryToken], count: usize, top: &mut Found) {
        let t = &tokens[d.token];
        self.scan(&d.expansion.exact, 0.0, tokens, top);
        if t.last {
            self.typo_variants(t, tokens, count, top, false);
        } else {
            self.scan(&d.expansion.typos, EDIT_COST, tokens, top);
        }
    }

    fn children(&self, node: u32) -> impl Iterator<Item = u32> + 'a {
        let (a, b) = (
            self.child_off.get(node as usize),
            self.child_off.get(node as usize + 1),
        );
        self.child.range(a as usize, b as usize)
    }

    fn weight(&self, node: u32) -> f32 {
        self.weight.f32(node as usize)
    }

    /// Best first, one suggestion per distinct address text.
    fn finish(&self, top: Found, count: usize, room: usize) -> (Vec<Suggestion>, bool) {
        let full = top.len() >= room;
        let top = top.top;
        let mut seen: Vec<String> = Vec::new();
        let mut out = Vec::new();
        let mut text = String::new();
        for (score, (node, house)) in top.into_sorted() {
            let s = Suggestion::of(node, house, score);
            text.clear();
            self.address(&s).write_unrestricted_value(&mut text);
            if seen.contains(&text) {
                continue;
            }
            seen.push(text.clone());
            out.push(s);
            if out.len() == count {
                break;
            }
        }
        (out, full)
    }

    /// The name of the country whose ISO code is `iso` (upper case).
    fn country_of(&self, iso: &str) -> Option<&'a str> {
        let countries = self.countries.get_or_init(|| {
            let mut map = HashMap::new();
            for node in 0..self.nodes() {
                if self.parent.get(node) == NONE {
                    let (code, name) = (self.iso.get(node), self.country.get(node));
                    map.entry(self.strs.get(code))
                        .or_insert_with(|| self.strs.get(name));
                }
            }
            map
        });
        countries.get(iso).copied().filter(|c| !c.is_empty())
    }

    /// The fields of a suggestion.
    pub fn address(&self, s: &Suggestion) -> Address<'a> {
        let node = s.node as usize;
        let parent = self.parent.get(node);
        let place = if parent == NONE {
            node
        } else {
            parent as usize
        };
        let str_of =
            |col: &U32s<'a>, i: usize| Some(self.strs.get(col.get(i))).filter(|s| !s.is_empty());
        let street = (parent != NONE).then_some(node);
        let lat = self.lat.f32(place);
        let lon = self.lon.f32(place);
        Address {
            country: str_of(&self.country, place),
            country_iso_code: str_of(&self.iso, place),
            region: str_of(&self.region, place),
            city_type: str_of(&self.kind, place),
            city: self.strs.get(self.name.get(place)),
            street_type: street.and_then(|n| str_of(&self.kind, n)),
            street: street.map(|n| self.strs.get(self.name.get(n))),
            house: s.house.map(|h| self.strs.get(h)),
            postal_code: str_of(&self.postal, node).or_else(|| str_of(&self.postal, place)),
            place_id: self.strs.get(self.source_id.get(place)),
            street_id: street.map(|n| self.strs.get(self.source_id.get(n))),
            geo: (!lat.is_nan() && !lon.is_nan()).then_some((lat, lon)),
        }
    }
}

/// A query token that is not a type word: a number (maybe a house) or a
/// word with the typo budget of its length.
fn word_token(w: &str, last: bool) -> QueryToken {
    let numeric = w.starts_with(|c: char| c.is_ascii_digit());
    let edits = if numeric { 0 } else { max_edits(char_len(w)) };
    QueryToken {
        m: Matcher::new(w, true, edits),
        numeric,
        optional: false,
        last,
        dropped: false,
        joined: false,
    }
}

/// The most [`score_adjust`] and [`AddressIndex::name_bonus`] can add,
/// but for [`EXACT_NAME_BONUS`] (see [`AddressIndex::whole_names`]).
fn max_bonus(tokens: &[QueryToken]) -> f32 {
    0.65 + FIRST_WORD_BONUS + 0.3 * tokens.iter().filter(|t| t.optional).count() as f32
}

/// Whether `a` is a better match than `b` for `tokens[j]`: what it adds to
/// the score, counting what its place in the name earns
/// ([`FIRST_WORD_BONUS`], [`OFF_PHRASE_COST`]); then without typos, named,
/// exact.
#[inline(never)]
fn better(tokens: &[QueryToken], j: usize, a: Match, b: Match) -> bool {
    let t = &tokens[j];
    if t.typed_word() {
        // Its place among the typed words, as name_bonus and score_adjust
        // count them.
        let k = tokens[..j].iter().filter(|t| t.typed_word()).count();
        let (va, vb) = (match_value(t, k, a), match_value(t, k, b));
        if va != vb {
            return va > vb;
        }
    }
    let key = |m: Match| {
        let hit = m.hit;
        (
            hit.edits,
            !hit.slip,
            !m.named,
            !hit.exact,
            m.pos == NOT_IN_NAME,
        )
    };
    key(a) < key(b)
}

/// What match `m` adds to the score for token `t`, the `k`th typed word,
/// counting the bonus or saved cost of its place in the name.
fn match_value(t: &QueryToken, k: usize, m: Match) -> f32 {
    let phrase = match (m.pos as usize == k, k) {
        (false, _) => 0.0,
        (true, 0) => FIRST_WORD_BONUS,
        (true, _) => OFF_PHRASE_COST,
    };
    token_score(t, m) + phrase
}

/// What a required token's match adds to the score (see the module docs).
fn token_score(t: &QueryToken, m: Match) -> f32 {
    let hit = m.hit;
    let mut s = -EDIT_COST * hit.edits as f32;
    if hit.edits == 1 && !hit.slip {
        s -= UNLIKELY_TYPO_COST;
    }
    if t.last && hit.edits > 0 {
        s -= prefix_typo_cost(char_len(&t.m.text));
    }
    if !t.last && !hit.exact {
        s -= UNFINISHED_WORD_COST;
    }
    if t.last && hit.exact {
        s += 0.15;
    }
    if t.joined && m.ends_name {
        s -= NAME_GOES_ON_COST;
    }
    if !m.named {
        s -= CONTEXT_COST;
        if !hit.exact {
            s -= CONTEXT_PREFIX_COST;
        }
    }
    s
}

enum Uncovered {
    None,
    OneNumber(usize),
    More,
}

fn uncovered(tokens: &[QueryToken], cover: &Cover) -> Uncovered {
    let mut missing = tokens
        .iter()
        .zip(cover)
        .enumerate()
        .filter(|(_, (t, c))| !t.optional && c.is_none());
    match (missing.next(), missing.next()) {
        (None, _) => Uncovered::None,
        (Some((i, (t, _))), None) if t.numeric => Uncovered::OneNumber(i),
        _ => Uncovered::More,
    }
}

/// [`FIRST_WORD_BONUS`] if the first token matched the name's first word,
/// minus [`CONTEXT_ONLY_COST`] if only context words matched.
fn name_bonus(tokens: &[QueryToken], cover: &Cover) -> f32 {
    // A word given up still was the first typed (`nwe len` is no Lenox).
    let required = tokens.iter().zip(cover).filter(|(t, _)| t.typed_word());
    let (mut named, mut first) = (false, false);
    for (n, (t, m)) in required.enumerate() {
        let Some(m) = m else {
            if t.dropped {
                continue;
            }
            return 0.0;
        };
        first |= n == 0 && m.pos == 0;
        named |= m.named;
    }
    match (named, first) {
        (false, _) => -CONTEXT_ONLY_COST,
        (true, true) => FIRST_WORD_BONUS,
        (true, false) => 0.0,
    }
}

/// Penalties and bonuses of how the tokens matched (see the module docs).
fn score_adjust(tokens: &[QueryToken], cover: &Cover, house: bool) -> f32 {
    let mut s = 0.0;
    // Typed words, and how many of them from the first matched the name's
    // words in order (see OFF_PHRASE_COST).
    let (mut typed, mut phrase) = (0, 0);
    for (t, c) in tokens.iter().zip(cover) {
        if t.typed_word() {
            if phrase == typed && c.is_some_and(|m| m.pos as usize == typed) {
                phrase += 1;
            }
            typed += 1;
        }
        if t.dropped && c.is_none() {
            s -= DROPPED_WORD_COST;
            continue;
        }
        match (c, t.optional && !t.dropped) {
            (Some(_), true) => s += 0.3,
            // "д" (дом) names the house the entry is.
            (None, true) if house && t.m.text == "д" => s += 0.3,
            // Another type than the one typed: as bad as a typo.
            (None, true) => s -= 2.0,
            (Some(m), false) => s += token_score(t, *m),
            (None, _) => {}
        }
    }
    // A cost for the tokens off the phrase rather than a bonus for those
    // on it, so that what a scan must allow for (max_bonus) does not grow
    // with the query.
    s - OFF_PHRASE_COST * typed.saturating_sub(phrase.max(1)) as f32
}

/// A suggestion's fields, in DaData's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Address<'a> {
    pub country: Option<&'a str>,
    pub country_iso_code: Option<&'a str>,
    pub region: Option<&'a str>,
    pub city_type: Option<&'a str>,
    pub city: &'a str,
    pub street_type: Option<&'a str>,
    pub street: Option<&'a str>,
    pub house: Option<&'a str>,
    pub postal_code: Option<&'a str>,
    /// The data set's id of the place (`gn:524901` for GeoNames).
    pub place_id: &'a str,
    pub street_id: Option<&'a str>,
    pub geo: Option<(f32, f32)>,
}

impl<'a> Address<'a> {
    fn is_russian(&self) -> bool {
        self.country_iso_code == Some("RU")
    }

    /// The address from the region down, as DaData's `value` (Russian
    /// addresses omit the country: `г Москва, ул Хабаровская, д 12`).
    pub fn value(&self) -> String {
        let mut out = String::new();
        self.write_value(&mut Parts::new(&mut out));
        out
    }

    fn write_value(&self, parts: &mut Parts) {
        let ru = self.is_russian();
        if !ru && let Some(country) = self.country {
            parts.next().push_str(country);
        }
        if let Some(r) = self.region.filter(|r| *r != self.city) {
            parts.next().push_str(r);
        }
        write_typed(parts.next(), self.city_type, self.city, ru);
        if let Some(street) = self.street {
            write_typed(parts.next(), self.street_type, street, ru);
        }
        if let Some(h) = self.house {
            let out = parts.next();
            if ru {
                out.push_str("д ");
            }
            out.push_str(h);
        }
    }

    /// The full address: postal code, country, then [`Self::value`].
    pub fn unrestricted_value(&self) -> String {
        let mut out = String::new();
        self.write_unrestricted_value(&mut out);
        out
    }

    /// [`Self::unrestricted_value`] appended to `out` (which the engine
    /// reuses to merge look-alikes without an allocation per entry).
    fn write_unrestricted_value(&self, out: &mut String) {
        let mut parts = Parts::new(out);
        if let Some(postal) = self.postal_code {
            parts.next().push_str(postal);
        }
        if self.is_russian()
            && let Some(country) = self.country
        {
            parts.next().push_str(country);
        }
        self.write_value(&mut parts);
    }

    /// A stable id of the entry: the place's or street's data-set id, with
    /// `#HOUSE` for a house.
    pub fn hint_id(&self) -> String {
        match (self.street_id, self.house) {
            (Some(s), Some(h)) => format!("{s}#{h}"),
            (Some(s), None) => s.to_owned(),
            _ => self.place_id.to_owned(),
        }
    }

    /// The GeoNames id, for places from GeoNames.
    pub fn geoname_id(&self) -> Option<&'a str> {
        self.place_id.strip_prefix("gn:")
    }
}

/// Appends a name with its type: before it in Russian (`ул Мира`), after
/// it elsewhere (`Brīvības iela`).
fn write_typed(out: &mut String, kind: Option<&str>, name: &str, type_first: bool) {
    match kind {
        Some(k) if type_first => {
            out.push_str(k);
            out.push(' ');
            out.push_str(name);
        }
        Some(k) => {
            out.push_str(name);
            out.push(' ');
            out.push_str(k);
        }
        None => out.push_str(name),
    }
}

/// Parts written one after another with ", " between them, as
/// `[..].join(", ")` would give.
struct Parts<'s> {
    out: &'s mut String,
    started: bool,
}

impl<'s> Parts<'s> {
    fn new(out: &'s mut String) -> Self {
        Self {
            out,
            started: false,
        }
    }

    /// Where the next part goes.
    fn next(&mut self) -> &mut String {
        if self.started {
            self.out.push_str(", ");
        }
        self.started = true;
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATA: &str = r#"
{"kind":"place","id":"gn:1","name":"Москва","type":"г","country":"Россия","country_iso_code":"RU","aliases":["Moscow"],"population":12000000,"lat":55.75,"lon":37.6}
{"kind":"place","id":"gn:2","name":"Мосальск","type":"г","country":"Россия","country_iso_code":"RU","population":4000}
{"kind":"place","id":"gn:3","name":"Хабаровск","type":"г","country":"Россия","country_iso_code":"RU","population":600000}
{"kind":"place","id":"gn:4","name":"Rīga","country":"Latvia","country_iso_code":"LV","population":700000}
{"kind":"street","id":"s:1","parent":"gn:1","name":"Хабаровская","type":"ул","house_range":[1,30]}
{"kind":"street","id":"s:2","parent":"gn:1","name":"Мира","type":"пр-кт","houses":["1","2","12 А"]}
{"kind":"street","id":"s:3","parent":"gn:3","name":"Мира","type":"ул","house_range":[1,5]}
{"kind":"street","id":"s:4","parent":"gn:4","name":"Brīvības iela","postal_code":"LV-1010","houses":["1","12"]}
"#;

    fn index() -> Vec<u8> {
        index_of(DATA)
    }

    fn index_of(data: &str) -> Vec<u8> {
        build_address_index(data.trim().as_bytes()).unwrap().0
    }

    fn first_city<'a>(ix: &AddressIndex<'a>, q: &str) -> Option<&'a str> {
        ix.suggest(q, 5).first().map(|s| ix.address(s).city)
    }
    fn values(ix: &AddressIndex, q: &str) -> Vec<String> {
        ix.suggest(q, 5)
            .iter()
            .map(|s| ix.address(s).value())
            .collect()
    }

    #[test]
    fn builds_and_counts() {
        let (_, stats) = build_address_index(DATA.trim().as_bytes()).unwrap();
        assert_eq!(
            (stats.places, stats.streets, stats.houses),
            (4, 4, 30 + 3 + 5 + 2)
        );
        assert_eq!(stats.entries(), 48);
    }

    #[test]
    fn prefixes_typos_orders() {
        let blob = index();
        let ix = AddressIndex::open(&blob).unwrap();
        assert_eq!(values(&ix, "мос")[..2], ["г Москва", "г Мосальск"]);
        assert_eq!(values(&ix, "москва")[0], "г Москва");
        assert_eq!(values(&ix, "мсоква")[0], "г Москва"); // transposition
        assert_eq!(
            values(&ix, "moscow хабаровская")[0],
            "г Москва, ул Хабаровская"
        );
        assert_eq!(
            values(&ix, "12 хабаровская москва")[0],
            "г Москва, ул Хабаровская, д 12"
        );
        assert_eq!(
            values(&ix, "г. Москва, проспект Мира, д. 12а")[0],
            "г Москва, пр-кт Мира, д 12а"
        );
        assert_eq!(
            values(&ix, "хабаровск мира 3")[0],
            "г Хабаровск, ул Мира, д 3"
        );
        assert_eq!(
            values(&ix, "riga brivibas 12")[0],
            "Latvia, Rīga, Brīvības iela, 12"
        );
        assert_eq!(values(&ix, "хабаровск")[0], "г Хабаровск");
        // A street is suggested for its own words, not for its city's alone.
        assert_eq!(
            values(&ix, "хабаровск"),
            ["г Хабаровск", "г Москва, ул Хабаровская"]
        );
        assert_eq!(values(&ix, "мира")[0], "г Москва, пр-кт Мира");
        assert_eq!(values(&ix, "проспект")[0], "г Москва, пр-кт Мира");
        assert!(values(&ix, "несуществующий").is_empty());
    }

    /// DaData's bounds and locations: kinds of entry, and where.
    #[test]
    fn restricted_to_kinds_and_locations() {
        use crate::restrict::{Kinds, Location, Restrict};
        let blob = index();
        let ix = AddressIndex::open(&blob).unwrap();
        let only = |places, streets, houses| {
            Some(Kinds {
                places,
                streets,
                houses,
            })
        };
        let values = |q: &str, r: &Restrict| -> Vec<String> {
            ix.suggest_restricted(q, 5, r)
                .iter()
                .map(|s| ix.address(s).value())
                .collect()
        };
        let cities = Restrict::new(only(true, false, false), Vec::new());
        assert_eq!(values("хабаровск", &cities), ["г Хабаровск"]);
        let streets = Restrict::new(only(false, true, false), Vec::new());
        assert_eq!(
            values("мира", &streets),
            ["г Москва, пр-кт Мира", "г Хабаровск, ул Мира"]
        );
        // A street field once the city is chosen, from the first letter.
        let in_khabarovsk = |kinds| {
            Restrict::new(
                kinds,
                vec![Location {
                    city: Some("Хабаровск".into()),
                    ..Location::default()
                }],
            )
        };
        assert_eq!(
            values("м", &in_khabarovsk(only(false, true, false))),
            ["г Хабаровск, ул Мира"]
        );
        assert_eq!(
            values("мира 3", &in_khabarovsk(None)),
            ["г Хабаровск, ул Мира, д 3"]
        );
        // A house field once the street is chosen.
        let houses = Restrict::new(
            only(false, false, true),
            vec![Location {
                city: Some("москва".into()),
                street: Some("хабаровская".into()),
                ..Location::default()
            }],
        );
        assert_eq!(values("2", &houses)[0], "г Москва, ул Хабаровская, д 2");
        assert!(values("мира", &houses).is_empty());
        // Nowhere: nothing, rather than entries elsewhere.
        let nowhere = Restrict::new(
            None,
            vec![Location {
                country_iso_code: Some("FR".into()),
                ..Location::default()
            }],
        );
        assert!(values("москва", &nowhere).is_empty());
    }

    /// Russian streets answer to their Latin spelling, as visitors and
    /// Latin keyboards type them (BGN/PCGN, typos allowed as ever).
    #[test]
    fn latin_spellings_find_cyrillic_streets() {
        let blob = index();
        let ix = AddressIndex::open(&blob).unwrap();
        assert_eq!(
            values(&ix, "12 habarovskaya moscow")[0],
            "г Москва, ул Хабаровская, д 12"
        );
        assert_eq!(
            values(&ix, "moscow ulitsa khabarovskaya 7")[0],
            "г Москва, ул Хабаровская, д 7"
        );
        assert_eq!(
            values(&ix, "moscow prospekt mira 2")[0],
            "г Москва, пр-кт Мира, д 2"
        );
        assert_eq!(
            values(&ix, "moscow khabarov")[0],
            "г Москва, ул Хабаровская"
        );
        // A Latin street still answers to its own name.
        assert_eq!(
            values(&ix, "riga brivibas")[0],
            "Latvia, Rīga, Brīvības iela"
        );
    }

    /// Typed on the other keyboard layout: read again when the query as
    /// typed finds nothing or only far-fetched typos.
    #[test]
    fn the_other_keyboard_layout_is_read_when_nothing_fits() {
        let blob = index();
        let ix = AddressIndex::open(&blob).unwrap();
        assert_eq!(values(&ix, "vjcrdf")[0], "г Москва");
        assert_eq!(
            values(&ix, "vjcrdf? [f,fhjdcrfz 12")[0],
            "г Москва, ул Хабаровская, д 12"
        );
        assert_eq!(values(&ix, "кшпф")[0], "Latvia, Rīga");
        // What matches as typed stays: `мира` is a street, not `vbhf`.
        assert_eq!(values(&ix, "мира")[0], "г Москва, пр-кт Мира");
    }

    /// Words of three letters or fewer get no typo budget; with a typo in
    /// one the whole query matched nothing, and now the other words are
    /// heard. Queries that match keep their lists as they were.
    #[test]
    fn a_hopeless_short_word_is_given_up_rather_than_everything() {
        let blob = index_of(
            r#"
{"kind":"place","id":"gn:1","name":"New Lenox","country":"United States","country_iso_code":"US","population":27000}
{"kind":"place","id":"gn:2","name":"New York","country":"United States","country_iso_code":"US","population":8000000}
{"kind":"place","id":"gn:3","name":"Lenox","country":"United States","country_iso_code":"US","population":5000}
"#,
        );
        let ix = AddressIndex::open(&blob).unwrap();
        let (new_lenox, lenox) = ("United States, New Lenox", "United States, Lenox");
        assert_eq!(values(&ix, "new len"), [new_lenox]);
        // `nwe` is no word and, at three letters, gets no typo: given up.
        assert_eq!(values(&ix, "nwe len"), [new_lenox, lenox]);
        assert_eq!(values(&ix, "nwe lenox "), [new_lenox, lenox]);
        let given_up = ix.suggest("nwe len", 5)[0].score;
        let matched = ix.suggest("new len", 5)[0].score;
        assert!(given_up < matched - 3.0, "{given_up} vs {matched}");
        // One word alone has nothing to give up; as a last resort its
        // letters are read with one edit (`new`).
        assert_eq!(values(&ix, "nwe")[0], "United States, New York");
    }

    /// Last resorts for words without a typo budget: a short word being
    /// typed read with one edit, a letter on the wrong side of a space, a
    /// finished word that is no word given up first.
    #[test]
    fn short_words_and_spaces_get_one_edit_when_little_is_found() {
        let blob = index_of(
            r#"
{"kind":"place","id":"1","name":"Tokyo","country":"Japan","population":9700000}
{"kind":"place","id":"2","name":"Ufa","country":"Russia","population":1100000}
{"kind":"place","id":"3","name":"Kings Point","country":"Australia","population":500}
{"kind":"place","id":"4","name":"Spofforth","country":"United Kingdom","population":1100}
{"kind":"place","id":"5","name":"Rancho Nuevo de Dolores","country":"Mexico","population":600}
{"kind":"place","id":"6","name":"Fdeo","country":"Mexico","population":100}
"#,
        );
        let ix = AddressIndex::open(&blob).unwrap();
        let first = |q: &str| first_city(&ix, q);
        // No word begins with `tky` or `uaf`: a letter dropped, swapped.
        assert_eq!(first("tky"), Some("Tokyo"));
        assert_eq!(first("uaf"), Some("Ufa"));
        // Only Spofforth has `king` and `spo` as typed.
        assert_eq!(first("king spo"), Some("Kings Point"));
        assert_eq!(first("kingsp oi"), Some("Kings Point"));
        // `fde` begins a word but is none; `de` is shorter but a word.
        assert_eq!(
            first("rancho nuevo fde dolores"),
            Some("Rancho Nuevo de Dolores")
        );
        assert!(values(&ix, "zzq").is_empty());
    }

    /// A missing space: a word that begins no dictionary word is tried as
    /// a dictionary word and the rest.
    #[test]
    fn a_missing_space_is_found() {
        let blob = index();
        let ix = AddressIndex::open(&blob).unwrap();
        assert_eq!(values(&ix, "хабаровскмира")[0], "г Хабаровск, ул Мира");
        assert_eq!(values(&ix, "хабаровск мира")[0], "г Хабаровск, ул Мира");
        assert!(values(&ix, "хабаровскзззз").is_empty());
    }

    #[test]
    fn names_are_typed_in_order_and_finished_words_are_whole() {
        let ix_blob = index_of(
            r#"
{"kind":"place","id":"1","name":"Lauro de Freitas","country":"Brazil","population":200000}
{"kind":"place","id":"2","name":"La Flèche","country":"France","population":18000}
{"kind":"place","id":"3","name":"Montevideo","country":"Uruguay","population":1300000}
{"kind":"place","id":"4","name":"Monte Mor","country":"Brazil","population":60000}
{"kind":"place","id":"5","name":"Newton","country":"Canada","population":160000}
{"kind":"place","id":"6","name":"Newton-le-Willows","country":"United Kingdom","population":25000}
"#,
        );
        let ix = AddressIndex::open(&ix_blob).unwrap();
        let first = |q: &str| first_city(&ix, q);
        // Both match `la` and `f`; only La Flèche in the order typed.
        assert_eq!(first("la f"), Some("La Flèche"));
        assert_eq!(first("la fr"), Some("Lauro de Freitas"));
        // `monte` is finished: Montevideo only begins with it, and `mo`
        // begins the same word again.
        assert_eq!(first("monte "), Some("Monte Mor"));
        assert_eq!(first("monte mo"), Some("Monte Mor"));
        assert_eq!(first("monte"), Some("Montevideo"));
        // A hyphen after the word: the name goes on.
        assert_eq!(first("newton"), Some("Newton"));
        assert_eq!(first("newton-"), Some("Newton-le-Willows"));
    }

    #[test]
    fn a_word_with_an_apostrophe_is_found_without_it() {
        let ix_blob = index_of(
            r#"
{"kind":"place","id":"1","name":"Vasil’yevo","country":"Russia","population":16800}
{"kind":"place","id":"2","name":"Vasilevo","country":"North Macedonia","population":12000}
{"kind":"place","id":"3","name":"L'Anse","country":"United States","population":1900}
"#,
        );
        let ix = AddressIndex::open(&ix_blob).unwrap();
        let first = |q: &str| first_city(&ix, q);
        for q in [
            "vasilyevo",
            "Vasil’yevo",
            "Vasil'yevo",
            "vasil yevo",
            "vasily",
        ] {
            assert_eq!(first(q), Some("Vasil’yevo"), "{q}");
        }
        for q in ["lanse", "L'Anse", "anse"] {
            assert_eq!(first(q), Some("L'Anse"), "{q}");
        }
    }

    #[test]
    fn names_outrank_context_and_short_prefix_typos() {
        let data = r#"
{"kind":"place","id":"gn:1","name":"Москва","country":"Russia","population":12000000}
{"kind":"place","id":"gn:2","name":"Rust","country":"Austria","population":2000}
{"kind":"place","id":"gn:3","name":"Daniel Flores","country":"Costa Rica","population":100000}
{"kind":"place","id":"gn:4","name":"Daniel","country":"United States","population":3000}
{"kind":"place","id":"gn:5","name":"Dalian","country":"China","population":6000000}
{"kind":"place","id":"gn:6","name":"Danilov","country":"Russia","population":9000}
"#;
        let blob = index_of(data);
        let ix = AddressIndex::open(&blob).unwrap();
        // A context word (the country) matches without typos only: `rust`
        // is not `russia` with a typo.
        assert_eq!(values(&ix, "rust"), ["Austria, Rust"]);
        // A query matching only context words still finds, below names.
        assert_eq!(values(&ix, "russia")[0], "Russia, Москва");
        assert_eq!(values(&ix, "austria rust")[0], "Austria, Rust");
        // The whole name typed exactly beats a larger place it begins.
        assert_eq!(values(&ix, "daniel")[0], "United States, Daniel");
        assert_eq!(values(&ix, "daniel fl")[0], "Costa Rica, Daniel Flores");
        // In the first four letters a typo only fills the list after
        // every exact completion, however large the typo'd place.
        assert_eq!(
            values(&ix, "dani"),
            [
                "Costa Rica, Daniel Flores",
                "Russia, Danilov",
                "United States, Daniel",
                "China, Dalian"
            ]
        );
        // From nine letters a typo costs the same as anywhere else.
        assert_eq!(values(&ix, "dalain")[0], "China, Dalian");
    }

    #[test]
    fn a_typo_in_the_driving_word_is_retried() {
        let data = r#"
{"kind":"place","id":"gn:1","name":"Moses Lake","country":"United States","population":20000}
{"kind":"place","id":"gn:2","name":"Lake Forest","country":"United States","population":80000}
{"kind":"place","id":"gn:3","name":"North Omak","country":"United States","population":700}
{"kind":"place","id":"gn:4","name":"North Bay","country":"Canada","population":50000}
{"kind":"place","id":"gn:5","name":"Nort-sur-Erdre","country":"France","population":1000}
"#;
        let blob = index_of(data);
        let ix = AddressIndex::open(&blob).unwrap();
        // `koses` drives (rarer than `lake`), but its expansion leaves out
        // typos in the first letter: with nothing found, `lake` drives.
        assert_eq!(values(&ix, "koses lake"), ["United States, Moses Lake"]);
        // `nort` is a word as typed (Nort-sur-Erdre) without `om…`: its
        // typo variants drive.
        assert_eq!(values(&ix, "nort om"), ["United States, North Omak"]);
        // A rare one- or two-letter prefix drives over a broad word.
        assert_eq!(values(&ix, "north om"), ["United States, North Omak"]);
    }

    #[test]
    fn a_slip_of_the_finger_or_ear_outranks_a_heavier_far_key() {
        let data = r#"
{"kind":"place","id":"gn:1","name":"Paris","country":"France","population":20000}
{"kind":"place","id":"gn:2","name":"Parin","country":"France","population":100000}
{"kind":"place","id":"gn:3","name":"Москва","country":"Россия","population":20000}
{"kind":"place","id":"gn:4","name":"Мисква","country":"Россия","population":100000}
"#;
        let blob = index_of(data);
        let ix = AddressIndex::open(&blob).unwrap();
        // Both one edit from `parix`; x is next to s and far from n.
        assert_eq!(values(&ix, "parix "), ["France, Paris", "France, Parin"]);
        // And from `масква`: а for о is spelt by ear, а for и is neither.
        assert_eq!(values(&ix, "масква "), ["Россия, Москва", "Россия, Мисква"]);
        // A name typed as it is still comes first.
        assert_eq!(values(&ix, "parin "), ["France, Parin", "France, Paris"]);
    }

    #[test]
    fn heavy_typo_variants_enter_a_full_list() {
        // Five small exact completions of `santosa` fill the list; Santoso
        // (one edit, far heavier) must still enter, found in the heavy
        // tier of the dictionary the typo walk then uses.
        let mut data =
            String::from(r#"{"kind":"place","id":"gn:1","name":"Santoso","population":100000}"#);
        for (i, name) in ["Rita", "Ana", "Fe", "Clara", "Maria"].iter().enumerate() {
            data += &format!(
                "\n{{\"kind\":\"place\",\"id\":\"gn:{}\",\"name\":\"Santosa {name}\",\"population\":{}}}",
                i + 2,
                1000 + i
            );
        }
        let blob = index_of(&data);
        let ix = AddressIndex::open(&blob).unwrap();
        let got = values(&ix, "santosa");
        assert_eq!(got[0], "Santoso", "{got:?}");
        assert_eq!(got.len(), 5);
    }

    #[test]
    fn a_short_list_looks_for_a_typo_in_the_first_letter() {
        // `hahrinav` drops the first letter of Shahrinav and `varghat`
        // changes that of Barghat: walks under the first two letters
        // typed cannot find them; the list is short, so the first-letter
        // walk runs. `bargha` finds Barghat by its completions, ahead of
        // the far heavier Varghata that the walk adds with a typo's cost.
        let data = [
            r#"{"kind":"place","id":"gn:1","name":"Shahrinav","population":10000}"#,
            r#"{"kind":"place","id":"gn:2","name":"Barghat","population":20000}"#,
            r#"{"kind":"place","id":"gn:3","name":"Varghata","population":900000}"#,
            r#"{"kind":"place","id":"gn:4","name":"Hahnville","population":3000}"#,
        ]
        .join("\n");
        let blob = index_of(&data);
        let ix = AddressIndex::open(&blob).unwrap();
        assert_eq!(values(&ix, "hahrinav"), ["Shahrinav"]);
        assert_eq!(values(&ix, "varghat")[0], "Varghata");
        assert!(values(&ix, "varghat").contains(&"Barghat".to_string()));
        assert_eq!(values(&ix, "arghat"), ["Varghata", "Barghat"]);
        assert_eq!(values(&ix, "bargha")[0], "Barghat");
    }

    #[test]
    fn type_words_are_optional_and_ranked() {
        let blob = index();
        let ix = AddressIndex::open(&blob).unwrap();
        // A typed type word lifts streets of that type over others by as
        // much as a typo, without excluding the others.
        let gap = |q: &str| {
            let hits = ix.suggest(q, 5);
            let score = |v: &str| {
                hits.iter()
                    .find(|s| ix.address(s).value() == v)
                    .unwrap()
                    .score
            };
            score("г Хабаровск, ул Мира") - score("г Москва, пр-кт Мира")
        };
        assert!(gap("мира улица") - gap("мира") > 2.0);
        assert!(gap("мира проспект") - gap("мира") < -2.0);
        assert_eq!(values(&ix, "хабаровск ул мира")[0], "г Хабаровск, ул Мира");
    }

    #[test]
    fn house_numbers_complete_as_prefixes() {
        let blob = index();
        let ix = AddressIndex::open(&blob).unwrap();
        let got = values(&ix, "москва хабаровская 1");
        assert_eq!(got[0], "г Москва, ул Хабаровская, д 1");
        assert_eq!(got[1], "г Москва, ул Хабаровская, д 10");
        let s = ix.suggest("москва хабаровская 12", 1)[0];
        assert_eq!(ix.address(&s).hint_id(), "s:1#12");
        assert_eq!(
            ix.address(&ix.suggest("москва", 1)[0]).geoname_id(),
            Some("1")
        );
    }

    #[test]
    fn bad_input_names_the_line() {
        let err = |s: &str| build_address_index(s.as_bytes()).err().unwrap().to_string();
        assert!(err("{\"kind\":\"place\"}").contains("line 1"));
        let orphan = "{\"kind\":\"place\",\"id\":\"a\",\"name\":\"A\"}\n{\"kind\":\"street\",\"id\":\"b\",\"parent\":\"x\",\"name\":\"B\"}";
        assert!(err(orphan).contains("line 2: street \"b\": parent place \"x\" not found"));
        let dup = "{\"kind\":\"place\",\"id\":\"a\",\"name\":\"A\"}\n{\"kind\":\"place\",\"id\":\"a\",\"name\":\"B\"}";
        assert!(err(dup).contains("line 2: place \"a\": duplicate id"));
        assert!(AddressIndex::open(b"garbage").is_err());
    }
}
