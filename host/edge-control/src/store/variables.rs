//! Variable values set through the API, for an app or for all of a
//! tenant's apps (an app's own value wins).

use super::{R, conflict_or, text};
use crate::db::{Db, now_ms};
use crate::model::VariableValue;
use sqlx::Row;
use std::collections::BTreeMap;

/// Whose variables: one app's, or every app's of a tenant.
#[derive(Clone, Copy, Debug)]
pub enum VarScope<'a> {
    /// An app (its id).
    App(&'a str),
    /// A tenant (its id).
    Tenant(&'a str),
}

impl<'a> VarScope<'a> {
    fn table(self) -> (&'static str, &'static str, &'a str) {
        match self {
            VarScope::App(id) => ("app_variables", "app_id", id),
            VarScope::Tenant(id) => ("tenant_variables", "tenant_id", id),
        }
    }
}

impl Db {
    /// Sets a variable (replacing its value and secrecy).
    pub async fn set_variable(
        &self,
        scope: VarScope<'_>,
        name: &str,
        value: &str,
        secret: bool,
    ) -> R<()> {
        let (table, owner, id) = scope.table();
        let mut tx = self.pool().begin().await?;
        sqlx::query(&format!(
            "DELETE FROM {table} WHERE {owner} = ? AND name = ?"
        ))
        .bind(id)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        sqlx::query(&format!(
            "INSERT INTO {table} ({owner}, name, value, secret, updated_at) VALUES (?, ?, ?, ?, ?)"
        ))
        .bind(id)
        .bind(name)
        .bind(value)
        .bind(i64::from(secret))
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .map_err(conflict_or)?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes a variable; whether it was set.
    pub async fn delete_variable(&self, scope: VarScope<'_>, name: &str) -> R<bool> {
        let (table, owner, id) = scope.table();
        let n = sqlx::query(&format!(
            "DELETE FROM {table} WHERE {owner} = ? AND name = ?"
        ))
        .bind(id)
        .bind(name)
        .execute(self.pool())
        .await?
        .rows_affected();
        Ok(n > 0)
    }

    /// Variables as the API shows them (secrets without value).
    pub async fn variables(&self, scope: VarScope<'_>) -> R<Vec<VariableValue>> {
        let (table, owner, id) = scope.table();
        sqlx::query(&format!(
            "SELECT name, value, secret, updated_at FROM {table} WHERE {owner} = ? ORDER BY name"
        ))
        .bind(id)
        .fetch_all(self.pool())
        .await?
        .into_iter()
        .map(|r| {
            let secret = r.try_get::<i64, _>("secret")? != 0;
            Ok(VariableValue {
                name: r.try_get("name")?,
                secret,
                value: if secret {
                    None
                } else {
                    Some(text(&r, "value")?)
                },
                updated_at: r.try_get("updated_at")?,
            })
        })
        .collect()
    }

    /// Values, secrets included: only for rendering.
    pub async fn variable_values(&self, scope: VarScope<'_>) -> R<BTreeMap<String, String>> {
        let (table, owner, id) = scope.table();
        sqlx::query(&format!(
            "SELECT name, value FROM {table} WHERE {owner} = ?"
        ))
        .bind(id)
        .fetch_all(self.pool())
        .await?
        .into_iter()
        .map(|r| Ok((r.try_get("name")?, text(&r, "value")?)))
        .collect()
    }

    /// What an app's templates render from: its tenant's values, its own
    /// over them.
    pub async fn effective_variables(
        &self,
        tenant_id: &str,
        app_id: &str,
    ) -> R<BTreeMap<String, String>> {
        let mut set = self.variable_values(VarScope::Tenant(tenant_id)).await?;
        set.extend(self.variable_values(VarScope::App(app_id)).await?);
        Ok(set)
    }
}
