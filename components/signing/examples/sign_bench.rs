//! Native token signing speed, the baseline the signer component is
//! measured against: Jitsi tokens per second, per algorithm, one thread.
//!
//!   cargo run --release -p signing --example sign_bench

use signing::{Key, KeySet, jwt, presets};
use std::time::{Duration, Instant};

fn main() {
    let keys = KeySet::new(
        vec![
            Key::ed25519_from_seed("ed", &[1; 32]).unwrap(),
            Key::p256_from_scalar("ec", &[2; 32]).unwrap(),
            Key::hmac("hs", &[3; 32]).unwrap(),
        ],
        "ed",
    )
    .unwrap();
    let user = presets::User {
        id: "u1".into(),
        name: "Ada".into(),
        ..Default::default()
    };
    for kid in ["ed", "ec", "hs"] {
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < Duration::from_secs(2) {
            for _ in 0..100 {
                let claims =
                    presets::jitsi("edge", "*", "standup", &user, false, 1_800_000_000, 3600);
                std::hint::black_box(jwt::sign(&keys, Some(kid), &claims).unwrap());
            }
            n += 100;
        }
        let alg = keys.get(kid).unwrap().algorithm().name();
        println!(
            "{alg}: {:.0} tokens/s (one thread)",
            n as f64 / start.elapsed().as_secs_f64()
        );
    }
}
