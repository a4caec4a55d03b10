//! The signer component over HTTP on the real host: tokens that PyJWT
//! verifies with the published JWKS, PyJWT's tokens verified here, precise
//! refusals, and the development key the host generates on first start.

use bytes::Bytes;
use edge_tests::{Edge, TempDir, client, component, python, request};
use serde_json::{Value, json};

fn spin(preset: &str) -> String {
    format!(
        r#"spin_manifest_version = 2
[application]
name = "signer-test"

[variables]
signer_keys = {{ required = true, secret = true }}

[[trigger.http]]
route = "/signer/..."
component = "signer"

[component.signer]
source = "{signer}"
[component.signer.variables]
keys = "{{{{ signer_keys }}}}"
issuer = "my-app"
subject = "meet.example.com"
preset = "{preset}"
ttl_seconds = "600"
"#,
        signer = component("signer"),
    )
}

fn edge_config(secret: &str) -> String {
    format!(
        r#"app = "spin.toml"
[[tenant]]
name = "conf"
hosts = ["*"]
components = ["signer"]
[tenant.secrets]
signer_keys = {secret}
"#
    )
}

/// ES256 and HS256 keys as a key file, plus the HS secret.
fn key_file(dir: &TempDir) -> (std::path::PathBuf, String) {
    let ec = signing::Key::p256_from_scalar("x", &[42; 32]).unwrap();
    let secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldC0xMjM0NTY3OA";
    let text = format!(
        "kid: ec-1\n{}\nhs256 hs-1 {secret}\n",
        ec.to_pkcs8_pem().unwrap()
    );
    (dir.write("keys.pem", &text), secret.to_string())
}

async fn call(edge: &Edge, method: &str, path: &str, body: Value) -> (u16, Value) {
    let body = if body.is_null() {
        Bytes::new()
    } else {
        Bytes::from(body.to_string())
    };
    let (status, text) =
        request(&client(), method, &format!("{}{path}", edge.url), &[], body).await;
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}")),
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
        r#"
import json, sys, time, jwt
d = json.load(sys.stdin)
now = int(time.time())
base = {"iss": "my-app", "aud": "jitsi", "sub": "meet.example.com", "room": "r1"}
good = jwt.encode({**base, "exp": now + 300}, d["pem"], algorithm="ES256", headers={"kid": "ec-1"})
expired = jwt.encode({**base, "exp": now - 3600}, d["pem"], algorithm="ES256", headers={"kid": "ec-1"})
print(json.dumps({"good": good, "expired": expired}))
"#,
        &json!({"pem": ec_pem}),
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
    assert_eq!(status, 401);
    assert!(
        v["error"].as_str().unwrap().starts_with("expired at"),
        "{v}"
    );
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
    assert_eq!(
        (status, v["error"].as_str()),
        (401, Some("unsigned tokens (alg \"none\") are refused"))
    );
}

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
            "no key \"nope\" (signing keys: ec-1, hs-1)",
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
        (c["iss"].as_str(), c["sub"].as_str()),
        (Some("my-app"), Some("u-1"))
    );
    assert_eq!(
        c["video"],
        json!({"roomJoin": true, "room": "r", "canPublish": false, "canSubscribe": true})
    );
}

#[tokio::test]
async fn a_development_key_is_generated_once_and_kept() {
    let data = TempDir::new("signer-data");
    let config = edge_config("{ generate = \"ed25519\" }");
    let first = Edge::start_with(&spin("jitsi"), &config, data.path());
    let (_, jwks) = call(&first, "GET", "/signer/.well-known/jwks.json", Value::Null).await;
    assert_eq!(jwks["keys"][0]["alg"], "EdDSA", "{jwks}");
    let (_, t) = call(
        &first,
        "POST",
        "/signer/tokens",
        json!({"room": "r", "user": {"id": "u", "name": "n"}}),
    )
    .await;
    let log = first
        .log_after("generated a development Ed25519 signing key")
        .await;
    assert!(
        log.contains("generated a development Ed25519 signing key"),
        "{log}"
    );
    let path = data.path().join("keys/conf/signer_keys.pem");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    drop(first);

    // Restarted: the same key, so earlier tokens still verify.
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
    assert!(
        !second.log().contains("generated a development"),
        "{}",
        second.log()
    );
}
