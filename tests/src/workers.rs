//! Workers for the tests: the corpus in `tests/workers/corpus/` (each a
//! directory with `worker.js` and `wrangler.toml`, built into
//! `build/workers/NAME.wasm` by `scripts/workers.sh`), served side by side
//! by workerd (from npm, `workers/node_modules`) and by edge.

use crate::{Edge, TempDir, repo};
use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One Worker of the corpus, as its wrangler.toml describes it.
pub struct CorpusWorker {
    /// Directory name (and route prefix `/NAME/`).
    pub name: String,
    /// Its directory.
    pub dir: PathBuf,
    /// `[vars]`, as TOML values.
    pub vars: Vec<(String, toml::Value)>,
    /// `[secrets] required`.
    pub secrets: Vec<String>,
    /// `compatibility_date`.
    pub compatibility_date: String,
    /// `kv_namespaces` bindings.
    pub kv_namespaces: Vec<String>,
    /// `services`: (binding, Worker).
    pub services: Vec<(String, String)>,
    /// Whether a route leads to it (`workers_dev = false`: no, only other
    /// Workers' service bindings reach it).
    pub routed: bool,
}

impl CorpusWorker {
    /// The corpus Worker `name`.
    pub fn load(name: &str) -> Self {
        let dir = repo().join("tests/workers/corpus").join(name);
        let text = std::fs::read_to_string(dir.join("wrangler.toml"))
            .unwrap_or_else(|e| panic!("{name}/wrangler.toml: {e}"));
        let config: toml::Table = text.parse().expect("wrangler.toml");
        let vars = config
            .get("vars")
            .and_then(|v| v.as_table())
            .map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let secrets = config
            .get("secrets")
            .and_then(|s| s.get("required"))
            .and_then(|r| r.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let compatibility_date = config
            .get("compatibility_date")
            .and_then(|d| d.as_str())
            .unwrap_or("2024-09-23")
            .to_string();
        let kv_namespaces = config
            .get("kv_namespaces")
            .and_then(|k| k.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|ns| ns.get("binding").and_then(|b| b.as_str()).map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let services = config
            .get("services")
            .and_then(|k| k.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| {
                        let field = |f: &str| s.get(f).and_then(|b| b.as_str()).map(String::from);
                        Some((field("binding")?, field("service")?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            name: name.to_string(),
            dir,
            vars,
            secrets,
            compatibility_date,
            kv_namespaces,
            services,
            routed: config.get("workers_dev").and_then(|v| v.as_bool()) != Some(false),
        }
    }

    /// `names` and every Worker their service bindings reach, each once.
    pub fn load_with_services(names: &[&str]) -> Vec<Self> {
        let mut workers: Vec<Self> = Vec::new();
        let mut queue: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        while let Some(name) = queue.pop() {
            if workers.iter().any(|w| w.name == name) {
                continue;
            }
            let w = Self::load(&name);
            queue.extend(w.services.iter().map(|(_, s)| s.clone()));
            workers.push(w);
        }
        workers
    }

    /// The component `scripts/workers.sh` built from it.
    pub fn component(&self) -> PathBuf {
        let path = repo()
            .join("build/workers")
            .join(format!("{}.wasm", self.name));
        assert!(
            path.exists(),
            "{} is missing: run `make workers` (scripts/workers.sh)",
            path.display()
        );
        path
    }
}

/// The value each test gives a Worker's secret `name`.
pub fn secret_value(name: &str) -> String {
    format!("test-secret-{}", name.to_ascii_lowercase())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn json_of(value: &toml::Value) -> serde_json::Value {
    serde_json::to_value(value).expect("TOML values are JSON values")
}

/// The reference: workerd through miniflare (`workers/reference.mjs`),
/// serving some corpus Workers, each under `/NAME/...` on one port.
pub struct Reference {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    _dir: TempDir,
}

impl Reference {
    /// Starts the reference with `workers`, their vars, secrets and KV
    /// namespaces.
    pub fn start(workers: &[CorpusWorker]) -> Self {
        let dir = TempDir::new("reference");
        let port = free_port();
        let list: Vec<serde_json::Value> = workers
            .iter()
            .map(|w| {
                let mut bindings = serde_json::Map::new();
                for (name, value) in &w.vars {
                    bindings.insert(name.clone(), json_of(value));
                }
                for name in &w.secrets {
                    bindings.insert(name.clone(), secret_value(name).into());
                }
                serde_json::json!({
                    "name": w.name,
                    "script": w.dir.join("worker.js"),
                    "compatibilityDate": w.compatibility_date,
                    "bindings": bindings,
                    "kv": w.kv_namespaces,
                    "services": w.services.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
                })
            })
            .collect();
        let config = dir.write(
            "reference.json",
            &serde_json::json!({ "port": port, "workers": list }).to_string(),
        );
        let log = std::fs::File::create(dir.path().join("reference.log")).expect("log file");
        let mut child = Command::new("node")
            .arg(repo().join("workers/reference.mjs"))
            .arg(&config)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting workers/reference.mjs: {e}"));
        let started = Instant::now();
        let addr = format!("127.0.0.1:{port}");
        while std::net::TcpStream::connect(&addr).is_err() {
            if started.elapsed() > Duration::from_secs(60)
                || child.try_wait().ok().flatten().is_some()
            {
                let _ = child.kill();
                panic!(
                    "the reference did not listen on {addr}: {}",
                    std::fs::read_to_string(dir.path().join("reference.log")).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            url: format!("http://{addr}"),
            _dir: dir,
        }
    }
}

impl Drop for Reference {
    /// Closes the reference's stdin, so that it disposes of miniflare and
    /// the workerd it started (a kill would leave workerd running), and
    /// kills it only if it has not gone within 10 s.
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Spin manifest serving `workers` on edge, each under `/NAME/...`,
/// its secrets given as variables.
pub fn spin_toml(workers: &[CorpusWorker]) -> String {
    let mut s =
        String::from("spin_manifest_version = 2\n[application]\nname = \"workers\"\n[variables]\n");
    for w in workers {
        for secret in &w.secrets {
            let _ = writeln!(
                s,
                "{} = {{ default = {:?}, secret = true }}",
                secret.to_ascii_lowercase(),
                secret_value(secret)
            );
        }
    }
    for w in workers {
        let _ = write!(
            s,
            "{2}[component.{0}]\nsource = {1:?}\nallowed_outbound_hosts = [\"http://127.0.0.1:*\"]\n",
            w.name,
            w.component().display().to_string(),
            if w.routed {
                format!(
                    "[[trigger.http]]\nroute = \"/{0}/...\"\ncomponent = \"{0}\"\n",
                    w.name
                )
            } else {
                String::new()
            }
        );
        if !w.kv_namespaces.is_empty() {
            let labels: Vec<String> = w
                .kv_namespaces
                .iter()
                .map(|b| b.to_ascii_lowercase())
                .collect();
            let _ = writeln!(s, "key_value_stores = {labels:?}");
        }
        if !w.secrets.is_empty() {
            let _ = writeln!(s, "[component.{}.variables]", w.name);
            for secret in &w.secrets {
                let v = secret.to_ascii_lowercase();
                let _ = writeln!(s, "{v} = \"{{{{ {v} }}}}\"");
            }
        }
    }
    s
}

/// edge serving `workers` (see [`spin_toml`]) with `extra` edge-config.
pub fn edge(workers: &[CorpusWorker], extra: &str) -> Edge {
    let edge_toml = format!(
        "app = \"spin.toml\"\n[outbound]\nallow_ranges = [\"127.0.0.1/32\"]\n[[tenant]]\nname = \"default\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n{extra}"
    );
    Edge::start(&spin_toml(workers), &edge_toml)
}
