//! What the node tells of its traffic: a tenant's apps over the last
//! samples (`GET /v1/tenants/{tenant}/metrics`, the console's plots) and
//! the node's state (`GET /v1/health`, operators). The node keeps the
//! history ([`super::Node::metrics`]); this module owns its JSON.

use super::{ApiError, Caller, Control};
use axum::Json;
use axum::extract::{Path, Query, State};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Responses of one interval by status class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Responses {
    /// 2xx.
    #[serde(rename = "2xx")]
    pub success: u64,
    /// 3xx.
    #[serde(rename = "3xx")]
    pub redirection: u64,
    /// 4xx.
    #[serde(rename = "4xx")]
    pub client_error: u64,
    /// 5xx.
    #[serde(rename = "5xx")]
    pub server_error: u64,
}

/// One sample of an app: what its components (every version serving in
/// a rollout) did in the interval that ended at `t`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Point {
    /// End of the interval, ms since the epoch.
    pub t: i64,
    /// Responses per second over the interval.
    pub rps: f64,
    /// Median time to response head, ms, estimated from the latency
    /// histogram (linear within a bucket); null without requests.
    pub p50_ms: Option<f64>,
    /// 99th percentile, likewise.
    pub p99_ms: Option<f64>,
    /// Requests that failed in the guest: `traps` plus `deadline_kills`.
    pub errors: u64,
    /// Guest traps (memory-cap kills included).
    pub traps: u64,
    /// Requests stopped at their deadline.
    pub deadline_kills: u64,
    /// Responses by status class.
    pub responses: Responses,
}

/// An app's samples, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AppSeries {
    /// The app's name.
    pub app: String,
    /// One point per sample the node keeps.
    pub points: Vec<Point>,
}

/// A tenant's apps over the samples the node keeps.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TenantMetrics {
    /// How often the node samples, ms.
    pub interval_ms: u64,
    /// Apps that serve or served within the kept samples, by name.
    pub apps: Vec<AppSeries>,
}

/// Pool slots of component instances.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Instances {
    /// Alive now (per-request and pinned).
    pub in_use: u64,
    /// The pools' size (each engine's pool counted).
    pub total: u64,
}

/// The node as an operator sees it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NodeHealth {
    /// `ok`, `degraded` (some component failed to load; the rest serve)
    /// or `draining` (shutting down).
    pub status: String,
    /// The PoP's name (`[server] pop`), if set.
    pub pop: Option<String>,
    /// Seconds since the node started.
    pub uptime_s: u64,
    /// Component instances.
    pub instances: Instances,
    /// Tenants served (the config files' and the control plane's).
    pub tenants: u64,
    /// Control-plane apps deployed.
    pub apps: u64,
    /// Components loaded, failed ones included.
    pub components: u64,
    /// Components that failed to load.
    pub components_failed: u64,
    /// Responses in the samples of the last minute, every tenant's.
    pub requests_1m: u64,
    /// Those per second.
    pub rps_1m: f64,
    /// How often the node samples its traffic, ms.
    pub sample_interval_ms: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsQuery {
    /// Only this app.
    app: Option<String>,
    /// Only points after this time (ms since the epoch).
    since: Option<i64>,
}

/// `GET /v1/tenants/{tenant}/metrics`.
pub async fn tenant(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(name): Path<String>,
    q: Result<Query<MetricsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<TenantMetrics>, ApiError> {
    let t = caller.tenant(&c, &name).await?;
    let Query(q) = q.map_err(|e| ApiError::bad(None, e.body_text()))?;
    if let Some(app) = &q.app
        && c.db.app(&t.id, app).await?.is_none()
    {
        return Err(ApiError::not_found(format!("no app {app:?}")));
    }
    let mut m = c.node.metrics(&t.tenant.name);
    if let Some(app) = &q.app {
        m.apps.retain(|s| s.app == *app);
        if m.apps.is_empty() {
            m.apps.push(AppSeries {
                app: app.clone(),
                points: Vec::new(),
            });
        }
    }
    if let Some(since) = q.since {
        for s in &mut m.apps {
            s.points.retain(|p| p.t > since);
        }
    }
    Ok(Json(m))
}

/// `GET /v1/health`.
pub async fn health(
    State(c): State<Arc<Control>>,
    caller: Caller,
) -> Result<Json<NodeHealth>, ApiError> {
    caller.operator_only()?;
    Ok(Json(c.node.health()))
}
