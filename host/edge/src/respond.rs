//! Host-made responses and the one place where failures map to status
//! codes.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};

/// The body type of every response the host sends.
pub type Body = UnsyncBoxBody<Bytes, wasmtime_wasi_http::Error>;

/// A short plain-text response made by the host.
pub fn text(status: StatusCode, message: impl Into<String>) -> Response<Body> {
    let mut message = message.into();
    message.push('\n');
    let mut response = Response::new(
        Full::new(Bytes::from(message))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A response with a body already in memory and a content type.
pub fn bytes(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut response = Response::new(
        Full::new(body.into())
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Why a request did not get a response from its component.
#[derive(Debug, Clone)]
pub enum Failure {
    /// The deadline passed (epoch trap or wall clock); the instance was killed.
    Deadline,
    /// The deadline passed while the guest waited for request body bytes
    /// the client had not sent; the instance was stopped.
    ClientTimeout,
    /// The guest asked for more memory than its cap.
    MemoryCap(String),
    /// The guest trapped.
    Trap(String),
    /// The pool has no free slot for another instance.
    PoolExhausted,
    /// Every tenant's instances together hold the host's memory for guests
    /// (`pool.total_memory_bytes`).
    MemoryExhausted,
    /// The guest returned without calling `response-outparam.set`.
    NoResponse,
    /// The guest set an error instead of a response.
    GuestError(String),
    /// The request body was larger than allowed.
    BodyTooLarge(u64),
    /// The request is malformed for this route (e.g. no session key).
    BadRequest(String),
    /// The route needs credentials the request does not carry (a bearer
    /// token for `session_key = "bearer"`).
    Unauthorized(String),
    /// The session cap or queue is full.
    SessionsFull(String),
    /// The component failed to load.
    Unavailable(String),
    /// The tenant is over a limit of its share.
    OverShare(crate::share::Limit),
    /// The request waited in its session's queue until its deadline.
    QueueTimeout,
    /// A host-side failure.
    Internal(String),
}

impl Failure {
    /// A guest that set an error instead of a response: what it said goes
    /// to the log, the client gets fixed words.
    pub fn from_guest_code(code: impl std::fmt::Debug) -> Self {
        Self::GuestError(format!("{code:?}"))
    }

    /// Classifies an error from instantiating or calling a guest, with
    /// what its store's memory limiter saw.
    pub fn classify(error: &wasmtime::Error, memory: &crate::state::MemoryCap) -> Self {
        if memory.hit {
            return Self::MemoryCap(format!("{error:#}"));
        }
        match memory.refused {
            Some(crate::share::MemoryRefusal::Tenant) => {
                return Self::OverShare(crate::share::Limit::Memory);
            }
            Some(crate::share::MemoryRefusal::Host) => return Self::MemoryExhausted,
            None => {}
        }
        if let Some(trap) = error.downcast_ref::<wasmtime::Trap>() {
            if *trap == wasmtime::Trap::Interrupt {
                return Self::Deadline;
            }
            return Self::Trap(format!("{error:#}"));
        }
        if error
            .downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
            .is_some()
        {
            return Self::PoolExhausted;
        }
        Self::Trap(format!("{error:#}"))
    }

    /// The response a client gets for this failure: a status and fixed
    /// words. Component ids, tenant names, paths and guest errors stay in
    /// the log (see [`crate::invoke::count_failure`]).
    pub fn response(&self) -> Response<Body> {
        let retry = |status, words: &str| {
            let mut r = text(status, words);
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            r
        };
        match self {
            Self::Deadline => text(
                StatusCode::GATEWAY_TIMEOUT,
                "the component exceeded its deadline and was stopped",
            ),
            Self::ClientTimeout => text(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time",
            ),
            Self::MemoryCap(_) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the component exceeded its memory limit and was stopped",
            ),
            Self::Trap(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "the component failed"),
            Self::PoolExhausted => retry(
                StatusCode::SERVICE_UNAVAILABLE,
                "no free instance slot; try again shortly",
            ),
            Self::MemoryExhausted => retry(
                StatusCode::SERVICE_UNAVAILABLE,
                "no free memory for the component; try again shortly",
            ),
            Self::NoResponse => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the component returned without a response",
            ),
            Self::GuestError(_) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the component answered with an error",
            ),
            Self::BodyTooLarge(cap) => text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body exceeds {cap} bytes"),
            ),
            Self::BadRequest(why) => text(StatusCode::BAD_REQUEST, why.clone()),
            Self::Unauthorized(why) => {
                let mut r = text(StatusCode::UNAUTHORIZED, why.clone());
                r.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                r
            }
            Self::SessionsFull(_) => retry(
                StatusCode::SERVICE_UNAVAILABLE,
                "no session capacity for this route; retry later",
            ),
            Self::Unavailable(_) => retry(
                StatusCode::SERVICE_UNAVAILABLE,
                "the component is unavailable",
            ),
            Self::OverShare(crate::share::Limit::SessionRate) => retry(
                StatusCode::TOO_MANY_REQUESTS,
                "too many new sessions (session_rate); retry later",
            ),
            Self::OverShare(limit) => retry(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("over this site's share ({}); retry later", limit.key()),
            ),
            Self::QueueTimeout => retry(
                StatusCode::SERVICE_UNAVAILABLE,
                "the request waited too long for its session; retry later",
            ),
            Self::Internal(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
        }
    }
}
