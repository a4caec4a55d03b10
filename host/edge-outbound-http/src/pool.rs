//! Origin connections kept alive between requests.
//!
//! Wasmtime's `default_send_request` opens a TCP connection for every
//! outbound request (and a TLS session, with the root store built anew) and
//! drops it after. A proxy in front of an origin sends it request after
//! request, so here an HTTP/1.1 connection whose response body was read to
//! its end goes back to an idle list of its origin, and the next request to
//! that origin takes it: no connect, no TLS handshake, no slow start.
//!
//! A connection is only reused by the same tenant's component (tenants are
//! hostile: no connection state crosses from one to another), and only
//! when nothing of the previous exchange is left: the body reached its end
//! without error. A body dropped half-read
//! or failed drops its connection. Idle connections are per worker thread
//! (the worker's runtime drives them), at most [`MAX_IDLE_PER_OWNER`] per
//! owner and [`MAX_IDLE`] in all, for at most [`IDLE_FOR`] (expired ones
//! are dropped whenever a connection is returned). If the origin closed an
//! idle connection just as a request is sent on it, hyper hands the unsent
//! request back and it goes out on a new connection; if it was already
//! written, a request without a body and of a method that may be repeated
//! (GET, HEAD, OPTIONS) is sent again on a new connection.
//!
//! The timeouts of the guest's request options apply as in Wasmtime's
//! sender: connect (TCP, TLS and the HTTP handshake), first byte, and
//! between bytes of the body.

use http::uri::Scheme;
use http_body::{Body, Frame};
use hyper::client::conn::http1::SendRequest;
use std::cell::RefCell;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

/// Idle connections kept per worker thread and owner (tenant/component):
/// a tenant that talks to many origins (wildcard rules) cannot hold more
/// sockets open than this.
pub const MAX_IDLE_PER_OWNER: usize = 16;
/// Idle connections kept per worker thread in all.
pub const MAX_IDLE: usize = 256;
/// How long an idle connection is kept: under the shortest keep-alive
/// timeouts servers commonly use (Apache's and Node's 5 s; nginx's 75 s),
/// so the origin does not close it just as it is reused.
pub const IDLE_FOR: Duration = Duration::from_secs(4);
/// Timeouts the guest did not set (Wasmtime's defaults).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Whose connection it is (`tenant/component`) and where it goes: TLS or
/// not, and `host:port`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Origin {
    owner: Arc<str>,
    tls: bool,
    authority: String,
}

struct Idle {
    sender: SendRequest<WasiBody>,
    since: Instant,
}

thread_local! {
    static IDLE: RefCell<HashMap<Origin, Vec<Idle>>> = RefCell::default();
}

/// The response and the I/O future the hook returns.
pub type Sent = (
    http::Response<WasiBody>,
    Box<dyn Future<Output = Result<(), Error>> + Send>,
);

/// Sends `request` for `owner` (`tenant/component`), on an idle
/// connection of the owner's to its origin if there is one.
pub async fn send(
    owner: Arc<str>,
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<Sent, Error> {
    let uri = request.uri();
    let authority = uri.authority().ok_or(Error::HttpRequestUriInvalid)?;
    let tls = uri.scheme() == Some(&Scheme::HTTPS);
    let authority = match authority.port() {
        Some(_) => authority.to_string(),
        None => format!("{authority}:{}", if tls { 443 } else { 80 }),
    };
    let origin = Origin {
        owner,
        tls,
        authority,
    };
    let option = |f: fn(&RequestOptions) -> Option<Duration>| {
        options.as_ref().and_then(f).unwrap_or(DEFAULT_TIMEOUT)
    };
    let connect_timeout = option(|o| o.connect_timeout);
    let first_byte_timeout = option(|o| o.first_byte_timeout);
    let between_bytes_timeout = option(|o| o.between_bytes_timeout).max(Duration::new(0, 1));
    // On the wire the request names only the path (origin form).
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(request.uri().path_and_query().map_or("/", |p| p.as_str()))
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;

    // A request that may be sent again if an idle connection fails it
    // after writing it (then hyper cannot hand it back).
    let repeatable = matches!(
        *request.method(),
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    ) && request.body().is_end_stream();
    let mut again = None;
    let mut pending = Some(request);
    let deadline = Instant::now() + connect_timeout;
    while let Some(mut sender) = take_idle(&origin, deadline).await {
        let request = pending.take().expect("a request to send");
        if repeatable && again.is_none() {
            // Copied only when a reused connection is tried.
            again = Some(head_of(&request));
        }
        let sent = tokio::time::timeout(first_byte_timeout, sender.try_send_request(request))
            .await
            .map_err(|_| Error::ConnectionReadTimeout)?;
        match sent {
            Ok(response) => {
                return Ok(respond(response, sender, origin, between_bytes_timeout));
            }
            Err(mut e) => match (e.take_message(), &again) {
                // Not sent (the origin closed the connection meanwhile):
                // try the next one.
                (Some(unsent), _) => pending = Some(unsent),
                (None, Some(head)) => pending = Some(head.clone().map(|()| empty_body())),
                (None, None) => return Err(Error::from(e.into_error())),
            },
        }
    }
    let mut sender = tokio::time::timeout(connect_timeout, connect(&origin))
        .await
        .map_err(|_| Error::ConnectionTimeout)??;
    let response = tokio::time::timeout(
        first_byte_timeout,
        sender.send_request(pending.take().expect("a request to send")),
    )
    .await
    .map_err(|_| Error::ConnectionReadTimeout)?
    .map_err(Error::from)?;
    Ok(respond(response, sender, origin, between_bytes_timeout))
}

/// The most recently idle connection to `origin` still usable, looked
/// for until `deadline` (the guest's connect timeout).
async fn take_idle(origin: &Origin, deadline: Instant) -> Option<SendRequest<WasiBody>> {
    loop {
        let Idle { mut sender, since } =
            IDLE.with_borrow_mut(|idle| idle.get_mut(origin)?.pop())?;
        if since.elapsed() >= IDLE_FOR || sender.is_closed() {
            continue;
        }
        // A body that just ended may leave the connection a moment from
        // taking the next request; one that will not take it fails here.
        let wait = READY_WITHIN.min(deadline.saturating_duration_since(Instant::now()));
        if let Ok(Ok(())) = tokio::time::timeout(wait, sender.ready()).await {
            return Some(sender);
        }
    }
}

/// A request's method, URI, version and headers, without its body.
fn head_of(request: &http::Request<WasiBody>) -> http::Request<()> {
    let mut head = http::Request::new(());
    *head.method_mut() = request.method().clone();
    *head.uri_mut() = request.uri().clone();
    *head.version_mut() = request.version();
    *head.headers_mut() = request.headers().clone();
    head
}

fn empty_body() -> WasiBody {
    use http_body_util::BodyExt;
    http_body_util::Empty::new()
        .map_err(|e: std::convert::Infallible| match e {})
        .boxed_unsync()
}

/// How long an idle connection may take to be ready for a request.
const READY_WITHIN: Duration = Duration::from_millis(100);

fn put_idle(origin: Origin, sender: SendRequest<WasiBody>) {
    if sender.is_closed() {
        return;
    }
    IDLE.with_borrow_mut(|idle| {
        // Drop what expired or closed everywhere (dropping a sender closes
        // its idle connection), then count.
        idle.retain(|_, list| {
            list.retain(|i| i.since.elapsed() < IDLE_FOR && !i.sender.is_closed());
            !list.is_empty()
        });
        let (mut all, mut owners) = (0, 0);
        for (o, list) in idle.iter() {
            all += list.len();
            if o.owner == origin.owner {
                owners += list.len();
            }
        }
        if all < MAX_IDLE && owners < MAX_IDLE_PER_OWNER {
            idle.entry(origin).or_default().push(Idle {
                sender,
                since: Instant::now(),
            });
        }
    });
}

/// A new connection: TCP, TLS for `https`, the HTTP/1.1 handshake. The
/// connection's I/O runs as a task of this thread's runtime until both
/// ends are done with it.
async fn connect(origin: &Origin) -> Result<SendRequest<WasiBody>, Error> {
    let tcp = TcpStream::connect(&origin.authority)
        .await
        .map_err(Error::Connect)?;
    let _ = tcp.set_nodelay(true);
    if !origin.tls {
        return handshake(tcp).await;
    }
    let name = server_name(&origin.authority)?;
    let tls = tokio_rustls::TlsConnector::from(tls_config())
        .connect(name, tcp)
        .await
        .map_err(Error::Tls)?;
    handshake(tls).await
}

/// The HTTP/1.1 handshake over `io`; the connection's task is spawned.
async fn handshake<T>(io: T) -> Result<SendRequest<WasiBody>, Error>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .handshake(TokioIo::new(io))
        .await?;
    tokio::spawn(conn);
    Ok(sender)
}

/// Client TLS settings (Mozilla's roots via webpki-roots), built once.
fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            };
            Arc::new(
                rustls::ClientConfig::builder()
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            )
        })
        .clone()
}

fn server_name(authority: &str) -> Result<rustls::pki_types::ServerName<'static>, Error> {
    use rustls::pki_types::ServerName;
    if let Ok(addr) = authority.parse::<std::net::SocketAddr>() {
        return Ok(ServerName::from(addr.ip()));
    }
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    ServerName::try_from(host.to_owned()).map_err(Error::InvalidDnsNameError)
}

fn respond(
    response: http::Response<hyper::body::Incoming>,
    sender: SendRequest<WasiBody>,
    origin: Origin,
    between_bytes: Duration,
) -> Sent {
    let mut timeout = tokio::time::interval(between_bytes);
    timeout.reset();
    let mut response = response;
    crate::strip_connection_listed(response.headers_mut());
    let response = response.map(|incoming| {
        let mut body = PooledBody {
            incoming,
            timeout,
            home: Some((sender, origin)),
        };
        body.home_if_done(); // no body at all (204, HEAD)
        http_body_util::BodyExt::boxed_unsync(body)
    });
    // The connection's I/O is a task of its own (it outlives the request).
    (response, Box::new(async { Ok(()) }))
}

/// A response body that gives its connection back once read to the end.
struct PooledBody {
    incoming: hyper::body::Incoming,
    timeout: tokio::time::Interval,
    /// The connection and its origin, until the body ends.
    home: Option<(SendRequest<WasiBody>, Origin)>,
}

impl PooledBody {
    /// Gives the connection back once the body is known to be over (a
    /// reader may stop at `is_end_stream` without polling to the end).
    fn home_if_done(&mut self) {
        if self.incoming.is_end_stream()
            && let Some((sender, origin)) = self.home.take()
        {
            put_idle(origin, sender);
        }
    }
}

impl Body for PooledBody {
    type Data = bytes::Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(None) => {
                if let Some((sender, origin)) = self.home.take() {
                    put_idle(origin, sender);
                }
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                self.home = None;
                Poll::Ready(Some(Err(if e.is_timeout() {
                    Error::HttpResponseTimeout
                } else {
                    Error::from(e)
                })))
            }
            Poll::Ready(Some(Ok(frame))) => {
                self.timeout.reset();
                self.home_if_done();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(self.timeout.poll_tick(cx));
                self.home = None;
                Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.incoming.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Empty, Full};
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An origin on loopback answering `size` bytes to every request, with
    /// `Connection: close` if `close`; counts the connections it accepted.
    async fn origin(size: usize, close: bool) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/page", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |_req| async move {
                        let mut response =
                            http::Response::new(Full::new(bytes::Bytes::from(vec![b'x'; size])));
                        if close {
                            response
                                .headers_mut()
                                .insert("connection", "close".parse().unwrap());
                        }
                        Ok::<_, Infallible>(response)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        (url, accepted)
    }

    fn get(url: &str) -> http::Request<WasiBody> {
        http::Request::get(url)
            .body(
                Empty::new()
                    .map_err(|e: Infallible| match e {})
                    .boxed_unsync(),
            )
            .unwrap()
    }

    async fn read_all(url: &str) -> usize {
        read_as("a/rewriter", url).await
    }

    async fn read_as(owner: &str, url: &str) -> usize {
        let (response, _io) = send(owner.into(), get(url), None).await.unwrap();
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .len()
    }

    /// Connections the origin accepted for `reads` requests, each read to
    /// the end.
    async fn connections_for(reads: usize, size: usize, close: bool) -> usize {
        let (url, accepted) = origin(size, close).await;
        for _ in 0..reads {
            assert_eq!(read_all(&url).await, size);
        }
        accepted.load(Ordering::SeqCst)
    }

    #[tokio::test]
    async fn a_connection_read_to_the_end_is_reused() {
        assert_eq!(connections_for(3, 100_000, false).await, 1);
    }

    #[tokio::test]
    async fn an_empty_body_gives_its_connection_back_at_once() {
        assert_eq!(connections_for(3, 0, false).await, 1);
    }

    #[tokio::test]
    async fn tenants_do_not_share_connections() {
        let (url, accepted) = origin(10, false).await;
        for owner in ["a/rewriter", "b/rewriter", "a/rewriter", "b/rewriter"] {
            assert_eq!(read_as(owner, &url).await, 10);
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_body_left_unread_closes_its_connection() {
        let (url, accepted) = origin(1_000_000, false).await;
        let (response, _io) = send("a/rewriter".into(), get(&url), None).await.unwrap();
        drop(response); // the rest of the body is still on the wire
        assert_eq!(read_all(&url).await, 1_000_000);
        assert_eq!(read_all(&url).await, 1_000_000);
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn connections_the_origin_closes_are_not_reused() {
        assert_eq!(connections_for(3, 10, true).await, 3);
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        drop(listener);
        assert!(matches!(
            send("a/rewriter".into(), get(&url), None).await,
            Err(Error::Connect(_))
        ));
    }
}
