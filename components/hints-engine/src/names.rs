//! Person-name suggestions: surname, given name and patronymic.
//!
//! Each part has its own dictionary (an FST from the folded word to its
//! forms, each with a gender and a frequency). A query holds one to three
//! words in one of the usual orders — `Фамилия Имя Отчество`,
//! `Имя Отчество Фамилия`, `Фамилия Имя`, `Имя Фамилия`, `Имя Отчество` —
//! or a single word of any part. Every word may carry typos like an address
//! token, and each may be a prefix (the last one is usually still being
//! typed; an earlier one that only begins a word costs a little, which is
//! how `Иванов Анна` becomes `Иванова Анна`).
//!
//! Suggestions keep gender agreement: the parts of one suggestion are all
//! of one gender, or of none (a unisex surname such as `Шевченко` goes with
//! either). A request may restrict the parts and the gender.
//!
//! Score = Σ ln(1 + frequency) of the parts − 2 per edit − 1.5 per earlier
//! word that was only a prefix.
//!
//! ```
//! use hints_engine::names::{NameIndex, build_name_index, Gender, Part};
//! let data = r#"
//! {"part":"surname","text":"Иванов","gender":"m","count":6926}
//! {"part":"surname","text":"Иванова","gender":"f","count":5206}
//! {"part":"name","text":"Иван","gender":"m","count":90136}
//! {"part":"name","text":"Анна","gender":"f","count":80000}
//! {"part":"patronymic","text":"Ивановна","gender":"f","count":83965}
//! "#;
//! let (blob, _) = build_name_index(data.trim().as_bytes()).unwrap();
//! let index = NameIndex::open(&blob).unwrap();
//! let top = index.suggest("иванов анна ив", 1, None, None);
//! assert_eq!(top[0].value(), "Иванова Анна Ивановна");
//! assert_eq!(top[0].gender, Gender::Female);
//! ```

use crate::IndexError;
use crate::blob::{Blob, BlobWriter, StrTableBuilder, Strs, U32s};
use crate::fuzzy::{Matcher, max_edits};
use crate::recent::Recent;
use crate::slips;
use crate::text::{capped, char_len, ends_in_word, prefixes, tokens};
use crate::topk::TopK;
use fst::Map;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::sync::{Arc, Mutex};

const MAGIC: &[u8; 8] = b"EDGEHN01";
const TOP_PREFIX_CHARS: usize = 2;
const TOP_LEN: usize = 40;
/// Candidates kept per word position and gender before combining.
const PER_POSITION: usize = 6;
/// The cost of an earlier word that only begins the form suggested: enough
/// that `Петров Ан` suggests `Петров Андрей` before `Петрова Анна`, little
/// enough that `Иванов Анна` becomes `Иванова Анна`.
const UNFINISHED: f32 = 1.5;
/// The bonus of the word being typed when it is a whole form already, the
/// cost of one edit: a typo'd neighbour in a part whose counts run higher
/// must not pass it (`иванова` is the surname Иванова, 5k people, before
/// the patronymic Иванович, 128k, one edit away).
const WHOLE: f32 = 2.0;
/// Dictionary keys a single word may enumerate (typo'd long words touch few).
const ENUMERATION_CAP: usize = 20_000;

/// A part of a full name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    Surname,
    Name,
    Patronymic,
}

impl Part {
    const ALL: [Part; 3] = [Part::Surname, Part::Name, Part::Patronymic];

    fn tag(self) -> u8 {
        match self {
            Part::Surname => b's',
            Part::Name => b'n',
            Part::Patronymic => b'p',
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Grammatical gender of a name form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gender {
    Male,
    Female,
    Unknown,
}

impl Gender {
    fn code(self) -> u32 {
        match self {
            Gender::Male => 1,
            Gender::Female => 2,
            Gender::Unknown => 0,
        }
    }

    fn from_code(c: u32) -> Self {
        match c {
            1 => Gender::Male,
            2 => Gender::Female,
            _ => Gender::Unknown,
        }
    }

    /// Whether a form of this gender may stand in a name of gender `g`.
    fn agrees(self, g: Gender) -> bool {
        self == Gender::Unknown || self == g
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameRecord {
    part: Part,
    text: String,
    gender: String,
    count: u64,
}

/// What the builder read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NameStats {
    pub surnames: usize,
    pub names: usize,
    pub patronymics: usize,
}

impl NameStats {
    /// All forms.
    pub fn entries(&self) -> usize {
        self.surnames + self.names + self.patronymics
    }
}

/// Per part: folded key → (spelling, gender code) → count.
type FormsByKey = BTreeMap<String, HashMap<(String, u32), u64>>;

/// Builds a name index from JSON Lines `{"part","text","gender","count"}`.
pub fn build_name_index(input: impl BufRead) -> Result<(Vec<u8>, NameStats), IndexError> {
    let mut parts: [FormsByKey; 3] = Default::default();
    for record in crate::json_lines::<NameRecord>(input) {
        let (line_no, r) = record?;
        let gender = match r.gender.as_str() {
            "m" => Gender::Male,
            "f" => Gender::Female,
            "u" => Gender::Unknown,
            other => {
                return Err(IndexError::Input(format!(
                    "line {line_no}: gender {other:?} is not one of \"m\", \"f\", \"u\""
                )));
            }
        };
        let text = r.text.trim();
        let key = tokens(text, true).join(" ");
        if key.is_empty() {
            return Err(IndexError::Input(format!(
                "line {line_no}: text {:?} has no letters",
                r.text
            )));
        }
        *parts[r.part.index()]
            .entry(key)
            .or_default()
            .entry((text.to_owned(), gender.code()))
            .or_default() += r.count;
    }
    let mut strs = StrTableBuilder::default();
    let mut w = BlobWriter::default();
    let mut stats = NameStats::default();
    for part in Part::ALL {
        let map = &parts[part.index()];
        let t = part.tag();
        let mut fst = fst::MapBuilder::memory();
        let (mut group_off, mut display, mut gender, mut weight) =
            (vec![0u32], vec![], vec![], vec![]);
        let mut tops: HashMap<String, Vec<(f32, u32)>> = HashMap::new();
        for (g, (key, forms)) in map.iter().enumerate() {
            fst.insert(key, g as u64)
                .map_err(|e| IndexError::Format(e.to_string()))?;
            for ((text, gcode), count) in merge_forms(forms) {
                let (text, gcode, count) = (&text, &gcode, &count);
                let entry = display.len() as u32;
                let wgt = (1.0 + *count as f64).ln() as f32;
                display.push(strs.intern(text));
                gender.push(*gcode);
                weight.push(wgt);
                for prefix in prefixes(key).take(TOP_PREFIX_CHARS) {
                    let list = tops.entry(prefix.to_owned()).or_default();
                    let at = list.partition_point(|e| e.0 >= wgt);
                    if at < TOP_LEN {
                        list.insert(at, (wgt, entry));
                        list.truncate(TOP_LEN);
                    }
                }
            }
            group_off.push(display.len() as u32);
        }
        match part {
            Part::Surname => stats.surnames = display.len(),
            Part::Name => stats.names = display.len(),
            Part::Patronymic => stats.patronymics = display.len(),
        }
        let mut tops: Vec<_> = tops.into_iter().collect();
        tops.sort_by(|a, b| a.0.cmp(&b.0));
        let mut top_fst = fst::MapBuilder::memory();
        let (mut top_off, mut top_entries) = (vec![0u32], vec![]);
        for (i, (prefix, list)) in tops.iter().enumerate() {
            top_fst
                .insert(prefix, i as u64)
                .map_err(|e| IndexError::Format(e.to_string()))?;
            top_entries.extend(list.iter().map(|e| e.1));
            top_off.push(top_entries.len() as u32);
        }
        w.add(
            &[t, b'f', b's', b't'],
            fst.into_inner()
                .map_err(|e| IndexError::Format(e.to_string()))?,
        );
        w.add_u32s(&[t, b'g', b'o', b'f'], &group_off);
        w.add_u32s(&[t, b'd', b'i', b's'], &display);
        w.add_u32s(&[t, b'g', b'e', b'n'], &gender);
        w.add_f32s(&[t, b'w', b'g', b't'], &weight);
        w.add(
            &[t, b'p', b'f', b's'],
            top_fst
                .into_inner()
                .map_err(|e| IndexError::Format(e.to_string()))?,
        );
        w.add_u32s(&[t, b'p', b'o', b'f'], &top_off);
        w.add_u32s(&[t, b'p', b't', b'p'], &top_entries);
    }
    w.add_strs(b"str_", &strs);
    Ok((w.finish(MAGIC), stats))
}

/// The forms of one folded key, merged: spellings differing only in case
/// become the most frequent one that is not all capitals (the sources list
/// `ИВАНОВИЧ` beside `Иванович`), and a form of unknown gender that also
/// exists with a gender joins the more frequent gendered form. Most
/// frequent first.
fn merge_forms(forms: &HashMap<(String, u32), u64>) -> Vec<((String, u32), u64)> {
    let mut spelling: HashMap<String, (&str, u64)> = HashMap::new();
    let mut counts: HashMap<(String, u32), u64> = HashMap::new();
    for ((text, g), &count) in forms {
        let lower = text.to_lowercase();
        let shouting = text
            .chars()
            .filter(|c| c.is_alphabetic())
            .all(|c| c.is_uppercase());
        let rank = if shouting { 0 } else { count + 1 };
        let best = spelling.entry(lower.clone()).or_insert((text, rank));
        if rank > best.1 || (rank == best.1 && text.as_str() < best.0) {
            *best = (text, rank);
        }
        *counts.entry((lower, *g)).or_default() += count;
    }
    let unknown: Vec<String> = counts
        .keys()
        .filter(|(_, g)| *g == 0)
        .map(|(l, _)| l.clone())
        .collect();
    for lower in unknown {
        let (m, f) = (
            counts.get(&(lower.clone(), 1)).copied(),
            counts.get(&(lower.clone(), 2)).copied(),
        );
        let target = match (m, f) {
            (Some(m), Some(f)) => {
                if m >= f {
                    1
                } else {
                    2
                }
            }
            (Some(_), None) => 1,
            (None, Some(_)) => 2,
            (None, None) => continue,
        };
        let count = counts.remove(&(lower.clone(), 0)).unwrap_or(0);
        *counts.entry((lower, target)).or_default() += count;
    }
    let mut out: Vec<((String, u32), u64)> = counts
        .into_iter()
        .map(|((lower, g), count)| ((spelling[&lower].0.to_owned(), g), count))
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

struct PartIndex<'a> {
    keys: Map<&'a [u8]>,
    group_off: U32s<'a>,
    display: U32s<'a>,
    gender: U32s<'a>,
    weight: U32s<'a>,
    tops: Map<&'a [u8]>,
    top_off: U32s<'a>,
    top_entries: U32s<'a>,
}

/// A name index over borrowed bytes.
pub struct NameIndex<'a> {
    parts: [PartIndex<'a>; 3],
    strs: Strs<'a>,
    /// Candidates of recent query words ([`NameIndex::candidates`]): a
    /// user typing the given name sends the surname again with every
    /// keystroke.
    recent: Mutex<Recent<CandidatesKey, Arc<Vec<Candidate>>>>,
}

/// What a word's candidates depend on: the part, the word, and whether it
/// is the word being typed.
type CandidatesKey = (Part, String, bool);

/// Bytes of candidates kept per generation ([`crate::recent`]).
const RECENT_CANDIDATE_BYTES: usize = 256 << 10;

/// One suggested name; parts absent from the query are `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct Fio<'a> {
    pub surname: Option<&'a str>,
    pub name: Option<&'a str>,
    pub patronymic: Option<&'a str>,
    /// The parts in the order the user typed them.
    pub order: Vec<Part>,
    pub gender: Gender,
    pub score: f32,
}

impl Fio<'_> {
    /// The parts joined in the order the user typed them.
    pub fn value(&self) -> String {
        self.order
            .iter()
            .filter_map(|p| match p {
                Part::Surname => self.surname,
                Part::Name => self.name,
                Part::Patronymic => self.patronymic,
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One suggestion while it competes: the display strings of its parts
/// (the identity: two orders giving the same name are one suggestion),
/// the order typed and the gender.
struct Combo {
    key: [u32; 3],
    order: &'static [Part],
    gender: Gender,
}

impl PartialEq for Combo {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

#[derive(Clone, Copy)]
struct Candidate {
    entry: u32,
    gender: Gender,
    score: f32,
}

/// The orders of parts a query of 1, 2 or 3 words may be in.
fn orders(words: usize) -> &'static [&'static [Part]] {
    use Part::*;
    match words {
        1 => &[&[Surname], &[Name], &[Patronymic]],
        2 => &[&[Surname, Name], &[Name, Surname], &[Name, Patronymic]],
        3 => &[&[Surname, Name, Patronymic], &[Name, Patronymic, Surname]],
        _ => &[],
    }
}

impl<'a> NameIndex<'a> {
    /// Opens an index built by [`build_name_index`].
    pub fn open(bytes: &'a [u8]) -> Result<Self, IndexError> {
        let b = Blob::parse(bytes, MAGIC)?;
        let part = |t: u8| -> Result<PartIndex<'a>, IndexError> {
            let fst = |tag: [u8; 4]| {
                Map::new(b.section(&tag)?).map_err(|e| {
                    IndexError::Format(format!("{}: {e}", String::from_utf8_lossy(&tag)))
                })
            };
            let p = PartIndex {
                keys: fst([t, b'f', b's', b't'])?,
                group_off: b.u32s(&[t, b'g', b'o', b'f'])?,
                display: b.u32s(&[t, b'd', b'i', b's'])?,
                gender: b.u32s(&[t, b'g', b'e', b'n'])?,
                weight: b.u32s(&[t, b'w', b'g', b't'])?,
                tops: fst([t, b'p', b'f', b's'])?,
                top_off: b.u32s(&[t, b'p', b'o', b'f'])?,
                top_entries: b.u32s(&[t, b'p', b't', b'p'])?,
            };
            let n = p.display.len();
            if p.gender.len() != n || p.weight.len() != n || p.group_off.len() != p.keys.len() + 1 {
                return Err(IndexError::Format(
                    "name index columns disagree in length".into(),
                ));
            }
            Ok(p)
        };
        Ok(Self {
            parts: [part(b's')?, part(b'n')?, part(b'p')?],
            strs: b.strs(b"str_")?,
            recent: Mutex::new(Recent::new(RECENT_CANDIDATE_BYTES)),
        })
    }

    /// The best `count` names for `query`, optionally only of the given
    /// parts and gender. A query that finds nothing, or any Latin query,
    /// is read again as typed on the other keyboard layout
    /// ([`crate::layout`]: `bdfyjd` is `иванов`) and as a Latin spelling
    /// ([`crate::translit::cyrillic`]: `ivanov` is `иванов`).
    pub fn suggest(
        &self,
        query: &str,
        count: usize,
        parts: Option<&[Part]>,
        gender: Option<Gender>,
    ) -> Vec<Fio<'a>> {
        // The search keeps a few more than asked (`count * 2 + 4`) and
        // would return some for none asked.
        if count == 0 {
            return Vec::new();
        }
        let out = self.suggest_as_typed(query, count, parts, gender);
        let spelt = crate::translit::cyrillic(query);
        if !out.is_empty() && spelt.is_none() {
            return out;
        }
        // The dictionaries are Cyrillic (with a few Latin forms: `Sergey`
        // finds one as typed, far below Сергей): a Latin query is a name
        // spelt in Latin or typed on the wrong layout, and found nothing
        // is the same. The likeliest reading wins, the query as typed on
        // a tie.
        [crate::layout::swap(query), spelt]
            .into_iter()
            .flatten()
            .map(|q| self.suggest_as_typed(&q, count, parts, gender))
            .fold(out, |a, b| if best(&b) > best(&a) { b } else { a })
    }

    fn suggest_as_typed(
        &self,
        query: &str,
        count: usize,
        parts: Option<&[Part]>,
        gender: Option<Gender>,
    ) -> Vec<Fio<'a>> {
        let words = query_words(query);
        if words.is_empty() || words.len() > 3 {
            return Vec::new();
        }
        let typing = ends_in_word(query);
        let genders: &[Gender] = match gender {
            Some(Gender::Male) => &[Gender::Male],
            Some(Gender::Female) => &[Gender::Female],
            _ => &[Gender::Male, Gender::Female],
        };
        let mut top: TopK<Combo> = TopK::new(count * 2 + 4);
        for &order in orders(words.len()) {
            if parts.is_some_and(|allowed| order.iter().any(|p| !allowed.contains(p))) {
                continue;
            }
            let lists: Vec<Arc<Vec<Candidate>>> = order
                .iter()
                .enumerate()
                // Kept between orders and keystrokes ([`Self::candidates`]).
                .map(|(i, &p)| self.candidates(p, &words[i], typing && i + 1 == words.len()))
                .collect();
            for &g in genders {
                let per: Vec<Vec<Candidate>> = lists
                    .iter()
                    .map(|l| {
                        l.iter()
                            .filter(|c| c.gender.agrees(g))
                            .take(PER_POSITION)
                            .copied()
                            .collect()
                    })
                    .collect();
                combine(&per, &mut |score, picks: &[Candidate]| {
                    let mut key = [u32::MAX; 3];
                    for (p, c) in order.iter().zip(picks) {
                        key[p.index()] = self.parts[p.index()].display.get(c.entry as usize);
                    }
                    let gendered = picks.iter().any(|c| c.gender != Gender::Unknown);
                    let g = if gendered { g } else { Gender::Unknown };
                    top.push(
                        score,
                        Combo {
                            key,
                            order,
                            gender: g,
                        },
                    );
                });
            }
        }
        let mut out: Vec<Fio<'a>> = Vec::new();
        for (score, Combo { key, order, gender }) in top.into_sorted() {
            let get = |p: Part| (key[p.index()] != u32::MAX).then(|| self.strs.get(key[p.index()]));
            let fio = Fio {
                surname: get(Part::Surname),
                name: get(Part::Name),
                patronymic: get(Part::Patronymic),
                order: order.to_vec(),
                gender,
                score,
            };
            if !out.iter().any(|o| o.value() == fio.value()) {
                out.push(fio);
            }
            if out.len() == count {
                break;
            }
        }
        out
    }

    /// The best forms of one part for one word, best first, at most
    /// `PER_POSITION` of each gender; kept for reuse.
    fn candidates(&self, part: Part, word: &str, last: bool) -> Arc<Vec<Candidate>> {
        Recent::get_or_make(&self.recent, (part, word.to_owned(), last), || {
            let all = self.find_candidates(part, word, last);
            let bytes = 64 + word.len() + all.capacity() * std::mem::size_of::<Candidate>();
            (Arc::new(all), bytes)
        })
    }

    /// [`Self::candidates`], found.
    fn find_candidates(&self, part: Part, word: &str, last: bool) -> Vec<Candidate> {
        let p = &self.parts[part.index()];
        let mut best: [TopK<u32>; 3] = [
            TopK::new(PER_POSITION),
            TopK::new(PER_POSITION),
            TopK::new(PER_POSITION),
        ];
        let mut offer = |entry: u32, score: f32| {
            let g = p.gender.get(entry as usize);
            best[g as usize].push(score + p.weight.f32(entry as usize), entry);
        };
        let chars = char_len(word);
        if last && chars <= TOP_PREFIX_CHARS {
            if let Some(i) = p.tops.get(word) {
                let (a, b) = (p.top_off.get(i as usize), p.top_off.get(i as usize + 1));
                for e in p.top_entries.range(a as usize, b as usize) {
                    offer(e, 0.0);
                }
            }
        } else {
            let m = Matcher::new(word, true, max_edits(chars));
            let mut seen = 0;
            m.for_each_key(&p.keys, |key, g| {
                seen += 1;
                let edits = m.edits_of(key);
                let exact = key == word.as_bytes();
                let mut adjust = -2.0 * edits as f32
                    + match (last, exact) {
                        (false, false) => -UNFINISHED,
                        (true, true) => WHOLE,
                        _ => 0.0,
                    };
                if edits == 1 && !slips::is_slip(word, key, true) {
                    adjust -= slips::UNLIKELY_TYPO_COST;
                }
                let (a, b) = (p.group_off.get(g as usize), p.group_off.get(g as usize + 1));
                for e in a..b {
                    offer(e, adjust);
                }
                seen < ENUMERATION_CAP
            });
        }
        let mut all: Vec<Candidate> = best
            .into_iter()
            .flat_map(|t| t.into_sorted())
            .map(|(score, entry)| Candidate {
                entry,
                gender: Gender::from_code(p.gender.get(entry as usize)),
                score,
            })
            .collect();
        all.sort_by(|a, b| b.score.total_cmp(&a.score));
        all
    }
}

/// The score of the first of `list`, or −∞.
fn best(list: &[Fio]) -> f32 {
    list.first().map_or(f32::NEG_INFINITY, |f| f.score)
}

/// A query's words, each cut to [`crate::text::MAX_TOKEN_CHARS`] characters.
fn query_words(query: &str) -> Vec<String> {
    tokens(query, true).iter().map(|w| capped(w)).collect()
}

/// Calls `emit` with every combination of one candidate per position.
fn combine(lists: &[Vec<Candidate>], emit: &mut dyn FnMut(f32, &[Candidate])) {
    fn go(
        lists: &[Vec<Candidate>],
        picked: &mut Vec<Candidate>,
        score: f32,
        emit: &mut dyn FnMut(f32, &[Candidate]),
    ) {
        match lists.split_first() {
            None => emit(score, picked),
            Some((first, rest)) => {
                for c in first {
                    picked.push(*c);
                    go(rest, picked, score + c.score, emit);
                    picked.pop();
                }
            }
        }
    }
    go(lists, &mut Vec::with_capacity(lists.len()), 0.0, emit)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATA: &str = r#"
{"part":"surname","text":"Иванов","gender":"m","count":6926}
{"part":"surname","text":"Иванова","gender":"f","count":5206}
{"part":"surname","text":"Петров","gender":"m","count":4000}
{"part":"surname","text":"Петрова","gender":"f","count":3500}
{"part":"surname","text":"Шевченко","gender":"u","count":3000}
{"part":"name","text":"Иван","gender":"m","count":90136}
{"part":"name","text":"Анна","gender":"f","count":80000}
{"part":"name","text":"Андрей","gender":"m","count":85000}
{"part":"name","text":"Анастасия","gender":"f","count":50000}
{"part":"name","text":"Алёна","gender":"f","count":20000}
{"part":"patronymic","text":"Иванович","gender":"m","count":128108}
{"part":"patronymic","text":"Ивановна","gender":"f","count":83965}
{"part":"patronymic","text":"Андреевна","gender":"f","count":60000}
{"part":"patronymic","text":"Андреевич","gender":"m","count":70000}
"#;

    fn ix_bytes() -> Vec<u8> {
        build_name_index(DATA.trim().as_bytes()).unwrap().0
    }

    fn values(ix: &NameIndex, q: &str) -> Vec<String> {
        ix.suggest(q, 5, None, None)
            .iter()
            .map(|f| f.value())
            .collect()
    }

    #[test]
    fn single_words_and_prefixes() {
        let b = ix_bytes();
        let ix = NameIndex::open(&b).unwrap();
        assert_eq!(values(&ix, "ив")[..2], ["Иванович", "Иван"]);
        assert_eq!(values(&ix, "иванов")[0], "Иванович");
        assert_eq!(values(&ix, "алена")[0], "Алёна");
        assert_eq!(values(&ix, "анастасй")[0], "Анастасия"); // typo
        // A whole form before its typo'd neighbours, however frequent.
        assert_eq!(values(&ix, "иванова")[..2], ["Иванова", "Иванович"]);
        assert_eq!(values(&ix, "иван")[0], "Иван");
    }

    /// A token longer than any name part is cut to its first
    /// [`crate::text::MAX_TOKEN_CHARS`] characters (its automaton would grow with it).
    #[test]
    fn overlong_tokens_are_cut() {
        let long = format!("петров {}", "ж".repeat(4000));
        let words = query_words(&long);
        assert_eq!(words[0], "петров");
        assert_eq!(words[1], "ж".repeat(crate::text::MAX_TOKEN_CHARS));
        let b = ix_bytes();
        let ix = NameIndex::open(&b).unwrap();
        assert!(ix.suggest(&long, 5, None, None).is_empty());
    }

    #[test]
    fn the_other_keyboard_layout_is_read_when_nothing_matches() {
        let b = ix_bytes();
        let ix = NameIndex::open(&b).unwrap();
        // Typed with the Latin layout on: иванов, петрова ан.
        assert_eq!(values(&ix, "bdfyjd")[0], "Иванович");
        assert_eq!(values(&ix, "Gtnhjdf Fy")[0], "Петрова Анна");
    }

    #[test]
    fn a_latin_spelling_is_read_as_cyrillic() {
        let b = ix_bytes();
        let ix = NameIndex::open(&b).unwrap();
        assert_eq!(values(&ix, "Ivanov Ivan")[0], "Иванов Иван");
        assert_eq!(values(&ix, "Petrova Anastasiya")[0], "Петрова Анастасия");
        assert_eq!(
            values(&ix, "Shevchenko Andrey Ivanovich")[0],
            "Шевченко Андрей Иванович"
        );
        assert_eq!(values(&ix, "Alyona")[0], "Алёна");
    }

    #[test]
    fn gender_agreement() {
        let b = ix_bytes();
        let ix = NameIndex::open(&b).unwrap();
        let got = values(&ix, "Петрова Ан");
        assert_eq!(got[..2], ["Петрова Анна", "Петрова Анастасия"]);
        assert!(!got.iter().any(|v| v.contains("Петрова Андрей")));
        assert_eq!(values(&ix, "Петров Ан")[0], "Петров Андрей");
        assert_eq!(values(&ix, "Иванов Анна")[0], "Иванова Анна");
        let three = ix.suggest("анна андреевна пет", 3, None, None);
        assert_eq!(three[0].value(), "Анна Андреевна Петрова");
        assert_eq!(three[0].gender, Gender::Female);
        // A unisex surname goes with both.
        assert_eq!(
            values(&ix, "шевченко ан")[..2],
            ["Шевченко Андрей", "Шевченко Анна"]
        );
    }

    #[test]
    fn restrictions() {
        let b = ix_bytes();
        let ix = NameIndex::open(&b).unwrap();
        let names = ix.suggest("ив", 5, Some(&[Part::Name]), None);
        assert_eq!(
            names.iter().map(|f| f.value()).collect::<Vec<_>>(),
            ["Иван"]
        );
        let female = ix.suggest("ан", 5, Some(&[Part::Name]), Some(Gender::Female));
        assert_eq!(
            female.iter().map(|f| f.value()).collect::<Vec<_>>(),
            ["Анна", "Анастасия"]
        );
        assert!(ix.suggest("a b c d", 5, None, None).is_empty());
    }

    #[test]
    fn case_variants_merge() {
        let data = r#"
{"part":"patronymic","text":"Иванович","gender":"m","count":100}
{"part":"patronymic","text":"ИВАНОВИЧ","gender":"u","count":5}
{"part":"name","text":"Саша","gender":"m","count":10}
{"part":"name","text":"Саша","gender":"f","count":8}
"#;
        let (b, stats) = build_name_index(data.trim().as_bytes()).unwrap();
        assert_eq!((stats.patronymics, stats.names), (1, 2));
        let ix = NameIndex::open(&b).unwrap();
        let got = ix.suggest("иванович", 5, None, None);
        assert_eq!(
            (got.len(), got[0].value(), got[0].gender),
            (1, "Иванович".to_owned(), Gender::Male)
        );
    }

    #[test]
    fn bad_records() {
        let err = |s: &str| build_name_index(s.as_bytes()).err().unwrap().to_string();
        assert!(
            err(r#"{"part":"surname","text":"X","gender":"x","count":1}"#).contains("gender \"x\"")
        );
        assert!(err(r#"{"part":"nick","text":"X","gender":"m","count":1}"#).contains("line 1"));
        assert!(
            err(r#"{"part":"name","text":"--","gender":"m","count":1}"#).contains("no letters")
        );
    }
}
