//! The registry: opens each store file once per process and flushes them.

use crate::error::{ErrorCounts, KvError};
use crate::handle::{Backend, Handle};
use crate::redis_store::RedisStore;
use crate::store::{CACHE_BYTES, FLUSH_INTERVAL, Opener, Store};
use redb::Database;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Open stores by (tenant, label).
/// Open file stores by tenant, label and file (`None`: in memory): a
/// config that moves a store to another file gets that file, and one that
/// moves it back gets the store still open there, if any.
type OpenStores = Mutex<HashMap<(String, String, Option<PathBuf>), Weak<Store>>>;

/// Open Redis stores by (tenant, label, server URL).
type OpenRedis = Mutex<HashMap<(String, String, String), Weak<RedisStore>>>;

/// Where a store lives when Spin's runtime configuration places it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// A file of this host's (`type = "spin"`, `path`).
    File(PathBuf),
    /// A Redis server (`type = "redis"`, `url`); each tenant's store is its
    /// own hash there.
    Redis(String),
}

/// Opens each store file once per process and keeps them flushed.
///
/// A store stays open while any loaded config grants it; the last reference
/// going away flushes and closes it.
pub struct Registry {
    /// `None`: stores live in memory (see [`Registry::in_memory`]).
    dir: Option<PathBuf>,
    open: Arc<OpenStores>,
    redis: OpenRedis,
    errors: ErrorCounts,
    /// Each tenant's [`crate::handle::TENANT_PERMITS`].
    tenants: Mutex<HashMap<String, Arc<tokio::sync::Semaphore>>>,
}

impl Registry {
    /// A registry keeping its files under `dir` (`DIR/TENANT/LABEL.redb`),
    /// with a background thread that flushes writes every
    /// [`FLUSH_INTERVAL`] (and reopens stores that failed on their disk).
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
            redis: OpenRedis::default(),
            errors: ErrorCounts::global().clone(),
            tenants: Mutex::default(),
        }
    }

    /// A registry whose stores live in memory and vanish with it: for
    /// `edge check`, which must not take the file locks of a running server.
    pub fn in_memory() -> Self {
        Self {
            dir: None,
            open: Arc::default(),
            redis: OpenRedis::default(),
            errors: ErrorCounts::global().clone(),
            tenants: Mutex::default(),
        }
    }

    /// The permits `tenant`'s stores share.
    fn tenant_permits(&self, tenant: &str) -> Arc<tokio::sync::Semaphore> {
        let mut tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        tenants
            .entry(tenant.to_string())
            .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(crate::handle::TENANT_PERMITS)))
            .clone()
    }

    /// The storage error counts of this registry's stores (the process's).
    pub fn errors(&self) -> ErrorCounts {
        self.errors.clone()
    }

    /// The store of `tenant` named `label`, opened (and created) if needed,
    /// as a handle that holds it to `cap` bytes.
    ///
    /// The cap belongs to the handle, not to the store: a config that is
    /// built but never swapped in (a refused reload) changes nothing for
    /// the handles of the config that serves.
    pub fn open(&self, tenant: &str, label: &str, cap: u64) -> Result<Handle, KvError> {
        self.open_file(tenant, label, cap, None)
    }

    /// Like [`Registry::open`], with the store where Spin's runtime
    /// configuration placed it rather than in the tenant's directory.
    pub fn open_at(
        &self,
        tenant: &str,
        label: &str,
        cap: u64,
        placement: Option<&Placement>,
    ) -> Result<Handle, KvError> {
        match placement {
            Some(Placement::Redis(url)) => self.open_redis(tenant, label, cap, url),
            Some(Placement::File(f)) => self.open_file(tenant, label, cap, Some(f)),
            None => self.open_file(tenant, label, cap, None),
        }
    }

    fn open_redis(
        &self,
        tenant: &str,
        label: &str,
        cap: u64,
        url: &str,
    ) -> Result<Handle, KvError> {
        let mut open = self.redis.lock().unwrap_or_else(|e| e.into_inner());
        let key = (tenant.to_string(), label.to_string(), url.to_string());
        if let Some(store) = open.get(&key).and_then(Weak::upgrade) {
            return Ok(Handle {
                store: Backend::Redis(store),
                cap,
                tenant: self.tenant_permits(tenant),
                work: Default::default(),
            });
        }
        let store = Arc::new(RedisStore::new(
            tenant,
            label,
            url,
            self.errors.tenant(tenant),
        )?);
        open.retain(|_, w| w.strong_count() > 0);
        open.insert(key, Arc::downgrade(&store));
        Ok(Handle {
            store: Backend::Redis(store),
            cap,
            tenant: self.tenant_permits(tenant),
            work: Default::default(),
        })
    }

    fn open_file(
        &self,
        tenant: &str,
        label: &str,
        cap: u64,
        file: Option<&Path>,
    ) -> Result<Handle, KvError> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let path = self.dir.as_ref().map(|dir| match file {
            Some(f) => f.to_path_buf(),
            None => dir.join(tenant).join(format!("{label}.redb")),
        });
        let key = (tenant.to_string(), label.to_string(), path.clone());
        if let Some(store) = open.get(&key).and_then(Weak::upgrade) {
            return Ok(Handle {
                store: Backend::File(store),
                cap,
                tenant: self.tenant_permits(tenant),
                work: Default::default(),
            });
        }
        let errors = self.errors.tenant(tenant);
        let store = match path {
            Some(path) => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| {
                        KvError::Storage(format!("creating {}: {e}", dir.display()))
                    })?;
                }
                let opener = {
                    let path = path.clone();
                    Box::new(move || open_file(&path)) as Opener
                };
                Store::new(tenant, label, Some(path), opener, errors)?
            }
            None => {
                let opener = Box::new(|| {
                    Database::builder().create_with_backend(redb::backends::InMemoryBackend::new())
                }) as Opener;
                Store::new(tenant, label, None, opener, errors)?
            }
        };
        let store = Arc::new(store);
        open.insert(key, Arc::downgrade(&store));
        Ok(Handle {
            store: Backend::File(store),
            cap,
            tenant: self.tenant_permits(tenant),
            work: Default::default(),
        })
    }
}

fn open_file(path: &Path) -> Result<Database, redb::DatabaseError> {
    let mut tries = 0;
    loop {
        match Database::builder().set_cache_size(CACHE_BYTES).create(path) {
            // The previous holder of this file (a config being replaced, or
            // the database a failed store just dropped) may still be closing it.
            Err(redb::DatabaseError::DatabaseAlreadyOpen) if tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

/// Ticks a store a write holds may be passed over before the flush
/// thread waits for it: a write waiting for a core (a tenant's in the
/// background lane, at `SCHED_IDLE`) delays no other store's flush, and
/// its own writes are durable within this many seconds still.
const BUSY_TICKS: u32 = 5;

fn flush_loop(open: Weak<OpenStores>) {
    // Ticks each busy store was passed over, by its address.
    let mut passed: HashMap<usize, u32> = HashMap::new();
    loop {
        std::thread::sleep(FLUSH_INTERVAL);
        let Some(open) = open.upgrade() else { return };
        let stores: Vec<Arc<Store>> = {
            let mut map = open.lock().unwrap_or_else(|e| e.into_inner());
            map.retain(|_, w| w.strong_count() > 0);
            map.values().filter_map(Weak::upgrade).collect()
        };
        // Failures are logged (with tenant and store) where they happen;
        // the store keeps its pending writes and the next tick retries.
        let mut overdue = Vec::new();
        let mut still = HashMap::new();
        for store in stores {
            let at = Arc::as_ptr(&store) as usize;
            if store.try_flush().is_some() {
                continue;
            }
            let ticks = passed.get(&at).copied().unwrap_or(0) + 1;
            if ticks >= BUSY_TICKS {
                overdue.push(store);
            } else {
                still.insert(at, ticks);
            }
        }
        passed = still;
        for store in overdue {
            let _ = store.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::{Access, TENANT_PERMITS};
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tenants_stores_together_run_at_most_its_permits() {
        let registry = Registry::in_memory();
        let (running, release) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        // One operation more than the tenant's permits, each on a store of
        // its own (the stores' own permits would let every one run), each
        // blocking until released.
        let mut calls = Vec::new();
        for i in 0..=TENANT_PERMITS {
            let handle = registry.open("a", &format!("s{i}"), 1 << 20).unwrap();
            let (running, release) = (running.clone(), release.clone());
            calls.push(tokio::spawn(async move {
                handle
                    .blocking(Access::Read, move |_| {
                        running.fetch_add(1, SeqCst);
                        while release.load(SeqCst) == 0 {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        Ok(())
                    })
                    .await
            }));
        }
        for _ in 0..400 {
            if running.load(SeqCst) == TENANT_PERMITS {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(running.load(SeqCst), TENANT_PERMITS, "one waits");
        // Another tenant's operation runs meanwhile.
        let other = registry.open("b", "s0", 1 << 20).unwrap();
        other.blocking(Access::Read, |_| Ok(())).await.unwrap();
        release.store(1, SeqCst);
        for call in calls {
            call.await.unwrap().unwrap();
        }
        assert_eq!(running.load(SeqCst), TENANT_PERMITS + 1);
    }
}
