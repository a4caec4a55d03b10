//! Every query the control plane makes, written once for both databases.
//! Functions take ids the caller has already resolved and checked against
//! the caller's tenant; none of them decides who may do what.

use crate::db::{Db, now_ms};
use crate::model::{
    AuditEntry, Deployment, Desired, DesiredApp, DesiredTenant, Quota, Tenant, Version,
    VersionSpec, Weighted,
};
use crate::secret;
use sqlx::Row;
use sqlx::any::AnyRow;

mod sites;
mod users;
mod variables;
pub use sites::SiteRow;
pub use variables::VarScope;

/// A query failed, or a row it writes exists already.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A unique key is taken (a name, a host, a version number).
    #[error("already exists")]
    Conflict,
    /// The database failed.
    #[error("database: {0}")]
    Sql(#[from] sqlx::Error),
    /// A stored JSON document does not read back.
    #[error("stored document: {0}")]
    Json(#[from] serde_json::Error),
}

pub(crate) fn conflict_or(e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::Database(d) if d.is_unique_violation() => StoreError::Conflict,
        _ => StoreError::Sql(e),
    }
}

pub(crate) type R<T> = Result<T, StoreError>;

/// Digests per query of [`Db::file_sizes`] (bound parameters: SQLite
/// takes 32,766 in one statement, MariaDB 65,535).
const FILE_SIZES_PER_QUERY: usize = 500;

/// An insert of a row that may be there already (no change then).
fn inserted_once<T>(r: Result<T, sqlx::Error>) -> R<()> {
    match r.map_err(conflict_or) {
        Ok(_) | Err(StoreError::Conflict) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A tenant's row.
#[derive(Clone, Debug)]
pub struct TenantRow {
    /// Internal id.
    pub id: String,
    /// What the API shows.
    pub tenant: Tenant,
}

/// Who a token belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrincipalRow {
    /// Principal id (the token's id).
    pub id: String,
    /// `operator` or `tenant`.
    pub role: String,
    /// The tenant's id, for a tenant principal.
    pub tenant_id: Option<String>,
    /// A name for people.
    pub name: String,
    /// SHA-256 of its secret.
    pub secret_hash: String,
    /// Creation time.
    pub created_at: i64,
    /// When it stops working, if ever.
    pub expires_at: Option<i64>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<i64>,
}

/// An app's row.
#[derive(Clone, Debug)]
pub struct AppRow {
    /// Internal id.
    pub id: String,
    /// Name within the tenant.
    pub name: String,
    /// Creation time.
    pub created_at: i64,
}

impl Db {
    // ---- tenants -------------------------------------------------------

    /// Creates a tenant with its hosts; `Conflict` if the name or a host is
    /// taken.
    pub async fn create_tenant(
        &self,
        name: &str,
        hosts: &[String],
        quota: &Quota,
        programs: &[String],
    ) -> R<TenantRow> {
        let id = secret::new_id("t");
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        sqlx::query("INSERT INTO tenants (id, name, quota, created_at) VALUES (?, ?, ?, ?)")
            .bind(&id)
            .bind(name)
            .bind(serde_json::to_string(quota)?)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(conflict_or)?;
        for h in hosts {
            sqlx::query("INSERT INTO tenant_hosts (host, tenant_id) VALUES (?, ?)")
                .bind(h)
                .bind(&id)
                .execute(&mut *tx)
                .await
                .map_err(conflict_or)?;
        }
        for p in programs {
            sqlx::query("INSERT INTO tenant_programs (tenant_id, program) VALUES (?, ?)")
                .bind(&id)
                .bind(p)
                .execute(&mut *tx)
                .await
                .map_err(conflict_or)?;
        }
        tx.commit().await?;
        Ok(TenantRow {
            id,
            tenant: Tenant {
                name: name.into(),
                hosts: hosts.to_vec(),
                quota: quota.clone(),
                programs: programs.to_vec(),
                created_at: now,
            },
        })
    }

    /// Which tenant holds `host`, if one does.
    pub async fn host_owner(&self, host: &str) -> R<Option<String>> {
        let row = sqlx::query("SELECT t.name FROM tenant_hosts h JOIN tenants t ON t.id = h.tenant_id WHERE h.host = ?")
            .bind(host)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(|r| r.get::<String, _>(0)))
    }

    /// A tenant by name.
    pub async fn tenant(&self, name: &str) -> R<Option<TenantRow>> {
        let row = sqlx::query("SELECT id, name, quota, created_at FROM tenants WHERE name = ?")
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        match row {
            Some(r) => Ok(Some(self.tenant_row(r).await?)),
            None => Ok(None),
        }
    }

    /// A tenant by id.
    pub async fn tenant_by_id(&self, id: &str) -> R<Option<TenantRow>> {
        let row = sqlx::query("SELECT id, name, quota, created_at FROM tenants WHERE id = ?")
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        match row {
            Some(r) => Ok(Some(self.tenant_row(r).await?)),
            None => Ok(None),
        }
    }

    /// Every tenant, by name.
    pub async fn tenants(&self) -> R<Vec<TenantRow>> {
        let rows = sqlx::query("SELECT id, name, quota, created_at FROM tenants ORDER BY name")
            .fetch_all(self.pool())
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            out.push(self.tenant_row(r).await?);
        }
        Ok(out)
    }

    async fn tenant_row(&self, r: AnyRow) -> R<TenantRow> {
        let id: String = r.try_get("id")?;
        let hosts = sqlx::query("SELECT host FROM tenant_hosts WHERE tenant_id = ? ORDER BY host")
            .bind(&id)
            .fetch_all(self.pool())
            .await?
            .into_iter()
            .map(|h| h.get::<String, _>(0))
            .collect();
        let programs =
            sqlx::query("SELECT program FROM tenant_programs WHERE tenant_id = ? ORDER BY program")
                .bind(&id)
                .fetch_all(self.pool())
                .await?
                .into_iter()
                .map(|h| h.get::<String, _>(0))
                .collect();
        Ok(TenantRow {
            tenant: Tenant {
                name: r.try_get("name")?,
                hosts,
                programs,
                quota: serde_json::from_str(&text(&r, "quota")?)?,
                created_at: r.try_get("created_at")?,
            },
            id,
        })
    }

    /// Replaces a tenant's quota.
    pub async fn set_quota(&self, id: &str, quota: &Quota) -> R<()> {
        sqlx::query("UPDATE tenants SET quota = ? WHERE id = ?")
            .bind(serde_json::to_string(quota)?)
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Deletes a tenant and everything it owns (apps, versions, tokens,
    /// artifacts records); whether it existed.
    pub async fn delete_tenant(&self, id: &str) -> R<bool> {
        let mut tx = self.pool().begin().await?;
        // Spelled out rather than left to ON DELETE CASCADE, which SQLite
        // honours only with its foreign-key pragma on.
        for sql in [
            "DELETE FROM number_marks WHERE tbl = 'versions' AND owner IN (SELECT id FROM apps WHERE tenant_id = ?)",
            "DELETE FROM number_marks WHERE tbl = 'rule_sets' AND owner IN (SELECT id FROM sites WHERE tenant_id = ?)",
            "DELETE FROM deployments WHERE app_id IN (SELECT id FROM apps WHERE tenant_id = ?)",
            "DELETE FROM app_variables WHERE app_id IN (SELECT id FROM apps WHERE tenant_id = ?)",
            "DELETE FROM tenant_variables WHERE tenant_id = ?",
            "DELETE FROM versions WHERE app_id IN (SELECT id FROM apps WHERE tenant_id = ?)",
            "DELETE FROM apps WHERE tenant_id = ?",
            "DELETE FROM artifacts WHERE tenant_id = ?",
            "DELETE FROM app_files WHERE tenant_id = ?",
            "DELETE FROM site_deployments WHERE site_id IN (SELECT id FROM sites WHERE tenant_id = ?)",
            "DELETE FROM rule_sets WHERE site_id IN (SELECT id FROM sites WHERE tenant_id = ?)",
            "DELETE FROM site_hosts WHERE site_id IN (SELECT id FROM sites WHERE tenant_id = ?)",
            "DELETE FROM sites WHERE tenant_id = ?",
            "DELETE FROM sessions WHERE principal_id IN (SELECT id FROM principals WHERE tenant_id = ?)",
            "DELETE FROM user_logins WHERE principal_id IN (SELECT id FROM principals WHERE tenant_id = ?)",
            "DELETE FROM principals WHERE tenant_id = ?",
            "DELETE FROM tenant_hosts WHERE tenant_id = ?",
            "DELETE FROM tenant_programs WHERE tenant_id = ?",
        ] {
            sqlx::query(sql).bind(id).execute(&mut *tx).await?;
        }
        let n = sqlx::query("DELETE FROM tenants WHERE id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n > 0)
    }

    // ---- principals ----------------------------------------------------

    /// Creates an API token: `tenant_id` `None` makes an operator's.
    pub async fn create_token(
        &self,
        tenant_id: Option<&str>,
        name: &str,
        expires_at: Option<i64>,
        created_by: Option<&str>,
    ) -> R<(secret::NewToken, PrincipalRow)> {
        let token = secret::new_token();
        let role = if tenant_id.is_some() {
            "tenant"
        } else {
            "operator"
        };
        let now = now_ms();
        sqlx::query("INSERT INTO principals (id, kind, role, tenant_id, name, secret_hash, created_at, created_by, expires_at, revoked_at) VALUES (?, 'token', ?, ?, ?, ?, ?, ?, ?, NULL)")
            .bind(&token.id)
            .bind(role)
            .bind(tenant_id)
            .bind(name)
            .bind(&token.hash)
            .bind(now)
            .bind(created_by)
            .bind(expires_at)
            .execute(self.pool())
            .await
            .map_err(conflict_or)?;
        let row = PrincipalRow {
            id: token.id.clone(),
            role: role.into(),
            tenant_id: tenant_id.map(Into::into),
            name: name.into(),
            secret_hash: token.hash.clone(),
            created_at: now,
            expires_at,
            revoked_at: None,
        };
        Ok((token, row))
    }

    /// A principal by id.
    pub async fn principal(&self, id: &str) -> R<Option<PrincipalRow>> {
        let row = sqlx::query("SELECT id, role, tenant_id, name, secret_hash, created_at, expires_at, revoked_at FROM principals WHERE id = ?")
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.map(principal_row).transpose()
    }

    /// Tokens of one tenant (`Some`) or the operators' (`None`), newest
    /// first.
    pub async fn tokens(&self, tenant_id: Option<&str>) -> R<Vec<PrincipalRow>> {
        let q = match tenant_id {
            Some(t) => sqlx::query("SELECT id, role, tenant_id, name, secret_hash, created_at, expires_at, revoked_at FROM principals WHERE kind = 'token' AND tenant_id = ? ORDER BY created_at DESC, id").bind(t.to_string()),
            None => sqlx::query("SELECT id, role, tenant_id, name, secret_hash, created_at, expires_at, revoked_at FROM principals WHERE kind = 'token' AND tenant_id IS NULL ORDER BY created_at DESC, id"),
        };
        q.fetch_all(self.pool())
            .await?
            .into_iter()
            .map(principal_row)
            .collect()
    }

    /// Revokes a principal; whether it was live before.
    pub async fn revoke(&self, id: &str) -> R<bool> {
        let n =
            sqlx::query("UPDATE principals SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
                .bind(now_ms())
                .bind(id)
                .execute(self.pool())
                .await?
                .rows_affected();
        Ok(n > 0)
    }

    /// Whether any operator principal exists (revoked or not).
    pub async fn has_operator(&self) -> R<bool> {
        let row = sqlx::query("SELECT COUNT(*) FROM principals WHERE role = 'operator'")
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get::<i64, _>(0)? > 0)
    }

    // ---- apps ----------------------------------------------------------

    /// Creates an app; `Conflict` if the tenant has one by that name.
    pub async fn create_app(&self, tenant_id: &str, name: &str) -> R<AppRow> {
        let id = secret::new_id("a");
        let now = now_ms();
        sqlx::query("INSERT INTO apps (id, tenant_id, name, created_at) VALUES (?, ?, ?, ?)")
            .bind(&id)
            .bind(tenant_id)
            .bind(name)
            .bind(now)
            .execute(self.pool())
            .await
            .map_err(conflict_or)?;
        Ok(AppRow {
            id,
            name: name.into(),
            created_at: now,
        })
    }

    /// One of a tenant's apps by name.
    pub async fn app(&self, tenant_id: &str, name: &str) -> R<Option<AppRow>> {
        let row =
            sqlx::query("SELECT id, name, created_at FROM apps WHERE tenant_id = ? AND name = ?")
                .bind(tenant_id)
                .bind(name)
                .fetch_optional(self.pool())
                .await?;
        row.map(app_row).transpose()
    }

    /// A tenant's apps, by name.
    pub async fn apps(&self, tenant_id: &str) -> R<Vec<AppRow>> {
        sqlx::query("SELECT id, name, created_at FROM apps WHERE tenant_id = ? ORDER BY name")
            .bind(tenant_id)
            .fetch_all(self.pool())
            .await?
            .into_iter()
            .map(app_row)
            .collect()
    }

    // ---- artifacts -----------------------------------------------------

    /// Records that a tenant uploaded `digest` (again is no change).
    pub async fn add_artifact(
        &self,
        tenant_id: &str,
        digest: &str,
        size: i64,
        imports: &[String],
    ) -> R<()> {
        inserted_once(sqlx::query("INSERT INTO artifacts (tenant_id, digest, size, imports, created_at) VALUES (?, ?, ?, ?, ?)")
            .bind(tenant_id)
            .bind(digest)
            .bind(size)
            .bind(serde_json::to_string(imports)?)
            .bind(now_ms())
            .execute(self.pool())
            .await)
    }

    /// The imports of an artifact the tenant uploaded, if it did.
    pub async fn artifact_imports(&self, tenant_id: &str, digest: &str) -> R<Option<Vec<String>>> {
        let row = sqlx::query("SELECT imports FROM artifacts WHERE tenant_id = ? AND digest = ?")
            .bind(tenant_id)
            .bind(digest)
            .fetch_optional(self.pool())
            .await?;
        match row {
            Some(r) => Ok(Some(serde_json::from_str(&text(&r, 0)?)?)),
            None => Ok(None),
        }
    }

    /// The tenant's artifacts: digest, size, imports, upload time; newest
    /// first.
    pub async fn artifacts(&self, tenant_id: &str) -> R<Vec<(String, i64, Vec<String>, i64)>> {
        sqlx::query("SELECT digest, size, imports, created_at FROM artifacts WHERE tenant_id = ? ORDER BY created_at DESC, digest")
            .bind(tenant_id)
            .fetch_all(self.pool())
            .await?
            .into_iter()
            .map(|r| {
                Ok((
                    r.try_get("digest")?,
                    r.try_get("size")?,
                    serde_json::from_str(&text(&r, "imports")?)?,
                    r.try_get("created_at")?,
                ))
            })
            .collect()
    }

    /// Bytes of everything the tenant uploaded: components and files.
    pub async fn artifact_bytes(&self, tenant_id: &str) -> R<i64> {
        // SUM is a DECIMAL in MariaDB, which the Any driver cannot read;
        // SIGNED is a BIGINT there and an integer in SQLite.
        let row = sqlx::query(
            "SELECT CAST(COALESCE(SUM(size), 0) AS SIGNED) FROM (SELECT size FROM artifacts WHERE tenant_id = ? UNION ALL SELECT size FROM app_files WHERE tenant_id = ?) AS uploaded",
        )
        .bind(tenant_id)
        .bind(tenant_id)
        .fetch_one(self.pool())
        .await?;
        Ok(row.try_get::<i64, _>(0)?)
    }

    /// Records that a tenant uploaded the file `digest` (again is no
    /// change).
    pub async fn add_file(&self, tenant_id: &str, digest: &str, size: i64) -> R<()> {
        inserted_once(
            sqlx::query(
                "INSERT INTO app_files (tenant_id, digest, size, created_at) VALUES (?, ?, ?, ?)",
            )
            .bind(tenant_id)
            .bind(digest)
            .bind(size)
            .bind(now_ms())
            .execute(self.pool())
            .await,
        )
    }

    /// The sizes of the files among `digests` this tenant uploaded, by
    /// digest (another tenant's are missing, as never uploaded): one
    /// query per [`FILE_SIZES_PER_QUERY`] digests, not one per file (an
    /// upload may list 10,000).
    pub async fn file_sizes(
        &self,
        tenant_id: &str,
        digests: &[&str],
    ) -> R<std::collections::HashMap<String, i64>> {
        let mut sizes = std::collections::HashMap::new();
        for chunk in digests.chunks(FILE_SIZES_PER_QUERY) {
            let mut q = sqlx::QueryBuilder::<sqlx::Any>::new(
                "SELECT digest, size FROM app_files WHERE tenant_id = ",
            );
            q.push_bind(tenant_id).push(" AND digest IN (");
            let mut list = q.separated(", ");
            for digest in chunk {
                list.push_bind(*digest);
            }
            list.push_unseparated(")");
            for row in q.build().fetch_all(self.pool()).await? {
                sizes.insert(row.try_get::<String, _>(0)?, row.try_get::<i64, _>(1)?);
            }
        }
        Ok(sizes)
    }

    // ---- versions ------------------------------------------------------

    /// Stores a new version; its number (one more than the app's highest).
    pub async fn create_version(
        &self,
        app_id: &str,
        spec: &VersionSpec,
        by: Option<&str>,
    ) -> R<i64> {
        let spec = Payload::Text(serde_json::to_string(spec)?);
        Ok(self.append_numbered(&VERSIONS, app_id, spec, by).await?.0)
    }

    /// One version of an app.
    pub async fn version(&self, app_id: &str, number: i64) -> R<Option<Version>> {
        let row = sqlx::query(
            "SELECT number, spec, created_at FROM versions WHERE app_id = ? AND number = ?",
        )
        .bind(app_id)
        .bind(number)
        .fetch_optional(self.pool())
        .await?;
        row.map(version_row).transpose()
    }

    /// An app's versions, newest first.
    pub async fn versions(&self, app_id: &str) -> R<Vec<Version>> {
        sqlx::query(
            "SELECT number, spec, created_at FROM versions WHERE app_id = ? ORDER BY number DESC",
        )
        .bind(app_id)
        .fetch_all(self.pool())
        .await?
        .into_iter()
        .map(version_row)
        .collect()
    }

    /// Deletes the app's oldest versions until it keeps `keep`, sparing
    /// those its serving deployment or the one before it (what a rollback
    /// returns to) use; how many went (none if the rest cannot make
    /// room). Called under the control plane's change lock, which
    /// deployments take before they read versions.
    pub async fn prune_versions(&self, app_id: &str, keep: u64) -> R<u64> {
        let spared = self
            .deployments(app_id, 2)
            .await?
            .into_iter()
            .flat_map(|d| d.versions.into_iter().map(|w| w.version))
            .collect();
        self.prune_numbered(&VERSIONS, app_id, &spared, keep).await
    }

    /// Forgets the tenant's uploads, components and files, that no version
    /// of its apps (nor `also_named`) names and that were uploaded more
    /// than `grace_ms` ago
    /// (an upload waits a while for the version that will name it), so
    /// they no longer count against its quota. Answers the digests of
    /// those no tenant has any more (components, files): their stored
    /// bytes can go.
    pub async fn forget_unused_uploads(
        &self,
        tenant_id: &str,
        grace_ms: i64,
        also_named: &crate::model::VersionSpec,
    ) -> R<(Vec<String>, Vec<String>)> {
        let mut named = std::collections::HashSet::new();
        let mut name = |spec: &crate::model::VersionSpec| {
            for c in spec.components.values() {
                named.insert(c.digest.clone());
                named.extend(c.files.iter().map(|f| f.digest.clone()));
            }
        };
        // The version about to be made names its uploads too.
        name(also_named);
        let specs = sqlx::query(
            "SELECT v.spec FROM versions v JOIN apps a ON a.id = v.app_id WHERE a.tenant_id = ?",
        )
        .bind(tenant_id)
        .fetch_all(self.pool())
        .await?;
        for row in &specs {
            name(&serde_json::from_str(&text(row, 0)?)?);
        }
        let before = now_ms() - grace_ms;
        let mut orphans = (Vec::new(), Vec::new());
        for (table, orphaned) in [("artifacts", &mut orphans.0), ("app_files", &mut orphans.1)] {
            let uploaded: Vec<String> = sqlx::query(&format!(
                "SELECT digest FROM {table} WHERE tenant_id = ? AND created_at < ?"
            ))
            .bind(tenant_id)
            .bind(before)
            .fetch_all(self.pool())
            .await?
            .iter()
            .map(|r| r.try_get::<String, _>(0))
            .collect::<Result<_, _>>()?;
            for digest in uploaded.into_iter().filter(|d| !named.contains(d)) {
                sqlx::query(&format!(
                    "DELETE FROM {table} WHERE tenant_id = ? AND digest = ?"
                ))
                .bind(tenant_id)
                .bind(&digest)
                .execute(self.pool())
                .await?;
                let kept: i64 =
                    sqlx::query(&format!("SELECT COUNT(*) FROM {table} WHERE digest = ?"))
                        .bind(&digest)
                        .fetch_one(self.pool())
                        .await?
                        .try_get(0)?;
                if kept == 0 {
                    orphaned.push(digest);
                }
            }
        }
        Ok(orphans)
    }

    /// How many versions an app has.
    pub async fn version_count(&self, app_id: &str) -> R<i64> {
        let row = sqlx::query("SELECT COUNT(*) FROM versions WHERE app_id = ?")
            .bind(app_id)
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get::<i64, _>(0)?)
    }

    // ---- deployments ---------------------------------------------------

    /// Appends a deployment (it becomes the app's current one); its seq.
    pub async fn add_deployment(
        &self,
        app_id: &str,
        versions: &[Weighted],
        by: Option<&str>,
    ) -> R<Deployment> {
        const DEPLOYMENTS: Numbered = Numbered {
            table: "deployments",
            owner: "app_id",
            number: "seq",
            payload: "spec",
        };
        let spec = Payload::Text(serde_json::to_string(versions)?);
        let (seq, now) = self.append_numbered(&DEPLOYMENTS, app_id, spec, by).await?;
        Ok(Deployment {
            seq,
            versions: versions.to_vec(),
            created_at: now,
        })
    }

    /// An app's deployments, newest (the serving one) first.
    pub async fn deployments(&self, app_id: &str, limit: i64) -> R<Vec<Deployment>> {
        sqlx::query("SELECT seq, spec, created_at FROM deployments WHERE app_id = ? ORDER BY seq DESC LIMIT ?")
            .bind(app_id)
            .bind(limit)
            .fetch_all(self.pool())
            .await?
            .into_iter()
            .map(|r| {
                Ok(Deployment {
                    seq: r.try_get("seq")?,
                    versions: serde_json::from_str(&text(&r, "spec")?)?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    }

    /// Deletes a deployment that was recorded but could not be put in
    /// service, so the one before serves again.
    pub async fn remove_deployment(&self, app_id: &str, seq: i64) -> R<()> {
        sqlx::query("DELETE FROM deployments WHERE app_id = ? AND seq = ?")
            .bind(app_id)
            .bind(seq)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    // ---- what the host serves ------------------------------------------

    /// Every tenant with its apps' current deployments, versions resolved.
    pub async fn desired(&self) -> R<Desired> {
        let mut out = Desired::default();
        for t in self.tenants().await? {
            let mut apps = Vec::new();
            for app in self.apps(&t.id).await? {
                let Some(d) = self.deployments(&app.id, 1).await?.into_iter().next() else {
                    continue;
                };
                let set = self.effective_variables(&t.id, &app.id).await?;
                let mut versions = Vec::new();
                for w in d.versions {
                    if let Some(mut v) = self.version(&app.id, w.version).await? {
                        // Deploys and deletes are checked so that this
                        // renders; should it not, the guest finds the
                        // variable undefined and the log says why.
                        if let Err((component, var, why)) =
                            crate::variables::render_spec(&mut v.spec, &set)
                        {
                            tracing::error!(tenant = %t.tenant.name, app = %app.name, component, variable = var, error = %why, "a variable does not render");
                            for c in v.spec.components.values_mut() {
                                c.variables.retain(|_, value| !value.contains("{{"));
                                // (A templated outbound rule allows nothing.)
                                c.allowed_outbound_hosts.retain(|r| !r.contains("{{"));
                            }
                        }
                        versions.push((w.version, w.percent, v.spec));
                    }
                }
                apps.push(DesiredApp {
                    name: app.name,
                    versions,
                });
            }
            let sites = self.desired_sites(&t.id).await?;
            out.tenants.push(DesiredTenant {
                name: t.tenant.name,
                hosts: t.tenant.hosts,
                programs: t.tenant.programs,
                shares: t.tenant.quota.shares,
                apps,
                sites,
            });
        }
        Ok(out)
    }

    // ---- audit ---------------------------------------------------------

    /// Appends one line to the audit log.
    pub async fn audit(&self, e: &AuditEntry, tenant_id: Option<&str>) -> R<()> {
        sqlx::query("INSERT INTO audit (id, at, principal_id, tenant_id, action, target, outcome, detail, remote) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
            .bind(secret::ordered_id(e.at))
            .bind(e.at)
            .bind(e.principal.as_deref())
            .bind(tenant_id)
            .bind(&e.action)
            .bind(&e.target)
            .bind(&e.outcome)
            .bind(&e.detail)
            .bind(&e.remote)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// The newest audit lines that `f` lets through.
    pub async fn audit_log(&self, f: &AuditFilter<'_>) -> R<Vec<AuditEntry>> {
        let mut sql = String::from(
            "SELECT a.at, a.principal_id, t.name AS tenant, a.action, a.target, a.outcome, a.detail, a.remote FROM audit a LEFT JOIN tenants t ON t.id = a.tenant_id WHERE 1 = 1",
        );
        for (value, clause) in [
            (f.tenant_id.is_some(), " AND a.tenant_id = ?"),
            (f.action.is_some(), " AND a.action = ?"),
            (f.outcome.is_some(), " AND a.outcome = ?"),
            (f.since.is_some(), " AND a.at >= ?"),
            (f.before.is_some(), " AND a.at < ?"),
        ] {
            if value {
                sql.push_str(clause);
            }
        }
        sql.push_str(" ORDER BY a.id DESC LIMIT ?");
        let mut q = sqlx::query(&sql);
        for v in [f.tenant_id, f.action, f.outcome].into_iter().flatten() {
            q = q.bind(v.to_string());
        }
        for v in [f.since, f.before].into_iter().flatten() {
            q = q.bind(v);
        }
        let q = q.bind(f.limit);
        q.fetch_all(self.pool())
            .await?
            .into_iter()
            .map(|r| {
                Ok(AuditEntry {
                    at: r.try_get("at")?,
                    principal: r.try_get("principal_id")?,
                    tenant: r.try_get("tenant")?,
                    action: r.try_get("action")?,
                    target: r.try_get("target")?,
                    outcome: r.try_get("outcome")?,
                    detail: text(&r, "detail")?,
                    remote: r.try_get("remote")?,
                })
            })
            .collect()
    }
}

/// Which audit lines to read.
#[derive(Clone, Copy, Debug, Default)]
pub struct AuditFilter<'a> {
    /// Only this tenant's (its id).
    pub tenant_id: Option<&'a str>,
    /// Only this action (`app.deploy`, `login`...).
    pub action: Option<&'a str>,
    /// Only `ok` or only `refused`.
    pub outcome: Option<&'a str>,
    /// Only at or after this time (ms since the epoch).
    pub since: Option<i64>,
    /// Only before this time.
    pub before: Option<i64>,
    /// At most this many, newest first.
    pub limit: i64,
}

/// An app's versions.
const VERSIONS: Numbered = Numbered {
    table: "versions",
    owner: "app_id",
    number: "number",
    payload: "spec",
};

/// An append-only table whose rows are numbered per owner: versions of
/// an app, its deployments, a site's rule sets and their deployments.
/// Numbers are never given twice: the highest is remembered in
/// `number_marks` when rows are deleted ([`Db::prune_numbered`]).
pub(crate) struct Numbered {
    pub table: &'static str,
    pub owner: &'static str,
    pub number: &'static str,
    pub payload: &'static str,
}

/// What a numbered row carries.
pub(crate) enum Payload {
    Text(String),
    Int(i64),
}

impl Db {
    /// Appends a row to `t` numbered one past the owner's highest, in one
    /// transaction; the number and the time. Writers at once each get
    /// their own number: SQLite takes its write lock at BEGIN (a deferred
    /// transaction that reads then writes fails at once with BUSY when
    /// another wrote meanwhile); on MariaDB the loser of a race for a
    /// number reads again.
    pub(crate) async fn append_numbered(
        &self,
        t: &Numbered,
        owner: &str,
        payload: Payload,
        by: Option<&str>,
    ) -> R<(i64, i64)> {
        const TRIES: usize = 32;
        let mut tries = 0;
        loop {
            match self.try_append_numbered(t, owner, &payload, by).await {
                Err(StoreError::Conflict) if tries < TRIES => tries += 1,
                done => return done,
            }
        }
    }

    async fn try_append_numbered(
        &self,
        t: &Numbered,
        owner: &str,
        payload: &Payload,
        by: Option<&str>,
    ) -> R<(i64, i64)> {
        let mut tx = match self.backend() {
            crate::db::Backend::Sqlite => self.pool().begin_with("BEGIN IMMEDIATE").await?,
            crate::db::Backend::Mysql => self.pool().begin().await?,
        };
        let max = format!(
            "SELECT COALESCE(MAX({}), 0) FROM {} WHERE {} = ?",
            t.number, t.table, t.owner
        );
        let row = sqlx::query(&max).bind(owner).fetch_one(&mut *tx).await?;
        let mark = sqlx::query("SELECT last FROM number_marks WHERE tbl = ? AND owner = ?")
            .bind(t.table)
            .bind(owner)
            .fetch_optional(&mut *tx)
            .await?;
        let mark = match mark {
            Some(r) => r.try_get::<i64, _>(0)?,
            None => 0,
        };
        let number = row.try_get::<i64, _>(0)?.max(mark) + 1;
        let now = now_ms();
        let insert = format!(
            "INSERT INTO {} ({}, {}, {}, created_at, created_by) VALUES (?, ?, ?, ?, ?)",
            t.table, t.owner, t.number, t.payload
        );
        let q = sqlx::query(&insert).bind(owner).bind(number);
        let q = match payload {
            Payload::Text(s) => q.bind(s.clone()),
            Payload::Int(i) => q.bind(*i),
        };
        q.bind(now)
            .bind(by)
            .execute(&mut *tx)
            .await
            .map_err(conflict_or)?;
        tx.commit().await?;
        Ok((number, now))
    }

    /// Deletes `owner`'s oldest rows of `t` until `keep` are left, sparing
    /// the numbers in `spared`; deletes nothing if that cannot make enough
    /// room. How many went. The highest number given is remembered
    /// first, so it is not given again. (Callers hold the control plane's
    /// change lock.)
    pub(crate) async fn prune_numbered(
        &self,
        t: &Numbered,
        owner: &str,
        spared: &std::collections::HashSet<i64>,
        keep: u64,
    ) -> R<u64> {
        let list = format!(
            "SELECT {} FROM {} WHERE {} = ? ORDER BY {}",
            t.number, t.table, t.owner, t.number
        );
        let numbers: Vec<i64> = sqlx::query(&list)
            .bind(owner)
            .fetch_all(self.pool())
            .await?
            .iter()
            .map(|r| r.try_get::<i64, _>(0))
            .collect::<Result<_, _>>()?;
        let excess = (numbers.len() as u64).saturating_sub(keep) as usize;
        let Some(&last) = numbers.last() else {
            return Ok(0);
        };
        let doomed: Vec<i64> = numbers
            .into_iter()
            .filter(|n| !spared.contains(n))
            .take(excess)
            .collect();
        if doomed.is_empty() || doomed.len() < excess {
            // Not enough to make room: nothing goes.
            return Ok(0);
        }
        let mut tx = self.pool().begin().await?;
        let marked = sqlx::query(
            "UPDATE number_marks SET last = ? WHERE tbl = ? AND owner = ? AND last < ?",
        )
        .bind(last)
        .bind(t.table)
        .bind(owner)
        .bind(last)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if marked == 0 {
            let exists = sqlx::query("SELECT 1 FROM number_marks WHERE tbl = ? AND owner = ?")
                .bind(t.table)
                .bind(owner)
                .fetch_optional(&mut *tx)
                .await?;
            if exists.is_none() {
                sqlx::query("INSERT INTO number_marks (tbl, owner, last) VALUES (?, ?, ?)")
                    .bind(t.table)
                    .bind(owner)
                    .bind(last)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        let delete = format!(
            "DELETE FROM {} WHERE {} = ? AND {} = ?",
            t.table, t.owner, t.number
        );
        for number in &doomed {
            sqlx::query(&delete)
                .bind(owner)
                .bind(number)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(doomed.len() as u64)
    }
}

/// A TEXT column. Through the `Any` driver MariaDB reports TEXT as BLOB,
/// which does not decode as a string: read bytes then.
pub(crate) fn text<I: sqlx::ColumnIndex<AnyRow> + Copy>(r: &AnyRow, col: I) -> R<String> {
    match r.try_get::<String, _>(col) {
        Ok(s) => Ok(s),
        Err(e) => {
            let bytes: Vec<u8> = r.try_get(col).map_err(|_| e)?;
            String::from_utf8(bytes).map_err(|e| StoreError::Sql(sqlx::Error::Decode(Box::new(e))))
        }
    }
}

pub(crate) fn principal_row(r: AnyRow) -> R<PrincipalRow> {
    Ok(PrincipalRow {
        id: r.try_get("id")?,
        role: r.try_get("role")?,
        tenant_id: r.try_get("tenant_id")?,
        name: r.try_get("name")?,
        secret_hash: r.try_get("secret_hash")?,
        created_at: r.try_get("created_at")?,
        expires_at: r.try_get("expires_at")?,
        revoked_at: r.try_get("revoked_at")?,
    })
}

fn app_row(r: AnyRow) -> R<AppRow> {
    Ok(AppRow {
        id: r.try_get("id")?,
        name: r.try_get("name")?,
        created_at: r.try_get("created_at")?,
    })
}

fn version_row(r: AnyRow) -> R<Version> {
    Ok(Version {
        number: r.try_get("number")?,
        spec: serde_json::from_str(&text(&r, "spec")?)?,
        created_at: r.try_get("created_at")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn file_sizes_are_the_tenants_own_in_chunks() {
        let dir = std::env::temp_dir().join(format!("edge-control-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = Db::open(&format!("sqlite://{}", dir.join("c.db").display()))
            .await
            .unwrap();
        let quota = Quota::default();
        let a = db.create_tenant("a", &[], &quota, &[]).await.unwrap();
        let b = db.create_tenant("b", &[], &quota, &[]).await.unwrap();
        // More than a query's worth, so the answer comes from several.
        let n = FILE_SIZES_PER_QUERY * 2 + 7;
        let digests: Vec<String> = (0..n).map(|i| format!("sha256:{i:064x}")).collect();
        for (i, d) in digests.iter().enumerate() {
            db.add_file(&a.id, d, i as i64).await.unwrap();
        }
        db.add_file(&b.id, "sha256:b-only", 9).await.unwrap();
        let mut asked: Vec<&str> = digests.iter().map(String::as_str).collect();
        asked.push("sha256:b-only");
        asked.push("sha256:never");
        let sizes = db.file_sizes(&a.id, &asked).await.unwrap();
        assert_eq!(sizes.len(), n);
        assert!(
            digests
                .iter()
                .enumerate()
                .all(|(i, d)| sizes[d] == i as i64)
        );
        // Another tenant's file is not this one's.
        assert!(!sizes.contains_key("sha256:b-only"));
        assert_eq!(
            db.file_sizes(&b.id, &asked)
                .await
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>(),
            vec![("sha256:b-only".to_string(), 9)]
        );
        assert!(db.file_sizes(&a.id, &[]).await.unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
