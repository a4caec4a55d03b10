//! `edge udf install`: puts `libedge_udf.so` where MariaDB loads plugins
//! from and creates its functions.

use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::process::Command;

/// The library's file name in `@@plugin_dir`.
const LIBRARY: &str = "libedge_udf.so";

/// The functions and their SQL return types.
const FUNCTIONS: [(&str, &str); 6] = [
    ("sys_exec", "INTEGER"),
    ("sys_eval", "STRING"),
    ("sys_exec_fast", "INTEGER"),
    ("sys_eval_fast", "STRING"),
    ("edge_sign_row", "STRING"),
    ("edge_verify_row", "INTEGER"),
];

/// Where the server is and how to log in.
#[derive(clap::Args)]
pub struct InstallArgs {
    /// The server's Unix socket.
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Host (instead of a socket).
    #[arg(long)]
    host: Option<String>,
    /// Port with --host.
    #[arg(long)]
    port: Option<u16>,
    /// User with the privileges to create functions.
    #[arg(long, default_value = "root")]
    user: String,
    /// The library to install (default: libedge_udf.so beside this binary).
    #[arg(long)]
    library: Option<PathBuf>,
    /// The client program.
    #[arg(long, default_value = "mariadb")]
    client: String,
}

impl InstallArgs {
    fn sql(&self, statements: &str) -> Result<String> {
        let mut cmd = Command::new(&self.client);
        cmd.args(["--batch", "--skip-column-names", "--user", &self.user]);
        if let Some(s) = &self.socket {
            cmd.arg(format!("--socket={}", s.display()));
        }
        if let Some(h) = &self.host {
            cmd.arg(format!("--host={h}"));
        }
        if let Some(p) = self.port {
            cmd.arg(format!("--port={p}"));
        }
        let out = cmd
            .arg("--execute")
            .arg(statements)
            .output()
            .with_context(|| format!("running {}", self.client))?;
        if !out.status.success() {
            bail!(
                "{} failed: {}",
                self.client,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Copies the library and (re)creates the functions.
pub fn install(args: &InstallArgs) -> Result<()> {
    let library = match &args.library {
        Some(l) => l.clone(),
        None => std::env::current_exe()
            .context("locating the edge binary")?
            .with_file_name(LIBRARY),
    };
    if !library.exists() {
        bail!(
            "{} does not exist (build it with `cargo build --release -p edge-udf`, or pass --library)",
            library.display()
        );
    }
    let plugin_dir = PathBuf::from(args.sql("SELECT @@plugin_dir")?.trim());
    if plugin_dir.as_os_str().is_empty() {
        bail!("the server reported no @@plugin_dir");
    }
    // A new file renamed into place: a server that has the old library
    // mapped keeps its inode and does not crash.
    let target = plugin_dir.join(LIBRARY);
    let staging = plugin_dir.join(format!(".{LIBRARY}.{}", std::process::id()));
    std::fs::copy(&library, &staging)
        .with_context(|| format!("copying {} to {}", library.display(), staging.display()))?;
    std::fs::rename(&staging, &target)
        .with_context(|| format!("renaming {} to {}", staging.display(), target.display()))?;
    let mut sql = String::new();
    for (name, returns) in FUNCTIONS {
        sql.push_str(&format!(
            "DROP FUNCTION IF EXISTS {name}; CREATE FUNCTION {name} RETURNS {returns} SONAME '{LIBRARY}'; "
        ));
    }
    args.sql(&sql)?;
    println!(
        "installed {} and created {}",
        target.display(),
        FUNCTIONS.map(|(n, _)| n).join(", ")
    );
    Ok(())
}
