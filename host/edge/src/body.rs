//! A request body that stops at a byte cap, for bodies without a
//! Content-Length (chunked), whose size is only known as they arrive.

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::task::{Context, Poll};
use tokio::sync::oneshot;
use wasmtime_wasi_http::Error;

/// Whether a request's body is waiting on its client: set while the last
/// read of the body found nothing the client had sent. Carried in the
/// request's extensions, so that a deadline passing while the guest waits
/// for a client that trickles (or stalls) its body is answered `408` and
/// not counted against the component.
#[derive(Clone, Default)]
pub struct ClientPace(Arc<AtomicBool>);

impl ClientPace {
    /// Whether the body's last read was left waiting for the client.
    pub fn waiting(&self) -> bool {
        self.0.load(Relaxed)
    }
}

/// Passes frames through until more than `cap` bytes have arrived, then
/// fails the stream and raises `exceeded`, so the host can answer 413 even
/// if the guest gave up on the body. Keeps its [`ClientPace`] up to date.
pub struct CappedBody<B> {
    inner: B,
    seen: u64,
    cap: u64,
    exceeded: Arc<AtomicBool>,
    pace: ClientPace,
}

impl<B> CappedBody<B> {
    /// Wraps `inner`; `exceeded` is set when the cap is passed.
    pub fn new(inner: B, cap: u64, exceeded: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            seen: 0,
            cap,
            exceeded,
            pace: ClientPace::default(),
        }
    }

    /// Reports whether reads wait on the client to `pace`.
    pub fn paced(mut self, pace: ClientPace) -> Self {
        self.pace = pace;
        self
    }
}

impl<B> Body for CappedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Error>,
{
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        this.pace.0.store(polled.is_pending(), Relaxed);
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.seen += data.len() as u64;
                    if this.seen > this.cap {
                        this.exceeded.store(true, Relaxed);
                        return Poll::Ready(Some(Err(Error::HttpRequestBodySize(Some(this.seen)))));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            other => other.map(|o| o.map(|r| r.map_err(Into::into))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A streamed response body that ends cleanly only if its guest did: a
/// guest that traps or passes its deadline while streaming makes the body
/// end with an error, so hyper aborts the response (no final chunk, the
/// connection is closed) and the client sees a truncated response, never
/// a complete-looking one.
pub struct GuestOutcomeBody {
    inner: crate::respond::Body,
    outcome: Option<oneshot::Receiver<bool>>,
}

impl GuestOutcomeBody {
    /// Wraps `inner`; `outcome` gets `true` when the guest finished well.
    pub fn new(inner: crate::respond::Body, outcome: oneshot::Receiver<bool>) -> Self {
        Self {
            inner,
            outcome: Some(outcome),
        }
    }
}

impl Body for GuestOutcomeBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(None) => {}
            other => return other,
        }
        let Some(outcome) = self.outcome.as_mut() else {
            return Poll::Ready(None);
        };
        let ok = std::task::ready!(Pin::new(outcome).poll(cx)).unwrap_or(false);
        self.outcome = None;
        if ok {
            Poll::Ready(None)
        } else {
            Poll::Ready(Some(Err(Error::InternalError(Some(
                "the component failed while streaming its response".into(),
            )))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};
    use std::convert::Infallible;

    fn full(data: &'static [u8]) -> impl Body<Data = Bytes, Error = Infallible> + Unpin {
        Full::new(Bytes::from_static(data))
    }

    #[tokio::test]
    async fn a_failed_guest_ends_its_body_with_an_error() {
        for (ok, clean) in [(true, true), (false, false)] {
            let (done, outcome) = oneshot::channel();
            let inner = Full::new(Bytes::from_static(b"part"))
                .map_err(|never: Infallible| match never {})
                .boxed_unsync();
            let body = GuestOutcomeBody::new(inner, outcome);
            done.send(ok).unwrap();
            assert_eq!(body.collect().await.is_ok(), clean);
        }
    }

    #[tokio::test]
    async fn stops_past_the_cap() {
        let flag = Arc::new(AtomicBool::new(false));
        let err = CappedBody::new(full(b"abcdef"), 4, flag.clone())
            .collect()
            .await
            .expect_err("over the cap");
        assert!(matches!(err, Error::HttpRequestBodySize(Some(6))));
        assert!(flag.load(Relaxed));
    }

    #[tokio::test]
    async fn passes_bodies_within_the_cap() {
        let flag = Arc::new(AtomicBool::new(false));
        let body = CappedBody::new(full(b"abcd"), 4, flag.clone())
            .collect()
            .await
            .expect("within the cap");
        assert_eq!(body.to_bytes(), Bytes::from_static(b"abcd"));
        assert!(!flag.load(Relaxed));
    }
}
