//! Sites as this instance knows them: read from `wasi:config/store` the first
//! time a host is seen, compiled once and kept for the instance's life.
//!
//! On edge the host hands each site over as the variable `edge.site.HOST`
//! (JSON, see `edge_config::Site::guest_config`). A config change that
//! touches a site changes the variables, and the host then starts fresh
//! instances, so a compiled site never goes stale here.
//!
//! Elsewhere (Spin, `wasmtime serve` with `-S config`), the component reads
//! one site from plain variables: `origin` (required), `rules` (nginx
//! `subs_filter` / `replace_filter` lines) and `content_types` (comma
//! separated; the usual five when absent).

use crate::bindings::wasi::config::store as config;
use rewrite_engine::{MatchCache, Rule, RuleSet};
use serde::Deserialize;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use wasi::http::types::Scheme;

/// Resources remembered per site by the match cache.
const MATCH_CACHE_ENTRIES: usize = 16_384;

/// The content types rewritten when none are configured.
const DEFAULT_CONTENT_TYPES: [&str; 5] = [
    "text/html",
    "text/css",
    "application/javascript",
    "application/json",
    "text/plain",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SiteConfig {
    name: String,
    origin: String,
    origin_timeout_ms: u64,
    content_types: Vec<String>,
    rules: Vec<RuleConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleConfig {
    pattern: String,
    replacement: String,
    flags: String,
    content_types: Vec<String>,
}

/// A site, its rules compiled.
pub struct Site {
    /// The site's name (for logs).
    pub name: String,
    /// The origin as configured (`https://origin.example`).
    pub origin: String,
    /// The origin's scheme.
    pub scheme: Scheme,
    /// The origin's `host[:port]`.
    pub authority: String,
    /// Connect, first-byte and between-bytes timeout, in nanoseconds.
    pub timeout_ns: u64,
    content_types: Vec<String>,
    /// Per rule, the content types it is limited to (empty: all of the site's).
    rule_types: Vec<Vec<String>>,
    /// The compiled rules.
    pub rules: RuleSet,
    /// Which rules ever matched a resource, by URL and validator.
    pub cache: MatchCache,
}

impl Site {
    /// The rules that apply to a body of `content_type` (media type,
    /// lower-case, no parameters), or `None` when such bodies are not
    /// rewritten.
    pub fn rules_for(&self, content_type: &str) -> Option<Vec<bool>> {
        if !self.content_types.iter().any(|t| t == content_type) {
            return None;
        }
        Some(
            self.rule_types
                .iter()
                .map(|types| types.is_empty() || types.iter().any(|t| t == content_type))
                .collect(),
        )
    }
}

thread_local! {
    /// Sites by request host.
    static BY_HOST: RefCell<HashMap<String, Rc<Site>>> = RefCell::default();
    /// Sites by their config text, so hosts of one site share one compile.
    static BY_CONFIG: RefCell<HashMap<String, Rc<Site>>> = RefCell::default();
}

/// The site serving `host` (lower-case, no port), if there is one.
pub fn for_host(host: &str) -> Result<Option<Rc<Site>>, String> {
    if let Some(site) = BY_HOST.with_borrow(|m| m.get(host).cloned()) {
        return Ok(Some(site));
    }
    let key = format!("edge.site.{host}");
    let text = match config::get(&key).map_err(|e| format!("reading {key}: {e:?}"))? {
        Some(text) => text,
        None => match from_variables()? {
            Some(text) => text,
            None => return Ok(None),
        },
    };
    let site = match BY_CONFIG.with_borrow(|m| m.get(&text).cloned()) {
        Some(site) => site,
        None => {
            let site = Rc::new(compile(&text)?);
            BY_CONFIG.with_borrow_mut(|m| m.insert(text, site.clone()));
            site
        }
    };
    BY_HOST.with_borrow_mut(|m| m.insert(host.to_string(), site.clone()));
    Ok(Some(site))
}

/// A site from plain variables (`origin`, `rules`, `content_types`), for
/// hosts that do not hand sites over: the same JSON the edge host gives.
fn from_variables() -> Result<Option<String>, String> {
    let get = |name: &str| config::get(name).map_err(|e| format!("reading {name}: {e:?}"));
    let Some(origin) = get("origin")? else {
        return Ok(None);
    };
    let rules = match get("rules")? {
        Some(text) => {
            rewrite_engine::nginx::import(&text).map_err(|e| format!("variable rules: {e}"))?
        }
        None => Vec::new(),
    };
    let content_types: Vec<String> = match get("content_types")? {
        Some(list) => list
            .split(',')
            .map(|t| t.trim().to_ascii_lowercase())
            .filter(|t| !t.is_empty())
            .collect(),
        None => DEFAULT_CONTENT_TYPES
            .iter()
            .map(|t| t.to_string())
            .collect(),
    };
    let value = serde_json::json!({
        "name": "default",
        "origin": origin,
        "origin_timeout_ms": 15_000,
        "content_types": content_types,
        "rules": rules.iter().map(|r| serde_json::json!({
            "pattern": r.pattern,
            "replacement": r.replacement,
            "flags": format!("{}{}", if r.once { "o" } else { "g" }, if r.case_insensitive { "i" } else { "" }),
            "content_types": [],
        })).collect::<Vec<_>>(),
    });
    Ok(Some(value.to_string()))
}

fn compile(text: &str) -> Result<Site, String> {
    let config: SiteConfig = serde_json::from_str(text).map_err(|e| format!("site config: {e}"))?;
    let (scheme, authority) = match config.origin.split_once("://") {
        Some(("http", a)) => (Scheme::Http, a),
        Some(("https", a)) => (Scheme::Https, a),
        _ => {
            return Err(format!(
                "site {}: origin {:?} is not http(s)://host",
                config.name, config.origin
            ));
        }
    };
    let mut rules = Vec::with_capacity(config.rules.len());
    let mut rule_types = Vec::with_capacity(config.rules.len());
    for (i, r) in config.rules.into_iter().enumerate() {
        let rule = Rule::new(&r.pattern, &r.replacement)
            .with_flags(&r.flags)
            .map_err(|e| format!("site {}: rule {}: {e}", config.name, i + 1))?;
        rules.push(rule);
        rule_types.push(r.content_types);
    }
    let rules = RuleSet::new(&rules).map_err(|e| format!("site {}: {e}", config.name))?;
    Ok(Site {
        authority: authority.trim_end_matches('/').to_string(),
        scheme,
        origin: config.origin.clone(),
        name: config.name,
        timeout_ns: config.origin_timeout_ms.saturating_mul(1_000_000),
        content_types: config.content_types,
        rule_types,
        rules,
        cache: MatchCache::new(MATCH_CACHE_ENTRIES),
    })
}
