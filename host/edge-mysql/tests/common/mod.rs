//! A MySQL server played by a test: the wire, a greeting, and a client
//! opened against it the way a guest's open is.

#![allow(dead_code)] // Each test target uses its part.

use edge_mysql::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const PASSWORD: &str = "pw-of-the-tenant-longer-than-22-bytes";

/// The server's 20-byte nonce (scramble).
pub const NONCE: [u8; 20] = *b"abcdefghijklmnopqrst";

/// One side of the wire: packets of `len(3) seq(1) payload`.
pub struct Wire(pub TcpStream);

impl Wire {
    pub async fn send(&mut self, seq: u8, payload: &[u8]) {
        let len = (payload.len() as u32).to_le_bytes();
        let mut packet = vec![len[0], len[1], len[2], seq];
        packet.extend_from_slice(payload);
        // The client may already have hung up: that is its answer.
        let _ = self.0.write_all(&packet).await;
    }

    /// The next packet's payload, or `None` once the client hung up.
    pub async fn read(&mut self) -> Option<Vec<u8>> {
        let mut head = [0u8; 4];
        self.0.read_exact(&mut head).await.ok()?;
        let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
        let mut payload = vec![0u8; len];
        self.0.read_exact(&mut payload).await.ok()?;
        Some(payload)
    }

    pub async fn deny(&mut self, seq: u8) {
        let mut err = vec![0xff, 0x15, 0x04, b'#'];
        err.extend_from_slice(b"28000Access denied by the test server");
        self.send(seq, &err).await;
    }
}

/// A protocol-10 greeting offering `plugin`.
pub fn greeting(plugin: &str) -> Vec<u8> {
    // LONG_PASSWORD, FOUND_ROWS, LONG_FLAG, CONNECT_WITH_DB, PROTOCOL_41,
    // TRANSACTIONS, SECURE_CONNECTION; MULTI_STATEMENTS, MULTI_RESULTS,
    // PS_MULTI_RESULTS, PLUGIN_AUTH, PLUGIN_AUTH_LENENC_CLIENT_DATA,
    // DEPRECATE_EOF.
    let caps: u32 = 0xA20F | 0x012F_0000;
    let mut p = vec![10];
    p.extend_from_slice(b"8.0.36\0");
    p.extend_from_slice(&7u32.to_le_bytes());
    p.extend_from_slice(&NONCE[..8]);
    p.push(0);
    p.extend_from_slice(&(caps as u16).to_le_bytes());
    p.push(45); // utf8mb4_general_ci
    p.extend_from_slice(&2u16.to_le_bytes());
    p.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
    p.push(21);
    p.extend_from_slice(&[0; 10]);
    p.extend_from_slice(&NONCE[8..]);
    p.push(0);
    p.extend_from_slice(plugin.as_bytes());
    p.push(0);
    p
}

/// Serves one connection with `script`, and opens a connection to it the
/// way a guest's open does. The open runs on a runtime of its own: if it
/// never returns (a poll computing for minutes) the test fails after a
/// minute instead of hanging, and the stuck thread is left behind.
pub fn open_against<S, F>(script: S) -> Result<(), Error>
where
    S: FnOnce(Wire) -> F + Send + 'static,
    F: std::future::Future<Output = ()> + Send + 'static,
{
    open_with_options(script, "")
}

/// [`open_against`] with `options` (`?name=value&...`) in the address.
pub fn open_with_options<S, F>(script: S, options: &'static str) -> Result<(), Error>
where
    S: FnOnce(Wire) -> F + Send + 'static,
    F: std::future::Future<Output = ()> + Send + 'static,
{
    open_and_run(script, options, |_| async { Ok(()) })
}

/// [`open_with_options`], then `then` with the open connection
/// ([`edge_tests::played`]).
pub fn open_and_run<S, F, T, G>(script: S, options: &'static str, then: T) -> Result<(), Error>
where
    S: FnOnce(Wire) -> F + Send + 'static,
    F: std::future::Future<Output = ()> + Send + 'static,
    T: FnOnce(edge_mysql::Shared) -> G + Send + 'static,
    G: std::future::Future<Output = Result<(), Error>> + Send + 'static,
{
    edge_tests::played::against(
        |stream| script(Wire(stream)),
        move |port| async move {
            let policy = edge_tests::played::loopback("mysql");
            let address = format!("mysql://u:{PASSWORD}@127.0.0.1:{port}/db{options}");
            let conn = edge_mysql::open(policy, &address).await?;
            then(conn.shared().expect("open")).await
        },
    )
}

/// A server that asks for full authentication under caching_sha2_password
/// and answers the client's request for its public key with `key`; then
/// hands the wire to `after` (the encrypted password is its next packet).
pub async fn full_auth_with_key<A, F>(mut wire: Wire, key: Vec<u8>, after: A)
where
    A: FnOnce(Wire) -> F,
    F: std::future::Future<Output = ()>,
{
    wire.send(0, &greeting("caching_sha2_password")).await;
    wire.read().await.expect("the handshake response");
    wire.send(2, &[0x01, 0x04]).await;
    assert_eq!(
        wire.read().await.as_deref(),
        Some(&[0x02][..]),
        "asks for the key"
    );
    wire.send(4, &key).await;
    after(wire).await;
}

pub fn key_packet(pem: &str) -> Vec<u8> {
    let mut packet = vec![0x01];
    packet.extend_from_slice(pem.as_bytes());
    packet
}

pub fn connection_failed(result: Result<(), Error>) -> String {
    match result {
        Err(Error::ConnectionFailed(why)) => why,
        other => panic!("expected connection-failed, got {other:?}"),
    }
}

/// A server that accepts the password (mysql_native_password) and answers
/// the client's first query (the handshake reads `@@wait_timeout`) with
/// `answer`, a packet at a time.
pub async fn accepted_then(mut wire: Wire, answer: Vec<Vec<u8>>) {
    wire.send(0, &greeting("mysql_native_password")).await;
    wire.read().await.expect("the handshake response");
    wire.send(2, &[0, 0, 0, 2, 0, 0, 0]).await;
    let query = wire.read().await.expect("a query");
    assert_eq!(query[0], 3, "COM_QUERY");
    for (seq, packet) in answer.iter().enumerate() {
        wire.send(seq as u8 + 1, packet).await;
    }
    // The client hangs up, or the open times out.
    wire.read().await;
}

/// A column definition (catalog `def`, database `db`, table and column
/// names) of character set `charset`, length 8 and type `kind`.
pub fn column_definition(charset: u8, kind: u8) -> Vec<u8> {
    let mut definition = Vec::new();
    for field in [&b"def"[..], b"db", b"t", b"t", b"c", b"c"] {
        definition.push(field.len() as u8);
        definition.extend_from_slice(field);
    }
    definition.extend_from_slice(&[0x0c, charset, 0, 8, 0, 0, 0, kind, 0, 0, 0, 0, 0]);
    definition
}
