//! A loaded application: tenants, routes and prepared components, built
//! from a [`Config`] beside the one serving and swapped in whole.

use crate::engine::{ComponentCache, ContentHash, EngineKind, Engines, EpochTicker};
use crate::metrics::{Metrics, RouteMetrics};
use crate::routes::{Matched, Routes, TenantRoute};
use crate::session::{SessionPool, SessionRegistry};
use crate::state::{HostState, StoreSpec};
use anyhow::{Context, Result};
use edge_config::{Config, HostPattern, InstanceMode};
use edge_keyvalue::Grants;
use edge_outbound_http::OutboundPolicy;
use edge_variables::Variables;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use wasmtime::Engine;
use wasmtime::component::Linker;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p3::bindings::ServicePre;

/// Process-wide parts that outlive any one config: the engine and its
/// ticker, the compile cache, metrics and pinned sessions.
pub struct Runtime {
    /// The engines (plain, and concurrent once a component needs it).
    pub engines: Arc<Engines>,
    /// Compiled components by content hash.
    pub cache: ComponentCache,
    /// Host-wide metrics.
    pub metrics: Arc<Metrics>,
    /// Session pools, kept across reloads while their component is unchanged.
    pub sessions: SessionRegistry,
    /// Key-value store files, each opened once while any config grants it.
    pub kv: edge_keyvalue::Registry,
    /// Where tenants' SQLite databases live (`DATA_DIR/sqlite`); a file
    /// is opened only when a guest opens it.
    pub sqlite: std::path::PathBuf,
    /// Each tenant's SQLite statement slots (`sqlite_statements`).
    pub sqlite_slots: edge_sqlite::StatementSlots,
    /// Where components' files are staged (`DATA_DIR/files`).
    pub files: std::path::PathBuf,
    /// Mixing rooms, kept across reloads.
    pub mixer: Arc<edge_mixer::Mixer>,
    /// Each tenant's share of the host, kept across reloads.
    pub shares: crate::share::Shares,
    /// Whether the engine resets dropped instances' memories in place (safe
    /// only without swap; see [`crate::engine::resets_in_place`]).
    pub resets_in_place: bool,
    /// Outbound HTTP: each tenant's requests in flight and refusals, and
    /// the host's listeners (no guest may reach them).
    pub outbound: edge_outbound_http::Registry,
    /// Where Workers' service bindings are served ([`crate::services`]).
    pub services: crate::services::Router,
    /// The background lane, where tenants over their CPU share and long
    /// calls run ([`crate::lanes`]).
    pub background: crate::lanes::Background,
    /// The pool the engines were built with (it applies at start only).
    pub pool: edge_config::Pool,
    _keeper: crate::lanes::Keeper,
    _ticker: EpochTicker,
}

impl Runtime {
    /// Creates the engine from `config`'s pool settings and starts the ticker.
    pub fn new(config: &Config) -> Result<Self> {
        Self::with_kv(
            config,
            edge_keyvalue::Registry::new(&config.server.data_dir.join("kv")),
        )
    }

    /// Like [`Runtime::new`] with key-value stores in memory: for checking a
    /// config while a server holds the store files.
    pub fn for_check(config: &Config) -> Result<Self> {
        Self::with_kv(config, edge_keyvalue::Registry::in_memory())
    }

    fn with_kv(config: &Config, kv: edge_keyvalue::Registry) -> Result<Self> {
        let resets_in_place = crate::engine::resets_in_place();
        let engines = Arc::new(Engines::new(&config.pool, resets_in_place)?);
        let cache = ComponentCache::new(engines.clone(), &config.server.data_dir.join("cache"));
        let mixer = Arc::new(edge_mixer::Mixer::new(config.mixer_max_total_bytes));
        // Idle rooms go within a second of their timeout, whether or not
        // anyone opens another room.
        edge_mixer::Mixer::spawn_janitor(&mixer, Duration::from_secs(1));
        let shares = crate::share::Shares::default();
        let threads = crate::server::worker_count(&config.server);
        Ok(Self {
            background: crate::lanes::Background::start(threads)
                .context("starting the background lane")?,
            _keeper: crate::lanes::Keeper::start(shares.clone(), threads),
            _ticker: EpochTicker::start(&engines),
            engines,
            cache,
            metrics: Arc::default(),
            sessions: SessionRegistry::new(config.pool.session_instances as usize),
            kv,
            sqlite: config.server.data_dir.join("sqlite"),
            sqlite_slots: Default::default(),
            files: config.server.data_dir.join("files"),
            mixer,
            shares,
            resets_in_place,
            outbound: Default::default(),
            services: Default::default(),
            pool: config.pool.clone(),
        })
    }
}

/// A component ready to instantiate.
pub struct Prepared {
    /// Linked and type-checked against its HTTP entry point.
    pub entry: Entry,
    /// Content hash of the component's bytes.
    pub hash: ContentHash,
    /// What it declares if it is a Worker.
    pub worker: Option<crate::worker::Declaration>,
    /// For a Worker script: its bundle, which the Workers engine (`entry`)
    /// runs.
    pub script: Option<Arc<str>>,
    /// How many of its tenant's `max_instances` one instance takes
    /// ([`instance_weight`]).
    pub weight: u64,
}

impl Prepared {
    /// The engine its instances live in.
    pub fn engine(&self) -> &Engine {
        match &self.entry {
            Entry::P2(pre) => pre.engine(),
            Entry::P3(pre) => pre.engine(),
        }
    }
}

/// A component's HTTP entry point, in either WASI generation.
pub enum Entry {
    /// WASI 0.2: exports `wasi:http/incoming-handler`.
    P2(ProxyPre<HostState>),
    /// WASI 0.3: exports `wasi:http/handler@0.3.0`, with async functions.
    P3(ServicePre<HostState>),
}

/// What a route leads to: one component as seen by one tenant.
pub struct Target {
    /// Tenant name.
    pub tenant: Arc<str>,
    /// Component id.
    pub component: Arc<str>,
    /// The prepared component, or why it failed to load.
    pub prepared: Result<Arc<Prepared>, Arc<str>>,
    /// The engine its stores are made in.
    pub engine: Engine,
    /// Store settings for this tenant and component.
    pub spec: StoreSpec,
    /// Wall-clock limit per request.
    pub deadline: Duration,
    /// Metrics of this tenant and component.
    pub metrics: Arc<RouteMetrics>,
    /// Pinned sessions, for per-session components.
    pub sessions: Option<Arc<SessionPool>>,
    /// The tenant's share of the host.
    pub share: Arc<crate::share::TenantShare>,
    /// Every tenant's idle sessions, to take a slot back from when the
    /// pool is full.
    pub idle_sessions: crate::session::IdleSessions,
    /// Where calls over their tenant's CPU share run.
    pub background: tokio::runtime::Handle,
    /// Whether it is a Worker (its requests carry Cloudflare's headers,
    /// not Spin's).
    pub worker: bool,
}

impl Target {
    /// How many of its tenant's `max_instances` one of its instances takes.
    pub fn weight(&self) -> u64 {
        self.prepared.as_ref().map_or(1, |p| p.weight)
    }
}

/// A tenant's routes.
pub struct TenantRt {
    /// Tenant name.
    pub name: Arc<str>,
    /// Routes to the components this tenant was granted.
    pub routes: Routes,
    /// Hosts of the tenant's sites: every path of such a host goes to the
    /// site's component, before the manifest's routes are looked at.
    pub sites: HashMap<String, TenantRoute>,
    /// Each of its apps as service bindings reach it, by name
    /// ([`crate::services`]): see [`service_routes`].
    pub services: HashMap<String, Routes>,
}

/// A number from 0 to 99 per request, for splitting traffic between two
/// versions: a process-wide counter through SplitMix64, seeded at random
/// (uniform and cheap; nothing depends on it being unpredictable).
pub(crate) fn draw() -> u8 {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ (std::process::id() as u64) << 32
    });
    let mut z = seed.wrapping_add(NEXT.fetch_add(0x9E37_79B9_7F4A_7C15, Relaxed));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z % 100) as u8
}

impl TenantRt {
    /// The route for a request: the site's if `host` is a site's, else
    /// the best manifest route for `path` (Spin's precedence).
    pub fn route(&self, host: &str, path: &str) -> Option<Matched<'_>> {
        if !self.sites.is_empty() {
            let host = strip_port(host).to_ascii_lowercase();
            if let Some(site) = self.sites.get(host.strip_suffix('.').unwrap_or(&host)) {
                // A site takes every path, as `/...` would.
                return Some(Matched {
                    route: site,
                    path_info: path.to_string(),
                    params: Vec::new(),
                });
            }
        }
        let draw = self.routes.splits().then(draw);
        self.routes.find(path, draw)
    }
}

/// Load status of a component, for `/health`.
#[derive(Clone, Debug)]
pub enum ComponentStatus {
    /// Compiled and linked.
    Ready,
    /// Failed to load; the reason.
    Failed(String),
}

/// Everything one config serves.
pub struct App {
    /// What it serves: the config files' tenants and the control plane's.
    pub config: Config,
    /// The config files alone, as loaded.
    pub files: Config,
    /// The control plane's part.
    pub desired: Arc<edge_control::model::Desired>,
    tenants: Vec<TenantRt>,
    hosts: HostIndex,
    /// Load status per component id.
    pub status: BTreeMap<String, ComponentStatus>,
    /// Content hashes of the components it runs.
    compiled: std::collections::HashSet<ContentHash>,
}

impl App {
    /// Builds an app: compiles (or loads from cache) and links every
    /// component, and resolves every tenant's routes. A component that fails
    /// to load is reported in [`App::status`]; its routes answer 503.
    pub fn build(rt: &Runtime, config: Config) -> Result<Self> {
        Self::build_with(rt, config, Arc::default())
    }

    /// Builds an app serving the tenants of the config `files` and those
    /// the control plane's `desired` state adds ([`crate::control::merge`]).
    pub fn build_with(
        rt: &Runtime,
        files: Config,
        desired: Arc<edge_control::model::Desired>,
    ) -> Result<Self> {
        let config = crate::control::merge(&files, &desired);
        rt.cache.set_workers_engine(crate::worker::engine_path(
            config.server.workers_engine.as_deref(),
        ));
        let mut prepared: BTreeMap<String, Result<Arc<Prepared>, Arc<str>>> = BTreeMap::new();
        let mut status = BTreeMap::new();
        for (id, component) in &config.components {
            match prepare(rt, component) {
                Ok(p) => {
                    status.insert(id.clone(), ComponentStatus::Ready);
                    prepared.insert(id.clone(), Ok(Arc::new(p)));
                }
                Err(e) => {
                    let reason = format!("{e:#}");
                    tracing::error!(component = %id, error = %reason, "component failed to load; its routes answer 503");
                    status.insert(id.clone(), ComponentStatus::Failed(reason.clone()));
                    prepared.insert(id.clone(), Err(reason.into()));
                }
            }
        }

        let mut tenants = Vec::new();
        let mut hosts = HostIndex::default();
        for (index, tenant) in config.tenants.iter().enumerate() {
            let name: Arc<str> = tenant.name.as_str().into();
            let mut targets: HashMap<&str, Arc<Target>> = HashMap::new();
            let mut target_for = |id: &str| -> Arc<Target> {
                let component = &config.components[id];
                targets
                    .entry(component.id.as_str())
                    .or_insert_with(|| {
                        build_target(rt, tenant, component, &prepared[id], &mut status, &config)
                    })
                    .clone()
            };
            let mut routes = Routes::default();
            for route in &config.routes {
                if !tenant.components.contains(&route.component) {
                    continue;
                }
                let raw = route.pattern.as_str();
                routes
                    .add(
                        raw,
                        TenantRoute::new(raw, target_for(&route.component), route.draw.clone()),
                    )
                    .map_err(anyhow::Error::msg)?;
            }
            let services = service_routes(tenant, &config, &prepared, &mut target_for)?;
            warn_unbound(
                &name,
                routes
                    .iter()
                    .chain(services.values().flat_map(Routes::iter)),
                &services,
            );
            let mut sites = HashMap::new();
            for site in &tenant.sites {
                for host in &site.hosts {
                    sites.insert(
                        host.clone(),
                        TenantRoute::new("/...", target_for(&site.component), None),
                    );
                }
            }
            for h in &tenant.hosts {
                hosts.insert(h, index);
            }
            tenants.push(TenantRt {
                name,
                routes,
                sites,
                services,
            });
        }
        hosts
            .suffix
            .sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));

        let compiled = prepared
            .values()
            .filter_map(|p| p.as_ref().ok().map(|p| p.hash))
            .collect();
        let failed = status
            .values()
            .filter(|s| matches!(s, ComponentStatus::Failed(_)))
            .count();
        rt.metrics
            .components_failed
            .store(failed as i64, std::sync::atomic::Ordering::Relaxed);
        Ok(Self {
            config,
            files,
            desired,
            tenants,
            hosts,
            status,
            compiled,
        })
    }

    /// The tenant serving `host` (a Host header or URI authority, port
    /// allowed).
    pub fn tenant(&self, host: &str) -> Option<&TenantRt> {
        self.hosts.find(host).map(|i| &self.tenants[i])
    }

    /// Every route of every tenant: manifest routes, sites and the routes
    /// service bindings take.
    fn all_routes(&self) -> impl Iterator<Item = &TenantRoute> {
        self.tenants.iter().flat_map(|t| {
            t.routes
                .iter()
                .chain(t.sites.values())
                .chain(t.services.values().flat_map(Routes::iter))
        })
    }

    /// Every Worker script it serves: each target once.
    pub fn worker_scripts(&self) -> Vec<Arc<Target>> {
        let mut found: Vec<Arc<Target>> = Vec::new();
        for route in self.all_routes() {
            let script = matches!(&route.target.prepared, Ok(p) if p.script.is_some());
            if script && !found.iter().any(|t| Arc::ptr_eq(t, &route.target)) {
                found.push(route.target.clone());
            }
        }
        found
    }

    /// The tenant named `name`.
    pub fn tenant_named(&self, name: &str) -> Option<&TenantRt> {
        self.tenants.iter().find(|t| &*t.name == name)
    }

    /// Every session pool this app routes to.
    pub fn session_pools(&self) -> Vec<Arc<SessionPool>> {
        let mut pools: Vec<Arc<SessionPool>> = Vec::new();
        for pool in self.all_routes().filter_map(|r| r.target.sessions.as_ref()) {
            if !pools.iter().any(|p| Arc::ptr_eq(p, pool)) {
                pools.push(pool.clone());
            }
        }
        pools
    }

    /// Puts this app's limits in force and retires what `old` served that
    /// this app does not: called once this app is the one serving (a
    /// config that is built but refused changes nothing).
    pub fn commit(&self, rt: &Runtime, old: Option<&App>) {
        // A tenant this config no longer has takes its mixing rooms along.
        let closed = rt
            .mixer
            .retain_tenants(self.config.tenants.iter().map(|t| t.name.as_str()));
        if closed > 0 {
            tracing::info!(rooms = closed, "mixing rooms of removed tenants closed");
        }
        rt.mixer
            .set_max_total_bytes(self.config.mixer_max_total_bytes);
        rt.shares.memory.set_max(self.files.pool.total_memory_bytes);
        rt.shares.apply(
            self.config
                .tenants
                .iter()
                .map(|t| (t.name.as_str(), (&t.limits).into())),
        );
        rt.outbound.apply(
            self.config
                .tenants
                .iter()
                .map(|t| (t.name.as_str(), t.limits.max_outbound_requests)),
        );
        // The sidecar reads the edge-config tenants' grants itself; the
        // control plane's it reads from what is published here.
        if let Some(sidecar) = &self.config.sidecar {
            let grants: edge_process::Grants = self
                .config
                .tenants
                .iter()
                .filter(|t| !self.files.tenants.iter().any(|f| f.name == t.name))
                .map(|t| (t.name.clone(), t.sidecar_programs.clone()))
                .collect();
            if let Err(e) = edge_process::publish_grants(&sidecar.socket, &grants) {
                tracing::warn!(error = %e, socket = %sidecar.socket.display(), "the control plane's tenants' programs could not be published to the sidecar, which refuses them");
            }
        }
        if let Some(old) = old {
            let now = self.session_pools();
            for pool in old.session_pools() {
                if !now.iter().any(|p| Arc::ptr_eq(p, &pool)) {
                    pool.retire();
                }
            }
        }
        // What the apps before this one compiled and this one does not
        // run leaves memory once they drain (each pool holds its own).
        let removed = rt.cache.retain(&self.compiled, crate::files::UNUSED_FOR);
        if removed > 0 {
            tracing::info!(
                artifacts = removed,
                "compiled components no build used for a day removed"
            );
        }
        rt.metrics.forget_unserved();
        let swept = crate::files::sweep(&rt.files, crate::files::UNUSED_FOR);
        if swept > 0 {
            tracing::info!(
                directories = swept,
                "staged files no version used for a day removed"
            );
        }
    }

    /// Ids of components that failed to load.
    pub fn failed_components(&self) -> Vec<&str> {
        self.status
            .iter()
            .filter(|(_, s)| matches!(s, ComponentStatus::Failed(_)))
            .map(|(id, _)| id.as_str())
            .collect()
    }
}

/// The app a component belongs to, as service bindings name it: a
/// deployed app's name (its components are `TENANT/APP@N/COMPONENT`), or
/// the component's id in the config files.
pub fn app_of<'a>(tenant: &str, component: &'a str) -> &'a str {
    component
        .strip_prefix(tenant)
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|rest| rest.split_once('@'))
        .map_or(component, |(app, _)| app)
}

/// Each app of `tenant` as a service binding reaches it. A Worker is one
/// script that takes every request, whatever its path, so an app with one
/// component per version (per share of a rollout) takes every path there;
/// an app of several components routes by its routes. A Worker that no
/// route leads to (one only its tenant's other apps call) is an app too.
fn service_routes(
    tenant: &edge_config::Tenant,
    config: &Config,
    prepared: &BTreeMap<String, Result<Arc<Prepared>, Arc<str>>>,
    target_for: &mut impl FnMut(&str) -> Arc<Target>,
) -> Result<HashMap<String, Routes>> {
    type Draw = Option<std::ops::Range<u8>>;
    // Per app, its routes: (component, route, draw).
    let mut apps: BTreeMap<&str, Vec<(&str, &str, &Draw)>> = BTreeMap::new();
    const NO_DRAW: Draw = None;
    for route in &config.routes {
        if tenant.components.contains(&route.component) {
            apps.entry(app_of(&tenant.name, &route.component))
                .or_default()
                .push((&route.component, route.pattern.as_str(), &route.draw));
        }
    }
    let by_sites: Vec<&str> = tenant.sites.iter().map(|s| s.component.as_str()).collect();
    for id in &tenant.components {
        let worker = matches!(prepared.get(id), Some(Ok(p)) if p.worker.is_some());
        let routed = config.routes.iter().any(|r| r.component == *id);
        if worker && !routed && !by_sites.contains(&id.as_str()) {
            apps.entry(app_of(&tenant.name, id))
                .or_default()
                .push((id, "/...", &NO_DRAW));
        }
    }
    let mut services = HashMap::new();
    for (app, list) in apps {
        let mut routes = Routes::default();
        let mut per_draw: Vec<(&Draw, &str)> = Vec::new();
        for (component, _, draw) in &list {
            if !per_draw.contains(&(draw, component)) {
                per_draw.push((draw, component));
            }
        }
        let single = per_draw
            .iter()
            .all(|(d, c)| per_draw.iter().all(|(d2, c2)| d != d2 || c == c2));
        if single {
            for (draw, component) in per_draw {
                routes
                    .add(
                        "/...",
                        TenantRoute::new("/...", target_for(component), draw.clone()),
                    )
                    .map_err(anyhow::Error::msg)?;
            }
        } else {
            for (component, raw, draw) in list {
                routes
                    .add(
                        raw,
                        TenantRoute::new(raw, target_for(component), draw.clone()),
                    )
                    .map_err(anyhow::Error::msg)?;
            }
        }
        services.insert(app.to_string(), routes);
    }
    Ok(services)
}

/// Logs each service binding of the tenant's Workers that names no app of
/// the tenant: its calls would fail (at call time, with the same words).
fn warn_unbound<'a>(
    tenant: &str,
    routes: impl Iterator<Item = &'a TenantRoute>,
    services: &HashMap<String, Routes>,
) {
    let mut seen: Vec<&Arc<Target>> = Vec::new();
    for route in routes {
        if seen.iter().any(|t| Arc::ptr_eq(t, &route.target)) {
            continue;
        }
        seen.push(&route.target);
        let Some(grant) = &route.target.spec.services else {
            continue;
        };
        for app in grant.apps().iter().filter(|a| !services.contains_key(*a)) {
            tracing::warn!(%tenant, component = %route.target.component, %app, "a service binding names an app the tenant does not have: its calls will fail until the app is deployed");
        }
    }
}

/// The target of one component for one tenant: its grants, limits, metrics
/// and session pool.
fn build_target(
    rt: &Runtime,
    tenant: &edge_config::Tenant,
    component: &edge_config::Component,
    prepared: &Result<Arc<Prepared>, Arc<str>>,
    status: &mut BTreeMap<String, ComponentStatus>,
    config: &Config,
) -> Arc<Target> {
    let (sidecar, runtime, server) = (config.sidecar.as_ref(), &config.runtime, &config.server);
    let mut prep = prepared.clone();
    let worker = prepared.as_ref().ok().and_then(|p| p.worker.as_ref());
    let mode = match (&component.mode, worker) {
        (InstanceMode::Declared, Some(_)) => InstanceMode::isolate(
            edge_config::InstancesPerKey::Fixed(edge_config::ISOLATE_INSTANCES),
            std::time::Duration::from_secs(60),
        ),
        (InstanceMode::Declared, None) => InstanceMode::PerRequest,
        (mode, _) => mode.clone(),
    };
    let mut environment = component.environment.clone();
    if worker.is_some() {
        environment.extend(crate::worker::cf_environment(
            server.pop.as_deref(),
            server.country.as_deref(),
        ));
        environment.extend(crate::worker::origins_environment(
            tenant.sites.iter().filter(|s| s.component == component.id),
        ));
    }
    let share = rt.shares.get(&tenant.name, (&tenant.limits).into());
    // Its key-value calls, SQLite statements and directory reads: charged
    // to its CPU, run in its lane.
    let blocking = edge_blocking::TenantWork::new(share.clone());
    // So are its outbound sends, lookups and connections' I/O.
    rt.outbound
        .tenant(&tenant.name, tenant.limits.max_outbound_requests)
        .set_work(&blocking);
    let kv = match open_stores(rt, tenant, component, runtime, &blocking) {
        Ok(kv) => kv,
        Err(reason) => {
            let reason = format!("tenant {:?}: {reason}", tenant.name);
            tracing::error!(component = %component.id, error = %reason, "key-value store failed to open; the component's routes answer 503 for this tenant");
            status.insert(
                component.id.clone(),
                ComponentStatus::Failed(reason.clone()),
            );
            prep = Err(reason.into());
            Grants::default()
        }
    };
    let files = if component.files.is_empty() {
        None
    } else {
        match crate::files::stage(&rt.files, &component.files) {
            Ok(dir) => Some(dir),
            Err(e) => {
                let reason = format!("staging the component's files: {e:#}");
                tracing::error!(component = %component.id, error = %reason, "the component's routes answer 503");
                status.insert(
                    component.id.clone(),
                    ComponentStatus::Failed(reason.clone()),
                );
                prep = Err(reason.into());
                None
            }
        }
    };
    // Spin's errors name the component as its manifest does (deployed
    // apps' ids are `TENANT/APP@N/COMPONENT`).
    let manifest_id = component.id.rsplit('/').next().unwrap_or(&component.id);
    let variables = tenant
        .variables
        .get(&component.id)
        .map(|v| Variables::from_map(v))
        .unwrap_or_default()
        .for_component(manifest_id);
    // A site's component may reach the site's origin; templated entries
    // are the tenant's rendering of them.
    let mut outbound = component.allowed_outbound_hosts.clone();
    if let Some(rendered) = tenant.outbound.get(&component.id) {
        outbound.extend(rendered.iter().cloned());
    }
    for site in tenant.sites.iter().filter(|s| s.component == component.id) {
        match edge_config::OutboundRule::parse(&site.origin) {
            Ok(rule) => outbound.push(rule),
            Err(e) => {
                tracing::error!(site = %site.name, error = %e, "site origin is not a valid outbound rule")
            }
        }
    }
    let who = format!("{}/{}", tenant.name, component.id);
    let outbound = OutboundPolicy::new(outbound, &who)
        .with_addresses(edge_outbound_http::AddressPolicy::new(
            tenant.outbound_allow_ranges.clone(),
            rt.outbound.listeners.clone(),
        ))
        .with_tenant(
            rt.outbound
                .tenant(&tenant.name, tenant.limits.max_outbound_requests),
        );
    let services = worker
        .filter(|w| !w.services.is_empty())
        .map(|w| crate::services::Grant::new(rt.services.clone(), &tenant.name, &who, &w.services));
    let spec = StoreSpec {
        services,
        script: prepared.as_ref().ok().and_then(|p| p.script.clone()),
        html_threads: share.html_threads.clone(),
        unread_bytes: share.unread_bytes.clone(),
        memory_share: share.clone(),
        open_files: share.open_files.clone(),
        blocking: blocking.clone(),
        sockets: crate::state::Sockets::of(&outbound),
        outbound,
        memory_bytes: component.memory_bytes.unwrap_or(tenant.limits.memory_bytes),
        max_resources: tenant.limits.max_host_resources as usize,
        max_fields_bytes: tenant.limits.max_fields_bytes as usize,
        variables,
        kv,
        sqlite: edge_sqlite::Grant::new(
            &rt.sqlite,
            &tenant.name,
            &component.sqlite_databases,
            &runtime.sqlite_databases,
            tenant.limits.sqlite_database_bytes,
        )
        .with_slots(rt.sqlite_slots.tenant(
            &tenant.name,
            tenant.limits.sqlite_statements,
            &blocking,
        ))
        .with_open_files(share.open_files.clone()),
        environment: environment.into(),
        files,
        process: edge_process::Grant::new(
            sidecar.map(|s| s.socket.clone()),
            &tenant.name,
            tenant.sidecar_programs.clone(),
        )
        .with_outbound(
            rt.outbound
                .tenant(&tenant.name, tenant.limits.max_outbound_requests),
        ),
        mixer: edge_mixer::MixerGrant::new(
            rt.mixer.clone(),
            &tenant.name,
            edge_mixer::Limits {
                max_rooms: tenant.mixer.max_rooms,
                max_members: tenant.mixer.max_members,
                room_idle_timeout: tenant.mixer.room_idle_timeout,
                max_bytes: tenant.mixer.max_bytes,
            },
        ),
    };
    let sessions = match (&mode, &prep) {
        (InstanceMode::Session(settings), Ok(p)) => {
            Some(
                rt.sessions
                    .pool(&tenant.name, &component.id, p, settings, &spec, &share),
            )
        }
        _ => None,
    };
    Arc::new(Target {
        tenant: tenant.name.as_str().into(),
        component: component.id.as_str().into(),
        engine: match &prep {
            Ok(p) => p.engine().clone(),
            Err(_) => rt.engines.plain().clone(),
        },
        prepared: prep,
        spec,
        deadline: tenant.limits.request_deadline,
        metrics: rt.metrics.route(&tenant.name, &component.id),
        sessions,
        share,
        idle_sessions: rt.sessions.idle_sessions(),
        background: rt.background.handle(),
        worker: worker.is_some(),
    })
}

fn prepare(rt: &Runtime, component: &edge_config::Component) -> Result<Prepared> {
    let crate::engine::Loaded {
        component: compiled,
        hash,
        worker,
        script,
        core_instances,
    } = rt.cache.load(&component.source)?;
    let resources = compiled.resources_required();
    let weight = instance_weight(&rt.pool, resources.as_ref(), core_instances);
    if weight > 1 {
        tracing::info!(
            component = %component.id,
            weight,
            memories = ?resources.as_ref().map(|r| r.num_memories),
            tables = ?resources.as_ref().map(|r| r.num_tables),
            ?core_instances,
            "each instance counts as {weight} against its tenant's max_instances: it holds more of the pool's memories, tables or core instances than an instance's part"
        );
    }
    let mut linker = Linker::<HostState>::new(compiled.engine());
    // Interfaces with async functions link only in the concurrent engine;
    // a component importing one was compiled for it.
    let concurrent = rt.engines.kind_of(compiled.engine()) == EngineKind::Concurrent;
    // The full WASI p2 set is linked for compatibility with components built
    // by ordinary toolchains; the context grants no files, sockets or
    // environment, so linking is not granting.
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    // And the WASI 0.3 set, for components built with it (Spin's current
    // SDKs); a component uses either or both.
    if concurrent {
        wasmtime_wasi::p3::add_to_linker(&mut linker)?;
        wasmtime_wasi_http::p3::add_to_linker(&mut linker)?;
    }
    // Over the library's: deletes the request options it leaves behind.
    crate::outgoing_handler::add_to_linker(&mut linker)?;
    // Over the library's: each socket holds a place in the tenant's cap.
    crate::sockets::add_to_linker(&mut linker, concurrent)?;
    crate::name_lookup::add_to_linker(&mut linker, concurrent)?;
    crate::open_files::add_to_linker(&mut linker, concurrent)?;
    crate::read_dir::add_to_linker(&mut linker, concurrent)?;
    // Variables are linked for every component, as on Spin: one that was
    // given none reads nothing (`undefined`, or `none` from wasi:config).
    edge_variables::add_to_linker(&mut linker)?;
    edge_variables::spin::add_to_linker(&mut linker, concurrent)?;
    // Spin's capability interfaces are linked for every component, as on
    // Spin: its SDKs for interpreted languages (Python's) import all of
    // them whatever the app uses. Linking is not granting: a store or
    // database not in the manifest is refused at the call (Spin's
    // `access-denied`), a connection by `allowed_outbound_hosts`; an
    // import without its manifest key is logged here.
    edge_keyvalue::add_to_linker(&mut linker)?;
    edge_keyvalue::draft2::add_to_linker(&mut linker)?;
    edge_keyvalue::spin::add_to_linker(&mut linker, concurrent)?;
    edge_sqlite::add_to_linker(&mut linker, concurrent)?;
    edge_redis::add_to_linker(&mut linker, concurrent)?;
    edge_mqtt::add_to_linker(&mut linker, concurrent)?;
    edge_postgres::add_to_linker(&mut linker, concurrent)?;
    edge_mysql::add_to_linker(&mut linker, concurrent)?;
    edge_llm::add_to_linker(&mut linker)?;
    match &worker {
        // A Worker's imports are its runtime's, the same for every Worker;
        // what it uses is what it declares.
        Some(declared) => {
            for label in declared
                .kv_namespaces
                .iter()
                .filter(|l| !component.key_value_stores.contains(l))
            {
                tracing::warn!(component = %component.id, store = %label, "the Worker has a KV namespace in store {label:?}, which its manifest does not grant: its reads and writes will fail (list it in `key_value_stores`)");
            }
        }
        None => {
            for (interface, key) in ungranted(component, &compiled) {
                tracing::warn!(component = %component.id, %interface, "the component imports an interface its manifest does not grant: its calls will be refused ({key})");
            }
        }
    }
    // Linking is not granting: each call checks the tenant's programs.
    edge_process::add_to_linker(&mut linker)?;
    // Rooms are per tenant; a component sees only its tenant's.
    edge_mixer::add_to_linker(&mut linker)?;
    // HTML rewriting (Workers' HTMLRewriter): bounded per instance and host.
    edge_html::add_to_linker(&mut linker)?;
    crate::worker::add_to_linker(&mut linker)?;
    crate::exchange::add_to_linker(&mut linker)?;
    crate::guest_metrics::add_to_linker(&mut linker)?;
    let pre = linker
        .instantiate_pre(&compiled)
        .map_err(|e| anyhow::anyhow!(not_granted(&component.id, &format!("{e:#}"))))?;
    // A component exporting both is served through WASI 0.3, as
    // `wasmtime serve` does.
    let entry = match ServicePre::new(pre.clone()) {
        Ok(p3) => Entry::P3(p3),
        Err(_) => Entry::P2(ProxyPre::new(pre).map_err(anyhow::Error::from).with_context(|| {
            format!(
                "component {:?} exports neither wasi:http/incoming-handler@0.2 nor wasi:http/handler@0.3",
                component.id
            )
        })?),
    };
    Ok(Prepared {
        entry,
        hash,
        worker,
        script,
        weight,
    })
}

/// How many of its tenant's `max_instances` one instance of a component
/// takes: one, or more when it holds more of the pool's memories, tables
/// or core instances than an instance's part of them (the pool is sized
/// for what a usual component holds: `[pool]` totals over
/// `total_component_instances`). So no share, whatever its components,
/// holds more of any of them than its part of the pool, and another
/// tenant's instance always finds its slots. What is not known (a
/// component that imports modules or nests components) counts as the
/// per-component maximum.
pub fn instance_weight(
    pool: &edge_config::Pool,
    resources: Option<&wasmtime::ResourcesRequired>,
    core_instances: Option<u32>,
) -> u64 {
    let instances = u64::from(pool.total_component_instances.max(1));
    // ceil(used / (total / instances)), in integers.
    let part =
        |used: u32, total: u32| (u64::from(used) * instances).div_ceil(u64::from(total.max(1)));
    let memories = resources.map_or(pool.max_memories_per_component, |r| r.num_memories);
    let tables = resources.map_or(pool.max_tables_per_component, |r| r.num_tables);
    let cores = core_instances.unwrap_or(pool.max_core_instances_per_component);
    [
        part(memories, pool.total_memories),
        part(tables, pool.total_tables),
        part(cores, pool.total_core_instances),
    ]
    .into_iter()
    .max()
    .unwrap_or(1)
    .max(1)
}

/// Why a component did not link, in the manifest's terms: the interface
/// it imports and the manifest key that grants it (from Wasmtime's "...
/// imports instance `NAME`, but a matching implementation was not found").
fn not_granted(component: &str, error: &str) -> String {
    let interface = error
        .split('`')
        .nth(1)
        .filter(|_| error.contains("matching implementation was not found"));
    let Some(interface) = interface else {
        return format!("linking component {component:?}: {error}");
    };
    match edge_config::InterfaceGrant::of(interface).map(|g| g.how) {
        Some(key) => format!(
            "component {component:?} imports {interface}, which is not granted to it: {key}"
        ),
        None => format!("component {component:?} imports {interface}, which edge does not provide"),
    }
}

/// Whether `component`'s allowlist may reach `scheme` (a templated entry
/// by its scheme if written out, `redis://{{ host }}`, else any).
fn covers(component: &edge_config::Component, scheme: &str) -> bool {
    component
        .allowed_outbound_hosts
        .iter()
        .any(|r| r.covers_scheme(scheme))
        || component.outbound_templates.iter().any(|t| {
            let s = edge_config::OutboundRule::written_scheme(t);
            s == scheme || s == "*"
        })
}

/// The interfaces `compiled` imports that `component`'s manifest does not
/// grant, each with what would grant it.
fn ungranted(
    component: &edge_config::Component,
    compiled: &wasmtime::component::Component,
) -> Vec<(String, &'static str)> {
    use edge_config::GrantKey;
    compiled
        .component_type()
        .imports(compiled.engine())
        .filter_map(|(name, _)| {
            let grant = edge_config::InterfaceGrant::of(name)?;
            let given = match grant.key {
                GrantKey::KeyValueStores => !component.key_value_stores.is_empty(),
                GrantKey::SqliteDatabases => !component.sqlite_databases.is_empty(),
                GrantKey::Outbound(schemes) => schemes.iter().any(|s| covers(component, s)),
            };
            (!given).then(|| (name.to_string(), grant.how))
        })
        .collect()
}

/// Opens the stores `component` names, as `tenant`'s, their calls run as
/// `blocking`.
fn open_stores(
    rt: &Runtime,
    tenant: &edge_config::Tenant,
    component: &edge_config::Component,
    runtime: &edge_config::RuntimeConfig,
    blocking: &edge_blocking::TenantWork,
) -> Result<Grants, String> {
    let mut stores = BTreeMap::new();
    for label in &component.key_value_stores {
        let placed = runtime.key_value_stores.get(label).map(|p| match p {
            edge_config::StorePlacement::File(f) => edge_keyvalue::Placement::File(f.clone()),
            edge_config::StorePlacement::Redis(url) => edge_keyvalue::Placement::Redis(url.clone()),
        });
        let store = rt
            .kv
            .open_at(
                &tenant.name,
                label,
                tenant.limits.kv_store_bytes,
                placed.as_ref(),
            )
            .map_err(|e| format!("key-value store {label:?}: {e}"))?
            .with_work(blocking.clone());
        stores.insert(label.clone(), store);
    }
    Ok(Grants::new(stores))
}

#[derive(Default)]
struct HostIndex {
    exact: HashMap<String, usize>,
    suffix: Vec<(String, usize)>,
    any: Option<usize>,
}

impl HostIndex {
    fn insert(&mut self, pattern: &HostPattern, tenant: usize) {
        match pattern {
            HostPattern::Exact(h) => {
                self.exact.insert(h.clone(), tenant);
            }
            HostPattern::Suffix(s) => self.suffix.push((s.clone(), tenant)),
            HostPattern::Any => self.any = Some(tenant),
        }
    }

    fn find(&self, host: &str) -> Option<usize> {
        let host = strip_port(host);
        let lower;
        let host = if host.bytes().any(|b| b.is_ascii_uppercase()) {
            lower = host.to_ascii_lowercase();
            lower.as_str()
        } else {
            host
        };
        let host = host.strip_suffix('.').unwrap_or(host);
        if let Some(i) = self.exact.get(host) {
            return Some(*i);
        }
        self.suffix
            .iter()
            .find(|(s, _)| host.len() > s.len() && host.ends_with(s.as_str()))
            .map(|(_, i)| *i)
            .or(self.any)
    }
}

/// `host` without a trailing `:port`.
pub fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |i| &host[..=i]);
    }
    match host.rfind(':') {
        Some(i) if host[i + 1..].bytes().all(|b| b.is_ascii_digit()) => &host[..i],
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_weighs_its_largest_part_of_the_pool() {
        let pool = edge_config::Pool {
            total_component_instances: 1000,
            total_core_instances: 4000,
            total_memories: 2000,
            total_tables: 4000,
            max_core_instances_per_component: 16,
            max_memories_per_component: 4,
            max_tables_per_component: 8,
            total_stacks: 1000,
            max_memory_bytes: 64 << 20,
            keep_resident_bytes: 0,
            session_instances: 750,
            total_memory_bytes: 16 << 30,
        };
        let needs = |memories, tables| wasmtime::ResourcesRequired {
            num_memories: memories,
            max_initial_memory_size: None,
            num_tables: tables,
            max_initial_table_size: None,
        };
        // A usual Rust component: 1 memory, 2 tables, 3 core instances.
        assert_eq!(instance_weight(&pool, Some(&needs(1, 2)), Some(3)), 1);
        // Spin's Python SDK: 14 core instances, 3.5 instances' part.
        assert_eq!(instance_weight(&pool, Some(&needs(1, 2)), Some(14)), 4);
        assert_eq!(instance_weight(&pool, Some(&needs(4, 1)), Some(1)), 2);
        // Not known: the per-component maximum.
        assert_eq!(instance_weight(&pool, None, None), 4);
        assert_eq!(instance_weight(&pool, Some(&needs(0, 0)), Some(0)), 1);
    }

    #[test]
    fn host_index_prefers_exact_then_longest_suffix() {
        let mut idx = HostIndex::default();
        idx.insert(&HostPattern::parse("*").unwrap(), 0);
        idx.insert(&HostPattern::parse("*.example.com").unwrap(), 1);
        idx.insert(&HostPattern::parse("*.a.example.com").unwrap(), 2);
        idx.insert(&HostPattern::parse("example.com").unwrap(), 3);
        idx.suffix.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
        assert_eq!(idx.find("example.com:8080"), Some(3));
        assert_eq!(idx.find("EXAMPLE.com"), Some(3));
        assert_eq!(idx.find("x.example.com"), Some(1));
        assert_eq!(idx.find("x.a.example.com"), Some(2));
        assert_eq!(idx.find("other.org"), Some(0));
        assert_eq!(idx.find("[::1]:80"), Some(0));
    }

    #[test]
    fn ports_are_stripped() {
        assert_eq!(strip_port("a:1"), "a");
        assert_eq!(strip_port("[::1]:8080"), "[::1]");
        assert_eq!(strip_port("a"), "a");
    }

    #[test]
    fn a_component_belongs_to_the_app_service_bindings_name() {
        assert_eq!(app_of("acme", "acme/shop@3/web"), "shop");
        assert_eq!(app_of("acme", "acme/shop@12/api"), "shop");
        // A config file's component is its own app.
        assert_eq!(app_of("acme", "backend"), "backend");
        // Another tenant's prefix is not this tenant's app.
        assert_eq!(app_of("acme", "other/shop@1/web"), "other/shop@1/web");
        assert_eq!(app_of("acme", "acme-shop"), "acme-shop");
    }
}
