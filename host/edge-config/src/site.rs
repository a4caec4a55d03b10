//! `[[tenant.site]]`: sites proxied through the rewriter, with their origin,
//! the content types to rewrite and their rules (inline `[[tenant.site.rules]]`
//! and/or a `rules_file`, nginx `subs_filter` lines or TOML), compiled at
//! load so a bad rule refuses the config.

use rewrite_engine::{Rule, RuleSet};
use serde::Deserialize;
use std::sync::Arc;
use toml::Spanned;

/// Content types rewritten when a site names none.
pub const DEFAULT_CONTENT_TYPES: [&str; 5] = [
    "text/html",
    "text/css",
    "application/javascript",
    "application/json",
    "text/plain",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SiteSection {
    pub name: Spanned<String>,
    pub hosts: Vec<Spanned<String>>,
    pub origin: Spanned<String>,
    pub content_types: Option<Vec<Spanned<String>>>,
    pub rules_file: Option<Spanned<String>>,
    #[serde(default)]
    pub rules: Vec<RuleSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuleSection {
    pub pattern: Spanned<String>,
    pub replacement: Spanned<String>,
    #[serde(default)]
    pub flags: Option<Spanned<String>>,
}

/// A site of a tenant.
#[derive(Clone)]
pub struct Site {
    /// Unique within the tenant.
    pub name: String,
    /// Host headers this site answers (exact, lower-case, no port).
    pub hosts: Vec<String>,
    /// Origin base URL (`http://` or `https://`, no path).
    pub origin: String,
    /// Content types (without parameters) whose bodies are rewritten.
    pub content_types: Vec<String>,
    /// The compiled rules: `rules_file` first, then the inline ones.
    pub rules: Arc<RuleSet>,
    /// The rules file, watched for reloads.
    pub rules_file: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Site")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .field("origin", &self.origin)
            .field("content_types", &self.content_types)
            .field("rules", &self.rules.len())
            .finish()
    }
}

/// Reads a rules file: nginx (`*.conf`) or TOML `[[rule]]` entries.
pub fn read_rules_file(path: &std::path::Path) -> Result<Vec<Rule>, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[serde(default)]
        rule: Vec<Entry>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Entry {
        pattern: String,
        replacement: String,
        #[serde(default)]
        flags: String,
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if path.extension().is_some_and(|e| e == "conf") {
        return rewrite_engine::nginx::import(&text)
            .map_err(|e| format!("{}: {e}", path.display()));
    }
    let file: File = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    file.rule
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            Rule::new(&r.pattern, &r.replacement)
                .with_flags(&r.flags)
                .map_err(|e| format!("{}: rule {}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Checks an origin URL: scheme and authority only.
pub(crate) fn check_origin(origin: &str) -> Result<String, String> {
    let rest = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
        .ok_or_else(|| format!("{origin:?} must start with http:// or https://"))?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains(['/', '?', '#', ' ']) {
        return Err(format!(
            "{origin:?} must be a scheme and host only (allowed: \"https://origin.example\", \"http://127.0.0.1:8080\")"
        ));
    }
    Ok(origin.trim_end_matches('/').to_string())
}
