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
