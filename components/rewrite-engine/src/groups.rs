//! The groups of a match already found: which bytes `$1`, `${name}` stand
//! for in `buf[start..end]`.
//!
//! The rule set found the match; this only splits it. The pattern is run
//! again anchored at `start` over the whole buffer, limited to end by
//! `end` (`Input::range`), so assertions at the end (`\b`, `\B`, `$`) see
//! the bytes after the match as they did when it was found. Cutting the
//! haystack at `end` instead would make them see the end of the text:
//! `(fo)\B` in `foo` matched `fo`, but would not match `fo` as a whole
//! text, and `$1` came out empty.
//!
//! The regex prefers matches as Perl does (leftmost-first), so a shorter
//! alternative may win where the rule set took the longest (`(a|ab)` on
//! `ab`). Then the pattern is tried again with `\z` on the text cut at
//! `end`, which forces the match's length and keeps Perl's preference
//! among the ways to match it; that fails only if an end assertion needs
//! the next byte too (`(a|a\w)\B` on `abc`), and then any way to match the
//! exact span is taken (a PikeVM reporting every match): never empty
//! groups for a match that was replaced.

use regex_automata::nfa::thompson::{self, pikevm::PikeVM};
use regex_automata::util::captures::Captures;
use regex_automata::{Anchored, Input, MatchKind, meta};
use regex_syntax::hir::{Hir, Look};

/// The regexes that split a rule's matches into groups.
pub(crate) struct GroupFinder {
    /// The pattern as written, run over the whole buffer.
    pattern: meta::Regex,
    /// `pattern\z`, run over the buffer cut at the match's end.
    to_the_end: meta::Regex,
    /// The pattern reporting every match, the longest last.
    any_way: PikeVM,
}

impl GroupFinder {
    /// The finder for a rule's pattern as compiled (already checked by
    /// the rule set's build).
    pub fn new(pattern: &Hir) -> Result<Self, String> {
        let meta = |h: &Hir| {
            meta::Regex::builder()
                .build_from_hir(h)
                .map_err(|e| e.to_string())
        };
        let nfa = thompson::Compiler::new()
            .configure(thompson::Config::new().utf8(false))
            .build_from_hir(pattern)
            .map_err(|e| e.to_string())?;
        Ok(Self {
            pattern: meta(pattern)?,
            to_the_end: meta(&Hir::concat(vec![pattern.clone(), Hir::look(Look::End)]))?,
            any_way: PikeVM::builder()
                .configure(PikeVM::config().match_kind(MatchKind::All))
                .build_from_nfa(nfa)
                .map_err(|e| e.to_string())?,
        })
    }

    /// The groups of the match `buf[start..end]`, or `None` if the
    /// pattern does not match exactly that span (it always does when the
    /// rule set found it there).
    pub fn find(&self, buf: &[u8], start: usize, end: usize) -> Option<Captures> {
        let whole = Input::new(buf).range(start..end).anchored(Anchored::Yes);
        let mut caps = self.pattern.create_captures();
        self.pattern.search_captures(&whole, &mut caps);
        if caps.get_match().is_some_and(|m| m.end() == end) {
            return Some(caps);
        }
        let cut = Input::new(&buf[..end])
            .range(start..end)
            .anchored(Anchored::Yes);
        self.to_the_end.search_captures(&cut, &mut caps);
        if caps.is_match() {
            return Some(caps);
        }
        let mut cache = self.any_way.create_cache();
        let mut caps = self.any_way.create_captures();
        self.any_way.search(&mut cache, &whole, &mut caps);
        caps.get_match()
            .is_some_and(|m| m.end() == end)
            .then_some(caps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(pattern: &str, text: &str, span: (usize, usize), g: usize) -> Option<String> {
        let hir = regex_syntax::ParserBuilder::new()
            .utf8(false)
            .build()
            .parse(pattern)
            .unwrap();
        let caps = GroupFinder::new(&hir)
            .unwrap()
            .find(text.as_bytes(), span.0, span.1)?;
        let s = caps.get_group(g)?;
        Some(text[s.range()].to_string())
    }

    #[test]
    fn end_assertions_see_the_bytes_after_the_match() {
        assert_eq!(group(r"(fo)\B", "foo", (0, 2), 1).as_deref(), Some("fo"));
        assert_eq!(group(r"(/)\b", "/path", (0, 1), 1).as_deref(), Some("/"));
        assert_eq!(group(r"(?m)(x)$", "x\ny", (0, 1), 1).as_deref(), Some("x"));
    }

    #[test]
    fn the_span_found_is_the_span_split() {
        // Perl's preference would take `a`; the rule set took `ab`.
        assert_eq!(group(r"(a|ab)", "abc", (0, 2), 1).as_deref(), Some("ab"));
        // ... and with an end assertion that needs the next byte as well.
        assert_eq!(group(r"(a|a\w)\B", "abc", (0, 2), 1).as_deref(), Some("ab"));
        // Greedy groups keep Perl's split.
        assert_eq!(group(r"(a+)(a*)", "aaa", (0, 3), 1).as_deref(), Some("aaa"));
    }
}
