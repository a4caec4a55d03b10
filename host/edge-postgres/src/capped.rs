//! The server's side of a connection, read through a check of each
//! message's declared length. `tokio-postgres` gathers a whole message
//! before decoding it, and a message may declare up to 1 GiB: a server of
//! the tenant's could make the host buffer that much for one `DataRow`,
//! outside the guest's cap and long before the result's byte budget sees a
//! row. Past [`MAX_MESSAGE_BYTES`] the read fails, which fails the
//! connection, and the cause is kept for the guest's error.

use edge_outbound_http::checked::{Checked, ReadCheck};
use std::io;
use std::sync::{Arc, OnceLock};

/// The largest message a server may send: a row as large as a whole
/// result may be (`MAX_RESULT_BYTES`) and its framing.
pub const MAX_MESSAGE_BYTES: usize = crate::MAX_RESULT_BYTES + (64 << 10);

/// Where a message stands: the bytes of its header seen so far (type and
/// length: 5), then how many of its body are still to come.
#[derive(Default)]
struct Framing {
    header: [u8; 5],
    header_len: usize,
    body_left: usize,
}

impl Framing {
    /// Follows `bytes` through the message framing: the first message
    /// whose declared length is malformed or past the cap is an error.
    fn scan(&mut self, mut bytes: &[u8]) -> Result<(), String> {
        while !bytes.is_empty() {
            if self.body_left > 0 {
                let skip = self.body_left.min(bytes.len());
                self.body_left -= skip;
                bytes = &bytes[skip..];
                continue;
            }
            let take = (5 - self.header_len).min(bytes.len());
            self.header[self.header_len..self.header_len + take].copy_from_slice(&bytes[..take]);
            self.header_len += take;
            bytes = &bytes[take..];
            if self.header_len < 5 {
                break;
            }
            self.header_len = 0;
            let [kind, a, b, c, d] = self.header;
            // The length counts itself (4 bytes), not the type byte.
            let declared = u32::from_be_bytes([a, b, c, d]) as usize;
            if declared < 4 {
                return Err(format!(
                    "the server sent a malformed message ('{}' declaring {declared} bytes)",
                    char::from(kind).escape_default()
                ));
            }
            if declared - 4 > MAX_MESSAGE_BYTES {
                return Err(format!(
                    "the server sent a message of {} bytes; at most {MAX_MESSAGE_BYTES} are read (a row larger than a result may be)",
                    declared - 4
                ));
            }
            self.body_left = declared - 4;
        }
        Ok(())
    }
}

/// The messages of a connection, checked by [`Framing`], and why the
/// connection was cut, once it was: the guest's error says so.
pub struct Checker {
    framing: Framing,
    cut: Arc<OnceLock<String>>,
}

impl ReadCheck for Checker {
    fn check(&mut self, bytes: &[u8]) -> io::Result<()> {
        if let Some(why) = self.cut.get() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, why.clone()));
        }
        self.framing.scan(bytes).map_err(|why| {
            let why = self.cut.get_or_init(|| why).clone();
            io::Error::new(io::ErrorKind::InvalidData, why)
        })
    }
}

/// `inner` read under the cap from its first byte (a connection without
/// TLS: the server's first byte starts a message), and where the cause of
/// a cut will be.
pub fn capped<S>(inner: S) -> (Checked<S, Checker>, Arc<OnceLock<String>>) {
    let cut = Arc::<OnceLock<String>>::default();
    let checker = Checker {
        framing: Framing::default(),
        cut: cut.clone(),
    };
    (Checked::new(inner, checker), cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u8, body: usize) -> Vec<u8> {
        let mut m = vec![kind];
        m.extend_from_slice(&(body as u32 + 4).to_be_bytes());
        m.resize(5 + body, b'x');
        m
    }

    #[test]
    fn messages_within_the_cap_pass_in_any_split() {
        let mut bytes = message(b'R', 4);
        bytes.extend(message(b'D', 1000));
        bytes.extend(message(b'Z', 1));
        for chunk in [1, 2, 3, 5, 7, 1000, bytes.len()] {
            let mut f = Framing::default();
            for part in bytes.chunks(chunk) {
                f.scan(part).unwrap();
            }
            assert_eq!((f.header_len, f.body_left), (0, 0), "chunks of {chunk}");
        }
    }

    #[test]
    fn a_declared_length_past_the_cap_fails_at_its_header() {
        // Only the header: the body is never waited for.
        let mut header = vec![b'D'];
        header.extend_from_slice(&(1u32 << 30).to_be_bytes());
        let mut f = Framing::default();
        f.scan(&message(b'T', 10)).unwrap();
        f.scan(&header[..3]).unwrap();
        let err = f.scan(&header[3..]).unwrap_err();
        assert!(err.contains("1073741820 bytes"), "{err}");
        let mut at_cap = vec![b'D'];
        at_cap.extend_from_slice(&(MAX_MESSAGE_BYTES as u32 + 4).to_be_bytes());
        Framing::default().scan(&at_cap).unwrap();
        at_cap[4] += 1;
        Framing::default().scan(&at_cap).unwrap_err();
    }

    #[test]
    fn lengths_under_four_are_malformed() {
        let err = Framing::default().scan(&[b'D', 0, 0, 0, 3]).unwrap_err();
        assert!(err.contains("malformed"), "{err}");
    }
}
