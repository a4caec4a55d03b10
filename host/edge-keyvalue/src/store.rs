//! One tenant's store for one label: a redb database with a size cap, and the
//! registry that opens each file once per process and flushes them.

use redb::{Database, Durability, ReadableDatabase, ReadableTable, Table, TableDefinition};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Longest key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;
/// Largest value accepted, in bytes.
pub const MAX_VALUE_BYTES: usize = 1024 * 1024;
/// Most keys in one `get-many`.
pub const MAX_BATCH_KEYS: usize = 1000;
/// Most bytes one `get-many` returns: the host builds the answer before the
/// guest's memory cap applies, so it must be bounded here.
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;
/// How long a write may stay in memory before it is made durable.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Keys per `list-keys` page.
const PAGE: usize = 1000;
/// redb's page cache per store; its default (1 GiB) is far too much for a
/// store per tenant and label.
const CACHE_BYTES: usize = 4 * 1024 * 1024;

const TABLE: TableDefinition<&str, &[u8]> = TableDefinition::new("kv");

/// Why a key-value operation failed. Every variant but [`KvError::Trap`]
/// reaches the guest as a `wasi:keyvalue` error.
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
    /// A batch read past [`MAX_BATCH_KEYS`] or [`MAX_BATCH_BYTES`].
    #[error("batch too large: {0}")]
    BatchTooLarge(String),
    /// The database failed.
    #[error("storage error: {0}")]
    Storage(String),
    /// A host-side fault (such as a stale handle) that traps the guest.
    #[error("{0}")]
    Trap(wasmtime::Error),
}

impl From<wasmtime::component::ResourceTableError> for KvError {
    fn from(e: wasmtime::component::ResourceTableError) -> Self {
        Self::Trap(e.into())
    }
}

macro_rules! storage_errors {
    ($($t:ty),*) => {$(
        impl From<$t> for KvError {
            fn from(e: $t) -> Self {
                Self::Storage(e.to_string())
            }
        }
    )*};
}
storage_errors!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError
);

/// Open stores by (tenant, label).
type OpenStores = Mutex<HashMap<(String, String), Weak<Store>>>;

/// Opens each store file once per process and keeps them flushed.
///
/// A store stays open while any loaded config grants it; the last reference
/// going away flushes and closes it.
pub struct Registry {
    /// `None`: stores live in memory (see [`Registry::in_memory`]).
    dir: Option<PathBuf>,
    open: Arc<OpenStores>,
}

impl Registry {
    /// A registry keeping its files under `dir` (`DIR/TENANT/LABEL.redb`),
    /// with a background thread that flushes writes every
    /// [`FLUSH_INTERVAL`].
    pub fn new(dir: &Path) -> Self {
        let open: Arc<OpenStores> = Arc::default();
        let weak = Arc::downgrade(&open);
        std::thread::Builder::new()
            .name("edge-kv-flush".into())
            .spawn(move || flush_loop(weak))
            .expect("spawning the key-value flush thread");
        Self {
            dir: Some(dir.to_path_buf()),
            open,
        }
    }

    /// A registry whose stores live in memory and vanish with it: for
    /// `edge check`, which must not take the file locks of a running server.
    pub fn in_memory() -> Self {
        Self {
            dir: None,
            open: Arc::default(),
        }
    }

    /// The store of `tenant` named `label`, opened (and created) if needed;
    /// `cap` is its size cap in bytes (applies to the open store too).
    pub fn open(&self, tenant: &str, label: &str, cap: u64) -> Result<Arc<Store>, KvError> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let key = (tenant.to_string(), label.to_string());
        if let Some(store) = open.get(&key).and_then(Weak::upgrade) {
            store.cap.store(cap, Ordering::Relaxed);
            return Ok(store);
        }
        let store = match &self.dir {
            Some(dir) => {
                let dir = dir.join(tenant);
                std::fs::create_dir_all(&dir)
                    .map_err(|e| KvError::Storage(format!("creating {}: {e}", dir.display())))?;
                Store::open(&dir.join(format!("{label}.redb")), label, cap)?
            }
            None => Store::in_memory(label, cap)?,
        };
        let store = Arc::new(store);
        open.insert(key, Arc::downgrade(&store));
        Ok(store)
    }
}

fn flush_loop(open: Weak<OpenStores>) {
    loop {
        std::thread::sleep(FLUSH_INTERVAL);
        let Some(open) = open.upgrade() else { return };
        let stores: Vec<Arc<Store>> = {
            let mut map = open.lock().unwrap_or_else(|e| e.into_inner());
            map.retain(|_, w| w.strong_count() > 0);
            map.values().filter_map(Weak::upgrade).collect()
        };
        for store in stores {
            if let Err(e) = store.flush() {
                tracing::error!(store = %store.path.display(), error = %e, "key-value flush failed");
            }
        }
    }
}

/// One key-value store.
pub struct Store {
    db: Database,
    path: PathBuf,
    label: String,
    cap: AtomicU64,
    /// Bytes of keys plus values; the lock also serializes writers.
    used: Mutex<u64>,
    dirty: AtomicBool,
}

impl Store {
    fn in_memory(label: &str, cap: u64) -> Result<Self, KvError> {
        let db = Database::builder().create_with_backend(redb::backends::InMemoryBackend::new())?;
        Self::with_db(db, Path::new(":memory:"), label, cap)
    }

    fn open(path: &Path, label: &str, cap: u64) -> Result<Self, KvError> {
        let mut tries = 0;
        let db = loop {
            match Database::builder().set_cache_size(CACHE_BYTES).create(path) {
                // The previous holder of this file (a config being
                // replaced) may still be closing it.
                Err(redb::DatabaseError::DatabaseAlreadyOpen) if tries < 50 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                r => break r.map_err(|e| KvError::Storage(format!("{}: {e}", path.display())))?,
            }
        };
        Self::with_db(db, path, label, cap)
    }

    fn with_db(db: Database, path: &Path, label: &str, cap: u64) -> Result<Self, KvError> {
        let txn = db.begin_write()?;
        let used = {
            let table = txn.open_table(TABLE)?;
            let mut used = 0u64;
            for entry in table.iter()? {
                let (k, v) = entry?;
                used += (k.value().len() + v.value().len()) as u64;
            }
            used
        };
        txn.commit()?;
        Ok(Self {
            db,
            path: path.to_path_buf(),
            label: label.to_string(),
            cap: AtomicU64::new(cap),
            used: Mutex::new(used),
            dirty: AtomicBool::new(false),
        })
    }

    /// Bytes of keys plus values stored.
    pub fn used_bytes(&self) -> u64 {
        *self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        check_key(key)?;
        let txn = self.db.begin_read()?;
        let table = txn.open_table(TABLE)?;
        Ok(table.get(key)?.map(|v| v.value().to_vec()))
    }

    /// The values of `keys`, in order, from one snapshot.
    pub fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        if keys.len() > MAX_BATCH_KEYS {
            return Err(KvError::BatchTooLarge(format!(
                "{} keys asked, at most {MAX_BATCH_KEYS}",
                keys.len()
            )));
        }
        keys.iter().try_for_each(|k| check_key(k))?;
        let txn = self.db.begin_read()?;
        let table = txn.open_table(TABLE)?;
        let mut total = 0usize;
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            let v = table.get(k.as_str())?;
            if let Some(v) = &v {
                total += v.value().len();
                if total > MAX_BATCH_BYTES {
                    return Err(KvError::BatchTooLarge(format!(
                        "the values come to more than {MAX_BATCH_BYTES} bytes; ask for fewer keys"
                    )));
                }
            }
            out.push(v.map(|v| v.value().to_vec()));
        }
        Ok(out)
    }

    /// Sets `key` to `value`.
    pub fn set(&self, key: &str, value: &[u8]) -> Result<(), KvError> {
        check_key(key)?;
        check_value(value)?;
        self.write(|t, used| self.put(t, used, key, value))
    }

    /// Sets every pair, all or none.
    pub fn set_many(&self, pairs: &[(String, Vec<u8>)]) -> Result<(), KvError> {
        for (k, v) in pairs {
            check_key(k)?;
            check_value(v)?;
        }
        self.write(|t, used| pairs.iter().try_for_each(|(k, v)| self.put(t, used, k, v)))
    }

    /// Deletes `key` (absent is fine).
    pub fn delete(&self, key: &str) -> Result<(), KvError> {
        check_key(key)?;
        self.write(|t, used| remove(t, used, key))
    }

    /// Deletes every key, all or none.
    pub fn delete_many(&self, keys: &[String]) -> Result<(), KvError> {
        keys.iter().try_for_each(|k| check_key(k))?;
        self.write(|t, used| keys.iter().try_for_each(|k| remove(t, used, k)))
    }

    /// Adds `delta` to the decimal number stored at `key` (absent counts as
    /// 0) and returns the new value, atomically.
    pub fn increment(&self, key: &str, delta: u64) -> Result<u64, KvError> {
        check_key(key)?;
        self.write(|t, used| {
            let current = match t.get(key)? {
                None => 0,
                Some(v) => {
                    let text = String::from_utf8_lossy(v.value()).into_owned();
                    text.parse::<u64>().map_err(|_| KvError::NotANumber(text))?
                }
            };
            let next = current
                .checked_add(delta)
                .ok_or_else(|| KvError::Overflow(key.to_string()))?;
            self.put(t, used, key, next.to_string().as_bytes())?;
            Ok(next)
        })
    }

    /// Up to a page of keys in byte order, starting `offset` keys in, and
    /// the cursor of the next page if there is one.
    pub fn list_keys(&self, offset: u64) -> Result<(Vec<String>, Option<u64>), KvError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(TABLE)?;
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        let mut keys = Vec::new();
        for entry in table.iter()?.skip(skip).take(PAGE + 1) {
            keys.push(entry?.0.value().to_string());
        }
        let next = (keys.len() > PAGE).then(|| {
            keys.pop();
            offset + PAGE as u64
        });
        Ok((keys, next))
    }

    /// Makes every write so far durable.
    pub fn flush(&self) -> Result<(), KvError> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let _writer = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let mut txn = self.db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        txn.commit()?;
        Ok(())
    }

    /// Runs `f` in one write transaction; commits if it succeeds, changes
    /// nothing if it fails.
    fn write<R>(
        &self,
        f: impl FnOnce(&mut Table<&str, &[u8]>, &mut u64) -> Result<R, KvError>,
    ) -> Result<R, KvError> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let mut txn = self.db.begin_write()?;
        txn.set_durability(Durability::None)?;
        let mut now = *used;
        let r = {
            let mut table = txn.open_table(TABLE)?;
            f(&mut table, &mut now)?
        };
        txn.commit()?;
        *used = now;
        self.dirty.store(true, Ordering::Release);
        Ok(r)
    }

    fn put(
        &self,
        t: &mut Table<&str, &[u8]>,
        used: &mut u64,
        key: &str,
        value: &[u8],
    ) -> Result<(), KvError> {
        let old = t
            .get(key)?
            .map_or(0, |v| (key.len() + v.value().len()) as u64);
        let needed = *used - old + (key.len() + value.len()) as u64;
        let cap = self.cap.load(Ordering::Relaxed);
        // A write that does not grow the store is allowed even over the cap
        // (the cap may have been lowered), so a full store can be emptied.
        if needed > cap && needed > *used {
            return Err(KvError::StoreFull {
                label: self.label.clone(),
                used: *used,
                needed,
                cap,
            });
        }
        t.insert(key, value)?;
        *used = needed;
        Ok(())
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            tracing::error!(store = %self.path.display(), error = %e, "key-value flush on close failed");
        }
    }
}

fn remove(t: &mut Table<&str, &[u8]>, used: &mut u64, key: &str) -> Result<(), KvError> {
    if let Some(v) = t.remove(key)? {
        *used -= (key.len() + v.value().len()) as u64;
    }
    Ok(())
}

fn check_key(key: &str) -> Result<(), KvError> {
    if key.len() > MAX_KEY_BYTES {
        return Err(KvError::KeyTooLong(key.len()));
    }
    Ok(())
}

fn check_value(value: &[u8]) -> Result<(), KvError> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(KvError::ValueTooLarge(value.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(cap: u64) -> (tempfile::TempDir, Registry, Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::new(dir.path());
        let s = reg.open("t", "default", cap).unwrap();
        (dir, reg, s)
    }

    #[test]
    fn values_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let reg = Registry::new(dir.path());
            let s = reg.open("t", "default", 1 << 20).unwrap();
            s.set("a", b"1").unwrap();
            s.set_many(&[("b".into(), b"22".to_vec()), ("c".into(), b"333".to_vec())])
                .unwrap();
            s.delete("c").unwrap();
        }
        let reg = Registry::new(dir.path());
        let s = reg.open("t", "default", 1 << 20).unwrap();
        assert_eq!(s.get("a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(s.get("b").unwrap(), Some(b"22".to_vec()));
        assert_eq!(s.get("c").unwrap(), None);
        assert_eq!(s.used_bytes(), 2 + 3);
    }

    #[test]
    fn one_file_per_tenant_and_label() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::new(dir.path());
        let a = reg.open("a", "default", 1 << 20).unwrap();
        let b = reg.open("b", "default", 1 << 20).unwrap();
        a.set("k", b"a").unwrap();
        assert_eq!(b.get("k").unwrap(), None);
        let a2 = reg.open("a", "default", 1 << 20).unwrap();
        assert!(Arc::ptr_eq(&a, &a2));
        assert!(dir.path().join("a/default.redb").exists());
    }

    #[test]
    fn cap_refuses_growth_but_allows_shrinking() {
        let (_d, _r, s) = store(4096);
        s.set("k", &[0; 4000]).unwrap();
        let err = s.set("j", &[0; 200]).unwrap_err().to_string();
        assert!(
            err.contains(
                "is full: the write needs 4202 bytes, the store holds 4001 of its 4096-byte cap"
            ),
            "{err}"
        );
        assert_eq!(s.get("j").unwrap(), None);
        s.set("k", &[0; 10]).unwrap();
        assert_eq!(s.used_bytes(), 11);
    }

    #[test]
    fn failed_batch_changes_nothing() {
        let (_d, _r, s) = store(4096);
        let err = s
            .set_many(&[("a".into(), vec![1; 3000]), ("b".into(), vec![1; 3000])])
            .unwrap_err();
        assert!(matches!(err, KvError::StoreFull { .. }));
        assert_eq!(s.get("a").unwrap(), None);
        assert_eq!(s.used_bytes(), 0);
    }

    #[test]
    fn limits_on_keys_and_values() {
        let (_d, _r, s) = store(1 << 30);
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        assert!(matches!(s.get(&long), Err(KvError::KeyTooLong(1025))));
        assert!(matches!(
            s.set("k", &vec![0; MAX_VALUE_BYTES + 1]),
            Err(KvError::ValueTooLarge(_))
        ));
    }

    #[test]
    fn increment_counts_and_rejects_text() {
        let (_d, _r, s) = store(1 << 20);
        assert_eq!(s.increment("n", 5).unwrap(), 5);
        assert_eq!(s.increment("n", 1).unwrap(), 6);
        assert_eq!(s.get("n").unwrap(), Some(b"6".to_vec()));
        s.set("t", b"abc").unwrap();
        assert!(matches!(s.increment("t", 1), Err(KvError::NotANumber(_))));
        s.set("m", u64::MAX.to_string().as_bytes()).unwrap();
        assert!(matches!(s.increment("m", 1), Err(KvError::Overflow(_))));
    }

    #[test]
    fn batch_reads_are_bounded() {
        let (_d, _r, s) = store(1 << 30);
        s.set("big", &vec![0; MAX_VALUE_BYTES]).unwrap();
        let many: Vec<String> = vec!["big".into(); 17];
        assert!(matches!(s.get_many(&many), Err(KvError::BatchTooLarge(_))));
        let too_many: Vec<String> = vec!["x".into(); MAX_BATCH_KEYS + 1];
        assert!(matches!(
            s.get_many(&too_many),
            Err(KvError::BatchTooLarge(_))
        ));
        assert_eq!(s.get_many(&["big".into()]).unwrap().len(), 1);
    }

    #[test]
    fn list_keys_pages() {
        let (_d, _r, s) = store(1 << 30);
        let pairs: Vec<(String, Vec<u8>)> =
            (0..2500).map(|i| (format!("k{i:05}"), vec![])).collect();
        s.set_many(&pairs).unwrap();
        let (first, next) = s.list_keys(0).unwrap();
        assert_eq!(first.len(), 1000);
        assert_eq!(first[0], "k00000");
        assert_eq!(next, Some(1000));
        let (last, next) = s.list_keys(2000).unwrap();
        assert_eq!(last.len(), 500);
        assert_eq!(next, None);
        assert!(s.list_keys(u64::MAX).unwrap().0.is_empty());
    }
}
