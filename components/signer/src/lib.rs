//! The signer: issues and verifies join tokens for the conferencing service
//! and publishes its public keys (a `wasi:http/proxy` component; the
//! cryptography is the `signing` library, shared with the MariaDB UDFs).
//!
//! | request | answer |
//! |---|---|
//! | `POST /tokens` (with `Authorization: Bearer API-KEY`, or a signed request) | `{"token", "kid", "alg", "expires_at"}` for a room and user |
//! | `POST /tokens/verify` | `{"valid": true, "claims"}`, or 401 `{"valid": false, "error"}` |
//! | `GET /.well-known/jwks.json` | the public keys (JWK Set; HMAC secrets never) |
//!
//! Paths are taken after the component's route (Spin's `spin-path-info`).
//! Configuration comes from variables, keys and callers from secrets:
//!
//! | variable | meaning |
//! |---|---|
//! | `keys` | the key set in `signing::keyfile` text form (PEM blocks, `hs256 KID SECRET` lines) |
//! | `clients` | the services that may ask for tokens, one a line: `NAME sha256:HASH-OF-API-KEY [moderator] [max_ttl=SECONDS] [rooms=PATTERN,...]`, or `hmac:SECRET` instead of the hash for a service that signs its requests (`Authorization: Edge-HMAC-SHA256 client=NAME,ts=UNIX,sig=...`, within 60 s, each once: see `replay_store`; `signing::clients`); none: nobody gets tokens |
//! | `replay_store` | the key-value store (a label the manifest grants in `key_value_stores`) where signed requests' signatures are kept for their window, so that each is accepted once by all of the signer's instances, whatever the host keys them by. Without it each instance remembers only what it saw, and a replay reaching another instance (another `Host` under `session_key = "host"`, another of `instances_per_key`, a fresh one) is accepted again; the signer says so in its log. Set but not granted: the signer is not configured (503) |
//! | `signing_kid` | the key that signs by default (empty: the first private key) |
//! | `preset` | `jitsi` (default) or `livekit` |
//! | `issuer` | Jitsi app id / LiveKit API key (`iss`; default `edge`) |
//! | `audience` | `aud` put in tokens and required when verifying (default: the preset's name, `jitsi` or `livekit`) |
//! | `subject` | Jitsi `sub`: the tenant or XMPP domain (default `*`) |
//! | `ttl_seconds`, `max_ttl_seconds` | default and longest lifetime (3600, 86400) |
//! | `leeway_seconds` | clock skew allowed when verifying (60; at most 300) |
//!
//! `POST /tokens` takes `{"room", "user": {"id", "name", "email"?,
//! "avatar"?}, "moderator"?, "can_publish"?, "can_subscribe"?, "ttl"?,
//! "kid"?}`; anything else, or a value out of range, is a 400 naming the
//! field. The caller is authenticated first, before its body is read: no,
//! malformed or unknown credentials are a 401 with `WWW-Authenticate`; a
//! request beyond what the caller may grant (`moderator`, a longer `ttl`,
//! a room outside its `rooms`) is a 403 naming the field. Bodies over
//! [`MAX_TOKEN_BODY`] are a 413. Refusals say what failed in fixed words;
//! the caller's name and the detail go to the log.

mod bindings {
    // Variables, and key-value in the revision Spin's hosts provide as
    // well as edge (for `replay_store`).
    wit_bindgen::generate!({
        inline: "
            package edge:signer;
            world signer {
                import wasi:config/store@0.2.0-rc.1;
                import wasi:keyvalue/store@0.2.0-draft2;
                import wasi:keyvalue/atomics@0.2.0-draft2;
            }
        ",
        path: ["../../wit", "../../wit/spin/keyvalue-2024-10-17"],
        world: "edge:signer/signer",
        generate_all,
    });
}

mod request;

use bindings::wasi::config::store as config;
use bindings::wasi::keyvalue0_2_0_draft2::{atomics, store as kv};
use serde_json::{Value, json};
use signing::KeySet;
use signing::clients::{
    Client, Clients, ReplayGuard, SIGNED_SCHEME, SIGNED_WINDOW, SignedError, SignedRequest,
    replay_key, sweep_key, swept,
};
use signing::join::{JoinVerifier, Preset};
use signing::jwt;
use wasi::http::types::{IncomingRequest, Method, ResponseOutparam};

/// Largest `POST /tokens` body: the longest fields of a token request
/// (room 128, user id 128, name 256, e-mail 254, avatar 2048 characters)
/// fit in well under this.
pub const MAX_TOKEN_BODY: usize = 8 * 1024;

/// Largest `POST /tokens/verify` body: a token of
/// [`jwt::MAX_TOKEN_BYTES`] in its JSON object.
const MAX_VERIFY_BODY: usize = jwt::MAX_TOKEN_BYTES + 1024;

/// Longest API key looked at (a longer `Authorization` is malformed).
const MAX_API_KEY: usize = 512;

/// The `WWW-Authenticate` challenge of a 401 (RFC 6750 §3).
const REALM: &str = "Bearer realm=\"signer\"";

struct Signer;

/// The component's settings, read once per instance ([`settings`]).
struct Settings {
    keys: KeySet,
    clients: Clients,
    verifier: JoinVerifier,
    preset: Preset,
    issuer: String,
    audience: String,
    subject: String,
    ttl: i64,
    max_ttl: i64,
    /// The store signed requests' signatures are kept in, shared by every
    /// instance (`replay_store`); without it, each instance's own
    /// [`REPLAYS`].
    replays: Option<kv::Bucket>,
}

fn var(name: &str) -> Result<Option<String>, String> {
    config::get(name).map_err(|e| format!("reading variable {name}: {e:?}"))
}

fn number(name: &str, default: i64) -> Result<i64, String> {
    match var(name)? {
        None => Ok(default),
        Some(v) if v.trim().is_empty() => Ok(default),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("variable {name} is {v:?}, not a whole number")),
    }
}

thread_local! {
    /// Settings parsed once per instance: a warm (session) instance skips
    /// the PEM parsing and public-key derivation, most of a token's cost in
    /// wasm. Variables never change under a running instance: a config
    /// change gives the component fresh instances.
    static SETTINGS: std::cell::OnceCell<std::rc::Rc<Settings>> = const { std::cell::OnceCell::new() };

    /// Signed requests seen by this instance within the window (without
    /// `replay_store`).
    static REPLAYS: std::cell::RefCell<ReplayGuard> = std::cell::RefCell::new(ReplayGuard::default());

    /// The window-long slot in which this instance last tried to sweep
    /// the shared store.
    static SWEPT: std::cell::Cell<i64> = const { std::cell::Cell::new(i64::MIN) };
    /// The second in which this instance last swept because the shared
    /// store refused a signature.
    static FORCED_SWEEP: std::cell::Cell<i64> = const { std::cell::Cell::new(i64::MIN) };
}

fn settings() -> Result<std::rc::Rc<Settings>, String> {
    if let Some(s) = SETTINGS.with(|c| c.get().cloned()) {
        return Ok(s);
    }
    let s = std::rc::Rc::new(load_settings()?);
    SETTINGS.with(|c| {
        let _ = c.set(s.clone());
    });
    Ok(s)
}

fn load_settings() -> Result<Settings, String> {
    let text = var("keys")?.ok_or("no `keys` variable: configure the signer's keys")?;
    let keys = signing::keyfile::parse(&text).map_err(|e| format!("variable keys: {e}"))?;
    let signing_kid = match var("signing_kid")?.filter(|k| !k.trim().is_empty()) {
        Some(k) => k.trim().to_string(),
        None => keys
            .iter()
            .find(|k| k.can_sign())
            .map(|k| k.kid().to_string())
            .ok_or("variable keys holds no private key to sign with")?,
    };
    let verifier_keys = keys.iter().map(signing::Key::to_public).collect::<Vec<_>>();
    let keys = KeySet::new(keys, &signing_kid).map_err(|e| e.to_string())?;
    let preset_name = var("preset")?.unwrap_or_else(|| "jitsi".into());
    let preset = Preset::parse(preset_name.trim())
        .ok_or_else(|| format!("variable preset is {preset_name:?} (allowed: jitsi, livekit)"))?;
    let nonempty = |name: &str, default: &str| -> Result<String, String> {
        Ok(var(name)?
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| default.into()))
    };
    let issuer = nonempty("issuer", "edge")?;
    let audience = nonempty("audience", preset.default_audience())?;
    let ttl = number("ttl_seconds", 3600)?;
    let max_ttl = number("max_ttl_seconds", 86_400)?;
    if !(1..=max_ttl).contains(&ttl) {
        return Err(format!(
            "variable ttl_seconds is {ttl} (allowed: 1 to max_ttl_seconds, {max_ttl})"
        ));
    }
    let leeway = number("leeway_seconds", 60)?;
    let verifier = JoinVerifier::new(&verifier_keys, preset, &issuer, &audience, leeway)
        .map_err(|e| format!("variables keys, issuer, audience, leeway_seconds: {e}"))?;
    let clients = Clients::parse(&var("clients")?.unwrap_or_default())
        .map_err(|e| format!("variable clients: {e}"))?;
    if clients.is_empty() {
        eprintln!("signer: variable clients lists no caller: every token request is refused (401)");
    }
    let replays = match var("replay_store")?.map(|v| v.trim().to_string()) {
        Some(label) if !label.is_empty() => Some(kv::open(&label).map_err(|e| {
            format!(
                "variable replay_store: the key-value store {label:?} could not be opened ({e:?}): grant it to the signer (key_value_stores)"
            )
        })?),
        _ => {
            if clients.any_signs() {
                eprintln!(
                    "signer: no replay_store: this instance alone remembers the signed requests it accepted, so one replayed to another instance within {SIGNED_WINDOW} s is accepted again"
                );
            }
            None
        }
    };
    Ok(Settings {
        keys,
        clients,
        verifier,
        preset,
        issuer,
        audience,
        subject: nonempty("subject", "*")?,
        ttl,
        max_ttl,
        replays,
    })
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl wasi::exports::http::incoming_handler::Guest for Signer {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let path = guest_http::path_info(&request).unwrap_or_else(|| {
            let pq = request.path_with_query().unwrap_or_default();
            pq.split('?').next().unwrap_or("").to_string()
        });
        let method = request.method();
        let answer = match (&method, path.as_str()) {
            (Method::Get, "/.well-known/jwks.json") => match settings() {
                Ok(s) => Answer::json(200, &s.keys.jwks()),
                Err(e) => unavailable(&e),
            },
            (Method::Post, "/tokens") => issue(request),
            (Method::Post, "/tokens/verify") => {
                with_body(request, MAX_VERIFY_BODY, |body| check(&body))
            }
            (_, "/tokens" | "/tokens/verify" | "/.well-known/jwks.json") => refusal(
                405,
                None,
                "method not allowed (POST /tokens, POST /tokens/verify, GET /.well-known/jwks.json)",
            ),
            _ => refusal(
                404,
                None,
                "no such endpoint (POST /tokens, POST /tokens/verify, GET /.well-known/jwks.json)",
            ),
        };
        respond(out, answer);
    }
}

wasi::http::proxy::export!(Signer);

/// A response: status, JSON body and any extra headers.
struct Answer {
    status: u16,
    body: Vec<u8>,
    challenge: Option<String>,
}

impl Answer {
    fn json(status: u16, value: &impl serde::Serialize) -> Self {
        Self {
            status,
            body: json_body(value),
            challenge: None,
        }
    }
}

fn unavailable(why: &str) -> Answer {
    // The detail (variable names, key ids, line numbers) is the operator's.
    eprintln!("signer misconfigured: {why}");
    refusal(503, None, "the signer is not configured")
}

/// Reads a body of at most `max` bytes; a declared or actual larger one is
/// a 413 (read no further than `max` + one chunk).
fn with_body(request: IncomingRequest, max: usize, f: impl FnOnce(Vec<u8>) -> Answer) -> Answer {
    let declared = request
        .headers()
        .get("content-length")
        .into_iter()
        .next()
        .and_then(|v| String::from_utf8(v).ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return refusal(413, None, "the request body is too large");
    }
    match read_body(request, max) {
        Ok(body) => f(body),
        Err(BodyError::TooLarge) => refusal(413, None, "the request body is too large"),
        Err(BodyError::Unreadable) => refusal(400, None, "the request body could not be read"),
    }
}

enum BodyError {
    TooLarge,
    Unreadable,
}

fn read_body(request: IncomingRequest, max: usize) -> Result<Vec<u8>, BodyError> {
    use wasi::io::streams::StreamError;
    let body = request.consume().map_err(|_| BodyError::Unreadable)?;
    let stream = body.stream().map_err(|_| BodyError::Unreadable)?;
    let mut out = Vec::new();
    loop {
        match stream.blocking_read(16 * 1024) {
            Ok(chunk) => {
                out.extend_from_slice(&chunk);
                if out.len() > max {
                    return Err(BodyError::TooLarge);
                }
            }
            Err(StreamError::Closed) => return Ok(out),
            Err(_) => return Err(BodyError::Unreadable),
        }
    }
}

/// Why a caller is not authenticated (for the log and the challenge).
enum Unauthenticated {
    /// No `Authorization` header.
    Missing,
    /// Not exactly one `Authorization` of a known scheme with sane
    /// parameters (`true`: the signed scheme).
    Malformed(bool),
    /// An API key no configured caller has.
    UnknownKey,
    /// A signed request refused (name, time, signature or replay).
    Signed(SignedError),
}

/// What a token request authenticates with.
enum Credentials {
    /// `Authorization: Bearer API-KEY` (RFC 6750 §2.1: the scheme is
    /// case-insensitive, the key a token68).
    Key(Vec<u8>),
    /// `Authorization: Edge-HMAC-SHA256 client=..,ts=..,sig=..`
    /// (`signing::clients`).
    Signed {
        client: String,
        ts: i64,
        sig: Vec<u8>,
    },
}

fn credentials(request: &IncomingRequest) -> Result<Credentials, Unauthenticated> {
    let values = request.headers().get("authorization");
    let value = match values.as_slice() {
        [] => return Err(Unauthenticated::Missing),
        [one] => one,
        _ => return Err(Unauthenticated::Malformed(false)),
    };
    let Some(space) = value.iter().position(|b| *b == b' ') else {
        return Err(Unauthenticated::Malformed(false));
    };
    let (scheme, rest) = (&value[..space], &value[space + 1..]);
    if scheme.eq_ignore_ascii_case(SIGNED_SCHEME.as_bytes()) {
        let params = std::str::from_utf8(rest).map_err(|_| Unauthenticated::Malformed(true))?;
        return match signing::clients::parse_signed(&format!("{SIGNED_SCHEME} {params}")) {
            Ok((client, ts, sig)) => Ok(Credentials::Signed { client, ts, sig }),
            Err(_) => Err(Unauthenticated::Malformed(true)),
        };
    }
    let token68 = |b: &u8| b.is_ascii_alphanumeric() || b"-._~+/=".contains(b);
    if !scheme.eq_ignore_ascii_case(b"bearer")
        || rest.is_empty()
        || rest.len() > MAX_API_KEY
        || !rest.iter().all(token68)
    {
        return Err(Unauthenticated::Malformed(false));
    }
    Ok(Credentials::Key(rest.to_vec()))
}

fn unauthenticated(why: Unauthenticated) -> Answer {
    let bearer = |error: &str| format!("{REALM}, error=\"{error}\"");
    let signed = |error: &str| format!("{SIGNED_SCHEME} realm=\"signer\", error=\"{error}\"");
    let (log, challenge, message) = match &why {
        Unauthenticated::Missing => (
            "no Authorization header".to_string(),
            format!("{REALM}, {SIGNED_SCHEME} realm=\"signer\""),
            "authentication required",
        ),
        Unauthenticated::Malformed(is_signed) => (
            "a malformed Authorization header".to_string(),
            if *is_signed {
                signed("invalid_request")
            } else {
                bearer("invalid_request")
            },
            "malformed credentials",
        ),
        Unauthenticated::UnknownKey => (
            "an API key no client has".to_string(),
            bearer("invalid_token"),
            "invalid credentials",
        ),
        Unauthenticated::Signed(e) => (
            format!("signed request: {e}"),
            signed("invalid_token"),
            match e {
                SignedError::Stale => "request timestamp outside the allowed window",
                SignedError::Replayed => "request already used",
                _ => "invalid credentials",
            },
        ),
    };
    eprintln!("signer: token request refused (401): {log}");
    let mut answer = refusal(401, None, message);
    answer.challenge = Some(challenge);
    answer
}

fn forbidden(client: &Client, field: &'static str, log: String, message: &str) -> Answer {
    eprintln!(
        "signer: token request of client {} refused (403): {log}",
        client.name()
    );
    refusal(403, Some(field), message)
}

fn issue(request: IncomingRequest) -> Answer {
    let s = match settings() {
        Ok(s) => s,
        Err(e) => return unavailable(&e),
    };
    // Who asks comes first: an unauthenticated caller's body is not read
    // (a signed request's body is, at most MAX_TOKEN_BODY, once its time
    // is right and its name a client's that signs: the signature covers
    // the body).
    let (client, ts, sig) = match credentials(&request) {
        Ok(Credentials::Key(key)) => {
            return match s.clients.authenticate(&key) {
                Some(c) => with_body(request, MAX_TOKEN_BODY, |body| issue_for(&s, c, &body)),
                None => unauthenticated(Unauthenticated::UnknownKey),
            };
        }
        Ok(Credentials::Signed { client, ts, sig }) => (client, ts, sig),
        Err(why) => return unauthenticated(why),
    };
    let now = now();
    if !signing::clients::in_window(ts, now) {
        return unauthenticated(Unauthenticated::Signed(SignedError::Stale));
    }
    if !s.clients.signs(&client) {
        return unauthenticated(Unauthenticated::Signed(SignedError::UnknownClient));
    }
    let path = request.path_with_query().unwrap_or_default();
    let path = path.split('?').next().unwrap_or("").to_string();
    with_body(request, MAX_TOKEN_BODY, |body| {
        let signed = SignedRequest {
            client: &client,
            timestamp: ts,
            signature: &sig,
            method: "POST",
            path: &path,
            body: &body,
        };
        let c = match s.clients.authenticate_signed(&signed, now) {
            Ok(c) => c,
            Err(e) => return unauthenticated(Unauthenticated::Signed(e)),
        };
        // After the signature: only the caller's own requests fill it.
        match first_use(&s, &sig, ts, now) {
            Ok(()) => issue_for(&s, c, &body),
            Err(answer) => answer,
        }
    })
}

/// Records a signed request's signature; a refusal if it was seen before
/// within the window (by any instance, with `replay_store`), or cannot be
/// recorded (refused rather than forgotten).
fn first_use(s: &Settings, sig: &[u8], ts: i64, now: i64) -> Result<(), Answer> {
    let Some(bucket) = &s.replays else {
        return match REPLAYS.with(|g| g.borrow_mut().check(sig, ts, now)) {
            Ok(()) => Ok(()),
            Err(SignedError::Busy) => {
                eprintln!(
                    "signer: replay guard full ({} signatures in {SIGNED_WINDOW} s); refused",
                    ReplayGuard::CAPACITY
                );
                Err(refusal(503, None, "too many signed requests; retry later"))
            }
            Err(e) => Err(unauthenticated(Unauthenticated::Signed(e))),
        };
    };
    // Atomic in the store: of all instances, one gets 1.
    let key = replay_key(sig, ts);
    let mut counted = atomics::increment(bucket, &key, 1);
    if counted.is_err() && FORCED_SWEEP.get() != now {
        // A full store (other components' keys, or a burst) stays full
        // until the stale signatures go, whoever's turn the sweep was:
        // once a second per instance, sweep now and try again.
        FORCED_SWEEP.set(now);
        remove_stale(bucket, now);
        counted = atomics::increment(bucket, &key, 1);
    }
    match counted {
        Ok(1) => {
            sweep(bucket, now);
            Ok(())
        }
        Ok(_) => Err(unauthenticated(Unauthenticated::Signed(
            SignedError::Replayed,
        ))),
        Err(e) => {
            eprintln!("signer: replay_store: {e:?}; signed request refused");
            Err(refusal(503, None, "too many signed requests; retry later"))
        }
    }
}

/// Removes the shared store's stale signatures: once per window-long slot,
/// by the instance that counts the slot's marker first (each instance
/// tries once per slot).
fn sweep(bucket: &kv::Bucket, now: i64) {
    let slot = now.div_euclid(SIGNED_WINDOW);
    if SWEPT.get() == slot {
        return;
    }
    SWEPT.set(slot);
    if !matches!(atomics::increment(bucket, &sweep_key(now), 1), Ok(1)) {
        return;
    }
    remove_stale(bucket, now);
}

/// Deletes the store's signatures (and sweep markers) past their window.
fn remove_stale(bucket: &kv::Bucket, now: i64) {
    // Listed whole first: deleting while paging could skip keys.
    let mut stale = Vec::new();
    let mut cursor = None;
    loop {
        match bucket.list_keys(cursor.as_deref()) {
            Ok(page) => {
                stale.extend(page.keys.into_iter().filter(|k| swept(k, now)));
                match page.cursor {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            Err(e) => {
                eprintln!("signer: replay_store: listing keys to sweep: {e:?}");
                break;
            }
        }
    }
    for key in stale {
        if let Err(e) = bucket.delete(&key) {
            eprintln!("signer: replay_store: sweeping: {e:?}");
            return;
        }
    }
}

fn issue_for(s: &Settings, client: &Client, body: &[u8]) -> Answer {
    let req = match request::TokenRequest::parse(body, s.max_ttl) {
        Ok(r) => r,
        Err((field, message)) => {
            return refusal(400, Some(field), message);
        }
    };
    // What this caller may grant, within the signer's own bounds.
    let grants = &client.grants;
    let max_ttl = grants.max_ttl.unwrap_or(s.ttl).min(s.max_ttl);
    if req.moderator == Some(true) && !grants.moderator {
        return forbidden(
            client,
            "moderator",
            "asked for a moderator token without the moderator grant".into(),
            "this caller may not grant moderator",
        );
    }
    if let Some(ttl) = req.ttl
        && ttl > max_ttl
    {
        return forbidden(
            client,
            "ttl",
            format!("asked for ttl {ttl} s, its max_ttl is {max_ttl} s"),
            &format!("ttl is longer than this caller may grant ({max_ttl} seconds)"),
        );
    }
    if !grants.allows_room(&req.room) {
        return forbidden(
            client,
            "room",
            format!("asked for room {:?}, outside its rooms", req.room),
            "this caller may not issue tokens for this room",
        );
    }
    let now = now();
    let ttl = req.ttl.unwrap_or(s.ttl).min(max_ttl);
    let key = match &req.kid {
        Some(kid) => match s.keys.get(kid) {
            Some(k) if k.can_sign() => k,
            _ => return refusal(400, Some("kid"), "no signing key with this id"),
        },
        None => s.keys.signing_key(),
    };
    let kid = Some(key.kid());
    let signed = match s.preset {
        Preset::LiveKit => {
            let mut claims = signing::presets::livekit(
                &s.issuer,
                &req.user.id,
                &req.user.name,
                &req.room,
                signing::presets::Grants {
                    can_publish: req.can_publish.unwrap_or(true),
                    can_subscribe: req.can_subscribe.unwrap_or(true),
                },
                now,
                ttl,
            );
            claims.aud = Some(s.audience.as_str());
            claims.video.room_admin = req.moderator.unwrap_or(false);
            jwt::sign(&s.keys, kid, &claims)
        }
        Preset::Jitsi => {
            let mut claims = signing::presets::jitsi(
                &s.issuer,
                &s.subject,
                &req.room,
                &req.user,
                req.moderator.unwrap_or(false),
                now,
                ttl,
            );
            claims.aud = s.audience.as_str();
            jwt::sign(&s.keys, kid, &claims)
        }
    };
    match signed {
        Ok(token) => Answer::json(
            200,
            &Issued {
                alg: key.algorithm().name(),
                expires_at: now + ttl,
                kid: key.kid(),
                token: &token,
            },
        ),
        Err(e) => {
            eprintln!("signer: signing failed: {e}");
            refusal(500, None, "the token could not be signed")
        }
    }
}

fn check(body: &[u8]) -> Answer {
    let s = match settings() {
        Ok(s) => s,
        Err(e) => return unavailable(&e),
    };
    let token = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => match (m.get("token"), m.len()) {
            (Some(Value::String(t)), 1) => t.clone(),
            _ => {
                return refusal(
                    400,
                    Some("token"),
                    r#"the body is {"token": "..."} and nothing else"#,
                );
            }
        },
        _ => {
            return refusal(400, None, "the body is not a JSON object");
        }
    };
    // The same checks as every other verifier of these tokens (the codec):
    // signature, aud, iss, times and the preset's claims.
    match s.verifier.verify(&token, now()) {
        Ok(joined) => Answer::json(200, &json!({"valid": true, "claims": joined.claims})),
        Err(e) => {
            eprintln!("signer: token refused: {e}");
            Answer::json(401, &json!({"valid": false, "error": e.code()}))
        }
    }
}

/// `POST /tokens`' answer (fields in the order `json!` gave them).
#[derive(serde::Serialize)]
struct Issued<'a> {
    alg: &'a str,
    expires_at: i64,
    kid: &'a str,
    token: &'a str,
}

/// A refusal's answer: `{"error": {"field"?, "message"}}`.
fn refusal(status: u16, field: Option<&str>, message: impl Into<String>) -> Answer {
    #[derive(serde::Serialize)]
    struct Error<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        field: Option<&'a str>,
        message: String,
    }
    #[derive(serde::Serialize)]
    struct Refusal<'a> {
        error: Error<'a>,
    }
    let error = Error {
        field,
        message: message.into(),
    };
    Answer::json(status, &Refusal { error })
}

/// An answer's body: compact JSON and a newline.
fn json_body(value: &impl serde::Serialize) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).expect("an answer always serializes");
    bytes.push(b'\n');
    bytes
}

fn respond(out: ResponseOutparam, answer: Answer) {
    let mut headers = vec![("content-type", "application/json")];
    if answer.status == 200 {
        headers.push(("cache-control", "no-store"));
    }
    if let Some(c) = &answer.challenge {
        headers.push(("www-authenticate", c));
    }
    guest_http::respond(out, answer.status, &headers, &answer.body);
}
