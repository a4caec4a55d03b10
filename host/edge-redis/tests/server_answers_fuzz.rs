//! Property test (fuzzing where cargo-fuzz cannot run) of the Redis client
//! against a server that answers at random: the server is the tenant's to
//! choose. Each case plays one connection from a seed: every command the
//! client sends (the handshake's, then each of Spin's operations) is
//! answered with a RESP2 or RESP3 value (simple and bulk strings, errors,
//! numbers, doubles, booleans, big numbers, verbatim strings, nulls, and
//! arrays, sets, maps, pushes and attributes nested to any depth), a
//! value cut short or garbage now and then.
//!
//! Whatever the server says, each operation ends in a result or an error
//! and nothing panics (a panic hook counts panics on every thread).
//!
//! `make test` runs the default number of cases (256); `scripts/fuzz.sh
//! SECONDS` runs them with fresh seeds until the time is up. A failure is
//! saved in `server_answers_fuzz.proptest-regressions`, to check in.
//! `EDGE_FUZZ_SHOW=1` prints each outcome (run with `--nocapture`).

use edge_redis::ops;
use edge_tests::fuzz::{Dice, panics_so_far};
use proptest::prelude::*;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A number as the protocol writes it: mostly small, sometimes at or
/// past an edge, sometimes not a number.
fn number(dice: &mut Dice) -> String {
    match dice.below(12) {
        0 => [
            "-1",
            "0",
            "-0",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "18446744073709551616",
            "1e3",
            "",
            "+5",
            " 3",
            "0x10",
        ][dice.below(12) as usize]
            .to_string(),
        _ => (dice.below(8) as i64 - 2).to_string(),
    }
}

/// A RESP value, up to `depth` aggregates deep.
fn value(dice: &mut Dice, depth: u32, out: &mut Vec<u8>) {
    let aggregate = depth > 0 && dice.below(3) == 0;
    if aggregate {
        let kind = [b'*', b'~', b'%', b'>', b'|'][dice.below(5) as usize];
        let n = dice.below(4);
        out.push(kind);
        out.extend_from_slice(n.to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        // A map's and an attribute's entries are pairs.
        let items = if matches!(kind, b'%' | b'|') {
            2 * n
        } else {
            n
        };
        for _ in 0..items {
            value(dice, depth - 1, out);
        }
        if kind == b'|' {
            // An attribute is followed by the value it annotates.
            value(dice, depth - 1, out);
        }
        return;
    }
    // Garbage one time in 40: a parse error ends the connection, and the
    // operations after it would see only that.
    let pick = dice.below(40);
    match if pick == 39 { 10 } else { pick % 10 } {
        0 => out.extend_from_slice(b"+OK\r\n"),
        1 => {
            out.push(b'-');
            out.extend_from_slice(b"ERR nope\r\n");
        }
        2 => {
            out.push(b':');
            out.extend_from_slice(number(dice).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        3 | 4 => {
            // A bulk string, its length now and then not its own.
            // (Letters, digits, signs and a broken UTF-8 sequence.)
            const BYTES: &[u8] = b"ab1-.e\xc3\x28 ";
            let data: Vec<u8> = (0..dice.below(12))
                .map(|_| BYTES[dice.below(BYTES.len() as u64) as usize])
                .collect();
            let declared = if dice.below(10) == 0 {
                number(dice)
            } else {
                data.len().to_string()
            };
            out.push(if dice.below(6) == 0 { b'=' } else { b'$' });
            out.extend_from_slice(declared.as_bytes());
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(&data);
            out.extend_from_slice(b"\r\n");
        }
        5 => out.extend_from_slice(if dice.below(2) == 0 {
            b"$-1\r\n"
        } else {
            b"_\r\n"
        }),
        6 => {
            out.push(b',');
            let d = ["1.5", "inf", "-inf", "nan", "1e400", "x", ""][dice.below(7) as usize];
            out.extend_from_slice(d.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        7 => out.extend_from_slice([&b"#t\r\n"[..], b"#f\r\n", b"#x\r\n"][dice.below(3) as usize]),
        8 => {
            out.push(b'(');
            out.extend_from_slice(number(dice).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        9 => out.extend_from_slice(b"!5\r\nERR x\r\n"),
        _ => {
            let n = dice.below(8) as usize;
            out.extend(dice.bytes(n));
        }
    }
}

/// One reply: a value (deep now and then), sometimes cut short.
fn reply(dice: &mut Dice) -> Vec<u8> {
    let depth = if dice.below(20) == 0 { 200 } else { 3 };
    let mut out = Vec::new();
    value(dice, depth, &mut out);
    if dice.below(40) == 0 {
        out.truncate(dice.below(out.len() as u64 + 1) as usize);
    }
    out
}

/// Reads one command (an array of bulk strings) the client sent; `None`
/// at the connection's end or after a pause (the client waits for more).
async fn command(stream: &mut TcpStream, seen: &mut Vec<u8>) -> Option<()> {
    // Commands are not parsed: a pause in what the client sends is the end
    // of one (the client writes each command whole and waits).
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_millis(20), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return None,
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
            Err(_) if !seen.is_empty() => return Some(()),
            Err(_) => return None,
        }
    }
}

/// Answers every command from `dice` until the client hangs up or waits.
async fn answering_at_random(mut stream: TcpStream, mut dice: Dice) {
    let mut seen = Vec::new();
    while command(&mut stream, &mut seen).await.is_some() {
        // One reply per command the client sent in that burst.
        let commands = seen.iter().filter(|&&b| b == b'*').count().max(1);
        seen.clear();
        let mut out = Vec::new();
        for _ in 0..commands {
            out.extend(reply(&mut dice));
        }
        if stream.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// `op`, or its timeout after a second (the request's deadline in the host).
async fn within<T>(
    op: impl std::future::Future<Output = T>,
) -> Result<T, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(1), op).await
}

/// Opens a connection to a server answering from `dice` and runs each of
/// Spin's operations on it, each within a second (the request's deadline
/// in the host).
fn session(dice: Dice) -> Vec<String> {
    edge_tests::played::against(
        move |stream| answering_at_random(stream, dice),
        |port| async move {
            let policy = edge_tests::played::loopback("redis");
            let mut seen = Vec::new();
            let conn = match edge_redis::open(policy, &format!("redis://127.0.0.1:{port}")).await {
                Ok(conn) => conn,
                Err(e) => return vec![format!("open: {e:?}")],
            };
            let c = conn.handle();
            let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
            seen.push(format!(
                "get {:?}",
                within(ops::get(c.clone(), "k".into())).await
            ));
            seen.push(format!(
                "set {:?}",
                within(ops::set(c.clone(), "k".into(), b"v".to_vec())).await
            ));
            seen.push(format!(
                "incr {:?}",
                within(ops::incr(c.clone(), "n".into())).await
            ));
            seen.push(format!(
                "del {:?}",
                within(ops::del(c.clone(), s(&["k", "n"]))).await
            ));
            seen.push(format!(
                "sadd {:?}",
                within(ops::sadd(c.clone(), "s".into(), s(&["a", "b"]))).await
            ));
            seen.push(format!(
                "smembers {:?}",
                within(ops::smembers(c.clone(), "s".into())).await
            ));
            seen.push(format!(
                "srem {:?}",
                within(ops::srem(c.clone(), "s".into(), s(&["a"]))).await
            ));
            seen.push(format!(
                "execute {:?}",
                within(ops::execute(
                    c.clone(),
                    "HGETALL".into(),
                    vec![edge_redis::Param::Binary(b"h".to_vec())]
                ))
                .await
                .map(|r| r.map(|replies| replies.len()))
            ));
            seen.push(format!(
                "publish {:?}",
                within(ops::publish(c, "ch".into(), b"m".to_vec())).await
            ));
            seen
        },
    )
}

proptest! {
    /// An open and every operation, answered at random from `seed`.
    #[test]
    fn random_answers_end_in_errors_or_results_never_a_panic(seed in any::<u64>()) {
        let before = panics_so_far();
        let seen = session(Dice(seed | 1));
        if std::env::var_os("EDGE_FUZZ_SHOW").is_some() {
            println!("{seen:#?}");
        }
        prop_assert!(!seen.iter().any(|s| s == "still running after a minute" || s == "the client's task ended"), "{seen:?}");
        prop_assert_eq!(panics_so_far(), before, "the client panicked");
    }
}
