//! Where a match may still be in progress at the end of the buffer.
//!
//! A start `s` is live when `buf[s..]` is a prefix of some match. The
//! prefixes of a regular language are a regular language: [`prefixes`]
//! builds its expression from a pattern's HIR, and a *reverse* lazy DFA of
//! it, run backwards from the end of the buffer, reports every live start
//! in one pass that stops as soon as the DFA dies (usually within a few
//! bytes). That keeps the hold-back decision O(live suffix) instead of a
//! forward run from every candidate start.
//!
//! The language is over-approximated where that is simpler: assertions
//! (`\b`, `^`, ...) count as always true and repetition counts are ignored.
//! Over-approximating is safe: a start wrongly thought live only delays
//! output until more input (or the end) decides it.

use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, Hir, HirKind, Repetition};

/// An expression matching every prefix (possibly empty) of `h`'s matches,
/// and more (see the module docs).
pub(crate) fn prefixes(h: &Hir) -> Hir {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => Hir::empty(),
        HirKind::Literal(lit) => {
            let mut alts = vec![Hir::empty()];
            for n in 1..=lit.0.len() {
                alts.push(Hir::literal(&lit.0[..n]));
            }
            Hir::alternation(alts)
        }
        HirKind::Class(c) => {
            let mut alts = vec![Hir::empty(), h.clone()];
            if !is_ascii(c) {
                // A chunk may end inside a multi-byte character: any lead
                // byte and up to two continuation bytes may begin one.
                alts.push(partial_utf8());
            }
            Hir::alternation(alts)
        }
        HirKind::Repetition(r) => Hir::concat(vec![
            Hir::repetition(Repetition {
                min: 0,
                max: None,
                greedy: true,
                sub: Box::new(strip_looks(&r.sub)),
            }),
            prefixes(&r.sub),
        ]),
        HirKind::Capture(c) => prefixes(&c.sub),
        HirKind::Concat(xs) => {
            let mut alts = Vec::with_capacity(xs.len());
            for i in 0..xs.len() {
                let mut seq: Vec<Hir> = xs[..i].iter().map(strip_looks).collect();
                seq.push(prefixes(&xs[i]));
                alts.push(Hir::concat(seq));
            }
            Hir::alternation(alts)
        }
        HirKind::Alternation(xs) => Hir::alternation(xs.iter().map(prefixes).collect()),
    }
}

fn is_ascii(c: &Class) -> bool {
    match c {
        Class::Unicode(u) => u.ranges().iter().all(|r| r.end() <= '\x7f'),
        Class::Bytes(b) => b.ranges().iter().all(|r| r.end() <= 0x7f),
    }
}

/// `[\xC0-\xF7][\x80-\xBF]{0,2}`: the start of a multi-byte UTF-8
/// character.
fn partial_utf8() -> Hir {
    let bytes = |lo, hi| {
        Hir::class(Class::Bytes(ClassBytes::new([ClassBytesRange::new(
            lo, hi,
        )])))
    };
    Hir::concat(vec![
        bytes(0xC0, 0xF7),
        Hir::repetition(Repetition {
            min: 0,
            max: Some(2),
            greedy: true,
            sub: Box::new(bytes(0x80, 0xBF)),
        }),
    ])
}

/// `h` with every assertion replaced by the empty match.
fn strip_looks(h: &Hir) -> Hir {
    match h.kind() {
        HirKind::Look(_) => Hir::empty(),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => h.clone(),
        HirKind::Repetition(r) => Hir::repetition(Repetition {
            sub: Box::new(strip_looks(&r.sub)),
            ..r.clone()
        }),
        HirKind::Capture(c) => strip_looks(&c.sub),
        HirKind::Concat(xs) => Hir::concat(xs.iter().map(strip_looks).collect()),
        HirKind::Alternation(xs) => Hir::alternation(xs.iter().map(strip_looks).collect()),
    }
}
