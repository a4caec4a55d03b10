//! The signer: issues and verifies join tokens for the conferencing service
//! and publishes its public keys (a `wasi:http/proxy` component; the
//! cryptography is the `signing` library, shared with the MariaDB UDFs).
//!
//! | request | answer |
//! |---|---|
//! | `POST /tokens` | `{"token", "kid", "alg", "expires_at"}` for a room and user |
//! | `POST /tokens/verify` | `{"valid": true, "kid", "claims"}`, or 401 `{"valid": false, "error"}` |
//! | `GET /.well-known/jwks.json` | the public keys (JWK Set; HMAC secrets never) |
//!
//! Paths are taken after the component's route (Spin's `spin-path-info`).
//! Configuration comes from variables, keys from a secret:
//!
//! | variable | meaning |
//! |---|---|
//! | `keys` | the key set in `signing::keyfile` text form (PEM blocks, `hs256 KID SECRET` lines) |
//! | `signing_kid` | the key that signs by default (empty: the first private key) |
//! | `preset` | `jitsi` (default) or `livekit` |
//! | `issuer` | Jitsi app id / LiveKit API key (`iss`) |
//! | `audience` | Jitsi `aud` (default `jitsi`) |
//! | `subject` | Jitsi `sub`: the tenant or XMPP domain (default `*`) |
//! | `ttl_seconds`, `max_ttl_seconds` | default and longest lifetime (3600, 86400) |
//! | `leeway_seconds` | clock skew allowed when verifying (60) |
//!
//! `POST /tokens` takes `{"room", "user": {"id", "name", "email"?,
//! "avatar"?}, "moderator"?, "can_publish"?, "can_subscribe"?, "ttl"?,
//! "kid"?}`; anything else, or a value out of range, is a 400 naming the
//! field.

mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "edge:platform/variables",
        generate_all,
    });
}

mod request;

use bindings::wasi::config::store as config;
use serde_json::{Value, json};
use signing::KeySet;
use signing::jwt::{self, Validation};
use wasi::http::types::{IncomingRequest, Method, ResponseOutparam};

/// Largest request body read.
const MAX_BODY: usize = 64 * 1024;

struct Signer;

/// The component's settings, read once per instance ([`settings`]).
struct Settings {
    keys: KeySet,
    preset: String,
    issuer: String,
    audience: String,
    subject: String,
    ttl: i64,
    max_ttl: i64,
    leeway: i64,
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
    let keys = KeySet::new(keys, &signing_kid).map_err(|e| e.to_string())?;
    let preset = var("preset")?.unwrap_or_else(|| "jitsi".into());
    if preset != "jitsi" && preset != "livekit" {
        return Err(format!(
            "variable preset is {preset:?} (allowed: jitsi, livekit)"
        ));
    }
    Ok(Settings {
        keys,
        preset,
        issuer: var("issuer")?.unwrap_or_default(),
        audience: var("audience")?
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| "jitsi".into()),
        subject: var("subject")?
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "*".into()),
        ttl: number("ttl_seconds", 3600)?,
        max_ttl: number("max_ttl_seconds", 86_400)?,
        leeway: number("leeway_seconds", 60)?,
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
        let (status, body) = match (&method, path.as_str()) {
            (Method::Get, "/.well-known/jwks.json") => match settings() {
                Ok(s) => (200, json_body(&s.keys.jwks())),
                Err(e) => unavailable(&e),
            },
            (Method::Post, "/tokens") => with_body(request, |body| issue(&body)),
            (Method::Post, "/tokens/verify") => with_body(request, |body| check(&body)),
            (_, "/tokens" | "/tokens/verify" | "/.well-known/jwks.json") => refusal(
                405,
                None,
                format!(
                    "{method:?} is not allowed here (POST /tokens, POST /tokens/verify, GET /.well-known/jwks.json)"
                ),
            ),
            _ => refusal(
                404,
                None,
                format!(
                    "no endpoint {path:?} (POST /tokens, POST /tokens/verify, GET /.well-known/jwks.json)"
                ),
            ),
        };
        respond(out, status, &body);
    }
}

wasi::http::proxy::export!(Signer);

fn unavailable(why: &str) -> (u16, Vec<u8>) {
    eprintln!("signer misconfigured: {why}");
    refusal(503, None, format!("the signer is not configured: {why}"))
}

fn with_body(
    request: IncomingRequest,
    f: impl FnOnce(Vec<u8>) -> (u16, Vec<u8>),
) -> (u16, Vec<u8>) {
    match guest_http::read_body(request, MAX_BODY) {
        Ok(body) => f(body),
        Err(why) => refusal(400, None, why),
    }
}

fn issue(body: &[u8]) -> (u16, Vec<u8>) {
    let s = match settings() {
        Ok(s) => s,
        Err(e) => return unavailable(&e),
    };
    let req = match request::TokenRequest::parse(body, s.max_ttl) {
        Ok(r) => r,
        Err((field, message)) => {
            return refusal(400, Some(field), message);
        }
    };
    let now = now();
    let ttl = req.ttl.unwrap_or(s.ttl).min(s.max_ttl);
    let key = match &req.kid {
        Some(kid) => match s.keys.get(kid) {
            Some(k) if k.can_sign() => k,
            Some(_) => {
                return refusal(
                    400,
                    Some("kid"),
                    format!("key {kid:?} is a public key and cannot sign"),
                );
            }
            None => {
                let known: Vec<&str> = s
                    .keys
                    .keys()
                    .iter()
                    .filter(|k| k.can_sign())
                    .map(|k| k.kid())
                    .collect();
                return refusal(
                    400,
                    Some("kid"),
                    format!("no key {kid:?} (signing keys: {})", known.join(", ")),
                );
            }
        },
        None => s.keys.signing_key(),
    };
    let kid = Some(key.kid());
    let signed = match s.preset.as_str() {
        "livekit" => jwt::sign(
            &s.keys,
            kid,
            &signing::presets::livekit(
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
            ),
        ),
        _ => jwt::sign(
            &s.keys,
            kid,
            &signing::presets::jitsi(
                &s.issuer,
                &s.subject,
                &req.room,
                &req.user,
                req.moderator.unwrap_or(false),
                now,
                ttl,
            ),
        ),
    };
    match signed {
        Ok(token) => (
            200,
            json_body(&Issued {
                alg: key.algorithm().name(),
                expires_at: now + ttl,
                kid: key.kid(),
                token: &token,
            }),
        ),
        Err(e) => refusal(500, None, e.to_string()),
    }
}

fn check(body: &[u8]) -> (u16, Vec<u8>) {
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
    let v = Validation {
        leeway: s.leeway,
        audience: (s.preset == "jitsi").then(|| s.audience.clone()),
        issuer: (!s.issuer.is_empty()).then(|| s.issuer.clone()),
        ..Validation::at(now())
    };
    match jwt::verify(&s.keys, &token, &v) {
        Ok(claims) => (200, json_body(&json!({"valid": true, "claims": claims}))),
        Err(e) => (
            401,
            json_body(&json!({"valid": false, "error": e.to_string()})),
        ),
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
fn refusal(status: u16, field: Option<&str>, message: impl Into<String>) -> (u16, Vec<u8>) {
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
    (status, json_body(&Refusal { error }))
}

/// An answer's body: compact JSON and a newline.
fn json_body(value: &impl serde::Serialize) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).expect("an answer always serializes");
    bytes.push(b'\n');
    bytes
}

fn respond(out: ResponseOutparam, status: u16, body: &[u8]) {
    let mut headers = vec![("content-type", "application/json")];
    if status == 200 {
        headers.push(("cache-control", "no-store"));
    }
    guest_http::respond(out, status, &headers, body);
}
