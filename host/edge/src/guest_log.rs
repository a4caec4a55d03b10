//! What a guest writes to stdout and stderr, kept (bounded) so it can be
//! logged with the request: a Rust guest's panic message, say, is the best
//! clue to why it trapped.
//!
//! Writes never fail and never block: past [`CAPACITY`] bytes per instance
//! the rest is dropped (and the log says so), so a chatty or hostile guest
//! cannot fill memory, and a guest that panics when stderr fails (Rust's
//! `eprintln!`) is not made to trap by logging.

use bytes::Bytes;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Bytes kept per instance.
pub const CAPACITY: usize = 4096;

#[derive(Default)]
struct Buffer {
    bytes: Vec<u8>,
    dropped: usize,
}

/// The shared capture of one instance's stdout and stderr.
#[derive(Clone, Default)]
pub struct GuestLog(Arc<Mutex<Buffer>>);

impl GuestLog {
    fn append(&self, data: &[u8]) {
        let mut b = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let room = CAPACITY - b.bytes.len();
        let take = data.len().min(room);
        b.bytes.extend_from_slice(&data[..take]);
        b.dropped += data.len() - take;
    }

    /// Takes what was written so far (empty if nothing), noting how much
    /// was dropped.
    pub fn take(&self) -> Option<String> {
        let mut b = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if b.bytes.is_empty() && b.dropped == 0 {
            return None;
        }
        let mut text = String::from_utf8_lossy(&b.bytes).trim_end().to_string();
        if b.dropped > 0 {
            text.push_str(&format!(" [... {} more bytes dropped]", b.dropped));
        }
        b.bytes.clear();
        b.dropped = 0;
        Some(text)
    }
}

impl IsTerminal for GuestLog {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestLog {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for GuestLog {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestLog {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for GuestLog {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_never_failing() {
        let mut log = GuestLog::default();
        assert!(log.take().is_none());
        log.write(Bytes::from_static(b"panicked at x\n")).unwrap();
        assert_eq!(log.take().as_deref(), Some("panicked at x"));
        for _ in 0..10 {
            log.write(Bytes::from(vec![b'y'; 1000])).unwrap();
        }
        let text = log.take().unwrap();
        assert!(
            text.ends_with("[... 5904 more bytes dropped]"),
            "{}",
            &text[4000..]
        );
        assert_eq!(log.check_write().unwrap(), 64 * 1024);
    }
}
