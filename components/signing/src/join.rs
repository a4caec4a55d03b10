//! Join tokens, verified: what a component that admits people to a room
//! calls (the signer's `POST /tokens/verify`, the codec's joins).
//!
//! A [`JoinVerifier`] is built once from the same settings the signer
//! issues with (its key text, preset, issuer, audience and leeway) and
//! then checks tokens: the signature and header as [`crate::jwt::verify`]
//! does (supported algorithm matching the key, no `crit`, ES256 low S),
//! `exp`/`nbf`/`iat` with the leeway, `aud` and `iss` always, and the
//! preset's claims (the room, the user). [`JoinVerifier::verify_for_room`]
//! also checks that the token admits to a given room.
//!
//! ```
//! use signing::join::{JoinVerifier, Preset};
//! use signing::presets::{User, jitsi};
//! use signing::{Key, KeySet, jwt};
//!
//! // The signer's side: a key and a token for room "choir".
//! let key = Key::ed25519_from_seed("k1", &[7; 32]).unwrap();
//! let pem = key.to_pkcs8_pem().unwrap();
//! let keys = KeySet::new(vec![key], "k1").unwrap();
//! let user = User { id: "u1".into(), name: "Ada".into(), ..Default::default() };
//! let now = 1_900_000_000;
//! let token = jwt::sign(&keys, None, &jitsi("edge", "*", "choir", &user, false, now, 600)).unwrap();
//!
//! // The verifier's side: the same key text (private halves are dropped).
//! let text = format!("kid: k1\n{pem}");
//! let v = JoinVerifier::from_key_text(&text, Preset::Jitsi, "edge", "jitsi", 60).unwrap();
//! let joined = v.verify_for_room(&token, "choir", now + 10).unwrap();
//! assert_eq!((joined.room.as_str(), joined.user_id.as_str()), ("choir", "u1"));
//! assert_eq!(v.verify_for_room(&token, "other", now + 10).unwrap_err().code(), "wrong room");
//! ```

use crate::jwt::{self, Claims, MAX_LEEWAY, Validation, VerifyError};
use crate::keys::Key;
use serde_json::Value;

/// The claim layout tokens follow ([`crate::presets`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// Jitsi Meet: `room`, `context.user`, `moderator`.
    Jitsi,
    /// LiveKit: `sub`, `name`, the `video` grant.
    LiveKit,
}

impl Preset {
    /// `"jitsi"` or `"livekit"`, as the signer's `preset` variable says.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "jitsi" => Some(Self::Jitsi),
            "livekit" => Some(Self::LiveKit),
            _ => None,
        }
    }

    /// The variable's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Jitsi => "jitsi",
            Self::LiveKit => "livekit",
        }
    }

    /// The `aud` the signer puts in tokens unless configured otherwise.
    pub fn default_audience(self) -> &'static str {
        self.name()
    }
}

/// Why a verifier could not be built (a configuration error, for logs).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinConfigError {
    /// The key text does not parse.
    #[error("keys: {0}")]
    Keys(#[from] crate::keyfile::KeyFileError),
    /// No key at all.
    #[error("keys: no key to verify with")]
    NoKeys,
    /// An empty issuer or audience: every token must name both.
    #[error("{0} is empty: tokens are checked against it")]
    Empty(&'static str),
    /// A leeway outside 0 to [`MAX_LEEWAY`].
    #[error("leeway is {0} s (allowed: 0 to {MAX_LEEWAY})")]
    Leeway(i64),
}

/// A verified join token: who joins which room with what rights.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct JoinToken {
    /// The room, or `"*"` for every room (Jitsi only).
    pub room: String,
    /// The user's stable id: Jitsi `context.user.id`, LiveKit `sub`.
    pub user_id: String,
    /// Display name: Jitsi `context.user.name`, LiveKit `name` (may be
    /// empty).
    pub name: String,
    /// Jitsi `moderator`, LiveKit `video.roomAdmin` (false when absent).
    pub moderator: bool,
    /// LiveKit `video.canPublish` (true when absent, and for Jitsi).
    pub can_publish: bool,
    /// LiveKit `video.canSubscribe` (true when absent, and for Jitsi).
    pub can_subscribe: bool,
    /// `exp`, Unix seconds.
    pub expires_at: i64,
    /// The key that signed it (`kid`), for logs.
    pub kid: Option<String>,
    /// Every claim, as signed.
    pub claims: Claims,
}

/// Checks join tokens against one signer's keys and settings.
pub struct JoinVerifier {
    keys: Vec<Key>,
    preset: Preset,
    issuer: String,
    audience: String,
    leeway: i64,
}

impl std::fmt::Debug for JoinVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinVerifier")
            .field("keys", &self.keys)
            .field("preset", &self.preset)
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("leeway", &self.leeway)
            .finish()
    }
}

impl JoinVerifier {
    /// A verifier with `keys` (only their public halves are kept; HMAC
    /// secrets stay as they are), checking tokens of `preset` for `iss ==
    /// issuer` and `aud` holding `audience`, with `leeway_seconds` of
    /// clock skew (0 to [`MAX_LEEWAY`]).
    pub fn new(
        keys: &[Key],
        preset: Preset,
        issuer: &str,
        audience: &str,
        leeway_seconds: i64,
    ) -> Result<Self, JoinConfigError> {
        if keys.is_empty() {
            return Err(JoinConfigError::NoKeys);
        }
        if issuer.is_empty() {
            return Err(JoinConfigError::Empty("issuer"));
        }
        if audience.is_empty() {
            return Err(JoinConfigError::Empty("audience"));
        }
        if !(0..=MAX_LEEWAY).contains(&leeway_seconds) {
            return Err(JoinConfigError::Leeway(leeway_seconds));
        }
        Ok(Self {
            keys: keys.iter().map(Key::to_public).collect(),
            preset,
            issuer: issuer.into(),
            audience: audience.into(),
            leeway: leeway_seconds,
        })
    }

    /// [`JoinVerifier::new`] from a key text ([`crate::keyfile`]: the
    /// signer's `keys` variable, or only its public PEM blocks).
    pub fn from_key_text(
        keys: &str,
        preset: Preset,
        issuer: &str,
        audience: &str,
        leeway_seconds: i64,
    ) -> Result<Self, JoinConfigError> {
        let keys = crate::keyfile::parse(keys)?;
        Self::new(&keys, preset, issuer, audience, leeway_seconds)
    }

    /// The preset it checks.
    pub fn preset(&self) -> Preset {
        self.preset
    }

    /// Verifies `token` at `now` (Unix seconds) and returns who it admits
    /// where. Refusals are [`VerifyError`]s: `Display` for logs,
    /// [`VerifyError::code`] for clients.
    pub fn verify(&self, token: &str, now: i64) -> Result<JoinToken, VerifyError> {
        let v = Validation {
            leeway: self.leeway,
            audience: Some(self.audience.clone()),
            issuer: Some(self.issuer.clone()),
            ..Validation::at(now)
        };
        let claims = jwt::verify_with(&self.keys, token, &v)?;
        let kid = header_kid(token);
        let exp = claims
            .get("exp")
            .and_then(Value::as_i64)
            .ok_or(VerifyError::MissingClaim("exp", "a whole number"))?;
        let text = |v: Option<&Value>, name: &'static str| -> Result<String, VerifyError> {
            match v {
                Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
                _ => Err(VerifyError::MissingClaim(name, "a non-empty string")),
            }
        };
        let flag = |v: Option<&Value>, name: &'static str, default: bool| match v {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(VerifyError::MissingClaim(name, "a boolean")),
        };
        let joined = match self.preset {
            Preset::Jitsi => {
                let user = claims.get("context").and_then(|c| c.get("user"));
                JoinToken {
                    room: text(claims.get("room"), "room")?,
                    user_id: text(user.and_then(|u| u.get("id")), "context.user.id")?,
                    name: match user.and_then(|u| u.get("name")) {
                        Some(Value::String(n)) => n.clone(),
                        _ => String::new(),
                    },
                    moderator: flag(claims.get("moderator"), "moderator", false)?,
                    can_publish: true,
                    can_subscribe: true,
                    expires_at: exp,
                    kid,
                    claims,
                }
            }
            Preset::LiveKit => {
                let video = claims.get("video");
                if video.and_then(|v| v.get("roomJoin")) != Some(&Value::Bool(true)) {
                    return Err(VerifyError::MissingClaim("video.roomJoin", "true"));
                }
                let room = text(video.and_then(|v| v.get("room")), "video.room")?;
                if room == "*" {
                    // LiveKit has no all-rooms token: "*" is a room name
                    // there, never a wildcard here.
                    return Err(VerifyError::MissingClaim("video.room", "a room name"));
                }
                JoinToken {
                    room,
                    user_id: text(claims.get("sub"), "sub")?,
                    name: match claims.get("name") {
                        Some(Value::String(n)) => n.clone(),
                        _ => String::new(),
                    },
                    moderator: flag(
                        video.and_then(|v| v.get("roomAdmin")),
                        "video.roomAdmin",
                        false,
                    )?,
                    can_publish: flag(
                        video.and_then(|v| v.get("canPublish")),
                        "video.canPublish",
                        true,
                    )?,
                    can_subscribe: flag(
                        video.and_then(|v| v.get("canSubscribe")),
                        "video.canSubscribe",
                        true,
                    )?,
                    expires_at: exp,
                    kid,
                    claims,
                }
            }
        };
        Ok(joined)
    }

    /// [`JoinVerifier::verify`], and the token must admit to `room`: its
    /// room is `room`, or `"*"` (a Jitsi all-rooms token).
    pub fn verify_for_room(
        &self,
        token: &str,
        room: &str,
        now: i64,
    ) -> Result<JoinToken, VerifyError> {
        let joined = self.verify(token, now)?;
        if joined.room != room && joined.room != "*" {
            return Err(VerifyError::WrongRoom {
                room: joined.room,
                want: room.into(),
            });
        }
        Ok(joined)
    }
}

/// The header's `kid` of a token already verified.
fn header_kid(token: &str) -> Option<String> {
    use base64::Engine;
    let header = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    value.get("kid")?.as_str().map(str::to_string)
}
