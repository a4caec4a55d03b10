//! A granted store with its cap: the operations a guest's bucket runs.

use crate::error::KvError;
use crate::redis_store::RedisStore;
use crate::store::{MAX_BATCH_BYTES, MAX_BATCH_KEYS, MAX_KEY_BYTES, MAX_VALUE_BYTES, PAGE, Store};
use redb::ReadableTable;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Bytes of keys one call lists at once, each counted by [`listed_bytes`]:
/// the same bound as a database query's result.
pub const MAX_LISTED_BYTES: usize = 16 << 20;

/// What a listed key takes in host memory: its `String` and its text, in
/// an allocation of at least 16 bytes.
pub fn listed_bytes(key: &str) -> usize {
    24 + key.len().next_multiple_of(8).max(16)
}

/// Keys listed so far, and what they take.
#[derive(Default)]
struct Listing {
    keys: Vec<String>,
    held: usize,
}

impl Listing {
    fn keep(&mut self, key: String) -> Result<(), KvError> {
        self.held += listed_bytes(&key);
        if self.held > MAX_LISTED_BYTES {
            return Err(KvError::TooManyKeys(self.keys.len()));
        }
        self.keys.push(key);
        Ok(())
    }
}

/// Operations of one tenant's stores running at once, over all its
/// stores: each takes a thread of the host's blocking pool, and a tenant
/// may have as many stores as its components name.
pub const TENANT_PERMITS: usize = 8;

/// A granted store with its size cap: what a guest's bucket uses.
///
/// Its methods block on the disk. The host functions run them on the
/// blocking pool; call them directly only where blocking is fine (tests,
/// tools, threads of your own).
#[derive(Clone)]
pub struct Handle {
    pub(crate) store: Backend,
    pub(crate) cap: u64,
    /// The tenant's [`TENANT_PERMITS`].
    pub(crate) tenant: Arc<Semaphore>,
    /// Where its calls run and whom their CPU is charged to.
    pub(crate) work: edge_blocking::TenantWork,
}

/// Where a store keeps its data.
#[derive(Clone)]
pub(crate) enum Backend {
    /// A redb file (or memory) of this host's.
    File(Arc<Store>),
    /// A hash on a Redis server.
    Redis(Arc<RedisStore>),
}

impl Backend {
    fn permits(&self, access: Access) -> &Arc<Semaphore> {
        match (self, access) {
            (Backend::File(s), Access::Read) => &s.readers,
            (Backend::File(s), Access::Write) => &s.writers,
            (Backend::Redis(s), Access::Read) => &s.readers,
            (Backend::Redis(s), Access::Write) => &s.writers,
        }
    }
}

/// What a compare-and-swap found.
#[derive(Debug, PartialEq, Eq)]
pub enum Swap {
    /// The value was as expected and is now the new one.
    Done,
    /// The value had changed: what it is now (`None`: absent).
    Changed(Option<Vec<u8>>),
}

/// Whether an operation reads or writes: they queue for different permits.
#[derive(Clone, Copy)]
pub(crate) enum Access {
    Read,
    Write,
}

impl Handle {
    /// Whether both are the same store with the same cap.
    pub fn same(&self, other: &Handle) -> bool {
        let same_store = match (&self.store, &other.store) {
            (Backend::File(a), Backend::File(b)) => Arc::ptr_eq(a, b),
            (Backend::Redis(a), Backend::Redis(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        same_store && self.cap == other.cap
    }

    /// The same store, its calls run as `work` (the tenant's lane).
    pub fn with_work(mut self, work: edge_blocking::TenantWork) -> Self {
        self.work = work;
        self
    }

    /// The size cap this handle writes under, in bytes.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// Runs `f` on the blocking pool, so a slow disk (or Redis server)
    /// holds a pool thread rather than the async worker (and every
    /// connection on it). Waiting for a permit is async: a store whose disk
    /// stalls ties up at most four reader threads and one writer thread of
    /// the blocking pool, however many guests call it, and a tenant's
    /// stores together at most [`TENANT_PERMITS`].
    pub(crate) async fn blocking<R: Send + 'static>(
        &self,
        access: Access,
        f: impl FnOnce(&Handle) -> Result<R, KvError> + Send + 'static,
    ) -> Result<R, KvError> {
        let (store, tenant) = (self.store.permits(access).clone(), self.tenant.clone());
        let work = self.work.clone();
        let handle = self.clone();
        // A task of its own: a guest's call that is not being polled (a
        // WASI 0.3 task of an idle instance) never sits on permits handed
        // to it. Dropping the call aborts the task while it waits.
        let mut task = wasmtime_wasi::runtime::spawn(async move {
            // The store's first: one waiting for a busy store holds none
            // of its tenant's.
            let permit = store
                .acquire_owned()
                .await
                .map_err(|_| KvError::Unavailable)?;
            let tenant_permit = tenant
                .acquire_owned()
                .await
                .map_err(|_| KvError::Unavailable)?;
            // The permits move into the blocking task: once started, the
            // operation finishes (or fails) before another takes its place.
            work.spawn(move || {
                let _permits = (permit, tenant_permit);
                f(&handle)
            })
            .await
            .map_err(|e| {
                KvError::Trap(wasmtime::Error::msg(format!(
                    "key-value operation failed: {e}"
                )))
            })?
        });
        // Through the inner handle: a task cancelled (its runtime shutting
        // down) is an error, not a panic.
        (&mut *task).await.map_err(|_| KvError::Unavailable)?
    }

    /// Bytes of keys plus values stored.
    pub fn used_bytes(&self) -> Result<u64, KvError> {
        match &self.store {
            Backend::File(s) => Ok(s.lock_writer().used),
            Backend::Redis(s) => s.used_bytes(),
        }
    }

    /// Bytes the store's file takes on disk (0 in Redis).
    pub fn file_bytes(&self) -> u64 {
        match &self.store {
            Backend::File(s) => s.file_bytes(),
            Backend::Redis(_) => 0,
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        check_key(key)?;
        match &self.store {
            Backend::File(s) => s.read(|t| Ok(t.get(key)?.map(|v| v.value().to_vec()))),
            Backend::Redis(s) => s.get(key),
        }
    }

    /// The values of `keys`, in order, from one snapshot.
    pub fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        check_batch(keys.len())?;
        keys.iter().try_for_each(|k| check_key(k))?;
        let store = match &self.store {
            Backend::File(s) => s,
            Backend::Redis(s) => return s.get_many(keys),
        };
        store.read(|table| {
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
        })
    }

    /// Sets `key` to `value`.
    pub fn set(&self, key: &str, value: &[u8]) -> Result<(), KvError> {
        check_key(key)?;
        check_value(value)?;
        match &self.store {
            Backend::File(s) => s.write(self.cap, |c| c.put(key, value)),
            Backend::Redis(s) => s.set_many(&[(key, value)], self.cap),
        }
    }

    /// Sets every pair, all or none.
    pub fn set_many(&self, pairs: &[(String, Vec<u8>)]) -> Result<(), KvError> {
        check_pairs(pairs)?;
        match &self.store {
            Backend::File(s) => s.write(self.cap, |c| {
                pairs.iter().try_for_each(|(k, v)| c.put(k, v))
            }),
            Backend::Redis(s) => {
                let pairs: Vec<(&str, &[u8])> = pairs
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_slice()))
                    .collect();
                s.set_many(&pairs, self.cap)
            }
        }
    }

    /// Deletes `key` (absent is fine).
    pub fn delete(&self, key: &str) -> Result<(), KvError> {
        check_key(key)?;
        match &self.store {
            Backend::File(s) => s.write(self.cap, |c| c.remove(key)),
            Backend::Redis(s) => s.delete_many(&[key]),
        }
    }

    /// Deletes every key, all or none.
    pub fn delete_many(&self, keys: &[String]) -> Result<(), KvError> {
        check_batch(keys.len())?;
        keys.iter().try_for_each(|k| check_key(k))?;
        match &self.store {
            Backend::File(s) => s.write(self.cap, |c| keys.iter().try_for_each(|k| c.remove(k))),
            Backend::Redis(s) => {
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                s.delete_many(&keys)
            }
        }
    }

    /// Adds `delta` to the decimal number stored at `key` (absent counts as
    /// 0) and returns the new value, atomically.
    pub fn increment(&self, key: &str, delta: u64) -> Result<u64, KvError> {
        check_key(key)?;
        let store = match &self.store {
            Backend::File(s) => s,
            Backend::Redis(s) => return s.increment(key, delta, self.cap),
        };
        store.write(self.cap, |c| {
            let current = match c.table.get(key)? {
                None => 0,
                Some(v) => {
                    let text = String::from_utf8_lossy(v.value()).into_owned();
                    text.parse::<u64>().map_err(|_| KvError::NotANumber(text))?
                }
            };
            let next = current
                .checked_add(delta)
                .ok_or_else(|| KvError::Overflow(key.to_string()))?;
            c.put(key, next.to_string().as_bytes())?;
            Ok(next)
        })
    }

    /// Adds `delta` (negative subtracts) to the decimal `i64` stored at
    /// `key` (absent counts as 0) and returns the new value, atomically
    /// (`wasi:keyvalue@0.2.0-draft2`'s signed increment).
    pub fn add(&self, key: &str, delta: i64) -> Result<i64, KvError> {
        check_key(key)?;
        let store = match &self.store {
            Backend::File(s) => s,
            Backend::Redis(s) => return s.add(key, delta, self.cap),
        };
        store.write(self.cap, |c| {
            let current = match c.table.get(key)? {
                None => 0,
                Some(v) => {
                    let text = String::from_utf8_lossy(v.value()).into_owned();
                    text.parse::<i64>().map_err(|_| KvError::NotANumber(text))?
                }
            };
            let next = current
                .checked_add(delta)
                .ok_or_else(|| KvError::Overflow(key.to_string()))?;
            c.put(key, next.to_string().as_bytes())?;
            Ok(next)
        })
    }

    /// Sets `key` to `value` if it still holds `expected` (`None`:
    /// absent), atomically.
    pub fn swap_if(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        value: &[u8],
    ) -> Result<Swap, KvError> {
        check_key(key)?;
        check_value(value)?;
        let store = match &self.store {
            Backend::File(s) => s,
            Backend::Redis(s) => return s.swap_if(key, expected, value, self.cap),
        };
        store.write(self.cap, |c| {
            let now = c.table.get(key)?.map(|v| v.value().to_vec());
            if now.as_deref() != expected {
                return Ok(Swap::Changed(now));
            }
            c.put(key, value)?;
            Ok(Swap::Done)
        })
    }

    /// Up to a page of keys and the cursor of the next page if there is
    /// one. A file store pages in byte order, the cursor counting keys
    /// (the page after a recent one, with nothing written since, starts
    /// after its last key; the others walk past the keys before them); a
    /// Redis store in Redis' order, the cursor being `HSCAN`'s.
    pub fn list_keys(&self, cursor: u64) -> Result<(Vec<String>, Option<u64>), KvError> {
        use std::ops::Bound::{Excluded, Unbounded};
        let store = match &self.store {
            Backend::File(s) => s,
            Backend::Redis(s) => return s.list_keys(cursor),
        };
        let writes = store.writes();
        let after = {
            let marks = store.page_marks.lock().unwrap_or_else(|e| e.into_inner());
            marks
                .iter()
                .rev()
                .find(|(c, _, w)| *c == cursor && cursor > 0 && *w == writes)
                .map(|(_, key, _)| key.clone())
        };
        let (keys, next) = store.read(|table| {
            let (entries, skip) = match &after {
                Some(key) => (table.range::<&str>((Excluded(key.as_str()), Unbounded))?, 0),
                None => (table.iter()?, usize::try_from(cursor).unwrap_or(usize::MAX)),
            };
            let entries = entries.skip(skip);
            let mut keys = Vec::new();
            for entry in entries.take(PAGE + 1) {
                keys.push(entry?.0.value().to_string());
            }
            let next = (keys.len() > PAGE).then(|| {
                keys.pop();
                cursor + PAGE as u64
            });
            Ok((keys, next))
        })?;
        if let (Some(next), Some(last)) = (next, keys.last()) {
            let mut marks = store.page_marks.lock().unwrap_or_else(|e| e.into_inner());
            if marks.len() >= PAGE_MARKS {
                marks.pop_front();
            }
            marks.push_back((next, last.clone(), writes));
        }
        Ok((keys, next))
    }

    /// Every key, in one pass (a file store) or page by page (Redis), as
    /// long as they take at most [`MAX_LISTED_BYTES`] as [`listed_bytes`]
    /// counts them; past that, [`KvError::TooManyKeys`] (a store within
    /// the default cap can hold 2.4 million keys: 70 MB of `String`s and
    /// their text, more with the allocator's share, built in host memory,
    /// outside the guest's cap).
    pub fn all_keys(&self) -> Result<Vec<String>, KvError> {
        let store = match &self.store {
            Backend::File(s) => s,
            Backend::Redis(_) => {
                let mut listing = Listing::default();
                let mut cursor = 0;
                loop {
                    let (page, next) = self.list_keys(cursor)?;
                    for key in page {
                        listing.keep(key)?;
                    }
                    match next {
                        Some(n) => cursor = n,
                        None => return Ok(listing.keys),
                    }
                }
            }
        };
        store.read(|table| {
            let mut listing = Listing::default();
            for entry in table.iter()? {
                listing.keep(entry?.0.value().to_string())?;
            }
            Ok(listing.keys)
        })
    }

    /// Makes every acknowledged write durable (or, for a store that failed
    /// on its disk, tries to reopen it and replay them). A Redis store's
    /// writes are the server's to keep: nothing to do.
    pub fn flush(&self) -> Result<(), KvError> {
        match &self.store {
            Backend::File(s) => s.flush(),
            Backend::Redis(_) => Ok(()),
        }
    }
}

/// Page marks a store keeps (see `Store::page_marks`): as many listings
/// under way at once find their place without walking.
const PAGE_MARKS: usize = 64;

/// What a call carries, for [`Handle::before`].
pub(crate) enum Args<'a> {
    /// One key.
    Key(&'a str),
    /// A key and its value.
    Pair(&'a str, &'a [u8]),
    /// A batch of keys.
    Keys(&'a [String]),
    /// A batch of keys and values.
    Pairs(&'a [(String, Vec<u8>)]),
}

impl Handle {
    /// This handle, once `args` pass the checks their operation will make
    /// (so the errors are its own), made here before the call waits for
    /// its permits: until it has them the host holds the guest's copies
    /// (a key or value up to the guest's memory, a batch up to Wasmtime's
    /// 128 MiB a call), and a tenant's calls wait behind its own.
    pub(crate) fn before(self, args: Args<'_>) -> Result<Handle, KvError> {
        match args {
            Args::Key(k) => check_key(k)?,
            Args::Pair(k, v) => {
                check_key(k)?;
                check_value(v)?;
            }
            Args::Keys(keys) => {
                check_batch(keys.len())?;
                keys.iter().try_for_each(|k| check_key(k))?;
            }
            Args::Pairs(pairs) => check_pairs(pairs)?,
        }
        Ok(self)
    }

    /// Every write permit of the store, as a long write would hold them.
    #[cfg(test)]
    pub(crate) fn hold_writes(&self) -> tokio::sync::OwnedSemaphorePermit {
        let permits = self.store.permits(Access::Write).clone();
        let n = u32::try_from(permits.available_permits()).unwrap();
        permits.try_acquire_many_owned(n).unwrap()
    }
}

fn check_pairs(pairs: &[(String, Vec<u8>)]) -> Result<(), KvError> {
    check_batch(pairs.len())?;
    let mut total = 0usize;
    for (k, v) in pairs {
        check_key(k)?;
        check_value(v)?;
        total += k.len() + v.len();
    }
    if total > MAX_BATCH_BYTES {
        return Err(KvError::BatchTooLarge(format!(
            "the keys and values come to {total} bytes, at most {MAX_BATCH_BYTES}"
        )));
    }
    Ok(())
}

/// A batch of `keys` keys is at most [`MAX_BATCH_KEYS`]: one write
/// transaction (or one script on a shared Redis server) per batch, so a
/// batch of millions would hold the store's writer, or the server, for
/// seconds.
fn check_batch(keys: usize) -> Result<(), KvError> {
    if keys > MAX_BATCH_KEYS {
        return Err(KvError::BatchTooLarge(format!(
            "{keys} keys in one batch, at most {MAX_BATCH_KEYS}"
        )));
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
