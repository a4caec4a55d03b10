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

const SIGN: &str = r#"
import json, sys, jwt
d = json.load(sys.stdin)
out = {}
for kid, (alg, key) in d["keys"].items():
    out[kid] = jwt.encode(d["claims"], key, algorithm=alg, headers={"kid": kid})
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
    let out: Value = python(SIGN, &json!({"claims": claims, "keys": sign_keys}));
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
