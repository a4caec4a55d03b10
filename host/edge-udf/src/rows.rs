//! `edge_sign_row(key_id, col...)` and `edge_verify_row(key_id, signature,
//! col...)`: row signatures from the `signing` library.

use crate::abi::{
    Arg, DECIMAL_RESULT, UdfArgs, UdfInit, guard, guard_call, set_message, string_result,
};
use signing::row::{Column, sign_row, verify_row};
use std::ffi::{c_char, c_longlong, c_ulong};

/// Where the key file is named.
pub const KEY_FILE_ENV: &str = "EDGE_UDF_KEY_FILE";
/// The key file when the variable is unset.
pub const DEFAULT_KEY_FILE: &str = "/etc/edge/udf-keys";

/// Per-statement state: the keys, and the signature buffer.
struct RowState {
    keys: Vec<signing::Key>,
    out: Vec<u8>,
}

fn load_keys() -> Result<Vec<signing::Key>, String> {
    let path = std::env::var(KEY_FILE_ENV).unwrap_or_else(|_| DEFAULT_KEY_FILE.into());
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "cannot read the key file {path} (set {KEY_FILE_ENV} in the server's environment): {e}"
        )
    })?;
    signing::keyfile::parse(&text).map_err(|e| format!("key file {path}: {e}"))
}

/// Shared by both inits: the first `string_args` arguments (key id, and
/// signature for verify) are required and, once checked, passed as strings.
fn init(
    initid: &mut UdfInit,
    args: &mut UdfArgs,
    message: *mut c_char,
    string_args: usize,
    usage: &str,
) -> bool {
    let fail = |text: String| {
        // SAFETY: the server's message buffer.
        unsafe { set_message(message, &text) };
        true
    };
    if args.len() < string_args {
        return fail(usage.to_string());
    }
    let keys = match load_keys() {
        Ok(k) => k,
        Err(e) => return fail(e),
    };
    // A constant string key id is checked now. Only a string: a numeric
    // constant sits in an 8-byte slot whatever `lengths` says (the types
    // are coerced only after this check).
    // SAFETY: during init, 0 < arg_count.
    if let Arg::Bytes(crate::abi::STRING_RESULT, kid) = unsafe { args.get(0) } {
        let kid = String::from_utf8_lossy(kid);
        match keys.iter().find(|k| k.kid() == kid) {
            None => return fail(format!("no key {kid:?} in the key file")),
            Some(k) if k.hmac_secret().is_none() => {
                return fail(format!(
                    "key {kid:?} is not an hs256 key; row signatures use HMAC keys"
                ));
            }
            Some(_) => {}
        }
    }
    for i in 0..string_args {
        // SAFETY: during init, i < arg_count (checked above).
        unsafe { args.coerce_to_string(i) };
    }
    initid.maybe_null = 1;
    initid.max_length = 64;
    initid.ptr = Box::into_raw(Box::new(RowState {
        keys,
        out: Vec::new(),
    })) as *mut c_char;
    false
}

fn columns<'a>(args: &'a UdfArgs, from: usize) -> Vec<Column<'a>> {
    (from..args.len())
        // SAFETY: during a call, i < arg_count.
        .map(|i| match unsafe { args.get(i) } {
            Arg::Null => Column::Null,
            Arg::Int(v) => Column::Int(v),
            Arg::Real(v) => Column::Real(v),
            Arg::Bytes(DECIMAL_RESULT, b) => Column::Decimal(b),
            Arg::Bytes(_, b) => Column::Str(b),
        })
        .collect()
}

fn secret<'s>(state: &'s RowState, args: &UdfArgs) -> Option<&'s [u8]> {
    // SAFETY: during a call, 0 < arg_count.
    let Arg::Bytes(_, kid) = (unsafe { args.get(0) }) else {
        return None;
    };
    state
        .keys
        .iter()
        .find(|k| k.kid().as_bytes() == kid)
        .and_then(|k| k.hmac_secret())
}

/// # Safety
/// Called by the server with its own `UDF_INIT`/`UDF_ARGS`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn edge_sign_row_init(
    initid: *mut UdfInit,
    args: *mut UdfArgs,
    message: *mut c_char,
) -> c_char {
    guard(1, "edge_sign_row_init", message, || {
        // SAFETY: valid for the duration of the call.
        let (initid, args) = unsafe { (&mut *initid, &mut *args) };
        init(
            initid,
            args,
            message,
            1,
            "edge_sign_row(key_id, column...): a key id from the key file, then the row's columns in order",
        ) as c_char
    })
}

/// # Safety
/// Called by the server with its own `UDF_INIT`/`UDF_ARGS`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn edge_sign_row(
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
        let state = unsafe { &mut *(initid.ptr as *mut RowState) };
        let Some(key) = secret(state, args) else {
            // An unknown or NULL key id: NULL, never an unsigned row. (Not
            // `*error`: MariaDB would then return NULL for every later row.)
            unsafe { *is_null = 1 };
            return std::ptr::null_mut();
        };
        let sig = sign_row(key, &columns(args, 1));
        // SAFETY: the server's length slot.
        unsafe { string_result(&mut state.out, sig.into_bytes(), length) }
    })
}

/// # Safety
/// Called by the server once per statement.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn edge_sign_row_deinit(initid: *mut UdfInit) {
    guard_call(
        || (),
        || {
            // SAFETY: ptr was set by init (or is null if init failed).
            let initid = unsafe { &mut *initid };
            if !initid.ptr.is_null() {
                drop(unsafe { Box::from_raw(initid.ptr as *mut RowState) });
                initid.ptr = std::ptr::null_mut();
            }
        },
    )
}

/// # Safety
/// Called by the server with its own `UDF_INIT`/`UDF_ARGS`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn edge_verify_row_init(
    initid: *mut UdfInit,
    args: *mut UdfArgs,
    message: *mut c_char,
) -> c_char {
    guard(1, "edge_verify_row_init", message, || {
        // SAFETY: valid for the duration of the call.
        let (initid, args) = unsafe { (&mut *initid, &mut *args) };
        init(
            initid,
            args,
            message,
            2,
            "edge_verify_row(key_id, signature, column...): a key id, the stored signature, then the row's columns in the order they were signed",
        ) as c_char
    })
}

/// # Safety
/// Called by the server with its own `UDF_INIT`/`UDF_ARGS`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn edge_verify_row(
    initid: *mut UdfInit,
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
        // SAFETY: valid for the duration of the call; ptr is ours.
        let (initid, args) = unsafe { (&mut *initid, &*args) };
        let state = unsafe { &*(initid.ptr as *const RowState) };
        let Some(key) = secret(state, args) else {
            unsafe { *is_null = 1 };
            return 0;
        };
        // SAFETY: during a call, 1 < arg_count.
        let Arg::Bytes(_, signature) = (unsafe { args.get(1) }) else {
            return 0;
        };
        let signature = String::from_utf8_lossy(signature);
        verify_row(key, &columns(args, 2), &signature) as c_longlong
    })
}

/// # Safety
/// Called by the server once per statement.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn edge_verify_row_deinit(initid: *mut UdfInit) {
    // SAFETY: ptr was set by init (or is null if init failed).
    unsafe { edge_sign_row_deinit(initid) }
}
