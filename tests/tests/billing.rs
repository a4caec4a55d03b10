//! The billing app (`components/billing`, built by `make billing` into
//! `build/billing/`) deployed through the control plane as a tenant
//! deploys it, on Spin's SQLite and on MariaDB through Spin's MySQL
//! interface (the same test body): seeded through `/api/seed`, then its
//! sessions, CSRF, rate limits, the role matrix and dealer scoping, sort,
//! search and filters against injection, optimistic edits, CSV export,
//! payment signatures (a row changed behind the app's back reads back
//! unverified) and, on MariaDB, the component's signatures checked by the
//! UDF `edge_verify_row` with the same key.

use bytes::Bytes;
use edge_tests::mariadb::Mariadb;
use edge_tests::{Edge, TempDir, client, component, edge_bin, link_shared_cache};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

/// The row key (hex) and the same bytes in base64 for the UDF's key file.
const ROW_KEY_HEX: &str = "3031323334353637383961626364656630313233343536373839616263646566";
const UDF_KEYS: &str = "hs256 billing MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n";
const SEED_TOKEN: &str = "seed-token-for-tests";
const DEMO_PASSWORD: &str = "demo password 2026";
/// Clients the test seeds (10 payments each), in 5 parts of 10 after part 0.
const SCALE: i64 = 40;
const HOST: &str = "billing.test";

enum Backend {
    Sqlite,
    Mariadb(Mariadb),
}

fn manifest() -> PathBuf {
    let m = edge_tests::repo().join("build/billing/spin.toml");
    assert!(
        m.exists(),
        "{} is missing: run `make billing` first",
        m.display()
    );
    m
}

/// A node with the control plane; the app's database on `backend`.
struct Node {
    edge: Edge,
    data: TempDir,
}

impl Node {
    fn start() -> Self {
        let data = TempDir::new("billing-data");
        link_shared_cache(data.path());
        let spin = format!(
            "spin_manifest_version = 2\n[application]\nname = \"operator\"\n[[trigger.http]]\nroute = \"/...\"\ncomponent = \"echo\"\n[component.echo]\nsource = \"{}\"\n",
            component("echo")
        );
        // MariaDB listens on loopback, which tenants reach only through an
        // allowed range.
        let edge_toml = "app = \"spin.toml\"\n[control]\nlisten = \"127.0.0.1:0\"\n[outbound]\nallow_ranges = [\"127.0.0.1/32\"]\n[[tenant]]\nname = \"operator\"\nhosts = [\"operator.test\"]\ncomponents = [\"*\"]\n";
        let edge = Edge::start_env(&spin, edge_toml, data.path(), &[]);
        Self { edge, data }
    }

    fn operator_token(&self) -> String {
        edge_tests::operator_token(self.data.path())
    }

    async fn api(&self, method: &str, path: &str, token: &str, body: Value) -> (u16, Value) {
        let url = format!("{}{path}", self.edge.control.clone().unwrap());
        let a = send(
            &url,
            method,
            &[("authorization", &format!("Bearer {token}"))],
            &body.to_string(),
        )
        .await;
        (a.status, a.json())
    }

    fn cli(&self, token: &str, args: &[&str]) -> (i32, String, String) {
        edge_tests::edge_cli(
            self.edge.control.as_deref().unwrap(),
            token,
            self.data.path(),
            args,
        )
    }
}

struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

async fn send(url: &str, method: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    send_from(None, url, method, headers, body).await
}

/// [`send`] from the address `local` (default: the system's choice).
async fn send_from(
    local: Option<std::net::IpAddr>,
    url: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut req = http::Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    let client = match local {
        Some(ip) => edge_tests::client_from(ip),
        None => client(),
    };
    let resp = client.request(req).await.expect("an answer");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// The content type of a JSON body (a login must say it).
const JSON: (&str, &str) = ("content-type", "application/json");

/// A logged-in user: the cookie and the CSRF token.
#[derive(Clone)]
struct Session {
    cookie: String,
    csrf: String,
}

/// The app on the node's listener.
struct App<'a> {
    url: String,
    edge: &'a Edge,
    /// Where requests come from (default: the system's choice).
    local: Option<std::net::IpAddr>,
}

impl App<'_> {
    /// The node's log's end, for failures.
    fn log(&self) -> String {
        let log = self.edge.log();
        log[log.len().saturating_sub(3000)..].to_string()
    }

    async fn call(&self, who: Option<&Session>, method: &str, path: &str, body: &str) -> Answer {
        let mut h: Vec<(&str, &str)> = vec![("host", HOST)];
        if let Some(s) = who {
            h.push(("cookie", &s.cookie));
            h.push(("x-csrf-token", &s.csrf));
        }
        send_from(self.local, &format!("{}{path}", self.url), method, &h, body).await
    }

    /// With explicit headers (and no session unless they carry one).
    async fn raw(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
        let mut h: Vec<(&str, &str)> = vec![("host", HOST)];
        h.extend_from_slice(headers);
        send_from(self.local, &format!("{}{path}", self.url), method, &h, body).await
    }

    async fn get(&self, who: &Session, path: &str) -> Value {
        let a = self.call(Some(who), "GET", path, "").await;
        assert_eq!(a.status, 200, "GET {path}: {}", a.body);
        a.json()
    }

    async fn login(&self, login: &str, password: &str) -> Answer {
        self.raw(
            "POST",
            "/api/login",
            &[JSON],
            &json!({"login": login, "password": password}).to_string(),
        )
        .await
    }

    async fn session(&self, login: &str) -> Session {
        let a = self.login(login, DEMO_PASSWORD).await;
        assert_eq!(a.status, 200, "{login}: {}", a.body);
        session_of(&a)
    }

    /// Every client id a session's listing gives (pages of 200).
    async fn ids(&self, who: &Session, query: &str) -> Vec<i64> {
        let mut out = Vec::new();
        for page in 1.. {
            let v = self
                .get(
                    who,
                    &format!("/api/clients?per_page=200&page={page}&{query}"),
                )
                .await;
            let rows = v["rows"].as_array().unwrap();
            out.extend(rows.iter().map(|r| r["id"].as_i64().unwrap()));
            if rows.len() < 200 {
                break;
            }
        }
        out
    }
}

fn session_of(a: &Answer) -> Session {
    let set = a.header("set-cookie");
    assert!(
        set.ends_with("; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=43200"),
        "{set}"
    );
    Session {
        cookie: set.split(';').next().unwrap().to_string(),
        csrf: a.json()["csrf_token"].as_str().unwrap().to_string(),
    }
}

fn scenario(backend: Backend) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(backend));
}

async fn run(backend: Backend) {
    let node = Node::start();
    let op = node.operator_token();
    let (s, v) = node
        .api(
            "POST",
            "/v1/tenants",
            &op,
            json!({"name": "books", "hosts": [HOST]}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let (s, v) = node
        .api(
            "POST",
            "/v1/tenants/books/tokens",
            &op,
            json!({"name": "ci"}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let token = v["token"].as_str().unwrap().to_string();

    // Deployed as a tenant deploys it: the manifest, its component and files.
    let m = manifest();
    let mut args: Vec<String> = [
        "deploy",
        m.to_str().unwrap(),
        "--secret",
        &format!("row_key={ROW_KEY_HEX}"),
        "--secret",
        &format!("seed_token={SEED_TOKEN}"),
        "--secret",
        &format!("demo_password={DEMO_PASSWORD}"),
        "--var",
        &format!("seed_scale={SCALE}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Backend::Mariadb(db) = &backend {
        let port = db.port.unwrap();
        db.client(
            Some("billing"),
            "CREATE USER 'billing'@'127.0.0.1' IDENTIFIED BY 'pw'; GRANT ALL ON billing.* TO 'billing'@'127.0.0.1'",
        )
        .unwrap();
        args.push("--secret".into());
        args.push(format!(
            "db_url=mysql://billing:pw@127.0.0.1:{port}/billing"
        ));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = node.cli(&token, &args);
    assert_eq!(code, 0, "{out}{err}\n{}", node.edge.log());
    // Its grants cover every Spin interface it imports.
    assert!(!err.contains("note:"), "{err}");
    assert!(out.contains("deployed billing version 1"), "{out}");
    let app = App {
        url: node.edge.url.clone(),
        edge: &node.edge,
        local: None,
    };

    seeding(&app).await;
    let admin = app.session("admin@billing.test").await;
    let d1 = app.session("dealer1@billing.test").await;
    let d2 = app.session("dealer2@billing.test").await;

    sessions(&app, &admin).await;
    // Each dealer's clients, as the admin sees them.
    let mut by_dealer = Vec::new();
    for d in 1..=5 {
        by_dealer.push(app.ids(&admin, &format!("dealer={d}")).await);
    }
    let all = app.ids(&admin, "").await;
    assert_eq!(all.len() as i64, SCALE);
    assert_eq!(by_dealer.iter().map(Vec::len).sum::<usize>(), all.len());
    assert!(!by_dealer[0].is_empty() && !by_dealer[1].is_empty());
    let (c1, c2) = (by_dealer[0][0], by_dealer[1][0]);

    scoping(&app, &d1, &d2, &by_dealer).await;
    csrf(&app, &admin, &d1, &d2, c1).await;
    role_matrix(&app, &admin, &d1, &d2, c1, c2).await;
    queries(&app, &admin, &d1, all.len()).await;
    editing(&app, &d1, c1).await;
    let sql = |stmt: &str| -> String {
        match &backend {
            Backend::Sqlite => {
                let out = Command::new("sqlite3")
                    .arg(sqlite_file(node.data.path()))
                    .arg(stmt)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{out:?}");
                String::from_utf8(out.stdout).unwrap().trim().to_string()
            }
            Backend::Mariadb(db) => db.client(Some("billing"), stmt).unwrap().trim().to_string(),
        }
    };
    remembered_totals(&app, &admin, &d1, &d2, &sql).await;
    // The schema's version is read with the session: a schema found
    // behind (here: its last version's row gone) is migrated again by the
    // request (every migration is idempotent), which then answers.
    sql(
        "DELETE FROM schema_version WHERE version = (SELECT v FROM (SELECT MAX(version) AS v FROM schema_version) m)",
    );
    let behind = sql("SELECT MAX(version) FROM schema_version");
    app.get(&d1, "/api/clients?per_page=1&q=pick").await;
    let now = sql("SELECT MAX(version) FROM schema_version");
    assert_eq!(
        now.parse::<i64>().unwrap(),
        behind.parse::<i64>().unwrap() + 1
    );
    // A disabled user's session is no session.
    sql("UPDATE users SET disabled = 1 WHERE login = 'dealer2@billing.test'");
    assert_eq!(app.call(Some(&d2), "GET", "/api/me", "").await.status, 401);
    sql("UPDATE users SET disabled = 0 WHERE login = 'dealer2@billing.test'");
    assert_eq!(app.call(Some(&d2), "GET", "/api/me", "").await.status, 200);
    logins(&app, &admin, &d1).await;
    csv_export(&app, &admin, &d1).await;
    // The web workspace's files, deployed with the app (Spin `files`).
    statics(&app, &edge_tests::repo().join("build/billing/ui")).await;

    // A payment changed behind the app's back reads back unverified.
    let pays = app
        .get(&d1, &format!("/api/clients/{c1}/payments?per_page=200"))
        .await;
    assert_eq!(pays["total"], 10, "{pays}");
    let rows = pays["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["verified"] == true), "{pays}");
    let victim = rows[3]["id"].as_i64().unwrap();
    sql(&format!(
        "UPDATE payments SET amount_cents = amount_cents + 100 WHERE id = {victim}"
    ));
    let pays = app
        .get(&d1, &format!("/api/clients/{c1}/payments?per_page=200"))
        .await;
    for r in pays["rows"].as_array().unwrap() {
        assert_eq!(r["verified"], r["id"].as_i64() != Some(victim), "{r}");
    }
    let everything = app.get(&admin, "/api/payments?per_page=1").await;
    assert_eq!(everything["total"], SCALE * 10);

    if let Backend::Mariadb(db) = &backend {
        // One implementation: the UDF verifies what the component signed,
        // and signs the same way.
        let out = Command::new(edge_bin())
            .args(["udf", "install", "--no-process", "--socket"])
            .arg(db.socket())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let count = |sql: &str| db.client(Some("billing"), sql).unwrap().trim().to_string();
        let cols = "id, client_id, amount_cents, currency, paid_at, reference";
        assert_eq!(
            count(&format!(
                "SELECT COUNT(*) FROM payments WHERE edge_verify_row('billing', signature, {cols})"
            )),
            (SCALE * 10 - 1).to_string()
        );
        assert_eq!(
            count(&format!(
                "SELECT id FROM payments WHERE NOT edge_verify_row('billing', signature, {cols})"
            )),
            victim.to_string()
        );
        assert_eq!(
            count(&format!(
                "SELECT COUNT(*) FROM payments WHERE edge_sign_row('billing', {cols}) = signature"
            )),
            (SCALE * 10 - 1).to_string()
        );
    }

    // Sorted by the tariff with more tariff names than a statement can
    // make groups of (SQLite: 500 parts of a compound select): the rows
    // are sorted by the joined name instead, in the same order.
    let by_tariff = "sort=tariff,-name";
    let before = app.ids(&d1, by_tariff).await;
    let bulk: Vec<String> = (0..600)
        .map(|i| format!("('Bulk {i:03}', 100, 1)"))
        .collect();
    sql(&format!(
        "INSERT INTO tariffs (name, monthly_cents, active) VALUES {}",
        bulk.join(", ")
    ));
    assert_eq!(app.ids(&d1, by_tariff).await, before);

    // Last: the rate limits (they hold for the rest of the minute).
    rate_limits(&app).await;
}

/// The app's SQLite file under the node's data directory.
fn sqlite_file(data: &std::path::Path) -> PathBuf {
    let mut stack = vec![data.join("sqlite")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.components().any(|c| c.as_os_str() == "books")
                && p.extension().is_some_and(|e| e == "db")
            {
                return p;
            }
        }
    }
    panic!("no SQLite file of the tenant under {}", data.display());
}

async fn seeding(app: &App<'_>) {
    let seed = |part: i64, token: &'static str| async move {
        app.raw(
            "POST",
            "/api/seed",
            &[("authorization", &format!("Bearer {token}"))],
            &json!({"part": part}).to_string(),
        )
        .await
    };
    let a = seed(0, "wrong").await;
    assert_eq!(a.status, 401, "{}", a.body);
    let a = seed(0, SEED_TOKEN).await;
    assert_eq!(a.status, 200, "{}\n{}", a.body, app.log());
    let parts = a.json()["parts"].as_i64().unwrap();
    assert_eq!(parts, 5);
    let mut clients = 0;
    for part in 1..parts {
        let a = seed(part, SEED_TOKEN).await;
        assert_eq!(a.status, 200, "{}\n{}", a.body, app.log());
        assert_eq!(a.json()["skipped"], false);
        clients += a.json()["clients"].as_i64().unwrap();
    }
    assert_eq!(clients, SCALE);
    // Idempotent: a part already inserted is skipped.
    let a = seed(2, SEED_TOKEN).await;
    assert_eq!(
        (a.status, a.json()["skipped"].clone()),
        (200, json!(true)),
        "{}",
        a.body
    );
    let a = seed(parts, SEED_TOKEN).await;
    assert_eq!(
        (a.status, a.json()["error"]["field"].clone()),
        (400, json!("part"))
    );
}

async fn sessions(app: &App<'_>, admin: &Session) {
    let me = app.get(admin, "/api/me").await;
    assert_eq!(me["role"], "admin");
    assert_eq!(me["dealer"], Value::Null);
    assert_eq!(me["csrf_token"], json!(admin.csrf));
    let a = app.call(None, "GET", "/api/me", "").await;
    assert_eq!(a.status, 401);
    assert_eq!(a.json()["error"]["field"], Value::Null);
    assert!(a.json()["error"]["message"].is_string());
    let a = app.login("dealer3@billing.test", "not the password").await;
    assert_eq!(a.status, 401, "{}", a.body);
    assert!(a.header("set-cookie").is_empty());
    let a = app.login("nobody@billing.test", DEMO_PASSWORD).await;
    assert_eq!(a.status, 401, "{}", a.body);

    // A login posted as anything but JSON (a cross-site form can post
    // text/plain that parses as JSON): 415, no session.
    let a = app
        .raw(
            "POST",
            "/api/login",
            &[("content-type", "text/plain")],
            &json!({"login": "dealer3@billing.test", "password": DEMO_PASSWORD}).to_string(),
        )
        .await;
    assert_eq!(a.status, 415, "{}", a.body);
    assert!(a.header("set-cookie").is_empty(), "{}", a.body);
    // A password past its length is named as such.
    let a = app.login("dealer3@billing.test", &"x".repeat(2000)).await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert_eq!(a.json()["error"]["field"], "password", "{}", a.body);

    // Session fixation: a cookie sent at login is never the session.
    let fixed = "billing_session=attacker-chosen-secret";
    let a = app
        .raw(
            "POST",
            "/api/login",
            &[("cookie", fixed), JSON],
            &json!({"login": "dealer3@billing.test", "password": DEMO_PASSWORD}).to_string(),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let s = session_of(&a);
    assert_ne!(s.cookie, fixed);
    assert_eq!(s.cookie.len(), "billing_session=".len() + 64);
    let a = app.raw("GET", "/api/me", &[("cookie", fixed)], "").await;
    assert_eq!(a.status, 401);
    // A second login is a second session.
    let s2 = app.session("dealer3@billing.test").await;
    assert_ne!(s.cookie, s2.cookie);
    assert_ne!(s.csrf, s2.csrf);
    let me = app.get(&s, "/api/me").await;
    assert_eq!(me["dealer"], json!({"id": 3, "name": "Cedar Networks"}));
    // Logout ends that session alone.
    let a = app.call(Some(&s), "POST", "/api/logout", "").await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.header("set-cookie").contains("Max-Age=0"));
    assert_eq!(app.call(Some(&s), "GET", "/api/me", "").await.status, 401);
    assert_eq!(app.call(Some(&s2), "GET", "/api/me", "").await.status, 200);
}

async fn scoping(app: &App<'_>, d1: &Session, d2: &Session, by_dealer: &[Vec<i64>]) {
    for (who, mine) in [(d1, &by_dealer[0]), (d2, &by_dealer[1])] {
        let v = app.get(who, "/api/clients?per_page=1").await;
        assert_eq!(v["total"], mine.len() as i64, "{v}");
        assert!(v["rows"][0].get("dealer_id").is_none(), "{v}");
        let seen: BTreeSet<i64> = app.ids(who, "").await.into_iter().collect();
        assert_eq!(seen, mine.iter().copied().collect::<BTreeSet<_>>());
        // Whatever the query says.
        let other: BTreeSet<i64> = app
            .ids(who, "dealer=2&dealer=1")
            .await
            .into_iter()
            .collect();
        assert_eq!(other, seen);
    }
    let other = by_dealer[1][0];
    for path in [
        format!("/api/clients/{other}"),
        format!("/api/clients/{other}/payments"),
    ] {
        let a = app.call(Some(d1), "GET", &path, "").await;
        assert_eq!(a.status, 404, "{path}: {}", a.body);
    }
    let a = app
        .call(
            Some(d1),
            "PATCH",
            &format!("/api/clients/{other}"),
            &json!({"version": 1, "note": "x"}).to_string(),
        )
        .await;
    assert_eq!(a.status, 404, "{}", a.body);
    let a = app
        .call(
            Some(d1),
            "POST",
            &format!("/api/clients/{other}/reassign"),
            &json!({"dealer_id": 1}).to_string(),
        )
        .await;
    assert_eq!(a.status, 404, "{}", a.body);
    // A non-existent id answers the same.
    let a = app.call(Some(d1), "GET", "/api/clients/999999", "").await;
    assert_eq!(a.status, 404);
}

async fn csrf(app: &App<'_>, admin: &Session, d1: &Session, d2: &Session, c1: i64) {
    let changes: Vec<(&Session, &str, String, Value)> = vec![
        (d1, "POST", "/api/logout".into(), json!({})),
        (
            d1,
            "PATCH",
            format!("/api/clients/{c1}"),
            json!({"version": 1, "note": "csrf"}),
        ),
        (
            d1,
            "POST",
            "/api/clients".into(),
            json!({"name": "CSRF Co", "tariff_id": 1}),
        ),
        (
            admin,
            "POST",
            format!("/api/clients/{c1}/reassign"),
            json!({"dealer_id": 2}),
        ),
        (
            admin,
            "POST",
            "/api/dealers".into(),
            json!({"name": "CSRF Dealer"}),
        ),
        (
            admin,
            "PATCH",
            "/api/dealers/1".into(),
            json!({"name": "CSRF"}),
        ),
        (
            admin,
            "POST",
            "/api/users".into(),
            json!({"login": "csrf@x.test", "password": "long enough pw", "role": "admin"}),
        ),
        (
            admin,
            "POST",
            "/api/tariffs".into(),
            json!({"name": "CSRF", "monthly_cents": 1}),
        ),
        (
            admin,
            "PATCH",
            "/api/tariffs/1".into(),
            json!({"name": "CSRF"}),
        ),
    ];
    for (who, method, path, body) in changes {
        for token in ["", d2.csrf.as_str()] {
            let mut h = vec![("cookie", who.cookie.as_str())];
            if !token.is_empty() {
                h.push(("x-csrf-token", token));
            }
            let a = app.raw(method, &path, &h, &body.to_string()).await;
            assert_eq!(
                a.status, 403,
                "{method} {path} with token {token:?}: {}",
                a.body
            );
            assert_eq!(a.json()["error"]["field"], "x-csrf-token");
        }
    }
    // Nothing changed.
    assert_eq!(
        app.get(d1, "/api/me").await["login"],
        "dealer1@billing.test"
    );
    let c = app.get(admin, &format!("/api/clients/{c1}")).await;
    assert_eq!(
        (c["version"].clone(), c["dealer_id"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(
        app.get(admin, "/api/dealers").await["rows"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    assert_eq!(
        app.get(admin, "/api/tariffs").await["rows"][0]["name"],
        "Start"
    );
}

async fn role_matrix(app: &App<'_>, admin: &Session, d1: &Session, d2: &Session, c1: i64, c2: i64) {
    let _ = c2;
    // (method, path, body, [no session, dealer 1 (owner of c1), dealer 2, admin])
    let cases: Vec<(&str, String, Value, [u16; 4])> = vec![
        ("GET", "/api/me".into(), Value::Null, [401, 200, 200, 200]),
        (
            "GET",
            "/api/tariffs".into(),
            Value::Null,
            [401, 200, 200, 200],
        ),
        (
            "GET",
            "/api/clients".into(),
            Value::Null,
            [401, 200, 200, 200],
        ),
        (
            "GET",
            "/api/clients.csv".into(),
            Value::Null,
            [401, 200, 200, 200],
        ),
        (
            "GET",
            format!("/api/clients/{c1}"),
            Value::Null,
            [401, 200, 404, 200],
        ),
        (
            "GET",
            format!("/api/clients/{c1}/payments"),
            Value::Null,
            [401, 200, 404, 200],
        ),
        (
            "PATCH",
            format!("/api/clients/{c1}"),
            json!({"version": 999, "note": "x"}),
            [401, 409, 404, 409],
        ),
        (
            "POST",
            format!("/api/clients/{c1}/reassign"),
            json!({"dealer_id": 1}),
            [401, 403, 404, 200],
        ),
        (
            "POST",
            "/api/clients".into(),
            json!({"name": "Matrix Co", "tariff_id": 1}),
            [401, 201, 201, 400],
        ),
        (
            "GET",
            "/api/dealers".into(),
            Value::Null,
            [401, 403, 403, 200],
        ),
        (
            "POST",
            "/api/dealers".into(),
            json!({"name": "Matrix Dealer"}),
            [401, 403, 403, 201],
        ),
        (
            "PATCH",
            "/api/dealers/5".into(),
            json!({"name": "Evergreen Systems"}),
            [401, 403, 403, 200],
        ),
        (
            "POST",
            "/api/users".into(),
            json!({"login": "matrix@billing.test", "password": "a long password", "role": "dealer", "dealer_id": 5}),
            [401, 403, 403, 201],
        ),
        (
            "GET",
            "/api/users".into(),
            Value::Null,
            [401, 403, 403, 200],
        ),
        (
            "PATCH",
            "/api/users/1".into(),
            json!({"disabled": false}),
            [401, 403, 403, 200],
        ),
        (
            "POST",
            "/api/tariffs".into(),
            json!({"name": "Matrix", "monthly_cents": 100, "active": false}),
            [401, 403, 403, 201],
        ),
        (
            "PATCH",
            "/api/tariffs/5".into(),
            json!({"active": false}),
            [401, 403, 403, 200],
        ),
        (
            "GET",
            "/api/payments".into(),
            Value::Null,
            [401, 403, 403, 200],
        ),
        ("POST", "/api/logout".into(), Value::Null, [401, 0, 0, 0]),
    ];
    for (method, path, body, expected) in cases {
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        for (i, who) in [None, Some(d1), Some(d2), Some(admin)]
            .into_iter()
            .enumerate()
        {
            if expected[i] == 0 {
                continue;
            }
            let a = app.call(who, method, &path, &body).await;
            assert_eq!(
                a.status,
                expected[i],
                "{method} {path} as #{i}: {}\n{}",
                a.body,
                app.log()
            );
            if a.status >= 400 {
                assert!(a.json()["error"]["message"].is_string(), "{}", a.body);
            }
        }
    }
    // The matrix's user logs in as a dealer of dealer 5.
    let m = app.login("matrix@billing.test", "a long password").await;
    assert_eq!(m.status, 200, "{}", m.body);
    assert_eq!(m.json()["dealer"]["id"], 5);
}

/// Admins list the logins, disable one (its sessions end at once and it
/// cannot log in) and enable it again, and set its password (its
/// sessions end too); a dealer can do none of it, bad bodies are refused
/// naming the field, and an admin cannot disable their own login.
async fn logins(app: &App<'_>, admin: &Session, d1: &Session) {
    let users = app.get(admin, "/api/users").await;
    let rows = users["rows"].as_array().unwrap();
    let find = |login: &str| {
        rows.iter()
            .find(|r| r["login"] == login)
            .unwrap_or_else(|| panic!("{login} in {users}"))
            .clone()
    };
    // The role matrix's login, of dealer 5.
    let m = find("matrix@billing.test");
    assert_eq!(
        (&m["role"], &m["dealer_id"], &m["disabled"]),
        (&json!("dealer"), &json!(5), &json!(false)),
        "{m}"
    );
    assert!(m["dealer"].is_string(), "{m}");
    let me = find("admin@billing.test");
    assert!(me["dealer_id"].is_null() && me["dealer"].is_null(), "{me}");
    assert!(!users.to_string().contains("argon2"), "{users}");
    let path = format!("/api/users/{}", m["id"]);
    let patch = |who: &Session, body: Value| {
        let path = path.clone();
        let who = who.clone();
        async move {
            app.call(Some(&who), "PATCH", &path, &body.to_string())
                .await
        }
    };

    // Refused: a dealer, fields that are not there to change, bad values,
    // ids that are not there, the admin's own login.
    assert_eq!(patch(d1, json!({"disabled": true})).await.status, 403);
    for (body, field) in [
        (json!({"role": "admin"}), "role"),
        (json!({"dealer_id": 1}), "dealer_id"),
        (json!({"disabled": "yes"}), "disabled"),
        (json!({"password": "short"}), "password"),
        (json!({"password": 12}), "password"),
    ] {
        let a = patch(admin, body.clone()).await;
        assert_eq!(a.status, 400, "{body}: {}", a.body);
        assert_eq!(a.json()["error"]["field"], field, "{body}: {}", a.body);
    }
    for missing in ["/api/users/999999", "/api/users/0", "/api/users/x"] {
        let a = app
            .call(Some(admin), "PATCH", missing, "{\"disabled\": true}")
            .await;
        assert_eq!(a.status, 404, "{missing}: {}", a.body);
    }
    let own = format!("/api/users/{}", me["id"]);
    let a = app
        .call(Some(admin), "PATCH", &own, "{\"disabled\": true}")
        .await;
    assert_eq!(a.status, 409, "{}", a.body);
    assert_eq!(a.json()["error"]["field"], "disabled", "{}", a.body);
    assert_eq!(
        app.call(Some(admin), "GET", "/api/me", "").await.status,
        200
    );

    // Disabled: its session ends, and it cannot log in.
    let old = "a long password";
    let a = app.login("matrix@billing.test", old).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let ms = session_of(&a);
    let a = patch(admin, json!({"disabled": true})).await;
    assert_eq!(
        (a.status, &a.json()["disabled"]),
        (200, &json!(true)),
        "{}",
        a.body
    );
    assert_eq!(app.call(Some(&ms), "GET", "/api/me", "").await.status, 401);
    assert_eq!(app.login("matrix@billing.test", old).await.status, 401);
    // Enabled again; then a new password ends that session too.
    let a = patch(admin, json!({"disabled": false})).await;
    assert_eq!(
        (a.status, &a.json()["disabled"]),
        (200, &json!(false)),
        "{}",
        a.body
    );
    let a = app.login("matrix@billing.test", old).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let ms = session_of(&a);
    let new = "another long password";
    assert_eq!(patch(admin, json!({"password": new})).await.status, 200);
    assert_eq!(app.call(Some(&ms), "GET", "/api/me", "").await.status, 401);
    assert_eq!(app.login("matrix@billing.test", old).await.status, 401);
    assert_eq!(app.login("matrix@billing.test", new).await.status, 200);
    let users = app.get(admin, "/api/users").await;
    assert!(
        users["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["disabled"] == false),
        "{users}"
    );
}

async fn queries(app: &App<'_>, admin: &Session, d1: &Session, seeded: usize) {
    let total = |v: &Value| v["total"].as_i64().unwrap();
    let before = total(&app.get(admin, "/api/clients?per_page=1").await);
    assert!(before as usize > seeded);
    for bad in [
        "sort=name;DROP TABLE clients",
        "sort=name%3BDROP%20TABLE%20clients",
        "sort=password_hash",
        "sort=name,(SELECT 1)",
    ] {
        let a = app
            .call(
                Some(d1),
                "GET",
                &format!("/api/clients?{}", bad.replace(' ', "%20")),
                "",
            )
            .await;
        assert_eq!(a.status, 400, "{bad}: {}", a.body);
        assert_eq!(a.json()["error"]["field"], "sort");
        assert!(
            a.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("name, contact_name, phone, email, tariff, registered_at, id")
        );
    }
    for (bad, field) in [
        ("registered_from=2024-13-01", "registered_from"),
        ("registered_to=tomorrow", "registered_to"),
        ("tariff=1%20OR%201=1", "tariff"),
        ("per_page=201", "per_page"),
        ("page=0", "page"),
    ] {
        let a = app
            .call(Some(d1), "GET", &format!("/api/clients?{bad}"), "")
            .await;
        assert_eq!(
            (a.status, a.json()["error"]["field"].clone()),
            (400, json!(field)),
            "{bad}: {}",
            a.body
        );
    }
    // Search text is bound and its LIKE metacharacters literal.
    let a = app.get(d1, "/api/clients?q=%25'%20OR%201%3D1%20--").await;
    assert_eq!(total(&a), 0, "{a}");
    for name in [
        "100% Pure",
        "100X Pure",
        "under_score Co",
        "underXscore Co",
        "Café Zoë ☕",
        "O'Brien & Sons",
    ] {
        let a = app
            .call(
                Some(d1),
                "POST",
                "/api/clients",
                &json!({"name": name, "tariff_id": 2, "email": "x@y.test"}).to_string(),
            )
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
        assert_eq!(a.json()["name"], name);
    }
    let names = |v: &Value| -> Vec<String> {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names(&app.get(d1, "/api/clients?q=100%25").await),
        ["100% Pure"]
    );
    assert_eq!(
        names(&app.get(d1, "/api/clients?q=under_").await),
        ["under_score Co"]
    );
    assert_eq!(
        names(&app.get(d1, "/api/clients?q=Zo%C3%AB").await),
        ["Café Zoë ☕"]
    );
    assert_eq!(
        names(&app.get(d1, "/api/clients?q=o'brien").await),
        ["O'Brien & Sons"]
    );
    assert_eq!(
        names(&app.get(d1, "/api/clients?q=%25").await),
        ["100% Pure"]
    );
    // The tables are intact.
    assert_eq!(
        total(&app.get(admin, "/api/clients?per_page=1").await),
        before + 6
    );
    assert_eq!(
        total(&app.get(admin, "/api/payments?per_page=1").await),
        SCALE * 10
    );

    // Sorting: each key, both ways, stable by id.
    for key in [
        "name",
        "contact_name",
        "phone",
        "email",
        "tariff",
        "registered_at",
        "id",
    ] {
        let (up, down) = if key == "id" {
            ("id".to_string(), "-id".to_string())
        } else {
            (format!("{key},id"), format!("-{key},-id"))
        };
        let up = app
            .get(d1, &format!("/api/clients?per_page=200&sort={up}"))
            .await;
        let down = app
            .get(d1, &format!("/api/clients?per_page=200&sort={down}"))
            .await;
        let field = if key == "tariff" { "tariff" } else { key };
        let vals = |v: &Value| -> Vec<Value> {
            v["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r[field].clone())
                .collect()
        };
        let (a, mut b) = (vals(&up), vals(&down));
        b.reverse();
        assert_eq!(a, b, "{key}");
        if key == "registered_at" || key == "id" {
            let n: Vec<i64> = a.iter().map(|v| v.as_i64().unwrap()).collect();
            assert!(n.windows(2).all(|w| w[0] <= w[1]), "{key}: {n:?}");
        }
    }
    // Filters: tariff and registration dates (inclusive days, UTC).
    let v = app.get(d1, "/api/clients?per_page=200&tariff=2").await;
    assert!(
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["tariff_id"] == 2)
    );
    let all = app
        .get(d1, "/api/clients?per_page=200&sort=registered_at")
        .await;
    let rows = all["rows"].as_array().unwrap();
    let first_ms = rows[0]["registered_at"].as_i64().unwrap();
    let day = |ms: i64| {
        let out = Command::new("date")
            .args(["-u", "-d", &format!("@{}", ms / 1000), "+%Y-%m-%d"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let d = day(first_ms);
    let v = app
        .get(
            d1,
            &format!("/api/clients?per_page=200&registered_from={d}&registered_to={d}"),
        )
        .await;
    assert!(total(&v) >= 1);
    assert!(
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| day(r["registered_at"].as_i64().unwrap()) == d)
    );
    // Pages: disjoint and complete.
    let mut paged = Vec::new();
    for page in 1..=100 {
        let v = app
            .get(
                d1,
                &format!("/api/clients?per_page=7&page={page}&sort=-name"),
            )
            .await;
        let r = v["rows"].as_array().unwrap().clone();
        if r.is_empty() {
            break;
        }
        paged.extend(r.iter().map(|r| r["id"].as_i64().unwrap()));
    }
    let sorted = app.get(d1, "/api/clients?per_page=200&sort=-name").await;
    let ids: Vec<i64> = sorted["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(paged, ids);

    // Every plan (the sort index walked in order, the matches first, a
    // group per tariff) gives the same rows in the same order: a searched
    // or dated listing is the plain one, sorted alike, without the rows
    // that do not match.
    // (A search of a few rows among many, each sort ordering them
    // differently: on MariaDB, its ids are remembered and pages read by
    // walking the sort column's index.)
    register_fillers(app, d1, 60, |i| format!("Filler {i:02}")).await;
    for (i, contact) in ["Mia", "Bo", "Zed", "Al", "Kai", "Eve"].iter().enumerate() {
        let a = app
            .call(
                Some(d1),
                "POST",
                "/api/clients",
                &json!({
                    "name": format!("Pick {}", 5 - i),
                    "contact_name": contact,
                    "phone": format!("+1 555 01{}", (i * 7) % 6),
                    "email": format!("{}{i}@pick.test", ["q", "c", "x", "a", "m", "f"][i]),
                    "tariff_id": 1 + (i as i64 * 3) % 4,
                })
                .to_string(),
            )
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
    }
    let ids = |v: &Value| -> Vec<i64> {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect()
    };
    for sort in [
        "name",
        "-name",
        "phone",
        "-email",
        "contact_name",
        "-registered_at",
        "tariff,name",
        "-tariff,-id",
    ] {
        let plain = app
            .get(d1, &format!("/api/clients?per_page=200&sort={sort}"))
            .await;
        for (q, query) in [
            ("a", "a"),
            ("an", "an"),
            ("co", "co"),
            ("+", "%2B"),
            ("pure", "PURE"),
            ("pick", "pick"),
            ("zz-none", "zz-none"),
        ] {
            let want = searched(plain["rows"].as_array().unwrap(), q);
            let got = app
                .get(
                    d1,
                    &format!("/api/clients?per_page=200&sort={sort}&q={query}"),
                )
                .await;
            assert_eq!(ids(&got), want, "sort={sort} q={q}");
            assert_eq!(total(&got), want.len() as i64, "sort={sort} q={q}");
        }
        let dated = app
            .get(
                d1,
                &format!(
                    "/api/clients?per_page=200&sort={sort}&registered_from=2000-01-01&registered_to=2099-12-31"
                ),
            )
            .await;
        assert_eq!(ids(&dated), ids(&plain), "sort={sort} dated");
    }
    // Page by page, the six picks among many more clients: on MariaDB each
    // page walks the sort column's index keeping the remembered ids, up to
    // 16 entries per id; sorted by name the picks lie after every filler,
    // beyond that, so the walk stops short and the ids are looked up;
    // sorted by -name they come first and the walk finds them. A hundred
    // fillers: walked (sorted by the tariff first: looked up).
    register_fillers(app, d1, 150, |i| format!("Filler B {i:03}")).await;
    for (q, query, sort, n) in [
        ("pick", "pick", "name", 6),
        ("pick", "pick", "-name", 6),
        ("pick", "pick", "-email", 6),
        ("pick", "pick", "registered_at", 6),
        ("filler b 0", "filler%20b%200", "-tariff,name", 100),
        ("filler b 0", "filler%20b%200", "tariff,name", 100),
        ("filler b 0", "filler%20b%200", "-name", 100),
    ] {
        // What the pages must hold: the dealer's whole listing in that
        // order (two pages of 200), filtered here.
        let mut everything = Vec::new();
        for page in 1..=2 {
            let v = app
                .get(
                    d1,
                    &format!("/api/clients?per_page=200&page={page}&sort={sort}"),
                )
                .await;
            // (At most 400, and at most 288 so a pick's first page is
            // walked: rows * 1 <= 16 * 6^2.)
            assert!((200..=288).contains(&total(&v)), "{}", total(&v));
            everything.extend(v["rows"].as_array().unwrap().clone());
        }
        let want = searched(&everything, q);
        assert_eq!(want.len(), n, "q={q} sort={sort}");
        for page in 1..=7 {
            let one = app
                .get(
                    d1,
                    &format!("/api/clients?per_page=1&page={page}&sort={sort}&q={query}"),
                )
                .await;
            assert_eq!(total(&one), n as i64, "q={q} sort={sort} page={page}");
            assert_eq!(
                ids(&one),
                want.get(page - 1).into_iter().copied().collect::<Vec<_>>(),
                "q={q} sort={sort} page={page}"
            );
        }
    }
}

/// The ids of the listing `rows` a search for `q` (lower case) matches:
/// those with a searched field that holds it, in their order.
fn searched(rows: &[Value], q: &str) -> Vec<i64> {
    rows.iter()
        .filter(|r| {
            ["name", "contact_name", "phone", "email"]
                .iter()
                .any(|f| r[*f].as_str().unwrap().to_lowercase().contains(q))
        })
        .map(|r| r["id"].as_i64().unwrap())
        .collect()
}

/// Registers `n` clients for the dealer of `d`, the `i`th named `name(i)`,
/// of the four tariffs in turn.
async fn register_fillers(app: &App<'_>, d: &Session, n: usize, name: impl Fn(usize) -> String) {
    for i in 0..n {
        let a = app
            .call(
                Some(d),
                "POST",
                "/api/clients",
                &json!({"name": name(i), "tariff_id": 1 + i % 4}).to_string(),
            )
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
    }
}

async fn editing(app: &App<'_>, d1: &Session, c1: i64) {
    let c = app.get(d1, &format!("/api/clients/{c1}")).await;
    let v = c["version"].as_i64().unwrap();
    let xss = "<script>alert('x')</script>\"><img src=x onerror=alert(1)>";
    let a = app
        .call(Some(d1), "PATCH", &format!("/api/clients/{c1}"), &json!({"version": v, "note": xss, "contact_name": "</textarea><svg onload=alert(1)>", "phone": "+1 (555) 010-9999", "email": "new@example.org", "tariff_id": 3}).to_string())
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.header("content-type").starts_with("application/json"));
    let new = a.json();
    assert_eq!(new["version"], v + 1);
    assert_eq!(new["note"], xss);
    assert_eq!(new["tariff"], "Business");
    let again = app.get(d1, &format!("/api/clients/{c1}")).await;
    assert_eq!(again, new);
    assert_eq!(again["contact_name"], "</textarea><svg onload=alert(1)>");
    // A stale version: 409 with the current row.
    let a = app
        .call(
            Some(d1),
            "PATCH",
            &format!("/api/clients/{c1}"),
            &json!({"version": v, "note": "lost update"}).to_string(),
        )
        .await;
    assert_eq!(a.status, 409, "{}", a.body);
    assert_eq!(a.json()["error"]["field"], "version");
    assert_eq!(a.json()["current"], new);
    // Refused fields and values, each naming its field.
    for (body, status, field) in [
        (json!({"version": v + 1, "name": "New Name"}), 400, "name"),
        (json!({"version": v + 1, "dealer_id": 2}), 400, "dealer_id"),
        (json!({"version": v + 1, "id": 5}), 400, "id"),
        (
            json!({"version": v + 1, "email": "not an address"}),
            400,
            "email",
        ),
        (json!({"version": v + 1, "phone": "call me"}), 400, "phone"),
        (json!({"version": v + 1, "phone": "1234"}), 400, "phone"),
        (
            json!({"version": v + 1, "contact_name": "x".repeat(201)}),
            400,
            "contact_name",
        ),
        (
            json!({"version": v + 1, "note": "x".repeat(2001)}),
            400,
            "note",
        ),
        (json!({"version": v + 1, "tariff_id": 5}), 422, "tariff_id"),
        (json!({"version": v + 1, "tariff_id": 99}), 422, "tariff_id"),
        (json!({"note": "no version"}), 400, "version"),
    ] {
        let a = app
            .call(
                Some(d1),
                "PATCH",
                &format!("/api/clients/{c1}"),
                &body.to_string(),
            )
            .await;
        assert_eq!(
            (a.status, a.json()["error"]["field"].clone()),
            (status, json!(field)),
            "{body}: {}",
            a.body
        );
    }
    let a = app
        .call(
            Some(d1),
            "PATCH",
            &format!("/api/clients/{c1}"),
            "{not json",
        )
        .await;
    assert_eq!(a.status, 400);
    assert_eq!(app.get(d1, &format!("/api/clients/{c1}")).await, new);
    // Four editors at once on the same version: one saves, three are told.
    let path = format!("/api/clients/{c1}");
    let body = |n: i64| json!({"version": v + 1, "note": format!("editor {n}")}).to_string();
    let (b1, b2, b3, b4) = (body(1), body(2), body(3), body(4));
    let (r1, r2, r3, r4) = tokio::join!(
        app.call(Some(d1), "PATCH", &path, &b1),
        app.call(Some(d1), "PATCH", &path, &b2),
        app.call(Some(d1), "PATCH", &path, &b3),
        app.call(Some(d1), "PATCH", &path, &b4),
    );
    let mut statuses: Vec<u16> = [&r1, &r2, &r3, &r4].iter().map(|a| a.status).collect();
    statuses.sort();
    assert_eq!(statuses, [200, 409, 409, 409]);
    let last = app.get(d1, &path).await;
    assert_eq!(last["version"], v + 2);
    for a in [&r1, &r2, &r3, &r4] {
        if a.status == 409 {
            assert!(a.json()["current"]["version"].as_i64().unwrap() > v);
        } else {
            assert_eq!(a.json(), last);
        }
    }
}

/// Totals of searched or dated listings are remembered (`count_cache`),
/// yet never stale after the app's own changes: registering, editing a
/// searched field, reassigning. The table keeps a bounded number of
/// slots per dealer.
async fn remembered_totals(
    app: &App<'_>,
    admin: &Session,
    d1: &Session,
    d2: &Session,
    sql: &dyn Fn(&str) -> String,
) {
    let total = async |who: &Session, query: &str| {
        app.get(who, &format!("/api/clients?per_page=1&{query}"))
            .await["total"]
            .as_i64()
            .unwrap()
    };
    let q = "q=zz+remembered";
    assert_eq!(total(d1, q).await, 0);
    assert_eq!(total(d1, q).await, 0);
    let a = app
        .call(
            Some(d1),
            "POST",
            "/api/clients",
            &json!({"name": "ZZ Remembered Ltd", "tariff_id": 1}).to_string(),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let id = a.json()["id"].as_i64().unwrap();
    let version = a.json()["version"].as_i64().unwrap();
    assert_eq!(total(d1, q).await, 1);
    // Another page and sort of the same filter: the same total.
    assert_eq!(total(d1, &format!("{q}&sort=-phone&page=3")).await, 1);
    assert_eq!(total(d1, &format!("{q}&tariff=1")).await, 1);
    assert_eq!(total(d1, &format!("{q}&tariff=2")).await, 0);
    assert_eq!(
        total(d1, &format!("{q}&registered_from=2000-01-01")).await,
        1
    );
    // Editing a searched field.
    let q2 = "q=zz+contact+now";
    assert_eq!(total(d1, q2).await, 0);
    let a = app
        .call(
            Some(d1),
            "PATCH",
            &format!("/api/clients/{id}"),
            &json!({"version": version, "contact_name": "ZZ Contact Now"}).to_string(),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(total(d1, q2).await, 1);
    // Moving the tariff.
    let a = app
        .call(
            Some(d1),
            "PATCH",
            &format!("/api/clients/{id}"),
            &json!({"version": version + 1, "tariff_id": 2}).to_string(),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(total(d1, &format!("{q}&tariff=1")).await, 0);
    assert_eq!(total(d1, &format!("{q}&tariff=2")).await, 1);
    // Reassigning: the old dealer's total and the new one's.
    assert_eq!(total(d2, q).await, 0);
    assert_eq!(total(admin, &format!("{q}&dealer=2")).await, 0);
    let a = app
        .call(
            Some(admin),
            "POST",
            &format!("/api/clients/{id}/reassign"),
            &json!({"dealer_id": 2}).to_string(),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(total(d1, q).await, 0);
    assert_eq!(total(d2, q).await, 1);
    assert_eq!(total(admin, &format!("{q}&dealer=1")).await, 0);
    assert_eq!(total(admin, &format!("{q}&dealer=2")).await, 1);
    assert_eq!(total(admin, q).await, 1);
    // A slot per filter's hash (512 per dealer): each new search takes
    // one, but for the odd collision.
    let slots = || {
        let v = sql("SELECT COUNT(*), MAX(slot) FROM count_cache WHERE dealer_id = 1");
        let n: Vec<i64> = v
            .split(['|', '\t'])
            .map(|n| n.trim().parse().unwrap())
            .collect();
        assert!(n[1] < 512, "{v}");
        n[0]
    };
    let before = slots();
    for i in 0..40 {
        total(d1, &format!("q=zz+probe+{i}")).await;
    }
    let taken = slots() - before;
    assert!((30..=40).contains(&taken), "{taken}");
}

async fn csv_export(app: &App<'_>, admin: &Session, d1: &Session) {
    let a = app
        .call(Some(d1), "POST", "/api/clients", &json!({"name": "=HYPERLINK(\"http://evil\",\"x\")", "contact_name": "@SUM(1+1)", "note": "-2+3", "tariff_id": 1}).to_string())
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let a = app
        .call(Some(d1), "GET", "/api/clients.csv?sort=id", "")
        .await;
    assert_eq!(a.status, 200);
    assert!(a.header("content-type").starts_with("text/csv"));
    assert!(a.header("content-disposition").starts_with("attachment"));
    let total = app.get(d1, "/api/clients?per_page=1").await["total"]
        .as_i64()
        .unwrap();
    let lines: Vec<&str> = a.body.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines[0],
        "id,name,contact_name,phone,email,note,tariff_id,tariff,registered_at"
    );
    let mine: BTreeSet<i64> = app.ids(d1, "").await.into_iter().collect();
    let ids: BTreeSet<i64> = lines[1..]
        .iter()
        .filter_map(|l| l.split(',').next()?.parse().ok())
        .collect();
    assert_eq!(ids, mine);
    assert_eq!(ids.len() as i64, total);
    assert!(
        a.body
            .contains("\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\",'@SUM(1+1),"),
        "{}",
        a.body
    );
    assert!(a.body.contains(",'-2+3,"));
    assert!(a.body.contains("\"O'Brien & Sons\"") || a.body.contains("O'Brien & Sons"));
    // Filters apply; admins get the dealer columns.
    let a = app
        .call(Some(d1), "GET", "/api/clients.csv?q=100%25", "")
        .await;
    assert_eq!(
        a.body.split("\r\n").filter(|l| !l.is_empty()).count(),
        2,
        "{}",
        a.body
    );
    let a = app.call(Some(admin), "GET", "/api/clients.csv", "").await;
    assert!(a.body.starts_with(
        "id,name,contact_name,phone,email,note,tariff_id,tariff,registered_at,dealer_id,dealer\r\n"
    ));
    let all = app.get(admin, "/api/clients?per_page=1").await["total"]
        .as_i64()
        .unwrap();
    assert_eq!(
        a.body.split("\r\n").filter(|l| !l.is_empty()).count() as i64,
        all + 1
    );
}

async fn statics(app: &App<'_>, ui: &std::path::Path) {
    let a = app.raw("GET", "/", &[], "").await;
    assert_eq!(a.status, 200);
    assert!(a.header("content-type").starts_with("text/html"));
    assert_eq!(a.header("cache-control"), "no-cache");
    assert_eq!(a.header("x-frame-options"), "DENY");
    assert_eq!(a.header("x-content-type-options"), "nosniff");
    assert_eq!(
        a.header("content-security-policy"),
        "frame-ancestors 'none'"
    );
    let index = a.body.clone();
    assert_eq!(
        index,
        std::fs::read_to_string(ui.join("index.html")).unwrap()
    );
    // The single-page app's own routes load its page.
    let a = app.raw("GET", "/clients/42", &[], "").await;
    assert_eq!((a.status, a.body.as_str()), (200, index.as_str()));
    for path in [
        "/_app/immutable/missing.js",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/.env",
    ] {
        let a = app.raw("GET", path, &[], "").await;
        assert_eq!(a.status, 404, "{path}");
    }
    assert_eq!(app.raw("POST", "/", &[], "").await.status, 405);
    assert_eq!(app.raw("GET", "/api/nothing", &[], "").await.status, 404);
    // A content-hashed asset with a Brotli sibling, if the build has one.
    let br = walk(&ui.join("_app/immutable"))
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "br"));
    if let Some(br) = br {
        let rel = br.strip_prefix(ui).unwrap();
        let path = format!("/{}", rel.to_str().unwrap().trim_end_matches(".br"));
        let a = app
            .raw("GET", &path, &[("accept-encoding", "gzip, br")], "")
            .await;
        assert_eq!(a.status, 200, "{path}");
        assert_eq!(a.header("content-encoding"), "br");
        assert_eq!(
            a.header("cache-control"),
            "public, max-age=31536000, immutable"
        );
        let a = app
            .raw("GET", &path, &[("accept-encoding", "identity")], "")
            .await;
        assert_eq!(a.header("content-encoding"), "");
    }
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

async fn rate_limits(app: &App<'_>) {
    // From an address of its own: the failures of the scenario's earlier
    // steps (within the same minute, or not) count for 127.0.0.1.
    let from = Some(std::net::IpAddr::from([127, 0, 0, 2]));
    let app = &App {
        url: app.url.clone(),
        edge: app.edge,
        local: from,
    };
    // The counts are per minute: start with the minute young enough that
    // the checks below end within it.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    if now % 60_000 > 40_000 {
        tokio::time::sleep(std::time::Duration::from_millis(60_100 - now % 60_000)).await;
    }
    // Ten wrong passwords at once: each counts before it is checked, so
    // no more than the login's five get checked (401), the rest 429 (all
    // of them when every count lands before any check, as when the
    // tenant's SQLite statements queue for their slots).
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..10 {
        let url = format!("{}/api/login", app.url);
        tasks.spawn(async move {
            let body = json!({"login": "dealer2@billing.test", "password": "wrong"});
            send_from(
                from,
                &url,
                "POST",
                &[("host", HOST), JSON],
                &body.to_string(),
            )
            .await
            .status
        });
    }
    let burst = tasks.join_all().await;
    let checked = burst.iter().filter(|s| **s == 401).count();
    assert!(checked <= 5, "{burst:?}");
    assert!(burst.iter().all(|s| *s == 401 || *s == 429), "{burst:?}");
    // Five failures a minute per login, then 429 even with the password.
    for _ in 0..5 {
        assert_eq!(app.login("dealer4@billing.test", "wrong").await.status, 401);
    }
    let a = app.login("dealer4@billing.test", DEMO_PASSWORD).await;
    assert_eq!(a.status, 429, "{}", a.body);
    let retry: u64 = a.header("retry-after").parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // Twenty a minute per client address, whatever the login (a forged
    // spin-client-addr is replaced by the host).
    let mut last = 0;
    for i in 0..20 {
        let a = app
            .raw(
                "POST",
                "/api/login",
                &[("spin-client-addr", &format!("10.0.0.{i}:1")), JSON],
                &json!({"login": format!("nobody{i}@billing.test"), "password": "x"}).to_string(),
            )
            .await;
        last = a.status;
        if last == 429 {
            break;
        }
    }
    assert_eq!(last, 429);
    let a = app.login("dealer5@billing.test", DEMO_PASSWORD).await;
    assert_eq!(a.status, 429, "{}", a.body);
}

/// The web workspace's files under `edge up` (as under `spin up`), from
/// the directory Spin's `files` mounts.
#[test]
fn static_files_under_edge_up() {
    // The app as built, its index page changed: the mounted files are
    // what is served.
    let dir = TempDir::new("billing-app");
    let built = manifest().parent().unwrap().to_path_buf();
    let out = Command::new("cp")
        .arg("-R")
        .arg(format!("{}/.", built.display()))
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let index = dir.path().join("ui/index.html");
    let page = std::fs::read_to_string(&index).unwrap() + "<!-- mounted -->";
    std::fs::write(&index, page).unwrap();
    for sibling in ["ui/index.html.br", "ui/index.html.gz"] {
        let _ = std::fs::remove_file(dir.path().join(sibling));
    }
    let edge = Edge::up_env(
        &dir.path().join("spin.toml"),
        &[],
        &[("SPIN_VARIABLE_ROW_KEY", ROW_KEY_HEX)],
    );
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let app = App {
                url: edge.url.clone(),
                edge: &edge,
                local: None,
            };
            statics(&app, &dir.path().join("ui")).await;
            // Without a seed_token (this app has none) seeding is not there.
            let a = app
                .raw(
                    "POST",
                    "/api/seed",
                    &[("authorization", "Bearer ")],
                    "{\"part\": 0}",
                )
                .await;
            assert_eq!(a.status, 404, "{}", a.body);
        });
}

#[test]
fn sqlite() {
    scenario(Backend::Sqlite);
}

#[test]
fn mariadb() {
    let db = Mariadb::start_tcp_with("billing", |dir| {
        let keys = dir.write("udf-keys", UDF_KEYS);
        vec![("EDGE_UDF_KEY_FILE".to_string(), keys.display().to_string())]
    });
    scenario(Backend::Mariadb(db));
}
