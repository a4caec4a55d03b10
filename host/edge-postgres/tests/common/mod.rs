//! A PostgreSQL server played by a test: the wire, messages, the
//! client's catalog lookups, and a client opened against it the way a
//! guest's open is.

#![allow(dead_code)] // Each test target uses its part.
// The error is the interface's own type.
#![allow(clippy::result_large_err)]

use edge_postgres::{Error, Link};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The builtin types the type lookup's rows are made of.
pub const NAME: u32 = 19;
pub const CHAR: u32 = 18;
pub const OID: u32 = 26;

/// A type the client does not know, so it asks the server about it.
pub const UNKNOWN: u32 = 100_000;

/// One side of the wire: messages of `tag(1) len(4) body`.
pub struct Wire(pub TcpStream);

impl Wire {
    pub async fn send(&mut self, tag: u8, body: &[u8]) {
        let mut message = vec![tag];
        message.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        message.extend_from_slice(body);
        let _ = self.0.write_all(&message).await;
    }

    /// The next message, or `None` once the client hung up.
    pub async fn read(&mut self) -> Option<(u8, Vec<u8>)> {
        let tag = self.0.read_u8().await.ok()?;
        let len = self.0.read_u32().await.ok()? as usize;
        let mut body = vec![0; len.checked_sub(4)?];
        self.0.read_exact(&mut body).await.ok()?;
        Some((tag, body))
    }

    /// The startup message (no tag), then authentication without a
    /// password.
    pub async fn accept(&mut self) {
        self.accept_saying(std::iter::empty()).await;
    }

    /// [`Wire::accept`], saying `messages` before the server is ready.
    pub async fn accept_saying(&mut self, messages: impl Iterator<Item = (u8, Vec<u8>)>) {
        let len = self.0.read_u32().await.unwrap() as usize;
        let mut startup = vec![0; len - 4];
        self.0.read_exact(&mut startup).await.unwrap();
        self.send(b'R', &0u32.to_be_bytes()).await;
        for (tag, body) in messages {
            self.send(tag, &body).await;
        }
        self.send(b'Z', b"I").await;
    }
}

/// A NUL-terminated string at the front of `body`, and the rest.
pub fn cstr(body: &[u8]) -> (String, &[u8]) {
    let end = body.iter().position(|&b| b == 0).unwrap();
    (
        String::from_utf8_lossy(&body[..end]).into(),
        &body[end + 1..],
    )
}

/// A RowDescription of columns of `types`, in binary format.
pub fn row_description(types: &[u32]) -> Vec<u8> {
    let mut body = (types.len() as u16).to_be_bytes().to_vec();
    for (i, t) in types.iter().enumerate() {
        body.extend_from_slice(format!("c{i}\0").as_bytes());
        body.extend_from_slice(&0u32.to_be_bytes()); // table
        body.extend_from_slice(&0u16.to_be_bytes()); // column
        body.extend_from_slice(&t.to_be_bytes());
        body.extend_from_slice(&(-1i16).to_be_bytes()); // length
        body.extend_from_slice(&(-1i32).to_be_bytes()); // modifier
        body.extend_from_slice(&1u16.to_be_bytes()); // binary
    }
    body
}

pub fn data_row(values: &[Option<&[u8]>]) -> Vec<u8> {
    let mut body = (values.len() as u16).to_be_bytes().to_vec();
    for v in values {
        match v {
            Some(v) => {
                body.extend_from_slice(&(v.len() as u32).to_be_bytes());
                body.extend_from_slice(v);
            }
            None => body.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    body
}

/// What the client asks of the server's catalog.
#[derive(Clone, Copy, Debug)]
pub enum Lookup {
    /// `pg_type`: of type `oid`.
    Type(u32),
    /// `pg_enum`: the labels of enum `oid`.
    Labels(u32),
    /// `pg_attribute`: the fields of composite `relid`.
    Fields(u32),
}

/// A lookup of the client's, by its parameter, and its columns' types.
pub type Described = (fn(u32) -> Lookup, &'static [u32]);

impl Lookup {
    /// Which lookup `query` is (`None`: the guest's own statement), the
    /// types of its parameter and of its columns.
    pub fn of(query: &str) -> Option<Described> {
        if query.contains("pg_catalog.pg_type") {
            Some((Lookup::Type, &[NAME, CHAR, OID, OID, OID, NAME, OID]))
        } else if query.contains("pg_catalog.pg_enum") {
            Some((Lookup::Labels, &[NAME]))
        } else if query.contains("pg_catalog.pg_attribute") {
            Some((Lookup::Fields, &[NAME, OID]))
        } else {
            None
        }
    }
}

/// Serves one connection with `script`, opens a connection to it the way
/// a guest's open does and runs a query on it `runs` times, until one
/// fails.
pub fn query_against<S, F>(script: S, runs: usize) -> Result<(), Error>
where
    S: FnOnce(Wire) -> F + Send + 'static,
    F: std::future::Future<Output = ()> + Send + 'static,
{
    run_against(script, move |link| async move {
        for _ in 0..runs {
            edge_postgres::query(
                link.clone(),
                "SELECT 1".into(),
                Vec::new(),
                &Default::default(),
            )
            .await?;
        }
        Ok(())
    })
}

/// Serves one connection with `script`, opens a connection to it the way
/// a guest's open does and hands it to `calls` ([`edge_tests::played`]).
pub fn run_against<S, F, C, G>(script: S, calls: C) -> Result<(), Error>
where
    S: FnOnce(Wire) -> F + Send + 'static,
    F: std::future::Future<Output = ()> + Send + 'static,
    C: FnOnce(Arc<Link>) -> G + Send + 'static,
    G: std::future::Future<Output = Result<(), Error>> + Send + 'static,
{
    edge_tests::played::against(
        |stream| script(Wire(stream)),
        |port| async move {
            let policy = edge_tests::played::loopback("postgres");
            let address = format!("postgres://u:pw@127.0.0.1:{port}/db");
            calls(edge_postgres::open(policy, &address).await?.link()).await
        },
    )
}
