//! Loads and validates the two files an `edge` node runs from:
//!
//! - the **application**: a Spin manifest (version 2) naming components,
//!   their sources, HTTP routes, variables and allowed outbound hosts;
//! - the **edge-config** of this point of presence: listen addresses, pool
//!   sizes, limits, tenants with their hostnames, components, variables and
//!   secrets, and per-component instance modes.
//!
//! [`load`] reads both, checks everything that can be checked without
//! running a component, and returns a [`Config`] whose values are ready to
//! use. Every problem is a [`ConfigError`] naming the file, line, column,
//! key and what is allowed, so an operator can fix it without reading code.
//!
//! ```no_run
//! let config = edge_config::load("edge-config/default.toml".as_ref())?;
//! println!("listening on {}", config.server.listen);
//! # Ok::<(), edge_config::ConfigError>(())
//! ```
#![deny(missing_docs)]

mod edge;
mod error;
mod files;
mod grants;
mod outbound;
mod resolve;
mod route;
mod runtime_config;
mod secrets;
pub mod sidecar;
mod site;
mod spin;
pub mod template;

pub use error::{ConfigError, SourceFile};
pub use files::FileMount;
pub use grants::{GrantKey, INTERFACE_GRANTS, InterfaceGrant};
pub use outbound::{OutboundRule, parse_ip_range};
pub use resolve::{check_variable_name, load, load_with};
pub use route::RoutePattern;
pub use runtime_config::{RuntimeConfig, StorePlacement};
pub use secrets::GeneratedSecret;
pub use site::{
    DEFAULT_CONTENT_TYPES, SITE_VARIABLE_PREFIX, Site, check_content_type, check_origin,
    read_rules_file,
};

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A validated configuration, ready to serve.
#[derive(Debug, Clone)]
pub struct Config {
    /// What Spin's runtime configuration file sets (`runtime_config`).
    pub runtime: RuntimeConfig,
    /// The edge-config file this came from.
    pub edge_file: PathBuf,
    /// The Spin manifest it names.
    pub app_file: PathBuf,
    /// The application's name from the manifest.
    pub app_name: String,
    /// Listeners, caps and timeouts.
    pub server: Server,
    /// Instance pool sizing.
    pub pool: Pool,
    /// Components by id, in id order.
    pub components: BTreeMap<String, Component>,
    /// HTTP routes, most specific first (the order the router tries them).
    pub routes: Vec<Route>,
    /// Tenants in file order.
    pub tenants: Vec<Tenant>,
    /// Secrets this load generated (`{ generate = ... }`) that are not on
    /// disk yet: the host writes them when it puts this config in service
    /// ([`Config::write_generated_secrets`]), never before.
    pub generated_secrets: Vec<GeneratedSecret>,
    /// The process-execution sidecar, if configured.
    pub sidecar: Option<Sidecar>,
    /// Bytes of mixing buffer all tenants' rooms may hold together
    /// (`[mixer] max_total_bytes`).
    pub mixer_max_total_bytes: u64,
    /// `[limits]`: what a tenant gets unless it says otherwise (tenants
    /// of the control plane get exactly this).
    pub default_limits: Limits,
    /// `[mixer]`'s per-tenant bounds.
    pub default_mixer: MixerLimits,
    /// `[outbound] allow_ranges`: what every tenant's outbound HTTP may
    /// reach beyond the public internet.
    pub outbound_allow_ranges: Vec<ipnet::IpNet>,
    /// `[control]`: the control plane, if this node runs it.
    pub control: Option<ControlPlane>,
}

/// `[control]`: the control plane's API listener and database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlPlane {
    /// Where the API listens.
    pub listen: SocketAddr,
    /// Database URL: `sqlite://PATH` (default, in the data directory) or
    /// `mysql://...`.
    pub database: String,
    /// Largest upload the API reads.
    pub max_upload_bytes: u64,
    /// Longest an upload's compilation may take.
    pub compile_timeout: Duration,
    /// Address space an upload's compilation may use.
    pub compile_memory_bytes: u64,
    /// The OCI registry repository artifacts are shared through
    /// (`http(s)://HOST/REPO`), if any.
    pub registry: Option<String>,
    /// The web console's built files (a directory with `index.html`),
    /// served beside the API; `None`: `web-ui/build` above the working
    /// directory or the edge binary, if there is one.
    pub console: Option<PathBuf>,
}

/// `[sidecar]`: the native process-execution daemon (`edge-sidecar`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sidecar {
    /// Its Unix socket.
    pub socket: PathBuf,
    /// Programs it may run: absolute paths, nothing else.
    pub allow: Vec<PathBuf>,
    /// Runs at once; one more is refused as busy.
    pub max_concurrent: usize,
    /// Runs of one tenant at once (at most `max_concurrent`), so one
    /// tenant never takes every run; one more is refused as busy.
    pub max_concurrent_per_tenant: usize,
    /// Longest run (and the default).
    pub timeout: Duration,
    /// Most bytes of stdout (and of stderr) per run.
    pub max_output_bytes: usize,
    /// Resource limits of each program it runs.
    pub child_limits: SidecarChildLimits,
}

/// `[sidecar] child_*`: limits set in each program the sidecar runs
/// (soft and hard), before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SidecarChildLimits {
    /// `RLIMIT_CPU`, seconds.
    pub cpu_seconds: u64,
    /// `RLIMIT_AS`, bytes.
    pub address_space_bytes: u64,
    /// `RLIMIT_NPROC`: processes and threads of the user.
    pub processes: u64,
    /// `RLIMIT_FSIZE`, bytes.
    pub file_bytes: u64,
}

impl Config {
    /// Writes the secrets this load generated; their paths, for the log.
    /// Call it once the config is built and about to serve.
    pub fn write_generated_secrets(&self) -> Result<Vec<&GeneratedSecret>, String> {
        for secret in &self.generated_secrets {
            secret.write()?;
        }
        Ok(self.generated_secrets.iter().collect())
    }

    /// Every file whose change should trigger a reload.
    pub fn watched_files(&self) -> Vec<PathBuf> {
        let mut files = vec![self.edge_file.clone(), self.app_file.clone()];
        files.extend(self.components.values().map(|c| c.source.clone()));
        for t in &self.tenants {
            files.extend(t.sites.iter().filter_map(|s| s.rules_file.clone()));
        }
        files.extend(self.runtime.sources.iter().cloned());
        files
    }
}

/// Listener settings and request caps.
#[derive(Debug, Clone)]
pub struct Server {
    /// Address for application traffic.
    pub listen: SocketAddr,
    /// Address for `/health` and `/metrics`; `None` serves them nowhere.
    pub admin_listen: Option<SocketAddr>,
    /// Compile cache and embedded stores live here.
    pub data_dir: PathBuf,
    /// Accept HTTP/2 (prior knowledge, h2c) beside HTTP/1.1.
    pub http2: bool,
    /// Tokio worker threads; `None` means one per core.
    pub workers: Option<usize>,
    /// Open connections beyond this wait in the listen backlog.
    pub max_connections: usize,
    /// Request head (line plus headers) cap; larger gets 431.
    pub max_header_bytes: usize,
    /// Request body cap; larger gets 413.
    pub max_body_bytes: u64,
    /// Time a client has to send its request head (and, between requests on
    /// an HTTP/1 connection, to start the next one).
    pub header_read_timeout: Duration,
    /// Longest wait for the next piece of a request body; then `408`.
    pub body_read_timeout: Duration,
    /// Slowest request body accepted, in bytes per second on average, after
    /// the first `body_read_timeout`; 0 turns the check off.
    pub min_body_rate: u64,
    /// Longest a write to a client may wait for the client to read.
    pub write_timeout: Duration,
    /// An HTTP/2 connection with no request open for this long is closed
    /// with GOAWAY.
    pub idle_timeout: Duration,
    /// How long SIGTERM waits for in-flight requests.
    pub drain_timeout: Duration,
    /// How often config and component files are checked for changes.
    pub watch_interval: Option<Duration>,
    /// This PoP's name (Workers see it as `request.cf.colo`).
    pub pop: Option<String>,
    /// The PoP's country, ISO 3166-1 alpha-2 (`request.cf.country`).
    pub country: Option<String>,
    /// The Workers engine (`workers/build.mjs --engine`) that runs Worker
    /// scripts; `None`: `build/workers/engine.wasm` above the working
    /// directory or the edge binary, if there is one.
    pub workers_engine: Option<PathBuf>,
    /// Proxies in front of this host (addresses and ranges): a request a
    /// connection from one of them carries names its client in its
    /// `X-Forwarded-For`, which components are then given as the client's
    /// address. Empty: every client is its connection's peer.
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

/// Pooling allocator sizing (see `edge-config/REFERENCE.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// Component instances alive at once.
    pub total_component_instances: u32,
    /// Core module instances alive at once.
    pub total_core_instances: u32,
    /// Linear memories alive at once.
    pub total_memories: u32,
    /// Tables alive at once.
    pub total_tables: u32,
    /// Async fiber stacks alive at once.
    pub total_stacks: u32,
    /// Largest linear memory any instance may have (the slot size).
    pub max_memory_bytes: u64,
    /// Core instances one component may create.
    pub max_core_instances_per_component: u32,
    /// Memories one component may create.
    pub max_memories_per_component: u32,
    /// Tables one component may create.
    pub max_tables_per_component: u32,
    /// Memory bytes reset with `memset` instead of `madvise` on reuse.
    pub keep_resident_bytes: u64,
    /// Instances pinned sessions may hold host-wide; the rest of the pool
    /// is kept for per-request instances.
    pub session_instances: u32,
    /// Linear memory every instance together may hold (the slots are
    /// address space; this is what the machine can back).
    pub total_memory_bytes: u64,
}

/// A component from the manifest plus its edge settings.
#[derive(Debug, Clone)]
pub struct Component {
    /// Spin component id.
    pub id: String,
    /// Absolute path of the `.wasm` file.
    pub source: PathBuf,
    /// Outbound allowlist (entries without templates).
    pub allowed_outbound_hosts: Vec<OutboundRule>,
    /// Allowlist entries with `{{ variable }}` templates, as written:
    /// each tenant's values render them ([`Tenant::outbound`]).
    pub outbound_templates: Vec<String>,
    /// Key-value store labels the component may open.
    pub key_value_stores: Vec<String>,
    /// SQLite database labels the component may open.
    pub sqlite_databases: Vec<String>,
    /// Environment variables it sees (Spin's `environment`).
    pub environment: Vec<(String, String)>,
    /// Files of the app it sees, read-only (Spin's `files` less
    /// `exclude_files`).
    pub files: Vec<FileMount>,
    /// How instances are created.
    pub mode: InstanceMode,
    /// Linear-memory cap of this component's instances, overriding the
    /// tenant's `memory_bytes` (a component embedding a large read-only
    /// index needs more than the others).
    pub memory_bytes: Option<u64>,
}

/// How a component's instances live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstanceMode {
    /// No `instance` given: what the component declares. A Worker (a
    /// component with an `edge:worker` section, built by `workers/`) gets
    /// [`InstanceMode::isolate`], as a Workers isolate serves many requests;
    /// any other component a fresh instance per request.
    Declared,
    /// A fresh instance for every request (the isolation default).
    PerRequest,
    /// One long-lived instance per session key.
    Session(SessionSettings),
}

impl InstanceMode {
    /// Warm instances shared by all of a component's requests, up to
    /// `instances` at once (`instance = "isolate"`): a Worker's isolate.
    pub fn isolate(instances: InstancesPerKey, idle_timeout: Duration) -> Self {
        InstanceMode::Session(SessionSettings {
            key: SessionKey::Component,
            // Its one key's instances are bounded by `instances`.
            max_sessions: usize::MAX,
            idle_timeout,
            max_queued: ISOLATE_MAX_QUEUED,
            instances_per_key: instances,
        })
    }
}

/// Warm instances of an isolate component, by default: enough that a
/// Worker waiting on its origin does not hold up the next requests.
pub const ISOLATE_INSTANCES: usize = 8;

/// Requests waiting on one isolate instance.
pub const ISOLATE_MAX_QUEUED: usize = 1024;

/// Settings of a per-session component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSettings {
    /// Where the session key comes from.
    pub key: SessionKey,
    /// Sessions alive at once; one more is refused with 503.
    pub max_sessions: usize,
    /// A session with no request for this long is evicted.
    pub idle_timeout: Duration,
    /// Requests waiting on one session; one more is refused with 503.
    pub max_queued: usize,
    /// Warm instances per session key: a request goes to an idle one, else
    /// a new one (up to this many), else the least loaded. 1: strict
    /// per-key order.
    pub instances_per_key: InstancesPerKey,
}

/// How many warm instances a session key gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstancesPerKey {
    /// This many.
    Fixed(usize),
    /// One per worker thread (`"workers"`): for state that is a cache, the
    /// cheapest number. A worker runs one guest call at a time, so a second
    /// instance on it adds no parallelism, only a second copy of the cache
    /// warmed by half the requests (the hint engine: ~7% more CPU per
    /// keystroke with four instances than with two on two workers).
    Workers,
}

impl InstancesPerKey {
    /// The number, given how many worker threads serve.
    pub fn count(self, workers: usize) -> usize {
        match self {
            InstancesPerKey::Fixed(n) => n,
            InstancesPerKey::Workers => workers.max(1),
        }
    }
}

/// Where a request's session key is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionKey {
    /// A request header (lower-case name).
    Header(String),
    /// A cookie by name.
    Cookie(String),
    /// The N-th (1-based) segment of the request path.
    PathSegment(usize),
    /// The request's host (lower-case, without port): one key per site.
    Host,
    /// The bearer token of `Authorization` (SHA-256, hex): one session
    /// per token, which no one without the token can reach.
    Bearer,
    /// One key for every request: the component's instances are shared by
    /// all its requests (`instance = "isolate"`).
    Component,
}

/// One HTTP route from the manifest.
#[derive(Debug, Clone)]
pub struct Route {
    /// The route pattern.
    pub pattern: RoutePattern,
    /// The component it serves.
    pub component: String,
    /// For a gradual rollout: the route applies to the requests whose
    /// draw (a number 0 to 99 drawn per request) falls in this range; the
    /// other version's routes take the rest. `None`: every request.
    pub draw: Option<std::ops::Range<u8>>,
}

/// A tenant: who owns which hostnames and which components serve them.
#[derive(Debug, Clone)]
pub struct Tenant {
    /// Unique name, used in metrics and logs.
    pub name: String,
    /// Hostnames this tenant answers.
    pub hosts: Vec<HostPattern>,
    /// Component ids this tenant gets.
    pub components: BTreeSet<String>,
    /// Per-request limits.
    pub limits: Limits,
    /// Resolved variables per component id (only for components that
    /// declare variables), shared by every instance.
    pub variables: BTreeMap<String, Arc<BTreeMap<String, String>>>,
    /// Allowlist entries rendered from templates with this tenant's
    /// values, per component id (beside the component's own entries).
    pub outbound: BTreeMap<String, Vec<OutboundRule>>,
    /// Sites proxied through the rewriter.
    pub sites: Vec<Site>,
    /// Sidecar programs this tenant's components may run (a subset of
    /// `[sidecar] allow`; empty: none).
    pub sidecar_programs: Vec<PathBuf>,
    /// Address ranges outbound HTTP may reach although they are not the
    /// public internet (loopback, private...): `[outbound]`'s and the
    /// tenant's own `allow_ranges`.
    pub outbound_allow_ranges: Vec<ipnet::IpNet>,
    /// Bounds on the tenant's mixing rooms (`edge:platform/mixer`).
    pub mixer: MixerLimits,
}

/// Bounds on one tenant's mixing rooms (`[mixer]`, `[tenant.mixer]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MixerLimits {
    /// Rooms open at once; opening one more is refused.
    pub max_rooms: usize,
    /// Members of one room; one more joining is refused.
    pub max_members: usize,
    /// A room nobody used for this long is removed with its members.
    pub room_idle_timeout: Duration,
    /// Bytes of mixing buffer the tenant's rooms may hold together (its
    /// share of `[mixer] max_total_bytes`); a write needing more is refused.
    pub max_bytes: u64,
}

/// Per-tenant limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock limit for one request, from accept to the guest's return.
    pub request_deadline: Duration,
    /// Linear-memory cap per instance.
    pub memory_bytes: u64,
    /// Size cap (keys plus values) of each key-value store of the tenant.
    pub kv_store_bytes: u64,
    /// Size cap of each of the tenant's SQLite databases.
    pub sqlite_database_bytes: u64,
    /// SQLite statements (and opens) of the tenant running at once, over
    /// all its databases: each takes a thread of the host's blocking pool
    /// (its CPU counted as the tenant's). More wait, until the request's
    /// deadline.
    pub sqlite_statements: usize,
    /// Descriptors the tenant's guests hold open at once (files and
    /// directories opened through `wasi:filesystem`, SQLite connections),
    /// over all its instances; one more fails.
    pub max_open_files: usize,
    /// Outbound HTTP requests of the tenant in flight at once (sent, and
    /// their response body not yet finished or dropped); one more fails.
    pub max_outbound_requests: usize,
    /// The tenant's share: instances (per-request and pinned) alive at once.
    pub max_instances: u64,
    /// The tenant's share of `Pool::total_memory_bytes`: linear memory its
    /// instances hold together.
    pub max_total_memory_bytes: u64,
    /// Pinned sessions of the tenant alive at once, over all its components.
    pub max_sessions: u64,
    /// Requests of the tenant being served or queued at once.
    pub max_inflight: u64,
    /// New sessions the tenant may start per second (and in a burst).
    pub session_rate: u64,
    /// Host resources (fields, streams, requests...) one instance may hold.
    pub max_host_resources: u64,
    /// Bytes one set of header fields a guest builds may hold.
    pub max_fields_bytes: u64,
}

/// A hostname pattern of a tenant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostPattern {
    /// One hostname (lower-case, no port).
    Exact(String),
    /// `*.example.com`, stored as `.example.com`: any subdomain.
    Suffix(String),
    /// `*`: any host not claimed by another tenant.
    Any,
}

impl HostPattern {
    /// Whether `host` (lower-case, no port) is one this pattern names.
    ///
    /// ```
    /// use edge_config::HostPattern;
    /// assert!(HostPattern::parse("*.example.com").unwrap().matches("a.example.com"));
    /// assert!(!HostPattern::parse("*.example.com").unwrap().matches("example.com"));
    /// assert!(HostPattern::parse("*").unwrap().matches("anything"));
    /// ```
    pub fn matches(&self, host: &str) -> bool {
        match self {
            Self::Exact(h) => h == host,
            Self::Suffix(s) => host.len() > s.len() && host.ends_with(s.as_str()),
            Self::Any => true,
        }
    }

    /// Parses `example.com`, `*.example.com` or `*`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        let valid = |h: &str| {
            !h.is_empty()
                && h.bytes().all(|b| {
                    b.is_ascii_alphanumeric()
                        || b == b'-'
                        || b == b'.'
                        || b == b':'
                        || b == b'['
                        || b == b']'
                })
        };
        if s == "*" {
            Ok(Self::Any)
        } else if let Some(rest) = s.strip_prefix("*.") {
            if valid(rest) {
                Ok(Self::Suffix(format!(".{rest}")))
            } else {
                Err(format!(
                    "{s:?} is not a valid host pattern (allowed: \"example.com\", \"*.example.com\", \"*\")"
                ))
            }
        } else if valid(&s) && !s.contains('*') && (!s.contains(':') || s.starts_with('[')) {
            Ok(Self::Exact(s))
        } else {
            Err(format!(
                "{s:?} is not a valid host pattern (allowed: \"example.com\", \"*.example.com\", \"*\")"
            ))
        }
    }
}
