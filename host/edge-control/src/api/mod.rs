//! The control API: JSON over HTTP on its own listener, bearer tokens,
//! every object under its tenant (`/v1/tenants/{tenant}/...`), so one
//! check at the top of each handler ([`Caller::tenant`]) keeps tenants
//! apart. `GET /v1/openapi.json` documents it.

mod apps;
mod archive;
mod artifacts;
mod auth;
mod error;
mod json;
mod metrics;
mod sessions;
mod sites;
mod tenants;
mod tokens;
mod variables;

pub use auth::Caller;

/// A node's pool, as a tenant's shares must stay within it.
#[derive(Debug, Clone, Copy)]
pub struct PoolBounds {
    /// Instances in all (`[pool] total_component_instances`).
    pub instances: u64,
    /// The largest memory one instance may have (`[pool] max_memory_bytes`).
    pub memory_bytes: u64,
    /// Linear memory every instance together may hold (`[pool]
    /// total_memory_bytes`).
    pub total_memory_bytes: u64,
}
pub use error::ApiError;
pub use json::JsonBody;
pub use metrics::{AppSeries, Instances, NodeHealth, Point, Responses, TenantMetrics};

use crate::blobs::Blobs;
use crate::db::{Db, now_ms};
use crate::model::{AuditEntry, Desired};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use std::path::Path;
use std::sync::Arc;

/// A request the new deployment must answer before it takes traffic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmokeRequest {
    /// Host header (the tenant's first host).
    pub host: String,
    /// Path and query.
    pub path: String,
    /// The status it must answer.
    pub status: u16,
}

/// A page fetched from a site's origin for the console's preview.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct OriginPage {
    /// The origin's status.
    pub status: u16,
    /// Its `Content-Type`, if it sent one.
    pub content_type: Option<String>,
    /// The body as it came (not decoded: the request asks for
    /// `identity`), as UTF-8 with invalid sequences replaced.
    pub body: String,
    /// Whether the body went on past [`MAX_ORIGIN_BODY`] bytes (`body`
    /// holds the first of them).
    pub truncated: bool,
}

/// The most of an origin's body [`Node::fetch_origin`] reads.
pub const MAX_ORIGIN_BODY: usize = 2 << 20;

/// Why a page could not be fetched from a site's origin.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    /// The node does not serve the site (yet): no route, no outbound
    /// policy to fetch through.
    #[error("{0}")]
    NotServed(String),
    /// The origin's address is one the tenant may not reach.
    #[error("{0}")]
    Prohibited(String),
    /// The tenant has its cap of outbound requests in flight.
    #[error("{0}")]
    Busy(String),
    /// Connecting, or the answer, failed or timed out.
    #[error("{0}")]
    Failed(String),
}

/// What the control plane needs from the node it runs in.
#[async_trait::async_trait]
pub trait Node: Send + Sync + 'static {
    /// Compiles the component at `wasm` into the node's compile cache, in a
    /// worker bounded in time and memory; why not, if it fails.
    async fn compile(&self, wasm: &Path) -> Result<(), String>;
    /// Builds what `desired` describes beside what serves, checks `smoke`
    /// against it, and only then swaps it in; why not, if it fails (the
    /// old state keeps serving).
    async fn apply(&self, desired: Desired, smoke: Option<SmokeRequest>) -> Result<(), String>;
    /// Tenant names and host patterns the node's own configuration files
    /// hold: an API tenant may take none of them.
    fn claimed(&self) -> (Vec<String>, Vec<String>);
    /// The node's pool: what a tenant's shares must stay within.
    fn pool_bounds(&self) -> PoolBounds;
    /// Whether the node can proxy sites (it has a rewriter component).
    fn serves_sites(&self) -> bool;
    /// Programs the node's sidecar may run (`[sidecar] allow`): what an
    /// operator may grant a tenant.
    fn sidecar_programs(&self) -> Vec<String>;
    /// The recent traffic of `tenant`'s apps, one point per sample the
    /// node keeps.
    fn metrics(&self, tenant: &str) -> TenantMetrics;
    /// The node's state: uptime, instances, what it serves, its request
    /// rate over the last minute.
    fn health(&self) -> NodeHealth;
    /// GETs `path` (path and query) from the origin of `tenant`'s site
    /// `site` exactly as the site's rewriter component would reach it:
    /// through the outbound policy the node built for that component
    /// (its allowlist, the tenant's address policy and outbound cap), with
    /// the site's timeout bounding the whole fetch; the body read up to
    /// [`MAX_ORIGIN_BODY`] bytes.
    async fn fetch_origin(
        &self,
        tenant: &str,
        site: &str,
        path: &str,
    ) -> Result<OriginPage, OriginError>;
}

/// The control plane's state, shared by every request.
pub struct Control {
    /// The database.
    pub db: Db,
    /// Uploaded artifacts.
    pub blobs: Blobs,
    /// The node it changes.
    pub node: Arc<dyn Node>,
    /// Largest body the API reads (uploads included).
    pub max_upload_bytes: usize,
    /// One change reaches the node at a time, in database order.
    changes: tokio::sync::Mutex<()>,
    /// Failed password logins, for the login rate limit.
    logins: sessions::LoginLimiter,
    /// Where artifacts are shared with other nodes, if anywhere.
    pub registry: Option<crate::registry::Registry>,
}

impl Control {
    /// Control over `node` with state in `db` and artifacts in `blobs`.
    pub fn new(db: Db, blobs: Blobs, node: Arc<dyn Node>, max_upload_bytes: usize) -> Self {
        Self {
            registry: None,
            db,
            blobs,
            node,
            max_upload_bytes,
            changes: tokio::sync::Mutex::new(()),
            logins: Default::default(),
        }
    }

    /// Shares artifacts through `registry`.
    pub fn with_registry(mut self, registry: Option<crate::registry::Registry>) -> Self {
        self.registry = registry;
        self
    }

    /// Puts what the database describes in service (at start, and after a
    /// change that must reach the node).
    pub async fn apply_stored(&self) -> Result<(), String> {
        let _one = self.changes.lock().await;
        let desired = self.db.desired().await.map_err(|e| e.to_string())?;
        self.fetch_missing(&desired).await?;
        self.node.apply(desired, None).await
    }

    /// Pulls from the registry every artifact `desired` needs that is not
    /// in the local store (another node accepted it, or this node's cache
    /// was emptied), and the Spin app files each mounts, into theirs.
    pub async fn fetch_missing(&self, desired: &Desired) -> Result<(), String> {
        let files = self.blobs.files();
        let components = desired
            .tenants
            .iter()
            .flat_map(|t| &t.apps)
            .flat_map(|a| &a.versions)
            .flat_map(|(_, _, spec)| spec.components.values());
        for c in components {
            let what = format!("artifact {}", c.digest);
            self.fetch_into(&self.blobs, "artifact", &c.digest, &what)
                .await?;
            for f in &c.files {
                let what = format!("file {} ({})", f.path, f.digest);
                self.fetch_into(&files, "file", &f.digest, &what).await?;
            }
        }
        Ok(())
    }

    /// Pulls `digest` (a `kind`, described as `what` in errors) from the
    /// registry into `store`, unless it is there.
    async fn fetch_into(
        &self,
        store: &Blobs,
        kind: &str,
        digest: &str,
        what: &str,
    ) -> Result<(), String> {
        let path = store
            .path(digest)
            .ok_or_else(|| format!("a stored {kind} digest is malformed"))?;
        if path.exists() {
            return Ok(());
        }
        let Some(registry) = &self.registry else {
            return Err(format!(
                "{what} is not in {} and no registry is configured ([control] registry)",
                path.display()
            ));
        };
        let bytes = registry
            .pull(digest)
            .await
            .map_err(|e| format!("{what}: {e}"))?;
        store
            .put(&bytes)
            .map_err(|e| format!("storing {what}: {e}"))?;
        tracing::info!(digest, "{kind} pulled from the registry");
        Ok(())
    }

    /// Records what a caller attempted and how it ended. A failure to
    /// record is logged, not answered: the change itself stands.
    pub async fn record(
        &self,
        caller: Option<&Caller>,
        tenant_id: Option<&str>,
        action: &str,
        target: &str,
        result: &Result<impl Sized, ApiError>,
    ) {
        let (outcome, detail) = match result {
            Ok(_) => ("ok", String::new()),
            Err(e) => ("refused", format!("{}: {}", e.status.as_u16(), e.message)),
        };
        let entry = AuditEntry {
            at: now_ms(),
            principal: caller.map(|c| c.principal.id.clone()),
            tenant: None,
            action: action.into(),
            target: target.into(),
            outcome: outcome.into(),
            detail,
            remote: caller.map(|c| c.remote.clone()).unwrap_or_default(),
        };
        if let Err(e) = self.db.audit(&entry, tenant_id).await {
            tracing::error!(error = %e, action, target, "control: cannot write the audit log");
        }
    }
}

/// Every endpoint, as `openapi.json` documents it (a test holds the
/// router, this list and the document to each other).
pub const ENDPOINTS: &[(&str, &str)] = &[
    ("GET", "/v1/openapi.json"),
    ("GET", "/v1/whoami"),
    ("POST", "/v1/login"),
    ("POST", "/v1/logout"),
    ("GET", "/v1/users"),
    ("POST", "/v1/users"),
    ("GET", "/v1/tenants/{tenant}/users"),
    ("POST", "/v1/tenants/{tenant}/users"),
    ("DELETE", "/v1/tenants/{tenant}/users/{id}"),
    ("GET", "/v1/tenants"),
    ("POST", "/v1/tenants"),
    ("GET", "/v1/tenants/{tenant}"),
    ("PATCH", "/v1/tenants/{tenant}"),
    ("DELETE", "/v1/tenants/{tenant}"),
    ("GET", "/v1/tokens"),
    ("POST", "/v1/tokens"),
    ("DELETE", "/v1/tokens/{id}"),
    ("GET", "/v1/tenants/{tenant}/tokens"),
    ("POST", "/v1/tenants/{tenant}/tokens"),
    ("DELETE", "/v1/tenants/{tenant}/tokens/{id}"),
    ("GET", "/v1/tenants/{tenant}/artifacts"),
    ("POST", "/v1/tenants/{tenant}/artifacts"),
    ("GET", "/v1/tenants/{tenant}/apps"),
    ("POST", "/v1/tenants/{tenant}/apps"),
    ("GET", "/v1/tenants/{tenant}/apps/{app}"),
    ("GET", "/v1/tenants/{tenant}/apps/{app}/versions"),
    ("POST", "/v1/tenants/{tenant}/apps/{app}/versions"),
    ("GET", "/v1/tenants/{tenant}/apps/{app}/versions/{number}"),
    ("GET", "/v1/tenants/{tenant}/variables"),
    ("PUT", "/v1/tenants/{tenant}/variables/{name}"),
    ("DELETE", "/v1/tenants/{tenant}/variables/{name}"),
    ("GET", "/v1/tenants/{tenant}/apps/{app}/variables"),
    ("PUT", "/v1/tenants/{tenant}/apps/{app}/variables/{name}"),
    ("DELETE", "/v1/tenants/{tenant}/apps/{app}/variables/{name}"),
    ("GET", "/v1/tenants/{tenant}/apps/{app}/deployments"),
    ("POST", "/v1/tenants/{tenant}/apps/{app}/deployments"),
    ("POST", "/v1/tenants/{tenant}/apps/{app}/rollback"),
    ("GET", "/v1/tenants/{tenant}/sites"),
    ("POST", "/v1/tenants/{tenant}/sites"),
    ("GET", "/v1/tenants/{tenant}/sites/{site}"),
    ("PATCH", "/v1/tenants/{tenant}/sites/{site}"),
    ("GET", "/v1/tenants/{tenant}/sites/{site}/rules"),
    ("POST", "/v1/tenants/{tenant}/sites/{site}/rules"),
    ("GET", "/v1/tenants/{tenant}/sites/{site}/rules/{number}"),
    ("POST", "/v1/tenants/{tenant}/sites/{site}/preview"),
    ("POST", "/v1/tenants/{tenant}/sites/{site}/origin"),
    ("GET", "/v1/tenants/{tenant}/sites/{site}/deployments"),
    ("POST", "/v1/tenants/{tenant}/sites/{site}/deployments"),
    ("POST", "/v1/tenants/{tenant}/sites/{site}/rollback"),
    ("GET", "/v1/tenants/{tenant}/audit"),
    ("GET", "/v1/audit"),
    ("GET", "/v1/tenants/{tenant}/metrics"),
    ("GET", "/v1/health"),
];

/// The API's routes.
pub fn router(control: Arc<Control>) -> Router {
    let limit = control.max_upload_bytes;
    Router::new()
        .route("/v1/openapi.json", get(openapi))
        .route("/v1/whoami", get(tokens::whoami))
        .route("/v1/login", post(sessions::login))
        .route("/v1/logout", post(sessions::logout))
        .route(
            "/v1/users",
            get(sessions::list_operators).post(sessions::create_operator),
        )
        .route(
            "/v1/tenants/{tenant}/users",
            get(sessions::list).post(sessions::create),
        )
        .route(
            "/v1/tenants/{tenant}/users/{id}",
            axum::routing::delete(sessions::remove),
        )
        .route("/v1/tenants", get(tenants::list).post(tenants::create))
        .route(
            "/v1/tenants/{tenant}",
            get(tenants::show)
                .patch(tenants::update)
                .delete(tenants::delete),
        )
        .route(
            "/v1/tokens",
            get(tokens::list_operator).post(tokens::create_operator),
        )
        .route(
            "/v1/tokens/{id}",
            axum::routing::delete(tokens::revoke_operator),
        )
        .route(
            "/v1/tenants/{tenant}/tokens",
            get(tokens::list).post(tokens::create),
        )
        .route(
            "/v1/tenants/{tenant}/tokens/{id}",
            axum::routing::delete(tokens::revoke),
        )
        .route(
            "/v1/tenants/{tenant}/artifacts",
            get(artifacts::list).post(artifacts::upload),
        )
        .route(
            "/v1/tenants/{tenant}/apps",
            get(apps::list).post(apps::create),
        )
        .route("/v1/tenants/{tenant}/apps/{app}", get(apps::show))
        .route(
            "/v1/tenants/{tenant}/apps/{app}/versions",
            get(apps::versions).post(apps::create_version),
        )
        .route(
            "/v1/tenants/{tenant}/apps/{app}/versions/{number}",
            get(apps::version),
        )
        .route(
            "/v1/tenants/{tenant}/variables",
            get(variables::tenant_list),
        )
        .route(
            "/v1/tenants/{tenant}/variables/{name}",
            axum::routing::put(variables::tenant_set).delete(variables::tenant_delete),
        )
        .route(
            "/v1/tenants/{tenant}/apps/{app}/variables",
            get(variables::app_list),
        )
        .route(
            "/v1/tenants/{tenant}/apps/{app}/variables/{name}",
            axum::routing::put(variables::app_set).delete(variables::app_delete),
        )
        .route(
            "/v1/tenants/{tenant}/apps/{app}/deployments",
            get(apps::deployments).post(apps::deploy),
        )
        .route(
            "/v1/tenants/{tenant}/apps/{app}/rollback",
            post(apps::rollback),
        )
        .route(
            "/v1/tenants/{tenant}/sites",
            get(sites::list).post(sites::create),
        )
        .route(
            "/v1/tenants/{tenant}/sites/{site}",
            get(sites::show).patch(sites::update),
        )
        .route(
            "/v1/tenants/{tenant}/sites/{site}/rules",
            get(sites::rule_sets).post(sites::create_rules),
        )
        .route(
            "/v1/tenants/{tenant}/sites/{site}/rules/{number}",
            get(sites::rule_set),
        )
        .route(
            "/v1/tenants/{tenant}/sites/{site}/preview",
            post(sites::preview),
        )
        .route(
            "/v1/tenants/{tenant}/sites/{site}/origin",
            post(sites::fetch_origin),
        )
        .route(
            "/v1/tenants/{tenant}/sites/{site}/deployments",
            get(sites::deployments).post(sites::deploy),
        )
        .route(
            "/v1/tenants/{tenant}/sites/{site}/rollback",
            post(sites::rollback),
        )
        .route("/v1/tenants/{tenant}/audit", get(tenants::audit))
        .route("/v1/audit", get(tenants::audit_all))
        .route("/v1/tenants/{tenant}/metrics", get(metrics::tenant))
        .route("/v1/health", get(metrics::health))
        .fallback(|| async {
            ApiError::not_found("no such endpoint; GET /v1/openapi.json lists them")
        })
        .layer(DefaultBodyLimit::max(limit))
        .with_state(control)
}

async fn openapi() -> impl axum::response::IntoResponse {
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        include_str!("../../openapi.json"),
    )
}

/// Names of tenants and apps: what Spin allows for ids, lower-case.
pub fn check_name(field: &str, name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad(
            Some(field),
            format!(
                "{name:?} is not a name: 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter"
            ),
        ))
    }
}

/// How long an upload no version names is kept (it waits for the version
/// that will name it: `edge deploy` uploads, then makes the version);
/// `EDGE_UNUSED_UPLOAD_GRACE_MS` in the node's environment sets another.
const UNUSED_UPLOAD_GRACE_MS: i64 = 3_600_000;

impl Control {
    /// Forgets the tenant's uploads no version (nor the one it is `making`)
    /// names any more (after versions were pruned: they stop counting
    /// against its quota), and removes the bytes no tenant keeps.
    pub async fn forget_unused_uploads(
        &self,
        tenant_id: &str,
        making: &crate::model::VersionSpec,
    ) -> Result<(), ApiError> {
        let grace = std::env::var("EDGE_UNUSED_UPLOAD_GRACE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(UNUSED_UPLOAD_GRACE_MS);
        let (components, files) = self
            .db
            .forget_unused_uploads(tenant_id, grace, making)
            .await?;
        for (store, digests) in [
            (self.blobs.clone(), components),
            (self.blobs.files(), files),
        ] {
            for digest in digests {
                if let Err(e) = store.remove(&digest) {
                    tracing::warn!(%digest, error = %e, "an unused upload's bytes were not removed");
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    /// A node that is never reached: routing is all these tests look at.
    struct NoNode;

    #[async_trait::async_trait]
    impl Node for NoNode {
        async fn compile(&self, _: &Path) -> Result<(), String> {
            Err("no node".into())
        }
        async fn apply(&self, _: Desired, _: Option<SmokeRequest>) -> Result<(), String> {
            Err("no node".into())
        }
        fn claimed(&self) -> (Vec<String>, Vec<String>) {
            (Vec::new(), Vec::new())
        }
        fn pool_bounds(&self) -> PoolBounds {
            PoolBounds {
                instances: 1000,
                memory_bytes: 1 << 30,
                total_memory_bytes: 16 << 30,
            }
        }
        fn serves_sites(&self) -> bool {
            false
        }
        fn sidecar_programs(&self) -> Vec<String> {
            Vec::new()
        }
        fn metrics(&self, tenant: &str) -> TenantMetrics {
            // Every tenant's app "web" with one sample.
            TenantMetrics {
                interval_ms: 5000,
                apps: vec![AppSeries {
                    app: "web".into(),
                    points: vec![Point {
                        t: 1_000 + tenant.len() as i64,
                        rps: 2.0,
                        p50_ms: Some(1.5),
                        responses: Responses {
                            success: 10,
                            ..Default::default()
                        },
                        ..Default::default()
                    }],
                }],
            }
        }
        fn health(&self) -> NodeHealth {
            NodeHealth {
                status: "ok".into(),
                uptime_s: 7,
                ..Default::default()
            }
        }
        async fn fetch_origin(
            &self,
            tenant: &str,
            site: &str,
            path: &str,
        ) -> Result<OriginPage, OriginError> {
            // Site "page" answers; any other is not served.
            match site {
                "page" => Ok(OriginPage {
                    status: 200,
                    content_type: Some("text/plain".into()),
                    body: format!("{tenant}/{site}{path}"),
                    truncated: false,
                }),
                _ => Err(OriginError::NotServed(format!(
                    "site {site:?} is not served by this node yet"
                ))),
            }
        }
    }

    /// A control plane on a fresh SQLite database, and its directory.
    async fn fresh(name: &str) -> (Arc<Control>, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("edge-control-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = Db::open(&format!("sqlite://{}", dir.join("c.db").display()))
            .await
            .unwrap();
        let control = Arc::new(Control::new(
            db,
            Blobs::new(dir.join("blobs")),
            Arc::new(NoNode),
            1 << 20,
        ));
        (control, dir)
    }

    /// Sends `req`; its status, headers and JSON body (Null if none).
    async fn send(
        app: &Router,
        req: http::Request<axum::body::Body>,
    ) -> (u16, http::HeaderMap, serde_json::Value) {
        let resp = app.clone().oneshot(req).await.unwrap();
        let (parts, body) = resp.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 24).await.unwrap();
        let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        (parts.status.as_u16(), parts.headers, json)
    }

    #[tokio::test]
    async fn whoami_over_a_session_gives_back_its_csrf_token() {
        use argon2::password_hash::{PasswordHasher, SaltString, rand_core::OsRng};
        let (control, dir) = fresh("whoami").await;
        let password = "correct horse battery staple";
        let phc = argon2::Argon2::default()
            .hash_password(password.as_bytes(), &SaltString::generate(&mut OsRng))
            .unwrap()
            .to_string();
        control
            .db
            .create_user(None, "ada@example.com", &phc, None)
            .await
            .unwrap();
        let (token, _) = control
            .db
            .create_token(None, "ci", None, None)
            .await
            .unwrap();
        let app = router(control);

        let login = http::Request::post("/v1/login")
            .body(axum::body::Body::from(
                serde_json::json!({"login": "ada@example.com", "password": password}).to_string(),
            ))
            .unwrap();
        let (status, headers, logged_in) = send(&app, login).await;
        assert_eq!(status, 200, "{logged_in}");
        let cookie = headers[http::header::SET_COOKIE]
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_string();
        assert!(cookie.starts_with("edge_session="), "{cookie}");

        // After a page reload the console has only the cookie: whoami
        // gives back the login's CSRF token and expiry.
        let whoami = http::Request::get("/v1/whoami")
            .header(http::header::COOKIE, &cookie)
            .body(axum::body::Body::empty())
            .unwrap();
        let (status, _, me) = send(&app, whoami).await;
        assert_eq!(status, 200, "{me}");
        assert_eq!(me["login"], "ada@example.com");
        assert_eq!(me["role"], "operator");
        assert!(me["csrf_token"].as_str().is_some_and(|t| !t.is_empty()));
        assert_eq!(me["csrf_token"], logged_in["csrf_token"]);
        assert_eq!(me["expires_at"], logged_in["expires_at"]);

        // A token caller has no session: neither field is there.
        let whoami = http::Request::get("/v1/whoami")
            .header(
                http::header::AUTHORIZATION,
                format!("Bearer {}", token.token),
            )
            .body(axum::body::Body::empty())
            .unwrap();
        let (status, _, me) = send(&app, whoami).await;
        assert_eq!(status, 200, "{me}");
        assert_eq!(me["login"], "ci");
        let fields = me.as_object().unwrap();
        assert!(!fields.contains_key("csrf_token"), "{me}");
        assert!(!fields.contains_key("expires_at"), "{me}");

        // A session that ended answers 401, not a stale token.
        let logout = http::Request::post("/v1/logout")
            .header(http::header::COOKIE, &cookie)
            .header("x-csrf-token", logged_in["csrf_token"].as_str().unwrap())
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(send(&app, logout).await.0, 204);
        let whoami = http::Request::get("/v1/whoami")
            .header(http::header::COOKIE, &cookie)
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(send(&app, whoami).await.0, 401);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn metrics_reach_their_own_tenant_and_health_operators_only() {
        let (control, dir) = fresh("metrics").await;
        let db = &control.db;
        let quota = crate::model::Quota::default();
        let acme = db
            .create_tenant("acme", &["acme.test".into()], &quota, &[])
            .await
            .unwrap();
        db.create_tenant("beta", &["beta.test".into()], &quota, &[])
            .await
            .unwrap();
        db.create_app(&acme.id, "web").await.unwrap();
        db.create_app(&acme.id, "idle").await.unwrap();
        let (a, _) = db
            .create_token(Some(&acme.id), "ci", None, None)
            .await
            .unwrap();
        let (op, _) = db.create_token(None, "ops", None, None).await.unwrap();
        let app = router(control);
        let get = |path: &str, token: &str| {
            http::Request::get(path)
                .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
                .body(axum::body::Body::empty())
                .unwrap()
        };

        let (s, _, v) = send(&app, get("/v1/tenants/acme/metrics", &a.token)).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["interval_ms"], 5000);
        assert_eq!(v["apps"][0]["app"], "web");
        let point = &v["apps"][0]["points"][0];
        assert_eq!(point["rps"], 2.0);
        assert_eq!(point["p50_ms"], 1.5);
        assert!(point["p99_ms"].is_null());
        assert_eq!(point["responses"]["2xx"], 10);
        assert_eq!(point["responses"]["5xx"], 0);
        // One app; an app with no samples has no points; `since` cuts.
        let (_, _, v) = send(&app, get("/v1/tenants/acme/metrics?app=web", &a.token)).await;
        assert_eq!(v["apps"].as_array().unwrap().len(), 1);
        let (_, _, v) = send(&app, get("/v1/tenants/acme/metrics?app=idle", &a.token)).await;
        assert_eq!(
            v["apps"],
            serde_json::json!([{"app": "idle", "points": []}])
        );
        let (_, _, v) = send(&app, get("/v1/tenants/acme/metrics?since=1004", &a.token)).await;
        assert_eq!(v["apps"][0]["points"], serde_json::json!([]));
        let (s, _, v) = send(&app, get("/v1/tenants/acme/metrics?app=nope", &a.token)).await;
        assert_eq!(
            (s, v["error"]["message"].as_str()),
            (404, Some("no app \"nope\""))
        );
        let (s, _, v) = send(&app, get("/v1/tenants/acme/metrics?bogus=1", &a.token)).await;
        assert_eq!(s, 400, "{v}");
        // Another tenant's, or one that does not exist: the same 404.
        for other in ["beta", "gamma"] {
            let (s, _, v) =
                send(&app, get(&format!("/v1/tenants/{other}/metrics"), &a.token)).await;
            assert_eq!(s, 404, "{v}");
            assert_eq!(v["error"]["message"], format!("no tenant {other:?}"));
        }
        // Operators reach every tenant's, and the node's health.
        assert_eq!(
            send(&app, get("/v1/tenants/beta/metrics", &op.token))
                .await
                .0,
            200
        );
        let (s, _, v) = send(&app, get("/v1/health", &op.token)).await;
        assert_eq!(
            (s, v["status"].as_str(), v["uptime_s"].as_u64()),
            (200, Some("ok"), Some(7))
        );
        assert_eq!(send(&app, get("/v1/health", &a.token)).await.0, 403);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn a_site_s_origin_is_fetched_for_its_own_tenant_only() {
        let (control, dir) = fresh("origin").await;
        let db = &control.db;
        let quota = crate::model::Quota::default();
        let acme = db
            .create_tenant("acme", &["*.acme.test".into()], &quota, &[])
            .await
            .unwrap();
        let beta = db
            .create_tenant("beta", &["beta.test".into()], &quota, &[])
            .await
            .unwrap();
        let settings = crate::model::SiteSettings {
            origin: "http://origin.test".into(),
            origin_timeout_ms: 1000,
            content_types: Vec::new(),
        };
        for site in ["page", "dark"] {
            db.create_site(&acme.id, site, &[format!("{site}.acme.test")], &settings)
                .await
                .unwrap();
        }
        let (a, _) = db
            .create_token(Some(&acme.id), "ci", None, None)
            .await
            .unwrap();
        let (b, _) = db
            .create_token(Some(&beta.id), "ci", None, None)
            .await
            .unwrap();
        let app = router(control);
        let post = |site: &str, token: &str, body: serde_json::Value| {
            http::Request::post(format!("/v1/tenants/acme/sites/{site}/origin"))
                .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
                .body(axum::body::Body::from(body.to_string()))
                .unwrap()
        };
        let path = serde_json::json!({"path": "/some/page?x=1"});

        let (s, _, v) = send(&app, post("page", &a.token, path.clone())).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(
            v,
            serde_json::json!({"status": 200, "content_type": "text/plain",
                "body": "acme/page/some/page?x=1", "truncated": false})
        );
        // The node does not serve it (yet): 409 with the node's words.
        let (s, _, v) = send(&app, post("dark", &a.token, path.clone())).await;
        assert_eq!(s, 409, "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("not served")
        );
        // Another tenant's site is missing to this one.
        let (s, _, v) = send(&app, post("page", &b.token, path.clone())).await;
        assert_eq!(
            (s, &v["error"]["message"]),
            (404, &serde_json::json!("no tenant \"acme\""))
        );
        // A path that is not one: 400 naming it; so is anything else.
        for body in [
            serde_json::json!({"path": "page"}),
            serde_json::json!({"path": "/a b"}),
            serde_json::json!({"path": "/x", "host": "elsewhere"}),
        ] {
            let (s, _, v) = send(&app, post("page", &a.token, body.clone())).await;
            assert_eq!(s, 400, "{body}: {v}");
        }
        let (_, _, v) = send(
            &app,
            post("page", &a.token, serde_json::json!({"path": "/a\tb"})),
        )
        .await;
        assert_eq!(v["error"]["field"], "path", "{v}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_document_lists_exactly_the_endpoints() {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../openapi.json")).unwrap();
        let mut documented = Vec::new();
        for (path, ops) in doc["paths"].as_object().unwrap() {
            for method in ops.as_object().unwrap().keys() {
                documented.push((method.to_uppercase(), path.clone()));
            }
        }
        let mut listed: Vec<_> = ENDPOINTS
            .iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        documented.sort();
        listed.sort();
        assert_eq!(documented, listed);
    }

    #[tokio::test]
    async fn every_listed_endpoint_is_routed_and_needs_a_token() {
        let dir = std::env::temp_dir().join(format!("edge-control-routes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = Db::open(&format!("sqlite://{}", dir.join("c.db").display()))
            .await
            .unwrap();
        let control = Arc::new(Control::new(
            db,
            Blobs::new(dir.join("blobs")),
            Arc::new(NoNode),
            1 << 20,
        ));
        let app = router(control);
        for (method, path) in ENDPOINTS {
            let uri = path
                .replace("{tenant}", "t")
                .replace("{app}", "a")
                .replace("{site}", "s")
                .replace("{name}", "v")
                .replace("{id}", "k")
                .replace("{number}", "1");
            let req = http::Request::builder()
                .method(*method)
                .uri(&uri)
                .body(axum::body::Body::empty())
                .unwrap();
            let status = app.clone().oneshot(req).await.unwrap().status();
            let expected = match *path {
                "/v1/openapi.json" => 200,
                // No credentials needed; an empty body is malformed.
                "/v1/login" => 400,
                _ => 401,
            };
            assert_eq!(status.as_u16(), expected, "{method} {uri}");
        }
        let req = http::Request::get("/v1/nothing")
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(app.oneshot(req).await.unwrap().status(), 404);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
