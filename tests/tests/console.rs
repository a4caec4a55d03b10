//! The web console in a real browser (web-ui/e2e, Playwright driving
//! Debian's chromium) against a real node with its control plane, on
//! SQLite and on MariaDB. This file starts the node, makes the tenant and
//! the users, and hands the browser tests where everything is; the
//! browser tests save a screenshot of each main page in
//! web-ui/e2e/screenshots/.

use bytes::Bytes;
use edge_tests::mariadb::Mariadb;
use edge_tests::{Edge, TempDir, client, component, repo, request, shared_cache};
use serde_json::{Value, json};
use std::process::Command;

const PASSWORD: &str = "a long enough password";

const SPIN: &str = r#"spin_manifest_version = 2
[application]
name = "operator"
[[trigger.http]]
route = "/..."
component = "echo"
[component.echo]
source = "SOURCE"
[component.rewriter]
source = "REWRITER"
"#;

struct Node {
    edge: Edge,
    data: TempDir,
    _db: Option<Mariadb>,
}

impl Node {
    fn start(db: Option<Mariadb>) -> Self {
        let data = TempDir::new("console-data");
        std::os::unix::fs::symlink(shared_cache().join("cache"), data.path().join("cache"))
            .unwrap();
        let database = db
            .as_ref()
            .map(|d| format!("database = \"{}\"\n", d.url("edge")))
            .unwrap_or_default();
        let edge_toml = format!(
            "app = \"spin.toml\"\n[outbound]\nallow_ranges = [\"127.0.0.1/32\"]\n[control]\nlisten = \"127.0.0.1:0\"\nconsole = \"{}\"\n{database}\n[[tenant]]\nname = \"operator\"\nhosts = [\"operator.test\", \"*\"]\ncomponents = [\"*\"]\n",
            repo().join("web-ui/build").display()
        );
        let spin = SPIN
            .replace("SOURCE", &component("echo"))
            .replace("REWRITER", &component("rewriter"));
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
        let token = std::fs::read_to_string(self.data.path().join("control/operator.token"))
            .expect("the bootstrap operator token");
        let auth = format!("Bearer {}", token.trim());
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

    /// Runs `edge ARGS` with the operator's token, `stdin` as its input.
    fn cli_with_stdin(&self, args: &[&str], stdin: &str) {
        use std::io::Write;
        let mut child = Command::new(edge_tests::edge_bin())
            .args(args)
            .env("EDGE_API_URL", self.api())
            .env(
                "EDGE_API_TOKEN_FILE",
                self.data.path().join("control/operator.token"),
            )
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("edge");
        writeln!(child.stdin.take().unwrap(), "{stdin}").unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "edge {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("can log in to the console"));
    }

    /// Runs the browser tests matching `grep` against this node.
    fn playwright(&self, label: &str, grep: &str) {
        let dir = repo().join("web-ui");
        let out = Command::new(dir.join("node_modules/.bin/playwright"))
            .args(["test", "-c", "e2e/playwright.config.ts", "--grep", grep])
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
    node.cli_with_stdin(
        &["users", "create", "ada@acme.test", "--tenant", "acme"],
        PASSWORD,
    );
    node
}

#[test]
fn console_in_a_browser_on_sqlite() {
    node(None).playwright("sqlite", ".");
}

#[test]
fn console_in_a_browser_on_mariadb() {
    node(Some(Mariadb::start("edge", |_| Vec::new()))).playwright("mariadb", ".");
}
