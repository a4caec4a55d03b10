//! `sys_exec`, `sys_eval`, `sys_exec_fast`, `sys_eval_fast`.

use crate::MAX_OUTPUT;
use crate::abi::{Arg, UdfArgs, UdfInit, set_message, string_result};
use edge_spawn::{Command, Stdout};
use std::ffi::{OsStr, c_char, c_longlong, c_ulong};
use std::os::unix::ffi::OsStrExt;

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
            // SAFETY: valid for the duration of the call.
            let (initid, args) = unsafe { (&mut *initid, &mut *args) };
            initid.maybe_null = 1;
            // Runs a program: never folded as a constant.
            initid.const_item = 0;
            init_strings(args, message, $exact, $usage) as c_char
        }

        /// # Safety
        /// Called by the server with its own `UDF_INIT`/`UDF_ARGS`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            _initid: *mut UdfInit,
            args: *mut UdfArgs,
            is_null: *mut c_char,
            _error: *mut c_char,
        ) -> c_longlong {
            // SAFETY: valid for the duration of the call.
            let args = unsafe { &*args };
            let Some(argv) = strings(args) else {
                unsafe { *is_null = 1 };
                return 0;
            };
            let run: fn(&[&[u8]]) -> std::io::Result<i64> = $run;
            // A failure is this row's NULL. (Not `*error`: MariaDB would
            // then return NULL for every later row of the statement.)
            match run(&argv) {
                Ok(v) => v,
                Err(_) => {
                    unsafe { *is_null = 1 };
                    0
                }
            }
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
            // SAFETY: valid for the duration of the call.
            let (initid, args) = unsafe { (&mut *initid, &mut *args) };
            if init_strings(args, message, $exact, $usage) {
                return 1;
            }
            initid.maybe_null = 1;
            initid.const_item = 0;
            initid.max_length = MAX_OUTPUT as c_ulong;
            initid.ptr = Box::into_raw(Box::new(EvalState { out: Vec::new() })) as *mut c_char;
            0
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
            _error: *mut c_char,
        ) -> *mut c_char {
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
                Err(_) => {
                    unsafe { *is_null = 1 };
                    std::ptr::null_mut()
                }
            }
        }

        /// # Safety
        /// Called by the server once per statement after the last row.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $deinit(initid: *mut UdfInit) {
            // SAFETY: ptr was set by init (or is null if init failed).
            let initid = unsafe { &mut *initid };
            if !initid.ptr.is_null() {
                drop(unsafe { Box::from_raw(initid.ptr as *mut EvalState) });
                initid.ptr = std::ptr::null_mut();
            }
        }
    };
}

int_udf!(
    sys_exec,
    sys_exec_init,
    sys_exec_deinit,
    Some(1),
    "sys_exec(command): one argument, the shell command line; returns its wait status",
    |argv| Ok(Command::shell(OsStr::from_bytes(argv[0])).run()?.status as i64)
);

string_udf!(
    sys_eval,
    sys_eval_init,
    sys_eval_deinit,
    Some(1),
    "sys_eval(command): one argument, the shell command line; returns its standard output",
    |argv| Ok(Command::shell(OsStr::from_bytes(argv[0]))
        .stdout(Stdout::Capture(MAX_OUTPUT))
        .run()?
        .stdout)
);

int_udf!(
    sys_exec_fast,
    sys_exec_fast_init,
    sys_exec_fast_deinit,
    None,
    "sys_exec_fast(program, arg...): the program (looked up in PATH) and its arguments, passed verbatim without a shell; returns the exit code",
    |argv| Ok(fast_command(argv)?.stdout(Stdout::Null).run()?.exit_code() as i64)
);

string_udf!(
    sys_eval_fast,
    sys_eval_fast_init,
    sys_eval_fast_deinit,
    None,
    "sys_eval_fast(program, arg...): the program (looked up in PATH) and its arguments, passed verbatim without a shell; returns its standard output",
    |argv| Ok(fast_command(argv)?
        .stdout(Stdout::Capture(MAX_OUTPUT))
        .run()?
        .stdout)
);
