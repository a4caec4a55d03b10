//! The host's own panics. Each is a bug: a host function's panic fails
//! its guest call alone (`invoke::unless_panicked`), a database client's
//! its call, and the process goes on; but a tenant that found one could
//! repeat it as fast as it sends requests, each with a report on the
//! host's log outside any tenant's log budget. So every panic is counted
//! (`edge_panics_total`, for an operator's alert) and reports (the
//! default hook's: message, place, backtrace) are printed for at most
//! [`REPORTS_PER_MINUTE`] a minute; the next report shown says how many
//! were not.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Panic reports printed per minute.
pub const REPORTS_PER_MINUTE: u32 = 10;

static PANICS: AtomicU64 = AtomicU64::new(0);
static UNSHOWN: AtomicU64 = AtomicU64::new(0);
static REPORTS: Mutex<Option<Window>> = Mutex::new(None);

/// Puts the counting hook in front of the current one (the default,
/// which prints the report).
pub fn count_panics() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Relaxed);
        let shown = REPORTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(|| Window::new(Instant::now()))
            .admit(Instant::now());
        if !shown {
            UNSHOWN.fetch_add(1, Relaxed);
            return;
        }
        let unshown = UNSHOWN.swap(0, Relaxed);
        if unshown > 0 {
            eprintln!(
                "edge: {unshown} panic report(s) not shown (at most {REPORTS_PER_MINUTE} a minute; all are in edge_panics_total)"
            );
        }
        report(info);
    }));
}

/// Panics in the process so far.
pub fn count() -> u64 {
    PANICS.load(Relaxed)
}

/// Reports shown in the current minute.
struct Window {
    start: Instant,
    shown: u32,
}

impl Window {
    fn new(now: Instant) -> Window {
        Window {
            start: now,
            shown: 0,
        }
    }

    /// Whether a report at `now` is shown.
    fn admit(&mut self, now: Instant) -> bool {
        if now.duration_since(self.start) >= Duration::from_secs(60) {
            *self = Window::new(now);
        }
        self.shown += 1;
        self.shown <= REPORTS_PER_MINUTE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_panic_is_counted() {
        count_panics();
        let before = count();
        for _ in 0..3 {
            assert!(std::thread::spawn(|| panic!("a bug")).join().is_err());
        }
        // (Other tests of this process may panic meanwhile.)
        assert!(count() >= before + 3);
    }

    #[test]
    fn reports_are_shown_up_to_the_minutes_share() {
        let start = Instant::now();
        let mut window = Window::new(start);
        let shown = (0..25).filter(|_| window.admit(start)).count();
        assert_eq!(shown, REPORTS_PER_MINUTE as usize);
        let later = start + Duration::from_secs(59);
        assert!(!window.admit(later));
        let next_minute = start + Duration::from_secs(60);
        assert!(window.admit(next_minute));
        let shown = 1 + (0..25).filter(|_| window.admit(next_minute)).count();
        assert_eq!(shown, REPORTS_PER_MINUTE as usize);
    }
}
