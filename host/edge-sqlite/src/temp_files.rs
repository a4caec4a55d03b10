//! Temporary files a connection's statements make, held to a byte cap.
//!
//! A sort too big for memory, the tables of `DISTINCT`, `GROUP BY`,
//! `UNION` and recursive queries, statement journals and the TEMP
//! database are files of their own, outside the database's
//! `max_page_count` (the TEMP database aside): a statement sorting a
//! recursive query's blobs wrote gigabytes to the host's temporary
//! directory within its deadline, on a database capped at a few pages,
//! filling the disk every tenant's stores write to.
//!
//! The VFS here ([`VFS_NAME`]) is the default one with its `xOpen`
//! replaced: a file SQLite opens as temporary, while a statement of a
//! [`Database`](crate::Database) runs on the thread ([`TempBudget::charge_here`]),
//! counts what it grows by against that connection's budget (writes past
//! its end, size hints, truncations up; truncation down and close give
//! back). Past the cap a write is `SQLITE_FULL`, and the budget remembers
//! it so the statement's error can say which cap it was. Other files (the
//! database, its log and shared memory) are the default VFS's own.

use rusqlite::ffi;
use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The VFS [`crate::Database`] opens its files through.
pub(crate) const VFS_NAME: &str = "edge-temp-capped";

/// Kinds of file SQLite opens as temporary.
const TEMPORARY: c_int = ffi::SQLITE_OPEN_TEMP_DB
    | ffi::SQLITE_OPEN_TRANSIENT_DB
    | ffi::SQLITE_OPEN_TEMP_JOURNAL
    | ffi::SQLITE_OPEN_SUBJOURNAL
    | ffi::SQLITE_OPEN_SUPER_JOURNAL;

/// One connection's temporary bytes: held now, the most it may hold, and
/// whether a write was refused since [`TempBudget::take_refused`].
pub(crate) struct TempBudget {
    held: AtomicU64,
    cap: u64,
    refused: AtomicBool,
}

thread_local! {
    /// The budget of the statement running on this thread.
    static CURRENT: RefCell<Option<Arc<TempBudget>>> = const { RefCell::new(None) };
}

/// While alive, temporary files opened on this thread count against a
/// budget; dropped, the thread's budget is what it was.
pub(crate) struct Charging(Option<Arc<TempBudget>>);

impl Drop for Charging {
    fn drop(&mut self) {
        let outer = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = outer);
    }
}

impl TempBudget {
    pub(crate) fn new(cap: u64) -> Arc<Self> {
        Arc::new(Self {
            held: AtomicU64::new(0),
            cap,
            refused: AtomicBool::new(false),
        })
    }

    /// Files opened on this thread from now until the guard drops count
    /// against this budget.
    pub(crate) fn charge_here(self: &Arc<Self>) -> Charging {
        Charging(CURRENT.with(|c| c.borrow_mut().replace(self.clone())))
    }

    /// The cap, in bytes.
    pub(crate) fn cap(&self) -> u64 {
        self.cap
    }

    /// Whether a write was refused since the last call.
    pub(crate) fn take_refused(&self) -> bool {
        self.refused.swap(false, Ordering::Relaxed)
    }

    /// Bytes held now (tests).
    #[cfg(test)]
    pub(crate) fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// Charges `bytes`, or refuses past the cap (remembered when `fatal`:
    /// the statement fails for it).
    fn take(&self, bytes: u64, fatal: bool) -> bool {
        let taken = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(bytes).filter(|&n| n <= self.cap)
            })
            .is_ok();
        if !taken && fatal {
            self.refused.store(true, Ordering::Relaxed);
        }
        taken
    }

    fn give_back(&self, bytes: u64) {
        self.held.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// Registers the VFS (once for the process); its error code otherwise.
pub(crate) fn register() -> Result<(), c_int> {
    static REGISTERED: OnceLock<Result<(), c_int>> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        // SAFETY: the default VFS lives as long as the process; ours is a
        // copy of it, leaked, so it does too (SQLite keeps the pointer).
        unsafe {
            let rc = ffi::sqlite3_initialize();
            if rc != ffi::SQLITE_OK {
                return Err(rc);
            }
            let default = ffi::sqlite3_vfs_find(ptr::null());
            if default.is_null() {
                return Err(ffi::SQLITE_ERROR);
            }
            DEFAULT.store(default, Ordering::Release);
            let mut vfs = *default;
            vfs.szOsFile += HEADER as c_int;
            vfs.zName = c"edge-temp-capped".as_ptr();
            vfs.pNext = ptr::null_mut();
            vfs.xOpen = Some(open);
            let rc = ffi::sqlite3_vfs_register(Box::leak(Box::new(vfs)), 0);
            if rc == ffi::SQLITE_OK {
                Ok(())
            } else {
                Err(rc)
            }
        }
    })
}

static DEFAULT: std::sync::atomic::AtomicPtr<ffi::sqlite3_vfs> =
    std::sync::atomic::AtomicPtr::new(ptr::null_mut());

/// A temporary file: its methods, its budget and the bytes charged to it,
/// then the default VFS's file.
#[repr(C)]
struct TempFile {
    base: ffi::sqlite3_file,
    /// From `Arc::into_raw`; given back at close.
    budget: *const TempBudget,
    charged: u64,
}

/// Where the default VFS's file starts (8-aligned, as SQLite aligns).
const HEADER: usize = std::mem::size_of::<TempFile>().next_multiple_of(8);

fn inner(file: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
    file.cast::<u8>().wrapping_add(HEADER).cast()
}

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let default = DEFAULT.load(Ordering::Acquire);
    // SAFETY: SQLite hands a buffer of our `szOsFile`: the default VFS's
    // file fits at its start (unwrapped) or after the header.
    unsafe {
        let default_open = (*default).xOpen.expect("a VFS opens files");
        let budget = if flags & TEMPORARY != 0 {
            // During a thread's teardown nothing is charged.
            CURRENT.try_with(|c| c.borrow().clone()).ok().flatten()
        } else {
            None
        };
        let Some(budget) = budget else {
            return default_open(default, name, file, flags, out_flags);
        };
        let rc = default_open(default, name, inner(file), flags, out_flags);
        if rc != ffi::SQLITE_OK {
            (*file).pMethods = ptr::null();
            return rc;
        }
        ptr::write(
            file.cast::<TempFile>(),
            TempFile {
                base: ffi::sqlite3_file { pMethods: &METHODS },
                budget: Arc::into_raw(budget),
                charged: 0,
            },
        );
        ffi::SQLITE_OK
    }
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

/// The wrapped file's header and the default VFS's file with its methods.
///
/// # Safety
/// `file` is one [`open`] wrapped.
unsafe fn parts<'a>(
    file: *mut ffi::sqlite3_file,
) -> (
    &'a mut TempFile,
    *mut ffi::sqlite3_file,
    &'a ffi::sqlite3_io_methods,
) {
    let inner = inner(file);
    // SAFETY: as the caller promises; the inner file was opened, so its
    // methods are set.
    unsafe { (&mut *file.cast::<TempFile>(), inner, &*(*inner).pMethods) }
}

/// Charges the file's growth to `end` bytes, if it grows; a refusal is
/// `fatal` when SQLite fails the statement for it (a write, not a hint).
fn grow(file: &mut TempFile, end: u64, fatal: bool) -> bool {
    if end <= file.charged {
        return true;
    }
    // SAFETY: the budget lives while the file is open.
    if unsafe { &*file.budget }.take(end - file.charged, fatal) {
        file.charged = end;
        true
    } else {
        false
    }
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    unsafe {
        let (header, inner, methods) = parts(file);
        let rc = methods.xClose.map_or(ffi::SQLITE_OK, |f| f(inner));
        let budget = Arc::from_raw(header.budget);
        budget.give_back(header.charged);
        header.charged = 0;
        rc
    }
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    unsafe {
        let (header, inner, methods) = parts(file);
        if !grow(header, offset as u64 + amount as u64, true) {
            return ffi::SQLITE_FULL;
        }
        methods.xWrite.expect("files are written")(inner, data, amount, offset)
    }
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
    unsafe {
        let (header, inner, methods) = parts(file);
        let size = size as u64;
        if !grow(header, size, true) {
            return ffi::SQLITE_FULL;
        }
        let rc = methods.xTruncate.expect("files are truncated")(inner, size as i64);
        if rc == ffi::SQLITE_OK && size < header.charged {
            (*header.budget).give_back(header.charged - size);
            header.charged = size;
        }
        rc
    }
}

unsafe extern "C" fn file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    unsafe {
        let (header, inner, methods) = parts(file);
        // A size hint may extend the file without a write (the sorter's);
        // refused, SQLite goes on without it.
        if op == ffi::SQLITE_FCNTL_SIZE_HINT && !grow(header, *arg.cast::<i64>() as u64, false) {
            return ffi::SQLITE_FULL;
        }
        methods
            .xFileControl
            .map_or(ffi::SQLITE_NOTFOUND, |f| f(inner, op, arg))
    }
}

/// Methods passed through as they are, where the file's methods are of
/// the version that has them.
macro_rules! forward {
    ($($name:ident: $field:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $missing:expr, since $version:literal;)*) => {$(
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file, $($arg: $ty),*) -> $ret {
            unsafe {
                let (_, inner, methods) = parts(file);
                match methods.$field {
                    Some(f) if methods.iVersion >= $version => f(inner, $($arg),*),
                    _ => $missing,
                }
            }
        }
    )*};
}

forward! {
    read: xRead(data: *mut c_void, amount: c_int, offset: ffi::sqlite3_int64) -> c_int = ffi::SQLITE_IOERR_READ, since 1;
    sync: xSync(flags: c_int) -> c_int = ffi::SQLITE_OK, since 1;
    file_size: xFileSize(size: *mut ffi::sqlite3_int64) -> c_int = ffi::SQLITE_IOERR_FSTAT, since 1;
    lock: xLock(level: c_int) -> c_int = ffi::SQLITE_OK, since 1;
    unlock: xUnlock(level: c_int) -> c_int = ffi::SQLITE_OK, since 1;
    check_reserved_lock: xCheckReservedLock(out: *mut c_int) -> c_int = ffi::SQLITE_OK, since 1;
    sector_size: xSectorSize() -> c_int = 4096, since 1;
    device_characteristics: xDeviceCharacteristics() -> c_int = 0, since 1;
    shm_map: xShmMap(region: c_int, size: c_int, extend: c_int, out: *mut *mut c_void) -> c_int = ffi::SQLITE_IOERR_SHMMAP, since 2;
    shm_lock: xShmLock(offset: c_int, n: c_int, flags: c_int) -> c_int = ffi::SQLITE_IOERR_SHMLOCK, since 2;
    shm_barrier: xShmBarrier() -> () = (), since 2;
    shm_unmap: xShmUnmap(delete: c_int) -> c_int = ffi::SQLITE_OK, since 2;
    unfetch: xUnfetch(offset: ffi::sqlite3_int64, page: *mut c_void) -> c_int = ffi::SQLITE_OK, since 3;
}

unsafe extern "C" fn fetch(
    file: *mut ffi::sqlite3_file,
    offset: ffi::sqlite3_int64,
    amount: c_int,
    out: *mut *mut c_void,
) -> c_int {
    unsafe {
        let (_, inner, methods) = parts(file);
        match methods.xFetch {
            Some(f) if methods.iVersion >= 3 => f(inner, offset, amount, out),
            // No map: SQLite reads instead.
            _ => {
                *out = ptr::null_mut();
                ffi::SQLITE_OK
            }
        }
    }
}
