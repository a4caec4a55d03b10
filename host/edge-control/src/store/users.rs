//! Users who log in with a password, and their browser sessions.

use super::{PrincipalRow, R, conflict_or, principal_row};
use crate::db::{Db, now_ms};
use crate::secret;
use sqlx::Row;

impl Db {
    /// Creates a user principal with its login and password hash (PHC
    /// string); `Conflict` if the login is taken.
    pub async fn create_user(
        &self,
        tenant_id: Option<&str>,
        login: &str,
        password_hash: &str,
        by: Option<&str>,
    ) -> R<PrincipalRow> {
        let id = secret::new_id("u");
        let role = if tenant_id.is_some() {
            "tenant"
        } else {
            "operator"
        };
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        sqlx::query("INSERT INTO principals (id, kind, role, tenant_id, name, secret_hash, created_at, created_by, expires_at, revoked_at) VALUES (?, 'user', ?, ?, ?, ?, ?, ?, NULL, NULL)")
            .bind(&id)
            .bind(role)
            .bind(tenant_id)
            .bind(login)
            .bind(password_hash)
            .bind(now)
            .bind(by)
            .execute(&mut *tx)
            .await
            .map_err(conflict_or)?;
        sqlx::query("INSERT INTO user_logins (login, principal_id) VALUES (?, ?)")
            .bind(login)
            .bind(&id)
            .execute(&mut *tx)
            .await
            .map_err(conflict_or)?;
        tx.commit().await?;
        Ok(PrincipalRow {
            id,
            role: role.into(),
            tenant_id: tenant_id.map(Into::into),
            name: login.into(),
            secret_hash: password_hash.into(),
            created_at: now,
            expires_at: None,
            revoked_at: None,
        })
    }

    /// The user with `login`, if any.
    pub async fn user_by_login(&self, login: &str) -> R<Option<PrincipalRow>> {
        let row = sqlx::query("SELECT p.id, p.role, p.tenant_id, p.name, p.secret_hash, p.created_at, p.expires_at, p.revoked_at FROM user_logins l JOIN principals p ON p.id = l.principal_id WHERE l.login = ?")
            .bind(login)
            .fetch_optional(self.pool())
            .await?;
        row.map(principal_row).transpose()
    }

    /// Users of one tenant (`Some`) or the operators' (`None`).
    pub async fn users(&self, tenant_id: Option<&str>) -> R<Vec<PrincipalRow>> {
        let q = match tenant_id {
            Some(t) => sqlx::query("SELECT id, role, tenant_id, name, secret_hash, created_at, expires_at, revoked_at FROM principals WHERE kind = 'user' AND tenant_id = ? ORDER BY name").bind(t.to_string()),
            None => sqlx::query("SELECT id, role, tenant_id, name, secret_hash, created_at, expires_at, revoked_at FROM principals WHERE kind = 'user' AND tenant_id IS NULL ORDER BY name"),
        };
        q.fetch_all(self.pool())
            .await?
            .into_iter()
            .map(principal_row)
            .collect()
    }

    /// Starts a session of `principal_id` for `ttl_ms`: the cookie's
    /// secret and the CSRF token.
    pub async fn create_session(
        &self,
        principal_id: &str,
        ttl_ms: i64,
    ) -> R<(String, String, i64)> {
        let secret = secret::new_secret();
        let csrf = secret::new_secret();
        let now = now_ms();
        sqlx::query("INSERT INTO sessions (id, principal_id, csrf_token, created_at, expires_at) VALUES (?, ?, ?, ?, ?)")
            .bind(secret::hash(&secret))
            .bind(principal_id)
            .bind(&csrf)
            .bind(now)
            .bind(now + ttl_ms)
            .execute(self.pool())
            .await?;
        Ok((secret, csrf, now + ttl_ms))
    }

    /// The live session with cookie secret `secret`: its principal and
    /// CSRF token.
    pub async fn session(&self, secret: &str) -> R<Option<(PrincipalRow, String)>> {
        let row = sqlx::query(
            "SELECT principal_id, csrf_token FROM sessions WHERE id = ? AND expires_at > ?",
        )
        .bind(secret::hash(secret))
        .bind(now_ms())
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let principal_id: String = row.try_get("principal_id")?;
        let csrf: String = row.try_get("csrf_token")?;
        Ok(self.principal(&principal_id).await?.map(|p| (p, csrf)))
    }

    /// The CSRF token and expiry (ms since the epoch) of the live session
    /// with cookie secret `secret`.
    pub async fn session_info(&self, secret: &str) -> R<Option<(String, i64)>> {
        let row = sqlx::query(
            "SELECT csrf_token, expires_at FROM sessions WHERE id = ? AND expires_at > ?",
        )
        .bind(secret::hash(secret))
        .bind(now_ms())
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some((
            row.try_get("csrf_token")?,
            row.try_get("expires_at")?,
        )))
    }

    /// Ends a session.
    pub async fn delete_session(&self, secret: &str) -> R<()> {
        sqlx::query("DELETE FROM sessions WHERE id = ?")
            .bind(secret::hash(secret))
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Ends every session of a principal.
    pub async fn delete_sessions_of(&self, principal_id: &str) -> R<()> {
        sqlx::query("DELETE FROM sessions WHERE principal_id = ?")
            .bind(principal_id)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}
