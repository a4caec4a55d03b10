//! (edge) The password of a `caching_sha2_password` full authentication
//! over a connection without TLS, sealed with the server's RSA public key.
//!
//! The key comes from the server, which may be hostile. mysql_common's
//! `crypto::encrypt` panics on anything but a well-formed PEM key and
//! computes with any modulus and exponent: a 4 MiB packet holds a key
//! whose one exponentiation takes a thread for many minutes. Here the key
//! is parsed by RustCrypto's `rsa` (PKCS#8 `PUBLIC KEY` or PKCS#1 `RSA
//! PUBLIC KEY`), held to its limits (a modulus of at most 4096 bits, an
//! exponent below 2^33) and every failure is an error in words.

use base64::Engine;
use rsa::pkcs1::der::Decode;
use rsa::traits::PublicKeyParts;
use rsa::{BigUint, Oaep, RsaPublicKey};

use crate::error::DriverError;

/// `pass` (already masked with the nonce) sealed with RSA-OAEP (SHA-1, as
/// the server expects) under the key `pem`.
pub(crate) fn encrypt(pass: &[u8], pem: &[u8]) -> Result<Vec<u8>, DriverError> {
    let key = public_key(pem).map_err(|why| DriverError::Refused {
        why: format!("the server's RSA public key {why}"),
    })?;
    key.encrypt(&mut rsa::rand_core::OsRng, Oaep::new::<sha1::Sha1>(), pass)
        .map_err(|e| DriverError::Refused {
            why: match e {
                rsa::Error::MessageTooLong => format!(
                    "the password is too long for the server's {}-bit RSA public key (at most {} bytes)",
                    key.n().bits(),
                    key.size().saturating_sub(42).saturating_sub(1),
                ),
                e => format!("sealing the password with the server's RSA public key failed: {e}"),
            },
        })
}

/// The key in `pem`, or why it cannot be used (said after "the server's
/// RSA public key").
fn public_key(pem: &[u8]) -> Result<RsaPublicKey, String> {
    if pem.iter().all(|b| b.is_ascii_whitespace() || *b == 0) {
        return Err("is missing: the server sent an empty answer".into());
    }
    let (label, der) = pem_document(pem).map_err(|why| {
        format!("is not a PEM document (-----BEGIN PUBLIC KEY----- or -----BEGIN RSA PUBLIC KEY-----): {why}")
    })?;
    let pkcs1 = match label.as_str() {
        "RSA PUBLIC KEY" => der,
        "PUBLIC KEY" => {
            let info = rsa::pkcs8::SubjectPublicKeyInfoRef::from_der(&der)
                .map_err(|e| format!("is not a valid SubjectPublicKeyInfo: {e}"))?;
            if info.algorithm.oid != rsa::pkcs1::ALGORITHM_OID {
                return Err(format!("is not an RSA key (algorithm {})", info.algorithm.oid));
            }
            info.subject_public_key
                .as_bytes()
                .ok_or("has a bit string that is not whole bytes")?
                .to_vec()
        }
        other => return Err(format!("is a PEM document of {other:?}, not a public key")),
    };
    let key = rsa::pkcs1::RsaPublicKey::from_der(&pkcs1)
        .map_err(|e| format!("is not a valid RSAPublicKey: {e}"))?;
    let n = BigUint::from_bytes_be(key.modulus.as_bytes());
    let e = BigUint::from_bytes_be(key.public_exponent.as_bytes());
    let bits = n.bits();
    RsaPublicKey::new(n, e).map_err(|e| match e {
        rsa::Error::ModulusTooLarge => format!(
            "has a {bits}-bit modulus; at most {} bits are taken",
            RsaPublicKey::MAX_SIZE
        ),
        rsa::Error::PublicExponentTooLarge => "has an exponent of 2^33 or more".into(),
        rsa::Error::PublicExponentTooSmall => "has an exponent below 2".into(),
        e => format!("is not usable: {e}"),
    })
}

/// The label and bytes of the PEM document in `text`, read as leniently
/// as mysql_common did (a server sends its key file as stored): the text
/// between `-----BEGIN LABEL-----` and `-----END LABEL-----`, whatever its
/// line widths, line ends and surrounding blank lines or NULs.
fn pem_document(text: &[u8]) -> Result<(String, Vec<u8>), String> {
    let text = std::str::from_utf8(text).map_err(|_| "it is not text".to_string())?;
    let begin = text
        .find("-----BEGIN ")
        .ok_or("no -----BEGIN line")?
        + "-----BEGIN ".len();
    let label_len = text[begin..].find("-----").ok_or("no end to the BEGIN line")?;
    let label = &text[begin..begin + label_len];
    let body = begin + label_len + "-----".len();
    let end = format!("-----END {label}-----");
    let body_len = text[body..].find(&end).ok_or_else(|| format!("no {end} line"))?;
    let base64: String = text[body..body + body_len]
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(base64)
        .map_err(|e| format!("its base64 is not valid: {e}"))?;
    Ok((label.to_string(), der))
}
