//! Reloads swap configs under load with zero failed requests; bad configs
//! are refused and the old one keeps serving.

use edge_tests::{Edge, client, get, request, standard_spin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const SIGHUP: i32 = 1;

fn config(extra_host: &str) -> String {
    format!(
        "app = \"spin.toml\"\n[server]\nwatch_interval_ms = 100\n[[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"echo\"{extra_host}]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_under_load_loses_no_request() {
    let edge = Edge::start(&standard_spin(), &config(""));
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..8 {
        let url = format!("{}/load{w}", edge.url);
        let stop = stop.clone();
        workers.push(tokio::spawn(async move {
            let c = client();
            let mut results = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                results.push(request(&c, "GET", &url, &[], Default::default()).await);
            }
            results
        }));
    }
    // Before: fixtures is not granted, so its path falls to echo.
    assert_eq!(
        get(&format!("{}/fixtures/x", edge.url)).await.1,
        "hello from edge: /fixtures/x\n"
    );
    for round in 0..6 {
        let grant = if round % 2 == 0 { ", \"fixtures\"" } else { "" };
        std::fs::write(&edge.config, config(grant)).expect("rewrite config");
        edge.signal(SIGHUP);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // After an even number of flips plus one more: granted.
    std::fs::write(&edge.config, config(", \"fixtures\"")).expect("rewrite config");
    edge.signal(SIGHUP);
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for w in workers {
        for (status, body) in w.await.expect("join") {
            total += 1;
            assert_eq!(status, 200, "failed during reload: {body}");
        }
    }
    assert!(total > 100, "load ran ({total} requests)");
    assert_eq!(get(&format!("{}/fixtures/x", edge.url)).await.1, "ok\n");
    assert!(edge.metric("edge_reloads_total{result=\"ok\"}").await >= 7.0);
}

#[tokio::test]
async fn a_broken_config_is_refused_and_the_old_one_serves() {
    let edge = Edge::start(&standard_spin(), &config(""));
    std::fs::write(
        &edge.config,
        "app = \"spin.toml\"\n[[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"nope\"]\n",
    )
    .expect("write");
    edge.signal(SIGHUP);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        get(&format!("{}/x", edge.url)).await,
        (200, "hello from edge: /x\n".into())
    );
    assert!(edge.metric("edge_reloads_total{result=\"refused\"}").await >= 1.0);
    let log = edge.log_after("reload refused").await;
    assert!(
        log.contains("reload refused") && log.contains("no component \\\"nope\\\"")
            || log.contains("no component \"nope\""),
        "{log}"
    );
}

#[tokio::test]
async fn a_file_change_reloads_without_a_signal() {
    let edge = Edge::start(&standard_spin(), &config(""));
    assert_eq!(
        get(&format!("{}/fixtures/x", edge.url)).await.1,
        "hello from edge: /fixtures/x\n"
    );
    // mtime granularity: make sure the change is visible as a change.
    tokio::time::sleep(Duration::from_millis(20)).await;
    std::fs::write(&edge.config, config(", \"fixtures\"")).expect("write");
    let mut reloaded = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if get(&format!("{}/fixtures/x", edge.url)).await.1 == "ok\n" {
            reloaded = true;
            break;
        }
    }
    assert!(reloaded, "the watcher picked up the change");
}

/// A manifest whose `signer_keys`-like secret variable lets a config ask
/// for a generated key, beside the standard components.
fn spin_with_secret() -> String {
    standard_spin().replace(
        "[variables]\n",
        "[variables]\ndev_key = { default = \"\", secret = true }\n",
    )
}

#[tokio::test]
async fn a_refused_reload_writes_no_file_and_changes_nothing() {
    let data = edge_tests::TempDir::new("refused-reload");
    let edge = Edge::start_with(&spin_with_secret(), &config(", \"fixtures\""), data.path());
    let keys = data.path().join("keys");
    assert!(!keys.exists());
    // A config that generates a key but is refused (its component would
    // stop loading): the key must not be written, nor anything applied.
    let broken = edge.dir.write("broken.wasm", "not a component");
    let spin = format!(
        "{}\n[[trigger.http]]\nroute = \"/broken/...\"\ncomponent = \"broken\"\n[component.broken]\nsource = \"{}\"\n",
        spin_with_secret(),
        broken.display()
    );
    edge.dir.write("spin.toml", &spin);
    std::fs::write(
        &edge.config,
        config(", \"fixtures\", \"broken\"")
            + "[tenant.limits]\nmax_instances = 1\n[tenant.secrets]\ndev_key = { generate = \"ed25519\" }\n",
    )
    .expect("rewrite config");
    edge.signal(SIGHUP);
    let log = edge.log_after("reload refused").await;
    assert!(log.contains("reload refused"), "{log}");
    assert!(!keys.exists(), "a refused config wrote {}", keys.display());
    assert!(!log.contains("generated a development"), "{log}");
    // The limit of the refused config is not in force: two requests run at
    // once (max_instances = 1 would refuse the second).
    let slow = tokio::spawn({
        let url = format!("{}/fixtures/sleep?ms=500", edge.url);
        async move { get(&url).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(get(&format!("{}/x", edge.url)).await.0, 200);
    assert_eq!(slow.await.expect("join").0, 200);
    // The same config without the broken component is taken, and only
    // then is the key written.
    edge.dir.write("spin.toml", &spin_with_secret());
    std::fs::write(
        &edge.config,
        config(", \"fixtures\"") + "[tenant.secrets]\ndev_key = { generate = \"ed25519\" }\n",
    )
    .expect("rewrite config");
    edge.signal(SIGHUP);
    edge.log_after("generated a development Ed25519 signing key")
        .await;
    assert!(keys.join("t").join("dev_key.pem").exists());
}

#[tokio::test]
async fn a_reload_that_replaces_a_session_pool_frees_its_slots() {
    let session = |idle: u64| {
        config(", \"counter\"")
            + &format!(
                "[component.counter]\ninstance = \"session\"\nsession_key = \"path:2\"\nidle_timeout_ms = {idle}\n"
            )
    };
    let edge = Edge::start(&standard_spin(), &session(600_000));
    for key in ["a", "b", "c"] {
        assert_eq!(
            get(&format!("{}/counter/{key}/count", edge.url)).await.1,
            "1\n"
        );
    }
    let held = "edge_share_held{tenant=\"t\",kind=\"sessions\"}";
    assert_eq!(edge.metric(held).await, 3.0);
    // New session settings: a new pool. The old one's idle sessions end
    // now, not ten minutes from now.
    std::fs::write(&edge.config, session(500_000)).expect("rewrite config");
    edge.signal(SIGHUP);
    edge.log_after("config reloaded").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while edge.metric(held).await > 0.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the replaced pool kept its sessions"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        edge.metric("edge_active_instances{tenant=\"t\",component=\"counter\"}")
            .await,
        0.0
    );
    assert_eq!(
        get(&format!("{}/counter/a/count", edge.url)).await.1,
        "1\n",
        "a fresh session in the new pool"
    );
    // A reload that changes nothing keeps the new pool and its sessions
    // (the replacement is kept apart from the pool it replaced).
    let reloads = "edge_reloads_total{result=\"ok\"}";
    let before = edge.metric(reloads).await;
    edge.signal(SIGHUP);
    while edge.metric(reloads).await == before {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        get(&format!("{}/counter/a/count", edge.url)).await.1,
        "2\n",
        "the session lived through a reload that changed nothing"
    );
}

#[tokio::test]
async fn a_replaced_component_leaves_memory_and_unused_artifacts_leave_the_disk() {
    // echo from a file of the test's, so that a new version can replace it.
    let dir = edge_tests::TempDir::new("new-versions");
    let echo = dir.path().join("echo.wasm");
    let original = std::fs::read(edge_tests::component("echo")).expect("echo");
    std::fs::write(&echo, &original).expect("copy");
    let spin = standard_spin().replace(&edge_tests::component("echo"), &echo.display().to_string());
    // A compile cache of its own: what leaves it is this edge's doing.
    let data = edge_tests::TempDir::new("own-cache");
    let edge = Edge::start_with(&spin, &config(""), data.path());
    let loaded = edge.metric("edge_components_loaded").await;
    assert!(loaded >= 2.0, "echo and fixtures: {loaded}");

    // In the compile cache: an artifact no build has used for two days,
    // and one used an hour ago (names as the cache writes them).
    let cache = data.path().join("cache");
    let artifact = |byte: u8| cache.join(format!("{}-0011223344556677.cwasm", hex(&[byte; 32])));
    let (stale, recent) = (artifact(0xa1), artifact(0xa2));
    for (file, age) in [(&stale, 48 * 3600), (&recent, 3600)] {
        let f = std::fs::File::create(file).expect("artifact");
        f.set_modified(std::time::SystemTime::now() - Duration::from_secs(age))
            .expect("its time");
    }

    // Three new versions of echo, one after the other (a custom section
    // of their own each: other bytes, the same code).
    for version in 2u8..5 {
        let mut bytes = original.clone();
        bytes.extend_from_slice(&[0, 3, 1, b'v', b'0' + version]);
        let reloads = edge.metric("edge_reloads_total{result=\"ok\"}").await;
        let new = dir.path().join("echo.new");
        std::fs::write(&new, &bytes).expect("new version");
        std::fs::rename(&new, &echo).expect("in place");
        edge.signal(SIGHUP);
        let mut waited = 0;
        while edge.metric("edge_reloads_total{result=\"ok\"}").await <= reloads {
            waited += 1;
            assert!(waited < 600, "version {version} reloaded");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(get(&format!("{}/x", edge.url)).await.0, 200);
        assert_eq!(
            edge.metric("edge_components_loaded").await,
            loaded,
            "version {version}: the versions before it are not kept in memory"
        );
    }
    assert!(
        !stale.exists(),
        "an artifact unused for two days is removed"
    );
    assert!(
        recent.exists(),
        "one used an hour ago is kept for a rollback"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
