//! Why an operation failed, and how often stores failed on their disk.

use crate::store::{MAX_KEY_BYTES, MAX_VALUE_BYTES};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Why a key-value operation failed. Every variant but [`KvError::Trap`]
/// reaches the guest as a `wasi:keyvalue` error; storage faults reach it in
/// fixed words, their detail goes to the log.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    /// The label is not granted to this component.
    #[error("access denied: this component was not granted that store")]
    AccessDenied,
    /// Key longer than [`MAX_KEY_BYTES`].
    #[error("key of {0} bytes is longer than the {MAX_KEY_BYTES}-byte limit")]
    KeyTooLong(usize),
    /// Value larger than [`MAX_VALUE_BYTES`].
    #[error("value of {0} bytes is larger than the {MAX_VALUE_BYTES}-byte limit")]
    ValueTooLarge(usize),
    /// The write would take the store past its size cap.
    #[error(
        "store {label:?} is full: the write needs {needed} bytes, the store holds {used} of its {cap}-byte cap (limits.kv_store_bytes)"
    )]
    StoreFull {
        /// Store label.
        label: String,
        /// Bytes in use before the write.
        used: u64,
        /// Bytes in use the write would reach.
        needed: u64,
        /// The cap.
        cap: u64,
    },
    /// `increment` on a value that is not a decimal u64.
    #[error("value of {0:?} is not a decimal unsigned 64-bit number, so it cannot be incremented")]
    NotANumber(String),
    /// `increment` past `u64::MAX`.
    #[error("incrementing {0:?} would overflow an unsigned 64-bit number")]
    Overflow(String),
    /// A batch read past [`crate::MAX_BATCH_KEYS`] or [`crate::MAX_BATCH_BYTES`].
    #[error("batch too large: {0}")]
    BatchTooLarge(String),
    /// Listing every key at once would take more than
    /// [`crate::MAX_LISTED_BYTES`] (the keys listed before it stopped).
    #[error(
        "the store has more keys than one call lists: past {0} keys they take more than the {max}-byte limit (24 bytes and the text of each); list them a page at a time (wasi:keyvalue list-keys) or keep fewer",
        max = crate::MAX_LISTED_BYTES
    )]
    TooManyKeys(usize),
    /// The disk holding the store is full; the operation changed nothing.
    #[error(
        "storage full: the disk holding this store has no space left; nothing was written, try again later"
    )]
    DiskFull,
    /// The store failed on its disk and has not reopened yet; the operation
    /// changed nothing.
    #[error(
        "storage unavailable: the store failed on its disk; nothing was written, try again later"
    )]
    Unavailable,
    /// The store's Redis server did not answer or failed the operation
    /// (which may or may not have been applied).
    #[error("storage unavailable: the store's server did not answer; try again later")]
    ServerUnavailable,
    /// A Redis store's script refused the operation (code, detail): the
    /// store turns it into one of the variants above.
    #[error("storage error: {0} {1}")]
    Script(String, String),
    /// Opening the store failed (for the operator: names the file).
    #[error("storage error: {0}")]
    Storage(String),
    /// redb failed inside an operation; the store turns it into
    /// [`KvError::DiskFull`] or [`KvError::Unavailable`] after logging it.
    #[error("storage error: {0}")]
    Db(#[from] redb::Error),
    /// A host-side fault (such as a stale handle) that traps the guest.
    #[error("{0}")]
    Trap(wasmtime::Error),
}

impl From<wasmtime::component::ResourceTableError> for KvError {
    fn from(e: wasmtime::component::ResourceTableError) -> Self {
        Self::Trap(e.into())
    }
}

macro_rules! db_errors {
    ($($t:ty),*) => {$(
        impl From<$t> for KvError {
            fn from(e: $t) -> Self {
                Self::Db(e.into())
            }
        }
    )*};
}
db_errors!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError
);

/// What a failed store tells its callers until it reopens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Fault {
    NoSpace,
    Io,
}

impl Fault {
    pub(crate) fn of(e: &redb::Error) -> Self {
        match e {
            redb::Error::Io(io)
                if matches!(
                    io.kind(),
                    std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
                ) =>
            {
                Fault::NoSpace
            }
            _ => Fault::Io,
        }
    }

    pub(crate) fn error(self) -> KvError {
        match self {
            Fault::NoSpace => KvError::DiskFull,
            Fault::Io => KvError::Unavailable,
        }
    }
}

/// Storage errors per tenant, for `/metrics`; kept across reloads.
#[derive(Clone, Default)]
pub struct ErrorCounts(Arc<Mutex<BTreeMap<String, Arc<AtomicU64>>>>);

impl ErrorCounts {
    /// The process's counts, shared by its registries: the host's metrics
    /// read them without being wired to the registry.
    pub fn global() -> &'static ErrorCounts {
        static COUNTS: std::sync::OnceLock<ErrorCounts> = std::sync::OnceLock::new();
        COUNTS.get_or_init(ErrorCounts::default)
    }

    pub(crate) fn tenant(&self, tenant: &str) -> Arc<AtomicU64> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(tenant.to_string()).or_default().clone()
    }

    /// Operations answered with a storage error ([`KvError::DiskFull`] or
    /// [`KvError::Unavailable`]), by tenant.
    pub fn snapshot(&self) -> Vec<(String, u64)> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.iter()
            .map(|(t, n)| (t.clone(), n.load(Ordering::Relaxed)))
            .collect()
    }
}
