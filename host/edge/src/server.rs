//! The HTTP front: accept connections, route each request to its tenant and
//! component, and answer. Request phases, in order:
//!
//! 1. **host** → tenant (404 if none);
//! 2. **path** → route (404 if none);
//! 3. **body cap** (413);
//! 4. **share**: the tenant's requests in flight (503);
//! 5. **instance**: per-request or pinned session, under the tenant's
//!    instance and session shares;
//! 6. **response** streamed back while the guest may still write.
//!
//! Malformed HTTP (400) and oversized heads (431) are answered by hyper
//! before phase 1.

use crate::app::{App, Runtime};
use crate::body::{BodyLimits, CappedBody, ClientPace};
use crate::conn::{Activity, TimedIo};
use crate::invoke;
use crate::respond::{self, Body, Failure};
use crate::routes::Matched;
use crate::share::Limit;
use anyhow::Result;
use arc_swap::ArcSwap;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore, watch};

/// State shared by every connection: the runtime and the app now serving.
pub struct Shared {
    /// Process-wide runtime.
    pub runtime: Runtime,
    /// The app now serving; swapped whole on reload.
    pub app: ArcSwap<App>,
    /// Set while draining for shutdown.
    pub draining: AtomicBool,
    /// Why the host must stop serving, once it must (the process then
    /// drains and exits with an error).
    pub fatal: std::sync::Mutex<Option<String>>,
    /// Woken when `fatal` is set.
    pub stop: Notify,
    /// Held while an app is built and swapped in (a reload, a deploy), so
    /// one change never builds on top of another half-done one.
    pub changes: std::sync::Mutex<()>,
    /// An app built for a deploy and not serving yet: only its smoke
    /// request reaches it ([`crate::control::PREVIEW_HEADER`]).
    pub preview: arc_swap::ArcSwapOption<crate::control::Preview>,
    /// Where application traffic is served, once bound.
    pub listen_addr: std::sync::OnceLock<std::net::SocketAddr>,
    /// When the node started serving.
    pub started: std::time::Instant,
}

impl Shared {
    /// Shared state around a runtime and the first app.
    pub fn new(runtime: Runtime, app: App) -> Self {
        Self {
            runtime,
            app: ArcSwap::from_pointee(app),
            draining: AtomicBool::new(false),
            fatal: Default::default(),
            stop: Default::default(),
            changes: Default::default(),
            preview: Default::default(),
            listen_addr: Default::default(),
            started: std::time::Instant::now(),
        }
    }

    /// The address application traffic is served on.
    pub fn app_addr(&self) -> Option<std::net::SocketAddr> {
        self.listen_addr.get().copied()
    }

    /// The app a request goes to: the serving one, or the one being
    /// deployed if the request carries that deploy's preview token (the
    /// header is removed either way: guests never see it).
    fn app_for(&self, headers: &mut http::HeaderMap) -> Arc<App> {
        if let Some(token) = headers.remove(crate::control::PREVIEW_HEADER)
            && let Some(p) = self.preview.load_full()
            && token.as_bytes() == p.token.as_bytes()
        {
            return p.app.clone();
        }
        self.app.load_full()
    }

    /// Stops serving for `why`: drains and exits with an error.
    pub fn fail(&self, why: String) {
        tracing::error!(error = %why, "stopping");
        *self.fatal.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
        self.stop.notify_one();
    }

    /// Stops serving if swap was turned on while dropped instances'
    /// memories are reset in place: another tenant's instance could read a
    /// swapped-out page the reset missed.
    pub fn check_swap(&self) {
        if crate::engine::in_place_reset_now_unsafe(self.runtime.resets_in_place) {
            self.fail(
                "swap was turned on after start while pooled memories are reset in place from a \
                 PAGEMAP_SCAN, which misses swapped-out pages: restart edge, which then decommits \
                 them instead"
                    .into(),
            );
        }
    }
}

/// Binds `n` listening sockets to `addr` with `SO_REUSEPORT`, so the kernel
/// spreads new connections over them (port 0: the first picks the port,
/// the rest share it).
pub fn bind_listeners(addr: SocketAddr, n: usize) -> Result<Vec<std::net::TcpListener>> {
    use socket2::{Domain, Protocol, Socket, Type};
    // SO_REUSEPORT would also let a second edge (same user) join the port
    // silently and take half the traffic; a plain bind first makes "address
    // in use" an error, as without it.
    if addr.port() != 0 {
        drop(std::net::TcpListener::bind(addr)?);
    }
    let mut listeners = Vec::with_capacity(n);
    let mut addr = addr;
    for _ in 0..n.max(1) {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(4096)?;
        let listener: std::net::TcpListener = socket.into();
        addr = listener.local_addr()?;
        listeners.push(listener);
    }
    Ok(listeners)
}

/// How many serving threads: `[server] workers`, or one per core.
pub fn worker_count(server: &edge_config::Server) -> usize {
    server
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Serves application traffic thread-per-core: one thread per listener,
/// each with its own single-threaded runtime, sharing nothing but [`Shared`].
/// A connection, its requests and their guests stay on the thread that
/// accepted it, so there is no work stealing and no cross-thread wake-up
/// on the request path (as in nginx, Pingora and Seastar).
pub fn spawn_workers(
    shared: Arc<Shared>,
    listeners: Vec<std::net::TcpListener>,
    shutdown: watch::Receiver<bool>,
) -> Result<Vec<std::thread::JoinHandle<Result<()>>>> {
    // One connection limit for the process, shared by every worker.
    let slots = Arc::new(Semaphore::new(
        shared.app.load().config.server.max_connections,
    ));
    // Every worker is registered before any serves: session pools place
    // instance i on worker i mod workers, and "workers" instances per key
    // count them, so a request must never see only some.
    let registered = Arc::new(std::sync::Barrier::new(listeners.len()));
    listeners
        .into_iter()
        .enumerate()
        .map(|(i, listener)| {
            let shared = shared.clone();
            let shutdown = shutdown.clone();
            let slots = slots.clone();
            let registered = registered.clone();
            let thread = std::thread::Builder::new()
                .name(format!("edge-worker-{i}"))
                .spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build();
                    if let Ok(rt) = &rt {
                        shared.runtime.sessions.add_worker(rt.handle().clone());
                        edge_blocking::add_front(rt.handle().clone());
                    }
                    registered.wait();
                    let rt = rt?;
                    let id = rt.handle().id();
                    let served = rt.block_on(async move {
                        let listener = TcpListener::from_std(listener)?;
                        serve(shared, listener, slots, shutdown).await
                    });
                    edge_blocking::remove_front(id);
                    served
                })?;
            Ok(thread)
        })
        .collect()
}

/// Whether a connection's error is a write that waited past
/// `write_timeout` for the client ([`crate::conn::TimedIo`]).
fn stalled_write(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(e) = source {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        source = e.source();
    }
    false
}

/// Serves application traffic on `listener` until `shutdown` flips, then
/// drains open connections for up to the configured drain timeout.
pub async fn serve(
    shared: Arc<Shared>,
    listener: TcpListener,
    slots: Arc<Semaphore>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<()> {
    let server = shared.app.load().config.server.clone();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(server.header_read_timeout)
        .max_buf_size(server.max_header_bytes)
        // No half-close (hyper's default): a client whose connection ends
        // has given up, and its request is dropped, queued session jobs
        // included (`half_close(true)` would keep running them for a
        // reader that is gone; nginx, too, takes EOF as the client's abort).
        .keep_alive(true);
    if server.http2 {
        // Pings find peers that vanished without closing.
        builder
            .http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(Some(H2_PING_INTERVAL))
            .keep_alive_timeout(H2_PING_INTERVAL)
            // The same cap on a request's head as HTTP/1's (hyper's own
            // default for HTTP/2 is 16 KiB, whatever the config says).
            .max_header_list_size(u32::try_from(server.max_header_bytes).unwrap_or(u32::MAX));
    } else {
        builder = builder.http1_only();
    }
    let builder = Arc::new(builder);
    let open = Arc::new(OpenConnections::default());

    while let Some((permit, stream, peer)) =
        next_connection(&listener, &slots, &mut shutdown).await?
    {
        // Responses are written in one go; Nagle would hold the last
        // segment for up to 40 ms waiting for the client's ACK.
        let _ = stream.set_nodelay(true);
        let for_service = shared.clone();
        let activity = Arc::new(Activity::default());
        let for_requests = activity.clone();
        let lane = crate::lanes::Connection::default();
        let for_lane = lane.clone();
        // Once per connection, not per request: formatting an address is
        // not free.
        let client_addr = HeaderValue::try_from(peer.to_string())
            .expect("a socket address is a valid header value");
        // Connection timeouts and trusted proxies are read per connection,
        // so a reload applies them to the connections that follow.
        let limits = shared.app.load().config.server.clone();
        // A connection from the operator's own proxy: each request names
        // its client.
        let proxies: Option<Arc<[ipnet::IpNet]>> =
            crate::forwarded::is_trusted(&limits.trusted_proxies, peer.ip())
                .then(|| limits.trusted_proxies.as_slice().into());
        let service = service_fn(move |req: Request<Incoming>| {
            let shared = for_service.clone();
            let client_addr = match &proxies {
                Some(trusted) => {
                    let client = crate::forwarded::client(peer, trusted, req.headers());
                    HeaderValue::try_from(client.to_string())
                        .expect("a socket address is a valid header value")
                }
                None => client_addr.clone(),
            };
            let open = for_requests.request();
            let lane = for_lane.clone();
            async move {
                let response = handle(&shared, req, client_addr, &lane).await;
                // Open until its body is sent whole.
                Ok::<_, Infallible>(response.map(|body| crate::conn::Tracked::new(body, open)))
            }
        });
        let builder = builder.clone();
        let metrics = shared.runtime.metrics.clone();
        let mut stop = shutdown.clone();
        let guard = open.enter();
        let background = shared.runtime.background.handle();
        let connection = Box::pin(async move {
            metrics.connections.fetch_add(1, Relaxed);
            if client_spoke(&stream, limits.header_read_timeout).await {
                let io = TimedIo::new(stream, limits.write_timeout);
                let conn = builder.serve_connection(TokioIo::new(io), service);
                let mut conn = std::pin::pin!(conn);
                let mut closing = false;
                // Closed for being idle, the client has `write_timeout` to
                // take what was sent (an HTTP/2 client that never opens its
                // window would hold the connection for good); a drain has
                // its own timeout.
                let mut idle_since: Option<tokio::time::Instant> = None;
                let ended = loop {
                    let closed = async {
                        match idle_since {
                            Some(at) => tokio::time::sleep_until(at + limits.write_timeout).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        r = conn.as_mut() => break r.map_err(|e| (stalled_write(&*e), e.to_string())),
                        _ = activity.stalled(limits.write_timeout) => {
                            break Err((true, "the client stopped taking a response".into()));
                        }
                        _ = closed => break Err((true, "the client did not take what was sent before closing".into())),
                        _ = activity.idle(limits.idle_timeout), if !closing => {
                            // HTTP/2: GOAWAY; HTTP/1: close once idle.
                            closing = true;
                            idle_since = Some(tokio::time::Instant::now());
                            conn.as_mut().graceful_shutdown();
                        }
                        _ = stop.changed(), if !closing => {
                            closing = true;
                            conn.as_mut().graceful_shutdown();
                        }
                    }
                };
                if let Err((stalled, error)) = ended {
                    if stalled {
                        metrics.stalled_clients.fetch_add(1, Relaxed);
                    }
                    tracing::debug!(%error, %peer, "connection ended with an error");
                }
            }
            metrics.connections.fetch_sub(1, Relaxed);
            drop(guard);
            drop(permit);
        });
        // In the lane of the tenant it serves (`crate::lanes`).
        tokio::spawn(crate::lanes::Paced::new(connection, lane, background));
    }

    drop(listener);
    tracing::info!(
        timeout_ms = server.drain_timeout.as_millis() as u64,
        "draining connections"
    );
    if tokio::time::timeout(server.drain_timeout, open.drained())
        .await
        .is_err()
    {
        tracing::warn!("drain timeout passed; closing remaining connections");
    }
    Ok(())
}

/// The connections one worker has open, for draining at shutdown.
#[derive(Default)]
struct OpenConnections {
    count: AtomicUsize,
    changed: Notify,
}

/// Counts a connection as open until dropped.
struct OpenConnection(Arc<OpenConnections>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Relaxed);
        self.0.changed.notify_waiters();
    }
}

impl OpenConnections {
    fn enter(self: &Arc<Self>) -> OpenConnection {
        self.count.fetch_add(1, Relaxed);
        OpenConnection(self.clone())
    }

    /// Resolves once every connection has closed.
    async fn drained(&self) {
        loop {
            let changed = self.changed.notified();
            if self.count.load(Relaxed) == 0 {
                return;
            }
            changed.await;
        }
    }
}

/// Waits for one of `slots`, then for a connection; `None` once `shutdown`
/// flips. Accept errors (out of descriptors and the like) back off rather
/// than spin.
pub async fn next_connection(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<
    Option<(
        tokio::sync::OwnedSemaphorePermit,
        tokio::net::TcpStream,
        std::net::SocketAddr,
    )>,
> {
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p?,
            _ = shutdown.changed() => return Ok(None),
        };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => return Ok(Some((permit, stream, peer))),
                Err(e) => {
                    tracing::warn!(error = %e, addr = ?listener.local_addr().ok(), "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
            _ = shutdown.changed() => return Ok(None),
        }
    }
}

/// How often an HTTP/2 connection is pinged, and how long the answer may
/// take before the connection is closed.
const H2_PING_INTERVAL: std::time::Duration = std::time::Duration::from_secs(20);

/// Waits, up to `within`, until the client has sent enough to tell which
/// protocol it speaks: false if it sent nothing (or closed) in time.
///
/// hyper's protocol detection (HTTP/1.1 or an HTTP/2 preface) reads with
/// no timer, and its `header_read_timeout` starts only after it: a client
/// that connects and stays silent, or sends part of the preface, would
/// hold a connection slot for good and, `max_connections` of them, lock
/// everyone out.
async fn client_spoke(stream: &tokio::net::TcpStream, within: std::time::Duration) -> bool {
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let deadline = tokio::time::Instant::now() + within;
    let mut seen = [0u8; PREFACE.len()];
    loop {
        let n = match tokio::time::timeout_at(deadline, stream.peek(&mut seen)).await {
            Ok(Ok(n)) => n,
            _ => return false,
        };
        if n == 0 {
            return false;
        }
        if n == PREFACE.len() || seen[..n] != PREFACE[..n] {
            return true;
        }
        // Part of the HTTP/2 preface: peek answers at once while those
        // bytes wait (even past the deadline: a timeout polls its future
        // first), so look again a little later, while time is left.
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
    }
}

/// Runs one request through the phases above; `client_addr` is the peer's
/// address, as Spin's `spin-client-addr` header gives it.
pub async fn handle(
    shared: &Shared,
    mut req: Request<Incoming>,
    client_addr: HeaderValue,
    lane: &crate::lanes::Connection,
) -> Response<Body> {
    let started = Instant::now();
    let app = shared.app_for(req.headers_mut());
    let metrics = &shared.runtime.metrics;

    // Phase 1: host → tenant.
    let host = req.uri().authority().map(|a| a.as_str()).or_else(|| {
        req.headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
    });
    let Some(host) = host else {
        return respond::text(StatusCode::BAD_REQUEST, "missing Host header");
    };
    let Some(tenant) = app.tenant(host) else {
        metrics.unrouted_host.fetch_add(1, Relaxed);
        return respond::text(
            StatusCode::NOT_FOUND,
            format!("no tenant serves host {host:?}"),
        );
    };

    // Phase 2: path → route.
    let Some(matched) = tenant.route(host, req.uri().path()) else {
        metrics.unrouted_path.fetch_add(1, Relaxed);
        return respond::text(
            StatusCode::NOT_FOUND,
            format!("no route for {}", req.uri().path()),
        );
    };
    lane.serving(&matched.route.target.share);
    let chain = crate::services::Chain::top(client_addr);
    let mut response = serve_route(&app, &matched, req, chain, started).await;
    // For the Workers calling a Worker: a client never sees it.
    response
        .headers_mut()
        .remove(crate::services::UNCAUGHT_HEADER);
    response
}

/// Phases 3 to 6 of a request whose route is known: a client's, or a
/// service binding's call from another of the tenant's apps
/// ([`crate::services`]), whose `chain` says how deep it is.
pub async fn serve_route<B>(
    app: &App,
    matched: &Matched<'_>,
    req: Request<B>,
    chain: crate::services::Chain,
    started: Instant,
) -> Response<Body>
where
    B: http_body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
    B::Error: Into<wasmtime_wasi_http::Error>,
{
    let target = matched.route.target.clone();
    let answer = |f: Failure| {
        let response = f.response();
        target
            .metrics
            .record(response.status().as_u16(), started.elapsed());
        response
    };

    // Phase 3: body cap. A declared length is checked now; a chunked body
    // is counted as it streams.
    let server = &app.config.server;
    let cap = server.max_body_bytes;
    let declared = req.body().size_hint().exact();
    if declared.is_some_and(|n| n > cap) {
        target.metrics.body_too_large.fetch_add(1, Relaxed);
        return answer(Failure::BodyTooLarge(cap));
    }

    // Phase 4: the tenant's share of requests in flight, held until the
    // response head is ready (queued session requests count).
    let _inflight = match target.share.acquire(Limit::Inflight) {
        Ok(p) => p,
        Err(limit) => {
            let f = Failure::OverShare(limit);
            invoke::count_failure(&target, &f);
            return answer(f);
        }
    };
    let mut req = req;
    if target.worker {
        add_worker_headers(&mut req, &chain.client_addr);
    } else {
        add_spin_headers(&mut req, matched, chain.client_addr.clone());
    }
    let nested = chain.depth > 0;
    req.extensions_mut().insert(chain);

    // Phase 5: instance. The deadline runs from now: waiting in a session's
    // queue counts. The body must be in a tenth of it before the deadline,
    // so a guest waiting on a stalled client learns it in time to answer,
    // and its instance lives on.
    let deadline = started + target.deadline;
    let limits = BodyLimits {
        cap,
        idle: server.body_read_timeout,
        min_rate: server.min_body_rate,
        cutoff: tokio::time::Instant::from_std(deadline - target.deadline / 10),
    };
    let exceeded = Arc::new(AtomicBool::new(false));
    let pace = ClientPace::default();
    req.extensions_mut().insert(pace.clone());
    let req = req.map(|b| CappedBody::new(b, limits, exceeded.clone()).paced(pace.clone()));
    let result = match &target.sessions {
        // A service call into an isolate whose instances are all busy runs
        // on a fresh instance: queued, it could wait on its own caller.
        Some(pool) if nested => {
            match pool
                .dispatch_idle(&target, req.map(|b| b.boxed_unsync()), deadline)
                .await
            {
                Ok(answered) => answered,
                Err(req) => invoke::per_request(&target, *req, deadline).await,
            }
        }
        Some(pool) => {
            pool.dispatch(&target, req.map(|b| b.boxed_unsync()), deadline)
                .await
        }
        None => invoke::per_request(&target, req, deadline).await,
    };

    // Phase 6: response.
    let response = match result {
        // The host cut the body at the cap: whatever the guest made of the
        // truncated body, the answer is 413.
        _ if exceeded.load(Relaxed) => {
            target.metrics.body_too_large.fetch_add(1, Relaxed);
            Failure::BodyTooLarge(cap).response()
        }
        // The body stalled or crawled and was cut: the client is the slow
        // one, whatever the guest made of it.
        _ if pace.timed_out() => {
            target.metrics.body_timeouts.fetch_add(1, Relaxed);
            tracing::info!(tenant = %target.tenant, component = %target.component, "request body too slow; cut");
            Failure::ClientTimeout.response()
        }
        Ok(r) => r,
        Err(f) => f.response(),
    };
    target
        .metrics
        .record(response.status().as_u16(), started.elapsed());
    response
}

/// The header Cloudflare gives Workers the client's address in, set by the
/// host alone (a client's own is replaced): a Worker sees what it would
/// see on Cloudflare, not Spin's `spin-*` headers.
fn add_worker_headers<B>(req: &mut Request<B>, client_addr: &HeaderValue) {
    let h = req.headers_mut();
    edge_outbound_http::strip_connection_listed(h);
    h.remove(CF_CONNECTING_IP);
    let ip = client_addr
        .to_str()
        .ok()
        .and_then(|a| a.parse::<SocketAddr>().ok())
        .map(|a| a.ip().to_string());
    if let Some(v) = ip.and_then(|ip| HeaderValue::try_from(ip).ok()) {
        h.insert(CF_CONNECTING_IP, v);
    }
}

const CF_CONNECTING_IP: http::HeaderName = http::HeaderName::from_static("cf-connecting-ip");

/// The headers Spin gives components, with Spin's values, each once: a
/// client's own `spin-*` headers are dropped first (a component trusts
/// these to come from its host).
fn add_spin_headers<B>(req: &mut Request<B>, matched: &Matched<'_>, client_addr: HeaderValue) {
    let full_url = {
        // The host the request was routed by: HTTP/2 (and an absolute
        // HTTP/1.1 target) names it in the authority, not in `Host`.
        let host = req
            .uri()
            .authority()
            .map(|a| a.as_str())
            .or_else(|| {
                req.headers()
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
            })
            .unwrap_or("localhost");
        let pq = req.uri().path_and_query().map_or("/", |p| p.as_str());
        let mut url = String::with_capacity("http://".len() + host.len() + pq.len());
        url.push_str("http://");
        url.push_str(host);
        url.push_str(pq);
        HeaderValue::try_from(url).ok()
    };
    let h = req.headers_mut();
    edge_outbound_http::strip_connection_listed(h);
    if h.keys().any(|k| k.as_str().starts_with("spin-")) {
        let forged: Vec<_> = h
            .keys()
            .filter(|k| k.as_str().starts_with("spin-"))
            .cloned()
            .collect();
        for name in forged {
            h.remove(name);
        }
    }
    let route = matched.route;
    h.insert(spin_header::MATCHED_ROUTE, route.matched_route.clone());
    h.insert(spin_header::RAW_COMPONENT_ROUTE, route.raw_route.clone());
    h.insert(spin_header::COMPONENT_ROUTE, route.component_route.clone());
    h.insert(spin_header::BASE_PATH, HeaderValue::from_static("/"));
    if let Ok(v) = HeaderValue::from_str(&matched.path_info) {
        h.insert(spin_header::PATH_INFO, v);
    }
    if let Some(v) = full_url {
        h.insert(spin_header::FULL_URL, v);
    }
    h.insert(spin_header::CLIENT_ADDR, client_addr);
    for (name, value) in &matched.params {
        let name = format!("spin-path-match-{}", name.to_ascii_lowercase());
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            h.insert(n, v);
        }
    }
}

/// Spin's header names, parsed at compile time rather than per insert.
mod spin_header {
    use http::HeaderName;
    pub const MATCHED_ROUTE: HeaderName = HeaderName::from_static("spin-matched-route");
    pub const RAW_COMPONENT_ROUTE: HeaderName = HeaderName::from_static("spin-raw-component-route");
    pub const COMPONENT_ROUTE: HeaderName = HeaderName::from_static("spin-component-route");
    pub const BASE_PATH: HeaderName = HeaderName::from_static("spin-base-path");
    pub const PATH_INFO: HeaderName = HeaderName::from_static("spin-path-info");
    pub const FULL_URL: HeaderName = HeaderName::from_static("spin-full-url");
    pub const CLIENT_ADDR: HeaderName = HeaderName::from_static("spin-client-addr");
}
