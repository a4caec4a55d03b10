//! Simulates N singers against the codec worker: each sends one request
//! per second carrying 1 s of pre-encoded audio (50 Opus packets of a
//! synthesized chord with noise) and asks for 1 s of the mix from two
//! seconds earlier, waiting for each answer before the next. A response
//! that arrives after its second is over has missed the real-time deadline.
//!
//! Each singer holds its own join token (signed here with a fixed bench key,
//! issuer "bench"; `codec-load public-key` prints the key the codec must
//! verify with), so each has its own session instance (`session_key =
//! "bearer"`).
//!
//!   codec-load URL SECONDS N [N ...]
//!   codec-load public-key

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::{Duration, Instant};

const FRAME: usize = 960;

/// The bench's signing key: fixed, so the script can give the codec its
/// public half before the load starts.
fn bench_keys() -> signing::KeySet {
    let key = signing::Key::ed25519_from_seed("bench", &[42; 32]).expect("a valid seed");
    signing::KeySet::new(vec![key], "bench").expect("one signing key")
}

/// A join token for `user` in `room`, valid for an hour.
fn join_token(keys: &signing::KeySet, room: &str, user: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs() as i64;
    let u = signing::presets::User {
        id: user.into(),
        name: user.into(),
        ..Default::default()
    };
    let claims = signing::presets::jitsi("bench", "*", room, &u, false, now, 3600);
    signing::jwt::sign(keys, None, &claims).expect("signing with the bench key")
}

fn audio_packets() -> Bytes {
    let mut enc = opus_rs::OpusEncoder::new(48_000, 1, opus_rs::Application::Audio).unwrap();
    enc.bitrate_bps = 64_000;
    let mut seed = 7u32;
    let pcm: Vec<f32> = (0..50 * FRAME)
        .map(|i| {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let t = i as f32 / 48_000.0;
            0.2 * (2.0 * std::f32::consts::PI * 196.0 * t).sin()
                + 0.1 * (2.0 * std::f32::consts::PI * 293.7 * t).sin()
                + 0.02 * ((seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5)
        })
        .collect();
    let mut body = Vec::new();
    let mut buf = [0u8; 1275];
    for frame in pcm.chunks(FRAME) {
        let n = enc.encode(frame, FRAME, &mut buf).unwrap();
        body.extend_from_slice(&(n as u16).to_be_bytes());
        body.extend_from_slice(&buf[..n]);
    }
    Bytes::from(body)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("public-key") {
        let keys = bench_keys();
        let pem = keys.signing_key().public_pem().expect("an Ed25519 key");
        print!("kid: bench\n{pem}");
        return;
    }
    if args.len() < 4 {
        eprintln!("usage: codec-load URL SECONDS N [N ...]");
        std::process::exit(2);
    }
    let url = args[1].trim_end_matches('/').to_string();
    let seconds: u64 = args[2].parse().expect("SECONDS");
    assert!(seconds > 0, "SECONDS must be at least 1");
    let body = audio_packets();
    let keys = bench_keys();
    println!("| singers | requests | missed deadline | errors | p50 ms | p99 ms |");
    println!("|---|---|---|---|---|---|");
    for n in args[3..].iter().map(|n| n.parse::<usize>().expect("N")) {
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(n)
            .build_http::<Full<Bytes>>();
        let start = Instant::now() + Duration::from_millis(200);
        let mut tasks = Vec::new();
        for singer in 0..n {
            let client = client.clone();
            let url = url.clone();
            let body = body.clone();
            let room = format!("room{}", singer / 50);
            let auth = format!("Bearer {}", join_token(&keys, &room, &format!("s{singer}")));
            tasks.push(tokio::spawn(async move {
                let mut out = Vec::new();
                let join = format!("{url}/codec/{room}/join");
                let req = http::Request::post(join)
                    .header("authorization", &auth)
                    .body(Full::new(Bytes::new()))
                    .unwrap();
                if let Ok(resp) = client.request(req).await {
                    let _ = resp.into_body().collect().await;
                }
                // Spread the singers over the first second.
                let phase = Duration::from_micros((singer as u64 * 1_000_000) / n as u64);
                for k in 0..seconds {
                    let due = start + phase + Duration::from_secs(k);
                    tokio::time::sleep_until(due.into()).await;
                    let write_at = (k + 2) * 48_000;
                    let read_at = k * 48_000;
                    let uri = format!("{url}/codec/{room}/chunk?write_at={write_at}&read_at={read_at}&read_frames=50");
                    let req = http::Request::post(uri)
                        .header("authorization", &auth)
                        .body(Full::new(body.clone()))
                        .unwrap();
                    let sent = Instant::now();
                    let ok = match client.request(req).await {
                        Ok(resp) => {
                            let status = resp.status();
                            resp.into_body().collect().await.is_ok() && status == 200
                        }
                        Err(_) => false,
                    };
                    let done = Instant::now();
                    out.push((ok, done.duration_since(sent), done > due + Duration::from_secs(1)));
                }
                out
            }));
        }
        let mut results = Vec::new();
        for t in tasks {
            results.extend(t.await.unwrap());
        }
        let errors = results.iter().filter(|r| !r.0).count();
        let missed = results.iter().filter(|r| r.2 || !r.0).count();
        let mut lat: Vec<Duration> = results.iter().map(|r| r.1).collect();
        lat.sort();
        let pct = |p: f64| {
            lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)].as_secs_f64() * 1000.0
        };
        println!(
            "| {n} | {} | {missed} | {errors} | {:.1} | {:.1} |",
            results.len(),
            pct(0.5),
            pct(0.99)
        );
    }
}
