//! Compact JWS / JWT: signing with a key set, and verification that
//! refuses anything but a supported algorithm matching the key's own.
//!
//! Verification ([`verify`], [`verify_with`]) checks, in order: the size and
//! shape, the header (`alg` supported and the key's own, no `crit` it does
//! not understand: it understands none, RFC 7515 §4.1.11), the signature
//! (ES256 with low S only), then the claims: `exp` (and `nbf`, `iat`) with
//! at most [`MAX_LEEWAY`] seconds of skew, `aud` (RFC 7519 §4.1.3: a token
//! that names audiences is refused unless the verifier is one of them) and
//! `iss`. For join tokens, [`crate::join`] wraps this with the presets'
//! claims and a room check.

use crate::keys::{Algorithm, Key, KeySet};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::{Map, Value};

/// Claims: a JSON object.
pub type Claims = Map<String, Value>;

/// Longest token accepted for verification.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Most clock skew a verifier allows, seconds: a larger
/// [`Validation::leeway`] is cut to this, so a misconfigured leeway cannot
/// keep expired tokens alive for long.
pub const MAX_LEEWAY: i64 = 300;

/// Why a token could not be issued.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignError {
    /// No key with that id.
    #[error("no key {0:?}")]
    UnknownKey(String),
    /// The key only verifies (a public key).
    #[error("key {0:?} is a public key and cannot sign")]
    CannotSign(String),
    /// The claims do not serialize to a JSON object.
    #[error("the claims are not a JSON object: {0}")]
    Claims(String),
}

/// Why a token was refused. Every failure is one of these; nothing else is
/// ever accepted.
///
/// The `Display` text is for operators' logs (it may name key ids and
/// claim values); what goes to a client is [`VerifyError::code`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerifyError {
    /// Not three base64url parts of JSON.
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// `alg: none` (an unsigned token).
    #[error("unsigned tokens (alg \"none\") are refused")]
    AlgorithmNone,
    /// An algorithm this verifier does not support.
    #[error("algorithm {0:?} is not supported (HS256, EdDSA, ES256)")]
    UnsupportedAlgorithm(String),
    /// The header names a key this verifier does not have.
    #[error("unknown key id {0:?}")]
    UnknownKey(String),
    /// No `kid`, and not exactly one key for the algorithm.
    #[error("the token has no kid and {0} keys use its algorithm")]
    AmbiguousKey(usize),
    /// The header's algorithm is not the key's (HS/RS-style confusion).
    #[error("algorithm mismatch: the token says {token}, key {kid:?} is {key}")]
    AlgorithmMismatch {
        /// The header's `alg`.
        token: String,
        /// The key id.
        kid: String,
        /// The key's algorithm.
        key: &'static str,
    },
    /// The signature does not verify: the token was altered or signed by
    /// another key.
    #[error("bad signature")]
    BadSignature,
    /// `exp` is past.
    #[error("expired at {exp} (now {now}, leeway {leeway} s)")]
    Expired {
        /// The claim.
        exp: i64,
        /// The verifier's clock.
        now: i64,
        /// The allowed clock skew.
        leeway: i64,
    },
    /// `nbf` is in the future.
    #[error("not valid before {nbf} (now {now}, leeway {leeway} s)")]
    NotYetValid {
        /// The claim.
        nbf: i64,
        /// The verifier's clock.
        now: i64,
        /// The allowed clock skew.
        leeway: i64,
    },
    /// `iat` is in the future.
    #[error("issued in the future at {iat} (now {now}, leeway {leeway} s)")]
    IssuedInFuture {
        /// The claim.
        iat: i64,
        /// The verifier's clock.
        now: i64,
        /// The allowed clock skew.
        leeway: i64,
    },
    /// A required claim is absent or not of the right type.
    #[error("claim {0:?} is missing or not {1}")]
    MissingClaim(&'static str, &'static str),
    /// `aud` or `iss` is not the expected one.
    #[error("claim {claim:?} is {got}, expected {want:?}")]
    WrongClaim {
        /// The claim.
        claim: &'static str,
        /// What the token has.
        got: String,
        /// What was expected.
        want: String,
    },
    /// The token names audiences and the verifier expects none (RFC 7519
    /// §4.1.3: it is not among them).
    #[error("the token has an audience ({0}) and this verifier expects none")]
    UnexpectedAudience(String),
    /// The header's `crit` lists extensions (or is malformed): this
    /// verifier understands none, so it must refuse (RFC 7515 §4.1.11).
    #[error("critical header parameters not understood: {0}")]
    UnknownCritical(String),
    /// A valid join token for another room ([`crate::join`]).
    #[error("the token is for room {room:?}, not {want:?}")]
    WrongRoom {
        /// The token's room.
        room: String,
        /// The room asked for.
        want: String,
    },
}

impl VerifyError {
    /// Fixed words for a client: what kind of failure, never a key id or a
    /// claim's value (those are in the `Display` text, for logs).
    ///
    /// ```
    /// use signing::jwt::VerifyError;
    /// assert_eq!(VerifyError::UnknownKey("conf-2026".into()).code(), "unknown key");
    /// ```
    pub fn code(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed token",
            Self::AlgorithmNone => "unsigned token",
            Self::UnsupportedAlgorithm(_) => "unsupported algorithm",
            Self::UnknownKey(_) | Self::AmbiguousKey(_) => "unknown key",
            Self::AlgorithmMismatch { .. } => "algorithm mismatch",
            Self::BadSignature => "bad signature",
            Self::Expired { .. } => "expired",
            Self::NotYetValid { .. } => "not yet valid",
            Self::IssuedInFuture { .. } => "issued in the future",
            Self::MissingClaim(..) => "missing claim",
            Self::WrongClaim { claim: "aud", .. } | Self::UnexpectedAudience(_) => "wrong audience",
            Self::WrongClaim { claim: "iss", .. } => "wrong issuer",
            Self::WrongClaim { .. } => "wrong claim",
            Self::UnknownCritical(_) => "unsupported critical header",
            Self::WrongRoom { .. } => "wrong room",
        }
    }
}

/// What verification requires beyond the signature.
#[derive(Clone, Debug)]
pub struct Validation {
    /// The verifier's clock, seconds since the epoch.
    pub now: i64,
    /// Clock skew allowed on `exp`, `nbf` and `iat`, seconds; at most
    /// [`MAX_LEEWAY`] is used (negative counts as 0).
    pub leeway: i64,
    /// Whether `exp` must be present.
    pub require_exp: bool,
    /// Required audience (the token's `aud`, a string or a list, must hold
    /// it). With `None`, a token that has an `aud` is refused.
    pub audience: Option<String>,
    /// Required issuer.
    pub issuer: Option<String>,
}

impl Validation {
    /// `exp` required, 60 s leeway, no audience or issuer check.
    pub fn at(now: i64) -> Self {
        Self {
            now,
            leeway: 60,
            require_exp: true,
            audience: None,
            issuer: None,
        }
    }
}

/// Signs `claims`, anything that serializes to a JSON object (a [`Claims`]
/// map, a [`presets`](crate::presets) claim set), with key `kid` (the set's
/// signing key when `None`).
///
/// ```
/// use signing::{Key, KeySet, jwt};
/// let keys = KeySet::new(vec![Key::ed25519_from_seed("k1", &[7; 32]).unwrap()], "k1").unwrap();
/// let mut claims = jwt::Claims::new();
/// claims.insert("sub".into(), "alice".into());
/// claims.insert("exp".into(), 2_000_000_000.into());
/// let token = jwt::sign(&keys, None, &claims).unwrap();
/// let back = jwt::verify(&keys, &token, &jwt::Validation::at(1_900_000_000)).unwrap();
/// assert_eq!(back["sub"], "alice");
/// ```
pub fn sign(
    keys: &KeySet,
    kid: Option<&str>,
    claims: &(impl serde::Serialize + ?Sized),
) -> Result<String, SignError> {
    let key = match kid {
        None => keys.signing_key(),
        Some(k) => keys.get(k).ok_or_else(|| SignError::UnknownKey(k.into()))?,
    };
    // Serialized straight into bytes and encoded into one buffer: this is
    // most of a token's cost outside the signature, and in wasm it showed
    // (a `Value` clone and `Display`'s formatter adapter per token).
    let header = Header {
        alg: key.algorithm().name(),
        kid: key.kid(),
        typ: "JWT",
    };
    let header = serde_json::to_vec(&header).expect("a header always serializes");
    let claims = serde_json::to_vec(claims).map_err(|e| SignError::Claims(e.to_string()))?;
    if claims.first() != Some(&b'{') {
        return Err(SignError::Claims(
            String::from_utf8_lossy(&claims).into_owned(),
        ));
    }
    let mut token = String::with_capacity((header.len() + claims.len()) * 4 / 3 + 96);
    B64.encode_string(header, &mut token);
    token.push('.');
    B64.encode_string(claims, &mut token);
    let signature = key
        .sign(token.as_bytes())
        .ok_or_else(|| SignError::CannotSign(key.kid().into()))?;
    token.push('.');
    B64.encode_string(signature, &mut token);
    Ok(token)
}

/// A token's header, fields in the order `json!` gave them (sorted), so
/// tokens are byte-identical to earlier ones for the same claims.
#[derive(serde::Serialize)]
struct Header<'a> {
    alg: &'a str,
    kid: &'a str,
    typ: &'a str,
}

/// Verifies a token with a key set and returns its claims.
pub fn verify(keys: &KeySet, token: &str, v: &Validation) -> Result<Claims, VerifyError> {
    verify_with(keys.keys(), token, v)
}

/// Verifies a token with any of `keys` (for verifiers that hold no signing
/// key, see [`Key::to_public`]) and returns its claims.
///
/// ```
/// use signing::{Key, jwt};
/// let signer = Key::ed25519_from_seed("k1", &[7; 32]).unwrap();
/// let keys = signing::KeySet::new(vec![signer], "k1").unwrap();
/// let mut claims = jwt::Claims::new();
/// claims.insert("exp".into(), 2_000_000_000.into());
/// let token = jwt::sign(&keys, None, &claims).unwrap();
/// let public = [keys.signing_key().to_public()];
/// assert!(jwt::verify_with(&public, &token, &jwt::Validation::at(1_900_000_000)).is_ok());
/// ```
pub fn verify_with(keys: &[Key], token: &str, v: &Validation) -> Result<Claims, VerifyError> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(VerifyError::Malformed("longer than 16 KiB"));
    }
    let mut parts = token.split('.');
    let (Some(h), Some(c), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(VerifyError::Malformed("not three dot-separated parts"));
    };
    let header: Claims = decode_json(h, "header")?;
    let alg = header
        .get("alg")
        .and_then(Value::as_str)
        .ok_or(VerifyError::Malformed("the header has no alg"))?;
    if alg.eq_ignore_ascii_case("none") {
        return Err(VerifyError::AlgorithmNone);
    }
    let algorithm =
        Algorithm::parse(alg).ok_or_else(|| VerifyError::UnsupportedAlgorithm(alg.into()))?;
    if let Some(crit) = header.get("crit") {
        // No extension is understood here (not even RFC 7797's `b64`, which
        // changes what is signed): any `crit`, even a malformed one, refuses.
        return Err(VerifyError::UnknownCritical(crit.to_string()));
    }
    let key = pick_key(keys, &header, algorithm)?;
    if key.algorithm() != algorithm {
        return Err(VerifyError::AlgorithmMismatch {
            token: alg.into(),
            kid: key.kid().into(),
            key: key.algorithm().name(),
        });
    }
    let signature = B64
        .decode(s)
        .map_err(|_| VerifyError::Malformed("the signature is not base64url"))?;
    let signed = &token[..h.len() + 1 + c.len()];
    if !key.verify(signed.as_bytes(), &signature) {
        return Err(VerifyError::BadSignature);
    }
    let claims: Claims = decode_json(c, "payload")?;
    check_times(&claims, v)?;
    match (&v.audience, claims.get("aud")) {
        (None, None) => {}
        (None, Some(aud)) => return Err(VerifyError::UnexpectedAudience(aud.to_string())),
        (Some(want), _) => check_audience(&claims, want)?,
    }
    if let Some(want) = &v.issuer {
        match claims.get("iss").and_then(Value::as_str) {
            Some(iss) if iss == want => {}
            Some(iss) => {
                return Err(VerifyError::WrongClaim {
                    claim: "iss",
                    got: format!("{iss:?}"),
                    want: want.clone(),
                });
            }
            None => return Err(VerifyError::MissingClaim("iss", "a string")),
        }
    }
    Ok(claims)
}

fn check_audience(claims: &Claims, want: &str) -> Result<(), VerifyError> {
    let ok = match claims.get("aud") {
        Some(Value::String(a)) => a == want,
        Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(want)),
        _ => return Err(VerifyError::MissingClaim("aud", "a string or a list")),
    };
    if !ok {
        return Err(VerifyError::WrongClaim {
            claim: "aud",
            got: claims["aud"].to_string(),
            want: want.into(),
        });
    }
    Ok(())
}

fn pick_key<'k>(keys: &'k [Key], header: &Claims, alg: Algorithm) -> Result<&'k Key, VerifyError> {
    match header.get("kid") {
        Some(Value::String(kid)) => keys
            .iter()
            .find(|k| k.kid() == kid)
            .ok_or_else(|| VerifyError::UnknownKey(kid.clone())),
        Some(_) => Err(VerifyError::Malformed("kid is not a string")),
        None => {
            let mut candidates = keys.iter().filter(|k| k.algorithm() == alg);
            match (candidates.next(), candidates.next()) {
                (Some(k), None) => Ok(k),
                (None, _) => Err(VerifyError::AmbiguousKey(0)),
                (Some(_), Some(_)) => Err(VerifyError::AmbiguousKey(
                    keys.iter().filter(|k| k.algorithm() == alg).count(),
                )),
            }
        }
    }
}

fn decode_json(part: &str, what: &'static str) -> Result<Claims, VerifyError> {
    let bytes = B64.decode(part).map_err(|_| {
        VerifyError::Malformed(if what == "header" {
            "the header is not base64url"
        } else {
            "the payload is not base64url"
        })
    })?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(VerifyError::Malformed(if what == "header" {
            "the header is not a JSON object"
        } else {
            "the payload is not a JSON object"
        })),
    }
}

fn time_claim(claims: &Claims, name: &'static str) -> Result<Option<i64>, VerifyError> {
    match claims.get(name) {
        None => Ok(None),
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_f64().map(|f| f as i64))
            .map(Some)
            .ok_or(VerifyError::MissingClaim(name, "a number")),
    }
}

fn check_times(claims: &Claims, v: &Validation) -> Result<(), VerifyError> {
    let (now, leeway) = (v.now, v.leeway.clamp(0, MAX_LEEWAY));
    match time_claim(claims, "exp")? {
        Some(exp) if now - leeway >= exp => {
            return Err(VerifyError::Expired { exp, now, leeway });
        }
        None if v.require_exp => return Err(VerifyError::MissingClaim("exp", "a number")),
        _ => {}
    }
    if let Some(nbf) = time_claim(claims, "nbf")?
        && nbf > now + leeway
    {
        return Err(VerifyError::NotYetValid { nbf, now, leeway });
    }
    if let Some(iat) = time_claim(claims, "iat")?
        && iat > now + leeway
    {
        return Err(VerifyError::IssuedInFuture { iat, now, leeway });
    }
    Ok(())
}
