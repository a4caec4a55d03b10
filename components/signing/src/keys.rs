//! Keys and key sets: HMAC secrets, Ed25519 and P-256 key pairs (PKCS#8
//! PEM), several active at once with one that signs; the public ones as a
//! JWKS.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::{Value, json};

/// Shortest HMAC secret accepted: RFC 7518 §3.2 asks for a key at least as
/// long as the hash output.
pub const MIN_HMAC_SECRET: usize = 32;

/// A JWS algorithm this library signs and verifies with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// HMAC with SHA-256 (shared secret).
    Hs256,
    /// Ed25519 (RFC 8037).
    EdDsa,
    /// ECDSA on P-256 with SHA-256.
    Es256,
}

impl Algorithm {
    /// The JOSE name (`alg` header value).
    pub fn name(self) -> &'static str {
        match self {
            Self::Hs256 => "HS256",
            Self::EdDsa => "EdDSA",
            Self::Es256 => "ES256",
        }
    }

    /// The algorithm named `alg`, if supported.
    pub fn parse(alg: &str) -> Option<Self> {
        match alg {
            "HS256" => Some(Self::Hs256),
            "EdDSA" => Some(Self::EdDsa),
            "ES256" => Some(Self::Es256),
            _ => None,
        }
    }
}

/// Why a key or key set was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    /// An HMAC secret shorter than [`MIN_HMAC_SECRET`].
    #[error(
        "key {kid:?}: an HS256 secret needs at least {MIN_HMAC_SECRET} bytes, this one has {len}"
    )]
    ShortSecret {
        /// The key id.
        kid: String,
        /// Its length.
        len: usize,
    },
    /// PEM that is not a PKCS#8 Ed25519 or P-256 key.
    #[error("key {kid:?}: not a PKCS#8 PEM Ed25519 or P-256 private key, nor an SPKI public key")]
    BadPem {
        /// The key id.
        kid: String,
    },
    /// An empty or oversized key id, or one with characters outside
    /// `[A-Za-z0-9._-]`.
    #[error("key id {0:?}: use 1 to 64 characters from A-Z, a-z, 0-9, '.', '_', '-'")]
    BadKid(String),
    /// Two keys with one id.
    #[error("key id {0:?} is used twice")]
    DuplicateKid(String),
    /// The signing key is not in the set, or has no private half.
    #[error("signing key {0:?} is not a configured private key")]
    NoSigningKey(String),
}

enum Material {
    Hmac(Vec<u8>),
    Ed25519 {
        signing: Option<Box<Ed25519Signing>>,
        verifying: ed25519_dalek::VerifyingKey,
    },
    P256 {
        signing: Option<Box<p256::ecdsa::SigningKey>>,
        verifying: p256::ecdsa::VerifyingKey,
    },
}

/// An Ed25519 private key with its expanded form (the clamped scalar and
/// the nonce prefix, SHA-512 of the seed), derived once at load instead of
/// for every signature as `SigningKey::sign` does.
struct Ed25519Signing {
    key: ed25519_dalek::SigningKey,
    expanded: ed25519_dalek::hazmat::ExpandedSecretKey,
}

impl Material {
    fn ed25519(key: ed25519_dalek::SigningKey) -> Self {
        let expanded = ed25519_dalek::hazmat::ExpandedSecretKey::from(key.as_bytes());
        Material::Ed25519 {
            verifying: key.verifying_key(),
            signing: Some(Box::new(Ed25519Signing { key, expanded })),
        }
    }
}

/// One key with its id.
pub struct Key {
    kid: String,
    material: Material,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("Key")
            .field("kid", &self.kid)
            .field("alg", &self.algorithm().name())
            .field("private", &self.can_sign())
            .finish()
    }
}

fn check_kid(kid: &str) -> Result<(), KeyError> {
    let ok = !kid.is_empty()
        && kid.len() <= 64
        && kid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(KeyError::BadKid(kid.into()))
    }
}

impl Key {
    /// An HS256 key from a shared secret (at least 32 bytes).
    pub fn hmac(kid: &str, secret: &[u8]) -> Result<Self, KeyError> {
        check_kid(kid)?;
        if secret.len() < MIN_HMAC_SECRET {
            return Err(KeyError::ShortSecret {
                kid: kid.into(),
                len: secret.len(),
            });
        }
        Ok(Self {
            kid: kid.into(),
            material: Material::Hmac(secret.to_vec()),
        })
    }

    /// An Ed25519 or P-256 key from PEM: a PKCS#8 private key (signs and
    /// verifies) or an SPKI public key (verifies only).
    pub fn from_pem(kid: &str, pem: &str) -> Result<Self, KeyError> {
        use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey};
        check_kid(kid)?;
        let pem = pem.trim();
        let material = if let Ok(sk) = ed25519_dalek::SigningKey::from_pkcs8_pem(pem) {
            Material::ed25519(sk)
        } else if let Ok(sk) = p256::ecdsa::SigningKey::from_pkcs8_pem(pem) {
            Material::P256 {
                verifying: *sk.verifying_key(),
                signing: Some(Box::new(sk)),
            }
        } else if let Ok(vk) = ed25519_dalek::VerifyingKey::from_public_key_pem(pem) {
            Material::Ed25519 {
                signing: None,
                verifying: vk,
            }
        } else if let Ok(vk) = p256::ecdsa::VerifyingKey::from_public_key_pem(pem) {
            Material::P256 {
                signing: None,
                verifying: vk,
            }
        } else {
            return Err(KeyError::BadPem { kid: kid.into() });
        };
        Ok(Self {
            kid: kid.into(),
            material,
        })
    }

    /// An Ed25519 key from a 32-byte seed (for generated keys).
    pub fn ed25519_from_seed(kid: &str, seed: &[u8; 32]) -> Result<Self, KeyError> {
        check_kid(kid)?;
        let sk = ed25519_dalek::SigningKey::from_bytes(seed);
        Ok(Self {
            kid: kid.into(),
            material: Material::ed25519(sk),
        })
    }

    /// The shared secret of an HS256 key (what row signatures are keyed
    /// with), or `None` for asymmetric keys.
    pub fn hmac_secret(&self) -> Option<&[u8]> {
        match &self.material {
            Material::Hmac(secret) => Some(secret),
            _ => None,
        }
    }

    /// The key id.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The algorithm this key is for.
    pub fn algorithm(&self) -> Algorithm {
        match self.material {
            Material::Hmac(_) => Algorithm::Hs256,
            Material::Ed25519 { .. } => Algorithm::EdDsa,
            Material::P256 { .. } => Algorithm::Es256,
        }
    }

    /// Whether it can sign (a secret or a private key).
    pub fn can_sign(&self) -> bool {
        match &self.material {
            Material::Hmac(_) => true,
            Material::Ed25519 { signing, .. } => signing.is_some(),
            Material::P256 { signing, .. } => signing.is_some(),
        }
    }

    /// The private key as PKCS#8 PEM (asymmetric private keys only).
    pub fn to_pkcs8_pem(&self) -> Option<String> {
        use ed25519_dalek::pkcs8::{EncodePrivateKey, spki::der::pem::LineEnding};
        match &self.material {
            // PKCS#8 v1 (no embedded public key): OpenSSL 3.0 (Debian 12)
            // refuses the v2 form ed25519-dalek writes by default.
            Material::Ed25519 {
                signing: Some(sk), ..
            } => ed25519_dalek::pkcs8::KeypairBytes {
                secret_key: sk.key.to_bytes(),
                public_key: None,
            }
            .to_pkcs8_pem(LineEnding::LF)
            .ok()
            .map(|p| p.to_string()),
            Material::P256 {
                signing: Some(sk), ..
            } => sk.to_pkcs8_pem(LineEnding::LF).ok().map(|p| p.to_string()),
            _ => None,
        }
    }

    /// The public key as SPKI PEM, or `None` for HMAC secrets.
    pub fn public_pem(&self) -> Option<String> {
        use ed25519_dalek::pkcs8::{EncodePublicKey, spki::der::pem::LineEnding};
        match &self.material {
            Material::Hmac(_) => None,
            Material::Ed25519 { verifying, .. } => verifying.to_public_key_pem(LineEnding::LF).ok(),
            Material::P256 { verifying, .. } => verifying.to_public_key_pem(LineEnding::LF).ok(),
        }
    }

    /// A P-256 key from its 32-byte secret scalar (for generated keys).
    pub fn p256_from_scalar(kid: &str, scalar: &[u8; 32]) -> Result<Self, KeyError> {
        check_kid(kid)?;
        let sk = p256::ecdsa::SigningKey::from_bytes(scalar.into())
            .map_err(|_| KeyError::BadPem { kid: kid.into() })?;
        Ok(Self {
            kid: kid.into(),
            material: Material::P256 {
                verifying: *sk.verifying_key(),
                signing: Some(Box::new(sk)),
            },
        })
    }

    /// The same key without its private half: what a component that only
    /// verifies should hold. HMAC secrets have no public half and come back
    /// as they are (they verify and sign alike).
    pub fn to_public(&self) -> Key {
        let material = match &self.material {
            Material::Hmac(secret) => Material::Hmac(secret.clone()),
            Material::Ed25519 { verifying, .. } => Material::Ed25519 {
                signing: None,
                verifying: *verifying,
            },
            Material::P256 { verifying, .. } => Material::P256 {
                signing: None,
                verifying: *verifying,
            },
        };
        Key {
            kid: self.kid.clone(),
            material,
        }
    }

    /// The public key as a JWK (RFC 7517), or `None` for HMAC secrets.
    pub fn public_jwk(&self) -> Option<Value> {
        match &self.material {
            Material::Hmac(_) => None,
            Material::Ed25519 { verifying, .. } => Some(json!({
                "kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA",
                "kid": self.kid, "x": B64.encode(verifying.as_bytes()),
            })),
            Material::P256 { verifying, .. } => {
                let point = verifying.to_encoded_point(false);
                Some(json!({
                    "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256",
                    "kid": self.kid,
                    "x": B64.encode(point.x()?), "y": B64.encode(point.y()?),
                }))
            }
        }
    }

    pub(crate) fn sign(&self, message: &[u8]) -> Option<Vec<u8>> {
        use hmac::Mac;
        match &self.material {
            Material::Hmac(secret) => {
                let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).ok()?;
                mac.update(message);
                Some(mac.finalize().into_bytes().to_vec())
            }
            Material::Ed25519 {
                signing: Some(sk),
                verifying,
            } => {
                let signature = ed25519_dalek::hazmat::raw_sign::<sha2::Sha512>(
                    &sk.expanded,
                    message,
                    verifying,
                );
                Some(signature.to_bytes().to_vec())
            }
            Material::P256 {
                signing: Some(sk), ..
            } => {
                use p256::ecdsa::signature::Signer;
                let sig: p256::ecdsa::Signature = sk.sign(message);
                // Low S only: (r, n - s) verifies too, so a verifier that
                // takes both lets anyone make a second valid token from one
                // (malleability); ours refuses high S, so we never emit it.
                let sig = sig.normalize_s().unwrap_or(sig);
                Some(sig.to_bytes().to_vec())
            }
            _ => None,
        }
    }

    /// Checks a signature; HMAC tags are compared in constant time.
    pub(crate) fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        use hmac::Mac;
        match &self.material {
            Material::Hmac(secret) => {
                let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret) else {
                    return false;
                };
                mac.update(message);
                mac.verify_slice(signature).is_ok()
            }
            Material::Ed25519 { verifying, .. } => {
                let Ok(sig) = ed25519_dalek::Signature::from_slice(signature) else {
                    return false;
                };
                verifying.verify_strict(message, &sig).is_ok()
            }
            Material::P256 { verifying, .. } => {
                use p256::ecdsa::signature::Verifier;
                let Ok(sig) = p256::ecdsa::Signature::from_slice(signature) else {
                    return false;
                };
                // s must be at most n/2 (`normalize_s` answers `Some` for a
                // high S): each signature has one accepted form.
                if sig.normalize_s().is_some() {
                    return false;
                }
                verifying.verify(message, &sig).is_ok()
            }
        }
    }
}

/// The active keys: any of them verifies, one of them signs.
#[derive(Debug)]
pub struct KeySet {
    keys: Vec<Key>,
    signing: usize,
}

impl KeySet {
    /// A set of `keys` signing with `signing_kid` (key rotation: add the new
    /// key, switch the signing id, drop the old key once its tokens expired).
    pub fn new(keys: Vec<Key>, signing_kid: &str) -> Result<Self, KeyError> {
        for (i, k) in keys.iter().enumerate() {
            if keys[..i].iter().any(|o| o.kid == k.kid) {
                return Err(KeyError::DuplicateKid(k.kid.clone()));
            }
        }
        let signing = keys
            .iter()
            .position(|k| k.kid == signing_kid && k.can_sign())
            .ok_or_else(|| KeyError::NoSigningKey(signing_kid.into()))?;
        Ok(Self { keys, signing })
    }

    /// The key with id `kid`.
    pub fn get(&self, kid: &str) -> Option<&Key> {
        self.keys.iter().find(|k| k.kid == kid)
    }

    /// The key that signs by default.
    pub fn signing_key(&self) -> &Key {
        &self.keys[self.signing]
    }

    /// Every key.
    pub fn keys(&self) -> &[Key] {
        &self.keys
    }

    /// The public keys as a JWK Set (`/.well-known/jwks.json`); HMAC
    /// secrets are never listed.
    pub fn jwks(&self) -> Value {
        json!({ "keys": self.keys.iter().filter_map(Key::public_jwk).collect::<Vec<_>>() })
    }
}
