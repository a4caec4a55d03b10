//! Passwords: argon2id (the `argon2` crate's defaults: m = 19 MiB, t = 2,
//! p = 1), stored as PHC strings.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

/// A hash of a password nobody has, verified against when a login does not
/// exist so that answer takes as long as a wrong password.
pub const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$ZWRnZS1iaWxsaW5nLWR1bQ$qHLOalruc9F0VZR2rxM3aRR6w/hC4C1ftrxhCEdJ69o";

/// The PHC string of `password` with a salt of 16 random bytes.
pub fn hash(password: &str, salt: &[u8; 16]) -> String {
    let salt = SaltString::encode_b64(salt).expect("16 bytes is a valid salt");
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2 takes any password")
        .to_string()
}

/// Whether `password` matches the PHC string `phc` (false for a malformed one).
pub fn verify(password: &str, phc: &str) -> bool {
    match PasswordHash::new(phc) {
        Ok(h) => Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_and_verify() {
        let h = hash("correct horse battery", &[7; 16]);
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(verify("correct horse battery", &h));
        assert!(!verify("correct horse batterY", &h));
        assert!(!verify("x", "not a hash"));
        // Another salt, another string.
        assert_ne!(h, hash("correct horse battery", &[8; 16]));
    }

    #[test]
    fn dummy_is_a_real_hash() {
        let parsed = PasswordHash::new(DUMMY_HASH).unwrap();
        assert_eq!(parsed.algorithm.as_str(), "argon2id");
        assert_eq!(
            DUMMY_HASH,
            hash("no password at all", b"edge-billing-dum"),
            "regenerate DUMMY_HASH with this hash"
        );
        assert!(!verify("", DUMMY_HASH));
    }
}
