//! `edge`: the command-line entry point.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use edge::app::{App, ComponentStatus, Runtime};
use edge::reload::Overrides;
use edge::server::Shared;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

mod api_cli;
mod deploy_cli;
mod hints_cli;
mod rules_cli;
mod udf_cli;
mod up_cli;

// glibc malloc took ~13% of a loaded echo server's CPU (arena locks,
// consolidation); mimalloc's per-thread heaps suit many short-lived stores.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::sync::atomic::Ordering::Relaxed;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::watch;

/// A WebAssembly edge-function host: serves wasi:http components from a
/// Spin manifest under the tenants and limits of an edge-config file.
#[derive(Parser)]
#[command(name = "edge", version)]
struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the application named by an edge-config file.
    ///
    /// Prints `edge listening on http://ADDR (admin http://ADDR)` on stdout
    /// once both listeners are bound. SIGHUP or a change to any config or
    /// component file reloads; SIGTERM or SIGINT drains and exits.
    Serve {
        /// The edge-config file (it names the Spin manifest with `app`).
        #[arg(
            long,
            short,
            env = "EDGE_CONFIG",
            default_value = "edge-config/default.toml"
        )]
        config: PathBuf,
        /// Listen address for application traffic (overrides `server.listen`;
        /// port 0 picks a free port).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Listen address for /health and /metrics (overrides `server.admin_listen`).
        #[arg(long)]
        admin_listen: Option<SocketAddr>,
        /// Directory for the compile cache and embedded stores (overrides `server.data_dir`).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Serve a Spin app from its manifest, as `spin up` does: one tenant
    /// answering every host, the state beside the manifest.
    Up(up_cli::UpArgs),
    /// Validate a config and load every component, then exit: 0 when all is
    /// well, 1 when a component fails, 2 when the config is invalid.
    Check {
        /// The edge-config file.
        #[arg(
            long,
            short,
            env = "EDGE_CONFIG",
            default_value = "edge-config/default.toml"
        )]
        config: PathBuf,
        /// Directory for the compile cache (overrides `server.data_dir`).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Compile a component for the engine it needs and write the artifact
    /// into a compile cache, printing its path (the control plane's bounded
    /// compile worker runs this).
    #[command(hide = true)]
    Compile {
        /// The component.
        input: PathBuf,
        /// The compile cache directory (`DATA_DIR/cache`).
        cache_dir: PathBuf,
    },
    /// Deploy a Spin app (spin.toml and its components) or one component
    /// to the control plane: upload, create a version, serve it.
    Deploy(deploy_cli::DeployArgs),
    /// List an app's versions.
    Versions(deploy_cli::VersionsArgs),
    /// Serve an earlier version of an app again.
    Rollback(deploy_cli::RollbackArgs),
    /// Tenants of the control plane.
    #[command(subcommand)]
    Tenants(deploy_cli::TenantsCommand),
    /// API tokens of the control plane.
    #[command(subcommand)]
    Tokens(deploy_cli::TokensCommand),
    /// Users who log in to the web console.
    #[command(subcommand)]
    Users(deploy_cli::UsersCommand),
    /// Rewrite rules: try them on a file, import them from nginx.
    #[command(subcommand)]
    Rules(RulesCommand),
    /// MariaDB user-defined functions (`libedge_udf.so`).
    #[command(subcommand)]
    Udf(UdfCommand),
    /// The hint engine's indexes: build them, try queries.
    #[command(subcommand)]
    Hints(HintsCommand),
}

#[derive(Subcommand)]
enum HintsCommand {
    /// Build `address.idx` and/or `names.idx` from JSON Lines records.
    Build(hints_cli::BuildArgs),
    /// Print the suggestions an index gives for a query.
    Query(hints_cli::QueryArgs),
}

#[derive(Subcommand)]
enum UdfCommand {
    /// Copy the UDF library into the server's `@@plugin_dir` and (re)create
    /// its functions: edge_sign_row, edge_verify_row, sys_exec_fast,
    /// sys_eval_fast, and sys_exec, sys_eval with `--with-shell`. MariaDB
    /// has no privilege for calling a UDF (any account that can query can
    /// call them): `--no-process` leaves the process functions out,
    /// `--no-signing` the signing ones; both kinds together need
    /// `--process-can-read-keys` (programs can read the signing keys).
    /// Talks to the server with the `mariadb` command-line client.
    Install(udf_cli::InstallArgs),
}

#[derive(Subcommand)]
enum RulesCommand {
    /// Rewrite stdin to stdout with a rules file (nginx `*.conf` with
    /// `subs_filter`/`replace_filter`, or TOML `[[rule]]` entries); prints
    /// counts and throughput on stderr. Exit 2 if the rules are invalid.
    Test {
        /// The rules file.
        #[arg(long)]
        rules: PathBuf,
    },
    /// Print an nginx config's `subs_filter`/`replace_filter` rules as TOML
    /// `[[rule]]` entries, after checking they compile.
    Import {
        /// The nginx config.
        file: PathBuf,
    },
}

fn main() {
    // Before anything opens a database: SQLite's memory counted per
    // tenant connection (its allocator is set once, before first use).
    edge_sqlite::count_memory();
    edge::panics::count_panics();
    no_transparent_huge_pages();
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let code = match cli.command {
        Command::Udf(UdfCommand::Install(args)) => match udf_cli::install(&args) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("edge: {e:#}");
                1
            }
        },
        Command::Deploy(args) => api_result(deploy_cli::deploy(&args)),
        Command::Versions(args) => api_result(deploy_cli::versions(&args)),
        Command::Rollback(args) => api_result(deploy_cli::rollback(&args)),
        Command::Tenants(cmd) => api_result(deploy_cli::tenants(&cmd)),
        Command::Tokens(cmd) => api_result(deploy_cli::tokens(&cmd)),
        Command::Users(cmd) => api_result(deploy_cli::users(&cmd)),
        Command::Compile { input, cache_dir } => {
            match edge::engine::compile_into_cache(&input, &cache_dir) {
                Ok(artifact) => {
                    println!("{}", artifact.display());
                    0
                }
                Err(e) => {
                    eprintln!("edge: {e:#}");
                    1
                }
            }
        }
        Command::Hints(cmd) => {
            let result = match cmd {
                HintsCommand::Build(args) => hints_cli::build(&args),
                HintsCommand::Query(args) => hints_cli::query(&args),
            };
            match result {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("edge: {e:#}");
                    2
                }
            }
        }
        Command::Rules(cmd) => {
            let result = match cmd {
                RulesCommand::Test { rules } => rules_cli::test(&rules),
                RulesCommand::Import { file } => rules_cli::import(&file),
            };
            match result {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("edge: {e:#}");
                    2
                }
            }
        }
        Command::Serve {
            config,
            listen,
            admin_listen,
            data_dir,
        } => {
            let overrides = Overrides {
                listen,
                admin_listen,
                data_dir,
            };
            match serve(config, overrides) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("edge: {e:#}");
                    if e.downcast_ref::<edge_config::ConfigError>().is_some() {
                        2
                    } else {
                        1
                    }
                }
            }
        }
        Command::Up(args) => match up_cli::prepare(&args)
            .and_then(|(config, _)| serve(config, Overrides::default()))
        {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("edge: {e:#}");
                if e.downcast_ref::<edge_config::ConfigError>().is_some() {
                    2
                } else {
                    1
                }
            }
        },
        Command::Check { config, data_dir } => check(
            config,
            Overrides {
                data_dir,
                ..Default::default()
            },
        ),
    };
    std::process::exit(code);
}

/// Exit status of a control-API command: 0, or 1 with the error printed.
fn api_result(result: Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("edge: {e:#}");
            1
        }
    }
}

/// Turns transparent huge pages off for this process (as mimalloc's
/// `allow_thp=0` would, but that option is read before `main`). mimalloc
/// asks for huge pages on its arenas, and a 2 MiB page stays resident
/// while any of it is in use: under a soak the heap was 80 of 127 MiB in
/// huge pages, RSS 45 MiB higher than without them at the same
/// throughput, and it only grew in 2 MiB steps. Linear memories, stacks
/// and code never ask for huge pages, so with the kernel's THP set to
/// `madvise` (Debian's default) nothing else changes; with `always` they
/// lose them too. Processes the host starts (the compile worker, `node`)
/// inherit the setting. `MIMALLOC_ALLOW_THP=1` keeps them (mimalloc's own
/// switch, for comparing).
fn no_transparent_huge_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some_and(|v| v == "1") {
        return;
    }
    // SAFETY: prctl with integer arguments touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if rc != 0 {
        // Before logging starts: said on stderr once, then ignored (the
        // host serves either way, with a larger heap).
        eprintln!(
            "edge: could not turn transparent huge pages off: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("EDGE_LOG")
        .unwrap_or_else(|_| "info,wasmtime=warn,cranelift=warn".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn check(path: PathBuf, overrides: Overrides) -> i32 {
    let config = match overrides.load(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("edge: {e}");
            return 2;
        }
    };
    let result = Runtime::for_check(&config).and_then(|rt| App::build(&rt, config));
    match result {
        Ok(app) => {
            let mut failed = false;
            for (id, status) in &app.status {
                match status {
                    ComponentStatus::Ready => println!("ok      {id}"),
                    ComponentStatus::Failed(why) => {
                        failed = true;
                        println!("FAILED  {id}: {why}");
                    }
                }
            }
            i32::from(failed)
        }
        Err(e) => {
            eprintln!("edge: {e:#}");
            1
        }
    }
}

fn serve(path: PathBuf, overrides: Overrides) -> Result<()> {
    let loaded_at = std::time::SystemTime::now();
    // Guests may hold half the process's descriptors (edge_open_files):
    // as many as the system allows.
    match edge_open_files::raise_limit() {
        Ok(n) => tracing::info!(
            descriptors = n,
            for_guests = edge_open_files::host_max(),
            "descriptor limit"
        ),
        Err(e) => tracing::warn!(error = %e, "could not raise the descriptor limit"),
    }
    let config = overrides.load(&path)?;
    // Application traffic runs on its own threads (`server::spawn_workers`);
    // this runtime carries the control plane: admin, signals, reloads.
    let workers = edge::server::worker_count(&config.server);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .thread_name("edge-control")
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let runtime = Runtime::new(&config)?;
        let listen = config.server.listen;
        let admin_listen = config.server.admin_listen;
        let app = App::build(&runtime, config)?;
        edge::reload::write_generated_secrets(&app.config)?;
        app.commit(&runtime, None);
        for id in app.failed_components() {
            tracing::error!(
                component = id,
                "started without this component; see /health"
            );
        }
        let listeners = edge::server::bind_listeners(listen, workers)
            .with_context(|| format!("binding {listen}"))?;
        let admin = match admin_listen {
            Some(a) => Some(
                tokio::net::TcpListener::bind(a)
                    .await
                    .with_context(|| format!("binding admin {a}"))?,
            ),
            None => None,
        };
        let shared = Arc::new(Shared::new(runtime, app));
        shared.runtime.services.attach(&shared);
        let (stop_tx, stop_rx) = watch::channel(false);
        let control = shared.app.load().files.control.clone();
        // Handlers go in before the "listening" line: until then SIGHUP
        // would end the process and SIGTERM would skip the drain.
        let hup = signal(SignalKind::hangup())
            .map_err(|e| tracing::warn!(error = %e, "cannot listen for SIGHUP"))
            .ok();
        let term = signal(SignalKind::terminate())
            .map_err(|e| tracing::warn!(error = %e, "cannot listen for SIGTERM"))
            .ok();

        let app_addr = listeners[0].local_addr()?;
        let _ = shared.listen_addr.set(app_addr);
        let admin_addr = admin.as_ref().map(|a| a.local_addr()).transpose()?;
        // Guests may not call the host's own listeners (their ports may
        // have been ephemeral: only now are they known).
        shared
            .runtime
            .outbound
            .listeners
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .set(vec![app_addr], admin_addr.into_iter().collect());
        let control_addr = match control {
            Some(c) => Some(edge::control::start(shared.clone(), &c, stop_rx.clone()).await?),
            None => None,
        };
        let mut line = format!("edge listening on http://{app_addr}");
        if let Some(a) = admin_addr {
            line.push_str(&format!(" (admin http://{a})"));
        }
        if let Some(c) = control_addr {
            line.push_str(&format!(" (control http://{c})"));
        }
        println!("{line}");
        let _ = std::io::stdout().flush();
        tracing::info!(%app_addr, admin = ?admin_addr, "serving");

        let admin_task =
            admin.map(|a| tokio::spawn(edge::admin::serve(shared.clone(), a, stop_rx.clone())));
        tokio::spawn(edge::reload::watch(
            shared.clone(),
            path,
            overrides,
            loaded_at,
            hup,
        ));
        let workers = edge::server::spawn_workers(shared.clone(), listeners, stop_rx)?;

        tokio::select! {
            _ = wait_for_shutdown(term) => {}
            _ = shared.stop.notified() => {}
        }
        shared.draining.store(true, Relaxed);
        let _ = stop_tx.send(true);
        tokio::task::spawn_blocking(move || {
            for w in workers {
                w.join()
                    .map_err(|_| anyhow::anyhow!("a worker thread panicked"))??;
            }
            Ok::<_, anyhow::Error>(())
        })
        .await??;
        if let Some(t) = admin_task {
            t.abort();
        }
        tracing::info!("stopped");
        match shared
            .fatal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            Some(why) => Err(anyhow::anyhow!(why)),
            None => Ok(()),
        }
    })
}

async fn wait_for_shutdown(mut term: Option<Signal>) {
    let int = tokio::signal::ctrl_c();
    tokio::select! {
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {},
        _ = int => {},
    }
    tracing::info!("shutdown signal received");
}
