//! SQLite's built-in functions edge replaces on every connection, each
//! answering exactly as SQLite's own (the tests compare them on a corpus).
//!
//! - `instr`, `replace`, `trim`/`ltrim`/`rtrim` with a set of characters,
//!   and `unhex` with characters to pass over: SQLite's compare every
//!   position of X with the whole of Y, O(|X|·|Y|) within one step of the
//!   statement, where neither the deadline nor the lane is looked at
//!   (`instr` of two 16 MiB values takes minutes, `trim` days). Here they
//!   are linear: `memchr`'s two-way search for `instr` and `replace`, a
//!   trie of Y's characters for `trim`, a sorted set of its code points
//!   for `unhex`, whose Y is held to [`MAX_CHARACTER_SET_BYTES`].
//! - `json_patch` and `jsonb_patch` are SQLite's own with their work
//!   bounded first (`json_patch.rs`).
//! - `random()` and `randomblob(N)` come from the calling thread's own
//!   generator (`rand`'s, ChaCha seeded from the system's): SQLite's is one
//!   for the whole process, behind one lock held while it makes all N
//!   bytes (up to 16 MiB: milliseconds), and other tenants' writes take it
//!   too (the log's restart). A statement of a tenant in the background
//!   runs at `SCHED_IDLE`; preempted with it held, it would hold them all
//!   up.

use rusqlite::ffi;
use rusqlite::types::ValueRef;
use std::ffi::{CStr, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Longest set of characters `trim(X, Y)`, `ltrim`, `rtrim` and
/// `unhex(X, Y)` take (Y's bytes; SQLite has no limit but its cost).
pub(crate) const MAX_CHARACTER_SET_BYTES: usize = 1000;

/// Installs the replacements on `conn`; `max_value_bytes` is its
/// `SQLITE_LIMIT_LENGTH`.
pub(crate) fn install(conn: &rusqlite::Connection, max_value_bytes: usize) -> rusqlite::Result<()> {
    own_randomness(conn, max_value_bytes)?;
    // As SQLite's: the same result for the same arguments (they may stand
    // in indexes, generated columns and CHECK constraints).
    let flags = ffi::SQLITE_UTF8 | ffi::SQLITE_DETERMINISTIC | ffi::SQLITE_INNOCUOUS;
    let functions: [(&CStr, c_int, usize, Function); 6] = [
        (c"instr", 2, 0, instr),
        (c"replace", 3, 0, replace),
        (c"ltrim", 2, LEFT, trim),
        (c"rtrim", 2, RIGHT, trim),
        (c"trim", 2, LEFT | RIGHT, trim),
        (c"unhex", 2, 0, unhex),
    ];
    for (name, args, data, function) in functions {
        // SAFETY: the connection is open; the name outlives the call
        // (SQLite copies it); the function is one of ours.
        let rc = unsafe {
            ffi::sqlite3_create_function_v2(
                conn.handle(),
                name.as_ptr(),
                args,
                flags,
                data as *mut c_void,
                Some(function),
                None,
                None,
                None,
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None));
        }
    }
    // SAFETY: the connection is open.
    let rc = unsafe { crate::json_patch::install(conn.handle()) };
    if rc != ffi::SQLITE_OK {
        return Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None));
    }
    Ok(())
}

type Function =
    unsafe extern "C" fn(*mut ffi::sqlite3_context, c_int, *mut *mut ffi::sqlite3_value);

const LEFT: usize = 1;
const RIGHT: usize = 2;

/// Runs a function's body; a panic becomes the statement's error, never
/// an unwind into SQLite.
pub(crate) fn guarded(ctx: *mut ffi::sqlite3_context, body: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(body)).is_err() {
        // SAFETY: `ctx` is the call's context.
        unsafe {
            ffi::sqlite3_result_error(ctx, c"edge: internal error in a SQL function".as_ptr(), -1)
        };
    }
}

/// A value's text (SQLite converting it, as its own functions do), `None`
/// for NULL or out of memory.
///
/// # Safety
/// `v` is a live argument; the slice lives until `v` is converted again.
unsafe fn text<'a>(v: *mut ffi::sqlite3_value) -> Option<&'a [u8]> {
    unsafe {
        let p = ffi::sqlite3_value_text(v);
        (!p.is_null()).then(|| std::slice::from_raw_parts(p, ffi::sqlite3_value_bytes(v) as usize))
    }
}

/// A blob's bytes (a zero-length blob has no pointer).
///
/// # Safety
/// As [`text`].
unsafe fn blob<'a>(v: *mut ffi::sqlite3_value) -> Option<&'a [u8]> {
    unsafe {
        let p = ffi::sqlite3_value_blob(v).cast::<u8>();
        let n = ffi::sqlite3_value_bytes(v) as usize;
        if p.is_null() {
            (n == 0).then_some(&[][..])
        } else {
            Some(std::slice::from_raw_parts(p, n))
        }
    }
}

/// # Safety
/// `ctx` is the call's context.
unsafe fn result_text(ctx: *mut ffi::sqlite3_context, bytes: &[u8]) {
    unsafe {
        ffi::sqlite3_result_text64(
            ctx,
            bytes.as_ptr().cast(),
            bytes.len() as u64,
            ffi::SQLITE_TRANSIENT(),
            ffi::SQLITE_UTF8 as u8,
        )
    };
}

/// # Safety
/// `ctx` is the call's context.
unsafe fn result_error(ctx: *mut ffi::sqlite3_context, message: &str) {
    unsafe { ffi::sqlite3_result_error(ctx, message.as_ptr().cast(), message.len() as c_int) };
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// `instr(X, Y)`: where Y first occurs in X, counted in characters (bytes
/// when both are blobs), 1 for an empty Y, 0 for none.
unsafe extern "C" fn instr(
    ctx: *mut ffi::sqlite3_context,
    _: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) {
    guarded(ctx, || unsafe {
        let (haystack, needle) = (*argv, *argv.add(1));
        let (haystack_type, needle_type) = (
            ffi::sqlite3_value_type(haystack),
            ffi::sqlite3_value_type(needle),
        );
        if haystack_type == ffi::SQLITE_NULL || needle_type == ffi::SQLITE_NULL {
            return;
        }
        // Sizes first, as SQLite's (a number becomes its text here).
        ffi::sqlite3_value_bytes(haystack);
        if ffi::sqlite3_value_bytes(needle) <= 0 {
            ffi::sqlite3_result_int(ctx, 1);
            return;
        }
        let position = match (
            haystack_type == ffi::SQLITE_BLOB,
            needle_type == ffi::SQLITE_BLOB,
        ) {
            (true, true) => blob(haystack)
                .zip(blob(needle))
                .map(|(h, n)| position(h, n, false)),
            (false, false) => text(haystack)
                .zip(text(needle))
                .map(|(h, n)| position(h, n, true)),
            // A blob and a text: both compared as text, on copies (the
            // arguments keep their types).
            _ => {
                let (h, n) = (
                    ffi::sqlite3_value_dup(haystack),
                    ffi::sqlite3_value_dup(needle),
                );
                let found = if h.is_null() || n.is_null() {
                    None
                } else {
                    text(h).zip(text(n)).map(|(h, n)| position(h, n, true))
                };
                ffi::sqlite3_value_free(h);
                ffi::sqlite3_value_free(n);
                found
            }
        };
        match position {
            Some(n) => ffi::sqlite3_result_int(ctx, n),
            None => ffi::sqlite3_result_error_nomem(ctx),
        }
    });
}

/// The 1-based position of `needle` (not empty) in `haystack`, in
/// characters for text: SQLite's looks only at the first byte and at each
/// byte that is not a UTF-8 continuation byte.
fn position(haystack: &[u8], needle: &[u8], is_text: bool) -> c_int {
    if needle.len() > haystack.len() {
        return 0;
    }
    let at = if is_text && is_continuation(needle[0]) {
        // Only the first byte is looked at where such a byte may stand.
        haystack.starts_with(needle).then_some(0)
    } else {
        memchr::memmem::find(haystack, needle)
    };
    match at {
        None => 0,
        Some(at) if is_text => {
            1 + haystack[1..=at]
                .iter()
                .filter(|&&b| !is_continuation(b))
                .count() as c_int
        }
        Some(at) => at as c_int + 1,
    }
}

/// `replace(X, Y, Z)`: X with each Y, left to right, made Z; X itself when
/// Y is empty or begins with a NUL byte (SQLite's reads it as a C string).
unsafe extern "C" fn replace(
    ctx: *mut ffi::sqlite3_context,
    _: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) {
    guarded(ctx, || unsafe {
        let Some(string) = text(*argv) else { return };
        let Some(pattern) = text(*argv.add(1)) else {
            return;
        };
        if pattern.first().is_none_or(|&b| b == 0) {
            result_text(ctx, string);
            return;
        }
        let Some(replacement) = text(*argv.add(2)) else {
            return;
        };
        let limit = ffi::sqlite3_limit(
            ffi::sqlite3_context_db_handle(ctx),
            ffi::SQLITE_LIMIT_LENGTH,
            -1,
        ) as usize;
        // SQLite's asks for X's length and its NUL first: too big at the
        // limit itself, whatever it replaces.
        if string.len() >= limit {
            ffi::sqlite3_result_error_toobig(ctx);
            return;
        }
        let mut out = Vec::with_capacity(string.len());
        let mut from = 0;
        for at in memchr::memmem::find_iter(string, pattern) {
            out.extend_from_slice(&string[from..at]);
            out.extend_from_slice(replacement);
            from = at + pattern.len();
            if out.len() + (string.len() - from) > limit {
                ffi::sqlite3_result_error_toobig(ctx);
                return;
            }
        }
        out.extend_from_slice(&string[from..]);
        result_text(ctx, &out);
    });
}

/// `trim(X, Y)`, `ltrim(X, Y)`, `rtrim(X, Y)`: X without the characters of
/// Y at its start, end or both; at each place the first of Y's characters
/// (in Y's order) that matches is the one taken, as SQLite's takes it.
unsafe extern "C" fn trim(
    ctx: *mut ffi::sqlite3_context,
    _: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) {
    guarded(ctx, || unsafe {
        if ffi::sqlite3_value_type(*argv) == ffi::SQLITE_NULL {
            return;
        }
        let Some(mut input) = text(*argv) else { return };
        let Some(set) = text(*argv.add(1)) else {
            return;
        };
        // SQLite reads the set as a C string: up to its first NUL.
        let set = &set[..memchr::memchr(0, set).unwrap_or(set.len())];
        let sides = ffi::sqlite3_user_data(ctx) as usize;
        if set.len() > MAX_CHARACTER_SET_BYTES {
            let name = match sides {
                LEFT => "ltrim",
                RIGHT => "rtrim",
                _ => "trim",
            };
            result_error(
                ctx,
                &format!(
                    "{name}(X, Y): Y holds {} bytes of characters to remove; edge allows at most {MAX_CHARACTER_SET_BYTES}",
                    set.len()
                ),
            );
            return;
        }
        let chars = CharSet::new(set);
        if !chars.is_empty() {
            if sides & LEFT != 0 {
                input = &input[chars.trimmed_start(input)..];
            }
            if sides & RIGHT != 0 {
                input = &input[..chars.trimmed_end(input)];
            }
        }
        result_text(ctx, input);
    });
}

/// Y's characters as SQLite's `trim` splits them (a byte below 0xC0 alone;
/// one from 0xC0 up with the continuation bytes after it), in a trie, each
/// with the place of its first occurrence in Y.
struct CharSet {
    /// Node of each first byte (`NONE`: no character begins with it).
    first: [u32; 256],
    nodes: Vec<Node>,
}

#[derive(Default)]
struct Node {
    /// Place in Y of the character ending here (`NONE`: none does).
    rank: u32,
    /// Next byte → node, sorted by byte.
    next: Vec<(u8, u32)>,
}

const NONE: u32 = u32::MAX;

impl CharSet {
    fn new(set: &[u8]) -> Self {
        let mut chars = Self {
            first: [NONE; 256],
            nodes: Vec::new(),
        };
        let (mut i, mut rank) = (0, 0);
        while i < set.len() {
            let start = i;
            i += 1;
            if set[start] >= 0xC0 {
                while i < set.len() && is_continuation(set[i]) {
                    i += 1;
                }
            }
            chars.insert(&set[start..i], rank);
            rank += 1;
        }
        for node in &mut chars.nodes {
            node.next.sort_unstable_by_key(|&(b, _)| b);
        }
        chars
    }

    fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    fn insert(&mut self, char: &[u8], rank: u32) {
        let mut node = self.first[usize::from(char[0])];
        if node == NONE {
            node = self.push();
            self.first[usize::from(char[0])] = node;
        }
        for &b in &char[1..] {
            let found = self.nodes[node as usize]
                .next
                .iter()
                .find(|&&(x, _)| x == b)
                .map(|&(_, n)| n);
            node = match found {
                Some(n) => n,
                None => {
                    let n = self.push();
                    self.nodes[node as usize].next.push((b, n));
                    n
                }
            };
        }
        let node = &mut self.nodes[node as usize];
        node.rank = node.rank.min(rank);
    }

    fn push(&mut self) -> u32 {
        self.nodes.push(Node {
            rank: NONE,
            next: Vec::new(),
        });
        (self.nodes.len() - 1) as u32
    }

    fn next(&self, node: u32, b: u8) -> Option<u32> {
        let next = &self.nodes[node as usize].next;
        next.binary_search_by_key(&b, |&(x, _)| x)
            .ok()
            .map(|i| next[i].1)
    }

    fn rank(&self, node: u32) -> Option<u32> {
        let rank = self.nodes[node as usize].rank;
        (rank != NONE).then_some(rank)
    }

    /// The rank of the one-byte character `b`.
    fn single(&self, b: u8) -> Option<u32> {
        match self.first[usize::from(b)] {
            NONE => None,
            node => self.rank(node),
        }
    }

    /// Ranks of the characters `bytes[..1]`, `bytes[..2]`, ... as far as
    /// any character of the set follows `bytes`.
    fn ranks_along(&self, bytes: &[u8]) -> Vec<Option<u32>> {
        let mut ranks = Vec::new();
        let Some(&b) = bytes.first() else {
            return ranks;
        };
        let mut node = self.first[usize::from(b)];
        if node == NONE {
            return ranks;
        }
        ranks.push(self.rank(node));
        for &b in &bytes[1..] {
            match self.next(node, b) {
                Some(n) => {
                    node = n;
                    ranks.push(self.rank(n));
                }
                None => break,
            }
        }
        ranks
    }

    /// Length of the character `bytes` begins with that comes first in Y.
    fn first_at_start(&self, bytes: &[u8]) -> Option<usize> {
        let b = *bytes.first()?;
        let mut node = self.first[usize::from(b)];
        if node == NONE {
            return None;
        }
        let mut best = self.rank(node).map(|r| (r, 1));
        // Only a byte from 0xC0 up begins a longer character (and only
        // continuation bytes follow it in the trie): each run of them is
        // walked once from its first byte.
        for (i, &b) in bytes.iter().enumerate().skip(1) {
            let Some(n) = self.next(node, b) else { break };
            node = n;
            if let Some(r) = self.rank(n)
                && best.is_none_or(|(best, _)| r < best)
            {
                best = Some((r, i + 1));
            }
        }
        best.map(|(_, len)| len)
    }

    /// Where `input` starts once the set's characters are taken from its
    /// start.
    fn trimmed_start(&self, input: &[u8]) -> usize {
        let mut start = 0;
        while let Some(len) = self.first_at_start(&input[start..]) {
            start += len;
        }
        start
    }

    /// Where `input` ends once the set's characters are taken from its end.
    /// A character ending in a continuation byte is that byte alone or the
    /// whole run back to the byte from 0xC0 up before it: each run's
    /// candidates are read in one walk.
    fn trimmed_end(&self, input: &[u8]) -> usize {
        let mut end = input.len();
        'ends: while end > 0 {
            let last = input[end - 1];
            if !is_continuation(last) {
                if self.single(last).is_none() {
                    break;
                }
                end -= 1;
                continue;
            }
            // input[run..end] are continuation bytes.
            let mut run = end - 1;
            while run > 0 && is_continuation(input[run - 1]) {
                run -= 1;
            }
            let whole = if run > 0 && input[run - 1] >= 0xC0 {
                self.ranks_along(&input[run - 1..end])
            } else {
                Vec::new()
            };
            let mut at = end;
            while at > run {
                // The character input[run - 1..at] has at - run + 1 bytes.
                let long = whole.get(at - run).copied().flatten();
                match (self.single(input[at - 1]), long) {
                    (None, None) => {
                        end = at;
                        break 'ends;
                    }
                    (Some(one), Some(long)) if long < one => {
                        end = run - 1;
                        continue 'ends;
                    }
                    (None, Some(_)) => {
                        end = run - 1;
                        continue 'ends;
                    }
                    _ => at -= 1,
                }
            }
            end = run;
        }
        end
    }
}

/// `unhex(X, Y)`: X's hexadecimal digit pairs as a blob, passing over the
/// characters of Y between pairs; NULL for any other character.
unsafe extern "C" fn unhex(
    ctx: *mut ffi::sqlite3_context,
    _: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) {
    guarded(ctx, || unsafe {
        let hex = text(*argv);
        let pass = text(*argv.add(1));
        let (Some(hex), Some(pass)) = (hex, pass) else {
            return;
        };
        if pass.len() > MAX_CHARACTER_SET_BYTES {
            result_error(
                ctx,
                &format!(
                    "unhex(X, Y): Y holds {} bytes of characters to pass over; edge allows at most {MAX_CHARACTER_SET_BYTES}",
                    pass.len()
                ),
            );
            return;
        }
        let mut passable = Vec::new();
        let mut i = 0;
        while i < pass.len() {
            passable.push(utf8_read(pass, &mut i));
        }
        passable.sort_unstable();
        passable.dedup();
        match decode_hex(hex, &passable) {
            Some(bytes) => ffi::sqlite3_result_blob64(
                ctx,
                bytes.as_ptr().cast(),
                bytes.len() as u64,
                ffi::SQLITE_TRANSIENT(),
            ),
            None => ffi::sqlite3_result_null(ctx),
        }
    });
}

/// X's digit pairs up to its first NUL, passing over `passable` code
/// points before each pair; `None` for anything else.
fn decode_hex(hex: &[u8], passable: &[u32]) -> Option<Vec<u8>> {
    let at = |i: usize| hex.get(i).copied().unwrap_or(0);
    let mut out = Vec::with_capacity(hex.len() / 2 + 1);
    let mut i = 0;
    loop {
        let mut high = at(i);
        if high == 0 {
            return Some(out);
        }
        while !high.is_ascii_hexdigit() {
            let ch = utf8_read(hex, &mut i);
            passable.binary_search(&ch).ok()?;
            high = at(i);
            if high == 0 {
                return Some(out);
            }
        }
        let low = at(i + 1);
        i += 2;
        if !low.is_ascii_hexdigit() {
            return None;
        }
        out.push(hex_value(high) << 4 | hex_value(low));
    }
}

fn hex_value(digit: u8) -> u8 {
    (digit + 9 * (1 & (digit >> 6))) & 0xF
}

/// One character from `bytes[*i..]` as SQLite's `sqlite3Utf8Read` reads
/// it (the bytes end as at a NUL): a byte below 0xC0 is itself; from 0xC0
/// up, with every continuation byte after it; an encoding of a value below
/// 0x80, a surrogate or U+FFFE/U+FFFF is U+FFFD.
fn utf8_read(bytes: &[u8], i: &mut usize) -> u32 {
    const TRANS1: [u8; 64] = [
        0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e,
        0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d,
        0x1e, 0x1f, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
        0x0d, 0x0e, 0x0f, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x00, 0x01, 0x02, 0x03,
        0x00, 0x01, 0x00, 0x00,
    ];
    let first = bytes[*i];
    *i += 1;
    if first < 0xC0 {
        return u32::from(first);
    }
    let mut c = u32::from(TRANS1[usize::from(first - 0xC0)]);
    while let Some(&b) = bytes.get(*i).filter(|&&b| is_continuation(b)) {
        c = (c << 6).wrapping_add(u32::from(b & 0x3F));
        *i += 1;
    }
    if c < 0x80 || c & 0xFFFF_F800 == 0xD800 || c & 0xFFFF_FFFE == 0xFFFE {
        0xFFFD
    } else {
        c
    }
}

fn own_randomness(conn: &rusqlite::Connection, max_value_bytes: usize) -> rusqlite::Result<()> {
    use rand::{Rng, RngCore};
    use rusqlite::functions::FunctionFlags;
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_INNOCUOUS;
    conn.create_scalar_function("random", 0, flags, |_| {
        // As SQLite's: never i64::MIN (abs() of it overflows).
        let r = rand::rng().random::<i64>();
        Ok(if r < 0 { -(r & i64::MAX) } else { r })
    })?;
    conn.create_scalar_function("randomblob", 1, flags, move |ctx| {
        // As SQLite's: N read as an integer (text and blobs by their
        // leading digits); below 1 makes one byte.
        let n = match ctx.get_raw(0) {
            ValueRef::Integer(i) => i,
            ValueRef::Real(f) => f as i64,
            ValueRef::Text(t) | ValueRef::Blob(t) => leading_integer(t),
            ValueRef::Null => 0,
        };
        let n = usize::try_from(n.max(1)).unwrap_or(usize::MAX);
        if n > max_value_bytes {
            // SQLite's own words for its code.
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_TOOBIG),
                None,
            ));
        }
        let mut bytes = vec![0u8; n];
        rand::rng().fill_bytes(&mut bytes);
        Ok(bytes)
    })
}

/// The integer at the start of `text` (after spaces, with its sign), as
/// SQLite reads a text as an integer: "10abc" is 10, "1e3" is 1, none 0;
/// past the range, the nearest end.
fn leading_integer(text: &[u8]) -> i64 {
    let text = text.trim_ascii_start();
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let magnitude = digits
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0i128, |n, d| (n * 10 + i128::from(d - b'0')).min(1 << 64));
    let n = if negative { -magnitude } else { magnitude };
    n.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rusqlite::types::Value;

    /// SQLite's own functions and ours, on two in-memory connections.
    pub(crate) fn stock_and_ours() -> (rusqlite::Connection, rusqlite::Connection) {
        crate::memory::configure();
        let stock = rusqlite::Connection::open_in_memory().unwrap();
        let ours = rusqlite::Connection::open_in_memory().unwrap();
        install(&ours, 16 << 20).unwrap();
        // As a tenant's database: values up to 16 MiB.
        for conn in [&stock, &ours] {
            conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, 16 << 20);
        }
        (stock, ours)
    }

    /// The answer's type and bytes (text need not be UTF-8), or the error.
    fn answer(
        conn: &rusqlite::Connection,
        sql: &str,
        args: &[Value],
    ) -> Result<(String, Vec<u8>), String> {
        conn.query_row(sql, rusqlite::params_from_iter(args), |r| {
            let bytes = match r.get_ref(0)? {
                ValueRef::Null => Vec::new(),
                ValueRef::Integer(i) => i.to_string().into_bytes(),
                ValueRef::Real(f) => f.to_string().into_bytes(),
                ValueRef::Text(b) | ValueRef::Blob(b) => b.to_vec(),
            };
            Ok((r.get::<_, String>(1)?, bytes))
        })
        .map_err(|e| e.to_string())
    }

    /// Values of every type, and bytes that are and are not UTF-8 (each
    /// as text and as a blob): where characters begin and end is what the
    /// functions differ on.
    fn corpus() -> Vec<Value> {
        let mut values = vec![
            Value::Null,
            Value::Integer(0),
            Value::Integer(-120),
            Value::Integer(1212),
            Value::Real(1.5),
            Value::Real(-0.25e-7),
        ];
        let bytes: &[&[u8]] = &[
            b"",
            b"a",
            b"ab",
            b"aaa",
            b"abab",
            b"12",
            b"0a1B",
            b"0a 1b",
            b"0a-1b",
            b" 0a",
            b"zz",
            b"0",
            b"a\0b",
            b"\0",
            "é".as_bytes(),
            "éé".as_bytes(),
            "aé€😀".as_bytes(),
            "0a€1b".as_bytes(),
            "€".as_bytes(),
            &[0xC3],
            &[0xA9],
            &[0xA9, 0xA9],
            &[0xC3, 0xA9, 0xA9],
            &[0xC3, 0x80, 0x80, 0xA9],
            &[0xE2, 0x82],
            &[0xFF, 0xFE],
            &[0xED, 0xA0, 0x80],
            &[0xC0, 0x80],
            &[0xEF, 0xBF, 0xBF],
        ];
        for b in bytes {
            values.push(Value::Blob(b.to_vec()));
            values.push(Value::Text(String::from_utf8_lossy(b).into_owned()));
        }
        values
    }

    /// Random byte strings from an alphabet of lead, continuation, ASCII,
    /// hex digit and NUL bytes.
    fn random_bytes(seed: &mut u64, alphabet: &[u8], max: usize) -> Vec<u8> {
        let mut next = || {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed
        };
        let len = (next() % (max as u64 + 1)) as usize;
        (0..len)
            .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
            .collect()
    }

    /// `f(...)` of `args` on both connections, with each blob given as
    /// text too (a CAST keeps bytes that are not UTF-8).
    fn compare(
        stock: &rusqlite::Connection,
        ours: &rusqlite::Connection,
        call: &str,
        args: &[Value],
    ) {
        let n = args.len();
        for as_text in 0..(1u32 << n) {
            let params: Vec<String> = (1..=n)
                .map(|i| {
                    if as_text & (1 << (i - 1)) != 0 && matches!(args[i - 1], Value::Blob(_)) {
                        format!("CAST(?{i} AS TEXT)")
                    } else {
                        format!("?{i}")
                    }
                })
                .collect();
            let expr = format!("{call}({})", params.join(", "));
            let sql = format!("SELECT {expr}, typeof({expr})");
            assert_eq!(
                answer(ours, &sql, args),
                answer(stock, &sql, args),
                "{sql} with {args:?}"
            );
        }
    }

    #[test]
    fn each_answers_as_sqlites_own() {
        let (stock, ours) = stock_and_ours();
        let values = corpus();
        for x in &values {
            for y in &values {
                for call in ["instr", "trim", "ltrim", "rtrim", "unhex"] {
                    compare(&stock, &ours, call, &[x.clone(), y.clone()]);
                }
                for z in [
                    Value::Null,
                    Value::Text(String::new()),
                    Value::Text("xyz".into()),
                    Value::Blob(vec![0xC3]),
                ] {
                    compare(&stock, &ours, "replace", &[x.clone(), y.clone(), z]);
                }
            }
        }
        // At the length limit: SQLite's replace() is too big there even
        // when nothing is replaced; growing past it is too big too.
        let limit = 16 << 20;
        for x in [
            vec![b'a'; limit],
            vec![b'a'; limit - 1],
            vec![b'a'; limit - 2],
        ] {
            for (y, z) in [("a", "bb"), ("x", "y"), ("", "y"), ("a", ""), ("x", "NULL")] {
                let z = if z == "NULL" {
                    Value::Null
                } else {
                    Value::Text(z.into())
                };
                let args = [Value::Blob(x.clone()), Value::Text(y.into()), z];
                let sql = "SELECT length(replace(CAST(?1 AS TEXT), ?2, ?3)), 'x'";
                assert_eq!(
                    answer(&ours, sql, &args),
                    answer(&stock, sql, &args),
                    "{} {y} {:?}",
                    x.len(),
                    args[2]
                );
            }
        }
        let mut seed = 0x9E37_79B9_7F4A_7C15;
        // Many kinds of byte; then few, so that Y's characters often
        // share a lead byte, repeat, or end in the same continuation byte.
        let wide: &[u8] = &[
            b'a', b'b', b'0', b'F', b' ', 0, 0x80, 0xA9, 0xBF, 0xC3, 0xE2, 0xF0, 0xFF,
        ];
        let narrow: &[u8] = &[b'a', 0x80, 0xA9, 0xC3];
        for alphabet in [wide, narrow] {
            for _ in 0..15_000 {
                let x = Value::Blob(random_bytes(&mut seed, alphabet, 12));
                let y = Value::Blob(random_bytes(&mut seed, alphabet, 8));
                for call in ["instr", "trim", "ltrim", "rtrim", "unhex"] {
                    compare(&stock, &ours, call, &[x.clone(), y.clone()]);
                }
                let z = Value::Blob(random_bytes(&mut seed, alphabet, 3));
                compare(&stock, &ours, "replace", &[x, y, z]);
            }
        }
    }

    /// Values SQLite's versions take minutes to days on (each position of X
    /// compared with all of Y) take one pass here.
    #[test]
    fn the_worst_cases_are_linear() {
        // Seconds here; hours to days for SQLite's own: a hang is a failure.
        let (done, finished) = std::sync::mpsc::channel();
        let worst = std::thread::spawn(move || {
            worst_cases();
            done.send(()).unwrap();
        });
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            finished.recv_timeout(std::time::Duration::from_secs(120))
        {
            panic!("the worst cases did not finish in 2 minutes: quadratic again?");
        }
        worst.join().unwrap();
    }

    fn worst_cases() {
        let (_, ours) = stock_and_ours();
        // Just under the limit (replace() is too big at it).
        let a = "a".repeat((16 << 20) - 1);
        let needle = format!("{}b", "a".repeat(8 << 20));
        let set = format!("{}a", "b".repeat(MAX_CHARACTER_SET_BYTES - 1));
        let run = |sql: &str, args: &[&dyn rusqlite::ToSql]| -> i64 {
            ours.query_row(sql, args, |r| r.get(0)).unwrap()
        };
        assert_eq!(run("SELECT instr(?1, ?2)", &[&a, &needle]), 0);
        assert_eq!(
            run("SELECT length(replace(?1, ?2, 'x'))", &[&a, &needle]),
            (16 << 20) - 1
        );
        assert_eq!(run("SELECT length(trim(?1, ?2))", &[&a, &set]), 0);
        // Long runs of continuation bytes after a lead byte, from the end:
        // taken one byte at a time up to the lead (the one-byte character
        // comes first in Y), or a whole character at a time.
        let rtrim = "SELECT length(CAST(rtrim(CAST(?1 AS TEXT), CAST(?2 AS TEXT)) AS BLOB))";
        let runs = [&[0xC3u8][..], &[0x80; 1 << 20]].concat().repeat(15);
        let set = [&[0x80u8, 0xC3][..], &[0x80; 500], b"x"].concat();
        assert_eq!(run(rtrim, &[&runs, &set]), 14 * ((1 << 20) + 1) + 1);
        let runs = [&[0xC3u8][..], &[0x80; 200]].concat().repeat(80_000);
        let set = [&[0xC3u8][..], &[0x80; 200], &[b'x', 0x80]].concat();
        assert_eq!(run(rtrim, &[&runs, &set]), 0);
        let pass = format!("{}-", " ".repeat(MAX_CHARACTER_SET_BYTES - 1));
        let hex = "-".repeat(16 << 20);
        assert_eq!(run("SELECT length(unhex(?1, ?2))", &[&hex, &pass]), 0);
    }

    #[test]
    fn a_larger_set_of_characters_is_refused_in_words() {
        let (_, ours) = stock_and_ours();
        let set = "ab".repeat(MAX_CHARACTER_SET_BYTES / 2 + 1);
        for sql in [
            "SELECT trim('x', ?1)",
            "SELECT rtrim('x', ?1)",
            "SELECT unhex('00', ?1)",
        ] {
            let err = ours
                .query_row(sql, [&set], |r| r.get::<_, Value>(0))
                .unwrap_err();
            assert!(
                err.to_string().contains("1002 bytes") && err.to_string().contains("at most 1000"),
                "{sql}: {err}"
            );
        }
        // Bytes after a NUL are not read (SQLite's trim stops there too).
        let set = format!("a\0{}", "b".repeat(2000));
        let trimmed: String = ours
            .query_row("SELECT trim('aba', ?1)", [&set], |r| r.get(0))
            .unwrap();
        assert_eq!(trimmed, "b");
    }
}
