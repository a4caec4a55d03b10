//! What a client connection may hold: a write that waits for a client who
//! stopped reading fails after `write_timeout` ([`TimedIo`]), and a
//! connection with no request open for `idle_timeout` is shut down
//! gracefully ([`Activity`]; HTTP/2 sends GOAWAY). hyper has neither: its
//! HTTP/2 connections live as long as the client answers pings, and a
//! response write waits for the reader forever.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// A stream whose writes fail once one has waited `timeout` for the peer
/// to make room.
pub struct TimedIo<S> {
    inner: S,
    timeout: Duration,
    timer: Option<Pin<Box<Sleep>>>,
}

impl<S> TimedIo<S> {
    /// Wraps `inner`.
    pub fn new(inner: S, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            timer: None,
        }
    }

    /// Turns a write's `Pending` into a timeout error once it has lasted
    /// `timeout`; any progress disarms the timer.
    fn pace<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.timer = None;
            return polled;
        }
        let timeout = self.timeout;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read the response in time",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for TimedIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for TimedIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.pace(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.pace(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.pace(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Requests open on one connection, and when the last one ended.
pub struct Activity {
    open: AtomicUsize,
    /// Milliseconds since `epoch` when a request last started or ended.
    last: AtomicU64,
    epoch: Instant,
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            open: AtomicUsize::new(0),
            last: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

/// Counts a request as open until dropped.
pub struct OpenRequest(Arc<Activity>);

impl Drop for OpenRequest {
    fn drop(&mut self) {
        self.0.touch();
        self.0.open.fetch_sub(1, Relaxed);
    }
}

impl Activity {
    fn touch(&self) {
        self.last
            .store(self.epoch.elapsed().as_millis() as u64, Relaxed);
    }

    /// Marks a request open.
    pub fn request(self: &Arc<Self>) -> OpenRequest {
        // No clock read here: while a request is open the connection is
        // not idle whatever `last` says; the request's end sets it.
        self.open.fetch_add(1, Relaxed);
        OpenRequest(self.clone())
    }

    /// How long the connection has been without an open request (zero
    /// while one is open).
    pub fn idle_for(&self) -> Duration {
        if self.open.load(Relaxed) > 0 {
            return Duration::ZERO;
        }
        let last = Duration::from_millis(self.last.load(Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    /// Resolves once the connection has been idle for `limit`.
    pub async fn idle(&self, limit: Duration) {
        loop {
            let idle = self.idle_for();
            if idle >= limit {
                return;
            }
            tokio::time::sleep(limit - idle).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_write_the_peer_never_reads_times_out() {
        // A pipe with a small buffer, whose reader never reads.
        let (client, _server) = tokio::io::duplex(64);
        let mut io = TimedIo::new(client, Duration::from_millis(100));
        let err = io.write_all(&[0u8; 4096]).await.expect_err("blocked");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test]
    async fn a_reading_peer_keeps_writes_going() {
        let (client, mut server) = tokio::io::duplex(64);
        let mut io = TimedIo::new(client, Duration::from_millis(500));
        let reader = tokio::spawn(async move {
            let mut sink = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut server, &mut sink)
                .await
                .map(|_| sink.len())
        });
        io.write_all(&[0u8; 64 * 1024]).await.expect("written");
        io.shutdown().await.unwrap();
        drop(io);
        assert_eq!(reader.await.unwrap().unwrap(), 64 * 1024);
    }

    #[tokio::test]
    async fn idle_counts_from_the_last_request() {
        let a = Arc::new(Activity::default());
        let open = a.request();
        assert_eq!(a.idle_for(), Duration::ZERO);
        drop(open);
        tokio::time::timeout(Duration::from_secs(5), a.idle(Duration::from_millis(50)))
            .await
            .expect("idle after the request ended");
    }
}
