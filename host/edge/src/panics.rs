//! The host's own panics. Each is a bug: a host function's panic fails
//! its guest call alone (`invoke::unless_panicked`), a database client's
//! its call, and the process goes on; but a tenant that found one could
//! repeat it as fast as it sends requests, each with a report on the
//! host's log outside any tenant's log budget. So every panic is counted
//! (`edge_panics_total`, for an operator's alert) and reports (the
//! default hook's: message, place, backtrace) are printed within a
//! [`LogBudget`] of [`REPORTS_PER_MINUTE`] at once, then as many a minute;
//! the next report shown says how many were not.

use crate::share::LogBudget;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Panic reports printed at once, and per minute after.
pub const REPORTS_PER_MINUTE: u32 = 10;

static PANICS: AtomicU64 = AtomicU64::new(0);
static REPORTS: LogBudget = reports();

/// The budget of panic reports.
const fn reports() -> LogBudget {
    LogBudget::new(REPORTS_PER_MINUTE as f64, REPORTS_PER_MINUTE as f64 / 60.0)
}

/// Puts the counting hook in front of the current one (the default,
/// which prints the report).
pub fn count_panics() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Relaxed);
        let Some(unshown) = REPORTS.admit() else {
            return;
        };
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
        let budget = reports();
        let shown = (0..25).filter(|_| budget.admit().is_some()).count();
        assert_eq!(shown, REPORTS_PER_MINUTE as usize);
    }
}
