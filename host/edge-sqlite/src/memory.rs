//! SQLite's memory, counted per connection and held to a cap.
//!
//! A statement's memory is SQLite's own, outside the guest's cap: each
//! table a `DISTINCT`, `GROUP BY` or `UNION` makes keeps a page cache of
//! its own (2 MB), so one statement of 400 `DISTINCT` subqueries held 830
//! MB of the host's memory (and a recursive query, a sort, a join can do
//! the same). Its growth was bounded only by the deadline.
//!
//! [`configure`] gives SQLite (for the whole process, before its first
//! use) an allocator that writes at the head of each allocation the
//! budget of the connection whose statement runs on the thread
//! ([`Memory::charge_here`], set by [`crate::Database`] around its open
//! and each statement) and its size; freeing gives the bytes back to that
//! budget wherever it happens. Past the cap an allocation fails and
//! SQLite answers `SQLITE_NOMEM`, which the statement's error then names.
//! Allocations on other threads (the control plane's sqlx) count nowhere.
//!
//! A budget lives while its [`Memory`] does or any allocation charged to
//! it does (SQLite may keep a connection's allocation past its close: the
//! Unix VFS's record of an open file, freed by the file's last
//! connection): its count holds one for the owner, and whoever brings it
//! to zero frees it.

use rusqlite::ffi;
use std::alloc::Layout;
use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::ptr::{self, NonNull};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Memory each connection's statements may hold (page caches, sorts,
/// values: a 16 MiB value may stand three or four times over).
pub const CONNECTION_MEMORY_BYTES: u64 = 128 << 20;

/// Installs the allocator; `false` when SQLite was already in use in this
/// process (nothing is counted then). The host calls it first thing in
/// `main`, before any thread could be initializing SQLite (its
/// configuration is not thread-safe: an allocator swapped mid-way would
/// free what another allocated).
pub fn configure() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        // SAFETY: SQLITE_CONFIG_MALLOC takes a pointer to methods that
        // live as long as the process; before initialization it is the
        // only call touching SQLite's state (refused after, harmlessly).
        let on = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MALLOC, &METHODS.0 as *const ffi::sqlite3_mem_methods) }
            == ffi::SQLITE_OK;
        if !on {
            tracing::warn!(
                "SQLite was in use before its memory could be counted: tenants' statements are not held to {CONNECTION_MEMORY_BYTES} bytes each"
            );
        }
        on
    })
}

struct Budget {
    /// Bytes of live allocations, plus one while the owner lives.
    held: AtomicU64,
    cap: u64,
    refused: AtomicBool,
}

/// One connection's budget, owned by its [`crate::Database`].
pub(crate) struct Memory(NonNull<Budget>);

// SAFETY: the budget is atomics only.
unsafe impl Send for Memory {}
unsafe impl Sync for Memory {}

thread_local! {
    /// The budget of the statement running on this thread.
    static CURRENT: Cell<*const Budget> = const { Cell::new(ptr::null()) };
}

/// While alive, SQLite's allocations on this thread are charged to a
/// budget; dropped, the thread's budget is what it was. Dropped before
/// the [`Memory`] it came from (a local declared after it), or the thread
/// would charge a budget that may be gone.
pub(crate) struct Charging {
    outer: *const Budget,
}

impl Drop for Charging {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.outer));
    }
}

impl Memory {
    pub(crate) fn new(cap: u64) -> Self {
        Self(NonNull::from(Box::leak(Box::new(Budget {
            held: AtomicU64::new(1),
            cap,
            refused: AtomicBool::new(false),
        }))))
    }

    fn budget(&self) -> &Budget {
        // SAFETY: the owner's one keeps it alive.
        unsafe { self.0.as_ref() }
    }

    /// Charges this thread's SQLite allocations to this budget until the
    /// guard drops.
    pub(crate) fn charge_here(&self) -> Charging {
        Charging {
            outer: CURRENT.with(|c| c.replace(self.0.as_ptr())),
        }
    }

    /// The cap, in bytes.
    pub(crate) fn cap(&self) -> u64 {
        self.budget().cap
    }

    /// Whether an allocation was refused since the last call.
    pub(crate) fn take_refused(&self) -> bool {
        self.budget().refused.swap(false, Ordering::Relaxed)
    }

    /// Bytes held now (tests).
    #[cfg(test)]
    pub(crate) fn held(&self) -> u64 {
        self.budget().held.load(Ordering::Relaxed) - 1
    }
}

/// While alive, SQLite's allocations on this thread are charged nowhere
/// (what lives with the thread, not with a statement).
pub(crate) fn uncharged() -> Charging {
    Charging {
        outer: CURRENT.with(|c| c.replace(ptr::null())),
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        // SAFETY: the owner's one is given back once.
        unsafe { release(self.0.as_ptr(), 1) };
    }
}

/// Charges `bytes`, or refuses past the cap.
///
/// # Safety
/// `budget` is alive (its owner is: it is the thread's current one).
unsafe fn take(budget: *const Budget, bytes: u64) -> bool {
    let budget = unsafe { &*budget };
    let before = budget.held.fetch_add(bytes, Ordering::Relaxed);
    // `before` counts the owner's one.
    if before - 1 + bytes <= budget.cap {
        return true;
    }
    budget.held.fetch_sub(bytes, Ordering::Relaxed);
    budget.refused.store(true, Ordering::Relaxed);
    false
}

/// Gives `bytes` back, freeing the budget if they were the last.
///
/// # Safety
/// `bytes` were charged to the live `budget` and are given back once.
unsafe fn release(budget: *const Budget, bytes: u64) {
    // Acquire-release: the freeing thread sees every other's last use.
    if unsafe { &*budget }.held.fetch_sub(bytes, Ordering::AcqRel) == bytes {
        drop(unsafe { Box::from_raw(budget.cast_mut()) });
    }
}

/// What stands before each allocation.
#[repr(C)]
struct Header {
    budget: *const Budget,
    size: usize,
}

/// The header's room: 16 bytes, so allocations stay 16-aligned.
const HEADER: usize = 16;
const _: () = assert!(std::mem::size_of::<Header>() <= HEADER);

/// SQLite's allocator methods (`pAppData` unused: a null pointer).
struct Methods(ffi::sqlite3_mem_methods);

// SAFETY: functions and a null pointer.
unsafe impl Sync for Methods {}

static METHODS: Methods = Methods(ffi::sqlite3_mem_methods {
    xMalloc: Some(malloc),
    xFree: Some(free),
    xRealloc: Some(realloc),
    xSize: Some(size),
    xRoundup: Some(roundup),
    xInit: Some(init),
    xShutdown: Some(shutdown),
    pAppData: ptr::null_mut(),
});

/// What an allocation of `size` usable bytes is charged: its header too.
fn charge(size: usize) -> u64 {
    (size + HEADER) as u64
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size + HEADER, 16).expect("sizes under 2 GiB")
}

fn rounded(n: c_int) -> Option<usize> {
    usize::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .map(|n| n.next_multiple_of(8))
}

unsafe extern "C" fn malloc(n: c_int) -> *mut c_void {
    let Some(size) = rounded(n) else {
        return ptr::null_mut();
    };
    // During a thread's teardown nothing is charged.
    let budget = CURRENT.try_with(Cell::get).unwrap_or(ptr::null());
    unsafe {
        if !budget.is_null() && !take(budget, charge(size)) {
            return ptr::null_mut();
        }
        let at = std::alloc::alloc(layout(size));
        if at.is_null() {
            if !budget.is_null() {
                release(budget, charge(size));
            }
            return ptr::null_mut();
        }
        at.cast::<Header>().write(Header { budget, size });
        at.add(HEADER).cast()
    }
}

/// # Safety
/// `p` came from [`malloc`] or [`realloc`].
unsafe fn header(p: *mut c_void) -> *mut Header {
    unsafe { p.cast::<u8>().sub(HEADER).cast() }
}

unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    unsafe {
        let at = header(p);
        let Header { budget, size } = at.read();
        std::alloc::dealloc(at.cast(), layout(size));
        if !budget.is_null() {
            release(budget, charge(size));
        }
    }
}

unsafe extern "C" fn realloc(p: *mut c_void, n: c_int) -> *mut c_void {
    if p.is_null() {
        return unsafe { malloc(n) };
    }
    let Some(new) = rounded(n) else {
        return ptr::null_mut();
    };
    unsafe {
        let at = header(p);
        let Header { budget, size: old } = at.read();
        // Charged where it was first: the allocation's budget is alive.
        if !budget.is_null() && new > old && !take(budget, (new - old) as u64) {
            return ptr::null_mut();
        }
        let moved = std::alloc::realloc(at.cast(), layout(old), new + HEADER);
        if moved.is_null() {
            if !budget.is_null() && new > old {
                (*budget)
                    .held
                    .fetch_sub((new - old) as u64, Ordering::Relaxed);
            }
            return ptr::null_mut();
        }
        if !budget.is_null() && new < old {
            // The allocation itself still holds bytes: never the last.
            (*budget)
                .held
                .fetch_sub((old - new) as u64, Ordering::Relaxed);
        }
        moved.cast::<Header>().write(Header { budget, size: new });
        moved.add(HEADER).cast()
    }
}

unsafe extern "C" fn size(p: *mut c_void) -> c_int {
    if p.is_null() {
        return 0;
    }
    unsafe { (*header(p)).size as c_int }
}

unsafe extern "C" fn roundup(n: c_int) -> c_int {
    rounded(n).map_or(n, |n| n as c_int)
}

unsafe extern "C" fn init(_: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn shutdown(_: *mut c_void) {}
