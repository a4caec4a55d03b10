//! Property test (fuzzing where cargo-fuzz cannot run) of the PostgreSQL
//! client against a server that answers at random: the server is the
//! tenant's to choose. Each case plays one session from a seed: the
//! startup (authentication of any kind, parameters, notices), then a
//! query with a parameter and a statement, each described with columns
//! of any types (known, arrays, or looked up in a catalog whose answers
//! are random too), their rows of values mostly of their type's shape,
//! errors, notices and notifications in between, any message cut, grown
//! or replaced by garbage now and then.
//!
//! Whatever the server says, each call ends in a result or an error and
//! nothing panics (a panic hook counts them on every thread).
//!
//! `make test` runs the default number of cases (256); `scripts/fuzz.sh
//! SECONDS` runs them with fresh seeds until the time is up. A failure is
//! saved in `server_answers_fuzz.proptest-regressions`, to check in.
//! `EDGE_FUZZ_SHOW=1` prints each outcome (run with `--nocapture`).

// The error is the interface's own type.
#![allow(clippy::result_large_err)]

mod common;

use common::*;
use edge_postgres::ParameterValue;
use edge_tests::fuzz::{Dice, panics_so_far};
use proptest::prelude::*;
use std::collections::HashMap;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Types a column may have: every type the host decodes, others it hands
/// over as bytes, and ones the client must look up.
const TYPES: [u32; 30] = [
    16, 18, 21, 23, 20, 700, 701, 25, 1043, 1042, 19, 17, 1082, 1083, 1114, 1184, 2950, 3802, 114,
    1700, 1007, 1016, 1231, 1009, 1015, 1186, 600, 1005, 26, 2249,
];

/// A type: mostly one of [`TYPES`], sometimes one to look up.
fn any_type(dice: &mut Dice) -> u32 {
    match dice.below(8) {
        0 => UNKNOWN + dice.below(6) as u32,
        _ => TYPES[dice.below(TYPES.len() as u64) as usize],
    }
}

/// A length: mostly small, sometimes at or past an edge.
fn count(dice: &mut Dice) -> u32 {
    match dice.below(12) {
        0 => [0, 1, 255, 0x7fff, 0xffff, 1 << 20, 0x7fff_ffff, u32::MAX][dice.below(8) as usize],
        _ => dice.below(4) as u32,
    }
}

/// A value's binary form, mostly of its type's shape.
fn value(dice: &mut Dice, t: u32) -> Option<Vec<u8>> {
    // n bytes, or now and then another number of them.
    let width = |dice: &mut Dice, n: usize| {
        let n = match dice.below(10) {
            0 => dice.below(2 * n as u64 + 2) as usize,
            _ => n,
        };
        dice.bytes(n)
    };
    Some(match (dice.below(8), t) {
        (0, _) => return None,
        (1, _) => {
            let n = dice.below(24) as usize;
            dice.bytes(n)
        }
        (_, 16 | 18) => width(dice, 1),
        (_, 21) => width(dice, 2),
        (_, 23 | 700 | 1082 | 26) => width(dice, 4),
        (_, 20 | 701 | 1083 | 1114 | 1184) => width(dice, 8),
        (_, 2950 | 1186) => width(dice, 16),
        (_, 114 | 3802) => {
            let mut text = if t == 3802 { vec![1] } else { Vec::new() };
            let n = dice.below(24);
            text.extend(
                (0..n).map(|_| b"[]{}\",:0123456789.eE-+ tfnaulrs\\"[dice.below(32) as usize]),
            );
            text
        }
        (_, 1700) => numeric(dice),
        (_, 1007 | 1016 | 1231 | 1009 | 1015 | 1005) => array(dice, t),
        (_, _) => {
            let n = dice.below(12) as usize;
            let letters = b"abc xyz\xc3\xa9\xff";
            (0..n)
                .map(|_| letters[dice.below(letters.len() as u64) as usize])
                .collect()
        }
    })
}

/// A numeric: digit count, weight, sign, scale, digits.
fn numeric(dice: &mut Dice) -> Vec<u8> {
    let digits = dice.below(6) as u16;
    let mut raw = Vec::new();
    let weight = match dice.below(6) {
        0 => dice.next() as u16,
        _ => dice.below(12) as u16,
    };
    let sign = [0u16, 0x4000, 0xc000, 0xd000, 0xf000, dice.next() as u16][dice.below(6) as usize];
    let scale = match dice.below(6) {
        0 => dice.next() as u16,
        _ => dice.below(20) as u16,
    };
    for f in [digits, weight, sign, scale] {
        raw.extend_from_slice(&f.to_be_bytes());
    }
    for _ in 0..digits {
        let d = match dice.below(8) {
            0 => dice.next() as u16,
            _ => dice.below(10_000) as u16,
        };
        raw.extend_from_slice(&d.to_be_bytes());
    }
    raw
}

/// An array of `t`'s elements: dimensions, has-nulls, element type, each
/// dimension's length and lower bound, then the elements.
fn array(dice: &mut Dice, t: u32) -> Vec<u8> {
    let element: u32 = match t {
        1007 => 23,
        1016 => 20,
        1231 => 1700,
        1005 => 21,
        _ => 25,
    };
    let dimensions: i32 = [1, 1, 1, 0, 2, 7][dice.below(6) as usize];
    let mut raw = Vec::new();
    raw.extend_from_slice(&dimensions.to_be_bytes());
    raw.extend_from_slice(&(dice.below(2) as i32).to_be_bytes());
    raw.extend_from_slice(&element.to_be_bytes());
    let mut elements = 1u32;
    for _ in 0..dimensions.min(3) {
        let n = count(dice);
        elements = elements.saturating_mul(n);
        raw.extend_from_slice(&n.to_be_bytes());
        raw.extend_from_slice(&(dice.below(3) as i32).to_be_bytes());
    }
    for _ in 0..elements.min(6) {
        match value(dice, element) {
            Some(v) => {
                raw.extend_from_slice(&(v.len() as u32).to_be_bytes());
                raw.extend(v);
            }
            None => raw.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    raw
}

/// A lookup's row (of `pg_type`, `pg_enum` or `pg_attribute`), mostly of
/// its shape.
fn catalog_row(dice: &mut Dice, lookup: Lookup) -> Vec<Option<Vec<u8>>> {
    let oid = |dice: &mut Dice| Some(any_type(dice).to_be_bytes().to_vec());
    let zero_or = |dice: &mut Dice| match dice.below(3) {
        0 => oid(dice),
        _ => Some(vec![0; 4]),
    };
    let mut row = match lookup {
        Lookup::Type(_) => vec![
            Some(b"t".to_vec()),
            Some(vec![b"bepcdrm"[dice.below(7) as usize]]),
            zero_or(dice),
            if dice.below(2) == 0 { None } else { oid(dice) },
            zero_or(dice),
            Some(b"public".to_vec()),
            zero_or(dice),
        ],
        Lookup::Labels(_) => vec![Some(b"label".to_vec())],
        Lookup::Fields(_) => vec![Some(b"f".to_vec()), oid(dice)],
    };
    if dice.below(10) == 0 {
        let i = dice.below(row.len() as u64) as usize;
        row[i] = value(dice, 25);
    }
    row
}

/// A message the server may send at any time: a notice, a parameter, a
/// notification, or (rarely) garbage.
fn aside(dice: &mut Dice) -> (u8, Vec<u8>) {
    match dice.below(10) {
        0..=2 => (b'N', b"SNOTICE\0C01000\0Mnote\0\0".to_vec()),
        3..=5 => (b'S', format!("p{}\0v\0", dice.below(300)).into_bytes()),
        6..=8 => {
            let mut body = 7u32.to_be_bytes().to_vec();
            body.extend_from_slice(b"channel\0payload\0");
            (b'A', body)
        }
        _ => {
            let n = dice.below(12) as usize;
            (dice.next() as u8, dice.bytes(n))
        }
    }
}

/// The startup: the startup message, authentication of any kind (the
/// client has a password), asides, then ready (or not).
async fn start(wire: &mut Wire, dice: &mut Dice) -> Option<()> {
    let len = wire.0.read_u32().await.ok()? as usize;
    let mut startup = vec![0; len.checked_sub(4)?];
    wire.0.read_exact(&mut startup).await.ok()?;
    match dice.below(12) {
        0 => {
            wire.send(b'R', &3u32.to_be_bytes()).await;
            wire.read().await?;
        }
        1 => {
            let mut md5 = 5u32.to_be_bytes().to_vec();
            md5.extend(dice.bytes(4));
            wire.send(b'R', &md5).await;
            wire.read().await?;
        }
        2 => {
            let mut sasl = 10u32.to_be_bytes().to_vec();
            sasl.extend_from_slice(b"SCRAM-SHA-256\0\0");
            wire.send(b'R', &sasl).await;
            wire.read().await?;
            let mut next = 11u32.to_be_bytes().to_vec();
            next.extend_from_slice(match dice.below(3) {
                0 => b"r=x,s=c2FsdA==,i=4096".as_slice(),
                1 => b"r=,s=,i=99999999999",
                _ => b"garbage",
            });
            wire.send(b'R', &next).await;
            wire.read().await?;
        }
        3 => {
            let (tag, body) = aside(dice);
            wire.send(tag, &body).await;
        }
        _ => {}
    }
    wire.send(b'R', &0u32.to_be_bytes()).await;
    for _ in 0..dice.below(4) {
        // (A notification now would be unexpected, rightly.)
        let (tag, body) = aside(dice);
        if tag != b'A' {
            wire.send(tag, &body).await;
        }
    }
    if dice.below(4) == 0 {
        let mut key = 42u32.to_be_bytes().to_vec();
        key.extend(dice.bytes(4));
        wire.send(b'K', &key).await;
    }
    let status = match dice.below(16) {
        0 => dice.next() as u8,
        _ => [b'I', b'T', b'E'][dice.below(3) as usize],
    };
    wire.send(b'Z', &[status]).await;
    Some(())
}

/// Sends `message`, cut or grown now and then.
async fn send(wire: &mut Wire, dice: &mut Dice, tag: u8, mut body: Vec<u8>) {
    match dice.below(24) {
        0 => body.truncate(dice.below(body.len() as u64 + 1) as usize),
        1 => {
            let n = dice.below(8) as usize;
            body.extend(dice.bytes(n));
        }
        _ => {}
    }
    if dice.below(16) == 0 {
        let (tag, body) = aside(dice);
        wire.send(tag, &body).await;
    }
    wire.send(tag, &body).await;
}

async fn answering_at_random(mut wire: Wire, mut dice: Dice) {
    let dice = &mut dice;
    if start(&mut wire, dice).await.is_none() {
        return;
    }
    // Each statement: the lookup it is, or the columns it was described
    // with; the bound portal's rows.
    let mut statements: HashMap<String, Result<Lookup, Vec<u32>>> = HashMap::new();
    let mut parameters: HashMap<String, u32> = HashMap::new();
    let mut bound: Option<Result<Lookup, Vec<u32>>> = None;
    while let Ok(Some((tag, body))) =
        tokio::time::timeout(Duration::from_millis(200), wire.read()).await
    {
        if dice.below(40) == 0 {
            send(&mut wire, dice, b'E', b"SERROR\0C42000\0Mnope\0\0".to_vec()).await;
            continue;
        }
        match tag {
            b'P' => {
                let (name, rest) = cstr(&body);
                let (query, _) = cstr(rest);
                let described = match Lookup::of(&query) {
                    Some((lookup, _)) => Ok(lookup(0)),
                    None => Err((0..dice.below(4)).map(|_| any_type(dice)).collect()),
                };
                // The type of the statement's parameter: the guest's
                // calls pass an int4 to SELECT and a text to UPDATE.
                let parameter = match (&described, query.starts_with("UPDATE")) {
                    (Ok(_), _) => OID,
                    (Err(_), true) => 25,
                    (Err(_), false) => 23,
                };
                parameters.insert(name.clone(), parameter);
                statements.insert(name, described);
                send(&mut wire, dice, b'1', Vec::new()).await;
            }
            b'D' => {
                let (name, _) = cstr(&body[1..]);
                let columns: Vec<u32> = match statements.get(&name) {
                    // (The catalog described in types the client must
                    // look up: refused, or each lookup would prepare its
                    // statement again.)
                    Some(Ok(_)) if dice.below(12) == 0 => {
                        (0..1 + dice.below(7)).map(|_| any_type(dice)).collect()
                    }
                    Some(Ok(lookup)) => Lookup::of(match lookup {
                        Lookup::Type(_) => "pg_catalog.pg_type",
                        Lookup::Labels(_) => "pg_catalog.pg_enum",
                        Lookup::Fields(_) => "pg_catalog.pg_attribute",
                    })
                    .map(|(_, columns)| columns.to_vec())
                    .unwrap_or_default(),
                    Some(Err(columns)) => columns.clone(),
                    None => Vec::new(),
                };
                let params: Vec<u32> = match dice.below(6) {
                    0 => (0..dice.below(3)).map(|_| any_type(dice)).collect(),
                    _ => vec![parameters.get(&name).copied().unwrap_or(23)],
                };
                let mut description = (params.len() as u16).to_be_bytes().to_vec();
                for p in params {
                    description.extend_from_slice(&p.to_be_bytes());
                }
                send(&mut wire, dice, b't', description).await;
                if columns.is_empty() && dice.below(2) == 0 {
                    send(&mut wire, dice, b'n', Vec::new()).await;
                } else {
                    send(&mut wire, dice, b'T', row_description(&columns)).await;
                }
            }
            b'B' => {
                let (_, rest) = cstr(&body);
                let (name, _) = cstr(rest);
                bound = statements.get(&name).cloned();
                send(&mut wire, dice, b'2', Vec::new()).await;
            }
            b'E' => {
                let rows = match dice.below(8) {
                    0 => count(dice).min(64),
                    _ => dice.below(3) as u32,
                };
                for _ in 0..rows {
                    let row: Vec<Option<Vec<u8>>> = match &bound {
                        Some(Ok(lookup)) => catalog_row(dice, *lookup),
                        Some(Err(columns)) => columns.iter().map(|&t| value(dice, t)).collect(),
                        None => Vec::new(),
                    };
                    let row: Vec<Option<&[u8]>> = row.iter().map(Option::as_deref).collect();
                    send(&mut wire, dice, b'D', data_row(&row)).await;
                }
                let tag = [
                    "SELECT 1",
                    "UPDATE 3",
                    "",
                    "x y z",
                    "INSERT 0 99999999999999999999",
                ][dice.below(5) as usize];
                send(&mut wire, dice, b'C', format!("{tag}\0").into_bytes()).await;
            }
            b'C' => send(&mut wire, dice, b'3', Vec::new()).await,
            b'S' => send(&mut wire, dice, b'Z', b"I".to_vec()).await,
            b'X' => return,
            _ => {}
        }
    }
}

proptest! {
    #[test]
    fn random_answers_end_in_errors_or_results_never_a_panic(seed in any::<u64>()) {
        let before = panics_so_far();
        let dice = Dice(seed | 1);
        let outcome = run_against(
            move |wire| answering_at_random(wire, dice),
            |link| async move {
                let calls = async {
                    let rows = edge_postgres::query(
                        link.clone(),
                        "SELECT $1".into(),
                        vec![ParameterValue::Int32(1)],
                        &Default::default(),
                    )
                    .await;
                    if std::env::var_os("EDGE_FUZZ_SHOW").is_some() {
                        println!("query: {:?}", rows.map(|r| (r.columns.len(), r.rows.len())));
                    }
                    edge_postgres::execute(
                        link,
                        "UPDATE t SET a = $1".into(),
                        vec![ParameterValue::Str("x".into())],
                        &Default::default(),
                    )
                    .await
                    .map(drop)
                };
                tokio::time::timeout(Duration::from_secs(2), calls)
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
