//! The max-typists search: double from `start` until a trial fails (or
//! `max` passes), then bisect between the largest pass and the smallest
//! failure until they are within `tol` of each other.

pub struct Search {
    start: usize,
    max: usize,
    tol: f64,
    /// Largest passing N so far (0: none yet).
    pass: usize,
    /// Smallest failing N so far.
    fail: Option<usize>,
}

impl Search {
    pub fn new(start: usize, max: usize, tol: f64) -> Self {
        let max = max.max(1);
        Self {
            start: start.clamp(1, max),
            max,
            tol,
            pass: 0,
            fail: None,
        }
    }

    /// The next N to try, or None when the search is done.
    pub fn next(&self) -> Option<usize> {
        match self.fail {
            None if self.pass == 0 => Some(self.start),
            None if self.pass >= self.max => None,
            None => Some(self.pass.saturating_mul(2).min(self.max)),
            Some(fail) => {
                let gap = fail.saturating_sub(self.pass);
                if gap <= 1 || gap as f64 <= self.pass as f64 * self.tol {
                    None
                } else {
                    Some(self.pass + gap / 2)
                }
            }
        }
    }

    pub fn record(&mut self, n: usize, passed: bool) {
        if passed {
            self.pass = self.pass.max(n);
        } else {
            self.fail = Some(self.fail.map_or(n, |f| f.min(n)));
        }
    }

    /// Largest N that passed (0 if none did).
    pub fn result(&self) -> usize {
        self.pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(start: usize, max: usize, limit: usize) -> (usize, Vec<usize>) {
        let mut s = Search::new(start, max, 0.05);
        let mut tried = Vec::new();
        while let Some(n) = s.next() {
            assert!(tried.len() < 64, "search does not terminate: {tried:?}");
            tried.push(n);
            s.record(n, n <= limit);
        }
        (s.result(), tried)
    }

    #[test]
    fn doubles_then_bisects() {
        let (r, tried) = run(50, 20_000, 1234);
        assert_eq!(&tried[..6], &[50, 100, 200, 400, 800, 1600]);
        assert!(r <= 1234 && r as f64 >= 1234.0 * 0.95, "{r} {tried:?}");
        assert!(tried.len() <= 12, "{tried:?}");
    }

    #[test]
    fn stops_at_max() {
        let (r, tried) = run(50, 20_000, usize::MAX);
        assert_eq!(r, 20_000);
        assert_eq!(tried.last(), Some(&20_000));
        assert_eq!(tried.iter().filter(|&&n| n == 20_000).count(), 1);
        // Limit just below max: bisects between 12800 and 20000.
        let (r, _) = run(50, 20_000, 19_000);
        assert!((18_050..=19_000).contains(&r), "{r}");
    }

    #[test]
    fn below_start_and_never() {
        let (r, tried) = run(50, 20_000, 10);
        assert_eq!(tried[0], 50);
        assert_eq!(r, 10, "{tried:?}");
        let (r, _) = run(50, 20_000, 0);
        assert_eq!(r, 0);
        let (r, tried) = run(50, 40, 1000);
        assert_eq!((r, tried), (40, vec![40]));
    }
}
