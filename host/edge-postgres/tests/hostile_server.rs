//! A tenant's PostgreSQL server is the tenant's: whatever it answers, the
//! host's client ends in a value or an error for that call, holding
//! bounded memory, and the process goes on. Each test plays a server
//! that abuses one step of the protocol.

// The error is the interface's own type.
#![allow(clippy::result_large_err)]

mod common;

use common::*;
use edge_postgres::{Error, QueryError};
use std::collections::HashMap;

/// The rows that answer a lookup.
type Answer = fn(Lookup) -> Vec<Vec<Option<Vec<u8>>>>;

/// A server that describes the `n`th statement it is asked to prepare
/// as one column of type `UNKNOWN + n`, and answers each lookup of the
/// client in its catalog with `answer`'s rows; its lookup statements with
/// their columns, or with one of type `catalog` if given.
async fn serve_types(mut wire: Wire, answer: Answer, catalog: Option<u32>) {
    wire.accept().await;
    let mut statements = HashMap::new();
    let mut guests = 0;
    let mut bound = None;
    while let Some((tag, body)) = wire.read().await {
        match tag {
            b'P' => {
                let (name, rest) = cstr(&body);
                let (query, _) = cstr(rest);
                let described = Lookup::of(&query).ok_or_else(|| {
                    guests += 1;
                    UNKNOWN + (guests << 16)
                });
                statements.insert(name, described);
                wire.send(b'1', b"").await;
            }
            b'D' => {
                let (name, _) = cstr(&body[1..]);
                match statements[&name] {
                    Ok((_, columns)) => {
                        wire.send(b't', &[0, 1, 0, 0, 0, OID as u8]).await;
                        let columns = catalog.map_or(columns.to_vec(), |t| vec![t]);
                        wire.send(b'T', &row_description(&columns)).await;
                    }
                    Err(column) => {
                        wire.send(b't', &[0, 0]).await;
                        wire.send(b'T', &row_description(&[column])).await;
                    }
                }
            }
            b'B' => {
                let (_, rest) = cstr(&body);
                let (name, rest) = cstr(rest);
                let formats = u16::from_be_bytes([rest[0], rest[1]]) as usize;
                let params = &rest[2 + 2 * formats..];
                bound = statements[&name].ok().map(|(lookup, _)| {
                    lookup(u32::from_be_bytes(params[6..10].try_into().unwrap()))
                });
                wire.send(b'2', b"").await;
            }
            b'E' => {
                for row in bound.map(answer).unwrap_or_default() {
                    let row: Vec<Option<&[u8]>> = row.iter().map(Option::as_deref).collect();
                    wire.send(b'D', &data_row(&row)).await;
                }
                wire.send(b'C', b"SELECT 1\0").await;
            }
            b'C' => wire.send(b'3', b"").await,
            b'S' => wire.send(b'Z', b"I").await,
            b'X' => return,
            _ => {}
        }
    }
}

fn oid(oid: u32) -> Option<Vec<u8>> {
    Some(oid.to_be_bytes().to_vec())
}

/// A lookup's row of a type of kind `kind` (`b`ase, `e`num, `c`omposite)
/// named `name` in schema `public`, with element type `element` and
/// relation `relid` (0: none).
fn type_row(name: &[u8], kind: u8, element: u32, relid: u32) -> Vec<Option<Vec<u8>>> {
    vec![
        Some(name.to_vec()),
        Some(vec![kind]),
        oid(element),
        None,
        oid(0),
        Some(b"public".to_vec()),
        oid(relid),
    ]
}

/// Runs `statements` on one connection to a server answering lookups
/// with `answer`: the error the last ends in.
fn error_of(answer: Answer, statements: usize) -> String {
    let result = query_against(move |wire| serve_types(wire, answer, None), statements);
    match result {
        Err(Error::QueryFailed(QueryError::Text(e))) => e,
        other => panic!("{other:?}"),
    }
}

/// Each type an array of the next: the client looked them up one inside
/// the other without end, its future's polls nesting deeper each time
/// until the thread's stack overflowed and the process died.
#[test]
fn types_nested_without_end_are_an_error() {
    let e = error_of(
        |lookup| match lookup {
            Lookup::Type(oid) => vec![type_row(b"nested", b'b', oid + 1, 0)],
            _ => Vec::new(),
        },
        1,
    );
    assert_eq!(e, "the server's types nest more than 32 deep");
}

/// An enum of endless labels: the client held them all.
#[test]
fn an_enum_of_endless_labels_is_an_error() {
    let e = error_of(
        |lookup| match lookup {
            Lookup::Type(_) => vec![type_row(b"endless", b'e', 0, 0)],
            Lookup::Labels(oid) => {
                assert_eq!(oid, UNKNOWN + (1 << 16), "the enum's labels");
                vec![vec![Some(vec![b'x'; 63])]; 200_000]
            }
            Lookup::Fields(_) => Vec::new(),
        },
        1,
    );
    assert_eq!(
        e,
        "the server's type names took more than 4194304 bytes on one connection"
    );
}

#[test]
fn a_composite_of_more_fields_than_postgresql_allows_is_an_error() {
    let e = error_of(
        |lookup| match lookup {
            Lookup::Type(oid) => vec![type_row(b"wide", b'c', 0, oid)],
            Lookup::Labels(_) => Vec::new(),
            Lookup::Fields(_) => vec![vec![Some(b"f".to_vec()), oid(23)]; 1665],
        },
        1,
    );
    assert_eq!(
        e,
        "the server described a composite type of more than 1664 fields"
    );
}

/// Every statement a composite of 1,664 fields of types never seen
/// before: each looked up is kept for the connection's life.
#[test]
fn types_looked_up_are_bounded_per_connection() {
    let e = error_of(
        |lookup| match lookup {
            Lookup::Type(oid) if (oid - UNKNOWN) & 0xffff != 0 => {
                vec![type_row(b"int", b'b', 0, 0)]
            }
            Lookup::Type(oid) => vec![type_row(b"wide", b'c', 0, oid)],
            Lookup::Labels(_) => Vec::new(),
            Lookup::Fields(relid) => (1..=1664)
                .map(|i| vec![Some(b"f".to_vec()), oid(relid + i)])
                .collect(),
        },
        7,
    );
    assert_eq!(
        e,
        "the server described more than 10000 types on one connection"
    );
}

/// A ParameterStatus message: `name` is `value`.
fn parameter(name: &str, value: &str) -> (u8, Vec<u8>) {
    (b'S', format!("{name}\0{value}\0").into_bytes())
}

/// The error an open against a server saying `messages` before it is
/// ready ends in.
fn open_error(messages: fn() -> Vec<(u8, Vec<u8>)>) -> String {
    let result = query_against(
        move |mut wire| async move {
            wire.accept_saying(messages().into_iter()).await;
            while wire.read().await.is_some() {}
        },
        0,
    );
    match result {
        Err(Error::ConnectionFailed(e)) => e,
        other => panic!("{other:?}"),
    }
}

/// A server reports its parameters as it likes, and all were kept for the
/// connection's life: distinct names without end filled the host's memory.
#[test]
fn parameters_without_end_are_an_error() {
    let e = open_error(|| {
        (0..100_000)
            .map(|i| parameter(&format!("p{i}"), "v"))
            .collect()
    });
    assert_eq!(e, "the server reported more than 256 parameters");
    let e = open_error(|| vec![parameter("one", &"v".repeat(100_000))]);
    assert_eq!(e, "the server's parameters took more than 65536 bytes");
}

/// The same once the connection is ready: the connection ends, and the
/// query says why.
#[test]
fn parameters_reported_later_are_held_to_the_same_bounds() {
    let result = query_against(
        |mut wire| async move {
            wire.accept().await;
            wire.read().await;
            for i in 0..100_000 {
                let (tag, body) = parameter(&format!("p{i}"), "v");
                wire.send(tag, &body).await;
            }
            while wire.read().await.is_some() {}
        },
        1,
    );
    assert!(
        matches!(result, Err(Error::QueryFailed(QueryError::Text(ref e))) if e == "the server reported more than 256 parameters"),
        "{result:?}"
    );
}

/// Notices before the server is ready are kept until it is.
#[test]
fn notices_without_end_before_ready_are_an_error() {
    let e = open_error(|| {
        let notice = b"SNOTICE\0C00000\0Mhello\0\0".to_vec();
        vec![(b'N', notice); 100_000]
    });
    assert_eq!(
        e,
        "the server sent more than 1000 notices or 1048576 bytes of them before it was ready"
    );
    let e = open_error(|| {
        let mut notice = b"SNOTICE\0C00000\0M".to_vec();
        notice.extend(vec![b'n'; 200_000]);
        notice.extend_from_slice(b"\0\0");
        vec![(b'N', notice); 10]
    });
    assert_eq!(
        e,
        "the server sent more than 1000 notices or 1048576 bytes of them before it was ready"
    );
}

/// The client's lookups in the catalog described with a type it must
/// look up itself: each lookup prepared its statement again, without end.
#[test]
fn a_catalog_described_with_unknown_types_is_an_error() {
    let result = query_against(|wire| serve_types(wire, |_| Vec::new(), Some(UNKNOWN)), 1);
    assert!(
        matches!(result, Err(Error::QueryFailed(QueryError::Text(ref e)))
            if e == "the server described its catalog with a type it did not name (100000)"),
        "{result:?}"
    );
}
