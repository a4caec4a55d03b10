//! `edge up`: serve a Spin manifest as it is, the way `spin up` does.
//!
//! The point of presence around the app (one tenant answering every host,
//! every component granted, a state directory beside the manifest) is an
//! edge-config written by this command into the state directory; from
//! there it is `edge serve`, reloads included.

use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// `edge up` flags, named as `spin up` names them.
#[derive(clap::Args)]
pub struct UpArgs {
    /// The application: a `spin.toml` or the directory holding one.
    #[arg(short = 'f', long = "from", default_value = "spin.toml")]
    pub from: PathBuf,
    /// Where to listen for HTTP (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:3000")]
    pub listen: SocketAddr,
    /// Where the app's embedded stores and the compile cache live
    /// (default: `.spin` beside the manifest, as Spin's).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Spin's runtime configuration file (`[key_value_store.NAME]`,
    /// `[sqlite_database.NAME]`, `[variables_provider]`).
    #[arg(long)]
    pub runtime_config_file: Option<PathBuf>,
    /// A value for one of the app's variables, `NAME=VALUE` (repeatable);
    /// otherwise the environment's `SPIN_VARIABLE_NAME` gives it, as on Spin.
    #[arg(long = "variable", value_name = "NAME=VALUE")]
    pub variables: Vec<String>,
}

/// The app's `[variables]`: each name and whether it is a secret.
fn declared_variables(manifest: &Path) -> Result<Vec<(String, bool)>> {
    let text = std::fs::read_to_string(manifest)
        .with_context(|| format!("reading {}", manifest.display()))?;
    // The full check is edge-config's, when the app loads; here only the
    // names matter.
    let doc: toml::Table = text.parse().unwrap_or_default();
    Ok(doc
        .get("variables")
        .and_then(toml::Value::as_table)
        .map(|vars| {
            vars.iter()
                .map(|(name, v)| {
                    let secret = v.get("secret").and_then(toml::Value::as_bool) == Some(true);
                    (name.clone(), secret)
                })
                .collect()
        })
        .unwrap_or_default())
}

/// The environment variable Spin reads a variable from.
fn env_name(variable: &str) -> String {
    format!("SPIN_VARIABLE_{}", variable.to_ascii_uppercase())
}

/// `[tenant.variables]` and `[tenant.secrets]` for the variables given
/// by `--variable` or the environment. Secrets stay in the environment:
/// the written config names them, it never holds them.
fn variable_sections(manifest: &Path, given: &[String]) -> Result<String> {
    let declared = declared_variables(manifest)?;
    for pair in given {
        let Some((name, value)) = pair.split_once('=') else {
            anyhow::bail!("--variable {pair:?}: expected NAME=VALUE");
        };
        if !declared.iter().any(|(n, _)| n == name) {
            anyhow::bail!(
                "--variable {name:?}: the app declares no such variable (it declares: {})",
                declared
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        // SAFETY: set before any thread of this process starts.
        unsafe { std::env::set_var(env_name(name), value) };
    }
    let (mut plain, mut secrets) = (String::new(), String::new());
    for (name, secret) in declared {
        let env = env_name(&name);
        let Ok(value) = std::env::var(&env) else {
            continue;
        };
        if secret {
            secrets.push_str(&format!("{name} = {{ env = {} }}\n", toml_string(&env)));
        } else {
            plain.push_str(&format!("{name} = {}\n", toml_string(&value)));
        }
    }
    let mut out = String::new();
    if !plain.is_empty() {
        out.push_str(&format!("\n[tenant.variables]\n{plain}"));
    }
    if !secrets.is_empty() {
        out.push_str(&format!("\n[tenant.secrets]\n{secrets}"));
    }
    Ok(out)
}

/// The manifest named by `--from`.
fn manifest_path(from: &Path) -> Result<PathBuf> {
    let path = if from.is_dir() {
        from.join("spin.toml")
    } else {
        from.to_path_buf()
    };
    std::fs::canonicalize(&path).with_context(|| format!("no Spin manifest at {}", path.display()))
}

/// Writes the edge-config that serves `args`' app and returns its path
/// and the state directory.
pub fn prepare(args: &UpArgs) -> Result<(PathBuf, PathBuf)> {
    let manifest = manifest_path(&args.from)?;
    let app_dir = manifest.parent().unwrap_or(Path::new("/"));
    let state = match &args.state_dir {
        Some(s) => s.clone(),
        None => app_dir.join(".spin"),
    };
    std::fs::create_dir_all(&state)
        .with_context(|| format!("creating the state directory {}", state.display()))?;
    let state = std::fs::canonicalize(&state)?;
    let mut config = format!(
        "# Written by `edge up`; rewritten at each start.\n\
         app = {app}\n\n\
         [server]\n\
         listen = {listen}\n\
         # /health and /metrics, on a port of their own (printed at start).\n\
         admin_listen = \"127.0.0.1:0\"\n\
         data_dir = {data}\n\n\
         # As on `spin up`, the manifest's allowed_outbound_hosts alone\n\
         # decides where the app may connect, loopback and private\n\
         # networks included.\n\
         [outbound]\n\
         allow_ranges = [\"0.0.0.0/0\", \"::/0\"]\n\n\
         [[tenant]]\n\
         name = \"default\"\n\
         hosts = [\"*\"]\n\
         components = [\"*\"]\n",
        app = toml_string(&manifest.display().to_string()),
        listen = toml_string(&args.listen.to_string()),
        data = toml_string(&state.display().to_string()),
    );
    if let Some(rc) = &args.runtime_config_file {
        let rc = std::fs::canonicalize(rc)
            .with_context(|| format!("no runtime config file at {}", rc.display()))?;
        // A top-level key: before the first table.
        config = config.replacen(
            "\n\n[server]",
            &format!(
                "\nruntime_config = {}\n\n[server]",
                toml_string(&rc.display().to_string())
            ),
            1,
        );
    }
    config.push_str(&variable_sections(&manifest, &args.variables)?);
    let path = state.join("edge-up.toml");
    std::fs::write(&path, config).with_context(|| format!("writing {}", path.display()))?;
    Ok((path, state))
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}
