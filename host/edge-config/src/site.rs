//! `[[tenant.site]]`: sites proxied through the rewriter, with their origin,
//! the content types to rewrite and their rules (inline `[[tenant.site.rules]]`
//! and/or a `rules_file`, nginx `subs_filter` lines or TOML), compiled at
//! load so a bad rule refuses the config.

use rewrite_engine::Rule;
use serde::Deserialize;
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
    pub component: Option<Spanned<String>>,
    pub origin_timeout_ms: Option<Spanned<u64>>,
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
    pub content_types: Option<Vec<Spanned<String>>>,
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
    /// The component that proxies the site (`rewriter` unless named).
    pub component: String,
    /// How long the origin may take to send its response head, and then
    /// each piece of its body.
    pub origin_timeout: std::time::Duration,
    /// Content types (without parameters) whose bodies are rewritten.
    pub content_types: Vec<String>,
    /// The rules: `rules_file` first, then the inline ones.
    pub rules: Vec<Rule>,
    /// Per rule, the content types it is limited to (empty: every type of
    /// the site).
    pub rule_content_types: Vec<Vec<String>>,
    /// The rules file, watched for reloads.
    pub rules_file: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Site")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .field("origin", &self.origin)
            .field("component", &self.component)
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

/// Checks an origin URL: scheme and authority only (no path, no
/// credentials); the origin without a trailing `/`.
pub fn check_origin(origin: &str) -> Result<String, String> {
    let rest = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
        .ok_or_else(|| format!("{origin:?} must start with http:// or https://"))?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains(['/', '?', '#', ' ', '@']) {
        return Err(format!(
            "{origin:?} must be a scheme and host only (allowed: \"https://origin.example\", \"http://127.0.0.1:8080\")"
        ));
    }
    Ok(origin.trim_end_matches('/').to_string())
}

/// Default of `origin_timeout_ms`.
pub const DEFAULT_ORIGIN_TIMEOUT_MS: u64 = 15_000;

/// The variable prefix under which a site is handed to its component:
/// `edge.site.HOST` holds [`Site::guest_config`]. Spin variable names cannot
/// contain '.', so these never collide with a manifest's variables.
pub const SITE_VARIABLE_PREFIX: &str = "edge.site.";

impl Site {
    /// The site as its component reads it (`wasi:config/store`, key
    /// `edge.site.HOST`): one JSON object.
    ///
    /// ```json
    /// {"name": "clone", "origin": "https://origin.example", "origin_timeout_ms": 15000,
    ///  "content_types": ["text/html"],
    ///  "rules": [{"pattern": "origin\\.example", "replacement": "clone.example",
    ///             "flags": "gi", "content_types": []}]}
    /// ```
    pub fn guest_config(&self) -> String {
        let list = |items: &[String]| {
            let quoted: Vec<String> = items.iter().map(|s| json_string(s)).collect();
            format!("[{}]", quoted.join(","))
        };
        let rules: Vec<String> = self
            .rules
            .iter()
            .zip(&self.rule_content_types)
            .map(|(r, types)| {
                let flags = match (r.case_insensitive, r.once) {
                    (false, false) => "g",
                    (true, false) => "gi",
                    (false, true) => "o",
                    (true, true) => "oi",
                };
                format!(
                    "{{\"pattern\":{},\"replacement\":{},\"flags\":\"{flags}\",\"content_types\":{}}}",
                    json_string(&r.pattern),
                    json_string(&r.replacement),
                    list(types)
                )
            })
            .collect();
        format!(
            "{{\"name\":{},\"origin\":{},\"origin_timeout_ms\":{},\"content_types\":{},\"rules\":[{}]}}",
            json_string(&self.name),
            json_string(&self.origin),
            self.origin_timeout.as_millis(),
            list(&self.content_types),
            rules.join(",")
        )
    }
}

/// A JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Parses a content-type list entry: `type/subtype`, no parameters.
pub fn check_content_type(ct: &str) -> Result<String, String> {
    let ct = ct.trim().to_ascii_lowercase();
    if ct.split('/').count() != 2
        || ct.contains([';', ' '])
        || ct.starts_with('/')
        || ct.ends_with('/')
    {
        return Err(format!(
            "{ct:?} is not a content type (allowed: \"text/html\", no parameters)"
        ));
    }
    Ok(ct)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(json_string("a\"b\\c\nd"), r#""a\"b\\c\u000ad""#);
        assert_eq!(json_string("é"), "\"é\"");
    }
}
