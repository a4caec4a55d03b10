//! The daemon: accepts connections, checks who connects and what they
//! ask, runs programs.

use crate::protocol::*;
use edge_spawn::{Command, LimitError};
use std::collections::HashMap;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// The programs each tenant may run (its `sidecar_programs`).
pub type Grants = HashMap<String, Vec<PathBuf>>;

/// The grants of every tenant of a loaded edge-config.
pub fn grants_of(config: &edge_config::Config) -> Grants {
    config
        .tenants
        .iter()
        .map(|t| (t.name.clone(), t.sidecar_programs.clone()))
        .collect()
}

/// How often, at most, the edge-config file is looked at for changes.
const RECHECK: Duration = Duration::from_secs(1);

/// How often orphaned descendants are looked for (see
/// [`edge_spawn::reap_orphans`]).
const SWEEP: Duration = Duration::from_millis(500);

/// The edge-config file the grants were read from, to follow its edits.
struct Source {
    file: PathBuf,
    data_dir: Option<PathBuf>,
    modified: Option<SystemTime>,
    checked: Instant,
}

/// The grants file the host publishes beside the socket (the control
/// plane's tenants; see [`crate::published`]).
struct Published {
    file: PathBuf,
    stamp: crate::published::Stamp,
    grants: Grants,
    checked: Instant,
}

struct GrantState {
    /// The edge-config tenants' grants.
    grants: Arc<Grants>,
    source: Option<Source>,
    published: Option<Published>,
    /// `grants` and, for other tenants, the published ones.
    merged: Arc<Grants>,
}

impl GrantState {
    fn merge(&mut self) {
        let mut merged = (*self.grants).clone();
        if let Some(p) = &self.published {
            for (tenant, programs) in &p.grants {
                merged
                    .entry(tenant.clone())
                    .or_insert_with(|| programs.clone());
            }
        }
        self.merged = Arc::new(merged);
    }
}

fn modified(file: &Path) -> Option<SystemTime> {
    std::fs::metadata(file).and_then(|m| m.modified()).ok()
}

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
    /// Connections refused for who made them (another user, or a program
    /// the sidecar runs, or one of theirs).
    pub peers_refused: AtomicU64,
}

/// A configured sidecar.
pub struct Sidecar {
    config: edge_config::Sidecar,
    grants: Mutex<GrantState>,
    /// The only user that may connect: the sidecar's own.
    uid: libc::uid_t,
    running: AtomicUsize,
    /// Runs of each tenant running now (tenants with none are left out).
    running_by_tenant: Mutex<HashMap<String, usize>>,
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
    fn running_by_tenant(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.running_by_tenant
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// A sidecar with these settings, running for tenants with these
    /// grants.
    pub fn new(config: edge_config::Sidecar, grants: Grants) -> Arc<Self> {
        let grants = Arc::new(grants);
        Arc::new(Self {
            config,
            grants: Mutex::new(GrantState {
                merged: grants.clone(),
                grants,
                source: None,
                published: None,
            }),
            // SAFETY: geteuid cannot fail.
            uid: unsafe { libc::geteuid() },
            running: AtomicUsize::new(0),
            running_by_tenant: Mutex::default(),
            connections: AtomicUsize::new(0),
            metrics: Metrics::default(),
        })
    }

    /// Loads the `[sidecar]` section and the tenants' grants of an
    /// edge-config file; the grants are read again when the file changes
    /// (looked at once a second at most, when a request comes), so a
    /// program granted or taken away by a reload of the host is granted or
    /// refused here too. Other `[sidecar]` settings need a restart.
    ///
    /// Tenants the file does not have (the control plane's) get the grants
    /// the host publishes beside the socket ([`crate::published_grants_file`]),
    /// read again when it changes (looked at when a request comes, once a
    /// second, and at once when a request is not granted).
    pub fn load(file: &Path, data_dir: Option<&Path>) -> Result<Arc<Self>, String> {
        let stamp = modified(file);
        let config = edge_config::load_with(file, data_dir).map_err(|e| format!("{e:#}"))?;
        let Some(settings) = config.sidecar.clone() else {
            return Err(format!("{} has no [sidecar] section", file.display()));
        };
        let published = crate::published::grants_file(&settings.socket);
        let sidecar = Self::new(settings, grants_of(&config));
        let mut state = sidecar.lock_grants();
        state.source = Some(Source {
            file: file.to_path_buf(),
            data_dir: data_dir.map(Path::to_path_buf),
            modified: stamp,
            checked: Instant::now(),
        });
        state.published = Some(Published {
            file: published,
            // Read at the first request.
            stamp: Some((0, 0, 0, 0)),
            grants: Grants::new(),
            checked: Instant::now() - RECHECK,
        });
        drop(state);
        Ok(sidecar)
    }

    /// The socket's path.
    pub fn socket(&self) -> &Path {
        &self.config.socket
    }

    fn lock_grants(&self) -> std::sync::MutexGuard<'_, GrantState> {
        self.grants.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The grants, read again first if the files changed (the published
    /// one looked at now if `now`). A file that no longer loads keeps the
    /// grants it had (and says why, once per edit).
    fn grants(&self, now: bool) -> Arc<Grants> {
        let mut state = self.lock_grants();
        let mut changed = false;
        if let Some(p) = &mut state.published
            && (now || p.checked.elapsed() >= RECHECK)
        {
            p.checked = Instant::now();
            let stamp = crate::published::stamp(&p.file);
            if stamp != p.stamp {
                p.stamp = stamp;
                match crate::published::read(&p.file, self.uid) {
                    Ok(grants) => {
                        p.grants = grants;
                        changed = true;
                    }
                    Err(e) => eprintln!(
                        "edge-sidecar: the published grants {} do not load ({e}); they stay as they were",
                        p.file.display()
                    ),
                }
            }
        }
        let GrantState { grants, source, .. } = &mut *state;
        if let Some(src) = source
            && src.checked.elapsed() >= RECHECK
        {
            src.checked = Instant::now();
            let stamp = modified(&src.file);
            if stamp != src.modified {
                src.modified = stamp;
                match edge_config::load_with(&src.file, src.data_dir.as_deref()) {
                    Ok(config) => {
                        *grants = Arc::new(grants_of(&config));
                        changed = true;
                        eprintln!(
                            "edge-sidecar: tenants' grants read again from {}",
                            src.file.display()
                        );
                    }
                    Err(e) => eprintln!(
                        "edge-sidecar: {} changed but does not load ({e:#}); the grants stay as they were",
                        src.file.display()
                    ),
                }
            }
        }
        if changed {
            state.merge();
        }
        state.merged.clone()
    }

    /// Binds the socket (replacing a stale one). The socket is created
    /// mode 0600 (under a umask of 0177: there is no moment at which
    /// another user could connect), in a directory the sidecar creates
    /// mode 0700 if it does not exist. An existing directory that another
    /// user may write (its group or others, sticky or not, or an owner
    /// other than the sidecar's user or root) is refused: that user could
    /// bind the path first, or replace the socket, and be taken for the
    /// sidecar. One that others can only enter is reported on stderr.
    pub fn bind(&self) -> std::io::Result<UnixListener> {
        use std::os::unix::fs::MetadataExt;
        let path = &self.config.socket;
        let dir = crate::published::private_parent(path)?;
        let meta = std::fs::metadata(dir)?;
        if meta.mode() & 0o022 != 0 || (meta.uid() != self.uid && meta.uid() != 0) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "{} (mode {:o}, owner uid {}) can be written by other users, who could bind the socket first or replace it; \
                     put it in a directory of its own, mode 0700, owned by this user (the default socket is)",
                    dir.display(),
                    meta.mode() & 0o7777,
                    meta.uid()
                ),
            ));
        }
        if meta.uid() != self.uid || meta.mode() & 0o077 != 0 {
            eprintln!(
                "edge-sidecar: warning: {} (mode {:o}, owner uid {}) can be entered by other users; \
                 put the socket in a directory of its own, mode 0700 (the default socket does)",
                dir.display(),
                meta.mode() & 0o7777,
                meta.uid()
            );
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{} is served by another sidecar", path.display()),
            ));
        }
        let _ = std::fs::remove_file(path);
        // The umask is the process's: this runs before any thread that
        // creates files exists (main binds, then serves).
        // SAFETY: umask cannot fail.
        let old = unsafe { libc::umask(0o177) };
        let listener = UnixListener::bind(path);
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        listener
    }

    /// Serves connections. Transient failures (out of file descriptors or
    /// threads, an aborted connection) are logged and waited out, never
    /// fatal: a flood of idle clients must not end the daemon.
    ///
    /// The sidecar becomes a child subreaper: a descendant of a program it
    /// runs whose parent exits is reparented to the sidecar rather than to
    /// init, so every descendant keeps the sidecar among its ancestors
    /// (which is how their connections are refused) and none outlives its
    /// run (orphans outside a running group are killed twice a second).
    pub fn serve(self: &Arc<Self>, listener: UnixListener) -> std::io::Result<()> {
        // SAFETY: prctl on this process.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        edge_spawn::track_leaders();
        std::thread::Builder::new()
            .name("edge-sidecar-reaper".into())
            .spawn(|| {
                loop {
                    std::thread::sleep(SWEEP);
                    edge_spawn::reap_orphans();
                }
            })?;
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
        if let Err(why) = self.check_peer(&stream) {
            self.metrics.peers_refused.fetch_add(1, Relaxed);
            eprintln!("edge-sidecar: refused a connection: {why}");
            let refused = refuse(
                KIND_PEER_REFUSED,
                "this process may not use the sidecar".into(),
            );
            let _ = write_message(&mut stream, &refused);
            return;
        }
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
                "peers_refused": m.peers_refused.load(Relaxed),
                "running": self.running.load(Relaxed),
            }));
        }
        let refused = |kind: &str, message: String| {
            self.metrics.refused.fetch_add(1, Relaxed);
            eprintln!(
                "edge-sidecar: refused {:?} for tenant {:?}: {message}",
                req.program, req.tenant
            );
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
        // The host checks the grant too; checking it here means a host bug,
        // or another process of the host's user, gets no more than the
        // tenant it names was granted.
        let Some(tenant) = &req.tenant else {
            return refused(KIND_NOT_ALLOWED, "the request names no tenant".into());
        };
        let granted = |now| {
            self.grants(now)
                .get(tenant)
                .is_some_and(|programs| programs.contains(&program))
        };
        // Not granted: the host may have published the grant a moment ago
        // (a deploy), so its file is looked at again before refusing.
        if !granted(false) && !granted(true) {
            return refused(
                KIND_NOT_ALLOWED,
                format!("{:?} is not granted to this tenant", req.program),
            );
        }
        let Some(stdin) = decode(&req.stdin) else {
            return refused(KIND_BAD_REQUEST, "stdin is not base64".into());
        };
        if let Err(e) = check_args(&req.args) {
            return refused(KIND_BAD_REQUEST, e);
        }
        if req.args.iter().any(|a| a.contains('\0')) {
            return refused(KIND_BAD_REQUEST, "an argument contains a NUL byte".into());
        }
        // Reserve a slot of the tenant's and one of all, or refuse: never
        // queue without bound. The guards give them back even if the run
        // panics.
        let Some(_tenant_slot) = TenantRun::take(self, tenant) else {
            return refused(
                KIND_BUSY,
                format!(
                    "the tenant has {} runs already (max_concurrent_per_tenant); retry later",
                    self.config.max_concurrent_per_tenant
                ),
            );
        };
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
        let result = run(
            &program,
            &req.args,
            &stdin,
            timeout,
            cap,
            &self.config.child_limits,
        );
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
    limits: &edge_config::SidecarChildLimits,
) -> Result<edge_spawn::Limited, LimitError> {
    let mut cmd = Command::new(program)
        .no_path_search()
        .env_clear()
        .limits(edge_spawn::Limits {
            cpu_seconds: limits.cpu_seconds,
            address_space_bytes: limits.address_space_bytes,
            processes: limits.processes,
            file_bytes: limits.file_bytes,
        });
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

/// One of a tenant's `max_concurrent_per_tenant` runs, given back on
/// drop.
struct TenantRun<'a> {
    sidecar: &'a Sidecar,
    tenant: &'a str,
}

impl<'a> TenantRun<'a> {
    /// One more run of `tenant`, unless it has its share running.
    fn take(sidecar: &'a Sidecar, tenant: &'a str) -> Option<Self> {
        let mut running = sidecar.running_by_tenant();
        let n = running.entry(tenant.to_string()).or_default();
        if *n >= sidecar.config.max_concurrent_per_tenant {
            return None;
        }
        *n += 1;
        Some(Self { sidecar, tenant })
    }
}

impl Drop for TenantRun<'_> {
    fn drop(&mut self) {
        let mut running = self.sidecar.running_by_tenant();
        if let Some(n) = running.get_mut(self.tenant) {
            *n -= 1;
            if *n == 0 {
                running.remove(self.tenant);
            }
        }
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

impl Sidecar {
    /// Who may connect: a process of the sidecar's own user that is not a
    /// program the sidecar runs nor any descendant of one. Descendants are
    /// recognised by the sidecar among their ancestors (it is their child
    /// subreaper, so orphans stay under it); the peer is held by a pidfd
    /// while its ancestry is read, so a pid reused meanwhile is caught.
    fn check_peer(&self, stream: &UnixStream) -> Result<(), String> {
        use std::os::fd::AsRawFd;
        let fd = stream.as_raw_fd();
        let cred = crate::protocol::peer_credentials(stream)
            .map_err(|e| format!("no peer credentials: {e}"))?;
        if cred.uid != self.uid {
            return Err(format!(
                "pid {} runs as uid {}, not the sidecar's uid {}",
                cred.pid, cred.uid, self.uid
            ));
        }
        if cred.pid <= 0 {
            return Err("the peer's pid is not visible here (another pid namespace)".into());
        }
        let pidfd = Pidfd::of_peer(fd, cred.pid);
        // SAFETY: getpid cannot fail.
        let me = unsafe { libc::getpid() };
        // A process whose stat cannot be read either exited during the walk
        // (its children were reparented, to the sidecar if they are its
        // descendants: walk again) or is hidden from this user (`hidepid`;
        // the same one twice). A hidden process is of another user, so it
        // and its ancestors are none of the sidecar's descendants, which
        // all run as the sidecar's user.
        let mut unreadable = None;
        let mut walked = false;
        'walks: for _ in 0..4 {
            let mut pid = cred.pid;
            // Bounded: a chain longer than this is no process tree.
            for _ in 0..4096 {
                if pid == me {
                    return Err(format!(
                        "pid {} is a program the sidecar runs, or a descendant of one",
                        cred.pid
                    ));
                }
                if pid <= 1 {
                    walked = true;
                    break 'walks;
                }
                match parent_of(pid) {
                    Some(parent) => pid = parent,
                    None if unreadable == Some(pid) && pid != cred.pid => {
                        walked = true;
                        break 'walks;
                    }
                    None => {
                        unreadable = Some(pid);
                        continue 'walks;
                    }
                }
            }
            return Err(format!("pid {}: its ancestry does not end", cred.pid));
        }
        if !walked {
            return Err(format!("pid {}: its ancestry cannot be read", cred.pid));
        }
        if pidfd.as_ref().is_some_and(Pidfd::exited) {
            return Err(format!("pid {} exited before it was checked", cred.pid));
        }
        Ok(())
    }
}

/// The parent of `pid` (from `/proc/PID/stat`: the field after the state,
/// which follows the last ')' since the command name may hold any).
fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// A pidfd of the peer: `SO_PEERPIDFD` (Linux 6.5) names the very process
/// that connected; before that, `pidfd_open` of its pid.
struct Pidfd(libc::c_int);

/// `SO_PEERPIDFD` (asm-generic/socket.h).
const SO_PEERPIDFD: libc::c_int = 77;

impl Pidfd {
    fn of_peer(socket: libc::c_int, pid: libc::pid_t) -> Option<Self> {
        let mut fd: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt into an int of the size given.
        let r = unsafe {
            libc::getsockopt(
                socket,
                libc::SOL_SOCKET,
                SO_PEERPIDFD,
                (&mut fd as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if r == 0 && fd >= 0 {
            return Some(Self(fd));
        }
        // SAFETY: pidfd_open; the fd is owned by the result.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
        (fd >= 0).then_some(Self(fd))
    }

    /// Whether the process has exited (a pidfd polls readable then).
    fn exited(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, no wait.
        unsafe { libc::poll(&mut pfd, 1, 0) > 0 }
    }
}

impl Drop for Pidfd {
    fn drop(&mut self) {
        // SAFETY: our own descriptor.
        unsafe { libc::close(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_past_a_command_name_with_spaces_and_parens() {
        // The command name (from the file name) may hold ") (", so the
        // fields are counted from the last ')'.
        let dir = std::env::temp_dir().join(format!("edge-sidecar-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let odd = dir.join("a) 1 (b");
        let _ = std::fs::remove_file(&odd);
        std::os::unix::fs::symlink("/bin/sleep", &odd).unwrap();
        let mut child = std::process::Command::new(&odd).arg("5").spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        // Until it has exec'd, its name is still this test's.
        let start = Instant::now();
        while !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap()
            .contains("(a) 1 (b)")
        {
            assert!(start.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: getpid cannot fail.
        assert_eq!(parent_of(pid), Some(unsafe { libc::getpid() }));
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(parent_of(-5), None);
    }
}
