//! Logins and sessions: argon2id passwords, a new random session secret at
//! every login (the cookie holds it; the database only its SHA-256), a
//! CSRF token per session, and failed logins counted in the database per
//! login and per client address.

use crate::db::{Db, Val};
use crate::{Req, Resp, json, now_ms, random};
use billing_core::dialect::MIGRATIONS;
use billing_core::{ApiError, Param, ct_eq, password, sha256_hex};
use serde_json::{Value, json};

/// The session cookie's name.
pub const COOKIE: &str = "billing_session";
/// Session lifetime: 12 hours.
pub const SESSION_MS: i64 = 43_200_000;
/// Failed logins allowed per login per minute.
pub const PER_LOGIN: i64 = 5;
/// Failed logins allowed per client address per minute.
pub const PER_ADDRESS: i64 = 20;
const WINDOW_MS: i64 = 60_000;

/// Who is asking.
#[derive(Clone, Debug)]
pub struct Session {
    pub id_hash: String,
    pub login: String,
    pub admin: bool,
    /// The dealer (id, name) a dealer's user belongs to.
    pub dealer: Option<(i64, String)>,
    pub csrf: String,
}

impl Session {
    /// The dealer every query of this session is confined to (`None` for admins).
    pub fn scope(&self) -> Option<i64> {
        if self.admin {
            None
        } else {
            Some(self.dealer.as_ref().map_or(-1, |d| d.0))
        }
    }

    /// 403 unless an admin.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.admin {
            Ok(())
        } else {
            Err(ApiError::forbidden("admins only"))
        }
    }

    fn describe(&self) -> Value {
        json!({
            "login": self.login,
            "role": if self.admin { "admin" } else { "dealer" },
            "dealer": self.dealer.as_ref().map(|(id, name)| json!({"id": id, "name": name})),
            "csrf_token": self.csrf,
        })
    }
}

fn cookie_secret(req: &Req) -> Option<String> {
    for h in req.headers.get_all("cookie") {
        let Ok(h) = h.to_str() else { continue };
        for part in h.split(';') {
            if let Some((k, v)) = part.trim().split_once('=')
                && k == COOKIE
                && !v.is_empty()
            {
                return Some(v.to_string());
            }
        }
    }
    None
}

/// The schema's version and the live session of an id hash, in one
/// statement (one row; the session's columns NULL when there is none).
const SESSION: &str = "SELECT (SELECT MAX(version) FROM schema_version), s.user_id, s.csrf, u.login, u.role, u.dealer_id, d.name FROM (SELECT 1 AS one) x LEFT JOIN sessions s ON s.id_hash = ? AND s.expires_at > ? LEFT JOIN users u ON u.id = s.user_id AND u.disabled = 0 LEFT JOIN dealers d ON d.id = u.dealer_id";

/// The session the request's cookie names, if it is live. `db` may be
/// behind the app's schema (`Db::connect`): the statement that finds the
/// session reads the schema's version too, and a schema behind (or not
/// there) is migrated first.
pub async fn session(db: &Db, req: &Req) -> Result<Option<Session>, ApiError> {
    let Some(secret) = cookie_secret(req) else {
        return Ok(None);
    };
    let id_hash = sha256_hex(&secret);
    let params = [Param::Text(id_hash.clone()), Param::Int(now_ms())];
    let current = MIGRATIONS.len() as i64;
    let row = match db.row(SESSION, &params).await {
        Ok(Some(r)) if r[0].int() >= current => r,
        _ => {
            db.migrate().await?;
            db.row(SESSION, &params).await?.unwrap_or_default()
        }
    };
    // (A session of a user since disabled finds no user.)
    if row.len() < 7 || row[3] == Val::Null {
        return Ok(None);
    }
    Ok(Some(Session {
        id_hash,
        csrf: row[2].text(),
        login: row[3].text(),
        admin: row[4].text() == "admin",
        dealer: row[5].opt_int().map(|id| (id, row[6].text())),
    }))
}

/// The session, or 401; for any method but GET and HEAD, its CSRF token
/// in `x-csrf-token` too, or 403.
pub async fn require(db: &Db, req: &Req) -> Result<Session, ApiError> {
    let s = session(db, req)
        .await?
        .ok_or_else(ApiError::unauthenticated)?;
    if !matches!(req.method, http::Method::GET | http::Method::HEAD) {
        let given = req.header("x-csrf-token").unwrap_or("");
        if !ct_eq(given, &s.csrf) {
            return Err(ApiError::new(
                403,
                Some("x-csrf-token"),
                "this change needs the session's CSRF token in x-csrf-token",
            ));
        }
    }
    Ok(s)
}

/// The client's address (without the port) from `spin-client-addr`, the
/// header the host sets (and removes from what clients send).
fn client_ip(req: &Req) -> String {
    let a = req.header("spin-client-addr").unwrap_or("unknown");
    match a.parse::<std::net::SocketAddr>() {
        Ok(s) => s.ip().to_string(),
        Err(_) => a.to_string(),
    }
}

fn string_field(body: &serde_json::Map<String, Value>, name: &str) -> Result<String, ApiError> {
    match body.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(ApiError::bad(name, "required, a string")),
    }
}

/// `POST /api/login`.
pub async fn login(db: &Db, req: &Req) -> Result<Resp, ApiError> {
    // JSON said so: a cross-site form can post `text/plain` that parses
    // as JSON (no CSRF token guards a login), and would log the victim's
    // browser in as the attacker.
    let json_type = req
        .header("content-type")
        .and_then(|t| t.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
    if !json_type {
        return Err(ApiError::new(
            415,
            None,
            "send the login as JSON (content-type: application/json)",
        ));
    }
    let body = req.json()?;
    let login = string_field(&body, "login")?;
    let pw = string_field(&body, "password")?;
    if login.len() > 254 {
        return Err(ApiError::bad("login", "too long"));
    }
    if pw.len() > billing_core::validate::MAX_PASSWORD {
        return Err(ApiError::bad("password", "too long"));
    }
    let now = now_ms();
    let window = now - now.rem_euclid(WINDOW_MS);
    let keys = [
        (format!("login:{login}"), PER_LOGIN),
        (format!("addr:{}", client_ip(req)), PER_ADDRESS),
    ];
    // Every attempt counts before its password is checked (given back if
    // it succeeds): attempts sent at once cannot all pass a check made
    // before any of them is counted.
    for (key, limit) in &keys {
        let key = Param::Text(key.clone());
        db.exec(
            db.dialect.count_failure(),
            &[key.clone(), Param::Int(window)],
        )
        .await?;
        let n = db
            .scalar(
                "SELECT count FROM login_failures WHERE failure_key = ? AND window_start = ?",
                &[key, Param::Int(window)],
            )
            .await?;
        if n > *limit {
            let mut e = ApiError::new(429, None, "too many failed logins; try again in a minute");
            e.retry_after = Some(((window + WINDOW_MS - now + 999) / 1000).max(1) as u64);
            return Err(e);
        }
    }
    let user = db
        .row(
            "SELECT u.id, u.password_hash, u.role, u.dealer_id, d.name, u.disabled FROM users u LEFT JOIN dealers d ON d.id = u.dealer_id WHERE u.login = ?",
            &[Param::Text(login.clone())],
        )
        .await?;
    let ok = match &user {
        Some(u) => password::verify(&pw, &u[1].text()) && u[5].int() == 0,
        None => {
            let _ = password::verify(&pw, password::DUMMY_HASH);
            false
        }
    };
    let Some(u) = user.filter(|_| ok) else {
        db.exec(
            "DELETE FROM login_failures WHERE window_start < ?",
            &[Param::Int(window - 3_600_000)],
        )
        .await?;
        return Err(ApiError::new(401, None, "wrong login or password"));
    };
    // A new secret every time: whatever cookie came with the request is
    // never the session afterwards.
    let secret = hex_of(&random::<32>());
    let csrf = hex_of(&random::<32>());
    // Only while the password checked is still the login's and it is not
    // disabled: a password change or disable that lands while this login
    // was checking (argon2 takes a while) ends the sessions there are,
    // and this one must not come after it.
    let made = db
        .exec(
            "INSERT INTO sessions (id_hash, user_id, csrf, expires_at) SELECT ?, id, ?, ? FROM users WHERE id = ? AND password_hash = ? AND disabled = 0",
            &[
                Param::Text(sha256_hex(&secret)),
                Param::Text(csrf.clone()),
                Param::Int(now + SESSION_MS),
                Param::Int(u[0].int()),
                Param::Text(u[1].text()),
            ],
        )
        .await?;
    if made == 0 {
        return Err(ApiError::new(401, None, "wrong login or password"));
    }
    // A success is not a failed attempt.
    for (key, _) in &keys {
        db.exec(
            "UPDATE login_failures SET count = count - 1 WHERE failure_key = ? AND window_start = ? AND count > 0",
            &[Param::Text(key.clone()), Param::Int(window)],
        )
        .await?;
    }
    db.exec(
        "DELETE FROM sessions WHERE expires_at < ?",
        &[Param::Int(now)],
    )
    .await?;
    let s = Session {
        id_hash: String::new(),
        login,
        admin: u[2].text() == "admin",
        dealer: u[3].opt_int().map(|id| (id, u[4].text())),
        csrf,
    };
    let mut r = json(200, &s.describe());
    r.headers_mut().insert(
        "set-cookie",
        http::HeaderValue::from_str(&format!(
            "{COOKIE}={secret}; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age={}",
            SESSION_MS / 1000
        ))
        .expect("ascii"),
    );
    Ok(r)
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `POST /api/logout`.
pub async fn logout(db: &Db, s: &Session) -> Result<Resp, ApiError> {
    db.exec(
        "DELETE FROM sessions WHERE id_hash = ?",
        &[Param::Text(s.id_hash.clone())],
    )
    .await?;
    let mut r = json(200, &json!({"logged_out": true}));
    r.headers_mut().insert(
        "set-cookie",
        http::HeaderValue::from_static(
            "billing_session=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0",
        ),
    );
    Ok(r)
}

/// `GET /api/me`.
pub fn me(s: &Session) -> Resp {
    json(200, &s.describe())
}

/// Hashes a new password with a random salt.
pub fn hash_password(pw: &str) -> String {
    password::hash(pw, &random::<16>())
}
