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
//! is given back once the descriptor is gone, found by a sweep whenever
//! an open meets a cap and whenever the count is read.
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
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The default of a tenant's `max_open_files`.
pub const DEFAULT_MAX: usize = 1024;

/// Guests' descriptors open in the process, all tenants together.
static HOST_HELD: AtomicUsize = AtomicUsize::new(0);

/// Places handed to [`OpenFiles::watch`]: each with the descriptor it
/// waits on.
static WATCHED: Mutex<Vec<(Weak<dyn Any + Send + Sync>, OpenFile)>> = Mutex::new(Vec::new());

/// Gives back the places of watched descriptors that are gone.
fn sweep() {
    let gone: Vec<OpenFile> = {
        let mut watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
        let (gone, kept) = std::mem::take(&mut *watched)
            .into_iter()
            .partition(|(d, _)| d.strong_count() == 0);
        *watched = kept;
        gone.into_iter().map(|(_, place)| place).collect()
    };
    // Dropped outside the lock.
    drop(gone);
}

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
        // At a cap: closed descriptors may still hold places.
        sweep();
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
        Some(OpenFile(self.clone()))
    }

    /// Keeps `place` until `descriptor` is gone (its last strong
    /// reference dropped), for owners that are not told when it closes.
    pub fn watch(place: OpenFile, descriptor: Weak<dyn Any + Send + Sync>) {
        WATCHED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((descriptor, place));
    }

    /// Descriptors open now.
    pub fn held(&self) -> usize {
        sweep();
        self.held.load(Relaxed)
    }

    /// Opens refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Relaxed)
    }
}

/// One open descriptor's place; given back on drop.
#[derive(Debug)]
pub struct OpenFile(Arc<OpenFiles>);

impl Drop for OpenFile {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Relaxed);
        HOST_HELD.fetch_sub(1, Relaxed);
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
        OpenFiles::watch(files.open().unwrap(), Arc::downgrade(&descriptor));
        drop(descriptor);
        assert!(files.open().is_none(), "the stream still holds it");
        assert_eq!(files.held(), 1);
        drop(stream);
        assert!(files.open().is_some(), "swept at the cap");
        assert_eq!(files.refused(), 1);
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
