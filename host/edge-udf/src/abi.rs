//! The MariaDB/MySQL UDF calling convention (the server's
//! `include/mysql_com.h`; Connector/C's copy of these structs stops after
//! `maybe_null`, which is all this library reads).

use std::ffi::{c_char, c_uint, c_ulong};

/// `enum Item_result`.
pub const STRING_RESULT: i32 = 0;
/// A `double`.
pub const REAL_RESULT: i32 = 1;
/// A `long long`.
pub const INT_RESULT: i32 = 2;
/// A decimal, passed as its text.
pub const DECIMAL_RESULT: i32 = 4;

/// `UDF_ARGS`.
#[repr(C)]
pub struct UdfArgs {
    pub arg_count: c_uint,
    pub arg_type: *mut i32,
    pub args: *mut *mut c_char,
    pub lengths: *mut c_ulong,
    pub maybe_null: *mut c_char,
}

/// `UDF_INIT`.
#[repr(C)]
pub struct UdfInit {
    pub maybe_null: c_char,
    pub decimals: c_uint,
    pub max_length: c_ulong,
    pub ptr: *mut c_char,
    pub const_item: c_char,
}

/// One argument as the server passed it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg<'a> {
    /// SQL NULL (or a constant not known at init).
    Null,
    /// A string (or decimal text), with its declared type.
    Bytes(i32, &'a [u8]),
    /// An integer.
    Int(i64),
    /// A double.
    Real(f64),
}

impl UdfArgs {
    /// Number of arguments.
    pub fn len(&self) -> usize {
        self.arg_count as usize
    }

    /// Whether the function was called without arguments.
    pub fn is_empty(&self) -> bool {
        self.arg_count == 0
    }

    /// Forces argument `i` to be passed as a string.
    ///
    /// # Safety
    /// `self` is the server's `UDF_ARGS` during `*_init`.
    pub unsafe fn coerce_to_string(&mut self, i: usize) {
        // SAFETY: arg_type has arg_count entries.
        unsafe { *self.arg_type.add(i) = STRING_RESULT };
    }

    /// Argument `i`.
    ///
    /// # Safety
    /// `self` is the server's `UDF_ARGS` for the current call and
    /// `i < arg_count`; the returned slice lives as long as the call.
    pub unsafe fn get<'a>(&'a self, i: usize) -> Arg<'a> {
        // SAFETY: the server's arrays have arg_count entries; a non-NULL
        // arg points at `lengths[i]` bytes, a `long long` or a `double`.
        unsafe {
            let p = *self.args.add(i);
            if p.is_null() {
                return Arg::Null;
            }
            let t = *self.arg_type.add(i);
            match t {
                INT_RESULT => Arg::Int(std::ptr::read_unaligned(p as *const i64)),
                REAL_RESULT => Arg::Real(std::ptr::read_unaligned(p as *const f64)),
                _ => {
                    let len = *self.lengths.add(i) as usize;
                    Arg::Bytes(t, std::slice::from_raw_parts(p as *const u8, len))
                }
            }
        }
    }
}

/// Writes an error message for `CREATE FUNCTION`/`*_init` (the server
/// gives MYSQL_ERRMSG_SIZE = 512 bytes).
///
/// # Safety
/// `message` is the server's init message buffer.
pub unsafe fn set_message(message: *mut c_char, text: &str) {
    let bytes = text.as_bytes();
    let n = bytes.len().min(511);
    // SAFETY: the buffer holds 512 bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), message as *mut u8, n);
        *message.add(n) = 0;
    }
}

/// Returns `value` as a string function's result: kept in `buf` (the
/// statement's buffer, reused row after row), its length stored, and a NUL
/// after it so the pointer is valid, and readable one past `length`, even
/// for an empty value.
///
/// # Safety
/// `length` is the server's length slot for this call.
pub unsafe fn string_result(
    buf: &mut Vec<u8>,
    value: Vec<u8>,
    length: *mut c_ulong,
) -> *mut c_char {
    *buf = value;
    // SAFETY: the caller's contract.
    unsafe { *length = buf.len() as c_ulong };
    buf.push(0);
    buf.as_mut_ptr() as *mut c_char
}

/// Runs the body of one entry point the server calls. A panic (a bug:
/// nothing a caller passes should cause one) must not unwind into the
/// server: out of an `extern "C"` function it aborts the process, and with
/// it every connection. It is caught here (the panic hook has already
/// written it to the server's error log) and the entry answers `failed()`.
pub(crate) fn guard_call<T>(failed: impl FnOnce() -> T, body: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(_) => failed(),
    }
}

/// [`guard_call`] for a `*_init` entry: on a panic the statement is
/// refused with a message saying where to look, and `refused` returned.
/// `message` is the server's init message buffer.
pub(crate) fn guard(
    refused: std::ffi::c_char,
    what: &str,
    message: *mut c_char,
    body: impl FnOnce() -> std::ffi::c_char,
) -> std::ffi::c_char {
    guard_call(
        || {
            // SAFETY: the server's message buffer for this init.
            unsafe {
                set_message(
                    message,
                    &format!("edge_udf: internal error in {what} (see the server's error log)"),
                )
            };
            refused
        },
        body,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry point as the UDFs write theirs, whose body panics.
    unsafe extern "C" fn panicking_entry(error: *mut c_char) -> i64 {
        guard_call(
            || {
                // SAFETY: the caller's flag.
                unsafe { *error = 1 };
                0
            },
            || panic!("a bug"),
        )
    }

    #[test]
    fn a_panic_in_an_entry_point_is_an_error_not_an_abort() {
        let mut error: c_char = 0;
        // Without the guard this call would abort the test process.
        assert_eq!(unsafe { panicking_entry(&mut error) }, 0);
        assert_eq!(error, 1);
        let mut message = [1 as c_char; 512];
        let r = guard(1, "sys_eval_init", message.as_mut_ptr(), || panic!("a bug"));
        assert_eq!(r, 1);
        let text = unsafe { std::ffi::CStr::from_ptr(message.as_ptr()) };
        assert!(
            text.to_str()
                .unwrap()
                .contains("internal error in sys_eval_init")
        );
    }
}
