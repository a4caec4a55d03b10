//! The objects the API reads and writes, as JSON and as stored.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a tenant may hold. Every field has a default, so an operator sets
/// only what differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Quota {
    /// Apps the tenant may have.
    pub max_apps: u64,
    /// Components one version may have.
    pub max_components: u64,
    /// Versions kept per app: creating one more deletes the oldest that
    /// neither serves nor is what a rollback returns to (refused only if
    /// every one does).
    pub max_versions: u64,
    /// Bytes of one uploaded component.
    pub max_artifact_bytes: u64,
    /// Bytes of all the tenant's uploaded components together.
    pub max_total_artifact_bytes: u64,
    /// Its share of the node, over the node's `[limits]` defaults (none:
    /// the default).
    #[serde(skip_serializing_if = "Shares::is_default")]
    pub shares: Shares,
}

/// A tenant's share of the node: each unset one is the node's `[limits]`
/// default (edge-config/REFERENCE.md names them alike).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Shares {
    /// Instances alive at once (per-request and pinned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_instances: Option<u64>,
    /// Pinned sessions alive at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<u64>,
    /// Requests being served or queued at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_inflight: Option<u64>,
    /// New sessions per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_rate: Option<u64>,
    /// Linear-memory cap per instance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Linear memory of its instances together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_total_memory_bytes: Option<u64>,
    /// Wall-clock limit of one request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_deadline_ms: Option<u64>,
    /// Outbound HTTP requests in flight at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_outbound_requests: Option<u64>,
    /// Size cap of each key-value store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_store_bytes: Option<u64>,
    /// Size cap of each SQLite database.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sqlite_database_bytes: Option<u64>,
    /// SQLite statements running at once, over all its databases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sqlite_statements: Option<u64>,
    /// Files, directories and SQLite connections its guests hold open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_open_files: Option<u64>,
}

impl Shares {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

impl Default for Quota {
    fn default() -> Self {
        Self {
            max_apps: 20,
            max_components: 20,
            max_versions: 100,
            max_artifact_bytes: 64 << 20,
            max_total_artifact_bytes: 1 << 30,
            shares: Shares::default(),
        }
    }
}

/// A tenant as the API shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Tenant {
    /// Unique name (lower-case letters, digits, `-`, `_`).
    pub name: String,
    /// Hostnames it serves.
    pub hosts: Vec<String>,
    /// What it may hold.
    pub quota: Quota,
    /// Programs its components may run through the sidecar (granted by
    /// an operator; empty: none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<String>,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
}

/// An app as the API shows it.
#[derive(Clone, Debug, Serialize)]
pub struct App {
    /// Name, unique within its tenant.
    pub name: String,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
    /// What it serves now, if it was ever deployed.
    pub deployment: Option<Deployment>,
}

/// A component of a version: an uploaded artifact and what it is granted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentSpec {
    /// The artifact, `sha256:HEX`, uploaded before.
    pub digest: String,
    /// Key-value store labels it may open (Spin's `key_value_stores`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_value_stores: Vec<String>,
    /// SQLite database labels it may open (Spin's `sqlite_databases`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sqlite_databases: Vec<String>,
    /// Outbound HTTP it may reach (Spin's `allowed_outbound_hosts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_outbound_hosts: Vec<String>,
    /// Variables it reads through `wasi:config/store`: values or Spin
    /// templates (`"{{ api_key }}"`) of the app's variables, rendered when
    /// the version is served.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, String>,
    /// Files it sees, read-only, at their paths (Spin's `files`), each
    /// stored by content; left out when there are none (versions made
    /// before files were kept read the same).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileSpec>,
}

/// A file of a component (Spin's `files`): where the guest sees it and
/// its content, a file the tenant uploaded (in a Spin app's archive).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    /// Absolute path in the guest: `/ui/index.html`.
    pub path: String,
    /// Its content, `sha256:HEX`.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
}

/// An app variable a version declares (Spin's `[variables]`): a value
/// set through the API wins over the default; a required one without a
/// value keeps the version from being deployed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariableDecl {
    /// Used when no value is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Must have a value (set, or a default).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    /// Its value is a secret (the API never shows it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
}

/// An app variable's value as the API shows it.
#[derive(Clone, Debug, Serialize)]
pub struct VariableValue {
    /// Name.
    pub name: String,
    /// Whether it is a secret; then `value` is left out.
    pub secret: bool,
    /// The value, unless secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Last set, ms since the epoch.
    pub updated_at: i64,
}

/// A route of a version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// Spin route syntax: `/exact`, `/prefix/...`, `/:name`.
    pub route: String,
    /// The component id it goes to.
    pub component: String,
}

/// What a version is: immutable once created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionSpec {
    /// Components by id.
    pub components: BTreeMap<String, ComponentSpec>,
    /// HTTP routes.
    pub routes: Vec<RouteSpec>,
    /// The app variables its components' templates use.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, VariableDecl>,
}

/// A version as the API shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Version {
    /// Its number within the app: 1, 2, 3...
    pub number: i64,
    /// What it is.
    pub spec: VersionSpec,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
}

/// One version's part of a deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Weighted {
    /// Version number.
    pub version: i64,
    /// Percent of the app's requests it gets.
    pub percent: u8,
}

/// What an app serves: one version at 100 %, or two splitting traffic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    /// Sequence number within the app: the highest one serves.
    pub seq: i64,
    /// Versions and their weights (one or two, summing to 100).
    pub versions: Vec<Weighted>,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
}

/// A request the new deployment must answer as expected before traffic
/// moves to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Smoke {
    /// Path (and query) to request, on the tenant's first host.
    pub path: String,
    /// Expected status; 200 when left out.
    #[serde(default = "ok_status")]
    pub status: u16,
}

fn ok_status() -> u16 {
    200
}

/// One line of the audit log.
#[derive(Clone, Debug, Serialize)]
pub struct AuditEntry {
    /// Time, ms since the epoch.
    pub at: i64,
    /// Who (principal id), if anyone was authenticated.
    pub principal: Option<String>,
    /// The tenant acted on, if any.
    pub tenant: Option<String>,
    /// What was attempted (`app.deploy`, `token.create`...).
    pub action: String,
    /// On what.
    pub target: String,
    /// `ok` or `refused`.
    pub outcome: String,
    /// Why it was refused, or what changed.
    pub detail: String,
    /// The client's address.
    pub remote: String,
}

/// What the host serves from the database: every tenant with its hosts
/// and its apps' current deployments, versions resolved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Desired {
    /// Tenants by name order.
    pub tenants: Vec<DesiredTenant>,
}

/// One tenant of [`Desired`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredTenant {
    /// Name.
    pub name: String,
    /// Hostnames.
    pub hosts: Vec<String>,
    /// Programs it may run through the sidecar.
    pub programs: Vec<String>,
    /// Its share of the node.
    pub shares: Shares,
    /// Deployed apps.
    pub apps: Vec<DesiredApp>,
    /// Sites with their deployed rules.
    pub sites: Vec<DesiredSite>,
}

/// How a site is proxied (everything but its rules).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteSettings {
    /// Origin base URL: `http://` or `https://`, host and port, no path.
    pub origin: String,
    /// How long the origin may take to send its response head, and then
    /// each piece of its body.
    #[serde(default = "default_origin_timeout")]
    pub origin_timeout_ms: u64,
    /// Content types whose bodies are rewritten (default: HTML, CSS,
    /// JavaScript, JSON, plain text).
    #[serde(default)]
    pub content_types: Vec<String>,
}

fn default_origin_timeout() -> u64 {
    15_000
}

/// A site as the API shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Site {
    /// Name, unique within its tenant.
    pub name: String,
    /// Hosts it answers (exact names among the tenant's hosts).
    pub hosts: Vec<String>,
    /// How it is proxied.
    pub settings: SiteSettings,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
    /// The rule set version it applies, if one was deployed.
    pub rules_version: Option<i64>,
}

/// One rewrite rule, as the rewriter reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// A regular expression.
    pub pattern: String,
    /// What a match becomes (`$1`, `${name}` refer to groups).
    pub replacement: String,
    /// `g` (every match, the default), `i` (ignore case), `o` (first
    /// match only).
    #[serde(default = "default_flags")]
    pub flags: String,
    /// Content types it is limited to (empty: all of the site's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content_types: Vec<String>,
}

fn default_flags() -> String {
    "g".into()
}

/// A version of a site's rules: immutable once created.
#[derive(Clone, Debug, Serialize)]
pub struct RuleSetVersion {
    /// Its number within the site: 1, 2, 3...
    pub number: i64,
    /// The rules, in the order they apply.
    pub rules: Vec<RuleSpec>,
    /// Creation time, ms since the epoch.
    pub created_at: i64,
}

/// A site of [`DesiredTenant`] with the rules it applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredSite {
    /// Name.
    pub name: String,
    /// Hosts.
    pub hosts: Vec<String>,
    /// Proxy settings.
    pub settings: SiteSettings,
    /// The deployed rules (none before the first deploy).
    pub rules: Vec<RuleSpec>,
}

/// One deployed app of [`DesiredTenant`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredApp {
    /// Name.
    pub name: String,
    /// The versions it serves with their percent of traffic, each
    /// component's variables rendered.
    pub versions: Vec<(i64, u8, VersionSpec)>,
}
