//! Per-session instances: pinning, separation, cap and idle eviction.

use edge_tests::{Edge, client, get, request, standard_spin};
use std::time::Duration;

fn config(max_sessions: usize, idle_ms: u64, key: &str) -> String {
    format!(
        "app = \"spin.toml\"\n[[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n[component.counter]\ninstance = \"session\"\nsession_key = \"{key}\"\nmax_sessions = {max_sessions}\nidle_timeout_ms = {idle_ms}\n"
    )
}

#[tokio::test]
async fn same_key_same_instance_different_keys_different_instances() {
    let edge = Edge::start(&standard_spin(), &config(10, 60_000, "path:2"));
    let count = |s: &str| format!("{}/counter/{s}/count", edge.url);
    for expected in 1..=5 {
        assert_eq!(get(&count("alice")).await, (200, format!("{expected}\n")));
    }
    assert_eq!(get(&count("bob")).await, (200, "1\n".into()));
    assert_eq!(get(&count("alice")).await, (200, "6\n".into()));
    // The same fixture per request never counts past 1.
    for _ in 0..3 {
        assert_eq!(
            get(&format!("{}/fixtures/count", edge.url)).await,
            (200, "1\n".into())
        );
    }
    assert_eq!(
        edge.metric("edge_sessions_active{tenant=\"t\",component=\"counter\"}")
            .await,
        2.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_on_one_session_run_in_order_and_lose_nothing() {
    let edge = Edge::start(&standard_spin(), &config(10, 60_000, "header:x-session"));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let url = format!("{}/counter/count", edge.url);
        tasks.push(tokio::spawn(async move {
            let c = client();
            let mut seen = Vec::new();
            for _ in 0..25 {
                let (status, body) = request(
                    &c,
                    "GET",
                    &url,
                    &[("x-session", "shared")],
                    Default::default(),
                )
                .await;
                assert_eq!(status, 200, "{body}");
                seen.push(body.trim().parse::<u64>().expect("a count"));
            }
            seen
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("join"));
    }
    all.sort_unstable();
    assert_eq!(
        all,
        (1..=200).collect::<Vec<u64>>(),
        "every request saw a distinct count: serialized on one instance"
    );
}

#[tokio::test]
async fn the_session_cap_answers_503_with_a_clear_body() {
    let edge = Edge::start(&standard_spin(), &config(2, 60_000, "cookie:sid"));
    let c = client();
    let url = format!("{}/counter/count", edge.url);
    for sid in ["a", "b"] {
        assert_eq!(
            request(
                &c,
                "GET",
                &url,
                &[("cookie", &format!("theme=dark; sid={sid}"))],
                Default::default()
            )
            .await
            .0,
            200
        );
    }
    let (status, body) = request(&c, "GET", &url, &[("cookie", "sid=c")], Default::default()).await;
    assert_eq!(status, 503);
    assert_eq!(body, "no session capacity for this route; retry later\n");
    // Existing sessions still work.
    assert_eq!(
        request(&c, "GET", &url, &[("cookie", "sid=a")], Default::default()).await,
        (200, "2\n".into())
    );
    let (status, body) = get(&url).await;
    assert_eq!(
        (status, body.as_str()),
        (
            400,
            "missing session key: this route needs a non-empty cookie sid\n"
        )
    );
    assert_eq!(
        edge.metric("edge_sessions_rejected_total{tenant=\"t\",component=\"counter\"}")
            .await,
        1.0
    );
}

#[tokio::test]
async fn idle_sessions_are_evicted() {
    let edge = Edge::start(&standard_spin(), &config(1, 300, "path:2"));
    let count = |s: &str| format!("{}/counter/{s}/count", edge.url);
    assert_eq!(get(&count("a")).await.1, "1\n");
    assert_eq!(get(&count("a")).await.1, "2\n");
    tokio::time::sleep(Duration::from_millis(900)).await;
    // Evicted: its slot is free for another key, and "a" starts over.
    assert_eq!(get(&count("b")).await, (200, "1\n".into()));
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(get(&count("a")).await, (200, "1\n".into()));
    assert!(
        edge.metric("edge_sessions_evicted_total{tenant=\"t\",component=\"counter\"}")
            .await
            >= 2.0
    );
}

#[tokio::test]
async fn requests_their_clients_gave_up_on_are_not_run() {
    let edge = Edge::start(&standard_spin(), &config(4, 60_000, "path:2"));
    // One request keeps the instance busy; two more queue behind it, and
    // their clients give up before it is done.
    let busy_url = format!("{}/counter/q/sleep?ms=800", edge.url);
    let busy = tokio::spawn(async move { get(&busy_url).await });
    edge.wait_until_busy("counter").await;
    for _ in 0..2 {
        let url = format!("{}/counter/q/count", edge.url);
        let gave_up = tokio::time::timeout(std::time::Duration::from_millis(100), get(&url)).await;
        assert!(gave_up.is_err(), "answered while the instance was busy");
    }
    assert_eq!(busy.await.unwrap().0, 200);
    // The abandoned counts never ran: this is the instance's first.
    assert_eq!(get(&format!("{}/counter/q/count", edge.url)).await.1, "1\n");
}

#[tokio::test]
async fn a_trapping_session_is_reset() {
    let edge = Edge::start(&standard_spin(), &config(4, 60_000, "path:2"));
    assert_eq!(get(&format!("{}/counter/s/count", edge.url)).await.1, "1\n");
    assert_eq!(get(&format!("{}/counter/s/trap", edge.url)).await.0, 500);
    assert_eq!(
        get(&format!("{}/counter/s/count", edge.url)).await,
        (200, "1\n".into()),
        "a fresh instance after the trap"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_warm_instances_per_key() {
    two_warm_instances(&(config(10, 60_000, "path:2") + "instances_per_key = 2\n")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_warm_instance_per_worker() {
    let config =
        config(10, 60_000, "path:2") + "instances_per_key = \"workers\"\n[server]\nworkers = 2\n";
    two_warm_instances(&config).await;
}

/// Two instances for each key: a request goes to an idle one, else to a
/// new one, so a slow request does not hold up the next.
async fn two_warm_instances(config: &str) {
    let edge = Edge::start(&standard_spin(), config);
    let slow_url = format!("{}/counter/k/sleep?ms=1500", edge.url);
    let slow = tokio::spawn(async move { get(&slow_url).await });
    // Wait until the slow request occupies the first instance.
    edge.wait_until_busy("counter").await;
    let count = format!("{}/counter/k/count", edge.url);
    // The second instance answers while the first sleeps.
    assert_eq!(get(&count).await, (200, "1\n".into()));
    assert!(!slow.is_finished(), "answered beside the slow request");
    assert_eq!(slow.await.unwrap().0, 200);
    // Both idle now. Which one takes a request depends on the worker thread
    // its connection landed on (each prefers its own), so only the sum is
    // known: the slow instance had counted 0, the other 1.
    let (a, b) = (get(&count).await, get(&count).await);
    let n = |r: (u16, String)| r.1.trim().parse::<u32>().unwrap();
    let seen = [n(a), n(b)];
    assert!(
        [[1, 2], [2, 1], [2, 3]].contains(&seen),
        "two counters at 0 and 1 after two more counts: {seen:?}"
    );
    assert_eq!(
        edge.metric("edge_sessions_active{tenant=\"t\",component=\"counter\"}")
            .await,
        2.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_in_a_sessions_queue_counts_against_the_deadline() {
    // A 1 s deadline from arrival: a request queued behind one that holds
    // the session for 0.9 s has at most 0.1 s left when its turn comes, so
    // its own 0.9 s cannot fit (it used to get a whole second from the
    // moment it left the queue).
    let edge = Edge::start(
        &standard_spin(),
        &config(10, 60_000, "path:2").replace(
            "[[tenant]]",
            "[limits]\nrequest_deadline_ms = 1000\n[[tenant]]",
        ),
    );
    let url = format!("{}/counter/s/sleep?ms=900", edge.url);
    let first = tokio::spawn({
        let url = url.clone();
        async move { get(&url).await }
    });
    edge.wait_until_busy("counter").await;
    let (status, body) = get(&url).await;
    assert!(status == 503 || status == 504, "{status} {body}");
    assert_eq!(first.await.expect("join").0, 200);
    // The session serves on.
    assert_eq!(get(&format!("{}/counter/s/count", edge.url)).await.0, 200);
}
