//! Outbound PostgreSQL: Spin's `fermyon:spin/postgres@2.0.0`,
//! `spin:postgres/postgres@3.0.0` and `@4.0.0` to `@4.2.0` (the last with
//! async functions), against servers the component names
//! (`postgres://user:password@host:port/db`, or a key/value connection
//! string), as on Spin: an address outside `allowed_outbound_hosts` (or
//! one the tenant's address policy refuses) is
//! `connection-failed("address postgres://HOST:PORT is not permitted")`,
//! Spin's words.
//!
//! The host connects (to the address it checked) and speaks the protocol
//! with `tokio-postgres`; values map as Spin maps them, `spin:postgres@4`'s
//! types being the widest (ranges are not supported yet: a range parameter
//! is `bad-parameter`, a range column `unsupported`). Connections are not
//! encrypted (TLS to the server is not offered yet).
#![deny(missing_docs)]
// The error is the interface's own type (its `db-error` record is large);
// boxing it would only move the conversion.
#![allow(clippy::result_large_err)]

mod capped;
mod host;
mod numeric;
mod types;
mod wit;

pub use host::add_to_linker;
/// The guest's error (`spin:postgres@4.2.0`'s), which calls end in, and
/// its parameters.
pub use wit::v4::{Error, ParameterValue, QueryError};

use edge_outbound_http::OutboundPolicy;
use edge_outbound_http::tcp::TcpError;
use std::time::Duration;
use tokio_postgres::types::ToSql;
use wasmtime::component::ResourceTable;
use wit::v4::{Column, DbValue, RowSet};

/// How long connecting (and the handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Host memory one query's rows may take: past it the query fails rather
/// than the host filling up.
pub const MAX_RESULT_BYTES: usize = 16 << 20;

/// An open connection: a guest's handle.
pub struct Connection {
    client: std::sync::Arc<Link>,
    _permit: edge_outbound_http::limit::Permit,
}

impl Connection {
    /// The connection's client, as the guest's calls use it.
    pub fn link(&self) -> std::sync::Arc<Link> {
        self.client.clone()
    }
}

/// The client of a connection, and why the connection ended if it
/// failed: its server sent more than a message may hold ([`capped`]) or
/// than the client keeps, or the connection's I/O failed.
pub struct Link {
    client: tokio_postgres::Client,
    ended: std::sync::Arc<std::sync::OnceLock<String>>,
}

impl Link {
    /// The guest's error for `e`: why the connection ended if it did
    /// (`e` then only says it closed).
    fn error(&self, e: tokio_postgres::Error) -> Error {
        match self.ended.get() {
            Some(why) => Error::QueryFailed(wit::v4::QueryError::Text(why.clone())),
            None => types::query_error(e),
        }
    }
}

/// A connection builder (`spin:postgres@4.1`): an address, later built.
pub struct Builder {
    /// The address, or its length if longer than [`MAX_ADDRESS_BYTES`]
    /// (refused when built: a builder lives in host memory, outside the
    /// guest's cap, so it keeps nothing longer).
    address: Result<String, usize>,
}

/// The longest connection address a builder keeps.
pub const MAX_ADDRESS_BYTES: usize = 4096;

/// What the linked functions see of the store data.
pub struct Postgres<'a> {
    /// Where the component may connect.
    pub outbound: &'a OutboundPolicy,
    /// The instance's resource table.
    pub table: &'a mut ResourceTable,
    /// Host memory the instance's unread result streams hold.
    pub unread: &'a edge_unread::UnreadBudget,
}

/// Store data that carries a component's outbound policy.
pub trait PostgresView {
    /// The outbound policy and resource table of the instance.
    fn postgres(&mut self) -> Postgres<'_>;
}

fn failed(m: impl Into<String>) -> Error {
    Error::ConnectionFailed(m.into())
}

/// Opens `address` under `outbound`.
pub async fn open(outbound: OutboundPolicy, address: &str) -> Result<Connection, Error> {
    let config: tokio_postgres::Config = address
        .parse()
        .map_err(|e: tokio_postgres::Error| failed(e.to_string()))?;
    let (host, port) = match (config.get_hosts(), config.get_ports()) {
        ([tokio_postgres::config::Host::Tcp(h)], ports) => {
            (h.clone(), ports.first().copied().unwrap_or(5432))
        }
        ([], _) => return Err(failed("the address names no host")),
        ([_], _) => return Err(failed("Unix sockets are not supported on WebAssembly")),
        _ => return Err(failed("one host per connection, please")),
    };
    let connected = outbound
        .connect_tcp("postgres", &host, port, CONNECT_TIMEOUT)
        .await
        .map_err(|e| match e {
            TcpError::NotAllowed(_) | TcpError::Prohibited(_) => {
                failed(format!("address postgres://{host}:{port} is not permitted"))
            }
            TcpError::TooMany => failed("too many connections"),
            TcpError::Connect(..) => failed(e.to_string()),
        })?;
    let (stream, ended) = capped::capped(connected.stream);
    let (client, connection) = tokio::time::timeout(
        CONNECT_TIMEOUT,
        config.connect_raw(stream, tokio_postgres::NoTls),
    )
    .await
    .map_err(|_| failed("the server did not answer in time"))?
    .map_err(|e| failed(e.to_string()))?;
    // The connection's I/O: ends when the client is dropped. The tenant's
    // work, in its lane. (`connection` is dropped, failing the calls
    // waiting on it, only after why it failed is set.)
    let why = ended.clone();
    outbound.tenant().work().spawn_async(async move {
        let mut connection = std::pin::pin!(connection);
        if let Err(e) = connection.as_mut().await {
            tracing::debug!(error = %e, "postgres connection ended");
            let _ = why.set(e.to_string());
        }
    });
    Ok(Connection {
        client: std::sync::Arc::new(Link { client, ended }),
        _permit: connected.permit,
    })
}

fn params(params: Vec<ParameterValue>) -> Result<Vec<types::Param>, Error> {
    params.into_iter().map(types::param).collect()
}

/// Holds what a call's statement and parameters take in the tenant's
/// budget while the call runs ([`edge_unread::UnreadBudget::hold_call`]).
fn hold(
    unread: &edge_unread::UnreadBudget,
    statement: &str,
    parameters: &[ParameterValue],
) -> Result<edge_unread::Held, Error> {
    let bytes = statement.len() + parameters.iter().map(types::held_bytes).sum::<usize>();
    unread.hold_call(bytes).map_err(Error::Other)
}

/// Runs a statement that returns rows.
pub async fn query(
    link: std::sync::Arc<Link>,
    statement: String,
    parameters: Vec<ParameterValue>,
    unread: &edge_unread::UnreadBudget,
) -> Result<RowSet, Error> {
    use futures_util::StreamExt;
    let _held = hold(unread, &statement, &parameters)?;
    let params = params(parameters)?;
    let stmt = link
        .client
        .prepare(&statement)
        .await
        .map_err(|e| link.error(e))?;
    let columns: Vec<Column> = stmt
        .columns()
        .iter()
        .map(|c| Column {
            name: c.name().to_string(),
            data_type: types::data_type(c.type_()),
        })
        .collect();
    let refs = params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync));
    let stream = link
        .client
        .query_raw(&stmt, refs)
        .await
        .map_err(|e| link.error(e))?;
    let mut stream = std::pin::pin!(stream);
    let mut budget = MAX_RESULT_BYTES;
    let mut rows = Vec::new();
    while let Some(row) = stream.next().await {
        let row = row.map_err(|e| link.error(e))?;
        let mut values = Vec::with_capacity(row.len());
        for i in 0..row.len() {
            let v = types::value(&row, i, budget)?;
            budget = budget.checked_sub(size(&v)).ok_or_else(too_large)?;
            values.push(v);
        }
        rows.push(values);
    }
    Ok(RowSet { columns, rows })
}

/// The error of a result past [`MAX_RESULT_BYTES`].
pub(crate) fn too_large() -> Error {
    Error::Other(format!(
        "the result is larger than the {MAX_RESULT_BYTES}-byte limit: select fewer rows or columns"
    ))
}

/// Roughly what a result takes in host memory.
pub(crate) fn held_bytes(set: &RowSet) -> usize {
    let names: usize = set.columns.iter().map(|c| c.name.len()).sum();
    names + set.rows.iter().flatten().map(size).sum::<usize>()
}

/// Roughly what a value takes in host memory.
fn size(v: &DbValue) -> usize {
    16 + match v {
        DbValue::Str(s) | DbValue::Decimal(s) | DbValue::Uuid(s) => s.len(),
        DbValue::Binary(b) | DbValue::Jsonb(b) | DbValue::Unsupported(b) => b.len(),
        // (Each element an `Option<String>` of 24 bytes and its text.)
        DbValue::ArrayStr(a) | DbValue::ArrayDecimal(a) => a
            .iter()
            .map(|s| 24 + s.as_ref().map_or(0, String::len))
            .sum(),
        DbValue::ArrayInt32(a) => a.len() * 8,
        DbValue::ArrayInt64(a) => a.len() * 16,
        _ => 16,
    }
}

/// Runs a statement: the rows it changed.
pub async fn execute(
    link: std::sync::Arc<Link>,
    statement: String,
    parameters: Vec<ParameterValue>,
    unread: &edge_unread::UnreadBudget,
) -> Result<u64, Error> {
    let _held = hold(unread, &statement, &parameters)?;
    let params = params(parameters)?;
    let refs: Vec<&(dyn ToSql + Sync)> = params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect();
    link.client
        .execute(statement.as_str(), &refs)
        .await
        .map_err(|e| link.error(e))
}
