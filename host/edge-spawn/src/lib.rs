//! Running a program the cheap way: `posix_spawn(p)` (glibc spawns with
//! `clone(CLONE_VM | CLONE_VFORK)`, no copy of the parent's page tables),
//! no shell unless asked for, stdin from `/dev/null`, stdout captured through
//! a pipe up to a cap (the rest is drained and dropped, so the child never
//! blocks on a full pipe), the signal mask and dispositions reset (database
//! servers block signals in their threads; children must not inherit that).
//!
//! ```
//! use edge_spawn::{Command, Stdout};
//! let out = Command::new("echo").arg("hello world").stdout(Stdout::Capture(1024)).run().unwrap();
//! assert_eq!(out.stdout, b"hello world\n");
//! assert_eq!(out.exit_code(), 0);
//! ```
#![deny(missing_docs)]

use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// What becomes of the child's stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stdout {
    /// The parent's stdout.
    Inherit,
    /// `/dev/null`.
    Null,
    /// Captured, keeping at most this many bytes.
    Capture(usize),
}

/// A program to run.
#[derive(Clone, Debug)]
pub struct Command {
    program: CString,
    args: Vec<CString>,
    search_path: bool,
    stdout: Stdout,
    env: Option<Vec<CString>>,
    /// Limited runs: stdin and stderr through pipes, a process group of its own.
    piped: bool,
    /// (fd in the parent, fd in the child) pairs to `dup2`.
    extra_dups: Vec<(libc::c_int, libc::c_int)>,
    /// The program or an argument held a NUL byte: running is refused
    /// (as `std::process::Command` does) rather than passing a cut or
    /// empty string, which would run something else.
    saw_nul: bool,
}

/// How a child ended and what it wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// The raw wait status (`system()`'s return value: 256 for exit code 1).
    pub status: i32,
    /// Captured stdout (empty unless [`Stdout::Capture`]).
    pub stdout: Vec<u8>,
    /// Whether stdout passed the cap (the rest was dropped).
    pub truncated: bool,
}

impl Output {
    /// The exit code, or 128 + N if signal N ended the child (the shells'
    /// convention).
    pub fn exit_code(&self) -> i32 {
        exit_code(self.status)
    }
}

/// The exit code in a raw wait status, or 128 + N if signal N ended it.
fn exit_code(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        -1
    }
}

/// A close-on-exec pipe whose ends are both above 2. When the parent runs
/// with a standard descriptor closed, `pipe2` may hand out 0, 1 or 2, and
/// the child's `dup2`s onto 0, 1 and 2 (in order) would then overwrite a
/// pipe end before duplicating it.
fn pipe_above_stdio() -> io::Result<[libc::c_int; 2]> {
    let mut fds = [-1; 2];
    // SAFETY: pipe2 into a local array; the fds are ours, and every one
    // replaced or left on an error path is closed.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(io::Error::last_os_error());
        }
        for i in 0..2 {
            if fds[i] > 2 {
                continue;
            }
            let moved = libc::fcntl(fds[i], libc::F_DUPFD_CLOEXEC, 3);
            let error = io::Error::last_os_error();
            libc::close(fds[i]);
            if moved < 0 {
                libc::close(fds[1 - i]);
                return Err(error);
            }
            fds[i] = moved;
        }
    }
    Ok(fds)
}

fn cstring(s: &[u8], what: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        )
    })
}

impl Command {
    /// Runs `program` (looked up in `PATH` unless it contains a '/'),
    /// with `argv[0]` = `program`.
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        let p = program.as_ref().as_bytes();
        let (program, saw_nul) = match CString::new(p) {
            Ok(c) => (c, false),
            Err(_) => (CString::default(), true),
        };
        Self {
            args: vec![program.clone()],
            program,
            search_path: true,
            stdout: Stdout::Inherit,
            env: None,
            piped: false,
            extra_dups: Vec::new(),
            saw_nul,
        }
    }

    /// `/bin/sh -c script`: the shell, for compatibility with callers that
    /// pass command lines.
    pub fn shell(script: impl AsRef<OsStr>) -> Self {
        let mut c = Self::new("/bin/sh");
        c.args[0] = CString::new("sh").expect("literal");
        c.arg("-c").arg(script)
    }

    /// Appends one argument, passed verbatim (no word splitting, no
    /// quoting). One holding a NUL byte makes running fail with
    /// `InvalidInput` (C strings cannot carry it).
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        match CString::new(arg.as_ref().as_bytes()) {
            Ok(a) => self.args.push(a),
            Err(_) => self.saw_nul = true,
        }
        self
    }

    /// Appends arguments given as bytes; an argument holding a NUL byte is
    /// an error (C strings cannot carry it).
    pub fn args_bytes<'a>(mut self, args: impl IntoIterator<Item = &'a [u8]>) -> io::Result<Self> {
        for a in args {
            self.args.push(cstring(a, "an argument")?);
        }
        Ok(self)
    }

    /// Do not search `PATH`: `program` must be a path.
    pub fn no_path_search(mut self) -> Self {
        self.search_path = false;
        self
    }

    /// Where stdout goes.
    pub fn stdout(mut self, stdout: Stdout) -> Self {
        self.stdout = stdout;
        self
    }

    /// Runs with an empty environment instead of the parent's.
    pub fn env_clear(mut self) -> Self {
        self.env = Some(Vec::new());
        self
    }

    /// Runs with only the named variables of the parent's environment
    /// (those it has), nothing else.
    pub fn env_keep(mut self, names: &[&str]) -> Self {
        let vars = names
            .iter()
            .filter_map(|name| {
                let value = std::env::var_os(name)?;
                let mut var = name.as_bytes().to_vec();
                var.push(b'=');
                var.extend_from_slice(value.as_bytes());
                CString::new(var).ok()
            })
            .collect();
        self.env = Some(vars);
        self
    }

    /// Spawns the program and returns its pid and the read end of its
    /// stdout pipe (when captured).
    pub fn spawn(&self) -> io::Result<(libc::pid_t, Option<std::fs::File>)> {
        if self.program.as_bytes().is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "empty program name (or one with a NUL byte)",
            ));
        }
        spawn(self)
    }

    /// Runs the program to its end.
    pub fn run(&self) -> io::Result<Output> {
        let (pid, pipe) = self.spawn()?;
        let (stdout, truncated) = match (pipe, self.stdout) {
            (Some(mut pipe), Stdout::Capture(cap)) => read_capped(&mut pipe, cap),
            _ => (Vec::new(), false),
        };
        let status = wait(pid)?;
        Ok(Output {
            status,
            stdout,
            truncated,
        })
    }
}

/// Reads to EOF, keeping at most `cap` bytes and draining the rest.
fn read_capped(pipe: &mut std::fs::File, cap: usize) -> (Vec<u8>, bool) {
    use std::io::Read;
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let mut truncated = false;
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = cap.saturating_sub(out.len());
                if n > room {
                    truncated = true;
                }
                out.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (out, truncated)
}

/// Waits for `pid`, retrying on EINTR; returns the raw wait status.
pub fn wait(pid: libc::pid_t) -> io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid on a child we spawned, with a valid status pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(status);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

struct Attr(libc::posix_spawnattr_t);
impl Drop for Attr {
    fn drop(&mut self) {
        // SAFETY: initialised in `spawn` before this guard exists.
        unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
    }
}
struct Actions(libc::posix_spawn_file_actions_t);
impl Drop for Actions {
    fn drop(&mut self) {
        // SAFETY: initialised in `spawn` before this guard exists.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
    }
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

fn spawn(cmd: &Command) -> io::Result<(libc::pid_t, Option<std::fs::File>)> {
    use std::os::fd::FromRawFd;
    if cmd.saw_nul {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the program or an argument contains a NUL byte",
        ));
    }
    // SAFETY: plain libc calls on locals; every pointer passed lives until
    // posix_spawn returns; fds are closed on every path.
    unsafe {
        let mut attr = Attr(std::mem::zeroed());
        check(libc::posix_spawnattr_init(&mut attr.0))?;
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        check(libc::posix_spawnattr_setsigmask(&mut attr.0, &empty))?;
        check(libc::posix_spawnattr_setsigdefault(&mut attr.0, &all))?;
        let mut flags = libc::POSIX_SPAWN_USEVFORK as libc::c_int
            | libc::POSIX_SPAWN_SETSIGMASK
            | libc::POSIX_SPAWN_SETSIGDEF;
        if cmd.piped {
            // A group of its own (pgid = pid), so a timeout kills it whole.
            flags |= libc::POSIX_SPAWN_SETPGROUP;
            check(libc::posix_spawnattr_setpgroup(&mut attr.0, 0))?;
        }
        check(libc::posix_spawnattr_setflags(&mut attr.0, flags as _))?;

        let mut actions = Actions(std::mem::zeroed());
        check(libc::posix_spawn_file_actions_init(&mut actions.0))?;
        let dev_null = c"/dev/null";
        if !cmd.piped {
            check(libc::posix_spawn_file_actions_addopen(
                &mut actions.0,
                0,
                dev_null.as_ptr(),
                libc::O_RDONLY,
                0,
            ))?;
        }
        let mut pipe_fds = [-1; 2];
        match cmd.stdout {
            Stdout::Inherit => {}
            Stdout::Null => check(libc::posix_spawn_file_actions_addopen(
                &mut actions.0,
                1,
                dev_null.as_ptr(),
                libc::O_WRONLY,
                0,
            ))?,
            Stdout::Capture(_) => {
                pipe_fds = pipe_above_stdio()?;
                let r = libc::posix_spawn_file_actions_adddup2(&mut actions.0, pipe_fds[1], 1);
                if r != 0 {
                    libc::close(pipe_fds[0]);
                    libc::close(pipe_fds[1]);
                    return Err(io::Error::from_raw_os_error(r));
                }
            }
        }

        for (from, to) in &cmd.extra_dups {
            let r = libc::posix_spawn_file_actions_adddup2(&mut actions.0, *from, *to);
            if r != 0 {
                if pipe_fds[0] >= 0 {
                    libc::close(pipe_fds[0]);
                    libc::close(pipe_fds[1]);
                }
                return Err(io::Error::from_raw_os_error(r));
            }
        }
        let mut argv: Vec<*mut libc::c_char> =
            cmd.args.iter().map(|a| a.as_ptr() as *mut _).collect();
        argv.push(std::ptr::null_mut());
        let env_storage: Vec<*mut libc::c_char>;
        let envp: *const *mut libc::c_char = match &cmd.env {
            Some(vars) => {
                env_storage = vars
                    .iter()
                    .map(|v| v.as_ptr() as *mut _)
                    .chain(std::iter::once(std::ptr::null_mut()))
                    .collect();
                env_storage.as_ptr()
            }
            None => environ(),
        };
        let mut pid: libc::pid_t = 0;
        let r = if cmd.search_path {
            libc::posix_spawnp(
                &mut pid,
                cmd.program.as_ptr(),
                &actions.0,
                &attr.0,
                argv.as_ptr(),
                envp,
            )
        } else {
            libc::posix_spawn(
                &mut pid,
                cmd.program.as_ptr(),
                &actions.0,
                &attr.0,
                argv.as_ptr(),
                envp,
            )
        };
        if pipe_fds[1] >= 0 {
            libc::close(pipe_fds[1]);
        }
        if r != 0 {
            if pipe_fds[0] >= 0 {
                libc::close(pipe_fds[0]);
            }
            return Err(io::Error::from_raw_os_error(r));
        }
        let pipe = (pipe_fds[0] >= 0).then(|| std::fs::File::from_raw_fd(pipe_fds[0]));
        Ok((pid, pipe))
    }
}

/// Why a limited run failed.
#[derive(Debug)]
pub enum LimitError {
    /// The program could not be started.
    Spawn(io::Error),
    /// It ran past its time and its process group was killed.
    Timeout,
    /// It wrote more than allowed (stdout or stderr) and was killed.
    OutputTooLarge,
}

impl std::fmt::Display for LimitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Spawn(e) => write!(f, "could not start the program: {e}"),
            Self::Timeout => write!(f, "timed out; its process group was killed"),
            Self::OutputTooLarge => write!(
                f,
                "wrote more output than allowed; its process group was killed"
            ),
        }
    }
}

/// What a limited run produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limited {
    /// The raw wait status.
    pub status: i32,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
}

impl Limited {
    /// The exit code, or 128 + N if signal N ended it.
    pub fn exit_code(&self) -> i32 {
        exit_code(self.status)
    }
}

impl Command {
    /// Runs with `stdin` fed through a pipe, stdout and stderr captured up
    /// to `max_output` bytes each, in a process group of its own that is
    /// killed (SIGKILL) if the program passes `timeout` or the output cap,
    /// and after it exits (so nothing it started stays in the group).
    ///
    /// The call returns within about `timeout` plus a short grace period
    /// whatever the program does: a descendant that left the group
    /// (`setsid`) and holds the pipes open is no longer waited for. The
    /// group is signalled before its leader is reaped, so the signal can
    /// never reach a process that reused the pid.
    pub fn run_limited(
        &self,
        stdin: &[u8],
        timeout: Duration,
        max_output: usize,
    ) -> Result<Limited, LimitError> {
        use std::os::fd::{AsRawFd, FromRawFd};
        let deadline = Instant::now() + timeout;
        let mut cmd = self.clone();
        cmd.piped = true;
        cmd.stdout = Stdout::Capture(max_output);
        let pipe = || -> io::Result<(std::fs::File, std::fs::File)> {
            let fds = pipe_above_stdio()?;
            // SAFETY: fresh descriptors we own.
            Ok(unsafe {
                (
                    std::fs::File::from_raw_fd(fds[0]),
                    std::fs::File::from_raw_fd(fds[1]),
                )
            })
        };
        let (stdin_r, stdin_w) = pipe().map_err(LimitError::Spawn)?;
        let (stderr_r, stderr_w) = pipe().map_err(LimitError::Spawn)?;
        cmd.extra_dups = vec![(stdin_r.as_raw_fd(), 0), (stderr_w.as_raw_fd(), 2)];
        let spawned = spawn(&cmd);
        drop(stdin_r);
        drop(stderr_w);
        let (pid, stdout) = spawned.map_err(LimitError::Spawn)?;
        let stdout = stdout.expect("captured");
        // SAFETY: setting O_NONBLOCK on our own pipe end.
        unsafe {
            let fl = libc::fcntl(stdin_w.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(stdin_w.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        let stop = AtomicBool::new(false);
        let too_large = AtomicBool::new(false);
        let ran = std::thread::scope(|s| {
            // Out of threads (the sidecar may be): the child is running
            // already, so it is killed and reaped before the error goes
            // back, and threads already started see `stop`.
            let started = (|| {
                let thread = || std::thread::Builder::new().name("edge-spawn-pipe".into());
                let writer = thread().spawn_scoped(s, || feed(stdin_w, stdin, &stop))?;
                let out =
                    thread().spawn_scoped(s, || drain(stdout, max_output, &stop, &too_large))?;
                let err =
                    thread().spawn_scoped(s, || drain(stderr_r, max_output, &stop, &too_large))?;
                Ok((writer, out, err))
            })();
            let (writer, out, err) = match started {
                Ok(threads) => threads,
                Err(e) => {
                    stop.store(true, Relaxed);
                    // SAFETY: signalling the group we created, whose
                    // leader is not reaped yet.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                    let _ = wait(pid);
                    return Err(LimitError::Spawn(e));
                }
            };
            let timed_out = wait_exit(pid, deadline, &too_large);
            // The leader is a zombie at most (not reaped yet), so its group
            // id cannot have been reused: kill whatever is left in it.
            // SAFETY: signalling the group we created.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            // Let the readers take what is buffered, then stop waiting for
            // pipes that an escaped descendant may hold open.
            let grace = Instant::now() + GRACE;
            while !(out.is_finished() && err.is_finished()) && Instant::now() < grace {
                std::thread::sleep(Duration::from_millis(5));
            }
            stop.store(true, Relaxed);
            let out = out.join().unwrap_or_default();
            let err = err.join().unwrap_or_default();
            let _ = writer.join();
            Ok((wait(pid).unwrap_or(-1), timed_out, out, err))
        });
        let (status, timed_out, out, err) = ran?;
        if timed_out {
            return Err(LimitError::Timeout);
        }
        if too_large.load(Relaxed) {
            return Err(LimitError::OutputTooLarge);
        }
        Ok(Limited {
            status,
            stdout: out,
            stderr: err,
        })
    }
}

/// How long pipes are drained after the program ended or was killed.
const GRACE: Duration = Duration::from_millis(200);
/// How often blocked pipe loops look at the stop flag.
const TICK_MS: i32 = 20;

fn poll_one(fd: libc::c_int, events: libc::c_short) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one pollfd on the stack.
    unsafe { libc::poll(&mut pfd, 1, TICK_MS) > 0 }
}

/// Writes `data` to the (non-blocking) stdin pipe until done, the reader
/// is gone, or `stop`.
fn feed(pipe: std::fs::File, mut data: &[u8], stop: &AtomicBool) {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let mut pipe = pipe;
    while !data.is_empty() && !stop.load(Relaxed) {
        if !poll_one(pipe.as_raw_fd(), libc::POLLOUT) {
            continue;
        }
        match pipe.write(data) {
            Ok(n) => data = &data[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            // EPIPE: the program does not read its stdin.
            Err(_) => return,
        }
    }
}

/// Reads a pipe to EOF (or `stop`); past `cap` bytes, flags `too_large`
/// and stops reading.
fn drain(pipe: std::fs::File, cap: usize, stop: &AtomicBool, too_large: &AtomicBool) -> Vec<u8> {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let mut pipe = pipe;
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    while !stop.load(Relaxed) {
        if !poll_one(pipe.as_raw_fd(), libc::POLLIN) {
            continue;
        }
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) if out.len() + n > cap => {
                too_large.store(true, Relaxed);
                break;
            }
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    out
}

/// Waits, without reaping, until `pid` exits, `deadline` passes (true) or
/// `too_large` is set.
fn wait_exit(pid: libc::pid_t, deadline: Instant, too_large: &AtomicBool) -> bool {
    // SAFETY: pidfd_open on our own child; the fd is closed below.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
    let exited = || {
        if pidfd >= 0 {
            poll_one(pidfd, libc::POLLIN)
        } else {
            // No pidfd (old kernel, seccomp): waitid without reaping.
            // SAFETY: waitid on our child into a zeroed siginfo.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let r = unsafe {
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
                )
            };
            // SAFETY: reading the pid field waitid filled in (0 if not yet).
            let done = r == 0 && unsafe { info.si_pid() } == pid;
            if !done {
                std::thread::sleep(Duration::from_millis(TICK_MS as u64));
            }
            done
        }
    };
    let mut timed_out = false;
    loop {
        if exited() {
            break;
        }
        if too_large.load(Relaxed) {
            break;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            break;
        }
    }
    if pidfd >= 0 {
        // SAFETY: closing the fd opened above.
        unsafe { libc::close(pidfd) };
    }
    timed_out
}

fn environ() -> *const *mut libc::c_char {
    unsafe extern "C" {
        static environ: *const *mut libc::c_char;
    }
    // SAFETY: reading the process's environment pointer.
    unsafe { environ }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_pass_verbatim_without_a_shell() {
        let tricky = ["$(id)", "a b", "quote'\"", "line\nbreak", ""];
        let mut c = Command::new("printf").arg("%s|");
        for t in tricky {
            c = c.arg(t);
        }
        let out = c.stdout(Stdout::Capture(1 << 10)).run().unwrap();
        assert_eq!(out.stdout, b"$(id)|a b|quote'\"|line\nbreak||");
    }

    #[test]
    fn wait_status_and_exit_codes() {
        let out = Command::shell("exit 3").run().unwrap();
        assert_eq!((out.status, out.exit_code()), (768, 3));
        let out = Command::shell("kill -9 $$").run().unwrap();
        assert_eq!(out.exit_code(), 137);
    }

    #[test]
    fn output_is_capped_and_the_child_still_finishes() {
        let out = Command::new("head")
            .args_bytes([b"-c".as_slice(), b"1000000", b"/dev/zero"])
            .unwrap()
            .stdout(Stdout::Capture(10))
            .run()
            .unwrap();
        assert_eq!(
            (out.stdout.len(), out.truncated, out.exit_code()),
            (10, true, 0)
        );
    }

    #[test]
    fn env_keep_passes_only_the_named_variables() {
        // PATH is set in any test environment; HOME is not passed on.
        let path = std::env::var("PATH").unwrap();
        let out = Command::new("/usr/bin/env")
            .env_keep(&["PATH", "EDGE_SPAWN_NO_SUCH_VARIABLE"])
            .stdout(Stdout::Capture(4096))
            .run()
            .unwrap();
        assert_eq!(out.stdout, format!("PATH={path}\n").into_bytes());
    }

    #[test]
    fn limited_runs_feed_stdin_and_capture_both_streams() {
        let out = Command::new("sh")
            .arg("-c")
            .arg("cat; echo oops >&2; exit 4")
            .env_clear()
            .run_limited(b"in\nput", std::time::Duration::from_secs(10), 1024)
            .unwrap();
        assert_eq!(
            (
                out.stdout.as_slice(),
                out.stderr.as_slice(),
                out.exit_code()
            ),
            (&b"in\nput"[..], &b"oops\n"[..], 4)
        );
    }

    #[test]
    fn timeouts_kill_the_whole_group() {
        let start = std::time::Instant::now();
        // The child's own child would keep the pipe open if it survived.
        let r = Command::new("sh")
            .arg("-c")
            .arg("sleep 30 & sleep 30")
            .run_limited(b"", std::time::Duration::from_millis(200), 1024);
        assert!(matches!(r, Err(LimitError::Timeout)), "{r:?}");
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
    }

    #[test]
    fn an_escaped_descendant_does_not_hold_the_call() {
        let start = std::time::Instant::now();
        let r = Command::new("sh")
            .arg("-c")
            .arg("setsid sleep 5 & sleep 30")
            .run_limited(b"", std::time::Duration::from_millis(200), 1024);
        assert!(matches!(r, Err(LimitError::Timeout)), "{r:?}");
        assert!(
            start.elapsed() < std::time::Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_program_that_ignores_stdin_does_not_block_the_writer() {
        let out = Command::new("true")
            .run_limited(
                &vec![b'x'; 1 << 20],
                std::time::Duration::from_secs(5),
                1024,
            )
            .unwrap();
        assert_eq!(out.exit_code(), 0);
    }

    #[test]
    fn output_past_the_cap_is_an_error() {
        let r = Command::new("head")
            .args_bytes([b"-c".as_slice(), b"100000", b"/dev/zero"])
            .unwrap()
            .run_limited(b"", std::time::Duration::from_secs(10), 1000);
        assert!(matches!(r, Err(LimitError::OutputTooLarge)), "{r:?}");
    }

    #[test]
    fn missing_programs_are_errors() {
        let e = Command::new("/nonexistent/prog").run().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(Command::new("x").args_bytes([b"a\0b".as_slice()]).is_err());
    }

    #[test]
    fn a_nul_byte_refuses_the_run_instead_of_cutting_the_string() {
        // `sh -c ""` would "succeed": the caller must see an error.
        let e = Command::shell("false\0; true").run().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = Command::new("/bin/echo\0x").run().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let r = Command::new("/bin/echo").arg("a\0b").run_limited(
            b"",
            std::time::Duration::from_secs(10),
            100,
        );
        assert!(
            matches!(&r, Err(LimitError::Spawn(e)) if e.kind() == io::ErrorKind::InvalidInput),
            "{r:?}"
        );
    }

    /// Set in the copy of this test binary that runs with stdout closed.
    const CLOSED_STDOUT: &str = "EDGE_SPAWN_TEST_CLOSED_STDOUT";

    #[test]
    fn pipes_are_wired_right_when_the_caller_has_stdout_closed() {
        if std::env::var_os(CLOSED_STDOUT).is_some() {
            // Closed here, not before exec: Rust's start-up would reopen
            // it on /dev/null. Fd 1 is then the lowest free one, so the
            // first pipe's end lands on it.
            // SAFETY: this process's own stdout, which it no longer uses.
            unsafe { libc::close(1) };
            let out = Command::new("/bin/cat")
                .run_limited(b"hello", std::time::Duration::from_secs(10), 100)
                .unwrap();
            assert_eq!((out.exit_code(), &out.stdout[..]), (0, &b"hello"[..]));
            return;
        }
        let mut again = std::process::Command::new(std::env::current_exe().unwrap());
        again
            .args([
                "--exact",
                "tests::pipes_are_wired_right_when_the_caller_has_stdout_closed",
                "--test-threads=1",
            ])
            .env(CLOSED_STDOUT, "1")
            .stderr(std::process::Stdio::piped());
        let out = again.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
