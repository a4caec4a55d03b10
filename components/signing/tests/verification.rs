//! What verification checks beyond the signature, on the RFCs' own
//! examples: RFC 7515 appendix A.1 (HS256) and A.3 (ES256, whose published
//! signature happens to have a high S), and join tokens for a room.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::json;
use signing::join::{JoinConfigError, JoinVerifier, Preset};
use signing::jwt::{self, MAX_LEEWAY, Validation, VerifyError};
use signing::presets::{Grants, User, jitsi, livekit};
use signing::{Key, KeySet};

/// RFC 7515 A.1: `{"iss":"joe","exp":1300819380,"http://example.com/is_root":true}`.
const A1_TOKEN: &str = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const A1_KEY: &str =
    "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow";
const A1_EXP: i64 = 1_300_819_380;

/// RFC 7515 A.3: the same claims, ES256, and the key's private scalar.
const A3_TOKEN: &str = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q";
const A3_D: &str = "jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI";

/// The order of P-256's group, big-endian.
const P256_N: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
];

fn hs_key() -> Key {
    Key::hmac("a1", &B64.decode(A1_KEY).unwrap()).unwrap()
}

fn es_key() -> Key {
    let d: [u8; 32] = B64.decode(A3_D).unwrap().try_into().unwrap();
    Key::p256_from_scalar("a3", &d).unwrap()
}

fn before_exp() -> Validation {
    Validation::at(A1_EXP - 1000)
}

/// The token with its ES256 signature's S replaced by n - S: the other
/// signature that standard ECDSA accepts for the same message.
fn flip_s(token: &str) -> String {
    let (signed, sig) = token.rsplit_once('.').unwrap();
    let mut sig = B64.decode(sig).unwrap();
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let d = P256_N[i] as i16 - sig[32 + i] as i16 - borrow;
        borrow = i16::from(d < 0);
        sig[32 + i] = d.rem_euclid(256) as u8;
    }
    format!("{signed}.{}", B64.encode(sig))
}

fn s_is_high(token: &str) -> bool {
    let sig = B64.decode(token.rsplit_once('.').unwrap().1).unwrap();
    let s = &sig[32..];
    // Compare s with (n - 1) / 2, both big-endian: high when s > n / 2.
    let mut half = [0u8; 32];
    let mut carry = 0u16;
    for i in 0..32 {
        let v = (carry << 8) | P256_N[i] as u16;
        half[i] = (v >> 1) as u8;
        carry = v & 1;
    }
    s > &half[..]
}

/// An HS256 token with any header, signed with the A.1 key.
fn hs_token(header: serde_json::Value, claims: serde_json::Value) -> String {
    use hmac::Mac;
    let input = format!(
        "{}.{}",
        B64.encode(header.to_string()),
        B64.encode(claims.to_string())
    );
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&B64.decode(A1_KEY).unwrap()).unwrap();
    mac.update(input.as_bytes());
    format!("{input}.{}", B64.encode(mac.finalize().into_bytes()))
}

#[test]
fn rfc7515_a1_verifies_with_its_issuer_and_no_audience() {
    let keys = [hs_key()];
    let v = Validation {
        issuer: Some("joe".into()),
        ..before_exp()
    };
    let claims = jwt::verify_with(&keys, A1_TOKEN, &v).unwrap();
    assert_eq!(claims["http://example.com/is_root"], true);

    let wrong_iss = Validation {
        issuer: Some("jane".into()),
        ..before_exp()
    };
    let e = jwt::verify_with(&keys, A1_TOKEN, &wrong_iss).unwrap_err();
    assert!(
        matches!(e, VerifyError::WrongClaim { claim: "iss", .. }),
        "{e}"
    );
    assert_eq!(e.code(), "wrong issuer");

    // The token names no audience: a verifier that requires one refuses it.
    let wants_aud = Validation {
        audience: Some("jitsi".into()),
        ..before_exp()
    };
    assert_eq!(
        jwt::verify_with(&keys, A1_TOKEN, &wants_aud),
        Err(VerifyError::MissingClaim("aud", "a string or a list"))
    );
}

#[test]
fn audience_is_checked_both_ways() {
    let keys = [hs_key()];
    let t = |aud: serde_json::Value| {
        hs_token(
            json!({"alg": "HS256"}),
            json!({"iss": "joe", "exp": A1_EXP, "aud": aud}),
        )
    };
    let jitsi = Validation {
        audience: Some("jitsi".into()),
        ..before_exp()
    };
    assert!(jwt::verify_with(&keys, &t(json!("jitsi")), &jitsi).is_ok());
    assert!(jwt::verify_with(&keys, &t(json!(["x", "jitsi"])), &jitsi).is_ok());
    let e = jwt::verify_with(&keys, &t(json!("livekit")), &jitsi).unwrap_err();
    assert_eq!(e.code(), "wrong audience");
    let e = jwt::verify_with(&keys, &t(json!(["livekit"])), &jitsi).unwrap_err();
    assert_eq!(e.code(), "wrong audience");
    // RFC 7519 §4.1.3: a token for some audience is refused by a verifier
    // that is none of them.
    let e = jwt::verify_with(&keys, &t(json!("jitsi")), &before_exp()).unwrap_err();
    assert_eq!(e, VerifyError::UnexpectedAudience("\"jitsi\"".into()));
}

#[test]
fn times_are_checked_with_a_bounded_leeway() {
    let keys = [hs_key()];
    let at = |now, leeway| Validation {
        leeway,
        ..Validation::at(now)
    };
    assert!(jwt::verify_with(&keys, A1_TOKEN, &at(A1_EXP + 59, 60)).is_ok());
    assert_eq!(
        jwt::verify_with(&keys, A1_TOKEN, &at(A1_EXP + 60, 60)),
        Err(VerifyError::Expired {
            exp: A1_EXP,
            now: A1_EXP + 60,
            leeway: 60
        })
    );
    // A day of leeway is cut to MAX_LEEWAY.
    assert!(jwt::verify_with(&keys, A1_TOKEN, &at(A1_EXP + MAX_LEEWAY - 1, 86_400)).is_ok());
    assert_eq!(
        jwt::verify_with(&keys, A1_TOKEN, &at(A1_EXP + MAX_LEEWAY, 86_400)),
        Err(VerifyError::Expired {
            exp: A1_EXP,
            now: A1_EXP + MAX_LEEWAY,
            leeway: MAX_LEEWAY
        })
    );
    // A negative leeway is none.
    assert!(jwt::verify_with(&keys, A1_TOKEN, &at(A1_EXP, -100)).is_err());

    let nbf = hs_token(
        json!({"alg": "HS256"}),
        json!({"exp": 10_000, "nbf": 5_000}),
    );
    assert!(jwt::verify_with(&keys, &nbf, &at(4_940, 60)).is_ok());
    let e = jwt::verify_with(&keys, &nbf, &at(4_939, 60)).unwrap_err();
    assert_eq!(e.code(), "not yet valid");
    let e = jwt::verify_with(&keys, &nbf, &at(1_000, 86_400)).unwrap_err();
    assert_eq!(
        e,
        VerifyError::NotYetValid {
            nbf: 5_000,
            now: 1_000,
            leeway: MAX_LEEWAY
        }
    );
}

#[test]
fn critical_headers_are_refused() {
    let keys = [hs_key()];
    let claims = json!({"exp": A1_EXP});
    for crit in [json!(["exp"]), json!(["b64"]), json!([]), json!("x")] {
        let t = hs_token(
            json!({"alg": "HS256", "crit": crit, "b64": true}),
            claims.clone(),
        );
        let e = jwt::verify_with(&keys, &t, &before_exp()).unwrap_err();
        assert!(matches!(e, VerifyError::UnknownCritical(_)), "{crit}: {e}");
        assert_eq!(e.code(), "unsupported critical header");
    }
    let t = hs_token(json!({"alg": "HS256", "b64": true}), claims);
    assert!(jwt::verify_with(&keys, &t, &before_exp()).is_ok());
}

#[test]
fn rfc7515_a3_has_a_high_s_and_is_refused_its_low_s_twin_verifies() {
    let keys = [es_key()];
    assert!(
        s_is_high(A3_TOKEN),
        "the RFC's example signature has S > n/2"
    );
    assert_eq!(
        jwt::verify_with(&keys, A3_TOKEN, &before_exp()),
        Err(VerifyError::BadSignature)
    );
    let low = flip_s(A3_TOKEN);
    assert!(!s_is_high(&low));
    let claims = jwt::verify_with(&keys, &low, &before_exp()).unwrap();
    assert_eq!(claims["iss"], "joe");
}

#[test]
fn our_es256_signatures_are_low_s_and_their_high_twins_refused() {
    let keys = KeySet::new(vec![es_key()], "a3").unwrap();
    for i in 0..64 {
        let claims = json!({"exp": A1_EXP, "n": i});
        let token = jwt::sign(&keys, None, &claims).unwrap();
        assert!(!s_is_high(&token), "token {i} has a high S");
        assert!(jwt::verify(&keys, &token, &before_exp()).is_ok());
        assert_eq!(
            jwt::verify(&keys, &flip_s(&token), &before_exp()),
            Err(VerifyError::BadSignature),
            "token {i}"
        );
    }
}

#[test]
fn codes_never_carry_key_ids_or_claims() {
    let errors = [
        VerifyError::UnknownKey("secret-kid".into()),
        VerifyError::AlgorithmMismatch {
            token: "HS256".into(),
            kid: "secret-kid".into(),
            key: "EdDSA",
        },
        VerifyError::WrongClaim {
            claim: "iss",
            got: "secret-kid".into(),
            want: "secret-kid".into(),
        },
        VerifyError::UnexpectedAudience("secret-kid".into()),
        VerifyError::UnknownCritical("secret-kid".into()),
        VerifyError::WrongRoom {
            room: "secret-kid".into(),
            want: "secret-kid".into(),
        },
    ];
    for e in errors {
        assert!(
            e.to_string().contains("secret-kid"),
            "the log keeps it: {e}"
        );
        assert!(!e.code().contains("secret"), "{e:?}");
    }
}

fn user() -> User {
    User {
        id: "u-1".into(),
        name: "Ada".into(),
        ..Default::default()
    }
}

const NOW: i64 = 1_900_000_000;

#[test]
fn join_tokens_admit_to_their_room_only() {
    let key = Key::ed25519_from_seed("k", &[3; 32]).unwrap();
    let text = format!("kid: k\n{}", key.to_pkcs8_pem().unwrap());
    let keys = KeySet::new(vec![key], "k").unwrap();
    let v = JoinVerifier::from_key_text(&text, Preset::Jitsi, "edge", "jitsi", 60).unwrap();

    let u = user();
    let t = jwt::sign(
        &keys,
        None,
        &jitsi("edge", "*", "choir", &u, true, NOW, 600),
    )
    .unwrap();
    let j = v.verify_for_room(&t, "choir", NOW).unwrap();
    assert_eq!(
        (
            j.room.as_str(),
            j.user_id.as_str(),
            j.name.as_str(),
            j.moderator
        ),
        ("choir", "u-1", "Ada", true)
    );
    assert_eq!((j.expires_at, j.kid.as_deref()), (NOW + 600, Some("k")));
    assert_eq!(
        v.verify_for_room(&t, "other", NOW),
        Err(VerifyError::WrongRoom {
            room: "choir".into(),
            want: "other".into()
        })
    );
    // Past exp and the leeway.
    assert_eq!(v.verify(&t, NOW + 660).unwrap_err().code(), "expired");
    // Another issuer's token, signed with the same key.
    let other = jwt::sign(
        &keys,
        None,
        &jitsi("other", "*", "choir", &u, true, NOW, 600),
    )
    .unwrap();
    assert_eq!(v.verify(&other, NOW).unwrap_err().code(), "wrong issuer");
    // The all-rooms token admits anywhere.
    let all = jwt::sign(&keys, None, &jitsi("edge", "*", "*", &u, false, NOW, 600)).unwrap();
    assert_eq!(v.verify_for_room(&all, "choir", NOW).unwrap().room, "*");

    // A LiveKit verifier refuses Jitsi tokens (another audience) and the
    // other way round.
    let lk = JoinVerifier::from_key_text(&text, Preset::LiveKit, "edge", "livekit", 60).unwrap();
    assert_eq!(lk.verify(&t, NOW).unwrap_err().code(), "wrong audience");
    let g = Grants {
        can_publish: false,
        can_subscribe: true,
    };
    let mut claims = livekit("edge", "u-2", "Bo", "choir", g, NOW, 600);
    claims.aud = Some("livekit");
    let lt = jwt::sign(&keys, None, &claims).unwrap();
    let j = lk.verify_for_room(&lt, "choir", NOW).unwrap();
    assert_eq!(
        (
            j.user_id.as_str(),
            j.can_publish,
            j.can_subscribe,
            j.moderator
        ),
        ("u-2", false, true, false)
    );
    claims.video.room_admin = true;
    let admin = jwt::sign(&keys, None, &claims).unwrap();
    assert!(lk.verify(&admin, NOW).unwrap().moderator);
    assert_eq!(v.verify(&lt, NOW).unwrap_err().code(), "wrong audience");
    // Without aud (as LiveKit's own tools issue them): refused here.
    claims.aud = None;
    let no_aud = jwt::sign(&keys, None, &claims).unwrap();
    assert_eq!(lk.verify(&no_aud, NOW).unwrap_err().code(), "missing claim");
}

#[test]
fn join_verifiers_are_configured_strictly() {
    let key = Key::ed25519_from_seed("k", &[3; 32]).unwrap();
    assert_eq!(
        JoinVerifier::new(&[], Preset::Jitsi, "edge", "jitsi", 60).unwrap_err(),
        JoinConfigError::NoKeys
    );
    assert_eq!(
        JoinVerifier::new(&[key.to_public()], Preset::Jitsi, "", "jitsi", 60).unwrap_err(),
        JoinConfigError::Empty("issuer")
    );
    assert_eq!(
        JoinVerifier::new(&[key.to_public()], Preset::Jitsi, "edge", "jitsi", 301).unwrap_err(),
        JoinConfigError::Leeway(301)
    );
    assert!(matches!(
        JoinVerifier::from_key_text("nonsense", Preset::Jitsi, "edge", "jitsi", 60),
        Err(JoinConfigError::Keys(_))
    ));
    // A verifier holds no private half.
    assert!(!key.to_public().can_sign());
    assert_eq!(key.to_public().public_jwk(), key.public_jwk());
}
