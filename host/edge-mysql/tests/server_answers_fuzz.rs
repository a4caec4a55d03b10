//! Property test (fuzzing where cargo-fuzz cannot run) of the MySQL
//! client against a server that answers at random: the server is the
//! tenant's to choose. Each case plays one session from a seed: the
//! handshake's own queries, then a prepared query and a statement, each
//! answered with a result set (text or binary protocol, column types
//! mostly known, values mostly of their type's width), a prepared
//! statement's description, an OK, an error or garbage, any packet cut or
//! grown now and then.
//!
//! Whatever the server says, each call ends in a result or an error and
//! nothing panics (a panic hook counts them on every thread). This found
//! five panics, fixed in `vendor/mysql_async` and `src/lib.rs`.
//!
//! `make test` runs the default number of cases (256); `scripts/fuzz.sh
//! SECONDS` runs them with fresh seeds until the time is up. A failure is
//! saved in `server_answers_fuzz.proptest-regressions`, to check in.
//! `EDGE_FUZZ_SHOW=1` prints each outcome (run with `--nocapture`).

mod common;

use common::*;
use edge_tests::fuzz::{Dice, panics_so_far};
use proptest::prelude::*;
use std::time::Duration;

/// A count: mostly small, sometimes at or past an edge.
fn count(dice: &mut Dice) -> u64 {
    match dice.below(10) {
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
        ][dice.below(9) as usize],
        _ => 1 + dice.below(3),
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
            let n = count(dice).min(64);
            lenenc(out, n);
            out.extend(dice.bytes(n as usize));
        }
    }
}

/// A result set's packets: its column count, definitions, rows (text or
/// binary) and a terminator, each possibly cut or grown.
fn result_set(dice: &mut Dice, binary: bool) -> Vec<Vec<u8>> {
    let columns = count(dice);
    let kinds: Vec<u8> = (0..columns.min(8)).map(|_| column_type(dice)).collect();
    let mut packets = Vec::new();
    let mut header = Vec::new();
    lenenc(&mut header, columns);
    packets.push(header);
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
                    let n = count(dice).min(64);
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
                let columns = count(&mut dice).min(0xffff) as u16;
                // Mostly the two parameters the statement has.
                let params = if dice.below(4) == 0 {
                    count(&mut dice).min(0xffff) as u16
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

proptest! {
    /// An open (whose own queries get random answers) and, if it opens, a
    /// prepared query and a statement, all answered at random from `seed`.
    #[test]
    fn random_answers_end_in_errors_or_results_never_a_panic(seed in any::<u64>()) {
        let before = panics_so_far();
        let dice = Dice(seed | 1);
        let outcome = open_and_run(
            move |wire| answering_at_random(wire, dice),
            "",
            |conn| async move {
                // A server that stops answering is ended by the request's
                // deadline in the host; here by a shorter one.
                let calls = async {
                    let params = vec![
                        edge_mysql::Value::Int32(1),
                        edge_mysql::Value::Str("x".into()),
                    ];
                    let rows = edge_mysql::query(conn.clone(), "SELECT ?, ?".into(), params.clone(), &Default::default()).await;
                    if std::env::var_os("EDGE_FUZZ_SHOW").is_some() {
                        println!("query: {:?}", rows.map(|r| (r.columns.len(), r.rows.len())));
                    }
                    edge_mysql::execute(conn, "UPDATE t SET a = ? WHERE b = ?".into(), params, &Default::default()).await
                };
                tokio::time::timeout(Duration::from_secs(1), calls)
                    .await
                    .unwrap_or(Ok(()))
            },
        );
        if std::env::var_os("EDGE_FUZZ_SHOW").is_some() {
            println!("open and calls: {outcome:?}");
        }
        prop_assert_eq!(panics_so_far(), before, "the client panicked");
    }
}
