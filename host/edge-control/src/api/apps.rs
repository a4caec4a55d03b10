//! Artifacts, apps, versions and deployments.
//!
//! A deploy is three steps, as an OCI push is: upload each component
//! (`POST .../artifacts`, the bytes; checked and compiled once, stored by
//! digest), create a version naming them (`POST .../apps/{app}/versions`,
//! JSON: components with their digests and grants, routes), deploy it
//! (`POST .../apps/{app}/deployments`). Nothing serves until the last step,
//! and the last step changes nothing unless the node took it.

use super::{ApiError, Caller, Control, JsonBody, SmokeRequest, check_name};
use crate::inspect::{self, Grants};
use crate::model::{App, Deployment, Smoke, Version, VersionSpec, Weighted};
use crate::store::{AppRow, TenantRow, VarScope};
use axum::Json;
use axum::extract::{Path, State};
use bytes::Bytes;
use http::StatusCode;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

async fn app_of(c: &Control, t: &TenantRow, name: &str) -> Result<AppRow, ApiError> {
    c.db.app(&t.id, name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no app {name:?}")))
}

async fn app_view(c: &Control, row: AppRow) -> Result<App, ApiError> {
    Ok(App {
        deployment: c.db.deployments(&row.id, 1).await?.into_iter().next(),
        name: row.name,
        created_at: row.created_at,
    })
}

pub async fn list(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(tenant): Path<String>,
) -> Result<Json<Vec<App>>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    let mut out = Vec::new();
    for row in c.db.apps(&t.id).await? {
        out.push(app_view(&c, row).await?);
    }
    Ok(Json(out))
}

pub async fn show(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, app)): Path<(String, String)>,
) -> Result<Json<App>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    let row = app_of(&c, &t, &app).await?;
    Ok(Json(app_view(&c, row).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewApp {
    name: String,
}

pub async fn create(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(tenant): Path<String>,
    body: Result<JsonBody<NewApp>, ApiError>,
) -> Result<(StatusCode, Json<App>), ApiError> {
    let mut tenant_id = None;
    let target = body.as_ref().map(|b| b.0.name.clone()).unwrap_or_default();
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        let JsonBody(a) = body?;
        check_name("name", &a.name)?;
        let apps = c.db.apps(&t.id).await?;
        if apps.iter().any(|x| x.name == a.name) {
            return Err(ApiError::conflict(
                Some("name"),
                format!("app {:?} exists", a.name),
            ));
        }
        if apps.len() as u64 >= t.tenant.quota.max_apps {
            return Err(ApiError::invalid(
                None,
                format!("this tenant has {} apps, its quota (max_apps)", apps.len()),
            ));
        }
        let row = c.db.create_app(&t.id, &a.name).await?;
        Ok((StatusCode::CREATED, Json(app_view(&c, row).await?)))
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "app.create",
        &target,
        &result,
    )
    .await;
    result
}

pub async fn versions(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, app)): Path<(String, String)>,
) -> Result<Json<Vec<Version>>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    let a = app_of(&c, &t, &app).await?;
    Ok(Json(c.db.versions(&a.id).await?))
}

pub async fn version(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, app, number)): Path<(String, String, String)>,
) -> Result<Json<Version>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    let a = app_of(&c, &t, &app).await?;
    let missing = || ApiError::not_found(format!("no version {number:?} of app {app:?}"));
    let n: i64 = number.parse().map_err(|_| missing())?;
    Ok(Json(c.db.version(&a.id, n).await?.ok_or_else(missing)?))
}

/// Checks a version's spec against the tenant's artifacts and files (and
/// those about to be stored, `pending`: digest → imports, `pending_files`:
/// digest → size) and quota. Returns notes on imports its grants do not
/// cover (linked, refused per call).
async fn check_version(
    c: &Control,
    t: &TenantRow,
    spec: &VersionSpec,
    pending: &std::collections::BTreeMap<String, Vec<String>>,
    pending_files: &std::collections::BTreeMap<String, u64>,
) -> Result<Vec<String>, ApiError> {
    let mut all_notes = Vec::new();
    let mut file_bytes = 0u64;
    if spec.components.is_empty() {
        return Err(ApiError::bad(
            Some("components"),
            "a version needs at least one component",
        ));
    }
    let max = t.tenant.quota.max_components;
    if spec.components.len() as u64 > max {
        return Err(ApiError::invalid(
            Some("components"),
            format!(
                "{} components; this tenant's quota allows {max} per version (max_components)",
                spec.components.len()
            ),
        ));
    }
    for (id, comp) in &spec.components {
        let at = |k: &str| format!("components.{id}.{k}");
        check_name(&format!("components.{id}"), id)?;
        if crate::blobs::digest_hex(&comp.digest).is_none() {
            return Err(ApiError::bad(
                Some(&at("digest")),
                format!("{:?} is not a digest (sha256:64 hex digits)", comp.digest),
            ));
        }
        let stored = match pending.get(&comp.digest) {
            Some(imports) => Some(imports.clone()),
            None => c.db.artifact_imports(&t.id, &comp.digest).await?,
        };
        let imports = stored.ok_or_else(|| {
            ApiError::invalid(Some(&at("digest")), format!("no artifact {} was uploaded by this tenant; upload it first (POST /v1/tenants/{}/artifacts)", comp.digest, t.tenant.name))
        })?;
        for (i, label) in comp.key_value_stores.iter().enumerate() {
            check_name(&at(&format!("key_value_stores[{i}]")), label)?;
        }
        for (i, label) in comp.sqlite_databases.iter().enumerate() {
            check_name(&at(&format!("sqlite_databases[{i}]")), label)?;
        }
        for (i, rule) in comp.allowed_outbound_hosts.iter().enumerate() {
            let field = at(&format!("allowed_outbound_hosts[{i}]"));
            if rule.contains("{{") {
                // A template of the app's variables (Spin's
                // `"https://{{ api_host }}"`), rendered when the version
                // is served: its variables must be declared.
                let refs = crate::variables::references(rule)
                    .map_err(|e| ApiError::bad(Some(&field), e))?;
                if let Some(undeclared) = refs.iter().find(|r| !spec.variables.contains_key(**r)) {
                    return Err(ApiError::bad(
                        Some(&field),
                        format!(
                            "{rule:?} uses variable {undeclared:?}, which the version does not declare (add it to `variables`)"
                        ),
                    ));
                }
                continue;
            }
            edge_config::OutboundRule::parse(rule).map_err(|e| ApiError::bad(Some(&field), e))?;
        }
        for name in comp.variables.keys() {
            let ok = name.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !ok {
                return Err(ApiError::bad(
                    Some(&at(&format!("variables.{name}"))),
                    format!(
                        "{name:?} is not a variable name (lower-case letters, digits and '_', starting with a letter)"
                    ),
                ));
            }
        }
        for (name, value) in &comp.variables {
            let field = at(&format!("variables.{name}"));
            let refs =
                crate::variables::references(value).map_err(|e| ApiError::bad(Some(&field), e))?;
            if let Some(undeclared) = refs.iter().find(|r| !spec.variables.contains_key(**r)) {
                return Err(ApiError::bad(
                    Some(&field),
                    format!(
                        "{value:?} uses variable {undeclared:?}, which the version does not declare (add it to `variables`)"
                    ),
                ));
            }
        }
        let grants = Grants {
            key_value: !comp.key_value_stores.is_empty(),
            sqlite: !comp.sqlite_databases.is_empty(),
            schemes: comp
                .allowed_outbound_hosts
                .iter()
                .map(|r| edge_config::OutboundRule::written_scheme(r).to_string())
                .collect(),
            process: !t.tenant.programs.is_empty(),
        };
        let notes = inspect::check_imports(&imports, &grants).map_err(|e| {
            ApiError::invalid(Some(&at("digest")), format!("component {id:?}: {e}"))
        })?;
        all_notes.extend(notes.into_iter().map(|n| format!("component {id:?}: {n}")));
        check_files(c, t, id, &comp.files, pending_files, &mut file_bytes).await?;
    }
    for name in spec.variables.keys() {
        if !crate::variables::is_name(name) {
            return Err(ApiError::bad(
                Some(&format!("variables.{name}")),
                format!(
                    "{name:?} is not a variable name (lower-case letters, digits and '_', starting with a letter)"
                ),
            ));
        }
    }
    if spec.routes.is_empty() {
        return Err(ApiError::bad(
            Some("routes"),
            "a version needs at least one route",
        ));
    }
    let mut seen = Vec::new();
    for (i, r) in spec.routes.iter().enumerate() {
        let pattern = edge_config::RoutePattern::parse(&r.route)
            .map_err(|e| ApiError::bad(Some(&format!("routes[{i}].route")), e))?;
        if !spec.components.contains_key(&r.component) {
            return Err(ApiError::bad(
                Some(&format!("routes[{i}].component")),
                format!("no component {:?} in this version", r.component),
            ));
        }
        if seen
            .iter()
            .any(|p: &edge_config::RoutePattern| p.same_shape(&pattern))
        {
            return Err(ApiError::bad(
                Some(&format!("routes[{i}].route")),
                format!("route {:?} is listed twice", r.route),
            ));
        }
        seen.push(pattern);
    }
    Ok(all_notes)
}

/// Checks a component's files: a well-formed list ([`check_file_list`]),
/// each a file this tenant uploaded (another tenant's digest is unknown
/// here, as one never uploaded) of the size it says, at most
/// `max_artifact_bytes` each; `total` adds up the version's files (every
/// path counted: the node writes each), which may not pass
/// `max_total_artifact_bytes`.
///
/// [`check_file_list`]: crate::spin_app::check_file_list
async fn check_files(
    c: &Control,
    t: &TenantRow,
    id: &str,
    files: &[crate::model::FileSpec],
    pending: &std::collections::BTreeMap<String, u64>,
    total: &mut u64,
) -> Result<(), ApiError> {
    let field = |i: Option<usize>| match i {
        Some(i) => format!("components.{id}.files[{i}]"),
        None => format!("components.{id}.files"),
    };
    crate::spin_app::check_file_list(files)
        .map_err(|(i, e)| ApiError::bad(Some(&field(i)), format!("component {id:?}: {e}")))?;
    let quota = &t.tenant.quota;
    let stored = {
        let digests: Vec<&str> = files
            .iter()
            .filter(|f| !pending.contains_key(&f.digest))
            .map(|f| f.digest.as_str())
            .collect();
        c.db.file_sizes(&t.id, &digests).await?
    };
    for (i, f) in files.iter().enumerate() {
        let size = pending
            .get(&f.digest)
            .copied()
            .or_else(|| stored.get(&f.digest).map(|s| (*s).max(0) as u64));
        let Some(size) = size else {
            return Err(ApiError::invalid(
                Some(&field(Some(i))),
                format!(
                    "component {id:?}: file {}: no file {} was uploaded by this tenant (files come with a Spin app's archive: edge deploy spin.toml)",
                    f.path, f.digest
                ),
            ));
        };
        if size != f.size {
            return Err(ApiError::bad(
                Some(&field(Some(i))),
                format!(
                    "component {id:?}: file {}: size {} is not the size of {} ({size} bytes)",
                    f.path, f.size, f.digest
                ),
            ));
        }
        if size > quota.max_artifact_bytes {
            return Err(ApiError::too_large(
                Some(&field(Some(i))),
                format!(
                    "component {id:?}: file {} is {size} bytes; this tenant's quota allows {} per file (max_artifact_bytes)",
                    f.path, quota.max_artifact_bytes
                ),
            ));
        }
        *total += size;
        if *total > quota.max_total_artifact_bytes {
            return Err(ApiError::too_large(
                Some(&field(Some(i))),
                format!(
                    "component {id:?}: file {}: the version's files come to more than {} bytes, this tenant's quota (max_total_artifact_bytes)",
                    f.path, quota.max_total_artifact_bytes
                ),
            ));
        }
    }
    Ok(())
}

/// Most bytes a version's spec may take as JSON (stored whole; MariaDB's
/// MEDIUMTEXT holds 16 MiB).
pub const MAX_SPEC_BYTES: usize = 8 << 20;

#[derive(Serialize)]
pub struct CreatedVersion {
    number: i64,
    /// Imports the version's grants do not cover: linked, as on Spin,
    /// and refused at each call.
    notes: Vec<String>,
}

pub async fn create_version(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, app)): Path<(String, String)>,
    headers: http::HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<(StatusCode, Json<CreatedVersion>), ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        let a = app_of(&c, &t, &app).await?;
        let body = body.map_err(|e| super::artifacts::read_failed(&e, c.max_upload_bytes))?;
        let content_type = headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let archive = body.starts_with(&[0x1f, 0x8b])
            || ["application/gzip", "application/x-tar", "application/x-gtar"]
                .iter()
                .any(|t| content_type.starts_with(t));
        let (spec, uploads, files) = if archive {
            super::archive::version(&c, &t, &body)?
        } else {
            let spec = super::json::parse::<VersionSpec>(&body).map_err(|e| {
                if body.trim_ascii_start().starts_with(b"{") {
                    e
                } else {
                    ApiError::bad(None, format!("the body is neither a version (JSON) nor a Spin app (a tar or tar.gz archive, sent as application/gzip or application/x-tar): {}", e.message))
                }
            })?;
            (spec, Vec::new(), Vec::new())
        };
        let pending = uploads
            .iter()
            .map(|u| (u.checked.digest.clone(), u.checked.imports.clone()))
            .collect();
        let pending_files = files
            .iter()
            .map(|f| (f.digest.clone(), f.bytes.len() as u64))
            .collect();
        let notes = check_version(&c, &t, &spec, &pending, &pending_files).await?;
        let described = serde_json::to_vec(&spec).map_err(ApiError::internal)?.len();
        if described > MAX_SPEC_BYTES {
            return Err(ApiError::too_large(
                None,
                format!(
                    "the version is {described} bytes as JSON (its files' paths and digests, mostly); at most {MAX_SPEC_BYTES}"
                ),
            ));
        }
        // Refused before its uploads are stored if there is no room, and
        // counted again (with the version made) under the change lock, so
        // versions made at once stay within the quota.
        make_room(&c, &t, &a, &spec).await?;
        super::artifacts::store(&c, &t, &uploads, &files).await?;
        let _one = c.changes.lock().await;
        make_room_locked(&c, &t, &a, &spec).await?;
        let number =
            c.db.create_version(&a.id, &spec, Some(&caller.principal.id))
                .await?;
        Ok((StatusCode::CREATED, Json(CreatedVersion { number, notes })))
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "version.create",
        &app,
        &result,
    )
    .await;
    result
}

/// Makes room for one more version of `a` at its tenant's quota
/// (`max_versions`): the oldest versions go, not the serving ones nor what
/// a rollback returns to, as a registry keeps the last N tags. Refused,
/// deleting nothing, when each version left does.
async fn make_room(
    c: &Control,
    t: &TenantRow,
    a: &AppRow,
    making: &VersionSpec,
) -> Result<(), ApiError> {
    if (c.db.version_count(&a.id).await? as u64) < t.tenant.quota.max_versions {
        return Ok(());
    }
    let _one = c.changes.lock().await;
    make_room_locked(c, t, a, making).await
}

/// [`make_room`] with the change lock held by the caller.
async fn make_room_locked(
    c: &Control,
    t: &TenantRow,
    a: &AppRow,
    making: &VersionSpec,
) -> Result<(), ApiError> {
    let max = t.tenant.quota.max_versions;
    if (c.db.version_count(&a.id).await? as u64) < max {
        return Ok(());
    }
    if c.db.prune_versions(&a.id, max.saturating_sub(1)).await? > 0 {
        c.forget_unused_uploads(&t.id, making).await?;
    }
    let kept = c.db.version_count(&a.id).await?;
    if kept as u64 >= max {
        return Err(ApiError::invalid(
            None,
            format!(
                "app {:?} keeps {kept} versions, this tenant's quota (max_versions), and each serves or is what a rollback returns to",
                a.name
            ),
        ));
    }
    Ok(())
}

pub async fn deployments(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, app)): Path<(String, String)>,
) -> Result<Json<Vec<Deployment>>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    let a = app_of(&c, &t, &app).await?;
    Ok(Json(c.db.deployments(&a.id, 100).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewDeployment {
    versions: Vec<Weighted>,
    #[serde(default)]
    smoke: Option<Smoke>,
    /// The app's variables to set with the deployment: in force only if
    /// it is (`edge deploy --var`), so a refused deployment changes no
    /// value the serving one uses.
    #[serde(default)]
    variables: std::collections::BTreeMap<String, super::variables::SetVariable>,
}

/// Puts `versions` in service for the app, checked by `smoke` first; the
/// deployment is recorded only once the node serves it.
async fn put_in_service(
    c: &Control,
    caller: &Caller,
    t: &TenantRow,
    a: &AppRow,
    versions: Vec<Weighted>,
    smoke: Option<Smoke>,
    variables: std::collections::BTreeMap<String, super::variables::SetVariable>,
) -> Result<Deployment, ApiError> {
    // Before the versions are read: a version pruned meanwhile would be
    // served, and recorded, without its row.
    let _one = c.changes.lock().await;
    if versions.is_empty() || versions.len() > 2 {
        return Err(ApiError::bad(
            Some("versions"),
            "one version (at 100 percent) or two (splitting the traffic) are allowed",
        ));
    }
    let total: u32 = versions.iter().map(|w| w.percent as u32).sum();
    if total != 100 {
        return Err(ApiError::bad(
            Some("versions"),
            format!("the percents add up to {total}; they must add up to 100"),
        ));
    }
    if versions.len() == 2 && versions[0].version == versions[1].version {
        return Err(ApiError::bad(
            Some("versions[1].version"),
            "the two versions must differ",
        ));
    }
    for (name, v) in &variables {
        super::variables::check(name, v, Some(&format!("variables.{name}")))?;
    }
    let mut set = c.db.effective_variables(&t.id, &a.id).await?;
    set.extend(variables.iter().map(|(n, v)| (n.clone(), v.value.clone())));
    let mut resolved = Vec::new();
    for (i, w) in versions.iter().enumerate() {
        let field = format!("versions[{i}].version");
        let mut v = c.db.version(&a.id, w.version).await?.ok_or_else(|| {
            ApiError::invalid(
                Some(&field),
                format!("app {:?} has no version {}", a.name, w.version),
            )
        })?;
        crate::variables::render_spec(&mut v.spec, &set).map_err(|(component, var, why)| {
            let at = if component.is_empty() {
                String::new()
            } else {
                format!(" component {component:?} variable {var:?}:")
            };
            ApiError::invalid(Some(&field), format!("version {}:{at} {why}", w.version))
        })?;
        resolved.push((w.version, w.percent, v.spec));
    }
    let smoke = match smoke {
        Some(s) => {
            if !s.path.starts_with('/') {
                return Err(ApiError::bad(
                    Some("smoke.path"),
                    "a path starting with '/'",
                ));
            }
            if !(100..=599).contains(&s.status) {
                return Err(ApiError::bad(
                    Some("smoke.status"),
                    "an HTTP status, 100 to 599",
                ));
            }
            let host = t
                .tenant
                .hosts
                .iter()
                .find(|h| !h.starts_with('*'))
                .cloned()
                .unwrap_or_else(|| format!("smoke{}", t.tenant.hosts[0].trim_start_matches('*')));
            Some(SmokeRequest {
                host,
                path: s.path,
                status: s.status,
            })
        }
        None => None,
    };
    let mut desired = c.db.desired().await?;
    let tenant = desired
        .tenants
        .iter_mut()
        .find(|x| x.name == t.tenant.name)
        .ok_or_else(|| ApiError::internal("tenant vanished during a deploy"))?;
    tenant.apps.retain(|x| x.name != a.name);
    // Two apps of a tenant on one route would leave which answers to
    // chance: refuse the second.
    for (number, _, spec) in &resolved {
        for r in &spec.routes {
            let Ok(mine) = edge_config::RoutePattern::parse(&r.route) else {
                continue;
            };
            let taken = tenant.apps.iter().find(|other| {
                other.versions.iter().any(|(_, _, o)| {
                    o.routes.iter().any(|x| {
                        edge_config::RoutePattern::parse(&x.route)
                            .is_ok_and(|p| p.same_shape(&mine))
                    })
                })
            });
            if let Some(other) = taken {
                return Err(ApiError::conflict(
                    None,
                    format!(
                        "version {number} routes {:?}, which app {:?} serves; give it another route",
                        r.route, other.name
                    ),
                ));
            }
        }
    }
    tenant.apps.push(crate::model::DesiredApp {
        name: a.name.clone(),
        versions: resolved,
    });
    tenant.apps.sort_by(|x, y| x.name.cmp(&y.name));
    c.fetch_missing(&desired)
        .await
        .map_err(ApiError::internal)?;
    c.node.apply(desired, smoke).await.map_err(|e| {
        ApiError::invalid(
            None,
            format!("not deployed, the previous deployment keeps serving: {e}"),
        )
    })?;
    let recorded = async {
        let d =
            c.db.add_deployment(&a.id, &versions, Some(&caller.principal.id))
                .await?;
        for (name, v) in &variables {
            c.db.set_variable(VarScope::App(&a.id), name, &v.value, v.secret)
                .await?;
        }
        Ok::<_, crate::store::StoreError>(d)
    };
    match recorded.await {
        Ok(d) => Ok(d),
        Err(e) => {
            // The node serves what the database does not say: put back
            // what it says.
            let back = c.db.desired().await.map_err(|e| e.to_string());
            if let Ok(back) = back {
                let _ = c.node.apply(back, None).await;
            }
            Err(e.into())
        }
    }
}

pub async fn deploy(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, app)): Path<(String, String)>,
    body: Result<JsonBody<NewDeployment>, ApiError>,
) -> Result<(StatusCode, Json<Deployment>), ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        let a = app_of(&c, &t, &app).await?;
        let JsonBody(d) = body?;
        let d = put_in_service(&c, &caller, &t, &a, d.versions, d.smoke, d.variables).await?;
        Ok((StatusCode::CREATED, Json(d)))
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "app.deploy",
        &app,
        &result,
    )
    .await;
    result
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Rollback {
    #[serde(default)]
    pub version: Option<i64>,
}

pub async fn rollback(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, app)): Path<(String, String)>,
    body: Bytes,
) -> Result<(StatusCode, Json<Deployment>), ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        let a = app_of(&c, &t, &app).await?;
        let asked: Rollback = super::json::parse_or_default(&body)?;
        let versions = match asked.version {
            Some(v) => vec![Weighted { version: v, percent: 100 }],
            None => {
                let history = c.db.deployments(&a.id, 2).await?;
                match history.get(1) {
                    Some(previous) => previous.versions.clone(),
                    None => {
                        return Err(ApiError::conflict(
                            None,
                            format!("app {app:?} has no earlier deployment to roll back to; name a version"),
                        ));
                    }
                }
            }
        };
        let d = put_in_service(&c, &caller, &t, &a, versions, None, Default::default()).await?;
        Ok((StatusCode::CREATED, Json(d)))
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "app.rollback",
        &app,
        &result,
    )
    .await;
    result
}
