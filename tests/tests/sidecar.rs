//! The process-execution sidecar as a real daemon on a Unix socket:
//! who may connect (its own user, none of the programs it runs), the
//! tenants' grants, allowlist, path checks, timeouts that kill the whole
//! process group, output caps, the concurrency limit, verbatim arguments,
//! stdin, a cleared environment, resource limits, no inherited descriptor,
//! and counters.

use edge_sidecar::protocol::{self, Request, Response};
use edge_tests::{TempDir, edge_bin};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

struct Daemon {
    child: Child,
    socket: std::path::PathBuf,
    dir: TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Tenant `t` is granted every program on the allowlist, `u` only
/// `/bin/echo` and `/bin/sleep`.
const EDGE_TOML: &str = r#"app = "spin.toml"
[[tenant]]
name = "t"
hosts = ["t.test"]
components = ["*"]
sidecar_programs = ["/bin/echo", "/bin/sh", "/bin/cat", "/usr/bin/head", "/usr/bin/env", "/bin/sleep", "/usr/bin/no-such-program"]
[[tenant]]
name = "u"
hosts = ["u.test"]
components = ["*"]
sidecar_programs = ["/bin/echo", "/bin/sleep"]
[sidecar]
socket = "run/sidecar.sock"
allow = ["/bin/echo", "/bin/sh", "/bin/cat", "/usr/bin/head", "/usr/bin/env", "/bin/sleep", "/usr/bin/no-such-program"]
max_concurrent = 3
max_concurrent_per_tenant = 2
timeout_ms = 5000
max_output_bytes = 1000
child_cpu_seconds = 7
child_address_space_bytes = 2147483648
child_processes = 333
child_file_bytes = 5242880
"#;

fn start() -> Daemon {
    start_with(|_| {})
}

/// Starts the daemon; `adjust` may change how it is started.
fn start_with(adjust: impl FnOnce(&mut Command)) -> Daemon {
    let dir = TempDir::new("sidecar");
    dir.write(
        "spin.toml",
        &format!(
            "spin_manifest_version = 2\n[application]\nname = \"s\"\n[[trigger.http]]\nroute = \"/...\"\ncomponent = \"echo\"\n[component.echo]\nsource = \"{}\"\n",
            edge_tests::component("echo")
        ),
    );
    let config = dir.write("edge.toml", EDGE_TOML);
    let bin = edge_bin().with_file_name("edge-sidecar");
    let mut cmd = Command::new(&bin);
    cmd.arg("--config")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    adjust(&mut cmd);
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let line = first_line(&mut child);
    assert!(line.starts_with("edge-sidecar listening on"), "{line:?}");
    Daemon {
        child,
        socket: dir.path().join("run/sidecar.sock"),
        dir,
    }
}

/// The first line a child started with a piped stdout writes (a server's
/// "ready").
fn first_line(child: &mut std::process::Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line
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

/// A request for tenant `t` unless it names another.
fn call(d: &Daemon, mut req: Request) -> Response {
    if req.tenant.is_none() && !req.metrics {
        req.tenant = Some("t".into());
    }
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
fn concurrency_is_limited_per_tenant_and_in_all_and_concurrent_calls_work() {
    let d = start();
    let sleep_as = |tenant: &str, seconds: &str| {
        call(
            &d,
            Request {
                tenant: Some(tenant.into()),
                program: "/bin/sleep".into(),
                args: vec![seconds.into()],
                ..Default::default()
            },
        )
    };
    // t asks for three runs: two (its share) run, one is busy. Then u asks
    // for two while they run: one runs (the third of all), one is busy.
    let (t, u): (Vec<Response>, Vec<Response>) = std::thread::scope(|s| {
        let t: Vec<_> = (0..3).map(|_| s.spawn(|| sleep_as("t", "2"))).collect();
        std::thread::sleep(std::time::Duration::from_millis(500));
        let u: Vec<_> = (0..2).map(|_| s.spawn(|| sleep_as("u", "0.5"))).collect();
        let join = |h: Vec<std::thread::ScopedJoinHandle<'_, Response>>| {
            h.into_iter().map(|h| h.join().unwrap()).collect()
        };
        (join(t), join(u))
    });
    let busy = |results: &[Response]| -> Vec<String> {
        results
            .iter()
            .filter_map(|r| match r {
                Response::Error(e) if e.kind == "busy" => Some(e.message.clone()),
                _ => None,
            })
            .collect()
    };
    let ok = |results: &[Response]| {
        results
            .iter()
            .filter(|r| matches!(r, Response::Ok(_)))
            .count()
    };
    assert_eq!(ok(&t), 2, "{t:?}");
    assert_eq!(
        busy(&t),
        ["the tenant has 2 runs already (max_concurrent_per_tenant); retry later"]
    );
    assert_eq!(ok(&u), 1, "{u:?}");
    assert_eq!(busy(&u), ["3 runs already (max_concurrent); retry later"]);

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

fn error_message(r: &Response) -> &str {
    match r {
        Response::Error(e) => &e.message,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn a_tenant_runs_only_what_it_was_granted_and_grants_follow_the_file() {
    let d = start();
    let as_u = |program: &str| {
        call(
            &d,
            Request {
                tenant: Some("u".into()),
                program: program.into(),
                args: vec!["x".into()],
                ..Default::default()
            },
        )
    };
    assert!(matches!(as_u("/bin/echo"), Response::Ok(_)));
    // On the allowlist, granted to t, not to u: refused, and the message
    // names neither tenant.
    let r = as_u("/bin/cat");
    assert_eq!(error_kind(&r), "not-allowed");
    assert_eq!(
        error_message(&r),
        "\"/bin/cat\" is not granted to this tenant"
    );
    let named = |tenant: Option<&str>| {
        protocol::call(
            &d.socket,
            &Request {
                tenant: tenant.map(Into::into),
                program: "/bin/echo".into(),
                ..Default::default()
            },
        )
        .unwrap()
    };
    let r = named(None);
    assert_eq!(
        (error_kind(&r), error_message(&r)),
        ("not-allowed", "the request names no tenant")
    );
    assert_eq!(error_kind(&named(Some("no-such-tenant"))), "not-allowed");

    // The host reloads a config granting u /bin/cat: the sidecar follows.
    let granted = EDGE_TOML.replace(
        "name = \"u\"\nhosts = [\"u.test\"]\ncomponents = [\"*\"]\nsidecar_programs = [\"/bin/echo\", \"/bin/sleep\"]",
        "name = \"u\"\nhosts = [\"u.test\"]\ncomponents = [\"*\"]\nsidecar_programs = [\"/bin/echo\", \"/bin/sleep\", \"/bin/cat\"]",
    );
    assert_ne!(granted, EDGE_TOML);
    d.dir.write("edge.toml", &granted);
    let start = std::time::Instant::now();
    while !matches!(as_u("/bin/cat"), Response::Ok(_)) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "the new grant was not read"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A client in Python: sends tenant t's request for `/bin/echo ok` to the
/// socket given as its argument and prints the answer's error kind, or
/// `ran` if it ran.
const CLIENT: &str = r#"
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
body = json.dumps({"tenant": "t", "program": "/bin/echo", "args": ["ok"]}).encode()
try:
    s.sendall(struct.pack(">I", len(body)) + body)
except OSError:
    pass  # refused: the answer came before the request was read
n = b""
while len(n) < 4:
    n += s.recv(4 - len(n))
n = struct.unpack(">I", n)[0]
answer = b""
while len(answer) < n:
    answer += s.recv(n - len(answer))
answer = json.loads(answer)
print(answer["error"]["kind"] if "error" in answer else "ran", flush=True)
"#;

#[test]
fn connections_from_another_user_are_refused() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to run a client as another user");
        return;
    }
    let d = start();
    let client = d.dir.write("client.py", CLIENT);
    let as_user = |args: &[&str]| {
        let out = Command::new("setpriv")
            .args(args)
            .arg("/usr/bin/python3")
            .arg(&client)
            .arg(&d.socket)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The same client as the sidecar's own user runs.
    assert_eq!(as_user(&["--"]), "ran\n");
    // As uid 65534, with CAP_DAC_OVERRIDE so the socket's directory and
    // mode do not stop it first: only the credentials check can refuse it.
    assert_eq!(
        as_user(&[
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=+dac_override",
            "--ambient-caps=+dac_override",
            "--",
        ]),
        "peer-refused\n"
    );
    assert_eq!(metric(&d, "peers_refused"), 1);
    assert_eq!(metric(&d, "runs"), 1, "only the own user's request ran");
}

#[test]
fn programs_the_sidecar_runs_and_their_descendants_cannot_call_it() {
    let d = start();
    let client = d.dir.write("client.py", CLIENT);
    let out = d.dir.path().join("out");
    let socket = d.socket.display().to_string();
    let shell = |script: String| match run(&d, "/bin/sh", &["-c", &script]) {
        Response::Ok(o) => String::from_utf8_lossy(&o.stdout_bytes()).into_owned(),
        other => panic!("{other:?}"),
    };
    let python = format!("/usr/bin/python3 {} {socket}", client.display());
    // Its own child.
    assert_eq!(shell(python.clone()), "peer-refused\n");
    // A grandchild in a session of its own.
    assert_eq!(
        shell(format!("/usr/bin/setsid {python} & wait")),
        "peer-refused\n"
    );
    // An orphan: its parent exited at once, so the kernel reparented it,
    // to the sidecar (a subreaper), not to init.
    assert_eq!(
        shell(format!(
            "/bin/sh -c '{python} > {o} &'; /bin/sleep 2; /bin/cat {o}",
            o = out.display()
        )),
        "peer-refused\n"
    );
    assert_eq!(metric(&d, "peers_refused"), 3);
}

#[test]
fn programs_get_limits_no_new_privs_and_no_inherited_descriptor() {
    use std::os::unix::process::CommandExt;
    // The daemon inherits a descriptor without close-on-exec from whoever
    // starts it (a supervisor's leftover): its programs must not see it.
    let leaked = std::fs::File::open("/dev/null").unwrap();
    let d = start_with(|cmd| {
        use std::os::fd::AsRawFd;
        let fd = leaked.as_raw_fd();
        // SAFETY: dup2 between fork and exec (async-signal-safe); the
        // copy on 9 has no close-on-exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(fd, 9) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let r = run(
        &d,
        "/bin/sh",
        &[
            "-c",
            "ls /proc/$$/fd; grep NoNewPrivs /proc/$$/status; grep -E '^Max (cpu|addr|proc|file)' /proc/$$/limits",
        ],
    );
    let text = match r {
        Response::Ok(o) => String::from_utf8_lossy(&o.stdout_bytes()).into_owned(),
        other => panic!("{other:?}"),
    };
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(&lines[..4], ["0", "1", "2", "NoNewPrivs:\t1"], "{text}");
    let limit = |name: &str| {
        let line = lines.iter().find(|l| l.starts_with(name)).unwrap();
        // "Max cpu time   7   7   seconds": the soft limit.
        line[name.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(limit("Max cpu time"), "7");
    assert_eq!(limit("Max address space"), "2147483648");
    assert_eq!(limit("Max processes"), "333");
    assert_eq!(limit("Max file size"), "5242880");
    // The file size limit holds: a write past it fails.
    let file = d.dir.path().join("big");
    let r = run(
        &d,
        "/bin/sh",
        &[
            "-c",
            &format!(
                "/usr/bin/head -c 6000000 /dev/zero > {}; echo $?",
                file.display()
            ),
        ],
    );
    match r {
        Response::Ok(o) => assert_ne!(o.stdout_bytes(), b"0\n", "the write failed"),
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 5242880);
}

#[test]
fn descendants_that_left_the_group_do_not_outlive_their_run() {
    let d = start();
    let r = run(
        &d,
        "/bin/sh",
        &[
            "-c",
            "/usr/bin/setsid /bin/sleep 3600.4 </dev/null >/dev/null 2>&1 & echo started",
        ],
    );
    assert!(matches!(r, Response::Ok(_)), "{r:?}");
    let start = std::time::Instant::now();
    loop {
        let left = Command::new("pgrep")
            .args(["-f", "sleep 3600.4"])
            .output()
            .unwrap();
        if left.stdout.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "an escaped descendant lives on"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn the_socket_is_private_from_its_creation() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let d = start();
    let dir = d.socket.parent().unwrap();
    assert_eq!(
        std::fs::metadata(dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(std::fs::metadata(&d.socket).unwrap().mode() & 0o777, 0o600);
}

/// Joins the process group given as its first argument and sleeps for
/// the seconds of its second, or says why it could not join.
const JOIN_GROUP: &str = r#"
import os, sys, time
try:
    os.setpgid(0, int(sys.argv[1]))
except OSError as e:
    print("refused", e.errno, flush=True)
    sys.exit(0)
print("moved", flush=True)
time.sleep(float(sys.argv[2]))
"#;

#[test]
fn a_descendant_cannot_hide_in_another_runs_group() {
    let d = start();
    let script = d.dir.write("join.py", JOIN_GROUP);
    let pid_file = d.dir.path().join("b.pid");
    let release = d.dir.path().join("release");
    let said = d.dir.path().join("said");
    std::thread::scope(|s| {
        // Run B: a long run whose group (its leader's pid) A's child tries.
        let b = s.spawn(|| {
            run(
                &d,
                "/bin/sh",
                &[
                    "-c",
                    &format!(
                        "echo $$ > {p}; while [ ! -e {r} ]; do /bin/sleep 0.05; done",
                        p = pid_file.display(),
                        r = release.display()
                    ),
                ],
            )
        });
        let start = std::time::Instant::now();
        let b_pid = loop {
            if let Ok(text) = std::fs::read_to_string(&pid_file)
                && text.ends_with('\n')
            {
                break text.trim().to_string();
            }
            assert!(start.elapsed() < std::time::Duration::from_secs(5));
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        // Run A: a background child moves into B's group (or tries), and A
        // ends once it has.
        let a = run(
            &d,
            "/bin/sh",
            &[
                "-c",
                &format!(
                    "/usr/bin/python3 {py} {b_pid} 3600.7 > {said} & while [ ! -s {said} ]; do /bin/sleep 0.02; done; /bin/cat {said}",
                    py = script.display(),
                    said = said.display()
                ),
            ],
        );
        let a = match a {
            Response::Ok(o) => String::from_utf8_lossy(&o.stdout_bytes()).into_owned(),
            other => panic!("{other:?}"),
        };
        // B still runs: whatever A started must be gone all the same.
        let start = std::time::Instant::now();
        let gone = loop {
            let left = Command::new("pgrep")
                .args(["-f", "join.py [0-9]+ 3600.7"])
                .output()
                .unwrap();
            if left.stdout.is_empty() {
                break true;
            }
            if start.elapsed() > std::time::Duration::from_secs(3) {
                break false;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        std::fs::write(&release, "").unwrap();
        assert!(matches!(b.join().unwrap(), Response::Ok(_)));
        assert!(gone, "A's child outlived A in B's group (it said {a:?})");
    });
}

#[test]
fn too_many_or_too_long_arguments_are_refused_before_anything_else() {
    use std::io::Write;
    let d = start();
    // Sends a raw request body (too large to build as a `Request` cheaply).
    let raw = |body: &[u8]| -> Response {
        let mut s = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
        s.write_all(&(body.len() as u32).to_be_bytes()).unwrap();
        s.write_all(body).unwrap();
        protocol::read_message(&mut s).unwrap()
    };
    // Ten million empty arguments: 30 MB of JSON, within the message cap,
    // which would be ~1 GB of strings in the daemon.
    let mut body = br#"{"tenant":"t","program":"/bin/echo","args":["#.to_vec();
    for i in 0..10_000_000 {
        body.extend_from_slice(if i == 0 { b"\"\"" } else { b",\"\"" });
    }
    body.extend_from_slice(b"]}");
    let r = raw(&body);
    assert_eq!(error_kind(&r), "bad-request");
    let max = protocol::MAX_ARGS;
    assert!(
        error_message(&r).contains(&format!("more than {max} arguments")),
        "{r:?}"
    );
    // Few but long: past the bytes all arguments may take.
    let long = "x".repeat(protocol::MAX_ARG_BYTES / 2);
    let r = run(&d, "/bin/echo", &[&long, &long]);
    assert_eq!(error_kind(&r), "bad-request");
    assert!(
        error_message(&r).contains(&format!(
            "arguments of more than {} bytes",
            protocol::MAX_ARG_BYTES
        )),
        "{r:?}"
    );
    // At the limit, the program runs.
    let mut args = vec!["-c", "echo $#", "sh"];
    args.resize(max, "");
    match run(&d, "/bin/sh", &args) {
        Response::Ok(out) => assert_eq!(out.stdout_bytes(), format!("{}\n", max - 3).as_bytes()),
        other => panic!("{other:?}"),
    }
    assert_eq!(metric(&d, "runs"), 1);
}

/// Starts the daemon with its socket at `socket` (relative to its config)
/// and expects it to refuse to start; returns what it said.
fn refused_at_start(dir: &TempDir, socket: &str) -> String {
    let config = dir.write("edge.toml", &EDGE_TOML.replace("run/sidecar.sock", socket));
    dir.write(
        "spin.toml",
        &format!(
            "spin_manifest_version = 2\n[application]\nname = \"s\"\n[[trigger.http]]\nroute = \"/...\"\ncomponent = \"echo\"\n[component.echo]\nsource = \"{}\"\n",
            edge_tests::component("echo")
        ),
    );
    let mut child = Command::new(edge_bin().with_file_name("edge-sidecar"))
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: a daemon that starts after all is killed.
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none()
        && start.elapsed() < std::time::Duration::from_secs(10)
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "the sidecar started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_socket_directory_other_users_may_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("sidecar-shared");
    // As /tmp is: writable by all, sticky.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let said = refused_at_start(&dir, "shared/sidecar.sock");
    assert!(
        said.contains(&format!(
            "{} (mode 1777, owner uid {}) can be written by other users",
            shared.display(),
            // SAFETY: geteuid cannot fail.
            unsafe { libc::geteuid() }
        )),
        "{said}"
    );
    assert!(!shared.join("sidecar.sock").exists(), "nothing was bound");
    // Writable by its group: refused too.
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o770)).unwrap();
    let said = refused_at_start(&dir, "shared/sidecar.sock");
    assert!(said.contains("(mode 770, owner uid"), "{said}");
}

/// A server as another user: answers any request with a run that printed
/// nothing.
const IMPOSTOR: &str = r#"
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
try:
    n = b""
    while len(n) < 4:
        n += c.recv(4 - len(n)) or sys.exit(0)
    n = struct.unpack(">I", n)[0]
    body = b""
    while len(body) < n:
        body += c.recv(n - len(body)) or sys.exit(0)
    answer = json.dumps({"ok": {"exit_code": 0, "stdout": "", "stderr": ""}}).encode()
    c.sendall(struct.pack(">I", len(answer)) + answer)
except OSError:
    pass
"#;

#[test]
fn the_client_refuses_a_socket_served_by_another_user() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to run a server as another user");
        return;
    }
    let dir = TempDir::new("sidecar-impostor");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let script = dir.write("impostor.py", IMPOSTOR);
    let socket = dir.path().join("sidecar.sock");
    let mut server = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg("/usr/bin/python3")
        .arg(&script)
        .arg(&socket)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let line = first_line(&mut server);
    assert_eq!(line, "ready\n");
    let r = protocol::call(
        &socket,
        &Request {
            tenant: Some("t".into()),
            program: "/bin/echo".into(),
            ..Default::default()
        },
    );
    let _ = server.kill();
    let _ = server.wait();
    let e = r.expect_err("a server of another user is not spoken to");
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
    assert!(
        e.to_string()
            .contains("is served by uid 65534, not this process's uid 0"),
        "{e}"
    );
}

#[test]
fn tenants_the_host_publishes_are_granted_and_file_tenants_keep_their_own() {
    use std::os::unix::fs::PermissionsExt;
    let d = start();
    let as_tenant = |tenant: &str, program: &str| {
        call(
            &d,
            Request {
                tenant: Some(tenant.into()),
                program: program.into(),
                args: vec!["x".into()],
                ..Default::default()
            },
        )
    };
    // A control-plane tenant: not in the edge-config file.
    assert_eq!(error_kind(&as_tenant("cp", "/bin/echo")), "not-allowed");
    let grants = |list: &[(&str, &str)]| {
        list.iter()
            .map(|(t, p)| (t.to_string(), vec![std::path::PathBuf::from(p)]))
            .collect::<edge_sidecar::Grants>()
    };
    // What the host publishes on a deploy: granted at once, and only that.
    edge_sidecar::publish_grants(
        &d.socket,
        &grants(&[("cp", "/bin/echo"), ("u", "/bin/cat")]),
    )
    .unwrap();
    assert!(matches!(as_tenant("cp", "/bin/echo"), Response::Ok(_)));
    assert_eq!(error_kind(&as_tenant("cp", "/bin/cat")), "not-allowed");
    // A tenant of the edge-config keeps the file's grant.
    assert_eq!(error_kind(&as_tenant("u", "/bin/cat")), "not-allowed");
    // Taken away: refused again (within the sidecar's look once a second).
    edge_sidecar::publish_grants(&d.socket, &grants(&[])).unwrap();
    let start = std::time::Instant::now();
    while !matches!(&as_tenant("cp", "/bin/echo"), Response::Error(e) if e.kind == "not-allowed") {
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // A file others could have written is not taken.
    edge_sidecar::publish_grants(&d.socket, &grants(&[("cp", "/bin/echo")])).unwrap();
    let file = edge_sidecar::published_grants_file(&d.socket);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o620)).unwrap();
    assert_eq!(error_kind(&as_tenant("cp", "/bin/echo")), "not-allowed");
}

#[test]
fn programs_the_control_plane_grants_run() {
    let data = TempDir::new("sidecar-control");
    edge_tests::link_shared_cache(data.path());
    let socket = data.path().join("run/sidecar.sock");
    let edge_toml = format!(
        "app = \"spin.toml\"\n[control]\nlisten = \"127.0.0.1:0\"\n[sidecar]\nsocket = \"{}\"\nallow = [\"/bin/echo\"]\n[[tenant]]\nname = \"operator\"\nhosts = [\"operator.test\", \"*\"]\ncomponents = [\"*\"]\n",
        socket.display()
    );
    let edge = edge_tests::Edge::start_with(&edge_tests::operator_spin(), &edge_toml, data.path());
    let mut sidecar = Command::new(edge_bin().with_file_name("edge-sidecar"))
        .arg("--config")
        .arg(&edge.config)
        .arg("--data-dir")
        .arg(data.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    first_line(&mut sidecar); // ready
    let d = Daemon {
        child: sidecar,
        socket,
        dir: TempDir::new("sidecar-unused"),
    };
    let as_acme = || {
        call(
            &d,
            Request {
                tenant: Some("acme".into()),
                program: "/bin/echo".into(),
                args: vec!["granted".into()],
                ..Default::default()
            },
        )
    };
    assert_eq!(error_kind(&as_acme()), "not-allowed", "no such tenant yet");
    // An operator makes a tenant and grants it a program of the node's
    // allowlist through the control API; it is in no edge-config file.
    let token = edge_tests::operator_token(data.path());
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["-H", "Content-Type: application/json"])
        .args([
            "-d",
            r#"{"name": "acme", "hosts": ["acme.test"], "programs": ["/bin/echo"]}"#,
        ])
        .arg(format!("{}/v1/tenants", edge.control.as_ref().unwrap()))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "201", "{out:?}");
    match as_acme() {
        Response::Ok(out) => assert_eq!(out.stdout_bytes(), b"granted\n"),
        other => panic!("{other:?}"),
    }
}
