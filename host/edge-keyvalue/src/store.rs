//! One tenant's store for one label: a redb database with a size cap that
//! keeps working through disk faults.
//!
//! # What an acknowledged write is
//!
//! A write the guest saw succeed is committed without waiting for the disk
//! and is visible to every later read at once. It also stays in memory, in
//! the store's *pending* set, until a durable commit (the flusher's, every
//! [`FLUSH_INTERVAL`], or an inline one when the set grows past
//! [`PENDING_MAX_BYTES`]) has reached the disk. If the disk fails first
//! (`ENOSPC`, `EIO`), redb refuses every further operation (`PreviousIo`);
//! the store then drops that database, answers errors, and every
//! [`RETRY_INTERVAL`] (doubling up to [`RETRY_MAX_INTERVAL`] while it keeps
//! failing) reopens the file (redb rolls back to its last durable
//! commit) and replays the pending set in one durable transaction. So a disk
//! error never loses an acknowledged write; only a crash of the process or
//! the machine can, and then at most the writes of the last flush interval
//! (as Redis' `appendfsync everysec`). The pending set is cleared only after
//! a durable commit succeeded, so a failed flush is retried.

use crate::error::{Fault, KvError};
use redb::{
    Database, Durability, ReadOnlyTable, ReadableDatabase, ReadableTable, Table, TableDefinition,
};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

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
/// How often a store that hit a disk error tries to reopen its file.
pub const RETRY_INTERVAL: Duration = Duration::from_millis(500);
/// The longest wait between reopen attempts: a reopen may repair the whole
/// file, which is not worth repeating every half second on a disk that
/// stays full.
pub const RETRY_MAX_INTERVAL: Duration = Duration::from_secs(4);
/// Bytes of acknowledged, not yet durable writes a store keeps in memory
/// before a write commits durably itself: bounds the pending set.
pub const PENDING_MAX_BYTES: usize = 8 * 1024 * 1024;
/// What an empty store's file takes on disk (redb's header, allocator state
/// and table root, with room for the filesystem's block size): not counted
/// against the size cap, so a small cap still leaves room for data.
pub const FILE_OVERHEAD_BYTES: u64 = 64 * 1024;
/// Keys per `list-keys` page.
pub(crate) const PAGE: usize = 1000;
/// redb's page cache per store; its default (1 GiB) is far too much for a
/// store per tenant and label.
pub(crate) const CACHE_BYTES: usize = 4 * 1024 * 1024;
/// Blocking threads one store may hold for reads: a stalled disk then ties
/// up at most this many (plus one writer) of the blocking pool.
const READERS: usize = 4;

const TABLE: TableDefinition<&str, &[u8]> = TableDefinition::new("kv");

type KvTable<'t> = Table<'t, &'static str, &'static [u8]>;
type KvReadTable = ReadOnlyTable<&'static str, &'static [u8]>;

/// Opens (or reopens) a store's database.
pub(crate) type Opener = Box<dyn Fn() -> Result<Database, redb::DatabaseError> + Send + Sync>;

/// One key-value store.
pub(crate) struct Store {
    tenant: String,
    label: String,
    /// The file; `None` in memory.
    path: Option<PathBuf>,
    opener: Opener,
    /// `None` after a disk fault, until the store reopens. Changed only
    /// with the writer lock held; readers hold this lock's read side for one
    /// operation.
    db: RwLock<Option<Database>>,
    writer: Mutex<Writer>,
    errors: Arc<AtomicU64>,
    /// Permits for operations on the blocking pool (see `Handle::blocking`).
    pub(crate) readers: Arc<Semaphore>,
    pub(crate) writers: Arc<Semaphore>,
    /// The last key of recent `list-keys` pages, by the cursor given for
    /// the next page and the count of writes then: that page starts after
    /// it rather than walking past every key before it again, if nothing
    /// was written since.
    pub(crate) page_marks: Mutex<std::collections::VecDeque<(u64, String, u64)>>,
    /// Writes begun (any may change which keys there are).
    writes: AtomicU64,
}

/// What the writer lock guards.
pub(crate) struct Writer {
    /// Bytes of keys plus values.
    pub(crate) used: u64,
    /// Bytes the file takes on disk, as of the last commit.
    file_bytes: u64,
    /// Acknowledged writes not yet known durable: key to value (`None`:
    /// deleted).
    pending: BTreeMap<String, Option<Vec<u8>>>,
    pending_bytes: usize,
    /// A commit since the last durable one.
    dirty: bool,
    /// Set after a disk fault, until the store reopens.
    fault: Option<Fault>,
    /// When the next reopen may be tried.
    retry_at: Instant,
    /// The wait before the attempt after next.
    retry_wait: Duration,
    /// A write was refused because of the file's size: compact at the next
    /// flush.
    compact: bool,
}

/// One write transaction's view: the table, the sizes the cap is checked
/// against, and the changes to keep pending.
pub(crate) struct Change<'t> {
    pub(crate) table: KvTable<'t>,
    used: u64,
    start: u64,
    /// File bytes on disk less [`FILE_OVERHEAD_BYTES`], before this write.
    file: u64,
    cap: u64,
    label: &'t str,
    changes: Vec<(String, Option<Vec<u8>>)>,
    /// For a durable commit: each changed key's value before it, in order.
    /// A durable commit that fails may still have reached the disk; these
    /// join the pending set so that the replay undoes it.
    before: Option<Vec<(String, Option<Vec<u8>>)>>,
    file_refused: bool,
}

impl Change<'_> {
    /// Inserts `key`, refusing growth past the cap. The store's size is the
    /// larger of its keys plus values and what its file takes on disk (less
    /// the empty store's overhead): the file is what fills the disk, and it
    /// grows faster than the data for tiny keys or churn.
    pub(crate) fn put(&mut self, key: &str, value: &[u8]) -> Result<(), KvError> {
        let old = {
            let old = self.table.get(key)?;
            if let Some(before) = &mut self.before {
                before.push((key.to_string(), old.as_ref().map(|v| v.value().to_vec())));
            }
            old.map_or(0, |v| (key.len() + v.value().len()) as u64)
        };
        let needed = self.used - old + (key.len() + value.len()) as u64;
        // A write that does not grow the store is allowed even over the cap
        // (the cap may have been lowered), so a full store can be emptied.
        if needed > self.used {
            let file_needed = self.file + needed.saturating_sub(self.start);
            if needed > self.cap || file_needed > self.cap {
                self.file_refused = needed <= self.cap;
                return Err(KvError::StoreFull {
                    label: self.label.to_string(),
                    used: self.used.max(self.file),
                    needed: needed.max(file_needed),
                    cap: self.cap,
                });
            }
        }
        self.table.insert(key, value)?;
        self.used = needed;
        self.changes.push((key.to_string(), Some(value.to_vec())));
        Ok(())
    }

    pub(crate) fn remove(&mut self, key: &str) -> Result<(), KvError> {
        if let Some(v) = self.table.remove(key)? {
            self.used -= (key.len() + v.value().len()) as u64;
            if let Some(before) = &mut self.before {
                before.push((key.to_string(), Some(v.value().to_vec())));
            }
            self.changes.push((key.to_string(), None));
        }
        Ok(())
    }
}

impl Store {
    /// Writes begun so far.
    pub(crate) fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    pub(crate) fn new(
        tenant: &str,
        label: &str,
        path: Option<PathBuf>,
        opener: Opener,
        errors: Arc<AtomicU64>,
    ) -> Result<Self, KvError> {
        let shown = path
            .as_deref()
            .map_or(":memory:".into(), |p| p.display().to_string());
        let storage = |e: redb::Error| KvError::Storage(format!("{shown}: {e}"));
        let db = opener().map_err(|e| storage(e.into()))?;
        let used = create_and_count(&db).map_err(storage)?;
        let store = Self {
            tenant: tenant.to_string(),
            label: label.to_string(),
            path,
            opener,
            db: RwLock::new(Some(db)),
            writer: Mutex::new(Writer {
                used,
                file_bytes: 0,
                pending: BTreeMap::new(),
                pending_bytes: 0,
                dirty: false,
                fault: None,
                retry_at: Instant::now(),
                retry_wait: RETRY_INTERVAL,
                compact: false,
            }),
            errors,
            readers: Arc::new(Semaphore::new(READERS)),
            writers: Arc::new(Semaphore::new(1)),
            page_marks: Default::default(),
            writes: AtomicU64::new(0),
        };
        store.lock_writer().file_bytes = store.file_bytes();
        Ok(store)
    }

    pub(crate) fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes the file takes on disk: its allocated blocks, since redb's
    /// file is sparse until written; but no more than its length, since
    /// some filesystems (XFS) count blocks preallocated past the end for a
    /// while.
    pub(crate) fn file_bytes(&self) -> u64 {
        self.path
            .as_deref()
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| (m.blocks() * 512).min(m.len()))
    }

    fn shown_path(&self) -> String {
        self.path
            .as_deref()
            .map_or(":memory:".into(), |p| p.display().to_string())
    }

    /// Runs `f` on a read transaction. A storage error fails the store.
    pub(crate) fn read<R>(
        &self,
        f: impl Fn(&KvReadTable) -> Result<R, KvError>,
    ) -> Result<R, KvError> {
        let attempt = || -> Option<Result<R, KvError>> {
            let db = self.db.read().unwrap_or_else(|e| e.into_inner());
            let db = db.as_ref()?;
            Some((|| {
                let txn = db.begin_read()?;
                let table = txn.open_table(TABLE)?;
                f(&table)
            })())
        };
        let result = match attempt() {
            Some(r) => r,
            None => {
                self.ready(&mut self.lock_writer())?;
                attempt().unwrap_or(Err(KvError::Unavailable))
            }
        };
        match result {
            Err(KvError::Db(e)) => Err(self.fail(&mut self.lock_writer(), e)),
            r => r,
        }
    }

    /// Runs `f` in one write transaction; commits if it succeeds, changes
    /// nothing if it fails.
    pub(crate) fn write<R>(
        &self,
        cap: u64,
        f: impl FnOnce(&mut Change<'_>) -> Result<R, KvError>,
    ) -> Result<R, KvError> {
        let mut w = self.lock_writer();
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.ready(&mut w)?;
        let result = {
            let db = self.db.read().unwrap_or_else(|e| e.into_inner());
            match db.as_ref() {
                Some(db) => self.try_write(db, &mut w, cap, f),
                None => Err(KvError::Unavailable),
            }
        };
        match result {
            Err(KvError::Db(e)) => Err(self.fail(&mut w, e)),
            r => r,
        }
    }

    fn try_write<R>(
        &self,
        db: &Database,
        w: &mut Writer,
        cap: u64,
        f: impl FnOnce(&mut Change<'_>) -> Result<R, KvError>,
    ) -> Result<R, KvError> {
        // Past the bound, this write makes everything durable itself rather
        // than grow the pending set further.
        let durable = w.pending_bytes >= PENDING_MAX_BYTES;
        let mut txn = db.begin_write()?;
        let (r, used, changes, before) = {
            let mut change = Change {
                table: txn.open_table(TABLE)?,
                used: w.used,
                start: w.used,
                file: w.file_bytes.saturating_sub(FILE_OVERHEAD_BYTES),
                cap,
                label: &self.label,
                changes: Vec::new(),
                before: durable.then(Vec::new),
                file_refused: false,
            };
            let r = f(&mut change);
            w.compact |= change.file_refused;
            (r?, change.used, change.changes, change.before)
        };
        txn.set_durability(if durable {
            Durability::Immediate
        } else {
            Durability::None
        })?;
        if let Err(e) = txn.commit() {
            // Whether a failed durable commit reached the disk is unknown:
            // the replay puts back what these keys held before it, unless
            // the pending set already says what was acknowledged.
            for (k, v) in before.into_iter().flatten() {
                if !w.pending.contains_key(&k) {
                    w.pending_bytes += k.len() + v.as_ref().map_or(0, Vec::len);
                    w.pending.insert(k, v);
                }
            }
            return Err(e.into());
        }
        w.used = used;
        if durable {
            w.pending.clear();
            w.pending_bytes = 0;
            w.dirty = false;
        } else {
            for (k, v) in changes {
                let key_len = k.len();
                w.pending_bytes += key_len + v.as_ref().map_or(0, Vec::len);
                if let Some(old) = w.pending.insert(k, v) {
                    // Only the latest value of a key is kept.
                    w.pending_bytes -= key_len + old.as_ref().map_or(0, Vec::len);
                }
            }
            w.dirty = true;
        }
        w.file_bytes = self.file_bytes();
        Ok(r)
    }

    /// Records a disk fault: logs it, drops the database (redb would answer
    /// `PreviousIo` from now on) and returns the caller's error.
    fn fail(&self, w: &mut Writer, e: redb::Error) -> KvError {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Some(fault) = w.fault {
            return fault.error();
        }
        let fault = Fault::of(&e);
        tracing::error!(
            tenant = %self.tenant,
            store = %self.label,
            path = %self.shown_path(),
            error = %e,
            pending = w.pending.len(),
            "key-value storage failed; the store answers errors and reopens its file when the disk allows, keeping its acknowledged writes"
        );
        w.fault = Some(fault);
        w.retry_at = Instant::now() + RETRY_INTERVAL;
        w.retry_wait = RETRY_INTERVAL;
        *self.db.write().unwrap_or_else(|e| e.into_inner()) = None;
        fault.error()
    }

    /// Ok if the store is open; after a fault, reopens it if it is time to
    /// try, else answers the fault's error.
    fn ready(&self, w: &mut Writer) -> Result<(), KvError> {
        let Some(fault) = w.fault else {
            return Ok(());
        };
        if Instant::now() < w.retry_at {
            self.errors.fetch_add(1, Ordering::Relaxed);
            return Err(fault.error());
        }
        match self.reopen(w) {
            Ok(replayed) => {
                tracing::warn!(
                    tenant = %self.tenant,
                    store = %self.label,
                    path = %self.shown_path(),
                    replayed,
                    "key-value store reopened after a storage failure; its acknowledged writes were replayed and are durable"
                );
                w.fault = None;
                Ok(())
            }
            Err(e) => {
                let fault = Fault::of(&e);
                w.fault = Some(fault);
                w.retry_wait = (w.retry_wait * 2).min(RETRY_MAX_INTERVAL);
                w.retry_at = Instant::now() + w.retry_wait;
                tracing::warn!(
                    tenant = %self.tenant,
                    store = %self.label,
                    path = %self.shown_path(),
                    error = %e,
                    pending = w.pending.len(),
                    retry_in_ms = w.retry_wait.as_millis() as u64,
                    "key-value store still failing on its disk"
                );
                self.errors.fetch_add(1, Ordering::Relaxed);
                Err(fault.error())
            }
        }
    }

    /// Reopens the file and replays the pending writes durably; returns how
    /// many keys were replayed.
    fn reopen(&self, w: &mut Writer) -> Result<usize, redb::Error> {
        *self.db.write().unwrap_or_else(|e| e.into_inner()) = None;
        let db = (self.opener)()?;
        {
            let mut txn = db.begin_write()?;
            txn.set_durability(Durability::Immediate)?;
            {
                let mut table = txn.open_table(TABLE)?;
                for (k, v) in &w.pending {
                    match v {
                        Some(v) => {
                            table.insert(k.as_str(), v.as_slice())?;
                        }
                        None => {
                            table.remove(k.as_str())?;
                        }
                    }
                }
            }
            txn.commit()?;
        }
        w.used = create_and_count(&db)?;
        let replayed = w.pending.len();
        w.pending.clear();
        w.pending_bytes = 0;
        w.dirty = false;
        *self.db.write().unwrap_or_else(|e| e.into_inner()) = Some(db);
        w.file_bytes = self.file_bytes();
        Ok(replayed)
    }

    /// Makes every acknowledged write durable. The pending set is cleared
    /// only once the durable commit succeeded, so a failure is retried.
    pub(crate) fn flush(&self) -> Result<(), KvError> {
        self.flush_locked(self.lock_writer())
    }

    /// [`Store::flush`], unless a write holds the store now (`None`): the
    /// flush thread leaves it until it has flushed every other store, so a
    /// write waiting for a core (a tenant's in the background lane, at
    /// `SCHED_IDLE`) delays no other store's.
    pub(crate) fn try_flush(&self) -> Option<Result<(), KvError>> {
        let w = match self.writer.try_lock() {
            Ok(w) => w,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        Some(self.flush_locked(w))
    }

    fn flush_locked(&self, mut w: MutexGuard<'_, Writer>) -> Result<(), KvError> {
        if w.fault.is_some() {
            // Reopening replays the pending writes in a durable commit.
            return self.ready(&mut w);
        }
        if !w.dirty {
            return Ok(());
        }
        let result = {
            let db = self.db.read().unwrap_or_else(|e| e.into_inner());
            match db.as_ref() {
                Some(db) => commit_durable(db),
                None => Ok(()),
            }
        };
        if let Err(e) = result {
            return Err(self.fail(&mut w, e));
        }
        w.pending.clear();
        w.pending_bytes = 0;
        w.dirty = false;
        w.file_bytes = self.file_bytes();
        if std::mem::take(&mut w.compact) {
            self.compact(&mut w);
        }
        Ok(())
    }

    /// Gives the file's free pages back to the disk, after a write was
    /// refused because of the file's size: deleting keys frees pages inside
    /// the file but does not shrink it.
    fn compact(&self, w: &mut Writer) {
        let before = w.file_bytes;
        let result = {
            let mut db = self.db.write().unwrap_or_else(|e| e.into_inner());
            match db.as_mut() {
                Some(db) => db.compact().map_err(redb::Error::from),
                None => return,
            }
        };
        match result {
            Ok(_) => {
                w.file_bytes = self.file_bytes();
                tracing::info!(tenant = %self.tenant, store = %self.label, before, after = w.file_bytes, "key-value store compacted");
            }
            Err(e) => {
                let _ = self.fail(w, e);
            }
        }
    }
}

fn commit_durable(db: &Database) -> Result<(), redb::Error> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    txn.commit()?;
    Ok(())
}

/// Creates the table if needed and returns the bytes of keys plus values.
fn create_and_count(db: &Database) -> Result<u64, redb::Error> {
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
    Ok(used)
}

impl Drop for Store {
    fn drop(&mut self) {
        // A last try, whatever the retry schedule says.
        self.lock_writer().retry_at = Instant::now();
        if self.flush().is_err() {
            let w = self.lock_writer();
            tracing::error!(
                tenant = %self.tenant,
                store = %self.label,
                path = %self.shown_path(),
                lost = w.pending.len(),
                "key-value store closed while its disk fails: its writes since the last successful flush are lost"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::{Access, Backend};
    use crate::{Handle, MAX_BATCH_KEYS, Registry};
    use std::path::Path;

    fn store(cap: u64) -> (tempfile::TempDir, Registry, Handle) {
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
        assert_eq!(s.used_bytes().unwrap(), 2 + 3);
    }

    #[test]
    fn a_store_moved_to_another_file_is_opened_there() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::new(dir.path());
        let at = |f: &str| crate::Placement::File(dir.path().join(f));
        let a = reg
            .open_at("t", "data", 1 << 20, Some(&at("a.redb")))
            .unwrap();
        a.set("k", b"in a").unwrap();
        // A reload that places the store elsewhere, while the old handle
        // still lives: the new file, not the old store.
        let b = reg
            .open_at("t", "data", 1 << 20, Some(&at("b.redb")))
            .unwrap();
        assert_eq!(b.get("k").unwrap(), None);
        b.set("k", b"in b").unwrap();
        assert_eq!(a.get("k").unwrap(), Some(b"in a".to_vec()));
        let again = reg
            .open_at("t", "data", 1 << 20, Some(&at("b.redb")))
            .unwrap();
        assert!(again.same(&b));
        // Moved back while the old store still has a user: that store.
        let back = reg
            .open_at("t", "data", 1 << 20, Some(&at("a.redb")))
            .unwrap();
        assert!(back.same(&a));
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
        assert!(a.same(&a2));
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
        assert_eq!(s.used_bytes().unwrap(), 11);
    }

    #[test]
    fn failed_batch_changes_nothing() {
        let (_d, _r, s) = store(4096);
        let err = s
            .set_many(&[("a".into(), vec![1; 3000]), ("b".into(), vec![1; 3000])])
            .unwrap_err();
        assert!(matches!(err, KvError::StoreFull { .. }));
        assert_eq!(s.get("a").unwrap(), None);
        assert_eq!(s.used_bytes().unwrap(), 0);
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
    fn batch_writes_are_bounded() {
        let (_d, _r, s) = store(1 << 30);
        let refused = |r: Result<(), KvError>| matches!(r, Err(KvError::BatchTooLarge(_)));
        let too_many: Vec<(String, Vec<u8>)> = (0..=MAX_BATCH_KEYS)
            .map(|i| (i.to_string(), vec![]))
            .collect();
        assert!(refused(s.set_many(&too_many)));
        let keys: Vec<String> = too_many.iter().map(|p| p.0.clone()).collect();
        assert!(refused(s.delete_many(&keys)));
        let too_big: Vec<(String, Vec<u8>)> = (0..17)
            .map(|i| (i.to_string(), vec![0; MAX_VALUE_BYTES]))
            .collect();
        assert!(refused(s.set_many(&too_big)));
        assert_eq!(s.used_bytes().unwrap(), 0, "nothing was written");
        s.set_many(&too_many[..MAX_BATCH_KEYS]).unwrap();
        s.delete_many(&keys[..MAX_BATCH_KEYS]).unwrap();
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
    fn signed_increments_and_compare_and_swap() {
        let reg = Registry::in_memory();
        let s = reg.open("t", "default", 1 << 20).unwrap();
        assert_eq!(s.add("n", -3).unwrap(), -3);
        assert_eq!(s.add("n", 10).unwrap(), 7);
        assert!(matches!(s.add("n", i64::MAX), Err(KvError::Overflow(_))));
        assert_eq!(s.swap_if("k", None, b"first").unwrap(), crate::Swap::Done);
        assert_eq!(
            s.swap_if("k", None, b"again").unwrap(),
            crate::Swap::Changed(Some(b"first".to_vec()))
        );
        assert_eq!(
            s.swap_if("k", Some(b"first"), b"second").unwrap(),
            crate::Swap::Done
        );
        assert_eq!(s.get("k").unwrap(), Some(b"second".to_vec()));
        assert_eq!(
            s.swap_if("gone", Some(b"x"), b"y").unwrap(),
            crate::Swap::Changed(None)
        );
    }

    #[test]
    fn every_key_is_listed_at_once_only_within_the_bound() {
        let (_d, _r, s) = store(1 << 30);
        // Keys of 1,000 bytes, listed as 1,024: 16,384 fit in 16 MiB.
        let key = |i: usize| format!("{i:06}{}", "k".repeat(994));
        let pairs = |from: usize, to: usize| -> Vec<(String, Vec<u8>)> {
            (from..to).map(|i| (key(i), vec![])).collect()
        };
        for from in (0..16_384).step_by(MAX_BATCH_KEYS) {
            s.set_many(&pairs(from, (from + MAX_BATCH_KEYS).min(16_384)))
                .unwrap();
        }
        let all = s.all_keys().unwrap();
        assert_eq!(all.len(), 16_384);
        let listed: usize = all.iter().map(|k| crate::listed_bytes(k)).sum();
        assert_eq!(listed, crate::MAX_LISTED_BYTES);

        s.set_many(&pairs(16_384, 16_400)).unwrap();
        let refused = s.all_keys().unwrap_err();
        assert!(
            matches!(refused, KvError::TooManyKeys(16_384)),
            "{refused:?}"
        );
        assert!(refused.to_string().contains("list-keys"), "{refused}");
        // A page at a time, they all are.
        assert_eq!(s.list_keys(16_000).unwrap().0.len(), 400);
    }

    #[test]
    fn list_keys_pages() {
        let (_d, _r, s) = store(1 << 30);
        let pairs: Vec<(String, Vec<u8>)> =
            (0..2500).map(|i| (format!("k{i:05}"), vec![])).collect();
        for batch in pairs.chunks(MAX_BATCH_KEYS) {
            s.set_many(batch).unwrap();
        }
        let (first, next) = s.list_keys(0).unwrap();
        assert_eq!(first.len(), 1000);
        assert_eq!(first[0], "k00000");
        assert_eq!(next, Some(1000));
        let (last, next) = s.list_keys(2000).unwrap();
        assert_eq!(last.len(), 500);
        assert_eq!(next, None);
        assert!(s.list_keys(u64::MAX).unwrap().0.is_empty());
        // Page after page, each starting where the last ended (without
        // walking the keys before it): every key once and in order.
        let list = |s: &Handle| {
            let mut listed = Vec::new();
            let mut cursor = 0;
            loop {
                let (page, next) = s.list_keys(cursor).unwrap();
                listed.extend(page);
                match next {
                    Some(n) => cursor = n,
                    None => return listed,
                }
            }
        };
        let listed = list(&s);
        assert_eq!(
            listed,
            pairs.iter().map(|p| p.0.clone()).collect::<Vec<_>>()
        );
        // A place remembered before a write is not used after it: a second
        // listing after keys were added before it sees each key once.
        s.list_keys(0).unwrap();
        let before: Vec<(String, Vec<u8>)> =
            (0..500).map(|i| (format!("a{i:03}"), vec![])).collect();
        s.set_many(&before).unwrap();
        let again = list(&s);
        assert_eq!(again.len(), 3000);
        assert!(again.windows(2).all(|w| w[0] < w[1]), "in order, each once");
        s.delete_many(&before.iter().map(|p| p.0.clone()).collect::<Vec<_>>())
            .unwrap();
        assert_eq!(s.all_keys().unwrap(), listed);
    }

    #[test]
    fn caps_belong_to_the_handle() {
        // A config built but refused keeps its caps to itself: the serving
        // config's handle still writes under its own.
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::new(dir.path());
        let serving = reg.open("t", "default", 4096).unwrap();
        let refused = reg.open("t", "default", 1 << 20).unwrap();
        assert!(!serving.same(&refused));
        assert!(matches!(
            serving.set("k", &[0; 8000]),
            Err(KvError::StoreFull { cap: 4096, .. })
        ));
        refused.set("k", &[0; 8000]).unwrap();
    }

    /// A file backend whose writes, length changes and syncs fail with
    /// `ENOSPC` while `full` is set, and block while `gate` is held.
    #[derive(Debug)]
    struct Faulty {
        file: redb::backends::FileBackend,
        faults: Arc<Faults>,
    }

    #[derive(Debug, Default)]
    struct Faults {
        full: std::sync::atomic::AtomicBool,
        /// Only fsync fails: the writes before it reach the page cache.
        sync_fails: std::sync::atomic::AtomicBool,
        gate: Mutex<()>,
    }

    impl Faulty {
        fn check(&self) -> std::io::Result<()> {
            drop(self.faults.gate.lock().unwrap());
            if self.faults.full.load(Ordering::SeqCst) {
                return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
            }
            Ok(())
        }
    }

    impl redb::StorageBackend for Faulty {
        fn len(&self) -> std::io::Result<u64> {
            self.file.len()
        }
        fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
            self.file.read(offset, out)
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.check()?;
            self.file.set_len(len)
        }
        fn sync_data(&self) -> std::io::Result<()> {
            self.check()?;
            if self.faults.sync_fails.load(Ordering::SeqCst) {
                return Err(std::io::Error::from_raw_os_error(5)); // EIO
            }
            self.file.sync_data()
        }
        fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
            self.check()?;
            self.file.write(offset, data)
        }
        fn close(&self) -> std::io::Result<()> {
            self.file.close()
        }
    }

    fn faulty(dir: &Path, cap: u64) -> (Handle, Arc<Faults>, Arc<AtomicU64>) {
        let faults = Arc::new(Faults::default());
        let path = dir.join("f.redb");
        let opener = {
            let (path, faults) = (path.clone(), faults.clone());
            Box::new(move || {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&path)
                    .map_err(redb::DatabaseError::from)?;
                Database::builder().create_with_backend(Faulty {
                    file: redb::backends::FileBackend::new(file)?,
                    faults: faults.clone(),
                })
            }) as Opener
        };
        let errors = Arc::new(AtomicU64::new(0));
        let store = Store::new("acme", "default", Some(path), opener, errors.clone()).unwrap();
        let handle = Handle {
            store: Backend::File(Arc::new(store)),
            cap,
            tenant: Arc::new(Semaphore::new(crate::handle::TENANT_PERMITS)),
            work: Default::default(),
        };
        (handle, faults, errors)
    }

    /// What a crash would leave: a copy of the file as it is on disk now,
    /// opened as redb opens it after a crash (back to its last durable
    /// commit).
    fn crash_copy(dir: &Path) -> Handle {
        let copy = dir.join("copy");
        let _ = std::fs::remove_dir_all(&copy);
        std::fs::create_dir_all(copy.join("t")).unwrap();
        std::fs::copy(dir.join("f.redb"), copy.join("t/default.redb")).unwrap();
        let reg = Registry::new(&copy);
        reg.open("t", "default", 1 << 20).unwrap()
    }

    fn file_store(h: &Handle) -> &Store {
        let Backend::File(store) = &h.store else {
            unreachable!("a file store")
        };
        store
    }

    fn retry_now(h: &Handle) {
        file_store(h).lock_writer().retry_at = Instant::now();
    }

    #[test]
    fn a_failed_flush_is_retried() {
        let dir = tempfile::tempdir().unwrap();
        let (s, faults, _) = faulty(dir.path(), 1 << 20);
        s.set("a", b"1").unwrap();
        faults.full.store(true, Ordering::SeqCst);
        assert!(matches!(s.flush(), Err(KvError::DiskFull)));
        faults.full.store(false, Ordering::SeqCst);
        retry_now(&s);
        s.flush().unwrap();
        // The retried flush made it durable: a crash now keeps it.
        assert_eq!(
            crash_copy(dir.path()).get("a").unwrap(),
            Some(b"1".to_vec())
        );
    }

    #[test]
    fn a_full_disk_answers_errors_and_recovers_keeping_acknowledged_writes() {
        let dir = tempfile::tempdir().unwrap();
        let (s, faults, errors) = faulty(dir.path(), 1 << 30);
        s.set("a", b"1").unwrap();
        s.set("gone", b"x").unwrap();
        s.delete("gone").unwrap();
        assert_eq!(s.increment("n", 7).unwrap(), 7);
        faults.full.store(true, Ordering::SeqCst);
        // redb may buffer a small write and fail only at the flush; either
        // way the disk fault must surface, and whatever was acknowledged
        // must survive it.
        let big = s.set("b", &[7; 512 * 1024]);
        let flushed = s.flush();
        assert!(
            big.is_err() || flushed.is_err(),
            "the full disk went unnoticed"
        );
        let err = s.set("c", b"3").unwrap_err();
        assert!(matches!(err, KvError::DiskFull), "{err:?}");
        assert_eq!(
            err.to_string(),
            "storage full: the disk holding this store has no space left; nothing was written, try again later"
        );
        assert!(matches!(s.get("a"), Err(KvError::DiskFull)));
        assert!(errors.load(Ordering::Relaxed) >= 2);
        // Still full at the retry: still an error, nothing lost.
        retry_now(&s);
        assert!(matches!(s.set("c", b"3"), Err(KvError::DiskFull)));
        // Space is back: the next operation after the retry interval
        // reopens the file, replays, and goes on.
        faults.full.store(false, Ordering::SeqCst);
        retry_now(&s);
        s.set("c", b"3").unwrap();
        assert_eq!(s.get("a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(s.get("gone").unwrap(), None);
        assert_eq!(s.get("n").unwrap(), Some(b"7".to_vec()));
        assert_eq!(s.get("b").unwrap().is_some(), big.is_ok());
        assert_eq!(s.get("c").unwrap(), Some(b"3".to_vec()));
        let b_bytes = if big.is_ok() { 1 + 512 * 1024 } else { 0 };
        assert_eq!(s.used_bytes().unwrap(), 2 + 2 + 2 + b_bytes);
        // The replay was durable; "c" is once flushed.
        let before_flush = crash_copy(dir.path());
        assert_eq!(before_flush.get("a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(before_flush.get("n").unwrap(), Some(b"7".to_vec()));
        drop(before_flush);
        s.flush().unwrap();
        assert_eq!(
            crash_copy(dir.path()).get("c").unwrap(),
            Some(b"3".to_vec())
        );
    }

    #[test]
    fn the_pending_set_is_bounded_by_inline_durable_commits() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _, _) = faulty(dir.path(), 1 << 30);
        let value = vec![1; MAX_VALUE_BYTES];
        for i in 0..(PENDING_MAX_BYTES / MAX_VALUE_BYTES + 1) {
            s.set(&format!("k{i}"), &value).unwrap();
        }
        assert!(file_store(&s).lock_writer().pending_bytes <= PENDING_MAX_BYTES);
        // The commit that passed the bound was durable.
        assert!(crash_copy(dir.path()).get("k0").unwrap().is_some());
    }

    #[test]
    fn a_refused_write_stays_refused_even_if_its_commit_reached_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let (s, faults, _) = faulty(dir.path(), 1 << 30);
        s.set("x", b"old").unwrap();
        s.flush().unwrap();
        let value = vec![1; MAX_VALUE_BYTES];
        for i in 0..PENDING_MAX_BYTES / MAX_VALUE_BYTES {
            s.set(&format!("k{i}"), &value).unwrap();
        }
        // The pending set is full, so this write commits durably; its
        // fsync fails after its pages and header were written.
        faults.sync_fails.store(true, Ordering::SeqCst);
        assert!(matches!(s.set("x", b"new"), Err(KvError::Unavailable)));
        faults.sync_fails.store(false, Ordering::SeqCst);
        retry_now(&s);
        assert_eq!(s.get("x").unwrap(), Some(b"old".to_vec()));
        for i in 0..PENDING_MAX_BYTES / MAX_VALUE_BYTES {
            assert_eq!(
                s.get(&format!("k{i}")).unwrap().map(|v| v.len()),
                Some(MAX_VALUE_BYTES)
            );
        }
        assert_eq!(
            crash_copy(dir.path()).get("x").unwrap(),
            Some(b"old".to_vec())
        );
    }

    #[test]
    fn the_file_on_disk_counts_against_the_cap_and_compaction_gives_it_back() {
        let (_d, _r, s) = store(256 * 1024);
        // Tiny keys: their bytes are few, the B-tree pages holding them
        // are not.
        let mut refused = None;
        for batch in 0..400 {
            let pairs: Vec<(String, Vec<u8>)> = (0..500)
                .map(|i| (format!("{batch:03}{i:03}"), vec![]))
                .collect();
            if let Err(e) = s.set_many(&pairs) {
                refused = Some(e);
                break;
            }
        }
        let err = refused.expect("the cap was never reached");
        assert!(matches!(err, KvError::StoreFull { .. }), "{err:?}");
        let used = s.used_bytes().unwrap();
        let file = s.file_bytes();
        assert!(
            used < 256 * 1024 / 2,
            "keys plus values ({used}) were far from the cap; the file ({file}) decided"
        );
        assert!(
            file <= 256 * 1024 + FILE_OVERHEAD_BYTES + 64 * 1024,
            "file of {file} bytes"
        );
        // Emptied and flushed (which compacts), the store takes writes again.
        loop {
            let (page, _) = s.list_keys(0).unwrap();
            if page.is_empty() {
                break;
            }
            s.delete_many(&page).unwrap();
        }
        s.flush().unwrap();
        assert!(
            s.file_bytes() < file,
            "{} after compaction, {file} before",
            s.file_bytes()
        );
        s.set("again", &[1; 10 * 1024]).unwrap();
    }

    // The gate is the stalled disk: the test holds it across awaits on
    // purpose, and only blocking-pool threads ever wait on it.
    #[expect(clippy::await_holding_lock)]
    #[tokio::test(flavor = "current_thread")]
    async fn a_stalled_disk_holds_a_blocking_thread_not_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let (s, faults, _) = faulty(dir.path(), 1 << 20);
        s.set("a", b"1").unwrap();
        let gate = faults.gate.lock().unwrap();
        // The flush stalls in fsync on another thread, holding the writer.
        let flusher = {
            let s = s.clone();
            std::thread::spawn(move || s.flush())
        };
        std::thread::sleep(Duration::from_millis(50));
        let write = tokio::spawn({
            let s = s.clone();
            async move { s.blocking(Access::Write, |s| s.set("b", b"2")).await }
        });
        // The one thread of this runtime still runs other work meanwhile.
        let ticks = async {
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), ticks)
            .await
            .expect("the runtime's thread was blocked");
        assert!(!write.is_finished());
        drop(gate);
        write.await.unwrap().unwrap();
        flusher.join().unwrap().unwrap();
        assert_eq!(s.get("b").unwrap(), Some(b"2".to_vec()));
    }
}
