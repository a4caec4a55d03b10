//! `edge-sidecar --config edge-config/default.toml`: serves the `[sidecar]`
//! section of an edge-config file on its Unix socket.

use anyhow::{Context, Result, anyhow};
use clap::Parser;
use std::path::PathBuf;

/// Runs allowlisted programs for edge's components.
#[derive(Parser)]
#[command(name = "edge-sidecar", version)]
struct Cli {
    /// The edge-config file; its `[sidecar]` section is used.
    #[arg(
        long,
        short,
        env = "EDGE_CONFIG",
        default_value = "edge-config/default.toml"
    )]
    config: PathBuf,
    /// Overrides `server.data_dir` (where the socket lives by default).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let sidecar = edge_sidecar::Sidecar::load(&cli.config, cli.data_dir.as_deref())
        .map_err(|e| anyhow!(e))
        .with_context(|| format!("loading {}", cli.config.display()))?;
    let socket = sidecar.socket().to_path_buf();
    let listener = sidecar
        .bind()
        .with_context(|| format!("binding {}", socket.display()))?;
    println!("edge-sidecar listening on {}", socket.display());
    sidecar.serve(listener)?;
    Ok(())
}
