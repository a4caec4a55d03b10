//! The services allowed to ask the signer for tokens, and what each may
//! grant: one line per calling service, its API key stored hashed.
//!
//! ```text
//! # NAME     KEY HASH (sha256: and the SHA-256 of the API key, hex)                    GRANTS
//! webapp     sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8  moderator max_ttl=7200
//! lobby      sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  rooms=lobby-*,standup
//! ```
//!
//! - `NAME`: 1 to 64 of `A-Z a-z 0-9 . _ -`, unique; it names the caller in
//!   the signer's log, never in answers.
//! - The key hash: `sha256:` then 64 hex digits, the SHA-256 of the key the
//!   service sends (`printf %s "$KEY" | sha256sum`). Keys should be long
//!   and random (`head -c 32 /dev/urandom | base64`): a hash without salt
//!   only protects a key that cannot be guessed.
//! - Grants, any order, each at most once: `moderator` (may issue
//!   moderator tokens; default: may not), `max_ttl=SECONDS` (the longest
//!   lifetime it may ask for, at least 1; default: the signer's default
//!   lifetime), `rooms=PATTERN,...` (the rooms it may issue for: exact
//!   names, prefixes ending in `*` (`team-*`), or `*` alone for every room
//!   including the all-rooms token `"*"`; default `*`).
//!
//! Blank lines and lines starting with `#` are ignored. Errors name the
//! line and column.
//!
//! A caller presents its key as `Authorization: Bearer KEY`; the signer
//! finds the caller with [`Clients::authenticate`], which hashes the key
//! and compares it with every entry in constant time.
//!
//! Instead of a key hash, a line may hold `hmac:SECRET` (base64, at least
//! 32 bytes): that service signs each request instead of sending a key,
//! so a request seen on the way cannot be replayed later or altered:
//!
//! ```text
//! Authorization: Edge-HMAC-SHA256 client=NAME,ts=UNIX-SECONDS,sig=BASE64URL
//! sig = HMAC-SHA256(SECRET, METHOD "\n" PATH "\n" ts "\n" hex(SHA-256(body)))
//! ```
//!
//! ([`string_to_sign`], [`sign_request`]). The signer accepts `ts` within
//! [`SIGNED_WINDOW`] seconds of its clock and each signature once per
//! instance ([`ReplayGuard`]); the secret, unlike an API key, is stored as
//! it is, since checking an HMAC needs it.

use sha2::Digest;
use subtle::ConstantTimeEq;

/// Why a clients text was refused: where, and what is wrong.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}, column {column}: {what}")]
pub struct ClientsError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (characters) where the faulty word starts.
    pub column: usize,
    /// What is wrong, and what is allowed.
    pub what: String,
}

/// Which rooms a caller may issue tokens for (one `rooms=` item).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoomPattern {
    /// `*`: every room, and the all-rooms token `"*"`.
    Any,
    /// `team-*`: room names that start with this (never `"*"`).
    Prefix(String),
    /// An exact room name.
    Exact(String),
}

impl RoomPattern {
    /// Whether `room` (as a token request names it) matches.
    pub fn matches(&self, room: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Prefix(p) => room != "*" && room.starts_with(p.as_str()),
            Self::Exact(r) => room == r,
        }
    }
}

/// What one caller may grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grants {
    /// May issue moderator tokens.
    pub moderator: bool,
    /// Longest lifetime, seconds (`None`: the signer's default lifetime).
    pub max_ttl: Option<i64>,
    /// Rooms it may issue for.
    pub rooms: Vec<RoomPattern>,
}

impl Grants {
    /// Whether `room` is one of the caller's rooms.
    pub fn allows_room(&self, room: &str) -> bool {
        self.rooms.iter().any(|p| p.matches(room))
    }
}

/// How a caller proves who it is.
#[derive(Clone)]
enum Credential {
    /// The SHA-256 of its API key.
    KeyHash([u8; 32]),
    /// The shared secret its requests are signed with.
    Hmac(Vec<u8>),
}

/// One calling service.
#[derive(Clone)]
pub struct Client {
    name: String,
    credential: Credential,
    /// What it may grant.
    pub grants: Grants,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the credential.
        f.debug_struct("Client")
            .field("name", &self.name)
            .field("grants", &self.grants)
            .finish()
    }
}

impl Client {
    /// Its name (for logs).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Every calling service the signer knows.
#[derive(Clone, Debug, Default)]
pub struct Clients {
    list: Vec<Client>,
}

/// The SHA-256 of an API key as the clients text writes it
/// (`sha256:` and lowercase hex).
///
/// ```
/// assert_eq!(
///     signing::clients::hash_key(b"password"),
///     "sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
/// );
/// ```
pub fn hash_key(key: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(key)))
}

/// An API key from 32 random bytes: `edge_` and their base64url, a
/// token68 that fits `Authorization: Bearer` as it is.
///
/// ```
/// let key = signing::clients::api_key(&[0; 32]);
/// assert_eq!(key, "edge_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
/// ```
pub fn api_key(random: &[u8; 32]) -> String {
    use base64::Engine;
    format!(
        "edge_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random)
    )
}

/// A clients line for `name` with `key` (hashed) and `grants`: what a
/// generated development entry looks like.
///
/// ```
/// use signing::clients::{Clients, Grants, RoomPattern, entry};
/// let g = Grants { moderator: true, max_ttl: Some(600), rooms: vec![RoomPattern::Any] };
/// let line = entry("dev", "k3y", &g);
/// assert!(line.starts_with("dev sha256:"));
/// let clients = Clients::parse(&line).unwrap();
/// assert_eq!(clients.authenticate(b"k3y").unwrap().grants, g);
/// ```
pub fn entry(name: &str, key: &str, grants: &Grants) -> String {
    let mut line = format!("{name} {}", hash_key(key.as_bytes()));
    if grants.moderator {
        line.push_str(" moderator");
    }
    if let Some(t) = grants.max_ttl {
        line.push_str(&format!(" max_ttl={t}"));
    }
    let rooms: Vec<String> = grants
        .rooms
        .iter()
        .map(|p| match p {
            RoomPattern::Any => "*".to_string(),
            RoomPattern::Prefix(p) => format!("{p}*"),
            RoomPattern::Exact(r) => r.clone(),
        })
        .collect();
    if !rooms.is_empty() {
        line.push_str(&format!(" rooms={}", rooms.join(",")));
    }
    line
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._-".contains(c)
}

fn is_room_char(c: char) -> bool {
    c.is_alphanumeric() || "-_.".contains(c)
}

const GRANTS_ALLOWED: &str = "allowed: moderator, max_ttl=SECONDS, rooms=PATTERN[,PATTERN...]";

impl Clients {
    /// Parses a clients text (see the module doc).
    ///
    /// ```
    /// let text = "webapp sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8 moderator\n";
    /// let clients = signing::clients::Clients::parse(text).unwrap();
    /// assert!(clients.authenticate(b"password").unwrap().grants.moderator);
    /// let err = signing::clients::Clients::parse("webapp sha256:00 moderator").unwrap_err();
    /// assert_eq!((err.line, err.column), (1, 8));
    /// ```
    pub fn parse(text: &str) -> Result<Self, ClientsError> {
        let mut list: Vec<Client> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let mut words = words(raw);
            let err = |column: usize, what: String| ClientsError { line, column, what };
            let (col, name) = words.next().expect("a non-blank line has a word");
            if name.is_empty() || name.len() > 64 || !name.chars().all(is_name_char) {
                return Err(err(
                    col,
                    format!(
                        "client name {name:?}: use 1 to 64 characters from A-Z, a-z, 0-9, '.', '_', '-'"
                    ),
                ));
            }
            if list.iter().any(|c| c.name == name) {
                return Err(err(col, format!("client {name:?} is listed twice")));
            }
            let Some((col, word)) = words.next() else {
                return Err(err(
                    raw.chars().count() + 1,
                    format!("client {name:?} has no credential (sha256:KEY-HASH or hmac:SECRET)"),
                ));
            };
            let credential = parse_credential(word).map_err(|what| err(col, what))?;
            let taken = list.iter().any(|c| match (&c.credential, &credential) {
                (Credential::KeyHash(a), Credential::KeyHash(b)) => a == b,
                (Credential::Hmac(a), Credential::Hmac(b)) => a == b,
                _ => false,
            });
            if taken {
                return Err(err(
                    col,
                    "this credential is already another client's: give each service its own".into(),
                ));
            }
            let mut moderator = None;
            let mut max_ttl = None;
            let mut rooms = None;
            for (col, word) in words {
                let (key, value) = match word.split_once('=') {
                    Some((k, v)) => (k, Some(v)),
                    None => (word, None),
                };
                let twice = || err(col, format!("grant {key:?} is given twice"));
                match (key, value) {
                    ("moderator", None) => {
                        if moderator.replace(true).is_some() {
                            return Err(twice());
                        }
                    }
                    ("max_ttl", Some(v)) => {
                        let t = v.parse::<i64>().ok().filter(|t| *t >= 1).ok_or_else(|| {
                            err(
                                col,
                                format!("max_ttl={v}: a whole number of seconds, at least 1"),
                            )
                        })?;
                        if max_ttl.replace(t).is_some() {
                            return Err(twice());
                        }
                    }
                    ("rooms", Some(v)) => {
                        let patterns = parse_rooms(v).map_err(|what| err(col, what))?;
                        if rooms.replace(patterns).is_some() {
                            return Err(twice());
                        }
                    }
                    _ => {
                        return Err(err(
                            col,
                            format!("unknown grant {word:?} ({GRANTS_ALLOWED})"),
                        ));
                    }
                }
            }
            list.push(Client {
                name: name.to_string(),
                credential,
                grants: Grants {
                    moderator: moderator.unwrap_or(false),
                    max_ttl,
                    rooms: rooms.unwrap_or_else(|| vec![RoomPattern::Any]),
                },
            });
        }
        Ok(Self { list })
    }

    /// The caller whose API key is `key`, if any. Every entry is compared
    /// (in constant time), so the time taken says nothing about which
    /// entry, if any, matched.
    pub fn authenticate(&self, key: &[u8]) -> Option<&Client> {
        let presented: [u8; 32] = sha2::Sha256::digest(key).into();
        let mut found = None;
        for c in &self.list {
            if let Credential::KeyHash(hash) = &c.credential
                && bool::from(hash.ct_eq(&presented))
            {
                found = Some(c);
            }
        }
        found
    }

    /// The caller that signed `request`, if its signature is right and its
    /// `ts` within [`SIGNED_WINDOW`] of `now`. (Replays within the window
    /// are the [`ReplayGuard`]'s to refuse.)
    pub fn authenticate_signed(
        &self,
        request: &SignedRequest<'_>,
        now: i64,
    ) -> Result<&Client, SignedError> {
        if !in_window(request.timestamp, now) {
            return Err(SignedError::Stale);
        }
        let client = self
            .list
            .iter()
            .find(|c| c.name == request.client)
            .ok_or(SignedError::UnknownClient)?;
        let Credential::Hmac(secret) = &client.credential else {
            return Err(SignedError::UnknownClient);
        };
        use hmac::Mac;
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret)
            .map_err(|_| SignedError::BadSignature)?;
        mac.update(
            string_to_sign(
                request.method,
                request.path,
                request.timestamp,
                request.body,
            )
            .as_bytes(),
        );
        // verify_slice compares in constant time.
        mac.verify_slice(request.signature)
            .map_err(|_| SignedError::BadSignature)?;
        Ok(client)
    }

    /// Whether any caller signs its requests.
    pub fn any_signs(&self) -> bool {
        self.list
            .iter()
            .any(|c| matches!(c.credential, Credential::Hmac(_)))
    }

    /// Whether a caller named `name` signs its requests (has an `hmac:`
    /// secret): checked before a signed request's body is read.
    pub fn signs(&self, name: &str) -> bool {
        self.list
            .iter()
            .any(|c| c.name == name && matches!(c.credential, Credential::Hmac(_)))
    }

    /// How many callers are configured.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether no caller is configured (then nobody gets tokens).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// Whitespace-separated words with their 1-based character column.
fn words(line: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut column = 0;
    let mut start: Option<(usize, usize)> = None;
    let mut out = Vec::new();
    for (byte, c) in line.char_indices() {
        column += 1;
        match (c.is_whitespace(), start) {
            (false, None) => start = Some((byte, column)),
            (true, Some((b, col))) => {
                out.push((col, &line[b..byte]));
                start = None;
            }
            _ => {}
        }
    }
    if let Some((b, col)) = start {
        out.push((col, &line[b..]));
    }
    out.into_iter()
}

fn parse_credential(word: &str) -> Result<Credential, String> {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    if let Some(hex_digits) = word.strip_prefix("sha256:") {
        let mut hash = [0u8; 32];
        return hex::decode_to_slice(hex_digits, &mut hash)
            .map(|_| Credential::KeyHash(hash))
            .map_err(|_| {
                "the key hash is `sha256:` and 64 hex digits, the SHA-256 of the API key (printf %s \"$KEY\" | sha256sum)".into()
            });
    }
    if let Some(secret) = word.strip_prefix("hmac:") {
        let bytes = STANDARD
            .decode(secret)
            .or_else(|_| URL_SAFE_NO_PAD.decode(secret.trim_end_matches('=')))
            .map_err(|_| "the hmac: secret is not base64".to_string())?;
        if bytes.len() < 32 {
            return Err(format!(
                "the hmac: secret has {} bytes; at least 32 (head -c 32 /dev/urandom | base64)",
                bytes.len()
            ));
        }
        return Ok(Credential::Hmac(bytes));
    }
    Err("the credential is `sha256:` and the SHA-256 of an API key (64 hex digits), or `hmac:` and a base64 secret for signed requests".into())
}

/// How far a signed request's `ts` may be from the signer's clock,
/// seconds, either way.
pub const SIGNED_WINDOW: i64 = 60;

/// Whether `ts` is within [`SIGNED_WINDOW`] of `now`, either way. `ts`
/// comes from the request, unauthenticated, so any `i64`: the distance is
/// taken without overflow (`(ts - now).abs()` wrapped into the window in
/// release builds and panicked in debug ones).
pub fn in_window(ts: i64, now: i64) -> bool {
    ts.abs_diff(now) <= SIGNED_WINDOW.unsigned_abs()
}

/// The `Authorization` scheme of signed requests.
pub const SIGNED_SCHEME: &str = "Edge-HMAC-SHA256";

/// A signed request, as the signer received it.
#[derive(Clone, Copy, Debug)]
pub struct SignedRequest<'a> {
    /// `client=`: the caller's name.
    pub client: &'a str,
    /// `ts=`: when it was signed, Unix seconds.
    pub timestamp: i64,
    /// `sig=`, decoded.
    pub signature: &'a [u8],
    /// The HTTP method, upper case (`POST`).
    pub method: &'a str,
    /// The path as sent, without the query (`/signer/tokens`).
    pub path: &'a str,
    /// The whole body.
    pub body: &'a [u8],
}

/// Why a signed request was refused (for logs; clients get fixed words).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignedError {
    /// Not `client=NAME,ts=N,sig=B64URL`.
    #[error("malformed Edge-HMAC-SHA256 parameters")]
    Malformed,
    /// `ts` outside the window.
    #[error("ts is more than {SIGNED_WINDOW} s from the signer's clock")]
    Stale,
    /// No such client, or one without an `hmac:` secret.
    #[error("no client with an hmac: secret by that name")]
    UnknownClient,
    /// The signature does not match.
    #[error("bad signature")]
    BadSignature,
    /// The same signature was seen before within the window.
    #[error("replayed request")]
    Replayed,
    /// The replay guard is full: refused rather than forgetting.
    #[error("too many signed requests in the window to remember")]
    Busy,
}

/// What is signed: method, path, `ts` and the body's SHA-256 (hex), one a
/// line.
///
/// ```
/// let s = signing::clients::string_to_sign("POST", "/signer/tokens", 1700000000, b"{}");
/// assert_eq!(s, "POST\n/signer/tokens\n1700000000\n44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
/// ```
pub fn string_to_sign(method: &str, path: &str, timestamp: i64, body: &[u8]) -> String {
    format!(
        "{method}\n{path}\n{timestamp}\n{}",
        hex::encode(sha2::Sha256::digest(body))
    )
}

/// The `Authorization` value a caller with `secret` sends (what a client
/// library does; here for tests and tools).
///
/// ```
/// use signing::clients::{Clients, parse_signed, sign_request};
/// let secret = [7u8; 32];
/// let header = sign_request("app", &secret, "POST", "/signer/tokens", 1700000000, b"{}");
/// assert!(header.starts_with("Edge-HMAC-SHA256 client=app,ts=1700000000,sig="));
/// let text = format!("app hmac:{}", "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=");
/// let clients = Clients::parse(&text).unwrap();
/// let (client, ts, sig) = parse_signed(&header).unwrap();
/// let req = signing::clients::SignedRequest {
///     client: &client, timestamp: ts, signature: &sig,
///     method: "POST", path: "/signer/tokens", body: b"{}",
/// };
/// assert_eq!(clients.authenticate_signed(&req, 1700000030).unwrap().name(), "app");
/// ```
pub fn sign_request(
    client: &str,
    secret: &[u8],
    method: &str,
    path: &str,
    timestamp: i64,
    body: &[u8],
) -> String {
    use base64::Engine;
    use hmac::Mac;
    let mut mac =
        hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(string_to_sign(method, path, timestamp, body).as_bytes());
    let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    format!("{SIGNED_SCHEME} client={client},ts={timestamp},sig={sig}")
}

/// The `client`, `ts` and decoded `sig` of an `Authorization` value in
/// the signed scheme (parameters in any order, each once, separated by
/// commas with optional spaces).
pub fn parse_signed(value: &str) -> Result<(String, i64, Vec<u8>), SignedError> {
    use base64::Engine;
    let params = value
        .strip_prefix(SIGNED_SCHEME)
        .and_then(|rest| rest.strip_prefix(' '))
        .ok_or(SignedError::Malformed)?;
    let (mut client, mut ts, mut sig) = (None, None, None);
    for param in params.split(',') {
        let (k, v) = param.trim().split_once('=').ok_or(SignedError::Malformed)?;
        let slot = match k {
            "client" => &mut client,
            "ts" => &mut ts,
            "sig" => &mut sig,
            _ => return Err(SignedError::Malformed),
        };
        if slot.replace(v).is_some() {
            return Err(SignedError::Malformed);
        }
    }
    let (Some(client), Some(ts), Some(sig)) = (client, ts, sig) else {
        return Err(SignedError::Malformed);
    };
    if client.is_empty() || client.len() > 64 || !client.chars().all(is_name_char) {
        return Err(SignedError::Malformed);
    }
    let ts = ts.parse::<i64>().map_err(|_| SignedError::Malformed)?;
    let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(sig)
        .map_err(|_| SignedError::Malformed)?;
    if sig.len() != 32 {
        return Err(SignedError::Malformed);
    }
    Ok((client.to_string(), ts, sig))
}

/// The prefix of the keys a shared replay guard writes in its key-value
/// store ([`replay_key`], [`sweep_key`]); keys without it are never
/// touched.
pub const REPLAY_PREFIX: &str = "signer-replay/";

/// The key a replay guard shared by every signer instance (a key-value
/// store they all open) counts a signed request's uses under: its `ts`,
/// so that a sweep can tell when it is stale ([`swept`]), and the SHA-256
/// of its signature (decoded, so every encoding of one signature is one
/// key). The first atomic increment of the key answers 1; any later one,
/// from any instance, is a replay.
pub fn replay_key(signature: &[u8], timestamp: i64) -> String {
    format!(
        "{REPLAY_PREFIX}{timestamp:020}/{}",
        hex::encode(sha2::Sha256::digest(signature))
    )
}

/// The key whose first increment in the window-long slot of `now` makes
/// that increment's instance the one that sweeps the shared store then.
pub fn sweep_key(now: i64) -> String {
    format!("{REPLAY_PREFIX}sweep-{:020}", now.div_euclid(SIGNED_WINDOW))
}

/// Whether a sweep at `now` removes `key` from a shared replay guard's
/// store: a [`replay_key`] whose request is past the window (no longer
/// accepted anyway), or a [`sweep_key`] of an earlier slot. Any other key
/// is kept.
pub fn swept(key: &str, now: i64) -> bool {
    let Some(rest) = key.strip_prefix(REPLAY_PREFIX) else {
        return false;
    };
    if let Some(slot) = rest.strip_prefix("sweep-") {
        return slot
            .parse::<i64>()
            .is_ok_and(|slot| slot < now.div_euclid(SIGNED_WINDOW));
    }
    match rest.split_once('/') {
        Some((ts, hash)) if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => ts
            .parse::<i64>()
            .is_ok_and(|ts| ts < now && !in_window(ts, now)),
        _ => false,
    }
}

/// Signatures seen within the window, so each signed request is accepted
/// once. It lives in one instance: with several instances a replay can
/// still reach another one within [`SIGNED_WINDOW`]. The signer uses it
/// only without a shared store (its `replay_store` variable; then
/// [`replay_key`] in that store instead).
#[derive(Debug, Default)]
pub struct ReplayGuard {
    seen: std::collections::HashMap<[u8; 32], i64>,
}

impl ReplayGuard {
    /// Most signatures remembered; past it requests are refused
    /// ([`SignedError::Busy`]) rather than older ones forgotten.
    pub const CAPACITY: usize = 65_536;

    /// Records `signature` (of a request signed at `timestamp`) at `now`;
    /// an error if it was seen before within the window.
    pub fn check(&mut self, signature: &[u8], timestamp: i64, now: i64) -> Result<(), SignedError> {
        let id: [u8; 32] = sha2::Sha256::digest(signature).into();
        if self.seen.len() >= Self::CAPACITY {
            self.seen.retain(|_, ts| in_window(*ts, now));
        }
        if let Some(ts) = self.seen.get(&id)
            && in_window(*ts, now)
        {
            return Err(SignedError::Replayed);
        }
        if self.seen.len() >= Self::CAPACITY {
            return Err(SignedError::Busy);
        }
        self.seen.insert(id, timestamp);
        Ok(())
    }
}

fn parse_rooms(value: &str) -> Result<Vec<RoomPattern>, String> {
    let mut out = Vec::new();
    for item in value.split(',') {
        let pattern = if item == "*" {
            RoomPattern::Any
        } else if let Some(prefix) = item.strip_suffix('*')
            && !prefix.is_empty()
            && prefix.chars().all(is_room_char)
        {
            RoomPattern::Prefix(prefix.to_string())
        } else if !item.is_empty() && item.chars().all(is_room_char) {
            RoomPattern::Exact(item.to_string())
        } else {
            return Err(format!(
                "rooms item {item:?}: a room name (letters, digits, '-', '_', '.'), a prefix ending in '*', or '*' alone"
            ));
        };
        out.push(pattern);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWORD: &str =
        "sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8";

    #[test]
    fn hashes_are_sha256_hex() {
        // FIPS 180-2 appendix B.1 ("abc").
        assert_eq!(
            hash_key(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_full_text_parses_with_defaults() {
        let text = format!(
            "# services\n\nwebapp {PASSWORD} moderator max_ttl=7200\n  lobby {} rooms=lobby-*,standup\n",
            hash_key(b"lobby-key")
        );
        let c = Clients::parse(&text).unwrap();
        assert_eq!(c.len(), 2);
        let web = c.authenticate(b"password").unwrap();
        assert_eq!(web.name(), "webapp");
        assert_eq!(
            web.grants,
            Grants {
                moderator: true,
                max_ttl: Some(7200),
                rooms: vec![RoomPattern::Any]
            }
        );
        let lobby = c.authenticate(b"lobby-key").unwrap();
        assert!(!lobby.grants.moderator);
        assert_eq!(lobby.grants.max_ttl, None);
        assert!(lobby.grants.allows_room("lobby-1"));
        assert!(lobby.grants.allows_room("standup"));
        assert!(!lobby.grants.allows_room("standup-2"));
        assert!(!lobby.grants.allows_room("*"));
        assert!(!lobby.grants.allows_room("lobby"));
        assert!(c.authenticate(b"Password").is_none());
        assert!(c.authenticate(b"").is_none());
        assert!(Clients::parse("").unwrap().is_empty());
    }

    #[test]
    fn errors_name_line_and_column() {
        let h = PASSWORD;
        let cases: &[(&str, usize, usize, &str)] = &[
            ("web/app sha256:00", 1, 1, "client name \"web/app\""),
            ("webapp", 1, 7, "has no credential"),
            ("webapp 5e88", 1, 8, "the credential is `sha256:`"),
            ("webapp hmac:c2hvcnQ=", 1, 8, "the hmac: secret has 5 bytes"),
            ("webapp hmac:!!", 1, 8, "not base64"),
            ("webapp sha256:zz", 1, 8, "the key hash is `sha256:`"),
            (
                "# c\nweb {h} moderater",
                2,
                0,
                "unknown grant \"moderater\"",
            ),
            ("web {h} max_ttl=0", 1, 0, "max_ttl=0: a whole number"),
            ("web {h} max_ttl=1h", 1, 0, "max_ttl=1h"),
            (
                "web {h} moderator moderator",
                1,
                0,
                "grant \"moderator\" is given twice",
            ),
            ("web {h} rooms=a/b", 1, 0, "rooms item \"a/b\""),
            ("web {h} rooms=a,,b", 1, 0, "rooms item \"\""),
            (
                "web {h} moderator=yes",
                1,
                0,
                "unknown grant \"moderator=yes\"",
            ),
            ("web {h}\nweb {h}", 2, 1, "client \"web\" is listed twice"),
            ("web {h}\nweb2 {h}", 2, 6, "already another client's"),
            (
                "a hmac:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\nb hmac:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
                2,
                3,
                "already another client's",
            ),
        ];
        for (text, line, column, what) in cases {
            let text = text.replace("{h}", h);
            let e = Clients::parse(&text).unwrap_err();
            assert_eq!(e.line, *line, "{text}: {e}");
            if *column != 0 {
                assert_eq!(e.column, *column, "{text}: {e}");
            } else {
                // The last word's column.
                let last = text.lines().nth(line - 1).unwrap();
                assert_eq!(e.column, last.rfind(' ').unwrap() + 2, "{text}: {e}");
            }
            assert!(e.to_string().contains(what), "{text}: {e}");
        }
    }

    const SECRET_B64: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn signed_clients() -> Clients {
        Clients::parse(&format!(
            "svc hmac:{SECRET_B64} moderator\nweb {PASSWORD}\n"
        ))
        .unwrap()
    }

    fn check(
        header: &str,
        method: &str,
        path: &str,
        body: &[u8],
        now: i64,
    ) -> Result<String, SignedError> {
        let (client, ts, sig) = parse_signed(header)?;
        let req = SignedRequest {
            client: &client,
            timestamp: ts,
            signature: &sig,
            method,
            path,
            body,
        };
        signed_clients()
            .authenticate_signed(&req, now)
            .map(|c| c.name().to_string())
    }

    #[test]
    fn signed_requests_verify_only_as_signed_and_in_time() {
        let t = 1_700_000_000;
        let h = sign_request("svc", SECRET, "POST", "/signer/tokens", t, b"{}");
        assert_eq!(
            check(&h, "POST", "/signer/tokens", b"{}", t).unwrap(),
            "svc"
        );
        assert!(check(&h, "POST", "/signer/tokens", b"{}", t + SIGNED_WINDOW).is_ok());
        assert!(check(&h, "POST", "/signer/tokens", b"{}", t - SIGNED_WINDOW).is_ok());
        let bad = |r| assert_eq!(r, Err(SignedError::BadSignature));
        bad(check(&h, "POST", "/signer/tokens", b"{ }", t));
        bad(check(&h, "PUT", "/signer/tokens", b"{}", t));
        bad(check(&h, "POST", "/signer/tokens/verify", b"{}", t));
        assert_eq!(
            check(&h, "POST", "/signer/tokens", b"{}", t + SIGNED_WINDOW + 1),
            Err(SignedError::Stale)
        );
        assert_eq!(
            check(&h, "POST", "/signer/tokens", b"{}", t - SIGNED_WINDOW - 1),
            Err(SignedError::Stale)
        );
        let other = sign_request("svc", &[1; 32], "POST", "/signer/tokens", t, b"{}");
        bad(check(&other, "POST", "/signer/tokens", b"{}", t));
        assert!(signed_clients().signs("svc"));
        // A key-hash client cannot sign; unknown names are unknown.
        for name in ["web", "nobody"] {
            assert!(!signed_clients().signs(name));
            let h = sign_request(name, SECRET, "POST", "/p", t, b"");
            assert_eq!(
                check(&h, "POST", "/p", b"", t),
                Err(SignedError::UnknownClient)
            );
        }
        // An hmac client has no API key.
        assert!(
            signed_clients()
                .authenticate(SECRET_B64.as_bytes())
                .is_none()
        );
        assert!(signed_clients().authenticate(SECRET).is_none());
    }

    #[test]
    fn shared_replay_keys_are_one_per_request_and_swept_once_stale() {
        let t = 1_700_000_000;
        let h = sign_request("svc", SECRET, "POST", "/p", t, b"{}");
        let (_, ts, sig) = parse_signed(&h).unwrap();
        let key = replay_key(&sig, ts);
        assert!(key.starts_with("signer-replay/00000000001700000000/"));
        // The same request is the same key; another signature another.
        assert_eq!(key, replay_key(&parse_signed(&h).unwrap().2, t));
        assert_ne!(key, replay_key(b"another signature", t));
        assert!(signed_clients().any_signs());
        assert!(
            !Clients::parse(&format!("web {PASSWORD}"))
                .unwrap()
                .any_signs()
        );
        // Kept while the request could still be accepted, in either
        // direction of the clock; swept after.
        for now in [t - SIGNED_WINDOW - 1, t, t + SIGNED_WINDOW] {
            assert!(!swept(&key, now), "{now}");
        }
        assert!(swept(&key, t + SIGNED_WINDOW + 1));
        // Sweep markers go once their slot is over; other keys never.
        let marker = sweep_key(t);
        assert_eq!(marker, sweep_key(t + 1));
        assert!(!swept(&marker, t));
        assert!(swept(&marker, t + SIGNED_WINDOW));
        for other in [
            "signer-replay/x",
            "signer-replay/1/abc",
            "signer-replay/sweep-x",
            "other/00000000000000000001/0000000000000000000000000000000000000000000000000000000000000000",
            "",
        ] {
            assert!(!swept(other, i64::MAX), "{other}");
        }
    }

    #[test]
    fn timestamps_far_from_the_clock_are_stale_not_wrapped() {
        // `(ts - now).abs()` of i64::MIN is i64::MIN in release builds:
        // a negative distance, inside the window.
        let now = 1_700_000_000;
        for ts in [i64::MIN, i64::MIN + now, i64::MAX, i64::MIN + 1] {
            assert!(!in_window(ts, now), "{ts}");
            let h = sign_request("svc", SECRET, "POST", "/p", ts, b"");
            assert_eq!(
                check(&h, "POST", "/p", b"", now),
                Err(SignedError::Stale),
                "{ts}"
            );
            let mut guard = ReplayGuard::default();
            assert_eq!(guard.check(b"sig", ts, now), Ok(()));
            assert_eq!(guard.check(b"sig", now, now), Ok(()), "{ts}");
        }
        assert!(in_window(i64::MIN, i64::MIN + SIGNED_WINDOW));
        assert!(in_window(i64::MAX, i64::MAX - SIGNED_WINDOW));
        assert!(!in_window(i64::MAX, i64::MAX - SIGNED_WINDOW - 1));
    }

    #[test]
    fn signed_headers_are_parsed_strictly() {
        let good = sign_request("svc", SECRET, "POST", "/p", 5, b"");
        let sig = good.rsplit_once("sig=").unwrap().1;
        assert!(parse_signed(&format!("Edge-HMAC-SHA256 ts=5, sig={sig}, client=svc")).is_ok());
        for bad in [
            String::new(),
            format!("Bearer client=svc,ts=5,sig={sig}"),
            "Edge-HMAC-SHA256 client=svc,ts=5".to_string(),
            format!("Edge-HMAC-SHA256 client=svc,ts=5,sig={sig},sig={sig}"),
            format!("Edge-HMAC-SHA256 client=svc,ts=5,sig={sig},x=1"),
            format!("Edge-HMAC-SHA256 client=s v,ts=5,sig={sig}"),
            format!("Edge-HMAC-SHA256 client=svc,ts=5s,sig={sig}"),
            "Edge-HMAC-SHA256 client=svc,ts=5,sig=AAAA".to_string(),
            format!("Edge-HMAC-SHA256 client=svc,ts=5,sig={sig}!"),
            format!("Edge-HMAC-SHA256client=svc,ts=5,sig={sig}"),
        ] {
            assert_eq!(parse_signed(&bad), Err(SignedError::Malformed), "{bad}");
        }
    }

    #[test]
    fn each_signature_is_accepted_once_within_the_window() {
        let mut guard = ReplayGuard::default();
        let now = 1_000_000;
        assert_eq!(guard.check(b"sig-1", now, now), Ok(()));
        assert_eq!(
            guard.check(b"sig-1", now, now + 5),
            Err(SignedError::Replayed)
        );
        assert_eq!(guard.check(b"sig-2", now, now + 5), Ok(()));
        // Past the window the request is stale anyway; the entry may go.
        assert_eq!(guard.check(b"sig-1", now, now + SIGNED_WINDOW + 1), Ok(()));
        // Full of live entries: refused, not forgotten.
        let mut guard = ReplayGuard::default();
        for i in 0..ReplayGuard::CAPACITY as u32 {
            guard.check(&i.to_le_bytes(), now, now).unwrap();
        }
        assert_eq!(guard.check(b"one more", now, now), Err(SignedError::Busy));
        assert_eq!(
            guard.check(&0u32.to_le_bytes(), now, now),
            Err(SignedError::Replayed)
        );
        // Once they age out of the window, room again.
        assert_eq!(guard.check(b"later", now + 200, now + 200), Ok(()));
    }
}
