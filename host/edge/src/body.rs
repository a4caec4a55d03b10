//! Request bodies held to their limits (a byte cap, for bodies without a
//! Content-Length whose size is only known as they arrive, and a pace),
//! and response bodies that end as their guest did.

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep};
use wasmtime_wasi_http::Error;

/// How a request's body is keeping up, carried in the request's extensions
/// for the host to read after the guest is done.
#[derive(Clone, Default)]
pub struct ClientPace(Arc<PaceState>);

#[derive(Default)]
struct PaceState {
    /// The last read found nothing the client had sent.
    waiting: AtomicBool,
    /// The body stalled or crawled past its limits and was cut.
    timed_out: AtomicBool,
}

impl ClientPace {
    /// Whether the body's last read was left waiting for the client.
    pub fn waiting(&self) -> bool {
        self.0.waiting.load(Relaxed)
    }

    /// Whether the body was cut for arriving too slowly: whatever the
    /// guest answered, the client gets `408`.
    pub fn timed_out(&self) -> bool {
        self.0.timed_out.load(Relaxed)
    }
}

/// What a request body must keep to.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    /// Most bytes; past them the stream fails and the answer is `413`.
    pub cap: u64,
    /// Longest wait for the next bytes.
    pub idle: Duration,
    /// Slowest average pace in bytes per second once `idle` has passed
    /// since the start (0: none).
    pub min_rate: u64,
    /// When the body must be done at the latest: a little before the
    /// request's deadline, so that the guest learns of the cut while it can
    /// still answer, and its instance lives on.
    pub cutoff: Instant,
}

/// Passes frames through until more than `cap` bytes have arrived, then
/// fails the stream and raises `exceeded`, so the host can answer 413 even
/// if the guest gave up on the body. A body that stalls for `idle`, falls
/// below `min_rate` or reaches `cutoff` fails the guest's read with a
/// timeout instead of holding its instance until the deadline; the
/// [`ClientPace`] records it.
pub struct CappedBody<B> {
    inner: B,
    seen: u64,
    limits: BodyLimits,
    /// From the guest's first read, not the request's arrival: a request
    /// that waited its turn (in a session's queue, behind a busy lane), or
    /// whose client waits for `100 Continue` until then, has not stalled.
    started: Option<Instant>,
    last: Instant,
    timer: Option<Pin<Box<Sleep>>>,
    exceeded: Arc<AtomicBool>,
    pace: ClientPace,
}

impl<B> CappedBody<B> {
    /// Wraps `inner`; `exceeded` is set when the cap is passed.
    pub fn new(inner: B, limits: BodyLimits, exceeded: Arc<AtomicBool>) -> Self {
        let now = Instant::now();
        Self {
            inner,
            seen: 0,
            limits,
            started: None,
            last: now,
            timer: None,
            exceeded,
            pace: ClientPace::default(),
        }
    }

    /// Reports how reads keep up to `pace`.
    pub fn paced(mut self, pace: ClientPace) -> Self {
        self.pace = pace;
        self
    }

    /// When the body is cut if nothing more arrives, reading since
    /// `started`.
    fn due(&self, started: Instant) -> Instant {
        let l = &self.limits;
        let mut due = (self.last + l.idle).min(l.cutoff);
        if l.min_rate > 0 {
            // The average pace falls under min_rate at started + idle +
            // seen / min_rate, unless more bytes come.
            let allowed = Duration::from_secs_f64(self.seen as f64 / l.min_rate as f64);
            due = due.min(started + l.idle + allowed);
        }
        due
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
        let started = *this.started.get_or_insert_with(|| {
            let now = Instant::now();
            this.last = now;
            now
        });
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        this.pace.0.waiting.store(polled.is_pending(), Relaxed);
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                this.timer = None;
                if let Some(data) = frame.data_ref() {
                    this.seen += data.len() as u64;
                    this.last = Instant::now();
                    if this.seen > this.limits.cap {
                        this.exceeded.store(true, Relaxed);
                        return Poll::Ready(Some(Err(Error::HttpRequestBodySize(Some(this.seen)))));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                let due = this.due(started);
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
                if timer.deadline() != due {
                    timer.as_mut().reset(due);
                }
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.pace.0.timed_out.store(true, Relaxed);
                        Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
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

/// A WASI 0.3 guest's response body that says when it has been read to
/// its end (or dropped unread): until then the guest's store must keep
/// running, since the guest's own tasks write the body.
pub struct EndSignal {
    inner: crate::respond::Body,
    end: Option<oneshot::Sender<()>>,
}

impl EndSignal {
    /// Wraps `inner`; `end` fires at its end or when it is dropped.
    pub fn new(inner: crate::respond::Body, end: oneshot::Sender<()>) -> Self {
        Self {
            inner,
            end: Some(end),
        }
    }
}

impl Body for EndSignal {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if matches!(frame, None | Some(Err(_))) {
            // Dropping the sender is the signal.
            self.end = None;
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
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

    fn limits(cap: u64) -> BodyLimits {
        BodyLimits {
            cap,
            idle: Duration::from_secs(60),
            min_rate: 0,
            cutoff: Instant::now() + Duration::from_secs(60),
        }
    }

    /// A body whose frames arrive when the test sends them.
    struct Trickle(tokio::sync::mpsc::Receiver<Bytes>);

    impl Body for Trickle {
        type Data = Bytes;
        type Error = Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
        }
    }

    #[tokio::test]
    async fn a_stalled_body_is_cut_and_says_so() {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let pace = ClientPace::default();
        let mut l = limits(100);
        l.idle = Duration::from_millis(100);
        let mut capped = CappedBody::new(Trickle(rx), l, Arc::default()).paced(pace.clone());
        tx.send(Bytes::from_static(b"x")).await.unwrap();
        assert!(capped.frame().await.unwrap().is_ok());
        assert!(!pace.timed_out());
        let err = capped.frame().await.unwrap().expect_err("stalled");
        assert!(matches!(err, Error::ConnectionReadTimeout));
        assert!(pace.timed_out());
        drop(tx);
    }

    #[tokio::test]
    async fn a_body_first_read_after_waiting_its_turn_has_not_stalled() {
        // The request waited longer than the idle limit before its guest
        // read (a session's queue, a `100 Continue` client): its clocks
        // start at that first read.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let mut l = limits(100);
        l.idle = Duration::from_millis(100);
        l.min_rate = 1000;
        let mut capped = CappedBody::new(Trickle(rx), l, Arc::default());
        tokio::time::sleep(Duration::from_millis(300)).await;
        let sender = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            tx.send(Bytes::from_static(b"x")).await.unwrap();
            tx
        });
        assert!(capped.frame().await.unwrap().is_ok(), "not cut");
        drop(sender.await.unwrap());
    }

    #[tokio::test]
    async fn a_crawling_body_is_cut_at_its_minimum_rate() {
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let mut l = limits(10_000);
        // Never idle for a minute, but at ~20 B/s against at least 1000.
        l.min_rate = 1000;
        l.idle = Duration::from_millis(200);
        let mut capped = CappedBody::new(Trickle(rx), l, Arc::default());
        let feeder = tokio::spawn(async move {
            while tx.send(Bytes::from_static(b"x")).await.is_ok() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        let mut frames = 0;
        let err = loop {
            match capped.frame().await {
                Some(Ok(_)) => frames += 1,
                Some(Err(e)) => break e,
                None => panic!("the body ended"),
            }
        };
        assert!(matches!(err, Error::ConnectionReadTimeout));
        assert!(
            frames < 100,
            "cut long before the idle limit: {frames} frames"
        );
        feeder.abort();
    }

    #[tokio::test]
    async fn a_body_is_cut_at_its_cutoff() {
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let mut l = limits(10_000);
        l.cutoff = Instant::now() + Duration::from_millis(100);
        let mut capped = CappedBody::new(Trickle(rx), l, Arc::default());
        let feeder = tokio::spawn(async move {
            while tx.send(Bytes::from_static(b"xxxxxxxx")).await.is_ok() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        let err = loop {
            match capped.frame().await {
                Some(Ok(_)) => {}
                Some(Err(e)) => break e,
                None => panic!("the body ended"),
            }
        };
        assert!(matches!(err, Error::ConnectionReadTimeout));
        feeder.abort();
    }

    #[tokio::test]
    async fn stops_past_the_cap() {
        let flag = Arc::new(AtomicBool::new(false));
        let err = CappedBody::new(full(b"abcdef"), limits(4), flag.clone())
            .collect()
            .await
            .expect_err("over the cap");
        assert!(matches!(err, Error::HttpRequestBodySize(Some(6))));
        assert!(flag.load(Relaxed));
    }

    #[tokio::test]
    async fn passes_bodies_within_the_cap() {
        let flag = Arc::new(AtomicBool::new(false));
        let body = CappedBody::new(full(b"abcd"), limits(4), flag.clone())
            .collect()
            .await
            .expect("within the cap");
        assert_eq!(body.to_bytes(), Bytes::from_static(b"abcd"));
        assert!(!flag.load(Relaxed));
    }
}
