//! The admin listener: `/health` (JSON) and `/metrics` (Prometheus text).
//! Kept off the application listener so tenants cannot reach or shadow it.

use crate::app::ComponentStatus;
use crate::respond::{self, Body};
use crate::server::Shared;
use anyhow::Result;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Admin connections open at once; more wait in the listen backlog.
const MAX_ADMIN_CONNECTIONS: usize = 64;

/// Serves admin requests until `shutdown` flips.
pub async fn serve(
    shared: Arc<Shared>,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
) -> Result<()> {
    // Scrapers and probes only: HTTP/1.1, a few connections, the same
    // head timeout as the application listener. Without limits, clients
    // that hold connections open could take every descriptor of the
    // process and starve the application listener.
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(shared.app.load().config.server.header_read_timeout)
        .keep_alive(true);
    let builder = Arc::new(builder);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_ADMIN_CONNECTIONS));
    while let Some((permit, stream, _)) =
        crate::server::next_connection(&listener, &slots, &mut shutdown).await?
    {
        let shared = shared.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(handle(&shared, req)) }
            });
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
            drop(permit);
        });
    }
    Ok(())
}

fn handle(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    match req.uri().path() {
        "/health" => health(shared),
        "/metrics" => {
            let mut text = shared.runtime.metrics.render(
                shared
                    .runtime
                    .engines
                    .built()
                    .filter_map(|e| e.pooling_allocator_metrics()),
            );
            shared.runtime.shares.render(&mut text);
            shared.runtime.shares.render_cpu(&mut text);
            text.push_str(&shared.runtime.outbound.render());
            text.push_str(&shared.runtime.sqlite_slots.render());
            shared.runtime.cache.render(&mut text);
            respond::bytes(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                text,
            )
        }
        other => respond::text(
            StatusCode::NOT_FOUND,
            format!("no admin endpoint {other} (try /health or /metrics)"),
        ),
    }
}

/// `200 {"status":"ok"}` when every component loaded, `200` with
/// `"degraded"` and the reasons when some failed (the rest still serve),
/// `503 "draining"` during shutdown so balancers stop sending.
fn health(shared: &Shared) -> Response<Body> {
    let app = shared.app.load();
    let draining = shared.draining.load(Relaxed);
    let failed = app.failed_components();
    let status = if draining {
        "draining"
    } else if failed.is_empty() {
        "ok"
    } else {
        "degraded"
    };
    let mut json = format!(
        "{{\"status\":\"{status}\",\"app\":{},\"components\":{{",
        json_string(&app.config.app_name)
    );
    for (i, (id, s)) in app.status.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        let _ = match s {
            ComponentStatus::Ready => write!(json, "{}:{{\"status\":\"ready\"}}", json_string(id)),
            ComponentStatus::Failed(why) => write!(
                json,
                "{}:{{\"status\":\"failed\",\"error\":{}}}",
                json_string(id),
                json_string(why)
            ),
        };
    }
    json.push_str("}}");
    let code = if draining {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    respond::bytes(code, "application/json", json)
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_strings_escape_control_characters() {
        assert_eq!(
            super::json_string("a\"b\\c\nd\u{1}"),
            "\"a\\\"b\\\\c\\nd\\u0001\""
        );
    }
}
