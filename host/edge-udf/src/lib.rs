//! MariaDB user-defined functions (`libedge_udf.so`; `edge udf install`
//! loads them).
//!
//! | function | returns |
//! |---|---|
//! | `sys_exec(command)` | the raw wait status of `/bin/sh -c command` (256 for exit code 1), as lib_mysqludf_sys |
//! | `sys_eval(command)` | its standard output, as lib_mysqludf_sys |
//! | `sys_exec_fast(program, arg...)` | the exit code (128 + N if killed by signal N) |
//! | `sys_eval_fast(program, arg...)` | standard output |
//! | `edge_sign_row(key_id, col...)` | the row's HMAC-SHA256 signature (64 hex digits) |
//! | `edge_verify_row(key_id, signature, col...)` | 1 if it is the row's, else 0 |
//!
//! The `_fast` variants spawn the program directly (`posix_spawnp`, looked
//! up in `PATH`): no shell, one process instead of two, and arguments are
//! passed verbatim (`sys_eval_fast('echo', '$(id)')` prints `$(id)`).
//! Their programs see the server's `PATH` and no other environment
//! variable (so the C locale; `sys_eval_fast('env', 'LANG=C.UTF-8', ...)`
//! asks for another).
//! The `sys_*` pair keeps lib_mysqludf_sys's shell semantics for drop-in
//! compatibility, without its defects: no leaked or overrun buffer, no
//! uninitialised read on empty output, and a failed spawn is an error
//! rather than a crash. A NULL argument gives NULL. Output is capped at
//! 16 MiB (the rest is read and dropped).
//!
//! Every call is bounded: the program runs in a process group of its own,
//! killed when the program exits (a background job holding its output
//! cannot hold the call; start what should outlive it with `setsid` and
//! its output redirected), after `EDGE_UDF_TIMEOUT_MS` of the server's
//! environment (default 5000; the row is NULL and the error log says so),
//! and when the statement is killed (`KILL QUERY`, `max_statement_time`:
//! checked every 20 ms through the server's own `thd_kill_level`, since
//! the UDF interface has no kill callback; the statement then fails as
//! interrupted). Programs get no descriptor of the server's but 0, 1
//! and 2. MariaDB has no privilege for calling a UDF; with
//! `EDGE_UDF_PROCESS_USERS=user@host,...` in the server's environment the
//! process functions refuse, when a statement starts, every account not
//! listed (the account whose privileges apply, read through the server's
//! `thd_priv_user`/`thd_priv_host`: inside a `SQL SECURITY DEFINER`
//! routine, its definer's, so a routine defined by a listed account, with
//! `EXECUTE` granted on it, is how other accounts get one program). A panic inside the library (a bug) is caught at every entry
//! point: the call is an error (NULL), the server keeps running
//! (`EDGE_UDF_FAULT_INJECTION=panic` in the server's environment makes
//! `sys_eval_fast('edge-udf-test-panic')` panic, for the test that shows it).
//!
//! Row signatures take their keys from a key file (`signing::keyfile`
//! format, `hs256 KID SECRET` lines) named by the `EDGE_UDF_KEY_FILE`
//! environment variable of the server, else `/etc/edge/udf-keys`; no
//! function returns a secret. The file is read when a statement using the
//! function starts. The process functions do not keep the keys from SQL,
//! though: their programs run as the server's user, which reads the key
//! file, so any account that may call them can read the keys
//! (`sys_eval_fast('cat', '/etc/edge/udf-keys')`). `edge udf install`
//! therefore creates both kinds together only with
//! `--process-can-read-keys` (for servers where the accounts listed in
//! `EDGE_UDF_PROCESS_USERS` may see the keys); otherwise choose
//! `--no-process` or `--no-signing`.

pub mod abi;
mod exec;
mod rows;

pub use exec::*;
pub use rows::*;

/// Largest output returned by the `eval` functions.
pub const MAX_OUTPUT: usize = 16 << 20;
