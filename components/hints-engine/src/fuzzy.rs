//! Typo-tolerant token matching: Levenshtein automata (with transpositions
//! counted as one edit) run over the FST dictionaries and over single tokens.

use crate::fstnode::View;
use crate::levenshtein::{Dfa, Distance, SINK};
use crate::recent::Recent;
use crate::slips;
use fst::Automaton;
use fst::raw::{Fst, Output};
use std::sync::{Arc, LazyLock, Mutex};

/// Edits allowed for a query token of `chars` characters: none up to 3,
/// one up to 8, two from 9. Within three letters one edit reaches most of
/// the dictionary (`san` is `sun`, `sa`, `shan`, …) and ranks noise over
/// the word meant; two edits on shorter words make the automaton walk most
/// of the dictionary's upper branches (a millisecond per word on 400k
/// surnames) and match too much to rank.
pub fn max_edits(chars: usize) -> u8 {
    match chars {
        0..=3 => 0,
        4..=8 => 1,
        _ => 2,
    }
}

/// The automaton of a token, reused if it was built recently
/// ([`crate::recent`]). Building is cheap now ([`crate::levenshtein`], a
/// few KB per automaton), but over the bench log the cache still saves 4%
/// of the instructions (3.59 → 3.46 G). Shared by the threads of a native
/// process; one per instance in the component.
fn recent_dfa(text: &str, prefix: bool, edits: u8) -> Arc<Dfa> {
    type Automata = Recent<(String, bool, u8), Arc<Dfa>>;
    static RECENT: LazyLock<Mutex<Automata>> =
        LazyLock::new(|| Mutex::new(Recent::new(RECENT_BYTES)));
    Recent::get_or_make(&RECENT, (text.to_owned(), prefix, edits), || {
        let dfa = Dfa::new(text, edits, prefix);
        let bytes = dfa.heap_bytes() + text.len();
        (Arc::new(dfa), bytes)
    })
}

/// Bytes per generation of [`recent_dfa`].
const RECENT_BYTES: usize = 2 << 20;

/// A word's first four bytes, little-endian, zero-padded when it is
/// shorter: what [`Matcher::may_match_head`] looks at.
pub fn word_head(word: &[u8]) -> u32 {
    let mut head = [0u8; 4];
    for (h, &b) in head.iter_mut().zip(word) {
        *h = b;
    }
    u32::from_le_bytes(head)
}

/// A query token compiled for matching.
///
/// The word being typed (`prefix`) matches any word that begins within the
/// edit budget. An earlier, finished token matches a whole word within the
/// budget, or, without typos, the beginning of a longer word (`иванов`
/// finds `иванова`). Allowing typos *and* completion for every token would
/// make each one expand to thousands of dictionary words.
#[derive(Clone)]
pub struct Matcher {
    /// The folded token.
    pub text: String,
    /// Whether this is the word being typed.
    pub prefix: bool,
    edits: u8,
    dfa: Arc<Dfa>,
    /// The token's first four bytes, little-endian, and a mask of those
    /// it has ([`Matcher::may_match_head`]).
    head: u32,
    head_mask: u32,
}

/// How a dictionary word matched a query token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    /// Edits between the token and the word (or the word's best prefix).
    pub edits: u8,
    /// The word is exactly the token (typed in full, no typo).
    pub exact: bool,
    /// One edit, and a likely one ([`slips::is_slip`]).
    pub slip: bool,
}

impl Matcher {
    /// A matcher for `text` allowing `edits` edits.
    pub fn new(text: &str, prefix: bool, edits: u8) -> Self {
        let dfa = recent_dfa(text, prefix, edits);
        // The bytes of the head that the token has (all four if it is long).
        let head_mask = match text.len() {
            n @ 0..4 => (1u32 << (8 * n)) - 1,
            _ => u32::MAX,
        };
        Self {
            text: text.to_owned(),
            prefix,
            edits,
            dfa,
            head: word_head(text.as_bytes()),
            head_mask,
        }
    }

    /// The edits allowed.
    pub fn edits(&self) -> u8 {
        self.edits
    }

    /// Matches one word.
    #[inline]
    pub fn check(&self, word: &str) -> Option<Hit> {
        self.check_bytes(word.as_bytes())
    }

    /// [`Matcher::check`] on the UTF-8 bytes of a word.
    #[inline]
    pub fn check_bytes(&self, word: &[u8]) -> Option<Hit> {
        // Without typos a word matches if it begins with the token, typed
        // or finished: a comparison, no automaton.
        if let Some(hit) = self.check_exact_bytes(word) {
            return Some(hit);
        }
        if self.edits == 0 {
            return None;
        }
        self.check_typo_bytes(word)
    }

    /// [`Matcher::check_bytes`] past the comparison: the automaton. Kept
    /// out of line so the comparison, inlined in hot loops, stays small.
    #[inline(never)]
    fn check_typo_bytes(&self, word: &[u8]) -> Option<Hit> {
        // Run the automaton by hand to stop at the first byte that rules
        // the word out (most words: the first or second).
        let mut state = self.dfa.initial_state();
        for &b in word {
            state = self.dfa.transition(state, b);
            if state == SINK {
                return None;
            }
        }
        match self.dfa.distance(state) {
            // Not the token itself: that began with it, above.
            Distance::Exact(edits) => Some(Hit {
                edits,
                exact: false,
                slip: edits == 1 && slips::is_slip(&self.text, word, self.prefix),
            }),
            Distance::AtLeast(_) => None,
        }
    }

    /// Whether a word beginning with `head` (its first four bytes,
    /// little-endian, zero-padded if it is shorter) may match: false only
    /// if [`Matcher::check_bytes`] (`typos`) or
    /// [`Matcher::check_exact_bytes`] would certainly find no hit, so a
    /// caller can skip reading the word itself.
    ///
    /// ```text
    /// token "mosc", 1 edit:  "mosk…" may match; "pari…" cannot
    /// ```
    #[inline]
    pub fn may_match_head(&self, head: u32, typos: bool) -> bool {
        // A word that begins with the token begins with its first bytes.
        if (head ^ self.head) & self.head_mask == 0 {
            return true;
        }
        if !typos || self.edits == 0 {
            return false;
        }
        let head = head.to_le_bytes();
        // A matching word never leads the automaton to the sink, so
        // neither does its beginning. (A zero byte ends a short word.)
        let mut state = self.dfa.initial_state();
        for &b in &head {
            if b == 0 {
                break;
            }
            state = self.dfa.transition(state, b);
            if state == SINK {
                return false;
            }
        }
        true
    }

    /// [`Matcher::check_bytes`] allowing no typo: the word begins with the
    /// token (`exact` if it is the token). A comparison, no automaton.
    #[inline]
    pub fn check_exact_bytes(&self, word: &[u8]) -> Option<Hit> {
        let text = self.text.as_bytes();
        begins_with(word, text).then_some(Hit {
            edits: 0,
            exact: word.len() == text.len(),
            slip: false,
        })
    }

    /// The distance of a dictionary key the FST search accepted.
    pub fn edits_of(&self, key: &[u8]) -> u8 {
        if !self.prefix && key.starts_with(self.text.as_bytes()) {
            return 0;
        }
        match self.dfa.eval(key) {
            Distance::Exact(d) => d,
            Distance::AtLeast(_) => 0, // accepted as an exact beginning
        }
    }

    /// Calls `f(key, value)` for every key of `map` this token matches,
    /// until `f` returns false: [`Matcher::for_each_exact`], then
    /// [`Matcher::for_each_typo`].
    pub fn for_each_key(&self, map: &fst::Map<&[u8]>, mut f: impl FnMut(&[u8], u64) -> bool) {
        if self.for_each_exact(map, &mut f) {
            self.for_each_typo(map, f);
        }
    }

    /// The keys the token matches without typos: its completions (the
    /// word being typed) or itself and the words it begins (a finished
    /// one). False if `f` stopped.
    pub fn for_each_exact(
        &self,
        map: &fst::Map<&[u8]>,
        mut f: impl FnMut(&[u8], u64) -> bool,
    ) -> bool {
        walk(
            map.as_fst(),
            &fst::automaton::AlwaysMatch,
            self.text.as_bytes(),
            &mut f,
        )
    }

    /// The keys the token matches only with typos, until `f` returns false.
    ///
    /// Only keys beginning with the token's first or second letter are
    /// visited (a typo in the first letter other than a swap with the
    /// second, or a dropped first letter, is not found here but by
    /// [`Matcher::for_each_first_letter_typo`]). Letting the first
    /// letters vary makes the automaton walk every two- and three-letter
    /// branch of the dictionary: milliseconds instead of microseconds on
    /// 400k words. Candidates found another way (through another token) are
    /// still checked with the full budget by [`Matcher::check`]. The
    /// automaton does not enter the exact keys' branch at all.
    pub fn for_each_typo(&self, map: &fst::Map<&[u8]>, mut f: impl FnMut(&[u8], u64) -> bool) {
        if self.edits == 0 {
            return;
        }
        let automaton = LevAutomaton {
            dfa: &self.dfa,
            begins: &[],
            exclude: self.text.as_bytes(),
        };
        for lead in self.typo_leads() {
            if !walk_with(
                map.as_fst(),
                &automaton,
                lead,
                &mut f,
                &mut |s| automaton.few(s),
                &[],
            ) {
                return;
            }
        }
    }

    /// The first letters (UTF-8) under which [`Matcher::for_each_typo`]
    /// walks: the token's first, and its second for one edit. With two,
    /// the second's branch is as expensive as the first's and rarely holds
    /// the word meant.
    fn typo_leads(&self) -> Vec<&[u8]> {
        let mut leads: Vec<&[u8]> = self
            .text
            .char_indices()
            .take(if self.edits == 1 { 2 } else { 1 })
            .map(|(i, c)| &self.text.as_bytes()[i..i + c.len_utf8()])
            .collect();
        leads.dedup();
        leads
    }

    /// The keys the token matches only with a typo in its first letter,
    /// which [`Matcher::for_each_typo`] leaves out: every branch of the
    /// dictionary it does not walk (`hahrinav` → `shahrinav`, `varghat` →
    /// `barghat`), until `f` returns false.
    ///
    /// Dearer than the usual typo walk (every first letter of the
    /// dictionary is tried, though the automaton has spent its edit after
    /// one letter and dies within a few more): meant for when the usual
    /// walks found too little. The rest of the word must then be exact,
    /// even where two edits are allowed: with one left, each first letter
    /// would open a walk as wide as the usual one.
    pub fn for_each_first_letter_typo(
        &self,
        map: &fst::Map<&[u8]>,
        mut f: impl FnMut(&[u8], u64) -> bool,
    ) {
        if self.edits == 0 {
            return;
        }
        let one_edit = (self.edits > 1).then(|| Matcher::new(&self.text, self.prefix, 1));
        let walked = self.typo_leads();
        let automaton = LevAutomaton {
            dfa: &one_edit.as_ref().unwrap_or(self).dfa,
            begins: &[],
            exclude: self.text.as_bytes(),
        };
        automaton.walk_all(map, &mut f, &walked);
    }

    /// Every key of `map` within the token's budget of its text as a whole
    /// (a typo in the first letter included), until `f` returns false. For
    /// small maps: every branch is entered.
    pub fn for_each_near(&self, map: &fst::Map<&[u8]>, mut f: impl FnMut(&[u8], u64) -> bool) {
        let automaton = LevAutomaton {
            dfa: &self.dfa,
            begins: &[],
            exclude: &[],
        };
        automaton.walk_all(map, &mut f, &[]);
    }

    /// The automaton to run over an FST: every key the token matches.
    pub fn automaton(&self) -> LevAutomaton<'_> {
        LevAutomaton {
            dfa: &self.dfa,
            begins: if self.prefix {
                &[]
            } else {
                self.text.as_bytes()
            },
            exclude: &[],
        }
    }
}

/// A Levenshtein DFA as an [`fst::Automaton`], united with "begins with
/// `begins`" (empty: no such branch), minus "begins with `exclude`"
/// (empty: nothing excluded).
pub struct LevAutomaton<'a> {
    dfa: &'a Dfa,
    begins: &'a [u8],
    exclude: &'a [u8],
}

/// Bytes of `begins` matched so far; `DIVERGED` once a byte differed.
const DIVERGED: u32 = u32::MAX;

impl Automaton for LevAutomaton<'_> {
    /// (DFA state, bytes of `begins` matched, bytes of `exclude` matched)
    type State = (u32, u32, u32);

    fn start(&self) -> Self::State {
        let from = |s: &[u8]| if s.is_empty() { DIVERGED } else { 0 };
        (
            self.dfa.initial_state(),
            from(self.begins),
            from(self.exclude),
        )
    }

    #[inline(always)]
    fn is_match(&self, &(state, begins, exclude): &Self::State) -> bool {
        exclude as usize != self.exclude.len()
            && (begins as usize == self.begins.len()
                || matches!(self.dfa.distance(state), Distance::Exact(_)))
    }

    #[inline(always)]
    fn can_match(&self, &(state, begins, exclude): &Self::State) -> bool {
        exclude as usize != self.exclude.len() && (state != SINK || begins != DIVERGED)
    }

    #[inline(always)]
    fn accept(&self, &(state, begins, exclude): &Self::State, byte: u8) -> Self::State {
        (
            self.dfa.transition(state, byte),
            advance(self.begins, begins, byte),
            advance(self.exclude, exclude, byte),
        )
    }
}

/// Bytes of `s` matched after `byte`, given `m` before; once all of `s` is
/// matched it stays so (every longer key begins with `s`).
#[inline(always)]
fn advance(s: &[u8], m: u32, byte: u8) -> u32 {
    match m {
        DIVERGED => DIVERGED,
        m if m as usize == s.len() => m,
        m if s[m as usize] == byte => m + 1,
        _ => DIVERGED,
    }
}

impl LevAutomaton<'_> {
    /// Calls `f` for every key of `map` the automaton matches, from the
    /// root (every first letter), but for those that begin with one of
    /// `skip`; until `f` returns false.
    fn walk_all(
        &self,
        map: &fst::Map<&[u8]>,
        f: &mut impl FnMut(&[u8], u64) -> bool,
        skip: &[&[u8]],
    ) {
        walk_with(map.as_fst(), self, &[], f, &mut |s| self.few(s), skip);
    }

    /// The only bytes that can follow `state`, if there are few.
    fn few(&self, &(state, begins, _): &(u32, u32, u32)) -> Option<Few> {
        if begins != DIVERGED {
            return None; // the "begins with" branch takes other bytes
        }
        let (bytes, len) = self.dfa.live_bytes(state)?;
        Some(Few {
            bytes,
            len: len as u8,
        })
    }
}

/// The bytes that can follow a state of a Levenshtein DFA, when there are
/// at most three (ascending, [`Dfa::live_bytes`]): a walk then looks them
/// up in a node instead of reading each of its transitions. Where the
/// edits are spent, only the word's next letter (or two) can follow.
#[derive(Clone, Copy)]
struct Few {
    bytes: [u8; 3],
    len: u8,
}

/// Calls `f(key, value)` for every key of `fst` that begins with `lead`
/// and that `aut` matches, in key order, until `f` returns false (then
/// returns false).
///
/// The same keys in the same order as `fst`'s own automaton stream over
/// that range, with less work per dead branch: the stream decodes the
/// target node of every transition and stacks it before it asks the
/// automaton whether the branch can match; here a transition the
/// automaton rules out costs a read of its input byte and one automaton
/// step: no decoding, no node and no stack frame. A Levenshtein automaton
/// rules out most of them (most of a node's letters are typos the budget
/// no longer allows): the stream was three quarters of the instructions
/// of the bench's query log, and this walk took 37% fewer in all. Nodes
/// are read by [`View`] (`fstnode.rs`), which works out a node's layout
/// once instead of at every transition.
fn walk<A: Automaton>(
    fst: &Fst<&[u8]>,
    aut: &A,
    lead: &[u8],
    f: &mut impl FnMut(&[u8], u64) -> bool,
) -> bool {
    walk_with(fst, aut, lead, f, &mut |_| None, &[])
}

/// [`walk`], told by `few` the only bytes that can follow a state when
/// there are few of them ([`Few`]), and leaving out the keys that begin
/// with one of `skip` (each longer than `lead`).
///
/// Never inlined: inside its callers' large bodies Cranelift spilled even
/// the heap base in this loop (1% more instructions in wasm).
#[inline(never)]
fn walk_with<A: Automaton>(
    fst: &Fst<&[u8]>,
    aut: &A,
    lead: &[u8],
    f: &mut impl FnMut(&[u8], u64) -> bool,
    few: &mut impl FnMut(&A::State) -> Option<Few>,
    skip: &[&[u8]],
) -> bool {
    struct Frame<S> {
        node: View,
        /// The next transition (or byte of `few`) to try.
        next: usize,
        /// The only bytes that can follow, if known.
        few: Option<Few>,
        state: S,
        out: Output,
    }
    let indexed = fst_version(fst) >= 2;
    let data = fst.as_bytes();
    assert!(data.len() < u32::MAX as usize, "an FST of 4 GiB or more");
    let mut node = View::at(data, indexed, fst.root().addr());
    let mut state = aut.start();
    let mut out = Output::zero();
    for &b in lead {
        if !aut.can_match(&state) {
            return true;
        }
        let Some(i) = node.find_input(data, b) else {
            return true;
        };
        let (o, addr) = node.target(data, i);
        state = aut.accept(&state, b);
        out = out.cat(o);
        node = View::at(data, indexed, addr);
    }
    let mut key = lead.to_vec();
    if node.is_final() && aut.is_match(&state) && !f(&key, out.cat(node.final_output(data)).value())
    {
        return false;
    }
    if !aut.can_match(&state) {
        return true;
    }
    let mut stack = vec![Frame {
        node,
        next: 0,
        few: few(&state),
        state,
        out,
    }];
    while let Some(top) = stack.last_mut() {
        let i = match top.few {
            Some(Few { bytes, len }) if top.next < len as usize => {
                top.next += 1;
                match top.node.find_input(data, bytes[top.next - 1]) {
                    Some(i) => i,
                    None => continue,
                }
            }
            None if top.next < top.node.len() => {
                top.next += 1;
                top.next - 1
            }
            _ => {
                stack.pop();
                key.pop();
                continue;
            }
        };
        // Most transitions lead where the automaton cannot go: read their
        // input alone, and their target and output only for the others.
        let inp = top.node.input(data, i);
        let state = aut.accept(&top.state, inp);
        let matches = aut.is_match(&state);
        let descend = aut.can_match(&state);
        if !matches && !descend {
            continue;
        }
        let (o, addr) = top.node.target(data, i);
        key.push(inp);
        if skip.contains(&key.as_slice()) {
            key.pop();
            continue;
        }
        let out = top.out.cat(o);
        let node = View::at(data, indexed, addr);
        if matches && node.is_final() && !f(&key, out.cat(node.final_output(data)).value()) {
            return false;
        }
        if descend {
            stack.push(Frame {
                node,
                next: 0,
                few: few(&state),
                state,
                out,
            });
        } else {
            key.pop();
        }
    }
    true
}

/// The format version of `fst` (its first eight bytes, little-endian).
pub(crate) fn fst_version(fst: &Fst<&[u8]>) -> u64 {
    let head = fst.as_bytes().get(..8).and_then(|b| b.try_into().ok());
    head.map_or(0, u64::from_le_bytes)
}

/// Whether `word` begins with `text`: a loop the compiler keeps inline.
/// Words are short and most differ in their first byte; `starts_with`
/// calls `memcmp`, which in wasm is an out-of-line byte loop behind a call
/// (0.8% fewer instructions natively over the bench log).
#[inline]
fn begins_with(word: &[u8], text: &[u8]) -> bool {
    if word.len() < text.len() {
        return false;
    }
    let mut i = 0;
    while i < text.len() {
        if word[i] != text[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_and_prefixes() {
        let m = Matcher::new("моск", true, 1);
        assert_eq!(
            m.check("москва"),
            Some(Hit {
                edits: 0,
                exact: false,
                slip: false
            })
        );
        assert_eq!(
            m.check("моск"),
            Some(Hit {
                edits: 0,
                exact: true,
                slip: false
            })
        );
        assert_eq!(m.check("мсоква").map(|h| h.edits), Some(1)); // transposition
        assert_eq!(m.check("минск"), None);
        let whole = Matcher::new("хабаровская", false, 2);
        assert_eq!(whole.check("хабаровская").map(|h| h.edits), Some(0));
        assert_eq!(whole.check("хобаровскя").map(|h| h.edits), Some(2));
        assert_eq!(
            whole.check("хабаровскаяя"),
            Some(Hit {
                edits: 0,
                exact: false,
                slip: false
            })
        );
        assert_eq!(whole.check("хабаровский-тупик"), None);
        // A finished word also begins longer words, without typos.
        assert_eq!(
            whole.check("хабаровская-2"),
            Some(Hit {
                edits: 0,
                exact: false,
                slip: false
            })
        );
        let finished = Matcher::new("иванов", false, 1);
        assert_eq!(
            finished.check("иванова"),
            Some(Hit {
                edits: 0,
                exact: false,
                slip: false
            })
        );
        assert_eq!(finished.check("ивонов").map(|h| h.edits), Some(1));
        assert_eq!(finished.check("ивоноваа"), None);
    }

    #[test]
    fn automaton_over_an_fst() {
        let set = fst::Set::from_iter(["иван", "иванов", "иванова", "ивонов", "петров"]).unwrap();
        let find = |m: &Matcher| {
            let mut out = Vec::new();
            let mut s = fst::IntoStreamer::into_stream(set.search(m.automaton()));
            while let Some(k) = fst::Streamer::next(&mut s) {
                out.push(String::from_utf8(k.to_vec()).unwrap());
            }
            out
        };
        assert_eq!(
            find(&Matcher::new("иванов", false, 1)),
            ["иванов", "иванова", "ивонов"]
        );
        assert_eq!(
            find(&Matcher::new("иванов", false, 0)),
            ["иванов", "иванова"]
        );
        assert_eq!(
            find(&Matcher::new("ивоно", true, 1)),
            ["иванов", "иванова", "ивонов"]
        );
    }

    /// A word's first bytes never rule it out where the whole word would
    /// match ([`Matcher::may_match_head`]).
    #[test]
    fn heads_never_rule_out_a_match() {
        // Every word of up to five letters over an alphabet of one-, two-
        // and three-byte characters, against tokens of every edit budget.
        let letters = ['a', 'b', 'о', 'к', '€'];
        let mut words = vec![String::new()];
        for len in 1..=5 {
            let last: Vec<String> = words
                .iter()
                .filter(|w| w.chars().count() == len - 1)
                .cloned()
                .collect();
            for w in last {
                for c in letters {
                    words.push(format!("{w}{c}"));
                }
            }
        }
        let (mut ruled_out, mut checked) = (0, 0);
        for (text, prefix, edits) in [
            ("ab", true, 0),
            ("abо", true, 0),
            ("abоa", false, 1),
            ("оaк", true, 1),
            ("€aк€", true, 1),
            ("abоab", true, 2),
            ("ококо", false, 2),
        ] {
            let m = Matcher::new(text, prefix, edits);
            for w in &words {
                let head = word_head(w.as_bytes());
                for typos in [false, true] {
                    let hit = if typos {
                        m.check_bytes(w.as_bytes())
                    } else {
                        m.check_exact_bytes(w.as_bytes())
                    };
                    let may = m.may_match_head(head, typos);
                    assert!(hit.is_none() || may, "{text} {edits} rules out {w}");
                    checked += 1;
                    ruled_out += usize::from(!may);
                }
            }
        }
        // And it does rule most words out.
        assert!(ruled_out * 2 > checked, "{ruled_out} of {checked}");
    }

    /// `walk` yields exactly what `fst`'s stream yields over the keys that
    /// begin with the lead, for exact and typo automata.
    #[test]
    fn walk_equals_the_fst_stream() {
        use fst::{IntoStreamer, Streamer};
        let mut words: Vec<String> = [
            "иван",
            "иванов",
            "иванова",
            "ивонов",
            "ивнов",
            "вианов",
            "петров",
            "петрова",
            "пётр",
            "moscow",
            "moscou",
            "mosco",
            "moskva",
            "omsk",
            "mos",
            "m",
            "москва",
            "хабаровская",
            "хабаровский",
            "бабаровская",
        ]
        .iter()
        .map(|w| w.to_string())
        .collect();
        // Many neighbours of one word: every one-letter change of "москва".
        let base: Vec<char> = "москва".chars().collect();
        for i in 0..base.len() {
            for c in ['а', 'о', 'к', 'с', 'x'] {
                let mut w = base.clone();
                w[i] = c;
                words.push(w.into_iter().collect());
            }
        }
        words.sort();
        words.dedup();
        let map =
            fst::Map::from_iter(words.iter().enumerate().map(|(i, w)| (w, i as u64))).unwrap();
        let map = fst::Map::new(map.as_fst().as_bytes()).unwrap();
        type Keys = Vec<(Vec<u8>, u64)>;
        fn collect(out: &mut Keys) -> impl FnMut(&[u8], u64) -> bool + '_ {
            move |k, v| {
                out.push((k.to_vec(), v));
                true
            }
        }
        let by_stream = |search: fst::map::StreamBuilder<'_, LevAutomaton<'_>>| {
            let mut out = Vec::new();
            let mut s = search.into_stream();
            while let Some((k, v)) = s.next() {
                out.push((k.to_vec(), v));
            }
            out
        };
        for (text, prefix, edits) in [
            ("москва", true, 1),
            ("москва", false, 2),
            ("моск", true, 1),
            ("mosc", true, 1),
            ("ivanov", false, 1),
            ("иванов", false, 1),
            ("петров", true, 2),
        ] {
            let m = Matcher::new(text, prefix, edits);
            for lead in ["м", "и", "m", "п", "мо", "ив"] {
                let aut = LevAutomaton {
                    dfa: &m.dfa,
                    begins: &[],
                    exclude: text.as_bytes(),
                };
                let mut walked = Keys::new();
                walk(
                    map.as_fst(),
                    &aut,
                    lead.as_bytes(),
                    &mut collect(&mut walked),
                );
                let mut hi = lead.as_bytes().to_vec();
                *hi.last_mut().unwrap() += 1;
                // The same walk looking up only the live bytes where the
                // automaton has few (as `for_each_typo` does).
                let mut by_few = Keys::new();
                walk_with(
                    map.as_fst(),
                    &aut,
                    lead.as_bytes(),
                    &mut collect(&mut by_few),
                    &mut |s| aut.few(s),
                    &[],
                );
                let streamed = by_stream(map.search(aut).ge(lead).lt(&hi));
                assert_eq!(walked, streamed, "{text} {prefix} {edits} under {lead}");
                assert_eq!(
                    by_few, streamed,
                    "{text} {prefix} {edits} under {lead}, live bytes"
                );
            }
            let mut exact = Keys::new();
            m.for_each_exact(&map, collect(&mut exact));
            let want: Keys = words
                .iter()
                .enumerate()
                .filter(|(_, w)| w.starts_with(text))
                .map(|(i, w)| (w.as_bytes().to_vec(), i as u64))
                .collect();
            assert_eq!(exact, want, "completions of {text}");
        }
        // The first-letter walk: what one edit finds outside the usual
        // walk's branches, in key order.
        for (text, edits) in [
            ("москва", 1),
            ("абаровская", 2),
            ("xосква", 1),
            ("mosco", 1),
        ] {
            let m = Matcher::new(text, true, edits);
            let one = Matcher::new(text, true, 1);
            let leads = m.typo_leads();
            let mut got = Keys::new();
            m.for_each_first_letter_typo(&map, collect(&mut got));
            let want: Keys = by_stream(map.search(LevAutomaton {
                dfa: &one.dfa,
                begins: &[],
                exclude: text.as_bytes(),
            }))
            .into_iter()
            .filter(|(k, _)| !leads.iter().any(|l| k.starts_with(l)))
            .collect();
            assert_eq!(got, want, "first-letter typos of {text}");
            assert!(
                !got.is_empty() || text == "mosco",
                "{text}: nothing to compare"
            );
        }
        // A typo walk finds something here, so the comparison is not empty.
        let m = Matcher::new("москва", true, 1);
        let mut typos = Vec::new();
        m.for_each_typo(&map, |k, _| {
            typos.push(String::from_utf8(k.to_vec()).unwrap());
            true
        });
        assert!(typos.contains(&"моаква".to_string()), "{typos:?}");
        assert!(
            !typos.contains(&"москва".to_string()),
            "exact keys are excluded"
        );
    }

    #[test]
    fn edit_budget() {
        assert_eq!(max_edits(2), 0);
        assert_eq!(max_edits(3), 0);
        assert_eq!(max_edits(4), 1);
        assert_eq!(max_edits(8), 1);
        assert_eq!(max_edits(9), 2);
        assert_eq!(max_edits(12), 2);
    }
}
