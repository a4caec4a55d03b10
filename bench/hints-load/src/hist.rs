//! A small HDR-style histogram: values below 128 are kept exactly, larger
//! ones in 64 logarithmic sub-buckets per power of two, so any reported
//! value is at most 1/64 (1.6 %) above the recorded one. Buckets are
//! atomics so request tasks on any runtime thread can record into one
//! shared histogram without locks.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB as usize;

fn index(v: u64) -> usize {
    if v < 2 * SUB {
        v as usize
    } else {
        let shift = 63 - v.leading_zeros() - SUB_BITS;
        (SUB * u64::from(shift) + (v >> shift)) as usize
    }
}

/// Highest value that lands in bucket `i`.
fn highest(i: usize) -> u64 {
    let i = i as u64;
    if i < 2 * SUB {
        i
    } else {
        let shift = i / SUB - 1;
        let sub = i % SUB + SUB;
        ((sub + 1) << shift).wrapping_sub(1)
    }
}

pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum: AtomicU64,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub fn record(&self, v: u64) {
        self.buckets[index(v)].fetch_add(1, Relaxed);
        self.count.fetch_add(1, Relaxed);
        self.sum.fetch_add(v, Relaxed);
        self.max.fetch_max(v, Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    pub fn max(&self) -> u64 {
        self.max.load(Relaxed)
    }

    pub fn mean(&self) -> f64 {
        let n = self.count();
        if n == 0 {
            0.0
        } else {
            self.sum.load(Relaxed) as f64 / n as f64
        }
    }

    /// The value at quantile `q` (0..=1): the smallest recorded value
    /// (bucket-rounded up, capped at the maximum) that at least `q` of all
    /// values do not exceed. 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Relaxed);
            if seen >= rank {
                return highest(i).min(self.max());
            }
        }
        self.max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_with_bounded_error() {
        let mut v = 0u64;
        while v < u64::MAX / 3 {
            let i = index(v);
            assert!(i < BUCKETS);
            let hi = highest(i);
            assert!(hi >= v, "v={v} hi={hi}");
            assert!(
                i == 0 || highest(i - 1) < v,
                "v={v} in bucket {i} but also below"
            );
            assert!((hi - v) as f64 <= v as f64 / 64.0, "v={v} hi={hi}");
            v += v / 8 + 1;
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1);
        assert_eq!(highest(BUCKETS - 1), u64::MAX);
    }

    #[test]
    fn small_values_are_exact() {
        let h = Histogram::default();
        for v in 1..=100 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), 50);
        assert_eq!(h.quantile(0.9), 90);
        assert_eq!(h.quantile(0.99), 99);
        assert_eq!(h.quantile(1.0), 100);
        assert_eq!(h.quantile(0.0), 1);
        assert_eq!(h.max(), 100);
        assert!((h.mean() - 50.5).abs() < 1e-9);
    }

    #[test]
    fn large_values_within_error() {
        let h = Histogram::default();
        // Recorded in reverse to show order does not matter.
        for v in (1..=100_000u64).rev() {
            h.record(v * 10);
        }
        for (q, exact) in [(0.5, 500_000u64), (0.9, 900_000), (0.99, 990_000)] {
            let got = h.quantile(q);
            assert!(
                got >= exact && got as f64 <= exact as f64 * (1.0 + 1.0 / 64.0),
                "q={q} got={got}"
            );
        }
        assert_eq!(h.quantile(1.0), 1_000_000);
        // One slow outlier among fast requests shows up at the max only.
        let h = Histogram::default();
        for _ in 0..999 {
            h.record(1000);
        }
        h.record(5_000_000);
        assert!(h.quantile(0.99) < 1020);
        assert_eq!(h.quantile(0.998), h.quantile(0.99));
        assert_eq!(h.quantile(1.0), 5_000_000);
        assert_eq!(Histogram::default().quantile(0.99), 0);
    }
}
