//! Every way a token or a row signature can be wrong is refused with a
//! precise error; keys are checked when loaded.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::json;
use signing::jwt::{self, Claims, Validation, VerifyError};
use signing::row::{Column, canonical, sign_row, verify_row};
use signing::{Key, KeyError, KeySet};

fn keys() -> KeySet {
    KeySet::new(
        vec![
            Key::ed25519_from_seed("ed", &[1; 32]).unwrap(),
            Key::hmac("hs", &[2; 32]).unwrap(),
        ],
        "ed",
    )
    .unwrap()
}

fn claims(exp: i64) -> Claims {
    let mut c = Claims::new();
    c.insert("sub".into(), "alice".into());
    c.insert("exp".into(), exp.into());
    c
}

fn forge(header: serde_json::Value, claims: &Claims, signature: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        B64.encode(header.to_string()),
        B64.encode(serde_json::Value::Object(claims.clone()).to_string()),
        B64.encode(signature)
    )
}

#[test]
fn unsigned_and_unknown_algorithms() {
    let t = forge(json!({"alg": "none"}), &claims(2000), b"");
    assert_eq!(
        jwt::verify(&keys(), &t, &Validation::at(1000)),
        Err(VerifyError::AlgorithmNone)
    );
    let t = forge(json!({"alg": "RS256", "kid": "ed"}), &claims(2000), b"x");
    assert_eq!(
        jwt::verify(&keys(), &t, &Validation::at(1000)),
        Err(VerifyError::UnsupportedAlgorithm("RS256".into()))
    );
}

#[test]
fn algorithm_confusion_is_refused() {
    // The classic attack: HS256 "signed" with the public key as the secret.
    let ks = keys();
    let public = ks.get("ed").unwrap().public_jwk().unwrap()["x"].clone();
    let header = json!({"alg": "HS256", "kid": "ed"});
    let signing_input = format!(
        "{}.{}",
        B64.encode(header.to_string()),
        B64.encode(serde_json::Value::Object(claims(2000)).to_string())
    );
    use hmac::Mac;
    let mut mac =
        hmac::Hmac::<sha2::Sha256>::new_from_slice(public.as_str().unwrap().as_bytes()).unwrap();
    mac.update(signing_input.as_bytes());
    let t = format!(
        "{signing_input}.{}",
        B64.encode(mac.finalize().into_bytes())
    );
    assert_eq!(
        jwt::verify(&ks, &t, &Validation::at(1000)),
        Err(VerifyError::AlgorithmMismatch {
            token: "HS256".into(),
            kid: "ed".into(),
            key: "EdDSA"
        })
    );
}

#[test]
fn keys_signatures_and_times() {
    let ks = keys();
    let good = jwt::sign(&ks, None, &claims(2000)).unwrap();
    assert!(jwt::verify(&ks, &good, &Validation::at(1000)).is_ok());

    // Another key set with the same kid: bad signature.
    let other = KeySet::new(vec![Key::ed25519_from_seed("ed", &[9; 32]).unwrap()], "ed").unwrap();
    assert_eq!(
        jwt::verify(&other, &good, &Validation::at(1000)),
        Err(VerifyError::BadSignature)
    );

    let unknown = KeySet::new(
        vec![Key::ed25519_from_seed("new", &[1; 32]).unwrap()],
        "new",
    )
    .unwrap();
    assert_eq!(
        jwt::verify(&unknown, &good, &Validation::at(1000)),
        Err(VerifyError::UnknownKey("ed".into()))
    );

    assert_eq!(
        jwt::verify(&ks, &good, &Validation::at(2060)),
        Err(VerifyError::Expired {
            exp: 2000,
            now: 2060,
            leeway: 60
        })
    );
    assert!(
        jwt::verify(&ks, &good, &Validation::at(2059)).is_ok(),
        "within the leeway"
    );

    let mut c = claims(5000);
    c.insert("nbf".into(), 3000.into());
    let t = jwt::sign(&ks, None, &c).unwrap();
    assert_eq!(
        jwt::verify(&ks, &t, &Validation::at(1000)),
        Err(VerifyError::NotYetValid {
            nbf: 3000,
            now: 1000,
            leeway: 60
        })
    );

    let no_exp = jwt::sign(&ks, None, &Claims::new()).unwrap();
    assert_eq!(
        jwt::verify(&ks, &no_exp, &Validation::at(1000)),
        Err(VerifyError::MissingClaim("exp", "a number"))
    );

    let v = Validation {
        audience: Some("jitsi".into()),
        ..Validation::at(1000)
    };
    let mut c = claims(2000);
    c.insert("aud".into(), "other".into());
    let t = jwt::sign(&ks, None, &c).unwrap();
    assert!(matches!(
        jwt::verify(&ks, &t, &v),
        Err(VerifyError::WrongClaim { claim: "aud", .. })
    ));

    for bad in ["", "a.b", "a.b.c.d", "!!.e30.AA", &good[..good.len() - 3]] {
        assert!(
            jwt::verify(&ks, bad, &Validation::at(1000)).is_err(),
            "{bad:?}"
        );
    }
}

#[test]
fn rotation_signs_with_the_new_key_and_verifies_the_old() {
    let old = KeySet::new(
        vec![Key::ed25519_from_seed("2025", &[1; 32]).unwrap()],
        "2025",
    )
    .unwrap();
    let old_token = jwt::sign(&old, None, &claims(2000)).unwrap();
    let rotated = KeySet::new(
        vec![
            Key::ed25519_from_seed("2025", &[1; 32]).unwrap(),
            Key::ed25519_from_seed("2026", &[2; 32]).unwrap(),
        ],
        "2026",
    )
    .unwrap();
    assert!(jwt::verify(&rotated, &old_token, &Validation::at(1000)).is_ok());
    let new_token = jwt::sign(&rotated, None, &claims(2000)).unwrap();
    let header: serde_json::Value =
        serde_json::from_slice(&B64.decode(new_token.split('.').next().unwrap()).unwrap()).unwrap();
    assert_eq!(header["kid"], "2026");
}

#[test]
fn keys_are_checked_when_loaded() {
    assert_eq!(
        Key::hmac("k", b"short").unwrap_err(),
        KeyError::ShortSecret {
            kid: "k".into(),
            len: 5
        }
    );
    assert_eq!(
        Key::from_pem("k", "nope").unwrap_err(),
        KeyError::BadPem { kid: "k".into() }
    );
    assert_eq!(
        Key::hmac("a b", &[0; 32]).unwrap_err(),
        KeyError::BadKid("a b".into())
    );
    let ed = Key::ed25519_from_seed("k", &[1; 32]).unwrap();
    let public_only = Key::from_pem("k", &ed.public_pem().unwrap()).unwrap();
    assert!(!public_only.can_sign());
    assert_eq!(
        KeySet::new(vec![public_only], "k").unwrap_err(),
        KeyError::NoSigningKey("k".into())
    );
    let pem = ed.to_pkcs8_pem().unwrap();
    let back = Key::from_pem("k", &pem).unwrap();
    assert_eq!(back.public_jwk(), ed.public_jwk());
    assert!(format!("{back:?}").contains("EdDSA") && !format!("{back:?}").contains("PRIVATE"));
}

#[test]
fn row_encoding_is_unambiguous() {
    let pairs: [(&[Column], &[Column]); 5] = [
        (
            &[Column::Str(b"ab"), Column::Str(b"c")],
            &[Column::Str(b"a"), Column::Str(b"bc")],
        ),
        (&[Column::Null], &[Column::Str(b"")]),
        (&[Column::Int(1)], &[Column::Str(b"1")]),
        (&[Column::Decimal(b"1.50")], &[Column::Str(b"1.50")]),
        (&[Column::Str(b"a"), Column::Null], &[Column::Str(b"a")]),
    ];
    for (a, b) in pairs {
        assert_ne!(canonical(a), canonical(b), "{a:?} vs {b:?}");
        assert_ne!(sign_row(&[7; 32], a), sign_row(&[7; 32], b));
    }
    assert_eq!(
        canonical(&[Column::Real(0.0)]),
        canonical(&[Column::Real(-0.0)])
    );
    let row = [
        Column::Int(42),
        Column::Str(b"alice"),
        Column::Decimal(b"9.99"),
    ];
    let sig = sign_row(&[7; 32], &row);
    assert_eq!(sig.len(), 64);
    assert!(verify_row(&[7; 32], &row, &sig));
    assert!(!verify_row(&[8; 32], &row, &sig));
    assert!(!verify_row(&[7; 32], &row, &sig[..62]));
    assert!(!verify_row(&[7; 32], &row, "not hex"));
}

#[test]
fn key_files_parse_and_say_which_line_is_wrong() {
    let ed = Key::ed25519_from_seed("x", &[3; 32]).unwrap();
    let text = format!(
        "# keys\nkid: conf-2026\n{}\n{}hs256 billing {}\n",
        ed.to_pkcs8_pem().unwrap(),
        ed.public_pem().unwrap(),
        B64.encode([5u8; 32])
    );
    let keys = signing::keyfile::parse(&text).unwrap();
    let kids: Vec<&str> = keys.iter().map(|k| k.kid()).collect();
    assert_eq!(kids[0], "conf-2026");
    assert_eq!(
        kids[1].len(),
        43,
        "an unnamed PEM key gets its RFC 7638 thumbprint"
    );
    assert_eq!(kids[2], "billing");
    assert!(keys[0].can_sign() && !keys[1].can_sign());

    let err = |t: &str| signing::keyfile::parse(t).unwrap_err().to_string();
    assert_eq!(
        err("\nhs256 k c2hvcnQ=\n"),
        "line 2: key \"k\": an HS256 secret needs at least 32 bytes, this one has 5"
    );
    assert_eq!(
        err("hs256 k\n"),
        "line 1: an HMAC key line is `hs256 KID SECRET` (secret in base64)"
    );
    assert_eq!(
        err("kid: a\n"),
        "line 1: `kid:` line not followed by a PEM block"
    );
    assert_eq!(
        err("-----BEGIN PRIVATE KEY-----\nAAAA\n"),
        "line 1: PEM block without its END line"
    );
    assert!(err("ssh-rsa AAAA").starts_with("line 1: expected `kid: NAME`"));
}

/// Ed25519 signatures are deterministic, so a token is a fixed string for a
/// fixed key and claims: this pins the encoding (header fields sorted,
/// compact JSON, base64url without padding) against changes in how it is
/// built.
#[test]
fn tokens_are_byte_stable() {
    let user = signing::presets::User {
        id: "u1".into(),
        name: "Ada \"the\" Countess".into(),
        email: Some("ada@example.com".into()),
        avatar: None,
    };
    let c = signing::presets::jitsi(
        "app",
        "meet.example.com",
        "standup",
        &user,
        true,
        1000,
        3600,
    );
    let token = jwt::sign(&keys(), None, &c).unwrap();
    assert_eq!(token, PINNED);
    let header = B64.decode(token.split('.').next().unwrap()).unwrap();
    assert_eq!(header, br#"{"alg":"EdDSA","kid":"ed","typ":"JWT"}"#);
}

const PINNED: &str = concat!(
    "eyJhbGciOiJFZERTQSIsImtpZCI6ImVkIiwidHlwIjoiSldUIn0.",
    "eyJhdWQiOiJqaXRzaSIsImNvbnRleHQiOnsidXNlciI6eyJlbWFpbCI6ImFkYUBleGFtcGxlLmNvbSIsImlkIjoidT",
    "EiLCJuYW1lIjoiQWRhIFwidGhlXCIgQ291bnRlc3MifX0sImV4cCI6NDYwMCwiaWF0IjoxMDAwLCJpc3MiOiJhcHAi",
    "LCJtb2RlcmF0b3IiOnRydWUsIm5iZiI6MTAwMCwicm9vbSI6InN0YW5kdXAiLCJzdWIiOiJtZWV0LmV4YW1wbGUuY29tIn0.",
    "YcJoJjDxBLRfUkvpqtWT2lyAXPO_peCEwbE2svppgBHYYZ4LVRgmKj6WdDjX3OrRkwVSqFBwCJha4DpMxc_uDg"
);
