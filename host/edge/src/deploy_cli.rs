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
    /// A Spin manifest (its components and routes), one component
    /// (`.wasm`, with `--route`), or a Cloudflare Worker: its module
    /// (`.js`, `.mjs`), its `wrangler.toml`, or a directory holding one
    /// (built here with `workers/`, which needs Node.js).
    #[arg(default_value = "spin.toml")]
    path: PathBuf,
    /// The `workers/` directory of edge's source (its `build.mjs`), for
    /// deploying a Worker; default: found above the working directory or
    /// the `edge` binary.
    #[arg(long, env = "EDGE_WORKERS_DIR")]
    workers_dir: Option<PathBuf>,
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
    /// Set an app variable (`NAME=VALUE`): what `{{ NAME }}` in the
    /// components' variables becomes, over the manifest's default.
    #[arg(long = "var", value_parser = parse_var)]
    vars: Vec<(String, String)>,
    /// Set an app variable whose value is secret (never shown by the API).
    #[arg(long = "secret", value_parser = parse_var)]
    secrets: Vec<(String, String)>,
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

/// A gzipped tar of the manifest and the files it names, as the API
/// takes a Spin app.
fn spin_archive(manifest: &Path) -> Result<(String, Vec<u8>)> {
    let text = std::fs::read_to_string(manifest)
        .with_context(|| format!("reading {}", manifest.display()))?;
    let app = edge_control::spin_app::parse(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", manifest.display()))?;
    let dir = manifest.parent().unwrap_or(Path::new("."));
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let mut header = tar::Header::new_gnu();
    header.set_size(text.len() as u64);
    header.set_mode(0o644);
    tar.append_data(&mut header, "spin.toml", text.as_bytes())?;
    let mut added = Vec::new();
    for (id, source) in &app.sources {
        let Some(path) = edge_control::spin_app::normal_path(source) else {
            bail!(
                "{}: component.{id}.source {source:?} leaves the app's directory",
                manifest.display()
            );
        };
        if added.contains(&path) {
            continue;
        }
        let file = dir.join(&path);
        let bytes = std::fs::read(&file)
            .with_context(|| format!("component {id:?}: reading its source {}", file.display()))?;
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        tar.append_data(&mut header, &path, bytes.as_slice())?;
        added.push(path);
    }
    // Each component's `files`, resolved as the API resolves them (which
    // it does again against the archive): excluded files stay here.
    for (id, decl) in &app.files {
        let found = app_files(dir, decl)
            .with_context(|| format!("{}: component.{id}.files", manifest.display()))?;
        let resolved =
            edge_control::spin_app::resolve_files(decl, found.iter().map(String::as_str))
                .map_err(|e| anyhow::anyhow!("{}: component.{id}.{e}", manifest.display()))?;
        for f in resolved {
            if added.contains(&f.source) {
                continue;
            }
            let file = dir.join(&f.source);
            let bytes = std::fs::read(&file).with_context(|| {
                format!("component {id:?}: reading its file {}", file.display())
            })?;
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            tar.append_data(&mut header, &f.source, bytes.as_slice())?;
            added.push(f.source);
        }
    }
    let gz = tar.into_inner()?;
    Ok((app.name, gz.finish()?))
}

/// The app's files (normal paths relative to `dir`) that `decl`'s entries
/// may name: what each glob finds, every file under each `source`. A file
/// (or a link) whose real path is outside the app's directory is refused.
fn app_files(dir: &Path, decl: &edge_control::spin_app::FilesDecl) -> Result<Vec<String>> {
    use edge_control::spin_app::FileEntry;
    let root = dir
        .canonicalize()
        .with_context(|| format!("the app's directory {}", dir.display()))?;
    let mut out = std::collections::BTreeSet::new();
    for entry in &decl.entries {
        let pattern = match entry {
            FileEntry::Glob(g) => g.clone(),
            FileEntry::Dir { source, .. } if source.is_empty() => "**/*".into(),
            FileEntry::Dir { source, .. } => {
                if root.join(source).is_file() {
                    let escaped = glob::Pattern::escape(source);
                    out.extend(found(&root, &escaped)?);
                    continue;
                }
                format!("{}/**/*", glob::Pattern::escape(source))
            }
        };
        out.extend(found(&root, &pattern)?);
    }
    Ok(out.into_iter().collect())
}

/// The files under `root` matching `pattern`, as relative paths.
fn found(root: &Path, pattern: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let full = root.join(pattern);
    for path in glob::glob(&full.to_string_lossy()).with_context(|| format!("{pattern:?}"))? {
        let path = path?;
        if !path.is_file() {
            continue;
        }
        let real = path
            .canonicalize()
            .with_context(|| format!("{}", path.display()))?;
        if !real.starts_with(root) {
            bail!("{} is outside the app's directory", path.display());
        }
        let Some(relative) = path
            .strip_prefix(root)
            .ok()
            .and_then(|r| r.to_str())
            .and_then(edge_control::spin_app::normal_path)
        else {
            bail!(
                "{} is not a path edge can send (UTF-8, inside the app)",
                path.display()
            );
        };
        out.push(relative);
    }
    Ok(out)
}

/// What `edge deploy PATH` deploys.
enum Deployable {
    /// A Spin manifest.
    SpinApp,
    /// One component.
    Component,
    /// A Worker: `build.mjs`'s arguments (`--config FILE` or the module).
    Worker(Vec<std::ffi::OsString>),
}

fn deployable(path: &Path) -> Deployable {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let is_wrangler = |p: &Path| p.file_name().is_some_and(|n| n == "wrangler.toml");
    if ext == "wasm" {
        Deployable::Component
    } else if matches!(ext, "js" | "mjs" | "ts") {
        Deployable::Worker(vec![path.as_os_str().to_owned()])
    } else if is_wrangler(path) {
        Deployable::Worker(vec!["--config".into(), path.as_os_str().to_owned()])
    } else if path.is_dir() && path.join("wrangler.toml").exists() {
        Deployable::Worker(vec![
            "--config".into(),
            path.join("wrangler.toml").into_os_string(),
        ])
    } else {
        Deployable::SpinApp
    }
}

/// Where `workers/build.mjs` is: given, or in a `workers/` directory above
/// the working directory or the `edge` binary.
fn workers_dir(given: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = given {
        if dir.join("build.mjs").exists() {
            return Ok(dir.to_path_buf());
        }
        bail!(
            "{} has no build.mjs: --workers-dir (EDGE_WORKERS_DIR) names edge's workers/ directory",
            dir.display()
        );
    }
    match edge::worker::find_above("workers/build.mjs") {
        Some(build) => Ok(build.parent().expect("a file's directory").to_path_buf()),
        None => bail!(
            "cannot find edge's workers/ directory (with build.mjs) to build the Worker: give it with --workers-dir or EDGE_WORKERS_DIR"
        ),
    }
}

/// Builds a Worker into a component with `workers/build.mjs` (its errors,
/// such as the bundler's FILE:LINE:COL, go to stderr as they come).
fn build_worker(workers: &Path, build_args: &[std::ffi::OsString]) -> Result<Vec<u8>> {
    let out = tempfile_path("worker", "wasm");
    let status = std::process::Command::new("node")
        .arg(workers.join("build.mjs"))
        .args(build_args)
        .arg("--out")
        .arg(&out)
        .status()
        .context("running node (Node.js builds Workers): is it installed?")?;
    let bytes = std::fs::read(&out);
    let _ = std::fs::remove_file(&out);
    if !status.success() {
        bail!("the Worker did not build (see above); nothing was deployed");
    }
    bytes.context("reading the built Worker")
}

fn tempfile_path(stem: &str, ext: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "edge-{stem}-{}-{}.{ext}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ))
}

/// A Worker's name from its wrangler.toml or file, as an app and
/// component id (lower-case letters, digits, `-`).
fn worker_name(path: &Path) -> String {
    let wrangler = if path.is_dir() {
        path.join("wrangler.toml")
    } else {
        path.to_path_buf()
    };
    let from_config = std::fs::read_to_string(&wrangler)
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .and_then(|t| t.get("name").and_then(|n| n.as_str()).map(String::from));
    let raw = from_config.unwrap_or_else(|| {
        path.file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("worker")
            .to_string()
    });
    let id: String = raw
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let id = id.trim_matches('-').to_string();
    if id.is_empty() { "worker".into() } else { id }
}

/// The version of a Worker: its component, granted the stores of its KV
/// namespaces, outbound HTTP (a Worker's `fetch` reaches the internet;
/// edge's address policy still applies), and its secrets as required
/// secret app variables.
fn worker_version(
    name: &str,
    digest: &Value,
    declared: &edge::worker::Declaration,
    route: &str,
) -> Value {
    let variables: serde_json::Map<String, Value> = declared
        .secrets
        .iter()
        .map(|s| (s.clone(), json!(format!("{{{{ {s} }}}}"))))
        .collect();
    let declarations: serde_json::Map<String, Value> = declared
        .secrets
        .iter()
        .map(|s| (s.clone(), json!({"required": true, "secret": true})))
        .collect();
    json!({
        "components": {name: {
            "digest": digest,
            "key_value_stores": declared.kv_namespaces,
            "allowed_outbound_hosts": ["https://*:*", "http://*:*"],
            "variables": variables,
        }},
        "routes": [{"route": route, "component": name}],
        "variables": declarations,
    })
}

/// `edge deploy`: uploads, creates a version, deploys it.
pub fn deploy(args: &DeployArgs) -> Result<()> {
    let what = deployable(&args.path);
    // Build a Worker before touching the API: a Worker that does not
    // build changes nothing.
    let worker = match &what {
        Deployable::Worker(build_args) => {
            let dir = workers_dir(args.workers_dir.as_deref())?;
            let bytes = build_worker(&dir, build_args)?;
            let declared = edge::worker::Declaration::of(&bytes)?
                .context("the built Worker carries no edge:worker section")?;
            Some((bytes, declared))
        }
        _ => None,
    };
    let api = Api::new(&args.api)?;
    let tenant = api.tenant(&args.tenant)?;
    let base = format!("/v1/tenants/{tenant}");
    let single = matches!(what, Deployable::Component);
    // A single component (or a built Worker) is uploaded first; a Spin app
    // goes up whole with its version.
    let (app_name, version_body) = if let Some((bytes, declared)) = worker {
        let name = worker_name(&args.path);
        let artifact = api
            .upload(&format!("{base}/artifacts"), "application/wasm", bytes)
            .context("uploading the built Worker")?;
        let spec = worker_version(&name, &artifact["digest"], &declared, &args.route);
        (
            args.app.clone().unwrap_or(name),
            ("application/json", spec.to_string().into_bytes()),
        )
    } else if single {
        let stem = args
            .path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("app")
            .to_ascii_lowercase()
            .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "-");
        let bytes = std::fs::read(&args.path)
            .with_context(|| format!("reading {}", args.path.display()))?;
        let artifact = api
            .upload(&format!("{base}/artifacts"), "application/wasm", bytes)
            .with_context(|| format!("uploading {}", args.path.display()))?;
        let spec = json!({
            "components": {stem.clone(): {"digest": artifact["digest"]}},
            "routes": [{"route": args.route, "component": stem}],
        });
        (
            args.app.clone().unwrap_or(stem),
            ("application/json", spec.to_string().into_bytes()),
        )
    } else {
        let (name, archive) = spin_archive(&args.path)?;
        (
            args.app.clone().unwrap_or(name),
            ("application/gzip", archive),
        )
    };
    let app_path = format!("{base}/apps/{app_name}");
    if let Err(e) = api.get(&app_path) {
        if !e.to_string().contains("404") {
            return Err(e);
        }
        api.post(&format!("{base}/apps"), &json!({"name": app_name}))?;
    }
    // Set with the deployment, in force only if it is: a refused one
    // leaves the serving version's values as they were.
    let is_worker = matches!(what, Deployable::Worker(_));
    let mut variables = serde_json::Map::new();
    for (secret, (name, value)) in args
        .vars
        .iter()
        .map(|v| (false, v))
        .chain(args.secrets.iter().map(|v| (true, v)))
    {
        // A Worker's secret API_KEY is read from the variable api_key.
        let name = if is_worker {
            name.to_ascii_lowercase()
        } else {
            name.clone()
        };
        variables.insert(name, json!({"value": value, "secret": secret}));
    }
    let version = api
        .upload(
            &format!("{app_path}/versions"),
            version_body.0,
            version_body.1,
        )
        .with_context(|| format!("creating a version of {}", args.path.display()))?;
    let number = version["number"].as_i64().unwrap_or_default();
    // Imports the manifest does not grant: they load, their calls fail.
    for note in version["notes"].as_array().into_iter().flatten() {
        eprintln!("edge: note: {}", note.as_str().unwrap_or_default());
    }
    let mut versions = vec![json!({"version": number, "percent": args.percent})];
    let mut beside = None;
    if args.percent < 100 {
        let app = api.get(&app_path)?;
        let Some(stable) = stable_version(&app["deployment"]) else {
            bail!("app {app_name:?} serves nothing yet: the first deployment takes 100 percent");
        };
        versions.push(json!({"version": stable, "percent": 100 - args.percent}));
        beside = Some(stable);
    }
    let mut body = json!({"versions": versions});
    if !variables.is_empty() {
        body["variables"] = variables.into();
    }
    if let Some(path) = &args.smoke {
        body["smoke"] = json!({"path": path, "status": args.smoke_status});
    }
    let d = api.post(&format!("{app_path}/deployments"), &body)?;
    api.print(&d, || match beside {
        Some(stable) => format!(
            "deployed {app_name} version {number} ({} percent, version {stable} the rest) for tenant {tenant}",
            args.percent
        ),
        None => format!("deployed {app_name} version {number} for tenant {tenant}"),
    });
    Ok(())
}

/// The version a new one is rolled out beside: the one taking the most
/// traffic in `deployment` (the older on a tie). During a rollout that is
/// the version being replaced, not the canary: a second partial deploy
/// replaces the canary and keeps the stable version serving.
fn stable_version(deployment: &Value) -> Option<i64> {
    deployment["versions"]
        .as_array()?
        .iter()
        .filter_map(|w| Some((w["percent"].as_i64()?, w["version"].as_i64()?)))
        .max_by_key(|&(percent, version)| (percent, std::cmp::Reverse(version)))
        .map(|(_, version)| version)
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

/// `/v1/tenants/{tenant}/{kind}` for `tenant` or the caller's tenant, or
/// the operators' `/v1/{kind}`.
fn principals_path(api: &Api, tenant: &Option<String>, kind: &str) -> Result<String> {
    let tenant = match tenant {
        Some(t) => Some(t.clone()),
        None => api.get("/v1/whoami")?["tenant"].as_str().map(Into::into),
    };
    Ok(match tenant {
        Some(t) => format!("/v1/tenants/{t}/{kind}"),
        None => format!("/v1/{kind}"),
    })
}

/// Tokens or users as lines: id, `live` or `ended` (once revoked), and
/// the `label` field (a token's name, a user's login).
fn principal_lines(list: &Value, label: &str, ended: &str) -> String {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let state = if p["revoked_at"].is_null() {
                "live"
            } else {
                ended
            };
            format!(
                "{} {:<8} {}",
                p["id"].as_str().unwrap_or("?"),
                state,
                p[label].as_str().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `edge users`: who logs in to the web console.
#[derive(clap::Subcommand)]
pub enum UsersCommand {
    /// Add a console user. The password is the first line of standard
    /// input (`edge users create ops@example.com < password-file`), so it
    /// is never in the command line or the shell's history.
    Create {
        /// The login (an e-mail address, a name).
        login: String,
        /// A user of this tenant (default: the caller's own tenant, or an
        /// operator for an operator caller).
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List console users (never their passwords).
    List {
        /// Of this tenant (default: the caller's own, or the operators).
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
}

/// Runs a `users` command.
pub fn users(cmd: &UsersCommand) -> Result<()> {
    match cmd {
        UsersCommand::Create { login, tenant, api } => {
            use std::io::IsTerminal;
            if std::io::stdin().is_terminal() {
                eprint!("password for {login} (12 characters or more; shown as typed): ");
            }
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .context("reading the password from standard input")?;
            let password = line.trim_end_matches(['\n', '\r']);
            let api = Api::new(api)?;
            let path = principals_path(&api, tenant, "users")?;
            let u = api.post(&path, &json!({"login": login, "password": password}))?;
            api.print(&u, || {
                format!(
                    "user {} ({}) can log in to the console",
                    u["login"].as_str().unwrap_or("?"),
                    u["id"].as_str().unwrap_or("?")
                )
            });
        }
        UsersCommand::List { tenant, api } => {
            let api = Api::new(api)?;
            let list = api.get(&principals_path(&api, tenant, "users")?)?;
            api.print(&list, || principal_lines(&list, "login", "removed"));
        }
    }
    Ok(())
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
            let path = principals_path(&api, tenant, "tokens")?;
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
            let list = api.get(&principals_path(&api, tenant, "tokens")?)?;
            api.print(&list, || principal_lines(&list, "name", "revoked"));
        }
        TokensCommand::Revoke { id, tenant, api } => {
            let api = Api::new(api)?;
            let path = format!("{}/{id}", principals_path(&api, tenant, "tokens")?);
            api.delete(&path)?;
            api.print(&Value::Null, || format!("revoked {id}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollout_goes_beside_the_version_with_the_most_traffic() {
        let d = |v: Value| json!({ "versions": v });
        assert_eq!(
            stable_version(&d(json!([{"version": 1, "percent": 100}]))),
            Some(1)
        );
        // [canary, stable] as `edge deploy --percent` writes them.
        let rollout = json!([{"version": 2, "percent": 10}, {"version": 1, "percent": 90}]);
        assert_eq!(stable_version(&d(rollout)), Some(1));
        let even = json!([{"version": 3, "percent": 50}, {"version": 2, "percent": 50}]);
        assert_eq!(stable_version(&d(even)), Some(2));
        assert_eq!(stable_version(&json!(null)), None);
    }

    #[test]
    fn principals_list_one_per_line() {
        let list = json!([
            {"id": "kA", "name": "ci", "revoked_at": null},
            {"id": "kB", "name": "old", "revoked_at": 5},
        ]);
        assert_eq!(
            principal_lines(&list, "name", "revoked"),
            "kA live     ci\nkB revoked  old"
        );
        assert_eq!(principal_lines(&json!([]), "login", "removed"), "");
    }

    /// The archive's entry names.
    fn names(gz: &[u8]) -> Vec<String> {
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(gz));
        let mut out: Vec<String> = tar
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        out.sort();
        out
    }

    #[test]
    fn spin_archives_carry_the_files_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("edge-pack-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (f, text) in [
            ("app.wasm", "wasm"),
            ("static/index.html", "i"),
            ("static/sub/a.css", "a"),
            ("static/server.key", "secret"),
            ("assets/logo.svg", "svg"),
            ("private/notes.txt", "no"),
        ] {
            let p = dir.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let manifest = |files: &str| {
            let m = dir.join("spin.toml");
            std::fs::write(
                &m,
                format!(
                    "spin_manifest_version = 2\n[application]\nname = \"a\"\n[[trigger.http]]\nroute = \"/...\"\ncomponent = \"c\"\n[component.c]\nsource = \"app.wasm\"\n{files}\n"
                ),
            )
            .unwrap();
            m
        };
        let m = manifest(
            "files = [\"static/**/*\", { source = \"assets\", destination = \"/img\" }]\nexclude_files = [\"**/*.key\"]",
        );
        let (_, gz) = spin_archive(&m).unwrap();
        assert_eq!(
            names(&gz),
            [
                "app.wasm",
                "assets/logo.svg",
                "spin.toml",
                "static/index.html",
                "static/sub/a.css"
            ]
        );
        // A link out of the app's directory is refused, not followed.
        std::os::unix::fs::symlink("/etc/hostname", dir.join("static/host")).unwrap();
        let m = manifest("files = [\"static/*\"]");
        let e = format!("{:#}", spin_archive(&m).unwrap_err());
        assert!(e.contains("is outside the app's directory"), "{e}");
        // And so is a glob or a source that leaves it.
        let m = manifest("files = [\"../*\"]");
        let e = format!("{:#}", spin_archive(&m).unwrap_err());
        assert!(e.contains("component.c.files[0]"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
