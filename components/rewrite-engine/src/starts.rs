//! Where a match can start: a vector filter over the first bytes of every
//! rule's matches.
//!
//! Dozens of case-insensitive word rules (`\bfile\b`, `\bpath\b`, ...) give
//! the meta regex no literal prefilter worth using (every case variant is a
//! literal of its own), so it would run its lazy DFA over every byte of the
//! body: one dependent table lookup per byte, about 2.3 ns a byte on the
//! machines here whatever the rules. Most bytes of a page, though, cannot
//! begin a match of any rule: the four bytes from there on are not what
//! any rule's matches begin with.
//!
//! [`StartFilter`] tests that for 16 positions at once, as Hyperscan's
//! Teddy does: the rules are dealt into eight buckets (one bit each), and
//! for each of the first four positions of a match a pair of 16-entry
//! tables says, by the byte's low and high nibble, which buckets admit it.
//! Two table lookups (`pshufb`, `i8x16.swizzle`) and an AND per position
//! and block; a position survives when some bucket admits all four of
//! its bytes. The vector step sees bytes with ASCII case folded, so a
//! case-insensitive letter takes one nibble pair, not two. Survivors are
//! checked again with exact 256-entry tables, a bit per rule up to 64
//! rules (the nibble tables admit every combination of admitted nibbles,
//! and a bucket every combination of its rules' bytes), and only those
//! reach the anchored DFA that decides the match.
//!
//! The classes come from each rule's Thompson NFA, over-approximated:
//! assertions count as true, and a position beyond a rule's shortest match
//! admits any byte. So the filter never skips a start where a match is
//! possible; it only skips work. A position whose four bytes run past the
//! end of the buffer is tested on the bytes there are.

use regex_automata::nfa::thompson::{NFA, State};
use regex_automata::util::primitives::{PatternID, StateID};

/// Positions of a match the filter looks at.
const WIDTH: usize = 4;
/// Sets of vector tables, eight buckets (bits of a table entry) each.
const SETS: usize = 1;
const BUCKETS: usize = 8 * SETS;

/// Estimated share of positions that pass the filter (bytes weighted as in
/// text, see [`byte_weight`]) above which it is not used: past it, the
/// per-candidate DFA walks cost more than running the DFA over every byte.
const MAX_PASS_RATE: f64 = 0.15;

/// A set of bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
struct ByteSet([u64; 4]);

impl ByteSet {
    const EMPTY: Self = Self([0; 4]);
    const ALL: Self = Self([u64::MAX; 4]);

    fn insert_range(&mut self, lo: u8, hi: u8) {
        for b in lo..=hi {
            self.0[usize::from(b) / 64] |= 1 << (b % 64);
        }
    }

    fn contains(&self, b: u8) -> bool {
        self.0[usize::from(b) / 64] & (1 << (b % 64)) != 0
    }

    /// The set with bit 5 set in every byte (ASCII upper case folded to
    /// lower, and some punctuation and control bytes onto others).
    fn folded(self) -> Self {
        let mut out = Self::EMPTY;
        for b in (0..=255u8).filter(|&b| self.contains(b)) {
            out.insert_range(b | 0x20, b | 0x20);
        }
        out
    }

    fn union(self, o: Self) -> Self {
        Self(std::array::from_fn(|i| self.0[i] | o.0[i]))
    }

    /// The estimated chance that a byte of a page is in the set.
    fn weight(&self) -> f64 {
        let mut sum = 0.0;
        for (k, &word) in self.0.iter().enumerate() {
            let mut w = word;
            while w != 0 {
                sum += byte_weight((k * 64) as u8 + w.trailing_zeros() as u8);
                w &= w - 1;
            }
        }
        sum
    }
}

/// A rough chance of each byte in a web page (markup and text): letters
/// and spaces are most of it. Only used to decide whether the filter pays.
fn byte_weight(b: u8) -> f64 {
    match b {
        b'a'..=b'z' => 0.6 * letter_share(b),
        b'A'..=b'Z' => 0.06 * letter_share(b.to_ascii_lowercase()),
        b' ' | b'\n' | b'<' | b'>' | b'"' | b'=' | b'/' => 0.2 / 7.0,
        b'0'..=b'9' => 0.04 / 10.0,
        0x21..=0x7e => 0.08 / 26.0,
        _ => 0.02 / 161.0,
    }
}

/// How often a letter is used in English text (of all letters).
fn letter_share(lower: u8) -> f64 {
    const PERCENT: [f64; 26] = [
        8.2, 1.5, 2.8, 4.3, 12.7, 2.2, 2.0, 6.1, 7.0, 0.15, 0.8, 4.0, 2.4, 6.7, 7.5, 1.9, 0.1, 6.0,
        6.3, 9.1, 2.8, 1.0, 2.4, 0.15, 2.0, 0.07,
    ];
    PERCENT[usize::from(lower - b'a')] / 100.0
}

/// The first bytes of every rule's matches, as vector tables.
pub(crate) struct StartFilter {
    /// `lo[j][n]`: buckets admitting at position `j` some byte whose low
    /// nibble is `n`; `hi` likewise for high nibbles.
    lo: [[[u8; 16]; WIDTH]; SETS],
    hi: [[[u8; 16]; WIDTH]; SETS],
    /// `exact[j][b]`: groups of rules (a bit each, one rule per group up
    /// to 64 rules) admitting byte `b` at position `j`.
    exact: Box<[[u64; 256]; WIDTH]>,
    /// Whether this CPU has the shuffle the vector path needs.
    simd: bool,
}

impl std::fmt::Debug for StartFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartFilter").finish_non_exhaustive()
    }
}

impl StartFilter {
    /// A filter for every pattern of `nfa`, or `None` if there are no
    /// patterns or (unless `always`) it would let through too many
    /// positions to pay.
    pub fn new(nfa: &NFA, always: bool) -> Option<Self> {
        let mut closure = Closure {
            nfa,
            seen: vec![0; nfa.states().len()],
            stamp: 0,
        };
        let classes: Vec<[ByteSet; WIDTH]> = nfa
            .patterns()
            .map(|pid| leading_bytes(&mut closure, pid))
            .collect();
        // The vector tables see bytes with bit 5 set (ASCII letters folded
        // to lower case), so a case-insensitive class takes one nibble
        // pair per letter instead of two; the exact tables see them as
        // they are.
        let folded: Vec<[ByteSet; WIDTH]> =
            classes.iter().map(|c| c.map(|set| set.folded())).collect();
        let buckets = deal(&folded, BUCKETS)?;
        let groups = deal(&classes, 64)?;
        let pass_rate: f64 = buckets.iter().map(pass_rate).sum();
        if pass_rate > MAX_PASS_RATE && !always {
            return None;
        }
        let mut filter = Self {
            lo: [[[0; 16]; WIDTH]; SETS],
            hi: [[[0; 16]; WIDTH]; SETS],
            exact: Box::new([[0; 256]; WIDTH]),
            simd: simd_available(),
        };
        for (k, bucket) in buckets.iter().enumerate() {
            let (tables, bit) = (k / 8, 1u8 << (k % 8));
            for (j, set) in bucket.iter().enumerate() {
                for b in (0..=255u8).filter(|&b| set.contains(b)) {
                    filter.lo[tables][j][usize::from(b & 15)] |= bit;
                    filter.hi[tables][j][usize::from(b >> 4)] |= bit;
                }
            }
        }
        for (k, group) in groups.iter().enumerate() {
            for (j, set) in group.iter().enumerate() {
                for b in (0..=255u8).filter(|&b| set.contains(b)) {
                    filter.exact[j][usize::from(b)] |= 1 << k;
                }
            }
        }
        Some(filter)
    }

    /// The first position in `from..hay.len()` where a match may start.
    pub fn find(&self, hay: &[u8], from: usize) -> Option<usize> {
        let mut i = from;
        if self.simd {
            while i + 16 + WIDTH - 1 <= hay.len() {
                let mut mask = self.block(&hay[i..i + 16 + WIDTH - 1]);
                while mask != 0 {
                    let at = i + mask.trailing_zeros() as usize;
                    if self.admits(hay, at) {
                        return Some(at);
                    }
                    mask &= mask - 1;
                }
                i += 16;
            }
        }
        (i..hay.len()).find(|&at| self.admits(hay, at))
    }

    /// Whether some bucket admits the bytes from `at` (as many as there
    /// are, up to [`WIDTH`]).
    fn admits(&self, hay: &[u8], at: usize) -> bool {
        let mut groups = u64::MAX;
        for (j, &b) in hay[at..].iter().take(WIDTH).enumerate() {
            groups &= self.exact[j][usize::from(b)];
        }
        groups != 0
    }

    /// Bit `l` set where position `l` of the block may begin a match
    /// (`block` holds 16 + WIDTH - 1 bytes).
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    fn block(&self, block: &[u8]) -> u32 {
        use core::arch::wasm32::*;
        debug_assert!(block.len() >= 16 + WIDTH - 1);
        let low = u8x16_splat(15);
        let fold = u8x16_splat(0x20);
        let mut none = u8x16_splat(u8::MAX);
        for set in 0..SETS {
            let mut acc = u8x16_splat(u8::MAX);
            for j in 0..WIDTH {
                // SAFETY: `block` has 16 bytes from `j` (asserted by the
                // caller's bounds), the tables 16 each; wasm loads need no
                // alignment.
                let (v, lo, hi) = unsafe {
                    (
                        v128_load(block.as_ptr().add(j).cast::<v128>()),
                        v128_load(self.lo[set][j].as_ptr().cast::<v128>()),
                        v128_load(self.hi[set][j].as_ptr().cast::<v128>()),
                    )
                };
                let v = v128_or(v, fold);
                let m = v128_and(
                    u8x16_swizzle(lo, v128_and(v, low)),
                    u8x16_swizzle(hi, u8x16_shr(v, 4)),
                );
                acc = v128_and(acc, m);
            }
            none = v128_and(none, u8x16_eq(acc, u8x16_splat(0)));
        }
        !u32::from(u8x16_bitmask(none)) & 0xFFFF
    }

    #[cfg(target_arch = "x86_64")]
    fn block(&self, block: &[u8]) -> u32 {
        assert!(block.len() >= 16 + WIDTH - 1);
        // SAFETY: `simd` (checked by the only caller) says the CPU has
        // SSSE3; the bounds are asserted above.
        unsafe { self.block_ssse3(block) }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "ssse3")]
    unsafe fn block_ssse3(&self, block: &[u8]) -> u32 {
        use core::arch::x86_64::*;
        let low = _mm_set1_epi8(15);
        let fold = _mm_set1_epi8(0x20);
        let mut none = _mm_set1_epi8(-1);
        for set in 0..SETS {
            let mut acc = _mm_set1_epi8(-1);
            for j in 0..WIDTH {
                // SAFETY: 16 bytes from `j` are in `block` (asserted by
                // `block`), 16 in each table; unaligned loads.
                unsafe {
                    let v = _mm_or_si128(_mm_loadu_si128(block.as_ptr().add(j).cast()), fold);
                    let lo = _mm_loadu_si128(self.lo[set][j].as_ptr().cast());
                    let hi = _mm_loadu_si128(self.hi[set][j].as_ptr().cast());
                    let m = _mm_and_si128(
                        _mm_shuffle_epi8(lo, _mm_and_si128(v, low)),
                        _mm_shuffle_epi8(hi, _mm_and_si128(_mm_srli_epi16(v, 4), low)),
                    );
                    acc = _mm_and_si128(acc, m);
                }
            }
            none = _mm_and_si128(none, _mm_cmpeq_epi8(acc, _mm_setzero_si128()));
        }
        !(_mm_movemask_epi8(none) as u32) & 0xFFFF
    }

    #[cfg(not(any(
        target_arch = "x86_64",
        all(target_arch = "wasm32", target_feature = "simd128")
    )))]
    fn block(&self, _block: &[u8]) -> u32 {
        unreachable!("no vector path on this target (simd is false)")
    }
}

fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("ssse3");
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return true;
    #[allow(unreachable_code)]
    false
}

/// The bytes each of the first [`WIDTH`] positions of a match of `pid`
/// can hold; a position past the pattern's shortest match admits any.
fn leading_bytes(closure: &mut Closure<'_>, pid: PatternID) -> [ByteSet; WIDTH] {
    let nfa = closure.nfa;
    let mut sets = [ByteSet::ALL; WIDTH];
    let Some(start) = nfa.start_pattern(pid) else {
        return sets;
    };
    let mut current = closure.of(vec![start]);
    for set in &mut sets {
        let mut bytes = ByteSet::EMPTY;
        let mut next = Vec::new();
        for &sid in &current {
            match nfa.state(sid) {
                State::ByteRange { trans } => {
                    bytes.insert_range(trans.start, trans.end);
                    next.push(trans.next);
                }
                State::Sparse(sparse) => {
                    for t in sparse.transitions.iter() {
                        bytes.insert_range(t.start, t.end);
                        next.push(t.next);
                    }
                }
                State::Dense(dense) => {
                    for (b, &to) in (0..=255u8).zip(dense.transitions.iter()) {
                        if to != StateID::ZERO {
                            bytes.insert_range(b, b);
                            next.push(to);
                        }
                    }
                }
                // A match may end here: later positions admit anything.
                State::Match { .. } => return sets,
                _ => {}
            }
        }
        *set = bytes;
        current = closure.of(next);
    }
    sets
}

/// Epsilon closures in one NFA, with one visited table for all of them.
struct Closure<'n> {
    nfa: &'n NFA,
    /// `seen[state] == stamp`: visited by the closure being taken.
    seen: Vec<u32>,
    stamp: u32,
}

impl Closure<'_> {
    /// The states reachable from `stack` without consuming a byte
    /// (assertions taken as true) that consume one or match.
    fn of(&mut self, mut stack: Vec<StateID>) -> Vec<StateID> {
        self.stamp += 1;
        let mut out = Vec::new();
        while let Some(sid) = stack.pop() {
            let seen = &mut self.seen[sid.as_usize()];
            if *seen == self.stamp {
                continue;
            }
            *seen = self.stamp;
            match self.nfa.state(sid) {
                State::Look { next, .. } | State::Capture { next, .. } => stack.push(*next),
                State::Union { alternates } => stack.extend(alternates.iter().rev()),
                State::BinaryUnion { alt1, alt2 } => stack.extend([*alt2, *alt1]),
                State::Fail => {}
                _ => out.push(sid),
            }
        }
        out
    }
}

/// Deals the rules' classes into at most `n` buckets, each rule where it
/// adds least to the pass rate; a bucket's classes are the unions of its
/// rules'. `None` if there are no rules.
fn deal(classes: &[[ByteSet; WIDTH]], n: usize) -> Option<Vec<[ByteSet; WIDTH]>> {
    let mut buckets: Vec<[ByteSet; WIDTH]> = Vec::with_capacity(n);
    // Narrow rules first, so broad ones join the buckets that suit them.
    let mut order: Vec<&[ByteSet; WIDTH]> = classes.iter().collect();
    order.sort_by(|a, b| pass_rate(a).total_cmp(&pass_rate(b)));
    for c in order {
        if buckets.len() < n {
            buckets.push(*c);
            continue;
        }
        let merged = |b: &[ByteSet; WIDTH]| -> [ByteSet; WIDTH] {
            std::array::from_fn(|j| b[j].union(c[j]))
        };
        let best = buckets
            .iter()
            .enumerate()
            .map(|(k, b)| (k, pass_rate(&merged(b)) - pass_rate(b)))
            .min_by(|x, y| x.1.total_cmp(&y.1))
            .map(|(k, _)| k)?;
        buckets[best] = merged(&buckets[best]);
    }
    (!buckets.is_empty()).then_some(buckets)
}

/// The estimated share of positions a bucket admits.
fn pass_rate(bucket: &[ByteSet; WIDTH]) -> f64 {
    bucket.iter().map(ByteSet::weight).product()
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::nfa::thompson;

    fn filter(patterns: &[&str]) -> Option<StartFilter> {
        let nfa = thompson::Compiler::new()
            .syntax(regex_automata::util::syntax::Config::new().utf8(false))
            .build_many(patterns)
            .unwrap();
        StartFilter::new(&nfa, false)
    }

    /// Every position the scalar tables admit, through the vector path.
    fn candidates(f: &StartFilter, hay: &[u8]) -> Vec<usize> {
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(i) = f.find(hay, at) {
            out.push(i);
            at = i + 1;
        }
        out
    }

    #[test]
    fn finds_every_start_and_skips_the_rest() {
        let f = filter(&[r"(?i)\bfile\b", "docs\\.python", "UA-[0-9]+", "x"]).unwrap();
        let hay = b"The FILE is in docs.python.org (UA-12) and a fil e; max: x.";
        let found = candidates(&f, hay);
        for (word, _) in [("FILE", 0), ("docs", 0), ("UA-", 0), ("x.", 0)] {
            let at = hay
                .windows(word.len())
                .position(|w| w == word.as_bytes())
                .unwrap();
            assert!(found.contains(&at), "{word} at {at}: {found:?}");
        }
        // "fil e" shares three bytes with `file` but not the fourth.
        assert!(found.len() < 10, "{found:?}");
        // The vector and scalar paths agree at every length and offset.
        for len in 0..hay.len() {
            let scalar: Vec<usize> = (0..len).filter(|&i| f.admits(&hay[..len], i)).collect();
            assert_eq!(candidates(&f, &hay[..len]), scalar, "len {len}");
        }
    }

    #[test]
    fn short_matches_admit_anything_after_them() {
        let f = filter(&["ab?", "zz"]).unwrap();
        // The last `z` is a candidate: its window runs past the end.
        assert_eq!(candidates(&f, b"a\xff\xfe zz"), vec![0, 4, 5]);
    }

    #[test]
    fn broad_rules_turn_the_filter_off() {
        assert!(filter(&["[a-z]+x"]).is_none());
        assert!(filter(&[".."]).is_none());
        assert!(filter(&[]).is_none());
        assert!(filter(&["(?i)python", "cat"]).is_some());
    }
}
