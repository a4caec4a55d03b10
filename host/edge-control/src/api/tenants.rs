//! Tenants: operators create and delete them and give them hosts; a tenant
//! sees itself.

use super::{ApiError, Caller, Control, JsonBody, check_name};
use crate::model::{Quota, Tenant};
use axum::Json;
use axum::extract::{Path, Query, State};
use http::StatusCode;
use serde::Deserialize;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewTenant {
    name: String,
    hosts: Vec<String>,
    #[serde(default)]
    quota: Quota,
    #[serde(default)]
    programs: Vec<String>,
}

pub async fn list(
    State(c): State<Arc<Control>>,
    caller: Caller,
) -> Result<Json<Vec<Tenant>>, ApiError> {
    let rows = match &caller.principal.tenant_id {
        None => c.db.tenants().await?,
        Some(id) => c.db.tenant_by_id(id).await?.into_iter().collect(),
    };
    Ok(Json(rows.into_iter().map(|r| r.tenant).collect()))
}

pub async fn show(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Tenant>, ApiError> {
    Ok(Json(caller.tenant(&c, &name).await?.tenant))
}

pub async fn create(
    State(c): State<Arc<Control>>,
    caller: Caller,
    body: Result<JsonBody<NewTenant>, ApiError>,
) -> Result<(StatusCode, Json<Tenant>), ApiError> {
    let target = body.as_ref().map(|b| b.0.name.clone()).unwrap_or_default();
    let result = async {
        caller.operator_only()?;
        let JsonBody(t) = body?;
        check_name("name", &t.name)?;
        let (names, claimed_hosts) = c.node.claimed();
        if names.contains(&t.name) {
            return Err(ApiError::conflict(
                Some("name"),
                format!("tenant {:?} is defined in the node's edge-config", t.name),
            ));
        }
        if t.hosts.is_empty() {
            return Err(ApiError::bad(
                Some("hosts"),
                "a tenant needs at least one host",
            ));
        }
        let mut hosts = Vec::new();
        for (i, h) in t.hosts.iter().enumerate() {
            let field = format!("hosts[{i}]");
            let host = match edge_config::HostPattern::parse(h) {
                Ok(edge_config::HostPattern::Any) | Err(_) => {
                    return Err(ApiError::bad(
                        Some(&field),
                        format!(
                            "{h:?} is not a host (allowed: \"example.com\" or \"*.example.com\")"
                        ),
                    ));
                }
                Ok(edge_config::HostPattern::Exact(e)) => e,
                Ok(edge_config::HostPattern::Suffix(s)) => format!("*{s}"),
            };
            if claimed_hosts.contains(&host) {
                return Err(ApiError::conflict(
                    Some(&field),
                    format!("host {host:?} is served by a tenant of the node's edge-config"),
                ));
            }
            if let Some(owner) = c.db.host_owner(&host).await? {
                let _ = owner;
                return Err(ApiError::conflict(
                    Some(&field),
                    format!("host {host:?} is served by another tenant"),
                ));
            }
            if hosts.contains(&host) {
                return Err(ApiError::bad(
                    Some(&field),
                    format!("host {host:?} is listed twice"),
                ));
            }
            hosts.push(host);
        }
        if c.db.tenant(&t.name).await?.is_some() {
            return Err(ApiError::conflict(
                Some("name"),
                format!("tenant {:?} exists", t.name),
            ));
        }
        let allowed = c.node.sidecar_programs();
        for (i, p) in t.programs.iter().enumerate() {
            if !allowed.contains(p) {
                return Err(ApiError::invalid(
                    Some(&format!("programs[{i}]")),
                    if allowed.is_empty() {
                        format!("{p:?}: this node runs no programs (no [sidecar] section)")
                    } else {
                        format!(
                            "{p:?} is not in the node's [sidecar] allow ({})",
                            allowed.join(", ")
                        )
                    },
                ));
            }
        }
        check_quota(&c, &t.quota)?;
        let row =
            c.db.create_tenant(&t.name, &hosts, &t.quota, &t.programs)
                .await?;
        // A tenant with no app serves nothing yet, but its hosts now
        // answer from this tenant (404) rather than from another's `*`.
        c.apply_stored().await.map_err(ApiError::internal)?;
        Ok((StatusCode::CREATED, Json(row.tenant)))
    }
    .await;
    c.record(Some(&caller), None, "tenant.create", &target, &result)
        .await;
    result
}

/// Checks a quota against the node: each field at least its minimum (one,
/// or what `[limits]` asks of the same key), shares within its pool.
fn check_quota(c: &Control, q: &Quota) -> Result<(), ApiError> {
    let super::PoolBounds {
        instances,
        memory_bytes: memory,
        total_memory_bytes,
    } = c.node.pool_bounds();
    let pool = "the node's pool ([pool] total_component_instances)";
    let s = &q.shares;
    // (field, value, minimum, maximum and what it is)
    let fields = [
        ("quota.max_apps", Some(q.max_apps), 1, None),
        ("quota.max_components", Some(q.max_components), 1, None),
        ("quota.max_versions", Some(q.max_versions), 1, None),
        (
            "quota.max_artifact_bytes",
            Some(q.max_artifact_bytes),
            1,
            None,
        ),
        (
            "quota.max_total_artifact_bytes",
            Some(q.max_total_artifact_bytes),
            1,
            None,
        ),
        (
            "quota.shares.max_instances",
            s.max_instances,
            1,
            Some((instances, pool)),
        ),
        (
            "quota.shares.max_sessions",
            s.max_sessions,
            1,
            Some((instances, pool)),
        ),
        ("quota.shares.max_inflight", s.max_inflight, 1, None),
        ("quota.shares.session_rate", s.session_rate, 1, None),
        (
            "quota.shares.memory_bytes",
            s.memory_bytes,
            65536,
            Some((memory, "the node's slot size ([pool] max_memory_bytes)")),
        ),
        (
            "quota.shares.max_total_memory_bytes",
            s.max_total_memory_bytes,
            65536,
            Some((
                total_memory_bytes,
                "the node's memory for guests ([pool] total_memory_bytes)",
            )),
        ),
        (
            "quota.shares.request_deadline_ms",
            s.request_deadline_ms,
            1,
            Some((600_000, "ten minutes")),
        ),
        (
            "quota.shares.max_outbound_requests",
            s.max_outbound_requests,
            1,
            None,
        ),
        ("quota.shares.kv_store_bytes", s.kv_store_bytes, 4096, None),
        (
            "quota.shares.sqlite_database_bytes",
            s.sqlite_database_bytes,
            65536,
            None,
        ),
        (
            "quota.shares.sqlite_statements",
            s.sqlite_statements,
            1,
            Some((65536, "the most [limits] allows")),
        ),
        (
            "quota.shares.max_open_files",
            s.max_open_files,
            1,
            Some((1 << 20, "the most [limits] allows")),
        ),
    ];
    for (field, value, min, max) in fields {
        match (value, max) {
            (Some(v), _) if v < min => {
                return Err(ApiError::bad(
                    Some(field),
                    format!("must be at least {min}"),
                ));
            }
            (Some(v), Some((m, what))) if v > m => {
                return Err(ApiError::invalid(
                    Some(field),
                    format!("{v} is more than {what}: {m}"),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantUpdate {
    quota: Quota,
}

/// Replaces a tenant's quota (operators); its shares apply at once.
pub async fn update(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(name): Path<String>,
    body: Result<JsonBody<TenantUpdate>, ApiError>,
) -> Result<Json<Tenant>, ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &name).await?;
        tenant_id = Some(t.id.clone());
        caller.operator_only()?;
        let JsonBody(u) = body?;
        check_quota(&c, &u.quota)?;
        c.db.set_quota(&t.id, &u.quota).await?;
        c.apply_stored().await.map_err(ApiError::internal)?;
        let mut tenant = t.tenant;
        tenant.quota = u.quota;
        Ok(Json(tenant))
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "tenant.update",
        &name,
        &result,
    )
    .await;
    result
}

pub async fn delete(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let result = async {
        // Another tenant's name answers 404 before the role is looked at.
        let t = caller.tenant(&c, &name).await?;
        caller.operator_only()?;
        c.db.delete_tenant(&t.id).await?;
        c.apply_stored().await.map_err(ApiError::internal)?;
        Ok(StatusCode::NO_CONTENT)
    }
    .await;
    c.record(Some(&caller), None, "tenant.delete", &name, &result)
        .await;
    result
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    #[serde(default = "default_limit")]
    limit: i64,
    action: Option<String>,
    outcome: Option<String>,
    since: Option<i64>,
    before: Option<i64>,
    /// Operators only (`/v1/audit`): one tenant's lines.
    tenant: Option<String>,
}

fn default_limit() -> i64 {
    100
}

impl AuditQuery {
    fn filter<'a>(
        &'a self,
        tenant_id: Option<&'a str>,
    ) -> Result<crate::store::AuditFilter<'a>, ApiError> {
        if let Some(o) = &self.outcome
            && o != "ok"
            && o != "refused"
        {
            return Err(ApiError::bad(
                Some("outcome"),
                format!("{o:?} is not an outcome (allowed: ok, refused)"),
            ));
        }
        Ok(crate::store::AuditFilter {
            tenant_id,
            action: self.action.as_deref(),
            outcome: self.outcome.as_deref(),
            since: self.since,
            before: self.before,
            limit: self.limit.clamp(1, 1000),
        })
    }
}

/// A query string, refused with what is wrong in it.
fn query(
    q: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<AuditQuery, ApiError> {
    q.map(|Query(q)| q)
        .map_err(|e| ApiError::bad(None, e.body_text()))
}

pub async fn audit(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(name): Path<String>,
    q: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<crate::model::AuditEntry>>, ApiError> {
    let t = caller.tenant(&c, &name).await?;
    let q = query(q)?;
    if q.tenant.is_some() {
        return Err(ApiError::bad(
            Some("tenant"),
            "the path names the tenant here",
        ));
    }
    Ok(Json(c.db.audit_log(&q.filter(Some(&t.id))?).await?))
}

pub async fn audit_all(
    State(c): State<Arc<Control>>,
    caller: Caller,
    q: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<crate::model::AuditEntry>>, ApiError> {
    caller.operator_only()?;
    let q = query(q)?;
    let tenant_id = match &q.tenant {
        Some(name) => Some(caller.tenant(&c, name).await?.id),
        None => None,
    };
    Ok(Json(
        c.db.audit_log(&q.filter(tenant_id.as_deref())?).await?,
    ))
}
