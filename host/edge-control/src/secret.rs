//! Random ids and API tokens.
//!
//! A token is `edge_ID_SECRET`: the id finds its row, the secret (32
//! random bytes) proves it. Only the secret's SHA-256 is stored; a 256-bit
//! random secret needs no slow hash, and the comparison takes the same
//! time whatever matches.

use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// `bytes` random bytes from the OS.
fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    // The OS generator fails only on a broken system; nothing random is
    // better than something guessable.
    getrandom::getrandom(&mut b).expect("the OS random number generator");
    b
}

/// A new id: `prefix` and 16 random hex digits. Ids are random, so one
/// tells nothing about how many others exist.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", hex::encode(random::<8>()))
}

/// A time-ordered id (for the audit log): milliseconds then randomness.
pub fn ordered_id(at_ms: i64) -> String {
    format!("{at_ms:013x}{}", hex::encode(random::<6>()))
}

/// A new API token: what the caller is shown once, and what is stored.
pub struct NewToken {
    /// The principal id inside it.
    pub id: String,
    /// The whole token, `edge_ID_SECRET`.
    pub token: String,
    /// SHA-256 of the secret, hex.
    pub hash: String,
}

/// Makes a token for a new principal.
pub fn new_token() -> NewToken {
    let id = new_id("k");
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random::<32>());
    NewToken {
        token: format!("edge_{id}_{secret}"),
        hash: hash(&secret),
        id,
    }
}

/// 32 random bytes, base64url: a session's cookie secret or CSRF token.
pub fn new_secret() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random::<32>())
}

/// Splits `edge_ID_SECRET` into id and secret.
pub fn parse_token(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix("edge_")?;
    let (id, secret) = rest.split_once('_')?;
    (id.len() == 17 && id.starts_with('k') && !secret.is_empty() && secret.len() <= 64)
        .then_some((id, secret))
}

/// SHA-256 of a token secret, hex.
pub fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Whether `secret` hashes to `stored`, in constant time.
pub fn matches(secret: &str, stored: &str) -> bool {
    hash(secret).as_bytes().ct_eq(stored.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_and_match_only_their_secret() {
        let t = new_token();
        let (id, secret) = parse_token(&t.token).unwrap();
        assert_eq!(id, t.id);
        assert!(matches(secret, &t.hash));
        assert!(!matches("x", &t.hash));
        assert!(parse_token("edge_kshort_x").is_none());
        assert!(parse_token("Bearer abc").is_none());
        assert_ne!(new_token().token, t.token);
    }
}
