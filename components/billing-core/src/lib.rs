//! The billing app's logic that needs no HTTP or database: everything here
//! is plain functions over values, unit-tested with `cargo test -p
//! billing-core`. The `billing` component (`components/billing`) is the
//! thin layer that reads requests, runs the SQL this crate builds and
//! writes the answers.

pub mod counts;
pub mod csv;
pub mod dates;
pub mod dialect;
pub mod error;
pub mod files;
pub mod page;
pub mod password;
pub mod query;
pub mod seed;
pub mod sign;
pub mod validate;

pub use error::ApiError;

/// A bound SQL parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum Param {
    /// An integer.
    Int(i64),
    /// A string.
    Text(String),
    /// NULL.
    Null,
}

impl From<i64> for Param {
    fn from(v: i64) -> Self {
        Param::Int(v)
    }
}

impl From<&str> for Param {
    fn from(v: &str) -> Self {
        Param::Text(v.to_string())
    }
}

impl From<String> for Param {
    fn from(v: String) -> Self {
        Param::Text(v)
    }
}

impl From<Option<String>> for Param {
    fn from(v: Option<String>) -> Self {
        v.map_or(Param::Null, Param::Text)
    }
}

/// The SHA-256 of a string, in lower-case hex (session secrets are stored so).
pub fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// Constant-time equality of two strings (CSRF tokens, seed tokens).
pub fn ct_eq(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_and_compare() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(ct_eq("token", "token"));
        assert!(!ct_eq("token", "tokem"));
        assert!(!ct_eq("token", "token2"));
        assert!(!ct_eq("", "x"));
    }
}
