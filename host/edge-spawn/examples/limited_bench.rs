//! The sidecar's way of running a program, `run_limited` (three pipes,
//! its own process group, a deadline), started with `posix_spawn` (no
//! limits) against `clone(CLONE_VM | CLONE_VFORK)` (with `Limits`:
//! rlimits, `no_new_privs` and `close_range` in the child). Prints µs per
//! call of `/bin/true`.
//!
//!   cargo run --release -p edge-spawn --example limited_bench [CALLS]

use edge_spawn::{Command, Limits};
use std::time::{Duration, Instant};

fn main() {
    let calls: u32 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    let limits = Limits {
        cpu_seconds: 30,
        address_space_bytes: 4 << 30,
        processes: 4096,
        file_bytes: 1 << 30,
    };
    let plain = Command::new("/bin/true").no_path_search().env_clear();
    let limited = plain.clone().limits(limits);
    for (name, cmd) in [("posix_spawn", &plain), ("clone + limits", &limited)] {
        let start = Instant::now();
        for _ in 0..calls {
            let out = cmd
                .run_limited(b"", Duration::from_secs(10), 1024)
                .expect("runs");
            assert_eq!(out.exit_code(), 0);
        }
        let us = start.elapsed().as_secs_f64() * 1e6 / f64::from(calls);
        println!("{name:>14}: {us:7.1} µs per run");
    }
}
