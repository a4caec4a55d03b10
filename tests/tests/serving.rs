//! Routing, HTTP edge cases, health, metrics and the compile cache, against
//! the real binary over loopback.

use edge_tests::{
    Edge, ONE_TENANT, TempDir, client, component, get, get_host, raw, request, standard_spin,
};

const TWO_TENANTS: &str = r#"app = "spin.toml"
[[tenant]]
name = "alpha"
hosts = ["alpha.test", "*.alpha.test"]
components = ["echo", "fixtures"]

[[tenant]]
name = "beta"
hosts = ["beta.test"]
components = ["fixtures"]
"#;

#[tokio::test]
async fn routes_by_host_and_path() {
    let edge = Edge::start(&standard_spin(), TWO_TENANTS);
    let u = &edge.url;
    assert_eq!(
        get_host(&format!("{u}/hello"), "alpha.test").await,
        (200, "hello from edge: /hello\n".into())
    );
    assert_eq!(
        get_host(&format!("{u}/a/b?c=1"), "ALPHA.test:8080").await,
        (200, "hello from edge: /a/b?c=1\n".into())
    );
    assert_eq!(get_host(&format!("{u}/x"), "www.alpha.test").await.0, 200);
    // The more specific route wins over the catch-all.
    assert_eq!(
        get_host(&format!("{u}/fixtures/anything"), "alpha.test").await,
        (200, "ok\n".into())
    );
    // beta only has fixtures: its catch-all is not there.
    assert_eq!(
        get_host(&format!("{u}/fixtures/x"), "beta.test").await,
        (200, "ok\n".into())
    );
    let (status, body) = get_host(&format!("{u}/hello"), "beta.test").await;
    assert_eq!((status, body.as_str()), (404, "no route for /hello\n"));
    let (status, body) = get_host(&format!("{u}/hello"), "gamma.test").await;
    assert_eq!(
        (status, body.as_str()),
        (404, "no tenant serves host \"gamma.test\"\n")
    );
}

/// The `spin-client-addr` a request from this test (loopback) gets with
/// `X-Forwarded-For: xff` on `edge`.
async fn client_addr_seen(edge: &Edge, xff: &str) -> String {
    let (status, body) = edge_tests::request(
        &edge_tests::client(),
        "GET",
        &format!("{}/fixtures/a/headers", edge.url),
        &[("host", "alpha.test"), ("x-forwarded-for", xff)],
        bytes::Bytes::new(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body.lines()
        .find_map(|l| l.strip_prefix("spin-client-addr: "))
        .unwrap_or_else(|| panic!("{body}"))
        .to_string()
}

/// Behind the operator's proxies the client is the nearest hop they name
/// in X-Forwarded-For; anyone else's X-Forwarded-For is not believed.
#[tokio::test]
async fn the_client_behind_a_trusted_proxy_is_the_one_it_names() {
    let direct = Edge::start(&standard_spin(), TWO_TENANTS);
    let seen = client_addr_seen(&direct, "203.0.113.7").await;
    assert!(seen.starts_with("127.0.0.1:"), "{seen}");
    let proxied = Edge::start(
        &standard_spin(),
        &format!("{TWO_TENANTS}\n[server]\ntrusted_proxies = [\"127.0.0.0/8\", \"10.0.0.0/8\"]\n"),
    );
    // What the client wrote itself (left of its proxy's entry) is not
    // believed, nor is a trusted hop taken for the client.
    assert_eq!(
        client_addr_seen(&proxied, "198.51.100.1, 203.0.113.7, 10.1.2.3").await,
        "203.0.113.7:0"
    );
    assert_eq!(
        client_addr_seen(&proxied, "[2001:db8::7]:4711").await,
        "[2001:db8::7]:4711"
    );
    // No usable entry: the proxy is the client.
    let seen = client_addr_seen(&proxied, "unknown").await;
    assert!(seen.starts_with("127.0.0.1:"), "{seen}");
    // A range that is not one is refused with where and what is allowed.
    let (code, err) = edge_tests::edge_check(
        &standard_spin(),
        &format!("{TWO_TENANTS}\n[server]\ntrusted_proxies = [\"10.0.0.1/8\"]\n"),
    );
    assert!(
        code != 0
            && err.contains("server.trusted_proxies[0]")
            && err.contains("write \"10.0.0.0/8\""),
        "{err}"
    );
}

/// The headers Spin gives components (so Spin SDK routers work unchanged).
#[tokio::test]
async fn components_get_spins_headers() {
    let edge = Edge::start(&standard_spin(), TWO_TENANTS);
    let (status, body) = get_host(
        &format!("{}/fixtures/a/headers?x=1", edge.url),
        "alpha.test",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (client, spin): (Vec<&str>, Vec<&str>) = body
        .lines()
        .filter(|l| l.starts_with("spin-"))
        .partition(|l| l.starts_with("spin-client-addr: "));
    // The test's client connects from loopback, from a port of its own.
    let port = client
        .iter()
        .find_map(|c| c.strip_prefix("spin-client-addr: 127.0.0.1:"))
        .unwrap_or_else(|| panic!("{body}"));
    assert!(port.parse::<u16>().is_ok(), "{body}");
    assert_eq!(client.len(), 1, "{body}");
    assert_eq!(
        spin,
        [
            "spin-base-path: /",
            "spin-component-route: /fixtures",
            "spin-full-url: http://alpha.test/fixtures/a/headers?x=1",
            "spin-matched-route: /fixtures/...",
            "spin-path-info: /a/headers",
            "spin-raw-component-route: /fixtures/...",
        ]
    );
    // Over HTTP/2 the host is the request's authority (no Host header).
    let (mut send, _conn) = edge_tests::h2_connect(&edge.url).await;
    let req = http::Request::builder()
        .uri("http://alpha.test/fixtures/a/headers?x=1")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.expect("response");
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    let body = String::from_utf8_lossy(&body);
    assert!(
        body.lines()
            .any(|l| l == "spin-full-url: http://alpha.test/fixtures/a/headers?x=1"),
        "{body}"
    );
}

#[tokio::test]
async fn malformed_and_oversized_requests() {
    let edge = Edge::start(
        &standard_spin(),
        "app = \"spin.toml\"\n[server]\nmax_body_bytes = 1000\nmax_header_bytes = 8192\n[[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n",
    );
    let garbage = raw(&edge.url, b"NOT HTTP AT ALL\r\n\r\n");
    assert!(garbage.starts_with("HTTP/1.1 400"), "{garbage}");

    let big = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let answer = raw(&edge.url, big.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    // The same head over HTTP/2 (under hyper's own 16 KiB default there,
    // over this config's 8 KiB): refused too.
    let (mut send, _conn) = edge_tests::h2_connect(&edge.url).await;
    let req = http::Request::builder()
        .uri("http://x/")
        .header("x-big", "a".repeat(12_000))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.expect("an answer");
    assert_eq!(resp.status(), 431);

    let c = client();
    let (status, body) = request(
        &c,
        "POST",
        &format!("{}/fixtures/body", edge.url),
        &[],
        vec![b'x'; 2000].into(),
    )
    .await;
    assert_eq!(
        (status, body.as_str()),
        (413, "request body exceeds 1000 bytes\n")
    );
    let (status, body) = request(
        &c,
        "POST",
        &format!("{}/fixtures/body", edge.url),
        &[],
        vec![b'x'; 1000].into(),
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "1000\n"));

    // Chunked: the size is only known while streaming.
    let chunked = format!(
        "POST /fixtures/body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n7d0\r\n{}\r\n0\r\n\r\n",
        "y".repeat(2000)
    );
    let answer = raw(&edge.url, chunked.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        edge.metric("edge_body_too_large_total{tenant=\"t\",component=\"fixtures\"}")
            .await
            >= 2.0
    );
}

#[tokio::test]
async fn health_and_metrics() {
    let edge = Edge::start(&standard_spin(), ONE_TENANT);
    for _ in 0..3 {
        assert_eq!(get(&format!("{}/x", edge.url)).await.0, 200);
    }
    assert_eq!(get(&format!("{}/fixtures/trap", edge.url)).await.0, 500);
    let (status, health) = get(&format!("{}/health", edge.admin)).await;
    assert_eq!(status, 200);
    assert!(health.starts_with("{\"status\":\"ok\""), "{health}");
    assert!(
        health.contains("\"echo\":{\"status\":\"ready\"}"),
        "{health}"
    );

    let m = edge.metrics().await;
    for line in [
        "edge_requests_total{tenant=\"t\",component=\"echo\",code=\"2xx\"} 3",
        "edge_requests_total{tenant=\"t\",component=\"fixtures\",code=\"5xx\"} 1",
        "edge_request_duration_seconds_count{tenant=\"t\",component=\"echo\"} 3",
        "edge_traps_total{tenant=\"t\",component=\"fixtures\"} 1",
        "edge_deadline_kills_total{tenant=\"t\",component=\"echo\"} 0",
        "edge_active_instances{tenant=\"t\",component=\"echo\"} 0",
        "edge_instances_created_total{tenant=\"t\",component=\"echo\"} 3",
        "# TYPE edge_pool_slots_in_use gauge",
        "edge_pool_slots_in_use{kind=\"component_instances\"} 0",
        "edge_components_failed 0",
        // (A guest's trap is not the host's panic.)
        "edge_panics_total 0",
    ] {
        assert!(m.contains(line), "missing {line:?} in:\n{m}");
    }
    // The four instances are gone; their memories' slots stay warm.
    let warm = edge_tests::metric(&m, "edge_pool_unused_warm_slots{kind=\"memories\"}");
    assert!(warm >= 1, "{m}");
    assert!(m.contains("edge_pool_unused_resident_bytes{kind=\"memories\"} "));
    assert!(m.contains(
        "edge_request_duration_seconds_bucket{tenant=\"t\",component=\"echo\",le=\"+Inf\"} 3"
    ));
}

#[tokio::test]
async fn a_component_that_fails_to_load_does_not_stop_the_others() {
    let dir = TempDir::new("broken");
    let broken = dir.write("broken.wasm", "this is not wasm");
    let spin = format!(
        "{}\n[[trigger.http]]\nroute = \"/broken/...\"\ncomponent = \"broken\"\n[component.broken]\nsource = \"{}\"\n",
        standard_spin(),
        broken.display()
    );
    let edge = Edge::start(&spin, ONE_TENANT);
    assert_eq!(get(&format!("{}/x", edge.url)).await.0, 200);
    let (status, body) = get(&format!("{}/broken/x", edge.url)).await;
    assert_eq!(status, 503);
    // Fixed words: the compile error (with its paths) is for /health and
    // the log, not for clients.
    assert_eq!(body, "the component is unavailable\n");
    let (_, health) = get(&format!("{}/health", edge.admin)).await;
    assert!(health.starts_with("{\"status\":\"degraded\""), "{health}");
    assert!(
        health.contains("\"broken\":{\"status\":\"failed\",\"error\":\"compiling component"),
        "{health}"
    );
    assert_eq!(edge.metric("edge_components_failed").await, 1.0);
}

#[tokio::test]
async fn restarts_load_compiled_components_from_the_cache() {
    let data = TempDir::new("cache");
    let cfg =
        "app = \"spin.toml\"\n[[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"echo\"]\n";
    let spin = format!(
        "spin_manifest_version = 2\n[application]\nname = \"c\"\n[[trigger.http]]\nroute = \"/...\"\ncomponent = \"echo\"\n[component.echo]\nsource = \"{}\"\n",
        component("echo")
    );
    {
        let first = Edge::start_with(&spin, cfg, data.path());
        assert_eq!(get(&format!("{}/", first.url)).await.0, 200);
        let log = first.log_after("compiled").await;
        assert!(log.contains("compiled"), "first start compiles: {log}");
    }
    let entries: Vec<_> = std::fs::read_dir(data.path().join("cache"))
        .expect("cache dir")
        .collect();
    assert_eq!(entries.len(), 1, "one artifact for one component");
    let second = Edge::start_with(&spin, cfg, data.path());
    assert_eq!(get(&format!("{}/", second.url)).await.0, 200);
    assert!(
        !second.log().contains("compiled"),
        "second start must not recompile: {}",
        second.log()
    );
}

#[tokio::test]
async fn sigterm_drains_in_flight_requests() {
    let mut edge = Edge::start(&standard_spin(), ONE_TENANT);
    let url = format!("{}/fixtures/sleep?ms=700", edge.url);
    let slow = tokio::spawn(async move { get(&url).await });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    edge.signal(libc_sigterm());
    let (status, body) = slow.await.expect("join");
    assert_eq!(
        (status, body.as_str()),
        (200, "slept\n"),
        "in-flight request finishes during drain"
    );
    assert_eq!(
        edge.wait(std::time::Duration::from_secs(10)),
        Some(0),
        "exits cleanly after draining"
    );
}

fn libc_sigterm() -> i32 {
    15
}

#[tokio::test]
async fn silent_connections_are_closed_and_cannot_lock_others_out() {
    use tokio::io::AsyncReadExt;
    let config = ONE_TENANT.replace(
        "[[tenant]]",
        "[server]\nmax_connections = 2\nheader_read_timeout_ms = 300\n[[tenant]]",
    );
    let edge = Edge::start(&standard_spin(), &config);
    let addr = edge.url.trim_start_matches("http://").to_string();
    // Both slots taken by clients that never speak, one of them after
    // the first bytes of an HTTP/2 preface.
    let mut silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut partial = tokio::net::TcpStream::connect(&addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut partial, b"PRI * HTTP/2.0\r\n")
        .await
        .unwrap();
    // The server closes them: a read sees the end, not a hang.
    let ten_s = std::time::Duration::from_secs(10);
    async fn closed_by_the_server(s: &mut tokio::net::TcpStream) {
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(std::time::Duration::from_secs(10), s.read(&mut buf));
        let n = read.await.expect("the server closed the connection");
        assert_eq!(n.unwrap_or(0), 0);
    }
    closed_by_the_server(&mut silent).await;
    closed_by_the_server(&mut partial).await;
    // And a client that speaks is served.
    let answered = tokio::time::timeout(ten_s, get(&format!("{}/hello", edge.url)))
        .await
        .expect("served once the silent connections were gone");
    assert_eq!(answered, (200, "hello from edge: /hello\n".into()));
    // The admin listener closes silent clients too.
    let admin = edge.admin.trim_start_matches("http://").to_string();
    closed_by_the_server(&mut tokio::net::TcpStream::connect(&admin).await.unwrap()).await;
}
