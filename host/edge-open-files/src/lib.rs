//! Descriptors a tenant's guests hold open: files and directories opened
//! through `wasi:filesystem`, SQLite connections.
//!
//! Each is a descriptor of the host process, and the process has a fixed
//! number (`RLIMIT_NOFILE`). An instance's are bounded only by its resource
//! table, so a tenant's hundreds of instances could together hold them
//! all, and then every tenant's `accept` fails. So each open holds a place
//! among its tenant's `max_open_files` and the host's share for guests
//! (half its descriptor limit; the other half is for client connections,
//! outbound sockets and the host's own files) for as long as it lives. One
//! more fails with an error to the guest, counted per tenant.
//!
//! An owner that knows when its descriptor closes holds an [`OpenFile`]
//! (a SQLite connection). One that does not (a WASI descriptor, shared by
//! the streams read from it, which outlive its handle) hands its place to
//! [`OpenFiles::watch`] with a weak reference to the descriptor: the place
//! is given back once the descriptor is gone, found by a sweep of the
//! tenant's watched descriptors whenever one of its opens meets a cap, as
//! their list doubles, and when `/metrics` reads its count; an open that
//! meets the host's cap sweeps every tenant's (at most every 10 ms).
//!
//! ```
//! use edge_open_files::OpenFiles;
//! let files = std::sync::Arc::new(OpenFiles::new(1));
//! let first = files.open().unwrap();
//! assert!(files.open().is_none()); // over the tenant's cap
//! assert_eq!((files.held(), files.refused()), (1, 1));
//! drop(first);
//! assert!(files.open().is_some());
//! ```

use std::any::Any;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// The default of a tenant's `max_open_files`.
pub const DEFAULT_MAX: usize = 1024;

/// Guests' descriptors open in the process, all tenants together.
static HOST_HELD: AtomicUsize = AtomicUsize::new(0);

/// Tenants that watch descriptors, for sweeps at the host's cap.
static WATCHING: Mutex<Vec<Weak<OpenFiles>>> = Mutex::new(Vec::new());

/// Gives back the places of every tenant's watched descriptors that are
/// gone; at most once per [`HOST_SWEEP_EVERY`], as it walks them all.
fn sweep_every_tenant() {
    static LAST: Mutex<Option<Instant>> = Mutex::new(None);
    {
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|t| t.elapsed() < HOST_SWEEP_EVERY) {
            return;
        }
        *last = Some(Instant::now());
    }
    let tenants: Vec<Arc<OpenFiles>> = {
        let mut watching = WATCHING.lock().unwrap_or_else(|e| e.into_inner());
        watching.retain(|t| t.strong_count() > 0);
        watching.iter().filter_map(Weak::upgrade).collect()
    };
    for t in tenants {
        t.sweep();
    }
}

/// How often an open at the host's cap may sweep every tenant.
const HOST_SWEEP_EVERY: Duration = Duration::from_millis(10);

/// How many descriptors guests may hold in the process: half its limit.
pub fn host_max() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given.
        let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
            limit.rlim_cur
        } else {
            1024
        };
        usize::try_from(soft / 2).unwrap_or(usize::MAX).max(1)
    })
}

/// Raises the process's soft descriptor limit to its hard limit (as Go's
/// runtime and nginx's `worker_rlimit_nofile` do), so the host's share
/// for guests is as large as the system allows. Call it before the first
/// [`host_max`].
pub fn raise_limit() -> std::io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(limit.rlim_cur)
}

/// One tenant's open descriptors, its cap and its refusals; kept across
/// reloads (a new config changes only the cap).
#[derive(Debug)]
pub struct OpenFiles {
    held: AtomicUsize,
    max: AtomicUsize,
    refused: AtomicU64,
    /// Descriptors whose places [`OpenFiles::watch`] keeps.
    watched: Mutex<Watched>,
    /// Whether it is in [`WATCHING`].
    watching: AtomicBool,
}

#[derive(Debug, Default)]
struct Watched {
    descriptors: Vec<Weak<dyn Any + Send + Sync>>,
    /// How many were left by the last sweep.
    after_sweep: usize,
}

impl Default for OpenFiles {
    fn default() -> Self {
        Self::new(DEFAULT_MAX)
    }
}

impl OpenFiles {
    /// A tenant's count with the cap `max`.
    pub fn new(max: usize) -> Self {
        Self {
            held: AtomicUsize::new(0),
            max: AtomicUsize::new(max),
            refused: AtomicU64::new(0),
            watched: Mutex::default(),
            watching: AtomicBool::new(false),
        }
    }

    /// Puts a new cap in force (what is open stays open).
    pub fn set_max(&self, max: usize) {
        self.max.store(max, Relaxed);
    }

    /// A place for one more open descriptor, or `None` (counted) at the
    /// tenant's cap or the host's.
    pub fn open(self: &Arc<Self>) -> Option<OpenFile> {
        if let Some(place) = self.try_open() {
            return Some(place);
        }
        // At a cap: descriptors gone may still hold places.
        self.sweep();
        if HOST_HELD.load(Relaxed) >= host_max() {
            sweep_every_tenant();
        }
        let place = self.try_open();
        if place.is_none() {
            self.refused.fetch_add(1, Relaxed);
        }
        place
    }

    fn try_open(self: &Arc<Self>) -> Option<OpenFile> {
        let tenant = self.held.fetch_add(1, Relaxed);
        let host = HOST_HELD.fetch_add(1, Relaxed);
        if tenant >= self.max.load(Relaxed) || host >= host_max() {
            self.held.fetch_sub(1, Relaxed);
            HOST_HELD.fetch_sub(1, Relaxed);
            return None;
        }
        Some(OpenFile(Some(self.clone())))
    }

    /// Keeps `place` until `descriptor` is gone (its last strong
    /// reference dropped), for owners that are not told when it closes.
    pub fn watch(self: &Arc<Self>, mut place: OpenFile, descriptor: Weak<dyn Any + Send + Sync>) {
        // The place stays counted (in this tenant's count); a sweep gives
        // it back.
        let owner = place.0.take();
        debug_assert!(
            owner.is_some_and(|o| Arc::ptr_eq(&o, self)),
            "a place is watched by the tenant it was taken from"
        );
        if !self.watching.swap(true, Relaxed) {
            let mut watching = WATCHING.lock().unwrap_or_else(|e| e.into_inner());
            watching.retain(|t| t.strong_count() > 0);
            watching.push(Arc::downgrade(self));
        }
        let mut watched = self.watched();
        watched.descriptors.push(descriptor);
        // Swept as the list doubles, so it never holds more than twice
        // what was open at the last sweep, for a constant cost per open.
        if watched.descriptors.len() >= 2 * watched.after_sweep.max(16) {
            self.sweep_locked(&mut watched);
        }
    }

    /// Gives back the places of its watched descriptors that are gone.
    pub fn sweep(&self) {
        self.sweep_locked(&mut self.watched());
    }

    fn sweep_locked(&self, watched: &mut Watched) {
        let before = watched.descriptors.len();
        watched.descriptors.retain(|d| d.strong_count() > 0);
        let gone = before - watched.descriptors.len();
        watched.after_sweep = watched.descriptors.len();
        self.held.fetch_sub(gone, Relaxed);
        HOST_HELD.fetch_sub(gone, Relaxed);
    }

    fn watched(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.watched.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Descriptors counted as open now (watched ones until a sweep finds
    /// them gone: [`OpenFiles::sweep`]).
    pub fn held(&self) -> usize {
        self.held.load(Relaxed)
    }

    /// Opens refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Relaxed)
    }
}

impl Drop for OpenFiles {
    fn drop(&mut self) {
        // Its watched places leave the host's count with it.
        let watched = self
            .watched
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .descriptors
            .len();
        HOST_HELD.fetch_sub(watched, Relaxed);
    }
}

/// One open descriptor's place; given back on drop.
#[derive(Debug)]
pub struct OpenFile(Option<Arc<OpenFiles>>);

impl Drop for OpenFile {
    fn drop(&mut self) {
        if let Some(files) = self.0.take() {
            files.held.fetch_sub(1, Relaxed);
            HOST_HELD.fetch_sub(1, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants_are_capped_apart_and_a_new_cap_applies_in_place() {
        let a = Arc::new(OpenFiles::new(2));
        let b = Arc::new(OpenFiles::new(2));
        let held: Vec<_> = (0..3).filter_map(|_| a.open()).collect();
        assert_eq!((held.len(), a.refused()), (2, 1));
        assert!(b.open().is_some(), "another tenant is not affected");
        a.set_max(3);
        let more = a.open();
        assert!(more.is_some());
        drop(held);
        assert_eq!(a.held(), 1);
    }

    #[test]
    fn a_watched_place_comes_back_once_its_descriptor_is_gone() {
        let files = Arc::new(OpenFiles::new(1));
        let descriptor: Arc<dyn Any + Send + Sync> = Arc::new(7u8);
        // A stream read from it keeps the descriptor open after its handle.
        let stream = descriptor.clone();
        files.watch(files.open().unwrap(), Arc::downgrade(&descriptor));
        drop(descriptor);
        assert!(files.open().is_none(), "the stream still holds it");
        assert_eq!(files.held(), 1);
        drop(stream);
        assert!(files.open().is_some(), "swept at the cap");
        assert_eq!(files.refused(), 1);
        assert_eq!(files.held(), 0);
    }

    #[test]
    fn watched_descriptors_gone_are_swept_as_the_list_grows() {
        let files = Arc::new(OpenFiles::new(1000));
        let mut open = Vec::new();
        for i in 0..100 {
            let d: Arc<dyn Any + Send + Sync> = Arc::new(i);
            files.watch(files.open().unwrap(), Arc::downgrade(&d));
            // Every other one stays open.
            if i % 2 == 0 {
                open.push(d);
            }
        }
        // Never more than twice what was open at the last sweep counted.
        assert!(files.held() < 100, "{}", files.held());
        files.sweep();
        assert_eq!(files.held(), 50);
        drop(open);
        files.sweep();
        assert_eq!(files.held(), 0);
    }

    #[test]
    fn the_host_keeps_half_its_descriptors_from_guests() {
        let max = host_max();
        assert!(max >= 1);
        // Never more than half of the soft limit.
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as above.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
            0
        );
        assert!(max as u64 <= limit.rlim_cur / 2 + 1);
    }
}
