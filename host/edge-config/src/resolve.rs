//! Turns the two parsed files into a validated [`Config`].

use crate::edge::{self, EdgeFile, SecretSource};
use crate::spin::{self, Manifest};
use crate::{
    Component, Config, ConfigError, ControlPlane, HostPattern, InstanceMode, InstancesPerKey,
    Limits, MixerLimits, OutboundRule, Pool, Route, RoutePattern, SITE_VARIABLE_PREFIX, Server,
    SessionKey, SessionSettings, SourceFile, Tenant,
};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use toml::Spanned;

/// Loads an edge-config file and the Spin manifest it names, and validates
/// both.
///
/// Relative paths in either file are relative to that file's directory.
pub fn load(edge_path: &Path) -> Result<Config, ConfigError> {
    load_with(edge_path, None)
}

/// Like [`load`], with `server.data_dir` replaced by `data_dir` (the
/// `--data-dir` flag) before anything is resolved against it: generated
/// secrets live there.
pub fn load_with(edge_path: &Path, data_dir: Option<&Path>) -> Result<Config, ConfigError> {
    let edge_src = SourceFile::read(edge_path)?;
    let edge: EdgeFile = toml::from_str(&edge_src.text).map_err(|e| edge_src.toml_error(&e))?;
    let edge_dir = parent_dir(edge_path);

    let app_path = edge_dir.join(edge.app.get_ref());
    let app_src = SourceFile::read(&app_path).map_err(|mut e| {
        e.message = format!("{} (named by `app` in {})", e.message, edge_path.display());
        e
    })?;
    let manifest: Manifest = toml::from_str(&app_src.text).map_err(|e| app_src.toml_error(&e))?;

    Resolver {
        edge_src: &edge_src,
        app_src: &app_src,
        edge_dir: &edge_dir,
        app_dir: &parent_dir(&app_path),
        data_dir: data_dir.map(Path::to_path_buf),
        generated: Default::default(),
        keys_dir: Default::default(),
        sidecar: Default::default(),
        runtime: Default::default(),
    }
    .resolve(edge, manifest, app_path)
}

fn parent_dir(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("."));
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

struct Resolver<'a> {
    edge_src: &'a SourceFile,
    app_src: &'a SourceFile,
    edge_dir: &'a Path,
    app_dir: &'a Path,
    /// `--data-dir`, if given; otherwise set from `server.data_dir`.
    data_dir: Option<PathBuf>,
    /// Secrets generated during this load.
    generated: std::cell::RefCell<Vec<crate::GeneratedSecret>>,
    /// Where generated secrets live (`DATA_DIR/keys`), once the server
    /// section is resolved.
    keys_dir: std::cell::OnceCell<PathBuf>,
    /// `[sidecar]`, once resolved (tenants check their grants against it).
    sidecar: std::cell::OnceCell<Option<crate::Sidecar>>,
    /// Spin's runtime configuration, once read (its variables are every
    /// tenant's defaults).
    runtime: std::cell::OnceCell<crate::RuntimeConfig>,
}

type R<T> = Result<T, ConfigError>;

impl Resolver<'_> {
    fn edge_err<T>(&self, span: std::ops::Range<usize>, key: &str, msg: impl Into<String>) -> R<T> {
        let span = (span != (0..0)).then_some(span);
        Err(self.edge_src.error(span, Some(key.to_string()), msg))
    }

    fn app_err<T>(&self, span: std::ops::Range<usize>, key: &str, msg: impl Into<String>) -> R<T> {
        Err(self.app_src.error(Some(span), Some(key.to_string()), msg))
    }

    fn resolve(&self, edge: EdgeFile, manifest: Manifest, app_file: PathBuf) -> R<Config> {
        let version = &manifest.spin_manifest_version;
        if version.get_ref().as_integer() != Some(2) && version.get_ref().as_str() != Some("2") {
            return self.app_err(
                version.span(),
                "spin_manifest_version",
                "edge reads Spin manifest version 2; set `spin_manifest_version = 2`",
            );
        }
        let mut server = self.server(&edge.server)?;
        if let Some(d) = &self.data_dir {
            server.data_dir = d.clone();
        }
        let _ = self.keys_dir.set(server.data_dir.join("keys"));
        let sidecar = self.resolve_sidecar(edge.sidecar.as_ref(), &server.data_dir)?;
        let _ = self.sidecar.set(sidecar.clone());
        let pool = self.pool(&edge.pool)?;
        let default_limits = self.limits(&edge.limits, "limits", None, &pool)?;
        let app_vars = self.app_variables(&manifest)?;
        let runtime = match &edge.runtime_config {
            Some(p) => {
                let names: Vec<String> = app_vars.keys().cloned().collect();
                crate::runtime_config::load(&self.edge_dir.join(p.get_ref()), &names)?
            }
            None => crate::RuntimeConfig::default(),
        };
        let _ = self.runtime.set(runtime.clone());
        let mut components = self.components(&manifest)?;
        self.component_settings(&edge, &mut components, &pool)?;
        let routes = self.routes(&manifest, &components)?;
        let tenants = self.tenants(
            &edge,
            &manifest,
            &components,
            &app_vars,
            &default_limits,
            &pool,
        )?;
        if let Some(p) = &edge.runtime_config {
            self.placed_files_serve_one_tenant(p.span(), &runtime, &components, &tenants)?;
        }
        Ok(Config {
            runtime,
            edge_file: std::path::absolute(&self.edge_src.path)
                .unwrap_or_else(|_| self.edge_src.path.clone()),
            app_file: std::path::absolute(&app_file).unwrap_or(app_file),
            app_name: manifest.application.name.clone(),
            pool,
            components,
            routes,
            tenants,
            generated_secrets: self.generated.take(),
            sidecar,
            mixer_max_total_bytes: self.mixer_total(&edge.mixer)?,
            default_mixer: self.mixer(
                &edge.mixer,
                "mixer",
                None,
                self.mixer_total(&edge.mixer)?,
            )?,
            outbound_allow_ranges: self.allow_ranges(&edge.outbound.allow_ranges, "outbound")?,
            control: edge
                .control
                .as_ref()
                .map(|c| self.control(c, &server.data_dir))
                .transpose()?,
            default_limits,
            server,
        })
    }

    /// A store or database the runtime configuration puts at a file is
    /// one tenant's: were two tenants to open it, they would share data
    /// (a Redis placement keeps tenants apart, in a hash each).
    fn placed_files_serve_one_tenant(
        &self,
        span: std::ops::Range<usize>,
        runtime: &crate::RuntimeConfig,
        components: &BTreeMap<String, Component>,
        tenants: &[Tenant],
    ) -> R<()> {
        let files = runtime
            .key_value_stores
            .iter()
            .filter(|(_, p)| matches!(p, crate::StorePlacement::File(_)))
            .map(|(label, _)| ("key-value store", label, false))
            .chain(
                runtime
                    .sqlite_databases
                    .keys()
                    .map(|label| ("SQLite database", label, true)),
            );
        for (what, label, sqlite) in files {
            let opens = |t: &&Tenant| {
                components.values().any(|c| {
                    t.components.contains(&c.id)
                        && if sqlite {
                            c.sqlite_databases.contains(label)
                        } else {
                            c.key_value_stores.contains(label)
                        }
                })
            };
            let users: Vec<&str> = tenants
                .iter()
                .filter(opens)
                .map(|t| t.name.as_str())
                .collect();
            if users.len() > 1 {
                return self.edge_err(
                    span,
                    "runtime_config",
                    format!(
                        "places {what} {label:?} at one file, which tenants {} would share: a file placed by the runtime configuration serves one tenant (a Redis store keeps tenants apart)",
                        users.join(", ")
                    ),
                );
            }
        }
        Ok(())
    }

    fn server(&self, s: &edge::ServerSection) -> R<Server> {
        let addr = |v: &Spanned<String>, key: &str| -> R<SocketAddr> {
            v.get_ref().parse().or_else(|_| {
                self.edge_err(v.span(), key, format!("{:?} is not a socket address (allowed: \"127.0.0.1:8080\", \"[::1]:8080\", \"0.0.0.0:80\"; port 0 picks a free port)", v.get_ref()))
            })
        };
        if *s.max_header_bytes.get_ref() < 8192 {
            return self.edge_err(
                s.max_header_bytes.span(),
                "server.max_header_bytes",
                "must be at least 8192 (the HTTP parser's smallest buffer)",
            );
        }
        if *s.max_connections.get_ref() == 0 {
            return self.edge_err(
                s.max_connections.span(),
                "server.max_connections",
                "must be at least 1",
            );
        }
        for (v, key) in [
            (&s.header_read_timeout_ms, "server.header_read_timeout_ms"),
            (&s.body_read_timeout_ms, "server.body_read_timeout_ms"),
            (&s.write_timeout_ms, "server.write_timeout_ms"),
            (&s.idle_timeout_ms, "server.idle_timeout_ms"),
        ] {
            if *v.get_ref() == 0 {
                return self.edge_err(v.span(), key, "must be at least 1");
            }
        }
        if let Some(w) = &s.workers
            && *w.get_ref() == 0
        {
            return self.edge_err(
                w.span(),
                "server.workers",
                "must be at least 1 (omit it for one per core)",
            );
        }
        if let Some(p) = &s.pop {
            let name = p.get_ref();
            if name.is_empty()
                || name.len() > 63
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return self.edge_err(
                    p.span(),
                    "server.pop",
                    format!(
                        "{name:?} is not a PoP name (allowed: 1 to 63 letters, digits, - and _)"
                    ),
                );
            }
        }
        if let Some(c) = &s.country {
            let code = c.get_ref();
            if code.len() != 2 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
                return self.edge_err(
                    c.span(),
                    "server.country",
                    format!("{code:?} is not a country code (allowed: two upper-case letters, ISO 3166-1 alpha-2, such as \"DE\")"),
                );
            }
        }
        Ok(Server {
            listen: addr(&s.listen, "server.listen")?,
            admin_listen: s
                .admin_listen
                .as_ref()
                .map(|a| addr(a, "server.admin_listen"))
                .transpose()?,
            data_dir: self.edge_dir.join(&s.data_dir),
            http2: s.http2,
            workers: s.workers.as_ref().map(|w| *w.get_ref()),
            max_connections: *s.max_connections.get_ref(),
            max_header_bytes: *s.max_header_bytes.get_ref(),
            max_body_bytes: s.max_body_bytes,
            header_read_timeout: Duration::from_millis(*s.header_read_timeout_ms.get_ref()),
            body_read_timeout: Duration::from_millis(*s.body_read_timeout_ms.get_ref()),
            min_body_rate: s.min_body_rate,
            write_timeout: Duration::from_millis(*s.write_timeout_ms.get_ref()),
            idle_timeout: Duration::from_millis(*s.idle_timeout_ms.get_ref()),
            drain_timeout: Duration::from_millis(s.drain_timeout_ms),
            watch_interval: (s.watch_interval_ms > 0)
                .then(|| Duration::from_millis(s.watch_interval_ms)),
            pop: s.pop.as_ref().map(|p| p.get_ref().clone()),
            country: s.country.as_ref().map(|c| c.get_ref().clone()),
            workers_engine: s.workers_engine.as_ref().map(|p| self.edge_dir.join(p)),
            trusted_proxies: self.ip_ranges(&s.trusted_proxies, "server.trusted_proxies")?,
        })
    }

    fn control(&self, c: &edge::ControlSection, data_dir: &Path) -> R<ControlPlane> {
        let listen = match &c.listen {
            Some(v) => v.get_ref().parse::<SocketAddr>().or_else(|_| {
                self.edge_err(v.span(), "control.listen", format!("{:?} is not a socket address (allowed: \"127.0.0.1:8790\", \"[::1]:8790\"; port 0 picks a free port)", v.get_ref()))
            })?,
            None => SocketAddr::from(([127, 0, 0, 1], 8790)),
        };
        let public = c.allow_public.as_ref().is_some_and(|p| *p.get_ref());
        if !listen.ip().is_loopback() && !public {
            let span = c.listen.as_ref().map(|l| l.span()).unwrap_or(0..0);
            return self.edge_err(span, "control.listen", format!("{listen} is not a loopback address: the control API changes what this node serves; put it behind TLS and set `allow_public = true` to listen there"));
        }
        let database = match &c.database {
            Some(d) => {
                let url = d.get_ref();
                if !(url.starts_with("sqlite://")
                    || url.starts_with("mysql://")
                    || url.starts_with("mariadb://"))
                {
                    return self.edge_err(d.span(), "control.database", format!("{url:?} is not a database URL (allowed: \"sqlite://PATH\", \"mysql://USER:PASSWORD@HOST/DB\", \"mysql://USER@localhost/DB?socket=PATH\")"));
                }
                url.clone()
            }
            None => format!("sqlite://{}", data_dir.join("control.db").display()),
        };
        let positive = |v: &Option<toml::Spanned<u64>>, key: &str, default: u64| -> R<u64> {
            match v {
                Some(v) if *v.get_ref() == 0 => self.edge_err(v.span(), key, "must be at least 1"),
                Some(v) => Ok(*v.get_ref()),
                None => Ok(default),
            }
        };
        let registry = match &c.registry {
            Some(r) => {
                let url = r.get_ref();
                let path = url
                    .strip_prefix("https://")
                    .or_else(|| url.strip_prefix("http://"))
                    .and_then(|rest| rest.split_once('/'))
                    .map(|(_, p)| p);
                if path.is_none_or(|p| p.is_empty()) {
                    return self.edge_err(r.span(), "control.registry", format!("{url:?} is not a registry repository (allowed: \"https://registry.example/edge/components\", \"http://127.0.0.1:5000/edge\")"));
                }
                Some(url.clone())
            }
            None => None,
        };
        let console = match &c.console {
            Some(d) if d.get_ref().trim().is_empty() => {
                return self.edge_err(d.span(), "control.console", "an empty path (allowed: the directory of the console's built files, such as \"web-ui/build\", relative to this file; leave the key out for web-ui/build above the working directory or the edge binary)");
            }
            Some(d) => {
                let dir = self.edge_dir.join(d.get_ref());
                if !dir.join("index.html").is_file() {
                    return self.edge_err(d.span(), "control.console", format!("{} has no index.html: not the console's built files (build them with `npm run build` in web-ui/, or name the directory they are in)", dir.display()));
                }
                Some(dir)
            }
            None => None,
        };
        Ok(ControlPlane {
            registry,
            console,
            listen,
            database,
            max_upload_bytes: positive(&c.max_upload_bytes, "control.max_upload_bytes", 128 << 20)?,
            compile_timeout: Duration::from_millis(positive(
                &c.compile_timeout_ms,
                "control.compile_timeout_ms",
                120_000,
            )?),
            compile_memory_bytes: positive(
                &c.compile_memory_bytes,
                "control.compile_memory_bytes",
                4 << 30,
            )?,
        })
    }

    fn pool(&self, p: &edge::PoolSection) -> R<Pool> {
        let instances = *p.total_component_instances.get_ref();
        if instances == 0 {
            return self.edge_err(
                p.total_component_instances.span(),
                "pool.total_component_instances",
                "must be at least 1",
            );
        }
        let max_mem = *p.max_memory_bytes.get_ref();
        if max_mem < 65536 || !max_mem.is_multiple_of(65536) {
            return self.edge_err(
                p.max_memory_bytes.span(),
                "pool.max_memory_bytes",
                "must be a positive multiple of 65536 (the Wasm page size)",
            );
        }
        let session_instances = match &p.session_instances {
            Some(n) if *n.get_ref() == 0 || *n.get_ref() > instances => {
                return self.edge_err(
                    n.span(),
                    "pool.session_instances",
                    format!("must be between 1 and pool.total_component_instances ({instances})"),
                );
            }
            Some(n) => *n.get_ref(),
            None => (instances / 4 * 3).max(1),
        };
        let total_memory_bytes = match &p.total_memory_bytes {
            Some(n) if *n.get_ref() < max_mem => {
                return self.edge_err(
                    n.span(),
                    "pool.total_memory_bytes",
                    format!("must be at least pool.max_memory_bytes ({max_mem}): one instance's"),
                );
            }
            Some(n) => *n.get_ref(),
            None => default_total_memory_bytes().max(max_mem),
        };
        // Each component instance typically holds a few core instances (the
        // guest plus adapter shims) but one memory; size the rest from that.
        Ok(Pool {
            session_instances,
            total_component_instances: instances,
            total_core_instances: p
                .total_core_instances
                .unwrap_or(instances.saturating_mul(4)),
            total_memories: p.total_memories.unwrap_or(instances.saturating_mul(2)),
            total_tables: p.total_tables.unwrap_or(instances.saturating_mul(4)),
            total_stacks: p.total_stacks.unwrap_or(instances),
            max_memory_bytes: max_mem,
            max_core_instances_per_component: p.max_core_instances_per_component,
            max_memories_per_component: p.max_memories_per_component,
            max_tables_per_component: p.max_tables_per_component,
            keep_resident_bytes: p.keep_resident_bytes,
            total_memory_bytes,
        })
    }

    fn limits(
        &self,
        l: &edge::LimitsSection,
        key: &str,
        base: Option<&Limits>,
        pool: &Pool,
    ) -> R<Limits> {
        let deadline = match &l.request_deadline_ms {
            Some(d) if *d.get_ref() == 0 => {
                return self.edge_err(
                    d.span(),
                    &format!("{key}.request_deadline_ms"),
                    "must be at least 1",
                );
            }
            Some(d) => Duration::from_millis(*d.get_ref()),
            None => base.map_or(Duration::from_secs(30), |b| b.request_deadline),
        };
        let memory = match &l.memory_bytes {
            Some(m) if *m.get_ref() > pool.max_memory_bytes => {
                return self.edge_err(
                    m.span(),
                    &format!("{key}.memory_bytes"),
                    format!(
                        "{} exceeds pool.max_memory_bytes ({})",
                        m.get_ref(),
                        pool.max_memory_bytes
                    ),
                );
            }
            Some(m) if *m.get_ref() < 65536 => {
                return self.edge_err(
                    m.span(),
                    &format!("{key}.memory_bytes"),
                    "must be at least 65536 (one Wasm page)",
                );
            }
            Some(m) => *m.get_ref(),
            None => base.map_or(pool.max_memory_bytes.min(64 * 1024 * 1024), |b| {
                b.memory_bytes
            }),
        };
        let kv_store_bytes = match &l.kv_store_bytes {
            Some(b) if *b.get_ref() < 4096 => {
                return self.edge_err(
                    b.span(),
                    &format!("{key}.kv_store_bytes"),
                    "must be at least 4096",
                );
            }
            Some(b) => *b.get_ref(),
            None => base.map_or(64 * 1024 * 1024, |b| b.kv_store_bytes),
        };
        let sqlite_database_bytes = match &l.sqlite_database_bytes {
            Some(b) if *b.get_ref() < 65536 => {
                return self.edge_err(
                    b.span(),
                    &format!("{key}.sqlite_database_bytes"),
                    "must be at least 65536",
                );
            }
            Some(b) => *b.get_ref(),
            None => base.map_or(256 * 1024 * 1024, |b| b.sqlite_database_bytes),
        };
        let sqlite_statements = match &l.sqlite_statements {
            Some(v) if *v.get_ref() == 0 || *v.get_ref() > 65536 => {
                return self.edge_err(
                    v.span(),
                    &format!("{key}.sqlite_statements"),
                    "must be from 1 to 65536",
                );
            }
            Some(v) => usize::try_from(*v.get_ref()).unwrap_or(usize::MAX),
            None => base.map_or_else(default_sqlite_statements, |b| b.sqlite_statements),
        };
        let max_open_files = match &l.max_open_files {
            Some(v) if *v.get_ref() == 0 || *v.get_ref() > 1 << 20 => {
                return self.edge_err(
                    v.span(),
                    &format!("{key}.max_open_files"),
                    "must be from 1 to 1048576",
                );
            }
            Some(v) => usize::try_from(*v.get_ref()).unwrap_or(usize::MAX),
            None => base.map_or(1024, |b| b.max_open_files),
        };
        let max_outbound_requests = match &l.max_outbound_requests {
            Some(v) if *v.get_ref() == 0 => {
                return self.edge_err(
                    v.span(),
                    &format!("{key}.max_outbound_requests"),
                    "must be at least 1",
                );
            }
            Some(v) => usize::try_from(*v.get_ref()).unwrap_or(usize::MAX),
            None => base.map_or(64, |b| b.max_outbound_requests),
        };
        // A tenant's share of the pool: by default half of it, so one
        // tenant can never hold every slot; its sessions half of that, so
        // per-request routes keep room beside a flood of session keys.
        let count = |v: &Option<Spanned<u64>>,
                     name: &str,
                     min: u64,
                     max: Option<u64>,
                     inherited: Option<u64>,
                     default: u64|
         -> R<u64> {
            match v {
                Some(v) if *v.get_ref() < min => self.edge_err(
                    v.span(),
                    &format!("{key}.{name}"),
                    format!("must be at least {min}"),
                ),
                Some(v) if max.is_some_and(|m| *v.get_ref() > m) => self.edge_err(
                    v.span(),
                    &format!("{key}.{name}"),
                    format!(
                        "{} exceeds pool.total_component_instances ({})",
                        v.get_ref(),
                        max.unwrap_or_default()
                    ),
                ),
                Some(v) => Ok(*v.get_ref()),
                None => Ok(inherited.unwrap_or(default)),
            }
        };
        let pool_slots = u64::from(pool.total_component_instances);
        let max_instances = count(
            &l.max_instances,
            "max_instances",
            1,
            Some(pool_slots),
            base.map(|b| b.max_instances),
            (pool_slots / 2).max(1),
        )?;
        let max_total_memory_bytes = match &l.max_total_memory_bytes {
            Some(v) if *v.get_ref() < 65536 || *v.get_ref() > pool.total_memory_bytes => {
                return self.edge_err(
                    v.span(),
                    &format!("{key}.max_total_memory_bytes"),
                    format!(
                        "{} is outside 65536 (one Wasm page) ..= pool.total_memory_bytes ({})",
                        v.get_ref(),
                        pool.total_memory_bytes
                    ),
                );
            }
            Some(v) => *v.get_ref(),
            None => base.map_or((pool.total_memory_bytes / 2).max(65536), |b| {
                b.max_total_memory_bytes.min(pool.total_memory_bytes)
            }),
        };
        let max_sessions = count(
            &l.max_sessions,
            "max_sessions",
            1,
            Some(pool_slots),
            base.map(|b| b.max_sessions.min(max_instances)),
            (max_instances / 2).max(1),
        )?;
        if let Some(v) = &l.max_sessions
            && *v.get_ref() > max_instances
        {
            return self.edge_err(
                v.span(),
                &format!("{key}.max_sessions"),
                format!(
                    "{} exceeds max_instances ({max_instances}): every session holds an instance",
                    v.get_ref()
                ),
            );
        }
        Ok(Limits {
            request_deadline: deadline,
            memory_bytes: memory,
            kv_store_bytes,
            sqlite_database_bytes,
            sqlite_statements,
            max_open_files,
            max_outbound_requests,
            max_instances,
            max_total_memory_bytes,
            max_sessions,
            max_inflight: count(
                &l.max_inflight,
                "max_inflight",
                1,
                None,
                base.map(|b| b.max_inflight),
                4096,
            )?,
            session_rate: count(
                &l.session_rate,
                "session_rate",
                1,
                None,
                base.map(|b| b.session_rate),
                200,
            )?,
            max_host_resources: count(
                &l.max_host_resources,
                "max_host_resources",
                64,
                None,
                base.map(|b| b.max_host_resources),
                1024,
            )?,
            max_fields_bytes: count(
                &l.max_fields_bytes,
                "max_fields_bytes",
                1024,
                None,
                base.map(|b| b.max_fields_bytes),
                32 * 1024,
            )?,
        })
    }

    /// `[mixer] max_total_bytes`: the host's budget for all mixing buffers.
    fn mixer_total(&self, m: &edge::MixerSection) -> R<u64> {
        match &m.max_total_bytes {
            Some(v) if *v.get_ref() == 0 => {
                self.edge_err(v.span(), "mixer.max_total_bytes", "must be at least 1")
            }
            Some(v) => Ok(*v.get_ref()),
            // 512 MiB: the mixer's own default.
            None => Ok(512 << 20),
        }
    }

    /// `[mixer]` (no `base`) or a tenant's `[tenant.mixer]` over it.
    fn mixer(
        &self,
        m: &edge::MixerSection,
        key: &str,
        base: Option<&MixerLimits>,
        total: u64,
    ) -> R<MixerLimits> {
        let at_least_1 = |v: &Option<Spanned<u64>>, name: &str| -> R<Option<u64>> {
            match v {
                Some(v) if *v.get_ref() == 0 => {
                    self.edge_err(v.span(), &format!("{key}.{name}"), "must be at least 1")
                }
                Some(v) => Ok(Some(*v.get_ref())),
                None => Ok(None),
            }
        };
        let max_rooms = at_least_1(&m.max_rooms, "max_rooms")?;
        let max_members = at_least_1(&m.max_members, "max_members")?;
        let idle = at_least_1(&m.room_idle_timeout_ms, "room_idle_timeout_ms")?;
        let max_bytes = at_least_1(&m.max_bytes, "max_bytes")?;
        if base.is_some()
            && let Some(v) = &m.max_total_bytes
        {
            return self.edge_err(
                v.span(),
                &format!("{key}.max_total_bytes"),
                "is host-wide: set it in [mixer] (a tenant's share is max_bytes)",
            );
        }
        // Checked against the host's budget wherever it is set: a share
        // larger than the whole is a mistake, not a wish.
        if let (Some(n), Some(v)) = (max_bytes, &m.max_bytes)
            && n > total
        {
            return self.edge_err(
                v.span(),
                &format!("{key}.max_bytes"),
                format!("must be at most mixer.max_total_bytes ({total})"),
            );
        }
        Ok(MixerLimits {
            max_rooms: max_rooms.map_or(base.map_or(32, |b| b.max_rooms), |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            }),
            max_members: max_members.map_or(base.map_or(64, |b| b.max_members), |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            }),
            room_idle_timeout: idle.map_or(
                base.map_or(Duration::from_secs(300), |b| b.room_idle_timeout),
                Duration::from_millis,
            ),
            // Default: a quarter of the host's budget, so one tenant cannot
            // take it all.
            max_bytes: max_bytes.unwrap_or(base.map_or(total / 4, |b| b.max_bytes)),
        })
    }

    fn app_variables(&self, m: &Manifest) -> R<BTreeMap<String, spin::AppVariable>> {
        let mut out = BTreeMap::new();
        for (name, var) in &m.variables {
            check_variable_name(name.get_ref()).or_else(|e| {
                self.app_err(name.span(), &format!("variables.{}", name.get_ref()), e)
            })?;
            let v = var.get_ref();
            if v.required && v.default.is_some() {
                return self.app_err(
                    var.span(),
                    &format!("variables.{}", name.get_ref()),
                    "a variable cannot be both `required` and have a `default`",
                );
            }
            out.insert(
                name.get_ref().clone(),
                spin::AppVariable {
                    default: v.default.clone(),
                    required: v.required,
                    secret: v.secret,
                },
            );
        }
        Ok(out)
    }

    fn components(&self, m: &Manifest) -> R<BTreeMap<String, Component>> {
        let mut out = BTreeMap::new();
        for (id, c) in &m.component {
            let key = format!("component.{}", id.get_ref());
            check_component_id(id.get_ref()).or_else(|e| self.app_err(id.span(), &key, e))?;
            let c = c.get_ref();
            let source = match c.source.get_ref() {
                toml::Value::String(s) => self.app_dir.join(s),
                _ => return self.app_err(c.source.span(), &format!("{key}.source"), "edge loads components from local files: give a path such as \"target/wasm32-wasip2/release/x.wasm\" (download remote sources first)"),
            };
            let mut rules = Vec::new();
            let mut templates = Vec::new();
            for (i, h) in c.allowed_outbound_hosts.iter().enumerate() {
                // Rendered per tenant, with its values (see `tenants`).
                if h.get_ref().contains("{{") {
                    templates.push(h.get_ref().clone());
                    continue;
                }
                match OutboundRule::parse(h.get_ref()) {
                    Ok(r) => rules.push(r),
                    Err(e) => {
                        return self.app_err(
                            h.span(),
                            &format!("{key}.allowed_outbound_hosts[{i}]"),
                            e,
                        );
                    }
                }
            }
            // Each label is a file the host keeps open (a key-value store
            // with its cache, a database with its connections).
            for (labels, what) in [
                (&c.sqlite_databases, "sqlite_databases"),
                (&c.key_value_stores, "key_value_stores"),
            ] {
                if let Some(past) = labels.get(MAX_LABELS) {
                    return self.app_err(
                        past.span(),
                        &format!("{key}.{what}"),
                        format!("at most {MAX_LABELS} labels per component"),
                    );
                }
            }
            let mut databases = Vec::new();
            for d in &c.sqlite_databases {
                if !is_label(d.get_ref()) {
                    return self.app_err(
                        d.span(),
                        &format!("{key}.sqlite_databases"),
                        format!(
                            "{:?} is not a database label (lower-case letters, digits, '_' and '-')",
                            d.get_ref()
                        ),
                    );
                }
                databases.push(d.get_ref().clone());
            }
            let mut stores = Vec::new();
            for s in &c.key_value_stores {
                if !is_label(s.get_ref()) {
                    return self.app_err(
                        s.span(),
                        &format!("{key}.key_value_stores"),
                        format!(
                            "{:?} is not a store label (lower-case letters, digits, '_' and '-')",
                            s.get_ref()
                        ),
                    );
                }
                stores.push(s.get_ref().clone());
            }
            for name in c.variables.keys() {
                check_variable_name(name.get_ref()).or_else(|e| {
                    self.app_err(
                        name.span(),
                        &format!("{key}.variables.{}", name.get_ref()),
                        e,
                    )
                })?;
            }
            let files = match &c.files {
                Some(f) => crate::files::expand(self.app_dir, f.get_ref(), &c.exclude_files)
                    .or_else(|e| self.app_err(f.span(), &format!("{key}.files"), e))?,
                None => Vec::new(),
            };
            out.insert(
                id.get_ref().clone(),
                Component {
                    id: id.get_ref().clone(),
                    source,
                    allowed_outbound_hosts: rules,
                    outbound_templates: templates,
                    key_value_stores: stores,
                    sqlite_databases: databases,
                    environment: c
                        .environment
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                    files,
                    mode: InstanceMode::Declared,
                    memory_bytes: None,
                },
            );
        }
        if out.is_empty() {
            return Err(self.app_src.error(
                None,
                None,
                "the application has no [component.*]; add at least one",
            ));
        }
        Ok(out)
    }

    fn component_settings(
        &self,
        edge: &EdgeFile,
        components: &mut BTreeMap<String, Component>,
        pool: &Pool,
    ) -> R<()> {
        for (id, section) in &edge.components {
            let key = format!("component.{}", id.get_ref());
            let Some(component) = components.get_mut(id.get_ref()) else {
                let known: Vec<_> = components.keys().map(String::as_str).collect();
                return self.edge_err(
                    id.span(),
                    &key,
                    format!(
                        "no component {:?} in the application; it has: {}",
                        id.get_ref(),
                        known.join(", ")
                    ),
                );
            };
            let s = section.get_ref();
            if let Some(m) = &s.memory_bytes {
                let (m_val, span) = (*m.get_ref(), m.span());
                if m_val < 65536 || m_val > pool.max_memory_bytes {
                    return self.edge_err(
                        span,
                        &format!("{key}.memory_bytes"),
                        format!(
                            "{m_val} is outside 65536 (one Wasm page) ..= pool.max_memory_bytes ({})",
                            pool.max_memory_bytes
                        ),
                    );
                }
                component.memory_bytes = Some(m_val);
            }
            // Warm instances per key (`default` when not given), and how
            // long an idle one lives: sessions' and isolates' alike.
            let per_key = |default: usize| -> R<InstancesPerKey> {
                use edge::CountOrName::{Count, Name};
                match s.instances_per_key.as_ref().map(|v| (v, v.get_ref())) {
                    None => Ok(InstancesPerKey::Fixed(default)),
                    Some((_, Count(n))) if *n >= 1 => Ok(InstancesPerKey::Fixed(*n)),
                    Some((_, Name(w))) if w == "workers" => Ok(InstancesPerKey::Workers),
                    Some((v, given)) => self.edge_err(
                        v.span(),
                        &format!("{key}.instances_per_key"),
                        format!(
                            "{given} is not allowed: a number of at least 1, or \"workers\" for one per worker thread"
                        ),
                    ),
                }
            };
            let idle = || -> R<Duration> {
                match &s.idle_timeout_ms {
                    Some(v) if *v.get_ref() == 0 => self.edge_err(
                        v.span(),
                        &format!("{key}.idle_timeout_ms"),
                        "must be at least 1",
                    ),
                    Some(v) => Ok(Duration::from_millis(*v.get_ref())),
                    None => Ok(Duration::from_secs(60)),
                }
            };
            let mode = s.instance.as_ref().map(|m| m.get_ref().as_str());
            component.mode = match mode {
                None if s.session_key.is_none() && s.instances_per_key.is_none() => {
                    InstanceMode::Declared
                }
                Some("isolate") => {
                    if let Some(k) = &s.session_key {
                        return self.edge_err(
                            k.span(),
                            &format!("{key}.session_key"),
                            "an isolate's instances take every request: it has no session_key",
                        );
                    }
                    InstanceMode::isolate(per_key(crate::ISOLATE_INSTANCES)?, idle()?)
                }
                None | Some("per-request") => {
                    if let Some(k) = &s.session_key {
                        return self.edge_err(
                            k.span(),
                            &format!("{key}.session_key"),
                            "only components with instance = \"session\" take a session_key",
                        );
                    }
                    if let Some(v) = &s.instances_per_key {
                        return self.edge_err(
                            v.span(),
                            &format!("{key}.instances_per_key"),
                            "only components with instance = \"session\" or \"isolate\" keep instances",
                        );
                    }
                    InstanceMode::PerRequest
                }
                Some("session") => {
                    let Some(k) = &s.session_key else {
                        return self.edge_err(section.span(), &key, "instance = \"session\" needs a session_key (\"header:NAME\", \"cookie:NAME\", \"path:N\", \"host\" or \"bearer\")");
                    };
                    let session_key = parse_session_key(k.get_ref())
                        .or_else(|e| self.edge_err(k.span(), &format!("{key}.session_key"), e))?;
                    let positive =
                        |v: &Option<Spanned<usize>>, name: &str, default: usize| -> R<usize> {
                            match v {
                                Some(v) if *v.get_ref() == 0 => self.edge_err(
                                    v.span(),
                                    &format!("{key}.{name}"),
                                    "must be at least 1",
                                ),
                                Some(v) => Ok(*v.get_ref()),
                                None => Ok(default),
                            }
                        };
                    let per_key = per_key(1)?;
                    let idle = idle()?;
                    InstanceMode::Session(SessionSettings {
                        key: session_key,
                        max_sessions: positive(&s.max_sessions, "max_sessions", 1000)?,
                        idle_timeout: idle,
                        max_queued: positive(
                            &s.max_queued_per_session,
                            "max_queued_per_session",
                            64,
                        )?,
                        instances_per_key: per_key,
                    })
                }
                Some(other) => {
                    let span = s.instance.as_ref().map_or(0..0, |m| m.span());
                    return self.edge_err(span, &format!("{key}.instance"), format!("{other:?} is not an instance mode (allowed: \"per-request\", \"session\", \"isolate\")"));
                }
            };
        }
        Ok(())
    }

    fn routes(&self, m: &Manifest, components: &BTreeMap<String, Component>) -> R<Vec<Route>> {
        let mut routes: Vec<(Route, std::ops::Range<usize>)> = Vec::new();
        for (i, t) in m.trigger.http.iter().enumerate() {
            let key = format!("trigger.http[{i}]");
            let t = t.get_ref();
            let Some(route) = t.route.get_ref().as_str() else {
                // `route = { private = true }` is Spin's for components only
                // reachable by service chaining; edge has none of those.
                if t.route.get_ref().get("private").is_some() {
                    continue;
                }
                return self.app_err(
                    t.route.span(),
                    &format!("{key}.route"),
                    "expected a route string such as \"/...\" or { private = true }",
                );
            };
            let pattern = RoutePattern::parse(route)
                .or_else(|e| self.app_err(t.route.span(), &format!("{key}.route"), e))?;
            let Some(component) = t.component.get_ref().as_str() else {
                return self.app_err(
                    t.component.span(),
                    &format!("{key}.component"),
                    "edge needs a component id here, not an inline component table",
                );
            };
            if !components.contains_key(component) {
                let known: Vec<_> = components.keys().map(String::as_str).collect();
                return self.app_err(
                    t.component.span(),
                    &format!("{key}.component"),
                    format!(
                        "no component {component:?}; the application has: {}",
                        known.join(", ")
                    ),
                );
            }
            if let Some((dup, _)) = routes.iter().find(|(r, _)| r.pattern.same_shape(&pattern)) {
                return self.app_err(
                    t.route.span(),
                    &format!("{key}.route"),
                    format!(
                        "route {route:?} duplicates {:?} (component {:?})",
                        dup.pattern.as_str(),
                        dup.component
                    ),
                );
            }
            routes.push((
                Route {
                    pattern,
                    component: component.to_string(),
                    draw: None,
                },
                t.route.span(),
            ));
        }
        // In the manifest's order: the host matches them by Spin's
        // precedence (edge's `routes` module).
        Ok(routes.into_iter().map(|(r, _)| r).collect())
    }

    fn tenants(
        &self,
        edge: &EdgeFile,
        manifest: &Manifest,
        components: &BTreeMap<String, Component>,
        app_vars: &BTreeMap<String, spin::AppVariable>,
        default_limits: &Limits,
        pool: &Pool,
    ) -> R<Vec<Tenant>> {
        let sidecar = self.sidecar.get().and_then(Option::as_ref);
        let mixer_total = self.mixer_total(&edge.mixer)?;
        let default_mixer = self.mixer(&edge.mixer, "mixer", None, mixer_total)?;
        if edge.tenants.is_empty() {
            return Err(self.edge_src.error(
                None,
                None,
                "no [[tenant]]: add one with `name`, `hosts` and `components`",
            ));
        }
        let mut names = BTreeSet::new();
        let mut claimed: BTreeMap<HostPattern, String> = BTreeMap::new();
        let mut out = Vec::new();
        for (ti, t) in edge.tenants.iter().enumerate() {
            let t = t.get_ref();
            let key = format!("tenant[{ti}]");
            let name = t.name.get_ref();
            if !is_label(name) {
                return self.edge_err(
                    t.name.span(),
                    &format!("{key}.name"),
                    format!(
                        "{name:?} is not a tenant name (lower-case letters, digits, '_' and '-')"
                    ),
                );
            }
            if !names.insert(name.clone()) {
                return self.edge_err(
                    t.name.span(),
                    &format!("{key}.name"),
                    format!("tenant {name:?} is defined twice"),
                );
            }
            let mut hosts = Vec::new();
            if t.hosts.is_empty() {
                return self.edge_err(t.name.span(), &format!("{key}.hosts"), "a tenant needs at least one host (\"example.com\", \"*.example.com\" or \"*\")");
            }
            for (hi, h) in t.hosts.iter().enumerate() {
                let pattern = HostPattern::parse(h.get_ref())
                    .or_else(|e| self.edge_err(h.span(), &format!("{key}.hosts[{hi}]"), e))?;
                if let Some(other) = claimed.get(&pattern) {
                    return self.edge_err(
                        h.span(),
                        &format!("{key}.hosts[{hi}]"),
                        format!(
                            "host {:?} is already served by tenant {other:?}",
                            h.get_ref()
                        ),
                    );
                }
                claimed.insert(pattern.clone(), name.clone());
                hosts.push(pattern);
            }
            let mut granted = BTreeSet::new();
            for (ci, c) in t.components.iter().enumerate() {
                if c.get_ref() == "*" {
                    granted.extend(components.keys().cloned());
                } else if components.contains_key(c.get_ref()) {
                    granted.insert(c.get_ref().clone());
                } else {
                    let known: Vec<_> = components.keys().map(String::as_str).collect();
                    return self.edge_err(
                        c.span(),
                        &format!("{key}.components[{ci}]"),
                        format!(
                            "no component {:?} in the application; it has: {} (or \"*\" for all)",
                            c.get_ref(),
                            known.join(", ")
                        ),
                    );
                }
            }
            let limits = self.limits(
                &t.limits,
                &format!("{key}.limits"),
                Some(default_limits),
                pool,
            )?;
            let mixer = self.mixer(
                &t.mixer,
                &format!("{key}.mixer"),
                Some(&default_mixer),
                mixer_total,
            )?;
            let values = self.tenant_values(t, &key, app_vars)?;
            let sites = self.sites(t, &key, &hosts, components, &granted)?;
            let mut variables = BTreeMap::new();
            for (cid, comp) in &manifest.component {
                if !granted.contains(cid.get_ref()) || comp.get_ref().variables.is_empty() {
                    continue;
                }
                let mut resolved = BTreeMap::new();
                for (vname, template) in &comp.get_ref().variables {
                    let value = render_template(template.get_ref(), &values).map_err(|e| {
                        self.app_src.error(
                            Some(template.span()),
                            Some(format!(
                                "component.{}.variables.{}",
                                cid.get_ref(),
                                vname.get_ref()
                            )),
                            format!("{e} (for tenant {name:?})"),
                        )
                    })?;
                    resolved.insert(vname.get_ref().clone(), value);
                }
                variables.insert(cid.get_ref().clone(), resolved);
            }
            let mut outbound = BTreeMap::new();
            for (cid, comp) in &manifest.component {
                if !granted.contains(cid.get_ref()) {
                    continue;
                }
                let mut rules = Vec::new();
                for (i, h) in comp.get_ref().allowed_outbound_hosts.iter().enumerate() {
                    if !h.get_ref().contains("{{") {
                        continue;
                    }
                    let at = || format!("component.{}.allowed_outbound_hosts[{i}]", cid.get_ref());
                    let rendered = render_template(h.get_ref(), &values).map_err(|e| {
                        self.app_src.error(
                            Some(h.span()),
                            Some(at()),
                            format!("{e} (for tenant {name:?})"),
                        )
                    })?;
                    let rule = OutboundRule::parse_rendered(&rendered).map_err(|e| {
                        self.app_src.error(
                            Some(h.span()),
                            Some(at()),
                            format!(
                                "with tenant {name:?}'s values it is {:?}: {e}",
                                rendered.trim()
                            ),
                        )
                    })?;
                    rules.extend(rule);
                }
                if !rules.is_empty() {
                    outbound.insert(cid.get_ref().clone(), rules);
                }
            }
            // Each site reaches its component as a variable per host.
            for site in &sites {
                let config = site.guest_config();
                let vars = variables.entry(site.component.clone()).or_default();
                for h in &site.hosts {
                    vars.insert(format!("{SITE_VARIABLE_PREFIX}{h}"), config.clone());
                }
            }
            let variables = variables
                .into_iter()
                .map(|(k, v)| (k, Arc::new(v)))
                .collect();
            let mut sidecar_programs = Vec::new();
            for (pi, p) in t.sidecar_programs.iter().enumerate() {
                let path = PathBuf::from(p.get_ref());
                match sidecar {
                    None => {
                        return self.edge_err(
                            p.span(),
                            &format!("{key}.sidecar_programs[{pi}]"),
                            "there is no [sidecar] section to run programs",
                        );
                    }
                    Some(s) if !s.allow.contains(&path) => {
                        return self.edge_err(
                            p.span(),
                            &format!("{key}.sidecar_programs[{pi}]"),
                            format!("{:?} is not in [sidecar] allow", p.get_ref()),
                        );
                    }
                    Some(_) => sidecar_programs.push(path),
                }
            }
            let mut outbound_allow_ranges =
                self.allow_ranges(&edge.outbound.allow_ranges, "outbound")?;
            outbound_allow_ranges
                .extend(self.allow_ranges(&t.outbound.allow_ranges, &format!("{key}.outbound"))?);
            out.push(Tenant {
                name: name.clone(),
                hosts,
                components: granted,
                limits,
                variables,
                outbound,
                sites,
                sidecar_programs,
                outbound_allow_ranges,
                mixer,
            });
        }
        Ok(out)
    }

    /// `allow_ranges` of `[outbound]` or `[tenant.outbound]` (`key`).
    fn allow_ranges(&self, list: &[Spanned<String>], key: &str) -> R<Vec<ipnet::IpNet>> {
        self.ip_ranges(list, &format!("{key}.allow_ranges"))
    }

    /// A list of addresses and CIDR ranges at `key`.
    fn ip_ranges(&self, list: &[Spanned<String>], key: &str) -> R<Vec<ipnet::IpNet>> {
        list.iter()
            .enumerate()
            .map(|(i, r)| {
                crate::outbound::parse_ip_range(r.get_ref())
                    .or_else(|e| self.edge_err(r.span(), &format!("{key}[{i}]"), e))
            })
            .collect()
    }

    /// `[sidecar]`.
    fn resolve_sidecar(
        &self,
        s: Option<&edge::SidecarSection>,
        data_dir: &Path,
    ) -> R<Option<crate::Sidecar>> {
        let Some(s) = s else { return Ok(None) };
        let mut allow = Vec::new();
        for (i, p) in s.allow.iter().enumerate() {
            let path = crate::sidecar::check_program(p.get_ref())
                .or_else(|e| self.edge_err(p.span(), &format!("sidecar.allow[{i}]"), e))?;
            allow.push(path);
        }
        let positive = |v: &Option<Spanned<u64>>, key: &str, default: u64| -> R<u64> {
            match v {
                None => Ok(default),
                Some(v) if *v.get_ref() >= 1 => Ok(*v.get_ref()),
                Some(v) => self.edge_err(v.span(), key, "must be at least 1"),
            }
        };
        let as_u64 = |v: &Option<Spanned<usize>>| {
            v.as_ref()
                .map(|v| Spanned::new(v.span(), *v.get_ref() as u64))
        };
        let max_concurrent =
            positive(&as_u64(&s.max_concurrent), "sidecar.max_concurrent", 16)? as usize;
        let max_concurrent_per_tenant = match as_u64(&s.max_concurrent_per_tenant) {
            Some(v) if *v.get_ref() as usize > max_concurrent => {
                return self.edge_err(
                    v.span(),
                    "sidecar.max_concurrent_per_tenant",
                    format!(
                        "{} exceeds sidecar.max_concurrent ({max_concurrent})",
                        v.get_ref()
                    ),
                );
            }
            // Half by default, so one tenant always leaves room for others.
            v => positive(
                &v,
                "sidecar.max_concurrent_per_tenant",
                (max_concurrent as u64 / 2).max(1),
            )? as usize,
        };
        Ok(Some(crate::Sidecar {
            socket: match &s.socket {
                Some(p) => self.edge_dir.join(p.get_ref()),
                // A directory of its own, which the sidecar makes 0700.
                None => data_dir.join("sidecar").join("sidecar.sock"),
            },
            allow,
            max_concurrent,
            max_concurrent_per_tenant,
            timeout: Duration::from_millis(positive(&s.timeout_ms, "sidecar.timeout_ms", 10_000)?),
            max_output_bytes: match as_u64(&s.max_output_bytes) {
                Some(v) if *v.get_ref() > crate::sidecar::MAX_OUTPUT_BYTES => {
                    return self.edge_err(
                        v.span(),
                        "sidecar.max_output_bytes",
                        format!(
                            "{} is over the largest allowed, {} (8 MiB): both streams must fit one answer on the socket",
                            v.get_ref(),
                            crate::sidecar::MAX_OUTPUT_BYTES
                        ),
                    );
                }
                v => positive(&v, "sidecar.max_output_bytes", 1 << 20)?,
            } as usize,
            child_limits: crate::SidecarChildLimits {
                cpu_seconds: positive(&s.child_cpu_seconds, "sidecar.child_cpu_seconds", 30)?,
                address_space_bytes: match &s.child_address_space_bytes {
                    // Below this no dynamically linked program starts.
                    Some(v) if *v.get_ref() < 16 << 20 => {
                        return self.edge_err(
                            v.span(),
                            "sidecar.child_address_space_bytes",
                            format!("{} is under 16777216 (16 MiB), too little for any program to start", v.get_ref()),
                        );
                    }
                    v => positive(v, "sidecar.child_address_space_bytes", 4 << 30)?,
                },
                processes: positive(&s.child_processes, "sidecar.child_processes", 4096)?,
                file_bytes: positive(&s.child_file_bytes, "sidecar.child_file_bytes", 1 << 30)?,
            },
        }))
    }

    /// A list of content types (`type/subtype`, no parameters).
    fn content_types(&self, list: &[Spanned<String>], key: &str) -> R<Vec<String>> {
        let mut types = Vec::new();
        for (ci, c) in list.iter().enumerate() {
            let ct = crate::site::check_content_type(c.get_ref())
                .or_else(|e| self.edge_err(c.span(), &format!("{key}[{ci}]"), e))?;
            types.push(ct);
        }
        Ok(types)
    }

    /// A tenant's `[[tenant.site]]` entries, rules compiled.
    fn sites(
        &self,
        t: &edge::TenantSection,
        key: &str,
        tenant_hosts: &[HostPattern],
        components: &BTreeMap<String, Component>,
        granted: &BTreeSet<String>,
    ) -> R<Vec<crate::Site>> {
        use crate::site::{
            DEFAULT_CONTENT_TYPES, DEFAULT_ORIGIN_TIMEOUT_MS, check_origin, read_rules_file,
        };
        let mut out: Vec<crate::Site> = Vec::new();
        let mut claimed_hosts = BTreeSet::new();
        for (si, s) in t.sites.iter().enumerate() {
            let key = format!("{key}.site[{si}]");
            let name = s.name.get_ref();
            if !is_label(name) {
                return self.edge_err(
                    s.name.span(),
                    &format!("{key}.name"),
                    format!(
                        "{name:?} is not a site name (lower-case letters, digits, '_' and '-')"
                    ),
                );
            }
            if out.iter().any(|o| &o.name == name) {
                return self.edge_err(
                    s.name.span(),
                    &format!("{key}.name"),
                    format!("site {name:?} is defined twice in this tenant"),
                );
            }
            if s.hosts.is_empty() {
                return self.edge_err(
                    s.name.span(),
                    &format!("{key}.hosts"),
                    "a site needs at least one host (\"clone.example\")",
                );
            }
            let mut hosts = Vec::new();
            for (hi, h) in s.hosts.iter().enumerate() {
                match HostPattern::parse(h.get_ref()) {
                    Ok(HostPattern::Exact(name))
                        if !tenant_hosts.iter().any(|p| p.matches(&name)) =>
                    {
                        return self.edge_err(
                            h.span(),
                            &format!("{key}.hosts[{hi}]"),
                            format!("host {name:?} is not among this tenant's hosts, so no request for it reaches the site"),
                        );
                    }
                    Ok(HostPattern::Exact(name)) if claimed_hosts.contains(&name) => {
                        return self.edge_err(
                            h.span(),
                            &format!("{key}.hosts[{hi}]"),
                            format!("host {name:?} already belongs to another site of this tenant"),
                        );
                    }
                    Ok(HostPattern::Exact(name)) => {
                        claimed_hosts.insert(name.clone());
                        hosts.push(name)
                    }
                    Ok(_) => {
                        return self.edge_err(
                            h.span(),
                            &format!("{key}.hosts[{hi}]"),
                            "site hosts are exact names (no wildcards)",
                        );
                    }
                    Err(e) => return self.edge_err(h.span(), &format!("{key}.hosts[{hi}]"), e),
                }
            }
            let origin = check_origin(s.origin.get_ref())
                .or_else(|e| self.edge_err(s.origin.span(), &format!("{key}.origin"), e))?;
            let content_types = match &s.content_types {
                None => DEFAULT_CONTENT_TYPES
                    .iter()
                    .map(|c| c.to_string())
                    .collect(),
                Some(list) => self.content_types(list, &format!("{key}.content_types"))?,
            };
            let component = match &s.component {
                None => "rewriter".to_string(),
                Some(c) => c.get_ref().clone(),
            };
            let component_span = s.component.as_ref().map_or(s.name.span(), |c| c.span());
            if !components.contains_key(&component) {
                let known: Vec<_> = components.keys().map(String::as_str).collect();
                return self.edge_err(
                    component_span,
                    &format!("{key}.component"),
                    format!(
                        "no component {component:?} in the application to proxy this site; it has: {}",
                        known.join(", ")
                    ),
                );
            }
            if !granted.contains(&component) {
                return self.edge_err(
                    component_span,
                    &format!("{key}.component"),
                    format!("component {component:?} is not among this tenant's components"),
                );
            }
            let origin_timeout_ms = match &s.origin_timeout_ms {
                None => DEFAULT_ORIGIN_TIMEOUT_MS,
                Some(t) if *t.get_ref() >= 1 => *t.get_ref(),
                Some(t) => {
                    return self.edge_err(
                        t.span(),
                        &format!("{key}.origin_timeout_ms"),
                        "must be at least 1 (milliseconds)",
                    );
                }
            };
            let mut rules = Vec::new();
            let mut rules_file = None;
            if let Some(f) = &s.rules_file {
                let path = self.edge_dir.join(f.get_ref());
                rules = read_rules_file(&path)
                    .or_else(|e| self.edge_err(f.span(), &format!("{key}.rules_file"), e))?;
                rules_file = Some(path);
            }
            let from_file = rules.len();
            let mut rule_content_types = vec![Vec::new(); from_file];
            for (ri, r) in s.rules.iter().enumerate() {
                let types = match &r.content_types {
                    None => Vec::new(),
                    Some(list) => {
                        let types =
                            self.content_types(list, &format!("{key}.rules[{ri}].content_types"))?;
                        if let Some((ci, t)) = types
                            .iter()
                            .enumerate()
                            .find(|(_, t)| !content_types.contains(t))
                        {
                            return self.edge_err(
                                list[ci].span(),
                                &format!("{key}.rules[{ri}].content_types[{ci}]"),
                                format!(
                                    "{t:?} is not among the site's content_types ({}), so the rule would never apply",
                                    content_types.join(", ")
                                ),
                            );
                        }
                        types
                    }
                };
                rule_content_types.push(types);
                let flags = r.flags.as_ref().map_or("", |f| f.get_ref().as_str());
                let rule = rewrite_engine::Rule::new(r.pattern.get_ref(), r.replacement.get_ref())
                    .with_flags(flags)
                    .or_else(|e| {
                        let span = r.flags.as_ref().map_or(0..0, |f| f.span());
                        self.edge_err(span, &format!("{key}.rules[{ri}].flags"), e)
                    })?;
                rules.push(rule);
            }
            // Compiled only to refuse bad rules now; the site's component
            // compiles its own copy.
            rewrite_engine::RuleSet::new(&rules).or_else(|e| {
                // Point at the inline rule, or at the file for its rules.
                let (span, what) = if e.index > from_file {
                    let r = &s.rules[e.index - from_file - 1];
                    (
                        r.pattern.span(),
                        format!("{key}.rules[{}]", e.index - from_file - 1),
                    )
                } else {
                    let span = s.rules_file.as_ref().map_or(0..0, |f| f.span());
                    (span, format!("{key}.rules_file"))
                };
                let msg = if e.index > from_file {
                    e.what.clone()
                } else {
                    format!(
                        "{}: {e}",
                        s.rules_file.as_ref().map_or("", |f| f.get_ref().as_str())
                    )
                };
                self.edge_err(span, &what, msg)
            })?;
            out.push(crate::Site {
                name: name.clone(),
                hosts,
                origin,
                component,
                origin_timeout: Duration::from_millis(origin_timeout_ms),
                content_types,
                rules,
                rule_content_types,
                rules_file,
            });
        }
        Ok(out)
    }

    /// Values of the application variables for one tenant: its variables and
    /// secrets, else the manifest defaults. `None` marks a required variable
    /// without a value (an error only if a template uses it).
    fn tenant_values(
        &self,
        t: &edge::TenantSection,
        key: &str,
        app_vars: &BTreeMap<String, spin::AppVariable>,
    ) -> R<BTreeMap<String, Result<String, String>>> {
        let declared = || {
            app_vars
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut values: BTreeMap<String, Result<String, String>> = app_vars
            .iter()
            .map(|(n, v)| {
                let provided = self.runtime.get().and_then(|r| r.variables.get(n));
                let value = match (provided.or(v.default.as_ref()), v.required) {
                    (Some(d), _) => Ok(d.clone()),
                    (None, _) => Err(format!(
                        "variable {n:?} is required but tenant {:?} gives no value",
                        t.name.get_ref()
                    )),
                };
                (n.clone(), value)
            })
            .collect();
        for (n, v) in &t.variables {
            let k = format!("{key}.variables.{}", n.get_ref());
            match app_vars.get(n.get_ref()) {
                None => {
                    return self.edge_err(
                        n.span(),
                        &k,
                        format!(
                            "the application declares no variable {:?}; it declares: {}",
                            n.get_ref(),
                            declared()
                        ),
                    );
                }
                Some(av) if av.secret => {
                    return self.edge_err(
                        n.span(),
                        &k,
                        format!(
                            "{:?} is a secret: give it under [tenant.secrets] (from env or file)",
                            n.get_ref()
                        ),
                    );
                }
                Some(_) => values.insert(n.get_ref().clone(), Ok(v.get_ref().clone())),
            };
        }
        for (n, s) in &t.secrets {
            let k = format!("{key}.secrets.{}", n.get_ref());
            if !app_vars.contains_key(n.get_ref()) {
                return self.edge_err(
                    n.span(),
                    &k,
                    format!(
                        "the application declares no variable {:?}; it declares: {}",
                        n.get_ref(),
                        declared()
                    ),
                );
            }
            let value = match s.get_ref() {
                SecretSource::Inline(v) => v.clone(),
                SecretSource::Generate { generate } => {
                    let path = self
                        .keys_dir
                        .get()
                        .expect("the server section resolves first")
                        .join(t.name.get_ref())
                        .join(format!(
                            "{}.{}",
                            n.get_ref(),
                            crate::secrets::extension(generate)
                        ));
                    match crate::secrets::generated(generate, &path) {
                        Ok((value, new)) => {
                            self.generated.borrow_mut().extend(new);
                            value
                        }
                        Err(e) => return self.edge_err(s.span(), &k, e),
                    }
                }
                SecretSource::Env { env } => std::env::var(env).or_else(|_| {
                    self.edge_err(
                        s.span(),
                        &k,
                        format!("environment variable {env:?} is not set"),
                    )
                })?,
                SecretSource::File { file } => {
                    let path = self.edge_dir.join(file);
                    std::fs::read_to_string(&path)
                        .map(|v| v.trim_end_matches(['\n', '\r']).to_string())
                        .or_else(|e| {
                            self.edge_err(
                                s.span(),
                                &k,
                                format!("cannot read secret file {}: {e}", path.display()),
                            )
                        })?
                }
            };
            values.insert(n.get_ref().clone(), Ok(value));
        }
        Ok(values)
    }
}

fn parse_session_key(s: &str) -> Result<SessionKey, String> {
    const ALLOWED: &str = "allowed: \"header:NAME\", \"cookie:NAME\", \"path:N\" (N-th path segment, from 1), \"host\", \"bearer\" (the Authorization bearer token, hashed)";
    if s == "host" {
        return Ok(SessionKey::Host);
    }
    if s == "bearer" {
        return Ok(SessionKey::Bearer);
    }
    match s.split_once(':') {
        Some(("header", name)) if !name.is_empty() && http_token(name) => {
            Ok(SessionKey::Header(name.to_ascii_lowercase()))
        }
        Some(("cookie", name)) if !name.is_empty() && http_token(name) => {
            Ok(SessionKey::Cookie(name.to_string()))
        }
        Some(("path", n)) => match n.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(SessionKey::PathSegment(n)),
            _ => Err(format!(
                "{s:?}: the path segment must be a number from 1 ({ALLOWED})"
            )),
        },
        _ => Err(format!("{s:?} is not a session key ({ALLOWED})")),
    }
}

fn http_token(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Most key-value store (and SQLite database) labels one component may
/// name.
const MAX_LABELS: usize = 64;

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Spin's component ids: kebab-case words of lower-case letters and digits.
fn check_component_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.split('-').all(|w| {
            !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
        && id.as_bytes()[0].is_ascii_lowercase();
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{id:?} is not a component id (kebab-case: lower-case letters and digits in '-'-separated words, starting with a letter)"
        ))
    }
}

/// Spin's variable names: lower-case letters, digits and '_', starting with a letter.
pub fn check_variable_name(name: &str) -> Result<(), String> {
    let ok = name.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a variable name (lower-case letters, digits and '_', starting with a letter)"
        ))
    }
}

/// Renders a Spin variable template from the application's variables
/// (within [`crate::template::MAX_RENDERED_BYTES`]).
fn render_template(
    template: &str,
    values: &BTreeMap<String, Result<String, String>>,
) -> Result<String, String> {
    crate::template::render(
        template,
        crate::template::MAX_RENDERED_BYTES,
        |name| match values.get(name) {
            Some(Ok(v)) => Ok(v.as_str()),
            Some(Err(e)) => Err(e.clone()),
            None => Err(format!(
                "template {template:?} names {name:?}, which is not in the application's [variables]"
            )),
        },
    )
}

/// A tenant's SQLite statements at once by default: the host's cores, so
/// one tenant's statements take at most that many blocking threads (and
/// cores) however many of its instances run them.
fn default_sqlite_statements() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// `pool.total_memory_bytes` by default: three quarters of the memory the
/// host may use (the machine's `MemTotal`, or its cgroup's `memory.max`
/// if lower, as in a container), the rest for the host's own (buffers,
/// compiled code) and the system; 16 GiB where neither can be read.
fn default_total_memory_bytes() -> u64 {
    let mem_total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().strip_suffix("kB"))
                .and_then(|kb| kb.trim().parse::<u64>().ok())
        })
        .map(|kb| kb.saturating_mul(1024));
    // The cgroup's limit: v1's "N:memory:/PATH" line of /proc/self/cgroup,
    // else v2's "0::/PATH" ("max", or a huge number, when unbounded).
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let limit = |line: &str| {
        let file = if let Some((_, path)) = line.split_once(":memory:") {
            format!("/sys/fs/cgroup/memory{}/memory.limit_in_bytes", path.trim())
        } else {
            format!(
                "/sys/fs/cgroup{}/memory.max",
                line.strip_prefix("0::")?.trim()
            )
        };
        std::fs::read_to_string(file)
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()
    };
    let cgroup_max = cgroups.lines().find_map(limit);
    let usable = match (mem_total, cgroup_max) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    usable.map_or(16 << 30, |bytes| bytes / 4 * 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_render_and_fail_precisely() {
        let mut v = BTreeMap::new();
        v.insert("a".to_string(), Ok("1".to_string()));
        v.insert("b".to_string(), Err("b is required".to_string()));
        assert_eq!(render_template("x{{ a }}y{{a}}", &v).unwrap(), "x1y1");
        assert_eq!(render_template("{{ b }}", &v).unwrap_err(), "b is required");
        assert!(
            render_template("{{ c }}", &v)
                .unwrap_err()
                .contains("not in the application")
        );
        assert!(
            render_template("{{ a", &v)
                .unwrap_err()
                .contains("unclosed")
        );
    }

    #[test]
    fn session_keys() {
        assert_eq!(
            parse_session_key("header:X-Session").unwrap(),
            SessionKey::Header("x-session".into())
        );
        assert_eq!(
            parse_session_key("path:2").unwrap(),
            SessionKey::PathSegment(2)
        );
        assert!(parse_session_key("path:0").is_err());
        assert_eq!(parse_session_key("bearer").unwrap(), SessionKey::Bearer);
        assert!(
            parse_session_key("query:x")
                .unwrap_err()
                .contains("allowed")
        );
    }
}
