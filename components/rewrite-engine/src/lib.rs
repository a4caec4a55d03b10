//! Streaming search-and-replace with many rules in one pass.
//!
//! A [`RuleSet`] compiles every rule into one multi-pattern lazy DFA
//! (regex-automata); a [`Rewriter`] applies it to one body fed in chunks of
//! any size, emitting output as soon as it is certain.
//!
//! # Semantics
//!
//! The body is scanned left to right. At each point the engine takes the
//! match that starts leftmost among all enabled rules; of the matches that
//! start there it takes the longest; of equally long ones, the rule listed
//! first. The match is replaced and scanning resumes after it, so matches
//! never overlap and replacement text is never rescanned. A rule with the
//! `o` flag is disabled after its first replacement in a body. Patterns may
//! not match the empty string.
//!
//! Output does not depend on how the body is split into chunks: the engine
//! holds back only bytes where a match may still be in progress and emits
//! everything before them. If more than [`Rewriter::with_hold_cap`] bytes
//! (64 KiB by default) would be held, the bytes older than the last
//! `hold_cap` are emitted as they are, whether or not a match starts among
//! them, and [`Stats::forced_emits`] counts it. A match longer than the
//! cap is then not replaced as a whole; scanning goes on after the bytes
//! emitted, so the part of it still held may match on its own (`a+b` over
//! 200,000 `a`s and a `b` replaces the last 65,534 `a`s and the `b`).
//! Memory per body is therefore bounded by the cap plus one chunk, and
//! time stays linear: giving up costs one pass over the window, not one
//! per byte.
//!
//! Every pattern runs in time linear in the input: there is no
//! backtracking, and constructs that would need it (look-around,
//! backreferences) are refused when the rules are compiled.
//!
//! ```
//! use rewrite_engine::{Rule, RuleSet, Rewriter};
//! let rules = RuleSet::new(&[
//!     Rule::new("origin\\.example", "clone.example"),
//!     Rule::new("UA-(\\d+)", "UA-0000${1}").with_flags("o").unwrap(),
//! ]).unwrap();
//! let mut out = Vec::new();
//! let mut rw = Rewriter::new(&rules);
//! for chunk in ["see origin.exa", "mple, UA-12 UA-34"] {
//!     rw.write(chunk.as_bytes(), &mut out);
//! }
//! rw.finish(&mut out);
//! assert_eq!(out, b"see clone.example, UA-000012 UA-34");
//! ```
#![deny(missing_docs)]

mod dead_ends;
mod groups;
mod literal;
mod live;
mod match_cache;
pub mod nginx;
mod rules;
mod starts;

pub use match_cache::MatchCache;
pub use rules::{Rule, RuleError, RuleSet};

use dead_ends::DeadEnds;
use literal::Verdict;
use regex_automata::hybrid::dfa;
use regex_automata::util::primitives::PatternID;
use regex_automata::{Anchored, Input, Span};
use rules::{Automata, Caches, Candidates, Part};
use starts::Scan;
use std::sync::Arc;

/// Default cap on held-back bytes.
pub const DEFAULT_HOLD_CAP: usize = 64 * 1024;

/// Counters of one body.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Replacements made.
    pub replacements: u64,
    /// Times held bytes passed the cap and were emitted unmatched.
    pub forced_emits: u64,
}

/// One replacement, as a preview shows it: the rule that made it, the
/// input bytes it replaced and the output bytes it wrote (offsets from the
/// start of the body).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replacement {
    /// The rule's index.
    pub rule: usize,
    /// What it matched, in the input.
    pub input: std::ops::Range<u64>,
    /// What it wrote, in the output.
    pub output: std::ops::Range<u64>,
}

struct Trace {
    replacements: Vec<Replacement>,
    cap: usize,
    counts: Vec<u64>,
}

/// Rewrites one body.
pub struct Rewriter<'r> {
    rules: &'r RuleSet,
    automata: Arc<Automata>,
    /// The automata's search caches (given back when the body is done).
    caches: Option<Caches>,
    disabled: Vec<bool>,
    /// Unemitted bytes, preceded by `ctx` bytes already emitted (kept as
    /// look-behind context for `\b` and `^`).
    buf: Vec<u8>,
    ctx: usize,
    hold_cap: usize,
    /// Which rules have matched in this body (bit per rule).
    matched: Vec<bool>,
    stats: Stats,
    /// Live starts of the current buffer, ascending (`None`: not scanned
    /// since the buffer changed).
    live_starts: Option<Vec<usize>>,
    live_spare: Option<Vec<usize>>,
    /// Whether to look for starts with the rules' candidate filter (when
    /// they have one); see [`VAIN_WALKS_PER_BYTE`].
    use_filters: bool,
    /// Bytes walked from candidates that were no match, and bytes fed.
    walked_in_vain: usize,
    bytes_in: usize,
    /// Where walks for the longest match can stop (see `dead_ends.rs`).
    dead_ends: DeadEnds,
    /// The start filter's hits in the buffer.
    scan: Scan,
    /// For a preview (`with_trace`): replacements up to a cap, and every
    /// rule's count of them.
    trace: Option<Trace>,
    /// Bytes emitted before the current `write`/`finish`, and the length
    /// of its `out` when it began: where an output offset is.
    emitted: u64,
    out_base: usize,
}

/// What [`Rewriter::next_start`] found.
enum Next {
    /// A match may start here (of the rules in these groups of the start
    /// filter only; 0: of any rule).
    At(usize, u64),
    /// No match starts before this position (and none is in progress).
    EmitTo(usize),
}

/// Bytes the filters' candidates may walk in vain per byte of input (plus
/// a free allowance) before a body goes back to the leftmost search, which
/// passes over dense candidates that are no match (`(a|aa)*b` over runs of
/// `a`s) in one scan.
const VAIN_WALKS_PER_BYTE: usize = 1;
const VAIN_WALKS_FREE: usize = 64 * 1024;

enum Longest {
    /// A match ending at `end` of rule `rule`.
    Match { end: usize, rule: usize },
    /// The match may still grow: more input is needed.
    NeedMore,
    /// No match starts here after all (`walked` bytes were looked at).
    None { walked: usize },
    /// Held back to the cap with no match decided: give up every start
    /// older than the cap's window at once.
    Overflow,
}

impl<'r> Rewriter<'r> {
    /// A rewriter for one body.
    pub fn new(rules: &'r RuleSet) -> Self {
        Self::with_rules(rules, &vec![true; rules.len()])
    }

    /// A rewriter that applies only the rules marked in `enabled` (by rule
    /// index), such as the ones a [`MatchCache`] says matched this resource
    /// before. Output equals that of all rules whenever the others would
    /// not have matched: a rule that never wins a position changes nothing.
    pub fn with_rules(rules: &'r RuleSet, enabled: &[bool]) -> Self {
        let disabled: Vec<bool> = (0..rules.len())
            .map(|i| !enabled.get(i).copied().unwrap_or(false))
            .collect();
        let automata = rules
            .automata(&disabled)
            .expect("a subset of compiled rules compiles");
        Self {
            caches: Some(automata.caches()),
            live_starts: None,
            live_spare: None,
            automata,
            rules,
            disabled,
            buf: Vec::new(),
            ctx: 0,
            hold_cap: DEFAULT_HOLD_CAP,
            matched: vec![false; rules.len()],
            stats: Stats::default(),
            use_filters: true,
            walked_in_vain: 0,
            bytes_in: 0,
            dead_ends: DeadEnds::default(),
            scan: Scan::default(),
            trace: None,
            emitted: 0,
            out_base: 0,
        }
    }

    /// Records the first `cap` replacements with where they are in the
    /// input and the output ([`Rewriter::trace`]): what a preview
    /// highlights.
    pub fn with_trace(mut self, cap: usize) -> Self {
        self.trace = Some(Trace {
            replacements: Vec::new(),
            cap,
            counts: vec![0; self.rules.len()],
        });
        self
    }

    /// The replacements recorded so far (empty without `with_trace`).
    pub fn trace(&self) -> &[Replacement] {
        self.trace.as_ref().map_or(&[], |t| &t.replacements)
    }

    /// Replacements so far by rule index, all of them, past the trace's
    /// cap too (empty without `with_trace`).
    pub fn rule_counts(&self) -> &[u64] {
        self.trace.as_ref().map_or(&[], |t| &t.counts)
    }

    /// Sets the cap on held-back bytes (at least 1).
    pub fn with_hold_cap(mut self, cap: usize) -> Self {
        self.hold_cap = cap.max(1);
        self
    }

    /// Counters so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Which rules matched at least once so far, by rule index.
    pub fn matched_rules(&self) -> &[bool] {
        &self.matched
    }

    /// Feeds a chunk; appends to `out` whatever is now certain.
    pub fn write(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        self.buf.extend_from_slice(chunk);
        self.bytes_in += chunk.len();
        self.out_base = out.len();
        self.run(false, out);
        self.emitted += (out.len() - self.out_base) as u64;
    }

    /// Ends the body; appends the rest to `out`.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        self.out_base = out.len();
        self.run(true, out);
        self.emitted += (out.len() - self.out_base) as u64;
    }

    /// Whether no rule is enabled: the body can pass through untouched.
    pub fn is_passthrough(&self) -> bool {
        self.automata.rule_of.is_empty()
    }

    /// Rewrites a whole body at once.
    pub fn rewrite_all(rules: &RuleSet, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(input.len());
        let mut rw = Rewriter::new(rules);
        rw.write(input, &mut out);
        rw.finish(&mut out);
        out
    }

    fn run(&mut self, last: bool, out: &mut Vec<u8>) {
        // The buffer changed since the last scan.
        self.live_spare = self.live_starts.take().or(self.live_spare.take());
        self.scan.reset();
        let mut pos = self.ctx;
        loop {
            let len = self.buf.len();
            if pos >= len {
                break;
            }
            let (start, groups) = match self.next_start(pos, last) {
                Next::At(start, groups) => (start, groups),
                Next::EmitTo(to) => {
                    out.extend_from_slice(&self.buf[pos..to]);
                    pos = to;
                    break;
                }
            };
            out.extend_from_slice(&self.buf[pos..start]);
            pos = start;
            let longest = match self.literals_at(start, groups, last) {
                Some(longest) => longest,
                None => self.longest_at(start, last),
            };
            match longest {
                Longest::Match { end, rule } => {
                    self.replace(rule, start, end, out);
                    pos = end;
                }
                Longest::NeedMore => break,
                Longest::None { walked } => {
                    // A candidate of a filter that is no match, or a match
                    // the leftmost search saw that needed the end of input
                    // (with more input there is none here).
                    out.push(self.buf[start]);
                    pos = start + 1;
                    self.walked_in_vain += walked;
                    if self.walked_in_vain > VAIN_WALKS_PER_BYTE * self.bytes_in + VAIN_WALKS_FREE {
                        // Candidates that run far before failing (`a+b`
                        // over a run of `a`s) cost more than one scan.
                        self.use_filters = false;
                    }
                }
                Longest::Overflow => {
                    // Emitting one byte and searching again from the next
                    // would rescan the whole window per byte (quadratic in
                    // the cap): every start older than the window goes out
                    // as it is, as `earliest_live` does for held bytes.
                    let window = len - self.hold_cap + 1;
                    out.extend_from_slice(&self.buf[start..window]);
                    pos = window;
                }
            }
        }
        // Keep one byte of look-behind context before what is held.
        let keep_from = pos.saturating_sub(1);
        self.buf.drain(..keep_from);
        self.dead_ends.forget();
        self.ctx = pos - keep_from;
        if last {
            self.buf.clear();
            self.ctx = 0;
        }
    }

    /// Where the next match at or after `pos` may start, or how far the
    /// buffer can be emitted because none starts there.
    fn next_start(&mut self, pos: usize, last: bool) -> Next {
        let len = self.buf.len();
        let candidates = self
            .automata
            .candidates
            .as_ref()
            .filter(|_| self.use_filters);
        let found = match candidates {
            Some(Candidates::Starts(filter)) => {
                // Every start the filter skips is no match; one whose bytes
                // run past the buffer's end is a candidate, so a match
                // still in progress there is found by `longest_at`
                // (`NeedMore`).
                return filter
                    .next(&mut self.scan, &self.buf, pos)
                    .map_or(Next::EmitTo(len), |c| Next::At(c.at, c.groups));
            }
            // Every match begins with one of its literals; one that the
            // buffer's end cuts is a live start (below).
            Some(Candidates::Literals(prefilter)) => {
                prefilter.find(&self.buf, Span::from(pos..len))
            }
            None => {
                let input = Input::new(&self.buf).range(pos..);
                self.automata
                    .find
                    .search_with(&mut self.caches.as_mut().expect(CACHES).find, &input)
                    .map(|m| m.span())
            }
        };
        let Some(m) = found else {
            return Next::EmitTo(if last {
                len
            } else {
                self.earliest_live(pos, len)
            });
        };
        let start = m.start;
        if !last {
            // A match that starts earlier but is still incomplete would
            // win over this one: wait for it.
            let live = self.earliest_live(pos, start);
            if live < start {
                return Next::EmitTo(live);
            }
        }
        Next::At(start, 0)
    }

    /// The longest match at `start` when the start filter's `groups` there
    /// are all literal rules: their bytes compared, not the DFA walked.
    /// `None` when the DFA must decide: some rule there is no literal (and
    /// the fixed bytes its matches begin with, if it has any, are there),
    /// or a comparison cannot decide.
    fn literals_at(&self, start: usize, groups: u64, last: bool) -> Option<Longest> {
        let Some(Candidates::Starts(filter)) = &self.automata.candidates else {
            return None;
        };
        if groups == 0 {
            return None;
        }
        // The longest match; of equally long ones, the first rule's.
        let mut best: Option<(usize, usize)> = None;
        let mut rest = groups;
        while rest != 0 {
            let rule = filter.sole(rest.trailing_zeros())?;
            rest &= rest - 1;
            // A rule that is no literal may still be ruled out by the
            // fixed bytes its matches begin with; if those are there, the
            // DFA decides.
            let literal = self.rules.rules[rule].literal.as_ref()?;
            match literal.check(&self.buf, start, last) {
                Verdict::Match(_) if !literal.whole => return None,
                Verdict::Match(end) => {
                    if best.is_none_or(|(e, r)| end > e || (end == e && rule < r)) {
                        best = Some((end, rule));
                    }
                }
                Verdict::NoMatch => {}
                Verdict::Unsure => return None,
            }
        }
        Some(
            best.map_or(Longest::None { walked: 0 }, |(end, rule)| Longest::Match {
                end,
                rule,
            }),
        )
    }

    /// The longest match of any enabled rule starting at `start`.
    fn longest_at(&mut self, start: usize, last: bool) -> Longest {
        let all = &self.automata.all;
        let cache = &mut self.caches.as_mut().expect(CACHES).all;
        let input = Input::new(&self.buf).range(start..).anchored(Anchored::Yes);
        let mut sid = all
            .start_state_forward(cache, &input)
            .expect("anchored start state");
        let mut best: Option<(usize, usize)> = None;
        let mut i = start;
        let len = self.buf.len();
        let dead_ends = &mut self.dead_ends;
        dead_ends.begin(cache.clear_count());
        loop {
            if i == len {
                if !last {
                    if len - start >= self.hold_cap {
                        // Cannot hold more: take what we have.
                        self.stats.forced_emits += 1;
                        return best.map_or(Longest::Overflow, |(end, rule)| Longest::Match {
                            end,
                            rule,
                        });
                    }
                    return Longest::NeedMore;
                }
                sid = all.next_eoi_state(cache, sid).expect("eoi");
                if sid.is_match() {
                    best = Some((len, lowest_rule(all, cache, sid, &self.automata.rule_of)));
                }
                break;
            }
            if i - start >= DeadEnds::AFTER && dead_ends.check(i, sid) {
                dead_ends.died();
                break;
            }
            sid = all.next_state(cache, sid, self.buf[i]).expect("next state");
            if sid.is_match() {
                // DFA matches are reported one byte late: it ended at i.
                best = Some((i, lowest_rule(all, cache, sid, &self.automata.rule_of)));
                dead_ends.matched();
            }
            if sid.is_dead() {
                dead_ends.died();
                break;
            }
            i += 1;
        }
        best.map_or(Longest::None { walked: i - start }, |(end, rule)| {
            Longest::Match { end, rule }
        })
    }

    /// The first position in `from..to` where a partial match is still
    /// alive at the end of the buffer, or `to` if there is none. Only the
    /// last `hold_cap` bytes are candidates: that is what bounds memory.
    ///
    /// Live starts depend only on the buffer, so they are found once per
    /// [`Rewriter::run`] (see [`Rewriter::scan_live`]) and then looked up.
    fn earliest_live(&mut self, from: usize, to: usize) -> usize {
        if self.live_starts.is_none() {
            self.scan_live();
        }
        let len = self.buf.len();
        let bound = len.saturating_sub(self.hold_cap);
        let starts = self.live_starts.as_deref().unwrap_or(&[]);
        let i = starts.partition_point(|&s| s < from.max(bound));
        match starts.get(i) {
            Some(&s) if s < to => {
                if s == bound && from < bound {
                    // A match in progress may have begun before the window.
                    self.stats.forced_emits += 1;
                }
                s
            }
            _ => to,
        }
    }

    /// Runs the reverse prefix automaton backwards from the end of the
    /// buffer, over at most the last `hold_cap` bytes, until it dies: a
    /// match at boundary `s` means `buf[s..]` may begin a match (see
    /// `live.rs`). Records those starts in ascending order.
    fn scan_live(&mut self) {
        let live = &self.automata.live;
        let cache = &mut self.caches.as_mut().expect(CACHES).live;
        let len = self.buf.len();
        let lo = self.ctx.max(len.saturating_sub(self.hold_cap));
        let mut starts = self.live_spare.take().unwrap_or_default();
        starts.clear();
        if lo < len {
            let input = Input::new(&self.buf).range(lo..len).anchored(Anchored::Yes);
            let mut sid = live
                .start_state_reverse(cache, &input)
                .expect("reverse start state");
            // Each transition reveals whether the boundary just passed
            // starts a live prefix (DFA matches are reported one byte late).
            let mut at = len;
            loop {
                sid = if at == 0 {
                    live.next_eoi_state(cache, sid).expect("eoi")
                } else {
                    live.next_state(cache, sid, self.buf[at - 1])
                        .expect("next state")
                };
                if sid.is_match() && at < len {
                    starts.push(at);
                }
                if sid.is_dead() || at == lo {
                    break;
                }
                at -= 1;
            }
        }
        starts.reverse();
        self.live_starts = Some(starts);
    }

    fn replace(&mut self, rule: usize, start: usize, end: usize, out: &mut Vec<u8>) {
        let written_from = out.len();
        let compiled = &self.rules.rules[rule];
        let caps = compiled
            .captures
            .as_ref()
            .and_then(|groups| groups.find(&self.buf, start, end));
        for part in &compiled.parts {
            match part {
                Part::Literal(b) => out.extend_from_slice(b),
                Part::Group(0) => out.extend_from_slice(&self.buf[start..end]),
                Part::Group(g) => {
                    if let Some(span) = caps.as_ref().and_then(|c| c.get_group(*g)) {
                        out.extend_from_slice(&self.buf[span.range()]);
                    }
                }
            }
        }
        self.stats.replacements += 1;
        self.matched[rule] = true;
        if let Some(trace) = &mut self.trace {
            trace.counts[rule] += 1;
            if trace.replacements.len() < trace.cap {
                // buf holds the input's last bytes; out got this run's output.
                let input_base = (self.bytes_in - self.buf.len()) as u64;
                let output_at = self.emitted + (written_from - self.out_base) as u64;
                trace.replacements.push(Replacement {
                    rule,
                    input: input_base + start as u64..input_base + end as u64,
                    output: output_at..output_at + (out.len() - written_from) as u64,
                });
            }
        }
        if compiled.once {
            self.disabled[rule] = true;
            let automata = self
                .rules
                .automata(&self.disabled)
                .expect("a subset of compiled rules compiles");
            let old = std::mem::replace(&mut self.automata, automata);
            if let Some(caches) = self.caches.replace(self.automata.caches()) {
                old.give_back(caches);
            }
            // Fewer rules, fewer live starts; other DFA states.
            self.live_spare = self.live_starts.take().or(self.live_spare.take());
            self.scan.reset();
            self.dead_ends.forget();
        }
    }
}

impl Drop for Rewriter<'_> {
    fn drop(&mut self) {
        if let Some(caches) = self.caches.take() {
            self.automata.give_back(caches);
        }
    }
}

const CACHES: &str = "a rewriter holds its caches until dropped";

/// The lowest rule index among the patterns matching in state `sid`.
fn lowest_rule(
    all: &dfa::DFA,
    cache: &dfa::Cache,
    sid: regex_automata::hybrid::LazyStateID,
    rule_of: &[usize],
) -> usize {
    (0..all.match_len(cache, sid))
        .map(|k| rule_of[all.match_pattern(cache, sid, k).as_usize()])
        .min()
        .unwrap_or_else(|| rule_of[PatternID::ZERO.as_usize()])
}
