//! Host capabilities as a component sees them, through the `probe` fixture:
//! variables (`wasi:config/store`), key-value (`wasi:keyvalue`, embedded and
//! persistent) and outbound HTTP limited to `allowed_outbound_hosts`; and
//! that a capability not granted is refused.

use bytes::Bytes;
use edge_tests::{Edge, TempDir, client, component, get, get_host, request, upstream};

/// A manifest with the probe under `/probe/...`; `extra` goes into its
/// component table.
fn probe_spin(extra: &str) -> String {
    format!(
        r#"spin_manifest_version = 2
[application]
name = "probe-app"

[variables]
greeting = {{ default = "hello" }}
token = {{ required = true, secret = true }}

[[trigger.http]]
route = "/probe/..."
component = "probe"

[component.probe]
source = "{probe}"
{extra}
"#,
        probe = component("probe"),
    )
}

const GRANTS: &str = r#"key_value_stores = ["default", "cache"]
[component.probe.variables]
greeting = "{{ greeting }}"
token = "{{ token }}"
"#;

const TWO_TENANTS: &str = r#"app = "spin.toml"
[[tenant]]
name = "alpha"
hosts = ["alpha.test"]
components = ["probe"]
[tenant.variables]
greeting = "hi from alpha"
[tenant.secrets]
token = "alpha-secret"

[[tenant]]
name = "beta"
hosts = ["beta.test"]
components = ["probe"]
[tenant.secrets]
token = "beta-secret"
"#;

async fn send(method: &str, url: &str, host: &str, body: &str) -> (u16, String) {
    request(
        &client(),
        method,
        url,
        &[("host", host)],
        Bytes::from(body.to_string()),
    )
    .await
}

#[tokio::test]
async fn variables_resolve_per_tenant() {
    let data = TempDir::new("vars");
    let edge = Edge::start_with(&probe_spin(GRANTS), TWO_TENANTS, data.path());
    let u = &edge.url;
    assert_eq!(
        get_host(&format!("{u}/probe/var/greeting"), "alpha.test").await,
        (200, "hi from alpha".into())
    );
    // beta sets no greeting: the manifest default.
    assert_eq!(
        get_host(&format!("{u}/probe/var/greeting"), "beta.test").await,
        (200, "hello".into())
    );
    assert_eq!(
        get_host(&format!("{u}/probe/var/token"), "beta.test").await,
        (200, "beta-secret".into())
    );
    assert_eq!(
        get_host(&format!("{u}/probe/var/nope"), "alpha.test")
            .await
            .0,
        404
    );
}

#[tokio::test]
async fn key_value_is_per_tenant_limited_and_persistent() {
    let data = TempDir::new("kv");
    let spin = probe_spin(GRANTS);
    let edge_toml = format!("{TWO_TENANTS}[tenant.limits]\nkv_store_bytes = 4096\n");
    let edge = Edge::start_with(&spin, &edge_toml, data.path());
    let u = &edge.url;
    let kv = |path: &str| format!("{u}/probe/kv/{path}");

    assert_eq!(
        send("PUT", &kv("default/name"), "alpha.test", "Ada").await,
        (200, "stored\n".into())
    );
    assert_eq!(
        get_host(&kv("default/name"), "alpha.test").await,
        (200, "Ada".into())
    );
    // Another tenant's store of the same label is another store.
    assert_eq!(get_host(&kv("default/name"), "beta.test").await.0, 404);
    // Another label of the same tenant too.
    assert_eq!(get_host(&kv("cache/name"), "alpha.test").await.0, 404);

    for expected in ["5\n", "10\n"] {
        assert_eq!(
            send("POST", &kv("default/hits/incr?by=5"), "alpha.test", "").await,
            (200, expected.into())
        );
    }
    let (status, body) = send("POST", &kv("default/name/incr"), "alpha.test", "").await;
    assert_eq!(status, 500);
    assert!(
        body.contains("\"Ada\" is not a decimal unsigned 64-bit number"),
        "{body}"
    );

    assert_eq!(
        get_host(&kv("default"), "alpha.test").await,
        (200, "hits\nname\n".into())
    );
    assert_eq!(
        send("DELETE", &kv("default/hits"), "alpha.test", "").await,
        (200, "deleted\n".into())
    );
    assert_eq!(
        get_host(&kv("default"), "alpha.test").await,
        (200, "name\n".into())
    );

    // Labels not granted are refused.
    assert_eq!(
        get_host(&kv("other/x"), "alpha.test").await,
        (403, "access-denied\n".into())
    );

    // beta's stores are capped at 4096 bytes.
    let big = "x".repeat(4000);
    assert_eq!(
        send("PUT", &kv("default/a"), "beta.test", &big).await.0,
        200
    );
    let (status, body) = send("PUT", &kv("default/b"), "beta.test", &big).await;
    assert_eq!(status, 500);
    assert!(
        body.contains("store \"default\" is full: the write needs 8002 bytes, the store holds 4001 of its 4096-byte cap (limits.kv_store_bytes)"),
        "{body}"
    );
    // alpha's cap is the default.
    assert_eq!(
        send("PUT", &kv("default/b"), "alpha.test", &big).await.0,
        200
    );

    // Stop and start again on the same data directory: the data is there.
    let mut edge = edge;
    edge.signal(libc::SIGTERM);
    assert_eq!(edge.wait(std::time::Duration::from_secs(10)), Some(0));
    drop(edge);
    let edge = Edge::start_with(&spin, &edge_toml, data.path());
    assert_eq!(
        get_host(&format!("{}/probe/kv/default/name", edge.url), "alpha.test").await,
        (200, "Ada".into())
    );
    assert_eq!(
        get_host(&format!("{}/probe/kv/default/a", edge.url), "beta.test").await,
        (200, big)
    );

    // A crash (SIGKILL) loses at most the last second of writes.
    let url = format!("{}/probe/kv/default/late", edge.url);
    assert_eq!(send("PUT", &url, "alpha.test", "kept").await.0, 200);
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    edge.signal(libc::SIGKILL);
    drop(edge);
    let edge = Edge::start_with(&spin, &edge_toml, data.path());
    assert_eq!(
        get_host(&format!("{}/probe/kv/default/late", edge.url), "alpha.test").await,
        (200, "kept".into())
    );
}

#[tokio::test]
async fn capabilities_not_granted_are_refused_at_the_call() {
    let data = TempDir::new("nogrant");
    // The probe imports wasi:keyvalue, but this manifest grants no store:
    // as on Spin it loads (Spin's SDKs for interpreted languages import
    // every interface), the import is logged with the key that grants it,
    // and every store it opens is refused.
    let edge = Edge::start_with(
        &probe_spin(""),
        "app = \"spin.toml\"\n[[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n",
        data.path(),
    );
    // Loaded: it answers (this manifest gives it no variables).
    let (status, body) = get(&format!("{}/probe/var/greeting", edge.url)).await;
    assert_eq!((status, body.as_str()), (404, "no such variable\n"));
    assert_eq!(
        get(&format!("{}/probe/kv/default/x", edge.url)).await,
        (403, "access-denied\n".into())
    );
    let log = edge.log_after("does not grant").await;
    assert!(
        log.contains("wasi:keyvalue/store@0.2.0-draft")
            && log.contains("list the stores it opens in `key_value_stores`"),
        "{log}"
    );
}

#[tokio::test]
async fn outbound_http_only_to_allowed_hosts() {
    let allowed = upstream("from upstream");
    let other = upstream("must not be reached");
    let data = TempDir::new("outbound");
    let spin = probe_spin(&format!(
        "allowed_outbound_hosts = [\"http://127.0.0.1:{allowed}\"]\n{GRANTS}"
    ));
    // The upstreams listen on loopback, which guests reach only if allowed.
    let config = TWO_TENANTS.replace(
        "app = \"spin.toml\"\n",
        "app = \"spin.toml\"\n[outbound]\nallow_ranges = [\"127.0.0.1/32\"]\n",
    );
    let edge = Edge::start_with(&spin, &config, data.path());
    let fetch = |port: u16| format!("{}/probe/fetch?url=http://127.0.0.1:{port}/x", edge.url);
    assert_eq!(
        get_host(&fetch(allowed), "alpha.test").await,
        (200, "200\nfrom upstream".into())
    );
    let (status, body) = get_host(&fetch(other), "alpha.test").await;
    assert_eq!(
        (status, body.as_str()),
        (502, "ErrorCode::HttpRequestDenied\n")
    );
    let (status, body) = get_host(
        &format!("{}/probe/fetch?url=https://example.com/", edge.url),
        "alpha.test",
    )
    .await;
    assert_eq!(
        (status, body.as_str()),
        (502, "ErrorCode::HttpRequestDenied\n")
    );
    let log = edge.log_after("outbound request denied").await;
    assert!(log.contains("outbound request denied"), "{log}");
}

/// The sidecar daemon for the process test, stopped on drop.
struct SidecarDaemon(std::process::Child);
impl Drop for SidecarDaemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn processes_run_through_the_sidecar_only_as_granted() {
    use std::io::BufRead;
    let data = TempDir::new("process");
    let socket = data.path().join("sidecar.sock");
    // alpha may run /bin/echo and /bin/cat; beta nothing; /bin/sh is on
    // the sidecar's allowlist but granted to no tenant.
    let edge_toml = TWO_TENANTS.replace(
        "components = [\"probe\"]\n[tenant.variables]",
        "components = [\"probe\"]\nsidecar_programs = [\"/bin/echo\", \"/bin/cat\", \"/bin/sleep\"]\n[tenant.limits]\nmax_outbound_requests = 1\n[tenant.variables]",
    ) + &format!(
        "[sidecar]\nsocket = \"{}\"\nallow = [\"/bin/echo\", \"/bin/cat\", \"/bin/sh\", \"/bin/sleep\"]\n",
        socket.display()
    );
    let edge = Edge::start_with(&probe_spin(GRANTS), &edge_toml, data.path());
    let u = &edge.url;
    let run = |q: &str| format!("{u}/probe/run?{q}");

    // No daemon yet: unavailable, not a trap.
    let (status, body) = send("POST", &run("program=/bin/echo&arg=hi"), "alpha.test", "").await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.starts_with("unavailable: the sidecar does not answer"),
        "{body}"
    );

    let mut child =
        std::process::Command::new(edge_tests::edge_bin().with_file_name("edge-sidecar"))
            .arg("--config")
            .arg(&edge.config)
            .arg("--data-dir")
            .arg(data.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("edge-sidecar");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _daemon = SidecarDaemon(child);

    assert_eq!(
        send(
            "POST",
            &run("program=/bin/echo&arg=a%20b&arg=%24(id)"),
            "alpha.test",
            ""
        )
        .await,
        (200, "0\na b $(id)\n".into())
    );
    assert_eq!(
        send("POST", &run("program=/bin/cat"), "alpha.test", "piped in").await,
        (200, "0\npiped in".into())
    );
    let (status, body) = send(
        "POST",
        &run("program=/bin/sh&arg=-c&arg=id"),
        "alpha.test",
        "",
    )
    .await;
    assert_eq!(
        (status, body.as_str()),
        (
            403,
            "not-allowed: \"/bin/sh\" is not among this tenant's sidecar_programs\n"
        )
    );
    let (status, _) = send("POST", &run("program=/bin/echo&arg=x"), "beta.test", "").await;
    assert_eq!(status, 403, "beta was granted nothing");

    // A run holds a place in the tenant's outbound cap (1 here) while it
    // waits for the sidecar: a second at once is busy, not queued on a
    // host thread.
    let sleep = run("program=/bin/sleep&arg=3");
    let sleeping = tokio::spawn(async move { send("POST", &sleep, "alpha.test", "").await });
    let metrics = format!("{}/metrics", edge.admin);
    for _ in 0..200 {
        let (_, m) = edge_tests::get(&metrics).await;
        if m.contains("edge_outbound_in_flight{tenant=\"alpha\"} 1") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let busy = send("POST", &run("program=/bin/echo&arg=x"), "alpha.test", "").await;
    assert_eq!(busy.0, 503, "{}", busy.1);
    assert!(
        busy.1.starts_with("busy: ") && busy.1.contains("max_outbound_requests"),
        "{}",
        busy.1
    );
    assert_eq!(sleeping.await.unwrap(), (200, "0\n".into()));
    assert_eq!(
        send("POST", &run("program=/bin/echo&arg=x"), "alpha.test", "").await,
        (200, "0\nx\n".into())
    );
}
