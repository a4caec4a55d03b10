//! Outbound MySQL: Spin's `fermyon:spin/mysql@2.0.0` and
//! `spin:mysql/mysql@3.0.0` (async functions) against MariaDB or MySQL
//! servers the component names (`mysql://user:password@host:port/db`), as
//! on Spin: an address outside `allowed_outbound_hosts` (or one the
//! tenant's address policy refuses) is
//! `connection-failed("address ADDRESS is not permitted")`, Spin's words.
//! The client connects to the address the host checked, not to the name
//! again. Values map by column type and flags as Spin maps them. A
//! connection the guest drops is reset and kept for the next open of the
//! same address by the same component (see [`Connection`]).
#![deny(missing_docs)]

mod host;

pub use host::add_to_linker;

use edge_outbound_http::OutboundPolicy;
use edge_outbound_http::limit::Permit;
use edge_outbound_http::tcp::TcpError;
use mysql_async::consts::{ColumnFlags, ColumnType};
use mysql_async::prelude::Queryable;
use std::time::Duration;
use wasmtime::component::ResourceTable;

/// How long connecting (and the handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Host memory one query's rows may take.
pub const MAX_RESULT_BYTES: usize = 16 << 20;

/// The largest packet the client reads or sends (a row, a statement):
/// one result's worth.
const MAX_PACKET_BYTES: usize = MAX_RESULT_BYTES;

/// Prepared statements kept per connection (mysql_async's default; the
/// address may not raise it). Statements longer than
/// [`CACHED_STATEMENT_BYTES`] are closed after they run instead.
const STATEMENT_CACHE: usize = 32;

/// The longest statement text kept in the statement cache.
const CACHED_STATEMENT_BYTES: usize = 64 << 10;

/// An open connection: a guest's handle. One statement at a time. When
/// the guest drops it (or its instance ends), the server connection is
/// reset (`COM_RESET_CONNECTION`: transactions rolled back, locks, TEMP
/// tables, variables and prepared statements gone) off the request's path
/// and kept for the next open of the same address by the same component
/// (an idle pool), if its database and character sets are again a new
/// connection's. The connection keeps its place in the tenant's outbound
/// cap while it is reset and while it is idle: an open socket is one.
pub struct Connection {
    conn: Option<Shared>,
    key: PoolKey,
    /// The session as a new connection had it ([`session`]).
    session: String,
    permit: Option<Permit>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        let Some(Ok(conn)) = self.conn.take().map(std::sync::Arc::try_unwrap) else {
            return;
        };
        // (None: closed after a call panicked, its place in the protocol
        // unknown; never pooled.)
        let Some(mut conn) = conn.into_inner() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let key = std::mem::take(&mut self.key);
        let fingerprint = std::mem::take(&mut self.session);
        let Some(permit) = self.permit.take() else {
            return;
        };
        runtime.spawn(async move {
            let reset = tokio::time::timeout(CONNECT_TIMEOUT, async {
                conn.reset().await.ok() == Some(true)
                    && session(&mut conn).await.as_ref() == Some(&fingerprint)
            })
            .await;
            if reset == Ok(true) {
                POOL.put(key, (fingerprint, conn, permit));
            } else {
                let _ = tokio::time::timeout(CONNECT_TIMEOUT, conn.disconnect()).await;
            }
        });
    }
}

/// What a reset must give back as a new connection had it: the database
/// and the character sets (a reset sets session variables to the server's
/// defaults; the handshake may have chosen others).
async fn session(conn: &mut mysql_async::Conn) -> Option<String> {
    // Read as a row and converted without panicking: the row's shape is
    // the server's to choose (`query_first::<String>` panics on a row
    // that is not one string).
    let row = conn
        .query_first::<mysql_async::Row, _>(
            "SELECT CONCAT_WS(',', IFNULL(DATABASE(), ''), @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection)",
        )
        .await
        .ok()
        .flatten()?;
    mysql_async::from_row_opt::<(Option<String>,)>(row).ok()?.0
}

/// Who connects where: the component (`tenant/component`), the address as
/// the guest gave it (credentials and database included), and the address
/// the host checked and connected to.
type PoolKey = (String, String, String);

/// Idle server connections, reset, per [`PoolKey`]: an open finds one
/// instead of connecting and authenticating again (the address is still
/// checked against the policy at every open). At most [`POOL_IDLE`] per
/// key, none idle longer than [`POOL_IDLE_FOR`]; each holds its place in
/// its tenant's outbound cap, and an open the cap refuses closes the
/// component's longest idle one first.
static POOL: Pool = Pool {
    idle: std::sync::Mutex::new(None),
};

/// Idle connections kept per key.
const POOL_IDLE: usize = 16;

/// How long an idle connection is kept.
const POOL_IDLE_FOR: Duration = Duration::from_secs(30);

type Idle = std::collections::HashMap<PoolKey, Vec<(std::time::Instant, Pooled)>>;

/// An idle connection, its [`session`] and its place in the tenant's cap.
type Pooled = (String, mysql_async::Conn, Permit);

struct Pool {
    idle: std::sync::Mutex<Option<Idle>>,
}

impl Pool {
    fn take(&self, key: &PoolKey) -> Option<Pooled> {
        let now = std::time::Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.as_mut()?.get_mut(key)?;
        while let Some((since, conn)) = list.pop() {
            if now.duration_since(since) < POOL_IDLE_FOR {
                return Some(conn);
            }
        }
        None
    }

    /// Closes the idle connection of component `who` idle the longest
    /// (its place in the cap is given back); whether there was one.
    fn close_oldest(&self, who: &str) -> bool {
        let oldest = {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            let Some(idle) = idle.as_mut() else {
                return false;
            };
            let key = idle
                .iter()
                .filter(|(k, list)| k.0 == who && !list.is_empty())
                .min_by_key(|(_, list)| list[0].0)
                .map(|(k, _)| k.clone());
            let Some(key) = key else {
                return false;
            };
            let list = idle.get_mut(&key).expect("found above");
            let oldest = list.remove(0);
            if list.is_empty() {
                idle.remove(&key);
            }
            oldest
        };
        // Dropped outside the lock: the socket closes without a goodbye
        // (the server ends the session).
        drop(oldest);
        true
    }

    fn put(&self, key: PoolKey, conn: Pooled) {
        // Idle connections are closed when their time is up even if no
        // other is put back: each holds a place in its tenant's cap.
        static JANITOR: std::sync::Once = std::sync::Once::new();
        JANITOR.call_once(|| {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async {
                    loop {
                        tokio::time::sleep(POOL_IDLE_FOR / 4).await;
                        drop(POOL.expired());
                    }
                });
            }
        });
        let expired = self.expired();
        let now = std::time::Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle
            .get_or_insert_with(Default::default)
            .entry(key)
            .or_default();
        if list.len() < POOL_IDLE {
            list.push((now, conn));
        }
        drop(idle);
        drop(expired);
    }

    /// Takes out the connections idle too long, of every key (dropped by
    /// the caller outside the lock: the socket closes without a goodbye,
    /// the server ends the session).
    fn expired(&self) -> Vec<Pooled> {
        let now = std::time::Instant::now();
        let mut out = Vec::new();
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(idle) = idle.as_mut() {
            for list in idle.values_mut() {
                let (keep, old): (Vec<_>, Vec<_>) = std::mem::take(list)
                    .into_iter()
                    .partition(|(since, _)| now.duration_since(*since) < POOL_IDLE_FOR);
                *list = keep;
                out.extend(old.into_iter().map(|(_, conn)| conn));
            }
            idle.retain(|_, list| !list.is_empty());
        }
        out
    }
}

/// What the linked functions see of the store data.
pub struct Mysql<'a> {
    /// Where the component may connect.
    pub outbound: &'a OutboundPolicy,
    /// The instance's resource table.
    pub table: &'a mut ResourceTable,
    /// The bytes its tenant's calls and unread results hold.
    pub unread: &'a edge_unread::UnreadBudget,
}

/// Store data that carries a component's outbound policy.
pub trait MysqlView {
    /// The outbound policy and resource table of the instance.
    fn mysql(&mut self) -> Mysql<'_>;
}

/// Why a call failed (Spin's variants, shared by both versions).
#[derive(Debug)]
pub enum Error {
    /// Not permitted, or the server could not be reached.
    ConnectionFailed(String),
    /// A parameter the server cannot take.
    BadParameter(String),
    /// The server refused the statement.
    QueryFailed(String),
    /// A value that does not fit its type.
    ValueConversionFailed(String),
    /// Anything else.
    Other(String),
}

/// A value, as Spin's `db-value` (both versions share the variants).
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub enum Value {
    Boolean(bool),
    Int8(i8),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    Uint8(u8),
    Uint16(u16),
    Uint32(u32),
    Uint64(u64),
    Floating32(f32),
    Floating64(f64),
    Str(String),
    Binary(Vec<u8>),
    Null,
    Unsupported,
}

/// A column's type, as Spin's `db-data-type`.
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub enum DataType {
    Boolean,
    Int8,
    Int16,
    Int32,
    Int64,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Floating32,
    Floating64,
    Str,
    Binary,
    Other,
}

/// Rows and their columns.
pub struct RowSet {
    /// Name and type of each column.
    pub columns: Vec<(String, DataType)>,
    /// The rows.
    pub rows: Vec<Vec<Value>>,
}

/// What a value of a result is counted as (its result's
/// [`MAX_RESULT_BYTES`], the tenant's unread budget).
fn value_bytes(v: &Value) -> usize {
    16 + match v {
        Value::Str(s) => s.len(),
        Value::Binary(b) => b.len(),
        _ => 8,
    }
}

/// What a result's rows are counted as until the guest has read them.
pub fn held_bytes(set: &RowSet) -> usize {
    set.rows.iter().flatten().map(value_bytes).sum()
}

/// Opens `address` under `outbound`.
pub async fn open(outbound: OutboundPolicy, address: &str) -> Result<Connection, Error> {
    let not_permitted = || Error::ConnectionFailed(format!("address {address} is not permitted"));
    let opts =
        mysql_async::Opts::from_url(address).map_err(|e| Error::ConnectionFailed(e.to_string()))?;
    let host = opts.ip_or_hostname().to_string();
    let port = opts.tcp_port();
    let mut checked = outbound.check_tcp("mysql", &host, port).await;
    if matches!(checked, Err(TcpError::TooMany)) && POOL.close_oldest(outbound.who()) {
        // The cap was held by an idle connection of this component.
        checked = outbound.check_tcp("mysql", &host, port).await;
    }
    let checked = checked.map_err(|e| match e {
        TcpError::NotAllowed(_) | TcpError::Prohibited(_) => not_permitted(),
        TcpError::TooMany => Error::ConnectionFailed("too many connections".into()),
        TcpError::Connect(..) => Error::ConnectionFailed(e.to_string()),
    })?;
    let key = (
        outbound.who().to_string(),
        address.to_string(),
        checked.addr.to_string(),
    );
    if let Some((session, conn, _idle_place)) = POOL.take(&key) {
        // (The idle connection's place is given back: `checked` holds one.)
        return Ok(Connection {
            conn: Some(std::sync::Arc::new(tokio::sync::Mutex::new(Some(conn)))),
            key,
            session,
            permit: Some(checked.permit),
        });
    }
    // Connect to the address checked; no socket file, no LOCAL INFILE.
    // What the address may say of the client's own buffers is the host's:
    // packets no larger than a result may be, no compression (a
    // compressed packet is unpacked whole, past any packet limit), a
    // bounded statement cache.
    let opts = mysql_async::OptsBuilder::from_opts(opts)
        .ip_or_hostname(checked.addr.ip().to_string())
        .tcp_port(checked.addr.port())
        .prefer_socket(false)
        .socket(None::<String>)
        .max_allowed_packet(Some(MAX_PACKET_BYTES))
        // mysql_old_password's hash is broken, and a switch to it without
        // data panicked the client: refused whatever the address says.
        .secure_auth(true)
        .compression(None)
        .stmt_cache_size(STATEMENT_CACHE);
    // The handshake and the first query, within one time limit.
    let connect = guarded(async {
        let mut conn = mysql_async::Conn::new(opts)
            .await
            .map_err(|e| Error::ConnectionFailed(e.to_string()))?;
        // (None: never pooled; compared with a reset's, it never matches.)
        let session = session(&mut conn).await.unwrap_or_else(|| "\0".into());
        Ok((conn, session))
    });
    let (conn, session) = tokio::time::timeout(CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| Error::ConnectionFailed("the server did not answer in time".into()))??;
    Ok(Connection {
        conn: Some(std::sync::Arc::new(tokio::sync::Mutex::new(Some(conn)))),
        key,
        session,
        permit: Some(checked.permit),
    })
}

/// The server connection of a [`Connection`], as a call takes it: shared,
/// so a call runs without borrowing the instance's resource table; `None`
/// once closed after a call panicked ([`exclusive`]).
pub type Shared = std::sync::Arc<tokio::sync::Mutex<Option<mysql_async::Conn>>>;

impl Connection {
    /// The server connection, for [`query`] and [`execute`].
    pub fn shared(&self) -> Option<Shared> {
        self.conn.clone()
    }
}

fn to_mysql(v: Value) -> mysql_async::Value {
    use mysql_async::Value as M;
    match v {
        Value::Boolean(b) => M::from(b),
        Value::Int8(i) => M::from(i),
        Value::Int16(i) => M::from(i),
        Value::Int32(i) => M::from(i),
        Value::Int64(i) => M::from(i),
        Value::Uint8(i) => M::from(i),
        Value::Uint16(i) => M::from(i),
        Value::Uint32(i) => M::from(i),
        Value::Uint64(i) => M::from(i),
        Value::Floating32(f) => M::from(f),
        Value::Floating64(f) => M::from(f),
        Value::Str(s) => M::from(s),
        Value::Binary(b) => M::from(b),
        Value::Null | Value::Unsupported => M::NULL,
    }
}

fn data_type(c: &mysql_async::Column) -> DataType {
    let unsigned = c.flags().contains(ColumnFlags::UNSIGNED_FLAG);
    // Character set 63 is `binary`: BLOB, BINARY, VARBINARY.
    let binary = c.character_set() == 63;
    match c.column_type() {
        ColumnType::MYSQL_TYPE_TINY if unsigned => DataType::Uint8,
        ColumnType::MYSQL_TYPE_TINY => DataType::Int8,
        ColumnType::MYSQL_TYPE_SHORT if unsigned => DataType::Uint16,
        ColumnType::MYSQL_TYPE_SHORT => DataType::Int16,
        ColumnType::MYSQL_TYPE_LONG | ColumnType::MYSQL_TYPE_INT24 if unsigned => DataType::Uint32,
        ColumnType::MYSQL_TYPE_LONG | ColumnType::MYSQL_TYPE_INT24 => DataType::Int32,
        ColumnType::MYSQL_TYPE_LONGLONG if unsigned => DataType::Uint64,
        ColumnType::MYSQL_TYPE_LONGLONG => DataType::Int64,
        ColumnType::MYSQL_TYPE_FLOAT => DataType::Floating32,
        ColumnType::MYSQL_TYPE_DOUBLE => DataType::Floating64,
        ColumnType::MYSQL_TYPE_BLOB
        | ColumnType::MYSQL_TYPE_TINY_BLOB
        | ColumnType::MYSQL_TYPE_MEDIUM_BLOB
        | ColumnType::MYSQL_TYPE_LONG_BLOB
        | ColumnType::MYSQL_TYPE_STRING
        | ColumnType::MYSQL_TYPE_VAR_STRING
        | ColumnType::MYSQL_TYPE_VARCHAR => {
            if binary {
                DataType::Binary
            } else {
                DataType::Str
            }
        }
        ColumnType::MYSQL_TYPE_JSON
        | ColumnType::MYSQL_TYPE_DECIMAL
        | ColumnType::MYSQL_TYPE_NEWDECIMAL
        | ColumnType::MYSQL_TYPE_ENUM
        | ColumnType::MYSQL_TYPE_SET => DataType::Str,
        _ => DataType::Other,
    }
}

fn from_mysql(v: mysql_async::Value, t: DataType) -> Result<Value, Error> {
    use mysql_async::from_value_opt;
    if v == mysql_async::Value::NULL {
        return Ok(Value::Null);
    }
    let conv = |e: mysql_async::FromValueError| Error::ValueConversionFailed(format!("{:?}", e.0));
    Ok(match t {
        DataType::Boolean => Value::Boolean(from_value_opt::<bool>(v).map_err(conv)?),
        DataType::Int8 => Value::Int8(from_value_opt(v).map_err(conv)?),
        DataType::Int16 => Value::Int16(from_value_opt(v).map_err(conv)?),
        DataType::Int32 => Value::Int32(from_value_opt(v).map_err(conv)?),
        DataType::Int64 => Value::Int64(from_value_opt(v).map_err(conv)?),
        DataType::Uint8 => Value::Uint8(from_value_opt(v).map_err(conv)?),
        DataType::Uint16 => Value::Uint16(from_value_opt(v).map_err(conv)?),
        DataType::Uint32 => Value::Uint32(from_value_opt(v).map_err(conv)?),
        DataType::Uint64 => Value::Uint64(from_value_opt(v).map_err(conv)?),
        DataType::Floating32 => Value::Floating32(from_value_opt(v).map_err(conv)?),
        DataType::Floating64 => Value::Floating64(from_value_opt(v).map_err(conv)?),
        DataType::Str => Value::Str(from_value_opt(v).map_err(conv)?),
        DataType::Binary => Value::Binary(from_value_opt(v).map_err(conv)?),
        DataType::Other => Value::Unsupported,
    })
}

/// Holds what a call's statement and parameters take in the tenant's
/// budget while the call runs ([`edge_unread::UnreadBudget::hold_call`]).
fn hold(
    unread: &edge_unread::UnreadBudget,
    statement: &str,
    params: &[Value],
) -> Result<edge_unread::Held, Error> {
    let bytes = statement.len() + params.iter().map(value_bytes).sum::<usize>();
    unread.hold_call(bytes).map_err(Error::Other)
}

/// Runs a statement that returns rows.
pub async fn query(
    conn: Shared,
    statement: String,
    params: Vec<Value>,
    unread: &edge_unread::UnreadBudget,
) -> Result<RowSet, Error> {
    let _held = hold(unread, &statement, &params)?;
    exclusive(&conn, async |conn| {
        let stmt = prepare(conn, &statement).await?;
        let rows = read_rows(conn, &stmt, params).await;
        forget_if_long(conn, stmt, &statement).await;
        rows
    })
    .await
}

/// Runs `call` on the connection in `shared`, alone. A panic in it fails
/// the call alone ([`guarded`]) and closes the connection, whose place in
/// the protocol is then unknown: later calls on the handle fail, and it
/// is not pooled.
async fn exclusive<C, T>(
    shared: &tokio::sync::Mutex<Option<C>>,
    call: impl AsyncFnOnce(&mut C) -> Result<T, Error>,
) -> Result<T, Error> {
    use futures_util::FutureExt;
    let mut held = shared.lock().await;
    let Some(conn) = held.as_mut() else {
        return Err(Error::Other(format!(
            "the connection was closed: {COULD_NOT_FOLLOW}"
        )));
    };
    match std::panic::AssertUnwindSafe(call(conn))
        .catch_unwind()
        .await
    {
        Ok(outcome) => outcome,
        Err(_) => {
            *held = None;
            Err(panicked())
        }
    }
}

/// Why a call failed whose client panicked.
const COULD_NOT_FOLLOW: &str = "the MySQL client could not follow the server's answer";

/// A call's error for a panic in the client (the panic itself is
/// reported, and counted, by the host's hook).
fn panicked() -> Error {
    tracing::debug!("the MySQL client panicked on a server's answer");
    Error::Other(COULD_NOT_FOLLOW.into())
}

/// A call into the MySQL client, whose panic fails the call alone. The
/// server is the tenant's to choose and the client parses all it says;
/// tests/hostile_server.rs plays such servers and each panic it found is
/// fixed in vendor/mysql_async, but one left would otherwise end the
/// request's task (and every call queued on its instance).
async fn guarded<T>(call: impl std::future::Future<Output = Result<T, Error>>) -> Result<T, Error> {
    use futures_util::FutureExt;
    std::panic::AssertUnwindSafe(call)
        .catch_unwind()
        .await
        .unwrap_or_else(|_| Err(panicked()))
}

/// Prepares `statement` (or finds it in the connection's cache).
async fn prepare(
    conn: &mut mysql_async::Conn,
    statement: &str,
) -> Result<mysql_async::Statement, Error> {
    conn.prep(statement)
        .await
        .map_err(|e| Error::QueryFailed(e.to_string()))
}

/// Closes `stmt` if its text is too long to keep cached.
async fn forget_if_long(conn: &mut mysql_async::Conn, stmt: mysql_async::Statement, text: &str) {
    if text.len() > CACHED_STATEMENT_BYTES {
        let _ = conn.close(stmt).await;
    }
}

async fn read_rows(
    conn: &mut mysql_async::Conn,
    stmt: &mysql_async::Statement,
    params: Vec<Value>,
) -> Result<RowSet, Error> {
    let params = mysql_async::Params::Positional(params.into_iter().map(to_mysql).collect());
    let mut result = conn
        .exec_iter(stmt, params)
        .await
        .map_err(|e| Error::QueryFailed(e.to_string()))?;
    let columns: Vec<(String, DataType)> = result
        .columns_ref()
        .iter()
        .map(|c| (c.name_str().to_string(), data_type(c)))
        .collect();
    let mut budget = MAX_RESULT_BYTES;
    let mut rows = Vec::new();
    while let Some(row) = result
        .next()
        .await
        .map_err(|e| Error::QueryFailed(e.to_string()))?
    {
        let mut values = Vec::with_capacity(columns.len());
        for (i, value) in row.unwrap().into_iter().enumerate() {
            let v = from_mysql(value, columns.get(i).map_or(DataType::Other, |c| c.1))?;
            let size = value_bytes(&v);
            budget = budget.checked_sub(size).ok_or_else(|| {
                Error::Other(format!(
                    "the result is larger than the {MAX_RESULT_BYTES}-byte limit: select fewer rows or columns"
                ))
            })?;
            values.push(v);
        }
        rows.push(values);
    }
    Ok(RowSet { columns, rows })
}

/// Runs a statement without rows.
pub async fn execute(
    conn: Shared,
    statement: String,
    params: Vec<Value>,
    unread: &edge_unread::UnreadBudget,
) -> Result<(), Error> {
    let _held = hold(unread, &statement, &params)?;
    exclusive(&conn, async |conn| {
        let stmt = prepare(conn, &statement).await?;
        let params = mysql_async::Params::Positional(params.into_iter().map(to_mysql).collect());
        let done = conn
            .exec_drop(&stmt, params)
            .await
            .map_err(|e| Error::QueryFailed(e.to_string()));
        forget_if_long(conn, stmt, &statement).await;
        done
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_in_the_client_fails_the_call_alone() {
        let failed = guarded::<()>(async { panic!("a server's answer the client cannot follow") });
        assert!(matches!(failed.await, Err(Error::Other(why)) if why.contains("could not follow")));
        assert_eq!(guarded(async { Ok(7) }).await.unwrap(), 7);
    }

    /// A connection whose call panicked is closed: later calls on it fail
    /// in words, and the handle's drop finds nothing to pool.
    #[tokio::test]
    async fn a_connection_whose_call_panicked_is_closed() {
        let shared = tokio::sync::Mutex::new(Some(0u32));
        let sum = exclusive(&shared, async |n| {
            *n += 2;
            Ok(*n)
        });
        assert_eq!(sum.await.unwrap(), 2);
        let failed = exclusive::<_, ()>(&shared, async |n| {
            *n += 1;
            panic!("a server's answer the client cannot follow")
        });
        assert!(matches!(failed.await, Err(Error::Other(why)) if why == COULD_NOT_FOLLOW));
        assert!(shared.lock().await.is_none());
        let later = exclusive(&shared, async |n| Ok(*n)).await;
        assert!(
            matches!(later, Err(Error::Other(ref why)) if why == &format!("the connection was closed: {COULD_NOT_FOLLOW}")),
            "{later:?}"
        );
    }
}
