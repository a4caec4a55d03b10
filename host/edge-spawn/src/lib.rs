//! Running a program the cheap way: `posix_spawn(p)` (glibc spawns with
//! `clone(CLONE_VM | CLONE_VFORK)`, no copy of the parent's page tables),
//! no shell unless asked for, stdin from `/dev/null`, stdout captured through
//! a pipe up to a cap (the rest is drained and dropped, so the child never
//! blocks on a full pipe), the signal mask and dispositions reset (database
//! servers block signals in their threads; children must not inherit that),
//! and no descriptor but 0, 1 and 2 passed on (`closefrom`: what the parent
//! opened without `O_CLOEXEC` is not the program's).
//!
//! [`Command::run_limited`] (the sidecar) adds pipes for every stream, a
//! time limit and an output cap that kill the run's process group and, with
//! [`Command::limits`], resource limits and `no_new_privs` set in the child
//! before `exec`. [`Command::run_bounded`] (the UDFs) is the one-thread
//! variant: a time limit and a caller's "stop" for a plain run.
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
    /// Limited runs: stdin and stderr through pipes, a session (and process
    /// group) of its own.
    piped: bool,
    /// (fd in the parent, fd in the child) pairs to `dup2`.
    extra_dups: Vec<(libc::c_int, libc::c_int)>,
    /// The program or an argument held a NUL byte: running is refused
    /// (as `std::process::Command` does) rather than passing a cut or
    /// empty string, which would run something else.
    saw_nul: bool,
    /// A session and process group of its own (sid = pgid = pid), so it
    /// can be killed whole and nothing of another run can join its group.
    own_group: bool,
    /// Resource limits and `no_new_privs` for limited runs.
    limits: Option<Limits>,
}

/// What a child of [`Command::run_limited`] may use, set (soft and hard)
/// in the child before `exec`, so the program and all it starts are bound
/// from their first instruction; the child also gets `no_new_privs` (no
/// set-uid or file-capability gain through `exec`). Zero leaves a limit as
/// the parent has it. Whatever it is, the child's soft descriptor limit
/// is at most 1024 (what programs using `select` expect), its hard one
/// the parent's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// `RLIMIT_CPU`, seconds of CPU time (SIGKILL past it).
    pub cpu_seconds: u64,
    /// `RLIMIT_AS`, bytes of address space.
    pub address_space_bytes: u64,
    /// `RLIMIT_NPROC`: processes and threads of the user (all of them, not
    /// only this child's), past which its `fork`s fail. Not enforced for
    /// root.
    pub processes: u64,
    /// `RLIMIT_FSIZE`, bytes: the largest file it may write.
    pub file_bytes: u64,
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

/// `/dev/null` open for reading, close-on-exec, on a descriptor above 2
/// (for the same reason as [`pipe_above_stdio`]).
fn dev_null_above_stdio() -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let null = OwnedFd::from(std::fs::File::open("/dev/null")?);
    if null.as_raw_fd() > 2 {
        return Ok(null);
    }
    // SAFETY: duplicating our own descriptor; the copy is owned below.
    let moved = unsafe { libc::fcntl(null.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if moved < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(moved) })
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
            own_group: false,
            limits: None,
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

    /// Limits for [`Command::run_limited`]: the child is then started with
    /// `clone(CLONE_VM | CLONE_VFORK)` and code of ours (its limits,
    /// `no_new_privs` and closing descriptors must happen in the child
    /// before `exec`, which `posix_spawn` cannot do); the program must be a
    /// path or found in `PATH` before the clone.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
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
        if cmd.piped || cmd.own_group {
            // A session and so a group of its own (sid = pgid = pid), so a
            // timeout kills it whole (see `child`).
            flags |= libc::POSIX_SPAWN_SETSID as libc::c_int;
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
        // Nothing but 0, 1 and 2 reaches the program: a descriptor the
        // parent opened without O_CLOEXEC (a database server's table files
        // and client sockets, a supervisor's leftovers) is not its business.
        let r = libc::posix_spawn_file_actions_addclosefrom_np(&mut actions.0, 3);
        if r != 0 {
            if pipe_fds[0] >= 0 {
                libc::close(pipe_fds[0]);
                libc::close(pipe_fds[1]);
            }
            return Err(io::Error::from_raw_os_error(r));
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

/// The program's path for `execve`: as given if it holds a '/', else the
/// first executable file of that name in `PATH` (looked up before the
/// clone: `execvp` is not async-signal-safe).
fn resolve(cmd: &Command) -> io::Result<CString> {
    let name = cmd.program.as_bytes();
    if !cmd.search_path || name.contains(&b'/') {
        return Ok(cmd.program.clone());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(OsStr::from_bytes(name));
        let c = cstring(candidate.as_os_str().as_bytes(), "the program")?;
        // SAFETY: access on a NUL-terminated path.
        if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 {
            return Ok(c);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        "the program is not in PATH",
    ))
}

/// Spawns a piped, limited command the way glibc's `posix_spawn` does,
/// with `clone(CLONE_VM | CLONE_VFORK)`: the child borrows the parent's
/// memory (no copy of its page tables: a `fork` of a database server
/// copied them on every call, ~3 ms for MariaDB) on a stack of its own,
/// and the calling thread waits until it has `exec`ed or failed. In the
/// child: its own session (and process group), the pipes on 0, 1 and 2 (a
/// bounded run: `/dev/null` on 0, stdout's pipe on 1), every other
/// descriptor closed (`close_range`), the limits, `no_new_privs`, default
/// signal handling, then `execve`. Sharing memory, the child makes only
/// system calls (no allocation, no lock) and writes nothing of the
/// parent's but `ChildPlan::errno` and the suspended calling thread's own
/// `errno` (libc's wrappers set it); it runs no handler of the parent's:
/// every signal it can be sent is blocked across the clone (glibc keeps
/// its two internal ones, which only its own threads are sent) and the
/// child resets the dispositions before unblocking them.
fn spawn_limited(cmd: &Command, limits: &Limits) -> io::Result<(libc::pid_t, std::fs::File)> {
    use std::os::fd::FromRawFd;
    if cmd.saw_nul {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the program or an argument contains a NUL byte",
        ));
    }
    let program = resolve(cmd)?;
    let mut argv: Vec<*const libc::c_char> = cmd.args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let env_storage: Vec<*const libc::c_char>;
    let envp: *const *const libc::c_char = match &cmd.env {
        Some(vars) => {
            env_storage = vars
                .iter()
                .map(|v| v.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect();
            env_storage.as_ptr()
        }
        None => environ() as *const *const libc::c_char,
    };
    // Stdin of a run that is not piped (a bounded one): `/dev/null`, as
    // `posix_spawn` gives it, not the caller's fd 0 (a database server's).
    let dev_null = if cmd.piped {
        None
    } else {
        Some(dev_null_above_stdio()?)
    };
    let stdout = pipe_above_stdio()?;
    let mut dups = [(stdout[1], 1), (-1, -1), (-1, -1)];
    for (i, d) in cmd.extra_dups.iter().take(2).enumerate() {
        dups[i + 1] = *d;
    }
    if let Some(null) = &dev_null {
        use std::os::fd::AsRawFd;
        dups[2] = (null.as_raw_fd(), 0);
    }
    let mut plan = ChildPlan {
        program: program.as_ptr(),
        argv: argv.as_ptr(),
        envp,
        dups,
        rlimits: [
            (libc::RLIMIT_CPU, limits.cpu_seconds),
            (libc::RLIMIT_AS, limits.address_space_bytes),
            (libc::RLIMIT_NPROC, limits.processes),
            (libc::RLIMIT_FSIZE, limits.file_bytes),
        ],
        errno: 0,
    };
    let spawned = ChildStack::new().and_then(|stack| {
        // SAFETY: every signal blocked around the clone (restored after),
        // so no handler of the parent's runs on the child's stack or in
        // its shared memory; `child` gets `plan`, alive until the clone
        // returns, which with CLONE_VFORK is after the child's exec or exit.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            let pid = libc::clone(
                child,
                stack.top(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&raw mut plan).cast(),
            );
            let e = io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            if pid < 0 { Err(e) } else { Ok(pid) }
        }
    });
    // SAFETY: closing our copy of the child's end.
    unsafe { libc::close(stdout[1]) };
    drop(dev_null);
    let pid = match spawned {
        Ok(pid) => pid,
        Err(e) => {
            // SAFETY: our own descriptor.
            unsafe { libc::close(stdout[0]) };
            return Err(e);
        }
    };
    // SAFETY: the child has exec'ed or exited: nothing writes it any more.
    let errno = unsafe { std::ptr::read_volatile(&raw const plan.errno) };
    if errno != 0 {
        let _ = wait(pid);
        // SAFETY: our own descriptor.
        unsafe { libc::close(stdout[0]) };
        return Err(io::Error::from_raw_os_error(errno));
    }
    // SAFETY: the read end is ours.
    Ok((pid, unsafe { std::fs::File::from_raw_fd(stdout[0]) }))
}

/// What the cloned child needs, prepared by the parent (pointers into
/// memory it keeps alive across the clone), and where the child leaves the
/// errno of the step that failed (0: it exec'ed).
struct ChildPlan {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    dups: [(libc::c_int, libc::c_int); 3],
    rlimits: [(libc::__rlimit_resource_t, u64); 4],
    errno: libc::c_int,
}

/// The cloned child's stack: its own mapping with a guard page below, so
/// running off it faults instead of writing into the parent's memory.
struct ChildStack {
    base: *mut libc::c_void,
    /// The mapping's length: the stack and its guard page.
    len: usize,
}

impl ChildStack {
    /// Ample for [`child`]'s few frames of system calls.
    const SIZE: usize = 64 << 10;

    fn new() -> io::Result<Self> {
        // SAFETY: sysconf, then a fresh anonymous mapping, unmapped on drop.
        unsafe {
            // The guard is one page of the kernel's size (64 KiB on some
            // arm64 and ppc64 kernels), below a stack of SIZE.
            let page = usize::try_from(libc::sysconf(libc::_SC_PAGESIZE)).unwrap_or(4096);
            let len = Self::SIZE + page;
            let base = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let stack = Self { base, len };
            if libc::mprotect(base, page, libc::PROT_NONE) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(stack)
        }
    }

    /// The stack's top (it grows down), 16-byte aligned as the ABI wants.
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of our own mapping (page-aligned).
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: our own mapping; the child no longer runs on it.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// The cloned child: see [`spawn_limited`]. Async-signal-safe calls only,
/// on the [`ChildPlan`] `plan` points to; never returns.
extern "C" fn child(plan: *mut libc::c_void) -> libc::c_int {
    // SAFETY: system calls on what the parent prepared; `plan` is the
    // parent's `ChildPlan`, alive until this child execs or exits.
    unsafe {
        let plan = plan.cast::<ChildPlan>();
        let fail = || -> ! {
            std::ptr::write_volatile(&raw mut (*plan).errno, *libc::__errno_location());
            libc::_exit(127)
        };
        // Dispositions first, while every signal is still blocked: a
        // handler of the parent's must never run here, in its memory.
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        for sig in 1..65 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::sigaction(sig, &action, std::ptr::null_mut());
            }
        }
        // A session of its own, not only a group: `setpgid` moves a
        // process only into a group of its own session, so no descendant
        // of this run can join another run's group (and live on there
        // past its own run's end), nor another run's descendant this one.
        if libc::setsid() < 0 {
            fail();
        }
        for &(from, to) in &(*plan).dups {
            if from >= 0 && libc::dup2(from, to) < 0 {
                fail();
            }
        }
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
            // Before Linux 5.9: close them one by one.
            let mut max: libc::rlimit = std::mem::zeroed();
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut max);
            let top = max.rlim_cur.min(1 << 20) as libc::c_int;
            for fd in 3..top {
                libc::close(fd);
            }
        }
        for &(resource, value) in &(*plan).rlimits {
            if value == 0 {
                continue;
            }
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            if libc::setrlimit(resource, &limit) != 0 {
                fail();
            }
        }
        // The descriptor limit a program expects (`select` cannot take
        // descriptors past 1023), whatever the parent raised its own to
        // (`edge serve` raises it to the hard limit); the hard limit stays.
        let mut nofile: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut nofile) == 0 && nofile.rlim_cur > 1024 {
            nofile.rlim_cur = 1024;
            libc::setrlimit(libc::RLIMIT_NOFILE, &nofile);
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            fail();
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execve((*plan).program, (*plan).argv, (*plan).envp);
        fail()
    }
}

/// Pids of the running group leaders of [`Command::run_limited`] (and
/// [`Command::run_bounded`]), from before their spawn returns until they
/// are reaped: [`reap_orphans`] leaves them and their groups alone.
static LEADERS: std::sync::Mutex<Vec<libc::pid_t>> = std::sync::Mutex::new(Vec::new());

/// Whether leaders are tracked (see [`track_leaders`]): only a process
/// that sweeps orphans needs it, and the lock held across each spawn would
/// otherwise serialise the spawns of a server's connection threads.
static TRACKING: AtomicBool = AtomicBool::new(false);

fn leaders() -> std::sync::MutexGuard<'static, Vec<libc::pid_t>> {
    LEADERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The leaders' lock, held across a spawn, if leaders are tracked.
fn registering() -> Option<std::sync::MutexGuard<'static, Vec<libc::pid_t>>> {
    TRACKING.load(Relaxed).then(leaders)
}

/// Starts tracking run leaders, so that [`reap_orphans`] can tell them and
/// their groups from orphans. Call it before the first run.
pub fn track_leaders() {
    TRACKING.store(true, Relaxed);
}

/// Reaps the run leader `pid` and forgets it.
fn reap_leader(pid: libc::pid_t) -> io::Result<i32> {
    let status = wait(pid);
    if TRACKING.load(Relaxed) {
        leaders().retain(|&p| p != pid);
    }
    status
}

/// For a child subreaper (`PR_SET_CHILD_SUBREAPER`, as the sidecar is):
/// kills and reaps this process's children that are neither a running
/// leader of [`Command::run_limited`] nor in such a leader's process
/// group. Those are descendants whose parent died and who were reparented
/// here: either their run is over (its group was killed, and they had left
/// it with `setsid` or `setpgid`) or they left their run's group; nothing
/// a run starts outlives it. Each run is a session of its own, and
/// `setpgid` joins only a group of the caller's session, so a process in
/// a running leader's group is that leader's own run's descendant: none
/// can shelter in another (longer) run's group. Returns how many were killed or reaped.
/// Does nothing unless [`track_leaders`] was called (before any run).
pub fn reap_orphans() -> usize {
    if !TRACKING.load(Relaxed) {
        return 0;
    }
    let leaders = leaders();
    let mut children = Vec::new();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
                children.extend(
                    list.split_ascii_whitespace()
                        .filter_map(|p| p.parse::<libc::pid_t>().ok()),
                );
            }
        }
    }
    let mut n = 0;
    for pid in children {
        if leaders.contains(&pid) {
            continue;
        }
        // SAFETY: getpgid on a child of ours (not reaped: its pid is ours).
        let group = unsafe { libc::getpgid(pid) };
        if group > 0 && leaders.contains(&group) {
            continue;
        }
        let mut status = 0;
        // SAFETY: signalling and reaping our own child, which nobody else
        // waits for (it is no leader), so its pid cannot have been reused.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, &mut status, libc::WNOHANG);
        }
        n += 1;
    }
    n
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
    /// to `max_output` bytes each, in a session and process group of its
    /// own (so no other run's descendant can join the group) that is
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
        let spawned = {
            // Registered before any orphan sweep can see it as a child.
            let mut leaders = registering();
            let spawned = match &cmd.limits {
                Some(limits) => spawn_limited(&cmd, limits).map(|(pid, out)| (pid, Some(out))),
                None => spawn(&cmd),
            };
            if let (Ok((pid, _)), Some(leaders)) = (&spawned, &mut leaders) {
                leaders.push(*pid);
            }
            spawned
        };
        drop(stdin_r);
        drop(stderr_w);
        let (pid, stdout) = spawned.map_err(LimitError::Spawn)?;
        let Some(stdout) = stdout else {
            unreachable!("a limited run captures stdout")
        };
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
                    let _ = reap_leader(pid);
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
            Ok((reap_leader(pid).unwrap_or(-1), timed_out, out, err))
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

/// Why a bounded run failed.
#[derive(Debug)]
pub enum BoundError {
    /// The program could not be started.
    Spawn(io::Error),
    /// It ran past its time; its process group was killed.
    Timeout,
    /// The caller gave up (`interrupted` said so); its process group was
    /// killed.
    Interrupted,
}

impl std::fmt::Display for BoundError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Spawn(e) => write!(f, "could not start the program: {e}"),
            Self::Timeout => write!(f, "timed out; its process group was killed"),
            Self::Interrupted => write!(f, "interrupted; its process group was killed"),
        }
    }
}

impl Command {
    /// Runs the program as [`Command::run`] does (stdin from `/dev/null`,
    /// stdout as set), in one thread, in a session and process group of
    /// its own that is killed (SIGKILL) when the program exits (so a
    /// background job holding stdout open cannot hold the call), when
    /// `timeout` passes, or when `interrupted()` (asked every 20 ms at
    /// most) returns true. The call
    /// returns within about `timeout` plus 200 ms whatever the program
    /// does.
    pub fn run_bounded(
        &self,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Output, BoundError> {
        use std::os::fd::AsRawFd;
        let deadline = Instant::now() + timeout;
        let mut cmd = self.clone();
        cmd.own_group = true;
        let spawned = {
            let mut leaders = registering();
            let spawned = match &cmd.limits {
                // Limits are set between clone and exec (and the child gets
                // its own group there too).
                Some(limits) => spawn_limited(&cmd, limits).map(|(pid, out)| (pid, Some(out))),
                None => cmd.spawn(),
            };
            if let (Ok((pid, _)), Some(leaders)) = (&spawned, &mut leaders) {
                leaders.push(*pid);
            }
            spawned
        };
        let (pid, mut pipe) = spawned.map_err(BoundError::Spawn)?;
        let cap = match self.stdout {
            Stdout::Capture(cap) => cap,
            _ => 0,
        };
        if let Some(p) = &pipe {
            // SAFETY: setting O_NONBLOCK on our own pipe end.
            unsafe {
                let fl = libc::fcntl(p.as_raw_fd(), libc::F_GETFL);
                libc::fcntl(p.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
            }
        }
        // SAFETY: pidfd_open on our own child, not reaped yet; closed below.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
        let mut out = Vec::new();
        let mut truncated = false;
        let mut buf = [0u8; 16 * 1024];
        let mut exited_at: Option<Instant> = None;
        let mut failure = None;
        loop {
            let mut fds = Vec::with_capacity(2);
            if let Some(p) = &pipe {
                fds.push(libc::pollfd {
                    fd: p.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            if exited_at.is_none() && pidfd >= 0 {
                fds.push(libc::pollfd {
                    fd: pidfd,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            let now = Instant::now();
            let until = match exited_at {
                Some(at) => at + GRACE,
                None => deadline,
            };
            let wait_ms = until
                .saturating_duration_since(now)
                .as_millis()
                .min(TICK_MS as u128) as libc::c_int;
            // SAFETY: pollfds on the stack.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait_ms) };
            if let Some(p) = &mut pipe
                && read_burst(p, &mut buf, &mut out, cap, &mut truncated)
            {
                pipe = None;
            }
            if exited_at.is_none() && exited(pid, pidfd) {
                // The leader is a zombie (not reaped), so its group id is
                // still ours: whatever it left in the group goes too.
                // SAFETY: signalling the group we created.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
                exited_at = Some(Instant::now());
            }
            match exited_at {
                Some(at) if pipe.is_none() || at.elapsed() >= GRACE => break,
                Some(_) => {}
                None if Instant::now() >= deadline => {
                    failure = Some(BoundError::Timeout);
                    break;
                }
                None if interrupted() => {
                    failure = Some(BoundError::Interrupted);
                    break;
                }
                None => {}
            }
        }
        if failure.is_some() {
            // SAFETY: signalling the group we created; its leader is not
            // reaped yet.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        if pidfd >= 0 {
            // SAFETY: closing the fd opened above.
            unsafe { libc::close(pidfd) };
        }
        drop(pipe);
        let status = reap_leader(pid).map_err(BoundError::Spawn)?;
        if let Some(f) = failure {
            return Err(f);
        }
        Ok(Output {
            status,
            stdout: out,
            truncated,
        })
    }
}

/// Reads what `pipe` (non-blocking) has, keeping at most `cap` bytes in
/// `out` (`truncated` past it), for one tick at most: writers that keep
/// the pipe full must not keep the caller from its deadline and its stop.
/// True at EOF.
fn read_burst(
    pipe: &mut impl io::Read,
    buf: &mut [u8],
    out: &mut Vec<u8>,
    cap: usize,
    truncated: &mut bool,
) -> bool {
    let until = Instant::now() + Duration::from_millis(TICK_MS as u64);
    loop {
        match pipe.read(buf) {
            Ok(0) => return true,
            Ok(n) => {
                let room = cap.saturating_sub(out.len());
                *truncated |= n > room;
                out.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
        if Instant::now() >= until {
            return false;
        }
    }
}

/// Whether `pid` (our child, not reaped) has exited, without reaping it.
fn exited(pid: libc::pid_t, pidfd: libc::c_int) -> bool {
    if pidfd >= 0 {
        let mut pfd = libc::pollfd {
            fd: pidfd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack, no wait.
        return unsafe { libc::poll(&mut pfd, 1, 0) } > 0;
    }
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
    r == 0 && unsafe { info.si_pid() } == pid
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
    fn children_get_the_usual_descriptor_limit_whatever_the_parents() {
        // As `edge serve` does: the soft limit raised to the hard one.
        // SAFETY: getrlimit and setrlimit read and write the struct given.
        let hard = unsafe {
            let mut limit: libc::rlimit = std::mem::zeroed();
            assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
            limit.rlim_cur = limit.rlim_max;
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
            limit.rlim_max
        };
        let out = Command::new("sh")
            .arg("-c")
            .arg("ulimit -S -n; ulimit -H -n")
            .limits(Limits::default())
            .run_limited(b"", std::time::Duration::from_secs(10), 1024)
            .unwrap();
        let soft = hard.min(1024);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{soft}\n{hard}\n")
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

    /// A descriptor of this process without `O_CLOEXEC`, as a careless
    /// parent (or the server a library runs in) leaves them.
    fn leaky_fd() -> libc::c_int {
        // SAFETY: opening /dev/null; the fd is closed by the caller.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY) };
        assert!(fd > 2);
        fd
    }

    #[test]
    fn limited_children_get_limits_no_new_privs_and_no_other_descriptors() {
        let fd = leaky_fd();
        let limits = Limits {
            cpu_seconds: 7,
            address_space_bytes: 3 << 30,
            processes: 333,
            file_bytes: 5 << 20,
        };
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg("ls /proc/$$/fd; grep NoNewPrivs /proc/$$/status; cat /proc/$$/limits; ps -o sid= -p $$; ps -o pgid= -p $$; echo $$")
            .no_path_search()
            .limits(limits)
            .run_limited(b"", Duration::from_secs(10), 1 << 16)
            .unwrap();
        // SAFETY: our own fd.
        unsafe { libc::close(fd) };
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(&lines[..4], ["0", "1", "2", "NoNewPrivs:\t1"], "{text}");
        let limit = |name: &str| {
            let line = lines.iter().find(|l| l.starts_with(name)).unwrap();
            line.split_whitespace().rev().nth(2).unwrap().to_string()
        };
        assert_eq!(limit("Max cpu time"), "7");
        assert_eq!(limit("Max address space"), (3u64 << 30).to_string());
        assert_eq!(limit("Max processes"), "333");
        assert_eq!(limit("Max file size"), (5u64 << 20).to_string());
        let n = lines.len();
        assert_eq!(
            lines[n - 2].trim(),
            lines[n - 1],
            "a process group of its own"
        );
        assert_eq!(lines[n - 3].trim(), lines[n - 1], "a session of its own");
    }

    #[test]
    fn every_run_is_a_session_of_its_own() {
        // Spawned without limits (posix_spawn) as with them (clone): a run
        // in the caller's session could have its descendants join another
        // run's group there.
        let script = "ps -o sid=,pgid= -p $$; echo $$";
        let own = |stdout: &[u8]| {
            let text = String::from_utf8_lossy(stdout).into_owned();
            let words: Vec<&str> = text.split_whitespace().collect();
            assert_eq!(words.len(), 3, "{text}");
            assert!(words[0] == words[2] && words[1] == words[2], "{text}");
        };
        let never = || false;
        for limits in [None, Some(Limits::default())] {
            let mut cmd = Command::shell(script).stdout(Stdout::Capture(1024));
            if let Some(l) = limits {
                cmd = cmd.limits(l);
            }
            own(&cmd
                .run_bounded(Duration::from_secs(10), &never)
                .unwrap()
                .stdout);
            own(&cmd
                .run_limited(b"", Duration::from_secs(10), 1024)
                .unwrap()
                .stdout);
        }
    }

    #[test]
    fn plain_spawns_pass_no_descriptor_beyond_the_standard_three() {
        let fd = leaky_fd();
        let out = Command::shell("ls /proc/$$/fd")
            .stdout(Stdout::Capture(1024))
            .run()
            .unwrap();
        // SAFETY: our own fd.
        unsafe { libc::close(fd) };
        assert_eq!(String::from_utf8_lossy(&out.stdout), "0\n1\n2\n");
    }

    #[test]
    fn limited_exec_failures_are_errors() {
        let r = Command::new("/nonexistent/prog")
            .limits(Limits::default())
            .run_limited(b"", Duration::from_secs(10), 100);
        assert!(
            matches!(&r, Err(LimitError::Spawn(e)) if e.kind() == io::ErrorKind::NotFound),
            "{r:?}"
        );
        let out = Command::new("true")
            .limits(Limits::default())
            .run_limited(b"", Duration::from_secs(10), 100)
            .unwrap();
        assert_eq!(out.exit_code(), 0);
    }

    #[test]
    fn bounded_runs_end_at_exit_timeout_or_interruption() {
        let never = || false;
        let start = Instant::now();
        // The background job holds stdout open; it dies with its group.
        let out = Command::shell("sleep 60 & echo hi")
            .stdout(Stdout::Capture(100))
            .run_bounded(Duration::from_secs(20), &never)
            .unwrap();
        assert_eq!(out.stdout, b"hi\n");
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );

        let start = Instant::now();
        let r = Command::shell("sleep 60")
            .stdout(Stdout::Capture(100))
            .run_bounded(Duration::from_millis(300), &never);
        assert!(matches!(r, Err(BoundError::Timeout)), "{r:?}");
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );

        let start = Instant::now();
        let asked = std::cell::Cell::new(0);
        let stop = || {
            asked.set(asked.get() + 1);
            asked.get() > 5
        };
        let r = Command::new("sleep")
            .arg("60")
            .stdout(Stdout::Null)
            .run_bounded(Duration::from_secs(60), &stop);
        assert!(matches!(r, Err(BoundError::Interrupted)), "{r:?}");
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );

        let out = Command::shell("exit 3")
            .run_bounded(Duration::from_secs(10), &never)
            .unwrap();
        assert_eq!(out.exit_code(), 3);
    }

    #[test]
    fn writers_that_keep_the_pipe_full_do_not_hold_a_bounded_run() {
        // Four writers refill the pipe as fast as it is read: a reader that
        // reads until the pipe is empty before it looks at the time never
        // looks. With limits (the UDFs') and without.
        let flood = "for i in 1 2 3 4; do (while :; do cat /dev/zero; done) & done; wait";
        for limits in [Some(Limits::default()), None] {
            let mut cmd = Command::shell(flood).stdout(Stdout::Capture(1 << 20));
            if let Some(l) = limits {
                cmd = cmd.limits(l);
            }
            let start = Instant::now();
            let r = cmd.run_bounded(Duration::from_millis(300), &|| false);
            assert!(matches!(r, Err(BoundError::Timeout)), "{r:?}");
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{:?}",
                start.elapsed()
            );
            let start = Instant::now();
            let asked = std::cell::Cell::new(0);
            let stop = || {
                asked.set(asked.get() + 1);
                asked.get() > 5
            };
            let r = cmd.run_bounded(Duration::from_secs(600), &stop);
            assert!(matches!(r, Err(BoundError::Interrupted)), "{r:?}");
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{:?}",
                start.elapsed()
            );
        }
    }

    #[test]
    fn a_source_that_never_runs_dry_does_not_hold_a_read_burst() {
        // /dev/zero never says "would block", as a pipe that writers keep
        // full may not: the burst must end on its own.
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut zero = std::fs::File::open("/dev/zero").unwrap();
            let (mut out, mut truncated) = (Vec::new(), false);
            let eof = read_burst(
                &mut zero,
                &mut [0; 16 * 1024],
                &mut out,
                100,
                &mut truncated,
            );
            let _ = done.send((eof, out.len(), truncated));
        });
        let r = finished.recv_timeout(Duration::from_secs(10));
        assert_eq!(r, Ok((false, 100, true)));
    }

    /// Set in the copy of this test binary that runs with a file on stdin.
    const FILE_STDIN: &str = "EDGE_SPAWN_TEST_FILE_STDIN";

    #[test]
    fn bounded_runs_read_dev_null_not_the_callers_stdin() {
        if std::env::var_os(FILE_STDIN).is_some() {
            // A database server's fd 0 is whatever it was started with:
            // the program must not read (or hold) it, with limits (clone)
            // or without (posix_spawn).
            for limits in [None, Some(Limits::default())] {
                let mut cmd = Command::new("readlink")
                    .arg("/proc/self/fd/0")
                    .stdout(Stdout::Capture(1024));
                if let Some(l) = limits {
                    cmd = cmd.limits(l);
                }
                let out = cmd.run_bounded(Duration::from_secs(10), &|| false).unwrap();
                assert_eq!(
                    String::from_utf8_lossy(&out.stdout),
                    "/dev/null\n",
                    "limits: {limits:?}"
                );
            }
            return;
        }
        let stdin = std::fs::File::open(std::env::current_exe().unwrap()).unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "tests::bounded_runs_read_dev_null_not_the_callers_stdin",
                "--test-threads=1",
                "--nocapture",
            ])
            .env(FILE_STDIN, "1")
            .stdin(stdin)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
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
