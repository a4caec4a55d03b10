//! Which rules ever matched a resource, per (URL, validator), so a static
//! asset that does not change skips the rules that never match it (and
//! passes through untouched when none do).
//!
//! Entries are small: a 64-bit hash of the URL and validator (ETag or
//! Last-Modified) and a bitmap of rules (one bit per rule, so 50 rules take
//! 8 bytes plus the rule count). Memory is bounded by two
//! generations of at most `capacity / 2` entries each: when the young one
//! fills, it becomes the old one and the old one is dropped; a hit in the
//! old generation moves the entry back to the young one. That is LRU-like
//! eviction at O(1) per operation.
//!
//! Only record a body rewritten with *all* rules and read in full; a
//! response without a validator must not be cached (it may change).
//!
//! ```
//! use rewrite_engine::{MatchCache, Rewriter, Rule, RuleSet};
//! let rules = RuleSet::new(&[Rule::new("a", "A"), Rule::new("b", "B")]).unwrap();
//! let cache = MatchCache::new(1000);
//! let mut rw = Rewriter::new(&rules);
//! let mut out = Vec::new();
//! rw.write(b"aaa", &mut out);
//! rw.finish(&mut out);
//! cache.record("/x.css", "\"v1\"", rw.matched_rules());
//! let enabled = cache.lookup("/x.css", "\"v1\"").unwrap();
//! assert_eq!(enabled, [true, false]);
//! assert!(cache.lookup("/x.css", "\"v2\"").is_none());
//! ```

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;

/// Which rules matched: word 0 is the rule count, then one bit per rule.
type Bitmap = Box<[u64]>;

fn pack(matched: &[bool]) -> Bitmap {
    let mut words = vec![0u64; 1 + matched.len().div_ceil(64)];
    words[0] = matched.len() as u64;
    for (i, _) in matched.iter().enumerate().filter(|(_, m)| **m) {
        words[1 + i / 64] |= 1 << (i % 64);
    }
    words.into()
}

fn unpack(bits: &Bitmap) -> Vec<bool> {
    (0..bits[0] as usize)
        .map(|i| bits[1 + i / 64] & (1 << (i % 64)) != 0)
        .collect()
}

/// The cache; share one per rule set.
pub struct MatchCache {
    half: usize,
    seed: std::collections::hash_map::RandomState,
    gens: Mutex<Generations>,
}

#[derive(Default)]
struct Generations {
    young: HashMap<u64, Bitmap>,
    old: HashMap<u64, Bitmap>,
}

impl MatchCache {
    /// A cache of about `capacity` entries (at least 2).
    pub fn new(capacity: usize) -> Self {
        Self {
            half: (capacity / 2).max(1),
            seed: Default::default(),
            gens: Mutex::default(),
        }
    }

    fn key(&self, url: &str, validator: &str) -> u64 {
        let mut h = self.seed.build_hasher();
        h.write(url.as_bytes());
        h.write_u8(0xff); // separator: no (url, validator) pair aliases another
        h.write(validator.as_bytes());
        h.finish()
    }

    /// The rules that matched this resource last time, by rule index.
    pub fn lookup(&self, url: &str, validator: &str) -> Option<Vec<bool>> {
        let key = self.key(url, validator);
        let mut g = self.gens.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = g.young.get(&key) {
            return Some(unpack(v));
        }
        let v = g.old.remove(&key)?;
        let matched = unpack(&v);
        self.insert(&mut g, key, v);
        Some(matched)
    }

    /// Records which rules matched a body rewritten with all of them.
    pub fn record(&self, url: &str, validator: &str, matched: &[bool]) {
        let key = self.key(url, validator);
        let mut g = self.gens.lock().unwrap_or_else(|e| e.into_inner());
        self.insert(&mut g, key, pack(matched));
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        let g = self.gens.lock().unwrap_or_else(|e| e.into_inner());
        g.young.len() + g.old.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn insert(&self, g: &mut Generations, key: u64, v: Bitmap) {
        if g.young.len() >= self.half && !g.young.contains_key(&key) {
            g.old = std::mem::take(&mut g.young);
        }
        g.young.insert(key, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Rewriter, Rule, RuleSet};

    #[test]
    fn bitmaps_round_trip() {
        for n in [0, 1, 63, 64, 65, 200] {
            let m: Vec<bool> = (0..n).map(|i| i % 3 == 0 || i == n - 1).collect();
            assert_eq!(unpack(&pack(&m)), m, "{n} rules");
        }
    }

    #[test]
    fn bounded_and_recently_used_entries_survive() {
        let cache = MatchCache::new(10);
        cache.record("/hot", "1", &[true]);
        for i in 0..100 {
            cache.record(&format!("/{i}"), "1", &[false]);
            // Touching /hot keeps it.
            assert!(cache.lookup("/hot", "1").is_some());
        }
        assert!(cache.len() <= 10);
        assert!(cache.lookup("/0", "1").is_none());
    }

    #[test]
    fn a_subset_of_matching_rules_gives_the_same_output() {
        let rules = RuleSet::new(&[
            Rule::new("python", "snake"),
            Rule::new("ruby", "gem"),
            Rule::new("py", "PY"),
        ])
        .unwrap();
        let body = b"python and py, twice: python";
        let mut full = Rewriter::new(&rules);
        let mut out = Vec::new();
        full.write(body, &mut out);
        full.finish(&mut out);
        assert_eq!(full.matched_rules(), &[true, false, true]);
        let mut sub = Rewriter::with_rules(&rules, full.matched_rules());
        let mut out2 = Vec::new();
        sub.write(body, &mut out2);
        sub.finish(&mut out2);
        assert_eq!(out, out2);
        assert!(Rewriter::with_rules(&rules, &[false, false, false]).is_passthrough());
    }
}
