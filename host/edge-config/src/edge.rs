//! The edge-config file schema (per point of presence). Every key is
//! documented in `edge-config/REFERENCE.md`; defaults live here.

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// A number, or a word standing for one (`instances_per_key = "workers"`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum CountOrName {
    Count(usize),
    Name(String),
}

/// As the file spells it: `4`, `"workers"`.
impl std::fmt::Display for CountOrName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CountOrName::Count(n) => write!(f, "{n}"),
            CountOrName::Name(w) => write!(f, "{w:?}"),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EdgeFile {
    pub app: Spanned<String>,
    /// Spin's runtime configuration file, relative to this one.
    #[serde(default)]
    pub runtime_config: Option<Spanned<String>>,
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub pool: PoolSection,
    #[serde(default)]
    pub limits: LimitsSection,
    #[serde(default, rename = "tenant")]
    pub tenants: Vec<Spanned<TenantSection>>,
    #[serde(default, rename = "component")]
    pub components: BTreeMap<Spanned<String>, Spanned<ComponentSection>>,
    #[serde(default)]
    pub sidecar: Option<SidecarSection>,
    /// Defaults of every tenant's mixing rooms.
    #[serde(default)]
    pub mixer: MixerSection,
    /// Address ranges every tenant's outbound HTTP may reach.
    #[serde(default)]
    pub outbound: crate::outbound::OutboundSection,
    /// The control plane's API, if this node runs one.
    #[serde(default)]
    pub control: Option<ControlSection>,
}

/// `[control]`: the control plane's API and database.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct ControlSection {
    pub listen: Option<Spanned<String>>,
    pub allow_public: Option<Spanned<bool>>,
    pub database: Option<Spanned<String>>,
    pub max_upload_bytes: Option<Spanned<u64>>,
    pub compile_timeout_ms: Option<Spanned<u64>>,
    pub compile_memory_bytes: Option<Spanned<u64>>,
    pub registry: Option<Spanned<String>>,
    pub console: Option<Spanned<String>>,
}

/// `[mixer]` and `[tenant.mixer]`: bounds on a tenant's mixing rooms.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct MixerSection {
    pub max_rooms: Option<Spanned<u64>>,
    pub max_members: Option<Spanned<u64>>,
    pub room_idle_timeout_ms: Option<Spanned<u64>>,
    /// Bytes of mixing buffer a tenant's rooms may hold together.
    pub max_bytes: Option<Spanned<u64>>,
    /// Bytes of mixing buffer all rooms may hold together (`[mixer]` only).
    pub max_total_bytes: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SidecarSection {
    pub socket: Option<Spanned<String>>,
    pub allow: Vec<Spanned<String>>,
    pub max_concurrent: Option<Spanned<usize>>,
    pub max_concurrent_per_tenant: Option<Spanned<usize>>,
    pub timeout_ms: Option<Spanned<u64>>,
    pub max_output_bytes: Option<Spanned<usize>>,
    pub child_cpu_seconds: Option<Spanned<u64>>,
    pub child_address_space_bytes: Option<Spanned<u64>>,
    pub child_processes: Option<Spanned<u64>>,
    pub child_file_bytes: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct ServerSection {
    pub listen: Spanned<String>,
    pub admin_listen: Option<Spanned<String>>,
    pub data_dir: String,
    pub http2: bool,
    pub workers: Option<Spanned<usize>>,
    pub max_connections: Spanned<usize>,
    pub max_header_bytes: Spanned<usize>,
    pub max_body_bytes: u64,
    pub header_read_timeout_ms: Spanned<u64>,
    pub body_read_timeout_ms: Spanned<u64>,
    pub min_body_rate: u64,
    pub write_timeout_ms: Spanned<u64>,
    pub idle_timeout_ms: Spanned<u64>,
    pub drain_timeout_ms: u64,
    pub watch_interval_ms: u64,
    pub pop: Option<Spanned<String>>,
    pub country: Option<Spanned<String>>,
    pub workers_engine: Option<String>,
    pub trusted_proxies: Vec<Spanned<String>>,
}

impl Default for ServerSection {
    fn default() -> Self {
        Self {
            listen: Spanned::new(0..0, "127.0.0.1:8080".into()),
            admin_listen: Some(Spanned::new(0..0, "127.0.0.1:9080".into())),
            data_dir: ".edge-data".into(),
            http2: true,
            workers: None,
            max_connections: Spanned::new(0..0, 10_000),
            max_header_bytes: Spanned::new(0..0, 16 * 1024),
            max_body_bytes: 10 * 1024 * 1024,
            header_read_timeout_ms: Spanned::new(0..0, 10_000),
            body_read_timeout_ms: Spanned::new(0..0, 10_000),
            min_body_rate: 1024,
            write_timeout_ms: Spanned::new(0..0, 30_000),
            idle_timeout_ms: Spanned::new(0..0, 60_000),
            drain_timeout_ms: 10_000,
            watch_interval_ms: 1_000,
            pop: None,
            country: None,
            workers_engine: None,
            trusted_proxies: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct PoolSection {
    pub total_component_instances: Spanned<u32>,
    pub total_core_instances: Option<u32>,
    pub total_memories: Option<u32>,
    pub total_tables: Option<u32>,
    pub total_stacks: Option<u32>,
    pub max_memory_bytes: Spanned<u64>,
    pub max_core_instances_per_component: u32,
    pub max_memories_per_component: u32,
    pub max_tables_per_component: u32,
    pub keep_resident_bytes: u64,
    pub session_instances: Option<Spanned<u32>>,
    pub total_memory_bytes: Option<Spanned<u64>>,
}

impl Default for PoolSection {
    fn default() -> Self {
        Self {
            total_component_instances: Spanned::new(0..0, 1_000),
            total_core_instances: None,
            total_memories: None,
            total_tables: None,
            total_stacks: None,
            max_memory_bytes: Spanned::new(0..0, 128 * 1024 * 1024),
            max_core_instances_per_component: 16,
            max_memories_per_component: 4,
            max_tables_per_component: 8,
            keep_resident_bytes: 1024 * 1024,
            session_instances: None,
            total_memory_bytes: None,
        }
    }
}

#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitsSection {
    pub request_deadline_ms: Option<Spanned<u64>>,
    pub memory_bytes: Option<Spanned<u64>>,
    pub kv_store_bytes: Option<Spanned<u64>>,
    pub sqlite_database_bytes: Option<Spanned<u64>>,
    pub sqlite_statements: Option<Spanned<u64>>,
    pub max_open_files: Option<Spanned<u64>>,
    pub max_outbound_requests: Option<Spanned<u64>>,
    pub max_instances: Option<Spanned<u64>>,
    pub max_total_memory_bytes: Option<Spanned<u64>>,
    pub max_sessions: Option<Spanned<u64>>,
    pub max_inflight: Option<Spanned<u64>>,
    pub session_rate: Option<Spanned<u64>>,
    pub max_host_resources: Option<Spanned<u64>>,
    pub max_fields_bytes: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TenantSection {
    pub name: Spanned<String>,
    pub hosts: Vec<Spanned<String>>,
    pub components: Vec<Spanned<String>>,
    #[serde(default)]
    pub limits: LimitsSection,
    #[serde(default)]
    pub variables: BTreeMap<Spanned<String>, Spanned<String>>,
    #[serde(default)]
    pub secrets: BTreeMap<Spanned<String>, Spanned<SecretSource>>,
    #[serde(default, rename = "site")]
    pub sites: Vec<crate::site::SiteSection>,
    /// Programs of the sidecar's allowlist this tenant's components may run.
    #[serde(default)]
    pub sidecar_programs: Vec<Spanned<String>>,
    /// This tenant's mixing rooms (defaults: `[mixer]`).
    #[serde(default)]
    pub mixer: MixerSection,
    /// Address ranges this tenant's outbound HTTP may reach besides
    /// `[outbound]`'s.
    #[serde(default)]
    pub outbound: crate::outbound::OutboundSection,
}

/// Where a secret's value comes from.
#[derive(Debug, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub(crate) enum SecretSource {
    Env { env: String },
    File { file: String },
    Generate { generate: String },
    Inline(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ComponentSection {
    #[serde(default)]
    pub instance: Option<Spanned<String>>,
    #[serde(default)]
    pub session_key: Option<Spanned<String>>,
    #[serde(default)]
    pub max_sessions: Option<Spanned<usize>>,
    #[serde(default)]
    pub idle_timeout_ms: Option<Spanned<u64>>,
    #[serde(default)]
    pub max_queued_per_session: Option<Spanned<usize>>,
    #[serde(default)]
    pub instances_per_key: Option<Spanned<CountOrName>>,
    #[serde(default)]
    pub memory_bytes: Option<Spanned<u64>>,
}
