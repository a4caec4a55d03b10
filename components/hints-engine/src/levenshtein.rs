//! Levenshtein automata over UTF-8 bytes, with a swap of two neighbouring
//! characters counted as one edit, built from parametric tables.
//!
//! A Levenshtein automaton's states, seen from the query position they
//! have reached, take only a few shapes whatever the query: which
//! positions around it are still alive, with how many edits spent (Schulz
//! and Mihov, "Fast string correction with Levenshtein automata", 2002).
//! The shapes and how each moves on a character are worked out once per
//! edit budget ([`Parametric`]); a character only matters through which
//! of the next `2 * edits + 1` query characters it equals (its
//! *characteristic vector*). A query's automaton ([`Dfa`]) is then a walk
//! over (shape, position) pairs, one table lookup per transition.
//!
//! This is the construction of the `levenshtein_automata` crate (whose
//! automata these agree with: a test runs both), laid out for building
//! one automaton per keystroke. The crate fills a 256-entry row of `u32`
//! for every state (71 states, 73 KB, on the hint bench's average query,
//! grown by reallocation): 12% of the engine's instructions over the bench
//! log went to building and copying rows. Here bytes map to classes (each
//! byte of the query's text, plus five for the other bytes by UTF-8
//! role), so a row is a few entries long and an automaton a few
//! kilobytes: the log's instructions fell by 6.4% (3.69 → 3.46 G, one
//! pass), with the same suggestions.
//!
//! One difference, on purpose: the dead state keeps every byte, where the
//! crate's takes the first byte of a multi-byte character to a state that
//! returns to it; walks stop a byte sooner.
//!
//! ```
//! use hints_engine::levenshtein::{Distance, Dfa};
//!
//! let dfa = Dfa::new("moscow", 1, false);
//! assert_eq!(dfa.eval(b"moscow"), Distance::Exact(0));
//! assert_eq!(dfa.eval(b"mocsow"), Distance::Exact(1)); // a swap is one edit
//! assert_eq!(dfa.eval(b"mscw"), Distance::AtLeast(2));
//! let prefix = Dfa::new("mosk", 1, true);
//! assert_eq!(prefix.eval(b"moscow"), Distance::Exact(1)); // begins within one edit
//! ```

use std::collections::HashMap;
use std::sync::OnceLock;

/// The edit distance an automaton reports for its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distance {
    /// Within the budget: exactly this many edits.
    Exact(u8),
    /// Over the budget: at least this many.
    AtLeast(u8),
}

/// The state every dead input ends in.
pub const SINK: u32 = 0;

/// Largest edit budget with tables ([`Dfa::new`] clamps to it).
pub const MAX_EDITS: u8 = 2;

/// A state of the nondeterministic automaton: `offset` query characters
/// consumed with `edits` spent; `swap` if the last character read may be
/// the first half of a swap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct NfaState {
    offset: u32,
    edits: u8,
    swap: bool,
}

impl NfaState {
    /// Whether every input `other` accepts, `self` accepts within as few
    /// edits (so `other` adds nothing next to `self`).
    fn subsumes(self, other: NfaState) -> bool {
        let apart = self.offset.abs_diff(other.offset);
        let reach = u32::from(self.edits) + apart;
        if self.swap || !other.swap {
            u32::from(other.edits) >= reach
        } else {
            u32::from(other.edits) > reach
        }
    }
}

/// A set of NFA states with none subsumed by another, sorted.
type Shape = Vec<NfaState>;

fn add(shape: &mut Shape, s: NfaState) {
    if shape.iter().any(|t| t.subsumes(s)) {
        return;
    }
    shape.retain(|t| !s.subsumes(*t));
    shape.push(s);
}

/// The NFA's step from `s` on a character whose characteristic vector
/// (relative to `s.offset`) is `chi`.
fn step(s: NfaState, chi: u32, max: u8, out: &mut Shape) {
    let bit = |i: u8| chi >> i & 1 == 1;
    if s.edits < max {
        // Insertion (the character is extra) and substitution.
        add(
            out,
            NfaState {
                offset: s.offset,
                edits: s.edits + 1,
                swap: false,
            },
        );
        add(
            out,
            NfaState {
                offset: s.offset + 1,
                edits: s.edits + 1,
                swap: false,
            },
        );
        // Deleting d query characters, then a match.
        for d in 1..=max - s.edits {
            if bit(d) {
                add(
                    out,
                    NfaState {
                        offset: s.offset + 1 + u32::from(d),
                        edits: s.edits + d,
                        swap: false,
                    },
                );
            }
        }
        // The first half of a swap: the character is the next one but one.
        if bit(1) {
            add(
                out,
                NfaState {
                    offset: s.offset,
                    edits: s.edits + 1,
                    swap: true,
                },
            );
        }
    }
    if bit(0) {
        add(
            out,
            NfaState {
                offset: s.offset + 1,
                edits: s.edits,
                swap: false,
            },
        );
    }
    if s.swap && bit(0) {
        // The second half of a swap.
        add(
            out,
            NfaState {
                offset: s.offset + 2,
                edits: s.edits,
                swap: false,
            },
        );
    }
}

/// The shapes of one edit budget and how they move.
struct Parametric {
    max: u8,
    /// `2 * max + 1`: how many query characters a state can see.
    diameter: usize,
    /// Shape × characteristic vector → (shape, how far the position moves).
    moves: Vec<(u32, u32)>,
    /// Shape × characters left in the query (< `diameter`) → edits (over
    /// `max` if the query cannot be finished from there).
    edits: Vec<u8>,
}

impl Parametric {
    fn of(max: u8) -> &'static Parametric {
        static TABLES: [OnceLock<Parametric>; MAX_EDITS as usize + 1] =
            [OnceLock::new(), OnceLock::new(), OnceLock::new()];
        TABLES[max as usize].get_or_init(|| Parametric::build(max))
    }

    fn build(max: u8) -> Parametric {
        let diameter = 2 * max as usize + 1;
        let mut shapes: Vec<Shape> = vec![
            Vec::new(),
            vec![NfaState {
                offset: 0,
                edits: 0,
                swap: false,
            }],
        ];
        let mut ids: HashMap<Shape, u32> = shapes.iter().cloned().zip(0..).collect();
        let mut moves = Vec::new();
        let mut i = 0;
        while i < shapes.len() {
            for chi in 0..1u32 << diameter {
                let mut next = Shape::new();
                for &s in &shapes[i] {
                    step(s, chi >> s.offset & ((1 << diameter) - 1), max, &mut next);
                }
                // Normalize: positions relative to the lowest.
                let low = next.iter().map(|s| s.offset).min().unwrap_or(0);
                for s in &mut next {
                    s.offset -= low;
                }
                next.sort();
                let id = *ids.entry(next.clone()).or_insert_with(|| {
                    shapes.push(next);
                    shapes.len() as u32 - 1
                });
                moves.push((id, if id == 0 { 0 } else { low }));
            }
            i += 1;
        }
        let edits = shapes
            .iter()
            .flat_map(|shape| {
                (0..diameter as u32).map(move |left| {
                    shape
                        .iter()
                        .map(|s| s.edits as u32 + left.abs_diff(s.offset))
                        .filter(|&e| e <= max as u32)
                        .min()
                        .unwrap_or(max as u32 + 1) as u8
                })
            })
            .collect();
        Parametric {
            max,
            diameter,
            moves,
            edits,
        }
    }

    /// Edits of `shape` with `left` query characters still to read.
    fn edits_at(&self, shape: u32, left: usize) -> u8 {
        if shape == 0 || left >= self.diameter {
            self.max + 1
        } else {
            self.edits[shape as usize * self.diameter + left]
        }
    }

    /// Whether no continuation can lower the edits of `shape` at `left`:
    /// for a prefix automaton, every longer input matches as well.
    fn is_prefix_sink(&self, shape: u32, left: usize) -> bool {
        if shape == 0 {
            return true;
        }
        if left >= self.diameter {
            return false;
        }
        let row = &self.edits[shape as usize * self.diameter..][..self.diameter];
        row[left] <= self.max && row[..left].iter().all(|&e| e >= row[left])
    }
}

/// The byte classes by UTF-8 role, for bytes not in the query.
const ASCII: u8 = 0;
const CONTINUATION: u8 = 1;
const LEAD2: u8 = 2;
const LEAD3: u8 = 3;
const LEAD4: u8 = 4;
const ROLES: usize = 5;

/// [`role`] of every byte.
const ROLE_OF: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = role(b as u8);
        b += 1;
    }
    t
};

const fn role(b: u8) -> u8 {
    match b {
        0x00..=0x7f => ASCII,
        0x80..=0xbf => CONTINUATION,
        0xc0..=0xdf => LEAD2,
        0xe0..=0xef => LEAD3,
        0xf0..=0xff => LEAD4,
    }
}

/// Continuation bytes a lead byte of role `r` is followed by.
fn continuations(r: u8) -> u32 {
    match r {
        LEAD2 => 1,
        LEAD3 => 2,
        LEAD4 => 3,
        _ => 0,
    }
}

/// A deterministic Levenshtein automaton over UTF-8 bytes for one query.
///
/// States are offsets into one table: a state's row holds its successor
/// for each byte class, then its distance, then the bytes that keep it
/// alive if there are at most three ([`Dfa::live_bytes`]). [`SINK`] is the
/// dead state.
#[derive(Clone, Debug)]
pub struct Dfa {
    class: [u8; 256],
    /// Row length: the classes, the distance slot and the live-bytes slot.
    stride: u32,
    table: Vec<u32>,
    initial: u32,
}

/// Distance slot of a state that is over the budget (or mid-character).
const OVER: u32 = 0x100;

/// Live-bytes slot of a state that more than three bytes keep alive.
const MANY: u32 = u32::MAX;

impl Dfa {
    /// The automaton of `query` allowing `edits` edits (at most
    /// [`MAX_EDITS`]): with `prefix`, an input matches if it *begins* with
    /// something within the budget, and its distance is the least over
    /// those beginnings.
    pub fn new(query: &str, edits: u8, prefix: bool) -> Dfa {
        Builder::new(query, edits.min(MAX_EDITS), prefix).build()
    }

    /// Where every input starts.
    #[inline]
    pub fn initial_state(&self) -> u32 {
        self.initial
    }

    /// The state after `byte`.
    #[inline]
    pub fn transition(&self, state: u32, byte: u8) -> u32 {
        self.table[(state + u32::from(self.class[byte as usize])) as usize]
    }

    /// The distance of the input that led to `state`.
    #[inline]
    pub fn distance(&self, state: u32) -> Distance {
        let d = self.table[(state + self.stride - 2) as usize];
        if d & OVER == 0 {
            Distance::Exact(d as u8)
        } else {
            Distance::AtLeast(d as u8)
        }
    }

    /// The bytes (ascending, at most three) after which `state` is not
    /// dead, if there are so few: where the edits are spent, only the
    /// query's next character or two. A walk over a dictionary then looks
    /// these up instead of reading every transition of a node.
    #[inline]
    pub fn live_bytes(&self, state: u32) -> Option<([u8; 3], usize)> {
        let v = self.table[(state + self.stride - 1) as usize];
        let [len, a, b, c] = v.to_le_bytes();
        (v != MANY).then_some(([a, b, c], len as usize))
    }

    /// The distance of a whole input.
    pub fn eval(&self, input: &[u8]) -> Distance {
        let mut state = self.initial;
        for &b in input {
            state = self.transition(state, b);
        }
        self.distance(state)
    }

    /// Bytes the automaton holds.
    pub fn heap_bytes(&self) -> usize {
        self.table.len() * 4 + 256
    }
}

/// A [`Dfa`] being built.
struct Builder<'p> {
    p: &'p Parametric,
    chars: Vec<char>,
    /// The query's distinct characters, each with the positions it is at
    /// (the first 64), and the query's distinct bytes.
    alphabet: Vec<(char, u64)>,
    own: Vec<u8>,
    prefix: bool,
    class: [u8; 256],
    stride: usize,
    table: Vec<u32>,
    /// State of each (shape, position), 0 if not made yet.
    at_ids: Vec<u32>,
    /// Per row (by row number): the states 1, 2 and 3 continuation bytes
    /// before it, 0 if not made yet.
    before_ids: Vec<[u32; 3]>,
    /// Rows of parametric states still to fill.
    todo: Vec<(u32, u32, u32)>,
}

impl<'p> Builder<'p> {
    fn new(query: &str, edits: u8, prefix: bool) -> Self {
        let p = Parametric::of(edits);
        let mut class = ROLE_OF;
        let mut own = Vec::new();
        for &b in query.as_bytes() {
            if class[b as usize] < ROLES as u8 {
                class[b as usize] = (ROLES + own.len()) as u8;
                own.push(b);
            }
        }
        let chars: Vec<char> = query.chars().collect();
        let mut alphabet: Vec<(char, u64)> = Vec::with_capacity(chars.len());
        for (i, &c) in chars.iter().enumerate() {
            let bit = if i < 64 { 1 << i } else { 0 };
            match alphabet.iter_mut().find(|(a, _)| *a == c) {
                Some((_, mask)) => *mask |= bit,
                None => alphabet.push((c, bit)),
            }
        }
        let shapes = p.moves.len() >> p.diameter;
        Builder {
            p,
            at_ids: vec![0; shapes * (chars.len() + 1)],
            chars,
            alphabet,
            prefix,
            class,
            // The classes, the distance, the live bytes.
            stride: ROLES + own.len() + 2,
            own,
            table: Vec::with_capacity(128 * (ROLES + 1 + query.len())),
            before_ids: Vec::with_capacity(128),
            todo: Vec::new(),
        }
    }

    /// A new row whose transitions all go to `to`, with distance `dist`.
    fn row(&mut self, to: u32, dist: u32) -> u32 {
        let id = self.table.len() as u32;
        self.table.resize(self.table.len() + self.stride, to);
        self.table[id as usize + self.stride - 2] = dist;
        self.before_ids.push([0; 3]);
        id
    }

    /// The state of parametric `shape` at query position `offset`.
    #[inline]
    fn at(&mut self, shape: u32, offset: u32) -> u32 {
        if shape == 0 {
            return SINK;
        }
        let slot = shape as usize * (self.chars.len() + 1) + offset as usize;
        match self.at_ids[slot] {
            0 => self.new_at(shape, offset, slot),
            id => id,
        }
    }

    /// A new parametric state's row, to be filled.
    #[cold]
    fn new_at(&mut self, shape: u32, offset: u32, slot: usize) -> u32 {
        let id = self.row(SINK, 0);
        self.at_ids[slot] = id;
        self.todo.push((shape, offset, id));
        id
    }

    /// The state `n` (0 to 3) continuation bytes, whatever they are, before
    /// `to`.
    fn before(&mut self, to: u32, n: u32) -> u32 {
        // Dead already: the sink (a walk stops inside the character).
        if n == 0 || to == SINK {
            return to;
        }
        let r = to as usize / self.stride;
        let made = self.before_ids[r][n as usize - 1];
        if made != 0 {
            return made;
        }
        let next = self.before(to, n - 1);
        let id = self.row(next, OVER | 0xff);
        self.before_ids[r][n as usize - 1] = id;
        id
    }

    /// The characteristic vector of alphabet entry `a` from query position
    /// `offset`: which of the next `diameter` characters it is.
    fn chi(&self, (c, at): (char, u64), offset: u32) -> u32 {
        let window = (1u32 << self.p.diameter) - 1;
        if offset as usize + self.p.diameter <= 64 {
            return (at >> offset) as u32 & window;
        }
        (0..self.p.diameter)
            .filter(|&i| self.chars.get(offset as usize + i) == Some(&c))
            .fold(0, |v, i| v | 1 << i)
    }

    fn build(mut self) -> Dfa {
        // Row 0: the sink, which every byte keeps.
        self.row(SINK, OVER | (u32::from(self.p.max) + 1));
        let initial = self.at(1, 0);
        while let Some((shape, offset, id)) = self.todo.pop() {
            self.fill(shape, offset, id);
        }
        for row in (0..self.table.len()).step_by(self.stride) {
            self.table[row + self.stride - 1] = self.live_bytes(row);
        }
        Dfa {
            class: self.class,
            stride: self.stride as u32,
            table: self.table,
            initial,
        }
    }

    /// The live-bytes slot of the state at `row` ([`Dfa::live_bytes`]).
    fn live_bytes(&self, row: usize) -> u32 {
        let alive = |class: usize| self.table[row + class] != SINK;
        if (0..ROLES).any(alive) {
            return MANY; // every byte of some UTF-8 role
        }
        let (mut live, mut n) = ([0u8; 3], 0);
        for &b in &self.own {
            if alive(self.class[b as usize] as usize) {
                if n == 3 {
                    return MANY;
                }
                live[n] = b;
                n += 1;
            }
        }
        live[..n].sort_unstable();
        live[..n]
            .iter()
            .enumerate()
            .fold(n as u32, |v, (i, &b)| v | u32::from(b) << (8 * (i + 1)))
    }

    /// Fills the row of parametric state (`shape`, `offset`).
    fn fill(&mut self, shape: u32, offset: u32, id: u32) {
        let left = self.chars.len() - offset as usize;
        let edits = self.p.edits_at(shape, left);
        let dist = u32::from(edits) | if edits > self.p.max { OVER } else { 0 };
        self.table[id as usize + self.stride - 2] = dist;
        // A prefix automaton's state that no continuation improves keeps
        // every input (as if every character were one not in the query).
        let sink = self.prefix && self.p.is_prefix_sink(shape, left);
        let dc = self.p.diameter;
        let other = if sink {
            id
        } else {
            let (to, delta) = self.p.moves[(shape as usize) << dc];
            self.at(to, offset + delta)
        };
        // Bytes that begin (or continue) a character not in the query: the
        // query's own bytes too, before their characters' paths below.
        let chain = [
            other,
            self.before(other, 1),
            self.before(other, 2),
            self.before(other, 3),
        ];
        let row = id as usize;
        for r in 0..ROLES as u8 {
            self.table[row + r as usize] = chain[continuations(r) as usize];
        }
        for (i, &b) in self.own.iter().enumerate() {
            self.table[row + ROLES + i] = chain[continuations(role(b)) as usize];
        }
        if sink {
            return;
        }
        for i in 0..self.alphabet.len() {
            let entry = self.alphabet[i];
            let chi = self.chi(entry, offset);
            let (to, delta) = self.p.moves[((shape as usize) << dc) + chi as usize];
            let dest = self.at(to, offset + delta);
            self.char_path(id, entry.0, other, dest);
        }
    }

    /// Routes `ch`'s bytes from `from` to `dest`, through states inside the
    /// character that send every other byte where other characters go.
    fn char_path(&mut self, from: u32, ch: char, other: u32, dest: u32) {
        let mut buf = [0u8; 4];
        let bytes = ch.encode_utf8(&mut buf).as_bytes();
        let mut at = from;
        for (i, &b) in bytes.iter().enumerate() {
            let slot = (at + u32::from(self.class[b as usize])) as usize;
            if i + 1 == bytes.len() {
                self.table[slot] = dest;
                return;
            }
            let left = (bytes.len() - i - 1) as u32;
            // A state of its own inside this character, unless an earlier
            // character with the same first bytes made one.
            if self.table[slot] == self.before(other, left) {
                let next = self.before(other, left - 1);
                let inside = self.row(next, OVER | 0xff);
                self.table[slot] = inside;
            }
            at = self.table[slot];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Damerau-Levenshtein (optimal string alignment) over characters.
    fn osa(a: &[char], b: &[char]) -> usize {
        let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for (i, row) in d.iter_mut().enumerate() {
            row[0] = i;
        }
        for (j, cell) in d[0].iter_mut().enumerate() {
            *cell = j;
        }
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut v = (d[i - 1][j] + 1)
                    .min(d[i][j - 1] + 1)
                    .min(d[i - 1][j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    v = v.min(d[i - 2][j - 2] + 1);
                }
                d[i][j] = v;
            }
        }
        d[a.len()][b.len()]
    }

    fn expected(query: &str, input: &str, edits: u8) -> Distance {
        let q: Vec<char> = query.chars().collect();
        let w: Vec<char> = input.chars().collect();
        let d = osa(&q, &w);
        if d <= edits as usize {
            Distance::Exact(d as u8)
        } else {
            Distance::AtLeast(edits + 1)
        }
    }

    #[test]
    fn whole_words() {
        let dfa = Dfa::new("moscow", 2, false);
        assert_eq!(dfa.eval(b"moscow"), Distance::Exact(0));
        assert_eq!(dfa.eval(b"moskow"), Distance::Exact(1));
        assert_eq!(dfa.eval(b"omscow"), Distance::Exact(1));
        assert_eq!(dfa.eval(b"mosco"), Distance::Exact(1));
        assert_eq!(dfa.eval(b"mscw"), Distance::Exact(2));
        assert_eq!(dfa.eval(b"msc"), Distance::AtLeast(3));
        assert_eq!(dfa.eval(b"moscowxyz"), Distance::AtLeast(3));
    }

    #[test]
    fn cyrillic_is_one_character_per_edit() {
        let dfa = Dfa::new("москва", 1, false);
        assert_eq!(dfa.eval("москва".as_bytes()), Distance::Exact(0));
        assert_eq!(dfa.eval("масква".as_bytes()), Distance::Exact(1));
        assert_eq!(dfa.eval("мсоква".as_bytes()), Distance::Exact(1));
        assert_eq!(dfa.eval("москвая".as_bytes()), Distance::Exact(1));
        assert_eq!(dfa.eval("масква!".as_bytes()), Distance::AtLeast(2));
    }

    /// `live_bytes` names exactly the bytes a state survives, whenever it
    /// names any, and names them wherever there are at most three.
    #[test]
    fn live_bytes_are_the_bytes_that_keep_a_state() {
        for (query, edits, prefix) in [
            ("moscow", 1, false),
            ("moscow", 2, true),
            ("москва", 1, true),
            ("ab", 0, false),
        ] {
            let dfa = Dfa::new(query, edits, prefix);
            for row in (0..dfa.table.len()).step_by(dfa.stride as usize) {
                let state = row as u32;
                let alive: Vec<u8> = (0..=255u8)
                    .filter(|&b| dfa.transition(state, b) != SINK)
                    .collect();
                match dfa.live_bytes(state) {
                    Some((bytes, len)) => {
                        assert_eq!(bytes[..len], alive[..], "{query:?} state {state}")
                    }
                    None => assert!(alive.len() > 3, "{query:?} state {state}: {alive:?}"),
                }
            }
        }
    }

    #[test]
    fn dead_inputs_reach_the_sink() {
        let dfa = Dfa::new("abc", 1, false);
        let mut s = dfa.initial_state();
        for &b in b"xyz" {
            s = dfa.transition(s, b);
        }
        assert_eq!(s, SINK);
        assert_eq!(dfa.distance(SINK), Distance::AtLeast(2));
    }

    /// Every query and input over a small alphabet (with a two-byte and a
    /// three-byte letter), for every budget, against the textbook distance.
    /// (Prefix automata are checked against the crate's: like the crate's,
    /// they can miss a beginning within the budget: `bx` begins with `b`,
    /// two edits from `aab`, but is not matched, as the state after `b` is
    /// not known to be final whatever follows.)
    #[test]
    fn agrees_with_the_distance_everywhere() {
        let alphabet = ['a', 'b', 'é', '€'];
        let mut words = vec![String::new()];
        let mut all = vec![String::new()];
        for _ in 0..4 {
            words = words
                .iter()
                .flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}")))
                .collect();
            all.extend(words.iter().cloned());
        }
        for query in all.iter().filter(|q| q.chars().count() <= 3) {
            for edits in 0..=MAX_EDITS {
                let dfa = Dfa::new(query, edits, false);
                for input in &all {
                    assert_eq!(
                        dfa.eval(input.as_bytes()),
                        expected(query, input, edits),
                        "{query:?} {input:?} edits {edits}"
                    );
                }
            }
        }
    }

    /// The same distances as the `levenshtein_automata` crate's automata
    /// (which the engine used before) on random queries and inputs, whole
    /// and prefix, ASCII and Cyrillic.
    #[test]
    fn agrees_with_the_crate() {
        use levenshtein_automata::{Distance as D, LevenshteinAutomatonBuilder};
        let builders: Vec<_> = (0..=MAX_EDITS)
            .map(|e| LevenshteinAutomatonBuilder::new(e, true))
            .collect();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for alphabet in [
            &['a', 'b', 'c', 'd'][..],
            &['а', 'б', 'в', 'x'][..],
            // Three- and four-byte characters sharing their first bytes.
            &['€', '₽', '𝄞', '😀', '😁', 'a'][..],
        ] {
            let word = |len: usize, rand: &mut dyn FnMut(usize) -> usize| -> String {
                (0..len).map(|_| alphabet[rand(alphabet.len())]).collect()
            };
            for round in 0..3000 {
                // Some queries longer than the 64 positions of a mask.
                let len = if round % 50 == 0 {
                    60 + rand(20)
                } else {
                    rand(10)
                };
                let query = word(len, &mut rand);
                let edits = rand(3) as u8;
                let prefix = rand(2) == 1;
                let theirs = if prefix {
                    builders[edits as usize].build_prefix_dfa(&query)
                } else {
                    builders[edits as usize].build_dfa(&query)
                };
                let ours = Dfa::new(&query, edits, prefix);
                for _ in 0..20 {
                    let input = word(rand(12), &mut rand);
                    let want = match theirs.eval(&input) {
                        D::Exact(d) => Distance::Exact(d),
                        D::AtLeast(d) => Distance::AtLeast(d),
                    };
                    assert_eq!(
                        ours.eval(input.as_bytes()),
                        want,
                        "{query:?} {input:?} edits {edits} prefix {prefix}"
                    );
                    // Dead at the same characters (ours may die inside
                    // one: the crate's dead state still takes a character's
                    // first byte to a state that leads back to it).
                    let (mut a, mut b) = (theirs.initial_state(), ours.initial_state());
                    for c in input.chars() {
                        let mut buf = [0; 4];
                        for &byte in c.encode_utf8(&mut buf).as_bytes() {
                            a = theirs.transition(a, byte);
                            b = ours.transition(b, byte);
                        }
                        assert_eq!(
                            a == levenshtein_automata::SINK_STATE,
                            b == SINK,
                            "{query:?} {input:?}"
                        );
                    }
                }
            }
        }
    }
}
