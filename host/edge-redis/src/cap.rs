//! A cap on the size of each reply a Redis server sends.
//!
//! The server is the guest's choice: a `GET` of a 512 MiB string (or a
//! forged `$4000000000` header) would be read whole into host memory by
//! the client, outside the guest's memory cap. [`ReplyCap`] reads the
//! connection's bytes through a scanner of the protocol (RESP2 and RESP3)
//! and fails the connection as soon as one reply declares or takes more
//! than [`MAX_REPLY_BYTES`], each value counted with what the host holds
//! it in ([`HELD_PER_VALUE`]), before the client buffers it.

use std::io;

/// The most bytes one reply may take (a result as large as the other
/// database clients allow).
pub const MAX_REPLY_BYTES: usize = 16 << 20;

/// The longest line (a status, an error, a number) a reply may have.
const MAX_LINE_BYTES: usize = 64 << 10;

/// What each value of a reply is counted with beside its bytes: the
/// `redis::Value` the client holds it in and the item of the guest's
/// result it becomes ([`crate::Reply`]), together under 96 bytes. Three
/// bytes of RESP3 null would otherwise have been 90 bytes of host memory:
/// a reply of 16 MiB, hundreds of MiB.
pub const HELD_PER_VALUE: usize = 96;

/// What a double is counted with beside [`HELD_PER_VALUE`]: its text as
/// the guest is given it (Rust's shortest round-trip decimal, without an
/// exponent: `5e-324` is 326 characters).
const DOUBLE_TEXT: usize = 330;

/// Where the scanner is in the byte stream.
#[derive(Debug)]
enum At {
    /// At the type byte of the next value.
    Start,
    /// In the header line of a value of `kind`, its text so far.
    Line(u8, Vec<u8>),
    /// In a bulk value's bytes and its closing CRLF: this many left.
    Bulk(usize),
}

/// Follows replies through the stream; each reply's bytes are counted.
#[derive(Debug)]
pub struct Scanner {
    at: At,
    /// Elements each open aggregate still needs, innermost last.
    open: Vec<usize>,
    /// Bytes of the reply under way.
    reply: usize,
}

impl Default for Scanner {
    fn default() -> Self {
        Self {
            at: At::Start,
            open: Vec::new(),
            reply: 0,
        }
    }
}

fn too_large(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the Redis server sent {what}: a reply may take at most {MAX_REPLY_BYTES} bytes"),
    )
}

impl Scanner {
    /// Takes in bytes the server sent.
    fn scan(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let taken = match &mut self.at {
                At::Start => {
                    self.at = At::Line(bytes[0], Vec::new());
                    let double = if bytes[0] == b',' { DOUBLE_TEXT } else { 0 };
                    self.count(1 + HELD_PER_VALUE + double)?;
                    1
                }
                At::Line(kind, line) => {
                    // A line ends at CRLF only (a bare LF is part of it, as
                    // the client reads it).
                    let end = (0..bytes.len()).find(|&i| {
                        bytes[i] == b'\n'
                            && if i == 0 {
                                line.last() == Some(&b'\r')
                            } else {
                                bytes[i - 1] == b'\r'
                            }
                    });
                    let n = end.map_or(bytes.len(), |i| i + 1);
                    line.extend_from_slice(&bytes[..n]);
                    if line.len() > MAX_LINE_BYTES {
                        return Err(too_large(format!(
                            "a line of more than {MAX_LINE_BYTES} bytes"
                        )));
                    }
                    let (kind, line) = (*kind, end.map(|_| std::mem::take(line)));
                    self.count(n)?;
                    if let Some(line) = line {
                        self.header(kind, &line)?;
                    }
                    n
                }
                At::Bulk(left) => {
                    let n = (*left).min(bytes.len());
                    *left -= n;
                    let finished = *left == 0;
                    self.count(n)?;
                    if finished {
                        self.at = At::Start;
                        self.done();
                    }
                    n
                }
            };
            bytes = &bytes[taken..];
        }
        Ok(())
    }

    /// Counts `n` more bytes of the reply under way.
    fn count(&mut self, n: usize) -> io::Result<()> {
        self.reply += n;
        if self.reply > MAX_REPLY_BYTES {
            return Err(too_large(format!(
                "a reply of more than {MAX_REPLY_BYTES} bytes"
            )));
        }
        Ok(())
    }

    /// A value's header line, CRLF included, is complete.
    fn header(&mut self, kind: u8, line: &[u8]) -> io::Result<()> {
        let text = line.strip_suffix(b"\r\n").unwrap_or(line);
        let malformed = || {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "the Redis server sent a malformed length",
            )
        };
        // A length: -1 (nil) only where the protocol has it (a bulk
        // string, an array, a set), else at least 0.
        let number = || -> io::Result<i64> {
            let n: i64 = std::str::from_utf8(text)
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or_else(malformed)?;
            match n {
                -1 if matches!(kind, b'$' | b'*' | b'~') => Ok(-1),
                n if n < 0 => Err(malformed()),
                n => Ok(n),
            }
        };
        self.at = At::Start;
        match kind {
            // Bulk string, verbatim string, bulk error: the bytes and CRLF.
            b'$' | b'=' | b'!' => match number()? {
                n if n < 0 => self.done(),
                n if n as u64 > MAX_REPLY_BYTES as u64 => {
                    return Err(too_large(format!("a value of {n} bytes")));
                }
                n => self.at = At::Bulk(n as usize + 2),
            },
            // Array, set, push: n values; map: n pairs; attributes: n pairs
            // and then the value they describe.
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let n = number()?;
                let values = match kind {
                    b'%' => n.saturating_mul(2),
                    b'|' => n.saturating_mul(2).saturating_add(1),
                    _ => n,
                };
                if values <= 0 {
                    self.done();
                } else if values as u64 > (MAX_REPLY_BYTES / HELD_PER_VALUE) as u64 {
                    return Err(too_large(format!("an aggregate of {n} values")));
                } else {
                    self.open.push(values as usize);
                }
            }
            // Simple values: the line is all of it.
            _ => self.done(),
        }
        Ok(())
    }

    /// A value is complete: it counts in its aggregate, which may then be
    /// complete too; past the outermost, a new reply starts.
    fn done(&mut self) {
        while let Some(left) = self.open.last_mut() {
            *left -= 1;
            if *left > 0 {
                return;
            }
            self.open.pop();
        }
        self.reply = 0;
    }
}

impl edge_outbound_http::checked::ReadCheck for Scanner {
    fn check(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.scan(bytes)
    }
}

/// A connection to a Redis server whose replies are held to
/// [`MAX_REPLY_BYTES`] each.
pub type ReplyCap<S> = edge_outbound_http::checked::Checked<S, Scanner>;

/// `inner`, its replies read under the cap.
pub fn reply_cap<S>(inner: S) -> ReplyCap<S> {
    ReplyCap::new(inner, Scanner::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(chunks: &[&[u8]]) -> io::Result<Scanner> {
        let mut s = Scanner::default();
        for c in chunks {
            s.scan(c)?;
        }
        Ok(s)
    }

    #[test]
    fn replies_within_the_cap_pass_in_any_split() {
        let stream: &[u8] = b"+OK\r\n:42\r\n$5\r\nhello\r\n$-1\r\n*2\r\n$1\r\na\r\n*0\r\n%1\r\n+k\r\n$1\r\nv\r\n|1\r\n+ttl\r\n:3\r\n$2\r\nhi\r\n_\r\n";
        // Whole, and a byte at a time.
        let s = scan_all(&[stream]).unwrap();
        assert!(s.open.is_empty() && s.reply == 0, "{s:?}");
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        let s = scan_all(&bytes).unwrap();
        assert!(s.open.is_empty() && s.reply == 0, "{s:?}");
    }

    #[test]
    fn a_reply_past_the_cap_fails_before_it_is_read() {
        // Declared past the cap: refused at its header.
        let e = scan_all(&[b"$536870912\r\n"]).unwrap_err();
        assert!(e.to_string().contains("a value of 536870912 bytes"), "{e}");
        // Many values, each small, in one reply past the cap.
        let mut s = Scanner::default();
        s.scan(b"*100000\r\n").unwrap();
        let value = format!("${}\r\n{}\r\n", 1000, "x".repeat(1000));
        let mut failed = None;
        for _ in 0..100_000 {
            if let Err(e) = s.scan(value.as_bytes()) {
                failed = Some(e);
                break;
            }
        }
        let e = failed.expect("refused");
        assert!(e.to_string().contains("a reply of more than"), "{e}");
        // A line without end, and one of bare line feeds (the client
        // reads on to a CRLF: one line, not many short replies).
        let e = scan_all(&[b"+", &vec![b'a'; 70_000]]).unwrap_err();
        assert!(e.to_string().contains("a line of more than"), "{e}");
        let e = scan_all(&[b"+", &b"a\n".repeat(40_000)]).unwrap_err();
        assert!(e.to_string().contains("a line of more than"), "{e}");
        // No nil where the protocol has none (the client would read a
        // length of usize::MAX).
        for header in [
            &b"=-1\r\n"[..],
            b"!-1\r\n",
            b"%-1\r\n",
            b"|-1\r\n",
            b"$-2\r\n",
        ] {
            let e = scan_all(&[header]).unwrap_err();
            assert!(e.to_string().contains("malformed length"), "{e}");
        }
        assert!(scan_all(&[b"$-1\r\n*-1\r\n"]).is_ok());
    }

    #[test]
    fn each_value_counts_what_the_host_holds_it_in() {
        assert!(
            std::mem::size_of::<redis::Value>() + std::mem::size_of::<crate::Reply>()
                <= HELD_PER_VALUE
        );
        assert_eq!(5e-324f64.to_string().len(), 326);
        // A million nulls: 3 MB on the wire, 90 MB held.
        let mut s = Scanner::default();
        s.scan(b"*174762\r\n").unwrap();
        let e = (0..174_762)
            .find_map(|_| s.scan(b"_\r\n").err())
            .expect("refused");
        assert!(e.to_string().contains("a reply of more than"), "{e}");
        // Declared past what the cap holds: refused at the header.
        let e = scan_all(&[b"*1000000\r\n"]).unwrap_err();
        assert!(
            e.to_string().contains("an aggregate of 1000000 values"),
            "{e}"
        );
        // Doubles, as their text.
        let mut s = Scanner::default();
        s.scan(b"*40000\r\n").unwrap();
        let e = (0..40_000)
            .find_map(|_| s.scan(b",5e-324\r\n").err())
            .expect("refused");
        assert!(e.to_string().contains("a reply of more than"), "{e}");
        // A set of 100,000 short members passes.
        let mut s = Scanner::default();
        s.scan(b"~100000\r\n").unwrap();
        for i in 0..100_000 {
            s.scan(format!("$6\r\nm{i:05}\r\n").as_bytes()).unwrap();
        }
        assert_eq!(s.reply, 0);
    }

    #[test]
    fn many_replies_each_under_the_cap_pass() {
        let mut s = Scanner::default();
        let value = format!("${}\r\n{}\r\n", 1 << 20, "x".repeat(1 << 20));
        for _ in 0..40 {
            s.scan(value.as_bytes()).unwrap();
        }
        assert_eq!(s.reply, 0);
    }
}
