//! Unmodified Spin apps, built with Spin's own SDKs from the registries
//! (`scripts/spin-apps.sh` builds them as `spin build` would), served by
//! `edge up` from their manifests as written.

use edge_tests::{Edge, client, get, repo};
use std::path::PathBuf;

/// `method` on `url` with `body`: the status and body.
async fn send(method: &str, url: &str, body: &'static str) -> (u16, String) {
    edge_tests::request(&client(), method, url, &[], body.into()).await
}

/// The manifest of the app `name` under tests/spin-apps, after checking
/// its build ran.
fn app(name: &str) -> PathBuf {
    let dir = repo().join("tests/spin-apps").join(name);
    assert!(
        dir.join("target").exists() || dir.join("dist").exists() || dir.join("app.wasm").exists(),
        "{name} is not built: run scripts/spin-apps.sh (make test does)"
    );
    dir.join("spin.toml")
}

#[tokio::test]
async fn rust_sdk_7_template_app_answers_over_wasi_0_3() {
    let edge = Edge::up(&app("rust-hello"), &[]);
    let (status, body) = get(&format!("{}/anything", edge.url)).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "Hello World!"),
        "{}",
        edge.log()
    );
    // The template prints the spin-full-url header it was given.
    let log = edge.log_after("Handling request to").await;
    assert!(
        log.contains(&format!("{}/anything", edge.url.replace("http://", ""))),
        "{log}"
    );
    // It runs in the engine with concurrency support, set up for it.
    assert!(log.contains(CONCURRENT_ENGINE_BUILT), "{log}");
}

/// What the host logs when it sets up the engine with Wasmtime's
/// concurrency support (and its pool), which WASI 0.2 apps never need.
const CONCURRENT_ENGINE_BUILT: &str = "its engine and pool are set up";

#[tokio::test]
async fn rust_sdk_3_template_module_is_componentized_and_answers() {
    let edge = Edge::up(&app("rust-v3-hello"), &[]);
    let (status, body) = get(&format!("{}/", edge.url)).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "Hello, Fermyon"),
        "{}",
        edge.log()
    );
    // A WASI 0.2 app: no concurrent engine, no second pool.
    assert!(
        !edge.log().contains(CONCURRENT_ENGINE_BUILT),
        "{}",
        edge.log()
    );
}

#[tokio::test]
async fn rust_sdk_7_key_value_and_variables() {
    key_value_and_variables("rust-features").await;
}

#[tokio::test]
async fn rust_sdk_3_key_value_and_variables() {
    key_value_and_variables("rust-v3-features").await;
}

/// The same app in two SDK generations: the same answers.
async fn key_value_and_variables(name: &str) {
    let edge = Edge::up_env(
        &app(name),
        &["--variable", "greeting=bonjour"],
        &[("SPIN_VARIABLE_API_TOKEN", "s3cret")],
    );
    let url = |p: &str| format!("{}{p}", edge.url);
    // Variables: templates over app variables, from --variable and the
    // environment (a secret), as `spin up` reads them.
    assert_eq!(
        get(&url("/var/greeting")).await,
        (200, "bonjour, world".into())
    );
    assert_eq!(get(&url("/var/token")).await, (200, "s3cret".into()));
    // Spin's error variants, with Spin's words.
    let (status, body) = get(&url("/var/missing")).await;
    assert_eq!(status, 500);
    assert!(
        body.ends_with("Undefined(\"no variable for \\\"features\\\".\\\"missing\\\"\")"),
        "{body}"
    );
    let (status, body) = get(&url("/var/Bad")).await;
    assert_eq!(status, 500);
    assert!(
        body.contains("InvalidName(\"\\\"Bad\\\": invalid character 'B'"),
        "{body}"
    );

    // Key-value on the default store.
    assert_eq!(send("PUT", &url("/kv/b"), "two").await.0, 200);
    assert_eq!(send("PUT", &url("/kv/a"), "one").await.0, 200);
    assert_eq!(get(&url("/kv/a")).await, (200, "one".into()));
    assert_eq!(send("HEAD", &url("/kv/a"), "").await.0, 200);
    assert_eq!(get(&url("/kv")).await, (200, "a\nb".into()));
    assert_eq!(send("DELETE", &url("/kv/a"), "").await.0, 200);
    assert_eq!(get(&url("/kv/a")).await.0, 404);
    assert_eq!(send("HEAD", &url("/kv/a"), "").await.0, 404);
    // A store the manifest does not grant: Spin's AccessDenied.
    let (status, body) = get(&url("/kv-open/other")).await;
    assert_eq!(status, 500);
    assert!(body.ends_with("AccessDenied"), "{body}");
}

#[tokio::test]
async fn spin_key_value_and_wasi_keyvalue_share_the_tenants_stores() {
    // A Spin app beside a component using wasi:keyvalue, for one tenant:
    // both open "default" and see the same data.
    let dir = repo().join("tests/spin-apps/rust-features");
    let spin = format!(
        r#"spin_manifest_version = 2
[application]
name = "shared"
[[trigger.http]]
route = "/probe/..."
component = "probe"
[[trigger.http]]
route = "/..."
component = "features"
[component.probe]
source = "{probe}"
key_value_stores = ["default"]
[component.features]
source = "{features}"
key_value_stores = ["default"]
sqlite_databases = ["default"]
allowed_outbound_hosts = ["*://127.0.0.1:*"]
"#,
        probe = edge_tests::component("probe"),
        features = dir
            .join("target/wasm32-wasip2/release/rust_features.wasm")
            .display(),
    );
    let data = edge_tests::TempDir::new("spin-kv");
    let edge = Edge::start_with(
        &spin,
        "app = \"spin.toml\"\n[[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n",
        data.path(),
    );
    let url = |p: &str| format!("{}{p}", edge.url);
    assert_eq!(send("PUT", &url("/kv/shared"), "from spin").await.0, 200);
    assert_eq!(
        get(&url("/probe/kv/default/shared")).await,
        (200, "from spin".into())
    );
    assert_eq!(
        send("PUT", &url("/probe/kv/default/back"), "from wasi")
            .await
            .0,
        200
    );
    assert_eq!(get(&url("/kv/back")).await, (200, "from wasi".into()));
}

/// The component that answered, and its `spin-*` headers (client address
/// aside, which varies), from the routes app.
async fn routed(edge: &Edge, path: &str, headers: &[(&str, &str)]) -> (String, Vec<String>) {
    let (status, body) = edge_tests::request(
        &client(),
        "GET",
        &format!("{}{path}", edge.url),
        headers,
        "".into(),
    )
    .await;
    assert_eq!(status, 200, "{path}: {body}");
    let mut lines = body.lines().map(str::to_string);
    let component = lines.next().unwrap_or_default();
    let headers = lines
        .filter(|l| !l.starts_with("spin-client-addr: 127.0.0.1:"))
        .collect();
    (component, headers)
}

#[tokio::test]
async fn routes_follow_spins_precedence() {
    let edge = Edge::up(&app("rust-routes"), &[]);
    for (path, component) in [
        ("/", "root"),
        ("/hello", "exact"),
        ("/hello/world", "wild"),
        ("/users/42", "param"),
        // A literal beats a parameter at the same place.
        ("/users/special", "special"),
        ("/users/42/posts/7", "params"),
        // Neither parameter route has three segments: the wildcard takes it.
        ("/users/42/other", "users-wild"),
        ("/users", "users-wild"),
        ("/files/report/2026/q3", "trailing"),
        ("/nothing/here", "catchall"),
        // A private component has no route: the catch-all answers.
        ("/private", "catchall"),
    ] {
        assert_eq!(routed(&edge, path, &[]).await.0, component, "{path}");
    }
}

#[tokio::test]
async fn spin_headers_have_spins_values_once() {
    let edge = Edge::up(&app("rust-routes"), &[]);
    let host = edge.url.trim_start_matches("http://").to_string();
    // A parameterised route; the client's own spin-* headers are dropped.
    let (component, headers) = routed(
        &edge,
        "/users/42/posts/7?x=1",
        &[
            ("spin-matched-route", "/forged"),
            ("spin-path-match-evil", "1"),
        ],
    )
    .await;
    assert_eq!(component, "params");
    assert_eq!(
        headers,
        [
            "spin-base-path: /".to_string(),
            "spin-component-route: /users/:id/posts/:post".into(),
            format!("spin-full-url: http://{host}/users/42/posts/7?x=1"),
            "spin-matched-route: /users/:id/posts/:post".into(),
            "spin-path-info: ".into(),
            "spin-path-match-id: 42".into(),
            "spin-path-match-post: 7".into(),
            "spin-raw-component-route: /users/:id/posts/:post".into(),
        ]
    );
    // A wildcard route with a parameter before it.
    let (component, headers) = routed(&edge, "/files/report/2026/q3/", &[]).await;
    assert_eq!(component, "trailing");
    assert_eq!(
        headers,
        [
            "spin-base-path: /".to_string(),
            "spin-component-route: /files/:name".into(),
            format!("spin-full-url: http://{host}/files/report/2026/q3/"),
            "spin-matched-route: /files/:name/...".into(),
            "spin-path-info: /2026/q3/".into(),
            "spin-path-match-name: report".into(),
            "spin-raw-component-route: /files/:name/...".into(),
        ]
    );
    // The root route: Spin keeps it without its slash as the matched route.
    let (_, headers) = routed(&edge, "/", &[]).await;
    assert!(
        headers.contains(&"spin-matched-route: ".to_string()),
        "{headers:?}"
    );
    assert!(
        headers.contains(&"spin-component-route: /".to_string()),
        "{headers:?}"
    );
    // The client address is the peer's.
    let (status, body) = get(&format!("{}/hello", edge.url)).await;
    assert_eq!(status, 200);
    assert!(body.contains("spin-client-addr: 127.0.0.1:"), "{body}");
}

#[tokio::test]
async fn rust_sdk_7_sqlite() {
    sqlite("rust-features", true).await;
}

#[tokio::test]
async fn rust_sdk_3_sqlite() {
    sqlite("rust-v3-features", false).await;
}

/// Spin's SQLite interface in one SDK generation: the default database
/// exists without configuration; other labels are refused as on Spin.
async fn sqlite(name: &str, counters: bool) {
    let edge = Edge::up_env(&app(name), &[], &[("SPIN_VARIABLE_API_TOKEN", "unused")]);
    let sql = |body: &'static str| {
        let url = format!("{}/sql", edge.url);
        async move { send("POST", &url, body).await }
    };
    let (status, body) =
        sql("CREATE TABLE pets (id INTEGER PRIMARY KEY, name TEXT, weight REAL, photo BLOB, note)")
            .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = sql("INSERT INTO pets (name, weight, photo, note) VALUES (?, ?, ?, ?)\nt:Fido\nr:12.5\nb:00ff10\nnull").await;
    assert_eq!(status, 200, "{body}");
    if counters {
        assert!(body.ends_with("rowid=1 changes=1"), "{body}");
    }
    sql("INSERT INTO pets (name, weight) VALUES ('Rex', 30)").await;
    let (status, body) =
        sql("SELECT id, name, weight, photo, note FROM pets WHERE weight > ? ORDER BY id\ni:10")
            .await;
    assert_eq!(status, 200, "{body}");
    let mut lines = body.lines();
    assert_eq!(lines.next(), Some("columns: id,name,weight,photo,note"));
    assert_eq!(lines.next(), Some("i:1|t:Fido|r:12.5|b:00ff10|null"));
    assert_eq!(lines.next(), Some("i:2|t:Rex|r:30|null|null"));
    // SQLite's own error, as Spin's io variant.
    let (status, body) = sql("SELEC nonsense").await;
    assert_eq!(status, 500);
    assert!(
        body.contains("Io(") && body.contains("syntax error"),
        "{body}"
    );
    // No other file, whatever the statement says.
    let (status, body) = sql("ATTACH DATABASE '/tmp/elsewhere.db' AS x").await;
    assert_eq!(status, 500);
    assert!(
        body.contains("Io(") && body.contains("not allowed"),
        "{body}"
    );
    // A label the manifest does not grant: Spin's AccessDenied.
    let (status, body) = get(&format!("{}/sql-open/other", edge.url)).await;
    assert_eq!(status, 500);
    assert!(body.ends_with("AccessDenied"), "{body}");
}

#[tokio::test]
async fn an_interface_not_granted_is_named_with_its_manifest_key() {
    // The features app opens SQLite databases; this manifest grants none.
    // As on Spin, it loads and its opens are refused with Spin's variant;
    // the log names the interface and the key that grants it.
    let dir = repo().join("tests/spin-apps/rust-features");
    let spin = format!(
        "spin_manifest_version = 2\n[application]\nname = \"x\"\n[[trigger.http]]\nroute = \"/...\"\ncomponent = \"features\"\n[component.features]\nsource = \"{}\"\nkey_value_stores = [\"default\"]\nallowed_outbound_hosts = [\"*://127.0.0.1:*\"]\n",
        dir.join("target/wasm32-wasip2/release/rust_features.wasm")
            .display(),
    );
    let data = edge_tests::TempDir::new("spin-nogrant");
    let edge = Edge::start_with(
        &spin,
        "app = \"spin.toml\"\n[[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n",
        data.path(),
    );
    assert_eq!(get(&format!("{}/kv", edge.url)).await.0, 200);
    let (status, body) = get(&format!("{}/sql-open/default", edge.url)).await;
    assert_eq!(status, 500);
    assert!(body.ends_with("AccessDenied"), "{body}");
    let log = edge.log_after("does not grant").await;
    assert!(
        log.contains("spin:sqlite/sqlite@3.1.0")
            && log.contains("list the databases it opens in `sqlite_databases`"),
        "{log}"
    );
}

#[tokio::test]
async fn rust_sdk_7_redis() {
    redis("rust-features").await;
}

#[tokio::test]
async fn rust_sdk_3_redis() {
    redis("rust-v3-features").await;
}

/// Spin's Redis interface against a real server: commands, and the
/// addresses `allowed_outbound_hosts` does not allow.
async fn redis(name: &str) {
    let server = edge_tests::services::Service::redis();
    let edge = Edge::up_env(&app(name), &[], &[("SPIN_VARIABLE_API_TOKEN", "unused")]);
    let address = format!("redis://127.0.0.1:{}", server.port);
    let call = |method: &'static str, op: &str, body: &'static str| {
        let url = format!("{}/redis/{op}", edge.url);
        let address = address.clone();
        async move {
            edge_tests::request(
                &client(),
                method,
                &url,
                &[("redis-address", &address)],
                body.into(),
            )
            .await
        }
    };
    assert_eq!(
        call("POST", "set/greeting", "hello").await,
        (200, "ok".into())
    );
    assert_eq!(server.redis_cli(&["GET", "greeting"]), "hello");
    assert_eq!(call("GET", "get/greeting", "").await, (200, "hello".into()));
    assert_eq!(call("GET", "get/missing", "").await, (200, "nil".into()));
    assert_eq!(call("GET", "incr/n", "").await, (200, "1".into()));
    assert_eq!(call("GET", "incr/n", "").await, (200, "2".into()));
    assert_eq!(call("POST", "sadd/s", "b,a,c").await, (200, "3".into()));
    assert_eq!(call("GET", "smembers/s", "").await, (200, "a,b,c".into()));
    assert_eq!(call("POST", "del/s", "").await, (200, "1".into()));
    assert_eq!(
        call("POST", "execute/", "INCRBY n 40").await,
        (200, "int:42".into())
    );
    assert_eq!(
        call("POST", "execute/", "SET k v").await,
        (200, "status:OK".into())
    );
    // A reply past 16 MiB is refused before the host reads it whole (the
    // server is the guest's choice: it could declare gigabytes).
    server.redis_cli(&["SETRANGE", "big", "20000000", "x"]);
    let (status, body) = call("GET", "get/big", "").await;
    assert_eq!(status, 500, "{}", &body[..body.len().min(200)]);
    assert!(body.len() < 10_000, "{} bytes", body.len());
    // A name the allowlist does not list (it lists 127.0.0.1): Spin's
    // InvalidAddress, before any connection.
    let (status, body) = edge_tests::request(
        &client(),
        "GET",
        &format!("{}/redis/get/x", edge.url),
        &[(
            "redis-address",
            &format!("redis://localhost:{}", server.port),
        )],
        "".into(),
    )
    .await;
    assert_eq!(status, 500);
    assert!(body.ends_with("InvalidAddress"), "{body}");
}

#[tokio::test]
async fn rust_sdk_7_mqtt() {
    mqtt("rust-features").await;
}

#[tokio::test]
async fn rust_sdk_3_mqtt() {
    mqtt("rust-v3-features").await;
}

/// Spin's MQTT interface against Mosquitto: what the app publishes
/// reaches a subscriber, at each QoS; a broker the allowlist does not
/// list is Spin's ConnectionFailed.
async fn mqtt(name: &str) {
    let broker = edge_tests::services::Service::mosquitto();
    let edge = Edge::up_env(&app(name), &[], &[("SPIN_VARIABLE_API_TOKEN", "unused")]);
    let address = format!("mqtt://127.0.0.1:{}?client_id={name}", broker.port);
    let publish = |qos: &'static str, address: String| {
        let url = format!("{}/mqtt/edge/test", edge.url);
        async move {
            edge_tests::request(
                &client(),
                "POST",
                &url,
                &[("mqtt-address", &address), ("mqtt-qos", qos)],
                format!("hello at qos {qos}").into(),
            )
            .await
        }
    };
    for qos in ["0", "1", "2"] {
        let sub = std::process::Command::new("mosquitto_sub")
            .args(["-h", "127.0.0.1", "-p", &broker.port.to_string()])
            .args(["-t", "edge/test", "-C", "1", "-W", "20"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("mosquitto_sub (the test command installs mosquitto-clients)");
        // The subscriber may not be subscribed yet: publish until it has
        // had a message.
        let mut sub = Some(sub);
        for _ in 0..100 {
            assert_eq!(
                publish(qos, address.clone()).await,
                (200, "published".into())
            );
            if let Some(child) = sub.as_mut()
                && child.try_wait().unwrap().is_some()
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let out = sub.take().unwrap().wait_with_output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("hello at qos {qos}")
        );
    }
    let denied = format!("mqtt://localhost:{}?client_id=x", broker.port);
    let (status, body) = publish("0", denied).await;
    assert_eq!(status, 500);
    assert!(
        body.contains("ConnectionFailed(") && body.contains("is not permitted"),
        "{body}"
    );
    let (status, body) = publish("0", "not a url".into()).await;
    assert_eq!(status, 500);
    assert!(body.ends_with("InvalidAddress"), "{body}");
}

/// `POST {edge}/{route}` with the server's address: status and body
/// (type names without the enum's prefix, which SDKs print or not).
async fn pg_call(edge: &Edge, route: &str, address: &str, body: &str) -> (u16, String) {
    let (status, body) = edge_tests::request(
        &client(),
        "POST",
        &format!("{}{route}", edge.url),
        &[("pg-address", address)],
        body.to_string().into(),
    )
    .await;
    (
        status,
        body.replace("DbDataType::", "").replace("DbValue::", ""),
    )
}

#[tokio::test]
async fn spin_postgres_in_every_sdk_generation() {
    let server = edge_tests::services::Service::postgres();
    let address = format!("postgres://postgres@127.0.0.1:{}/postgres", server.port);
    server.psql(
        "CREATE TABLE pets (id serial PRIMARY KEY, name text NOT NULL, weight float8, born date, \
         tag uuid, info jsonb, price numeric(10,2), scores int4[], age interval)",
    );
    let sdk7 = Edge::up_env(
        &app("rust-features"),
        &[],
        &[("SPIN_VARIABLE_API_TOKEN", "unused")],
    );
    let sdk3 = Edge::up_env(
        &app("rust-v3-features"),
        &[],
        &[("SPIN_VARIABLE_API_TOKEN", "unused")],
    );
    // Each generation writes with parameters...
    for (edge, route, name) in [
        (&sdk7, "/pg?execute", "Fido"),
        (&sdk3, "/pg?execute", "Rex"),
        (&sdk3, "/pg3?execute", "Tom"),
    ] {
        let (status, body) = pg_call(
            edge,
            route,
            &address,
            &format!("INSERT INTO pets (name, weight) VALUES ($1, $2)\nt:{name}\nf:12.5"),
        )
        .await;
        assert_eq!((status, body.as_str()), (200, "changed 1"), "{route}");
    }
    assert_eq!(
        server.psql("SELECT string_agg(name, ',' ORDER BY id) FROM pets"),
        "Fido,Rex,Tom"
    );
    server.psql(
        "UPDATE pets SET born = '2020-02-29', tag = '0f8fad5b-d9cb-469f-a165-70867728950e', \
         info = '{\"a\": 1}', price = 9.99, scores = '{1,2,3}', age = '1 mon 2 days 3 seconds' WHERE name = 'Fido'",
    );
    // ... and reads back, each with its own types: spin:postgres@4 has
    // them all; fermyon:spin/postgres@2 and spin:postgres@3 see what
    // they have no variant for as unsupported.
    let (status, body) = pg_call(
        &sdk7,
        "/pg",
        &address,
        "SELECT name, weight, born, tag, info, price, scores, age FROM pets WHERE id = $1\ni:1",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut lines = body.lines();
    assert_eq!(
        lines.next(),
        Some(
            "name:Str,weight:Floating64,born:Date,tag:Uuid,info:Jsonb,price:Decimal,scores:ArrayInt32,age:Interval"
        )
    );
    assert_eq!(
        lines.next(),
        Some(
            "Fido|12.5|2020-02-29|0f8fad5b-d9cb-469f-a165-70867728950e|{\"a\":1}|9.99|[Some(1), Some(2), Some(3)]|1mo2d3000000us"
        )
    );
    let (status, body) = pg_call(
        &sdk3,
        "/pg3",
        &address,
        "SELECT name, born, tag FROM pets WHERE name = $1\nt:Fido",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        "name:Str,born:Date,tag:Other\nFido|2020-02-29|Unsupported"
    );
    let (status, body) = pg_call(
        &sdk3,
        "/pg",
        &address,
        "SELECT name, born FROM pets WHERE name = $1\nt:Rex",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, "name:Str,born:Other\nRex|null");
    // numeric as PostgreSQL prints it, at any size and scale (its past
    // decoder held 28 digits and panicked the host's task from 1e32 on).
    let (status, body) = pg_call(
        &sdk7,
        "/pg",
        &address,
        "SELECT 1e32::numeric AS big, -0.000000000000000000000000000000001234::numeric AS small, \
         'NaN'::numeric AS nan, 'Infinity'::numeric AS inf, '{1.50,NULL,-2e30}'::numeric[] AS list",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        "big:Decimal,small:Decimal,nan:Decimal,inf:Decimal,list:ArrayDecimal\n\
         100000000000000000000000000000000|-0.000000000000000000000000000000001234|NaN|Infinity|\
         ArrayDecimal([Some(\"1.50\"), None, Some(\"-2000000000000000000000000000000\")])"
    );
    // A numeric's text can be 16,000 times its bytes (1e131071): a
    // million of them in one array is refused by the result's budget
    // before any text is made (131 GB of it).
    let (status, body) = pg_call(
        &sdk7,
        "/pg",
        &address,
        "SELECT array_fill(1e131071::numeric, ARRAY[1000000]) AS huge",
    )
    .await;
    assert_eq!(status, 500, "{body}");
    assert!(
        body.contains("larger than the 16777216-byte limit"),
        "{body}"
    );
    // The server's error, as Spin's query-failed.
    let (status, body) = pg_call(&sdk7, "/pg", &address, "SELECT nope FROM pets").await;
    assert_eq!(status, 500);
    assert!(
        body.contains("QueryFailed(") && body.contains("42703"),
        "{body}"
    );
    // A server that is down: an error for the guest, not a hang.
    let down = format!(
        "postgres://postgres@127.0.0.1:{}/postgres",
        edge_tests::services::free_port()
    );
    let (status, body) = pg_call(&sdk7, "/pg", &down, "SELECT 1").await;
    assert_eq!(status, 500);
    assert!(
        body.contains("ConnectionFailed(") && body.contains("cannot connect"),
        "{body}"
    );
    // A host the allowlist does not list: Spin's ConnectionFailed with
    // Spin's words, for each generation.
    let denied = format!("postgres://postgres@localhost:{}/postgres", server.port);
    for (edge, route) in [(&sdk7, "/pg"), (&sdk3, "/pg"), (&sdk3, "/pg3")] {
        let (status, body) = pg_call(edge, route, &denied, "SELECT 1").await;
        assert_eq!(status, 500, "{route}");
        assert!(
            body.contains("ConnectionFailed(")
                && body.contains(&format!(
                    "address postgres://localhost:{} is not permitted",
                    server.port
                )),
            "{route}: {body}"
        );
    }
}

/// A PostgreSQL server of the tenant's that answers a query with a row
/// declaring 1 GiB, then sends its bytes as fast as the host takes them:
/// what it managed to write before the host cut the connection.
fn postgres_declaring_a_huge_row() -> (u16, std::thread::JoinHandle<usize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        // The startup message (its length, then the rest).
        let mut len = [0u8; 4];
        conn.read_exact(&mut len).unwrap();
        let mut startup = vec![0; u32::from_be_bytes(len) as usize - 4];
        conn.read_exact(&mut startup).unwrap();
        let message = |kind: u8, body: &[u8]| {
            let mut m = vec![kind];
            m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
            m.extend_from_slice(body);
            m
        };
        // AuthenticationOk, ReadyForQuery.
        let mut reply = message(b'R', &[0, 0, 0, 0]);
        reply.extend(message(b'Z', b"I"));
        conn.write_all(&reply).unwrap();
        // Reads the client's messages up to its next Sync.
        let mut pending = Vec::new();
        let mut until_sync = |conn: &mut std::net::TcpStream| loop {
            if let Some(at) = pending.windows(5).position(|w| w == b"S\0\0\0\x04") {
                pending.drain(..at + 5);
                return;
            }
            let mut buf = [0u8; 4096];
            let n = conn.read(&mut buf).unwrap();
            assert!(n > 0, "the client left before its Sync");
            pending.extend_from_slice(&buf[..n]);
        };
        // Prepare (Parse, Describe, Sync): no parameters, one text column.
        until_sync(&mut conn);
        let mut reply = message(b'1', &[]);
        reply.extend(message(b't', &[0, 0]));
        let mut column = b"big\0".to_vec();
        column.extend_from_slice(&[0, 0, 0, 0, 0, 0]); // table oid, attribute
        column.extend_from_slice(&25u32.to_be_bytes()); // text
        column.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0]); // size, modifier, format
        let mut fields = vec![0, 1];
        fields.extend(column);
        reply.extend(message(b'T', &fields));
        reply.extend(message(b'Z', b"I"));
        conn.write_all(&reply).unwrap();
        // Bind, Execute, Sync: BindComplete, then the row's header alone.
        until_sync(&mut conn);
        let mut reply = message(b'2', &[]);
        reply.push(b'D');
        reply.extend_from_slice(&(1u32 << 30).to_be_bytes());
        conn.write_all(&reply).unwrap();
        let chunk = vec![b'x'; 1 << 20];
        let mut written = 0;
        while written < 256 << 20 {
            match conn.write(&chunk) {
                Ok(n) if n > 0 => written += n,
                _ => break,
            }
        }
        written
    });
    (port, server)
}

#[tokio::test]
async fn a_postgres_row_past_the_message_cap_is_cut_at_its_header() {
    // tokio-postgres gathers a whole message before decoding it: the host
    // would have buffered the row's 1 GiB (here the 256 MiB sent) before
    // the result's budget saw it.
    let (port, server) = postgres_declaring_a_huge_row();
    let edge = Edge::up_env(
        &app("rust-features"),
        &[],
        &[("SPIN_VARIABLE_API_TOKEN", "unused")],
    );
    let address = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    let (status, body) = pg_call(&edge, "/pg", &address, "SELECT big").await;
    assert_eq!(status, 500, "{body}");
    assert!(
        body.contains("QueryFailed(")
            && body.contains("the server sent a message of 1073741820 bytes; at most"),
        "{body}"
    );
    let written = tokio::task::spawn_blocking(move || server.join().unwrap())
        .await
        .unwrap();
    // What the kernel's buffers took before the cut, no more.
    assert!(
        written < 64 << 20,
        "the host took {written} bytes of the row"
    );
}

#[tokio::test]
async fn spin_mysql_against_mariadb_in_both_sdk_generations() {
    let db = edge_tests::mariadb::Mariadb::start_tcp("app");
    let port = db.port.expect("a port");
    db.client(
        Some("app"),
        "CREATE USER 'spin'@'127.0.0.1' IDENTIFIED BY 'pw'; GRANT ALL ON app.* TO 'spin'@'127.0.0.1'; \
         CREATE TABLE pets (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(40) NOT NULL, weight DOUBLE, \
         chip BIGINT UNSIGNED, photo VARBINARY(8), born DATE)",
    )
    .unwrap();
    let address = format!("mysql://spin:pw@127.0.0.1:{port}/app");
    let sdk7 = Edge::up_env(
        &app("rust-features"),
        &[],
        &[("SPIN_VARIABLE_API_TOKEN", "unused")],
    );
    let sdk3 = Edge::up_env(
        &app("rust-v3-features"),
        &[],
        &[("SPIN_VARIABLE_API_TOKEN", "unused")],
    );
    let call = |edge: &Edge, query: &str, address: &str, body: &str| {
        let (url, address, body) = (
            format!("{}/mysql{query}", edge.url),
            address.to_string(),
            body.to_string(),
        );
        async move {
            let (status, body) = edge_tests::request(
                &client(),
                "POST",
                &url,
                &[("mysql-address", &address)],
                body.into(),
            )
            .await;
            (
                status,
                body.replace("DbDataType::", "").replace("DbValue::", ""),
            )
        }
    };
    for (edge, name) in [(&sdk7, "Fido"), (&sdk3, "Rex")] {
        let insert = format!(
            "INSERT INTO pets (name, weight, chip) VALUES (?, ?, ?)\nt:{name}\nf:12.5\nu:18446744073709551615"
        );
        assert_eq!(
            call(edge, "?execute", &address, &insert).await,
            (200, "done".into())
        );
    }
    db.client(
        Some("app"),
        "UPDATE pets SET photo = 0x00ff, born = '2020-02-29' WHERE name = 'Fido'",
    )
    .unwrap();
    for edge in [&sdk7, &sdk3] {
        let (status, body) = call(
            edge,
            "",
            &address,
            "SELECT id, name, weight, chip, photo, born FROM pets WHERE id >= ? ORDER BY id\ni:1",
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body,
            "id:Int32,name:Str,weight:Floating64,chip:Uint64,photo:Binary,born:Other\n\
             1|Fido|12.5|18446744073709551615|0x00ff|Unsupported\n\
             2|Rex|12.5|18446744073709551615|null|null"
        );
        // The server's error, as Spin's query-failed.
        let (status, body) = call(edge, "", &address, "SELECT nope FROM pets").await;
        assert_eq!(status, 500);
        assert!(
            body.contains("QueryFailed(") && body.contains("nope"),
            "{body}"
        );
        // A host the allowlist does not list: Spin's ConnectionFailed, in
        // Spin's words.
        let denied = format!("mysql://spin:pw@localhost:{port}/app");
        let (status, body) = call(edge, "", &denied, "SELECT 1").await;
        assert_eq!(status, 500);
        assert!(
            body.contains(&format!(
                "ConnectionFailed(\"address {denied} is not permitted\")"
            )),
            "{body}"
        );
    }
    // MariaDB's ed25519 authentication: the server switches plugins in
    // the handshake and the client answers with a signature (it once
    // panicked in the host: mysql_common built without the plugin).
    db.client(
        None,
        "INSTALL SONAME 'auth_ed25519'; \
         CREATE USER 'spin25519'@'127.0.0.1' IDENTIFIED VIA ed25519 USING PASSWORD('pw25519'); \
         GRANT SELECT ON app.* TO 'spin25519'@'127.0.0.1'",
    )
    .unwrap();
    let ed25519 = format!("mysql://spin25519:pw25519@127.0.0.1:{port}/app");
    let select = "SELECT name FROM pets WHERE id = ?\ni:1";
    let (status, body) = call(&sdk7, "", &ed25519, select).await;
    assert_eq!((status, body.as_str()), (200, "name:Str\nFido"));
    let wrong = format!("mysql://spin25519:nope@127.0.0.1:{port}/app");
    let (status, body) = call(&sdk7, "", &wrong, select).await;
    assert_eq!(status, 500);
    assert!(
        body.contains("ConnectionFailed(") && body.contains("Access denied"),
        "{body}"
    );

    // A connection the guest dropped and the host keeps idle for the next
    // open still holds its place in the tenant's outbound cap (2 here):
    // opens of six different addresses leave at most two connections at
    // the server, each open getting through (the longest idle one is
    // closed to make room).
    let data = edge_tests::TempDir::new("mysql-cap");
    let capped = features_capped(2, data.path());
    let open_at_server = || {
        db.client(
            None,
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'spin'",
        )
        .unwrap()
        .trim()
        .parse::<u32>()
        .unwrap()
    };
    // (A closed socket leaves the server's list a moment later.)
    let settles_at = |most: u32| async move {
        for _ in 0..100 {
            if open_at_server() <= most {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        false
    };
    // The other hosts' idle connections go with them.
    drop((sdk7, sdk3));
    assert!(settles_at(0).await);
    for i in 0..6 {
        let distinct = format!("{address}?stmt_cache_size={}", i + 1);
        let mut tries = 0;
        loop {
            let (status, body) = call(&capped, "", &distinct, "SELECT 1").await;
            if status == 200 {
                break;
            }
            // The last one dropped may still be being reset: not yet idle.
            assert!(
                body.contains("too many connections") && tries < 100,
                "{body}"
            );
            tries += 1;
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(
            settles_at(2).await,
            "{} open after open {i}",
            open_at_server()
        );
    }
}

#[tokio::test]
async fn wasi_sockets_tcp_under_spins_permissions() {
    // A TCP server answering "echo: " and what it read.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut got = Vec::new();
                let _ = s.read_to_end(&mut got).await;
                let _ = s
                    .write_all(format!("echo: {}", String::from_utf8_lossy(&got)).as_bytes())
                    .await;
            });
        }
    });
    let edge = Edge::up_env(
        &app("rust-features"),
        &[],
        &[("SPIN_VARIABLE_API_TOKEN", "unused")],
    );
    let tcp = |address: String| {
        let url = format!("{}/tcp", edge.url);
        async move {
            edge_tests::request(
                &client(),
                "POST",
                &url,
                &[("tcp-address", &address)],
                "ping".into(),
            )
            .await
        }
    };
    // Allowed by "tcp://127.0.0.0/8:*".
    assert_eq!(
        tcp(format!("127.0.0.1:{port}")).await,
        (200, "echo: ping".into())
    );
    // Not in the allowlist: the guest's connect is refused before any
    // packet leaves (wasi:sockets access-denied, std's PermissionDenied).
    let (status, body) = tcp("192.0.2.1:80".into()).await;
    assert_eq!(status, 500);
    assert!(body.starts_with("PermissionDenied"), "{body}");
    // A name goes through the host's lookup (the guest's getaddrinfo is
    // wasi:sockets/ip-name-lookup), then its addresses through the same
    // checks.
    assert_eq!(
        tcp(format!("localhost:{port}")).await,
        (200, "echo: ping".into())
    );
    let (status, body) = tcp("no-such-name.invalid:80".into()).await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("lookup"), "{body}");
    // The tenant's lookups were the host's (counted, in its places), and
    // none is left running.
    let metrics = edge.metrics().await;
    let started: u64 =
        edge_tests::metric(&metrics, "edge_outbound_lookups_total{tenant=\"default\"}");
    assert!(started >= 2, "{metrics}");
    assert!(
        metrics.contains("edge_outbound_lookups_running{tenant=\"default\"} 0"),
        "{metrics}"
    );
}

/// `edge serve` of the rust-features app for one tenant whose outbound
/// cap (`max_outbound_requests`) is `cap`, loopback reachable.
fn features_capped(cap: usize, data: &std::path::Path) -> Edge {
    features_with_limits(&format!("max_outbound_requests = {cap}"), data)
}

/// `edge serve` of the rust-features app for one tenant, loopback
/// reachable, with `limits` (TOML lines) as its `[limits]`.
fn features_with_limits(limits: &str, data: &std::path::Path) -> Edge {
    Edge::start_env(
        "",
        &format!(
            "app = {:?}\n[outbound]\nallow_ranges = [\"127.0.0.1/32\"]\n[limits]\n{limits}\n\n[[tenant]]\nname = \"default\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n[tenant.secrets]\napi_token = {{ env = \"SPIN_VARIABLE_API_TOKEN\" }}\n",
            app("rust-features").display().to_string()
        ),
        data,
        &[("SPIN_VARIABLE_API_TOKEN", "unused")],
    )
}

#[tokio::test]
async fn a_tenants_open_files_and_databases_stop_at_max_open_files() {
    let data = edge_tests::TempDir::new("open-files");
    let edge = features_with_limits("max_open_files = 8", data.path());
    let hold = |query: &str| {
        let url = format!("{}/hold-open?{query}", edge.url);
        async move { get(&url).await }
    };
    // Files past the cap fail (WASI `quota`, std's QuotaExceeded); the
    // instance goes on.
    let (status, body) = hold("files=20").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("files 8, sql 0: QuotaExceeded"), "{body}");
    // SQLite connections count with them.
    let (status, body) = hold("files=5&sql=10").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("files 5, sql 3: "), "{body}");
    assert!(body.contains("max_open_files"), "{body}");
    // Closed ones (and an ended instance's) are given back.
    assert_eq!(hold("files=8").await, (200, "files 8, sql 0: ".into()));
    let metrics = edge.metrics().await;
    assert_eq!(
        edge_tests::metric(
            &metrics,
            "edge_share_held{tenant=\"default\",kind=\"open_files\"}"
        ),
        0
    );
    assert_eq!(
        edge_tests::metric(
            &metrics,
            "edge_open_files_refused_total{tenant=\"default\"}"
        ),
        2
    );
}

#[tokio::test]
async fn directory_listings_read_as_the_guest_reads_and_hold_a_place_each() {
    let data = edge_tests::TempDir::new("listings");
    // Both WASI versions list the files (without `.`, `..` and what the
    // manifest excludes), each with its type.
    let edge = features_with_limits("", data.path());
    for wasi in ["2", "3"] {
        assert_eq!(
            get(&format!("{}/list-dir?wasi={wasi}", edge.url)).await,
            (200, "css dir\nindex.html file".into()),
            "WASI 0.{wasi}"
        );
    }
    drop(edge);

    // The same guest with a directory longer than one batch of entries
    // (64) at /static: a listing read in part holds its descriptor.
    let dir = edge_tests::TempDir::new("listings-app");
    let many = dir.path().join("many");
    std::fs::create_dir(&many).unwrap();
    for i in 0..100 {
        std::fs::write(many.join(format!("f{i:03}")), b"").unwrap();
    }
    let wasm =
        app("rust-features").with_file_name("target/wasm32-wasip2/release/rust_features.wasm");
    std::fs::write(
        dir.path().join("spin.toml"),
        format!(
            "spin_manifest_version = 2\n[application]\nname = \"listings\"\n[[trigger.http]]\nroute = \"/...\"\ncomponent = \"lister\"\n[component.lister]\nsource = {:?}\nfiles = [{{ source = \"many\", destination = \"/static\" }}]\n",
            wasm.display().to_string()
        ),
    )
    .unwrap();
    let with_limits = |limits: &str| {
        Edge::start_env(
            "",
            &format!(
                "app = {:?}\n[limits]\n{limits}\n\n[[tenant]]\nname = \"default\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n",
                dir.path().join("spin.toml").display().to_string()
            ),
            data.path(),
            &[],
        )
    };
    let edge = with_limits("max_open_files = 8");
    let list = |query: &str| {
        let url = format!("{}/list-dir?{query}", edge.url);
        async move { get(&url).await }
    };
    // Past the tenant's cap a listing is refused with `quota`. Through
    // WASI 0.3 the directory takes one place and each listing one more;
    // through std (WASI 0.2) each listing opens the directory too.
    let (status, body) = list("wasi=3&hold=20").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.starts_with("held 7: ") && body.contains("Quota"),
        "{body}"
    );
    assert_eq!(
        list("wasi=2&hold=20").await,
        (200, "held 4: QuotaExceeded".into())
    );
    // A listing read to its end gives its place back at once: more of
    // them than the cap, one after another, in one request.
    let (status, body) = list("wasi=3&repeat=20").await;
    assert_eq!((status, body.lines().count()), (200, 100), "{body}");
    assert_eq!(list("wasi=2&repeat=20").await, (status, body));
    // Held ones are given back with the instance.
    assert_eq!(list("wasi=3&hold=7").await, (200, "held 7: ".into()));
    let metrics = edge.metrics().await;
    let held = "edge_share_held{tenant=\"default\",kind=\"open_files\"}";
    assert_eq!(edge_tests::metric(&metrics, held), 0);
    drop(edge);

    // Listings read in part hold no thread: more of them than the blocking
    // pool has threads (512) all go on, and so does the rest of the host
    // (wasmtime-wasi's own parks a thread per listing: this request and
    // every file, SQLite and key-value call after it on the same serving
    // thread wait until the deadline).
    // (Each takes a descriptor: guests have half the process's limit,
    // which `edge serve` raises to the hard one.)
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: reads this process's limit into `limit`.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    assert!(
        limit.rlim_max >= 4096,
        "this test needs a hard descriptor limit of at least 4096 (ulimit -Hn: {})",
        limit.rlim_max
    );
    let edge = with_limits("max_open_files = 4000");
    let url = format!("{}/list-dir?wasi=3&hold=600", edge.url);
    assert_eq!(get(&url).await, (200, "held 600: ".into()));
    let (status, body) = get(&format!("{}/list-dir?wasi=2", edge.url)).await;
    assert_eq!((status, body.lines().count()), (200, 100), "{body}");
}

#[tokio::test]
async fn wasi_sockets_hold_places_in_the_tenant_cap() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    // A server that holds each connection open until released, counting
    // how many it had at once.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (open, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // Each answer waits for a permit.
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let server = {
        let (open, most, release) = (open.clone(), most.clone(), release.clone());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let now = open.fetch_add(1, SeqCst) + 1;
                most.fetch_max(now, SeqCst);
                let (open, release) = (open.clone(), release.clone());
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut got = Vec::new();
                    let _ = s.read_to_end(&mut got).await;
                    release.acquire().await.unwrap().forget();
                    let _ = s.write_all(b"done").await;
                    open.fetch_sub(1, SeqCst);
                });
            }
        })
    };
    let data = edge_tests::TempDir::new("sockets-cap");
    let edge = features_capped(2, data.path());
    let tcp = || {
        let url = format!("{}/tcp", edge.url);
        let address = format!("127.0.0.1:{port}");
        async move {
            edge_tests::request(
                &client(),
                "POST",
                &url,
                &[("tcp-address", &address)],
                "x".into(),
            )
            .await
        }
    };
    // Six at once: two sockets get their places and wait at the server;
    // the other four are refused at once, before a descriptor is made.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..6 {
        let (tx, call) = (tx.clone(), tcp());
        tokio::spawn(async move {
            let _ = tx.send(call.await);
        });
    }
    let mut refused = Vec::new();
    for _ in 0..4 {
        match tokio::time::timeout(std::time::Duration::from_secs(30), rx.recv()).await {
            Ok(Some(answer)) => refused.push(answer),
            _ => panic!(
                "the calls past the cap were not refused: {} sockets at the server at once",
                most.load(SeqCst)
            ),
        }
    }
    assert!(refused.iter().all(|(s, _)| *s == 500), "{refused:?}");
    // (The two placed may still be connecting.)
    for _ in 0..500 {
        if open.load(SeqCst) == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(most.load(SeqCst), 2, "{refused:?}");
    // Released, the two answer, and their places are given back.
    release.add_permits(2);
    for _ in 0..2 {
        let (status, body) = rx.recv().await.unwrap();
        assert_eq!((status, body.as_str()), (200, "done"));
    }
    let again = tokio::spawn(tcp());
    release.add_permits(1);
    assert_eq!(again.await.unwrap(), (200, "done".to_string()));
    server.abort();
}

#[tokio::test]
async fn files_and_environment_as_the_manifest_lists_them() {
    let edge = Edge::up_env(
        &app("rust-features"),
        &[],
        &[("SPIN_VARIABLE_API_TOKEN", "unused")],
    );
    let get_path = |p: &str| get_owned(format!("{}{p}", edge.url));
    assert_eq!(
        get_path("/file/static/css/site.css").await,
        (200, "body { color: teal; }\n".into())
    );
    assert_eq!(
        get_path("/file/static/index.html").await,
        (200, "<h1>hello</h1>\n".into())
    );
    // A { source, destination } mount.
    assert_eq!(
        get_path("/file/img/logo.svg").await,
        (200, "<svg/>\n".into())
    );
    // Excluded, not listed, or outside the app: not there.
    assert_eq!(get_path("/file/static/server.key").await.0, 404);
    assert_eq!(get_path("/file/spin.toml").await.0, 404);
    assert_eq!(get_path("/file/etc/passwd").await.0, 404);
    assert_eq!(
        get_path("/env/GREETING").await,
        (200, "hi from the environment".into())
    );
    assert_eq!(
        get_path("/env/HOME").await.0,
        404,
        "the host's environment is not the guest's"
    );
}

async fn get_owned(url: String) -> (u16, String) {
    get(&url).await
}

#[tokio::test]
async fn javascript_template_app_built_with_spins_npm_tools() {
    let edge = Edge::up(&app("js-hello"), &[]);
    let (status, body) = get(&format!("{}/", edge.url)).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "Hello, Spin!"),
        "{}",
        edge.log()
    );
}

/// A manifest serving the features app under `/...` with every grant.
fn features_manifest(extra: &str) -> String {
    let dir = repo().join("tests/spin-apps/rust-features");
    format!(
        r#"spin_manifest_version = 2
[application]
name = "features"
[[trigger.http]]
route = "/..."
component = "features"
[component.features]
source = "{}"
key_value_stores = ["default"]
sqlite_databases = ["default"]
allowed_outbound_hosts = ["*://127.0.0.1:*"]
{extra}
"#,
        dir.join("target/wasm32-wasip2/release/rust_features.wasm")
            .display(),
    )
}

#[tokio::test]
async fn each_tenant_has_its_own_sqlite_databases_and_stores() {
    let data = edge_tests::TempDir::new("spin-tenants");
    let edge = Edge::start_with(
        &features_manifest(""),
        "app = \"spin.toml\"\n\
         [[tenant]]\nname = \"a\"\nhosts = [\"a.test\"]\ncomponents = [\"*\"]\n\
         [[tenant]]\nname = \"b\"\nhosts = [\"b.test\"]\ncomponents = [\"*\"]\n",
        data.path(),
    );
    let call = |host: &'static str,
                method: &'static str,
                path: &'static str,
                body: &'static str| {
        let url = format!("{}{path}", edge.url);
        async move { edge_tests::request(&client(), method, &url, &[("host", host)], body.into()).await }
    };
    assert_eq!(
        call("a.test", "POST", "/sql", "CREATE TABLE t (v)").await.0,
        200
    );
    assert_eq!(
        call("a.test", "POST", "/sql", "INSERT INTO t VALUES ('mine')")
            .await
            .0,
        200
    );
    let (status, body) = call("b.test", "POST", "/sql", "SELECT v FROM t").await;
    assert_eq!(status, 500, "tenant b sees no table of tenant a's: {body}");
    assert!(body.contains("no such table"), "{body}");
    assert_eq!(call("a.test", "PUT", "/kv/k", "a's").await.0, 200);
    assert_eq!(call("b.test", "GET", "/kv/k", "").await.0, 404);
    // One file per tenant, under the tenant's own directory.
    assert!(data.path().join("sqlite/a/default.db").exists());
    assert!(data.path().join("sqlite/b/default.db").exists());
}

/// A tenant's SQLite statements count as its CPU (and so decide its lane)
/// however little its guest runs: the statement runs on the blocking
/// pool, while the guest's call only waits.
#[tokio::test]
async fn a_tenants_sqlite_statements_count_as_its_cpu() {
    let edge = Edge::start(
        &features_manifest(""),
        "app = \"spin.toml\"\n[[tenant]]\nname = \"a\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n",
    );
    let cpu = || async {
        let text = edge.metrics().await;
        let series = "edge_cpu_seconds_total{tenant=\"a\"} ";
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Warm: the instance compiled and its database open.
    let url = format!("{}/sql", edge.url);
    let (status, body) = send("POST", &url, "SELECT 1").await;
    assert_eq!(status, 200, "{body}");
    let before = cpu().await;
    let (status, body) = send(
        "POST",
        &url,
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000) SELECT count(*) FROM c",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("5000000"), "{body}");
    // Five million rows take tens of milliseconds at the least; the
    // guest's own part (a few polls) well under one.
    let used = cpu().await - before;
    assert!(used >= 0.02, "charged {used} s");
}

/// A tenant whose statements keep the cores busy goes to the background
/// lane while they run (their CPU is charged as they go, not at their
/// end), so its next statements and calls yield to other tenants'.
#[tokio::test]
async fn a_tenant_whose_statements_run_long_goes_behind_while_they_run() {
    let edge = Edge::start(
        &features_manifest(""),
        // One serving thread: the two statements are over a's share of
        // it whatever the machine's cores.
        "app = \"spin.toml\"\n[server]\nworkers = 1\n\
         [[tenant]]\nname = \"a\"\nhosts = [\"a.test\"]\ncomponents = [\"*\"]\n\
         [tenant.limits]\nsqlite_statements = 2\nrequest_deadline_ms = 6000\n\
         [[tenant]]\nname = \"b\"\nhosts = [\"b.test\"]\ncomponents = [\"*\"]\n",
    );
    let call = |host: &'static str, path: &'static str, body: &'static str| {
        let url = format!("{}{path}", edge.url);
        async move { edge_tests::request(&client(), "POST", &url, &[("host", host)], body.into()).await }
    };
    // Another tenant active meanwhile: the CPU is shared between two.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let other = {
        let (stop, url) = (stop.clone(), format!("{}/sql", edge.url));
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = edge_tests::request(
                    &client(),
                    "POST",
                    &url,
                    &[("host", "b.test")],
                    "SELECT 1".into(),
                )
                .await;
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
    };
    // a's first call (its instance made) is behind it, and a in front:
    // its statements begin on the serving runtime's blocking threads.
    assert_eq!(call("a.test", "/sql", "SELECT 1").await.0, 200);
    assert!(
        in_front(&edge, "a").await,
        "tenant a never came to the front"
    );
    // Two statements that count until their deadline.
    let forever =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
    let running = [
        tokio::spawn(call("a.test", "/sql", forever)),
        tokio::spawn(call("a.test", "/sql", forever)),
    ];
    assert!(goes_behind(&edge, "a").await, "tenant a never went behind");
    assert!(
        running.iter().all(|r| !r.is_finished()),
        "behind while its statements still run"
    );
    // The statements went behind with it, where the machine lets threads
    // come back from SCHED_IDLE. The first began in front (a went behind
    // for its CPU), on a blocking thread of the serving runtime, which
    // runs at SCHED_IDLE now (the second may have begun behind, on the
    // background lane's own threads, which always do).
    let movable = edge_blocking::lanes_movable();
    if movable {
        let mut idle = 0;
        for _ in 0..400 {
            idle = idle_threads(edge.pid());
            if idle >= 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(idle >= 1, "no running statement went behind");
    }
    for r in running {
        assert_eq!(r.await.unwrap().0, 504);
    }
    // (Whether b stays in front is not asserted: on a loaded machine its
    // calls, waiting on SQLite, can count as long ones and send it behind
    // too, which is the lanes' rule, not this charging.)
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    other.await.unwrap();
    // Ended (interrupted at their deadline, a moment after the 504s),
    // their threads are back at their own policy for what they run next.
    if movable {
        let mut idle = usize::MAX;
        for _ in 0..200 {
            idle = idle_threads(edge.pid());
            if idle == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(idle, 0, "threads left at SCHED_IDLE");
    }
}

/// One statement that runs on and on sends its tenant behind, though it
/// takes no more than its share of the cores (one of two serving
/// threads' worth, the tenant alone on the host): work nothing interrupts
/// counts as a long poll does, window after window.
#[tokio::test]
async fn a_tenant_with_one_endless_statement_goes_behind() {
    let edge = Edge::start(
        &features_manifest(""),
        "app = \"spin.toml\"\n[server]\nworkers = 2\n\
         [[tenant]]\nname = \"a\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n\
         [tenant.limits]\nrequest_deadline_ms = 4000\n",
    );
    let url = format!("{}/sql", edge.url);
    let forever =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
    let running = tokio::spawn(async move { send("POST", &url, forever).await });
    assert!(goes_behind(&edge, "a").await, "tenant a never went behind");
    assert!(!running.is_finished(), "behind while its statement runs");
    assert_eq!(running.await.unwrap().0, 504);
}

/// One step of a statement can run for seconds with no safe point (SQLite
/// runs no progress handler inside it: a `GLOB` of a 16 MB text against a
/// 180-byte pattern of two character classes that fails at its end, about
/// 180 comparisons a byte: some seconds). Its tenant goes behind by the
/// long-task rule, the host's keeper moves the statement's thread there,
/// and the request still ends at its deadline.
#[tokio::test]
async fn one_long_step_of_a_statement_goes_behind_with_its_tenant() {
    let edge = Edge::start(
        &features_manifest(""),
        "app = \"spin.toml\"\n[server]\nworkers = 2\n\
         [[tenant]]\nname = \"a\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n\
         [tenant.limits]\nrequest_deadline_ms = 1000\n",
    );
    let url = format!("{}/sql", edge.url);
    assert_eq!(send("POST", &url, "SELECT 1").await.0, 200);
    assert!(
        in_front(&edge, "a").await,
        "tenant a never came to the front"
    );
    let class: String = (0x21u8..0x7f)
        .map(char::from)
        .filter(|c| !"[]a^-*?'".contains(*c))
        .collect();
    let one_step = format!("SELECT printf('%.*c', 16000000, 'a') GLOB '*[{class}a][{class}a]b'");
    let started = std::time::Instant::now();
    let one_step: &'static str = one_step.leak();
    let running = tokio::spawn(async move { send("POST", &url, one_step).await });
    assert!(goes_behind(&edge, "a").await, "tenant a never went behind");
    if edge_blocking::lanes_movable() {
        let mut idle = 0;
        for _ in 0..300 {
            idle = idle_threads(edge.pid());
            if idle >= 1 || running.is_finished() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(idle >= 1, "the statement's thread did not go behind");
    }
    assert_eq!(running.await.unwrap().0, 504);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(6),
        "the request did not end at its deadline"
    );
}

/// Whether `tenant` is in the background lane within 4 s.
async fn goes_behind(edge: &Edge, tenant: &str) -> bool {
    in_lane_within(edge, tenant, true, 400).await
}

/// Whether `tenant` is in the front lane, waiting up to 8 s for it (a
/// tenant held behind comes back within 5 s of its last long poll).
async fn in_front(edge: &Edge, tenant: &str) -> bool {
    in_lane_within(edge, tenant, false, 800).await
}

/// Whether `tenant`'s `edge_cpu_background` reads `background` within
/// `looks` looks 10 ms apart.
async fn in_lane_within(edge: &Edge, tenant: &str, background: bool, looks: u32) -> bool {
    let line = format!(
        "edge_cpu_background{{tenant=\"{tenant}\"}} {}",
        u8::from(background)
    );
    for _ in 0..looks {
        if edge.metrics().await.lines().any(|l| l == line) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    false
}

/// Threads of process `pid` at `SCHED_IDLE`, the background lane's own
/// ("edge-background") aside.
fn idle_threads(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|task| {
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // "TID (NAME) STATE ...": the policy is field 41, the 39th
            // after the name.
            let Some((head, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let name = head.split_once('(').map_or("", |(_, name)| name);
            let policy = rest.split_whitespace().nth(38);
            name != "edge-background"
                && policy.and_then(|p| p.parse().ok()) == Some(libc::SCHED_IDLE)
        })
        .count()
}

/// A tenant's statements take at most `sqlite_statements` of the host's
/// blocking threads at once: with its one slot held by a statement that
/// runs to its deadline, its next waits (shown in /metrics), while another
/// tenant's statements run. (The spinning tenant goes behind: its thread at
/// `SCHED_IDLE` sees its deadline only when a core is free, late on a
/// machine busy with other tests, so the waiting one has seconds to spare.)
#[tokio::test]
async fn a_tenants_sqlite_statements_take_at_most_its_slots() {
    let edge = Edge::start(
        &features_manifest(""),
        "app = \"spin.toml\"\n\
         [[tenant]]\nname = \"a\"\nhosts = [\"a.test\"]\ncomponents = [\"*\"]\n\
         [tenant.limits]\nsqlite_statements = 1\nrequest_deadline_ms = 8000\n\
         [[tenant]]\nname = \"b\"\nhosts = [\"b.test\"]\ncomponents = [\"*\"]\n",
    );
    let call = |host: &'static str, body: &'static str| {
        let url = format!("{}/sql", edge.url);
        async move { edge_tests::request(&client(), "POST", &url, &[("host", host)], body.into()).await }
    };
    let metrics = format!("{}/metrics", edge.admin);
    let until = |line: &'static str| {
        let metrics = metrics.clone();
        async move {
            for _ in 0..500 {
                if edge_tests::get(&metrics).await.1.lines().any(|l| l == line) {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            panic!("never {line}");
        }
    };
    // Counts without end: stopped at its request's deadline.
    let spinning = tokio::spawn(call(
        "a.test",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
    ));
    until("edge_sqlite_statements{tenant=\"a\",state=\"running\"} 1").await;
    // Sent well after it: the slot comes free at the spinning one's
    // deadline (or soon after), with time left before the waiting one's
    // own.
    tokio::time::sleep(std::time::Duration::from_millis(4000)).await;
    let waiting = tokio::spawn(call("a.test", "SELECT 1"));
    until("edge_sqlite_statements{tenant=\"a\",state=\"waiting\"} 1").await;
    // Another tenant's statements are not held behind a's.
    let (status, body) = call("b.test", "SELECT 1").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        !waiting.is_finished(),
        "a's second statement waits for its slot"
    );
    // The spinning one ends at its deadline; the waiting one then runs.
    assert_eq!(spinning.await.unwrap().0, 504);
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, 200, "{body}");
    until("edge_sqlite_statements{tenant=\"a\",state=\"running\"} 0").await;
}

/// Key-value stores placed in Redis by the runtime configuration: the app
/// reads and writes them as it would the files, each tenant in its own hash
/// on the shared server, within its cap; a server that is down is an error
/// for the guest, not a hang.
#[tokio::test]
async fn key_value_stores_in_redis_from_the_runtime_config() {
    let redis = edge_tests::services::Service::redis();
    let data = edge_tests::TempDir::new("spin-redis-kv");
    let rc = data.write(
        "runtime.toml",
        &format!(
            "[key_value_store.default]\ntype = \"redis\"\nurl = \"redis://127.0.0.1:{}/0\"\n",
            redis.port
        ),
    );
    let edge = Edge::start_with(
        &features_manifest(""),
        &format!(
            "app = \"spin.toml\"\nruntime_config = \"{}\"\n[limits]\nkv_store_bytes = 4096\n\
             [[tenant]]\nname = \"a\"\nhosts = [\"a.test\"]\ncomponents = [\"*\"]\n\
             [[tenant]]\nname = \"b\"\nhosts = [\"b.test\"]\ncomponents = [\"*\"]\n",
            rc.display()
        ),
        data.path(),
    );
    let call = |host: &'static str, method: &'static str, path: &'static str, body: String| {
        let url = format!("{}{path}", edge.url);
        async move { edge_tests::request(&client(), method, &url, &[("host", host)], body.into()).await }
    };
    assert_eq!(call("a.test", "PUT", "/kv/k", "a's".into()).await.0, 200);
    assert_eq!(call("a.test", "PUT", "/kv/j", "more".into()).await.0, 200);
    assert_eq!(
        call("a.test", "GET", "/kv/k", String::new()).await,
        (200, "a's".into())
    );
    assert_eq!(
        call("a.test", "GET", "/kv", String::new()).await,
        (200, "j\nk".into())
    );
    assert_eq!(
        call("a.test", "DELETE", "/kv/j", String::new()).await.0,
        200
    );
    // Tenant b shares the server, not the data.
    assert_eq!(call("b.test", "GET", "/kv/k", String::new()).await.0, 404);
    assert_eq!(call("b.test", "PUT", "/kv/k", "b's".into()).await.0, 200);
    assert_eq!(
        redis.redis_cli(&["HGET", "edge:kv:{a/default}", "k"]),
        "a's"
    );
    assert_eq!(
        redis.redis_cli(&["HGET", "edge:kv:{b/default}", "k"]),
        "b's"
    );
    // The cap counts keys and values ("k" + "a's"), kept beside the hash.
    assert_eq!(redis.redis_cli(&["GET", "edge:kv:{a/default}:bytes"]), "4");
    // A write past the tenant's cap changes nothing.
    let (status, body) = call("a.test", "PUT", "/kv/big", "x".repeat(5000)).await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(
        redis.redis_cli(&["HEXISTS", "edge:kv:{a/default}", "big"]),
        "0"
    );

    // The server goes away: the guest gets an error (Spin's `other`) in
    // fixed words, within the deadline; the log names the server.
    let server = format!("redis://127.0.0.1:{}/0", redis.port);
    drop(redis);
    let started = std::time::Instant::now();
    let (status, body) = call("a.test", "GET", "/kv/k", String::new()).await;
    assert_eq!(status, 500, "{body}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let log = edge.log_after("Redis server failed").await;
    assert!(log.contains(&server), "{log}");
}

/// An edit of the runtime configuration's dotenv file reaches the serving
/// app without a restart (the files it was read from are watched).
#[tokio::test]
async fn runtime_config_edits_are_reloaded() {
    let dir = edge_tests::TempDir::new("rc-reload");
    dir.write(".env", "MYAPP_API_TOKEN=first\n");
    let rc = dir.write(
        "runtime.toml",
        "[[variables_provider]]\ntype = \"env\"\nprefix = \"MYAPP\"\ndotenv_path = \".env\"\n",
    );
    let data = edge_tests::TempDir::new("rc-reload-data");
    let edge = Edge::start_with(
        &features_manifest(
            "[variables]\napi_token = { required = true }\n[component.features.variables]\ntoken = \"{{ api_token }}\"\n",
        ),
        &format!(
            "app = \"spin.toml\"\nruntime_config = \"{}\"\n[server]\nwatch_interval_ms = 100\n\
             [[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n",
            rc.display()
        ),
        data.path(),
    );
    let url = format!("{}/var/token", edge.url);
    assert_eq!(get(&url).await, (200, "first".into()), "{}", edge.log());
    dir.write(".env", "MYAPP_API_TOKEN=second\n");
    let mut answer = get(&url).await;
    // Up to 30 s: on a loaded machine (the whole suite on 2 cores) the
    // reload's rebuild has taken longer than 5 s.
    for _ in 0..300 {
        if answer.1 == "second" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        answer = get(&url).await;
    }
    assert_eq!(answer, (200, "second".into()), "{}", edge.log());
}

/// A file the runtime configuration places serves one tenant: two tenants
/// opening it would share their data, so the config is refused.
#[test]
fn a_placed_file_is_refused_for_two_tenants() {
    let dir = edge_tests::TempDir::new("rc-two-tenants");
    let rc = dir.write(
        "runtime.toml",
        "[sqlite_database.default]\ntype = \"spin\"\npath = \"app.db\"\n",
    );
    let edge = |tenants: &str| {
        format!(
            "app = \"spin.toml\"\nruntime_config = \"{}\"\n{tenants}",
            rc.display()
        )
    };
    let a = "[[tenant]]\nname = \"a\"\nhosts = [\"a.test\"]\ncomponents = [\"*\"]\n";
    let b = "[[tenant]]\nname = \"b\"\nhosts = [\"b.test\"]\ncomponents = [\"*\"]\n";
    let (code, stderr) = edge_tests::edge_check(&features_manifest(""), &edge(a));
    assert_eq!(code, 0, "{stderr}");
    let (code, stderr) = edge_tests::edge_check(&features_manifest(""), &edge(&format!("{a}{b}")));
    assert_ne!(code, 0);
    assert!(
        stderr.contains("edge.toml:2:18: runtime_config: places SQLite database \"default\" at one file, which tenants a, b would share"),
        "{stderr}"
    );
}

/// Spin's Python SDK (spin-sdk 3.4.1 with componentize-py 0.17.2, as its
/// WASI 0.2 template pins them): the app imports every Spin interface
/// (key-value, SQLite, Redis, LLM, `wasi:keyvalue` draft2, ...) whatever it
/// uses; it loads, and key-value, variables and outbound HTTP answer as its
/// code expects.
#[tokio::test]
async fn python_sdk_app_with_key_value_variables_and_outbound_http() {
    let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = upstream.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in upstream.incoming() {
            let Ok(mut s) = stream else { continue };
            // The whole head before answering: closing with unread bytes
            // would reset the connection under the response.
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\nconnection: close\r\n\r\nupstream",
            );
            let _ = s.shutdown(std::net::Shutdown::Write);
            let _ = s.read(&mut buf);
        }
    });
    let edge = Edge::up(&app("py-features"), &["--variable", "greeting=hi"]);
    let url = |p: &str| format!("{}{p}", edge.url);
    assert_eq!(
        get(&url("/")).await,
        (200, "Hello from Python!".into()),
        "{}",
        edge.log()
    );
    assert_eq!(
        get(&url("/var/message")).await,
        (200, "hi from Python".into())
    );
    assert_eq!(
        send("PUT", &url("/kv/b"), "two").await,
        (200, "stored".into())
    );
    assert_eq!(send("PUT", &url("/kv/a"), "one").await.0, 200);
    assert_eq!(get(&url("/kv/a")).await, (200, "one".into()));
    assert_eq!(get(&url("/kv")).await, (200, "a\nb".into()));
    assert_eq!(send("DELETE", &url("/kv/a"), "").await.0, 200);
    assert_eq!(get(&url("/kv/a")).await.0, 404);
    // A store the manifest does not grant: Spin's AccessDenied, raised in
    // Python as the SDK documents.
    let (status, body) = get(&url("/kv-open/other")).await;
    assert_eq!(status, 500);
    assert!(body.contains("AccessDenied"), "{body}");
    assert_eq!(
        get(&url(&format!("/fetch?http://127.0.0.1:{port}/"))).await,
        (200, "200 upstream".into())
    );
}

#[tokio::test]
async fn a_wasi_0_3_component_serves_per_session_too() {
    let dir = repo().join("tests/spin-apps/rust-hello");
    let spin = format!(
        "spin_manifest_version = 2\n[application]\nname = \"x\"\n[[trigger.http]]\nroute = \"/s/:key/...\"\ncomponent = \"hello\"\n[component.hello]\nsource = \"{}\"\n",
        dir.join("target/wasm32-wasip2/release/rust_hello.wasm")
            .display(),
    );
    let data = edge_tests::TempDir::new("p3-session");
    let edge = Edge::start_with(
        &spin,
        "app = \"spin.toml\"\n[[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n\
         [component.hello]\ninstance = \"session\"\nsession_key = \"path:2\"\n",
        data.path(),
    );
    for _ in 0..3 {
        for key in ["one", "two"] {
            let (status, body) = get(&format!("{}/s/{key}/x", edge.url)).await;
            assert_eq!(
                (status, body.as_str()),
                (200, "Hello World!"),
                "{}",
                edge.log()
            );
        }
    }
    // Two sessions, each instance reused for its three requests.
    let metrics = edge.metrics().await;
    assert!(
        metrics.contains("edge_sessions_active{tenant=\"t\",component=\"hello\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("edge_instances_created_total{tenant=\"t\",component=\"hello\"} 2"),
        "{metrics}"
    );
}

#[tokio::test]
async fn spins_runtime_config_places_stores_and_gives_variables() {
    let dir = edge_tests::TempDir::new("runtime-config");
    dir.write(".env", "MYAPP_API_TOKEN=from-dotenv\n");
    let rc = dir.write(
        "runtime.toml",
        "[key_value_store.default]\ntype = \"spin\"\npath = \"stores/kv.redb\"\n\
         [sqlite_database.default]\ntype = \"spin\"\npath = \"stores/app.db\"\n\
         [[variables_provider]]\ntype = \"env\"\nprefix = \"MYAPP\"\ndotenv_path = \".env\"\n",
    );
    let rc = rc.display().to_string();
    let edge = Edge::up(&app("rust-features"), &["--runtime-config-file", &rc]);
    let url = |p: &str| format!("{}{p}", edge.url);
    assert_eq!(get(&url("/var/token")).await, (200, "from-dotenv".into()));
    assert_eq!(send("PUT", &url("/kv/k"), "v").await.0, 200);
    assert_eq!(
        send("POST", &url("/sql"), "CREATE TABLE t (v)").await.0,
        200
    );
    assert!(dir.path().join("stores/kv.redb").exists());
    assert!(dir.path().join("stores/app.db").exists());

    // A type edge does not provide: refused at start, with FILE:LINE:COL.
    let bad = dir.write(
        "bad.toml",
        "[key_value_store.default]\ntype = \"azure_cosmos\"\n",
    );
    let out = std::process::Command::new(edge_tests::edge_bin())
        .args(["up", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(dir.path().join("state"))
        .arg("-f")
        .arg(app("rust-features"))
        .arg("--runtime-config-file")
        .arg(&bad)
        .env("SPIN_VARIABLE_API_TOKEN", "x")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.toml:2:8")
            && stderr.contains("\"azure_cosmos\" is not provided by edge"),
        "{stderr}"
    );
}
