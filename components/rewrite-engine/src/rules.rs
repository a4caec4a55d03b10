//! Rules: patterns, flags and replacements, checked and compiled.

use crate::groups::GroupFinder;
use crate::literal::Literal;
use crate::starts::StartFilter;
use regex_automata::hybrid::dfa;
use regex_automata::nfa::thompson;
use regex_automata::util::prefilter::Prefilter;
use regex_automata::{MatchKind, meta};
use regex_syntax::hir::{Hir, HirKind, Look};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One search-and-replace rule as written by a user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// A regular expression (Rust `regex` syntax, no look-around or
    /// backreferences).
    pub pattern: String,
    /// The replacement: literal text with `$0`..`$9`, `${N}` and `${name}`
    /// group references; `$$` is a literal `$`.
    pub replacement: String,
    /// Match case-insensitively (flag `i`).
    pub case_insensitive: bool,
    /// Replace only the first match in a body (flag `o`); otherwise every
    /// match (flag `g`, the default).
    pub once: bool,
}

impl Rule {
    /// A global, case-sensitive rule.
    pub fn new(pattern: &str, replacement: &str) -> Self {
        Self {
            pattern: pattern.into(),
            replacement: replacement.into(),
            case_insensitive: false,
            once: false,
        }
    }

    /// Sets flags from letters: `i` (case-insensitive), `g` (global, the
    /// default), `o` (once).
    pub fn with_flags(mut self, flags: &str) -> Result<Self, String> {
        for c in flags.chars() {
            match c {
                'i' => self.case_insensitive = true,
                'g' => self.once = false,
                'o' => self.once = true,
                other => return Err(format!("unknown flag {other:?} (allowed: i, g, o)")),
            }
        }
        Ok(self)
    }
}

/// Why a rule set was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("rule {index}: {what}")]
pub struct RuleError {
    /// 1-based rule number.
    pub index: usize,
    /// What is wrong, with the position where there is one.
    pub what: String,
}

/// A piece of a parsed replacement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    Literal(Vec<u8>),
    Group(usize),
}

pub(crate) struct CompiledRule {
    pub once: bool,
    pub parts: Vec<Part>,
    /// Set when the replacement uses groups: splits a match already
    /// found into them.
    pub captures: Option<GroupFinder>,
    /// The pattern's literal form, if it has one (checked by comparing
    /// bytes where the start filter leaves the rule alone at a start).
    pub literal: Option<Literal>,
}

/// The automata for one set of enabled rules.
pub(crate) struct Automata {
    /// Where matches can start, when a filter pays for these rules: the
    /// body is scanned with it and `all` decides each candidate.
    pub candidates: Option<Candidates>,
    /// Leftmost-first, unanchored: finds where the leftmost match starts
    /// when no filter pays.
    pub find: meta::Regex,
    /// All matches, anchored: the longest match from a given start, and
    /// whether a partial match is still alive.
    pub all: dfa::DFA,
    /// Pattern id → rule index.
    pub rule_of: Vec<usize>,
    /// Reverse automaton of the rules' prefixes: which starts are live at
    /// the end of the buffer (see `live.rs`).
    pub live: dfa::DFA,
    /// Search caches of finished bodies, for the next ones.
    spare: Mutex<Vec<Caches>>,
}

/// A filter for where matches can start (every match starts at a
/// candidate).
pub(crate) enum Candidates {
    /// A fast literal search of the rules' prefixes (see [`fast_prefilter`]).
    Literals(Prefilter),
    /// The rules' first bytes (see `starts.rs`).
    Starts(StartFilter),
}

/// The search caches of one [`Automata`]: the lazy DFAs' state tables.
/// Building states is most of the work on a short body, so they outlive
/// the body and serve the next (a site's pages share most of their states).
pub(crate) struct Caches {
    pub find: meta::Cache,
    pub all: dfa::Cache,
    pub live: dfa::Cache,
}

/// Spare caches kept per automata set: one per body in flight at once.
const MAX_SPARE_CACHES: usize = 8;

impl Automata {
    /// Warm caches if a finished body left some, else fresh ones.
    pub fn caches(&self) -> Caches {
        let spare = self.spare.lock().unwrap_or_else(|e| e.into_inner()).pop();
        spare.unwrap_or_else(|| Caches {
            find: self.find.create_cache(),
            all: self.all.create_cache(),
            live: self.live.create_cache(),
        })
    }

    /// Takes caches back from a finished body.
    pub fn give_back(&self, caches: Caches) {
        let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < MAX_SPARE_CACHES {
            spare.push(caches);
        }
    }
}

/// A fast literal search for where matches can start (memchr, memmem, or
/// Teddy where the CPU has the vectors for it) from the rules' prefixes,
/// if they have one: every match begins with one of its literals.
///
/// A slow prefilter (an Aho-Corasick automaton over dozens of literals, as
/// on wasm, which has no Teddy) is worse than none: the lazy DFA returns to
/// its start state after most bytes and would call it each time. Measured
/// in the rewriter component on the shared page, 200 rules: 25 req/s with
/// the prefilter the meta regex picked by itself, 66 without; 1 rule: 769
/// with, 262 without. (Natively Teddy is fast; at 200 rules its literal
/// count is past Teddy and the same rule applies.)
fn fast_prefilter(hirs: &[&regex_syntax::hir::Hir]) -> Option<Prefilter> {
    Prefilter::from_hirs_prefix(MatchKind::LeftmostFirst, hirs).filter(|p| p.is_fast())
}

/// Most automata kept for subsets of the rules.
const MAX_SUBSETS: usize = 64;

/// A compiled, immutable set of rules; share it between bodies.
pub struct RuleSet {
    pub(crate) rules: Vec<CompiledRule>,
    /// Each rule's pattern as compiled: parsed, with its `i` flag and
    /// ASCII word boundaries (see [`ascii_word_boundaries`]). The automata
    /// are built from these, not from pattern text: wrapping the user's
    /// text (`(?i:PATTERN)`) broke valid patterns, as a `#` comment of
    /// `(?x)` ran over the closing parenthesis.
    hirs: Vec<Hir>,
    /// Automata per set of disabled once-rules (usually just the empty set).
    automata: Mutex<HashMap<Vec<bool>, Arc<Automata>>>,
    /// `Some(on)`: use the start filter always or never, and the literal
    /// prefilter never (for tests that compare the search paths); `None`:
    /// whichever pays.
    start_filter: Option<bool>,
}

impl RuleSet {
    /// Checks and compiles `rules`. Refuses, naming the rule and the
    /// position: invalid or unsupported syntax (look-around,
    /// backreferences, Unicode word assertions such as `\b{start}` and
    /// `\<`), patterns that can match the empty string, replacements
    /// naming groups the pattern does not have, and rules too large to
    /// compile (alone, or with the rules before them).
    pub fn new(rules: &[Rule]) -> Result<Self, RuleError> {
        let mut compiled = Vec::with_capacity(rules.len());
        let mut hirs = Vec::with_capacity(rules.len());
        for (i, rule) in rules.iter().enumerate() {
            let err = |what: String| RuleError { index: i + 1, what };
            // Parsed alone, the `i` flag given to the parser, so error
            // positions are the user's.
            let parsed = regex_syntax::ParserBuilder::new()
                .utf8(false)
                .case_insensitive(rule.case_insensitive)
                .build()
                .parse(&rule.pattern)
                .map_err(|e| {
                    err(format!(
                        "pattern {:?} is not supported: {}",
                        rule.pattern,
                        syntax_error(&e)
                    ))
                })?;
            if parsed.properties().minimum_len() == Some(0) {
                return Err(err(format!(
                    "pattern {:?} can match the empty string; a rule must match at least one byte",
                    rule.pattern
                )));
            }
            let hir = ascii_word_boundaries(&parsed);
            if has_unicode_word_boundary(&hir) {
                return Err(err(format!(
                    "pattern {:?} is not supported: {}",
                    rule.pattern,
                    unicode_word_boundary(&rule.pattern)
                )));
            }
            let groups = hir.properties().explicit_captures_len() + 1;
            let names = group_names(&hir);
            let parts = parse_replacement(&rule.replacement, groups, &names).map_err(err)?;
            let uses_groups = parts.iter().any(|p| matches!(p, Part::Group(g) if *g > 0));
            let captures = if uses_groups {
                Some(
                    GroupFinder::new(&hir)
                        .map_err(|e| err(format!("pattern {:?}: {e}", rule.pattern)))?,
                )
            } else {
                None
            };
            let literal = Literal::of(&hir).or_else(|| Literal::prefix_of(&hir));
            compiled.push(CompiledRule {
                once: rule.once,
                parts,
                captures,
                literal,
            });
            hirs.push(hir);
        }
        let set = Self {
            rules: compiled,
            hirs,
            automata: Mutex::default(),
            start_filter: None,
        };
        // Build the common automata now so errors (such as size limits)
        // surface at load, not on the first body.
        if let Err(what) = set.automata(&vec![false; rules.len()]) {
            // Name the rule: build each alone until one fails.
            for (i, rule) in rules.iter().enumerate() {
                let only: Vec<bool> = (0..rules.len()).map(|j| j != i).collect();
                if let Err(e) = set.automata(&only) {
                    return Err(RuleError {
                        index: i + 1,
                        what: format!(
                            "pattern {:?} is not supported: {}",
                            rule.pattern,
                            e.trim_start_matches("compiling the rules: ")
                        ),
                    });
                }
            }
            // Each compiles alone, not all together (a size limit): name
            // the first rule that, added to those before it, fails.
            for (i, rule) in rules.iter().enumerate() {
                let upto: Vec<bool> = (0..rules.len()).map(|j| j > i).collect();
                if let Err(e) = set.automata(&upto) {
                    return Err(RuleError {
                        index: i + 1,
                        what: format!(
                            "pattern {:?} compiles alone, but not with {} before it: {}",
                            rule.pattern,
                            if i == 1 {
                                "rule 1".to_string()
                            } else {
                                format!("rules 1 to {i}")
                            },
                            e.trim_start_matches("compiling the rules: ")
                        ),
                    });
                }
            }
            return Err(RuleError {
                index: rules.len(),
                what,
            });
        }
        Ok(set)
    }

    /// Finds match starts with the start filter always (`Some(true)`) or
    /// the meta regex always (`Some(false)`), or with whichever search pays
    /// (`None`, the default). The output is the same either way; tests
    /// compare the paths.
    #[doc(hidden)]
    pub fn with_start_filter(mut self, use_it: Option<bool>) -> Self {
        self.start_filter = use_it;
        self.automata
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub(crate) fn automata(&self, disabled: &[bool]) -> Result<Arc<Automata>, String> {
        let mut map = self.automata.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = map.get(disabled) {
            return Ok(a.clone());
        }
        // Subsets come from once-rules and the match cache; keep a bounded
        // number of them (the full set is rebuilt on demand if dropped too).
        if map.len() >= MAX_SUBSETS {
            map.clear();
        }
        let rule_of: Vec<usize> = (0..self.hirs.len()).filter(|i| !disabled[*i]).collect();
        let nfa = thompson::Config::new()
            .utf8(false)
            .which_captures(thompson::WhichCaptures::None);
        let enabled_hirs: Vec<&Hir> = rule_of.iter().map(|i| &self.hirs[*i]).collect();
        let find = meta::Regex::builder()
            .configure(
                meta::Config::new()
                    .match_kind(MatchKind::LeftmostFirst)
                    // Implicit, not None: with no group slots at all a meta
                    // regex cannot report where a match is.
                    .which_captures(thompson::WhichCaptures::Implicit)
                    // Linear-time engines only.
                    .backtrack(false)
                    // Used only where no filter pays: none would here.
                    .auto_prefilter(false),
            )
            .build_many_from_hir(&enabled_hirs)
            .map_err(|e| format!("compiling the rules: {}", causes(&e)))?;
        let all_nfa = thompson::Compiler::new()
            .configure(nfa)
            .build_many_from_hir(&enabled_hirs)
            .map_err(|e| format!("compiling the rules: {}", causes(&e)))?;
        let candidates = match self.start_filter {
            Some(false) => None,
            Some(true) => StartFilter::new(&all_nfa, &rule_of, true).map(Candidates::Starts),
            None => fast_prefilter(&enabled_hirs)
                .map(Candidates::Literals)
                .or_else(|| StartFilter::new(&all_nfa, &rule_of, false).map(Candidates::Starts)),
        };
        let all = lazy_dfa(all_nfa, "the rules")?;
        let prefixes: Vec<Hir> = rule_of
            .iter()
            .map(|i| crate::live::prefixes(&self.hirs[*i]))
            .collect();
        let live_nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .reverse(true)
                    .utf8(false)
                    .which_captures(thompson::WhichCaptures::None),
            )
            .build_many_from_hir(&prefixes)
            .map_err(|e| format!("compiling the rules' prefixes: {}", causes(&e)))?;
        let live = lazy_dfa(live_nfa, "the rules' prefixes")?;
        let a = Arc::new(Automata {
            find,
            all,
            candidates,
            rule_of,
            live,
            spare: Mutex::default(),
        });
        map.insert(disabled.to_vec(), a.clone());
        Ok(a)
    }
}

/// The default cache of a lazy DFA (regex-automata's).
const DFA_CACHE_BYTES: usize = 2 << 20;

/// The most a lazy DFA's cache may take: each rewriting stream holds one
/// per automaton, in the guest and in the control plane's previews.
const DFA_CACHE_MAX_BYTES: usize = 8 << 20;

/// A lazy DFA matching every pattern of `nfa` at once, its cache twice
/// what the NFA needs, from the default up to [`DFA_CACHE_MAX_BYTES`]:
/// the default fits some 700 literal rules, and the control plane takes
/// sets of 1,000. (A cache below the minimum is refused at build, naming
/// both; one just at it would be cleared every few bytes.)
/// A failure says what was being compiled (`what`) and why.
fn lazy_dfa(nfa: thompson::NFA, what: &str) -> Result<dfa::DFA, String> {
    let failed =
        |e: regex_automata::hybrid::BuildError| format!("compiling {what}: {}", causes(&e));
    let config = dfa::Config::new().match_kind(MatchKind::All);
    let least = config.get_minimum_cache_capacity(&nfa).map_err(failed)?;
    let capacity = least
        .saturating_mul(2)
        .clamp(DFA_CACHE_BYTES, DFA_CACHE_MAX_BYTES);
    dfa::Builder::new()
        .configure(config.cache_capacity(capacity))
        .build_from_nfa(nfa)
        .map_err(failed)
}

/// `\b` and `\B` as ASCII word boundaries, everything else unchanged: a
/// lazy DFA cannot decide Unicode word boundaries in linear time, and in
/// markup the ASCII rule is what people mean. So a non-ASCII letter counts
/// as a non-word byte for `\b`; `\w`, classes and `i` stay Unicode-aware.
/// (`\b{start}`, `\<` and the other Unicode word assertions are left
/// as they are, and refused with their position.)
fn ascii_word_boundaries(hir: &Hir) -> Hir {
    use regex_syntax::hir::{Capture, Repetition};
    match hir.kind() {
        HirKind::Look(Look::WordUnicode) => Hir::look(Look::WordAscii),
        HirKind::Look(Look::WordUnicodeNegate) => Hir::look(Look::WordAsciiNegate),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => hir.clone(),
        HirKind::Repetition(r) => Hir::repetition(Repetition {
            sub: Box::new(ascii_word_boundaries(&r.sub)),
            ..r.clone()
        }),
        HirKind::Capture(c) => Hir::capture(Capture {
            sub: Box::new(ascii_word_boundaries(&c.sub)),
            ..c.clone()
        }),
        HirKind::Concat(xs) => Hir::concat(xs.iter().map(ascii_word_boundaries).collect()),
        HirKind::Alternation(xs) => {
            Hir::alternation(xs.iter().map(ascii_word_boundaries).collect())
        }
    }
}

/// Whether a pattern (ASCII `\b` already) still asserts a Unicode word
/// boundary, which the lazy DFA cannot build.
fn has_unicode_word_boundary(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Look(look) => matches!(
            look,
            Look::WordUnicode
                | Look::WordUnicodeNegate
                | Look::WordStartUnicode
                | Look::WordEndUnicode
                | Look::WordStartHalfUnicode
                | Look::WordEndHalfUnicode
        ),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => false,
        HirKind::Repetition(r) => has_unicode_word_boundary(&r.sub),
        HirKind::Capture(c) => has_unicode_word_boundary(&c.sub),
        HirKind::Concat(xs) | HirKind::Alternation(xs) => xs.iter().any(has_unicode_word_boundary),
    }
}

/// Which Unicode word assertion of `pattern` is refused, and where: the
/// first `\b{start}`, `\b{end}`, `\b{start-half}`, `\b{end-half}`, `\<`
/// or `\>` with the `u` flag on (the default), as the parser sets flags.
fn unicode_word_boundary(pattern: &str) -> String {
    use regex_syntax::ast::{self, AssertionKind, Ast, FlagsItemKind, GroupKind};
    fn apply(flags: &ast::Flags, unicode: &mut bool) {
        let mut on = true;
        for item in &flags.items {
            match item.kind {
                FlagsItemKind::Negation => on = false,
                FlagsItemKind::Flag(ast::Flag::Unicode) => *unicode = on,
                _ => {}
            }
        }
    }
    // Flags set by `(?-u)` hold to the end of the enclosing group, across
    // its alternatives: walk in order, restoring at each group's end.
    fn walk(a: &Ast, unicode: &mut bool) -> Option<ast::Span> {
        match a {
            Ast::Flags(f) => {
                apply(&f.flags, unicode);
                None
            }
            Ast::Group(g) => {
                let outer = *unicode;
                if let GroupKind::NonCapturing(flags) = &g.kind {
                    apply(flags, unicode);
                }
                let found = walk(&g.ast, unicode);
                *unicode = outer;
                found
            }
            Ast::Concat(c) => c.asts.iter().find_map(|a| walk(a, unicode)),
            Ast::Alternation(alt) => alt.asts.iter().find_map(|a| walk(a, unicode)),
            Ast::Repetition(r) => walk(&r.ast, unicode),
            Ast::Assertion(x) => (*unicode
                && matches!(
                    x.kind,
                    AssertionKind::WordBoundaryStart
                        | AssertionKind::WordBoundaryEnd
                        | AssertionKind::WordBoundaryStartAngle
                        | AssertionKind::WordBoundaryEndAngle
                        | AssertionKind::WordBoundaryStartHalf
                        | AssertionKind::WordBoundaryEndHalf
                ))
            .then_some(x.span),
            _ => None,
        }
    }
    const WHAT: &str = "is a Unicode word boundary, which a streaming rule cannot decide (\\b and \\B are supported, as ASCII word boundaries)";
    let found = ast::parse::Parser::new()
        .parse(pattern)
        .ok()
        .and_then(|a| walk(&a, &mut true));
    match found {
        Some(span) => format!(
            "{} at byte {} {WHAT}",
            &pattern[span.start.offset..span.end.offset],
            span.start.offset
        ),
        None => format!("a word assertion {WHAT}"),
    }
}

/// An error with the errors that caused it (regex-automata's say only
/// "error building NFA"; the size limit exceeded is in their source).
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.ends_with(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}

/// The error with its position given relative to the user's pattern.
fn syntax_error(e: &regex_syntax::Error) -> String {
    let (kind, span) = match e {
        regex_syntax::Error::Parse(p) => (p.kind().to_string(), Some(*p.span())),
        regex_syntax::Error::Translate(t) => (t.kind().to_string(), Some(*t.span())),
        other => (other.to_string(), None),
    };
    match span {
        Some(s) => format!("{kind} at byte {}", s.start.offset),
        None => kind,
    }
}

fn group_names(hir: &Hir) -> HashMap<String, usize> {
    fn walk(h: &Hir, out: &mut HashMap<String, usize>) {
        match h.kind() {
            HirKind::Capture(c) => {
                if let Some(n) = &c.name {
                    out.insert(n.to_string(), c.index as usize);
                }
                walk(&c.sub, out);
            }
            HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().for_each(|h| walk(h, out)),
            HirKind::Repetition(r) => walk(&r.sub, out),
            _ => {}
        }
    }
    let mut out = HashMap::new();
    walk(hir, &mut out);
    out
}

/// Parses `$0`..`$9`, `${N}`, `${name}` and `$$`.
pub(crate) fn parse_replacement(
    text: &str,
    groups: usize,
    names: &HashMap<String, usize>,
) -> Result<Vec<Part>, String> {
    let b = text.as_bytes();
    let mut parts = Vec::new();
    let mut lit = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'$' {
            lit.push(b[i]);
            i += 1;
            continue;
        }
        let at = i;
        let group = match b.get(i + 1) {
            Some(b'$') => {
                lit.push(b'$');
                i += 2;
                continue;
            }
            Some(d) if d.is_ascii_digit() => {
                i += 2;
                (d - b'0') as usize
            }
            Some(b'{') => {
                let Some(close) = text[i + 2..].find('}') else {
                    return Err(format!("replacement {text:?}: unclosed ${{ at byte {at}"));
                };
                let name = &text[i + 2..i + 2 + close];
                i += 3 + close;
                match name.parse::<usize>() {
                    Ok(n) => n,
                    Err(_) => *names.get(name).ok_or_else(|| {
                        format!("replacement {text:?}: no group named {name:?} (byte {at})")
                    })?,
                }
            }
            _ => {
                return Err(format!(
                    "replacement {text:?}: '$' at byte {at} must be followed by a digit, {{name}} or '$'"
                ));
            }
        };
        if group >= groups {
            return Err(format!(
                "replacement {text:?}: ${group} at byte {at}, but the pattern has {} group{}",
                groups - 1,
                if groups == 2 { "" } else { "s" }
            ));
        }
        if !lit.is_empty() {
            parts.push(Part::Literal(std::mem::take(&mut lit)));
        }
        parts.push(Part::Group(group));
    }
    if !lit.is_empty() {
        parts.push(Part::Literal(lit));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thousand_literal_rules_compile_and_rewrite() {
        // Past the default lazy DFA cache (some 700 of these once failed
        // to compile), in any script.
        let rules: Vec<Rule> = (0..1000)
            .map(|i| Rule::new(&format!("価格-{i:04}-eur"), &format!("price {i}")))
            .collect();
        let set = RuleSet::new(&rules).expect("a thousand rules compile");
        let out = crate::Rewriter::rewrite_all(&set, "a 価格-0999-eur b 価格-0007-eur".as_bytes());
        assert_eq!(String::from_utf8(out).unwrap(), "a price 999 b price 7");
    }

    fn refused(rule: Rule) -> String {
        match RuleSet::new(&[Rule::new("ok", "fine"), rule]) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn unsupported_constructs_are_refused_with_position() {
        assert_eq!(
            refused(Rule::new("foo(?=bar)", "x")),
            "rule 2: pattern \"foo(?=bar)\" is not supported: look-around, including look-ahead and look-behind, is not supported at byte 3"
        );
        assert_eq!(
            refused(Rule::new("(a)\\1", "x")),
            "rule 2: pattern \"(a)\\\\1\" is not supported: backreferences are not supported at byte 3"
        );
        let e = refused(Rule::new("a(", "x"));
        assert_eq!(
            e,
            "rule 2: pattern \"a(\" is not supported: unclosed group at byte 1"
        );
    }

    #[test]
    fn rules_the_lazy_dfa_refuses_are_named() {
        let e = refused(Rule::new(r"\b{start}cat", "x"));
        assert!(
            e.starts_with("rule 2: pattern \"\\\\b{start}cat\" is not supported"),
            "{e}"
        );
    }

    #[test]
    fn empty_matches_are_refused() {
        assert_eq!(
            refused(Rule::new("a*", "x")),
            "rule 2: pattern \"a*\" can match the empty string; a rule must match at least one byte"
        );
    }

    #[test]
    fn replacement_references_are_checked() {
        assert_eq!(
            refused(Rule::new("(a)(b)", "$7")),
            "rule 2: replacement \"$7\": $7 at byte 0, but the pattern has 2 groups"
        );
        assert_eq!(
            refused(Rule::new("(?P<x>a)", "${y}")),
            "rule 2: replacement \"${y}\": no group named \"y\" (byte 0)"
        );
        assert_eq!(
            refused(Rule::new("a", "cost: $")),
            "rule 2: replacement \"cost: $\": '$' at byte 6 must be followed by a digit, {name} or '$'"
        );
        assert!(RuleSet::new(&[Rule::new("(?P<x>a)(b)", "${x}$2$$${0}")]).is_ok());
    }

    #[test]
    fn word_boundaries_become_ascii() {
        let hir = |p: &str| {
            regex_syntax::ParserBuilder::new()
                .utf8(false)
                .build()
                .parse(p)
                .unwrap()
        };
        assert_eq!(
            ascii_word_boundaries(&hir(r"\bfoo\B|(\\b)(?u:\b)")),
            hir(r"(?-u:\b)foo(?-u:\B)|(\\b)(?-u:\b)")
        );
        let set = RuleSet::new(&[Rule::new(r"\bé\b", "x")]).unwrap();
        // `é` is no ASCII word byte: `\b` holds between it and `a`, not
        // between it and a space.
        assert_eq!(
            crate::Rewriter::rewrite_all(&set, "aéa é".as_bytes()),
            "axa é".as_bytes()
        );
    }

    /// Unicode word assertions are refused naming the rule (not the
    /// automata's "pattern 0"), the assertion and its byte.
    #[test]
    fn unicode_word_assertions_are_refused_with_rule_and_position() {
        const WHY: &str = "is a Unicode word boundary, which a streaming rule cannot decide (\\b and \\B are supported, as ASCII word boundaries)";
        assert_eq!(
            refused(Rule::new(r"\b{start}cat", "x")),
            format!(
                "rule 2: pattern \"\\\\b{{start}}cat\" is not supported: \\b{{start}} at byte 0 {WHY}"
            )
        );
        assert_eq!(
            refused(Rule::new(r"(?i)x|cat\<", "x")),
            format!("rule 2: pattern \"(?i)x|cat\\\\<\" is not supported: \\< at byte 9 {WHY}")
        );
        // `(?-u)` makes the first one ASCII (which the DFA builds); the
        // flag ends with its group, so the second is refused.
        assert_eq!(
            refused(Rule::new(r"(?:(?-u)\>a|b)\b{end-half}", "x")),
            format!(
                "rule 2: pattern \"(?:(?-u)\\\\>a|b)\\\\b{{end-half}}\" is not supported: \\b{{end-half}} at byte 14 {WHY}"
            )
        );
        assert!(RuleSet::new(&[Rule::new(r"(?-u:\<)cat", "x")]).is_ok());
    }

    /// Rules that compile alone but not together: the error names the
    /// rule that tips the set over (it was "rule 0"), and the limit.
    #[test]
    fn a_set_too_large_together_names_the_rule_that_tips_it() {
        // Each needs a 4.5 MiB cache, both 9 MiB: over the 8 MiB a cache
        // may take.
        let e = RuleSet::new(&[
            Rule::new(r"\w{120}a", "x"),
            Rule::new(r"\w{120}b", "x"),
            Rule::new("c", "x"),
        ])
        .err()
        .expect("too large together")
        .to_string();
        assert!(
            e.starts_with(
                r#"rule 2: pattern "\\w{120}b" compiles alone, but not with rule 1 before it: "#
            ),
            "{e}"
        );
        let e = refused(Rule::new(r"\w{250}", "x"));
        assert!(
            e.starts_with(r#"rule 2: pattern "\\w{250}" is not supported: "#)
                && e.ends_with("exceeded limit of 10485760"),
            "{e}"
        );
    }

    /// `(?x)` patterns compile as written: the rule's text was wrapped in
    /// `(?:...)`, whose `)` a `#` comment swallowed ("rule 1: ... error
    /// parsing pattern 0").
    #[test]
    fn verbose_patterns_with_comments_compile() {
        let set = RuleSet::new(&[
            Rule::new("ok", "fine"),
            Rule::new("(?x) c (a) t  # the animal", "[$1]"),
            Rule::new("(?x: d o g )", "<$0>").with_flags("i").unwrap(),
        ])
        .unwrap();
        assert_eq!(
            crate::Rewriter::rewrite_all(&set, b"ok cat DOG."),
            b"fine [a] <DOG>."
        );
    }

    #[test]
    fn flags() {
        let r = Rule::new("a", "b").with_flags("io").unwrap();
        assert!(r.case_insensitive && r.once);
        assert_eq!(
            Rule::new("a", "b").with_flags("x").unwrap_err(),
            "unknown flag 'x' (allowed: i, g, o)"
        );
    }
}
