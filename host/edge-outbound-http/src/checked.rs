//! A server's stream whose bytes are checked as they are read, before the
//! client on top (a database's or a broker's) buffers them: a client that
//! gathers a whole message or reply before looking at it would otherwise
//! hold whatever size the server declares, outside the guest's memory cap.
//! A check that fails fails the read, and so the connection.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a [`Checked`] stream runs the bytes it reads through.
pub trait ReadCheck {
    /// Follows `bytes`, the next ones read from the server: an error
    /// fails this read and the connection.
    fn check(&mut self, bytes: &[u8]) -> io::Result<()>;
}

/// A stream whose reads go through `C`; writes pass through.
pub struct Checked<S, C> {
    inner: S,
    check: C,
}

impl<S, C> Checked<S, C> {
    /// `inner`, read from its first byte through `check`.
    pub fn new(inner: S, check: C) -> Self {
        Self { inner, check }
    }
}

impl<S: AsyncRead + Unpin, C: ReadCheck + Unpin> AsyncRead for Checked<S, C> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut me.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = read {
            me.check.check(&buf.filled()[before..])?;
        }
        read
    }
}

impl<S: AsyncWrite + Unpin, C: Unpin> AsyncWrite for Checked<S, C> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
