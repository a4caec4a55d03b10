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

/// Most `keys of P × bytes of T and P` a merge may take: a patch of 800
/// keys onto 1.2 MB, or 80 onto 12 MB. Measured near it on this project's
/// 2-core machine: 0.61 s for 80 new keys against a 12 MB target of two
/// million members (each key scans them all), 0.55 s for 800 against 1.2
/// MB, 0.17 s for 9,000 into an empty one.
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
        let bytes =
            ffi::sqlite3_value_bytes(target) as u64 + ffi::sqlite3_value_bytes(patch) as u64;
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
            let Some(stock) = stock.as_ref() else {
                ffi::sqlite3_result_error_nomem(ctx);
                return;
            };
            stock.limit(limit);
            // Each member of an object takes two bytes at least: counted
            // only when that bound is not enough.
            let at_most = ffi::sqlite3_value_bytes(patch) as u64 / 2 + 1;
            let keys = if at_most.saturating_mul(bytes) > MAX_PATCH_WORK {
                stock.merge_keys(patch).unwrap_or(at_most)
            } else {
                0
            };
            if keys.saturating_mul(bytes) > MAX_PATCH_WORK {
                let name = if which == TEXT {
                    "json_patch"
                } else {
                    "jsonb_patch"
                };
                let message = format!(
                    "{name}(T, P): P has {keys} keys to merge and T and P {bytes} bytes; edge allows keys × bytes up to {MAX_PATCH_WORK} (SQLite's merge takes as many steps at once)"
                );
                ffi::sqlite3_result_error(ctx, message.as_ptr().cast(), message.len() as c_int);
                return;
            }
            stock.run(ctx, which, target, patch);
        });
    });
}

/// The keys a merge of the JSONB `patch` visits: the members of its
/// objects reached from it through objects (an array, as any value not an
/// object, is put in place whole). `None` if it is not well formed.
fn merge_keys(jsonb: &[u8]) -> Option<u64> {
    const OBJECT: u8 = 12;
    let (kind, head, size) = header(jsonb, 0)?;
    if kind != OBJECT {
        return Some(0);
    }
    let mut keys = 0u64;
    let mut objects = vec![(head, head.checked_add(size)?)];
    while let Some((mut at, end)) = objects.pop() {
        if end > jsonb.len() {
            return None;
        }
        while at < end {
            let (_, head, size) = header(jsonb, at)?;
            at = at.checked_add(head)?.checked_add(size)?;
            let (kind, head, size) = header(jsonb, at)?;
            let value_end = at.checked_add(head)?.checked_add(size)?;
            if kind == OBJECT {
                objects.push((at + head, value_end));
            }
            at = value_end;
            keys += 1;
        }
        if at != end {
            return None;
        }
    }
    Some(keys)
}

/// A JSONB element's type, header length and payload size at `at`: the
/// size in the header's high half, or in the 1, 2, 4 or 8 big-endian
/// bytes after it (12 to 15 there).
fn header(jsonb: &[u8], at: usize) -> Option<(u8, usize, usize)> {
    let first = *jsonb.get(at)?;
    let extra = match first >> 4 {
        small @ 0..=11 => return Some((first & 0x0F, 1, usize::from(small))),
        12 => 1,
        13 => 2,
        14 => 4,
        _ => 8,
    };
    let bytes = jsonb.get(at + 1..at + 1 + extra)?;
    let size = bytes.iter().fold(0u64, |n, &b| n << 8 | u64::from(b));
    Some((first & 0x0F, 1 + extra, usize::try_from(size).ok()?))
}

thread_local! {
    /// The thread's connection with SQLite's own functions.
    static STOCK: RefCell<Option<Stock>> = const { RefCell::new(None) };
}

/// An in-memory connection and its statements: `json_patch`,
/// `jsonb_patch`, `jsonb`.
struct Stock {
    db: *mut ffi::sqlite3,
    statements: [*mut ffi::sqlite3_stmt; 3],
}

const TO_JSONB: usize = 2;

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
                statements: [ptr::null_mut(); 3],
            };
            // No lookaside: memory that lives with the thread, uncharged.
            ffi::sqlite3_db_config(
                db,
                ffi::SQLITE_DBCONFIG_LOOKASIDE,
                ptr::null_mut::<c_void>(),
                0 as c_int,
                0 as c_int,
            );
            let sql: [&CStr; 3] = [
                c"SELECT json_patch(?1, ?2)",
                c"SELECT jsonb_patch(?1, ?2)",
                c"SELECT jsonb(?1)",
            ];
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
    ) {
        let statement = self.statements[which];
        unsafe {
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

impl Stock {
    /// Values up to `limit` bytes, as the calling connection's.
    fn limit(&self, limit: c_int) {
        // SAFETY: our connection.
        unsafe { ffi::sqlite3_limit(self.db, ffi::SQLITE_LIMIT_LENGTH, limit) };
    }

    /// The keys a merge of `patch` visits ([`merge_keys`] of it as
    /// SQLite's JSONB, which reads JSON5, comments and all); `None` if
    /// SQLite cannot read it (the caller then takes the bound from its
    /// size: a large patch that is not JSON is refused in edge's words,
    /// not SQLite's).
    ///
    /// # Safety
    /// `patch` is the call's argument.
    unsafe fn merge_keys(&self, patch: *mut ffi::sqlite3_value) -> Option<u64> {
        let statement = self.statements[TO_JSONB];
        unsafe {
            let mut keys = None;
            if ffi::sqlite3_bind_value(statement, 1, patch) == ffi::SQLITE_OK
                && ffi::sqlite3_step(statement) == ffi::SQLITE_ROW
            {
                let p = ffi::sqlite3_column_blob(statement, 0).cast::<u8>();
                let n = ffi::sqlite3_column_bytes(statement, 0) as usize;
                if !p.is_null() {
                    keys = merge_keys(std::slice::from_raw_parts(p, n));
                }
            }
            ffi::sqlite3_reset(statement);
            ffi::sqlite3_clear_bindings(statement);
            keys
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
    use crate::functions::tests::stock_and_ours;
    use rusqlite::types::Value;

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
        // Counted as SQLite reads the patch: JSON5 comments, quotes and
        // colons in strings are no way around it.
        let hidden = format!("{{/*'*/ {} /*'*/}}", patch(2000).trim_matches(['{', '}']));
        let err = ours
            .query_row("SELECT json_patch(?1, ?2)", [&target, &hidden], |r| {
                r.get::<_, String>(0)
            })
            .unwrap_err();
        assert!(err.to_string().contains("P has 2000 keys"), "{err}");
        // Keys of objects inside arrays are not merged (the array is put
        // in place whole), nor are bytes of strings keys: as JSONB too.
        for big in [
            format!(r#"{{"a":[{}]}}"#, patch(3000)),
            format!(r#"{{"a":"{}"}}"#, "x:".repeat(100_000)),
        ] {
            for sql in [
                "SELECT json_patch(?1, ?2)",
                "SELECT json_patch(?1, jsonb(?2))",
            ] {
                ours.query_row(sql, [&target, &big], |r| r.get::<_, String>(0))
                    .unwrap();
            }
        }
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
