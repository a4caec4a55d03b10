//! CPU between tenants (`host/edge/src/lanes.rs`): a tenant whose guests
//! spin or keep failing runs in the background lane, another tenant stays
//! in front and answers, and a tenant that stops comes back.

use edge_tests::{Edge, get_host, spin_with};
use std::time::{Duration, Instant};

fn two_tenants() -> String {
    r#"app = "spin.toml"
[[tenant]]
name = "hostile"
hosts = ["hostile.test"]
components = ["*"]
[tenant.limits]
request_deadline_ms = 2000
[[tenant]]
name = "calm"
hosts = ["calm.test"]
components = ["*"]
"#
    .to_string()
}

fn lane(tenant: &str) -> String {
    format!("edge_cpu_background{{tenant=\"{tenant}\"}}")
}

#[tokio::test]
async fn a_spinning_tenant_runs_in_the_background_and_comes_back_when_it_stops() {
    let edge = Edge::start(&spin_with(&[]), &two_tenants());
    let url = edge.url.clone();
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(
                async move { get_host(&format!("{url}/fixtures/loop"), "hostile.test").await },
            )
        })
        .collect();
    assert!(
        edge.wait_for_metric(&lane("hostile"), 1.0, Duration::from_secs(2))
            .await,
        "the spinning tenant moved to the background lane"
    );
    // The other tenant answers meanwhile, from the front lane.
    let (status, body) = get_host(&format!("{url}/fixtures/ok"), "calm.test").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(edge.metric(&lane("calm")).await, 0.0);
    for s in spinners {
        let (status, _) = s.await.unwrap();
        assert_eq!(status, 504, "the spinners end at their deadline");
    }
    assert!(
        edge.metric("edge_cpu_seconds_total{tenant=\"hostile\"}")
            .await
            > 0.5
    );
    // Idle now: back in front after its stay. The longest it can be held
    // is a long poll's hold (lanes::LONG_POLL_HOLD, 5 s) from its last
    // poll: a spinning poll ends at the next epoch tick, and on a loaded
    // machine the ticker thread can be woken late enough for that poll to
    // run past lanes::LONG_POLL of CPU, up to the spinners' deadline.
    assert!(
        edge.wait_for_metric(&lane("hostile"), 0.0, Duration::from_secs(12))
            .await,
        "the tenant came back to the front lane"
    );
}

#[tokio::test]
async fn a_tenant_whose_guests_keep_trapping_runs_in_the_background() {
    let edge = Edge::start(&spin_with(&[]), &two_tenants());
    let url = edge.url.clone();
    let until = Instant::now() + Duration::from_secs(10);
    let mut moved = false;
    while !moved && Instant::now() < until {
        let traps: Vec<_> = (0..8)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move {
                    get_host(&format!("{url}/fixtures/trap"), "hostile.test").await
                })
            })
            .collect();
        for t in traps {
            assert_eq!(t.await.unwrap().0, 500);
        }
        moved = edge.metric(&lane("hostile")).await == 1.0;
    }
    assert!(moved, "the trapping tenant moved to the background lane");
    // Its requests are still served there, and the other tenant's in front.
    let (status, _) = get_host(&format!("{url}/fixtures/ok"), "hostile.test").await;
    assert_eq!(status, 200);
    let (status, _) = get_host(&format!("{url}/fixtures/ok"), "calm.test").await;
    assert_eq!(status, 200);
    assert_eq!(edge.metric(&lane("calm")).await, 0.0);
}
