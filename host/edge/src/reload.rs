//! Reloading: SIGHUP or a changed file rebuilds the app beside the serving
//! one and swaps it in whole. In-flight requests keep the `Arc<App>` they
//! started with and finish on it. A config that does not load, or that would
//! break a component that works now, is refused and the old app serves on.

use crate::app::App;
use crate::server::Shared;
use anyhow::{Result, bail};
use edge_config::Config;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, SystemTime};
use tokio::signal::unix::Signal;

/// Command-line settings that override the file and survive reloads.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--listen`.
    pub listen: Option<std::net::SocketAddr>,
    /// `--admin-listen`.
    pub admin_listen: Option<std::net::SocketAddr>,
    /// `--data-dir`.
    pub data_dir: Option<PathBuf>,
}

impl Overrides {
    /// Loads the config file and applies the overrides.
    pub fn load(&self, path: &Path) -> Result<Config, edge_config::ConfigError> {
        let mut config = edge_config::load_with(path, self.data_dir.as_deref())?;
        if let Some(l) = self.listen {
            config.server.listen = l;
        }
        if let Some(a) = self.admin_listen {
            config.server.admin_listen = Some(a);
        }
        Ok(config)
    }
}

/// Writes the secrets `config` generated and says so: once the config is
/// built and about to serve (a config that is refused writes nothing).
pub fn write_generated_secrets(config: &Config) -> Result<()> {
    for secret in config
        .write_generated_secrets()
        .map_err(anyhow::Error::msg)?
    {
        let path = secret.path.display();
        if secret.is_api_key() {
            tracing::warn!(%path, "generated a development API key for the signer (send it as `Authorization: Bearer KEY`; keep it secret; configure your own callers for production)");
        } else {
            tracing::warn!(%path, "generated a development Ed25519 signing key (keep it secret; configure your own keys for production)");
        }
    }
    Ok(())
}

/// Loads, builds and swaps in a new app; on any problem keeps the old one.
pub fn reload(shared: &Shared, path: &Path, overrides: &Overrides) -> Result<()> {
    let started = std::time::Instant::now();
    let result = try_reload(shared, path, overrides);
    match &result {
        Ok(()) => {
            shared.runtime.metrics.reloads_ok.fetch_add(1, Relaxed);
            let ms = started.elapsed().as_millis() as u64;
            tracing::info!(config = %path.display(), ms, "config reloaded");
        }
        Err(e) => {
            shared.runtime.metrics.reloads_failed.fetch_add(1, Relaxed);
            tracing::error!(config = %path.display(), error = %format!("{e:#}"), "reload refused; the previous config keeps serving");
        }
    }
    result
}

/// The `[server]` keys that only a restart applies (sockets, threads and
/// the connection settings hyper is built with), among those that differ.
fn start_only_changes(old: &edge_config::Server, new: &edge_config::Server) -> Vec<&'static str> {
    [
        ("listen", old.listen != new.listen),
        ("admin_listen", old.admin_listen != new.admin_listen),
        ("data_dir", old.data_dir != new.data_dir),
        ("http2", old.http2 != new.http2),
        ("workers", old.workers != new.workers),
        (
            "max_connections",
            old.max_connections != new.max_connections,
        ),
        (
            "max_header_bytes",
            old.max_header_bytes != new.max_header_bytes,
        ),
        (
            "header_read_timeout_ms",
            old.header_read_timeout != new.header_read_timeout,
        ),
        ("drain_timeout_ms", old.drain_timeout != new.drain_timeout),
    ]
    .into_iter()
    .filter_map(|(key, changed)| changed.then_some(key))
    .collect()
}

fn try_reload(shared: &Shared, path: &Path, overrides: &Overrides) -> Result<()> {
    let config = overrides.load(path)?;
    let _one = shared.changes.lock().unwrap_or_else(|e| e.into_inner());
    let old = shared.app.load_full();
    if config.pool != old.files.pool {
        tracing::warn!("[pool] changed: pool sizes apply at start; restart edge to apply them");
    }
    let start_only = start_only_changes(&old.files.server, &config.server);
    if !start_only.is_empty() {
        tracing::warn!(
            keys = %start_only.join(", "),
            "[server] settings read at start changed; restart edge to apply them"
        );
    }
    let app = App::build_with(&shared.runtime, config, old.desired.clone())?;
    let failing_before = old.failed_components();
    let newly_failed: Vec<_> = app
        .failed_components()
        .into_iter()
        .filter(|id| !failing_before.contains(id))
        .map(|id| format!("{id}: {:?}", app.status[id]))
        .collect();
    if !newly_failed.is_empty() {
        bail!(
            "components that load now would fail: {}",
            newly_failed.join("; ")
        );
    }
    write_generated_secrets(&app.config)?;
    let app = Arc::new(app);
    shared.app.store(app.clone());
    app.commit(&shared.runtime, Some(&old));
    Ok(())
}

/// How long after its last change a file's modification time is taken as
/// final. The kernel stamps files from its coarse clock (a tick of up to
/// 10 ms on Linux): a file written again within the same tick keeps its
/// time, so a reload that read it halfway through a write (`cp` of a
/// component, an editor's truncate-then-write) would never see the rest.
/// A file that changed this close to being read is read again at the next
/// look.
const SETTLE: Duration = Duration::from_millis(20);

/// A watched file's modification time as a reload saw it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stamp {
    modified: Option<SystemTime>,
    /// False when the file changed within [`SETTLE`] of being read (or
    /// after): what was read may not be its final content.
    settled: bool,
}

/// The modification times of `files`, as of a read of them that started
/// at `read_at`.
pub fn snapshot(files: &[PathBuf], read_at: SystemTime) -> Vec<Stamp> {
    files
        .iter()
        .map(|f| {
            let modified = std::fs::metadata(f).and_then(|m| m.modified()).ok();
            let settled = modified.is_none_or(|m| settled(m, read_at));
            Stamp { modified, settled }
        })
        .collect()
}

/// Whether a file modified at `modified` was complete when read at
/// `read_at`. A time more than a second ahead is another machine's clock
/// (a network filesystem), which no wait here settles.
fn settled(modified: SystemTime, read_at: SystemTime) -> bool {
    match read_at.duration_since(modified) {
        Ok(age) => age >= SETTLE,
        Err(ahead) => ahead.duration() > Duration::from_secs(1),
    }
}

/// Whether the files must be read again: one changed since `seen`, or was
/// not settled when it was read.
fn changed(seen: &[Stamp], now: &[Stamp]) -> bool {
    seen.len() != now.len()
        || seen
            .iter()
            .zip(now)
            .any(|(s, n)| !s.settled || s.modified != n.modified)
}

/// How often swap is checked when files are not watched.
const SWAP_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Watches the serving config's files and reloads on change; also reloads
/// on SIGHUP. Polling (not inotify) keeps it simple and works on every
/// filesystem, including the bind mounts and symlink swaps of deploy tools.
///
/// `hup` must be registered before the process announces it is serving:
/// SIGHUP's default action ends the process.
pub async fn watch(
    shared: Arc<Shared>,
    path: PathBuf,
    overrides: Overrides,
    loaded_at: SystemTime,
    mut hup: Option<Signal>,
) {
    let mut files = shared.app.load().config.watched_files();
    // As of the serving config's load, not of now: a file changed after
    // the load began is read again at the first look (one written just
    // before is what the load read).
    let mut seen = snapshot(&files, loaded_at + SETTLE);
    loop {
        let interval = shared.app.load().config.server.watch_interval;
        // Without file watching, still wake now and then to check swap.
        let tick = tokio::time::sleep(interval.unwrap_or(SWAP_CHECK_INTERVAL));
        let by_signal = tokio::select! {
            _ = tick => false,
            Some(()) = async { match hup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => true,
        };
        shared.check_swap();
        let read_at = SystemTime::now();
        let mut now = snapshot(&files, read_at);
        if by_signal {
            // SIGHUP says the files are written: no second look.
            now.iter_mut().for_each(|s| s.settled = true);
        }
        if !by_signal && (interval.is_none() || !changed(&seen, &now)) {
            continue;
        }
        // Blocking: compiling a changed component takes a while.
        let s = shared.clone();
        let (p, o) = (path.clone(), overrides.clone());
        let _ = tokio::task::spawn_blocking(move || reload(&s, &p, &o)).await;
        let reloaded = shared.app.load().config.watched_files();
        seen = if reloaded == files {
            now
        } else {
            snapshot(&reloaded, read_at)
        };
        files = reloaded;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_changed_just_before_or_after_its_read_is_not_settled() {
        let read = SystemTime::now();
        let ms = Duration::from_millis;
        assert!(settled(read - Duration::from_secs(1), read));
        assert!(!settled(read - ms(5), read), "same coarse clock tick");
        assert!(!settled(read + ms(5), read), "changed after the read began");
        assert!(
            settled(read + Duration::from_secs(60), read),
            "another clock"
        );
    }

    #[test]
    fn an_unsettled_file_is_read_again_though_its_time_did_not_move() {
        let dir = std::env::temp_dir().join(format!("edge-settle-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("edge.toml");
        std::fs::write(&file, "app = ").unwrap();
        let files = [file.clone()];
        // Read (a reload) right after the write: unsettled, so the next
        // look reads it again even with the same time; after that, only a
        // change does.
        let first = snapshot(&files, SystemTime::now());
        assert!(!first[0].settled);
        let later = SystemTime::now() + SETTLE;
        let second = snapshot(&files, later);
        assert_eq!(first[0].modified, second[0].modified);
        assert!(changed(&first, &second));
        assert!(!changed(&second, &snapshot(&files, later)));
        std::fs::remove_dir_all(&dir).unwrap();
        let gone = snapshot(&files, later);
        assert!(gone[0].settled && changed(&second, &gone));
    }

    #[test]
    fn start_only_server_keys_are_named_when_they_change() {
        let old = edge_config::Server {
            listen: "127.0.0.1:8080".parse().unwrap(),
            admin_listen: None,
            data_dir: "/tmp/edge".into(),
            http2: true,
            workers: None,
            max_connections: 1000,
            max_header_bytes: 16384,
            max_body_bytes: 1 << 20,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            min_body_rate: 1024,
            write_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            drain_timeout: Duration::from_secs(10),
            watch_interval: None,
            pop: None,
            country: None,
            workers_engine: None,
            trusted_proxies: Vec::new(),
        };
        let mut new = old.clone();
        new.max_body_bytes = 2 << 20; // applied by a reload: not named
        assert!(start_only_changes(&old, &new).is_empty());
        new.max_header_bytes = 65536;
        new.http2 = false;
        assert_eq!(
            start_only_changes(&old, &new),
            ["http2", "max_header_bytes"]
        );
    }
}
