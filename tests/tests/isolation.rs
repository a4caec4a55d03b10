//! A misbehaving guest fails its own request and nobody else's: traps,
//! infinite loops (deadline kill), host-blocked guests (wall clock) and
//! memory hogs (memory cap), each under concurrent healthy load.

use edge_tests::{Edge, client, get, raw, request, standard_spin};

fn config(deadline_ms: u64, memory: u64) -> String {
    format!(
        "app = \"spin.toml\"\n[limits]\nrequest_deadline_ms = {deadline_ms}\nmemory_bytes = {memory}\n[[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n"
    )
}

/// Runs `healthy` requests to echo on 8 connections while `bad` runs
/// `bad_count` times; returns the healthy statuses and the bad ones.
async fn under_load(edge: &Edge, bad: &str, bad_count: usize) -> (Vec<u16>, Vec<(u16, String)>) {
    let mut healthy = Vec::new();
    for w in 0..8 {
        let url = format!("{}/w{w}", edge.url);
        healthy.push(tokio::spawn(async move {
            let c = client();
            let mut statuses = Vec::new();
            for _ in 0..150 {
                statuses.push(request(&c, "GET", &url, &[], Default::default()).await.0);
            }
            statuses
        }));
    }
    let mut bads = Vec::new();
    for _ in 0..bad_count {
        let url = format!("{}{bad}", edge.url);
        bads.push(tokio::spawn(async move { get(&url).await }));
    }
    let mut ok = Vec::new();
    for h in healthy {
        ok.extend(h.await.expect("join"));
    }
    let mut bad_results = Vec::new();
    for b in bads {
        bad_results.push(b.await.expect("join"));
    }
    (ok, bad_results)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traps_fail_only_their_own_request() {
    let edge = Edge::start(&standard_spin(), &config(10_000, 64 << 20));
    let (healthy, bad) = under_load(&edge, "/fixtures/trap", 50).await;
    assert!(
        healthy.iter().all(|s| *s == 200),
        "healthy requests all succeed: {:?}",
        healthy.iter().filter(|s| **s != 200).collect::<Vec<_>>()
    );
    assert_eq!(healthy.len(), 1200);
    for (status, body) in &bad {
        assert_eq!((*status, body.as_str()), (500, "the component failed\n"));
    }
    assert_eq!(
        edge.metric("edge_traps_total{tenant=\"t\",component=\"fixtures\"}")
            .await,
        50.0
    );
    // The guest's own panic message reaches the log, beside the trap.
    let log = edge.log_after("fixture: deliberate trap").await;
    assert!(log.contains("guest trapped"), "{log}");
    assert!(
        log.contains("guest output") && log.contains("fixture: deliberate trap"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infinite_loops_are_killed_at_the_deadline() {
    let edge = Edge::start(&standard_spin(), &config(300, 64 << 20));
    let (healthy, bad) = under_load(&edge, "/fixtures/loop", 4).await;
    assert!(healthy.iter().all(|s| *s == 200));
    for (status, body) in &bad {
        assert_eq!(
            (*status, body.as_str()),
            (504, "the component exceeded its deadline and was stopped\n")
        );
    }
    assert_eq!(
        edge.metric("edge_deadline_kills_total{tenant=\"t\",component=\"fixtures\"}")
            .await,
        4.0
    );
    // The killed instances are gone.
    assert_eq!(
        edge.metric("edge_active_instances{tenant=\"t\",component=\"fixtures\"}")
            .await,
        0.0
    );
}

#[tokio::test]
async fn guests_blocked_in_the_host_are_killed_at_the_deadline() {
    let edge = Edge::start(&standard_spin(), &config(300, 64 << 20));
    let (status, _) = get(&format!("{}/fixtures/sleep?ms=5000", edge.url)).await;
    assert_eq!(status, 504);
    let (status, body) = get(&format!("{}/fixtures/sleep?ms=10", edge.url)).await;
    assert_eq!((status, body.as_str()), (200, "slept\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_hogs_hit_their_cap_alone() {
    let edge = Edge::start(&standard_spin(), &config(10_000, 32 << 20));
    let (healthy, bad) = under_load(&edge, "/fixtures/hog?mb=100", 10).await;
    assert!(healthy.iter().all(|s| *s == 200));
    for (status, body) in &bad {
        assert_eq!(
            (*status, body.as_str()),
            (
                500,
                "the component exceeded its memory limit and was stopped\n"
            )
        );
    }
    // Under the cap works.
    let (status, body) = get(&format!("{}/fixtures/hog?mb=8", edge.url)).await;
    assert_eq!((status, body.as_str()), (200, "allocated 8 MiB\n"));
    assert_eq!(
        edge.metric("edge_memory_cap_kills_total{tenant=\"t\",component=\"fixtures\"}")
            .await,
        10.0
    );
}

#[tokio::test]
async fn a_body_the_deadline_cuts_short_never_looks_complete() {
    // The stream outlives the deadline: per-request and session instances
    // alike, the client must see the body fail, never a short one that
    // ends cleanly (a session's body used to end with its final chunk).
    let config = config(100, 64 << 20)
        + "[component.counter]\ninstance = \"session\"\nsession_key = \"path:2\"\n";
    let edge = Edge::start(&standard_spin(), &config);
    for path in ["/fixtures/stream", "/counter/s1/stream"] {
        let (status, body) = get(&format!("{}{path}?bytes=400000000", edge.url)).await;
        assert_eq!(status, 0, "{path}: a clean end after {} bytes", body.len());
        assert!(body.starts_with("body error"), "{path}: {body}");
    }
    // The session is reset and serves again.
    let (status, body) = get(&format!("{}/counter/s1/stream?bytes=10", edge.url)).await;
    assert_eq!((status, body.as_str()), (200, "xxxxxxxxxx"));
}

#[tokio::test]
async fn a_client_that_stalls_its_body_gets_408_not_the_component_a_kill() {
    let edge = Edge::start(&standard_spin(), &config(300, 64 << 20));
    // 10 of the 100 bytes announced, then nothing: the guest waits for
    // the rest when the deadline passes.
    let answer = raw(
        &edge.url,
        b"POST /fixtures/body HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789",
    );
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.ends_with("the request body did not arrive in time\n"),
        "{answer}"
    );
    let kills = "edge_deadline_kills_total{tenant=\"t\",component=\"fixtures\"}";
    assert_eq!(edge.metric(kills).await, 0.0);
    // A guest that is slow itself is still the component's deadline.
    let (status, _) = get(&format!("{}/fixtures/sleep?ms=5000", edge.url)).await;
    assert_eq!(status, 504);
    assert_eq!(edge.metric(kills).await, 1.0);
}

#[tokio::test]
async fn large_bodies_stream_through_whole() {
    let edge = Edge::start(&standard_spin(), &config(10_000, 64 << 20));
    let (status, body) = get(&format!("{}/fixtures/stream?bytes=40000000", edge.url)).await;
    assert_eq!(status, 200);
    assert_eq!(body.len(), 40_000_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_guest_does_not_hold_its_thread() {
    // One serving thread: the loop and the healthy requests share it. The
    // loop yields at every epoch tick, so healthy requests are answered
    // while it spins, long before its deadline ends it.
    let config = config(3_000, 64 << 20).replace("[limits]", "[server]\nworkers = 1\n[limits]");
    let edge = Edge::start(&standard_spin(), &config);
    let loop_url = format!("{}/fixtures/loop", edge.url);
    let looping = tokio::spawn(async move { get(&loop_url).await });
    // Let the loop start before the healthy requests arrive.
    edge.wait_until_busy("fixtures").await;
    let c = client();
    for i in 0..20 {
        let (status, _) = request(
            &c,
            "GET",
            &format!("{}/h{i}", edge.url),
            &[],
            Default::default(),
        )
        .await;
        assert_eq!(status, 200);
    }
    assert!(
        !looping.is_finished(),
        "the healthy requests were answered while the loop still ran: {:?}",
        looping.await
    );
    assert_eq!(looping.await.expect("join").0, 504);
}

#[tokio::test]
async fn swap_turned_on_after_start_stops_the_host() {
    // Pooled memories are reset in place from a PAGEMAP_SCAN only without
    // swap; a page swapped out would escape the reset and reach the next
    // tenant in the slot. The host cannot change the reset of live slots,
    // so it stops (and its supervisor restarts it with the safe reset).
    let swaps = edge_tests::TempDir::new("swaps");
    let header = "Filename\tType\tSize\tUsed\tPriority\n";
    let file = swaps.write("swaps", header);
    let mut edge = Edge::start_env(
        &standard_spin(),
        edge_tests::ONE_TENANT,
        &edge_tests::shared_cache(),
        &[("EDGE_PROC_SWAPS", file.to_str().expect("utf-8 path"))],
    );
    assert_eq!(get(&format!("{}/x", edge.url)).await.0, 200);
    swaps.write(
        "swaps",
        &format!("{header}/swapfile\tfile\t1048572\t0\t-2\n"),
    );
    let code = edge.wait(std::time::Duration::from_secs(20));
    assert_eq!(code, Some(1), "{}", edge.log());
    assert!(
        edge.log().contains("swap was turned on after start"),
        "{}",
        edge.log()
    );
}
