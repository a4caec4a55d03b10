//! `edge deploy`, `edge versions`, `edge rollback`, `edge tenants`,
//! `edge tokens`: the control API from the command line.

use crate::api_cli::{Api, ApiArgs};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `edge deploy`.
#[derive(clap::Args)]
pub struct DeployArgs {
    /// A Spin manifest (its components and routes) or one component
    /// (`.wasm`, with `--route`).
    #[arg(default_value = "spin.toml")]
    path: PathBuf,
    /// The app's name (created if new); default: the manifest's
    /// application name, or the component file's name.
    #[arg(long)]
    app: Option<String>,
    /// Route of a single component (Spin syntax: `/...`, `/api/...`).
    #[arg(long, default_value = "/...")]
    route: String,
    /// A path that must answer `--smoke-status` on the new version before
    /// it takes traffic.
    #[arg(long)]
    smoke: Option<String>,
    /// The status the smoke path must answer.
    #[arg(long, default_value_t = 200)]
    smoke_status: u16,
    /// Send only this percent of the app's traffic to the new version
    /// (the rest stays on the one serving now): a gradual rollout.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=100), default_value_t = 100)]
    percent: u8,
    /// A value for a manifest variable (`NAME=VALUE`), over its default.
    #[arg(long = "var", value_parser = parse_var)]
    vars: Vec<(String, String)>,
    /// The tenant (default: the token's).
    #[arg(long)]
    tenant: Option<String>,
    #[command(flatten)]
    api: ApiArgs,
}

fn parse_var(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{s:?} is not NAME=VALUE"))
}

/// What `edge deploy` reads from a Spin manifest (other keys are Spin's
/// and ignored here).
#[derive(serde::Deserialize)]
struct Manifest {
    application: Application,
    #[serde(default)]
    variables: BTreeMap<String, ManifestVariable>,
    #[serde(default)]
    trigger: Triggers,
    #[serde(default)]
    component: BTreeMap<String, ManifestComponent>,
}

#[derive(serde::Deserialize)]
struct Application {
    name: String,
}

#[derive(serde::Deserialize, Default)]
struct ManifestVariable {
    default: Option<String>,
}

#[derive(serde::Deserialize, Default)]
struct Triggers {
    #[serde(default)]
    http: Vec<HttpTrigger>,
}

#[derive(serde::Deserialize)]
struct HttpTrigger {
    route: toml::Value,
    component: String,
}

#[derive(serde::Deserialize)]
struct ManifestComponent {
    source: toml::Value,
    #[serde(default)]
    key_value_stores: Vec<String>,
    #[serde(default)]
    allowed_outbound_hosts: Vec<String>,
    #[serde(default)]
    variables: BTreeMap<String, String>,
}

/// A version to create: component id → (file, spec without digest), routes.
struct Plan {
    app: String,
    components: BTreeMap<String, (PathBuf, Value)>,
    routes: Vec<Value>,
}

fn plan_component(args: &DeployArgs) -> Result<Plan> {
    let stem = args
        .path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("app")
        .to_ascii_lowercase()
        .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "-");
    let mut components = BTreeMap::new();
    components.insert(stem.clone(), (args.path.clone(), json!({})));
    Ok(Plan {
        app: args.app.clone().unwrap_or_else(|| stem.clone()),
        components,
        routes: vec![json!({"route": args.route, "component": stem})],
    })
}

fn render(template: &str, values: &BTreeMap<String, String>, at: &str) -> Result<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            bail!("{at}: unclosed {{{{ in {template:?}");
        };
        let name = after[..end].trim();
        let value = values.get(name).with_context(|| {
            format!("{at}: variable {name:?} has no value (give one with --var {name}=VALUE)")
        })?;
        out.push_str(value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn plan_manifest(args: &DeployArgs) -> Result<Plan> {
    let text = std::fs::read_to_string(&args.path)
        .with_context(|| format!("reading {}", args.path.display()))?;
    let m: Manifest = toml::from_str(&text).with_context(|| format!("{}", args.path.display()))?;
    let dir = args.path.parent().unwrap_or(Path::new("."));
    let mut values: BTreeMap<String, String> = m
        .variables
        .iter()
        .filter_map(|(k, v)| v.default.clone().map(|d| (k.clone(), d)))
        .collect();
    values.extend(args.vars.iter().cloned());
    let mut components = BTreeMap::new();
    let mut routes = Vec::new();
    for t in &m.trigger.http {
        let Some(route) = t.route.as_str() else {
            continue; // `{ private = true }`: not reachable over HTTP.
        };
        let Some(c) = m.component.get(&t.component) else {
            bail!(
                "{}: trigger.http route {route:?} names component {:?}, which the manifest does not define",
                args.path.display(),
                t.component
            );
        };
        routes.push(json!({"route": route, "component": t.component}));
        if components.contains_key(&t.component) {
            continue;
        }
        let Some(source) = c.source.as_str() else {
            bail!(
                "{}: component.{}.source: edge deploy uploads local files; a registry or URL source is not supported",
                args.path.display(),
                t.component
            );
        };
        let mut variables = BTreeMap::new();
        for (k, v) in &c.variables {
            variables.insert(
                k.clone(),
                render(
                    v,
                    &values,
                    &format!("component.{}.variables.{k}", t.component),
                )?,
            );
        }
        let spec = json!({
            "key_value_stores": c.key_value_stores,
            "allowed_outbound_hosts": c.allowed_outbound_hosts,
            "variables": variables,
        });
        components.insert(t.component.clone(), (dir.join(source), spec));
    }
    if routes.is_empty() {
        bail!(
            "{}: no [[trigger.http]] route to deploy",
            args.path.display()
        );
    }
    Ok(Plan {
        app: args
            .app
            .clone()
            .unwrap_or(m.application.name.to_ascii_lowercase()),
        components,
        routes,
    })
}

/// `edge deploy`: uploads, creates a version, deploys it.
pub fn deploy(args: &DeployArgs) -> Result<()> {
    let api = Api::new(&args.api)?;
    let plan = if args.path.extension().is_some_and(|e| e == "wasm") {
        plan_component(args)?
    } else {
        plan_manifest(args)?
    };
    let tenant = api.tenant(&args.tenant)?;
    let base = format!("/v1/tenants/{tenant}");
    let mut components = serde_json::Map::new();
    for (id, (file, spec)) in &plan.components {
        let bytes = std::fs::read(file)
            .with_context(|| format!("reading component {id:?} from {}", file.display()))?;
        let size = bytes.len();
        let artifact = api
            .upload(&format!("{base}/artifacts"), bytes)
            .with_context(|| format!("uploading {}", file.display()))?;
        let mut spec = spec.clone();
        spec["digest"] = artifact["digest"].clone();
        if !api.json {
            eprintln!(
                "uploaded {id}: {} ({size} bytes)",
                artifact["digest"].as_str().unwrap_or("?")
            );
        }
        components.insert(id.clone(), spec);
    }
    let app_path = format!("{base}/apps/{}", plan.app);
    if let Err(e) = api.get(&app_path) {
        if !e.to_string().contains("404") {
            return Err(e);
        }
        api.post(&format!("{base}/apps"), &json!({"name": plan.app}))?;
    }
    let version = api.post(
        &format!("{app_path}/versions"),
        &json!({"components": components, "routes": plan.routes}),
    )?;
    let number = version["number"].as_i64().unwrap_or_default();
    let mut versions = vec![json!({"version": number, "percent": args.percent})];
    if args.percent < 100 {
        let app = api.get(&app_path)?;
        let Some(current) = app["deployment"]["versions"]
            .as_array()
            .and_then(|v| v.first())
        else {
            bail!(
                "app {:?} serves nothing yet: the first deployment takes 100 percent",
                plan.app
            );
        };
        versions.push(json!({"version": current["version"], "percent": 100 - args.percent}));
    }
    let mut body = json!({"versions": versions});
    if let Some(path) = &args.smoke {
        body["smoke"] = json!({"path": path, "status": args.smoke_status});
    }
    let d = api.post(&format!("{app_path}/deployments"), &body)?;
    api.print(&d, || {
        format!(
            "deployed {} version {number} ({} percent) for tenant {tenant}",
            plan.app, args.percent
        )
    });
    Ok(())
}

/// `edge versions`.
#[derive(clap::Args)]
pub struct VersionsArgs {
    /// The app.
    #[arg(long)]
    app: String,
    /// The tenant (default: the token's).
    #[arg(long)]
    tenant: Option<String>,
    #[command(flatten)]
    api: ApiArgs,
}

/// Lists an app's versions, marking the serving ones.
pub fn versions(args: &VersionsArgs) -> Result<()> {
    let api = Api::new(&args.api)?;
    let tenant = api.tenant(&args.tenant)?;
    let app_path = format!("/v1/tenants/{tenant}/apps/{}", args.app);
    let app = api.get(&app_path)?;
    let list = api.get(&format!("{app_path}/versions"))?;
    api.print(&list, || {
        let serving: BTreeMap<i64, i64> = app["deployment"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| Some((w["version"].as_i64()?, w["percent"].as_i64()?)))
            .collect();
        let mut lines = vec![format!(
            "{:<8} {:<10} {:<26} components",
            "VERSION", "SERVING", "CREATED (UTC ms)"
        )];
        for v in list.as_array().into_iter().flatten() {
            let n = v["number"].as_i64().unwrap_or_default();
            let comps: Vec<String> = v["spec"]["components"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(id, c)| {
                    format!(
                        "{id}={}",
                        &c["digest"].as_str().unwrap_or("?").get(..19).unwrap_or("?")
                    )
                })
                .collect();
            let serving = serving.get(&n).map(|p| format!("{p}%")).unwrap_or_default();
            lines.push(format!(
                "{n:<8} {serving:<10} {:<26} {}",
                v["created_at"],
                comps.join(" ")
            ));
        }
        lines.join("\n")
    });
    Ok(())
}

/// `edge rollback`.
#[derive(clap::Args)]
pub struct RollbackArgs {
    /// The version to serve; default: what served before the current
    /// deployment.
    version: Option<i64>,
    /// The app.
    #[arg(long)]
    app: String,
    /// The tenant (default: the token's).
    #[arg(long)]
    tenant: Option<String>,
    #[command(flatten)]
    api: ApiArgs,
}

/// Moves the app back.
pub fn rollback(args: &RollbackArgs) -> Result<()> {
    let api = Api::new(&args.api)?;
    let tenant = api.tenant(&args.tenant)?;
    let body = match args.version {
        Some(v) => json!({"version": v}),
        None => json!({}),
    };
    let d = api.post(
        &format!("/v1/tenants/{tenant}/apps/{}/rollback", args.app),
        &body,
    )?;
    api.print(&d, || format!("{} now serves {}", args.app, d["versions"]));
    Ok(())
}

/// `edge tenants`.
#[derive(clap::Subcommand)]
pub enum TenantsCommand {
    /// Create a tenant with its hosts (operators).
    Create {
        /// Its name.
        name: String,
        /// A host it serves (`example.com`, `*.example.com`); repeat for more.
        #[arg(long = "host", required = true)]
        hosts: Vec<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List tenants.
    List {
        #[command(flatten)]
        api: ApiArgs,
    },
}

/// Runs a `tenants` command.
pub fn tenants(cmd: &TenantsCommand) -> Result<()> {
    match cmd {
        TenantsCommand::Create { name, hosts, api } => {
            let api = Api::new(api)?;
            let t = api.post("/v1/tenants", &json!({"name": name, "hosts": hosts}))?;
            api.print(&t, || {
                format!("created tenant {name} serving {}", hosts.join(", "))
            });
        }
        TenantsCommand::List { api } => {
            let api = Api::new(api)?;
            let list = api.get("/v1/tenants")?;
            api.print(&list, || {
                list.as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| format!("{:<24} {}", t["name"].as_str().unwrap_or("?"), t["hosts"]))
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
    }
    Ok(())
}

/// `edge tokens`.
#[derive(clap::Subcommand)]
pub enum TokensCommand {
    /// Create an API token; it is printed once.
    Create {
        /// A name for people (who or what uses it).
        #[arg(long)]
        name: String,
        /// For this tenant (default: the caller's own, or an operator's
        /// token for an operator caller).
        #[arg(long)]
        tenant: Option<String>,
        /// Seconds until it stops working (default: until revoked).
        #[arg(long)]
        expires_in_s: Option<u64>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List tokens (never their secrets).
    List {
        /// Of this tenant (default: the caller's own, or the operators').
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Revoke a token by id.
    Revoke {
        /// The token's id (`k...`).
        id: String,
        /// Its tenant (default: the caller's own, or the operators').
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
}

/// The tokens path of `tenant`, or of the caller's tenant, or the
/// operators'.
fn tokens_path(api: &Api, tenant: &Option<String>) -> Result<String> {
    let tenant = match tenant {
        Some(t) => Some(t.clone()),
        None => api.get("/v1/whoami")?["tenant"].as_str().map(Into::into),
    };
    Ok(match tenant {
        Some(t) => format!("/v1/tenants/{t}/tokens"),
        None => "/v1/tokens".into(),
    })
}

/// Runs a `tokens` command.
pub fn tokens(cmd: &TokensCommand) -> Result<()> {
    match cmd {
        TokensCommand::Create {
            name,
            tenant,
            expires_in_s,
            api,
        } => {
            let api = Api::new(api)?;
            let path = tokens_path(&api, tenant)?;
            let mut body = json!({"name": name});
            if let Some(s) = expires_in_s {
                body["expires_in_s"] = json!(s);
            }
            let t = api.post(&path, &body)?;
            api.print(&t, || {
                format!(
                    "{}\n(token {} — shown once; store it now)",
                    t["token"].as_str().unwrap_or("?"),
                    t["id"].as_str().unwrap_or("?")
                )
            });
        }
        TokensCommand::List { tenant, api } => {
            let api = Api::new(api)?;
            let list = api.get(&tokens_path(&api, tenant)?)?;
            api.print(&list, || {
                list.as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| {
                        let state = if !t["revoked_at"].is_null() {
                            "revoked"
                        } else {
                            "live"
                        };
                        format!(
                            "{} {:<8} {}",
                            t["id"].as_str().unwrap_or("?"),
                            state,
                            t["name"].as_str().unwrap_or("")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        TokensCommand::Revoke { id, tenant, api } => {
            let api = Api::new(api)?;
            let path = format!("{}/{id}", tokens_path(&api, tenant)?);
            api.delete(&path)?;
            api.print(&Value::Null, || format!("revoked {id}"));
        }
    }
    Ok(())
}
