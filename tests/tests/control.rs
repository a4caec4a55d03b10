//! The control plane end to end, on SQLite and on MariaDB (every test
//! runs on both): tenants and tokens through the API, `edge deploy` of
//! real components, activation and rollback under continuous load with no
//! failed request, a gradual rollout's split, the smoke check, a restart;
//! tenants kept apart on every endpoint; bad input refused precisely with
//! nothing changed.

use bytes::Bytes;
use edge_tests::mariadb::Mariadb;
use edge_tests::{Edge, TempDir, client, component, link_shared_cache, request};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Where the control plane keeps its state in one test.
enum Backend {
    Sqlite,
    Mariadb(Mariadb),
}

impl Backend {
    fn sqlite() -> Self {
        Backend::Sqlite
    }

    fn mariadb() -> Self {
        Backend::Mariadb(Mariadb::start("edge", |_| Vec::new()))
    }

    /// The `[control]` section for it.
    fn control_section(&self) -> String {
        match self {
            Backend::Sqlite => "[control]\nlisten = \"127.0.0.1:0\"\n".into(),
            Backend::Mariadb(db) => format!(
                "[control]\nlisten = \"127.0.0.1:0\"\ndatabase = \"{}\"\n",
                db.url("edge")
            ),
        }
    }
}

/// Every scenario on both databases.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $name() { super::$name(super::Backend::sqlite()) })*
        }
        mod mariadb {
            $(#[test] fn $name() { super::$name(super::Backend::mariadb()) })*
        }
    };
}

on_both!(
    deploy_activate_roll_back_and_restart,
    a_compile_over_its_limits_fails_the_upload_alone,
    the_api_holds_against_slow_oversized_and_flooding_clients,
    artifacts_are_shared_through_an_oci_registry,
    users_log_in_with_a_session_cookie_and_csrf_token,
    tenant_shares_apply_at_once,
    spin_apps_deploy_whole_with_their_variables,
    spin_apps_deploy_with_their_files,
    spin_apps_reach_outbound_hosts_their_variables_name,
    sites_rules_validate_preview_deploy_and_roll_back,
    tenants_cannot_reach_each_other,
    bad_input_is_refused_and_changes_nothing,
    old_versions_make_room_for_new_ones,
);

/// A node running the control plane: its own data directory (the compile
/// cache shared with the other tests), `extra` appended to its config.
struct Node {
    edge: Edge,
    data: TempDir,
    edge_toml: String,
    backend: Backend,
}

impl Node {
    fn start(backend: Backend, extra: &str) -> Self {
        Self::start_env(backend, extra, &[])
    }

    /// Like [`Node::start`] with extra environment variables.
    fn start_env(backend: Backend, extra: &str, env: &[(&str, &str)]) -> Self {
        let data = TempDir::new("control-data");
        link_shared_cache(data.path());
        let edge_toml = format!(
            "app = \"spin.toml\"\n{}\n{extra}\n[[tenant]]\nname = \"operator\"\nhosts = [\"operator.test\", \"*\"]\ncomponents = [\"*\"]\n",
            backend.control_section()
        );
        let edge = Edge::start_env(&edge_tests::operator_spin(), &edge_toml, data.path(), env);
        Self {
            edge,
            data,
            edge_toml,
            backend,
        }
    }

    /// Stops the node and starts it again on the same data and database.
    fn restart(self) -> Self {
        self.restart_after(|_| {})
    }

    /// Stops the node, runs `between` on its data directory, starts it again.
    fn restart_after(self, between: impl FnOnce(&std::path::Path)) -> Self {
        let Node {
            mut edge,
            data,
            edge_toml,
            backend,
        } = self;
        edge.signal(libc::SIGTERM);
        assert!(
            edge.wait(Duration::from_secs(20)).is_some(),
            "edge did not stop"
        );
        between(data.path());
        let edge = Edge::start_with(&edge_tests::operator_spin(), &edge_toml, data.path());
        Node {
            edge,
            data,
            edge_toml,
            backend,
        }
    }

    fn api(&self) -> String {
        self.edge
            .control
            .clone()
            .expect("the control API's address")
    }

    fn operator_token(&self) -> String {
        edge_tests::operator_token(self.data.path())
    }

    /// Calls the API; (status, JSON or Null).
    async fn call(&self, method: &str, path: &str, token: &str, body: Bytes) -> (u16, Value) {
        let auth = format!("Bearer {token}");
        let (status, text) = request(
            &client(),
            method,
            &format!("{}{path}", self.api()),
            &[("authorization", auth.as_str())],
            body,
        )
        .await;
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        self.call("POST", path, token, Bytes::from(body.to_string()))
            .await
    }

    async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        self.call("GET", path, token, Bytes::new()).await
    }

    /// Creates a tenant serving `host` and a token of it.
    async fn tenant(&self, name: &str, host: &str, quota: Value) -> String {
        let op = self.operator_token();
        let (s, t) = self
            .post(
                "/v1/tenants",
                &op,
                json!({"name": name, "hosts": [host], "quota": quota}),
            )
            .await;
        assert_eq!(s, 201, "{t}; log: {}", self.edge.log());
        let (s, t) = self
            .post(
                &format!("/v1/tenants/{name}/tokens"),
                &op,
                json!({"name": "ci"}),
            )
            .await;
        assert_eq!(s, 201, "{t}");
        t["token"].as_str().unwrap().to_string()
    }

    /// Runs `edge ARGS` against this node's API with `token`.
    fn cli(&self, token: &str, args: &[&str]) -> (i32, String, String) {
        edge_tests::edge_cli(&self.api(), token, self.data.path(), args)
    }

    /// GET `path` on `host` through the application listener.
    async fn serve(&self, host: &str, path: &str) -> (u16, String) {
        request(
            &client(),
            "GET",
            &format!("{}{path}", self.edge.url),
            &[("host", host)],
            Bytes::new(),
        )
        .await
    }

    /// What the tenant can see of its state: artifacts, and per app its
    /// versions and deployments.
    async fn state(&self, tenant: &str, token: &str, apps: &[&str]) -> Value {
        let mut out = json!({"artifacts": self.get(&format!("/v1/tenants/{tenant}/artifacts"), token).await.1});
        for app in apps {
            let base = format!("/v1/tenants/{tenant}/apps/{app}");
            out[app] = json!({
                "versions": self.get(&format!("{base}/versions"), token).await.1,
                "deployments": self.get(&format!("{base}/deployments"), token).await.1,
            });
        }
        out
    }
}

fn wasm(name: &str) -> PathBuf {
    PathBuf::from(component(name))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Whether a body came from the echo component (else from fixtures).
fn is_echo(body: &str) -> bool {
    body.starts_with("hello from edge")
}

/// Requests on `host` without pause until stopped: counts by answer.
struct Load {
    stop: Arc<AtomicBool>,
    failed: Arc<AtomicU64>,
    echo: Arc<AtomicU64>,
    other: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<Vec<String>>>,
}

impl Load {
    fn start(url: &str, host: &str, connections: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (failed, echo, other) = (Arc::default(), Arc::default(), Arc::default());
        let mut tasks = Vec::new();
        for _ in 0..connections {
            let (stop, failed, echo, other): (
                Arc<AtomicBool>,
                Arc<AtomicU64>,
                Arc<AtomicU64>,
                Arc<AtomicU64>,
            ) = (
                stop.clone(),
                Arc::clone(&failed),
                Arc::clone(&echo),
                Arc::clone(&other),
            );
            let (url, host) = (format!("{url}/count"), host.to_string());
            tasks.push(tokio::spawn(async move {
                let c = client();
                let mut failures = Vec::new();
                while !stop.load(Relaxed) {
                    let (s, body) =
                        request(&c, "GET", &url, &[("host", host.as_str())], Bytes::new()).await;
                    if s != 200 {
                        failed.fetch_add(1, Relaxed);
                        failures.push(format!("{s}: {body}"));
                    } else if is_echo(&body) {
                        echo.fetch_add(1, Relaxed);
                    } else {
                        other.fetch_add(1, Relaxed);
                    }
                }
                failures
            }));
        }
        Self {
            stop,
            failed,
            echo,
            other,
            tasks,
        }
    }

    /// Stops; (failures, echo answers, other answers).
    async fn stop(self) -> (Vec<String>, u64, u64) {
        self.stop.store(true, Relaxed);
        let mut failures = Vec::new();
        for t in self.tasks {
            failures.extend(t.await.unwrap());
        }
        assert_eq!(failures.len() as u64, self.failed.load(Relaxed));
        (failures, self.echo.load(Relaxed), self.other.load(Relaxed))
    }

    fn answered(&self) -> u64 {
        self.echo.load(Relaxed) + self.other.load(Relaxed) + self.failed.load(Relaxed)
    }
}

async fn wait_for_answers(load: &Load, more: u64) {
    let from = load.answered();
    for _ in 0..500 {
        if load.answered() >= from + more {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the load got no answers");
}

fn deploy_activate_roll_back_and_restart(backend: Backend) {
    let node = Node::start(backend, "");
    let rt = runtime();
    let op = node.operator_token();
    let (s, t) = rt.block_on(node.post(
        "/v1/tenants",
        &op,
        json!({"name": "acme", "hosts": ["acme.test"]}),
    ));
    assert_eq!(s, 201, "{t}");
    // A tenant token from the CLI, printed once.
    let (code, out, err) = node.cli(
        &op,
        &[
            "tokens", "create", "--tenant", "acme", "--name", "ci", "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let created: Value = serde_json::from_str(&out).unwrap();
    let token = created["token"].as_str().unwrap().to_string();

    // Deploy the echo component; it answers at once.
    let echo = wasm("echo");
    let (code, out, err) = node.cli(
        &token,
        &[
            "deploy",
            echo.to_str().unwrap(),
            "--app",
            "web",
            "--smoke",
            "/",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("deployed web version 1"), "{out}");
    let (s, body) = rt.block_on(node.serve("acme.test", "/hi"));
    assert_eq!((s, body.as_str()), (200, "hello from edge: /hi\n"));

    // Activation and rollback under continuous load: no failed request.
    let fixtures = wasm("fixtures");
    let (failures, echoes, others) = rt.block_on(async {
        let load = Load::start(&node.edge.url, "acme.test", 8);
        wait_for_answers(&load, 200).await;
        let (code, _, err) = node.cli(
            &token,
            &["deploy", fixtures.to_str().unwrap(), "--app", "web"],
        );
        assert_eq!(code, 0, "{err}");
        let (s, body) = node.serve("acme.test", "/count").await;
        assert!(s == 200 && !is_echo(&body), "{s} {body}");
        wait_for_answers(&load, 200).await;
        let (code, out, err) = node.cli(&token, &["rollback", "--app", "web"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("\"version\":1"), "{out}");
        let (s, body) = node.serve("acme.test", "/count").await;
        assert!(s == 200 && is_echo(&body), "{s} {body}");
        wait_for_answers(&load, 200).await;
        load.stop().await
    });
    assert!(
        failures.is_empty(),
        "{} failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(echoes > 0 && others > 0, "echo {echoes}, fixtures {others}");

    // A gradual rollout: 30 percent to the new version, within ±5 % of
    // 10,000 requests.
    let (code, _, err) = node.cli(
        &token,
        &[
            "deploy",
            fixtures.to_str().unwrap(),
            "--app",
            "web",
            "--percent",
            "30",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let (echoes, others) = rt.block_on(async {
        let (echo, other) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut tasks = Vec::new();
        for _ in 0..10 {
            let (echo, other, url) = (
                echo.clone(),
                other.clone(),
                format!("{}/count", node.edge.url),
            );
            tasks.push(tokio::spawn(async move {
                let c = client();
                for _ in 0..1000 {
                    let (s, body) =
                        request(&c, "GET", &url, &[("host", "acme.test")], Bytes::new()).await;
                    assert_eq!(s, 200, "{body}");
                    if is_echo(&body) {
                        echo.fetch_add(1, Relaxed)
                    } else {
                        other.fetch_add(1, Relaxed)
                    };
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        (echo.load(Relaxed), other.load(Relaxed))
    });
    assert_eq!(echoes + others, 10_000);
    assert!(
        (2_500..=3_500).contains(&others),
        "new version got {others} of 10,000 (30 % ± 5 %)"
    );

    // The smoke check refuses a version that answers 500; the rollout
    // keeps serving.
    let before = rt.block_on(node.state("acme", &token, &["web"]));
    let (code, _, err) = node.cli(
        &token,
        &[
            "deploy",
            fixtures.to_str().unwrap(),
            "--app",
            "web",
            "--smoke",
            "/trap",
        ],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("smoke check GET /trap answered 500, not 200"),
        "{err}"
    );
    assert!(
        err.contains("the previous deployment keeps serving"),
        "{err}"
    );
    let after = rt.block_on(node.state("acme", &token, &["web"]));
    // The refused deployment left a version (versions are immutable and
    // made before deploying) but no deployment.
    assert_eq!(before["web"]["deployments"], after["web"]["deployments"]);
    let (_, log) = rt.block_on(node.get("/v1/tenants/acme/audit", &token));
    let refused = log
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "app.deploy" && e["outcome"] == "refused");
    assert!(
        refused.is_some_and(|e| e["detail"].as_str().unwrap().contains("/trap")),
        "{log}"
    );

    // `edge versions` lists them with what serves.
    let (code, out, err) = node.cli(&token, &["versions", "--app", "web"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("VERSION") && out.contains("30%") && out.contains("70%"),
        "{out}"
    );

    // A second partial deploy during the rollout replaces the canary and
    // keeps the version that served before the rollout.
    let (_, app) = rt.block_on(node.get("/v1/tenants/acme/apps/web", &token));
    let stable = app["deployment"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["percent"] == 70)
        .unwrap()["version"]
        .clone();
    let (code, out, err) = node.cli(
        &token,
        &[
            "deploy",
            fixtures.to_str().unwrap(),
            "--app",
            "web",
            "--percent",
            "20",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("version {stable} the rest")), "{out}");
    let (_, app) = rt.block_on(node.get("/v1/tenants/acme/apps/web", &token));
    let serving = &app["deployment"]["versions"];
    assert_eq!(
        serving[1],
        json!({"version": stable, "percent": 80}),
        "{app}"
    );

    // After a restart everything is still there and serving.
    let node = node.restart();
    let rt = runtime();
    let (s, body) = rt.block_on(node.serve("acme.test", "/hi"));
    assert_eq!(s, 200, "{body}");
    let (s, app) = rt.block_on(node.get("/v1/tenants/acme/apps/web", &token));
    assert_eq!(s, 200, "{app}");
    assert_eq!(
        app["deployment"]["versions"].as_array().unwrap().len(),
        2,
        "{app}"
    );
}

/// Every endpoint that names a tenant's object, with `T` and `A` for the
/// tenant and app names and `K` for a token id.
const TENANT_ENDPOINTS: &[(&str, &str)] = &[
    ("GET", "/v1/tenants/T"),
    ("PATCH", "/v1/tenants/T"),
    ("DELETE", "/v1/tenants/T"),
    ("GET", "/v1/tenants/T/tokens"),
    ("POST", "/v1/tenants/T/tokens"),
    ("DELETE", "/v1/tenants/T/tokens/K"),
    ("GET", "/v1/tenants/T/artifacts"),
    ("POST", "/v1/tenants/T/artifacts"),
    ("GET", "/v1/tenants/T/apps"),
    ("POST", "/v1/tenants/T/apps"),
    ("GET", "/v1/tenants/T/apps/A"),
    ("GET", "/v1/tenants/T/apps/A/versions"),
    ("POST", "/v1/tenants/T/apps/A/versions"),
    ("GET", "/v1/tenants/T/apps/A/versions/1"),
    ("GET", "/v1/tenants/T/apps/A/deployments"),
    ("POST", "/v1/tenants/T/apps/A/deployments"),
    ("POST", "/v1/tenants/T/apps/A/rollback"),
    ("GET", "/v1/tenants/T/variables"),
    ("PUT", "/v1/tenants/T/variables/x"),
    ("DELETE", "/v1/tenants/T/variables/x"),
    ("PATCH", "/v1/tenants/T/sites/S"),
    ("GET", "/v1/tenants/T/apps/A/variables"),
    ("PUT", "/v1/tenants/T/apps/A/variables/x"),
    ("DELETE", "/v1/tenants/T/apps/A/variables/x"),
    ("GET", "/v1/tenants/T/users"),
    ("POST", "/v1/tenants/T/users"),
    ("DELETE", "/v1/tenants/T/users/K"),
    ("GET", "/v1/tenants/T/sites"),
    ("POST", "/v1/tenants/T/sites"),
    ("GET", "/v1/tenants/T/sites/S"),
    ("GET", "/v1/tenants/T/sites/S/rules"),
    ("POST", "/v1/tenants/T/sites/S/rules"),
    ("GET", "/v1/tenants/T/sites/S/rules/1"),
    ("POST", "/v1/tenants/T/sites/S/preview"),
    ("POST", "/v1/tenants/T/sites/S/origin"),
    ("GET", "/v1/tenants/T/sites/S/deployments"),
    ("POST", "/v1/tenants/T/sites/S/deployments"),
    ("POST", "/v1/tenants/T/sites/S/rollback"),
    ("GET", "/v1/tenants/T/audit"),
    ("GET", "/v1/tenants/T/metrics"),
];

fn tenants_cannot_reach_each_other(backend: Backend) {
    let node = Node::start(backend, "");
    let rt = runtime();
    let a = rt.block_on(node.tenant("alpha", "alpha.test", json!({})));
    let b = rt.block_on(node.tenant("beta", "beta.test", json!({})));
    let op = node.operator_token();
    let (code, _, err) = node.cli(
        &b,
        &["deploy", wasm("echo").to_str().unwrap(), "--app", "site"],
    );
    assert_eq!(code, 0, "{err}");
    let (_, tokens) = rt.block_on(node.get("/v1/tenants/beta/tokens", &op));
    let b_token_id = tokens[0]["id"].as_str().unwrap().to_string();
    let before = rt.block_on(node.state("beta", &b, &["site"]));

    let body = json!({"name": "x", "versions": [{"version": 1, "percent": 100}]}).to_string();
    for (method, template) in TENANT_ENDPOINTS {
        // Beta's real objects and objects that exist nowhere answer alike.
        for (tenant, app, key) in [
            ("beta", "site", b_token_id.as_str()),
            ("gamma", "none", "k0000000000000000"),
        ] {
            let path = template
                .replace('T', tenant)
                .replace('A', app)
                .replace('K', key);
            let (s, v) = rt.block_on(node.call(method, &path, &a, Bytes::from(body.clone())));
            assert_eq!(s, 404, "{method} {path} as alpha: {v}");
            let message = v["error"]["message"].as_str().unwrap_or_default();
            assert_eq!(message, format!("no tenant {tenant:?}"), "{method} {path}");
        }
    }
    // Operator-only endpoints: refused to a tenant, saying nothing of others.
    for (method, path) in [
        ("POST", "/v1/tenants"),
        ("GET", "/v1/tokens"),
        ("POST", "/v1/tokens"),
        ("GET", "/v1/audit"),
        ("DELETE", "/v1/tokens/K"),
        ("GET", "/v1/users"),
        ("POST", "/v1/users"),
        ("GET", "/v1/health"),
    ] {
        let path = path.replace('K', &b_token_id);
        let (s, v) = rt.block_on(node.call(method, &path, &a, Bytes::from(body.clone())));
        assert_eq!(s, 403, "{method} {path}: {v}");
    }
    // Lists show only the caller's own.
    let (_, list) = rt.block_on(node.get("/v1/tenants", &a));
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["name"], "alpha");
    // Nothing of beta's changed, and beta still serves; alpha's host is not beta's.
    assert_eq!(before, rt.block_on(node.state("beta", &b, &["site"])));
    assert_eq!(rt.block_on(node.serve("beta.test", "/x")).0, 200);
    assert_eq!(rt.block_on(node.serve("alpha.test", "/x")).0, 404);
    // Operators reach both.
    assert_eq!(
        rt.block_on(node.get("/v1/tenants/beta/apps/site", &op)).0,
        200
    );
    assert_eq!(
        rt.block_on(node.get("/v1/tenants", &op))
            .1
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// A component with neither imports nor exports (the empty component).
const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

/// An app at its quota of versions keeps being deployable: a new version
/// deletes the oldest that neither serves nor is what a rollback returns
/// to, and is refused (deleting nothing) only when every one does.
fn old_versions_make_room_for_new_ones(backend: Backend) {
    // Uploads no version names are forgotten at once here (an hour after
    // their upload by default).
    let node = Node::start_env(backend, "", &[("EDGE_UNUSED_UPLOAD_GRACE_MS", "0")]);
    let rt = runtime();
    let token = rt.block_on(node.tenant("acme", "acme.test", json!({"max_versions": 3})));
    let deploy_component = |name: &str| {
        let (code, _, err) = node.cli(
            &token,
            &["deploy", wasm(name).to_str().unwrap(), "--app", "web"],
        );
        assert_eq!(code, 0, "{err}");
    };
    let deploy = || deploy_component("echo");
    let artifacts = || -> Vec<String> {
        let (_, list) = rt.block_on(node.get("/v1/tenants/acme/artifacts", &token));
        list.as_array()
            .unwrap()
            .iter()
            .map(|a| a["digest"].as_str().unwrap().to_string())
            .collect()
    };
    let numbers = || -> Vec<i64> {
        let (_, list) = rt.block_on(node.get("/v1/tenants/acme/apps/web/versions", &token));
        let mut n: Vec<i64> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["number"].as_i64().unwrap())
            .collect();
        n.sort_unstable();
        n
    };
    deploy_component("fixtures");
    let fixtures = artifacts();
    for _ in 0..3 {
        deploy();
    }
    // Version 4 took version 1's place: 3 serves, 2 is the rollback. The
    // fixtures component only version 1 named is forgotten, its bytes too.
    assert_eq!(numbers(), [2, 3, 4]);
    let kept = artifacts();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(!kept.contains(&fixtures[0]), "{kept:?}");
    let blob = |digest: &str| {
        let hex = digest.trim_start_matches("sha256:");
        node.data.path().join(format!("blobs/sha256/{hex}.wasm"))
    };
    assert!(!blob(&fixtures[0]).exists());
    assert!(blob(&kept[0]).exists(), "{:?}", blob(&kept[0]));
    let (s, v) = rt.block_on(node.post("/v1/tenants/acme/apps/web/rollback", &token, json!({})));
    assert_eq!(s, 201, "{v}");
    assert_eq!(rt.block_on(node.serve("acme.test", "/x")).0, 200);
    // Serving 3, rollback to 4: 2 goes.
    deploy();
    assert_eq!(numbers(), [3, 4, 5]);
    // Eight made at once at the quota: each made, and three kept.
    let spec = json!({"components": {"w": {"digest": kept[0]}}, "routes": [{"route": "/...", "component": "w"}]}).to_string();
    let made = rt.block_on(at_once(
        8,
        node.api(),
        token.clone(),
        "/v1/tenants/acme/apps/web/versions".into(),
        spec,
    ));
    assert!(made.iter().all(|(s, _)| *s == 201), "{made:?}");
    let now = numbers();
    assert_eq!(now[..2], [3, 5], "{now:?}");
    assert_eq!(now.len(), 3, "{now:?}");
    assert_eq!(rt.block_on(node.serve("acme.test", "/x")).0, 200);
    // A quota of 2 with 5 serving and 3 the rollback: no room to make, the
    // new version is refused and nothing is deleted.
    let op = node.operator_token();
    let (s, v) = rt.block_on(node.call(
        "PATCH",
        "/v1/tenants/acme",
        &op,
        Bytes::from(json!({"quota": {"max_versions": 2}}).to_string()),
    ));
    assert_eq!(s, 200, "{v}");
    let (code, _, err) = node.cli(
        &token,
        &["deploy", wasm("echo").to_str().unwrap(), "--app", "web"],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("each serves or is what a rollback returns to"),
        "{err}"
    );
    assert_eq!(numbers(), now);
    assert_eq!(rt.block_on(node.serve("acme.test", "/x")).0, 200);
}

/// `n` POSTs of `body` to the API's `path` at once; each one's status and
/// body.
async fn at_once(
    n: usize,
    api: String,
    token: String,
    path: String,
    body: String,
) -> Vec<(u16, String)> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (url, auth, body) = (
            format!("{api}{path}"),
            format!("Bearer {token}"),
            body.clone(),
        );
        set.spawn(async move {
            let h = [
                ("authorization", auth.as_str()),
                ("content-type", "application/json"),
            ];
            request(&client(), "POST", &url, &h, Bytes::from(body)).await
        });
    }
    set.join_all().await
}

fn bad_input_is_refused_and_changes_nothing(backend: Backend) {
    let node = Node::start(backend, "");
    let rt = runtime();
    let token = rt.block_on(node.tenant(
        "acme",
        "acme.test",
        json!({"max_artifact_bytes": 200_000, "max_total_artifact_bytes": 200_000}),
    ));
    let (code, _, err) = node.cli(
        &token,
        &["deploy", wasm("echo").to_str().unwrap(), "--app", "web"],
    );
    assert_eq!(code, 0, "{err}");
    let upload = "/v1/tenants/acme/artifacts";
    let versions = "/v1/tenants/acme/apps/web/versions";
    let cases: Vec<(&str, &str, Bytes, u16, &str)> = vec![
        ("garbage", upload, Bytes::from_static(b"GIF89a..."), 422, "not a WebAssembly binary: it starts with \"GIF89a..\""),
        ("core module", upload, Bytes::from_static(b"\0asm\x01\0\0\0"), 422, "a core WebAssembly module, not a component"),
        ("no handler", upload, Bytes::from_static(EMPTY_COMPONENT), 422, "exports neither wasi:http/incoming-handler@0.2.x nor wasi:http/handler@0.3.x (it exports nothing)"),
        ("truncated", upload, Bytes::from(std::fs::read(wasm("echo")).unwrap()[..20_000].to_vec()), 422, "not a valid WebAssembly binary"),
        ("over quota", upload, Bytes::from(std::fs::read(wasm("rewriter")).unwrap()), 413, "quota allows 200000 per component (max_artifact_bytes)"),
        ("bad JSON", versions, Bytes::from_static(b"{\"components\": 7}"), 400, "invalid type: integer `7`, expected a map"),
        ("unknown digest", versions, Bytes::from(json!({"components": {"w": {"digest": format!("sha256:{}", "ab".repeat(32))}}, "routes": [{"route": "/...", "component": "w"}]}).to_string()), 422, "was uploaded by this tenant"),
        ("bad route", versions, Bytes::from(json!({"components": {"w": {"digest": "sha256:0"}}, "routes": []}).to_string()), 400, "is not a digest"),
        ("deploy of a missing version", "/v1/tenants/acme/apps/web/deployments", Bytes::from(json!({"versions": [{"version": 9, "percent": 100}]}).to_string()), 422, "app \"web\" has no version 9"),
        ("percents", "/v1/tenants/acme/apps/web/deployments", Bytes::from(json!({"versions": [{"version": 1, "percent": 60}, {"version": 1, "percent": 30}]}).to_string()), 400, "add up to 90"),
    ];
    for (what, path, body, status, message) in cases {
        let before = rt.block_on(node.state("acme", &token, &["web"]));
        let (s, v) = rt.block_on(node.call("POST", path, &token, body));
        assert_eq!(s, status, "{what}: {v}");
        let m = v["error"]["message"].as_str().unwrap_or_default();
        assert!(m.contains(message), "{what}: {m:?} lacks {message:?}");
        assert_eq!(
            before,
            rt.block_on(node.state("acme", &token, &["web"])),
            "{what} changed something"
        );
        assert_eq!(
            rt.block_on(node.serve("acme.test", "/x")).1,
            "hello from edge: /x\n",
            "{what}"
        );
    }
    // A second app on the first one's route: refused, naming it.
    let (code, _, err) = node.cli(
        &token,
        &["deploy", wasm("echo").to_str().unwrap(), "--app", "other"],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("409") && err.contains("version 1 routes \"/...\", which app \"web\" serves"),
        "{err}"
    );
    assert_eq!(
        rt.block_on(node.serve("acme.test", "/x")).1,
        "hello from edge: /x\n"
    );
    // Errors name the field.
    let (s, v) = rt.block_on(node.post(
        versions,
        &token,
        json!({"components": {"w": {"digest": "sha256:0"}}, "routes": []}),
    ));
    refused_on(s, &v, 400, "components.w.digest");

    // A component importing what its version does not grant: probe uses
    // key-value without naming a store.
    let (s, a) = rt.block_on(node.call(
        "POST",
        upload,
        &token,
        Bytes::from(std::fs::read(wasm("probe")).unwrap()),
    ));
    assert_eq!(s, 201, "{a}");
    let before = rt.block_on(node.state("acme", &token, &["web"]));
    let (s, v) = rt.block_on(node.post(versions, &token, json!({"components": {"p": {"digest": a["digest"]}}, "routes": [{"route": "/...", "component": "p"}]})));
    assert_eq!(s, 422, "{v}");
    let m = v["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("component \"p\": it imports edge:platform/process@")
            && m.contains("this tenant may run no programs"),
        "{m}"
    );
    assert_eq!(v["error"]["field"], "components.p.digest");
    assert_eq!(before, rt.block_on(node.state("acme", &token, &["web"])));
    // The total quota counts what is stored.
    let (s, v) = rt.block_on(node.call(
        "POST",
        upload,
        &token,
        Bytes::from(std::fs::read(wasm("fixtures")).unwrap()),
    ));
    assert_eq!(s, 413, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_total_artifact_bytes"),
        "{v}"
    );

    // Tokens: none, unknown, revoked, expired.
    let (s, v) = rt.block_on(node.get("/v1/whoami", ""));
    assert_eq!(s, 401, "{v}");
    let (s, v) = rt.block_on(node.get("/v1/whoami", "edge_k0123456789abcdef_secret"));
    assert_eq!(
        (s, v["error"]["message"].as_str()),
        (401, Some("unknown token"))
    );
    let op = node.operator_token();
    let (_, t) = rt.block_on(node.post(
        "/v1/tenants/acme/tokens",
        &op,
        json!({"name": "short", "expires_in_s": 1}),
    ));
    let short = t["token"].as_str().unwrap().to_string();
    let (_, t) = rt.block_on(node.post(
        "/v1/tenants/acme/tokens",
        &token,
        json!({"name": "revoked"}),
    ));
    let revoked = t["token"].as_str().unwrap().to_string();
    assert_eq!(rt.block_on(node.get("/v1/whoami", &revoked)).0, 200);
    let id = t["id"].as_str().unwrap();
    let (s, _) = rt.block_on(node.call(
        "DELETE",
        &format!("/v1/tenants/acme/tokens/{id}"),
        &token,
        Bytes::new(),
    ));
    assert_eq!(s, 204);
    let (s, v) = rt.block_on(node.get("/v1/whoami", &revoked));
    assert_eq!(
        (s, v["error"]["message"].as_str()),
        (401, Some("this token was revoked"))
    );
    std::thread::sleep(Duration::from_millis(1100));
    let (s, v) = rt.block_on(node.get("/v1/whoami", &short));
    assert_eq!(
        (s, v["error"]["message"].as_str()),
        (401, Some("this token expired"))
    );
    // Listing shows no secret.
    let (_, list) = rt.block_on(node.get("/v1/tenants/acme/tokens", &token));
    assert!(!list.to_string().contains(&token[25..]), "{list}");
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("token").is_none())
    );
    // Every refusal is in the audit log.
    let (_, log) = rt.block_on(node.get("/v1/tenants/acme/audit?limit=1000", &op));
    let refused = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["outcome"] == "refused")
        .count();
    // Filters: only the refusals, only one action; bad filters named.
    let (_, only) = rt.block_on(node.get("/v1/tenants/acme/audit?outcome=refused&limit=1000", &op));
    assert_eq!(only.as_array().unwrap().len(), refused);
    let (_, uploads) = rt.block_on(node.get(
        "/v1/audit?tenant=acme&action=artifact.upload&outcome=refused",
        &op,
    ));
    assert!(
        uploads
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["action"] == "artifact.upload" && e["tenant"] == "acme"),
        "{uploads}"
    );
    assert!(!uploads.as_array().unwrap().is_empty());
    let (s, v) = rt.block_on(node.get("/v1/tenants/acme/audit?outcome=maybe", &op));
    refused_on(s, &v, 400, "outcome");
    let (s, v) = rt.block_on(node.get("/v1/tenants/acme/audit?colour=red", &op));
    assert_eq!(s, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `colour`"),
        "{v}"
    );
    assert!(refused >= 12, "{refused} refusals logged: {log}");
}

/// A compile past `[control] compile_memory_bytes` fails its upload and
/// leaves nothing behind; the node serves on.
fn a_compile_over_its_limits_fails_the_upload_alone(backend: Backend) {
    let node = Node::start(backend, "compile_memory_bytes = 50000000\n");
    let rt = runtime();
    let token = rt.block_on(node.tenant("acme", "acme.test", json!({})));
    // The shared cache would have it compiled: this node compiles afresh
    // (the codec, which its manifest does not load either).
    let data = node.data.path();
    std::fs::remove_file(data.join("cache")).unwrap();
    let (s, v) = rt.block_on(node.call(
        "POST",
        "/v1/tenants/acme/artifacts",
        &token,
        Bytes::from(std::fs::read(wasm("codec")).unwrap()),
    ));
    assert_eq!(s, 422, "{v}");
    let m = v["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("compiling the component") && m.contains("compile_memory_bytes"),
        "{m}"
    );
    let (_, list) = rt.block_on(node.get("/v1/tenants/acme/artifacts", &token));
    assert_eq!(list, json!([]));
    let blobs = data.join("blobs/sha256");
    assert!(!blobs.exists() || std::fs::read_dir(&blobs).unwrap().next().is_none());
    assert_eq!(rt.block_on(node.serve("operator.test", "/x")).0, 200);
}

/// The API's listener against abuse: silent connections past its
/// connection cap, an upload trickling in, one over the size limit and a
/// flood of bad tokens leave it answering (and the serving path too).
fn the_api_holds_against_slow_oversized_and_flooding_clients(backend: Backend) {
    let node = Node::start(
        backend,
        "max_upload_bytes = 1000000\n[server]\nheader_read_timeout_ms = 500\nbody_read_timeout_ms = 500\nmin_body_rate = 1000\n",
    );
    let rt = runtime();
    let token = rt.block_on(node.tenant("acme", "acme.test", json!({})));
    let addr = node.api().trim_start_matches("http://").to_string();

    // 200 connections that never speak (the cap is 128): closed at the
    // header timeout, and a real request gets through meanwhile.
    let silent: Vec<_> = (0..200)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    let started = std::time::Instant::now();
    let (s, v) = rt.block_on(node.get("/v1/whoami", &token));
    assert_eq!(s, 200, "{v}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    drop(silent);

    // An upload trickling in: 408, and nothing stored.
    use std::io::{Read, Write};
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    write!(slow, "POST /v1/tenants/acme/artifacts HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\ncontent-length: 100000\r\n\r\n\0asm").unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = String::new();
    let _ = slow.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("the upload came too slowly"), "{answer}");

    // Over the node's upload limit: 413 with the limit named.
    let (s, v) = rt.block_on(node.call(
        "POST",
        "/v1/tenants/acme/artifacts",
        &token,
        Bytes::from(vec![0u8; 1_500_000]),
    ));
    assert_eq!(s, 413, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_upload_bytes"),
        "{v}"
    );
    assert_eq!(
        rt.block_on(node.get("/v1/tenants/acme/artifacts", &token))
            .1,
        json!([])
    );

    // Eight versions of one app made at once, and the same component
    // uploaded eight times at once: all made, numbered apart.
    let (s, v) = rt.block_on(node.post("/v1/tenants/acme/apps", &token, json!({"name": "many"})));
    assert_eq!(s, 201, "{v}");
    let echo = Bytes::from(std::fs::read(wasm("echo")).unwrap());
    let (numbers, uploads) = rt.block_on(async {
        let mut versions = tokio::task::JoinSet::new();
        let mut uploads = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let (url, auth) = (node.api(), format!("Bearer {token}"));
            let body = echo.clone();
            uploads.spawn(async move {
                let h = [("authorization", auth.as_str()), ("content-type", "application/wasm")];
                request(&client(), "POST", &format!("{url}/v1/tenants/acme/artifacts"), &h, body).await
            });
        }
        let uploads = uploads.join_all().await;
        let digest = uploads
            .iter()
            .find_map(|(_, body)| serde_json::from_str::<Value>(body).ok()?["digest"].as_str().map(String::from))
            .unwrap_or_else(|| panic!("{uploads:?}"));
        let spec = json!({"components": {"w": {"digest": digest}}, "routes": [{"route": "/many/...", "component": "w"}]}).to_string();
        for _ in 0..8 {
            let (url, auth, spec) = (node.api(), format!("Bearer {token}"), spec.clone());
            versions.spawn(async move {
                let h = [("authorization", auth.as_str()), ("content-type", "application/json")];
                let (s, body) = request(&client(), "POST", &format!("{url}/v1/tenants/acme/apps/many/versions"), &h, Bytes::from(spec)).await;
                assert_eq!(s, 201, "{body}");
                serde_json::from_str::<Value>(&body).unwrap()["number"].as_i64().unwrap()
            });
        }
        let mut numbers = versions.join_all().await;
        numbers.sort_unstable();
        (numbers, uploads)
    });
    assert!(
        uploads.iter().all(|(s, _)| *s == 201 || *s == 200),
        "{uploads:?}"
    );
    assert_eq!(numbers, (1..=8).collect::<Vec<i64>>());

    // The CLI speaks TLS to an https:// API (this listener is plain, so
    // the handshake fails: a TLS error, not a refused scheme).
    let https = node.api().replace("http://", "https://");
    let (code, _, err) = edge_tests::edge_cli(
        &https,
        &token,
        node.data.path(),
        &["versions", "--app", "many"],
    );
    assert_eq!(code, 1);
    assert!(!err.contains("scheme is not http"), "{err}");
    // rustls, reading an HTTP answer where a TLS record belongs.
    assert!(
        err.contains("received corrupt message of type InvalidContentType"),
        "{err}"
    );

    // A flood of unknown tokens: all refused, the API and the serving
    // path keep answering.
    let refused = rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..16 {
            let url = format!("{}/v1/whoami", node.api());
            tasks.push(tokio::spawn(async move {
                let c = client();
                let mut refused = 0;
                for j in 0..100 {
                    let bad = format!("Bearer edge_k{:016x}_x", i * 1000 + j);
                    let (s, _) = request(
                        &c,
                        "GET",
                        &url,
                        &[("authorization", bad.as_str())],
                        Bytes::new(),
                    )
                    .await;
                    refused += u32::from(s == 401);
                }
                refused
            }));
        }
        let mut n = 0;
        for t in tasks {
            n += t.await.unwrap();
        }
        n
    });
    assert_eq!(refused, 1600);
    assert_eq!(rt.block_on(node.get("/v1/whoami", &token)).0, 200);
    assert_eq!(rt.block_on(node.serve("operator.test", "/x")).0, 200);
}

fn sites_rules_validate_preview_deploy_and_roll_back(backend: Backend) {
    let node = Node::start(backend, "[outbound]\nallow_ranges = [\"127.0.0.1/32\"]\n");
    let rt = runtime();
    let token = rt.block_on(node.tenant("acme", "*.acme.test", json!({})));
    let base = "/v1/tenants/acme/sites";
    let origin = node.edge.url.clone();

    // Hosts must be the tenant's, exact, and free.
    for (hosts, status, message) in [
        (
            json!(["www.other.test"]),
            422,
            "is not among this tenant's hosts (*.acme.test)",
        ),
        (json!(["*.acme.test"]), 400, "is not a host name"),
    ] {
        let (s, v) = rt.block_on(node.post(
            base,
            &token,
            json!({"name": "mirror", "hosts": hosts, "origin": origin}),
        ));
        assert_eq!(s, status, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(message),
            "{v}"
        );
    }
    let (s, v) = rt.block_on(node.post(
        base,
        &token,
        json!({"name": "mirror", "hosts": ["www.acme.test"], "origin": "ftp://x"}),
    ));
    refused_on(s, &v, 400, "origin");
    let (s, v) = rt.block_on(node.post(
        base,
        &token,
        json!({"name": "mirror", "hosts": ["www.acme.test"], "origin": origin}),
    ));
    assert_eq!(s, 201, "{v}");
    // Before any rules the site proxies unchanged.
    assert_eq!(
        rt.block_on(node.serve("www.acme.test", "/page")),
        (200, "hello from edge: /page\n".to_string())
    );
    let (s, v) = rt.block_on(node.post(
        base,
        &token,
        json!({"name": "again", "hosts": ["www.acme.test"], "origin": origin}),
    ));
    assert_eq!(s, 409, "{v}");

    // Rules are checked as they are written: which rule, where, why.
    let rules = format!("{base}/mirror/rules");
    let (s, v) = rt.block_on(node.post(&rules, &token, json!({"rules": [{"pattern": "ok", "replacement": "fine"}, {"pattern": "(unclosed", "replacement": "x"}]})));
    assert_eq!(s, 422, "{v}");
    assert_eq!(v["error"]["field"], "rules[1].pattern");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("rule 2: "),
        "{v}"
    );
    let (s, v) = rt.block_on(node.post(
        &rules,
        &token,
        json!({"rules": [{"pattern": "a", "replacement": "b", "flags": "gz"}]}),
    ));
    refused_on(s, &v, 400, "rules[0].flags");
    let (s, v) = rt.block_on(node.post(
        &rules,
        &token,
        json!({"nginx": "subs_filter 'unterminated;"}),
    ));
    refused_on(s, &v, 422, "nginx");
    assert_eq!(
        rt.block_on(node.get(&rules, &token)).1,
        json!([]),
        "refused rule sets are not stored"
    );

    // Preview: the output, the replacements, each rule's count, where they are.
    let (s, v) = rt.block_on(node.post(&format!("{base}/mirror/preview"), &token, json!({
        "rules": [{"pattern": "hello", "replacement": "HOWDY"}, {"pattern": "(\\w+)@edge", "replacement": "$1 at edge"}],
        "body": "hello a@edge, hello b@edge"
    })));
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["output"], "HOWDY a at edge, HOWDY b at edge");
    assert_eq!(v["replacements"], 4);
    assert_eq!(
        v["rules"],
        json!([{"index": 0, "matches": 2}, {"index": 1, "matches": 2}])
    );
    assert_eq!(
        v["spans"][1],
        json!({"rule": 1, "input": [6, 12], "output": [6, 15]}),
        "{v}"
    );

    // Version 1 from JSON, version 2 imported from nginx.
    let (s, v) = rt.block_on(node.post(
        &rules,
        &token,
        json!({"rules": [{"pattern": "hello", "replacement": "HOWDY"}]}),
    ));
    assert_eq!((s, &v["number"]), (201, &json!(1)), "{v}");
    let (s, v) = rt.block_on(node.post(
        &rules,
        &token,
        json!({"nginx": "location / {\n  subs_filter 'edge' 'EDGE';\n}\n"}),
    ));
    assert_eq!((s, &v["number"]), (201, &json!(2)), "{v}");
    assert_eq!(
        v["rules"],
        json!([{"pattern": "edge", "replacement": "EDGE", "flags": "g"}])
    );

    let deploy = format!("{base}/mirror/deployments");
    let (s, v) = rt.block_on(node.post(
        &deploy,
        &token,
        json!({"version": 1, "smoke": {"path": "/"}}),
    ));
    assert_eq!(s, 201, "{v}");
    assert_eq!(
        rt.block_on(node.serve("www.acme.test", "/p")).1,
        "HOWDY from edge: /p\n"
    );
    let (s, v) = rt.block_on(node.post(&deploy, &token, json!({"version": 2})));
    assert_eq!(s, 201, "{v}");
    assert_eq!(
        rt.block_on(node.serve("www.acme.test", "/p")).1,
        "hello from EDGE: /p\n"
    );
    // A smoke check the new rules fail leaves the old ones applying.
    let (s, v) = rt.block_on(node.post(
        &deploy,
        &token,
        json!({"version": 1, "smoke": {"path": "/", "status": 201}}),
    ));
    assert_eq!(s, 422, "{v}");
    assert_eq!(
        rt.block_on(node.serve("www.acme.test", "/p")).1,
        "hello from EDGE: /p\n"
    );
    // Rollback: to the rules before.
    let (s, v) = rt.block_on(node.post(&format!("{base}/mirror/rollback"), &token, json!({})));
    assert_eq!((s, &v["version"]), (201, &json!(1)), "{v}");
    assert_eq!(
        rt.block_on(node.serve("www.acme.test", "/p")).1,
        "HOWDY from edge: /p\n"
    );
    let (_, site) = rt.block_on(node.get(&format!("{base}/mirror"), &token));
    assert_eq!(site["rules_version"], 1, "{site}");

    // The console's preview fetches a page from the origin: its answer
    // unrewritten, though the site's rules apply to what it serves.
    let fetch = format!("{base}/mirror/origin");
    let (s, v) = rt.block_on(node.post(&fetch, &token, json!({"path": "/page"})));
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (&v["status"], &v["body"], &v["truncated"]),
        (
            &json!(200),
            &json!("hello from edge: /page\n"),
            &json!(false)
        ),
        "{v}"
    );
    assert_eq!(v["content_type"], "text/plain; charset=utf-8", "{v}");
    // Another tenant's site is missing to it; so is its own of that name.
    let beta = rt.block_on(node.tenant("beta", "beta.test", json!({})));
    for path in [fetch.as_str(), "/v1/tenants/beta/sites/mirror/origin"] {
        let (s, v) = rt.block_on(node.post(path, &beta, json!({"path": "/page"})));
        assert_eq!(s, 404, "{path}: {v}");
    }
    // A path that is not one: 400 naming it.
    for path in ["page", "/a b", "/a\r\nHost: x", "http://elsewhere/"] {
        let (s, v) = rt.block_on(node.post(&fetch, &token, json!({"path": path})));
        assert_eq!(
            (s, v["error"]["field"].as_str()),
            (400, Some("path")),
            "{path:?}: {v}"
        );
    }
    // An origin outside the tenant's allowed range (127.0.0.1/32): 422,
    // and the address is never connected to.
    let elsewhere = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    elsewhere.set_nonblocking(true).unwrap();
    let origin2 = format!("http://{}", elsewhere.local_addr().unwrap());
    let (s, v) = rt.block_on(node.post(
        base,
        &token,
        json!({"name": "elsewhere", "hosts": ["other.acme.test"], "origin": origin2, "origin_timeout_ms": 2000}),
    ));
    assert_eq!(s, 201, "{v}");
    let (s, v) = rt.block_on(node.post(
        &format!("{base}/elsewhere/origin"),
        &token,
        json!({"path": "/page"}),
    ));
    assert_eq!(s, 422, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("not reachable from this tenant") && message.contains("allow_ranges"),
        "{v}"
    );
    assert_eq!(
        elsewhere.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "nothing was fetched"
    );
    // Settings change in place: rewriting only HTML leaves echo's text alone.
    let patch = json!({"origin": origin, "content_types": ["text/html"]}).to_string();
    let (s, v) = rt.block_on(node.call(
        "PATCH",
        &format!("{base}/mirror"),
        &token,
        Bytes::from(patch),
    ));
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        rt.block_on(node.serve("www.acme.test", "/p")).1,
        "hello from edge: /p\n"
    );
    let (s, v) = rt.block_on(node.call(
        "PATCH",
        &format!("{base}/mirror"),
        &token,
        Bytes::from(r#"{"origin": "ftp://x"}"#),
    ));
    refused_on(s, &v, 400, "origin");

    // A rule set past 64 KiB, in any script, is stored as sent on both
    // databases (MariaDB's TEXT holds 64 KiB, in latin1 by default).
    let big: Vec<Value> = (0..600)
        .map(|i| json!({"pattern": format!("price-{i:04}-eur"), "replacement": format!("価格 {i} ユーロ — prix € {}", "·".repeat(40))}))
        .collect();
    let (s, v) = rt.block_on(node.post(&rules, &token, json!({"rules": big})));
    assert_eq!(s, 201, "{v}");
    let (s, v) = rt.block_on(node.get(&format!("{rules}/{}", v["number"]), &token));
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["rules"].as_array().map(Vec::len), Some(600));
    assert_eq!(v["rules"][599]["replacement"], big[599]["replacement"]);

    // At the quota (max_versions) the oldest rule sets go, not the one
    // applied nor the one a rollback returns to.
    let op = node.operator_token();
    let quota = |max: u64| {
        let body = json!({"quota": {"max_versions": max}}).to_string();
        let (s, v) = rt.block_on(node.call("PATCH", "/v1/tenants/acme", &op, Bytes::from(body)));
        assert_eq!(s, 200, "{v}");
    };
    quota(3);
    let (s, v) = rt.block_on(node.post(
        base,
        &token,
        json!({"name": "small", "hosts": ["small.acme.test"], "origin": origin}),
    ));
    assert_eq!(s, 201, "{v}");
    let small = format!("{base}/small");
    let make = |n: usize| {
        let (s, v) = rt.block_on(node.post(
            &format!("{small}/rules"),
            &token,
            json!({"rules": [{"pattern": "hello", "replacement": format!("v{n}")}]}),
        ));
        assert_eq!(s, 201, "{v}");
        v["number"].as_i64().unwrap()
    };
    let put = |n: i64| {
        let (s, v) = rt.block_on(node.post(
            &format!("{small}/deployments"),
            &token,
            json!({"version": n}),
        ));
        assert_eq!(s, 201, "{v}");
    };
    let kept = || -> Vec<i64> {
        let (_, list) = rt.block_on(node.get(&format!("{small}/rules"), &token));
        let mut n: Vec<i64> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["number"].as_i64().unwrap())
            .collect();
        n.sort_unstable();
        n
    };
    for n in 1..=3 {
        assert_eq!(make(n), n as i64);
    }
    put(1);
    put(2);
    // Applying 2, rollback to 1: 3 goes (and its number is not given
    // again).
    assert_eq!(make(4), 4);
    assert_eq!(kept(), [1, 2, 4]);
    let page = || rt.block_on(node.serve("small.acme.test", "/p")).1;
    assert_eq!(page(), "v2 from edge: /p\n");
    // Eight made at once: each made, three kept.
    let rules = json!({"rules": [{"pattern": "hello", "replacement": "many"}]}).to_string();
    let made = rt.block_on(at_once(
        8,
        node.api(),
        token.clone(),
        format!("{small}/rules"),
        rules,
    ));
    assert!(made.iter().all(|(s, _)| *s == 201), "{made:?}");
    let now = kept();
    assert_eq!((now.len(), &now[..2]), (3, &[1, 2][..]), "{now:?}");
    // A quota of 2: no room to make, refused, nothing deleted.
    quota(2);
    let (s, v) = rt.block_on(node.post(
        &format!("{small}/rules"),
        &token,
        json!({"rules": [{"pattern": "x", "replacement": "y"}]}),
    ));
    assert_eq!(s, 422, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("each applies or is what a rollback returns to"),
        "{v}"
    );
    assert_eq!(kept(), now);
    let (s, v) = rt.block_on(node.post(&format!("{small}/rollback"), &token, json!({})));
    assert_eq!(s, 201, "{v}");
    assert_eq!(page(), "v1 from edge: /p\n");
}

/// Asserts the API answered `status` naming `field` as the bad one; the
/// error's message.
#[track_caller]
fn refused_on<'a>(s: u16, v: &'a Value, status: u16, field: &str) -> &'a str {
    assert_eq!(
        (s, v["error"]["field"].as_str()),
        (status, Some(field)),
        "{v}"
    );
    v["error"]["message"].as_str().unwrap_or_default()
}

/// A gzipped tar of `files` (name, bytes), names written as given (even
/// ones a careful archiver would refuse).
fn archive(files: &[(&str, &[u8])]) -> Vec<u8> {
    archive_with_links(files, &[])
}

/// [`archive`], then symbolic `links` (name, target).
fn archive_with_links(files: &[(&str, &[u8])], links: &[(&str, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (name, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append(&header, *bytes).unwrap();
    }
    for (name, target) in links {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        tar.append_link(&mut header, name, target).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

const PROBE_APP: &str = r#"spin_manifest_version = 2
[application]
name = "Probe"
[variables]
greeting = { default = "hi" }
key = { required = true, secret = true }
[[trigger.http]]
route = "/..."
component = "probe"
[component.probe]
source = "target/probe.wasm"
key_value_stores = ["default"]
[component.probe.variables]
greeting = "{{ greeting }}"
key = "{{ key }}"
[component.probe.build]
command = "cargo build --target wasm32-wasip2"
"#;

/// Spin's templates in `allowed_outbound_hosts` (`"http://{{ upstream }}"`)
/// render with the app's variables, as Spin renders them: the host the
/// variable names is reached and no other; a new value moves the grant at
/// once; a template of an undeclared variable, or a value that would not
/// make a rule, is refused with its field.
fn spin_apps_reach_outbound_hosts_their_variables_name(backend: Backend) {
    let node = Node::start(
        backend,
        "[sidecar]\nallow = [\"/bin/echo\"]\n[outbound]\nallow_ranges = [\"127.0.0.0/8\"]\n",
    );
    let rt = runtime();
    let op = node.operator_token();
    // (The probe imports the sidecar's process interface.)
    let (s, v) = rt.block_on(node.post(
        "/v1/tenants",
        &op,
        json!({"name": "acme", "hosts": ["acme.test"], "programs": ["/bin/echo"]}),
    ));
    assert_eq!(s, 201, "{v}");
    let (_, t) = rt.block_on(node.post("/v1/tenants/acme/tokens", &op, json!({"name": "ci"})));
    let token = t["token"].as_str().unwrap().to_string();
    let (a, b) = (
        format!("127.0.0.1:{}", edge_tests::upstream("from A")),
        format!("127.0.0.1:{}", edge_tests::upstream("from B")),
    );
    let fetch = |addr: &str| {
        rt.block_on(node.serve(
            "acme.test",
            &format!(
                "/probe/fetch?url=http%3A%2F%2F{}%2Fx",
                addr.replace(':', "%3A")
            ),
        ))
    };

    let dir = TempDir::new("spin-app");
    std::fs::create_dir_all(dir.path().join("target")).unwrap();
    std::fs::copy(wasm("probe"), dir.path().join("target/probe.wasm")).unwrap();
    let app = |hosts: &str| {
        format!(
            "spin_manifest_version = 2\n[application]\nname = \"fetcher\"\n[variables]\nupstream = {{ required = true }}\n[[trigger.http]]\nroute = \"/...\"\ncomponent = \"probe\"\n[component.probe]\nsource = \"target/probe.wasm\"\nallowed_outbound_hosts = {hosts}\n"
        )
    };
    // A template of a variable the app does not declare.
    let manifest = dir.write("spin.toml", &app(r#"["http://{{ elsewhere }}"]"#));
    let (code, _, err) = node.cli(&token, &["deploy", manifest.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("allowed_outbound_hosts[0]")
            && err.contains("\"elsewhere\", which the version does not declare"),
        "{err}"
    );

    let manifest = dir.write("spin.toml", &app(r#"["http://{{ upstream }}"]"#));
    let (code, out, err) = node.cli(
        &token,
        &[
            "deploy",
            manifest.to_str().unwrap(),
            "--var",
            &format!("upstream={a}"),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(fetch(&a), (200, "200\nfrom A".to_string()));
    let (status, body) = fetch(&b);
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("HttpRequestDenied"), "{body}");

    // Another tenant's value of the same name reaches only its own apps;
    // nor can it touch acme's.
    let other = rt.block_on(node.tenant("other", "other.test", json!({})));
    let (s, _) = rt.block_on(node.call(
        "PUT",
        "/v1/tenants/other/variables/upstream",
        &other,
        Bytes::from(json!({"value": b}).to_string()),
    ));
    assert_eq!(s, 204);
    let (s, _) = rt.block_on(node.call(
        "PUT",
        "/v1/tenants/acme/apps/fetcher/variables/upstream",
        &other,
        Bytes::from(json!({"value": b}).to_string()),
    ));
    assert!(s == 403 || s == 404, "{s}");
    assert_eq!(fetch(&a), (200, "200\nfrom A".to_string()));
    assert_eq!(fetch(&b).0, 502);
    // A new value moves the grant at once.
    let var = "/v1/tenants/acme/apps/fetcher/variables/upstream";
    let (s, v) = rt.block_on(node.call(
        "PUT",
        var,
        &token,
        Bytes::from(json!({"value": b}).to_string()),
    ));
    assert_eq!(s, 204, "{v}");
    assert_eq!(fetch(&b), (200, "200\nfrom B".to_string()));
    assert_eq!(fetch(&a).0, 502);
    // A value that would not make a rule is refused; the grant stays.
    let (s, v) = rt.block_on(node.call(
        "PUT",
        var,
        &token,
        Bytes::from(json!({"value": "h/x"}).to_string()),
    ));
    let why = refused_on(s, &v, 422, "value");
    assert!(why.contains("does not make an outbound rule"), "{v}");
    // Values (a secret's too) stay out of answers and the audit log.
    assert!(!why.contains("h/x"), "{v}");
    assert_eq!(fetch(&b), (200, "200\nfrom B".to_string()));
    // A deploy with a new value whose smoke check fails changes nothing:
    // the value goes with the deployment, not before it.
    let (code, _, err) = node.cli(
        &token,
        &[
            "deploy",
            manifest.to_str().unwrap(),
            "--var",
            &format!("upstream={a}"),
            "--smoke",
            "/",
            "--smoke-status",
            "599",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("the previous deployment keeps serving"),
        "{err}"
    );
    assert_eq!(fetch(&b), (200, "200\nfrom B".to_string()));
    assert_eq!(fetch(&a).0, 502);
}

fn spin_apps_deploy_whole_with_their_variables(backend: Backend) {
    let node = Node::start(backend, "[sidecar]\nallow = [\"/bin/echo\"]\n");
    let rt = runtime();
    let op = node.operator_token();
    // Programs are granted by an operator, within the node's allow list.
    let (s, v) = rt.block_on(node.post(
        "/v1/tenants",
        &op,
        json!({"name": "acme", "hosts": ["acme.test"], "programs": ["/bin/sh"]}),
    ));
    refused_on(s, &v, 422, "programs[0]");
    let (s, v) = rt.block_on(node.post(
        "/v1/tenants",
        &op,
        json!({"name": "acme", "hosts": ["acme.test"], "programs": ["/bin/echo"]}),
    ));
    assert_eq!(s, 201, "{v}");
    let (_, t) = rt.block_on(node.post("/v1/tenants/acme/tokens", &op, json!({"name": "ci"})));
    let token = t["token"].as_str().unwrap().to_string();

    // The app as its developer has it: spin.toml and the built component.
    let dir = TempDir::new("spin-app");
    let manifest = dir.write("spin.toml", PROBE_APP);
    std::fs::create_dir_all(dir.path().join("target")).unwrap();
    std::fs::copy(wasm("probe"), dir.path().join("target/probe.wasm")).unwrap();
    let manifest = manifest.to_str().unwrap();

    // A required variable without a value keeps it from serving.
    let (code, _, err) = node.cli(&token, &["deploy", manifest]);
    assert_eq!(code, 1);
    assert!(
        err.contains("versions[0].version: version 1: required variable \"key\" has no value"),
        "{err}"
    );
    assert_eq!(
        rt.block_on(node.serve("acme.test", "/probe/var/greeting"))
            .0,
        404
    );

    let (code, out, err) = node.cli(&token, &["deploy", manifest, "--secret", "key=s3cret"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("deployed probe version 2"), "{out}");
    assert_eq!(
        rt.block_on(node.serve("acme.test", "/probe/var/greeting")),
        (200, "hi".to_string())
    );
    assert_eq!(
        rt.block_on(node.serve("acme.test", "/probe/var/key")),
        (200, "s3cret".to_string())
    );
    // Secrets are never shown again.
    let vars = "/v1/tenants/acme/apps/probe/variables";
    let (_, list) = rt.block_on(node.get(vars, &token));
    assert_eq!(
        list,
        json!([{"name": "key", "secret": true, "updated_at": list[0]["updated_at"]}])
    );
    let (_, log) = rt.block_on(node.get("/v1/audit", &op));
    assert!(!log.to_string().contains("s3cret"), "{log}");
    // A variable set through the API reaches the serving version at once.
    let (s, _) = rt.block_on(node.call(
        "PUT",
        &format!("{vars}/greeting"),
        &token,
        Bytes::from(r#"{"value": "hello"}"#),
    ));
    assert_eq!(s, 204);
    assert_eq!(
        rt.block_on(node.serve("acme.test", "/probe/var/greeting"))
            .1,
        "hello"
    );
    // One the serving version needs cannot go; one with a default can.
    let (s, v) = rt.block_on(node.call("DELETE", &format!("{vars}/key"), &token, Bytes::new()));
    assert_eq!(s, 409, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("version 2 of an app serves and needs it"),
        "{v}"
    );
    let (s, _) =
        rt.block_on(node.call("DELETE", &format!("{vars}/greeting"), &token, Bytes::new()));
    assert_eq!(s, 204);
    assert_eq!(
        rt.block_on(node.serve("acme.test", "/probe/var/greeting"))
            .1,
        "hi"
    );
    // A tenant's value reaches every app; an app's own value wins.
    let tvars = "/v1/tenants/acme/variables";
    let (s, _) = rt.block_on(node.call(
        "PUT",
        &format!("{tvars}/greeting"),
        &token,
        Bytes::from(r#"{"value": "from the tenant"}"#),
    ));
    assert_eq!(s, 204);
    assert_eq!(
        rt.block_on(node.serve("acme.test", "/probe/var/greeting"))
            .1,
        "from the tenant"
    );
    let (s, _) = rt.block_on(node.call(
        "PUT",
        &format!("{vars}/greeting"),
        &token,
        Bytes::from(r#"{"value": "from the app"}"#),
    ));
    assert_eq!(s, 204);
    assert_eq!(
        rt.block_on(node.serve("acme.test", "/probe/var/greeting"))
            .1,
        "from the app"
    );
    // The app's secret can go once the tenant has the value.
    let (s, _) = rt.block_on(node.call(
        "PUT",
        &format!("{tvars}/key"),
        &token,
        Bytes::from(r#"{"value": "tenant-key", "secret": true}"#),
    ));
    assert_eq!(s, 204);
    let (s, v) = rt.block_on(node.call("DELETE", &format!("{vars}/key"), &token, Bytes::new()));
    assert_eq!(s, 204, "{v}");
    assert_eq!(
        rt.block_on(node.serve("acme.test", "/probe/var/key")).1,
        "tenant-key"
    );
    let (s, v) = rt.block_on(node.call("DELETE", &format!("{tvars}/key"), &token, Bytes::new()));
    assert_eq!(s, 409, "{v}");
    let (_, list) = rt.block_on(node.get(tvars, &token));
    assert!(!list.to_string().contains("tenant-key"), "{list}");

    // Broken archives: refused precisely, nothing stored.
    let probe = std::fs::read(wasm("probe")).unwrap();
    let core = b"\0asm\x01\0\0\0".to_vec();
    let spin = PROBE_APP.as_bytes();
    let url_source = PROBE_APP.replace(
        "source = \"target/probe.wasm\"",
        "source = { url = \"https://example.com/p.wasm\", digest = \"sha256:00\" }",
    );
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "missing file",
            archive(&[("spin.toml", spin)]),
            422,
            "component.probe.source: \"target/probe.wasm\" is not in the archive (it has: nothing)",
        ),
        (
            "no manifest",
            archive(&[("target/probe.wasm", &probe)]),
            422,
            "the archive has no spin.toml at its root (it has: target/probe.wasm)",
        ),
        (
            "escaping path",
            archive(&[("spin.toml", spin), ("../probe.wasm", &probe)]),
            400,
            "\"../probe.wasm\" leaves the archive",
        ),
        (
            "core module",
            archive(&[("spin.toml", spin), ("target/probe.wasm", &core)]),
            422,
            "component \"probe\" (target/probe.wasm): this is a core WebAssembly module",
        ),
        (
            "URL source",
            archive(&[
                ("spin.toml", url_source.as_bytes()),
                ("target/probe.wasm", &probe),
            ]),
            422,
            "a URL or registry source is not supported",
        ),
        (
            "not an archive",
            b"PK\x03\x04 a zip".to_vec(),
            400,
            "the body is neither a version (JSON) nor a Spin app",
        ),
    ];
    for (what, body, status, message) in cases {
        let before = rt.block_on(node.state("acme", &token, &["probe"]));
        let auth = format!("Bearer {token}");
        let content_type = if what == "not an archive" {
            "application/json"
        } else {
            "application/gzip"
        };
        let (s, text) = rt.block_on(request(
            &client(),
            "POST",
            &format!("{}/v1/tenants/acme/apps/probe/versions", node.api()),
            &[
                ("authorization", auth.as_str()),
                ("content-type", content_type),
            ],
            Bytes::from(body),
        ));
        assert_eq!(s, status, "{what}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        let m = v["error"]["message"].as_str().unwrap();
        assert!(m.contains(message), "{what}: {m:?} lacks {message:?}");
        assert_eq!(
            before,
            rt.block_on(node.state("acme", &token, &["probe"])),
            "{what} changed something"
        );
    }

    // A tenant without programs cannot run the probe, which imports them.
    let plain = rt.block_on(node.tenant("plain", "plain.test", json!({})));
    let (code, _, err) = node.cli(&plain, &["deploy", manifest, "--secret", "key=x"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("imports edge:platform/process@0.1.0, but this tenant may run no programs"),
        "{err}"
    );
}

const FILES_APP: &str = r#"spin_manifest_version = 2
[application]
name = "Files"
[[trigger.http]]
route = "/..."
component = "features"
[component.features]
source = "features.wasm"
files = ["static/**/*", { source = "assets", destination = "/img" }]
exclude_files = ["**/*.key"]
"#;

/// A Spin app's `files` deployed through the control plane, as `edge up`
/// mounts them: listed files at their paths, excluded and unlisted ones
/// absent; a redeploy with changed files serves the new bytes, a rollback
/// the old ones, a restart the same; another tenant cannot name the
/// first one's files by digest.
fn spin_apps_deploy_with_their_files(backend: Backend) {
    let node = Node::start(backend, "");
    let rt = runtime();
    let acme = rt.block_on(node.tenant("acme", "acme.test", json!({})));
    let beta = rt.block_on(node.tenant("beta", "beta.test", json!({})));
    let built = edge_tests::repo()
        .join("tests/spin-apps/rust-features/target/wasm32-wasip2/release/rust_features.wasm");
    let dir = TempDir::new("spin-files-app");
    let manifest = dir.write("spin.toml", FILES_APP);
    std::fs::copy(&built, dir.path().join("features.wasm")).unwrap();
    for sub in ["static/css", "assets", "notes"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    dir.write("static/index.html", "version one");
    dir.write("static/css/site.css", "body {}");
    dir.write("static/server.key", "do not ship");
    dir.write("assets/logo.svg", "<svg/>");
    dir.write("notes/private.txt", "not listed");
    let manifest = manifest.to_str().unwrap();
    let get = |path: &str| rt.block_on(node.serve("acme.test", path));

    let (code, out, err) = node.cli(&acme, &["deploy", manifest]);
    assert_eq!(code, 0, "{err}; log: {}", node.edge.log());
    assert!(out.contains("deployed files version 1"), "{out}");
    assert_eq!(get("/file/static/index.html"), (200, "version one".into()));
    assert_eq!(get("/file/static/css/site.css"), (200, "body {}".into()));
    assert_eq!(get("/file/img/logo.svg"), (200, "<svg/>".into()));
    // Excluded, unlisted, outside the destinations: not there.
    for absent in [
        "/file/static/server.key",
        "/file/notes/private.txt",
        "/file/assets/logo.svg",
        "/file/spin.toml",
        "/file/features.wasm",
    ] {
        assert_eq!(get(absent), (404, "NotFound".into()), "{absent}");
    }
    // The version lists what it sees.
    let (s, v) = rt.block_on(node.get("/v1/tenants/acme/apps/files/versions/1", &acme));
    assert_eq!(s, 200, "{v}");
    let files = v["spec"]["components"]["features"]["files"].clone();
    let paths: Vec<&str> = files
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "/img/logo.svg",
            "/static/css/site.css",
            "/static/index.html"
        ]
    );
    assert_eq!(files[2]["size"], 11);
    let index_v1 = files[2]["digest"].as_str().unwrap().to_string();
    // The excluded file never left the developer's directory: nothing
    // stored holds it.
    let stored = node.data.path().join("blobs/files/sha256");
    assert!(stored.join(&index_v1[7..]).exists());
    for f in std::fs::read_dir(&stored).unwrap() {
        assert_ne!(std::fs::read(f.unwrap().path()).unwrap(), b"do not ship");
    }

    // New bytes in a new version; the old version keeps its own.
    dir.write("static/index.html", "version two");
    let (code, _, err) = node.cli(&acme, &["deploy", manifest]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(get("/file/static/index.html"), (200, "version two".into()));
    let (code, _, err) = node.cli(&acme, &["rollback", "--app", "files"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(get("/file/static/index.html"), (200, "version one".into()));

    // The staged trees: read-only files, found again after a restart.
    let node = node.restart();
    let get = |path: &str| rt.block_on(node.serve("acme.test", path));
    assert_eq!(get("/file/static/index.html"), (200, "version one".into()));
    assert_eq!(get("/file/img/logo.svg"), (200, "<svg/>".into()));
    let trees: Vec<_> = std::fs::read_dir(node.data.path().join("files"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("static/index.html").exists())
        .collect();
    assert_eq!(trees.len(), 2, "{trees:?}");
    use std::os::unix::fs::PermissionsExt;
    for t in &trees {
        let mode = std::fs::metadata(t.join("static/index.html"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o444, "{}", t.display());
    }

    // A version from JSON may name the tenant's own files by digest...
    let (_, v1) = rt.block_on(node.get("/v1/tenants/acme/apps/files/versions/1", &acme));
    let mut spec = v1["spec"].clone();
    // (a thousand paths to one content: more than MariaDB's TEXT holds)
    spec["components"]["features"]["files"] = (0..1000)
        .map(|i| json!({"path": format!("/www/{i}/index.html"), "digest": index_v1, "size": 11}))
        .collect();
    let (s, v) =
        rt.block_on(node.post("/v1/tenants/acme/apps/files/versions", &acme, spec.clone()));
    assert_eq!(s, 201, "{v}; log: {}", node.edge.log());
    // ...with its true size, at a normal path...
    let mut wrong = spec.clone();
    wrong["components"]["features"]["files"][0]["size"] = json!(12);
    let (s, v) = rt.block_on(node.post("/v1/tenants/acme/apps/files/versions", &acme, wrong));
    refused_on(s, &v, 400, "components.features.files[0]");
    let mut escape = spec.clone();
    escape["components"]["features"]["files"][0]["path"] = json!("/www/../../etc/passwd");
    let (s, v) = rt.block_on(node.post("/v1/tenants/acme/apps/files/versions", &acme, escape));
    assert_eq!(s, 400, "{v}");
    // ...but another tenant cannot name them: to it they do not exist.
    let (code, _, err) = node.cli(
        &beta,
        &["deploy", built.to_str().unwrap(), "--app", "thief"],
    );
    assert_eq!(code, 0, "{err}");
    let (_, bv) = rt.block_on(node.get("/v1/tenants/beta/apps/thief/versions/1", &beta));
    let mut steal = bv["spec"].clone();
    let cid = steal["components"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    steal["components"][&cid]["files"] =
        json!([{"path": "/loot.html", "digest": index_v1, "size": 11}]);
    let (s, v) = rt.block_on(node.post("/v1/tenants/beta/apps/thief/versions", &beta, steal));
    let message = refused_on(s, &v, 422, &format!("components.{cid}.files[0]"));
    assert!(
        message.contains(&format!("no file {index_v1} was uploaded by this tenant")),
        "{message}"
    );
    assert_eq!(
        rt.block_on(node.serve("beta.test", "/file/loot.html")).0,
        404
    );

    // Hostile archives: refused precisely, nothing stored.
    let gamma = rt.block_on(node.tenant(
        "gamma",
        "gamma.test",
        json!({"max_artifact_bytes": 60_000, "max_total_artifact_bytes": 120_000}),
    ));
    let (s, v) = rt.block_on(node.post("/v1/tenants/gamma/apps", &gamma, json!({"name": "web"})));
    assert_eq!(s, 201, "{v}");
    let echo = std::fs::read(wasm("echo")).unwrap();
    let app = |files: &str| {
        format!(
            "spin_manifest_version = 2\n[application]\nname = \"web\"\n[[trigger.http]]\nroute = \"/...\"\ncomponent = \"web\"\n[component.web]\nsource = \"web.wasm\"\n{files}\n"
        )
    };
    let with = |files: &str, entries: &[(&str, &[u8])]| {
        let manifest = app(files);
        let mut all: Vec<(&str, &[u8])> =
            vec![("spin.toml", manifest.as_bytes()), ("web.wasm", &echo)];
        all.extend_from_slice(entries);
        archive(&all)
    };
    let symlinked = {
        let manifest = app("files = [\"ui/**/*\"]");
        archive_with_links(
            &[("spin.toml", manifest.as_bytes()), ("web.wasm", &echo)],
            &[("ui/passwd", "/etc/passwd")],
        )
    };
    let big = vec![7u8; 70_000];
    let (a, b) = (vec![1u8; 40_000], vec![2u8; 40_000]);
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "a link",
            symlinked,
            400,
            "\"ui/passwd\" is not a regular file (links and devices are refused)",
        ),
        (
            "a path twice",
            with(
                "files = [\"ui/*\"]",
                &[("ui/i.html", b"one"), ("./ui/i.html", b"two")],
            ),
            400,
            "\"./ui/i.html\" is in it twice",
        ),
        (
            "a glob leaving the app",
            with("files = [\"../*\"]", &[]),
            422,
            "spin.toml: component.web.files[0]: \"../*\" leaves the app's directory",
        ),
        (
            "two files at one destination",
            with(
                "files = [{ source = \"a\", destination = \"/x\" }, { source = \"b\", destination = \"/x\" }]",
                &[("a/i.html", b"a"), ("b/i.html", b"b")],
            ),
            422,
            "/x/i.html would be both \"a/i.html\" and \"b/i.html\"",
        ),
        (
            "a file over its limit",
            with("files = [\"*.bin\"]", &[("big.bin", &big)]),
            413,
            "component \"web\": file /big.bin (big.bin) is 70000 bytes; this tenant's quota allows 60000 per file (max_artifact_bytes)",
        ),
        (
            "files past the tenant's quota",
            with("files = [\"*.bin\"]", &[("a.bin", &a), ("b.bin", &b)]),
            413,
            "more would pass its quota of 120000 (max_total_artifact_bytes)",
        ),
    ];
    let stored_files = || {
        std::fs::read_dir(node.data.path().join("blobs/files/sha256"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    for (what, body, status, message) in cases {
        let before = (
            rt.block_on(node.state("gamma", &gamma, &["web"])),
            stored_files(),
        );
        let (s, v) = rt.block_on(node.call(
            "POST",
            "/v1/tenants/gamma/apps/web/versions",
            &gamma,
            Bytes::from(body),
        ));
        assert_eq!(s, status, "{what}: {v}");
        let m = v["error"]["message"].as_str().unwrap();
        assert!(m.contains(message), "{what}: {m:?} lacks {message:?}");
        assert_eq!(
            before,
            (
                rt.block_on(node.state("gamma", &gamma, &["web"])),
                stored_files()
            ),
            "{what} changed something"
        );
    }
}

fn tenant_shares_apply_at_once(backend: Backend) {
    let node = Node::start(backend, "");
    let rt = runtime();
    let op = node.operator_token();
    // Shares stay within the node.
    let (s, v) = rt.block_on(node.post("/v1/tenants", &op, json!({"name": "acme", "hosts": ["acme.test"], "quota": {"shares": {"memory_bytes": 1u64 << 40}}})));
    assert!(
        refused_on(s, &v, 422, "quota.shares.memory_bytes").contains("[pool] max_memory_bytes"),
        "{v}"
    );
    // Each below what `[limits]` would take of the same key, or above
    // its most, is refused by name, and no tenant is made.
    for (share, value, status, says) in [
        ("kv_store_bytes", 4095u64, 400, "at least 4096"),
        ("memory_bytes", 65535, 400, "at least 65536"),
        ("sqlite_database_bytes", 1000, 400, "at least 65536"),
        ("sqlite_statements", 0, 400, "at least 1"),
        ("sqlite_statements", 65537, 422, "65536"),
        ("max_open_files", 1 << 21, 422, "1048576"),
        ("max_total_memory_bytes", 65535, 400, "at least 65536"),
        (
            "max_total_memory_bytes",
            1 << 60,
            422,
            "[pool] total_memory_bytes",
        ),
    ] {
        let (s, v) = rt.block_on(node.post(
            "/v1/tenants",
            &op,
            json!({"name": "acme", "hosts": ["acme.test"], "quota": {"shares": {share: value}}}),
        ));
        let field = format!("quota.shares.{share}");
        assert!(refused_on(s, &v, status, &field).contains(says), "{v}");
    }
    assert_eq!(rt.block_on(node.get("/v1/tenants/acme", &op)).0, 404);
    let token = rt.block_on(node.tenant("acme", "acme.test", json!({})));
    let (code, _, err) = node.cli(
        &token,
        &["deploy", wasm("fixtures").to_str().unwrap(), "--app", "f"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        rt.block_on(node.serve("acme.test", "/sleep?ms=1500")).0,
        200
    );
    // A tenant may not change its own quota.
    let quota = json!({"quota": {"shares": {"request_deadline_ms": 500}}});
    let (s, _) = rt.block_on(node.call(
        "PATCH",
        "/v1/tenants/acme",
        &token,
        Bytes::from(quota.to_string()),
    ));
    assert_eq!(s, 403);
    let (s, v) = rt.block_on(node.call(
        "PATCH",
        "/v1/tenants/acme",
        &op,
        Bytes::from(quota.to_string()),
    ));
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["quota"]["shares"]["request_deadline_ms"], 500);
    // The new deadline holds for the next request.
    assert_eq!(
        rt.block_on(node.serve("acme.test", "/sleep?ms=1500")).0,
        504
    );
    let (_, t) = rt.block_on(node.get("/v1/tenants/acme", &token));
    assert_eq!(t["quota"]["shares"], json!({"request_deadline_ms": 500}));
    // The disk and descriptor shares are kept as given.
    let disk =
        json!({"sqlite_database_bytes": 1u64 << 20, "sqlite_statements": 2, "max_open_files": 64});
    let (s, v) = rt.block_on(node.call(
        "PATCH",
        "/v1/tenants/acme",
        &op,
        Bytes::from(json!({"quota": {"shares": disk}}).to_string()),
    ));
    assert_eq!((s, &v["quota"]["shares"]), (200, &disk), "{v}");
    let (_, t) = rt.block_on(node.get("/v1/tenants/acme", &token));
    assert_eq!(t["quota"]["shares"], disk);
}

/// A request with `headers`: status, response headers, JSON body.
async fn exchange(
    url: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, http::HeaderMap, Value) {
    use http_body_util::{BodyExt, Full};
    let mut req = http::Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = client()
        .request(req.body(Full::new(Bytes::from(body.to_string()))).unwrap())
        .await
        .unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (
        parts.status.as_u16(),
        parts.headers,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn users_log_in_with_a_session_cookie_and_csrf_token(backend: Backend) {
    let node = Node::start(backend, "");
    let rt = runtime();
    let op = node.operator_token();
    let _ = rt.block_on(node.tenant("acme", "acme.test", json!({})));
    let _ = rt.block_on(node.tenant("other", "other.test", json!({})));
    let users = "/v1/tenants/acme/users";
    let (s, v) = rt.block_on(node.post(
        users,
        &op,
        json!({"login": "alice@acme", "password": "short"}),
    ));
    refused_on(s, &v, 400, "password");
    let (s, v) = rt.block_on(node.post(
        users,
        &op,
        json!({"login": "alice@acme", "password": "correct horse battery"}),
    ));
    assert_eq!(s, 201, "{v}");
    assert!(
        v.get("secret_hash").is_none() && !v.to_string().contains("argon2"),
        "{v}"
    );
    let (s, _) = rt.block_on(node.post(
        "/v1/tenants/other/users",
        &op,
        json!({"login": "alice@acme", "password": "another long one"}),
    ));
    assert_eq!(s, 409);

    let api = node.api();
    let login = |password: &str| {
        let body = json!({"login": "alice@acme", "password": password}).to_string();
        rt.block_on(exchange(&format!("{api}/v1/login"), "POST", &[], &body))
    };
    let (s, _, v) = login("wrong password!");
    assert_eq!(
        (s, v["error"]["message"].as_str()),
        (401, Some("wrong login or password"))
    );
    let (s, _, v) = rt.block_on(exchange(
        &format!("{api}/v1/login"),
        "POST",
        &[],
        r#"{"login": "nobody", "password": "whatever it is"}"#,
    ));
    assert_eq!(
        (s, v["error"]["message"].as_str()),
        (401, Some("wrong login or password"))
    );

    let (s, headers, v) = login("correct horse battery");
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["tenant"], "acme");
    let set_cookie = headers[http::header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_string();
    for attr in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(attr), "{set_cookie}");
    }
    let cookie = set_cookie.split(';').next().unwrap().to_string();
    let csrf = v["csrf_token"].as_str().unwrap().to_string();
    let get = |path: &str| {
        rt.block_on(exchange(
            &format!("{api}{path}"),
            "GET",
            &[("cookie", cookie.as_str())],
            "",
        ))
    };
    assert_eq!(get("/v1/whoami").2["tenant"], "acme");
    // Reading needs the cookie alone; changing needs the CSRF token too.
    let apps = format!("{api}/v1/tenants/acme/apps");
    let (s, _, v) = rt.block_on(exchange(
        &apps,
        "POST",
        &[("cookie", cookie.as_str())],
        r#"{"name": "web"}"#,
    ));
    assert_eq!(s, 403, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("CSRF"),
        "{v}"
    );
    let (s, _, _) = rt.block_on(exchange(
        &apps,
        "POST",
        &[("cookie", cookie.as_str()), ("x-csrf-token", "forged")],
        r#"{"name": "web"}"#,
    ));
    assert_eq!(s, 403);
    let (s, _, v) = rt.block_on(exchange(
        &apps,
        "POST",
        &[("cookie", cookie.as_str()), ("x-csrf-token", csrf.as_str())],
        r#"{"name": "web"}"#,
    ));
    assert_eq!(s, 201, "{v}");
    // A session reaches its tenant only.
    assert_eq!(get("/v1/tenants/other/apps").0, 404);

    // Failed logins are limited: the sixth within a minute is refused
    // even with the right password.
    for _ in 0..5 {
        assert_eq!(login("not the password").0, 401);
    }
    let (s, headers, v) = login("correct horse battery");
    assert_eq!(s, 429, "{v}");
    assert!(headers.contains_key(http::header::RETRY_AFTER));

    // A login body far past any JSON the API takes (under the node's
    // 128 MiB upload cap): refused at its first megabyte, not read on
    // before any credential is checked.
    {
        use std::io::{Read, Write};
        let addr = api.trim_start_matches("http://");
        let mut big = std::net::TcpStream::connect(addr).unwrap();
        write!(big, "POST /v1/login HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100000000\r\n\r\n").unwrap();
        let mut writer = big.try_clone().unwrap();
        let sender = std::thread::spawn(move || {
            let chunk = vec![b' '; 64 << 10];
            for _ in 0..128 {
                if writer.write_all(&chunk).is_err() {
                    break;
                }
            }
        });
        big.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut answer = vec![0u8; 4096];
        let n = big.read(&mut answer).unwrap_or(0);
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        assert!(
            answer.contains("JSON bodies are at most 1048576 bytes"),
            "{answer}"
        );
        let _ = big.shutdown(std::net::Shutdown::Both);
        sender.join().unwrap();
    }

    // Logging out ends the session.
    let (s, headers, _) = rt.block_on(exchange(
        &format!("{api}/v1/logout"),
        "POST",
        &[("cookie", cookie.as_str()), ("x-csrf-token", csrf.as_str())],
        "",
    ));
    assert_eq!(s, 204);
    assert!(
        headers[http::header::SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    let (s, _, v) = get("/v1/whoami");
    assert_eq!(
        (s, v["error"]["message"].as_str()),
        (401, Some("the session ended; log in again"))
    );
}

/// Debian's OCI registry (`docker-registry`, the distribution project) on a
/// free loopback port, storing in a temporary directory; stopped on drop.
struct OciRegistry {
    child: std::process::Child,
    port: u16,
    _dir: TempDir,
}

impl OciRegistry {
    fn start() -> Self {
        let dir = TempDir::new("registry");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.write(
            "config.yml",
            &format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        );
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("docker-registry (the test command installs it)");
        let registry = Self {
            child,
            port,
            _dir: dir,
        };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return registry;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("docker-registry did not start");
    }
}

impl Drop for OciRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// With `[control] registry`, an accepted component is pushed to the
/// registry before it is stored, and a node missing it pulls it (checked
/// against its digest) before serving; a registry that does not take a
/// component fails its upload, and nothing is stored.
fn artifacts_are_shared_through_an_oci_registry(backend: Backend) {
    let mut registry = OciRegistry::start();
    let port = registry.port;
    let node = Node::start(
        backend,
        &format!("registry = \"http://127.0.0.1:{port}/edge/components\"\n"),
    );
    let rt = runtime();
    let token = rt.block_on(node.tenant("acme", "acme.test", json!({})));
    let (code, _, err) = node.cli(
        &token,
        &["deploy", wasm("echo").to_str().unwrap(), "--app", "web"],
    );
    assert_eq!(code, 0, "{err}");
    let (_, tags) = rt.block_on(edge_tests::get(&format!(
        "http://127.0.0.1:{port}/v2/edge/components/tags/list"
    )));
    let digest = rt
        .block_on(node.get("/v1/tenants/acme/artifacts", &token))
        .1[0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(tags.contains(&digest.replace(':', "-")), "{tags}");
    // A Spin app's files go there too.
    let beta = rt.block_on(node.tenant("beta", "beta.test", json!({})));
    let dir = TempDir::new("spin-files-registry");
    let manifest = dir.write("spin.toml", FILES_APP);
    std::fs::copy(
        edge_tests::repo()
            .join("tests/spin-apps/rust-features/target/wasm32-wasip2/release/rust_features.wasm"),
        dir.path().join("features.wasm"),
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("static")).unwrap();
    dir.write("static/index.html", "shared");
    let (code, _, err) = node.cli(&beta, &["deploy", manifest.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        rt.block_on(node.serve("beta.test", "/file/static/index.html")),
        (200, "shared".to_string())
    );

    // A node whose local store lost the component and the files (and
    // their staged trees) pulls them back.
    let node = node.restart_after(|data| {
        std::fs::remove_dir_all(data.join("blobs")).unwrap();
        std::fs::remove_dir_all(data.join("files")).unwrap();
    });
    let rt = runtime();
    assert_eq!(
        rt.block_on(node.serve("acme.test", "/x")),
        (200, "hello from edge: /x\n".to_string())
    );
    assert_eq!(
        rt.block_on(node.serve("beta.test", "/file/static/index.html")),
        (200, "shared".to_string())
    );
    assert!(node.edge.log().contains("file pulled from the registry"));
    assert!(
        node.edge
            .log()
            .contains("artifact pulled from the registry")
    );

    // No registry, no upload: nothing is stored.
    let _ = registry.child.kill();
    let _ = registry.child.wait();
    let before = rt.block_on(node.state("acme", &token, &["web"]));
    let (s, v) = rt.block_on(node.call(
        "POST",
        "/v1/tenants/acme/artifacts",
        &token,
        Bytes::from(std::fs::read(wasm("fixtures")).unwrap()),
    ));
    assert_eq!(s, 502, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the artifact registry did not take the component"),
        "{v}"
    );
    assert_eq!(before, rt.block_on(node.state("acme", &token, &["web"])));
    assert_eq!(rt.block_on(node.serve("acme.test", "/x")).0, 200);
}

/// Apps built with Spin's SDKs deploy through the control plane as they
/// are: a preview 1 module (spin-sdk 3.1.1) componentized at upload, with
/// its key-value store, SQLite database and a required secret; and Spin's
/// WASI 0.3 template (spin-sdk 7.0.0).
#[test]
fn spin_sdk_apps_deploy_as_they_are() {
    let node = Node::start(Backend::sqlite(), "");
    let rt = runtime();
    let op = node.operator_token();
    for (tenant, host) in [("acme", "acme.test"), ("beta", "beta.test")] {
        let (s, v) =
            rt.block_on(node.post("/v1/tenants", &op, json!({"name": tenant, "hosts": [host]})));
        assert_eq!(s, 201, "{v}");
    }
    let token = |tenant: &str| {
        let (_, t) = rt.block_on(node.post(
            &format!("/v1/tenants/{tenant}/tokens"),
            &op,
            json!({"name": "ci"}),
        ));
        t["token"].as_str().unwrap().to_string()
    };
    let app = |name: &str| {
        let m = edge_tests::repo()
            .join("tests/spin-apps")
            .join(name)
            .join("spin.toml");
        m.to_str().unwrap().to_string()
    };
    let (code, out, err) = node.cli(
        &token("acme"),
        &[
            "deploy",
            &app("rust-v3-features"),
            "--secret",
            "api_token=s3cret",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("deployed rust-v3-features version 1"), "{out}");
    let call = |method: &'static str, path: &str, body: &'static str| {
        let url = format!("{}{path}", node.edge.url);
        rt.block_on(async move {
            request(
                &client(),
                method,
                &url,
                &[("host", "acme.test")],
                Bytes::from(body),
            )
            .await
        })
    };
    assert_eq!(call("GET", "/var/token", ""), (200, "s3cret".into()));
    assert_eq!(
        call("GET", "/var/greeting", ""),
        (200, "hello, world".into())
    );
    assert_eq!(call("PUT", "/kv/k", "v").0, 200);
    assert_eq!(call("GET", "/kv/k", ""), (200, "v".into()));
    assert_eq!(call("POST", "/sql", "CREATE TABLE t (v)").0, 200);
    assert_eq!(call("POST", "/sql", "INSERT INTO t VALUES ('x')").0, 200);
    let (status, rows) = call("POST", "/sql", "SELECT v FROM t");
    assert_eq!(status, 200, "{rows}");
    assert!(
        rows.starts_with("columns: v\n") && rows.ends_with('x'),
        "{rows}"
    );

    let (code, out, err) = node.cli(&token("beta"), &["deploy", &app("rust-hello")]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("deployed rust-hello version 1"), "{out}");
    assert_eq!(
        rt.block_on(node.serve("beta.test", "/")),
        (200, "Hello World!".to_string())
    );
    // Each tenant sees only its own app.
    assert_eq!(
        rt.block_on(node.serve("beta.test", "/kv/k")).1,
        "Hello World!"
    );
    assert_eq!(call("GET", "/kv/k", ""), (200, "v".into()));

    // The same app with a manifest that grants no database: it deploys
    // (Spin's interfaces are linked as on Spin), the CLI notes what its
    // grants do not cover, and opening the database is Spin's
    // AccessDenied.
    let (s, v) = rt.block_on(node.post(
        "/v1/tenants",
        &op,
        json!({"name": "gamma", "hosts": ["gamma.test"]}),
    ));
    assert_eq!(s, 201, "{v}");
    let dir = TempDir::new("spin-nogrant-app");
    let original = std::fs::read_to_string(app("rust-v3-features")).unwrap();
    let built = "target/wasm32-wasip1/release/rust_v3_features.wasm";
    std::fs::create_dir_all(dir.path().join("target/wasm32-wasip1/release")).unwrap();
    std::fs::copy(
        edge_tests::repo()
            .join("tests/spin-apps/rust-v3-features")
            .join(built),
        dir.path().join(built),
    )
    .unwrap();
    let manifest = original.replace("sqlite_databases = [\"default\"]\n", "");
    let manifest = dir.write("spin.toml", &manifest);
    let (code, _, err) = node.cli(
        &token("gamma"),
        &[
            "deploy",
            manifest.to_str().unwrap(),
            "--secret",
            "api_token=x",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("edge: note: component \"features\": it imports fermyon:spin/sqlite@2.0.0 but names no sqlite_databases"),
        "{err}"
    );
    let (status, body) = rt.block_on(node.serve("gamma.test", "/sql-open/default"));
    assert_eq!(status, 500);
    assert!(body.ends_with("AccessDenied"), "{body}");
}

/// The node samples its routes (every 100 ms here) and the API plots a
/// tenant's apps from those samples; another tenant's metrics are 404 as
/// everything of it; operators see the node's health. The control
/// listener also serves a console build, the API beside it unchanged.
#[test]
fn metrics_history_per_app_node_health_and_the_console() {
    let console = TempDir::new("console-build");
    console.write("index.html", "<!doctype html><title>console</title>");
    let node = Node::start_env(
        Backend::sqlite(),
        &format!("console = \"{}\"", console.path().display()),
        &[("EDGE_METRICS_SAMPLE_MS", "100")],
    );
    let rt = runtime();
    let alpha = rt.block_on(node.tenant("alpha", "alpha.test", json!({})));
    let beta = rt.block_on(node.tenant("beta", "beta.test", json!({})));
    let op = node.operator_token();
    let (code, _, err) = node.cli(
        &alpha,
        &["deploy", wasm("echo").to_str().unwrap(), "--app", "web"],
    );
    assert_eq!(code, 0, "{err}");
    const REQUESTS: u64 = 25;
    for i in 0..REQUESTS {
        let (s, body) = rt.block_on(node.serve("alpha.test", &format!("/m/{i}")));
        assert_eq!(s, 200, "{body}");
    }

    // Every request shows up once the samples after it are taken: in a
    // point with a rate, a latency and 2xx answers.
    let sum_2xx = |v: &Value| -> u64 {
        v["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["responses"]["2xx"].as_u64().unwrap())
            .sum()
    };
    let mut web = Value::Null;
    for _ in 0..100 {
        let (s, v) = rt.block_on(node.get("/v1/tenants/alpha/metrics", &alpha));
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["interval_ms"], 100);
        assert_eq!(v["apps"].as_array().unwrap().len(), 1, "{v}");
        web = v["apps"][0].clone();
        if sum_2xx(&web) == REQUESTS {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(web["app"], "web");
    assert_eq!(sum_2xx(&web), REQUESTS, "{web}");
    let busy: Vec<&Value> = web["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["rps"].as_f64().unwrap() > 0.0)
        .collect();
    assert!(!busy.is_empty(), "{web}");
    for p in &busy {
        assert!(p["p50_ms"].as_f64().unwrap() > 0.0, "{p}");
        assert!(
            p["p99_ms"].as_f64().unwrap() >= p["p50_ms"].as_f64().unwrap(),
            "{p}"
        );
        assert_eq!(
            (p["errors"].as_u64(), p["responses"]["5xx"].as_u64()),
            (Some(0), Some(0)),
            "{p}"
        );
    }
    // One app, and only what is new since a time.
    let last_t = web["points"].as_array().unwrap().last().unwrap()["t"]
        .as_i64()
        .unwrap();
    let (s, v) = rt.block_on(node.get(
        &format!("/v1/tenants/alpha/metrics?app=web&since={last_t}"),
        &alpha,
    ));
    assert_eq!(s, 200, "{v}");
    assert!(
        v["apps"][0]["points"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["t"].as_i64().unwrap() > last_t),
        "{v}"
    );
    assert_eq!(
        rt.block_on(node.get("/v1/tenants/alpha/metrics?app=none", &alpha))
            .0,
        404
    );

    // Beta sees nothing of alpha's: the same 404 as for no tenant.
    let (s, v) = rt.block_on(node.get("/v1/tenants/alpha/metrics", &beta));
    assert_eq!(s, 404, "{v}");
    assert_eq!(v["error"]["message"], "no tenant \"alpha\"");
    let (s, v) = rt.block_on(node.get("/v1/tenants/beta/metrics", &beta));
    assert_eq!((s, v["apps"].clone()), (200, json!([])), "{v}");
    // Operators reach alpha's.
    let (s, v) = rt.block_on(node.get("/v1/tenants/alpha/metrics", &op));
    assert_eq!((s, v["apps"][0]["app"].as_str()), (200, Some("web")), "{v}");

    // The node's health: operators only.
    let (s, h) = rt.block_on(node.get("/v1/health", &op));
    assert_eq!(s, 200, "{h}");
    assert_eq!(h["status"], "ok");
    assert_eq!(h["apps"], 1);
    assert_eq!(h["tenants"], 3, "operator, alpha, beta: {h}");
    assert!(h["instances"]["total"].as_u64().unwrap() >= 1, "{h}");
    assert!(h["instances"]["in_use"].as_u64().is_some(), "{h}");
    assert!(h["requests_1m"].as_u64().unwrap() >= REQUESTS, "{h}");
    assert!(h["rps_1m"].as_f64().unwrap() > 0.0, "{h}");
    assert_eq!(h["sample_interval_ms"], 100);
    assert_eq!(rt.block_on(node.get("/v1/health", &alpha)).0, 403);
    let (s, _) = rt.block_on(request(
        &client(),
        "GET",
        &format!("{}/v1/health", node.api()),
        &[],
        Bytes::new(),
    ));
    assert_eq!(s, 401);

    // The console beside the API: its page for its own routes, the API's
    // JSON 404 for an unknown endpoint.
    let (s, page) = rt.block_on(request(
        &client(),
        "GET",
        &format!("{}/t/alpha/apps", node.api()),
        &[],
        Bytes::new(),
    ));
    assert_eq!(
        (s, page.as_str()),
        (200, "<!doctype html><title>console</title>")
    );
    let (s, v) = rt.block_on(node.get("/v1/nothing", &op));
    assert_eq!(s, 404);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no such endpoint"),
        "{v}"
    );
}

/// Behind the operator's proxy (`[server] trusted_proxies`) failed logins
/// count per client it names, not per proxy: one client's failures must
/// not lock every other client out.
#[test]
fn failed_logins_behind_a_trusted_proxy_count_per_forwarded_client() {
    let node = Node::start(
        Backend::sqlite(),
        "[server]\ntrusted_proxies = [\"127.0.0.0/8\"]\n",
    );
    let rt = runtime();
    let api = node.api();
    let login = |from: &str, name: &str| {
        let body = json!({"login": name, "password": "not the password"}).to_string();
        rt.block_on(exchange(
            &format!("{api}/v1/login"),
            "POST",
            &[("x-forwarded-for", from)],
            &body,
        ))
        .0
    };
    // 20 failures from one client (5 per login name, each name's own
    // limit), the most an address may make in a window.
    for i in 0..20 {
        assert_eq!(
            login("203.0.113.7", &format!("user{}", i / 5)),
            401,
            "attempt {i}"
        );
    }
    assert_eq!(login("203.0.113.7", "someone-else"), 429);
    // Another client behind the same proxy is not refused.
    assert_eq!(login("198.51.100.1", "someone-else"), 401);
    // A client cannot pose as another by writing its own header: the
    // proxy appends what it saw, and that is what counts.
    assert_eq!(login("198.51.100.1, 203.0.113.7", "another"), 429);
}

/// An API served over https under a private certificate authority (a
/// TLS front made here, with openssl's certificates): the CLI trusts it
/// with `--ca-cert`, not without, and says what is wrong with a bad file.
#[test]
fn the_cli_trusts_a_private_ca_for_an_https_api() {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
    let node = Node::start(Backend::sqlite(), "");
    let dir = edge_tests::TempDir::new("private-ca");
    let openssl = |args: &[&str]| {
        edge_tests::run_ok(
            std::process::Command::new("openssl")
                .args(args)
                .current_dir(dir.path()),
            &format!("openssl {args:?}"),
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=edge test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "api.key",
                "-out",
                "api.csr",
                "-subj",
                "/CN=localhost",
            ],
        ]
        .concat(),
    );
    dir.write(
        "api.ext",
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    );
    openssl(&[
        "x509",
        "-req",
        "-in",
        "api.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "api.pem",
        "-days",
        "2",
        "-extfile",
        "api.ext",
    ]);
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(dir.path().join("api.pem"))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.path().join("api.key")).unwrap();
    let tls = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(
        rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap(),
    ));
    // The front: TLS in, the API's plain HTTP out.
    let rt = runtime();
    let upstream = node.api().trim_start_matches("http://").to_string();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    rt.spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (tls, upstream) = (tls.clone(), upstream.clone());
            tokio::spawn(async move {
                let (Ok(mut client), Ok(mut api)) = (
                    tls.accept(client).await,
                    tokio::net::TcpStream::connect(&upstream).await,
                ) else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut client, &mut api).await;
            });
        }
    });
    let https = format!("https://localhost:{port}");
    let token = node.operator_token();
    let cli = |extra: &[&str]| {
        edge_tests::edge_cli(
            &https,
            &token,
            node.data.path(),
            &[&["tenants", "list", "--json"][..], extra].concat(),
        )
    };
    let ca = dir.path().join("ca.pem").display().to_string();
    let (code, out, err) = cli(&["--ca-cert", &ca]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        serde_json::from_str::<Value>(&out).is_ok_and(|v| v.is_array()),
        "{out}"
    );
    // Without it, the public roots alone: refused, saying why.
    let (code, _, err) = cli(&[]);
    assert_ne!(code, 0);
    assert!(
        err.contains("UnknownIssuer") || err.contains("certificate"),
        "{err}"
    );
    // A file that is not one: said so, nothing sent.
    dir.write("not.pem", "not a certificate\n");
    let not = dir.path().join("not.pem").display().to_string();
    let (code, _, err) = cli(&["--ca-cert", &not]);
    assert_ne!(code, 0);
    assert!(err.contains("holds no certificate"), "{err}");
}
