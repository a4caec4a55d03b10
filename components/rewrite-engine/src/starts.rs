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
//! for each of the first four bytes of a match a pair of 16-entry tables
//! says, by the byte's low and high nibble, which buckets admit it. Each
//! block of 16 bytes is looked up once per place (two table lookups,
//! `pshufb` or `i8x16.swizzle`, and an AND), and the results are shifted
//! into line with the previous block's (`palignr`, a byte shuffle); a
//! position survives when some bucket admits all four of its bytes. The
//! vector step sees bytes with ASCII case folded, so a case-insensitive
//! letter takes one nibble pair, not two.
//!
//! Survivors are checked again with exact 256-entry tables, a bit per rule
//! up to 64 rules (the nibble tables admit every combination of admitted
//! nibbles, and a bucket every combination of its rules' bytes), over more
//! bytes: the byte before the position and seven from it. Both steps run
//! over a window of the buffer at a time ([`StartFilter::next`]), the
//! survivors of the first written down without a branch per survivor and
//! the second likewise, so that which positions survive, which no branch
//! predictor can guess, costs no mispredicted branches. Only the hits
//! reach the checks that decide a match: a literal's bytes compared, or
//! the anchored DFA. Seven bytes rather than five: at 50 rules of the
//! shared page, the github rule (`href="https://github\.com/...`) no
//! longer makes each of its 3,991 `href=` a hit, and wasm replay runs 15%
//! faster (10 rules 27%; ten bytes were no better, twelve worse).
//!
//! The classes come from each rule's Thompson NFA, over-approximated: a
//! position beyond a rule's shortest match admits any byte, and of the
//! assertions only an ASCII word boundary narrows anything, where every
//! path crosses it between a position of one kind of bytes (word or not)
//! and the next. So `\bfile\b` admits no word byte before the `f` or
//! after the `e`: the `file` of `profile` and of `filename` are no
//! candidates, which at 50 rules on the shared page leaves a fifth fewer
//! walks of the DFA, at 200 rules two fifths. The filter never skips a
//! start where a match is possible; it only skips work. A position whose
//! bytes run past the end of the buffer (or before its start) is tested
//! on the bytes there are.

use crate::literal::is_word;
use regex_automata::nfa::thompson::{NFA, State};
use regex_automata::util::look::Look;
use regex_automata::util::primitives::{PatternID, StateID};

/// Classes kept per rule: index 0 is the byte before a match (`\b` at
/// its start constrains it), index `1 + j` its byte `j`.
const SPAN: usize = 8;
/// The classes the vector step looks at (indices as in [`SPAN`]): a
/// match's first four bytes, in a row (`block` lines up each one's
/// lookups by its place). The exact tables check all the classes.
const VECTOR: [usize; 4] = [1, 2, 3, 4];
/// Positions one [`StartFilter::next`] scan looks at before handing
/// out its hits.
const WINDOW: usize = 4096;
/// Buckets of rules in the vector tables: the bits of a table entry.
/// (Two sets of tables, sixteen buckets, were slower in wasm.)
const BUCKETS: usize = 8;

/// Estimated share of positions that pass the filter (bytes weighted as in
/// text, see [`byte_weight`]) above which it is not used: past it, the
/// per-candidate DFA walks cost more than running the DFA over every byte.
const MAX_PASS_RATE: f64 = 0.15;

/// No rule (in [`StartFilter::sole`]).
const NONE: u32 = u32::MAX;

/// A set of bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
struct ByteSet([u64; 4]);

impl ByteSet {
    const EMPTY: Self = Self([0; 4]);
    const ALL: Self = Self([u64::MAX; 4]);

    fn insert(&mut self, b: u8) {
        self.0[usize::from(b) / 64] |= 1 << (b % 64);
    }

    fn insert_range(&mut self, lo: u8, hi: u8) {
        for b in lo..=hi {
            self.insert(b);
        }
    }

    /// The set with bit 5 set in every byte (ASCII upper case folded to
    /// lower, and some punctuation and control bytes onto others).
    fn folded(self) -> Self {
        let mut out = Self::EMPTY;
        for b in self.bytes() {
            out.insert(b | 0x20);
        }
        out
    }

    fn union(self, o: Self) -> Self {
        Self(std::array::from_fn(|i| self.0[i] | o.0[i]))
    }

    fn intersect(self, o: Self) -> Self {
        Self(std::array::from_fn(|i| self.0[i] & o.0[i]))
    }

    fn complement(self) -> Self {
        Self(self.0.map(|w| !w))
    }

    /// The estimated chance that a byte of a page is in the set.
    fn weight(&self) -> f64 {
        self.bytes().map(byte_weight).sum()
    }

    /// The bytes in the set, ascending.
    fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.0.iter().enumerate().flat_map(|(k, &word)| {
            let mut w = word;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = (k * 64) as u8 + w.trailing_zeros() as u8;
                    w &= w - 1;
                    b
                })
            })
        })
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
    /// `lo[j][n]`: buckets admitting at vector position `j` (class
    /// `VECTOR[j]`) some byte whose low nibble is `n`; `hi` likewise for
    /// high nibbles.
    lo: [[u8; 16]; VECTOR.len()],
    hi: [[u8; 16]; VECTOR.len()],
    /// `exact[k][b]`: groups of rules (a bit each, one rule per group up
    /// to 64 rules) admitting byte `b` in class `k`.
    exact: Box<[[u64; 256]; SPAN]>,
    /// The rule of each group that holds just one (`NONE` otherwise), as
    /// the rule's index in the rule set: one lookup from a candidate's
    /// group to the rule to check.
    sole: Box<[u32; 64]>,
    /// Whether this CPU has the shuffle the vector path needs.
    simd: bool,
}

/// Hits of the filter in one buffer, found a window at a time.
#[derive(Default)]
pub(crate) struct Scan {
    /// The hits of the window (the first `count`), ascending, with their
    /// groups. Its length only grows: refilling it writes over what was
    /// there, instead of clearing and zeroing it for each window.
    hits: Vec<(usize, u64)>,
    count: usize,
    /// The next hit to hand out.
    next: usize,
    /// Where the hits found end.
    to: usize,
    /// The vector step's survivors of the window, as offsets from its
    /// start (scratch, kept for its allocation).
    survivors: Vec<u32>,
}

impl Scan {
    /// Forgets the hits (the buffer, or the rules, changed).
    pub fn reset(&mut self) {
        self.count = 0;
        self.next = 0;
        self.to = 0;
    }
}

/// A position where a match may start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub at: usize,
    /// The groups of rules (bits) that may match there.
    pub groups: u64,
}

impl std::fmt::Debug for StartFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartFilter").finish_non_exhaustive()
    }
}

impl StartFilter {
    /// A filter for every pattern of `nfa` (pattern `p` being rule
    /// `rule_of[p]`), or `None` if there are no patterns or (unless
    /// `always`) it would let through too many positions to pay.
    pub fn new(nfa: &NFA, rule_of: &[usize], always: bool) -> Option<Self> {
        let mut closure = Closure {
            nfa,
            seen: vec![0; nfa.states().len()],
            seen_unbounded: vec![0; nfa.states().len()],
            stamp: 0,
        };
        let classes: Vec<[ByteSet; SPAN]> = nfa
            .patterns()
            .map(|pid| leading_bytes(&mut closure, pid))
            .collect();
        // The vector tables see bytes with bit 5 set (ASCII letters folded
        // to lower case), so a case-insensitive class takes one nibble
        // pair per letter instead of two; the exact tables see them as
        // they are.
        let folded: Vec<[ByteSet; VECTOR.len()]> = classes
            .iter()
            .map(|c| VECTOR.map(|k| c[k].folded()))
            .collect();
        let (buckets, _) = deal(&folded, BUCKETS, vector_pass_rate, true)?;
        let (groups, members) = deal(&classes, 64, pass_rate, false)?;
        // (By the estimate MAX_PASS_RATE was set against, of the buckets'
        // own classes.)
        let pass_rate: f64 = buckets.iter().map(|b| pass_rate(b)).sum();
        if pass_rate > MAX_PASS_RATE && !always {
            return None;
        }
        let mut filter = Self {
            lo: [[0; 16]; VECTOR.len()],
            hi: [[0; 16]; VECTOR.len()],
            exact: Box::new([[0; 256]; SPAN]),
            sole: Box::new([NONE; 64]),
            simd: simd_available(),
        };
        for (g, members) in members.iter().enumerate() {
            if let [pid] = members[..] {
                filter.sole[g] = rule_of[pid] as u32;
            }
        }
        for (k, bucket) in buckets.iter().enumerate() {
            let bit = 1u8 << k;
            for (j, set) in bucket.iter().enumerate() {
                for b in set.bytes() {
                    filter.lo[j][usize::from(b & 15)] |= bit;
                    filter.hi[j][usize::from(b >> 4)] |= bit;
                }
            }
        }
        for (g, group) in groups.iter().enumerate() {
            for (k, set) in group.iter().enumerate() {
                for b in set.bytes() {
                    filter.exact[k][usize::from(b)] |= 1 << g;
                }
            }
        }
        Some(filter)
    }

    /// The rule of group `g`, if it is the group's only one.
    pub fn sole(&self, g: u32) -> Option<usize> {
        let rule = self.sole[g as usize];
        (rule != NONE).then_some(rule as usize)
    }

    /// The first candidate at or after `from` in `hay`, found with the
    /// hits `scan` holds of `hay` (or new ones it finds): `scan` must be
    /// [`Scan::reset`] whenever `hay` changes.
    pub fn next(&self, scan: &mut Scan, hay: &[u8], from: usize) -> Option<Candidate> {
        loop {
            while scan.next < scan.count {
                let (at, groups) = scan.hits[scan.next];
                if at >= from {
                    return Some(Candidate { at, groups });
                }
                scan.next += 1;
            }
            let start = scan.to.max(from);
            if start >= hay.len() {
                return None;
            }
            scan.next = 0;
            (scan.count, scan.to) =
                self.scan_window(hay, start, &mut scan.survivors, &mut scan.hits);
        }
    }

    /// Writes to the front of `hits` every position (with its groups)
    /// from `start` on that passes both steps, up to the position returned
    /// (about [`WINDOW`] on, or the end of `hay`); returns how many there
    /// are and that position.
    #[inline(never)]
    fn scan_window(
        &self,
        hay: &[u8],
        start: usize,
        survivors: &mut Vec<u32>,
        hits: &mut Vec<(usize, u64)>,
    ) -> (usize, usize) {
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: `simd` says the CPU has SSSE3.
            return unsafe { self.scan_window_ssse3(hay, start, survivors, hits) };
        }
        self.scan_window_with_vectors(hay, start, survivors, hits)
    }

    /// [`StartFilter::scan_window`] compiled with SSSE3, so that
    /// `block_ssse3` is inlined into its loop: natively (`edge rules
    /// test`) 10 rules run at 6,100 MB/s instead of 3,900 with a call per
    /// block, 50 rules at 2,470 instead of 2,180.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "ssse3")]
    unsafe fn scan_window_ssse3(
        &self,
        hay: &[u8],
        start: usize,
        survivors: &mut Vec<u32>,
        hits: &mut Vec<(usize, u64)>,
    ) -> (usize, usize) {
        self.scan_window_with_vectors(hay, start, survivors, hits)
    }

    #[inline(always)]
    fn scan_window_with_vectors(
        &self,
        hay: &[u8],
        start: usize,
        survivors: &mut Vec<u32>,
        hits: &mut Vec<(usize, u64)>,
    ) -> (usize, usize) {
        let len = hay.len();
        let end = start + WINDOW;
        // Room for a hit at every position of the window, and for the
        // vector step's writes past its last survivor; grown, never
        // shrunk, and no bigger than a short body needs.
        let room = (len - start).min(WINDOW) + 128;
        if survivors.len() < room {
            survivors.resize(room, 0);
        }
        if hits.len() < room {
            hits.resize(room, (0, 0));
        }
        let mut n = 0;
        // The vector step reports the starts 3 bytes before each block's
        // bytes (see `block`): blocks from `start` on report from
        // `start - 3`, where the zeroed carry reports nothing.
        let mut b = start;
        if self.simd {
            let mut carry = Carry::default();
            // Every survivor's offset from `start`, written without a
            // branch per survivor (eight at a time).
            while b < end && b + 64 <= len {
                let at = |k: usize| -> &[u8; 16] {
                    hay[b + 16 * k..b + 16 * k + 16]
                        .try_into()
                        .expect("16 bytes")
                };
                let mut mask = u64::from(self.block(at(0), &mut carry))
                    | u64::from(self.block(at(1), &mut carry)) << 16
                    | u64::from(self.block(at(2), &mut carry)) << 32
                    | u64::from(self.block(at(3), &mut carry)) << 48;
                if mask != 0 {
                    let count = mask.count_ones() as usize;
                    let base = (b - start) as u32;
                    let dst = &mut survivors[n..n + 64];
                    let mut k = 0;
                    loop {
                        for d in &mut dst[k..k + 8] {
                            *d = (base + mask.trailing_zeros()).wrapping_sub(3);
                            mask &= mask.wrapping_sub(1);
                        }
                        k += 8;
                        if k >= count {
                            break;
                        }
                    }
                    n += count;
                }
                b += 64;
            }
            while b < end && b + 16 <= len {
                let mut mask = self.block(hay[b..b + 16].try_into().expect("16 bytes"), &mut carry);
                let base = (b - start) as u32;
                while mask != 0 {
                    survivors[n] = (base + mask.trailing_zeros()).wrapping_sub(3);
                    n += 1;
                    mask &= mask - 1;
                }
                b += 16;
            }
        }
        // The next start no block reported.
        let mut i = b.saturating_sub(3).max(start);
        let mut m = self.exact_step(hay, start, &survivors[..n], hits);
        if b + 16 > len || !self.simd {
            // The last positions, which no whole block covers (without
            // vectors, the window's).
            let to = if self.simd { len } else { len.min(end) };
            for at in i..to {
                let groups = self.groups(hay, at);
                if groups != 0 {
                    match hits.get_mut(m) {
                        Some(hit) => *hit = (at, groups),
                        None => hits.push((at, groups)),
                    }
                    m += 1;
                }
            }
            i = to;
        }
        (m, i)
    }

    /// Writes to the front of `hits` the survivors of the vector step
    /// (offsets from `start`) that the exact tables admit, with their
    /// groups, without a branch each; returns how many. A function of its own: inside `scan_window`, Cranelift
    /// kept this loop's variables on the stack.
    #[inline(never)]
    fn exact_step(
        &self,
        hay: &[u8],
        start: usize,
        survivors: &[u32],
        hits: &mut [(usize, u64)],
    ) -> usize {
        let mut m = 0;
        for &off in survivors {
            let at = start + off as usize;
            let groups = self.groups(hay, at);
            hits[m] = (at, groups);
            m += usize::from(groups != 0);
        }
        m
    }

    /// The groups of rules that admit the bytes around `at` (as many as
    /// there are: none before the first, none past the last).
    #[inline(always)]
    fn groups(&self, hay: &[u8], at: usize) -> u64 {
        // Away from the buffer's ends (almost always): one fixed-size
        // window, so the lookups need no bounds checks.
        if let Some(window) = at
            .checked_sub(1)
            .and_then(|before| hay.get(before..before + SPAN))
        {
            let window: &[u8; SPAN] = window.try_into().expect("SPAN bytes");
            let mut groups = u64::MAX;
            for (table, &b) in self.exact.iter().zip(window) {
                groups &= table[usize::from(b)];
            }
            return groups;
        }
        self.groups_at_an_end(hay, at)
    }

    #[cold]
    fn groups_at_an_end(&self, hay: &[u8], at: usize) -> u64 {
        let mut groups = match at.checked_sub(1) {
            Some(before) => self.exact[0][usize::from(hay[before])],
            None => u64::MAX,
        };
        for (k, &b) in hay[at..].iter().take(SPAN - 1).enumerate() {
            groups &= self.exact[k + 1][usize::from(b)];
        }
        groups
    }

    /// Bit `l` set where position `l - 3` of `block` may begin a match,
    /// given the previous block's lookups in `carry` (then this block's):
    /// as Hyperscan's Teddy does, each byte is looked up once for each of
    /// the four places it can hold in a match, and the results are
    /// shifted into line across blocks, instead of loading each place's
    /// bytes apart.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    #[inline(always)]
    fn block(&self, block: &[u8; 16], carry: &mut Carry) -> u32 {
        use core::arch::wasm32::*;
        // SAFETY: 16 bytes each; wasm loads need no alignment.
        let load = |p: &[u8; 16]| unsafe { v128_load(p.as_ptr().cast::<v128>()) };
        let v = v128_or(load(block), u8x16_splat(0x20));
        let lo_nibbles = v128_and(v, u8x16_splat(15));
        let hi_nibbles = u8x16_shr(v, 4);
        // Both indices are under 16, where the relaxed swizzle is defined
        // the same on every engine: one `pshufb` on x86 instead of a
        // saturating add and a `pshufb` (which zero lanes at 16 and above,
        // as `swizzle` must). The rewriter is built with the feature
        // (components/rewriter/relaxed-simd.toml); it must be enabled
        // crate-wide, since a function of its own with it is not inlined.
        let lookup = |j: usize| {
            #[cfg(target_feature = "relaxed-simd")]
            let m = v128_and(
                i8x16_relaxed_swizzle(load(&self.lo[j]), lo_nibbles),
                i8x16_relaxed_swizzle(load(&self.hi[j]), hi_nibbles),
            );
            #[cfg(not(target_feature = "relaxed-simd"))]
            let m = v128_and(
                u8x16_swizzle(load(&self.lo[j]), lo_nibbles),
                u8x16_swizzle(load(&self.hi[j]), hi_nibbles),
            );
            m
        };
        let m = [lookup(0), lookup(1), lookup(2), lookup(3)];
        // Lane `l`: the buckets admitting this block's byte `l` as a
        // match's fourth, the byte before as its third, and so on.
        let acc = v128_and(
            v128_and(
                m[3],
                i8x16_shuffle::<15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30>(
                    carry.0[2], m[2],
                ),
            ),
            v128_and(
                i8x16_shuffle::<14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29>(
                    carry.0[1], m[1],
                ),
                i8x16_shuffle::<13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28>(
                    carry.0[0], m[0],
                ),
            ),
        );
        carry.0 = [m[0], m[1], m[2]];
        !u32::from(u8x16_bitmask(u8x16_eq(acc, u8x16_splat(0)))) & 0xFFFF
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn block(&self, block: &[u8; 16], carry: &mut Carry) -> u32 {
        debug_assert!(self.simd, "the vector path needs SSSE3");
        // SAFETY: `simd` (checked by the only caller) says the CPU has
        // SSSE3.
        unsafe { self.block_ssse3(block, carry) }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "ssse3")]
    #[inline]
    unsafe fn block_ssse3(&self, block: &[u8; 16], carry: &mut Carry) -> u32 {
        use core::arch::x86_64::*;
        // SAFETY: unaligned loads of 16 bytes each.
        let load = |p: &[u8; 16]| unsafe { _mm_loadu_si128(p.as_ptr().cast()) };
        let low = _mm_set1_epi8(15);
        let v = _mm_or_si128(load(block), _mm_set1_epi8(0x20));
        let lo_nibbles = _mm_and_si128(v, low);
        let hi_nibbles = _mm_and_si128(_mm_srli_epi16(v, 4), low);
        let lookup = |j: usize| {
            _mm_and_si128(
                _mm_shuffle_epi8(load(&self.lo[j]), lo_nibbles),
                _mm_shuffle_epi8(load(&self.hi[j]), hi_nibbles),
            )
        };
        let m = [lookup(0), lookup(1), lookup(2), lookup(3)];
        let acc = _mm_and_si128(
            _mm_and_si128(m[3], _mm_alignr_epi8(m[2], carry.0[2], 15)),
            _mm_and_si128(
                _mm_alignr_epi8(m[1], carry.0[1], 14),
                _mm_alignr_epi8(m[0], carry.0[0], 13),
            ),
        );
        carry.0 = [m[0], m[1], m[2]];
        !(_mm_movemask_epi8(_mm_cmpeq_epi8(acc, _mm_setzero_si128())) as u32) & 0xFFFF
    }

    #[cfg(not(any(
        target_arch = "x86_64",
        all(target_arch = "wasm32", target_feature = "simd128")
    )))]
    fn block(&self, _block: &[u8; 16], _carry: &mut Carry) -> u32 {
        unreachable!("no vector path on this target (simd is false)")
    }
}

/// The lookups of the previous block's bytes as a match's first three
/// bytes (zero before the first block: no bucket).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
struct Carry([core::arch::wasm32::v128; 3]);
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
impl Default for Carry {
    fn default() -> Self {
        Self([core::arch::wasm32::u8x16_splat(0); 3])
    }
}
#[cfg(target_arch = "x86_64")]
struct Carry([core::arch::x86_64::__m128i; 3]);
#[cfg(target_arch = "x86_64")]
impl Default for Carry {
    fn default() -> Self {
        // SAFETY: SSE2 is part of x86_64.
        Self([unsafe { core::arch::x86_64::_mm_setzero_si128() }; 3])
    }
}
#[cfg(not(any(
    target_arch = "x86_64",
    all(target_arch = "wasm32", target_feature = "simd128")
)))]
#[derive(Default)]
struct Carry;

fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("ssse3");
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return true;
    #[allow(unreachable_code)]
    false
}

/// Bytes `\w` matches in ASCII (`(?-u:\b)` is a change between these and
/// all other bytes).
fn word_bytes() -> ByteSet {
    let mut set = ByteSet::EMPTY;
    for b in (0..=255u8).filter(|&b| is_word(b)) {
        set.insert(b);
    }
    set
}

/// The bytes a position next to one in `neighbour` can hold when an
/// ASCII word boundary separates them: `None` if `neighbour` holds both
/// kinds of bytes (then it could be either).
fn across_boundary(neighbour: ByteSet) -> Option<ByteSet> {
    let word = word_bytes();
    if neighbour.intersect(word.complement()) == ByteSet::EMPTY {
        Some(word.complement())
    } else if neighbour.intersect(word) == ByteSet::EMPTY {
        Some(word)
    } else {
        None
    }
}

/// The bytes the byte before a match of `pid` and each of the match's
/// first positions can hold (see [`SPAN`]). Over-approximated: a position
/// past the pattern's shortest match admits any byte, and of assertions
/// only an ASCII word boundary that every path to a position crosses
/// narrows the position next to it.
fn leading_bytes(closure: &mut Closure<'_>, pid: PatternID) -> [ByteSet; SPAN] {
    let nfa = closure.nfa;
    let mut sets = [ByteSet::ALL; SPAN];
    let Some(start) = nfa.start_pattern(pid) else {
        return sets;
    };
    let mut current = closure.of(vec![start]);
    // The byte before: narrowed where every state the match can begin
    // with lies across a word boundary from it.
    let mut before = ByteSet::EMPTY;
    for &(sid, bounded) in &current {
        let own = consumed(nfa, sid);
        before = before.union(match (bounded, own) {
            (true, Some(own)) => across_boundary(own).unwrap_or(ByteSet::ALL),
            _ => ByteSet::ALL,
        });
    }
    sets[0] = before;
    for k in 1..SPAN {
        // Where the previous position's bytes are all of one kind, a word
        // boundary crossed before this one decides this one's kind.
        let after_boundary = if k == 1 {
            None
        } else {
            across_boundary(sets[k - 1])
        };
        let mut bytes = ByteSet::EMPTY;
        let mut next = Vec::new();
        let mut match_ends = false;
        for &(sid, bounded) in &current {
            let allowed = match (bounded, after_boundary) {
                (true, Some(kind)) => kind,
                _ => ByteSet::ALL,
            };
            match nfa.state(sid) {
                State::Match { .. } if bounded && after_boundary.is_some() => {
                    // A match ending at a word boundary: this position
                    // (if there is one) is across it.
                    bytes = bytes.union(allowed);
                    match_ends = true;
                }
                // A match may end here: this and later positions admit
                // anything.
                State::Match { .. } => return sets,
                _ => each_transition(nfa, sid, |lo, hi, to| {
                    let mut range = ByteSet::EMPTY;
                    range.insert_range(lo, hi);
                    let range = range.intersect(allowed);
                    if range != ByteSet::EMPTY {
                        bytes = bytes.union(range);
                        next.push(to);
                    }
                }),
            }
        }
        sets[k] = bytes;
        if match_ends {
            return sets;
        }
        current = closure.of(next);
    }
    sets
}

/// The bytes state `sid` consumes, if it consumes any.
fn consumed(nfa: &NFA, sid: StateID) -> Option<ByteSet> {
    let mut bytes = ByteSet::EMPTY;
    let mut any = false;
    each_transition(nfa, sid, |lo, hi, _| {
        bytes.insert_range(lo, hi);
        any = true;
    });
    any.then_some(bytes)
}

/// Calls `f(lo, hi, next)` for each byte range state `sid` consumes.
fn each_transition(nfa: &NFA, sid: StateID, mut f: impl FnMut(u8, u8, StateID)) {
    match nfa.state(sid) {
        State::ByteRange { trans } => f(trans.start, trans.end, trans.next),
        State::Sparse(sparse) => {
            for t in sparse.transitions.iter() {
                f(t.start, t.end, t.next);
            }
        }
        State::Dense(dense) => {
            for (b, &to) in (0..=255u8).zip(dense.transitions.iter()) {
                if to != StateID::ZERO {
                    f(b, b, to);
                }
            }
        }
        _ => {}
    }
}

/// Epsilon closures in one NFA, with visited tables for all of them.
struct Closure<'n> {
    nfa: &'n NFA,
    /// `seen[state] == stamp`: visited by the closure being taken.
    seen: Vec<u32>,
    /// Likewise for the closure that stops at ASCII word boundaries.
    seen_unbounded: Vec<u32>,
    stamp: u32,
}

impl Closure<'_> {
    /// The states reachable from `from` without consuming a byte
    /// (assertions taken as true) that consume one or match, each with
    /// whether every path to it crosses an ASCII word boundary.
    fn of(&mut self, from: Vec<StateID>) -> Vec<(StateID, bool)> {
        self.stamp += 1;
        // Marks (in `seen_unbounded`) what is reached without crossing a
        // boundary; what only the second walk reaches lies across one on
        // every path.
        Self::walk(
            self.nfa,
            &mut self.seen_unbounded,
            self.stamp,
            from.clone(),
            true,
        );
        let all = Self::walk(self.nfa, &mut self.seen, self.stamp, from, false);
        all.into_iter()
            .map(|sid| (sid, self.seen_unbounded[sid.as_usize()] != self.stamp))
            .collect()
    }

    fn walk(
        nfa: &NFA,
        seen: &mut [u32],
        stamp: u32,
        mut stack: Vec<StateID>,
        stop_at_boundaries: bool,
    ) -> Vec<StateID> {
        let mut out = Vec::new();
        while let Some(sid) = stack.pop() {
            let seen = &mut seen[sid.as_usize()];
            if *seen == stamp {
                continue;
            }
            *seen = stamp;
            match nfa.state(sid) {
                State::Look {
                    look: Look::WordAscii,
                    ..
                } if stop_at_boundaries => {}
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
/// adds least to the summed `cost` (an estimated pass rate); a bucket's
/// classes are the unions of its rules'. With `refine`, single rules then
/// move between buckets while that lowers the sum. Also the rules
/// (indices into `classes`) in each bucket. `None` if there are no rules.
///
/// The vector buckets are dealt by what their nibble tables really admit
/// ([`vector_pass_rate`]), and refined: at 50 rules of the shared page that
/// leaves 8% fewer survivors of the vector step, and wasm replay runs 3.5%
/// faster (200 rules 11%); rules compile in 3.8 ms instead of 2.9 (200
/// rules 21 instead of 19).
#[allow(clippy::type_complexity)]
fn deal<const W: usize>(
    classes: &[[ByteSet; W]],
    n: usize,
    cost: fn(&[ByteSet]) -> f64,
    refine: bool,
) -> Option<(Vec<[ByteSet; W]>, Vec<Vec<usize>>)> {
    let mut buckets: Vec<[ByteSet; W]> = Vec::with_capacity(n);
    let mut members: Vec<Vec<usize>> = Vec::with_capacity(n);
    // Narrow rules first, so broad ones join the buckets that suit them.
    let mut order: Vec<usize> = (0..classes.len()).collect();
    order.sort_by(|&a, &b| cost(&classes[a]).total_cmp(&cost(&classes[b])));
    for r in order {
        let c = &classes[r];
        if buckets.len() < n {
            buckets.push(*c);
            members.push(vec![r]);
            continue;
        }
        let merged =
            |b: &[ByteSet; W]| -> [ByteSet; W] { std::array::from_fn(|j| b[j].union(c[j])) };
        let best = buckets
            .iter()
            .enumerate()
            .map(|(k, b)| (k, cost(&merged(b)) - cost(b)))
            .min_by(|x, y| x.1.total_cmp(&y.1))
            .map(|(k, _)| k)?;
        buckets[best] = merged(&buckets[best]);
        members[best].push(r);
    }
    // Then move single rules to other buckets while that lowers the total
    // (the greedy deal cannot undo an early choice). Bounded rounds: each
    // move lowers the total, and a few rounds settle it.
    let union = |rules: &[usize]| -> [ByteSet; W] {
        std::array::from_fn(|j| {
            rules
                .iter()
                .fold(ByteSet::EMPTY, |u, &r| u.union(classes[r][j]))
        })
    };
    for _ in 0..if refine { 8 } else { 0 } {
        let mut moved = false;
        for from in 0..buckets.len() {
            let mut i = 0;
            while i < members[from].len() && members[from].len() > 1 {
                let r = members[from][i];
                let rest: Vec<usize> = members[from].iter().copied().filter(|&x| x != r).collect();
                let saved = cost(&buckets[from]) - cost(&union(&rest));
                let target = (0..buckets.len())
                    .filter(|&to| to != from)
                    .map(|to| {
                        let grown: [ByteSet; W] =
                            std::array::from_fn(|j| buckets[to][j].union(classes[r][j]));
                        (to, cost(&grown) - cost(&buckets[to]))
                    })
                    .min_by(|x, y| x.1.total_cmp(&y.1))
                    .filter(|&(_, added)| added < saved * 0.999);
                match target {
                    Some((to, _)) => {
                        members[from].swap_remove(i);
                        members[to].push(r);
                        buckets[from] = union(&members[from]);
                        buckets[to] = union(&members[to]);
                        moved = true;
                    }
                    None => i += 1,
                }
            }
        }
        if !moved {
            break;
        }
    }
    (!buckets.is_empty()).then_some((buckets, members))
}

/// The estimated share of positions the vector tables admit for a bucket
/// of (folded) classes: they admit every byte whose low and high nibbles
/// both occur in the class, so `{f, p}` also lets through `v` and `` ` ``.
fn vector_pass_rate(bucket: &[ByteSet]) -> f64 {
    // The chance of each folded byte (of the bytes that fold to it).
    static FOLDED: std::sync::OnceLock<[f64; 256]> = std::sync::OnceLock::new();
    let folded = FOLDED.get_or_init(|| {
        let mut w = [0.0; 256];
        for b in 0..=255u8 {
            w[usize::from(b | 0x20)] += byte_weight(b);
        }
        w
    });
    bucket
        .iter()
        .map(|set| {
            let (mut lo, mut hi) = (0u16, 0u16);
            for b in set.bytes() {
                lo |= 1 << (b & 15);
                hi |= 1 << (b >> 4);
            }
            let mut sum = 0.0;
            for h in (0..16).filter(|h| hi & (1 << h) != 0) {
                for l in (0..16).filter(|l| lo & (1 << l) != 0) {
                    sum += folded[h << 4 | l];
                }
            }
            sum
        })
        .product()
}

/// The estimated share of positions a bucket admits.
fn pass_rate(bucket: &[ByteSet]) -> f64 {
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
        let rules: Vec<usize> = (0..patterns.len()).collect();
        StartFilter::new(&nfa, &rules, false)
    }

    /// Every position the scalar tables admit, through the vector path.
    fn candidates(f: &StartFilter, hay: &[u8]) -> Vec<usize> {
        candidates_from(f, hay, 0)
    }

    fn candidates_from(f: &StartFilter, hay: &[u8], from: usize) -> Vec<usize> {
        let mut scan = Scan::default();
        let mut out = Vec::new();
        let mut at = from;
        while let Some(c) = f.next(&mut scan, hay, at) {
            out.push(c.at);
            at = c.at + 1;
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
        // The vector and scalar paths agree at every length and offset,
        // one block or four at a time: the gaps put candidates in every
        // place of a block and of a four-block step.
        let mut hay = hay.repeat(2);
        for gap in [5, 20, 37, 53, 63, 29, 45, 70, 79, 100, 130].repeat(2) {
            hay.extend(std::iter::repeat_n(b' ', gap));
            hay.push(b'x');
        }
        let scalar = |hay: &[u8], from: usize| -> Vec<usize> {
            (from..hay.len())
                .filter(|&i| f.groups(hay, i) != 0)
                .collect()
        };
        for len in 0..hay.len() {
            assert_eq!(
                candidates(&f, &hay[..len]),
                scalar(&hay[..len], 0),
                "len {len}"
            );
        }
        // From any start (blocks unaligned to the buffer), and across the
        // windows of a long buffer.
        for from in 0..70 {
            assert_eq!(
                candidates_from(&f, &hay, from),
                scalar(&hay, from),
                "from {from}"
            );
        }
        let long = hay.repeat(3 * WINDOW / hay.len() + 1);
        for from in [0, 1, 5, 17, WINDOW - 3, WINDOW + 1] {
            assert_eq!(
                candidates_from(&f, &long, from),
                scalar(&long, from),
                "from {from}"
            );
        }
        // Without vectors (a CPU without SSSE3), a window at a time too.
        let mut plain = filter(&[r"(?i)\bfile\b", "docs\\.python", "UA-[0-9]+", "x"]).unwrap();
        plain.simd = false;
        for from in [0, 1, WINDOW - 3, WINDOW + 1] {
            assert_eq!(
                candidates_from(&plain, &long, from),
                scalar(&long, from),
                "from {from}, no vectors"
            );
        }
    }

    #[test]
    fn word_boundaries_narrow_the_bytes_around_a_word() {
        let f = filter(&[r"(?-u:\b)(?i:file)(?-u:\b)"]).unwrap();
        let hay = b"file profile filename a FILE. _file file_ (file) file";
        let starts: Vec<usize> = hay
            .windows(4)
            .enumerate()
            .filter(|(_, w)| w.eq_ignore_ascii_case(b"file"))
            .map(|(i, _)| i)
            .collect();
        // The first (no byte before it), `FILE.`, `(file)` and the last (no
        // byte after it): not the ones inside or against other words.
        let word = |i: usize| {
            hay.get(i)
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
        };
        let want: Vec<usize> = starts
            .iter()
            .copied()
            .filter(|&i| (i == 0 || !word(i - 1)) && !word(i + 4))
            .collect();
        assert_eq!(want, vec![0, 24, 43, 49]);
        assert_eq!(candidates(&f, hay), want);
        // Boundaries before a non-word byte (which then needs a word byte
        // on the other side) and inside a pattern.
        let f = filter(&[r"(?-u:\b)-(?-u:\b)x", r"a(?-u:\b)[ .]b"]).unwrap();
        assert_eq!(candidates(&f, b"a-x -x a b a.b a-b"), vec![1, 7, 11]);
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
