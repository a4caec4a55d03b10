//! Interoperability with an independent implementation: PyJWT (Debian's
//! python3-jwt with python3-cryptography). Our tokens verify there, theirs
//! verify here, and our JWKS yields keys PyJWT verifies with. (The
//! library is `components/signing`; this runs with the other tests that
//! need Debian packages.)

use edge_tests::python;
use serde_json::{Value, json};
use signing::jwt::{self, Claims, Validation};
use signing::{Key, KeySet};

fn keys() -> KeySet {
    KeySet::new(
        vec![
            Key::ed25519_from_seed("ed", &[11; 32]).unwrap(),
            Key::p256_from_scalar("ec", &[22; 32]).unwrap(),
            Key::hmac("hs", b"0123456789abcdef0123456789abcdef-secret").unwrap(),
        ],
        "ed",
    )
    .unwrap()
}

fn claims() -> Claims {
    let user = signing::presets::User {
        id: "u-1".into(),
        name: "Ada Lovelace".into(),
        email: Some("ada@example.com".into()),
        avatar: None,
    };
    let jitsi = signing::presets::jitsi(
        "app",
        "meet.example.com",
        "standup",
        &user,
        true,
        1_700_000_000,
        3600,
    );
    match serde_json::to_value(jitsi).unwrap() {
        serde_json::Value::Object(claims) => claims,
        other => panic!("the preset is not an object: {other}"),
    }
}

const VERIFY: &str = r#"
import json, sys, jwt
d = json.load(sys.stdin)
out = {}
for kid, (alg, key) in d["keys"].items():
    claims = jwt.decode(d["tokens"][kid], key, algorithms=[alg], audience="jitsi",
                        options={"verify_exp": False, "verify_nbf": False, "verify_iat": False})
    header = jwt.get_unverified_header(d["tokens"][kid])
    out[kid] = {"claims": claims, "header": header}
print(json.dumps(out))
"#;

#[test]
fn our_tokens_verify_in_pyjwt() {
    let keys = keys();
    let claims = claims();
    let mut tokens = serde_json::Map::new();
    let mut verify_keys = serde_json::Map::new();
    for (kid, alg) in [("ed", "EdDSA"), ("ec", "ES256"), ("hs", "HS256")] {
        tokens.insert(
            kid.into(),
            jwt::sign(&keys, Some(kid), &claims).unwrap().into(),
        );
        let key = keys.get(kid).unwrap();
        let material = key
            .public_pem()
            .unwrap_or_else(|| "0123456789abcdef0123456789abcdef-secret".into());
        verify_keys.insert(kid.into(), json!([alg, material]));
    }
    let out: Value = python(VERIFY, &json!({"tokens": tokens, "keys": verify_keys}));
    for (kid, alg) in [("ed", "EdDSA"), ("ec", "ES256"), ("hs", "HS256")] {
        assert_eq!(out[kid]["claims"], Value::Object(claims.clone()), "{kid}");
        assert_eq!(out[kid]["header"]["alg"], alg);
        assert_eq!(out[kid]["header"]["kid"], kid);
    }
}

/// ES256 signature helpers for PyJWT: OpenSSL's ECDSA picks S or n - S
/// at random, and both verify there; ours accepts low S only (at most
/// n/2), so PyJWT's tokens are re-signed until S is low, and `twin` gives
/// the high-S form of a token.
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

const SIGN: &str = r#"
import json, sys, jwt
d = json.load(sys.stdin)
out = {}
for kid, (alg, key) in d["keys"].items():
    while True:
        out[kid] = jwt.encode(d["claims"], key, algorithm=alg, headers={"kid": kid})
        if alg != "ES256" or s_of(out[kid]) <= N // 2:
            break
print(json.dumps(out))
"#;

#[test]
fn pyjwt_tokens_verify_here_and_tampering_is_caught() {
    let keys = keys();
    let claims = claims();
    let mut sign_keys = serde_json::Map::new();
    for (kid, alg) in [("ed", "EdDSA"), ("ec", "ES256"), ("hs", "HS256")] {
        let key = keys.get(kid).unwrap();
        let material = key
            .to_pkcs8_pem()
            .unwrap_or_else(|| "0123456789abcdef0123456789abcdef-secret".into());
        sign_keys.insert(kid.into(), json!([alg, material]));
    }
    let out: Value = python(
        &format!("{ES256_S}{SIGN}"),
        &json!({"claims": claims, "keys": sign_keys}),
    );
    let v = Validation {
        audience: Some("jitsi".into()),
        issuer: Some("app".into()),
        ..Validation::at(1_700_000_100)
    };
    for kid in ["ed", "ec", "hs"] {
        let token = out[kid].as_str().unwrap();
        assert_eq!(jwt::verify(&keys, token, &v).unwrap(), claims, "{kid}");
        // One changed payload byte: refused.
        let parts: Vec<&str> = token.split('.').collect();
        let mut payload = parts[1].as_bytes().to_vec();
        payload[10] = if payload[10] == b'A' { b'B' } else { b'A' };
        let tampered = format!(
            "{}.{}.{}",
            parts[0],
            String::from_utf8(payload).unwrap(),
            parts[2]
        );
        assert!(jwt::verify(&keys, &tampered, &v).is_err(), "{kid} tampered");
    }
}

const JWKS: &str = r#"
import json, sys, jwt
d = json.load(sys.stdin)
out = {}
for jwk in d["jwks"]["keys"]:
    key = jwt.PyJWK(jwk)
    out[jwk["kid"]] = jwt.decode(d["tokens"][jwk["kid"]], key.key, algorithms=[jwk["alg"]],
                                 audience="jitsi", options={"verify_exp": False, "verify_nbf": False, "verify_iat": False})["sub"]
print(json.dumps(out))
"#;

#[test]
fn jwks_keys_verify_our_tokens_in_pyjwt() {
    let keys = keys();
    let jwks = keys.jwks();
    assert_eq!(
        jwks["keys"].as_array().unwrap().len(),
        2,
        "HMAC secrets are never published"
    );
    let tokens = json!({
        "ed": jwt::sign(&keys, Some("ed"), &claims()).unwrap(),
        "ec": jwt::sign(&keys, Some("ec"), &claims()).unwrap(),
    });
    let out: Value = python(JWKS, &json!({"jwks": jwks, "tokens": tokens}));
    assert_eq!(
        out,
        json!({"ed": "meet.example.com", "ec": "meet.example.com"})
    );
}

/// ECDSA signatures are malleable: (r, n - s) verifies wherever (r, s)
/// does, and PyJWT (OpenSSL) accepts both. Here only the low-S form is
/// valid, so a token has one accepted signature.
#[test]
fn high_s_es256_tokens_that_pyjwt_accepts_are_refused_here() {
    let keys = keys();
    let claims = claims();
    let out: Value = python(
        &format!(
            "{ES256_S}{}",
            r#"
import json, sys, jwt
d = json.load(sys.stdin)
out = []
for i in range(8):
    low = d["ours"] if i == 0 else jwt.encode(d["claims"], d["pem"], algorithm="ES256", headers={"kid": "ec"})
    high = low if s_of(low) > N // 2 else twin(low)
    # PyJWT verifies the high-S form: it is a valid ECDSA signature.
    jwt.decode(high, d["public"], algorithms=["ES256"], audience="jitsi",
               options={"verify_exp": False, "verify_nbf": False, "verify_iat": False})
    out.append(high)
print(json.dumps(out))
"#
        ),
        &json!({
            "ours": jwt::sign(&keys, Some("ec"), &claims).unwrap(),
            "claims": claims,
            "pem": keys.get("ec").unwrap().to_pkcs8_pem(),
            "public": keys.get("ec").unwrap().public_pem(),
        }),
    );
    let v = Validation {
        audience: Some("jitsi".into()),
        ..Validation::at(1_700_000_100)
    };
    for token in out.as_array().unwrap() {
        assert_eq!(
            jwt::verify(&keys, token.as_str().unwrap(), &v),
            Err(jwt::VerifyError::BadSignature),
            "{token}"
        );
    }
}
