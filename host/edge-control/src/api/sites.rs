//! Sites (proxied through the node's rewriter) and their rule sets:
//! rules are validated as they are written (which rule, where, why),
//! imported from nginx `subs_filter`/`replace_filter` lines, previewed on
//! a body with the engine the rewriter runs, versioned, deployed and
//! rolled back like apps.

use super::{
    ApiError, Caller, Control, JsonBody, OriginError, OriginPage, SmokeRequest, check_name,
};
use crate::model::{RuleSetVersion, RuleSpec, Site, SiteSettings};
use crate::store::{SiteRow, TenantRow};
use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;
use rewrite_engine::{Rule, RuleSet};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Most rules one set may have.
const MAX_RULES: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSite {
    name: String,
    hosts: Vec<String>,
    #[serde(flatten)]
    settings: SiteSettings,
}

async fn site_of(c: &Control, t: &TenantRow, name: &str) -> Result<SiteRow, ApiError> {
    c.db.site(&t.id, name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no site {name:?}")))
}

pub async fn list(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(tenant): Path<String>,
) -> Result<Json<Vec<Site>>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    Ok(Json(
        c.db.sites(&t.id)
            .await?
            .into_iter()
            .map(|s| s.site)
            .collect(),
    ))
}

pub async fn show(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, site)): Path<(String, String)>,
) -> Result<Json<Site>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    Ok(Json(site_of(&c, &t, &site).await?.site))
}

/// Proxy settings as edge-config checks a site's: the origin a scheme and
/// host only, content types lower-cased without parameters.
fn check_settings(s: &mut SiteSettings) -> Result<(), ApiError> {
    s.origin =
        edge_config::check_origin(&s.origin).map_err(|e| ApiError::bad(Some("origin"), e))?;
    if s.origin_timeout_ms == 0 {
        return Err(ApiError::bad(
            Some("origin_timeout_ms"),
            "must be at least 1 (milliseconds)",
        ));
    }
    check_content_types("content_types", &mut s.content_types)
}

fn check_content_types(field: &str, list: &mut [String]) -> Result<(), ApiError> {
    for (i, ct) in list.iter_mut().enumerate() {
        *ct = edge_config::check_content_type(ct)
            .map_err(|e| ApiError::bad(Some(&format!("{field}[{i}]")), e))?;
    }
    Ok(())
}

pub async fn create(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path(tenant): Path<String>,
    body: Result<JsonBody<NewSite>, ApiError>,
) -> Result<(StatusCode, Json<Site>), ApiError> {
    let mut tenant_id = None;
    let target = body.as_ref().map(|b| b.0.name.clone()).unwrap_or_default();
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        let JsonBody(mut s) = body?;
        check_name("name", &s.name)?;
        if !c.node.serves_sites() {
            return Err(ApiError::invalid(
                None,
                "this node has no rewriter component to proxy sites",
            ));
        }
        check_settings(&mut s.settings)?;
        if s.hosts.is_empty() {
            return Err(ApiError::bad(
                Some("hosts"),
                "a site needs at least one host",
            ));
        }
        let patterns: Vec<edge_config::HostPattern> = t
            .tenant
            .hosts
            .iter()
            .filter_map(|h| edge_config::HostPattern::parse(h).ok())
            .collect();
        let mut hosts = Vec::new();
        for (i, h) in s.hosts.iter().enumerate() {
            let field = format!("hosts[{i}]");
            let host = match edge_config::HostPattern::parse(h) {
                Ok(edge_config::HostPattern::Exact(e)) => e,
                _ => {
                    return Err(ApiError::bad(
                        Some(&field),
                        format!("{h:?} is not a host name (site hosts are exact names)"),
                    ));
                }
            };
            if !patterns.iter().any(|p| p.matches(&host)) {
                return Err(ApiError::invalid(
                    Some(&field),
                    format!(
                        "host {host:?} is not among this tenant's hosts ({})",
                        t.tenant.hosts.join(", ")
                    ),
                ));
            }
            if hosts.contains(&host) || c.db.site_host_taken(&host).await? {
                return Err(ApiError::conflict(
                    Some(&field),
                    format!("host {host:?} belongs to another site"),
                ));
            }
            hosts.push(host);
        }
        if c.db.site(&t.id, &s.name).await?.is_some() {
            return Err(ApiError::conflict(
                Some("name"),
                format!("site {:?} exists", s.name),
            ));
        }
        let row =
            c.db.create_site(&t.id, &s.name, &hosts, &s.settings)
                .await?;
        c.apply_stored().await.map_err(ApiError::internal)?;
        Ok((StatusCode::CREATED, Json(row.site)))
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "site.create",
        &target,
        &result,
    )
    .await;
    result
}

/// Replaces a site's proxy settings (origin, timeout, content types);
/// they apply to the next request.
pub async fn update(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, site)): Path<(String, String)>,
    body: Result<JsonBody<SiteSettings>, ApiError>,
) -> Result<Json<Site>, ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        let s = site_of(&c, &t, &site).await?;
        let JsonBody(mut settings) = body?;
        check_settings(&mut settings)?;
        c.db.set_site_settings(&s.id, &settings).await?;
        c.apply_stored().await.map_err(ApiError::internal)?;
        let mut view = s.site;
        view.settings = settings;
        Ok(Json(view))
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "site.update",
        &site,
        &result,
    )
    .await;
    result
}

/// Compiles `specs` with the rewriter's engine: the rule set, or the
/// first rule that fails with where and why.
pub fn compile(specs: &mut [RuleSpec], field: &str) -> Result<RuleSet, ApiError> {
    if specs.len() > MAX_RULES {
        return Err(ApiError::invalid(
            Some(field),
            format!("{} rules; a set has at most {MAX_RULES}", specs.len()),
        ));
    }
    let mut rules = Vec::with_capacity(specs.len());
    for (i, r) in specs.iter_mut().enumerate() {
        check_content_types(&format!("{field}[{i}].content_types"), &mut r.content_types)?;
        let rule = Rule::new(&r.pattern, &r.replacement)
            .with_flags(&r.flags)
            .map_err(|e| ApiError::bad(Some(&format!("{field}[{i}].flags")), e))?;
        rules.push(rule);
    }
    // The engine numbers rules from 1, as people do; fields count from 0.
    RuleSet::new(&rules).map_err(|e| {
        ApiError::invalid(
            Some(&format!("{field}[{}].pattern", e.index.saturating_sub(1))),
            e.to_string(),
        )
    })
}

/// Rules from nginx config text, as specs.
fn import_nginx(text: &str) -> Result<Vec<RuleSpec>, ApiError> {
    let rules = rewrite_engine::nginx::import(text)
        .map_err(|e| ApiError::invalid(Some("nginx"), e.to_string()))?;
    Ok(rules
        .into_iter()
        .map(|r| RuleSpec {
            flags: match (r.case_insensitive, r.once) {
                (false, false) => "g",
                (true, false) => "gi",
                (false, true) => "o",
                (true, true) => "oi",
            }
            .into(),
            pattern: r.pattern,
            replacement: r.replacement,
            content_types: Vec::new(),
        })
        .collect())
}

/// A new rule set: rules as JSON, or nginx lines to import.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewRules {
    #[serde(default)]
    rules: Option<Vec<RuleSpec>>,
    #[serde(default)]
    nginx: Option<String>,
}

impl NewRules {
    fn specs(self) -> Result<(Vec<RuleSpec>, &'static str), ApiError> {
        match (self.rules, self.nginx) {
            (Some(r), None) => Ok((r, "rules")),
            (None, Some(text)) => Ok((import_nginx(&text)?, "nginx")),
            _ => Err(ApiError::bad(
                None,
                "give either `rules` (a list) or `nginx` (subs_filter/replace_filter lines)",
            )),
        }
    }
}

#[derive(Serialize)]
pub struct CreatedRules {
    number: i64,
    rules: Vec<RuleSpec>,
}

pub async fn create_rules(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, site)): Path<(String, String)>,
    body: Result<JsonBody<NewRules>, ApiError>,
) -> Result<(StatusCode, Json<CreatedRules>), ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        let s = site_of(&c, &t, &site).await?;
        let (mut specs, field) = body?.0.specs()?;
        compile(&mut specs, field)?;
        // At the quota the oldest rule sets go, not the one applied nor
        // the one a rollback returns to; counted and made under the change
        // lock, so rule sets made at once stay within it.
        let _one = c.changes.lock().await;
        let max = t.tenant.quota.max_versions;
        if c.db.rule_set_count(&s.id).await? as u64 >= max {
            c.db.prune_rule_sets(&s.id, max.saturating_sub(1)).await?;
            let kept = c.db.rule_set_count(&s.id).await?;
            if kept as u64 >= max {
                return Err(ApiError::invalid(
                    None,
                    format!(
                        "site {site:?} keeps {kept} rule sets, this tenant's quota (max_versions), and each applies or is what a rollback returns to"
                    ),
                ));
            }
        }
        let number =
            c.db.create_rule_set(&s.id, &specs, Some(&caller.principal.id))
                .await?;
        Ok((
            StatusCode::CREATED,
            Json(CreatedRules {
                number,
                rules: specs,
            }),
        ))
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "rules.create",
        &site,
        &result,
    )
    .await;
    result
}

pub async fn rule_sets(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, site)): Path<(String, String)>,
) -> Result<Json<Vec<RuleSetVersion>>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    let s = site_of(&c, &t, &site).await?;
    Ok(Json(c.db.rule_sets(&s.id).await?))
}

pub async fn rule_set(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, site, number)): Path<(String, String, String)>,
) -> Result<Json<RuleSetVersion>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    let s = site_of(&c, &t, &site).await?;
    let missing = || ApiError::not_found(format!("no rule set {number:?} of site {site:?}"));
    let n: i64 = number.parse().map_err(|_| missing())?;
    Ok(Json(c.db.rule_set(&s.id, n).await?.ok_or_else(missing)?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewRequest {
    /// Rules to try (not stored), or nginx lines, or a stored version.
    #[serde(default)]
    rules: Option<Vec<RuleSpec>>,
    #[serde(default)]
    nginx: Option<String>,
    #[serde(default)]
    version: Option<i64>,
    /// The page to rewrite.
    body: String,
}

#[derive(Serialize)]
pub struct RuleCount {
    index: usize,
    matches: u64,
}

/// One replacement, for highlighting: offsets in UTF-16 code units (as
/// JavaScript indexes strings) of what it replaced in `body` and what it
/// wrote in `output`.
#[derive(Serialize, Debug, PartialEq, Eq)]
pub struct Span {
    rule: usize,
    input: [u64; 2],
    output: [u64; 2],
}

#[derive(Serialize)]
pub struct Preview {
    output: String,
    replacements: u64,
    rules: Vec<RuleCount>,
    /// The first [`MAX_SPANS`] replacements, in order.
    spans: Vec<Span>,
    /// Why `spans` does not hold every replacement, if it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    spans_note: Option<String>,
    /// The rules nginx lines were imported as (given `nginx`): what the
    /// console puts in its editor.
    #[serde(skip_serializing_if = "Option::is_none")]
    imported: Option<Vec<RuleSpec>>,
}

/// Replacements a preview locates at most (its counts cover them all).
const MAX_SPANS: usize = 10_000;

/// Rewrites `body` with the rules (nothing is stored or deployed), in one
/// pass of the engine the rewriter runs: the output, the replacements
/// made, each rule's count of them, and where they are.
pub async fn preview(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, site)): Path<(String, String)>,
    body: Result<JsonBody<PreviewRequest>, ApiError>,
) -> Result<Json<Preview>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    let s = site_of(&c, &t, &site).await?;
    let JsonBody(p) = body?;
    let (mut specs, field) = match (p.rules, p.nginx, p.version) {
        (Some(r), None, None) => (r, "rules"),
        (None, Some(text), None) => (import_nginx(&text)?, "nginx"),
        (None, None, Some(v)) => {
            let set = c.db.rule_set(&s.id, v).await?.ok_or_else(|| {
                ApiError::invalid(
                    Some("version"),
                    format!("site {site:?} has no rule set {v}"),
                )
            })?;
            (set.rules, "rules")
        }
        _ => {
            return Err(ApiError::bad(
                None,
                "give one of `rules`, `nginx` or `version`",
            ));
        }
    };
    let set = compile(&mut specs, field)?;
    let mut out = tokio::task::spawn_blocking(move || run_preview(&set, &p.body))
        .await
        .map_err(ApiError::internal)?;
    if field == "nginx" {
        out.imported = Some(specs);
    }
    Ok(Json(out))
}

fn run_preview(set: &RuleSet, body: &str) -> Preview {
    let input = body.as_bytes();
    let mut rw = rewrite_engine::Rewriter::new(set).with_trace(MAX_SPANS);
    let mut output = Vec::with_capacity(input.len());
    rw.write(input, &mut output);
    rw.finish(&mut output);
    let replacements = rw.stats().replacements;
    let rules = rw
        .rule_counts()
        .iter()
        .enumerate()
        .map(|(index, &matches)| RuleCount { index, matches })
        .collect();
    let trace = rw.trace().to_vec();
    drop(rw);
    let (output, mut spans_note) = match String::from_utf8(output) {
        Ok(s) => (s, None),
        Err(e) => (
            String::from_utf8_lossy(e.as_bytes()).into_owned(),
            Some("a match split a UTF-8 character: the output is shown with replacement characters and without spans".to_string()),
        ),
    };
    let spans = if spans_note.is_some() {
        Vec::new()
    } else {
        let mut inputs = Utf16Offsets::new(body);
        let mut outputs = Utf16Offsets::new(&output);
        trace
            .iter()
            .map(|r| Span {
                rule: r.rule,
                input: [inputs.at(r.input.start), inputs.at(r.input.end)],
                output: [outputs.at(r.output.start), outputs.at(r.output.end)],
            })
            .collect()
    };
    if spans_note.is_none() && (spans.len() as u64) < replacements {
        spans_note = Some(format!(
            "the first {} of {replacements} replacements are located",
            spans.len()
        ));
    }
    Preview {
        output,
        replacements,
        rules,
        spans,
        spans_note,
        imported: None,
    }
}

/// Byte offsets of a string to UTF-16 offsets, asked in ascending order
/// (one pass over the string for all of them). An offset inside a
/// character counts from that character's start.
struct Utf16Offsets<'s> {
    chars: std::iter::Peekable<std::str::CharIndices<'s>>,
    units: u64,
}

impl<'s> Utf16Offsets<'s> {
    fn new(s: &'s str) -> Self {
        Self {
            chars: s.char_indices().peekable(),
            units: 0,
        }
    }

    fn at(&mut self, byte: u64) -> u64 {
        while let Some(&(i, ch)) = self.chars.peek() {
            if (i + ch.len_utf8()) as u64 > byte {
                break;
            }
            self.units += ch.len_utf16() as u64;
            self.chars.next();
        }
        self.units
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OriginRequest {
    /// Path and query, as the site's hosts would be asked for them.
    path: String,
}

/// The longest path the console may fetch, in bytes.
const MAX_ORIGIN_PATH: usize = 2048;

/// A path (and query) to ask an origin for: starting with '/', at most
/// [`MAX_ORIGIN_PATH`] bytes, no control characters or spaces, and one an
/// HTTP request can carry as it is (no fragment).
fn check_origin_path(path: &str) -> Result<(), ApiError> {
    let bad = |why: String| Err(ApiError::bad(Some("path"), why));
    if !path.starts_with('/') {
        return bad("a path starting with '/' (a query may follow)".into());
    }
    if path.len() > MAX_ORIGIN_PATH {
        return bad(format!(
            "{} bytes; a path has at most {MAX_ORIGIN_PATH}",
            path.len()
        ));
    }
    if let Some((i, ch)) = path
        .char_indices()
        .find(|(_, ch)| ch.is_control() || ch.is_whitespace())
    {
        return bad(format!(
            "{ch:?} at byte {i}: no control characters or spaces (percent-encode them)"
        ));
    }
    match http::uri::PathAndQuery::try_from(path) {
        Ok(p) if p.as_str() == path => Ok(()),
        _ => bad("not a path and query a request can carry (no fragment; percent-encode other characters)".into()),
    }
}

/// GETs a path from the site's origin as the site's rewriter would (the
/// node's outbound policy for it, the site's timeout), for the console's
/// preview: the origin's status, content type and body (up to 2 MiB),
/// unrewritten. Nothing is stored or audited (a read); the fetch is
/// logged.
pub async fn fetch_origin(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, site)): Path<(String, String)>,
    body: Result<JsonBody<OriginRequest>, ApiError>,
) -> Result<Json<OriginPage>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    let s = site_of(&c, &t, &site).await?;
    let JsonBody(r) = body?;
    check_origin_path(&r.path)?;
    let started = std::time::Instant::now();
    let fetched = c
        .node
        .fetch_origin(&t.tenant.name, &s.site.name, &r.path)
        .await;
    let ms = started.elapsed().as_millis() as u64;
    let (tenant, site, path) = (&t.tenant.name, &s.site.name, &r.path);
    match &fetched {
        Ok(page) => {
            tracing::info!(%tenant, %site, %path, status = page.status, bytes = page.body.len(), truncated = page.truncated, ms, "console: a page fetched from the site's origin")
        }
        Err(e) => {
            tracing::info!(%tenant, %site, %path, error = %e, ms, "console: fetching a page from the site's origin failed")
        }
    }
    fetched.map(Json).map_err(|e| match e {
        OriginError::NotServed(m) => ApiError::conflict(None, m),
        OriginError::Prohibited(m) => ApiError::invalid(None, m),
        OriginError::Busy(m) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, None, m),
        OriginError::Failed(m) => ApiError::new(StatusCode::BAD_GATEWAY, None, m),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSiteDeployment {
    version: i64,
    #[serde(default)]
    smoke: Option<crate::model::Smoke>,
}

#[derive(Serialize)]
pub struct SiteDeployment {
    seq: i64,
    version: i64,
    created_at: i64,
}

/// Makes rule set `version` the one `s` applies, smoke-checked first.
async fn put_in_service(
    c: &Control,
    caller: &Caller,
    t: &TenantRow,
    s: &SiteRow,
    version: i64,
    smoke: Option<crate::model::Smoke>,
) -> Result<SiteDeployment, ApiError> {
    // Held until the deployment is recorded: a change in between would
    // rebuild the node from rules the database does not yet say (or
    // delete the rule set being put in service).
    let _one = c.changes.lock().await;
    let set = c.db.rule_set(&s.id, version).await?.ok_or_else(|| {
        ApiError::invalid(
            Some("version"),
            format!("site {:?} has no rule set {version}", s.site.name),
        )
    })?;
    let smoke = match smoke {
        Some(sm) if !sm.path.starts_with('/') => {
            return Err(ApiError::bad(
                Some("smoke.path"),
                "a path starting with '/'",
            ));
        }
        Some(sm) => Some(SmokeRequest {
            host: s.site.hosts[0].clone(),
            path: sm.path,
            status: sm.status,
        }),
        None => None,
    };
    let mut desired = c.db.desired().await?;
    let site = desired
        .tenants
        .iter_mut()
        .find(|x| x.name == t.tenant.name)
        .and_then(|x| x.sites.iter_mut().find(|x| x.name == s.site.name))
        .ok_or_else(|| ApiError::internal("site vanished during a deploy"))?;
    site.rules = set.rules;
    c.node.apply(desired, smoke).await.map_err(|e| {
        ApiError::invalid(
            None,
            format!("not deployed, the previous rules keep applying: {e}"),
        )
    })?;
    let seq = match c
        .db
        .add_site_deployment(&s.id, version, Some(&caller.principal.id))
        .await
    {
        Ok(seq) => seq,
        Err(e) => {
            // The node serves what the database does not say: put back
            // what it says.
            if let Ok(back) = c.db.desired().await {
                let _ = c.node.apply(back, None).await;
            }
            return Err(e.into());
        }
    };
    Ok(SiteDeployment {
        seq,
        version,
        created_at: crate::db::now_ms(),
    })
}

pub async fn deploy(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, site)): Path<(String, String)>,
    body: Result<JsonBody<NewSiteDeployment>, ApiError>,
) -> Result<(StatusCode, Json<SiteDeployment>), ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        let s = site_of(&c, &t, &site).await?;
        let JsonBody(d) = body?;
        Ok((
            StatusCode::CREATED,
            Json(put_in_service(&c, &caller, &t, &s, d.version, d.smoke).await?),
        ))
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "rules.deploy",
        &site,
        &result,
    )
    .await;
    result
}

pub async fn deployments(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, site)): Path<(String, String)>,
) -> Result<Json<Vec<SiteDeployment>>, ApiError> {
    let t = caller.tenant(&c, &tenant).await?;
    let s = site_of(&c, &t, &site).await?;
    let list = c.db.site_deployments(&s.id, 100).await?;
    Ok(Json(
        list.into_iter()
            .map(|(seq, version, created_at)| SiteDeployment {
                seq,
                version,
                created_at,
            })
            .collect(),
    ))
}

pub async fn rollback(
    State(c): State<Arc<Control>>,
    caller: Caller,
    Path((tenant, site)): Path<(String, String)>,
    body: bytes::Bytes,
) -> Result<(StatusCode, Json<SiteDeployment>), ApiError> {
    let mut tenant_id = None;
    let result = async {
        let t = caller.tenant(&c, &tenant).await?;
        tenant_id = Some(t.id.clone());
        let s = site_of(&c, &t, &site).await?;
        let asked: super::apps::Rollback = super::json::parse_or_default(&body)?;
        let version = match asked.version {
            Some(v) => v,
            None => match c.db.site_deployments(&s.id, 2).await?.get(1) {
                Some((_, v, _)) => *v,
                None => {
                    return Err(ApiError::conflict(
                        None,
                        format!(
                            "site {site:?} has no earlier rules to roll back to; name a version"
                        ),
                    ));
                }
            },
        };
        Ok((
            StatusCode::CREATED,
            Json(put_in_service(&c, &caller, &t, &s, version, None).await?),
        ))
    }
    .await;
    c.record(
        Some(&caller),
        tenant_id.as_deref(),
        "rules.rollback",
        &site,
        &result,
    )
    .await;
    result
}

#[cfg(test)]
mod preview_tests {
    use super::*;

    #[test]
    fn origin_paths_are_paths_an_origin_can_be_asked_for() {
        for ok in [
            "/",
            "/some/page?x=1",
            "/a%20b?q=%C3%A9&r",
            "/@x",
            "//double",
        ] {
            assert!(check_origin_path(ok).is_ok(), "{ok}");
        }
        let long = format!("/{}", "a".repeat(MAX_ORIGIN_PATH));
        assert!(check_origin_path(&long[..MAX_ORIGIN_PATH]).is_ok());
        for bad in [
            "",
            "page",
            "http://elsewhere/",
            "/a b",
            "/a\tb",
            "/a\nHost: x",
            "/a\u{7f}",
            "/a\u{85}",
            "/a\u{a0}",
            "/x#frag",
            long.as_str(),
        ] {
            let e = check_origin_path(bad).unwrap_err();
            assert_eq!(
                (e.status, e.field.as_deref()),
                (StatusCode::BAD_REQUEST, Some("path")),
                "{bad:?}: {}",
                e.message
            );
        }
    }

    fn rules(list: &[(&str, &str)]) -> RuleSet {
        RuleSet::new(
            &list
                .iter()
                .map(|(p, r)| Rule::new(p, r))
                .collect::<Vec<_>>(),
        )
        .unwrap()
    }

    #[test]
    fn spans_count_utf16_units_as_javascript_does() {
        // "é" is 2 bytes and 1 unit; "😀" 4 bytes and 2 units.
        let p = run_preview(&rules(&[("cat", "dog!"), ("é", "e")]), "😀 cat é cat");
        assert_eq!(p.output, "😀 dog! e dog!");
        assert_eq!(p.replacements, 3);
        assert_eq!(
            p.spans,
            vec![
                Span {
                    rule: 0,
                    input: [3, 6],
                    output: [3, 7]
                },
                Span {
                    rule: 1,
                    input: [7, 8],
                    output: [8, 9]
                },
                Span {
                    rule: 0,
                    input: [9, 12],
                    output: [10, 14]
                },
            ]
        );
        assert_eq!(p.rules[0].matches, 2);
        assert_eq!(p.rules[1].matches, 1);
        assert!(p.spans_note.is_none());
    }

    #[test]
    fn counts_are_those_of_the_rules_together() {
        // Alone, "ab" and "b" would both match; together the longer wins.
        let p = run_preview(&rules(&[("ab", "X"), ("b", "Y")]), "ab b");
        assert_eq!(p.output, "X Y");
        assert_eq!((p.rules[0].matches, p.rules[1].matches), (1, 1));
    }

    #[test]
    fn past_the_cap_the_note_says_how_many_are_located() {
        let p = run_preview(&rules(&[("a", "b")]), &"a".repeat(MAX_SPANS + 5));
        assert_eq!(p.spans.len(), MAX_SPANS);
        assert_eq!(p.rules[0].matches, MAX_SPANS as u64 + 5);
        assert!(p.spans_note.unwrap().contains("10000 of 10005"));
    }
}
