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
//! or failed drops its connection. Idle connections are listed per worker
//! thread (their I/O a task of the runtime they were made on, the
//! tenant's work: charged to it), reused only on the lane whose runtime
//! drives them (a background one never serves the tenant's front
//! requests: [`Driven`]), at most [`MAX_IDLE_PER_OWNER`] per
//! owner and [`MAX_IDLE`] in all, for at most [`IDLE_FOR`] (expired ones
//! are dropped whenever a connection is returned). If the origin closed an
//! idle connection just as a request is sent on it, hyper hands the unsent
//! request back and it goes out on a new connection; if it was already
//! written, a request without a body and of a method that may be repeated
//! (GET, HEAD, OPTIONS) is sent again on a new connection.
//!
//! The timeouts of the guest's request options apply as in Wasmtime's
//! sender: connect (DNS, TCP, TLS and the HTTP handshake), first byte, and
//! between bytes of the body.
//!
//! A new connection goes to an address the name resolved to that the
//! tenant's [`AddressPolicy`] accepts, connected to by that address (never
//! looked up again); an idle connection is reused only if its peer is still
//! accepted (a reload may have closed a range).

use crate::address::AddressPolicy;
use crate::limit::{Permit, TenantOutbound};
use edge_blocking::TenantWork;
use http_body::{Body, Frame};
use hyper::client::conn::http1::SendRequest;
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
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
/// not, and the normalized host and port.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Origin {
    owner: Arc<str>,
    tls: bool,
    host: String,
    port: u16,
}

struct Idle {
    sender: SendRequest<WasiBody>,
    peer: SocketAddr,
    driven: Driven,
    since: Instant,
}

/// A connection made for a request: its sender, its peer, and which
/// runtime drives it.
struct Connected {
    sender: SendRequest<WasiBody>,
    peer: SocketAddr,
    driven: Driven,
}

/// Which lane's runtime drives a connection: the one its socket was
/// registered with (its reactor) and its I/O task spawned on. A send is
/// paced ([`TenantWork::paced`]): it can move between the lanes between
/// any two polls, so the two may differ. A connection is reused only on
/// the lane that drives it wholly: a background one reused by the tenant's
/// front requests would have them framed at `SCHED_IDLE`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Driven {
    Front,
    Background,
    Mixed,
}

impl Driven {
    /// The lane of the runtime the calling thread runs.
    fn here() -> Self {
        if edge_blocking::on_background_runtime() {
            Driven::Background
        } else {
            Driven::Front
        }
    }

    fn and(self, other: Driven) -> Driven {
        if self == other { self } else { Driven::Mixed }
    }
}

/// Where a request goes, as the policy read it from the request's URI.
#[derive(Debug, Clone)]
pub struct Destination {
    /// The host, parsed (and normalized) as a WHATWG URL host.
    pub host: url::Host<String>,
    /// The host as text: what the allowlist matched.
    pub name: String,
    /// The port (the scheme's default if the URI names none).
    pub port: u16,
    /// `https`.
    pub tls: bool,
}

/// One request's sender: whose it is, where it goes, what it may reach,
/// and its place among the tenant's requests in flight (held until the
/// response body is finished or dropped).
#[derive(Debug)]
pub struct Call {
    /// `tenant/component`, for the pool and the log.
    pub owner: Arc<str>,
    /// Where to.
    pub destination: Destination,
    /// Which addresses may be connected to.
    pub addresses: AddressPolicy,
    /// The tenant's counters.
    pub tenant: Arc<TenantOutbound>,
    /// The request's place under the tenant's cap.
    pub permit: Permit,
}

thread_local! {
    static IDLE: RefCell<HashMap<Origin, Vec<Idle>>> = RefCell::default();
}

/// The response and the I/O future the hook returns.
pub type Sent = (
    http::Response<WasiBody>,
    Box<dyn Future<Output = Result<(), Error>> + Send>,
);

/// Sends `request` for `call`'s owner (`tenant/component`), on an idle
/// connection of the owner's to its origin if there is one.
pub async fn send(
    call: Call,
    request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<Sent, Error> {
    let origin = Origin {
        owner: call.owner.clone(),
        tls: call.destination.tls,
        host: call.destination.name.clone(),
        port: call.destination.port,
    };
    let option = |f: fn(&RequestOptions) -> Option<Duration>| {
        options.as_ref().and_then(f).unwrap_or(DEFAULT_TIMEOUT)
    };
    let mut request = request.map(drained_when_dropped);
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
    while let Some((mut sender, peer, driven)) = take_idle(&origin, &call.addresses, deadline).await
    {
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
                let home = Home {
                    sender,
                    origin,
                    peer,
                    driven,
                };
                return Ok(respond(response, home, call.permit, between_bytes_timeout));
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
    let Connected {
        mut sender,
        peer,
        driven,
    } = tokio::time::timeout(connect_timeout, connect(&call))
        .await
        .map_err(|_| Error::ConnectionTimeout)??;
    let response = tokio::time::timeout(
        first_byte_timeout,
        sender.send_request(pending.take().expect("a request to send")),
    )
    .await
    .map_err(|_| Error::ConnectionReadTimeout)?
    .map_err(Error::from)?;
    let home = Home {
        sender,
        origin,
        peer,
        driven,
    };
    Ok(respond(response, home, call.permit, between_bytes_timeout))
}

/// The most recently idle connection to `origin` still usable (driven by
/// this thread's lane, and whose peer `addresses` still accepts), looked for until `deadline` (the
/// guest's connect timeout).
async fn take_idle(
    origin: &Origin,
    addresses: &AddressPolicy,
    deadline: Instant,
) -> Option<(SendRequest<WasiBody>, SocketAddr, Driven)> {
    loop {
        let Idle {
            mut sender,
            peer,
            driven,
            since,
        } = IDLE.with_borrow_mut(|idle| idle.get_mut(origin)?.pop())?;
        if since.elapsed() >= IDLE_FOR
            || sender.is_closed()
            || driven != Driven::here()
            || addresses.check(peer).is_err()
        {
            continue;
        }
        // A body that just ended may leave the connection a moment from
        // taking the next request; one that will not take it fails here.
        let wait = READY_WITHIN.min(deadline.saturating_duration_since(Instant::now()));
        if let Ok(Ok(())) = tokio::time::timeout(wait, sender.ready()).await {
            return Some((sender, peer, driven));
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

/// `body`, read to its end after the client is done with it.
///
/// hyper drops a request body as soon as the head says it is complete
/// (`content-length: 0`, or the last declared byte sent); the guest's
/// stream then reports `closed` while the guest is still flushing or
/// checking it, and Spin's Python SDK fails the request on that. Read on
/// in a task instead, discarding, until the guest finishes the body (or its
/// store goes at its deadline); bytes past a declared length are still the
/// guest's error, from the stream's own count.
fn drained_when_dropped(body: WasiBody) -> WasiBody {
    use http_body_util::BodyExt;
    DrainedWhenDropped(Some(body)).boxed_unsync()
}

struct DrainedWhenDropped(Option<WasiBody>);

impl http_body::Body for DrainedWhenDropped {
    type Data = bytes::Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        match self.0.as_mut() {
            Some(body) => std::pin::Pin::new(body).poll_frame(cx),
            None => std::task::Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.0.as_ref().map(|b| b.size_hint()).unwrap_or_default()
    }
}

impl Drop for DrainedWhenDropped {
    fn drop(&mut self) {
        use http_body_util::BodyExt;
        let Some(mut body) = self.0.take() else {
            return;
        };
        if body.is_end_stream() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { while let Some(Ok(_)) = body.frame().await {} });
        }
    }
}

fn empty_body() -> WasiBody {
    use http_body_util::BodyExt;
    http_body_util::Empty::new()
        .map_err(|e: std::convert::Infallible| match e {})
        .boxed_unsync()
}

/// How long an idle connection may take to be ready for a request.
const READY_WITHIN: Duration = Duration::from_millis(100);

fn put_idle(home: Home) {
    let Home {
        sender,
        origin,
        peer,
        driven,
    } = home;
    // Put back on a thread of the lane that drives it, or not at all.
    if driven != Driven::here() || sender.is_closed() {
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
                peer,
                driven,
                since: Instant::now(),
            });
        }
    });
}

/// A new connection: DNS, TCP to the first accepted address that
/// answers, TLS for `https`, the HTTP/1.1 handshake. The connection's I/O
/// runs as a task of this thread's runtime, the tenant's work, until both
/// ends are done with it.
async fn connect(call: &Call) -> Result<Connected, Error> {
    let d = &call.destination;
    let resolved: Vec<SocketAddr> = match &d.host {
        url::Host::Ipv4(a) => vec![SocketAddr::new(IpAddr::V4(*a), d.port)],
        url::Host::Ipv6(a) => vec![SocketAddr::new(IpAddr::V6(*a), d.port)],
        url::Host::Domain(name) => {
            crate::lookup::resolve(call.tenant.clone(), name.clone(), d.port)
                .await
                .map_err(|e| Error::DnsError {
                    rcode: Some(e.to_string()),
                    info_code: None,
                })?
        }
    };
    let mut accepted = Vec::new();
    let mut refused = None;
    for addr in resolved {
        match call.addresses.check(addr) {
            Ok(a) if !accepted.contains(&a) => accepted.push(a),
            Ok(_) => {}
            Err(why) => refused = refused.or(Some(why)),
        }
    }
    if accepted.is_empty() {
        return Err(match refused {
            Some(why) => prohibited(call, &why),
            None => Error::DestinationNotFound,
        });
    }
    let mut failed = None;
    let mut tcp = None;
    for addr in accepted {
        // The socket is registered with this runtime's reactor in the
        // connect's first poll, the one this line is in.
        let registered = Driven::here();
        match TcpStream::connect(addr).await {
            Ok(t) => {
                tcp = Some((t, addr, registered));
                break;
            }
            Err(e) => failed = Some(e),
        }
    }
    let Some((tcp, peer, registered)) = tcp else {
        return Err(Error::Connect(failed.unwrap_or_else(|| {
            std::io::Error::from(std::io::ErrorKind::ConnectionRefused)
        })));
    };
    // Listeners bound to every address are reached under any address of
    // this machine: known only now, from the connection's own end.
    if let Ok(local) = tcp.local_addr()
        && let Err(why) = call.addresses.check_connected(local, peer)
    {
        return Err(prohibited(call, &why));
    }
    let _ = tcp.set_nodelay(true);
    let work = call.tenant.work();
    let (sender, spawned) = if d.tls {
        let name = server_name(&d.host)?;
        let tls = tokio_rustls::TlsConnector::from(tls_config())
            .connect(name, tcp)
            .await
            .map_err(Error::Tls)?;
        handshake(tls, &work).await?
    } else {
        handshake(tcp, &work).await?
    };
    Ok(Connected {
        sender,
        peer,
        driven: registered.and(spawned),
    })
}

/// Counts and logs an address refusal; the guest's error.
fn prohibited(call: &Call, why: &crate::address::Refused) -> Error {
    call.tenant
        .refused_address
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tracing::warn!(
        component = %call.owner,
        host = %call.destination.name,
        port = call.destination.port,
        reason = %why,
        "outbound request refused: destination address not allowed (see outbound.allow_ranges)"
    );
    Error::DestinationIpProhibited
}

/// The HTTP/1.1 handshake over `io`; the connection's task is spawned as
/// the tenant's `work` (its TLS records and HTTP framing are its CPU) on
/// the runtime of the lane it returns.
async fn handshake<T>(io: T, work: &TenantWork) -> Result<(SendRequest<WasiBody>, Driven), Error>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .handshake(TokioIo::new(io))
        .await?;
    let spawned = Driven::here();
    work.spawn_async_here(async move {
        // Its errors reach the request's sender and body.
        let _ = conn.await;
    });
    Ok((sender, spawned))
}

/// Client TLS settings (Mozilla's roots via webpki-roots), built once;
/// the CLI's client of the control API uses them too.
pub fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG.get_or_init(|| trusting(public_roots())).clone()
}

/// Mozilla's roots (webpki-roots).
fn public_roots() -> rustls::RootCertStore {
    rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    }
}

/// Client TLS settings trusting `roots`, no client certificate.
fn trusting(roots: rustls::RootCertStore) -> Arc<rustls::ClientConfig> {
    Arc::new(
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// [`tls_config`]'s public roots and the certificate authorities in the
/// PEM file at `path` (a private CA an operator's API is served under);
/// what is wrong with the file, in words.
pub fn tls_config_trusting(path: &std::path::Path) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let mut roots = public_roots();
    let shown = path.display();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("reading the CA certificates {shown}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{shown}: not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "{shown} holds no certificate (PEM, \"-----BEGIN CERTIFICATE-----\")"
        ));
    }
    for (i, cert) in certs.into_iter().enumerate() {
        roots.add(cert).map_err(|e| {
            format!(
                "{shown}: certificate {} is not a CA certificate rustls can use: {e}",
                i + 1
            )
        })?;
    }
    Ok(trusting(roots))
}

fn server_name(host: &url::Host<String>) -> Result<rustls::pki_types::ServerName<'static>, Error> {
    use rustls::pki_types::ServerName;
    match host {
        url::Host::Ipv4(a) => Ok(ServerName::from(IpAddr::V4(*a))),
        url::Host::Ipv6(a) => Ok(ServerName::from(IpAddr::V6(*a))),
        url::Host::Domain(d) => ServerName::try_from(d.clone()).map_err(Error::InvalidDnsNameError),
    }
}

/// A connection and where it goes back to once its response is read.
struct Home {
    sender: SendRequest<WasiBody>,
    origin: Origin,
    peer: SocketAddr,
    driven: Driven,
}

fn respond(
    response: http::Response<hyper::body::Incoming>,
    home: Home,
    permit: Permit,
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
            home: Some(home),
            _permit: permit,
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
    home: Option<Home>,
    /// The request counts as in flight until its body is dropped.
    _permit: Permit,
}

impl PooledBody {
    /// Gives the connection back once the body is known to be over (a
    /// reader may stop at `is_end_stream` without polling to the end).
    fn home_if_done(&mut self) {
        if self.incoming.is_end_stream()
            && let Some(home) = self.home.take()
        {
            put_idle(home);
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
                if let Some(home) = self.home.take() {
                    put_idle(home);
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

    /// A call as `owner` to `url`, with loopback allowed.
    fn call(owner: &str, url: &str) -> Call {
        let uri: http::Uri = url.parse().unwrap();
        let host = url::Host::parse(uri.host().unwrap()).unwrap();
        let tenant = Arc::new(TenantOutbound::new("a", 64));
        Call {
            owner: owner.into(),
            destination: Destination {
                name: host.to_string(),
                host,
                port: uri.port_u16().unwrap_or(80),
                tls: false,
            },
            addresses: AddressPolicy::new(vec!["127.0.0.0/8".parse().unwrap()], Default::default()),
            permit: tenant.acquire().unwrap(),
            tenant,
        }
    }

    async fn read_as(owner: &str, url: &str) -> usize {
        let (response, _io) = send(call(owner, url), get(url), None).await.unwrap();
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

    #[test]
    fn a_connection_is_reused_only_on_the_lane_that_drives_it() {
        // This test's runtimes play the two lanes; the requests of both
        // run on this thread, with one list of idle connections.
        let back = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let front = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        edge_blocking::set_background(back.handle().clone());
        /// Forgets the background runtime however the test ends.
        struct Forget(tokio::runtime::Id);
        impl Drop for Forget {
            fn drop(&mut self) {
                edge_blocking::clear_background(self.0);
            }
        }
        let _forget = Forget(back.handle().id());
        let (url, accepted) = back.block_on(origin(10, false));
        let read_on = |rt: &tokio::runtime::Runtime| {
            assert_eq!(rt.block_on(read_as("k/rewriter", &url)), 10);
            accepted.load(Ordering::SeqCst)
        };
        assert_eq!(read_on(&back), 1);
        assert_eq!(read_on(&back), 1, "kept on its lane");
        assert_eq!(read_on(&front), 2, "a background connection on the front");
        assert_eq!(read_on(&front), 2, "kept on its lane");
        assert_eq!(read_on(&back), 3, "a front connection on the background");
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
        let (response, _io) = send(call("a/rewriter", &url), get(&url), None)
            .await
            .unwrap();
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
            send(call("a/rewriter", &url), get(&url), None).await,
            Err(Error::Connect(_))
        ));
    }

    #[tokio::test]
    async fn a_refused_address_is_never_connected_to() {
        let (url, accepted) = origin(10, false).await;
        let mut c = call("a/rewriter", &url);
        c.addresses = AddressPolicy::default();
        let tenant = c.tenant.clone();
        assert!(matches!(
            send(c, get(&url), None).await,
            Err(Error::DestinationIpProhibited)
        ));
        assert_eq!(accepted.load(Ordering::SeqCst), 0);
        assert_eq!(tenant.refused_address.load(Ordering::SeqCst), 1);
        // `localhost` resolves to loopback only: refused by name as well.
        let by_name = url.replace("127.0.0.1", "localhost");
        let mut c = call("a/rewriter", &by_name);
        c.addresses = AddressPolicy::default();
        assert!(matches!(
            send(c, get(&by_name), None).await,
            Err(Error::DestinationIpProhibited)
        ));
        assert_eq!(accepted.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn an_idle_connection_is_not_reused_once_its_range_is_closed() {
        let (url, accepted) = origin(10, false).await;
        assert_eq!(read_as("c/rewriter", &url).await, 10);
        let mut c = call("c/rewriter", &url);
        c.addresses = AddressPolicy::default();
        assert!(matches!(
            send(c, get(&url), None).await,
            Err(Error::DestinationIpProhibited)
        ));
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn the_policy_sends_for_the_host_as_for_a_guest() {
        use crate::OutboundPolicy;
        let (url, accepted) = origin(10, false).await;
        let authority = url.trim_start_matches("http://").trim_end_matches("/page");
        let rule = edge_config::OutboundRule::parse(&format!("http://{authority}")).unwrap();
        let tenant = Arc::new(TenantOutbound::new("e", 1));
        let policy = OutboundPolicy::new(vec![rule], "e/rewriter")
            .with_addresses(AddressPolicy::new(
                vec!["127.0.0.1/32".parse().unwrap()],
                Default::default(),
            ))
            .with_tenant(tenant.clone());
        let (response, _io) = policy.send(get(&url), None).await.unwrap();
        // The response holds the tenant's one place: a second request
        // over the cap is refused before anything is sent.
        assert!(matches!(
            policy.send(get(&url), None).await,
            Err(Error::ConnectionLimitReached)
        ));
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body.len(), 10);
        // Not in the allowlist: refused by name.
        let elsewhere = url.replace("127.0.0.1", "127.0.0.2");
        assert!(matches!(
            policy.send(get(&elsewhere), None).await,
            Err(Error::HttpRequestDenied)
        ));
        // Allowed by name, but outside the tenant's ranges: never connected.
        let closed = policy.clone().with_addresses(AddressPolicy::default());
        assert!(matches!(
            closed.send(get(&url), None).await,
            Err(Error::DestinationIpProhibited)
        ));
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    /// A lane that counts what is run in it: tasks paced, their polls,
    /// blocking work charged.
    #[derive(Default)]
    struct Counting {
        paced: AtomicUsize,
        polls: AtomicUsize,
        charged: AtomicUsize,
    }

    impl edge_blocking::Lane for Counting {
        fn charge(&self, _cpu: Duration) {
            self.charged.fetch_add(1, Ordering::SeqCst);
        }
        fn in_background(&self) -> bool {
            false
        }
        fn long_task(&self) {}
        fn pace(self: Arc<Self>, mut task: edge_blocking::AsyncWork) -> edge_blocking::AsyncWork {
            self.paced.fetch_add(1, Ordering::SeqCst);
            Box::pin(std::future::poll_fn(move |cx| {
                self.polls.fetch_add(1, Ordering::SeqCst);
                task.as_mut().poll(cx)
            }))
        }
    }

    #[tokio::test]
    async fn a_tenants_send_lookup_and_connection_are_its_work() {
        use crate::OutboundPolicy;
        let (url, accepted) = origin(100_000, false).await;
        let port = url.split(':').nth(2).unwrap().trim_end_matches("/page");
        let by_name = format!("http://localhost:{port}/page");
        let rule = edge_config::OutboundRule::parse(&format!("http://localhost:{port}")).unwrap();
        let policy =
            OutboundPolicy::new(vec![rule], "w/rewriter").with_addresses(AddressPolicy::new(
                vec!["127.0.0.1/32".parse().unwrap(), "::1/128".parse().unwrap()],
                Default::default(),
            ));
        let lane = Arc::new(Counting::default());
        policy
            .tenant()
            .set_work(&edge_blocking::TenantWork::new(lane.clone()));
        let (response, _io) = policy.send(get(&by_name), None).await.unwrap();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body.len(), 100_000);
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        // The send and the connection's I/O, paced; the name's lookup,
        // charged (each poll of its query).
        assert_eq!(lane.paced.load(Ordering::SeqCst), 2);
        assert!(lane.polls.load(Ordering::SeqCst) >= 2);
        assert!(lane.charged.load(Ordering::SeqCst) >= 1);
    }

    #[tokio::test]
    async fn the_permit_is_held_until_the_body_is_dropped() {
        let (url, _) = origin(1_000_000, false).await;
        let c = call("d/rewriter", &url);
        let tenant = c.tenant.clone();
        let (response, _io) = send(c, get(&url), None).await.unwrap();
        // The call's permit, plus none: the tenant (cap 64) has one in flight.
        let held: Vec<_> = (0..63).filter_map(|_| tenant.acquire()).collect();
        assert_eq!(held.len(), 63);
        assert!(tenant.acquire().is_none());
        drop(response);
        assert!(tenant.acquire().is_some());
    }
}
