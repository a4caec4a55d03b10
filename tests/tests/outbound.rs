//! Outbound HTTP address policy and per-tenant cap, through a guest (the
//! probe's `/probe/fetch?url=URL`): names in the allowlist that lead to
//! loopback, in every spelling, are refused after resolution unless the
//! operator allowed the range; the admin listener never; a flood of
//! fetches stops at the tenant's `max_outbound_requests`.

use edge_tests::{Edge, TempDir, client, component, get, get_host, request};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

fn probe_spin(rules: &[String]) -> String {
    let rules: Vec<String> = rules.iter().map(|r| format!("{r:?}")).collect();
    format!(
        r#"spin_manifest_version = 2
[application]
name = "outbound"

[[trigger.http]]
route = "/probe/..."
component = "probe"

[component.probe]
source = "{probe}"
allowed_outbound_hosts = [{rules}]
# The probe imports these; granting them lets it load.
key_value_stores = ["default"]
[component.probe.variables]
greeting = "hello"
"#,
        probe = component("probe"),
        rules = rules.join(", "),
    )
}

/// An origin on 127.0.0.1 answering `body`; counts connections accepted,
/// how many are open at once at most, and holds each answer while `hold`
/// is set.
struct Upstream {
    port: u16,
    accepted: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
    most_open: Arc<AtomicUsize>,
    hold: Arc<AtomicBool>,
}

impl Upstream {
    fn start(body: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
        let port = listener.local_addr().unwrap().port();
        let up = Self {
            port,
            accepted: Arc::default(),
            open: Arc::default(),
            most_open: Arc::default(),
            hold: Arc::default(),
        };
        let (accepted, open, most_open, hold) = (
            up.accepted.clone(),
            up.open.clone(),
            up.most_open.clone(),
            up.hold.clone(),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { continue };
                accepted.fetch_add(1, Ordering::SeqCst);
                let now = open.fetch_add(1, Ordering::SeqCst) + 1;
                most_open.fetch_max(now, Ordering::SeqCst);
                let (open, hold) = (open.clone(), hold.clone());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf);
                    while hold.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    drop(s);
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        up
    }
}

/// `url` as a query value: everything but letters and digits escaped.
fn encode(url: &str) -> String {
    url.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn fetch(edge: &Edge, host: &str, url: &str) -> (u16, String) {
    get_host(
        &format!("{}/probe/fetch?url={}", edge.url, encode(url)),
        host,
    )
    .await
}

/// The loopback spellings the policy must see through, for `port`.
fn loopback_urls(port: u16) -> Vec<String> {
    [
        "localhost",
        "x@127.0.0.1",
        "0x7f.1",
        "2130706433",
        "127.1",
        "[::ffff:127.0.0.1]",
    ]
    .iter()
    .map(|h| format!("http://{h}:{port}/x"))
    .collect()
}

/// Allowlist entries naming each spelling (so the name check passes and
/// only the address check can refuse).
fn rules() -> Vec<String> {
    [
        "localhost",
        "127.0.0.1",
        "[::ffff:127.0.0.1]",
        "[::1]",
        "169.254.169.254",
    ]
    .iter()
    .map(|h| format!("http://{h}:*"))
    .collect()
}

const TWO_TENANTS: &str = r#"app = "spin.toml"
[[tenant]]
name = "alpha"
hosts = ["alpha.test"]
components = ["probe"]
[tenant.outbound]
# The origins of this test listen on loopback.
allow_ranges = ["127.0.0.1/32"]

[[tenant]]
name = "beta"
hosts = ["beta.test"]
components = ["probe"]
"#;

#[tokio::test]
async fn loopback_in_every_spelling_is_refused_unless_allowed() {
    let up = Upstream::start("from upstream");
    let data = TempDir::new("outbound-addr");
    let edge = Edge::start_with(&probe_spin(&rules()), TWO_TENANTS, data.path());

    // beta has no allowed range: every spelling reaches the address check
    // (the allowlist lets the name through) and is refused there.
    let mut refused = 0;
    for url in loopback_urls(up.port).into_iter().chain([
        format!("http://[::1]:{}/x", up.port),
        "http://169.254.169.254/latest/meta-data/".to_string(),
    ]) {
        let (status, body) = fetch(&edge, "beta.test", &url).await;
        assert_eq!(
            (status, body.as_str()),
            (502, "ErrorCode::DestinationIpProhibited\n"),
            "{url}"
        );
        refused += 1;
    }
    assert_eq!(up.accepted.load(Ordering::SeqCst), 0, "nothing connected");

    // alpha allows 127.0.0.1/32: the same spellings all reach the origin,
    // connected to as 127.0.0.1.
    for url in loopback_urls(up.port) {
        assert_eq!(
            fetch(&edge, "alpha.test", &url).await,
            (200, "200\nfrom upstream".to_string()),
            "{url}"
        );
    }
    // ::1 is another range; the admin listener is never open.
    let (status, body) = fetch(&edge, "alpha.test", &format!("http://[::1]:{}/x", up.port)).await;
    assert_eq!(
        (status, body.as_str()),
        (502, "ErrorCode::DestinationIpProhibited\n")
    );
    let admin_url = format!("{}/metrics", edge.admin).replace("127.0.0.1", "localhost");
    let (status, body) = fetch(&edge, "alpha.test", &admin_url).await;
    assert_eq!(
        (status, body.as_str()),
        (502, "ErrorCode::DestinationIpProhibited\n")
    );
    let (status, body) = fetch(&edge, "alpha.test", &format!("{}/health", edge.admin)).await;
    assert_eq!(
        (status, body.as_str()),
        (502, "ErrorCode::DestinationIpProhibited\n")
    );
    let log = edge.log_after("admin listener").await;
    assert!(log.contains("is the host's admin listener"), "{log}");
    assert!(log.contains("127.0.0.1 is loopback (127.0.0.0/8)"), "{log}");
    assert!(log.contains("169.254.169.254 is link-local"), "{log}");

    assert_eq!(
        edge.metric("edge_outbound_refused_total{tenant=\"beta\",reason=\"address\"}")
            .await,
        refused as f64
    );
    assert_eq!(
        edge.metric("edge_outbound_refused_total{tenant=\"alpha\",reason=\"address\"}")
            .await,
        3.0
    );
    // A name outside the allowlist is still refused by name.
    let (status, body) = fetch(&edge, "alpha.test", "http://127.0.0.2:1/").await;
    assert_eq!(
        (status, body.as_str()),
        (502, "ErrorCode::HttpRequestDenied\n")
    );
}

#[tokio::test]
async fn a_flood_of_fetches_stops_at_the_tenant_cap() {
    const CAP: usize = 8;
    const FLOOD: usize = 1000;
    let slow = Upstream::start("slow");
    slow.hold.store(true, Ordering::SeqCst);
    let fast = Upstream::start("fast");
    let data = TempDir::new("outbound-cap");
    let config = format!(
        r#"app = "spin.toml"
[outbound]
allow_ranges = ["127.0.0.1/32"]
[limits]
request_deadline_ms = 60000
max_outbound_requests = {CAP}

[[tenant]]
name = "alpha"
hosts = ["alpha.test"]
components = ["probe"]

[[tenant]]
name = "beta"
hosts = ["beta.test"]
components = ["probe"]
"#
    );
    let edge = Edge::start_with(
        &probe_spin(&["http://127.0.0.1:*".to_string()]),
        &config,
        data.path(),
    );
    let url = format!(
        "{}/probe/fetch?url={}",
        edge.url,
        encode(&format!("http://127.0.0.1:{}/", slow.port))
    );
    let c = client();
    let flood: Vec<_> = (0..FLOOD)
        .map(|_| {
            let (c, url) = (c.clone(), url.clone());
            tokio::spawn(async move {
                request(
                    &c,
                    "GET",
                    &url,
                    &[("host", "alpha.test")],
                    Default::default(),
                )
                .await
            })
        })
        .collect();
    // Once alpha holds its cap at the origin, its next fetches fail at
    // once, and beta (its own cap) is not affected.
    let limit_series = "edge_outbound_refused_total{tenant=\"alpha\",reason=\"limit\"}";
    for _ in 0..1500 {
        if edge.metric(limit_series).await >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        edge.metric(limit_series).await >= 1.0,
        "no fetch was refused at the cap; {} connections open at the origin",
        slow.open.load(Ordering::SeqCst)
    );
    assert_eq!(
        fetch(
            &edge,
            "beta.test",
            &format!("http://127.0.0.1:{}/", fast.port)
        )
        .await,
        (200, "200\nfast".to_string())
    );
    slow.hold.store(false, Ordering::SeqCst);

    let mut statuses = std::collections::BTreeMap::<(u16, String), usize>::new();
    for task in flood {
        let (status, body) = task.await.expect("request task");
        *statuses.entry((status, body)).or_default() += 1;
    }
    eprintln!("answers to the flood: {statuses:?}");
    let limited = statuses
        .get(&(502, "ErrorCode::ConnectionLimitReached\n".to_string()))
        .copied()
        .unwrap_or(0);
    assert!(limited > 0, "{statuses:?}");
    assert!(
        slow.most_open.load(Ordering::SeqCst) <= CAP,
        "{} connections open at once at the origin (cap {CAP}); {statuses:?}",
        slow.most_open.load(Ordering::SeqCst)
    );
    // Every answer is an answer: served, refused at the cap, or turned
    // away by the tenant's share of the pool; none hung or broke.
    for (status, body) in statuses.keys() {
        assert!(
            matches!(status, 200 | 502 | 503 | 429),
            "{status} {body}: {statuses:?}"
        );
    }
    assert!(edge.metric(limit_series).await >= limited as f64);
    assert_eq!(
        edge.metric("edge_outbound_refused_total{tenant=\"beta\",reason=\"limit\"}")
            .await,
        0.0
    );
    let log = edge.log_after("max_outbound_requests in flight").await;
    assert!(log.contains("max_outbound_requests in flight"), "{log}");
    // The host is healthy and alpha's places came back.
    let (status, _) = get(&format!("{}/health", edge.admin)).await;
    assert_eq!(status, 200);
    // (A guest's response body is dropped with its instance, just after
    // its answer went out.)
    let in_flight = "edge_outbound_in_flight{tenant=\"alpha\"}";
    for _ in 0..500 {
        if edge.metric(in_flight).await == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(edge.metric(in_flight).await, 0.0);
    assert_eq!(
        fetch(
            &edge,
            "alpha.test",
            &format!("http://127.0.0.1:{}/", slow.port)
        )
        .await,
        (200, "200\nslow".to_string())
    );
}

/// An operator opens a range by editing the config: the reload applies it
/// to the tenant's components, and closing it again refuses once more.
#[tokio::test]
async fn a_reload_opens_and_closes_a_range() {
    const SIGHUP: i32 = 1;
    let up = Upstream::start("from upstream");
    let data = TempDir::new("outbound-reload");
    let closed = "app = \"spin.toml\"\n[server]\nwatch_interval_ms = 0\n[[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"probe\"]\n";
    let open = closed.replace(
        "[[tenant]]",
        "[outbound]\nallow_ranges = [\"127.0.0.0/8\"]\n[[tenant]]",
    );
    let edge = Edge::start_with(&probe_spin(&rules()), closed, data.path());
    let url = format!("http://localhost:{}/x", up.port);
    let refused = (502, "ErrorCode::DestinationIpProhibited\n".to_string());
    let served = (200, "200\nfrom upstream".to_string());
    assert_eq!(fetch(&edge, "t.test", &url).await, refused);

    for (config, expected, reloads) in [(&open, &served, 1.0), (&closed.to_string(), &refused, 2.0)]
    {
        std::fs::write(&edge.config, config).expect("write config");
        edge.signal(SIGHUP);
        for _ in 0..500 {
            if edge.metric("edge_reloads_total{result=\"ok\"}").await >= reloads {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            edge.metric("edge_reloads_total{result=\"ok\"}").await,
            reloads
        );
        assert_eq!(&fetch(&edge, "t.test", &url).await, expected);
    }
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
}
