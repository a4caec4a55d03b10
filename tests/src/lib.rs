//! Harness for end-to-end tests: writes a Spin manifest and an edge-config
//! into a temporary directory, starts the real `edge` binary on ephemeral
//! ports, and talks to it over loopback HTTP.

pub mod fuzz;
pub mod mariadb;
pub mod ogg;
pub mod played;
pub mod services;
pub mod workers;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The repository root.
pub fn repo() -> PathBuf {
    // Cargo sets CARGO_MANIFEST_DIR when it runs a test too. Prefer that to
    // the compile-time value: another clone sharing CARGO_TARGET_DIR may have
    // built this binary.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    Path::new(&manifest_dir)
        .parent()
        .expect("repo root")
        .to_path_buf()
}

/// A built component of this repository (`make components` puts them there).
pub fn component(name: &str) -> String {
    let path = repo().join("build/components").join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run `make components` first",
        path.display()
    );
    path.display().to_string()
}

/// The manifest of the node the control-plane tests start: its own
/// tenant serves echo on every path, and has the rewriter component that
/// tenants' sites run on.
pub fn operator_spin() -> String {
    format!(
        "spin_manifest_version = 2\n[application]\nname = \"operator\"\n[[trigger.http]]\nroute = \"/...\"\ncomponent = \"echo\"\n[component.echo]\nsource = \"{}\"\n[component.rewriter]\nsource = \"{}\"\n",
        component("echo"),
        component("rewriter")
    )
}

/// The `edge` binary under test.
pub fn edge_bin() -> PathBuf {
    if let Ok(p) = std::env::var("EDGE_BIN") {
        return p.into();
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo().join("target"));
    target.join("release/edge")
}

/// A scratch directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh, empty directory.
    pub fn new(tag: &str) -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("edge-test-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }
    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
    /// Writes bytes to a file inside it and returns the file's path.
    pub fn write_bytes(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).expect("write test file");
        p
    }
    /// Writes a file inside it and returns the file's path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).expect("write test file");
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A compile cache shared by all tests, so each component is compiled once
/// per machine rather than once per test.
pub fn shared_cache() -> PathBuf {
    let dir = std::env::temp_dir().join("edge-test-cache");
    std::fs::create_dir_all(&dir).expect("cache dir");
    dir
}

/// Links `DATA/cache` to the shared compile cache ([`shared_cache`]),
/// made first: a link to nothing is no directory (on a fresh machine the
/// test may be the first to run).
pub fn link_shared_cache(data: &Path) {
    let cache = shared_cache().join("cache");
    std::fs::create_dir_all(&cache).expect("shared compile cache");
    std::os::unix::fs::symlink(cache, data.join("cache")).expect("linking the compile cache");
}

/// The first operator's API token, written by a node with the control
/// plane into its data directory `data`.
pub fn operator_token(data: &Path) -> String {
    std::fs::read_to_string(data.join("control/operator.token"))
        .expect("the bootstrap operator token")
        .trim()
        .to_string()
}

/// Runs `edge ARGS` against the control API at `api` with `token` (HOME
/// set to `home`): its exit code (-1 if killed), stdout and stderr.
pub fn edge_cli(api: &str, token: &str, home: &Path, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(edge_bin())
        .args(args)
        .env("EDGE_API_URL", api)
        .env("EDGE_API_TOKEN", token)
        .env("HOME", home)
        // Nothing of the caller's: its token file or CA would be taken.
        .env_remove("EDGE_API_TOKEN_FILE")
        .env_remove("EDGE_CA_CERT")
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .expect("edge");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `edge check` on `spin` and `edge` written to a fresh directory:
/// its exit code (-1 if killed) and stderr, the directory shown as `DIR`.
pub fn edge_check(spin: &str, edge: &str) -> (i32, String) {
    let dir = TempDir::new("cfg");
    dir.write("spin.toml", spin);
    let config = dir.write("edge.toml", edge);
    let out = std::process::Command::new(edge_bin())
        .args(["check", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(shared_cache())
        .output()
        .expect("run edge check");
    let stderr =
        String::from_utf8_lossy(&out.stderr).replace(&dir.path().display().to_string(), "DIR");
    (out.status.code().unwrap_or(-1), stderr)
}

/// A running `edge serve`.
pub struct Edge {
    child: Child,
    /// `http://127.0.0.1:PORT` of the application listener.
    pub url: String,
    /// `http://127.0.0.1:PORT` of the admin listener.
    pub admin: String,
    /// `http://127.0.0.1:PORT` of the control API, if `[control]` is set.
    pub control: Option<String>,
    /// Everything the process wrote to stderr so far.
    pub stderr: Arc<Mutex<String>>,
    /// The thread that reads it (ends when the process's stderr closes).
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    /// Where its config lives; keep it alive as long as the process.
    pub dir: TempDir,
    /// The edge-config path.
    pub config: PathBuf,
}

impl Edge {
    /// Starts edge on `edge_toml` (its `app` should be "spin.toml") and
    /// `spin_toml`, both written into a fresh directory, with a data
    /// directory of its own there (key-value stores, SQLite files: tests
    /// run side by side and name the same tenants) that shares only the
    /// compile cache ([`link_shared_cache`]).
    pub fn start(spin_toml: &str, edge_toml: &str) -> Self {
        Self::launch(spin_toml, edge_toml, None, &[])
    }

    /// Like [`Edge::start`] with a given data directory.
    pub fn start_with(spin_toml: &str, edge_toml: &str, data_dir: &Path) -> Self {
        Self::launch(spin_toml, edge_toml, Some(data_dir), &[])
    }

    /// Like [`Edge::start_with`] with extra environment variables.
    pub fn start_env(
        spin_toml: &str,
        edge_toml: &str,
        data_dir: &Path,
        env: &[(&str, &str)],
    ) -> Self {
        Self::launch(spin_toml, edge_toml, Some(data_dir), env)
    }

    fn launch(
        spin_toml: &str,
        edge_toml: &str,
        data_dir: Option<&Path>,
        env: &[(&str, &str)],
    ) -> Self {
        let dir = TempDir::new("edge");
        dir.write("spin.toml", spin_toml);
        let config = dir.write("edge.toml", edge_toml);
        let own_data = dir.path().join("data");
        let data_dir = data_dir.unwrap_or_else(|| {
            std::fs::create_dir_all(&own_data).expect("data dir");
            link_shared_cache(&own_data);
            &own_data
        });
        let mut command = Command::new(edge_bin());
        command
            .args(["serve", "--config"])
            .arg(&config)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
                "--data-dir",
            ])
            .arg(data_dir)
            .envs(env.iter().copied());
        Self::spawn(command, dir, config)
    }

    /// `edge up -f MANIFEST` on a free port, with `args` added; its state
    /// directory is a fresh one unless `args` names one.
    pub fn up(manifest: &Path, args: &[&str]) -> Self {
        Self::up_env(manifest, args, &[])
    }

    /// Like [`Edge::up`] with extra environment variables.
    pub fn up_env(manifest: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = TempDir::new("edge-up");
        let mut command = Command::new(edge_bin());
        command
            .args(["up", "--listen", "127.0.0.1:0", "-f"])
            .arg(manifest)
            .args(args)
            .envs(env.iter().copied());
        if !args.contains(&"--state-dir") {
            command.arg("--state-dir").arg(dir.path());
        }
        let config = dir.path().join("edge-up.toml");
        Self::spawn(command, dir, config)
    }

    fn spawn(mut command: Command, dir: TempDir, config: PathBuf) -> Self {
        let mut child = command
            // TEST_EDGE_LOG=debug,h2=trace to see more of a failing test.
            .env(
                "EDGE_LOG",
                std::env::var("TEST_EDGE_LOG").unwrap_or("info".into()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", edge_bin().display()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().expect("stderr");
        let sink = stderr.clone();
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        // "edge listening on http://A (admin http://B)"
        let mut urls = line
            .split_whitespace()
            .filter(|w| w.contains("http://"))
            .map(|w| w.trim_matches(|c| c == '(' || c == ')').to_string());
        let (Some(url), admin, control) = (urls.next(), urls.next(), urls.next()) else {
            let _ = child.kill();
            std::thread::sleep(Duration::from_millis(100));
            panic!(
                "edge did not start; stdout: {line:?}; stderr: {}",
                stderr.lock().unwrap()
            );
        };
        Self {
            child,
            url,
            // `edge up` has none.
            admin: admin.unwrap_or_default(),
            control,
            stderr,
            stderr_reader: Some(stderr_reader),
            dir,
            config,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process's resident memory, in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the process's status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("VmRSS")
    }

    /// Sends a signal to the process.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }

    /// Waits for the process to exit and returns its exit code.
    pub fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// The stderr log so far.
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The stderr log once it shows `needle`, or after 10 s without it:
    /// a line the server wrote before answering may still be in the pipe
    /// to the thread that collects it.
    pub async fn log_after(&self, needle: &str) -> String {
        for _ in 0..200 {
            let log = self.log();
            if log.contains(needle) {
                return log;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.log()
    }

    /// The text of `/metrics`.
    pub async fn metrics(&self) -> String {
        get(&format!("{}/metrics", self.admin)).await.1
    }

    /// Waits until some instance of `component` (tenant `t`) is running a
    /// request: the moment a test's slow request holds it.
    pub async fn wait_until_busy(&self, component: &str) {
        self.wait_until_busy_as("t", component).await
    }

    /// Waits until some instance of `tenant`'s `component` is running a
    /// request.
    pub async fn wait_until_busy_as(&self, tenant: &str, component: &str) {
        let series =
            format!("edge_active_instances{{tenant=\"{tenant}\",component=\"{component}\"}}");
        while self.metric(&series).await < 1.0 {
            tokio::task::yield_now().await;
        }
    }

    /// Waits up to `within` for `series` to read `value`; whether it did.
    pub async fn wait_for_metric(&self, series: &str, value: f64, within: Duration) -> bool {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if self.metric(series).await == value {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// The value of one metric line (exact name with labels), or 0.
    pub async fn metric(&self, series: &str) -> f64 {
        self.metrics()
            .await
            .lines()
            .find_map(|l| {
                l.strip_prefix(series)
                    .and_then(|v| v.strip_prefix(' '))
                    .and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(0.0)
    }
}

impl Drop for Edge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failing test shows what the server logged: in CI that log is
        // the only account of why (a 503's reason is in the log, never in
        // the response).
        if std::thread::panicking() {
            // Its last lines, the ones that tell, once the reader has them
            // (a second at most: a child of the server may hold the pipe).
            if let Some(reader) = self.stderr_reader.take() {
                let until = std::time::Instant::now() + Duration::from_secs(1);
                while !reader.is_finished() && std::time::Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            let log = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
            let mut start = log.len().saturating_sub(LOG_TAIL_BYTES);
            while !log.is_char_boundary(start) {
                start += 1;
            }
            let tail = &log[start..];
            eprintln!("---- edge's log (last {} bytes) ----\n{tail}", tail.len());
        }
    }
}

/// How much of a failing test's server log is shown.
const LOG_TAIL_BYTES: usize = 16 * 1024;

/// A keep-alive HTTP/1.1 client.
pub fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A client whose connections come from `local` (another loopback
/// address, say `127.0.0.2`: a peer the server has not seen).
pub fn client_from(local: std::net::IpAddr) -> Client<HttpConnector, Full<Bytes>> {
    let mut connector = HttpConnector::new();
    connector.set_local_address(Some(local));
    Client::builder(TokioExecutor::new()).build(connector)
}

/// GET `url` and return (status, body).
pub async fn get(url: &str) -> (u16, String) {
    request(&client(), "GET", url, &[], Bytes::new()).await
}

/// GET `url` with a Host header.
pub async fn get_host(url: &str, host: &str) -> (u16, String) {
    request(&client(), "GET", url, &[("host", host)], Bytes::new()).await
}

/// An HTTP/2 connection (h2c, prior knowledge) to the server at `url`:
/// its sender, and the task driving it (it ends when the server closes).
pub async fn h2_connect(
    url: &str,
) -> (
    hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>>,
    tokio::task::JoinHandle<hyper::Result<()>>,
) {
    let stream = tokio::net::TcpStream::connect(url.trim_start_matches("http://"))
        .await
        .expect("connect");
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("h2 handshake");
    (send, tokio::spawn(conn))
}

/// Any request; returns (status, body), or (0, error) when the exchange
/// failed at the HTTP level (connection closed, body cut short).
pub async fn request(
    client: &Client<HttpConnector, Full<Bytes>>,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> (u16, String) {
    let mut req = http::Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(body)).expect("request");
    match client.request(req).await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            match resp.into_body().collect().await {
                Ok(b) => (status, String::from_utf8_lossy(&b.to_bytes()).into_owned()),
                Err(e) => (0, format!("body error: {e}")),
            }
        }
        Err(e) => (0, format!("request error: {e:?}")),
    }
}

/// Sends raw bytes on a fresh connection and returns what comes back
/// (until the server closes or 2 s pass).
pub fn raw(url: &str, bytes: &[u8]) -> String {
    use std::io::Write;
    let addr = url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(2))).ok();
    s.write_all(bytes).expect("write");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A Spin manifest with the repository's echo and fixtures components and
/// a `counter` (the fixtures component again, for session mode).
pub fn standard_spin() -> String {
    format!(
        r#"spin_manifest_version = 2
[application]
name = "test-app"

[variables]
greeting = {{ default = "hello" }}

[[trigger.http]]
route = "/..."
component = "echo"

[[trigger.http]]
route = "/fixtures/..."
component = "fixtures"

[[trigger.http]]
route = "/counter/..."
component = "counter"

[component.echo]
source = "{echo}"

[component.fixtures]
source = "{fixtures}"

[component.counter]
source = "{fixtures}"
"#,
        echo = component("echo"),
        fixtures = component("fixtures"),
    )
}

/// [`standard_spin`] plus `(route, id, guest)` entries: `route` served by a
/// component `id` built from this repository's `guest`.
pub fn spin_with(extra: &[(&str, &str, &str)]) -> String {
    let mut spin = standard_spin();
    for (route, id, guest) in extra {
        spin += &format!(
            "\n[[trigger.http]]\nroute = \"{route}\"\ncomponent = \"{id}\"\n[component.{id}]\nsource = \"{}\"\n",
            component(guest)
        );
    }
    spin
}

/// An edge-config with one tenant `t` on every host with every component.
pub const ONE_TENANT: &str =
    "app = \"spin.toml\"\n[[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n";

/// Runs a snippet with Debian's Python (`/usr/bin/python3`, where the test
/// command installs python3-jwt; pyenv's `python3` may lack it), `input` as
/// JSON on stdin; returns its stdout parsed as JSON.
pub fn python(script: &str, input: &serde_json::Value) -> serde_json::Value {
    use std::io::Write;
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run /usr/bin/python3 (the test command installs python3-jwt)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.to_string().as_bytes())
        .expect("write to python");
    let out = child.wait_with_output().expect("python");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("python printed JSON")
}

/// Runs `command` to its end and returns its output, failing the test
/// with its stderr unless it succeeded; `what` names it (and what
/// installs it).
pub fn run_ok(command: &mut std::process::Command, what: &str) -> std::process::Output {
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// An HTTP server on loopback answering every request with `body`;
/// returns its port.
pub fn upstream(body: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// The value of `series` (its name and labels, as `/metrics` writes them)
/// in the metrics `text`; panics naming the series if it is missing.
pub fn metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
}
