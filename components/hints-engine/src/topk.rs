//! A bounded best-k collector: k is small (at most a few dozen), so a flat
//! vector with the current minimum cached beats a heap.

/// Keeps the `k` highest-scored items.
pub struct TopK<T> {
    k: usize,
    items: Vec<(f32, T)>,
    min: f32,
}

impl<T: PartialEq> TopK<T> {
    /// An empty collector for `k` items.
    pub fn new(k: usize) -> Self {
        Self {
            k,
            items: Vec::with_capacity(k + 1),
            min: f32::NEG_INFINITY,
        }
    }

    /// The score an item must beat to enter (−∞ until full).
    #[inline]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The score of the `n`-th best item (−∞ if there are fewer).
    pub fn nth_score(&self, n: usize) -> f32 {
        if n == 0 || self.items.len() < n {
            return f32::NEG_INFINITY;
        }
        let mut scores: Vec<f32> = self.items.iter().map(|(s, _)| *s).collect();
        scores.sort_unstable_by(|a, b| b.total_cmp(a));
        scores[n - 1]
    }

    pub fn threshold(&self) -> f32 {
        if self.items.len() < self.k {
            f32::NEG_INFINITY
        } else {
            self.min
        }
    }

    /// Offers an item; of two equal items the better-scored one is kept.
    pub fn push(&mut self, score: f32, item: T) {
        if self.k == 0 || score <= self.threshold() {
            return;
        }
        if let Some(existing) = self.items.iter_mut().find(|(_, t)| *t == item) {
            if score > existing.0 {
                *existing = (score, item);
                self.recompute_min();
            }
            return;
        }
        if self.items.len() == self.k {
            let worst = self
                .items
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.0.total_cmp(&b.1.0))
                .map(|(i, _)| i)
                .expect("full");
            self.items.swap_remove(worst);
        }
        self.items.push((score, item));
        self.recompute_min();
    }

    fn recompute_min(&mut self) {
        self.min = self
            .items
            .iter()
            .map(|(s, _)| *s)
            // A comparison, not `f32::min`: scores are never NaN, and in
            // wasm `f32::min` is a call to libm's `fminf` (NaN rules).
            .fold(f32::INFINITY, |min, s| if s < min { s } else { min });
    }

    /// The items, best first (ties keep insertion order).
    pub fn into_sorted(mut self) -> Vec<(f32, T)> {
        self.items.sort_by(|a, b| b.0.total_cmp(&a.0));
        self.items
    }
}

#[cfg(test)]
mod tests {
    use super::TopK;

    #[test]
    fn keeps_the_best() {
        let mut t = TopK::new(3);
        for (s, i) in [(1.0, 1), (5.0, 5), (3.0, 3), (4.0, 4), (0.5, 0), (5.5, 5)] {
            t.push(s, i);
        }
        let got: Vec<_> = t.into_sorted().into_iter().map(|(_, i)| i).collect();
        assert_eq!(got, [5, 4, 3]);
    }
}
