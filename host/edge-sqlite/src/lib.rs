//! SQLite capability: Spin's `fermyon:spin/sqlite@2.0.0`,
//! `spin:sqlite/sqlite@3.0.0` and `@3.1.0` (async functions) over an
//! embedded database per tenant and label, `DATA_DIR/sqlite/TENANT/LABEL.db`.
//!
//! A component opens the labels its manifest lists in `sqlite_databases`
//! (`default` among them, as on Spin, where it exists without any
//! configuration); any other label is `access-denied`. Each database is
//! capped in size (`database-full` past it), statements stop at the
//! request's deadline, and nothing a statement says reaches another file.
//! Statements run on the blocking pool, never on a serving thread.
#![deny(missing_docs)]

mod db;
mod host;

pub use db::{Database, MAX_RESULT_BYTES, QueryResult, Value};
pub use host::add_to_linker;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;
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
            Some(ErrorCode::OperationInterrupted) => {
                Self::Io("interrupted: the request's deadline passed".into())
            }
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
        }
    }

    /// Whether both grant the same files with the same cap.
    pub fn same(&self, other: &Grant) -> bool {
        self.files == other.files && self.max_bytes == other.max_bytes
    }

    /// Whether anything is granted.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// An open connection: a guest's handle.
pub struct Connection {
    db: Arc<Mutex<Database>>,
}

/// What the linked functions see of the store data.
pub struct Sqlite<'a> {
    /// The component's grant.
    pub grant: &'a Grant,
    /// The instance's resource table.
    pub table: &'a mut ResourceTable,
    /// When the current request must be done.
    pub deadline: Instant,
}

/// Store data that carries a component's SQLite [`Grant`].
pub trait SqliteView {
    /// The grant, table and deadline of the instance in this store.
    fn sqlite(&mut self) -> Sqlite<'_>;
}

/// Runs `f` on the blocking pool (a statement may be slow or wait for a
/// writer; the serving thread goes on meanwhile).
async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, SqlError> + Send + 'static,
) -> Result<R, SqlError> {
    tokio::task::spawn_blocking(f)
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
            .map(|c| c.db.clone())
            .map_err(|_| SqlError::InvalidConnection)
    }
}

/// Opens `file` on the blocking pool.
async fn open(file: Result<(PathBuf, u64), SqlError>) -> Result<Connection, SqlError> {
    let (path, max_bytes) = file?;
    let db = blocking(move || Database::open(&path, max_bytes)).await?;
    Ok(Connection {
        db: Arc::new(Mutex::new(db)),
    })
}

/// Runs a statement on `db` on the blocking pool: its result and the
/// connection's rowid and change count after it.
async fn execute(
    db: Result<Arc<Mutex<Database>>, SqlError>,
    sql: String,
    params: Vec<Value>,
    deadline: Instant,
) -> Result<QueryResult, SqlError> {
    let db = db?;
    blocking(move || {
        let mut db = db.lock().unwrap_or_else(|e| e.into_inner());
        db.execute(&sql, &params, deadline)
    })
    .await
}
