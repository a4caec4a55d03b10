//! A MySQL server is the tenant's to choose, so it may be hostile: what it
//! says during the handshake must end in an error for that open, never in
//! a panic of the host or a poll that computes for minutes (a serving
//! thread stalled for every tenant on it). Each test plays a server that
//! speaks the protocol up to the step it abuses.

use edge_mysql::Error;
use edge_outbound_http::{AddressPolicy, OutboundPolicy};
use rsa::pkcs1::EncodeRsaPublicKey;
use rsa::pkcs8::{EncodePublicKey, LineEnding};
use rsa::{BigUint, Oaep, RsaPrivateKey};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PASSWORD: &str = "pw-of-the-tenant-longer-than-22-bytes";

/// The server's 20-byte nonce (scramble).
const NONCE: [u8; 20] = *b"abcdefghijklmnopqrst";

/// One side of the wire: packets of `len(3) seq(1) payload`.
struct Wire(TcpStream);

impl Wire {
    async fn send(&mut self, seq: u8, payload: &[u8]) {
        let len = (payload.len() as u32).to_le_bytes();
        let mut packet = vec![len[0], len[1], len[2], seq];
        packet.extend_from_slice(payload);
        // The client may already have hung up: that is its answer.
        let _ = self.0.write_all(&packet).await;
    }

    /// The next packet's payload, or `None` once the client hung up.
    async fn read(&mut self) -> Option<Vec<u8>> {
        let mut head = [0u8; 4];
        self.0.read_exact(&mut head).await.ok()?;
        let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
        let mut payload = vec![0u8; len];
        self.0.read_exact(&mut payload).await.ok()?;
        Some(payload)
    }

    async fn deny(&mut self, seq: u8) {
        let mut err = vec![0xff, 0x15, 0x04, b'#'];
        err.extend_from_slice(b"28000Access denied by the test server");
        self.send(seq, &err).await;
    }
}

/// A protocol-10 greeting offering `plugin`.
fn greeting(plugin: &str) -> Vec<u8> {
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
fn open_against<S, F>(script: S) -> Result<(), Error>
where
    S: FnOnce(Wire) -> F + Send + 'static,
    F: std::future::Future<Output = ()> + Send + 'static,
{
    open_and_run(script, |_| async { Ok(()) })
}

/// [`open_against`], then `then` with the open connection.
fn open_and_run<S, F, T, G>(script: S, then: T) -> Result<(), Error>
where
    S: FnOnce(Wire) -> F + Send + 'static,
    F: std::future::Future<Output = ()> + Send + 'static,
    T: FnOnce(edge_mysql::Shared) -> G + Send + 'static,
    G: std::future::Future<Output = Result<(), Error>> + Send + 'static,
{
    let server = tokio::runtime::Runtime::new().unwrap();
    let listener = server.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    server.spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        script(Wire(stream)).await;
    });
    let client = tokio::runtime::Runtime::new().unwrap();
    let (done, result) = std::sync::mpsc::channel();
    client.spawn(async move {
        let policy = OutboundPolicy::new(
            vec![edge_config::OutboundRule::parse("mysql://127.0.0.1:*").unwrap()],
            "t/c",
        )
        .with_addresses(AddressPolicy::new(
            vec!["127.0.0.0/8".parse().unwrap()],
            Default::default(),
        ));
        let address = format!("mysql://u:{PASSWORD}@127.0.0.1:{port}/db");
        let result = match edge_mysql::open(policy, &address).await {
            Ok(conn) => then(conn.shared().expect("open")).await,
            Err(e) => Err(e),
        };
        let _ = done.send(result);
    });
    let result = result.recv_timeout(Duration::from_secs(60));
    client.shutdown_background();
    server.shutdown_background();
    match result {
        Ok(result) => result,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the open was still running after a minute")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("the open panicked")
        }
    }
}

/// A server that asks for full authentication under caching_sha2_password
/// and answers the client's request for its public key with `key`; then
/// hands the wire to `after` (the encrypted password is its next packet).
async fn full_auth_with_key<A, F>(mut wire: Wire, key: Vec<u8>, after: A)
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

fn key_packet(pem: &str) -> Vec<u8> {
    let mut packet = vec![0x01];
    packet.extend_from_slice(pem.as_bytes());
    packet
}

fn connection_failed(result: Result<(), Error>) -> String {
    match result {
        Err(Error::ConnectionFailed(why)) => why,
        other => panic!("expected connection-failed, got {other:?}"),
    }
}

#[test]
fn the_password_goes_to_the_server_encrypted_with_its_key() {
    let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).unwrap();
    let pem = private
        .to_public_key()
        .to_public_key_pem(LineEnding::LF)
        .unwrap();
    let (seen, received) = std::sync::mpsc::channel();
    let result = open_against(move |wire| {
        full_auth_with_key(wire, key_packet(&pem), move |mut wire| async move {
            let sealed = wire.read().await.expect("the encrypted password");
            let _ = seen.send(sealed);
            wire.deny(6).await;
        })
    });
    assert!(connection_failed(result).contains("Access denied by the test server"));
    let sealed = received.recv().unwrap();
    let opened = private.decrypt(Oaep::new::<sha1::Sha1>(), &sealed).unwrap();
    let password: Vec<u8> = opened
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ NONCE[i % NONCE.len()])
        .collect();
    assert_eq!(password, format!("{PASSWORD}\0").as_bytes());
}

#[test]
fn a_key_in_pkcs1_form_is_taken_too() {
    let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).unwrap();
    let pem = private
        .to_public_key()
        .to_pkcs1_pem(LineEnding::LF)
        .unwrap();
    let result = open_against(move |wire| {
        full_auth_with_key(wire, key_packet(&pem), |mut wire| async move {
            wire.read().await.expect("the encrypted password");
            wire.deny(6).await;
        })
    });
    assert!(connection_failed(result).contains("Access denied by the test server"));
}

/// A PKCS#1 public key in PEM with the given modulus and exponent bytes.
fn pkcs1_pem(modulus: &[u8], exponent: &[u8]) -> String {
    let key = rsa::RsaPublicKey::new_unchecked(
        BigUint::from_bytes_be(modulus),
        BigUint::from_bytes_be(exponent),
    );
    key.to_pkcs1_pem(LineEnding::LF).unwrap()
}

#[test]
fn a_huge_key_is_refused_before_any_arithmetic() {
    // A 2 MiB modulus (16.7 million bits): one modular exponentiation with
    // it takes the client's thread for many minutes.
    let mut modulus = vec![0xc3u8; 2 << 20];
    modulus[(2 << 20) - 1] |= 1;
    let pem = pkcs1_pem(&modulus, &[1, 0, 1]);
    let why = connection_failed(open_against(move |wire| {
        full_auth_with_key(wire, key_packet(&pem), |_| async {})
    }));
    assert!(why.contains("RSA public key"), "{why}");
    assert!(why.contains("4096"), "{why}");
}

#[test]
fn a_huge_exponent_is_refused() {
    let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).unwrap();
    let modulus = rsa::traits::PublicKeyParts::n(&private).to_bytes_be();
    let pem = pkcs1_pem(&modulus, &[0xff; 4096]);
    let why = connection_failed(open_against(move |wire| {
        full_auth_with_key(wire, key_packet(&pem), |_| async {})
    }));
    assert!(why.contains("RSA public key"), "{why}");
}

#[test]
fn a_key_that_is_not_pem_is_an_error() {
    for key in [
        key_packet("not a key at all"),
        key_packet("-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----\n"),
        key_packet("-----BEGIN RSA PUBLIC KEY-----\nMAA=\n-----END RSA PUBLIC KEY-----\n"),
        vec![0x01, 0xff, 0xfe],
        vec![0x01],
        vec![],
    ] {
        let shown = String::from_utf8_lossy(&key).into_owned();
        let why = connection_failed(open_against(move |wire| {
            full_auth_with_key(wire, key, |_| async {})
        }));
        assert!(why.contains("RSA public key"), "{shown:?}: {why}");
    }
}

#[test]
fn a_key_too_small_for_the_password_is_an_error() {
    // OAEP with SHA-1 carries at most k - 42 bytes: 22 for a 512-bit key.
    let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 512).unwrap();
    let pem = private
        .to_public_key()
        .to_pkcs1_pem(LineEnding::LF)
        .unwrap();
    let why = connection_failed(open_against(move |wire| {
        full_auth_with_key(wire, key_packet(&pem), |_| async {})
    }));
    assert!(why.contains("too long"), "{why}");
}

#[test]
fn a_switch_to_caching_sha2_without_a_nonce_is_an_error() {
    let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).unwrap();
    let pem = private
        .to_public_key()
        .to_pkcs1_pem(LineEnding::LF)
        .unwrap();
    let why = connection_failed(open_against(move |mut wire| async move {
        wire.send(0, &greeting("mysql_native_password")).await;
        wire.read().await.expect("the handshake response");
        wire.send(2, b"\xfecaching_sha2_password\0").await;
        wire.read().await.expect("the scramble");
        wire.send(4, &[0x01, 0x04]).await;
        if wire.read().await.is_some() {
            wire.send(6, &key_packet(&pem)).await;
            wire.read().await;
        }
    }));
    assert!(why.contains("nonce"), "{why}");
}

#[test]
fn a_switch_to_ed25519_is_answered() {
    let (seen, received) = std::sync::mpsc::channel();
    let why = connection_failed(open_against(move |mut wire| async move {
        wire.send(0, &greeting("mysql_native_password")).await;
        wire.read().await.expect("the handshake response");
        let mut switch = b"\xfeclient_ed25519\0".to_vec();
        switch.extend_from_slice(&[7; 32]);
        wire.send(2, &switch).await;
        let _ = seen.send(wire.read().await);
        wire.deny(4).await;
    }));
    assert!(why.contains("Access denied by the test server"), "{why}");
    let signature = received.recv().unwrap().expect("a signature");
    assert_eq!(signature.len(), 64);
}

#[test]
fn a_switch_to_parsec_is_refused_in_words() {
    let why = connection_failed(open_against(|mut wire| async move {
        wire.send(0, &greeting("mysql_native_password")).await;
        wire.read().await.expect("the handshake response");
        let mut switch = b"\xfeparsec\0".to_vec();
        switch.extend_from_slice(&[7; 32]);
        wire.send(2, &switch).await;
        if wire.read().await.is_some() {
            let mut salt = b"P\x14".to_vec();
            salt.extend_from_slice(&[9; 18]);
            wire.send(4, &salt).await;
            wire.read().await;
        }
    }));
    assert!(why.contains("parsec"), "{why}");
}

/// A server that accepts the password (mysql_native_password) and answers
/// the client's first query (the handshake reads `@@wait_timeout`) with
/// `answer`, a packet at a time.
async fn accepted_then(mut wire: Wire, answer: Vec<Vec<u8>>) {
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

#[test]
fn a_result_of_a_trillion_columns_is_refused() {
    // The count was the capacity of a vector: 2^40 packets' worth aborted
    // the process (an allocation that cannot be made).
    let mut count = vec![0xfe];
    count.extend_from_slice(&(1u64 << 40).to_le_bytes());
    let why = connection_failed(open_against(|wire| accepted_then(wire, vec![count])));
    assert!(why.contains("1099511627776 columns"), "{why}");
}

#[test]
fn column_definitions_are_held_to_the_packet_limit_together() {
    // 65,535 column definitions of 64 KiB each: 4 GiB held before the
    // first row. They may take max_allowed_packet (16 MiB) together.
    let mut answer = vec![vec![0xfc, 0xff, 0xff]];
    let mut definition = Vec::new();
    for field in [&b"def"[..], b"db", b"t", b"t", b"c", b"c"] {
        definition.push(field.len() as u8);
        definition.extend_from_slice(field);
    }
    definition.extend_from_slice(&[0x0c, 45, 0, 255, 0, 0, 0, 253, 0, 0, 0, 0, 0]);
    definition.resize(64 << 10, b' ');
    answer.extend(std::iter::repeat_n(definition, 300));
    let why = connection_failed(open_against(|wire| accepted_then(wire, answer)));
    assert!(why.contains("column definitions"), "{why}");
}

/// A small deterministic generator (xorshift64*), so a failing case can be
/// replayed by its seed.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// A count: mostly small, sometimes at or past an edge.
    fn count(&mut self) -> u64 {
        match self.below(10) {
            0 => [
                0,
                250,
                251,
                252,
                0xffff,
                0x1_0000,
                1 << 24,
                1 << 40,
                u64::MAX,
            ][self.below(9) as usize],
            _ => 1 + self.below(3),
        }
    }
}

fn lenenc(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=250 => out.push(n as u8),
        251..=0xffff => {
            out.push(0xfc);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xff_ffff => {
            out.push(0xfd);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

/// A column definition of type `kind` (a known type mostly, any byte
/// sometimes), with random names, character set and flags.
fn column_definition(dice: &mut Dice, kind: u8) -> Vec<u8> {
    // The catalog is always "def" (anything else is refused at once).
    let mut p = b"\x03def".to_vec();
    for _ in 0..5 {
        let n = dice.below(6);
        lenenc(&mut p, n);
        p.extend(dice.bytes(n as usize));
    }
    p.push(0x0c);
    p.extend_from_slice(&[dice.below(256) as u8, dice.below(2) as u8 * 63]);
    p.extend(dice.bytes(4));
    p.push(kind);
    p.extend(dice.bytes(5));
    p
}

const TYPES: [u8; 23] = [
    0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 15, 16, 245, 246, 247, 248, 249, 252, 253, 254,
];

fn column_type(dice: &mut Dice) -> u8 {
    if dice.below(12) == 0 {
        dice.next() as u8
    } else {
        TYPES[dice.below(TYPES.len() as u64) as usize]
    }
}

/// A value of type `kind` in the binary protocol: its own width mostly,
/// any length sometimes.
fn binary_value(dice: &mut Dice, kind: u8, out: &mut Vec<u8>) {
    let width = match kind {
        1 => Some(1),
        2 | 13 => Some(2),
        3 | 9 | 4 => Some(4),
        5 | 8 => Some(8),
        // Dates and times: a length byte of a known form, then its bytes.
        7 | 10 | 12 => {
            let n = [0u8, 4, 7, 11][dice.below(4) as usize];
            out.push(n);
            Some(n as usize)
        }
        11 => {
            let n = [0u8, 8, 12][dice.below(3) as usize];
            out.push(n);
            Some(n as usize)
        }
        _ => None,
    };
    match width {
        Some(n) if dice.below(10) != 0 => out.extend(dice.bytes(n)),
        _ => {
            let n = dice.count().min(64);
            lenenc(out, n);
            out.extend(dice.bytes(n as usize));
        }
    }
}

/// A result set's packets: its column count, definitions, rows (text or
/// binary) and a terminator, each possibly cut or grown.
fn result_set(dice: &mut Dice, binary: bool) -> Vec<Vec<u8>> {
    let columns = dice.count();
    let kinds: Vec<u8> = (0..columns.min(8)).map(|_| column_type(dice)).collect();
    let mut packets = Vec::new();
    let mut count = Vec::new();
    lenenc(&mut count, columns);
    packets.push(count);
    for &kind in &kinds {
        packets.push(column_definition(dice, kind));
    }
    for _ in 0..dice.below(4) {
        let mut row = Vec::new();
        if binary {
            // A header, the NULL bitmap (offset by two bits), the values.
            row.push(0);
            let mut nulls = vec![0u8; kinds.len().div_ceil(8).max((kinds.len() + 9) / 8)];
            for i in 0..kinds.len() {
                if dice.below(5) == 0 {
                    nulls[(i + 2) / 8] |= 1 << ((i + 2) % 8);
                }
            }
            row.extend(&nulls);
            for (i, &kind) in kinds.iter().enumerate() {
                if nulls[(i + 2) / 8] & (1 << ((i + 2) % 8)) == 0 {
                    binary_value(dice, kind, &mut row);
                }
            }
        } else {
            for _ in 0..kinds.len() {
                if dice.below(5) == 0 {
                    row.push(0xfb);
                } else {
                    let n = dice.count().min(64);
                    lenenc(&mut row, n);
                    let digits: Vec<u8> = (0..n)
                        .map(|_| b"0123456789-.:eE "[dice.below(16) as usize])
                        .collect();
                    row.extend(digits);
                }
            }
        }
        packets.push(row);
    }
    packets.push(vec![0xfe, 0, 0, dice.below(256) as u8, 0, 0, 0]);
    for packet in packets.iter_mut() {
        match dice.below(16) {
            0 => packet.truncate(dice.below(packet.len() as u64 + 1) as usize),
            1 => {
                let n = dice.below(8) as usize;
                packet.extend(dice.bytes(n));
            }
            _ => {}
        }
    }
    packets
}

/// A server that accepts the password and answers every command from
/// `dice`: results, prepared statements, OKs, errors, garbage.
async fn answering_at_random(mut wire: Wire, mut dice: Dice) {
    wire.send(0, &greeting("mysql_native_password")).await;
    if wire.read().await.is_none() {
        return;
    }
    wire.send(2, &[0, 0, 0, 2, 0, 0, 0]).await;
    // A client left waiting for more than was sent gets the end of the
    // connection soon, not a wait for its timeout.
    while let Ok(Some(command)) = tokio::time::timeout(Duration::from_millis(50), wire.read()).await
    {
        let answer = match command.first() {
            // COM_STMT_CLOSE and COM_QUIT have no answer.
            Some(0x19) | Some(0x01) => continue,
            Some(0x16) => {
                let columns = dice.count().min(0xffff) as u16;
                // Mostly the two parameters the statement has.
                let params = if dice.below(4) == 0 {
                    dice.count().min(0xffff) as u16
                } else {
                    2
                };
                let mut ok = vec![0];
                ok.extend_from_slice(&(dice.below(4) as u32).to_le_bytes());
                ok.extend_from_slice(&columns.to_le_bytes());
                ok.extend_from_slice(&params.to_le_bytes());
                ok.extend_from_slice(&[0, 0, 0]);
                let mut packets = vec![ok];
                for _ in 0..(params.min(8) + columns.min(8)) {
                    let kind = column_type(&mut dice);
                    packets.push(column_definition(&mut dice, kind));
                }
                packets
            }
            Some(0x17) => result_set(&mut dice, true),
            _ => match dice.below(6) {
                0 => vec![vec![0, 0, 0, 2, 0, 0, 0]],
                1 => vec![{
                    let mut err = vec![0xff, 0x15, 0x04, b'#'];
                    err.extend_from_slice(b"42000nope");
                    err
                }],
                2 => vec![{
                    let n = dice.below(16) as usize;
                    dice.bytes(n)
                }],
                _ => result_set(&mut dice, false),
            },
        };
        for (seq, packet) in answer.iter().enumerate() {
            wire.send(seq as u8 + 1, packet).await;
        }
    }
}

#[test]
fn random_answers_end_in_errors_or_results_never_a_panic() {
    // Each case: an open (whose own queries get random answers) and, if
    // it opens, a prepared query and a statement, answered at random.
    // edge-mysql turns a panic of the client into an error for the call,
    // so panics are counted where they happen: each is a bug to fix.
    static SEED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    static PANICKED: std::sync::Mutex<Vec<u64>> = std::sync::Mutex::new(Vec::new());
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICKED
            .lock()
            .unwrap()
            .push(SEED.load(std::sync::atomic::Ordering::SeqCst));
        report(info);
    }));
    for seed in 1..=400u64 {
        SEED.store(seed, std::sync::atomic::Ordering::SeqCst);
        let dice = Dice(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let _ = open_and_run(
            move |wire| answering_at_random(wire, dice),
            |conn| async move {
                // A server that stops answering is ended by the request's
                // deadline in the host; here by a shorter one.
                let calls = async {
                    let params = vec![
                        edge_mysql::Value::Int32(1),
                        edge_mysql::Value::Str("x".into()),
                    ];
                    let _ =
                        edge_mysql::query(conn.clone(), "SELECT ?, ?".into(), params.clone()).await;
                    edge_mysql::execute(conn, "UPDATE t SET a = ? WHERE b = ?".into(), params).await
                };
                tokio::time::timeout(Duration::from_secs(1), calls)
                    .await
                    .unwrap_or(Ok(()))
            },
        );
    }
    let panicked = PANICKED.lock().unwrap().clone();
    assert!(
        panicked.is_empty(),
        "the client panicked at seeds {panicked:?}"
    );
}
