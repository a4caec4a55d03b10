//! Where a walk for the longest match can stop early.
//!
//! The longest match from a start is found by walking the anchored DFA
//! until it dies. A walk may run far past the match it ends up taking:
//! with the rules `a` and `a+b`, every `a` of a long run of `a`s is a
//! match, and each walk from one goes on to the end of the run in case a
//! `b` follows. Walked from every start, that is quadratic in the run.
//!
//! The DFA is deterministic, so the walk from a state at a position is the
//! same whichever start it came from. When a walk dies, every (state,
//! position) pair it passed since its last match leads to death without a
//! match; [`DeadEnds`] remembers them (one state per position), and a later
//! walk that reaches one stops there, keeping the match it has. Each pair
//! is then walked through once, as in Reps' linear-time maximal munch
//! ("Maximal-munch" tokenization in linear time, TOPLAS 1998). Only walks
//! longer than [`DeadEnds::AFTER`] bytes use it, so the common short walk
//! costs nothing more.

use regex_automata::hybrid::LazyStateID;

/// Pairs known to die, for the positions of one buffer and one lazy DFA
/// cache (its state ids change when it is cleared or replaced).
#[derive(Default)]
pub(crate) struct DeadEnds {
    /// `at[i]`: a state that, about to read byte `i`, dies before any
    /// match; `LazyStateID::default()` (never a walk's state) for none.
    at: Vec<LazyStateID>,
    /// Pairs the walk in progress passed since its last match.
    pending: Vec<(usize, LazyStateID)>,
    /// The cache's clear count the entries belong to.
    clears: usize,
}

impl DeadEnds {
    /// Steps of a walk before it consults and feeds the memo.
    pub const AFTER: usize = 16;

    /// A walk begins on a cache cleared `clears` times so far.
    pub fn begin(&mut self, clears: usize) {
        self.pending.clear();
        if clears != self.clears {
            self.forget();
            self.clears = clears;
        }
    }

    /// Whether the walk, in `sid` before reading byte `at`, is at a known
    /// dead end; if not, the pair is remembered as the walk's.
    pub fn check(&mut self, at: usize, sid: LazyStateID) -> bool {
        if self.at.get(at) == Some(&sid) {
            return true;
        }
        self.pending.push((at, sid));
        false
    }

    /// The walk found a match: the pairs it passed lead to one.
    pub fn matched(&mut self) {
        self.pending.clear();
    }

    /// The walk died (or reached a dead end) with no match after its
    /// pairs: remember them.
    pub fn died(&mut self) {
        for (at, sid) in self.pending.drain(..) {
            if self.at.len() <= at {
                self.at.resize(at + 1, LazyStateID::default());
            }
            self.at[at] = sid;
        }
    }

    /// Positions moved (the buffer was drained) or the DFA changed.
    pub fn forget(&mut self) {
        self.at.clear();
        self.pending.clear();
    }
}
