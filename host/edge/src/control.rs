//! The node's side of the control plane (`edge_control`): the tenants and
//! apps in its database join the config files' tenants ([`merge`]), a
//! deploy goes through the same build-then-swap as a reload, checked by a
//! smoke request against the new app before it takes traffic, and uploads
//! compile in a child process bounded in time and memory.

use crate::app::App;
use crate::engine::ContentHash;
use crate::server::Shared;
use anyhow::{Context, Result};
use edge_config::{
    Component, Config, HostPattern, InstanceMode, OutboundRule, Route, RoutePattern, Tenant,
};
use edge_control::api::{MAX_ORIGIN_BODY, OriginError, OriginPage};
use edge_control::model::Desired;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The component of the node's manifest that proxies control-plane sites.
pub const SITE_COMPONENT: &str = "rewriter";

/// Where uploaded artifacts are kept.
pub fn blob_dir(config: &Config) -> PathBuf {
    config.server.data_dir.join("blobs")
}

/// The config `files` describe plus the control plane's tenants. A
/// database tenant whose name or a host a file tenant holds is left out
/// (the API refuses both; this covers an edge-config edited afterwards).
pub fn merge(files: &Config, desired: &Desired) -> Config {
    let mut config = files.clone();
    if desired.tenants.is_empty() {
        return config;
    }
    let blobs = edge_control::blobs::Blobs::new(blob_dir(files));
    let file_blobs = blobs.files();
    let claimed: Vec<HostPattern> = files.tenants.iter().flat_map(|t| t.hosts.clone()).collect();
    for t in &desired.tenants {
        let hosts: Vec<HostPattern> = t
            .hosts
            .iter()
            .filter_map(|h| HostPattern::parse(h).ok())
            .collect();
        if files.tenants.iter().any(|f| f.name == t.name)
            || hosts.iter().any(|h| claimed.contains(h))
        {
            tracing::error!(tenant = %t.name, "a control-plane tenant collides with an edge-config tenant (name or host); the edge-config one serves");
            continue;
        }
        let mut tenant = Tenant {
            name: t.name.clone(),
            hosts,
            components: BTreeSet::new(),
            limits: limits(&files.default_limits, &t.shares),
            variables: BTreeMap::new(),
            outbound: BTreeMap::new(),
            sites: Vec::new(),
            sidecar_programs: t.programs.iter().map(PathBuf::from).collect(),
            outbound_allow_ranges: files.outbound_allow_ranges.clone(),
            mixer: files.default_mixer,
        };
        for app in &t.apps {
            let mut from = 0u8;
            let split = app.versions.len() > 1;
            for (number, percent, spec) in &app.versions {
                let draw = split.then(|| {
                    let range = from..from.saturating_add(*percent).min(100);
                    from = range.end;
                    range
                });
                for (cid, c) in &spec.components {
                    let id = format!("{}/{}@{number}/{cid}", t.name, app.name);
                    let Some(source) = blobs.path(&c.digest) else {
                        continue;
                    };
                    config.components.insert(
                        id.clone(),
                        Component {
                            id: id.clone(),
                            source,
                            allowed_outbound_hosts: c
                                .allowed_outbound_hosts
                                .iter()
                                .filter_map(|r| OutboundRule::parse(r).ok())
                                .collect(),
                            key_value_stores: c.key_value_stores.clone(),
                            sqlite_databases: c.sqlite_databases.clone(),
                            outbound_templates: Vec::new(),
                            environment: Vec::new(),
                            // Spin's `files`: stored files, staged into a
                            // read-only tree when the app is built.
                            files: c
                                .files
                                .iter()
                                .filter_map(|f| {
                                    Some(edge_config::FileMount {
                                        host: file_blobs.path(&f.digest)?,
                                        guest: f.path.clone(),
                                        digest: Some(f.digest.clone()),
                                    })
                                })
                                .collect(),
                            mode: InstanceMode::Declared,
                            memory_bytes: None,
                        },
                    );
                    tenant.variables.insert(
                        id.clone(),
                        Arc::new(c.variables.clone().into_iter().collect()),
                    );
                    tenant.components.insert(id);
                }
                for r in &spec.routes {
                    let Ok(pattern) = RoutePattern::parse(&r.route) else {
                        continue;
                    };
                    config.routes.push(Route {
                        pattern,
                        component: format!("{}/{}@{number}/{}", t.name, app.name, r.component),
                        draw: draw.clone(),
                    });
                }
            }
        }
        add_sites(files, t, &mut tenant);
        config.tenants.push(tenant);
    }
    config
}

/// The control plane's sites of `t` as edge-config sites, proxied by the
/// node's [`SITE_COMPONENT`] (rules that no longer compile, or a node
/// without the component, leave a site out, with an error in the log).
fn add_sites(files: &Config, t: &edge_control::model::DesiredTenant, tenant: &mut Tenant) {
    if t.sites.is_empty() {
        return;
    }
    if !files.components.contains_key(SITE_COMPONENT) {
        tracing::error!(tenant = %t.name, "the node's manifest has no {SITE_COMPONENT:?} component: the tenant's sites are not served");
        return;
    }
    for s in &t.sites {
        let rules: Result<Vec<_>, String> = s
            .rules
            .iter()
            .map(|r| rewrite_engine::Rule::new(&r.pattern, &r.replacement).with_flags(&r.flags))
            .collect();
        let rules = match rules {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(tenant = %t.name, site = %s.name, error = %e, "a stored rule does not compile; the site is not served");
                continue;
            }
        };
        let content_types = if s.settings.content_types.is_empty() {
            edge_config::DEFAULT_CONTENT_TYPES
                .iter()
                .map(|c| c.to_string())
                .collect()
        } else {
            s.settings.content_types.clone()
        };
        let site = edge_config::Site {
            name: s.name.clone(),
            hosts: s.hosts.clone(),
            origin: s.settings.origin.trim_end_matches('/').to_string(),
            component: SITE_COMPONENT.into(),
            origin_timeout: Duration::from_millis(s.settings.origin_timeout_ms),
            content_types,
            rule_content_types: s.rules.iter().map(|r| r.content_types.clone()).collect(),
            rules,
            rules_file: None,
        };
        let vars = tenant.variables.entry(SITE_COMPONENT.into()).or_default();
        let vars = Arc::make_mut(vars);
        for h in &site.hosts {
            vars.insert(
                format!("{}{h}", edge_config::SITE_VARIABLE_PREFIX),
                site.guest_config(),
            );
        }
        tenant.components.insert(SITE_COMPONENT.into());
        tenant.sites.push(site);
    }
}

/// The node's `[limits]` with a tenant's shares over them.
fn limits(default: &edge_config::Limits, s: &edge_control::model::Shares) -> edge_config::Limits {
    let mut l = default.clone();
    let set = |v: Option<u64>, d: &mut u64| {
        if let Some(v) = v {
            *d = v;
        }
    };
    set(s.max_instances, &mut l.max_instances);
    set(s.max_sessions, &mut l.max_sessions);
    set(s.max_inflight, &mut l.max_inflight);
    set(s.session_rate, &mut l.session_rate);
    set(s.memory_bytes, &mut l.memory_bytes);
    set(s.max_total_memory_bytes, &mut l.max_total_memory_bytes);
    set(s.kv_store_bytes, &mut l.kv_store_bytes);
    if let Some(ms) = s.request_deadline_ms {
        l.request_deadline = Duration::from_millis(ms);
    }
    set(s.sqlite_database_bytes, &mut l.sqlite_database_bytes);
    let set = |v: Option<u64>, d: &mut usize| {
        if let Some(v) = v {
            *d = usize::try_from(v).unwrap_or(usize::MAX);
        }
    };
    set(s.max_outbound_requests, &mut l.max_outbound_requests);
    set(s.sqlite_statements, &mut l.sqlite_statements);
    set(s.max_open_files, &mut l.max_open_files);
    l
}

/// The node as the control plane sees it.
#[derive(Clone)]
pub struct Node {
    shared: Arc<Shared>,
    /// The `edge` binary, for compile workers.
    exe: PathBuf,
    /// Recent traffic, sampled.
    history: Arc<crate::history::History>,
}

impl Node {
    /// The node serving through `shared`, its traffic sampled in `history`.
    pub fn new(shared: Arc<Shared>, history: Arc<crate::history::History>) -> Result<Self> {
        Ok(Self {
            shared,
            exe: std::env::current_exe().context("finding the edge binary")?,
            history,
        })
    }

    /// Compiles `wasm` in a child process with the `[control]` limits,
    /// unless it is compiled already, and loads the result.
    /// `known`: the content hash when the caller has it (a stored
    /// artifact's digest), so the file is not read to learn it.
    fn compile_bounded(&self, wasm: &Path, known: Option<ContentHash>) -> Result<(), String> {
        let hash = match known {
            Some(h) => h,
            None => {
                let bytes = std::fs::read(wasm).map_err(|e| format!("reading the upload: {e}"))?;
                Sha256::digest(&bytes).into()
            }
        };
        let cache = &self.shared.runtime.cache;
        if cache.is_loaded(&hash)
            || (cache.compiled_file(&hash).is_some() && cache.adopt(&hash).is_ok())
        {
            return Ok(());
        }
        let app = self.shared.app.load();
        let control = app.config.control.clone();
        let (timeout, memory) = control
            .map(|c| (c.compile_timeout, c.compile_memory_bytes))
            .unwrap_or((Duration::from_secs(120), 4 << 30));
        let cmd = edge_spawn::Command::new(&self.exe)
            .arg("compile")
            .arg(wasm)
            .arg(cache.dir())
            .env_keep(&["PATH"])
            .limits(edge_spawn::Limits {
                // Cranelift compiles functions on every core: CPU time can
                // pass wall time, up to the cores' count.
                cpu_seconds: timeout.as_secs().max(1)
                    * std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
                address_space_bytes: memory,
                processes: 0,
                file_bytes: 1 << 30,
            });
        let started = std::time::Instant::now();
        let run = cmd
            .run_limited(&[], timeout, 64 << 10)
            .map_err(|e| format!("the compile worker: {e}"))?;
        if run.exit_code() != 0 {
            let stderr = String::from_utf8_lossy(&run.stderr);
            let why = stderr
                .lines()
                .map(|l| l.trim_start_matches("edge: "))
                .filter(|l| !l.trim().is_empty())
                .collect::<Vec<_>>()
                .join("; ");
            let out_of_memory = why.contains("allocat") || why.contains("out of memory");
            return Err(if started.elapsed() >= timeout {
                format!(
                    "it took longer than {} ms to compile ([control] compile_timeout_ms)",
                    timeout.as_millis()
                )
            } else if why.is_empty() || run.exit_code() > 128 || out_of_memory {
                format!(
                    "the compile worker was stopped (exit {}): it passed its memory ({memory} bytes, [control] compile_memory_bytes) or CPU limit",
                    run.exit_code()
                )
            } else {
                why
            });
        }
        tracing::info!(
            ms = started.elapsed().as_millis() as u64,
            "component compiled by a worker"
        );
        cache.adopt(&hash).map_err(|e| format!("{e:#}"))
    }

    /// Builds the app for `desired`, smoke-checks it, swaps it in.
    async fn apply_desired(
        &self,
        desired: Desired,
        smoke: Option<edge_control::SmokeRequest>,
    ) -> Result<(), String> {
        // A change that leaves the state as it serves (a node starting
        // with nothing deployed) builds nothing.
        if smoke.is_none() && *self.shared.app.load().desired == desired {
            return Ok(());
        }
        // Every artifact compiled by a bounded worker first: building the
        // app must find them all compiled (after a restart with an emptied
        // cache too).
        let blobs = edge_control::blobs::Blobs::new(blob_dir(&self.shared.app.load().files));
        let digests = desired
            .tenants
            .iter()
            .flat_map(|t| &t.apps)
            .flat_map(|a| &a.versions)
            .flat_map(|(_, _, spec)| spec.components.values())
            .map(|c| c.digest.clone());
        for digest in digests {
            let path = blobs.path(&digest).ok_or("a stored digest is malformed")?;
            let mut hash = ContentHash::default();
            let known = edge_control::blobs::digest_hex(&digest)
                .and_then(|h| hex::decode_to_slice(h, &mut hash).ok())
                .map(|()| hash);
            let me = self.clone();
            tokio::task::spawn_blocking(move || me.compile_bounded(&path, known))
                .await
                .map_err(|e| e.to_string())??;
        }
        let shared = self.shared.clone();
        let desired = Arc::new(desired);
        let built = tokio::task::spawn_blocking(move || {
            let _one = shared.changes.lock().unwrap_or_else(|e| e.into_inner());
            let old = shared.app.load_full();
            App::build_with(&shared.runtime, old.files.clone(), desired).map(|app| (app, old))
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("{e:#}"))?;
        let (app, old) = built;
        let newly_failed: Vec<String> = app
            .failed_components()
            .into_iter()
            .filter(|id| !old.failed_components().contains(id))
            .map(|id| match &app.status[id] {
                crate::app::ComponentStatus::Failed(why) => format!("{id}: {why}"),
                crate::app::ComponentStatus::Ready => id.to_string(),
            })
            .collect();
        if !newly_failed.is_empty() {
            return Err(format!(
                "components would fail to load: {}",
                newly_failed.join("; ")
            ));
        }
        // A new Worker script's top level runs once before it goes live:
        // one that throws is refused with the engine's words.
        let known: Vec<(Arc<str>, Arc<str>)> = old
            .worker_scripts()
            .iter()
            .map(|t| (t.tenant.clone(), t.component.clone()))
            .collect();
        for target in app.worker_scripts() {
            if known.contains(&(target.tenant.clone(), target.component.clone())) {
                continue;
            }
            crate::worker::check_top_level(&target)
                .await
                .map_err(|e| format!("component {}: {e}", target.component))?;
        }
        let app = Arc::new(app);
        if let Some(smoke) = smoke {
            smoke_check(&self.shared, &app, &smoke).await?;
        }
        let _one = self
            .shared
            .changes
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let current = self.shared.app.load_full();
        if !Arc::ptr_eq(&current, &old) {
            // A reload swapped in while this app was built on the config
            // before it: refused, the caller may try again.
            return Err("the node's configuration changed during the deploy; try again".into());
        }
        self.shared.app.store(app.clone());
        app.commit(&self.shared.runtime, Some(&old));
        tracing::info!("control plane: new deployment serving");
        Ok(())
    }
}

#[async_trait::async_trait]
impl edge_control::Node for Node {
    async fn compile(&self, wasm: &Path) -> Result<(), String> {
        let me = self.clone();
        let wasm = wasm.to_path_buf();
        tokio::task::spawn_blocking(move || me.compile_bounded(&wasm, None))
            .await
            .map_err(|e| e.to_string())?
    }

    async fn apply(
        &self,
        desired: Desired,
        smoke: Option<edge_control::SmokeRequest>,
    ) -> Result<(), String> {
        self.apply_desired(desired, smoke).await
    }

    fn sidecar_programs(&self) -> Vec<String> {
        let app = self.shared.app.load();
        app.files
            .sidecar
            .as_ref()
            .map(|s| s.allow.iter().map(|p| p.display().to_string()).collect())
            .unwrap_or_default()
    }

    fn pool_bounds(&self) -> edge_control::api::PoolBounds {
        let app = self.shared.app.load();
        let pool = &app.files.pool;
        edge_control::api::PoolBounds {
            instances: pool.total_component_instances as u64,
            memory_bytes: pool.max_memory_bytes,
            total_memory_bytes: pool.total_memory_bytes,
        }
    }

    fn serves_sites(&self) -> bool {
        self.shared
            .app
            .load()
            .files
            .components
            .contains_key(SITE_COMPONENT)
    }

    fn metrics(&self, tenant: &str) -> edge_control::api::TenantMetrics {
        let app = self.shared.app.load();
        let serving: Vec<String> = app
            .desired
            .tenants
            .iter()
            .filter(|t| t.name == tenant)
            .flat_map(|t| t.apps.iter().map(|a| a.name.clone()))
            .collect();
        edge_control::api::TenantMetrics {
            interval_ms: self.history.interval.as_millis() as u64,
            apps: self.history.series(tenant, &serving),
        }
    }

    fn health(&self) -> edge_control::api::NodeHealth {
        use std::sync::atomic::Ordering::Relaxed;
        let app = self.shared.app.load();
        let engines = &self.shared.runtime.engines;
        let in_use = engines
            .built()
            .filter_map(|e| e.pooling_allocator_metrics())
            .map(|p| p.component_instances())
            .sum();
        let pools = engines.built().count() as u64;
        let failed = app.failed_components().len() as u64;
        let (requests_1m, rps_1m) = self.history.last_minute();
        edge_control::api::NodeHealth {
            status: if self.shared.draining.load(Relaxed) {
                "draining"
            } else if failed > 0 {
                "degraded"
            } else {
                "ok"
            }
            .into(),
            pop: app.config.server.pop.clone(),
            uptime_s: self.shared.started.elapsed().as_secs(),
            instances: edge_control::api::Instances {
                in_use,
                total: app.files.pool.total_component_instances as u64 * pools,
            },
            tenants: app.config.tenants.len() as u64,
            apps: app
                .desired
                .tenants
                .iter()
                .map(|t| t.apps.len() as u64)
                .sum(),
            components: app.status.len() as u64,
            components_failed: failed,
            requests_1m,
            rps_1m,
            sample_interval_ms: self.history.interval.as_millis() as u64,
        }
    }

    async fn fetch_origin(
        &self,
        tenant: &str,
        site: &str,
        path: &str,
    ) -> Result<OriginPage, OriginError> {
        let app = self.shared.app.load_full();
        let not_served = || {
            OriginError::NotServed(format!(
                "site {site:?} is not served by this node yet (nothing routes to it: no deployment has put it in service, or its rules or the node's rewriter failed to load); try again once it serves"
            ))
        };
        // The control plane's tenant as it serves (one that a config
        // file's tenant of the same name shadows does not).
        if app.files.tenants.iter().any(|t| t.name == tenant) {
            return Err(not_served());
        }
        let served = app
            .config
            .tenants
            .iter()
            .find(|t| t.name == tenant)
            .and_then(|t| t.sites.iter().find(|s| s.name == site))
            .ok_or_else(not_served)?;
        let host = served.hosts.first().ok_or_else(not_served)?;
        // The policy the node built for the site's component: what its
        // requests to the origin go through.
        let policy = app
            .tenant_named(tenant)
            .and_then(|t| t.sites.get(host))
            .map(|route| route.target.spec.outbound.clone())
            .ok_or_else(not_served)?;
        fetch_page(&policy, &served.origin, host, path, served.origin_timeout).await
    }

    fn claimed(&self) -> (Vec<String>, Vec<String>) {
        let app = self.shared.app.load();
        let names = app.files.tenants.iter().map(|t| t.name.clone()).collect();
        let hosts = app
            .files
            .tenants
            .iter()
            .flat_map(|t| &t.hosts)
            .filter_map(|h| match h {
                HostPattern::Exact(e) => Some(e.clone()),
                HostPattern::Suffix(s) => Some(format!("*{s}")),
                HostPattern::Any => None,
            })
            .collect();
        (names, hosts)
    }
}

/// The `User-Agent` of the pages the console fetches from origins.
pub const PREVIEW_AGENT: &str = "edge-console-preview";

/// GETs `path` from `origin` through `policy` as the site's rewriter asks
/// its origin (`Host` the origin's authority, as wasi-http sets it for a
/// guest; `X-Forwarded-Host` the site's host, `X-Forwarded-Proto`), but for
/// the body as it is (`Accept-Encoding: identity`); `timeout` bounds each
/// step as the rewriter's request options do, and the whole fetch. The
/// body is read up to [`MAX_ORIGIN_BODY`] bytes.
async fn fetch_page(
    policy: &edge_outbound_http::OutboundPolicy,
    origin: &str,
    site_host: &str,
    path: &str,
    timeout: Duration,
) -> Result<OriginPage, OriginError> {
    use http::header;
    use http_body_util::BodyExt;
    let failed = |why: String| OriginError::Failed(why);
    let base: http::Uri = origin
        .parse()
        .map_err(|e| failed(format!("the site's origin {origin:?}: {e}")))?;
    let (Some(scheme), Some(authority)) = (base.scheme(), base.authority()) else {
        return Err(failed(format!(
            "the site's origin {origin:?} is not scheme://host"
        )));
    };
    let uri = http::Uri::builder()
        .scheme(scheme.clone())
        .authority(authority.clone())
        .path_and_query(path)
        .build()
        .map_err(|e| failed(format!("the path {path:?}: {e}")))?;
    let empty = http_body_util::Empty::new()
        .map_err(|e: std::convert::Infallible| match e {})
        .boxed_unsync();
    let request = http::Request::get(uri)
        .header(header::HOST, authority.as_str())
        .header(header::ACCEPT_ENCODING, "identity")
        .header(header::USER_AGENT, PREVIEW_AGENT)
        .header("x-forwarded-host", site_host)
        .header("x-forwarded-proto", "http")
        .body(empty)
        .map_err(|e| failed(format!("the request: {e}")))?;
    let options = wasmtime_wasi_http::RequestOptions {
        connect_timeout: Some(timeout),
        first_byte_timeout: Some(timeout),
        between_bytes_timeout: Some(timeout),
    };
    let ms = timeout.as_millis();
    let fetch = async {
        let (response, _io) = policy
            .send(request, Some(options))
            .await
            .map_err(|e| origin_refused(e, origin, ms))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        let mut truncated = false;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                failed(format!(
                    "{origin} answered {status}, then its body failed after {} bytes: {}",
                    bytes.len(),
                    origin_refused(e, origin, ms)
                ))
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let room = MAX_ORIGIN_BODY - bytes.len();
            if data.len() > room {
                bytes.extend_from_slice(&data[..room]);
                truncated = true;
                break;
            }
            bytes.extend_from_slice(&data);
        }
        // Dropped unread, the rest closes its connection and gives back
        // the tenant's place at once.
        drop(body);
        Ok(OriginPage {
            status,
            content_type,
            body: lossy_utf8(bytes, truncated),
            truncated,
        })
    };
    tokio::time::timeout(timeout, fetch).await.map_err(|_| {
        failed(format!(
            "{origin} gave no whole answer within {ms} ms (the site's origin_timeout_ms)"
        ))
    })?
}

/// `bytes` as UTF-8, invalid sequences replaced; a character cut at the
/// end of a `truncated` body is dropped rather than replaced.
fn lossy_utf8(mut bytes: Vec<u8>, truncated: bool) -> String {
    if truncated
        && let Err(e) = std::str::from_utf8(&bytes)
        && e.error_len().is_none()
    {
        bytes.truncate(e.valid_up_to());
    }
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Why the outbound policy or the origin gave no answer, as the console
/// is told.
fn origin_refused(e: wasmtime_wasi_http::Error, origin: &str, ms: u128) -> OriginError {
    use wasmtime_wasi_http::Error as E;
    match e {
        E::DestinationIpProhibited => OriginError::Prohibited(format!(
            "the origin's address ({origin}) is not reachable from this tenant (see [outbound] allow_ranges)"
        )),
        E::HttpRequestDenied => OriginError::Prohibited(format!(
            "the origin {origin} is not among the destinations the site's component may reach"
        )),
        E::ConnectionLimitReached => OriginError::Busy(
            "this tenant has its max_outbound_requests in flight; try again".into(),
        ),
        E::ConnectionTimeout => OriginError::Failed(format!(
            "connecting to {origin} timed out after {ms} ms (the site's origin_timeout_ms)"
        )),
        E::ConnectionReadTimeout | E::HttpResponseTimeout => OriginError::Failed(format!(
            "{origin} sent nothing for {ms} ms (the site's origin_timeout_ms)"
        )),
        E::DnsError { .. } | E::DestinationNotFound => {
            OriginError::Failed(format!("cannot resolve the origin {origin}: {e}"))
        }
        e => OriginError::Failed(format!("cannot fetch from {origin}: {e}")),
    }
}

/// The header that sends a request to the app being deployed instead of
/// the serving one; its value is a secret made for that one deploy.
pub const PREVIEW_HEADER: &str = "x-edge-preview";

/// An app built but not yet serving, reachable only with its token.
pub struct Preview {
    /// The secret a request must carry in [`PREVIEW_HEADER`].
    pub token: String,
    /// The app.
    pub app: Arc<App>,
}

/// Sends the smoke request through this node's own listener to `app`
/// (not yet serving) and checks its status.
async fn smoke_check(
    shared: &Arc<Shared>,
    app: &Arc<App>,
    smoke: &edge_control::SmokeRequest,
) -> Result<(), String> {
    let token = edge_control::secret::new_id("p");
    shared.preview.store(Some(Arc::new(Preview {
        token: token.clone(),
        app: app.clone(),
    })));
    let result = smoke_request(shared, &token, smoke).await;
    shared.preview.store(None);
    let status = result?;
    if status != smoke.status {
        return Err(format!(
            "the smoke check GET {} answered {status}, not {}",
            smoke.path, smoke.status
        ));
    }
    Ok(())
}

async fn smoke_request(
    shared: &Arc<Shared>,
    token: &str,
    smoke: &edge_control::SmokeRequest,
) -> Result<u16, String> {
    use http_body_util::{BodyExt, Empty};
    let addr = shared.app_addr().ok_or("the node has no listener yet")?;
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("the smoke check could not connect: {e}"))?;
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| format!("the smoke check: {e}"))?;
    tokio::spawn(conn);
    let req = http::Request::get(&smoke.path)
        .header(http::header::HOST, &smoke.host)
        .header(PREVIEW_HEADER, token)
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|e| format!("the smoke check's path {:?}: {e}", smoke.path))?;
    let call = async {
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| format!("the smoke check: {e}"))?;
        let status = resp.status().as_u16();
        let _ = resp.into_body().collect().await;
        Ok::<_, String>(status)
    };
    tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .map_err(|_| "the smoke check got no answer within 30 s".to_string())?
}

/// Opens the database, writes the first operator token if there is none,
/// and starts the API on `[control] listen`; the API's address.
pub async fn start(
    shared: Arc<Shared>,
    control: &edge_config::ControlPlane,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<std::net::SocketAddr> {
    let db = edge_control::Db::open(&control.database)
        .await
        .context("opening the control plane's database")?;
    let files = shared.app.load().files.clone();
    bootstrap_operator(&db, &files.server.data_dir).await?;
    let history = Arc::new(crate::history::History::new(
        crate::history::History::interval_from_env(),
    ));
    history.spawn(shared.runtime.metrics.clone(), stop.clone());
    let node = Arc::new(Node::new(shared.clone(), history)?);
    let registry = control
        .registry
        .as_deref()
        .map(edge_control::registry::Registry::new)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let control_state = Arc::new(
        edge_control::Control::new(
            db,
            edge_control::blobs::Blobs::new(blob_dir(&files)),
            node,
            control.max_upload_bytes as usize,
        )
        .with_registry(registry),
    );
    control_state
        .apply_stored()
        .await
        .map_err(|e| anyhow::anyhow!("serving the control plane's apps: {e}"))?;
    let listener = tokio::net::TcpListener::bind(control.listen)
        .await
        .with_context(|| format!("binding the control API on {}", control.listen))?;
    let addr = listener.local_addr()?;
    let mut router = edge_control::router(control_state);
    match crate::console::dir(control.console.as_deref()) {
        Some(dir) => {
            tracing::info!(dir = %dir.display(), "the web console is served with the control API");
            router = crate::console::router(router, &dir);
        }
        None => tracing::info!(
            "no web console: the control listener serves the API alone (the console is {} above the working directory or the edge binary, or [control] console)",
            crate::console::DEFAULT_INDEX
        ),
    }
    tokio::spawn(crate::control_listener::serve(
        listener,
        router,
        files.server.clone(),
        control.max_upload_bytes,
        stop.clone(),
    ));
    Ok(addr)
}

/// Without any operator, makes one token and writes it (mode 0600) to
/// `DATA_DIR/control/operator.token`: the way in for the first operator.
async fn bootstrap_operator(db: &edge_control::Db, data_dir: &Path) -> Result<()> {
    if db.has_operator().await? {
        return Ok(());
    }
    let (token, _) = db
        .create_token(None, "bootstrap operator", None, None)
        .await?;
    let dir = data_dir.join("control");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("operator.token");
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("writing {}", path.display()))?;
    writeln!(f, "{}", token.token)?;
    tracing::warn!(path = %path.display(), "created the first operator's API token (keep it secret; create others with `edge tokens create` and revoke this one)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use edge_outbound_http::{AddressPolicy, OutboundPolicy, TenantOutbound};
    use http_body_util::Full;
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An origin on 127.0.0.1 answering each request with its request
    /// headers (`name: value` lines), then `pad` bytes of `é`, after
    /// `delay`; counts the requests it answered.
    async fn origin(pad: usize, delay: Duration) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let answered = Arc::new(AtomicUsize::new(0));
        let count = answered.clone();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let count = count.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: http::Request<_>| {
                        let count = count.clone();
                        async move {
                            tokio::time::sleep(delay).await;
                            count.fetch_add(1, Ordering::SeqCst);
                            let mut text = format!("{}\n", req.uri());
                            for (k, v) in req.headers() {
                                text.push_str(&format!("{k}: {}\n", v.to_str().unwrap()));
                            }
                            text.push_str(&"é".repeat(pad / 2));
                            let mut resp = http::Response::new(Full::new(bytes::Bytes::from(text)));
                            resp.headers_mut().insert(
                                "content-type",
                                "text/plain; charset=utf-8".parse().unwrap(),
                            );
                            Ok::<_, Infallible>(resp)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        (url, answered)
    }

    /// A site component's policy: the origin allowed, `ranges` open.
    fn policy(origin: &str, ranges: &[&str]) -> OutboundPolicy {
        OutboundPolicy::new(vec![OutboundRule::parse(origin).unwrap()], "t/rewriter")
            .with_addresses(AddressPolicy::new(
                ranges.iter().map(|r| r.parse().unwrap()).collect(),
                Default::default(),
            ))
            .with_tenant(Arc::new(TenantOutbound::new("t", 4)))
    }

    #[test]
    fn each_share_sets_its_own_limit_and_unset_ones_keep_the_nodes() {
        let node = edge_config::Limits {
            request_deadline: Duration::from_secs(30),
            memory_bytes: 1,
            kv_store_bytes: 2,
            sqlite_database_bytes: 3,
            sqlite_statements: 4,
            max_open_files: 5,
            max_outbound_requests: 6,
            max_instances: 7,
            max_total_memory_bytes: 13,
            max_sessions: 8,
            max_inflight: 9,
            session_rate: 10,
            max_host_resources: 11,
            max_fields_bytes: 12,
        };
        assert_eq!(limits(&node, &Default::default()), node);
        let shares = edge_control::model::Shares {
            max_instances: Some(107),
            max_sessions: Some(108),
            max_inflight: Some(109),
            session_rate: Some(110),
            memory_bytes: Some(101),
            max_total_memory_bytes: Some(111),
            request_deadline_ms: Some(500),
            max_outbound_requests: Some(106),
            kv_store_bytes: Some(102),
            sqlite_database_bytes: Some(103),
            sqlite_statements: Some(104),
            max_open_files: Some(105),
        };
        let want = edge_config::Limits {
            request_deadline: Duration::from_millis(500),
            memory_bytes: 101,
            kv_store_bytes: 102,
            sqlite_database_bytes: 103,
            sqlite_statements: 104,
            max_open_files: 105,
            max_outbound_requests: 106,
            max_instances: 107,
            max_total_memory_bytes: 111,
            max_sessions: 108,
            max_inflight: 109,
            session_rate: 110,
            ..node.clone()
        };
        assert_eq!(limits(&node, &shares), want);
    }

    #[tokio::test]
    async fn a_page_is_fetched_as_the_rewriter_asks_for_it() {
        let (url, _) = origin(0, Duration::ZERO).await;
        let p = policy(&url, &["127.0.0.1/32"]);
        let page = fetch_page(
            &p,
            &url,
            "www.acme.test",
            "/a/b?x=1",
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert_eq!(page.status, 200);
        assert_eq!(
            page.content_type.as_deref(),
            Some("text/plain; charset=utf-8")
        );
        assert!(!page.truncated);
        let authority = url.trim_start_matches("http://");
        let lines: Vec<&str> = page.body.lines().collect();
        assert_eq!(lines[0], "/a/b?x=1");
        for header in [
            format!("host: {authority}"),
            "accept-encoding: identity".into(),
            "user-agent: edge-console-preview".into(),
            "x-forwarded-host: www.acme.test".into(),
            "x-forwarded-proto: http".into(),
        ] {
            assert!(lines.contains(&header.as_str()), "{header} in {lines:?}");
        }
    }

    #[tokio::test]
    async fn a_long_body_is_cut_at_the_cap_on_a_character() {
        let (url, _) = origin(MAX_ORIGIN_BODY + 10, Duration::ZERO).await;
        let page = fetch_page(
            &policy(&url, &["127.0.0.1/32"]),
            &url,
            "h",
            "/",
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert!(page.truncated);
        assert!(page.body.len() <= MAX_ORIGIN_BODY && page.body.len() > MAX_ORIGIN_BODY - 2);
        assert!(
            page.body.ends_with('é'),
            "no replacement character at the cut"
        );
    }

    #[tokio::test]
    async fn refusals_and_failures_say_why_and_never_hang() {
        let (url, answered) = origin(0, Duration::from_secs(30)).await;
        // Outside the tenant's ranges: refused before anything is sent.
        let e = fetch_page(&policy(&url, &[]), &url, "h", "/", Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, OriginError::Prohibited(m) if m.contains("not reachable from this tenant") && m.contains("allow_ranges")),
            "{e:?}"
        );
        // A slow origin: the site's timeout ends the fetch.
        let started = std::time::Instant::now();
        let e = fetch_page(
            &policy(&url, &["127.0.0.1/32"]),
            &url,
            "h",
            "/",
            Duration::from_millis(300),
        )
        .await
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            matches!(&e, OriginError::Failed(m) if m.contains("300 ms")),
            "{e:?}"
        );
        assert_eq!(answered.load(Ordering::SeqCst), 0);
        // Nothing listening: a connect error.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let gone = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let e = fetch_page(
            &policy(&gone, &["127.0.0.1/32"]),
            &gone,
            "h",
            "/",
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&e, OriginError::Failed(m) if m.contains("refused")),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn a_flood_of_fetches_stops_at_the_tenants_outbound_cap() {
        // The tenant may have 4 outbound requests in flight (`policy`):
        // four slow fetches hold them, the fifth is refused (not queued).
        let (url, _) = origin(0, Duration::from_secs(2)).await;
        let p = policy(&url, &["127.0.0.1/32"]);
        let held: Vec<_> = (0..4)
            .map(|_| {
                let (p, url) = (p.clone(), url.clone());
                tokio::spawn(async move {
                    fetch_page(&p, &url, "h", "/", Duration::from_secs(10)).await
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let e = fetch_page(&p, &url, "h", "/", Duration::from_secs(10))
            .await
            .unwrap_err();
        assert!(matches!(e, OriginError::Busy(_)), "{e:?}");
        for h in held {
            assert_eq!(h.await.unwrap().unwrap().status, 200);
        }
        // The places are given back: the next fetch goes through.
        assert!(
            fetch_page(&p, &url, "h", "/", Duration::from_secs(10))
                .await
                .is_ok()
        );
    }

    #[test]
    fn only_a_cut_character_at_the_end_is_dropped() {
        let e = "é".as_bytes();
        assert_eq!(lossy_utf8([b"ab", &e[..1]].concat(), true), "ab");
        assert_eq!(lossy_utf8([b"ab", &e[..1]].concat(), false), "ab\u{fffd}");
        assert_eq!(lossy_utf8([&e[1..], b"ab"].concat(), true), "\u{fffd}ab");
    }
}
