//! `sys_exec`, `sys_eval`, `sys_exec_fast`, `sys_eval_fast`.

use crate::MAX_OUTPUT;
use crate::abi::{Arg, UdfArgs, UdfInit, guard, guard_call, set_message, string_result};
use edge_spawn::{BoundError, Command, Stdout};
use std::ffi::{OsStr, c_char, c_longlong, c_ulong};
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;
use std::time::Duration;

/// The server's environment variable with the time limit of one call, in
/// milliseconds.
pub const TIMEOUT_ENV: &str = "EDGE_UDF_TIMEOUT_MS";
/// The time limit of one call when [`TIMEOUT_ENV`] is unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The time limit of one call: [`TIMEOUT_ENV`], read once, else
/// [`DEFAULT_TIMEOUT`] (an unreadable value is reported in the server's
/// error log and the default used).
pub fn timeout() -> Duration {
    static TIMEOUT: OnceLock<Duration> = OnceLock::new();
    *TIMEOUT.get_or_init(|| match std::env::var(TIMEOUT_ENV) {
        Err(_) => DEFAULT_TIMEOUT,
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(ms) if ms >= 1 => Duration::from_millis(ms),
            _ => {
                eprintln!(
                    "edge_udf: {TIMEOUT_ENV}={v:?} is not a number of milliseconds >= 1; using {} ms",
                    DEFAULT_TIMEOUT.as_millis()
                );
                DEFAULT_TIMEOUT
            }
        },
    })
}

/// The server's environment variables with the resource limits of each
/// program a call runs (and what it starts), set in the child before `exec`
/// with `no_new_privs`, as the sidecar's `child_*` settings: seconds of CPU
/// (`RLIMIT_CPU`), bytes of address space (`RLIMIT_AS`), the largest file
/// it may write (`RLIMIT_FSIZE`), and processes (`RLIMIT_NPROC`). The
/// server's own limits are not touched.
///
/// `RLIMIT_NPROC` counts every process and thread of the server's user,
/// the server's own threads (one per connection, by default) included:
/// a program's `fork` fails once they number `EDGE_UDF_PROCESSES`. The
/// default, 4096 as the sidecar's, leaves a server of a few hundred
/// connections thousands of processes for its programs while stopping a
/// fork bomb (the time limit kills only what stays in the call's group; a
/// bomb that left it would otherwise fill the pid space, or the service's
/// task limit, and the server could start no thread). A server with
/// thousands of connection threads needs it raised, or its programs' own
/// `fork`s fail (the program itself still starts). Not enforced when the
/// server runs as root.
pub const LIMIT_ENVS: [(&str, u64); 4] = [
    ("EDGE_UDF_CPU_SECONDS", 30),
    ("EDGE_UDF_ADDRESS_SPACE_BYTES", 4 << 30),
    ("EDGE_UDF_FILE_BYTES", 1 << 30),
    ("EDGE_UDF_PROCESSES", 4096),
];

/// The limits of [`LIMIT_ENVS`], read once (an unreadable value is
/// reported in the server's error log and its default used).
fn child_limits() -> edge_spawn::Limits {
    static LIMITS: OnceLock<edge_spawn::Limits> = OnceLock::new();
    *LIMITS.get_or_init(|| {
        let [cpu, space, file, processes] =
            LIMIT_ENVS.map(|(name, default)| match std::env::var(name) {
                Err(_) => default,
                Ok(v) => match v.trim().parse::<u64>() {
                    Ok(n) if n >= 1 => n,
                    _ => {
                        eprintln!("edge_udf: {name}={v:?} is not a number >= 1; using {default}");
                        default
                    }
                },
            });
        edge_spawn::Limits {
            cpu_seconds: cpu,
            address_space_bytes: space,
            processes,
            file_bytes: file,
        }
    })
}

/// The server's environment variable that turns on fault injection for
/// tests: with the value `panic`, a `_fast` call of [`PANIC_PROGRAM`]
/// panics inside the library (to show a panic does not take the server
/// down). Unset in production; no SQL can set it.
pub const FAULT_ENV: &str = "EDGE_UDF_FAULT_INJECTION";
/// The program name that panics when [`FAULT_ENV`] is `panic`.
pub const PANIC_PROGRAM: &[u8] = b"edge-udf-test-panic";

fn fault_injection() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(FAULT_ENV).is_ok_and(|v| v == "panic"))
}

/// What the server exports for its plugins, looked up once with `dlsym`
/// in the process the library is loaded into (absent in another server or
/// a test binary).
struct Server {
    /// `_current_thd()`: this thread's connection.
    current_thd: CurrentThd,
    /// `thd_kill_level(thd)`: 0 unless the statement was killed.
    kill_level: KillLevel,
    /// `thd_priv_user(thd, &len)`, `thd_priv_host(thd, &len)`: the account
    /// whose privileges apply (a `SQL SECURITY DEFINER` routine's definer
    /// while it runs).
    priv_user: PrivText,
    priv_host: PrivText,
}

type CurrentThd = unsafe extern "C" fn() -> *mut std::ffi::c_void;
type KillLevel = unsafe extern "C" fn(*const std::ffi::c_void) -> std::ffi::c_int;
type PrivText = unsafe extern "C" fn(*mut std::ffi::c_void, *mut usize) -> *const c_char;

fn server() -> Option<&'static Server> {
    static SERVER: OnceLock<Option<Server>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            // SAFETY: dlsym on the global namespace with NUL-terminated
            // names; the symbols, when present, have these C signatures
            // (MariaDB's sql_class.h/.cc and service_kill_statement.h).
            unsafe {
                let find = |name: &std::ffi::CStr| {
                    let p = libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr());
                    (!p.is_null()).then_some(p)
                };
                Some(Server {
                    current_thd: std::mem::transmute::<*mut libc::c_void, CurrentThd>(find(
                        c"_current_thd",
                    )?),
                    kill_level: std::mem::transmute::<*mut libc::c_void, KillLevel>(find(
                        c"thd_kill_level",
                    )?),
                    priv_user: std::mem::transmute::<*mut libc::c_void, PrivText>(find(
                        c"thd_priv_user",
                    )?),
                    priv_host: std::mem::transmute::<*mut libc::c_void, PrivText>(find(
                        c"thd_priv_host",
                    )?),
                })
            }
        })
        .as_ref()
}

/// Whether the statement running in this thread was killed (`KILL QUERY`,
/// `KILL CONNECTION`, `max_statement_time`).
///
/// The UDF interface passes no connection handle and has no kill
/// callback; the server's exported `_current_thd()` and
/// `thd_kill_level(thd)` tell. Without them (another server), only the
/// time limit bounds a call.
fn statement_killed() -> bool {
    let Some(server) = server() else {
        return false;
    };
    // SAFETY: called on the server's own connection thread, as its
    // storage engines do.
    unsafe {
        let thd = (server.current_thd)();
        !thd.is_null() && (server.kill_level)(thd) != 0
    }
}

/// The server's environment variable listing the accounts that may call
/// the process functions: `user@host` as the account is declared (the
/// host part as in `CREATE USER`, `%` included), separated by commas.
/// Unset: every account (MariaDB itself has no privilege for calling a
/// UDF). Empty: none.
pub const USERS_ENV: &str = "EDGE_UDF_PROCESS_USERS";

/// The account whose privileges apply to this statement, `user@host`.
fn current_account() -> Option<String> {
    let server = server()?;
    let text = |f: PrivText, thd| {
        let mut len = 0usize;
        // SAFETY: the server's accessor on its own connection; the bytes
        // live as long as the connection's security context.
        unsafe {
            let p = f(thd, &mut len);
            (!p.is_null()).then(|| {
                String::from_utf8_lossy(std::slice::from_raw_parts(p.cast(), len)).into_owned()
            })
        }
    };
    // SAFETY: on the server's connection thread.
    let thd = unsafe { (server.current_thd)() };
    if thd.is_null() {
        return None;
    }
    Some(format!(
        "{}@{}",
        text(server.priv_user, thd)?,
        text(server.priv_host, thd)?
    ))
}

/// Refuses the statement unless [`USERS_ENV`] is unset or lists the
/// account whose privileges apply.
fn check_account(function: &str) -> Result<(), String> {
    static ALLOWED: OnceLock<Option<Vec<String>>> = OnceLock::new();
    let allowed = ALLOWED.get_or_init(|| {
        std::env::var(USERS_ENV).ok().map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(String::from)
                .collect()
        })
    });
    let Some(allowed) = allowed else {
        return Ok(());
    };
    match current_account() {
        Some(account) if allowed.contains(&account) => Ok(()),
        // The server cuts an init message at 80 characters: the setting
        // first, the account after.
        Some(account) => {
            eprintln!("edge_udf: {function} refused to account {account}: not in {USERS_ENV}");
            Err(format!("{USERS_ENV} does not list {account}"))
        }
        None => Err(format!("{USERS_ENV} is set; the account is unknown")),
    }
}

/// Runs `cmd` within [`timeout`], stopping when the statement is killed;
/// either way its process group is killed, and the server's error log
/// says why.
fn bounded(cmd: &Command, what: &str) -> std::io::Result<edge_spawn::Output> {
    let limit = timeout();
    cmd.clone()
        .limits(child_limits())
        .run_bounded(limit, &statement_killed)
        .map_err(|e| match e {
            BoundError::Spawn(e) => e,
            BoundError::Timeout => {
                eprintln!(
                    "edge_udf: {what} ran past {} ms ({TIMEOUT_ENV}); its process group was killed",
                    limit.as_millis()
                );
                std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out")
            }
            BoundError::Interrupted => {
                std::io::Error::new(std::io::ErrorKind::Interrupted, "statement killed")
            }
        })
}

/// Per-statement state of the eval functions: the result buffer, reused
/// row after row and freed at deinit.
struct EvalState {
    out: Vec<u8>,
}

fn init_strings(
    args: &mut UdfArgs,
    message: *mut c_char,
    exact: Option<usize>,
    usage: &str,
) -> bool {
    let ok = match exact {
        Some(n) => args.len() == n,
        None => !args.is_empty(),
    };
    if !ok {
        // SAFETY: the server's message buffer.
        unsafe { set_message(message, usage) };
        return true;
    }
    for i in 0..args.len() {
        // SAFETY: during init, i < arg_count.
        unsafe { args.coerce_to_string(i) };
    }
    false
}

/// The argument bytes, or `None` if any is NULL.
fn strings(args: &UdfArgs) -> Option<Vec<&[u8]>> {
    (0..args.len())
        // SAFETY: during a call, i < arg_count.
        .map(|i| match unsafe { args.get(i) } {
            Arg::Bytes(_, b) => Some(b),
            _ => None,
        })
        .collect()
}

/// The program of a `_fast` call. It gets the server's `PATH` and no other
/// variable: the server's environment (key file paths, credentials,
/// `LD_*`) is not the program's business, and without `LANG`/`LC_*` it
/// runs in the C locale, so its output does not change with the server's
/// locale and it skips loading one (a third of a coreutils program's
/// start-up here under `C.UTF-8`). A program that wants a locale says so:
/// `sys_eval_fast('env', 'LANG=C.UTF-8', 'ls', dir)`. The shell pair
/// (`sys_exec`, `sys_eval`) keeps the whole environment, as
/// lib_mysqludf_sys does: scripts written for it may rely on it.
fn fast_command(argv: &[&[u8]]) -> std::io::Result<Command> {
    if argv[0] == PANIC_PROGRAM && fault_injection() {
        panic!("edge_udf: a panic asked for by {FAULT_ENV}=panic");
    }
    Ok(Command::new(OsStr::from_bytes(argv[0]))
        .args_bytes(argv[1..].iter().copied())?
        .env_keep(&["PATH"]))
}

macro_rules! int_udf {
    ($name:ident, $init:ident, $deinit:ident, $exact:expr, $usage:expr, $run:expr) => {
        /// # Safety
        /// Called by the server with its own `UDF_INIT`/`UDF_ARGS`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $init(
            initid: *mut UdfInit,
            args: *mut UdfArgs,
            message: *mut c_char,
        ) -> c_char {
            guard(1, "init", message, || {
                // SAFETY: valid for the duration of the call.
                let (initid, args) = unsafe { (&mut *initid, &mut *args) };
                initid.maybe_null = 1;
                // Runs a program: never folded as a constant.
                initid.const_item = 0;
                if init_strings(args, message, $exact, $usage) {
                    return 1;
                }
                if let Err(refused) = check_account(stringify!($name)) {
                    // SAFETY: the server's message buffer.
                    unsafe { set_message(message, &refused) };
                    return 1;
                }
                0
            })
        }

        /// # Safety
        /// Called by the server with its own `UDF_INIT`/`UDF_ARGS`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            _initid: *mut UdfInit,
            args: *mut UdfArgs,
            is_null: *mut c_char,
            error: *mut c_char,
        ) -> c_longlong {
            let failed = || {
                // SAFETY: the server's error flag.
                unsafe { *error = 1 };
                0
            };
            guard_call(failed, || {
                // SAFETY: valid for the duration of the call.
                let args = unsafe { &*args };
                let Some(argv) = strings(args) else {
                    unsafe { *is_null = 1 };
                    return 0;
                };
                let run: fn(&[&[u8]]) -> std::io::Result<i64> = $run;
                // A failure is this row's NULL. (Not `*error`: MariaDB would
                // then return NULL for every later row of the statement.)
                // A killed statement is an error: it ends anyway.
                match run(&argv) {
                    Ok(v) => v,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                        unsafe { *error = 1 };
                        0
                    }
                    Err(_) => {
                        unsafe { *is_null = 1 };
                        0
                    }
                }
            })
        }

        /// # Safety
        /// Called by the server.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $deinit(_initid: *mut UdfInit) {}
    };
}

macro_rules! string_udf {
    ($name:ident, $init:ident, $deinit:ident, $exact:expr, $usage:expr, $run:expr) => {
        /// # Safety
        /// Called by the server with its own `UDF_INIT`/`UDF_ARGS`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $init(
            initid: *mut UdfInit,
            args: *mut UdfArgs,
            message: *mut c_char,
        ) -> c_char {
            guard(1, "init", message, || {
                // SAFETY: valid for the duration of the call.
                let (initid, args) = unsafe { (&mut *initid, &mut *args) };
                if init_strings(args, message, $exact, $usage) {
                    return 1;
                }
                if let Err(refused) = check_account(stringify!($name)) {
                    // SAFETY: the server's message buffer.
                    unsafe { set_message(message, &refused) };
                    return 1;
                }
                initid.maybe_null = 1;
                initid.const_item = 0;
                initid.max_length = MAX_OUTPUT as c_ulong;
                initid.ptr = Box::into_raw(Box::new(EvalState { out: Vec::new() })) as *mut c_char;
                0
            })
        }

        /// # Safety
        /// Called by the server with its own `UDF_INIT`/`UDF_ARGS`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            initid: *mut UdfInit,
            args: *mut UdfArgs,
            _result: *mut c_char,
            length: *mut c_ulong,
            is_null: *mut c_char,
            error: *mut c_char,
        ) -> *mut c_char {
            let failed = || {
                // SAFETY: the server's error flag.
                unsafe { *error = 1 };
                std::ptr::null_mut()
            };
            guard_call(failed, || {
                // SAFETY: valid for the duration of the call; ptr is ours.
                let (initid, args) = unsafe { (&mut *initid, &*args) };
                let state = unsafe { &mut *(initid.ptr as *mut EvalState) };
                let Some(argv) = strings(args) else {
                    unsafe { *is_null = 1 };
                    return std::ptr::null_mut();
                };
                let run: fn(&[&[u8]]) -> std::io::Result<Vec<u8>> = $run;
                // A failure is this row's NULL (see the integer functions).
                match run(&argv) {
                    // SAFETY: the server's length slot.
                    Ok(out) => unsafe { string_result(&mut state.out, out, length) },
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                        unsafe { *error = 1 };
                        std::ptr::null_mut()
                    }
                    Err(_) => {
                        unsafe { *is_null = 1 };
                        std::ptr::null_mut()
                    }
                }
            })
        }

        /// # Safety
        /// Called by the server once per statement after the last row.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $deinit(initid: *mut UdfInit) {
            guard_call(
                || (),
                || {
                    // SAFETY: ptr was set by init (or is null if init failed).
                    let initid = unsafe { &mut *initid };
                    if !initid.ptr.is_null() {
                        drop(unsafe { Box::from_raw(initid.ptr as *mut EvalState) });
                        initid.ptr = std::ptr::null_mut();
                    }
                },
            )
        }
    };
}

int_udf!(
    sys_exec,
    sys_exec_init,
    sys_exec_deinit,
    Some(1),
    "sys_exec(command): one argument, the shell command line; returns its wait status",
    |argv| Ok(bounded(&Command::shell(OsStr::from_bytes(argv[0])), "sys_exec")?.status as i64)
);

string_udf!(
    sys_eval,
    sys_eval_init,
    sys_eval_deinit,
    Some(1),
    "sys_eval(command): one argument, the shell command line; returns its standard output",
    |argv| Ok(bounded(
        &Command::shell(OsStr::from_bytes(argv[0])).stdout(Stdout::Capture(MAX_OUTPUT)),
        "sys_eval"
    )?
    .stdout)
);

int_udf!(
    sys_exec_fast,
    sys_exec_fast_init,
    sys_exec_fast_deinit,
    None,
    "sys_exec_fast(program, arg...): the program (looked up in PATH) and its arguments, passed verbatim without a shell; returns the exit code",
    |argv| Ok(
        bounded(&fast_command(argv)?.stdout(Stdout::Null), "sys_exec_fast")?.exit_code() as i64
    )
);

string_udf!(
    sys_eval_fast,
    sys_eval_fast_init,
    sys_eval_fast_deinit,
    None,
    "sys_eval_fast(program, arg...): the program (looked up in PATH) and its arguments, passed verbatim without a shell; returns its standard output",
    |argv| Ok(bounded(
        &fast_command(argv)?.stdout(Stdout::Capture(MAX_OUTPUT)),
        "sys_eval_fast"
    )?
    .stdout)
);
