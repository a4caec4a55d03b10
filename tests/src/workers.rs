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
        Self {
            name: name.to_string(),
            dir,
            vars,
            secrets,
            compatibility_date,
        }
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

/// workerd serving some corpus Workers, each on its own port.
pub struct Workerd {
    child: Child,
    /// `http://127.0.0.1:PORT` per Worker, in the order given.
    pub urls: Vec<(String, String)>,
    _dir: TempDir,
}

impl Workerd {
    /// The workerd binary npm installed for `workers/`.
    pub fn bin() -> PathBuf {
        repo().join("workers/node_modules/@cloudflare/workerd-linux-64/bin/workerd")
    }

    /// Starts workerd with `workers`, each with its vars and secrets.
    pub fn start(workers: &[CorpusWorker]) -> Self {
        let dir = TempDir::new("workerd");
        let mut services = String::new();
        let mut sockets = String::new();
        let mut defs = String::new();
        let mut urls = Vec::new();
        for (i, w) in workers.iter().enumerate() {
            let port = free_port();
            urls.push((w.name.clone(), format!("http://127.0.0.1:{port}")));
            let _ = write!(services, "(name = \"w{i}\", worker = .w{i}),");
            let _ = write!(
                sockets,
                "(name = \"s{i}\", address = \"127.0.0.1:{port}\", http = (), service = \"w{i}\"),"
            );
            let mut bindings = String::new();
            for (name, value) in &w.vars {
                match value {
                    toml::Value::String(s) => {
                        let _ = write!(bindings, "(name = {name:?}, text = {s:?}),");
                    }
                    other => {
                        let json = json_of(other).to_string();
                        let _ = write!(bindings, "(name = {name:?}, json = {json:?}),");
                    }
                }
            }
            for name in &w.secrets {
                let _ = write!(
                    bindings,
                    "(name = {name:?}, text = {:?}),",
                    secret_value(name)
                );
            }
            // capnp embeds files relative to the config (an absolute path
            // is looked up on its import path).
            let source = std::fs::read(w.dir.join("worker.js")).expect("worker.js");
            dir.write_bytes(&format!("w{i}.js"), &source);
            let _ = writeln!(
                defs,
                "const w{i} :Workerd.Worker = (modules = [(name = \"worker.js\", esModule = embed \"w{i}.js\")], bindings = [{bindings}], compatibilityDate = {:?});",
                w.compatibility_date
            );
        }
        let config = format!(
            "using Workerd = import \"/workerd/workerd.capnp\";\nconst config :Workerd.Config = (services = [{services}], sockets = [{sockets}]);\n{defs}"
        );
        let path = dir.write("workerd.capnp", &config);
        let log = std::fs::File::create(dir.path().join("workerd.log")).expect("log file");
        let mut child = Command::new(Self::bin())
            .arg("serve")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", Self::bin().display()));
        let started = Instant::now();
        for (_, url) in &urls {
            let addr = url.trim_start_matches("http://").to_string();
            while std::net::TcpStream::connect(&addr).is_err() {
                if started.elapsed() > Duration::from_secs(30)
                    || child.try_wait().ok().flatten().is_some()
                {
                    let _ = child.kill();
                    panic!(
                        "workerd did not listen on {addr}: {}\nconfig:\n{config}",
                        std::fs::read_to_string(dir.path().join("workerd.log")).unwrap_or_default()
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Self {
            child,
            urls,
            _dir: dir,
        }
    }

    /// The URL serving Worker `name`.
    pub fn url(&self, name: &str) -> &str {
        &self
            .urls
            .iter()
            .find(|(n, _)| n == name)
            .expect("a started Worker")
            .1
    }
}

impl Drop for Workerd {
    fn drop(&mut self) {
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
            "[[trigger.http]]\nroute = \"/{0}/...\"\ncomponent = \"{0}\"\n[component.{0}]\nsource = {1:?}\n",
            w.name,
            w.component().display().to_string()
        );
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
        "app = \"spin.toml\"\n[[tenant]]\nname = \"default\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n{extra}"
    );
    Edge::start(&spin_toml(workers), &edge_toml)
}
