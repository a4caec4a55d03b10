//! One tenant's database file and what a guest may do with it: statements
//! run under the request's deadline, inside a size cap, without reaching
//! any other file.

use crate::SqlError;
use crate::functions;
use crate::memory::{self, Memory};
use crate::temp_files::{self, TempBudget};
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::types::{Value as SqlValue, ValueRef};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// A value crossing the boundary, as Spin's interfaces type it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A 64-bit integer.
    Integer(i64),
    /// A double.
    Real(f64),
    /// UTF-8 text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
    /// SQL NULL.
    Null,
}

impl Value {
    /// Host memory the value takes: itself and what it owns.
    pub fn held_bytes(&self) -> usize {
        std::mem::size_of::<Value>()
            + match self {
                Value::Text(s) => s.len(),
                Value::Blob(b) => b.len(),
                _ => 0,
            }
    }
}

/// What a statement gave back.
#[derive(Debug, Default, PartialEq)]
pub struct QueryResult {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows, each with one value per column.
    pub rows: Vec<Vec<Value>>,
    /// Roughly what the rows and names take in host memory.
    pub bytes: usize,
}

/// Host memory one statement's result may take (values and names): a
/// guest selecting a huge table gets an error, not the host's memory.
pub const MAX_RESULT_BYTES: usize = 16 << 20;

/// Longest statement text.
const MAX_SQL_BYTES: i32 = 1 << 20;

/// Largest string or blob a statement may make.
const MAX_VALUE_BYTES: i32 = 16 << 20;

/// Longest `LIKE` or `GLOB` pattern. SQLite matches one in O(|value| ·
/// |pattern|) within one step, where the deadline is not looked at (the
/// keeper still moves the thread with its tenant's lane): at its default
/// (50,000 bytes) a `LIKE` of a 16 MiB value runs for minutes; at 200
/// bytes 3 s, a `GLOB` of two character classes 5 s, on this project's
/// 2-core machine (D1 allows 50: under a second).
pub(crate) const MAX_LIKE_PATTERN_BYTES: i32 = 200;

/// Pragmas a guest may run: reading the schema and settings of its own
/// database and per-connection behaviour. Others could raise the size cap
/// (`max_page_count`, `page_size`), take host memory (`cache_size`,
/// `mmap_size`), or touch the process (`soft_heap_limit`, `threads`).
const PRAGMAS: &[&str] = &[
    "application_id",
    "case_sensitive_like",
    "collation_list",
    "data_version",
    "defer_foreign_keys",
    "foreign_key_check",
    "foreign_key_list",
    "foreign_keys",
    "freelist_count",
    "function_list",
    "index_info",
    "index_list",
    "index_xinfo",
    "integrity_check",
    "optimize",
    "page_count",
    "quick_check",
    "recursive_triggers",
    "schema_version",
    "table_info",
    "table_list",
    "table_xinfo",
    "user_version",
];

/// Address space a connection may map its file into (reads from the map
/// skip a copy and a system call per page; the pages are the OS's, shared
/// by every connection to the file).
const MMAP_BYTES: u64 = 1 << 30;

/// An open database.
pub struct Database {
    conn: rusqlite::Connection,
    /// What SQLite's memory for it may hold, and holds now.
    memory: Memory,
    /// What its temporary files (sorts, `DISTINCT` tables, the TEMP
    /// database...) may hold, and hold now.
    temp: Arc<TempBudget>,
    /// Set (by the authorizer) when a statement changed something that
    /// lasts with the connection rather than the file: a pragma's value or
    /// a TEMP object. Such a connection is not reused.
    tainted: Arc<AtomicBool>,
    /// The last statement's insert rowid and change count (0 before the
    /// first statement for a guest, as a new connection's), readable
    /// while another statement runs.
    counters: Arc<Counters>,
    /// The file's identity when it was opened (device, inode).
    identity: Option<(u64, u64)>,
    /// Its write-ahead log, and the most it may hold before writes wait
    /// for a checkpoint ([`Database::check_log`]).
    wal: PathBuf,
    max_log_bytes: u64,
    page_bytes: u64,
}

impl Database {
    /// Opens (creating) the database at `path`, capped at `max_bytes`.
    pub fn open(path: &Path, max_bytes: u64) -> Result<Self, SqlError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| SqlError::host(format!("{}: {e}", dir.display())))?;
        }
        // The host configures SQLite's memory before its first use (main);
        // this crate's tests have no main.
        #[cfg(test)]
        memory::configure();
        temp_files::register().map_err(|rc| {
            SqlError::host(format!("registering the temporary-file VFS: code {rc}"))
        })?;
        // Its temporary files hold at most as much as the database may.
        let temp = TempBudget::new(max_bytes);
        let _charging = temp.charge_here();
        let memory = Memory::new(memory::CONNECTION_MEMORY_BYTES);
        let _memory = memory.charge_here();
        let conn = rusqlite::Connection::open_with_flags_and_vfs(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
                | rusqlite::OpenFlags::SQLITE_OPEN_CREATE
                | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            temp_files::VFS_NAME,
        )
        .map_err(|e| SqlError::host(format!("{}: {e}", path.display())))?;
        // WAL: readers do not wait for a writer; another instance's write
        // waits a little, then fails rather than holding a thread.
        let pages: u64 = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .map_err(|e| SqlError::host(e.to_string()))?;
        // The TEMP database (a file of its own, unlinked, kept as long as
        // the connection: a session's across requests) gets the same cap:
        // it counted against nothing, so TEMP tables could fill the disk.
        let max_pages = (max_bytes / pages.max(512)).max(1);
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 1000; PRAGMA max_page_count = {max_pages}; PRAGMA temp.max_page_count = {max_pages}; PRAGMA journal_size_limit = {max_bytes};"
        ))
        .map_err(|e| SqlError::host(e.to_string()))?;
        // No other file: ATTACH (and VACUUM INTO, which attaches) is
        // refused, and no extension can be loaded (rusqlite's default).
        conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0);
        conn.set_limit(Limit::SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_BYTES);
        conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES);
        conn.set_limit(
            Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH,
            MAX_LIKE_PATTERN_BYTES,
        );
        // Reads through a map of the file (set before the guest's
        // authorizer, which refuses the pragma).
        conn.execute_batch(&format!("PRAGMA mmap_size = {}", MMAP_BYTES.min(max_bytes)))
            .map_err(|e| SqlError::host(e.to_string()))?;
        functions::install(&conn, MAX_VALUE_BYTES as usize)
            .map_err(|e| SqlError::host(e.to_string()))?;
        let tainted = Arc::new(AtomicBool::new(false));
        let flag = tainted.clone();
        conn.authorizer(Some(move |ctx: AuthContext<'_>| {
            let answer = authorize(&ctx);
            if answer == Authorization::Allow && lasts_with_connection(&ctx) {
                flag.store(true, Ordering::Relaxed);
            }
            answer
        }));
        Ok(Self {
            conn,
            memory,
            temp,
            tainted,
            counters: Arc::default(),
            identity: identity(path),
            wal: {
                let mut wal = path.as_os_str().to_owned();
                wal.push("-wal");
                PathBuf::from(wal)
            },
            max_log_bytes: max_bytes,
            page_bytes: pages,
        })
    }

    /// Whether the connection can serve another guest as a new one would:
    /// no transaction left open, no pragma set, no TEMP object made, and
    /// its file still the one at `path`.
    pub fn reusable(&self, path: &Path) -> bool {
        self.clean() && self.identity.is_some() && identity(path) == self.identity
    }

    /// No transaction left open, no pragma set, no TEMP object made.
    pub fn clean(&self) -> bool {
        self.conn.is_autocommit() && !self.tainted.load(Ordering::Relaxed)
    }

    /// The SQLite connection's address (tests tell connections apart by it).
    #[cfg(test)]
    pub(crate) fn handle(&self) -> *const () {
        unsafe { self.conn.handle() as *const () }
    }

    /// Marks the connection as new for its next guest.
    pub fn reset(&mut self) {
        self.counters.set(0, 0);
    }

    /// Runs `sql` with `params`, stopping at `deadline`.
    pub fn execute(
        &mut self,
        sql: &str,
        params: &[Value],
        deadline: Instant,
    ) -> Result<QueryResult, SqlError> {
        // Every thousand steps: the deadline, and the lane of the tenant
        // whose statement this is (one that went behind while its
        // statement runs has it run behind from here).
        self.conn.progress_handler(
            1000,
            Some(move || {
                edge_blocking::follow_lane();
                Instant::now() >= deadline
            }),
        );
        // Where it was moved, the thread is back at its own priority for
        // what follows (the connection's close, the slot's release: locks
        // every tenant's statements take), the statement panicking or not.
        let _leave = LeaveLane;
        // Its execution may be moved at any point (one step can run for
        // seconds: a sort, a LIKE of megabytes), its open and close not.
        edge_blocking::may_move();
        let _charging = self.temp.charge_here();
        let _memory = self.memory.charge_here();
        let result = self.run(sql, params).map_err(|e| match e {
            SqlError::OutOfMemory if self.memory.take_refused() => SqlError::Io(format!(
                "the statement needed more than its connection's {} bytes of memory (page caches of sorts, DISTINCT, GROUP BY, UNION and recursive queries' tables, values)",
                self.memory.cap()
            )),
            SqlError::DatabaseFull if self.temp.take_refused() => SqlError::Io(format!(
                "the statement's temporary files (sorts, DISTINCT, GROUP BY, UNION, recursive queries, TEMP tables) need more than their {}-byte cap, the database's own",
                self.temp.cap()
            )),
            other => other,
        });
        self.temp.take_refused();
        self.memory.take_refused();
        self.conn.progress_handler(0, None::<fn() -> bool>);
        self.counters
            .set(self.conn.last_insert_rowid(), self.conn.changes());
        result
    }

    fn run(&mut self, sql: &str, params: &[Value]) -> Result<QueryResult, SqlError> {
        let mut stmt = self.conn.prepare(sql).map_err(SqlError::from_sqlite)?;
        if !stmt.readonly() {
            check_log(&self.conn, &self.wal, self.max_log_bytes, self.page_bytes)?;
        }
        let columns: Vec<String> = stmt.column_names().iter().map(|c| c.to_string()).collect();
        let mut budget = MAX_RESULT_BYTES.saturating_sub(columns.iter().map(String::len).sum());
        let params = rusqlite::params_from_iter(params.iter().map(to_sql));
        let mut rows = stmt.query(params).map_err(SqlError::from_sqlite)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(SqlError::from_sqlite)? {
            let mut values = Vec::with_capacity(columns.len());
            for i in 0..columns.len() {
                let v = from_sql(row.get_ref(i).map_err(SqlError::from_sqlite)?);
                let size = match &v {
                    Value::Text(s) => s.len(),
                    Value::Blob(b) => b.len(),
                    _ => 8,
                } + 16;
                budget = budget.checked_sub(size).ok_or_else(|| {
                    SqlError::Io(format!(
                        "the result is larger than the {MAX_RESULT_BYTES}-byte limit: select fewer rows or columns"
                    ))
                })?;
                values.push(v);
            }
            out.push(values);
        }
        Ok(QueryResult {
            columns,
            rows: out,
            bytes: MAX_RESULT_BYTES - budget,
        })
    }

    /// The rowid of the last insert on this connection.
    pub fn last_insert_rowid(&self) -> i64 {
        self.counters.get().0
    }

    /// Rows changed by the last statement.
    pub fn changes(&self) -> u64 {
        self.counters.get().1
    }

    /// The counters, shared: read without the database.
    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }
}

/// A connection's last insert rowid and change count.
#[derive(Debug, Default)]
pub struct Counters {
    rowid: std::sync::atomic::AtomicI64,
    changes: std::sync::atomic::AtomicU64,
}

impl Counters {
    fn set(&self, rowid: i64, changes: u64) {
        self.rowid.store(rowid, Ordering::Relaxed);
        self.changes.store(changes, Ordering::Relaxed);
    }

    /// The last insert rowid and change count.
    pub fn get(&self) -> (i64, u64) {
        (
            self.rowid.load(Ordering::Relaxed),
            self.changes.load(Ordering::Relaxed),
        )
    }
}

/// A file's device and inode.
/// Refuses a write while the write-ahead log holds more than `max` bytes
/// (the database's own cap) not yet written back: `max_page_count` caps
/// the database file alone, and a reader that keeps an old snapshot open
/// (a transaction on another connection) keeps every later write in the
/// log, which then grows without end. Looked at only once the log's file
/// is past the cap (`journal_size_limit` brings it back down once it is
/// written back).
fn check_log(conn: &rusqlite::Connection, wal: &Path, max: u64, page: u64) -> Result<(), SqlError> {
    if std::fs::metadata(wal).map_or(0, |m| m.len()) <= max {
        return Ok(());
    }
    let (mut frames, mut written_back) = (0, 0);
    // SAFETY: the connection's own handle, on the thread that holds the
    // connection; a checkpoint of its main database into two ints. Passive:
    // it waits for nobody (the busy handler is not called). Through the C
    // API: the guest's authorizer refuses the pragma.
    unsafe {
        rusqlite::ffi::sqlite3_wal_checkpoint_v2(
            conn.handle(),
            std::ptr::null(),
            rusqlite::ffi::SQLITE_CHECKPOINT_PASSIVE,
            &mut frames,
            &mut written_back,
        );
    }
    // (Each frame: a page and its 24-byte header.)
    let pending = u64::try_from(frames - written_back).unwrap_or(0) * (page + 24);
    if pending <= max {
        return Ok(());
    }
    Err(SqlError::Io(format!(
        "the database's write-ahead log holds {pending} bytes not yet written back, past its {max}-byte cap: a transaction reading an old snapshot keeps them there; end it"
    )))
}

fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether an action leaves state on the connection (not in the file): a
/// pragma set, anything made or changed in the TEMP schema.
fn lasts_with_connection(ctx: &AuthContext<'_>) -> bool {
    let temp = ctx.database_name == Some("temp")
        && !matches!(
            ctx.action,
            AuthAction::Read { .. } | AuthAction::Select | AuthAction::Function { .. }
        );
    temp || matches!(
        ctx.action,
        AuthAction::Pragma {
            pragma_value: Some(_),
            ..
        } | AuthAction::CreateTempTable { .. }
            | AuthAction::CreateTempIndex { .. }
            | AuthAction::CreateTempTrigger { .. }
            | AuthAction::CreateTempView { .. }
    )
}

fn authorize(ctx: &AuthContext<'_>) -> Authorization {
    match ctx.action {
        AuthAction::Attach { .. } | AuthAction::Detach { .. } => Authorization::Deny,
        AuthAction::Pragma { pragma_name, .. } => {
            if PRAGMAS.contains(&pragma_name.to_ascii_lowercase().as_str()) {
                Authorization::Allow
            } else {
                Authorization::Deny
            }
        }
        _ => Authorization::Allow,
    }
}

fn to_sql(v: &Value) -> SqlValue {
    match v {
        Value::Integer(i) => SqlValue::Integer(*i),
        Value::Real(f) => SqlValue::Real(*f),
        Value::Text(s) => SqlValue::Text(s.clone()),
        Value::Blob(b) => SqlValue::Blob(b.clone()),
        Value::Null => SqlValue::Null,
    }
}

fn from_sql(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        ValueRef::Null => Value::Null,
    }
}

/// Ends the statement's following of its tenant's lane when dropped
/// ([`edge_blocking::leave_lane`]).
struct LeaveLane;

impl Drop for LeaveLane {
    fn drop(&mut self) {
        edge_blocking::leave_lane();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn db(cap: u64) -> (Database, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "edge-sqlite-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("t.db");
        (Database::open(&path, cap).unwrap(), dir)
    }

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    /// What `sql` with `params` is refused with: a limit's words.
    fn refused(d: &mut Database, sql: &str, params: &[Value]) -> String {
        match d.execute(sql, params, later()) {
            Err(SqlError::Io(words)) => words,
            other => panic!("{sql}: refused in words, not {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn a_pinned_snapshot_cannot_grow_the_log_past_the_cap() {
        let (mut writer, dir) = db(1 << 20);
        writer.execute("CREATE TABLE t (v)", &[], later()).unwrap();
        writer
            .execute("INSERT INTO t VALUES (0)", &[], later())
            .unwrap();
        // Another connection keeps an old snapshot open.
        let mut reader = Database::open(&dir.join("t.db"), 1 << 20).unwrap();
        reader.execute("BEGIN", &[], later()).unwrap();
        reader.execute("SELECT * FROM t", &[], later()).unwrap();
        // The same row rewritten: the database stays small, the log grows.
        let refused = (0..40)
            .find_map(|_| {
                writer
                    .execute("UPDATE t SET v = randomblob(100000)", &[], later())
                    .err()
            })
            .expect("a write past the log's cap");
        assert!(
            refused.to_string().contains("write-ahead log holds"),
            "{refused}"
        );
        let wal = std::fs::metadata(dir.join("t.db-wal")).unwrap().len();
        assert!(wal < 2 << 20, "{wal}");
        // Once the reader is done, the log is written back and writes go on.
        reader.execute("COMMIT", &[], later()).unwrap();
        writer
            .execute("UPDATE t SET v = randomblob(100000)", &[], later())
            .unwrap();
    }

    #[test]
    fn statements_round_trip_values() {
        let (mut d, _) = db(1 << 20);
        d.execute("CREATE TABLE t (a, b, c, e, f)", &[], later())
            .unwrap();
        let values = [
            Value::Integer(-7),
            Value::Real(1.5),
            Value::Text("é".into()),
            Value::Blob(vec![0, 255]),
            Value::Null,
        ];
        d.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", &values, later())
            .unwrap();
        assert_eq!((d.last_insert_rowid(), d.changes()), (1, 1));
        let r = d.execute("SELECT * FROM t", &[], later()).unwrap();
        assert_eq!(r.columns, ["a", "b", "c", "e", "f"]);
        assert_eq!(r.rows, [values.to_vec()]);
    }

    #[test]
    fn other_files_cannot_be_reached() {
        let (mut d, dir) = db(1 << 20);
        let other = dir.join("other.db");
        for sql in [
            format!("ATTACH DATABASE '{}' AS x", other.display()),
            format!("VACUUM INTO '{}'", other.display()),
            "PRAGMA max_page_count = 100000000".to_string(),
            "PRAGMA cache_size = -1000000".to_string(),
        ] {
            assert!(d.execute(&sql, &[], later()).is_err(), "{sql}");
        }
        assert!(!other.exists());
        // Reading its own settings is fine.
        d.execute("PRAGMA user_version", &[], later()).unwrap();
    }

    #[test]
    fn the_cap_makes_the_database_full() {
        let (mut d, _) = db(64 << 10);
        d.execute("CREATE TABLE t (v)", &[], later()).unwrap();
        let big = Value::Blob(vec![7; 8 << 10]);
        let mut err = None;
        for _ in 0..32 {
            if let Err(e) = d.execute(
                "INSERT INTO t VALUES (?)",
                std::slice::from_ref(&big),
                later(),
            ) {
                err = Some(e);
                break;
            }
        }
        assert!(matches!(err, Some(SqlError::DatabaseFull)), "{err:?}");
    }

    #[test]
    fn temp_tables_are_held_to_the_same_cap() {
        let (mut d, _) = db(64 << 10);
        let err = d
            .execute(
                "CREATE TEMP TABLE t AS WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) \
                 SELECT randomblob(8192) FROM c LIMIT 1000",
                &[],
                later(),
            )
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(err, SqlError::DatabaseFull), "{err:?}");
        // Within the cap, TEMP tables work.
        d.execute("CREATE TEMP TABLE small (v)", &[], later())
            .unwrap();
        d.execute("INSERT INTO small VALUES (1)", &[], later())
            .unwrap();
    }

    /// A sort, a DISTINCT table and a recursive query's queue spill to
    /// temporary files outside the database: they hold at most the
    /// database's cap, all given back when the statement ends.
    #[test]
    fn temporary_files_are_held_to_the_cap() {
        let (mut d, _) = db(16 << 20);
        // About 64 MiB to sort or keep distinct: refused in words.
        for sql in [
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 16000) \
             SELECT x FROM c ORDER BY randomblob(4000) LIMIT 1 OFFSET 15000",
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 16000) \
             SELECT count(*) FROM (SELECT DISTINCT randomblob(4000) FROM c)",
        ] {
            let words = refused(&mut d, sql, &[]);
            assert!(
                words.contains("temporary files") && words.contains("16777216-byte cap"),
                "{sql}: {words}"
            );
            assert_eq!(d.temp.held(), 0, "{sql}");
        }
        // Within the cap, spilling works (past the 2 MB the sorter keeps
        // in memory), and the next failure is the database's own again.
        let r = d
            .execute(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 2000) \
                 SELECT count(*) FROM (SELECT DISTINCT randomblob(4000) FROM c)",
                &[],
                later(),
            )
            .unwrap();
        assert_eq!(r.rows, [[Value::Integer(2000)]]);
        assert_eq!(d.temp.held(), 0);
    }

    /// Each DISTINCT table keeps a page cache of its own: a statement of
    /// a hundred of them would hold about 200 MB of the host's memory.
    /// It fails at the connection's cap, in words, and gives it all back.
    #[test]
    fn a_statements_memory_is_held_to_the_cap() {
        let (mut d, _) = db(1 << 30);
        assert!(memory::configure());
        d.execute(
            "CREATE TABLE c AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r LIMIT 2000) SELECT x FROM r",
            &[],
            later(),
        )
        .unwrap();
        let idle = d.memory.held();
        let distinct = |i: usize| {
            format!("(SELECT count(*) FROM (SELECT DISTINCT randomblob(1000) || '{i}' FROM c))")
        };
        let many = (0..100).map(distinct).collect::<Vec<_>>().join(" + ");
        let words = refused(&mut d, &format!("SELECT {many}"), &[]);
        assert!(words.contains("134217728 bytes of memory"), "{words}");
        assert!(
            d.memory.held() <= idle + (1 << 20),
            "{} then {}",
            idle,
            d.memory.held()
        );
        // A few are fine.
        let few = (0..4).map(distinct).collect::<Vec<_>>().join(" + ");
        let r = d.execute(&format!("SELECT {few}"), &[], later()).unwrap();
        assert_eq!(r.rows, [[Value::Integer(8000)]]);
    }

    /// Every connection has edge's linear functions (functions.rs).
    #[test]
    fn connections_have_the_linear_functions() {
        let (mut d, _) = db(1 << 20);
        let set = Value::Text("x".repeat(1001));
        let words = refused(&mut d, "SELECT trim('x', ?1)", &[set]);
        assert!(words.contains("edge allows at most 1000"), "{words}");
    }

    /// A LIKE or GLOB runs in O(|value| · |pattern|) within one step,
    /// past the deadline: patterns are held to 200 bytes, in words.
    #[test]
    fn long_like_patterns_are_refused_in_words() {
        let (mut d, _) = db(1 << 20);
        let ok = Value::Text(format!("%{}", "a".repeat(199)));
        d.execute("SELECT 'x' LIKE ?1", std::slice::from_ref(&ok), later())
            .unwrap();
        for sql in ["SELECT 'x' LIKE ?1", "SELECT 'x' GLOB ?1"] {
            let long = Value::Text(format!("%{}", "a".repeat(200)));
            let words = refused(&mut d, sql, &[long]);
            assert!(words.contains("limited to 200 bytes"), "{sql}: {words}");
        }
    }

    #[test]
    fn a_runaway_query_stops_at_the_deadline() {
        let (mut d, _) = db(1 << 20);
        let err = d
            .execute(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
                &[],
                Instant::now() + Duration::from_millis(50),
            )
            .unwrap_err();
        assert!(
            matches!(err, SqlError::Io(ref m) if m.contains("deadline")),
            "{err:?}"
        );
    }

    /// random() and randomblob() come from the thread's generator, not
    /// from SQLite's one for the process (behind its lock): seeded alike
    /// twice, SQLite's would give the same numbers.
    #[test]
    fn randomness_is_the_threads_own() {
        let (mut db, dir) = db(1 << 20);
        // Seeds SQLite's generator: with 0, from the system's randomness
        // again (when the test ends, passing or not).
        fn seed(x: std::os::raw::c_int) {
            // SAFETY: a test control that takes an int and a connection
            // (none here).
            unsafe {
                rusqlite::ffi::sqlite3_test_control(
                    rusqlite::ffi::SQLITE_TESTCTRL_PRNG_SEED,
                    x,
                    std::ptr::null_mut::<rusqlite::ffi::sqlite3>(),
                )
            };
        }
        struct Unseed;
        impl Drop for Unseed {
            fn drop(&mut self) {
                seed(0);
            }
        }
        let _unseed = Unseed;
        let mut draw = |sql: &str| {
            seed(1);
            db.execute(sql, &[], later()).unwrap().rows
        };
        let sql = "SELECT random(), randomblob(16)";
        assert_ne!(format!("{:?}", draw(sql)), format!("{:?}", draw(sql)));
        let sizes = draw(
            "SELECT length(randomblob(1000)), length(randomblob(0)), \
             length(randomblob(NULL)), length(randomblob('10abc')), length(randomblob(2.9)), \
             length(randomblob('1e3')), length(randomblob(x'3130')), length(randomblob(-5))",
        );
        assert_eq!(
            format!("{sizes:?}"),
            "[[Integer(1000), Integer(1), Integer(1), Integer(10), Integer(2), Integer(1), \
             Integer(10), Integer(1)]]"
        );
        let err = db
            .execute("SELECT randomblob(20000000)", &[], later())
            .unwrap_err();
        assert!(format!("{err:?}").contains("too big"), "{err:?}");
        let _ = std::fs::remove_dir_all(dir);
    }

    /// No SQLite lock is shared by every connection on the hot path: a
    /// background tenant's statement runs on a thread at `SCHED_IDLE`, and
    /// preempted there inside such a lock it would stop every other
    /// tenant's statements until a core falls idle. Bundled SQLite keeps
    /// one page cache behind one mutex (`SQLITE_ENABLE_MEMORY_MANAGEMENT`),
    /// counts every allocation under another (`SQLITE_DEFAULT_MEMSTATUS`)
    /// and the cache's pages past its first under a third; all are turned
    /// off where it is built (`.cargo/config.toml`).
    #[test]
    fn no_process_wide_lock_per_page_or_allocation() {
        let (mut db, dir) = db(1 << 20);
        db.execute(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000) \
             SELECT sum(x) FROM c",
            &[],
            later(),
        )
        .unwrap();
        // The most a process-wide statistic has been.
        let most = |op| {
            let (mut now, mut most) = (0i64, 0i64);
            // SAFETY: reads a process-wide counter into two valid integers.
            let rc = unsafe { rusqlite::ffi::sqlite3_status64(op, &mut now, &mut most, 0) };
            assert_eq!(rc, rusqlite::ffi::SQLITE_OK);
            most
        };
        assert_eq!(
            most(rusqlite::ffi::SQLITE_STATUS_MEMORY_USED),
            0,
            "allocations are counted, under a global lock"
        );
        // Pages past the cache's first bulk allocation are counted as
        // "overflow" under another (SQLITE_DISABLE_PAGECACHE_OVERFLOW_STATS).
        db.execute("CREATE TABLE big (v)", &[], later()).unwrap();
        db.execute(
            "INSERT INTO big WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c \
             WHERE x < 200) SELECT zeroblob(4000) FROM c",
            &[],
            later(),
        )
        .unwrap();
        db.execute("SELECT count(*) FROM big", &[], later())
            .unwrap();
        assert_eq!(
            most(rusqlite::ffi::SQLITE_STATUS_PAGECACHE_OVERFLOW),
            0,
            "page-cache overflow is counted, under a global lock"
        );
        let shared_cache = db
            .execute(
                "SELECT sqlite_compileoption_used('ENABLE_MEMORY_MANAGEMENT')",
                &[],
                later(),
            )
            .unwrap();
        assert!(
            matches!(shared_cache.rows.as_slice(), [row] if matches!(row.as_slice(), [Value::Integer(0)])),
            "one page cache for every connection, behind one lock"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
