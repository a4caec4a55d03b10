//! SQLite capability: Spin's `fermyon:spin/sqlite@2.0.0`,
//! `spin:sqlite/sqlite@3.0.0` and `@3.1.0` (async functions) over an
//! embedded database per tenant and label, `DATA_DIR/sqlite/TENANT/LABEL.db`.
//!
//! A component opens the labels its manifest lists in `sqlite_databases`
//! (`default` among them, as on Spin, where it exists without any
//! configuration); any other label is `access-denied`. Each database is
//! capped in size (`database-full` past it), statements stop at the
//! request's deadline, and nothing a statement says reaches another file.
//! Statements run on the blocking pool, never on a serving thread. A
//! connection the guest is done with is kept for the next open of the same
//! file when nothing the guest did lasts with it (see [`Connection`]).
#![deny(missing_docs)]

mod db;
mod functions;
mod host;
mod json_patch;
mod memory;
mod temp_files;

pub use db::{Database, MAX_RESULT_BYTES, QueryResult, Value};
pub use host::add_to_linker;
pub use memory::{CONNECTION_MEMORY_BYTES, configure as count_memory};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::Semaphore;
use wasmtime::component::ResourceTable;

/// Why a statement or an open failed, in Spin's variants.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The label names no database.
    #[error("no such database")]
    NoSuchDatabase,
    /// The label is not in the component's `sqlite_databases`.
    #[error("access denied")]
    AccessDenied,
    /// The connection handle is not (or no longer) valid.
    #[error("invalid connection")]
    InvalidConnection,
    /// The database reached its size cap.
    #[error("database full")]
    DatabaseFull,
    /// SQLite ran out of memory (the connection's cap, most likely: the
    /// statement's error names it then).
    #[error("out of memory")]
    OutOfMemory,
    /// SQLite's own error for the statement (syntax, constraint, ...), or
    /// a limit the host sets.
    #[error("{0}")]
    Io(String),
    /// A host failure: its detail goes to the log, the guest gets fixed
    /// words.
    #[error("the database is unavailable")]
    Host(String),
}

impl SqlError {
    fn host(detail: String) -> Self {
        Self::Host(detail)
    }

    fn from_sqlite(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode;
        match e.sqlite_error_code() {
            Some(ErrorCode::DiskFull) => Self::DatabaseFull,
            Some(ErrorCode::OutOfMemory) => Self::OutOfMemory,
            Some(ErrorCode::OperationInterrupted) => {
                Self::Io("interrupted: the request's deadline passed".into())
            }
            _ if e.to_string().contains("pattern too complex") => Self::Io(format!(
                "{e}: LIKE and GLOB patterns are limited to {} bytes on edge",
                db::MAX_LIKE_PATTERN_BYTES
            )),
            Some(ErrorCode::AuthorizationForStatementDenied) => Self::Io(format!(
                "{e}: ATTACH, DETACH and most pragmas are not allowed on edge"
            )),
            _ => Self::Io(e.to_string()),
        }
    }

    /// What the guest sees: host detail stays in the log.
    fn for_guest(self) -> Self {
        match self {
            Self::Host(detail) => {
                tracing::warn!(error = %detail, "sqlite database unavailable");
                Self::Io("the database is unavailable; try again later".into())
            }
            other => other,
        }
    }
}

/// The databases one component of one tenant may open, with their cap.
#[derive(Clone, Default)]
pub struct Grant {
    /// Label → file.
    files: Arc<BTreeMap<String, PathBuf>>,
    max_bytes: u64,
    /// The tenant's statement slots ([`StatementSlots`]); `None`: unbounded.
    slots: Option<Arc<TenantSlots>>,
    /// The tenant's open descriptors, each connection holding a place;
    /// `None`: unbounded.
    open_files: Option<Arc<edge_open_files::OpenFiles>>,
}

/// Each tenant's slots for statements (and opens) running at once, kept
/// across reloads while their number is unchanged. A statement runs on a
/// thread of the host's blocking pool for up to its request's deadline,
/// its CPU charged to the tenant as it runs ([`edge_blocking`]): without
/// slots one tenant's instances could fill the pool (stalling every
/// tenant's disk work behind it) and take every core until the host's
/// lanes judged its share.
#[derive(Default)]
pub struct StatementSlots {
    tenants: Mutex<BTreeMap<String, Arc<TenantSlots>>>,
}

/// One tenant's statement slots, and what `/metrics` shows of them.
pub struct TenantSlots {
    tenant: String,
    size: usize,
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
    busy: AtomicU64,
    /// When a refusal was last logged (ms since the Unix epoch): once a
    /// second at most, so a flood does not fill the log.
    logged_ms: AtomicU64,
    /// Where its statements run and whom their CPU is charged to.
    work: edge_blocking::TenantWork,
}

impl TenantSlots {
    /// `size` slots of `tenant`'s.
    pub fn new(tenant: &str, size: usize) -> Self {
        Self {
            tenant: tenant.to_string(),
            size,
            slots: Arc::new(Semaphore::new(size)),
            waiting: AtomicUsize::new(0),
            busy: AtomicU64::new(0),
            logged_ms: AtomicU64::new(0),
            work: Default::default(),
        }
    }

    /// A slot, waited for until `deadline`.
    async fn take(&self, deadline: Instant) -> Result<tokio::sync::OwnedSemaphorePermit, SqlError> {
        let got = {
            // Counted while it waits, however the wait ends (a guest call
            // dropped mid-wait too).
            let _waiting = Waiting::new(&self.waiting);
            tokio::time::timeout_at(deadline.into(), self.slots.clone().acquire_owned()).await
        };
        match got {
            Ok(Ok(slot)) => Ok(slot),
            _ => {
                self.busy.fetch_add(1, Relaxed);
                let now_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                let last = self.logged_ms.load(Relaxed);
                if now_ms >= last + 1000
                    && self
                        .logged_ms
                        .compare_exchange(last, now_ms, Relaxed, Relaxed)
                        .is_ok()
                {
                    tracing::warn!(tenant = %self.tenant, sqlite_statements = self.size, "a SQLite statement found no slot before its deadline");
                }
                Err(SqlError::Io(format!(
                    "busy: the tenant's {} statements running at once (sqlite_statements) did not finish before the request's deadline",
                    self.size
                )))
            }
        }
    }
}

/// One statement waiting for a slot, counted until dropped.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Relaxed);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl StatementSlots {
    /// `tenant`'s slots, `n` of them, its statements run as `work` (the
    /// tenant's lane, which a tenant keeps for the process's life). A new
    /// number makes new slots: statements running on the old ones finish
    /// there.
    pub fn tenant(
        &self,
        tenant: &str,
        n: usize,
        work: &edge_blocking::TenantWork,
    ) -> Arc<TenantSlots> {
        let mut tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        match tenants.get(tenant) {
            Some(slots) if slots.size == n => slots.clone(),
            _ => {
                let slots = Arc::new(TenantSlots {
                    work: work.clone(),
                    ..TenantSlots::new(tenant, n)
                });
                tenants.insert(tenant.to_string(), slots.clone());
                slots
            }
        }
    }

    /// The slots' gauges and refusals in the Prometheus text format.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::from(
            "# HELP edge_sqlite_statements SQLite statements of the tenant running (state=\"running\", at most its sqlite_statements) and waiting for a slot (state=\"waiting\").\n# TYPE edge_sqlite_statements gauge\n",
        );
        for (name, t) in tenants.iter() {
            let running = t.size.saturating_sub(t.slots.available_permits());
            let waiting = t.waiting.load(Relaxed);
            let _ = writeln!(
                out,
                "edge_sqlite_statements{{tenant=\"{name}\",state=\"running\"}} {running}"
            );
            let _ = writeln!(
                out,
                "edge_sqlite_statements{{tenant=\"{name}\",state=\"waiting\"}} {waiting}"
            );
        }
        out.push_str("# HELP edge_sqlite_busy_total SQLite statements that found no slot (sqlite_statements) before their request's deadline.\n# TYPE edge_sqlite_busy_total counter\n");
        for (name, t) in tenants.iter() {
            let _ = writeln!(
                out,
                "edge_sqlite_busy_total{{tenant=\"{name}\"}} {}",
                t.busy.load(Relaxed)
            );
        }
        out
    }
}

impl Grant {
    /// `labels` of `tenant`, in `root` (`DATA_DIR/sqlite`), each capped at
    /// `max_bytes`. Labels are checked by edge-config (lower-case letters,
    /// digits, `_` and `-`), so they are safe file names.
    /// A label in `placed` (Spin's runtime configuration) lives at the
    /// file given there instead.
    pub fn new(
        root: &std::path::Path,
        tenant: &str,
        labels: &[String],
        placed: &BTreeMap<String, PathBuf>,
        max_bytes: u64,
    ) -> Self {
        let dir = root.join(tenant);
        Self {
            files: Arc::new(
                labels
                    .iter()
                    .map(|l| {
                        let file = placed
                            .get(l)
                            .cloned()
                            .unwrap_or_else(|| dir.join(format!("{l}.db")));
                        (l.clone(), file)
                    })
                    .collect(),
            ),
            max_bytes,
            slots: None,
            open_files: None,
        }
    }

    /// The same, each connection holding a place among `open_files` (the
    /// tenant's `max_open_files`).
    pub fn with_open_files(mut self, open_files: Arc<edge_open_files::OpenFiles>) -> Self {
        self.open_files = Some(open_files);
        self
    }

    /// The same, its statements taking `slots` (the tenant's, from
    /// [`StatementSlots`]).
    pub fn with_slots(mut self, slots: Arc<TenantSlots>) -> Self {
        self.slots = Some(slots);
        self
    }

    /// Whether both grant the same files with the same cap and slots.
    pub fn same(&self, other: &Grant) -> bool {
        self.files == other.files
            && self.max_bytes == other.max_bytes
            && self.slots.as_ref().map(Arc::as_ptr) == other.slots.as_ref().map(Arc::as_ptr)
            && self.open_files.as_ref().map(Arc::as_ptr)
                == other.open_files.as_ref().map(Arc::as_ptr)
    }

    /// Whether anything is granted.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// An open connection: a guest's handle. When the guest drops it (or its
/// instance ends), the database goes back to the pool if it can serve the
/// next guest as a new connection would ([`Database::reusable`]), into
/// an idle pool per file.
pub struct Connection {
    db: Option<Arc<Mutex<Database>>>,
    /// The database's counters, read without waiting for a statement.
    counters: Arc<db::Counters>,
    key: (PathBuf, u64),
    /// Its place among the tenant's open descriptors.
    _place: Option<edge_open_files::OpenFile>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Not while a statement still runs (its task holds the other
        // reference): the database then closes when it is done.
        if let Some(Ok(db)) = self.db.take().map(Arc::try_unwrap) {
            let db = db.into_inner().unwrap_or_else(|e| e.into_inner());
            let key = std::mem::take(&mut self.key);
            // Into the pool here if its lock is free (it is held only
            // briefly, but maybe by a thread at SCHED_IDLE that waits for a
            // core), else from the blocking pool; closed (for a file's last
            // connection: a WAL checkpoint and its fsync) off the serving
            // thread either way.
            let (closing, later) = match db.clean() {
                false => (vec![db], None),
                true => match POOL.try_put(key, db) {
                    Ok(closing) => (closing, None),
                    Err(busy) => (Vec::new(), Some(busy)),
                },
            };
            if closing.is_empty() && later.is_none() {
                return;
            }
            let finish = move || {
                drop(closing);
                if let Some((key, db)) = later {
                    drop(POOL.put(key, db));
                }
            };
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn_blocking(finish)),
                Err(_) => finish(),
            }
        }
    }
}

/// Idle connections, per file and cap, reused by the next open of the
/// same file: a request then finds the schema parsed and the settings
/// made, instead of opening the file, reading its schema and setting
/// WAL, the cap and the limits again. At most [`POOL_IDLE`] per file,
/// none older than [`POOL_IDLE_FOR`].
static POOL: Pool = Pool {
    idle: Mutex::new(None),
};

/// Idle connections kept per file.
const POOL_IDLE: usize = 16;

/// Idle connections kept in all. Each holds three descriptors (the
/// database, its log and its shared memory) that no tenant's
/// `max_open_files` counts once it is idle: without this bound, tenants
/// closing connections to many databases at once could leave thousands
/// of the process's descriptors idle for a minute.
const POOL_IDLE_TOTAL: usize = 256;

/// How long an idle connection is kept.
const POOL_IDLE_FOR: std::time::Duration = std::time::Duration::from_secs(60);

type Idle = BTreeMap<(PathBuf, u64), Vec<(Instant, Database)>>;

struct Pool {
    idle: Mutex<Option<Idle>>,
}

impl Pool {
    /// The newest idle connection to `key`'s file, if one is young enough
    /// (whether its file is still the same is for the caller to check, off
    /// the serving thread), and the ones too old to keep, for the caller to
    /// close: nothing is closed under the lock.
    /// Nothing if another thread holds the lock: a new connection is
    /// opened rather than wait.
    fn take(&self, key: &(PathBuf, u64)) -> (Option<Database>, Vec<Database>) {
        let mut old = Vec::new();
        let mut idle = match self.idle.try_lock() {
            Ok(idle) => idle,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return (None, old),
        };
        let Some(list) = idle.as_mut().and_then(|idle| idle.get_mut(key)) else {
            return (None, old);
        };
        let now = Instant::now();
        while let Some((since, db)) = list.pop() {
            if now.duration_since(since) < POOL_IDLE_FOR {
                return (Some(db), old);
            }
            old.push(db);
        }
        (None, old)
    }

    /// Keeps `db` idle for `key`'s file; answers the connections to close
    /// (too old, of any file; `db` itself if its file has enough; the
    /// longest idle of all if the pool has [`POOL_IDLE_TOTAL`]).
    fn put(&self, key: (PathBuf, u64), db: Database) -> Vec<Database> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        Self::put_locked(idle, key, db)
    }

    /// [`Pool::put`] if the lock is free, else `key` and `db` back.
    #[allow(clippy::result_large_err)]
    fn try_put(
        &self,
        key: (PathBuf, u64),
        db: Database,
    ) -> Result<Vec<Database>, ((PathBuf, u64), Database)> {
        match self.idle.try_lock() {
            Ok(idle) => Ok(Self::put_locked(idle, key, db)),
            Err(std::sync::TryLockError::Poisoned(e)) => {
                Ok(Self::put_locked(e.into_inner(), key, db))
            }
            Err(std::sync::TryLockError::WouldBlock) => Err((key, db)),
        }
    }

    fn put_locked(
        mut idle: std::sync::MutexGuard<'_, Option<Idle>>,
        key: (PathBuf, u64),
        db: Database,
    ) -> Vec<Database> {
        let now = Instant::now();
        let mut closing = Vec::new();
        let idle = idle.get_or_insert_with(BTreeMap::new);
        for list in idle.values_mut() {
            let (keep, old): (Vec<_>, Vec<_>) = std::mem::take(list)
                .into_iter()
                .partition(|(since, _)| now.duration_since(*since) < POOL_IDLE_FOR);
            *list = keep;
            closing.extend(old.into_iter().map(|(_, db)| db));
        }
        idle.retain(|_, list| !list.is_empty());
        if idle.get(&key).is_some_and(|list| list.len() >= POOL_IDLE) {
            closing.push(db);
            return closing;
        }
        if idle.values().map(Vec::len).sum::<usize>() >= POOL_IDLE_TOTAL {
            // Each list is in the order it was filled: its first is its
            // longest idle.
            let oldest = idle
                .iter()
                .min_by_key(|(_, list)| list[0].0)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest
                && let Some(list) = idle.get_mut(&k)
            {
                closing.push(list.remove(0).1);
                if list.is_empty() {
                    idle.remove(&k);
                }
            }
        }
        idle.entry(key).or_default().push((now, db));
        closing
    }
}

/// What the linked functions see of the store data.
pub struct Sqlite<'a> {
    /// The component's grant.
    pub grant: &'a Grant,
    /// The instance's resource table.
    pub table: &'a mut ResourceTable,
    /// When the current request must be done.
    pub deadline: Instant,
    /// Host memory the instance's unread result streams hold.
    pub unread: &'a edge_unread::UnreadBudget,
}

/// Store data that carries a component's SQLite [`Grant`].
pub trait SqliteView {
    /// The grant, table and deadline of the instance in this store.
    fn sqlite(&mut self) -> Sqlite<'_>;
}

/// Runs what `prepare` makes, once it has one of `slots` if given
/// (waited for until `deadline`), on the blocking pool (a statement may be
/// slow or wait for a writer; the serving thread goes on meanwhile) as
/// the tenant's work (its CPU charged to it, in its lane). `prepare` runs
/// here, with the slot held.
async fn blocking<R: Send + 'static, F>(
    slots: Option<Arc<TenantSlots>>,
    deadline: Instant,
    prepare: impl FnOnce() -> F,
) -> Result<R, SqlError>
where
    F: FnOnce() -> Result<R, SqlError> + Send + 'static,
{
    let (slot, work) = match slots {
        Some(slots) => (Some(slots.take(deadline).await?), slots.work.clone()),
        None => (None, Default::default()),
    };
    let f = prepare();
    // The slot goes with the work: a guest whose deadline drops this
    // future leaves the statement running (until its own interrupt at
    // the deadline), and its slot held, on the blocking thread.
    work.spawn(move || {
        let _slot = slot;
        f()
    })
    .await
    .unwrap_or_else(|e| Err(SqlError::host(format!("sqlite task failed: {e}"))))
    .map_err(SqlError::for_guest)
}

impl Sqlite<'_> {
    /// Where `label` lives, if granted.
    fn file(&self, label: &str) -> Result<(PathBuf, u64), SqlError> {
        self.grant
            .files
            .get(label)
            .map(|p| (p.clone(), self.grant.max_bytes))
            .ok_or(SqlError::AccessDenied)
    }

    fn connection(
        &self,
        conn: &wasmtime::component::Resource<Connection>,
    ) -> Result<Arc<Mutex<Database>>, SqlError> {
        self.table
            .get(conn)
            .ok()
            .and_then(|c| c.db.clone())
            .ok_or(SqlError::InvalidConnection)
    }
}

/// Opens `file` on the blocking pool: an idle connection to it if one is
/// reusable, else a new one.
async fn open(
    file: Result<(PathBuf, u64), SqlError>,
    open_files: Option<Arc<edge_open_files::OpenFiles>>,
    slots: Option<Arc<TenantSlots>>,
    deadline: Instant,
) -> Result<Connection, SqlError> {
    let key = file?;
    // A place among the tenant's open descriptors, if it has one left.
    let place = match open_files {
        Some(files) => Some(files.open().ok_or_else(|| {
            SqlError::Io("too many open files: the tenant has max_open_files open".into())
        })?),
        None => None,
    };
    let k = key.clone();
    let db = blocking(slots, deadline, || {
        // Taken here, not on the blocking thread: a tenant's task there
        // may run at SCHED_IDLE (its lane), and must not hold the pool's
        // lock that serving threads take when a connection ends. Once
        // the slot is held, so that all of it goes to the blocking thread.
        let (idle, old) = POOL.take(&k);
        move || {
            drop(old);
            match idle {
                Some(mut db) if db.reusable(&k.0) => {
                    db.reset();
                    Ok(db)
                }
                _ => Database::open(&k.0, k.1),
            }
        }
    })
    .await?;
    Ok(Connection {
        counters: db.counters(),
        db: Some(Arc::new(Mutex::new(db))),
        key,
        _place: place,
    })
}

/// Runs a statement on `db` on the blocking pool: its result and the
/// connection's rowid and change count after it.
async fn execute(
    db: Result<Arc<Mutex<Database>>, SqlError>,
    sql: String,
    params: Vec<Value>,
    deadline: Instant,
    slots: Option<Arc<TenantSlots>>,
    unread: &edge_unread::UnreadBudget,
) -> Result<QueryResult, SqlError> {
    let db = db?;
    let bytes = sql.len() + params.iter().map(Value::held_bytes).sum::<usize>();
    let _held = unread.hold_call(bytes).map_err(SqlError::Io)?;
    blocking(slots, deadline, || {
        move || {
            let mut db = db.lock().unwrap_or_else(|e| e.into_inner());
            db.execute(&sql, &params, deadline)
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn file(name: &str) -> (PathBuf, u64) {
        let dir =
            std::env::temp_dir().join(format!("edge-sqlite-pool-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        (dir.join("t.db"), 1 << 20)
    }

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    async fn run(c: &Connection, sql: &str) -> Result<QueryResult, SqlError> {
        execute(
            c.db.clone().ok_or(SqlError::InvalidConnection),
            sql.into(),
            vec![],
            later(),
            None,
            &Default::default(),
        )
        .await
    }

    fn counters(c: &Connection) -> (i64, u64) {
        c.counters.get()
    }

    fn same(a: &Connection, b: &Connection) -> bool {
        let (a, b) = (
            a.db.as_ref().unwrap().lock().unwrap(),
            b.db.as_ref().unwrap().lock().unwrap(),
        );
        std::ptr::eq(a.handle(), b.handle())
    }

    #[test]
    fn the_idle_pool_keeps_at_most_its_total_closing_the_longest_idle() {
        let pool = Pool {
            idle: Mutex::new(None),
        };
        let dir = file("pool-total").0.parent().unwrap().to_path_buf();
        std::fs::create_dir_all(&dir).unwrap();
        let key = |i: usize| (dir.join(format!("{i}.db")), 1 << 20);
        let mut closed = 0;
        for i in 0..POOL_IDLE_TOTAL + 4 {
            let k = key(i);
            let db = Database::open(&k.0, k.1).unwrap();
            closed += pool.put(k, db).len();
        }
        let idle = pool.idle.lock().unwrap();
        let idle = idle.as_ref().unwrap();
        assert_eq!(closed, 4);
        assert_eq!(idle.values().map(Vec::len).sum::<usize>(), POOL_IDLE_TOTAL);
        // The first four went, the last stayed.
        assert!((0..4).all(|i| !idle.contains_key(&key(i))));
        assert!(idle.contains_key(&key(POOL_IDLE_TOTAL + 3)));
        drop(std::fs::remove_dir_all(&dir));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_connection_holds_a_place_among_the_tenants_open_files() {
        let key = file("places");
        let files = Arc::new(edge_open_files::OpenFiles::new(1));
        let places = || Some(files.clone());
        let a = open(Ok(key.clone()), places(), None, later())
            .await
            .unwrap();
        assert_eq!(files.held(), 1);
        let refused = open(Ok(key.clone()), places(), None, later()).await;
        assert!(
            matches!(&refused, Err(SqlError::Io(e)) if e.contains("max_open_files")),
            "{:?}",
            refused.err()
        );
        // A database it may not open takes no place (and counts no refusal).
        let denied = open(Err(SqlError::AccessDenied), places(), None, later()).await;
        assert!(matches!(denied, Err(SqlError::AccessDenied)));
        assert_eq!(files.refused(), 1);
        drop(a);
        assert_eq!(files.held(), 0);
        let b = open(Ok(key), places(), None, later()).await;
        assert!(b.is_ok());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_clean_connection_is_reused_as_a_new_one() {
        let key = file("reuse");
        let a = open(Ok(key.clone()), None, None, later()).await.unwrap();
        run(&a, "CREATE TABLE t (v)").await.unwrap();
        run(&a, "INSERT INTO t VALUES (1)").await.unwrap();
        assert_eq!(counters(&a), (1, 1));
        let handle = a.db.as_ref().unwrap().lock().unwrap().handle();
        drop(a);
        let b = open(Ok(key.clone()), None, None, later()).await.unwrap();
        assert!(std::ptr::eq(
            b.db.as_ref().unwrap().lock().unwrap().handle(),
            handle
        ));
        // A new connection's counters, whatever the last guest did.
        assert_eq!(counters(&b), (0, 0));
        assert_eq!(
            run(&b, "SELECT v FROM t").await.unwrap().rows,
            [[Value::Integer(1)]]
        );
        // Two at once are two connections.
        let c = open(Ok(key.clone()), None, None, later()).await.unwrap();
        assert!(!same(&b, &c));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn counters_are_read_while_a_statement_holds_the_database() {
        let a = open(Ok(file("busy")), None, None, later()).await.unwrap();
        run(&a, "CREATE TABLE t (v)").await.unwrap();
        run(&a, "INSERT INTO t VALUES (1), (2)").await.unwrap();
        // As a statement running on the blocking pool holds it.
        let db = a.db.clone().unwrap();
        let held = db.lock().unwrap();
        let sq = crate::Sqlite {
            grant: &Grant::default(),
            table: &mut wasmtime::component::ResourceTable::new(),
            deadline: later(),
            unread: &Default::default(),
        };
        let conn = sq.table.push(a).unwrap();
        assert_eq!(sq.counters(&conn), (2, 2));
        drop(held);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn connection_state_is_never_handed_on() {
        for (name, sql, check, answer) in [
            (
                "pragma",
                // (On by default in the SQLite linked.)
                "PRAGMA foreign_keys = OFF",
                "PRAGMA foreign_keys",
                Some(Value::Integer(1)),
            ),
            (
                "temp",
                "CREATE TEMP TABLE x (v)",
                "SELECT * FROM temp.x",
                None,
            ),
            (
                "temp2",
                "CREATE TABLE temp.y (v)",
                "SELECT * FROM temp.y",
                None,
            ),
            (
                "view",
                "CREATE TEMP VIEW z AS SELECT 1",
                "SELECT * FROM z",
                None,
            ),
            ("tx", "BEGIN", "BEGIN", Some(Value::Null)),
        ] {
            let key = file(name);
            let a = open(Ok(key.clone()), None, None, later()).await.unwrap();
            run(&a, sql).await.unwrap();
            drop(a);
            let b = open(Ok(key.clone()), None, None, later()).await.unwrap();
            let r = run(&b, check).await;
            match answer {
                None => assert!(r.is_err(), "{sql}: {r:?}"),
                Some(Value::Null) => assert!(r.is_ok(), "{sql}: {r:?}"),
                Some(v) => assert_eq!(r.unwrap().rows, [[v]], "{sql}"),
            }
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_replaced_file_is_opened_anew() {
        let key = file("replaced");
        let a = open(Ok(key.clone()), None, None, later()).await.unwrap();
        run(&a, "CREATE TABLE old (v)").await.unwrap();
        drop(a);
        std::fs::remove_dir_all(key.0.parent().unwrap()).unwrap();
        let b = open(Ok(key.clone()), None, None, later()).await.unwrap();
        assert!(run(&b, "SELECT * FROM old").await.is_err());
        run(&b, "CREATE TABLE old (v)").await.unwrap();
    }

    #[tokio::test]
    async fn statements_wait_for_a_slot_until_their_deadline() {
        let key = file("slots");
        let slots = Arc::new(TenantSlots::new("t", 1));
        let c = open(Ok(key), None, Some(slots.clone()), later())
            .await
            .unwrap();
        let db = || c.db.clone().ok_or(SqlError::InvalidConnection);
        // The tenant's one slot held (by a statement of another instance).
        let held = slots.slots.clone().try_acquire_owned().unwrap();
        let soon = Instant::now() + Duration::from_millis(100);
        let none = edge_unread::UnreadBudget::default();
        match execute(
            db(),
            "SELECT 1".into(),
            vec![],
            soon,
            Some(slots.clone()),
            &none,
        )
        .await
        {
            Err(SqlError::Io(m)) => assert!(
                m.starts_with("busy: ") && m.contains("sqlite_statements"),
                "{m}"
            ),
            other => panic!("{:?}", other.map(|r| r.rows.len())),
        }
        // Freed while one waits: it runs. Its values are held in the
        // tenant's budget while it waits.
        let tenant = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let budget = edge_unread::UnreadBudget::for_tenant(tenant.clone());
        let waiting = execute(
            db(),
            "SELECT length(?)".into(),
            vec![Value::Blob(vec![0; 1 << 20])],
            later(),
            Some(slots.clone()),
            &budget,
        );
        let release = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(tenant.load(Relaxed) > 1 << 20, "held while waiting");
            drop(held);
        };
        let (r, ()) = tokio::join!(waiting, release);
        assert_eq!(r.unwrap().rows.len(), 1);
        assert_eq!(tenant.load(Relaxed), 0, "given back");
        // A tenant whose calls hold its budget is refused at once.
        tenant.store(edge_unread::MAX_TENANT_UNREAD_BYTES - 100, Relaxed);
        match execute(
            db(),
            "SELECT 1".into(),
            vec![Value::Text("x".repeat(200))],
            later(),
            Some(slots.clone()),
            &budget,
        )
        .await
        {
            Err(SqlError::Io(m)) => assert!(m.contains("this tenant's calls"), "{m}"),
            other => panic!("{:?}", other.map(|r| r.rows.len())),
        }
        assert_eq!(slots.slots.available_permits(), 1, "the slot came back");
        assert_eq!(slots.busy.load(Relaxed), 1);
    }
}
