//! `edge udf install`: puts `libedge_udf.so` where MariaDB loads plugins
//! from and creates its functions: the signing pair and the `_fast`
//! process pair, the shell pair only with `--with-shell`, no process
//! function with `--no-process`, no signing function with `--no-signing`.
//! MariaDB has no per-function privilege, so which functions exist is the
//! only control of who may run programs; the command says so.
//!
//! The process functions and the signing functions are not created
//! together unless `--process-can-read-keys` says so: programs run as the
//! server's user, which reads the signing key file, so whoever may call
//! `sys_eval_fast` may read the keys (`sys_eval_fast('cat',
//! '/etc/edge/udf-keys')`), and the signatures prove nothing against them.

use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::process::Command;

/// The library's file name in `@@plugin_dir`.
const LIBRARY: &str = "libedge_udf.so";

/// The functions and their SQL return types, by group.
const SIGNING: [(&str, &str); 2] = [("edge_sign_row", "STRING"), ("edge_verify_row", "INTEGER")];
/// Programs without a shell.
const PROCESS: [(&str, &str); 2] = [("sys_exec_fast", "INTEGER"), ("sys_eval_fast", "STRING")];
/// Shell command lines (lib_mysqludf_sys's pair).
const SHELL: [(&str, &str); 2] = [("sys_exec", "INTEGER"), ("sys_eval", "STRING")];

/// What every installer should know before the process functions exist.
const PRIVILEGE_NOTE: &str = "note: MariaDB has no privilege for calling a UDF: every account that \
can run a SELECT on this server can call these functions, and the process functions run programs \
as the server's user (one call at most EDGE_UDF_TIMEOUT_MS, default 5000 ms). To restrict who runs \
programs, set EDGE_UDF_PROCESS_USERS=user@host,... in the server's environment (the library then \
refuses every other account), and give others a SQL SECURITY DEFINER function whose definer is \
listed (it needs EXECUTE on that function; grant EXECUTE to who may call it). Or leave the process \
functions out: --no-process installs only the signing functions (and drops the process ones).";

/// Why the process functions are not created beside the signing ones
/// unless asked.
const KEYS_REFUSAL: &str = "refusing to create the process functions beside the signing functions: \
the programs they run run as the server's user, which reads the signing key file (EDGE_UDF_KEY_FILE, \
default /etc/edge/udf-keys), so every account that may call them could read the keys \
(SELECT sys_eval_fast('cat', '/etc/edge/udf-keys')) and sign what it likes. Choose one: \
--no-process (the signing functions only), --no-signing (the process functions only, on a server \
that keeps no signing keys), or --process-can-read-keys (both, if every account that may run \
programs, see EDGE_UDF_PROCESS_USERS, may also see the keys)";

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
    /// Also create the shell pair, `sys_exec(command)` and
    /// `sys_eval(command)` (lib_mysqludf_sys's): any account that can
    /// query the server can then run any shell command line as the
    /// server's user. Without it they are dropped if present.
    #[arg(long, conflicts_with = "no_process")]
    with_shell: bool,
    /// Create only the signing functions (`edge_sign_row`,
    /// `edge_verify_row`); the process functions are dropped if present.
    #[arg(long)]
    no_process: bool,
    /// Create only the process functions; the signing functions are
    /// dropped if present (for a server that keeps no signing keys).
    #[arg(long, conflicts_with = "no_process")]
    no_signing: bool,
    /// Create the process functions beside the signing functions, which
    /// is otherwise refused: the programs run as the server's user, which
    /// reads the signing key file, so every account that may run programs
    /// can read the keys. For a server where those accounts
    /// (`EDGE_UDF_PROCESS_USERS`) may see them.
    #[arg(long, conflicts_with_all = ["no_process", "no_signing"])]
    process_can_read_keys: bool,
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
    // Refused before anything is copied or created.
    if !args.no_process && !args.no_signing && !args.process_can_read_keys {
        bail!("{KEYS_REFUSAL}");
    }
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
    let mut create = Vec::new();
    let mut drop = Vec::new();
    if args.no_signing {
        drop.extend(SIGNING);
    } else {
        create.extend(SIGNING);
    }
    if args.no_process {
        drop.extend(PROCESS);
    } else {
        create.extend(PROCESS);
    }
    if args.with_shell {
        create.extend(SHELL);
    } else {
        drop.extend(SHELL);
    }
    let mut sql = String::new();
    for (name, _) in &drop {
        sql.push_str(&format!("DROP FUNCTION IF EXISTS {name}; "));
    }
    for (name, returns) in &create {
        sql.push_str(&format!(
            "DROP FUNCTION IF EXISTS {name}; CREATE FUNCTION {name} RETURNS {returns} SONAME '{LIBRARY}'; "
        ));
    }
    args.sql(&sql)?;
    let names = |list: &[(&str, &str)]| list.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
    println!(
        "installed {} and created {}",
        target.display(),
        names(&create)
    );
    if !drop.is_empty() {
        println!("not created (dropped if present): {}", names(&drop));
    }
    if !args.no_process {
        eprintln!("{PRIVILEGE_NOTE}");
    }
    Ok(())
}
