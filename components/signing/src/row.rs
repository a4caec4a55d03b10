//! Row signatures: an unambiguous encoding of a row, signed with
//! HMAC-SHA256.
//!
//! # Canonical encoding (version 1)
//!
//! ```text
//! "edge-row-v1" 0x00          domain separation
//! u32 BE                      number of columns
//! per column, in order:
//!   'N'                       NULL
//!   'I' i64 BE                integer
//!   'R' u64 BE                real: IEEE-754 bits (-0.0 normalised to 0.0)
//!   'D' u64 BE len, bytes     decimal, as its text ("12.50")
//!   'S' u64 BE len, bytes     string (bytes as stored)
//! ```
//!
//! Every column carries its type and, where variable, its length, so
//! `("ab", "c")` and `("a", "bc")` encode differently, NULL differs from the
//! empty string, and 1 differs from "1". The signature is the lower-case hex
//! HMAC-SHA256 of the encoding; verification compares in constant time.

use hmac::Mac;
use subtle::ConstantTimeEq;

/// One column value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Column<'a> {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Real(f64),
    /// A decimal, as text.
    Decimal(&'a [u8]),
    /// A string or blob.
    Str(&'a [u8]),
}

/// The canonical encoding of a row.
pub fn canonical(columns: &[Column<'_>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + columns.len() * 16);
    out.extend_from_slice(b"edge-row-v1\0");
    out.extend_from_slice(&(columns.len() as u32).to_be_bytes());
    for c in columns {
        match c {
            Column::Null => out.push(b'N'),
            Column::Int(i) => {
                out.push(b'I');
                out.extend_from_slice(&i.to_be_bytes());
            }
            Column::Real(r) => {
                out.push(b'R');
                let r = if *r == 0.0 { 0.0f64 } else { *r };
                out.extend_from_slice(&r.to_bits().to_be_bytes());
            }
            Column::Decimal(d) => {
                out.push(b'D');
                out.extend_from_slice(&(d.len() as u64).to_be_bytes());
                out.extend_from_slice(d);
            }
            Column::Str(s) => {
                out.push(b'S');
                out.extend_from_slice(&(s.len() as u64).to_be_bytes());
                out.extend_from_slice(s);
            }
        }
    }
    out
}

/// Signs a row: 64 lower-case hex digits.
///
/// ```
/// use signing::row::{Column, sign_row, verify_row};
/// let key = [9u8; 32];
/// let sig = sign_row(&key, &[Column::Int(42), Column::Str(b"alice"), Column::Null]);
/// assert!(verify_row(&key, &[Column::Int(42), Column::Str(b"alice"), Column::Null], &sig));
/// assert!(!verify_row(&key, &[Column::Int(43), Column::Str(b"alice"), Column::Null], &sig));
/// ```
pub fn sign_row(key: &[u8], columns: &[Column<'_>]) -> String {
    hex::encode(mac(key, columns))
}

/// Whether `signature` is this row's, compared in constant time.
pub fn verify_row(key: &[u8], columns: &[Column<'_>], signature: &str) -> bool {
    let Ok(given) = hex::decode(signature.trim()) else {
        return false;
    };
    let expected = mac(key, columns);
    given.len() == expected.len() && bool::from(given.ct_eq(&expected))
}

fn mac(key: &[u8], columns: &[Column<'_>]) -> [u8; 32] {
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(&canonical(columns));
    m.finalize().into_bytes().into()
}
