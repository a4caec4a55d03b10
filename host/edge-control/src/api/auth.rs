//! Who is calling: a bearer API token, checked on every request. A tenant
//! caller reaches its own tenant only; any other tenant name answers 404,
//! as a tenant that does not exist would, so a tenant cannot even learn
//! which others exist.

use super::{ApiError, Control};
use crate::store::{PrincipalRow, TenantRow};
use axum::extract::{ConnectInfo, FromRequestParts};
use http::StatusCode;
use http::request::Parts;
use std::net::SocketAddr;
use std::sync::Arc;

/// An authenticated caller.
#[derive(Clone, Debug)]
pub struct Caller {
    /// Its principal.
    pub principal: PrincipalRow,
    /// Where the request came from.
    pub remote: String,
    /// The session cookie's secret, if it came through a session (else
    /// through a token).
    pub session: Option<String>,
}

impl Caller {
    /// Whether it is an operator.
    pub fn is_operator(&self) -> bool {
        self.principal.role == "operator"
    }

    /// Refuses callers that are not operators.
    pub fn operator_only(&self) -> Result<(), ApiError> {
        if self.is_operator() {
            Ok(())
        } else {
            Err(ApiError::forbidden("only an operator may do this"))
        }
    }

    /// The tenant named `name`, if this caller may act on it; otherwise
    /// the same 404 as for a tenant that does not exist.
    pub async fn tenant(&self, control: &Control, name: &str) -> Result<TenantRow, ApiError> {
        let missing = || ApiError::not_found(format!("no tenant {name:?}"));
        let row = control.db.tenant(name).await?.ok_or_else(missing)?;
        match &self.principal.tenant_id {
            None => Ok(row),
            Some(own) if *own == row.id => Ok(row),
            Some(_) => Err(missing()),
        }
    }
}

impl FromRequestParts<Arc<Control>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        control: &Arc<Control>,
    ) -> Result<Self, ApiError> {
        let remote = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip().to_string())
            .unwrap_or_default();
        let unauthorized = |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, None, m);
        if parts.headers.get(http::header::AUTHORIZATION).is_none()
            && let Some(secret) = session_cookie(&parts.headers)
        {
            return from_session(control, parts, secret, remote).await;
        }
        let header = parts
            .headers
            .get(http::header::AUTHORIZATION)
            .ok_or_else(|| {
                unauthorized("no credentials: send `Authorization: Bearer TOKEN`, or log in")
            })?;
        let token = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or_else(|| unauthorized("the Authorization header is not `Bearer TOKEN`"))?;
        let unknown = || unauthorized("unknown token");
        let (id, secret) = crate::secret::parse_token(token).ok_or_else(unknown)?;
        let principal = control.db.principal(id).await?.ok_or_else(unknown)?;
        if !crate::secret::matches(secret, &principal.secret_hash) {
            return Err(unknown());
        }
        // Only the holder of the secret learns why a real token fails.
        if principal.revoked_at.is_some() {
            return Err(unauthorized("this token was revoked"));
        }
        if principal
            .expires_at
            .is_some_and(|e| e <= crate::db::now_ms())
        {
            return Err(unauthorized("this token expired"));
        }
        Ok(Caller {
            principal,
            remote,
            session: None,
        })
    }
}

/// Revokes the principal `id` if it is of the kind `prefix` names (`k`
/// tokens, `u` users) and belongs to `tenant_id` (`None`: an operator's);
/// otherwise the same 404 as for no such principal.
pub async fn revoke_own(
    control: &Control,
    id: &str,
    prefix: char,
    tenant_id: Option<&str>,
    what: &str,
) -> Result<(), ApiError> {
    let missing = || ApiError::not_found(format!("no {what} {id:?}"));
    let p = control.db.principal(id).await?.ok_or_else(missing)?;
    if !id.starts_with(prefix) || p.tenant_id.as_deref() != tenant_id {
        return Err(missing());
    }
    control.db.revoke(&p.id).await?;
    control.db.delete_sessions_of(&p.id).await?;
    Ok(())
}

/// The client's address (empty when not served over TCP, as in tests).
pub struct Remote(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Remote {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Remote(
            parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.ip().to_string())
                .unwrap_or_default(),
        ))
    }
}

/// The session cookie's value, if the request has one.
fn session_cookie(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| {
            let (name, value) = c.trim().split_once('=')?;
            (name == super::sessions::COOKIE && !value.is_empty()).then(|| value.to_string())
        })
}

/// A caller by session cookie. A change (any method but GET, HEAD,
/// OPTIONS) must carry the session's CSRF token in `x-csrf-token`: a page
/// of another site can make the browser send the cookie, not read the
/// token.
async fn from_session(
    control: &Control,
    parts: &Parts,
    secret: String,
    remote: String,
) -> Result<Caller, ApiError> {
    let unauthorized = |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, None, m);
    let (principal, csrf) = control
        .db
        .session(&secret)
        .await?
        .ok_or_else(|| unauthorized("the session ended; log in again"))?;
    if principal.revoked_at.is_some() {
        return Err(unauthorized("this user was removed"));
    }
    let safe = matches!(
        parts.method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    );
    if !safe {
        let sent = parts
            .headers
            .get("x-csrf-token")
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        let ok: bool = subtle::ConstantTimeEq::ct_eq(sent, csrf.as_bytes()).into();
        if !ok {
            return Err(ApiError::forbidden(
                "missing or wrong CSRF token: send the one the login answered with as x-csrf-token",
            ));
        }
    }
    Ok(Caller {
        principal,
        remote,
        session: Some(secret),
    })
}
