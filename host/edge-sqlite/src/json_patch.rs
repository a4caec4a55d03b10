//! `json_patch(T, P)` and `jsonb_patch(T, P)` held to a bound on their
//! work, answered by SQLite's own.
//!
//! SQLite merges each key of the patch P (at every level) by scanning the
//! target's keys and moving the rest of the target's bytes at each edit:
//! O(keys of P × bytes of T and P) within one step, where the deadline is
//! not looked at (a patch of a million keys runs for hours). Here the keys
//! of P are counted first (`:` outside strings in JSON text; half its
//! bytes for JSONB, whose smallest member takes two) and a merge past
//! [`MAX_PATCH_WORK`] is refused in words; the rest is SQLite's own
//! function, run on a private in-memory connection of the thread's (one
//! registered function cannot call the built-in it replaces), so the
//! answers are SQLite's.

use rusqlite::ffi;
use std::cell::RefCell;
use std::ffi::{CStr, c_int, c_void};
use std::ptr;

/// Most `keys of P × bytes of T and P` a merge may take: about 2 s of one
/// core at its worst here (a patch of 1,000 keys onto 1 MB, or 100 onto
/// the largest value).
pub(crate) const MAX_PATCH_WORK: u64 = 1_000_000_000;

/// Registers both on `db`.
///
/// # Safety
/// `db` is an open connection.
pub(crate) unsafe fn install(db: *mut ffi::sqlite3) -> c_int {
    let flags = ffi::SQLITE_UTF8
        | ffi::SQLITE_DETERMINISTIC
        | ffi::SQLITE_INNOCUOUS
        | ffi::SQLITE_RESULT_SUBTYPE;
    for (name, which) in [(c"json_patch", TEXT), (c"jsonb_patch", BINARY)] {
        // SAFETY: as the caller promises.
        let rc = unsafe {
            ffi::sqlite3_create_function_v2(
                db,
                name.as_ptr(),
                2,
                flags,
                which as *mut c_void,
                Some(patch),
                None,
                None,
                None,
            )
        };
        if rc != ffi::SQLITE_OK {
            return rc;
        }
    }
    ffi::SQLITE_OK
}

const TEXT: usize = 0;
const BINARY: usize = 1;

unsafe extern "C" fn patch(
    ctx: *mut ffi::sqlite3_context,
    _: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) {
    super::functions::guarded(ctx, || unsafe {
        let which = ffi::sqlite3_user_data(ctx) as usize;
        let (target, patch) = (*argv, *argv.add(1));
        let keys = match ffi::sqlite3_value_type(patch) {
            ffi::SQLITE_TEXT => {
                let p = ffi::sqlite3_value_text(patch);
                let n = ffi::sqlite3_value_bytes(patch) as usize;
                if p.is_null() {
                    0
                } else {
                    keys_in_text(std::slice::from_raw_parts(p, n))
                }
            }
            ffi::SQLITE_BLOB => ffi::sqlite3_value_bytes(patch) as u64 / 2,
            _ => 0,
        };
        let bytes =
            ffi::sqlite3_value_bytes(target) as u64 + ffi::sqlite3_value_bytes(patch) as u64;
        if keys.saturating_mul(bytes) > MAX_PATCH_WORK {
            let name = if which == TEXT {
                "json_patch"
            } else {
                "jsonb_patch"
            };
            let message = format!(
                "{name}(T, P): P has {keys} keys and T and P {bytes} bytes; edge allows keys × bytes up to {MAX_PATCH_WORK} (SQLite's merge takes as many steps at once)"
            );
            ffi::sqlite3_result_error(ctx, message.as_ptr().cast(), message.len() as c_int);
            return;
        }
        let limit = ffi::sqlite3_limit(
            ffi::sqlite3_context_db_handle(ctx),
            ffi::SQLITE_LIMIT_LENGTH,
            -1,
        );
        STOCK.with(|stock| {
            let mut stock = stock.borrow_mut();
            if stock.is_none() {
                *stock = Stock::open();
            }
            match stock.as_ref() {
                Some(stock) => stock.run(ctx, which, target, patch, limit),
                None => ffi::sqlite3_result_error_nomem(ctx),
            }
        });
    });
}

/// How many keys a JSON (or JSON5) text's objects hold at most: each is
/// followed by a `:` outside strings (a `:` in a comment counts too).
fn keys_in_text(text: &[u8]) -> u64 {
    let mut keys = 0;
    let mut quote = None;
    let mut escaped = false;
    for &b in text {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == q {
                    quote = None;
                }
            }
            None => match b {
                b'"' | b'\'' => quote = Some(b),
                b':' => keys += 1,
                _ => {}
            },
        }
    }
    keys
}

thread_local! {
    /// The thread's connection with SQLite's own functions.
    static STOCK: RefCell<Option<Stock>> = const { RefCell::new(None) };
}

/// An in-memory connection and its two statements.
struct Stock {
    db: *mut ffi::sqlite3,
    statements: [*mut ffi::sqlite3_stmt; 2],
}

impl Stock {
    /// Opened outside any tenant's memory budget: it lives with the thread.
    fn open() -> Option<Self> {
        let _uncharged = crate::memory::uncharged();
        let mut db = ptr::null_mut();
        // SAFETY: plain SQLite calls on a connection of our own.
        unsafe {
            let flags =
                ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_MEMORY | ffi::SQLITE_OPEN_NOMUTEX;
            if ffi::sqlite3_open_v2(c":memory:".as_ptr(), &mut db, flags, ptr::null())
                != ffi::SQLITE_OK
            {
                ffi::sqlite3_close(db);
                return None;
            }
            let mut stock = Self {
                db,
                statements: [ptr::null_mut(); 2],
            };
            let sql: [&CStr; 2] = [c"SELECT json_patch(?1, ?2)", c"SELECT jsonb_patch(?1, ?2)"];
            for (statement, sql) in stock.statements.iter_mut().zip(sql) {
                if ffi::sqlite3_prepare_v3(
                    db,
                    sql.as_ptr(),
                    -1,
                    ffi::SQLITE_PREPARE_PERSISTENT,
                    statement,
                    ptr::null_mut(),
                ) != ffi::SQLITE_OK
                {
                    return None;
                }
            }
            Some(stock)
        }
    }

    /// Runs SQLite's function `which` on the arguments, its answer (value,
    /// or error and code) becoming the call's.
    ///
    /// # Safety
    /// `ctx` and the arguments are the call's.
    unsafe fn run(
        &self,
        ctx: *mut ffi::sqlite3_context,
        which: usize,
        target: *mut ffi::sqlite3_value,
        patch: *mut ffi::sqlite3_value,
        limit: c_int,
    ) {
        let statement = self.statements[which];
        unsafe {
            ffi::sqlite3_limit(self.db, ffi::SQLITE_LIMIT_LENGTH, limit);
            let bound = ffi::sqlite3_bind_value(statement, 1, target) == ffi::SQLITE_OK
                && ffi::sqlite3_bind_value(statement, 2, patch) == ffi::SQLITE_OK;
            let rc = if bound {
                ffi::sqlite3_step(statement)
            } else {
                ffi::sqlite3_errcode(self.db)
            };
            if rc == ffi::SQLITE_ROW {
                // With its JSON subtype (other JSON functions take a
                // text so marked as JSON, not as a string).
                ffi::sqlite3_result_value(ctx, ffi::sqlite3_column_value(statement, 0));
            } else {
                let message = ffi::sqlite3_errmsg(self.db);
                ffi::sqlite3_result_error(ctx, message, -1);
                ffi::sqlite3_result_error_code(ctx, ffi::sqlite3_extended_errcode(self.db));
            }
            ffi::sqlite3_reset(statement);
            ffi::sqlite3_clear_bindings(statement);
        }
    }
}

impl Drop for Stock {
    fn drop(&mut self) {
        // SAFETY: ours, finalized once.
        unsafe {
            for statement in self.statements {
                ffi::sqlite3_finalize(statement);
            }
            ffi::sqlite3_close(self.db);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::types::Value;

    fn stock_and_ours() -> (rusqlite::Connection, rusqlite::Connection) {
        crate::memory::configure();
        let stock = rusqlite::Connection::open_in_memory().unwrap();
        let ours = rusqlite::Connection::open_in_memory().unwrap();
        crate::functions::install(&ours, 16 << 20).unwrap();
        (stock, ours)
    }

    fn answer(
        conn: &rusqlite::Connection,
        sql: &str,
        args: &[Value],
    ) -> Result<(Value, String), String> {
        conn.query_row(sql, rusqlite::params_from_iter(args), |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(|e| e.to_string())
    }

    /// The same answers as SQLite's own: values, types, errors, and the
    /// JSON subtype (an object patched in stays an object, not a string).
    #[test]
    fn answers_as_sqlites_own() {
        let (stock, ours) = stock_and_ours();
        let texts = [
            "{}",
            r#"{"a":1,"b":{"c":2,"d":[1,2]},"e":null}"#,
            r#"{"a":null,"b":{"c":9,"x":{"y":1}},"f":"g"}"#,
            r#"{"a":{"a":{"a":1}}}"#,
            r#"{a:1, 'b':'x:y', /* c: */ c:0x1F}"#,
            r#"{"a\u0062":1,"ab":2}"#,
            r#"{"a":1,"a":2}"#,
            "[1,2]",
            r#""text""#,
            "12",
            "null",
            "{",
            r#"{"a":"#,
            "",
        ];
        let mut values: Vec<Value> = texts.iter().map(|t| Value::Text(t.to_string())).collect();
        values.extend([
            Value::Null,
            Value::Integer(7),
            Value::Real(2.5),
            Value::Blob(vec![0xC7, 0x01]),
        ]);
        for x in &values {
            for y in &values {
                for f in ["json_patch", "jsonb_patch"] {
                    for sql in [
                        format!("SELECT {f}(?1, ?2), typeof({f}(?1, ?2))"),
                        format!("SELECT json_array({f}(?1, ?2)), 1"),
                        format!("SELECT {f}(jsonb(?1), jsonb(?2)), 1"),
                    ] {
                        let args = [x.clone(), y.clone()];
                        assert_eq!(
                            answer(&ours, &sql, &args),
                            answer(&stock, &sql, &args),
                            "{sql} {args:?}"
                        );
                    }
                }
            }
        }
    }

    /// A patch of many keys onto a large target is refused in words (SQLite
    /// would run for hours in one step); smaller ones are merged.
    #[test]
    fn a_merge_past_its_work_is_refused_in_words() {
        let (_, ours) = stock_and_ours();
        let patch = |n: usize| {
            let keys: Vec<String> = (0..n).map(|i| format!(r#""k{i}":{i}"#)).collect();
            format!("{{{}}}", keys.join(","))
        };
        let target = format!(r#"{{"pad":"{}"}}"#, "x".repeat(1 << 20));
        let err = ours
            .query_row("SELECT json_patch(?1, ?2)", [&target, &patch(2000)], |r| {
                r.get::<_, String>(0)
            })
            .unwrap_err();
        assert!(err.to_string().contains("P has 2000 keys"), "{err}");
        assert!(err.to_string().contains("up to 1000000000"), "{err}");
        // Keys inside strings are not keys.
        assert_eq!(keys_in_text(br#"{"a:b":"c:d", 'e:f': 1, "g\":h": 2}"#), 3);
        let count: i64 = ours
            .query_row(
                "SELECT count(*) FROM json_each(json_patch(?1, ?2))",
                [&target, &patch(500)],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(count, 501);
    }
}
