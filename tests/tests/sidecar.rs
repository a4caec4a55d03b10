//! The process-execution sidecar as a real daemon on a Unix socket:
//! allowlist, path checks, timeouts that kill the whole process group,
//! output caps, the concurrency limit, verbatim arguments, stdin, a
//! cleared environment, and counters.

use edge_sidecar::protocol::{self, Request, Response};
use edge_tests::{TempDir, edge_bin};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

struct Daemon {
    child: Child,
    socket: std::path::PathBuf,
    _dir: TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> Daemon {
    let dir = TempDir::new("sidecar");
    dir.write(
        "spin.toml",
        &format!(
            "spin_manifest_version = 2\n[application]\nname = \"s\"\n[[trigger.http]]\nroute = \"/...\"\ncomponent = \"echo\"\n[component.echo]\nsource = \"{}\"\n",
            edge_tests::component("echo")
        ),
    );
    let config = dir.write(
        "edge.toml",
        r#"app = "spin.toml"
[[tenant]]
name = "t"
hosts = ["*"]
components = ["*"]
sidecar_programs = ["/bin/echo"]
[sidecar]
socket = "sidecar.sock"
allow = ["/bin/echo", "/bin/sh", "/bin/cat", "/usr/bin/head", "/usr/bin/env", "/bin/sleep", "/usr/bin/no-such-program"]
max_concurrent = 2
timeout_ms = 5000
max_output_bytes = 1000
"#,
    );
    let bin = edge_bin().with_file_name("edge-sidecar");
    let mut child = Command::new(&bin)
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("edge-sidecar listening on"), "{line:?}");
    Daemon {
        child,
        socket: dir.path().join("sidecar.sock"),
        _dir: dir,
    }
}

fn run(d: &Daemon, program: &str, args: &[&str]) -> Response {
    call(
        d,
        Request {
            program: program.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        },
    )
}

fn call(d: &Daemon, req: Request) -> Response {
    protocol::call(&d.socket, &req).expect("sidecar answers")
}

fn error_kind(r: &Response) -> &str {
    match r {
        Response::Error(e) => &e.kind,
        other => panic!("expected an error, got {other:?}"),
    }
}

fn metric(d: &Daemon, name: &str) -> u64 {
    match call(
        d,
        Request {
            metrics: true,
            ..Default::default()
        },
    ) {
        Response::Metrics(m) => m[name].as_u64().unwrap(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn runs_allowlisted_programs_verbatim_with_stdin_and_an_empty_environment() {
    let d = start();
    let args = ["$(id)", "a b", "quote'\"", "line\nbreak", ""];
    match run(&d, "/bin/echo", &args) {
        Response::Ok(out) => {
            assert_eq!(out.stdout_bytes(), b"$(id) a b quote'\" line\nbreak \n");
            assert_eq!(out.exit_code, 0);
        }
        other => panic!("{other:?}"),
    }
    match call(
        &d,
        Request {
            program: "/bin/cat".into(),
            stdin: protocol::encode(b"from stdin\x00\xff"),
            ..Default::default()
        },
    ) {
        Response::Ok(out) => assert_eq!(out.stdout_bytes(), b"from stdin\x00\xff"),
        other => panic!("{other:?}"),
    }
    match run(&d, "/usr/bin/env", &[]) {
        Response::Ok(out) => assert_eq!(out.stdout_bytes(), b"", "the environment is cleared"),
        other => panic!("{other:?}"),
    }
    match run(&d, "/bin/sh", &["-c", "echo out; echo err >&2; exit 3"]) {
        Response::Ok(out) => {
            assert_eq!(
                (out.exit_code, out.stdout_bytes(), out.stderr_bytes()),
                (3, b"out\n".to_vec(), b"err\n".to_vec())
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn refusals_are_distinct_and_spawn_nothing() {
    let d = start();
    let before = metric(&d, "runs") + metric(&d, "spawn_failures");
    assert_eq!(error_kind(&run(&d, "/usr/bin/id", &[])), "not-allowed");
    assert_eq!(error_kind(&run(&d, "echo", &[])), "bad-path");
    assert_eq!(error_kind(&run(&d, "/bin/../bin/echo", &[])), "bad-path");
    assert_eq!(error_kind(&run(&d, "/bin//echo", &[])), "bad-path");
    assert_eq!(
        metric(&d, "runs") + metric(&d, "spawn_failures"),
        before,
        "nothing was spawned"
    );
    assert_eq!(metric(&d, "refused"), 4);
    // Allowed but missing: tried, and says so.
    assert_eq!(
        error_kind(&run(&d, "/usr/bin/no-such-program", &[])),
        "not-found"
    );
    let r = call(
        &d,
        Request {
            program: "/bin/cat".into(),
            stdin: "not base64!".into(),
            ..Default::default()
        },
    );
    assert_eq!(error_kind(&r), "bad-request");
}

#[test]
fn timeouts_kill_the_process_group_and_caps_hold() {
    let d = start();
    // A background child would outlive a plain kill of the shell.
    let r = call(
        &d,
        Request {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "/bin/sleep 31.25 & /bin/sleep 31.25".into()],
            timeout_ms: Some(300),
            ..Default::default()
        },
    );
    assert_eq!(error_kind(&r), "timeout");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let left = Command::new("pgrep")
        .args(["-f", "sleep 31.25"])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "survivors: {}",
        String::from_utf8_lossy(&left.stdout)
    );
    assert_eq!(metric(&d, "timeouts"), 1);

    let r = run(&d, "/usr/bin/head", &["-c", "5000", "/dev/zero"]);
    assert_eq!(error_kind(&r), "output-too-large");
    // A request may ask for less than the sidecar's cap, never more.
    let r = call(
        &d,
        Request {
            program: "/usr/bin/head".into(),
            args: vec!["-c".into(), "500".into(), "/dev/zero".into()],
            max_output: Some(100),
            ..Default::default()
        },
    );
    assert_eq!(error_kind(&r), "output-too-large");
}

#[test]
fn concurrency_is_limited_and_concurrent_calls_work() {
    let d = start();
    let results: Vec<Response> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| s.spawn(|| run(&d, "/bin/sleep", &["0.7"])))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let busy = results
        .iter()
        .filter(|r| matches!(r, Response::Error(e) if e.kind == "busy"))
        .count();
    let ok = results
        .iter()
        .filter(|r| matches!(r, Response::Ok(_)))
        .count();
    assert_eq!((ok, busy), (2, 1), "{results:?}");

    // Within the limit, concurrent calls each get their own answer.
    let outs: Vec<Vec<u8>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let d = &d;
                s.spawn(move || match run(d, "/bin/echo", &[&format!("call {i}")]) {
                    Response::Ok(o) => o.stdout_bytes(),
                    other => panic!("{other:?}"),
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(outs, vec![b"call 0\n".to_vec(), b"call 1\n".to_vec()]);
}

#[test]
fn idle_connections_are_capped_and_runs_still_work_after() {
    let d = start();
    // Connections that never send a request hold a thread each, up to
    // the cap (256); one more is refused as busy at once.
    let idle: Vec<_> = (0..256)
        .map(|_| std::os::unix::net::UnixStream::connect(&d.socket).unwrap())
        .collect();
    let refused = (0..50).find_map(|_| {
        // The daemon counts a connection when it accepts it: give it a
        // moment to reach all of them.
        match protocol::call(
            &d.socket,
            &Request {
                program: "/bin/echo".into(),
                ..Default::default()
            },
        ) {
            Ok(Response::Error(e)) if e.kind == "busy" => Some(e.message),
            _ => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                None
            }
        }
    });
    let message = refused.expect("the connection past the cap is refused");
    assert!(message.contains("256 connections"), "{message}");
    drop(idle);
    // Closed idle connections give their slots back.
    let ok = (0..50).any(|_| {
        matches!(run(&d, "/bin/echo", &["back"]), Response::Ok(_)) || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            false
        }
    });
    assert!(ok, "runs work again once the idle connections are gone");
}
