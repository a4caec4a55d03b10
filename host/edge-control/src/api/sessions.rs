//! Password login for the web console: users (argon2id hashes), a
//! session cookie (HttpOnly, Secure, SameSite=Strict) with a CSRF token
//! every change must echo in `x-csrf-token`, and a limit on failed logins
//! per login name and per client address.

use super::{ApiError, Caller, Control, JsonBody};
use crate::store::PrincipalRow;
use argon2::password_hash::{
    PasswordHash, PasswordHasher, PasswordVerifier, SaltString, rand_core::OsRng,
};
use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The session cookie's name.
pub const COOKIE: &str = "edge_session";

/// How long a session lasts.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// Shortest password accepted.
const MIN_PASSWORD: usize = 12;

/// Failed logins allowed per window, per login name and per address.
const FAILURES_PER_LOGIN: u32 = 5;
const FAILURES_PER_ADDRESS: u32 = 20;
const WINDOW: Duration = Duration::from_secs(60);

/// Failed logins by key (`login:NAME`, `addr:IP`) in the current window.
#[derive(Default)]
pub struct LoginLimiter {
    failures: Mutex<HashMap<String, (Instant, u32)>>,
}

impl LoginLimiter {
    /// Seconds until `key` may try again, if it is over `limit`.
    fn blocked(&self, key: &str, limit: u32) -> Option<u64> {
        let map = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let (start, n) = map.get(key)?;
        let left = WINDOW.checked_sub(start.elapsed())?;
        (*n >= limit).then(|| left.as_secs().max(1))
    }

    fn fail(&self, key: &str) {
        let mut map = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded: a flood of names forgets the oldest windows first.
        if map.len() > 100_000 {
            map.retain(|_, (start, _)| start.elapsed() < WINDOW);
        }
        let entry = map.entry(key.to_string()).or_insert((Instant::now(), 0));
        if entry.0.elapsed() >= WINDOW {
            *entry = (Instant::now(), 0);
        }
        entry.1 += 1;
    }

    fn clear(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

fn hash_password(password: &str) -> Result<String, ApiError> {
    let salt = SaltString::generate(&mut OsRng);
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(ApiError::internal)
}

fn verify_password(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|h| {
        argon2::Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

/// Verified against when the login does not exist, so both take as long.
static DUMMY_HASH: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let salt = SaltString::generate(&mut OsRng);
    argon2::Argon2::default()
        .hash_password(b"not a password anyone has", &salt)
        .map(|h| h.to_string())
        .unwrap_or_default()
});

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Login {
    login: String,
    password: String,
}

#[derive(Serialize)]
pub struct LoggedIn {
    csrf_token: String,
    expires_at: i64,
    role: String,
    tenant: Option<String>,
}

fn cookie(value: &str, max_age: u64) -> http::HeaderValue {
    http::HeaderValue::from_str(&format!(
        "{COOKIE}={value}; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age={max_age}"
    ))
    .expect("a cookie of URL-safe characters")
}

/// `POST /v1/login`: a session cookie for a user's login and password.
pub async fn login(
    State(c): State<Arc<Control>>,
    super::auth::Remote(remote): super::auth::Remote,
    body: Result<JsonBody<Login>, ApiError>,
) -> Result<Response, ApiError> {
    let JsonBody(l) = body?;
    // Keyed as a case- and pad-insensitive database finds the login:
    // `ADA@x` and `ada@x ` are the same login's attempts.
    let (by_login, by_addr) = (
        format!("login:{}", l.login.trim_end().to_lowercase()),
        format!("addr:{remote}"),
    );
    let retry = c
        .logins
        .blocked(&by_login, FAILURES_PER_LOGIN)
        .or_else(|| c.logins.blocked(&by_addr, FAILURES_PER_ADDRESS));
    if let Some(secs) = retry {
        let mut r = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            None,
            format!("too many failed logins; try again in {secs} s"),
        )
        .into_response();
        r.headers_mut()
            .insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
        return Ok(r);
    }
    let user = c.db.user_by_login(&l.login).await?;
    let phc = user
        .as_ref()
        .map(|u| u.secret_hash.clone())
        .unwrap_or_else(|| DUMMY_HASH.clone());
    let password = l.password.clone();
    let ok = tokio::task::spawn_blocking(move || verify_password(&password, &phc))
        .await
        .map_err(ApiError::internal)?;
    let user = match user {
        Some(u) if ok && u.revoked_at.is_none() => u,
        _ => {
            c.logins.fail(&by_login);
            c.logins.fail(&by_addr);
            let e = ApiError::new(StatusCode::UNAUTHORIZED, None, "wrong login or password");
            c.record(
                None,
                None,
                "login",
                &l.login,
                &Err::<(), _>(ApiError::new(e.status, None, e.message.clone())),
            )
            .await;
            return Err(e);
        }
    };
    c.logins.clear(&by_login);
    let (secret, csrf, expires_at) =
        c.db.create_session(&user.id, SESSION_TTL.as_millis() as i64)
            .await?;
    let tenant = match &user.tenant_id {
        Some(id) => c.db.tenant_by_id(id).await?.map(|t| t.tenant.name),
        None => None,
    };
    let caller = Caller {
        principal: user.clone(),
        remote,
        session: None,
    };
    c.record(
        Some(&caller),
        user.tenant_id.as_deref(),
        "login",
        &user.name,
        &Ok::<(), ApiError>(()),
    )
    .await;
    let mut r = Json(LoggedIn {
        csrf_token: csrf,
        expires_at,
        role: user.role.clone(),
        tenant,
    })
    .into_response();
    r.headers_mut().insert(
        http::header::SET_COOKIE,
        cookie(&secret, SESSION_TTL.as_secs()),
    );
    Ok(r)
}

/// `POST /v1/logout`: ends the caller's session.
pub async fn logout(State(c): State<Arc<Control>>, caller: Caller) -> Result<Response, ApiError> {
    let Some(secret) = &caller.session else {
        return Err(ApiError::bad(
            None,
            "this request is not from a session (it used a token)",
        ));
    };
    c.db.delete_session(secret).await?;
    let mut r = StatusCode::NO_CONTENT.into_response();
    r.headers_mut()
        .insert(http::header::SET_COOKIE, cookie("", 0));
    Ok(r)
}

/// A user as listed: never the password hash.
#[derive(Serialize)]
pub struct UserView {
    id: String,
    login: String,
    role: String,
    created_at: i64,
    revoked_at: Option<i64>,
}

impl From<PrincipalRow> for UserView {
    fn from(p: PrincipalRow) -> Self {
        Self {
            id: p.id,
            login: p.name,
            role: p.role,
            created_at: p.created_at,
            revoked_at: p.revoked_at,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewUser {
    login: String,
    password: String,
}

async fn make_user(
    c: &Control,
    caller: &Caller,
    tenant_id: Option<&str>,
    body: Result<JsonBody<NewUser>, ApiError>,
) -> Result<(StatusCode, Json<UserView>), ApiError> {
    let JsonBody(u) = body?;
    let login_ok = !u.login.is_empty()
        && u.login.len() <= 255
        && u.login.bytes().all(|b| b.is_ascii_graphic());
    if !login_ok {
        return Err(ApiError::bad(
            Some("login"),
            "1 to 255 visible ASCII characters (an e-mail address, a name)",
        ));
    }
    if u.password.chars().count() < MIN_PASSWORD {
        return Err(ApiError::bad(
            Some("password"),
            format!("at least {MIN_PASSWORD} characters"),
        ));
    }
    if u.password.len() > 1024 {
        return Err(ApiError::bad(Some("password"), "at most 1024 bytes"));
    }
    let password = u.password;
    let phc = tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(ApiError::internal)??;
    let row =
        c.db.create_user(tenant_id, &u.login, &phc, Some(&caller.principal.id))
            .await
            .map_err(|e| match e {
                crate::store::StoreError::Conflict => {
                    ApiError::conflict(Some("login"), format!("login {:?} is taken", u.login))
                }
                e => e.into(),
            })?;
    Ok((StatusCode::CREATED, Json(row.into())))
}

pub async fn list(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(tenant): Path<String>,
) -> Result<Json<Vec<UserView>>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    Ok(Json(
        c.db.users(Some(&t.id))
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
    body: Result<JsonBody<NewUser>, ApiError>,
) -> Result<(StatusCode, Json<UserView>), ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        make_user(&c, &caller, Some(&t.id), body).await
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "user.create",
        &tenant,
        &result,
    )
    .await;
    result
}

pub async fn remove(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        super::auth::revoke_own(&c, &id, 'u', Some(&t.id), "user").await?;
        Ok(StatusCode::NO_CONTENT)
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "user.revoke",
        &id,
        &result,
    )
    .await;
    result
}

pub async fn list_operators(
    State(c): State<Arc<Control>>,
    caller: Caller,
) -> Result<Json<Vec<UserView>>, ApiError> {
    caller.operator_only()?;
    Ok(Json(
        c.db.users(None)
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
    ))
}

pub async fn create_operator(
    State(c): State<Arc<Control>>,
    caller: Caller,
    body: Result<JsonBody<NewUser>, ApiError>,
) -> Result<(StatusCode, Json<UserView>), ApiError> {
    let result = async {
        caller.operator_only()?;
        make_user(&c, &caller, None, body).await
    }
    .await;
    c.record(Some(&caller), None, "user.create", "operator", &result)
        .await;
    result
}
