//! The web console in a real browser (web-ui/e2e, Playwright driving
//! Debian's chromium) against a real node with its control plane, on
//! SQLite and on MariaDB. This file starts the node, makes the tenant and
//! the users, and hands the browser tests where everything is; the
//! browser tests save a screenshot of each main page in
//! web-ui/e2e/screenshots/.

use bytes::Bytes;
use edge_tests::mariadb::Mariadb;
use edge_tests::{Edge, TempDir, client, link_shared_cache, repo, request};
use serde_json::{Value, json};
use std::process::Command;

const PASSWORD: &str = "a long enough password";

struct Node {
    edge: Edge,
    data: TempDir,
    _db: Option<Mariadb>,
}

impl Node {
    fn start(db: Option<Mariadb>) -> Self {
        let data = TempDir::new("console-data");
        link_shared_cache(data.path());
        let database = db
            .as_ref()
            .map(|d| format!("database = \"{}\"\n", d.url("edge")))
            .unwrap_or_default();
        let edge_toml = format!(
            "app = \"spin.toml\"\n[outbound]\nallow_ranges = [\"127.0.0.1/32\"]\n[control]\nlisten = \"127.0.0.1:0\"\nconsole = \"{}\"\n{database}\n[[tenant]]\nname = \"operator\"\nhosts = [\"operator.test\", \"*\"]\ncomponents = [\"*\"]\n",
            repo().join("web-ui/build").display()
        );
        let spin = edge_tests::operator_spin();
        // Samples of traffic often enough for the metrics page to fill.
        let edge = Edge::start_env(
            &spin,
            &edge_toml,
            data.path(),
            &[("EDGE_METRICS_SAMPLE_MS", "250")],
        );
        Self {
            edge,
            data,
            _db: db,
        }
    }

    fn api(&self) -> String {
        self.edge
            .control
            .clone()
            .expect("the control API's address")
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let auth = format!("Bearer {}", edge_tests::operator_token(self.data.path()));
        let (status, text) = request(
            &client(),
            "POST",
            &format!("{}{path}", self.api()),
            &[("authorization", auth.as_str())],
            Bytes::from(body.to_string()),
        )
        .await;
        assert_eq!(status, 201, "POST {path}: {text}; log: {}", self.edge.log());
        serde_json::from_str(&text).unwrap()
    }

    /// Runs `edge ARGS` with `token` (else the operator's), `stdin` as
    /// its input; its output, or the test fails.
    fn cli(&self, token: Option<&str>, args: &[&str], stdin: &str) -> String {
        use std::io::Write;
        let mut command = Command::new(edge_tests::edge_bin());
        command.args(args).env("EDGE_API_URL", self.api());
        match token {
            Some(t) => command.env("EDGE_API_TOKEN", t),
            None => command.env(
                "EDGE_API_TOKEN_FILE",
                self.data.path().join("control/operator.token"),
            ),
        };
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("edge");
        writeln!(child.stdin.take().unwrap(), "{stdin}").unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "edge {args:?}: {}{}\nnode log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.edge.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs the browser tests in `specs` (web-ui/e2e) against this node,
    /// `env` added to what they are told.
    fn playwright(&self, label: &str, specs: &[&str], env: &[(&str, String)]) {
        let dir = repo().join("web-ui");
        let out = Command::new(dir.join("node_modules/.bin/playwright"))
            .args(["test", "-c", "e2e/playwright.config.ts"])
            .args(specs.iter().map(|s| format!("e2e/{s}")))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(&dir)
            .env("EDGE_CONSOLE_URL", self.api())
            .env("EDGE_SERVE_URL", &self.edge.url)
            .env("EDGE_TENANT", "acme")
            .env("EDGE_TENANT_HOST", "acme.test")
            .env("EDGE_TENANT_LOGIN", "ada@acme.test")
            .env("EDGE_OPERATOR_LOGIN", "ops@edge.test")
            .env("EDGE_PASSWORD", PASSWORD)
            .env("EDGE_COMPONENTS", repo().join("build/components"))
            .env("EDGE_E2E_LABEL", label)
            .output()
            .expect("running playwright (make web-ui installs it)");
        assert!(
            out.status.success(),
            "browser tests failed:\n{}{}\nnode log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.edge.log()
        );
    }
}

/// A node with tenant `acme` (hosts `acme.test`, `*.acme.test`), its user
/// and an operator user; guests may reach loopback (a site's origin is
/// the node's own listener).
fn node(db: Option<Mariadb>) -> Node {
    let node = Node::start(db);
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        node.post(
            "/v1/tenants",
            json!({"name": "acme", "hosts": ["acme.test", "*.acme.test"]}),
        )
        .await;

        node.post(
            "/v1/users",
            json!({"login": "ops@edge.test", "password": PASSWORD}),
        )
        .await;
    });
    // The tenant's user is made as an operator would: `edge users create`,
    // the password on standard input.
    let out = node.cli(
        None,
        &["users", "create", "ada@acme.test", "--tenant", "acme"],
        PASSWORD,
    );
    assert!(out.contains("can log in to the console"), "{out}");
    node
}

const CONSOLE_SPECS: &[&str] = &["apps.spec.ts", "operator.spec.ts", "sites.spec.ts"];

#[test]
fn console_in_a_browser_on_sqlite() {
    node(None).playwright("sqlite", CONSOLE_SPECS, &[]);
}

#[test]
fn console_in_a_browser_on_mariadb() {
    node(Some(Mariadb::start("edge", |_| Vec::new()))).playwright("mariadb", CONSOLE_SPECS, &[]);
}

/// The billing app's host: under `.localhost`, which Chromium resolves to
/// loopback and treats as a secure context (the app's cookie is Secure).
const BILLING_HOST: &str = "billing.localhost";
const SEED_TOKEN: &str = "seed token of the browser test";
const ROW_KEY_HEX: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/// The billing app deployed by tenant `conf` through the control plane
/// (`edge deploy build/billing/spin.toml`), its database Spin's SQLite or
/// MariaDB, seeded through its own `/api/seed`; and a client id of
/// dealer 2's (what dealer 1 must not reach).
fn billing(db: Option<Mariadb>) -> (Node, i64) {
    let manifest = repo().join("build/billing/spin.toml");
    assert!(
        manifest.exists(),
        "{} is missing: run `make billing`",
        manifest.display()
    );
    let node = Node::start(db);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let token = rt.block_on(async {
        node.post(
            "/v1/tenants",
            json!({"name": "conf", "hosts": [BILLING_HOST]}),
        )
        .await;
        let t = node
            .post("/v1/tenants/conf/tokens", json!({"name": "deploys"}))
            .await;
        t["token"].as_str().unwrap().to_string()
    });
    let mut args: Vec<String> = vec![
        "deploy".into(),
        manifest.display().to_string(),
        "--secret".into(),
        format!("row_key={ROW_KEY_HEX}"),
        "--secret".into(),
        format!("seed_token={SEED_TOKEN}"),
        "--secret".into(),
        format!("demo_password={PASSWORD}"),
        "--var".into(),
        "seed_scale=200".into(),
    ];
    if let Some(db) = &node._db {
        let port = db.port.expect("MariaDB on TCP");
        db.client(
            None,
            "CREATE DATABASE billing; CREATE USER 'billing'@'127.0.0.1' IDENTIFIED BY 'pw'; GRANT ALL ON billing.* TO 'billing'@'127.0.0.1'",
        )
        .unwrap();
        args.push("--secret".into());
        args.push(format!(
            "db_url=mysql://billing:pw@127.0.0.1:{port}/billing"
        ));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    node.cli(Some(&token), &args, "");
    let other = rt.block_on(async {
        let app = |method: &'static str,
                   path: &'static str,
                   headers: Vec<(&'static str, String)>,
                   body: String| {
            let url = format!("{}{path}", node.edge.url);
            async move {
                let mut h: Vec<(&str, &str)> = vec![("host", BILLING_HOST)];
                h.extend(headers.iter().map(|(k, v)| (*k, v.as_str())));
                request(&client(), method, &url, &h, Bytes::from(body)).await
            }
        };
        let auth = format!("Bearer {SEED_TOKEN}");
        let (status, answer) = app(
            "POST",
            "/api/seed",
            vec![("authorization", auth.clone())],
            r#"{"part":0}"#.into(),
        )
        .await;
        assert_eq!(status, 200, "{answer}\n{}", node.edge.log());
        let parts = serde_json::from_str::<Value>(&answer).unwrap()["parts"]
            .as_i64()
            .unwrap();
        for part in 1..parts {
            let (status, answer) = app(
                "POST",
                "/api/seed",
                vec![("authorization", auth.clone())],
                format!(r#"{{"part":{part}}}"#),
            )
            .await;
            assert_eq!(status, 200, "{answer}");
        }
        other_dealers_client(&node.edge.url).await
    });
    (node, other)
}

/// The first client dealer 2 sees.
async fn other_dealers_client(url: &str) -> i64 {
    let req = http::Request::post(format!("{url}/api/login"))
        .header("host", BILLING_HOST)
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(Bytes::from(
            json!({"login": "dealer2@billing.test", "password": PASSWORD}).to_string(),
        )))
        .unwrap();
    let resp = client().request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let cookie = resp.headers()["set-cookie"].to_str().unwrap();
    let session = cookie.split(';').next().unwrap().to_string();
    let (status, body) = request(
        &client(),
        "GET",
        &format!("{url}/api/clients?per_page=1"),
        &[("host", BILLING_HOST), ("cookie", &session)],
        Bytes::new(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["rows"][0]["id"]
        .as_i64()
        .unwrap()
}

fn billing_in_a_browser(label: &str, db: Option<Mariadb>) {
    let (node, other) = billing(db);
    node.playwright(
        label,
        &["billing.spec.ts"],
        &[
            ("EDGE_BILLING_HOST", BILLING_HOST.into()),
            ("EDGE_BILLING_PASSWORD", PASSWORD.into()),
            ("EDGE_OTHER_DEALERS_CLIENT", other.to_string()),
        ],
    );
}

#[test]
fn billing_workspace_in_a_browser_on_sqlite() {
    billing_in_a_browser("sqlite", None);
}

#[test]
fn billing_workspace_in_a_browser_on_mariadb() {
    billing_in_a_browser("mariadb", Some(Mariadb::start_tcp("edge")));
}
