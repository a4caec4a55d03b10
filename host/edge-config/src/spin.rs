//! The subset of the Spin application manifest (version 2) that edge reads.
// Fields Spin defines but edge does not use are parsed so that they are
// accepted (the manifest stays valid for Spin) and otherwise ignored.
#![allow(dead_code)]
//!
//! Keys Spin knows but edge does not use (`build`, `files`, `environment`,
//! ...) are accepted so the file stays a valid Spin manifest; keys neither
//! knows are errors.

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Manifest {
    pub spin_manifest_version: Spanned<toml::Value>,
    pub application: Application,
    #[serde(default)]
    pub variables: BTreeMap<Spanned<String>, Spanned<AppVariable>>,
    #[serde(default)]
    pub trigger: Triggers,
    #[serde(default)]
    pub component: BTreeMap<Spanned<String>, Spanned<Component>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Application {
    pub name: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub authors: Vec<String>,
    #[serde(default)]
    pub targets: Option<toml::Value>,
    #[serde(default)]
    pub trigger: Option<toml::Value>,
    #[serde(default)]
    pub tool: Option<toml::Value>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct AppVariable {
    #[serde(default)]
    pub default: Option<String>,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub secret: bool,
}

#[derive(Debug, Deserialize, Default)]
pub(crate) struct Triggers {
    #[serde(default)]
    pub http: Vec<Spanned<HttpTrigger>>,
    /// Other trigger types (redis, cron, ...) are Spin's; edge serves HTTP.
    #[serde(flatten)]
    pub other: BTreeMap<String, toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HttpTrigger {
    #[serde(default)]
    pub id: Option<String>,
    pub route: Spanned<toml::Value>,
    pub component: Spanned<toml::Value>,
    #[serde(default)]
    pub executor: Option<toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Component {
    pub source: Spanned<toml::Value>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub allowed_outbound_hosts: Vec<Spanned<String>>,
    #[serde(default)]
    pub key_value_stores: Vec<Spanned<String>>,
    #[serde(default)]
    pub variables: BTreeMap<Spanned<String>, Spanned<String>>,
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    #[serde(default)]
    pub files: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pub exclude_files: Vec<String>,
    #[serde(default)]
    pub sqlite_databases: Vec<Spanned<String>>,
    #[serde(default)]
    pub ai_models: Option<toml::Value>,
    #[serde(default)]
    pub build: Option<toml::Value>,
    #[serde(default)]
    pub tool: Option<toml::Value>,
    #[serde(default)]
    pub dependencies_inherit_configuration: Option<bool>,
    #[serde(default)]
    pub dependencies: Option<toml::Value>,
}
