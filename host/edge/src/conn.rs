//! What a client connection may hold: a write that waits for a client who
//! stopped reading fails after `write_timeout` ([`TimedIo`]); a response
//! that hyper stopped asking for more of (an HTTP/2 client that leaves its
//! flow-control window shut: no socket write waits then) has the
//! connection cut after the same time ([`Activity::stalled`]); and a
//! connection with no request open for `idle_timeout` is shut down
//! gracefully ([`Activity`]; HTTP/2 sends GOAWAY). hyper has none of
//! these: its HTTP/2 connections live as long as the client answers pings,
//! and a response write waits for the reader forever.

use http_body::{Body, Frame, SizeHint};
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

/// Requests open on one connection (until their response has been sent
/// whole), when the last one ended, and whether hyper keeps asking for
/// the responses it is sending.
pub struct Activity {
    open: AtomicUsize,
    /// Milliseconds since `epoch` when a request last started or ended.
    last: AtomicU64,
    /// Responses that handed hyper a frame it has not asked past yet.
    handed: AtomicUsize,
    /// Milliseconds since `epoch` when hyper last asked a response of this
    /// connection for a frame.
    asked: AtomicU64,
    epoch: Instant,
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            open: AtomicUsize::new(0),
            last: AtomicU64::new(0),
            handed: AtomicUsize::new(0),
            asked: AtomicU64::new(0),
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
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn touch(&self) {
        self.last.store(self.now_ms(), Relaxed);
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
        lasted(limit, || self.idle_for()).await
    }

    /// How long hyper has not asked for more of responses that have more
    /// to send (zero while none waits). Any response's progress counts for
    /// the connection, as a socket write's does for [`TimedIo`].
    pub fn stalled_for(&self) -> Duration {
        if self.handed.load(Relaxed) == 0 {
            return Duration::ZERO;
        }
        let asked = Duration::from_millis(self.asked.load(Relaxed));
        self.epoch.elapsed().saturating_sub(asked)
    }

    /// Resolves once a response has waited `limit` to be asked for more.
    pub async fn stalled(&self, limit: Duration) {
        lasted(limit, || self.stalled_for()).await
    }
}

/// Resolves once `so_far` (a state's duration, reset by activity) reaches
/// `limit`, sleeping only as long as it could take.
async fn lasted(limit: Duration, so_far: impl Fn() -> Duration) {
    loop {
        let d = so_far();
        if d >= limit {
            return;
        }
        tokio::time::sleep(limit - d).await;
    }
}

/// A response body that keeps its request open until it is sent whole (or
/// dropped), and tells its connection's [`Activity`] when hyper takes the
/// head or a frame and when it comes back for the next: hyper comes back
/// once what it took is on its way, so a response it does not come back to
/// is held by the client.
pub struct Tracked<B> {
    inner: B,
    open: OpenRequest,
    /// A frame was handed over and hyper has not asked since.
    handed: bool,
}

impl<B> Tracked<B> {
    /// Wraps `inner`, the response to the request `open`. Its head counts
    /// as handed over: hyper asks for the body once the head is on its
    /// way, and an HTTP/2 client with a shut window is never asked for
    /// the first byte.
    pub fn new(inner: B, open: OpenRequest) -> Self
    where
        B: Body,
    {
        let handed = !inner.is_end_stream();
        if handed {
            let activity = &open.0;
            activity.asked.store(activity.now_ms(), Relaxed);
            activity.handed.fetch_add(1, Relaxed);
        }
        Self {
            inner,
            open,
            handed,
        }
    }

    fn asked(&mut self) {
        let activity = &self.open.0;
        activity.asked.store(activity.now_ms(), Relaxed);
        if std::mem::take(&mut self.handed) {
            activity.handed.fetch_sub(1, Relaxed);
        }
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        self.asked();
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        // The last frame too: hyper may hold it until the client's window
        // opens (it drops the body once the frame is sent).
        if matches!(polled, Poll::Ready(Some(Ok(_)))) {
            self.handed = true;
            self.open.0.handed.fetch_add(1, Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B> Drop for Tracked<B> {
    fn drop(&mut self) {
        if self.handed {
            self.open.0.handed.fetch_sub(1, Relaxed);
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
