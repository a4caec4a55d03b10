//! The control API's listener: the router of `edge_control` behind the
//! same guards as application traffic (`[server]`'s header, body, write
//! and idle timeouts, the minimum body rate), a cap on open connections
//! and a time limit per request (HTTP/1.1 only: no protocol detection
//! to wait on), so a slow or flooding client of the API
//! holds a bounded share of it and nothing of the serving path.

use crate::body::{BodyLimits, CappedBody};
use crate::conn::TimedIo;
use axum::extract::ConnectInfo;
use axum::response::IntoResponse;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt;

/// Connections the API serves at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 128;

/// Longest one API request may take, upload and deploy included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// Serves `router` on `listener` until `stop` turns true.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    server: edge_config::Server,
    max_body: u64,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.expect("never closed"),
            _ = stopped(&mut stop) => return,
        };
        let (stream, peer) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "control API: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopped(&mut stop) => return,
        };
        let _ = stream.set_nodelay(true);
        let (router, server, mut stop) = (router.clone(), server.clone(), stop.clone());
        // From the operator's own proxy: each request names its client
        // (the login limiter keys on it).
        let behind_proxy = crate::forwarded::is_trusted(&server.trusted_proxies, peer.ip());
        tokio::spawn(async move {
            let _permit = permit;
            let service =
                hyper::service::service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
                    let client = match behind_proxy {
                        true => {
                            crate::forwarded::client(peer, &server.trusted_proxies, req.headers())
                        }
                        false => peer,
                    };
                    req.extensions_mut().insert(ConnectInfo(client));
                    let limits = BodyLimits {
                        cap: max_body,
                        idle: server.body_read_timeout,
                        min_rate: server.min_body_rate,
                        cutoff: tokio::time::Instant::now() + REQUEST_TIMEOUT,
                    };
                    let req = req.map(|b| {
                        axum::body::Body::new(CappedBody::new(
                            b,
                            limits,
                            Arc::new(AtomicBool::new(false)),
                        ))
                    });
                    let router = router.clone();
                    async move {
                        match tokio::time::timeout(REQUEST_TIMEOUT, router.oneshot(req)).await {
                            Ok(r) => r,
                            Err(_) => Ok(edge_control::api::ApiError::new(
                                http::StatusCode::REQUEST_TIMEOUT,
                                None,
                                format!(
                                    "the request took longer than {} s",
                                    REQUEST_TIMEOUT.as_secs()
                                ),
                            )
                            .into_response()),
                        }
                    }
                });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(server.header_read_timeout)
                .max_buf_size(server.max_header_bytes.max(8192));
            let io = TokioIo::new(TimedIo::new(stream, server.write_timeout));
            let conn = builder.serve_connection(io, service);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, %peer, "control API connection ended");
                    }
                }
                _ = stopped(&mut stop) => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(server.drain_timeout, conn).await;
                }
            }
        });
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
