//! The daemon: accepts connections, checks requests, runs programs.

use crate::protocol::*;
use edge_spawn::{Command, LimitError};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Connections served at once: past this a new one is refused as `busy`
/// at once, so idle or trickling clients cannot take threads and request
/// buffers without bound (runs themselves are capped by `max_concurrent`).
const MAX_CONNECTIONS: usize = 256;

/// Longest a client may take to send its whole request.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// Counters since start.
#[derive(Default, Debug)]
pub struct Metrics {
    /// Programs run to their end.
    pub runs: AtomicU64,
    /// Requests refused before spawning (allowlist, path, busy, malformed).
    pub refused: AtomicU64,
    /// Runs killed at their time limit.
    pub timeouts: AtomicU64,
    /// Runs killed for too much output.
    pub output_too_large: AtomicU64,
    /// Runs that could not start.
    pub spawn_failures: AtomicU64,
}

/// A configured sidecar.
pub struct Sidecar {
    config: edge_config::Sidecar,
    running: AtomicUsize,
    connections: AtomicUsize,
    /// The counters.
    pub metrics: Metrics,
}

fn refuse(kind: &str, message: String) -> Response {
    Response::Error(RunError {
        kind: kind.into(),
        message,
    })
}

impl Sidecar {
    /// A sidecar with these settings.
    pub fn new(config: edge_config::Sidecar) -> Arc<Self> {
        Arc::new(Self {
            config,
            running: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            metrics: Metrics::default(),
        })
    }

    /// Binds the socket (replacing a stale one), mode 0600.
    pub fn bind(&self) -> std::io::Result<UnixListener> {
        let path = &self.config.socket;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{} is served by another sidecar", path.display()),
            ));
        }
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        Ok(listener)
    }

    /// Serves connections. Transient failures (out of file descriptors or
    /// threads, an aborted connection) are logged and waited out, never
    /// fatal: a flood of idle clients must not end the daemon.
    pub fn serve(self: &Arc<Self>, listener: UnixListener) -> std::io::Result<()> {
        for stream in listener.incoming() {
            let stream = match stream {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("edge-sidecar: accept failed: {e}; retrying");
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let Some(slot) = Connection::take(self) else {
                self.metrics.refused.fetch_add(1, Relaxed);
                let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
                let busy = refuse(
                    KIND_BUSY,
                    format!("{MAX_CONNECTIONS} connections open already; retry later"),
                );
                let _ = write_message(&mut { stream }, &busy);
                continue;
            };
            if let Err(e) = std::thread::Builder::new()
                .name("edge-sidecar-conn".into())
                .spawn(move || slot.0.connection(stream))
            {
                eprintln!("edge-sidecar: no thread for a connection: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    fn connection(&self, mut stream: UnixStream) {
        let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
        let mut within = Within {
            stream: &stream,
            deadline: Instant::now() + REQUEST_DEADLINE,
        };
        let response = match read_message::<Request>(&mut within) {
            Ok(req) => self.handle(&req),
            Err(e) => {
                self.metrics.refused.fetch_add(1, Relaxed);
                refuse(KIND_BAD_REQUEST, format!("unreadable request: {e}"))
            }
        };
        let _ = write_message(&mut stream, &response);
    }

    /// Checks and runs one request.
    pub fn handle(&self, req: &Request) -> Response {
        if req.metrics {
            let m = &self.metrics;
            return Response::Metrics(serde_json::json!({
                "runs": m.runs.load(Relaxed),
                "refused": m.refused.load(Relaxed),
                "timeouts": m.timeouts.load(Relaxed),
                "output_too_large": m.output_too_large.load(Relaxed),
                "spawn_failures": m.spawn_failures.load(Relaxed),
                "running": self.running.load(Relaxed),
            }));
        }
        let refused = |kind: &str, message: String| {
            self.metrics.refused.fetch_add(1, Relaxed);
            eprintln!("edge-sidecar: refused {:?}: {message}", req.program);
            refuse(kind, message)
        };
        let program = match edge_config::sidecar::check_program(&req.program) {
            Ok(p) => p,
            Err(e) => return refused(KIND_BAD_PATH, e),
        };
        if !self.config.allow.contains(&program) {
            return refused(
                KIND_NOT_ALLOWED,
                format!("{:?} is not on the sidecar's allowlist", req.program),
            );
        }
        let Some(stdin) = decode(&req.stdin) else {
            return refused(KIND_BAD_REQUEST, "stdin is not base64".into());
        };
        if req.args.iter().any(|a| a.contains('\0')) {
            return refused(KIND_BAD_REQUEST, "an argument contains a NUL byte".into());
        }
        // Reserve a slot, or refuse: never queue without bound. The guard
        // gives it back even if the run panics.
        let Some(_slot) = Counted::take(&self.running, self.config.max_concurrent) else {
            return refused(
                KIND_BUSY,
                format!(
                    "{} runs already (max_concurrent); retry later",
                    self.config.max_concurrent
                ),
            );
        };
        let timeout = req
            .timeout_ms
            .map(Duration::from_millis)
            .map_or(self.config.timeout, |t| t.min(self.config.timeout));
        let cap = req.max_output.map_or(self.config.max_output_bytes, |c| {
            c.min(self.config.max_output_bytes)
        });
        let result = run(&program, &req.args, &stdin, timeout, cap);
        match result {
            Ok(out) => {
                self.metrics.runs.fetch_add(1, Relaxed);
                Response::Ok(RunOutput {
                    exit_code: out.exit_code(),
                    stdout: encode(&out.stdout),
                    stderr: encode(&out.stderr),
                })
            }
            Err(LimitError::Timeout) => {
                self.metrics.timeouts.fetch_add(1, Relaxed);
                refuse(
                    KIND_TIMEOUT,
                    format!(
                        "{:?} ran past {} ms; its process group was killed",
                        req.program,
                        timeout.as_millis()
                    ),
                )
            }
            Err(LimitError::OutputTooLarge) => {
                self.metrics.output_too_large.fetch_add(1, Relaxed);
                refuse(
                    KIND_OUTPUT_TOO_LARGE,
                    format!(
                        "{:?} wrote more than {cap} bytes; its process group was killed",
                        req.program
                    ),
                )
            }
            Err(LimitError::Spawn(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                self.metrics.spawn_failures.fetch_add(1, Relaxed);
                refuse(KIND_NOT_FOUND, format!("{:?} does not exist", req.program))
            }
            Err(LimitError::Spawn(e)) => {
                self.metrics.spawn_failures.fetch_add(1, Relaxed);
                refuse(
                    KIND_SPAWN_FAILED,
                    format!("{:?} could not start: {e}", req.program),
                )
            }
        }
    }
}

fn run(
    program: &PathBuf,
    args: &[String],
    stdin: &[u8],
    timeout: Duration,
    cap: usize,
) -> Result<edge_spawn::Limited, LimitError> {
    let mut cmd = Command::new(program).no_path_search().env_clear();
    for a in args {
        cmd = cmd.arg(a);
    }
    cmd.run_limited(stdin, timeout, cap)
}

/// Counts one more in `count`, unless `max` are counted already.
fn reserve(count: &AtomicUsize, max: usize) -> bool {
    count
        .fetch_update(Relaxed, Relaxed, |n| (n < max).then_some(n + 1))
        .is_ok()
}

/// One of a counted resource (a run, a connection), given back on drop,
/// even if what holds it panics.
struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    /// One more, unless `max` are taken.
    fn take(count: &'a AtomicUsize, max: usize) -> Option<Self> {
        reserve(count, max).then(|| Self(count))
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// One of the [`MAX_CONNECTIONS`], given back when dropped (with the
/// thread that serves it, or at once if that thread could not start).
struct Connection(Arc<Sidecar>);

impl Connection {
    fn take(sidecar: &Arc<Sidecar>) -> Option<Self> {
        reserve(&sidecar.connections, MAX_CONNECTIONS).then(|| Self(sidecar.clone()))
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Relaxed);
    }
}

/// A stream read against one deadline for a whole message, not per read:
/// a client trickling a byte at a time cannot hold a thread for long.
struct Within<'a> {
    stream: &'a UnixStream,
    deadline: Instant,
}

impl std::io::Read for Within<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the request took over {} s", REQUEST_DEADLINE.as_secs()),
            ));
        }
        self.stream.set_read_timeout(Some(left))?;
        (&mut &*self.stream).read(buf)
    }
}
