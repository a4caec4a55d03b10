//! The text form of a key set, as a secret variable or a key file holds it:
//!
//! ```text
//! # Comments and blank lines are ignored.
//! kid: conf-2026                  (optional: names the PEM block below)
//! -----BEGIN PRIVATE KEY-----     (PKCS#8 Ed25519 or P-256; or a PUBLIC KEY
//! ...                              block, which only verifies)
//! -----END PRIVATE KEY-----
//! hs256 billing BASE64-SECRET     (an HMAC key: id, then the secret in
//!                                  base64 or base64url, at least 32 bytes)
//! ```
//!
//! A PEM block without a `kid:` line gets its RFC 7638 JWK thumbprint as id.
//! The first key that can sign is the signing key unless one is named.

use crate::keys::Key;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use sha2::Digest;

/// Why a key text was refused: the line and the reason.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: {what}")]
pub struct KeyFileError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

/// Parses a key text into keys, in order.
///
/// ```
/// let text = "hs256 billing MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n";
/// let keys = signing::keyfile::parse(text).unwrap();
/// assert_eq!(keys[0].kid(), "billing");
/// ```
pub fn parse(text: &str) -> Result<Vec<Key>, KeyFileError> {
    let mut keys = Vec::new();
    let mut kid: Option<(usize, String)> = None;
    let mut pem: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if let Some((start, block)) = pem.as_mut() {
            block.push_str(line);
            block.push('\n');
            if line.starts_with("-----END ") {
                let start = *start;
                let block = std::mem::take(block);
                pem = None;
                let name = match kid.take() {
                    Some((_, k)) => k,
                    None => thumbprint_kid(&block).ok_or_else(|| KeyFileError {
                        line: start,
                        what: "not a PKCS#8 Ed25519 or P-256 key, nor an SPKI public key".into(),
                    })?,
                };
                let key = Key::from_pem(&name, &block).map_err(|e| KeyFileError {
                    line: start,
                    what: e.to_string(),
                })?;
                keys.push(key);
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix("kid:") {
            kid = Some((n, name.trim().to_string()));
        } else if line.starts_with("-----BEGIN ") {
            pem = Some((n, format!("{line}\n")));
        } else if let Some(rest) = line.strip_prefix("hs256 ") {
            let mut parts = rest.split_whitespace();
            let (Some(name), Some(secret), None) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(KeyFileError {
                    line: n,
                    what: "an HMAC key line is `hs256 KID SECRET` (secret in base64)".into(),
                });
            };
            let bytes = STANDARD
                .decode(secret)
                .or_else(|_| URL_SAFE_NO_PAD.decode(secret.trim_end_matches('=')))
                .map_err(|_| KeyFileError {
                    line: n,
                    what: format!("the secret of key {name:?} is not base64"),
                })?;
            keys.push(Key::hmac(name, &bytes).map_err(|e| KeyFileError {
                line: n,
                what: e.to_string(),
            })?);
        } else {
            return Err(KeyFileError {
                line: n,
                what: format!(
                    "expected `kid: NAME`, a PEM block or `hs256 KID SECRET`, found {:?}",
                    line.chars().take(40).collect::<String>()
                ),
            });
        }
    }
    if let Some((n, _)) = pem {
        return Err(KeyFileError {
            line: n,
            what: "PEM block without its END line".into(),
        });
    }
    if let Some((n, _)) = kid {
        return Err(KeyFileError {
            line: n,
            what: "`kid:` line not followed by a PEM block".into(),
        });
    }
    Ok(keys)
}

/// RFC 7638 thumbprint of a PEM key's public JWK, base64url.
fn thumbprint_kid(pem: &str) -> Option<String> {
    let key = Key::from_pem("tmp", pem).ok()?;
    let jwk = key.public_jwk()?;
    // Required members only, in lexicographic order, no whitespace.
    let canonical = match jwk["kty"].as_str()? {
        "OKP" => format!(
            r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
            jwk["x"].as_str()?
        ),
        "EC" => format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            jwk["x"].as_str()?,
            jwk["y"].as_str()?
        ),
        _ => return None,
    };
    Some(URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(canonical.as_bytes())))
}
