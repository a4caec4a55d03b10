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

/// One calling service.
#[derive(Clone, Debug)]
pub struct Client {
    name: String,
    hash: [u8; 32],
    /// What it may grant.
    pub grants: Grants,
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
            let Some((col, hash)) = words.next() else {
                return Err(err(
                    raw.chars().count() + 1,
                    format!("client {name:?} has no key hash (sha256: and 64 hex digits)"),
                ));
            };
            let hash = parse_hash(hash).ok_or_else(|| {
                err(
                    col,
                    "the key hash is `sha256:` and 64 hex digits, the SHA-256 of the API key (printf %s \"$KEY\" | sha256sum)".into(),
                )
            })?;
            if list.iter().any(|c| c.hash == hash) {
                return Err(err(
                    col,
                    "this key hash is already another client's: give each service its own key"
                        .into(),
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
                hash,
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
            if bool::from(c.hash.ct_eq(&presented)) {
                found = Some(c);
            }
        }
        found
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

fn parse_hash(word: &str) -> Option<[u8; 32]> {
    let hex_digits = word.strip_prefix("sha256:")?;
    let mut hash = [0u8; 32];
    hex::decode_to_slice(hex_digits, &mut hash).ok()?;
    Some(hash)
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
            ("webapp", 1, 7, "has no key hash"),
            ("webapp 5e88", 1, 8, "the key hash is `sha256:`"),
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
}
