//! Process spawning without a database: `system()` / `popen()` (a shell,
//! two processes per call) against `posix_spawnp` of the program itself
//! with the environment `sys_*_fast` give it (`PATH` only), on 1 and 4
//! threads. Prints µs per call.
//!
//!   cargo run --release -p edge-spawn --example spawn_bench [CALLS]

use edge_spawn::{Command, Stdout};
use std::time::Instant;

fn system(cmd: &std::ffi::CStr) {
    // SAFETY: a NUL-terminated command line.
    unsafe { libc::system(cmd.as_ptr()) };
}

fn popen(cmd: &std::ffi::CStr) -> Vec<u8> {
    // SAFETY: popen/fread/pclose on a stream we own.
    unsafe {
        let f = libc::popen(cmd.as_ptr(), c"r".as_ptr());
        assert!(!f.is_null(), "popen failed");
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = libc::fread(buf.as_mut_ptr().cast(), 1, buf.len(), f);
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        libc::pclose(f);
        out
    }
}

fn measure(name: &str, calls: usize, threads: usize, f: fn()) -> f64 {
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..calls / threads {
                    f();
                }
            });
        }
    });
    let us = start.elapsed().as_secs_f64() * 1e6 / calls as f64;
    println!("| {name:<34} | {threads} | {us:>8.1} |");
    us
}

fn main() {
    let calls: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    println!("{calls} calls per row; µs per call (wall time / calls)");
    println!("| what | threads | µs/call |");
    println!("|---|---|---|");
    for threads in [1, 4] {
        let shell = measure("system(\"/bin/true\")", calls, threads, || {
            system(c"/bin/true")
        });
        let fast = measure("posix_spawnp /bin/true", calls, threads, || {
            Command::new("/bin/true")
                .env_keep(&["PATH"])
                .stdout(Stdout::Null)
                .run()
                .unwrap();
        });
        println!("|   ratio | {threads} | {:.2}x |", shell / fast);
        let shell = measure("popen(\"echo hello\")", calls, threads, || {
            assert_eq!(popen(c"echo hello"), b"hello\n");
        });
        let fast = measure("posix_spawnp echo hello (pipe)", calls, threads, || {
            let out = Command::new("echo")
                .arg("hello")
                .env_keep(&["PATH"])
                .stdout(Stdout::Capture(4096))
                .run()
                .unwrap();
            assert_eq!(out.stdout, b"hello\n");
        });
        println!("|   ratio | {threads} | {:.2}x |", shell / fast);
    }
}
