//! Variable values through the API: an app's (`/apps/{app}/variables`),
//! or every app's of a tenant (`/variables`; an app's own value wins).
//! Secrets are never shown again; the audit log names variables, never
//! values; a change reaches the serving versions at once; a value a
//! serving version needs (no default) cannot be removed.

use super::{ApiError, Caller, Control, JsonBody};
use crate::model::VariableValue;
use crate::store::{TenantRow, VarScope};
use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;
use serde::Deserialize;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetVariable {
    pub(crate) value: String,
    #[serde(default)]
    pub(crate) secret: bool,
}

/// Largest variable value.
const MAX_VARIABLE_BYTES: usize = 64 << 10;

/// Refuses a name that is not a variable's or a value over the limit;
/// `field` names where it was sent.
pub(crate) fn check(name: &str, v: &SetVariable, field: Option<&str>) -> Result<(), ApiError> {
    if !crate::variables::is_name(name) {
        return Err(ApiError::bad(
            field,
            format!(
                "{name:?} is not a variable name (lower-case letters, digits and '_', starting with a letter)"
            ),
        ));
    }
    if v.value.len() > MAX_VARIABLE_BYTES {
        return Err(ApiError::too_large(
            Some(
                field
                    .map_or("value".to_string(), |f| format!("{f}.value"))
                    .as_str(),
            ),
            format!(
                "{} bytes; a value has at most {MAX_VARIABLE_BYTES}",
                v.value.len()
            ),
        ));
    }
    Ok(())
}

async fn app_id(c: &Control, t: &TenantRow, app: &str) -> Result<String, ApiError> {
    Ok(c.db
        .app(&t.id, app)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no app {app:?}")))?
        .id)
}

async fn set(
    c: &Control,
    t: &TenantRow,
    scope: VarScope<'_>,
    name: &str,
    body: Result<JsonBody<SetVariable>, ApiError>,
) -> Result<StatusCode, ApiError> {
    if !crate::variables::is_name(name) {
        return Err(ApiError::bad(
            None,
            format!(
                "{name:?} is not a variable name (lower-case letters, digits and '_', starting with a letter)"
            ),
        ));
    }
    let JsonBody(v) = body?;
    check(name, &v, None)?;
    // A value the serving versions cannot render with (an outbound
    // template that would not make a rule) is refused, not served.
    if let Err((version, why)) = render_serving(c, t, scope, name, Some(&v.value)).await? {
        return Err(ApiError::invalid(
            Some("value"),
            format!("version {version} of an app serves and could not use it: {why}"),
        ));
    }
    c.db.set_variable(scope, name, &v.value, v.secret).await?;
    c.apply_stored().await.map_err(ApiError::internal)?;
    Ok(StatusCode::NO_CONTENT)
}

/// Whether the serving versions of the apps `scope` reaches render with
/// `name` set to `value` (`None`: removed) in `scope`: the first that
/// does not, as its number and why.
async fn render_serving(
    c: &Control,
    t: &TenantRow,
    scope: VarScope<'_>,
    name: &str,
    value: Option<&str>,
) -> Result<Result<(), (i64, String)>, ApiError> {
    let apps = match scope {
        VarScope::App(id) => vec![id.to_string()],
        VarScope::Tenant(_) => c.db.apps(&t.id).await?.into_iter().map(|a| a.id).collect(),
    };
    let tenant_values = c.db.variable_values(VarScope::Tenant(&t.id)).await?;
    for app in apps {
        // What the app renders from after the change.
        let mut after = tenant_values.clone();
        let mut own = c.db.variable_values(VarScope::App(&app)).await?;
        let changed = match scope {
            VarScope::App(_) => &mut own,
            VarScope::Tenant(_) => &mut after,
        };
        match value {
            Some(v) => changed.insert(name.to_string(), v.to_string()),
            None => changed.remove(name),
        };
        after.extend(own);
        let Some(d) = c.db.deployments(&app, 1).await?.into_iter().next() else {
            continue;
        };
        for w in d.versions {
            if let Some(mut v) = c.db.version(&app, w.version).await?
                && let Err((_, _, why)) = crate::variables::render_spec(&mut v.spec, &after)
            {
                return Ok(Err((w.version, why)));
            }
        }
    }
    Ok(Ok(()))
}

/// Removes `name` from `scope` unless a serving version of an app it
/// reaches would then have no value for it.
async fn delete(
    c: &Control,
    t: &TenantRow,
    scope: VarScope<'_>,
    name: &str,
) -> Result<StatusCode, ApiError> {
    if !c.db.variable_values(scope).await?.contains_key(name) {
        return Err(ApiError::not_found(format!(
            "no variable {name:?} is set here"
        )));
    }
    if let Err((version, why)) = render_serving(c, t, scope, name, None).await? {
        return Err(ApiError::conflict(
            None,
            format!("version {version} of an app serves and needs it: {why}"),
        ));
    }
    c.db.delete_variable(scope, name).await?;
    c.apply_stored().await.map_err(ApiError::internal)?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn app_list(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, app)): Path<(String, String)>,
) -> Result<Json<Vec<VariableValue>>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    let id = app_id(&c, &t, &app).await?;
    Ok(Json(c.db.variables(VarScope::App(&id)).await?))
}

pub async fn app_set(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, app, name)): Path<(String, String, String)>,
    body: Result<JsonBody<SetVariable>, ApiError>,
) -> Result<StatusCode, ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        let id = app_id(&c, &t, &app).await?;
        set(&c, &t, VarScope::App(&id), &name, body).await
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "variable.set",
        &format!("{app}/{name}"),
        &result,
    )
    .await;
    result
}

pub async fn app_delete(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, app, name)): Path<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        let id = app_id(&c, &t, &app).await?;
        delete(&c, &t, VarScope::App(&id), &name).await
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "variable.delete",
        &format!("{app}/{name}"),
        &result,
    )
    .await;
    result
}

pub async fn tenant_list(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(tenant): Path<String>,
) -> Result<Json<Vec<VariableValue>>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    Ok(Json(c.db.variables(VarScope::Tenant(&t.id)).await?))
}

pub async fn tenant_set(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, name)): Path<(String, String)>,
    body: Result<JsonBody<SetVariable>, ApiError>,
) -> Result<StatusCode, ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        set(&c, &t, VarScope::Tenant(&t.id), &name, body).await
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "variable.set",
        &name,
        &result,
    )
    .await;
    result
}

pub async fn tenant_delete(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, name)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        delete(&c, &t, VarScope::Tenant(&t.id), &name).await
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "variable.delete",
        &name,
        &result,
    )
    .await;
    result
}
