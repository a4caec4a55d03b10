//! A MySQL server is the tenant's to choose, so it may be hostile: what it
//! says must end in an error for that call, never in a panic of the
//! client, an abort of the host or a poll that computes for minutes (a
//! serving thread stalled for every tenant on it). Each test plays a
//! server that speaks the protocol up to the step it abuses; random
//! sessions are `server_answers_fuzz.rs`'s.

mod common;

use common::*;
use rsa::pkcs1::EncodeRsaPublicKey;
use rsa::pkcs8::{EncodePublicKey, LineEnding};
use rsa::{BigUint, Oaep, RsaPrivateKey};

/// A new RSA public key of `bits`, in PKCS#1 PEM.
fn pkcs1_key(bits: usize) -> String {
    let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, bits).unwrap();
    private
        .to_public_key()
        .to_pkcs1_pem(LineEnding::LF)
        .unwrap()
}

/// Why an open fails against a server that asks for full authentication
/// with `key`, takes the encrypted password and denies it.
fn denied_after_sealing_with(key: String) -> String {
    connection_failed(open_against(move |wire| {
        full_auth_with_key(wire, key_packet(&key), |mut wire| async move {
            wire.read().await.expect("the encrypted password");
            wire.deny(6).await;
        })
    }))
}

#[test]
fn the_password_goes_to_the_server_encrypted_with_its_key() {
    let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).unwrap();
    let pem = private
        .to_public_key()
        .to_public_key_pem(LineEnding::LF)
        .unwrap();
    let (seen, received) = std::sync::mpsc::channel();
    let result = open_against(move |wire| {
        full_auth_with_key(wire, key_packet(&pem), move |mut wire| async move {
            let sealed = wire.read().await.expect("the encrypted password");
            let _ = seen.send(sealed);
            wire.deny(6).await;
        })
    });
    assert!(connection_failed(result).contains("Access denied by the test server"));
    let sealed = received.recv().unwrap();
    let opened = private.decrypt(Oaep::new::<sha1::Sha1>(), &sealed).unwrap();
    let password: Vec<u8> = opened
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ NONCE[i % NONCE.len()])
        .collect();
    assert_eq!(password, format!("{PASSWORD}\0").as_bytes());
}

#[test]
fn a_key_in_pkcs1_form_is_taken_too() {
    assert!(
        denied_after_sealing_with(pkcs1_key(1024)).contains("Access denied by the test server")
    );
}

#[test]
fn a_key_file_as_a_server_may_store_it_is_taken() {
    // Blank lines and a NUL around it, CRLF line ends, 76-column lines.
    let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).unwrap();
    let pem = private
        .to_public_key()
        .to_public_key_pem(LineEnding::LF)
        .unwrap();
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let wide: Vec<String> = body
        .as_bytes()
        .chunks(76)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect();
    for key in [
        format!("\n{pem}\n\n\0"),
        pem.replace('\n', "\r\n"),
        format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            wide.join("\n")
        ),
    ] {
        let why = denied_after_sealing_with(key);
        assert!(why.contains("Access denied by the test server"), "{why}");
    }
}

/// A PKCS#1 public key in PEM with the given modulus and exponent bytes.
fn pkcs1_pem(modulus: &[u8], exponent: &[u8]) -> String {
    let key = rsa::RsaPublicKey::new_unchecked(
        BigUint::from_bytes_be(modulus),
        BigUint::from_bytes_be(exponent),
    );
    key.to_pkcs1_pem(LineEnding::LF).unwrap()
}

#[test]
fn a_huge_key_is_refused_before_any_arithmetic() {
    // A 2 MiB modulus (16.7 million bits): one modular exponentiation with
    // it takes the client's thread for many minutes.
    let mut modulus = vec![0xc3u8; 2 << 20];
    modulus[(2 << 20) - 1] |= 1;
    let pem = pkcs1_pem(&modulus, &[1, 0, 1]);
    let why = connection_failed(open_against(move |wire| {
        full_auth_with_key(wire, key_packet(&pem), |_| async {})
    }));
    assert!(why.contains("RSA public key"), "{why}");
    assert!(why.contains("4096"), "{why}");
}

#[test]
fn a_huge_exponent_is_refused() {
    let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).unwrap();
    let modulus = rsa::traits::PublicKeyParts::n(&private).to_bytes_be();
    let pem = pkcs1_pem(&modulus, &[0xff; 4096]);
    let why = connection_failed(open_against(move |wire| {
        full_auth_with_key(wire, key_packet(&pem), |_| async {})
    }));
    assert!(why.contains("RSA public key"), "{why}");
}

#[test]
fn a_key_that_is_not_pem_is_an_error() {
    for key in [
        key_packet("not a key at all"),
        key_packet("-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----\n"),
        key_packet("-----BEGIN RSA PUBLIC KEY-----\nMAA=\n-----END RSA PUBLIC KEY-----\n"),
        vec![0x01, 0xff, 0xfe],
        vec![0x01],
        vec![],
    ] {
        let shown = String::from_utf8_lossy(&key).into_owned();
        let why = connection_failed(open_against(move |wire| {
            full_auth_with_key(wire, key, |_| async {})
        }));
        assert!(why.contains("RSA public key"), "{shown:?}: {why}");
    }
}

#[test]
fn a_key_too_small_for_the_password_is_an_error() {
    // OAEP with SHA-1 carries at most k - 42 bytes: 22 for a 512-bit key.
    let pem = pkcs1_key(512);
    let why = connection_failed(open_against(move |wire| {
        full_auth_with_key(wire, key_packet(&pem), |_| async {})
    }));
    assert!(why.contains("too long"), "{why}");
}

#[test]
fn a_switch_to_caching_sha2_without_a_nonce_is_an_error() {
    let pem = pkcs1_key(1024);
    let why = connection_failed(open_against(move |mut wire| async move {
        wire.send(0, &greeting("mysql_native_password")).await;
        wire.read().await.expect("the handshake response");
        wire.send(2, b"\xfecaching_sha2_password\0").await;
        wire.read().await.expect("the scramble");
        wire.send(4, &[0x01, 0x04]).await;
        if wire.read().await.is_some() {
            wire.send(6, &key_packet(&pem)).await;
            wire.read().await;
        }
    }));
    assert!(why.contains("nonce"), "{why}");
}

#[test]
fn a_switch_to_ed25519_is_answered() {
    let (seen, received) = std::sync::mpsc::channel();
    let why = connection_failed(open_against(move |mut wire| async move {
        wire.send(0, &greeting("mysql_native_password")).await;
        wire.read().await.expect("the handshake response");
        let mut switch = b"\xfeclient_ed25519\0".to_vec();
        switch.extend_from_slice(&[7; 32]);
        wire.send(2, &switch).await;
        let _ = seen.send(wire.read().await);
        wire.deny(4).await;
    }));
    assert!(why.contains("Access denied by the test server"), "{why}");
    let signature = received.recv().unwrap().expect("a signature");
    assert_eq!(signature.len(), 64);
}

#[test]
fn a_switch_to_parsec_is_refused_in_words() {
    let why = connection_failed(open_against(|mut wire| async move {
        wire.send(0, &greeting("mysql_native_password")).await;
        wire.read().await.expect("the handshake response");
        let mut switch = b"\xfeparsec\0".to_vec();
        switch.extend_from_slice(&[7; 32]);
        wire.send(2, &switch).await;
        if wire.read().await.is_some() {
            let mut salt = b"P\x14".to_vec();
            salt.extend_from_slice(&[9; 18]);
            wire.send(4, &salt).await;
            wire.read().await;
        }
    }));
    assert!(why.contains("parsec"), "{why}");
}

#[test]
fn a_result_of_a_trillion_columns_is_refused() {
    // The count was the capacity of a vector: 2^40 packets' worth aborted
    // the process (an allocation that cannot be made).
    let mut count = vec![0xfe];
    count.extend_from_slice(&(1u64 << 40).to_le_bytes());
    let why = connection_failed(open_against(|wire| accepted_then(wire, vec![count])));
    assert!(why.contains("1099511627776 columns"), "{why}");
}

#[test]
fn column_definitions_are_held_to_the_packet_limit_together() {
    // 65,535 column definitions of 64 KiB each: 4 GiB held before the
    // first row. They may take max_allowed_packet (16 MiB) together.
    let mut answer = vec![vec![0xfc, 0xff, 0xff]];
    let mut definition = column_definition(45, 253);
    definition.resize(64 << 10, b' ');
    answer.extend(std::iter::repeat_n(definition, 300));
    let why = connection_failed(open_against(|wire| accepted_then(wire, answer)));
    assert!(why.contains("column definitions"), "{why}");
}

#[test]
fn columns_of_types_no_result_carries_are_refused() {
    // mysql_common's binary row reader is unimplemented! for these.
    for (kind, name) in [
        (17, "TIMESTAMP2"),
        (18, "DATETIME2"),
        (19, "TIME2"),
        (20, "TYPED_ARRAY"),
        (243, "UNKNOWN"),
    ] {
        let answer = vec![vec![1], column_definition(63, kind)];
        let why = connection_failed(open_against(move |wire| accepted_then(wire, answer)));
        assert!(why.contains(&format!("MYSQL_TYPE_{name}")), "{why}");
        assert!(why.contains("no result carries"), "{why}");
    }
}

#[test]
fn mysql_old_password_stays_refused_whatever_the_address_says() {
    // The address is the tenant's: `secure_auth=false` let a switch to
    // mysql_old_password without data reach a panic in mysql_common
    // (`nonce.chunks(8).next().unwrap()`). The host keeps secure_auth on.
    let before = edge_tests::fuzz::panics_so_far();
    let why = connection_failed(open_with_options(
        |mut wire| async move {
            wire.send(0, &greeting("mysql_native_password")).await;
            wire.read().await.expect("the handshake response");
            wire.send(2, b"\xfemysql_old_password\0").await;
            wire.read().await;
        },
        "?secure_auth=false",
    ));
    assert!(why.contains("mysql_old_password"), "{why}");
    assert_eq!(edge_tests::fuzz::panics_so_far(), before);
}
