//! Outbound Redis: Spin's `fermyon:spin/redis@2.0.0` and
//! `spin:redis/redis@3.0.0` (async functions), against servers the
//! component names (`redis://host:port`), as on Spin: an address outside
//! `allowed_outbound_hosts`, or one the tenant's address policy refuses,
//! is `invalid-address`; more connections than the tenant's outbound cap
//! is `too-many-connections`; a server's or the network's error is
//! `other`, with the server's words.
//!
//! The connection is the host's (address checked, then connected by the
//! host) and lives as long as the guest's handle; commands run on the
//! serving thread's runtime, never blocking it.
#![deny(missing_docs)]

mod cap;
mod host;

pub use host::add_to_linker;

use edge_outbound_http::OutboundPolicy;
use edge_outbound_http::tcp::TcpError;
use redis::IntoConnectionInfo;
use redis::aio::MultiplexedConnection;
use std::time::Duration;
use wasmtime::component::ResourceTable;

/// How long connecting (and the handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// An open connection: a guest's handle.
pub struct Connection {
    conn: MultiplexedConnection,
    _permit: edge_outbound_http::limit::Permit,
}

/// What the linked functions see of the store data.
pub struct Redis<'a> {
    /// Where the component may connect.
    pub outbound: &'a OutboundPolicy,
    /// The instance's resource table.
    pub table: &'a mut ResourceTable,
}

/// Store data that carries a component's outbound policy.
pub trait RedisView {
    /// The outbound policy and resource table of the instance.
    fn redis(&mut self) -> Redis<'_>;
}

/// Why a call failed (Spin's variants).
#[derive(Debug)]
pub enum Error {
    /// Not a Redis address, or not one the component may reach.
    InvalidAddress,
    /// The tenant's outbound cap is reached.
    TooManyConnections,
    /// A value was not of the type asked for.
    TypeError,
    /// Anything else, in the server's or network's words.
    Other(String),
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        if e.kind() == redis::ErrorKind::UnexpectedReturnType {
            Error::TypeError
        } else {
            Error::Other(e.to_string())
        }
    }
}

/// Opens `address` (`redis://[user:password@]host[:port][/db]`) under
/// `outbound`.
pub async fn open(outbound: OutboundPolicy, address: &str) -> Result<Connection, Error> {
    let info = address
        .into_connection_info()
        .map_err(|_| Error::InvalidAddress)?;
    let (host, port) = match info.addr() {
        redis::ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
        // TLS and Unix sockets are not offered to guests.
        _ => return Err(Error::InvalidAddress),
    };
    let connected = outbound
        .connect_tcp("redis", &host, port, CONNECT_TIMEOUT)
        .await
        .map_err(|e| match e {
            TcpError::NotAllowed(_) | TcpError::Prohibited(_) => Error::InvalidAddress,
            TcpError::TooMany => Error::TooManyConnections,
            TcpError::Connect(..) => Error::Other(e.to_string()),
        })?;
    let settings = info.redis_settings().clone();
    let (conn, driver) = tokio::time::timeout(
        CONNECT_TIMEOUT,
        MultiplexedConnection::new_with_config(
            &settings,
            cap::reply_cap(connected.stream),
            redis::AsyncConnectionConfig::new(),
        ),
    )
    .await
    .map_err(|_| Error::Other(format!("{address}: the handshake timed out")))??;
    // The connection's I/O: ends when the connection is dropped. The
    // tenant's work, in its lane.
    outbound.tenant().work().spawn_async(driver);
    Ok(Connection {
        conn,
        _permit: connected.permit,
    })
}

/// A command's argument.
pub enum Param {
    /// An integer.
    Int(i64),
    /// Bytes.
    Binary(Vec<u8>),
}

/// A command's result value.
pub enum Reply {
    /// Nil.
    Nil,
    /// A status (`OK`, ...).
    Status(String),
    /// An integer.
    Int(i64),
    /// Bytes.
    Binary(Vec<u8>),
}

/// Flattens a server reply into Spin's list of results.
fn flatten(value: redis::Value, out: &mut Vec<Reply>) -> Result<(), Error> {
    use redis::Value as V;
    match value {
        V::Nil => out.push(Reply::Nil),
        V::Int(i) => out.push(Reply::Int(i)),
        V::BulkString(b) => out.push(Reply::Binary(b)),
        V::SimpleString(s) => out.push(Reply::Status(s)),
        V::Okay => out.push(Reply::Status("OK".into())),
        V::Array(items) | V::Set(items) => {
            for v in items {
                flatten(v, out)?;
            }
        }
        V::Double(d) => out.push(Reply::Binary(d.to_string().into_bytes())),
        V::Boolean(b) => out.push(Reply::Int(i64::from(b))),
        V::VerbatimString { text, .. } => out.push(Reply::Binary(text.into_bytes())),
        V::BigNumber(n) => out.push(Reply::Binary(n)),
        V::ServerError(e) => return Err(Error::Other(format!("{e:?}"))),
        _ => return Err(Error::TypeError),
    }
    Ok(())
}

impl Connection {
    /// A handle to the same multiplexed connection (cheap), for [`ops`]:
    /// an operation runs without borrowing the instance's resource table.
    pub fn handle(&self) -> MultiplexedConnection {
        self.conn.clone()
    }
}

/// The commands, shared by both interface versions, each on a handle of a
/// [`Connection`] (`Connection::handle`).
pub mod ops {
    use super::*;

    /// Publishes `payload` on `channel`.
    pub async fn publish(
        c: MultiplexedConnection,
        channel: String,
        payload: Vec<u8>,
    ) -> Result<(), Error> {
        let mut c = c;
        let _: i64 = redis::cmd("PUBLISH")
            .arg(channel)
            .arg(payload)
            .query_async(&mut c)
            .await?;
        Ok(())
    }

    /// The value of `key`, if any.
    pub async fn get(c: MultiplexedConnection, key: String) -> Result<Option<Vec<u8>>, Error> {
        let mut c = c;
        Ok(redis::cmd("GET").arg(key).query_async(&mut c).await?)
    }

    /// Sets `key` to `value`.
    pub async fn set(c: MultiplexedConnection, key: String, value: Vec<u8>) -> Result<(), Error> {
        let mut c = c;
        let _: redis::Value = redis::cmd("SET")
            .arg(key)
            .arg(value)
            .query_async(&mut c)
            .await?;
        Ok(())
    }

    /// Increments `key` by one; its new value.
    pub async fn incr(c: MultiplexedConnection, key: String) -> Result<i64, Error> {
        let mut c = c;
        Ok(redis::cmd("INCR").arg(key).query_async(&mut c).await?)
    }

    /// Deletes `keys`; how many there were.
    pub async fn del(c: MultiplexedConnection, keys: Vec<String>) -> Result<u32, Error> {
        let mut c = c;
        Ok(redis::cmd("DEL").arg(keys).query_async(&mut c).await?)
    }

    /// Adds `values` to the set `key`; how many were new.
    pub async fn sadd(
        c: MultiplexedConnection,
        key: String,
        values: Vec<String>,
    ) -> Result<u32, Error> {
        let mut c = c;
        Ok(redis::cmd("SADD")
            .arg(key)
            .arg(values)
            .query_async(&mut c)
            .await?)
    }

    /// The members of the set `key`.
    pub async fn smembers(c: MultiplexedConnection, key: String) -> Result<Vec<String>, Error> {
        let mut c = c;
        Ok(redis::cmd("SMEMBERS").arg(key).query_async(&mut c).await?)
    }

    /// Removes `values` from the set `key`; how many were members.
    pub async fn srem(
        c: MultiplexedConnection,
        key: String,
        values: Vec<String>,
    ) -> Result<u32, Error> {
        let mut c = c;
        Ok(redis::cmd("SREM")
            .arg(key)
            .arg(values)
            .query_async(&mut c)
            .await?)
    }

    /// Runs `command` with `args`; its reply flattened into Spin's list of results.
    pub async fn execute(
        c: MultiplexedConnection,
        command: String,
        args: Vec<Param>,
    ) -> Result<Vec<Reply>, Error> {
        let mut c = c;
        let mut cmd = redis::cmd(&command);
        for a in args {
            match a {
                Param::Int(i) => cmd.arg(i),
                Param::Binary(b) => cmd.arg(b),
            };
        }
        let value: redis::Value = cmd.query_async(&mut c).await?;
        let mut out = Vec::new();
        flatten(value, &mut out)?;
        Ok(out)
    }
}
