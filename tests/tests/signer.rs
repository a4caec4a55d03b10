//! The signer component over HTTP on the real host: tokens that PyJWT
//! verifies with the published JWKS, PyJWT's tokens verified here, precise
//! refusals, callers authenticated by API key and bounded by their grants,
//! and the development keys the host generates on first start.

use bytes::Bytes;
use edge_tests::{Edge, TempDir, client, component, python};
use serde_json::{Value, json};

fn spin(preset: &str) -> String {
    format!(
        r#"spin_manifest_version = 2
[application]
name = "signer-test"

[variables]
signer_keys = {{ required = true, secret = true }}
signer_clients = {{ default = "", secret = true }}

[[trigger.http]]
route = "/signer/..."
component = "signer"

[component.signer]
source = "{signer}"
[component.signer.variables]
keys = "{{{{ signer_keys }}}}"
clients = "{{{{ signer_clients }}}}"
issuer = "my-app"
subject = "meet.example.com"
preset = "{preset}"
ttl_seconds = "600"
"#,
        signer = component("signer"),
    )
}

fn edge_config(secret: &str) -> String {
    edge_config_with(secret, &format!("{:?}", clients()))
}

fn edge_config_with(secret: &str, clients: &str) -> String {
    format!(
        r#"app = "spin.toml"
[[tenant]]
name = "conf"
hosts = ["*"]
components = ["signer"]
[tenant.secrets]
signer_keys = {secret}
signer_clients = {clients}
"#
    )
}

/// Two calling services: `webapp` may grant moderator and two hours,
/// `lobby` only the default lifetime (600 s here) and its rooms.
const WEBAPP_KEY: &str = "webapp-0f6c2b8e4d1a9c7e5b3f8a2d6c4e1b9f";
/// The other service's key.
const LOBBY_KEY: &str = "lobby-7d3a9f1c5e8b2d6a4c0e9f7b3d1a5c8e";

/// A third service signs its requests with this secret (base64 of
/// `BACKEND_SECRET`) and may issue for room `standup` only.
const BACKEND_SECRET: &[u8] = b"backend-secret-0123456789abcdef!";

/// The clients text for the three services (keys hashed, the secret as
/// it is).
fn clients() -> String {
    let hash = |k: &str| signing::clients::hash_key(k.as_bytes());
    format!(
        "# NAME  CREDENTIAL  GRANTS\nwebapp {} moderator max_ttl=7200\nlobby  {} rooms=lobby-*,standup\nbackend hmac:{} rooms=standup\n",
        hash(WEBAPP_KEY),
        hash(LOBBY_KEY),
        "YmFja2VuZC1zZWNyZXQtMDEyMzQ1Njc4OWFiY2RlZiE="
    )
}

/// ES256 and HS256 keys as a key file, plus the HS secret.
/// Seconds since the epoch, as a signed request's `ts`.
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn key_file(dir: &TempDir) -> (std::path::PathBuf, String) {
    let ec = signing::Key::p256_from_scalar("x", &[42; 32]).unwrap();
    let secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldC0xMjM0NTY3OA";
    let text = format!(
        "kid: ec-1\n{}\nhs256 hs-1 {secret}\n",
        ec.to_pkcs8_pem().unwrap()
    );
    (dir.write("keys.pem", &text), secret.to_string())
}

/// A request with webapp's key (`POST /tokens`) or none (the rest).
async fn call(edge: &Edge, method: &str, path: &str, body: Value) -> (u16, Value) {
    let auth = format!("Bearer {WEBAPP_KEY}");
    let headers: &[(&str, &str)] = if path == "/signer/tokens" {
        &[("authorization", &auth)]
    } else {
        &[]
    };
    call_with(edge, method, path, headers, body).await.0
}

/// `POST /signer/tokens` signed by `header`, with `extra` headers.
async fn post_signed(
    edge: &Edge,
    header: &str,
    extra: &[(&str, &str)],
    body: Value,
) -> (u16, Value) {
    let mut headers = vec![("authorization", header)];
    headers.extend_from_slice(extra);
    call_with(edge, "POST", "/signer/tokens", &headers, body)
        .await
        .0
}

/// The backend's signature of a token request for `body` at `ts`.
fn backend_signed(ts: i64, body: &Value) -> String {
    signing::clients::sign_request(
        "backend",
        BACKEND_SECRET,
        "POST",
        "/signer/tokens",
        ts,
        body.to_string().as_bytes(),
    )
}

/// Any request; returns (status, JSON body) and the `WWW-Authenticate`
/// header, if any.
async fn call_with(
    edge: &Edge,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> ((u16, Value), Option<String>) {
    let body = if body.is_null() {
        Bytes::new()
    } else {
        Bytes::from(body.to_string())
    };
    let (status, text, challenge) = request_raw(edge, method, path, headers, body).await;
    (
        (
            status,
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {status} {text}")),
        ),
        challenge,
    )
}

async fn request_raw(
    edge: &Edge,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> (u16, String, Option<String>) {
    use http_body_util::BodyExt;
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("{}{path}", edge.url));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = client()
        .request(req.body(http_body_util::Full::new(body)).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string());
    let text = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        String::from_utf8_lossy(&text).into_owned(),
        challenge,
    )
}

const PYJWT_VERIFY_WITH_JWKS: &str = r#"
import json, sys, jwt
d = json.load(sys.stdin)
jwks = {k["kid"]: k for k in d["jwks"]["keys"]}
out = {}
for name, token in d["tokens"].items():
    jwk = jwks[jwt.get_unverified_header(token)["kid"]]
    out[name] = jwt.decode(token, jwt.PyJWK(jwk).key, algorithms=[jwk["alg"]], audience="jitsi", issuer="my-app")
print(json.dumps(out))
"#;

#[tokio::test]
async fn tokens_verify_in_pyjwt_with_the_published_keys_and_back() {
    let dir = TempDir::new("signer");
    let (keys, hs_secret) = key_file(&dir);
    let edge = Edge::start(
        &spin("jitsi"),
        &edge_config(&format!("{{ file = \"{}\" }}", keys.display())),
    );

    let (status, jwks) = call(&edge, "GET", "/signer/.well-known/jwks.json", Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(
        jwks["keys"].as_array().unwrap().len(),
        1,
        "only the public EC key: {jwks}"
    );
    assert_eq!(jwks["keys"][0]["kid"], "ec-1");

    let user = json!({"id": "u-7", "name": "Ada Lovelace", "email": "ada@example.com"});
    let (status, es) = call(
        &edge,
        "POST",
        "/signer/tokens",
        json!({"room": "standup", "user": user, "moderator": true}),
    )
    .await;
    assert_eq!(status, 200, "{es}");
    assert_eq!(
        (es["alg"].as_str(), es["kid"].as_str()),
        (Some("ES256"), Some("ec-1"))
    );
    let claims = python(
        PYJWT_VERIFY_WITH_JWKS,
        &json!({"jwks": jwks, "tokens": {"es": es["token"]}}),
    );
    let c = &claims["es"];
    assert_eq!(
        (
            c["room"].as_str(),
            c["sub"].as_str(),
            c["moderator"].as_bool()
        ),
        (Some("standup"), Some("meet.example.com"), Some(true))
    );
    assert_eq!(c["context"]["user"], user);
    assert_eq!(c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(), 600);

    // A request may pick another key by kid: HS256, checked with the secret.
    let (_, hs) = call(
        &edge,
        "POST",
        "/signer/tokens",
        json!({"room": "standup", "user": user, "kid": "hs-1", "ttl": 60}),
    )
    .await;
    assert_eq!(hs["alg"], "HS256");
    let decoded = python(
        r#"
import base64, json, sys, jwt
d = json.load(sys.stdin)
secret = base64.urlsafe_b64decode(d["secret"] + "=" * (-len(d["secret"]) % 4))
print(json.dumps(jwt.decode(d["token"], secret, algorithms=["HS256"], audience="jitsi")))
"#,
        &json!({"token": hs["token"], "secret": hs_secret}),
    );
    assert_eq!(decoded["room"], "standup");

    // PyJWT's tokens verify here; tampered, expired or alg-none ones do not.
    let pem = std::fs::read_to_string(&keys).unwrap();
    let ec_pem = pem
        .split("kid: ec-1\n")
        .nth(1)
        .unwrap()
        .split("\nhs256")
        .next()
        .unwrap();
    let theirs = python(
        &format!(
            "{ES256_S}{}",
            r#"
import json, sys, time, jwt
d = json.load(sys.stdin)
now = int(time.time())
base = {"iss": "my-app", "aud": "jitsi", "sub": "meet.example.com", "room": "r1",
        "context": {"user": {"id": "u-9", "name": "Grace"}}}
def low_s(claims):
    while True:
        t = jwt.encode(claims, d["pem"], algorithm="ES256", headers={"kid": "ec-1"})
        if s_of(t) <= N // 2:
            return t
good = low_s({**base, "exp": now + 300})
out = {"good": good, "high_s": twin(good),
       "expired": low_s({**base, "exp": now - 3600}),
       "other_aud": low_s({**base, "aud": "livekit", "exp": now + 300}),
       "other_iss": low_s({**base, "iss": "someone", "exp": now + 300}),
       "future": low_s({**base, "nbf": now + 3600, "exp": now + 7200}),
       "crit": jwt.encode({**base, "exp": now + 300}, d["pem"], algorithm="ES256",
                          headers={"kid": "ec-1", "crit": ["exp"]})}
# The high-S twin is a valid ECDSA signature: PyJWT takes it.
jwt.decode(out["high_s"], d["public"], algorithms=["ES256"], audience="jitsi")
print(json.dumps(out))
"#
        ),
        &json!({"pem": ec_pem, "public": signing::Key::from_pem("x", ec_pem).unwrap().public_pem()}),
    );
    let (status, v) = call(
        &edge,
        "POST",
        "/signer/tokens/verify",
        json!({"token": theirs["good"]}),
    )
    .await;
    assert_eq!(
        (status, v["valid"].as_bool(), v["claims"]["room"].as_str()),
        (200, Some(true), Some("r1"))
    );
    let (status, v) = call(
        &edge,
        "POST",
        "/signer/tokens/verify",
        json!({"token": theirs["expired"]}),
    )
    .await;
    assert_eq!((status, v["error"].as_str()), (401, Some("expired")), "{v}");
    // Each of these is refused, in fixed words (no key id, no claim).
    for (name, error) in [
        ("high_s", "bad signature"),
        ("other_aud", "wrong audience"),
        ("other_iss", "wrong issuer"),
        ("future", "not yet valid"),
        ("crit", "unsupported critical header"),
    ] {
        let (status, v) = call(
            &edge,
            "POST",
            "/signer/tokens/verify",
            json!({"token": theirs[name]}),
        )
        .await;
        assert_eq!(
            (status, v),
            (401, json!({"valid": false, "error": error})),
            "{name}"
        );
    }
    let token = es["token"].as_str().unwrap();
    let tampered = token.replacen(".ey", ".eX", 1);
    let (status, v) = call(
        &edge,
        "POST",
        "/signer/tokens/verify",
        json!({"token": tampered}),
    )
    .await;
    assert_eq!(status, 401, "{v}");
    let none = format!("eyJhbGciOiJub25lIn0.{}.", token.split('.').nth(1).unwrap());
    let (status, v) = call(
        &edge,
        "POST",
        "/signer/tokens/verify",
        json!({"token": none}),
    )
    .await;
    assert_eq!((status, v["error"].as_str()), (401, Some("unsigned token")));
    // A kid this signer does not have: the body does not echo it.
    // {"alg":"ES256","kid":"ec-secret-2"} in base64url.
    let header = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImVjLXNlY3JldC0yIn0";
    let unknown = format!("{header}.{}", token.split_once('.').unwrap().1);
    let (status, v) = call(
        &edge,
        "POST",
        "/signer/tokens/verify",
        json!({"token": unknown}),
    )
    .await;
    assert_eq!(
        (status, v),
        (401, json!({"valid": false, "error": "unknown key"}))
    );
}

/// See tests/tests/pyjwt.rs: OpenSSL's ECDSA gives S or n - S; only the
/// low form verifies here.
const ES256_S: &str = r#"
import base64
N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
def b64d(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
def b64e(b): return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
def s_of(token): return int.from_bytes(b64d(token.rsplit(".", 1)[1])[32:], "big")
def twin(token):
    signed, sig = token.rsplit(".", 1)
    raw = b64d(sig)
    return signed + "." + b64e(raw[:32] + (N - int.from_bytes(raw[32:], "big")).to_bytes(32, "big"))
"#;

#[tokio::test]
async fn bad_requests_name_the_field() {
    let dir = TempDir::new("signer");
    let (keys, _) = key_file(&dir);
    let edge = Edge::start(
        &spin("livekit"),
        &edge_config(&format!("{{ file = \"{}\" }}", keys.display())),
    );
    let user = json!({"id": "u-1", "name": "Bob"});
    let cases = [
        (json!({"user": user}), "room", "room is required"),
        (
            json!({"room": "a/b", "user": user}),
            "room",
            "room may hold letters",
        ),
        (
            json!({"room": "r", "user": {"id": "u"}}),
            "user.name",
            "user.name is required",
        ),
        (
            json!({"room": "r", "user": user, "ttl": 999_999}),
            "ttl",
            "ttl is 999999; allowed: 1 to 86400 seconds",
        ),
        (
            json!({"room": "r", "user": user, "kid": "nope"}),
            "kid",
            "no signing key with this id",
        ),
        (
            json!({"room": "r", "user": user, "admin": true}),
            "body",
            "unknown field `admin`",
        ),
        (
            json!({"room": "r", "user": {"id": "u", "name": "n", "avatar": "http://x"}}),
            "user.avatar",
            "must be an https:// URL",
        ),
    ];
    for (body, field, message) in cases {
        let (status, v) = call(&edge, "POST", "/signer/tokens", body.clone()).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert_eq!(v["error"]["field"], field, "{body}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(message),
            "{body}: {v}"
        );
        let text = v.to_string();
        assert!(
            !text.contains("ec-1") && !text.contains("hs-1"),
            "no key ids: {text}"
        );
    }
    let (status, _) = call(&edge, "GET", "/signer/tokens", Value::Null).await;
    assert_eq!(status, 405);
    let (status, _) = call(&edge, "GET", "/signer/nope", Value::Null).await;
    assert_eq!(status, 404);

    // The LiveKit preset: iss, sub and the video grant.
    let (status, t) = call(
        &edge,
        "POST",
        "/signer/tokens",
        json!({"room": "r", "user": user, "can_publish": false}),
    )
    .await;
    assert_eq!(status, 200, "{t}");
    let (_, v) = call(
        &edge,
        "POST",
        "/signer/tokens/verify",
        json!({"token": t["token"]}),
    )
    .await;
    let c = &v["claims"];
    assert_eq!(
        (c["iss"].as_str(), c["sub"].as_str(), c["aud"].as_str()),
        (Some("my-app"), Some("u-1"), Some("livekit"))
    );
    assert_eq!(
        c["video"],
        json!({"roomJoin": true, "room": "r", "canPublish": false, "canSubscribe": true})
    );
    // moderator is LiveKit's roomAdmin, for callers that may grant it.
    let (status, t) = call(
        &edge,
        "POST",
        "/signer/tokens",
        json!({"room": "r", "user": user, "moderator": true}),
    )
    .await;
    assert_eq!(status, 200, "{t}");
    let (_, v) = call(
        &edge,
        "POST",
        "/signer/tokens/verify",
        json!({"token": t["token"]}),
    )
    .await;
    assert_eq!(v["claims"]["video"]["roomAdmin"], true, "{v}");
}

#[tokio::test]
async fn a_development_key_is_generated_once_and_kept() {
    let data = TempDir::new("signer-data");
    let config = edge_config_with("{ generate = \"ed25519\" }", "{ generate = \"api-key\" }");
    let first = Edge::start_with(&spin("jitsi"), &config, data.path());
    let (_, jwks) = call(&first, "GET", "/signer/.well-known/jwks.json", Value::Null).await;
    assert_eq!(jwks["keys"][0]["alg"], "EdDSA", "{jwks}");
    let log = first
        .log_after("generated a development API key for the signer")
        .await;
    assert!(
        log.contains("generated a development Ed25519 signing key"),
        "{log}"
    );
    let api_key_path = data.path().join("keys/conf/signer_clients.key");
    assert!(
        log.contains(&api_key_path.display().to_string()),
        "the log names the key's file: {log}"
    );
    use std::os::unix::fs::PermissionsExt;
    for file in ["signer_keys.pem", "signer_clients.key"] {
        let path = data.path().join("keys/conf").join(file);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600,
            "{file}"
        );
    }
    // The file holds the key as callers send it (README: `$(cat FILE)`).
    let api_key = std::fs::read_to_string(&api_key_path).unwrap();
    let api_key = api_key.trim_end();
    assert!(
        api_key.starts_with("edge_") && api_key.len() == 48,
        "{api_key}"
    );
    let auth = format!("Bearer {api_key}");
    let body = json!({"room": "r", "user": {"id": "u", "name": "n"}, "moderator": true});
    let ((status, t), _) = call_with(
        &first,
        "POST",
        "/signer/tokens",
        &[("authorization", &auth)],
        body.clone(),
    )
    .await;
    assert_eq!(status, 200, "{t}");
    // Only the key's hash is in the signer's configuration.
    assert!(!first.log().contains(api_key));
    drop(first);

    // Restarted: the same keys, so earlier tokens still verify and the
    // caller's key still works; nothing is generated or announced again.
    let second = Edge::start_with(&spin("jitsi"), &config, data.path());
    let (_, again) = call(&second, "GET", "/signer/.well-known/jwks.json", Value::Null).await;
    assert_eq!(again, jwks);
    let (status, v) = call(
        &second,
        "POST",
        "/signer/tokens/verify",
        json!({"token": t["token"]}),
    )
    .await;
    assert_eq!((status, v["valid"].as_bool()), (200, Some(true)), "{v}");
    assert_eq!(v["claims"]["moderator"], true);
    let ((status, _), _) = call_with(
        &second,
        "POST",
        "/signer/tokens",
        &[("authorization", &auth)],
        body,
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        !second.log().contains("generated a development"),
        "{}",
        second.log()
    );
}

/// Headers, body and the challenge expected back.
type Unauthenticated<'a> = (Vec<(&'a str, &'a str)>, &'a Value, String);

/// The issue's hole: anyone could mint tokens, moderator and a day long.
/// Now the caller is authenticated before anything else, and bounded by
/// its grants; refusals carry fixed words.
#[tokio::test]
async fn token_requests_need_a_known_key_and_stay_within_its_grants() {
    let dir = TempDir::new("signer");
    let (keys, _) = key_file(&dir);
    let edge = Edge::start(
        &spin("jitsi"),
        &edge_config(&format!("{{ file = \"{}\" }}", keys.display())),
    );
    let user = json!({"id": "u-1", "name": "Bob"});
    let lobby = format!("Bearer {LOBBY_KEY}");
    let webapp = format!("Bearer {WEBAPP_KEY}");
    let body = json!({"room": "standup", "user": user});
    let realm = r#"Bearer realm="signer""#;
    let both = format!(r#"{realm}, Edge-HMAC-SHA256 realm="signer""#);
    let mut bodies = Vec::new();

    // Unauthenticated: no key, a wrong key, malformed headers. Each is a
    // 401 with a challenge, before the body is looked at (an oversized
    // body from nobody is a 401 too, not a 413).
    let wrong = format!("Bearer {WEBAPP_KEY}x");
    let huge = json!({"room": "standup", "user": {"id": "u", "name": "x".repeat(20_000)}});
    let cases: Vec<Unauthenticated> = vec![
        (vec![], &body, both.clone()),
        (vec![], &huge, both.clone()),
        (
            vec![("authorization", &wrong)],
            &body,
            format!(r#"{realm}, error="invalid_token""#),
        ),
        (
            vec![(
                "authorization",
                "Bearer lobby-7d3a9f1c5e8b2d6a4c0e9f7b3d1a5c8",
            )],
            &body,
            format!(r#"{realm}, error="invalid_token""#),
        ),
    ];
    let malformed = format!(r#"{realm}, error="invalid_request""#);
    let mut all = cases;
    for header in [
        "Basic d2ViYXBwOnNlY3JldA==",
        "Bearer",
        "Bearer ",
        "Bearer a b",
        "Bearer\twebapp",
        "Bearer k\u{e9}y",
        WEBAPP_KEY,
    ] {
        all.push((vec![("authorization", header)], &body, malformed.clone()));
    }
    let too_long = format!("Bearer {}", "a".repeat(600));
    all.push((vec![("authorization", &too_long)], &body, malformed.clone()));
    // Two Authorization headers, even if one is right.
    all.push((
        vec![("authorization", &webapp), ("authorization", &lobby)],
        &body,
        malformed.clone(),
    ));
    for (headers, body, challenge) in &all {
        let ((status, v), got) =
            call_with(&edge, "POST", "/signer/tokens", headers, (*body).clone()).await;
        assert_eq!(status, 401, "{headers:?}: {v}");
        assert_eq!(got.as_deref(), Some(challenge.as_str()), "{headers:?}");
        assert!(v["token"].is_null());
        bodies.push(v);
    }

    // Authenticated but over-privileged: lobby may not grant moderator, a
    // lifetime over the default, or rooms outside lobby-* and standup.
    let forbidden = [
        (
            json!({"room": "standup", "user": user, "moderator": true}),
            "moderator",
        ),
        (json!({"room": "standup", "user": user, "ttl": 601}), "ttl"),
        (json!({"room": "boardroom", "user": user}), "room"),
        (json!({"room": "*", "user": user}), "room"),
        (json!({"room": "lobby", "user": user}), "room"),
    ];
    for (body, field) in &forbidden {
        let ((status, v), challenge) = call_with(
            &edge,
            "POST",
            "/signer/tokens",
            &[("authorization", &lobby)],
            body.clone(),
        )
        .await;
        assert_eq!(
            (status, v["error"]["field"].as_str()),
            (403, Some(*field)),
            "{body}: {v}"
        );
        assert_eq!(challenge, None);
        bodies.push(v);
    }
    // webapp may grant two hours, not more.
    let ((status, v), _) = call_with(
        &edge,
        "POST",
        "/signer/tokens",
        &[("authorization", &webapp)],
        json!({"room": "standup", "user": user, "moderator": true, "ttl": 7201}),
    )
    .await;
    assert_eq!(
        (status, v["error"]["field"].as_str()),
        (403, Some("ttl")),
        "{v}"
    );
    bodies.push(v);

    // An oversized body from a known caller: 413, with or without a
    // Content-Length announcing it.
    let ((status, v), _) = call_with(
        &edge,
        "POST",
        "/signer/tokens",
        &[("authorization", &webapp)],
        huge.clone(),
    )
    .await;
    assert_eq!(status, 413, "{v}");
    bodies.push(v);
    let chunked = {
        let addr = edge.url.trim_start_matches("http://");
        let text = huge.to_string();
        let mut raw = format!(
            "POST /signer/tokens HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {webapp}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
        for piece in text.as_bytes().chunks(1000) {
            raw.push_str(&format!(
                "{:x}\r\n{}\r\n",
                piece.len(),
                std::str::from_utf8(piece).unwrap()
            ));
        }
        raw.push_str("0\r\n\r\n");
        edge_tests::raw(&edge.url, raw.as_bytes())
    };
    assert!(chunked.starts_with("HTTP/1.1 413"), "{chunked}");

    // What each may grant, it gets; PyJWT checks the tokens.
    let ok = [
        (&lobby, json!({"room": "standup", "user": user})),
        (&lobby, json!({"room": "lobby-3", "user": user, "ttl": 600})),
        (
            &webapp,
            json!({"room": "*", "user": user, "moderator": true, "ttl": 7200}),
        ),
    ];
    let mut tokens = serde_json::Map::new();
    for (i, (auth, body)) in ok.iter().enumerate() {
        let ((status, t), _) = call_with(
            &edge,
            "POST",
            "/signer/tokens",
            &[("authorization", auth.as_str())],
            body.clone(),
        )
        .await;
        assert_eq!(status, 200, "{body}: {t}");
        tokens.insert(i.to_string(), t["token"].clone());
    }
    let (_, jwks) = call(&edge, "GET", "/signer/.well-known/jwks.json", Value::Null).await;
    let claims = python(
        PYJWT_VERIFY_WITH_JWKS,
        &json!({"jwks": jwks, "tokens": tokens}),
    );
    let got: Vec<(&str, bool, i64)> = (0..3)
        .map(|i| {
            let c = &claims[i.to_string()];
            (
                c["room"].as_str().unwrap(),
                c["moderator"].as_bool().unwrap(),
                c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("standup", false, 600),
            ("lobby-3", false, 600),
            ("*", true, 7200)
        ]
    );

    // No refusal names a key, a client or the caller's credentials.
    for v in &bodies {
        let text = v.to_string();
        for secret in ["ec-1", "hs-1", "webapp", "lobby-7d3a", "sha256"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert!(v["error"]["message"].is_string(), "{text}");
    }
    // The operator's log says who was refused and why.
    let log = edge.log();
    assert!(
        log.contains("token request of client lobby refused (403)"),
        "{log}"
    );
    assert!(log.contains("an API key no client has"), "{log}");
}

/// A clients text with a mistake: the signer refuses to issue (503, fixed
/// words) and the log says where the mistake is.
#[tokio::test]
async fn a_bad_clients_text_is_reported_to_the_operator_only() {
    let dir = TempDir::new("signer");
    let (keys, _) = key_file(&dir);
    let clients = format!(
        "webapp {} moderater\n",
        signing::clients::hash_key(WEBAPP_KEY.as_bytes())
    );
    let edge = Edge::start(
        &spin("jitsi"),
        &edge_config_with(
            &format!("{{ file = \"{}\" }}", keys.display()),
            &format!("{clients:?}"),
        ),
    );
    let (status, v) = call(
        &edge,
        "POST",
        "/signer/tokens",
        json!({"room": "r", "user": {"id": "u", "name": "n"}}),
    )
    .await;
    assert_eq!(
        (status, v),
        (
            503,
            json!({"error": {"message": "the signer is not configured"}})
        )
    );
    let log = edge.log_after("variable clients").await;
    assert!(
        log.contains("variable clients: line 1, column 80: unknown grant"),
        "{log}"
    );

    // No clients at all: every token request is a 401.
    let edge = Edge::start(
        &spin("jitsi"),
        &edge_config_with(&format!("{{ file = \"{}\" }}", keys.display()), "\"\""),
    );
    let (status, _) = call(
        &edge,
        "POST",
        "/signer/tokens",
        json!({"room": "r", "user": {"id": "u", "name": "n"}}),
    )
    .await;
    assert_eq!(status, 401);
}

/// A service that signs its requests: each request once, within a minute
/// of the signer's clock, exactly as signed. (One warm instance, so the
/// replay guard sees every request; with several instances a replay within
/// the window can reach another one.)
#[tokio::test]
async fn signed_requests_are_accepted_once_in_time_and_as_signed() {
    use signing::clients::sign_request;
    let dir = TempDir::new("signer");
    let (keys, _) = key_file(&dir);
    let config = format!(
        "{}[component.signer]\ninstance = \"session\"\nsession_key = \"host\"\ninstances_per_key = 1\n",
        edge_config(&format!("{{ file = \"{}\" }}", keys.display()))
    );
    let edge = Edge::start(&spin("jitsi"), &config);
    let now = unix_now();
    let body = json!({"room": "standup", "user": {"id": "u-5", "name": "Eve"}});
    let text = body.to_string();
    let sign = |secret: &[u8], client: &str, ts: i64, body: &str| {
        sign_request(
            client,
            secret,
            "POST",
            "/signer/tokens",
            ts,
            body.as_bytes(),
        )
    };
    let post = |header: String, body: Value| {
        let edge = &edge;
        async move {
            call_with(
                edge,
                "POST",
                "/signer/tokens",
                &[("authorization", &header)],
                body,
            )
            .await
        }
    };

    let good = sign(BACKEND_SECRET, "backend", now, &text);
    let ((status, t), _) = post(good.clone(), body.clone()).await;
    assert_eq!(status, 200, "{t}");
    let (status, v) = call(
        &edge,
        "POST",
        "/signer/tokens/verify",
        json!({"token": t["token"]}),
    )
    .await;
    assert_eq!(
        (status, v["claims"]["room"].as_str()),
        (200, Some("standup"))
    );

    let signed_challenge = r#"Edge-HMAC-SHA256 realm="signer", error="invalid_token""#;
    let refused = [
        // The same request again.
        (good.clone(), body.clone(), "request already used"),
        // Its header on another body (another room).
        (
            good.clone(),
            json!({"room": "boardroom", "user": {"id": "u-5", "name": "Eve"}}),
            "invalid credentials",
        ),
        // Signed two minutes ago, or in two minutes.
        (
            sign(BACKEND_SECRET, "backend", now - 120, &text),
            body.clone(),
            "request timestamp outside the allowed window",
        ),
        (
            sign(BACKEND_SECRET, "backend", now + 120, &text),
            body.clone(),
            "request timestamp outside the allowed window",
        ),
        // Another secret; a client that has an API key, not a secret.
        (
            sign(b"not-the-backend-secret-0123456789", "backend", now, &text),
            body.clone(),
            "invalid credentials",
        ),
        (
            sign(BACKEND_SECRET, "webapp", now, &text),
            body.clone(),
            "invalid credentials",
        ),
    ];
    for (header, body, message) in refused {
        let ((status, v), challenge) = post(header.clone(), body).await;
        assert_eq!(
            (status, v["error"]["message"].as_str()),
            (401, Some(message)),
            "{header}"
        );
        assert_eq!(challenge.as_deref(), Some(signed_challenge));
    }
    let ((status, _), challenge) = post(
        "Edge-HMAC-SHA256 client=backend,ts=1".to_string(),
        body.clone(),
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge.as_deref(),
        Some(r#"Edge-HMAC-SHA256 realm="signer", error="invalid_request""#)
    );

    // Signed, but beyond its grants: 403 like any caller.
    let moderator =
        json!({"room": "standup", "user": {"id": "u-5", "name": "Eve"}, "moderator": true});
    let ((status, v), _) = post(
        sign(BACKEND_SECRET, "backend", now, &moderator.to_string()),
        moderator,
    )
    .await;
    assert_eq!(
        (status, v["error"]["field"].as_str()),
        (403, Some("moderator"))
    );
    assert!(
        edge.log().contains("signed request: replayed request"),
        "{}",
        edge.log()
    );
}

/// A signed request from a client the signer does not have is refused
/// before its body is read: a caller with no secret cannot make the
/// signer wait for (or take in) a body. The body here never comes.
#[tokio::test]
async fn a_signed_request_from_an_unknown_client_is_refused_before_its_body() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = TempDir::new("signer");
    let (keys, _) = key_file(&dir);
    let edge = Edge::start(
        &spin("jitsi"),
        &edge_config(&format!("{{ file = \"{}\" }}", keys.display())),
    );
    let now = unix_now();
    for client in ["nobody", "webapp"] {
        // `webapp` exists but has an API key, not a secret.
        let header = signing::clients::sign_request(
            client,
            BACKEND_SECRET,
            "POST",
            "/signer/tokens",
            now,
            b"{}",
        );
        let addr = edge.url.trim_start_matches("http://").to_string();
        let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "POST /signer/tokens HTTP/1.1\r\nhost: {addr}\r\nauthorization: {header}\r\ncontent-type: application/json\r\ncontent-length: 4096\r\n\r\n"
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        // Far above the answer's expected time, and above the host's
        // body_read_timeout_ms (10 s, whose answer is a 408): the status
        // is what is asserted.
        let mut answer = Vec::new();
        let read = tokio::time::timeout(std::time::Duration::from_secs(25), async {
            let mut buf = [0u8; 4096];
            while !String::from_utf8_lossy(&answer).contains("\r\n\r\n") {
                let n = conn.read(&mut buf).await.unwrap();
                assert!(n > 0, "closed: {}", String::from_utf8_lossy(&answer));
                answer.extend_from_slice(&buf[..n]);
            }
        })
        .await;
        let text = String::from_utf8_lossy(&answer);
        assert!(
            read.is_ok(),
            "{client}: no answer while the body was awaited"
        );
        assert!(text.starts_with("HTTP/1.1 401"), "{client}: {text}");
        assert!(
            text.to_ascii_lowercase().contains(
                r#"www-authenticate: edge-hmac-sha256 realm="signer", error="invalid_token""#
            ),
            "{client}: {text}"
        );
        drop(conn);
    }
    assert!(
        edge.log()
            .contains("signed request: no client with an hmac: secret by that name"),
        "{}",
        edge.log()
    );
}

/// The signer with `replay_store` (the tenant's default key-value store),
/// `extra` appended to the edge config; the directories it uses (its
/// keys, its data; dropped after it) and the edge.
fn signer_with_replay_store(extra: &str) -> ((TempDir, TempDir), Edge) {
    let dir = TempDir::new("signer");
    let (keys, _) = key_file(&dir);
    let spin = spin("jitsi").replace(
        "[component.signer.variables]\n",
        "key_value_stores = [\"default\"]\n[component.signer.variables]\nreplay_store = \"default\"\n",
    );
    let config = format!(
        "{}{extra}",
        edge_config(&format!("{{ file = \"{}\" }}", keys.display()))
    );
    let data = TempDir::new("signer-data");
    edge_tests::link_shared_cache(data.path());
    let edge = Edge::start_with(&spin, &config, data.path());
    ((dir, data), edge)
}

/// A signed request is accepted once by all of the signer's instances,
/// whichever the host keys them by: with `replay_store`, the signatures
/// seen are kept in that key-value store, shared by every instance (of
/// every session key). Keyed by the request's host (as the default config
/// once had it), each new `Host` reached a fresh instance with a guard of
/// its own, and a captured request could be replayed without limit
/// within the window.
#[tokio::test]
async fn a_signed_request_is_used_once_whichever_host_or_instance_it_reaches() {
    // Keyed by the client's Host: every new one a fresh instance.
    let (_dirs, edge) = signer_with_replay_store(
        "[component.signer]\ninstance = \"session\"\nsession_key = \"host\"\ninstances_per_key = 4\n",
    );
    let now = unix_now();
    let post = |host: &str, header: &str, body: &Value| {
        let (edge, host, header, body) =
            (&edge, host.to_string(), header.to_string(), body.clone());
        async move { post_signed(edge, &header, &[("host", &host)], body).await }
    };
    let body = json!({"room": "standup", "user": {"id": "u-6", "name": "Eve"}});
    let signed = backend_signed(now, &body);
    let (status, v) = post("a.localhost", &signed, &body).await;
    assert_eq!(status, 200, "{v}");
    for host in ["b.localhost", "c.localhost", "a.localhost"] {
        let (status, v) = post(host, &signed, &body).await;
        assert_eq!(
            (status, v["error"]["message"].as_str()),
            (401, Some("request already used")),
            "{host}"
        );
    }
    // Other requests of the same caller are not affected.
    for (i, host) in ["b.localhost", "d.localhost"].iter().enumerate() {
        let body = json!({"room": "standup", "user": {"id": format!("u-{i}"), "name": "Bo"}});
        let signed = backend_signed(now, &body);
        let (status, v) = post(host, &signed, &body).await;
        assert_eq!(status, 200, "{host}: {v}");
    }
}

/// A full `replay_store` recovers once its signatures are past their
/// window: a signature the store refuses makes the instance sweep the
/// stale ones and try again (the sweep was the turn of whoever counted
/// the slot's marker first, and that count failed too in a full store:
/// every signed request was refused for good).
#[tokio::test]
async fn a_full_replay_store_recovers_once_its_signatures_are_stale() {
    let (_dirs, edge) = signer_with_replay_store("[tenant.limits]\nkv_store_bytes = 16384\n");
    let post = |ts: i64, i: usize| {
        let body = json!({"room": "standup", "user": {"id": format!("u-{i}"), "name": "Eve"}});
        let header = backend_signed(ts, &body);
        let edge = &edge;
        async move { post_signed(edge, &header, &[], body).await.0 }
    };
    // Requests signed 59 s ago (still in their window) until the store is
    // full.
    let old = unix_now() - 59;
    let mut filled = false;
    for i in 0..2000 {
        match post(old, i).await {
            200 => {}
            503 => {
                filled = true;
                break;
            }
            other => panic!("{other}"),
        }
    }
    assert!(filled, "the store never filled");
    // Past their window, those signatures go at the next refusal.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let mut status = 0;
    for i in 0..20 {
        status = post(unix_now(), 10_000 + i).await;
        if status == 200 {
            break;
        }
        // (A store refused for its file's size is compacted at its next
        // flush.)
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert_eq!(status, 200, "{}", edge.log());
}
