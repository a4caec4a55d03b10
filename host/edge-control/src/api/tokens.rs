//! API tokens: shown once when created, stored hashed, revocable, with an
//! optional expiry. A tenant manages its own tokens; operators manage
//! operators' tokens and every tenant's.

use super::{ApiError, Caller, Control, JsonBody};
use crate::db::now_ms;
use crate::store::PrincipalRow;
use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A token as listed: never its secret or hash.
#[derive(Serialize)]
pub struct TokenView {
    id: String,
    name: String,
    role: String,
    created_at: i64,
    expires_at: Option<i64>,
    revoked_at: Option<i64>,
}

impl From<PrincipalRow> for TokenView {
    fn from(p: PrincipalRow) -> Self {
        Self {
            id: p.id,
            name: p.name,
            role: p.role,
            created_at: p.created_at,
            expires_at: p.expires_at,
            revoked_at: p.revoked_at,
        }
    }
}

/// A token just created: the only time `token` is shown.
#[derive(Serialize)]
pub struct Created {
    #[serde(flatten)]
    view: TokenView,
    token: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    name: String,
    /// Seconds until it stops working; none: until revoked.
    #[serde(default)]
    expires_in_s: Option<u64>,
}

/// Longest lifetime a token may be given: ten years.
const MAX_EXPIRES_IN_S: u64 = 10 * 365 * 86_400;

/// The caller; over a session also what the console needs after a page
/// reload (the CSRF token the login answered with, and when it ends).
#[derive(Serialize)]
pub struct WhoAmI {
    id: String,
    /// The principal's name: a user's login, a token's name.
    login: String,
    role: String,
    tenant: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    csrf_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
}

pub async fn whoami(
    State(c): State<Arc<Control>>,
    caller: Caller,
) -> Result<Json<WhoAmI>, ApiError> {
    let tenant = match &caller.principal.tenant_id {
        Some(id) => c.db.tenant_by_id(id).await?.map(|t| t.tenant.name),
        None => None,
    };
    let session = match &caller.session {
        Some(secret) => c.db.session_info(secret).await?,
        None => None,
    };
    let (csrf_token, expires_at) = session.map_or((None, None), |(t, e)| (Some(t), Some(e)));
    Ok(Json(WhoAmI {
        id: caller.principal.id.clone(),
        login: caller.principal.name.clone(),
        role: caller.principal.role.clone(),
        tenant,
        csrf_token,
        expires_at,
    }))
}

async fn make(
    c: &Control,
    caller: &Caller,
    tenant_id: Option<&str>,
    body: Result<JsonBody<NewToken>, ApiError>,
) -> Result<(StatusCode, Json<Created>), ApiError> {
    let JsonBody(t) = body?;
    if t.name.trim().is_empty() || t.name.len() > 255 {
        return Err(ApiError::bad(
            Some("name"),
            "a token needs a name of 1 to 255 bytes",
        ));
    }
    let expires_at = match t.expires_in_s {
        Some(0) => {
            return Err(ApiError::bad(
                Some("expires_in_s"),
                "must be at least 1 (or left out for no expiry)",
            ));
        }
        Some(s) if s > MAX_EXPIRES_IN_S => {
            return Err(ApiError::bad(
                Some("expires_in_s"),
                format!("at most {MAX_EXPIRES_IN_S} (ten years)"),
            ));
        }
        Some(s) => Some(now_ms() + s as i64 * 1000),
        None => None,
    };
    let (token, row) =
        c.db.create_token(
            tenant_id,
            t.name.trim(),
            expires_at,
            Some(&caller.principal.id),
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(Created {
            view: row.into(),
            token: token.token,
        }),
    ))
}

pub async fn list(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(tenant): Path<String>,
) -> Result<Json<Vec<TokenView>>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    Ok(Json(
        c.db.tokens(Some(&t.id))
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
    ))
}

pub async fn create(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(tenant): Path<String>,
    body: Result<JsonBody<NewToken>, ApiError>,
) -> Result<(StatusCode, Json<Created>), ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        make(&c, &caller, Some(&t.id), body).await
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "token.create",
        &tenant,
        &result,
    )
    .await;
    result
}

pub async fn revoke(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        super::auth::revoke_own(&c, &id, 'k', Some(&t.id), "token").await?;
        Ok(StatusCode::NO_CONTENT)
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "token.revoke",
        &id,
        &result,
    )
    .await;
    result
}

pub async fn list_operator(
    State(c): State<Arc<Control>>,
    caller: Caller,
) -> Result<Json<Vec<TokenView>>, ApiError> {
    caller.operator_only()?;
    Ok(Json(
        c.db.tokens(None)
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
    ))
}

pub async fn create_operator(
    State(c): State<Arc<Control>>,
    caller: Caller,
    body: Result<JsonBody<NewToken>, ApiError>,
) -> Result<(StatusCode, Json<Created>), ApiError> {
    let result = async {
        caller.operator_only()?;
        make(&c, &caller, None, body).await
    }
    .await;
    c.record(Some(&caller), None, "token.create", "operator", &result)
        .await;
    result
}

pub async fn revoke_operator(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let result = async {
        caller.operator_only()?;
        super::auth::revoke_own(&c, &id, 'k', None, "operator token").await?;
        Ok(StatusCode::NO_CONTENT)
    }
    .await;
    c.record(Some(&caller), None, "token.revoke", &id, &result)
        .await;
    result
}
