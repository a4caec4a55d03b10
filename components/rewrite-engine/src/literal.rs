//! Rules whose every match is one fixed string: checked at a candidate
//! start by comparing bytes, not by walking the DFA.
//!
//! Most rules of a site are words and names (`\bfile\b` with `i`,
//! `docs\.python\.org`). When the start filter says which rules can match
//! at a position (`starts.rs`), and those are such literals, whether they
//! match there is a comparison of a few bytes (eight at a time) and of
//! the bytes around them for `\b`. The DFA's walk would answer the same,
//! one dependent load of its transition table per byte; with dozens of
//! rules that table outgrows the first-level cache and a walk costs
//! 20–40 ns. A rule that is no literal may still begin with fixed bytes
//! (`href="https://github\.com/([a-z]+)`): where those differ it cannot
//! match, and the DFA is not walked.
//!
//! Case-insensitive letters compare with ASCII case folded. A letter
//! whose case variants include non-ASCII characters (`s` and `ſ`, `k`
//! and the Kelvin sign) answers [`Verdict::Unsure`] where the body has a
//! non-ASCII byte there, and the DFA decides; so does a match the buffer
//! cuts before its end is known.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// One fixed string, perhaps case-folded, perhaps between word boundaries.
#[derive(Debug)]
pub(crate) struct Literal {
    /// Whether the bytes are the whole pattern, or only the fixed bytes
    /// its matches begin with (then a match of them says nothing).
    pub whole: bool,
    bytes: Vec<Byte>,
    /// The bytes eight at a time (little-endian, zero-padded): each word
    /// of the body, OR-ed with `fold` and masked with `mask`, must equal
    /// `value`.
    words: Vec<Word>,
    /// `\b` (ASCII) before the first byte, after the last.
    boundary_before: bool,
    boundary_after: bool,
}

#[derive(Clone, Copy, Debug)]
struct Word {
    value: u64,
    fold: u64,
    mask: u64,
}

#[derive(Clone, Copy, Debug)]
struct Byte {
    /// The byte, lower case where `fold`.
    value: u8,
    /// An ASCII letter matched in either case.
    fold: bool,
    /// The letter also matches some non-ASCII character.
    other_forms: bool,
}

/// What a comparison at one start says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The rule matches `start..end`.
    Match(usize),
    /// The rule does not match at the start.
    NoMatch,
    /// Bytes the comparison cannot decide: ask the DFA.
    Unsure,
}

/// A byte `\w` matches in ASCII: the two sides of an ASCII `\b` differ
/// in this.
pub(crate) fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl Literal {
    /// The literal form of a compiled pattern, if it has one.
    pub fn of(hir: &Hir) -> Option<Self> {
        Self::build(hir, true)
    }

    /// The fixed bytes every match of a compiled pattern begins with, if
    /// there are any (`https://` of `https://(www|docs)\.python\.org`):
    /// where they differ, the pattern cannot match, and the DFA need not
    /// be walked to find that out.
    pub fn prefix_of(hir: &Hir) -> Option<Self> {
        Self::build(hir, false)
    }

    /// The pattern's leading fixed bytes (and `\b`s around them); `whole`:
    /// only if they are the whole pattern.
    fn build(hir: &Hir, whole: bool) -> Option<Self> {
        let items: &[Hir] = match hir.kind() {
            HirKind::Concat(items) => items,
            _ => std::slice::from_ref(hir),
        };
        let is_boundary = |h: &Hir| matches!(h.kind(), HirKind::Look(Look::WordAscii));
        let (boundary_before, items) = match items.split_first() {
            Some((first, rest)) if is_boundary(first) => (true, rest),
            _ => (false, items),
        };
        let (boundary_after, items) = match items.split_last() {
            Some((last, rest)) if whole && is_boundary(last) => (true, rest),
            _ => (false, items),
        };
        let mut bytes = Vec::new();
        for item in items {
            let byte = match item.kind() {
                HirKind::Literal(lit) => {
                    bytes.extend(lit.0.iter().map(|&value| Byte {
                        value,
                        fold: false,
                        other_forms: false,
                    }));
                    continue;
                }
                HirKind::Class(class) => letter_in_either_case(class),
                _ => None,
            };
            match byte {
                Some(byte) => bytes.push(byte),
                None if whole => return None,
                None => break,
            }
        }
        // A boundary must sit between a word byte and a non-word one; the
        // byte on the literal's side decides which kind the other must be.
        if bytes.is_empty() {
            return None;
        }
        let words = bytes
            .chunks(8)
            .map(|chunk| {
                let mut w = Word {
                    value: 0,
                    fold: 0,
                    mask: 0,
                };
                for (k, b) in chunk.iter().enumerate() {
                    w.value |= u64::from(b.value) << (8 * k);
                    w.fold |= u64::from(if b.fold { 0x20u8 } else { 0 }) << (8 * k);
                    w.mask |= 0xFF << (8 * k);
                }
                w
            })
            .collect();
        Some(Self {
            whole,
            bytes,
            words,
            boundary_before,
            boundary_after,
        })
    }

    /// Whether the literal matches at `start` of `hay` (`hay[start - 1]`,
    /// if any, is the byte before; `last`: no bytes follow `hay`).
    pub fn check(&self, hay: &[u8], start: usize, last: bool) -> Verdict {
        let end = start + self.bytes.len();
        let Some(text) = hay.get(start..end) else {
            // Cut by the buffer's end: more input may complete it.
            return if last {
                Verdict::NoMatch
            } else {
                Verdict::Unsure
            };
        };
        // Eight bytes at a time where the body has them (almost always):
        // no loop per byte. A mismatch goes on to the byte loop, which says
        // whether it is one the DFA must decide.
        let same = hay
            .get(start..start + 8 * self.words.len())
            .is_some_and(|ahead| {
                ahead.chunks_exact(8).zip(&self.words).all(|(chunk, w)| {
                    let t = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
                    (t | w.fold) & w.mask == w.value
                })
            });
        if !same {
            for (&t, want) in text.iter().zip(&self.bytes) {
                let same = if want.fold {
                    t | 0x20 == want.value
                } else {
                    t == want.value
                };
                if !same {
                    return if want.other_forms && t >= 0x80 {
                        Verdict::Unsure
                    } else {
                        Verdict::NoMatch
                    };
                }
            }
        }
        if self.boundary_before {
            let before = start.checked_sub(1).is_some_and(|i| is_word(hay[i]));
            if before == is_word(text[0]) {
                return Verdict::NoMatch;
            }
        }
        if self.boundary_after {
            let after = match hay.get(end) {
                Some(&b) => is_word(b),
                None if last => false,
                None => return Verdict::Unsure,
            };
            if after == is_word(text[text.len() - 1]) {
                return Verdict::NoMatch;
            }
        }
        Verdict::Match(end)
    }
}

/// A class that is one byte, or one ASCII letter in both cases (and maybe
/// non-ASCII forms of it, as Unicode case folding gives `s` and `k`).
fn letter_in_either_case(class: &Class) -> Option<Byte> {
    let mut ascii: Vec<u8> = Vec::new();
    let mut other_forms = false;
    match class {
        Class::Unicode(c) => {
            for r in c.ranges() {
                other_forms |= !r.end().is_ascii();
                for ch in (r.start()..=r.end()).take_while(char::is_ascii) {
                    ascii.push(ch as u8);
                    if ascii.len() > 2 {
                        return None;
                    }
                }
            }
        }
        Class::Bytes(c) => {
            for r in c.ranges() {
                for b in r.start()..=r.end() {
                    if !b.is_ascii() {
                        return None; // a byte class with raw non-ASCII bytes
                    }
                    ascii.push(b);
                    if ascii.len() > 2 {
                        return None;
                    }
                }
            }
        }
    }
    match *ascii.as_slice() {
        [b] if !other_forms => Some(Byte {
            value: b,
            fold: false,
            other_forms: false,
        }),
        [upper, lower] if upper.is_ascii_uppercase() && lower == upper.to_ascii_lowercase() => {
            Some(Byte {
                value: lower,
                fold: true,
                other_forms,
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hir(pattern: &str) -> Hir {
        regex_syntax::ParserBuilder::new()
            .utf8(false)
            .build()
            .parse(pattern)
            .unwrap()
    }

    fn literal(pattern: &str) -> Option<Literal> {
        Literal::of(&hir(pattern))
    }

    #[test]
    fn prefixes_are_the_fixed_bytes_a_pattern_begins_with() {
        let prefix = |p: &str| Literal::prefix_of(&hir(p));
        let https = prefix(r"https://(www|docs)\.python\.org").unwrap();
        assert!(!https.whole);
        // Only a difference in the prefix says anything.
        assert_eq!(https.check(b"https://docs", 0, false), Verdict::Match(8));
        assert_eq!(https.check(b"http://docs", 0, false), Verdict::NoMatch);
        assert_eq!(https.check(b"htt", 0, false), Verdict::Unsure);
        let ua = prefix(r"(?i)(?-u:\b)UA-[0-9]+").unwrap();
        assert_eq!(ua.check(b" ua-1", 1, false), Verdict::Match(4));
        assert_eq!(ua.check(b"xUA-1", 1, false), Verdict::NoMatch);
        // A boundary after the fixed bytes is not theirs to check.
        let word = prefix(r"(?-u:\b)ab(?-u:\b)c?").unwrap();
        assert_eq!(word.check(b"abx", 0, false), Verdict::Match(2));
        assert!(prefix(r"[ab]c").is_none());
        assert!(prefix(r"(ab)c").is_none());
        assert!(Literal::of(&hir("abc")).unwrap().whole);
    }

    #[test]
    fn words_names_and_domains_are_literals() {
        for p in [
            r"(?i:(?-u:\b)file(?-u:\b))",
            r"(?:docs\.python\.org)",
            r"(?i:python software foundation)",
            r"(?:Copyright)",
            r"(?i:(?-u:\b)sys(?-u:\b))",
            "(?:caf\u{e9})",
        ] {
            assert!(literal(p).is_some(), "{p}");
        }
        for p in [
            r"(?:a+)",
            r"(?:a|b)",
            r"(?:[ab]c)",
            r"(?:\bword\b)",
            r"(?:(?-u:\B)x)",
            r"(?:a(?-u:\b)b)",
            r"(?:(?-u:\b))",
            r"(?i:é)",
            r"(?:[\u{80}-\u{10FFFF}])",
        ] {
            assert!(literal(p).is_none(), "{p}");
        }
    }

    #[test]
    fn checks_bytes_case_and_boundaries() {
        let file = literal(r"(?i:(?-u:\b)file(?-u:\b))").unwrap();
        assert_eq!(file.check(b"a File.", 2, false), Verdict::Match(6));
        assert_eq!(file.check(b"file", 0, true), Verdict::Match(4));
        assert_eq!(file.check(b"file", 0, false), Verdict::Unsure);
        assert_eq!(file.check(b"fil", 0, false), Verdict::Unsure);
        assert_eq!(file.check(b"fil", 0, true), Verdict::NoMatch);
        assert_eq!(file.check(b"profile ", 3, false), Verdict::NoMatch);
        assert_eq!(file.check(b"files", 0, false), Verdict::NoMatch);
        assert_eq!(file.check(b"fire ", 0, false), Verdict::NoMatch);
        // `s` case-folds to `ſ` too: a non-ASCII byte there is the DFA's.
        let sys = literal(r"(?i:(?-u:\b)sys(?-u:\b))").unwrap();
        assert_eq!(sys.check(b"SYS ", 0, false), Verdict::Match(3));
        assert_eq!(sys.check("ſys ".as_bytes(), 0, false), Verdict::Unsure);
        assert_eq!(sys.check(b"sis ", 0, false), Verdict::NoMatch);
        let dot = literal(r"(?:(?-u:\b)\.x)").unwrap();
        assert_eq!(dot.check(b"a.x", 1, true), Verdict::Match(3));
        assert_eq!(dot.check(b" .x", 1, true), Verdict::NoMatch);
        assert_eq!(dot.check(b".x", 0, true), Verdict::NoMatch);
    }
}
