//! A bounded cache of recent results: what a typing user asks again.
//!
//! A user typing `москва хаб` sends `москва` again with every keystroke of
//! the next word, and many users type the same words, so the work done for
//! a word (its automaton, its expansion over the dictionary) is often done
//! again moments later. Two generations of at most `budget` bytes each
//! (plus the entry that filled one): a hit in the old one moves to the
//! young one, and when the young one is full the old one is dropped.
//! Memory stays under twice the budget plus two of the largest entries,
//! whatever the queries. An entry larger than the budget empties the young
//! generation at once; not caching such entries was measured and cost
//! more (a broad word's expansion is dear to walk again).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

/// Results by key, in two generations (see the module docs).
pub struct Recent<K, V> {
    young: HashMap<K, (V, usize)>,
    old: HashMap<K, (V, usize)>,
    young_bytes: usize,
    budget: usize,
}

impl<K: Hash + Eq, V: Clone> Recent<K, V> {
    /// An empty cache keeping up to `budget` bytes per generation.
    pub fn new(budget: usize) -> Self {
        Self {
            young: HashMap::new(),
            old: HashMap::new(),
            young_bytes: 0,
            budget,
        }
    }

    /// The value kept for `key`, else `make()`'s, which is kept with the
    /// byte size it reports. `make` runs without the lock held.
    ///
    /// ```
    /// # use hints_engine::recent::Recent;
    /// # use std::sync::Mutex;
    /// let cache = Mutex::new(Recent::new(1 << 10));
    /// assert_eq!(Recent::get_or_make(&cache, "a", || (1, 8)), 1);
    /// assert_eq!(Recent::get_or_make(&cache, "a", || (2, 8)), 1); // kept
    /// ```
    pub fn get_or_make(cache: &Mutex<Self>, key: K, make: impl FnOnce() -> (V, usize)) -> V {
        let found = {
            let mut recent = cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((value, _)) = recent.young.get(&key) {
                return value.clone();
            }
            recent.old.remove(&key)
        };
        let (value, bytes) = found.unwrap_or_else(make);
        let mut recent = cache.lock().unwrap_or_else(|e| e.into_inner());
        recent.young_bytes += bytes;
        recent.young.insert(key, (value.clone(), bytes));
        if recent.young_bytes > recent.budget {
            recent.old = std::mem::take(&mut recent.young);
            recent.young_bytes = 0;
        }
        value
    }

    /// Entries kept in both generations.
    pub fn len(&self) -> usize {
        self.young.len() + self.old.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_two_generations_within_the_budget() {
        let cache = Mutex::new(Recent::new(100));
        let made = std::cell::Cell::new(0);
        let get = |k: u32| {
            Recent::get_or_make(&cache, k, || {
                made.set(made.get() + 1);
                (k * 10, 40)
            })
        };
        assert_eq!((get(1), get(2)), (10, 20));
        assert_eq!((get(1), made.get()), (10, 2), "a hit is not made again");
        // The third entry fills the young generation, which becomes the old.
        get(3);
        assert_eq!(cache.lock().unwrap().len(), 3);
        // 1 moves back to the young one; a new generation then drops 2 and 3.
        assert_eq!((get(1), made.get()), (10, 3));
        get(4);
        get(5);
        let kept = cache.lock().unwrap().len();
        assert!(kept <= 5, "{kept}");
        get(2);
        assert_eq!(made.get(), 6, "2 was dropped with its generation");
    }
}
