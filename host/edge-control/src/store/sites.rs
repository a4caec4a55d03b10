//! Sites and their versioned rule sets.

use super::{Numbered, Payload, R, StoreError, conflict_or, text};
use crate::db::{Db, now_ms};
use crate::model::{DesiredSite, RuleSetVersion, RuleSpec, Site, SiteSettings};
use crate::secret;
use sqlx::Row;
use sqlx::any::AnyRow;

/// A site's rule sets.
const RULE_SETS: Numbered = Numbered {
    table: "rule_sets",
    owner: "site_id",
    number: "number",
    payload: "rules",
};

/// A site's row.
#[derive(Clone, Debug)]
pub struct SiteRow {
    /// Internal id.
    pub id: String,
    /// What the API shows.
    pub site: Site,
}

impl Db {
    /// Creates a site; `Conflict` if the tenant has one by that name or a
    /// host belongs to another site.
    pub async fn create_site(
        &self,
        tenant_id: &str,
        name: &str,
        hosts: &[String],
        settings: &SiteSettings,
    ) -> R<SiteRow> {
        let id = secret::new_id("s");
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        sqlx::query(
            "INSERT INTO sites (id, tenant_id, name, settings, created_at) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(tenant_id)
        .bind(name)
        .bind(serde_json::to_string(settings)?)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(conflict_or)?;
        for h in hosts {
            sqlx::query("INSERT INTO site_hosts (host, site_id) VALUES (?, ?)")
                .bind(h)
                .bind(&id)
                .execute(&mut *tx)
                .await
                .map_err(conflict_or)?;
        }
        tx.commit().await?;
        Ok(SiteRow {
            id,
            site: Site {
                name: name.into(),
                hosts: hosts.to_vec(),
                settings: settings.clone(),
                created_at: now,
                rules_version: None,
            },
        })
    }

    /// Replaces a site's proxy settings.
    pub async fn set_site_settings(&self, site_id: &str, settings: &SiteSettings) -> R<()> {
        sqlx::query("UPDATE sites SET settings = ? WHERE id = ?")
            .bind(serde_json::to_string(settings)?)
            .bind(site_id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Whether a site (of any tenant) holds `host`.
    pub async fn site_host_taken(&self, host: &str) -> R<bool> {
        Ok(sqlx::query("SELECT site_id FROM site_hosts WHERE host = ?")
            .bind(host)
            .fetch_optional(self.pool())
            .await?
            .is_some())
    }

    /// One of a tenant's sites by name.
    pub async fn site(&self, tenant_id: &str, name: &str) -> R<Option<SiteRow>> {
        let row = sqlx::query(
            "SELECT id, name, settings, created_at FROM sites WHERE tenant_id = ? AND name = ?",
        )
        .bind(tenant_id)
        .bind(name)
        .fetch_optional(self.pool())
        .await?;
        match row {
            Some(r) => Ok(Some(self.site_row(r).await?)),
            None => Ok(None),
        }
    }

    /// A tenant's sites, by name.
    pub async fn sites(&self, tenant_id: &str) -> R<Vec<SiteRow>> {
        let rows = sqlx::query(
            "SELECT id, name, settings, created_at FROM sites WHERE tenant_id = ? ORDER BY name",
        )
        .bind(tenant_id)
        .fetch_all(self.pool())
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            out.push(self.site_row(r).await?);
        }
        Ok(out)
    }

    async fn site_row(&self, r: AnyRow) -> R<SiteRow> {
        let id: String = r.try_get("id")?;
        let hosts = sqlx::query("SELECT host FROM site_hosts WHERE site_id = ? ORDER BY host")
            .bind(&id)
            .fetch_all(self.pool())
            .await?
            .into_iter()
            .map(|h| h.get::<String, _>(0))
            .collect();
        let rules_version = self.site_deployments(&id, 1).await?.first().map(|d| d.1);
        Ok(SiteRow {
            site: Site {
                name: r.try_get("name")?,
                hosts,
                settings: serde_json::from_str(&text(&r, "settings")?)?,
                created_at: r.try_get("created_at")?,
                rules_version,
            },
            id,
        })
    }

    /// Stores a new rule set version of a site; its number.
    pub async fn create_rule_set(
        &self,
        site_id: &str,
        rules: &[RuleSpec],
        by: Option<&str>,
    ) -> R<i64> {
        let rules = Payload::Text(serde_json::to_string(rules)?);
        Ok(self
            .append_numbered(&RULE_SETS, site_id, rules, by)
            .await?
            .0)
    }

    /// One rule set version of a site.
    pub async fn rule_set(&self, site_id: &str, number: i64) -> R<Option<RuleSetVersion>> {
        let row = sqlx::query(
            "SELECT number, rules, created_at FROM rule_sets WHERE site_id = ? AND number = ?",
        )
        .bind(site_id)
        .bind(number)
        .fetch_optional(self.pool())
        .await?;
        row.map(rule_set_row).transpose()
    }

    /// A site's rule set versions, newest first.
    pub async fn rule_sets(&self, site_id: &str) -> R<Vec<RuleSetVersion>> {
        sqlx::query("SELECT number, rules, created_at FROM rule_sets WHERE site_id = ? ORDER BY number DESC")
            .bind(site_id)
            .fetch_all(self.pool())
            .await?
            .into_iter()
            .map(rule_set_row)
            .collect()
    }

    /// How many rule set versions a site keeps.
    pub async fn rule_set_count(&self, site_id: &str) -> R<i64> {
        let row = sqlx::query("SELECT COUNT(*) FROM rule_sets WHERE site_id = ?")
            .bind(site_id)
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get::<i64, _>(0)?)
    }

    /// Deletes a site's oldest rule sets until `keep` are left, sparing
    /// the one it applies and the one a rollback returns to (its two last
    /// deployments'); deletes nothing if that cannot make enough room.
    /// How many went.
    pub async fn prune_rule_sets(&self, site_id: &str, keep: u64) -> R<u64> {
        let spared = self
            .site_deployments(site_id, 2)
            .await?
            .into_iter()
            .map(|(_, version, _)| version)
            .collect();
        self.prune_numbered(&RULE_SETS, site_id, &spared, keep)
            .await
    }

    /// Appends a deployment of rule set `version` to a site; its seq.
    pub async fn add_site_deployment(
        &self,
        site_id: &str,
        version: i64,
        by: Option<&str>,
    ) -> R<i64> {
        const SITE_DEPLOYMENTS: Numbered = Numbered {
            table: "site_deployments",
            owner: "site_id",
            number: "seq",
            payload: "rules_version",
        };
        let version = Payload::Int(version);
        Ok(self
            .append_numbered(&SITE_DEPLOYMENTS, site_id, version, by)
            .await?
            .0)
    }

    /// A site's deployments (seq, rule set version, time), newest first.
    pub async fn site_deployments(&self, site_id: &str, limit: i64) -> R<Vec<(i64, i64, i64)>> {
        sqlx::query("SELECT seq, rules_version, created_at FROM site_deployments WHERE site_id = ? ORDER BY seq DESC LIMIT ?")
            .bind(site_id)
            .bind(limit)
            .fetch_all(self.pool())
            .await?
            .into_iter()
            .map(|r| Ok((r.try_get("seq")?, r.try_get("rules_version")?, r.try_get("created_at")?)))
            .collect()
    }

    /// A tenant's sites with the rules each applies now.
    pub(crate) async fn desired_sites(&self, tenant_id: &str) -> R<Vec<DesiredSite>> {
        let mut out = Vec::new();
        for s in self.sites(tenant_id).await? {
            let rules = match s.site.rules_version {
                Some(v) => self
                    .rule_set(&s.id, v)
                    .await?
                    .map(|r| r.rules)
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            out.push(DesiredSite {
                name: s.site.name,
                hosts: s.site.hosts,
                settings: s.site.settings,
                rules,
            });
        }
        Ok(out)
    }
}

fn rule_set_row(r: AnyRow) -> Result<RuleSetVersion, StoreError> {
    Ok(RuleSetVersion {
        number: r.try_get("number")?,
        rules: serde_json::from_str(&text(&r, "rules")?)?,
        created_at: r.try_get("created_at")?,
    })
}
