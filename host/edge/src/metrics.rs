//! Counters and histograms, rendered in the Prometheus text format.
//!
//! The request path only touches atomics in a [`RouteMetrics`] it already
//! holds (looked up once per config load), so metrics cost no locks and no
//! allocation per request.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Latency bucket upper bounds, in seconds (a last bucket takes what
/// is slower).
pub const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// A fixed-bucket latency histogram.
#[derive(Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_nanos.fetch_add(d.as_nanos() as u64, Relaxed);
    }

    /// Observations so far per bucket ([`BUCKETS`], then the slower).
    pub fn counts(&self) -> [u64; BUCKETS.len() + 1] {
        std::array::from_fn(|i| self.counts[i].load(Relaxed))
    }
}

/// Metrics of one (tenant, component).
#[derive(Default)]
pub struct RouteMetrics {
    /// Responses by status class: 1xx..5xx.
    pub responses: [AtomicU64; 5],
    /// Time from request accepted to response head ready.
    pub latency: Histogram,
    /// Guest traps (including memory-cap traps).
    pub traps: AtomicU64,
    /// Traps caused by the memory cap.
    pub memory_cap_kills: AtomicU64,
    /// Requests killed at their deadline.
    pub deadline_kills: AtomicU64,
    /// Instances alive now.
    pub active_instances: AtomicI64,
    /// Instances created so far.
    pub instances_created: AtomicU64,
    /// Pinned sessions alive now.
    pub sessions_active: AtomicI64,
    /// Sessions evicted after their idle timeout.
    pub sessions_evicted: AtomicU64,
    /// Requests refused because the session cap or queue was full.
    pub sessions_rejected: AtomicU64,
    /// Requests refused for their body size (413).
    pub body_too_large: AtomicU64,
    /// Requests whose body stalled or crawled and was cut (408).
    pub body_timeouts: AtomicU64,
    /// Counters the component reports itself (`edge:platform/metrics`).
    pub guest: GuestCounters,
}

/// Most counter names one component may report per tenant: hostile guests
/// must not blow up the exposition.
pub const MAX_GUEST_COUNTERS: usize = 32;

/// A component's own counters by name. The map is locked only to find or
/// add a name; adding to a counter is an atomic.
#[derive(Default)]
pub struct GuestCounters(Mutex<BTreeMap<String, Arc<AtomicU64>>>);

impl GuestCounters {
    /// Adds `value` to `name`; false if the name is invalid or the
    /// component already has [`MAX_GUEST_COUNTERS`] names.
    pub fn add(&self, name: &str, value: u64) -> bool {
        let valid = (1..=48).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return false;
        }
        let counter = {
            let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
            match map.get(name) {
                Some(c) => c.clone(),
                None if map.len() >= MAX_GUEST_COUNTERS => return false,
                None => map.entry(name.to_string()).or_default().clone(),
            }
        };
        counter.fetch_add(value, Relaxed);
        true
    }

    fn snapshot(&self) -> Vec<(String, u64)> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.iter()
            .map(|(k, v)| (k.clone(), v.load(Relaxed)))
            .collect()
    }
}

impl RouteMetrics {
    /// Counts a response and its latency.
    pub fn record(&self, status: u16, latency: Duration) {
        let class = (status / 100).clamp(1, 5) as usize - 1;
        self.responses[class].fetch_add(1, Relaxed);
        self.latency.observe(latency);
    }
}

/// Keeps an instance counted as active while alive.
pub struct ActiveInstance(Arc<RouteMetrics>);

impl ActiveInstance {
    /// Counts one more live instance until dropped.
    pub fn new(m: &Arc<RouteMetrics>) -> Self {
        m.active_instances.fetch_add(1, Relaxed);
        m.instances_created.fetch_add(1, Relaxed);
        Self(m.clone())
    }
}

impl Drop for ActiveInstance {
    fn drop(&mut self) {
        self.0.active_instances.fetch_sub(1, Relaxed);
    }
}

/// Reads one series value from a route's metrics.
type Getter = fn(&RouteMetrics) -> i64;

/// Host-wide metrics; survives reloads.
#[derive(Default)]
pub struct Metrics {
    routes: Mutex<BTreeMap<(String, String), Arc<RouteMetrics>>>,
    /// Requests answered 404 before reaching a component, by reason.
    pub unrouted_host: AtomicU64,
    /// Requests whose path matched no route of their tenant.
    pub unrouted_path: AtomicU64,
    /// Open client connections.
    pub connections: AtomicI64,
    /// Connections cut because the client stopped taking a response: a
    /// write waited past `write_timeout`, or a response waited that long
    /// for the client's HTTP/2 flow-control window.
    pub stalled_clients: AtomicU64,
    /// Successful reloads.
    pub reloads_ok: AtomicU64,
    /// Refused reloads.
    pub reloads_failed: AtomicU64,
    /// Components that failed to load in the serving config.
    pub components_failed: AtomicI64,
}

impl Metrics {
    /// The metrics of a (tenant, component), created on first use.
    pub fn route(&self, tenant: &str, component: &str) -> Arc<RouteMetrics> {
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        routes
            .entry((tenant.to_string(), component.to_string()))
            .or_default()
            .clone()
    }

    /// Forgets the routes nothing serves any more: those only this map
    /// holds (an app, and its instances, hold theirs while they serve or
    /// drain). Component ids carry their version (`tenant/app@N/comp`), so
    /// every deploy adds routes: kept, they grew `/metrics` and the host
    /// for good. Called when an app is put in force; a route an older app
    /// still drains goes at a later one.
    pub fn forget_unserved(&self) -> usize {
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let before = routes.len();
        routes.retain(|_, m| Arc::strong_count(m) > 1);
        before - routes.len()
    }

    /// Calls `f` with every (tenant, component) and its metrics, under the
    /// lock that adding a route takes (not one a request takes).
    pub fn each_route(&self, mut f: impl FnMut(&str, &str, &RouteMetrics)) {
        let routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        for ((t, c), m) in routes.iter() {
            f(t, c, m);
        }
    }

    /// Renders everything in the Prometheus text exposition format.
    pub fn render(&self, pools: impl Iterator<Item = wasmtime::PoolingAllocatorMetrics>) -> String {
        let mut out = String::with_capacity(8192);
        let routes = self
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let labels =
            |t: &str, c: &str| format!("tenant=\"{}\",component=\"{}\"", escape(t), escape(c));

        out.push_str("# HELP edge_guest_counter_total Counters components report about their own work.\n# TYPE edge_guest_counter_total counter\n");
        for ((t, c), m) in &routes {
            for (name, v) in m.guest.snapshot() {
                let _ = writeln!(
                    out,
                    "edge_guest_counter_total{{{},name=\"{name}\"}} {v}",
                    labels(t, c)
                );
            }
        }
        out.push_str("# HELP edge_requests_total Responses sent, by status class.\n# TYPE edge_requests_total counter\n");
        for ((t, c), m) in &routes {
            for (i, n) in m.responses.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "edge_requests_total{{{},code=\"{}xx\"}} {}",
                    labels(t, c),
                    i + 1,
                    n.load(Relaxed)
                );
            }
        }
        out.push_str("# HELP edge_request_duration_seconds Time to response head.\n# TYPE edge_request_duration_seconds histogram\n");
        for ((t, c), m) in &routes {
            let l = labels(t, c);
            let mut cumulative = 0;
            for (i, b) in BUCKETS.iter().enumerate() {
                cumulative += m.latency.counts[i].load(Relaxed);
                let _ = writeln!(
                    out,
                    "edge_request_duration_seconds_bucket{{{l},le=\"{b}\"}} {cumulative}"
                );
            }
            cumulative += m.latency.counts[BUCKETS.len()].load(Relaxed);
            let _ = writeln!(
                out,
                "edge_request_duration_seconds_bucket{{{l},le=\"+Inf\"}} {cumulative}"
            );
            let _ = writeln!(
                out,
                "edge_request_duration_seconds_sum{{{l}}} {}",
                m.latency.sum_nanos.load(Relaxed) as f64 / 1e9
            );
            let _ = writeln!(
                out,
                "edge_request_duration_seconds_count{{{l}}} {cumulative}"
            );
        }
        let per_route: [(&str, &str, &str, Getter); 10] = [
            (
                "edge_body_too_large_total",
                "counter",
                "Requests refused for their body size (413).",
                |m| m.body_too_large.load(Relaxed) as i64,
            ),
            (
                "edge_body_timeouts_total",
                "counter",
                "Requests whose body stalled or crawled and was cut (408).",
                |m| m.body_timeouts.load(Relaxed) as i64,
            ),
            ("edge_traps_total", "counter", "Guest traps.", |m| {
                m.traps.load(Relaxed) as i64
            }),
            (
                "edge_memory_cap_kills_total",
                "counter",
                "Guests killed for exceeding their memory cap.",
                |m| m.memory_cap_kills.load(Relaxed) as i64,
            ),
            (
                "edge_deadline_kills_total",
                "counter",
                "Requests killed at their deadline.",
                |m| m.deadline_kills.load(Relaxed) as i64,
            ),
            (
                "edge_active_instances",
                "gauge",
                "Component instances alive.",
                |m| m.active_instances.load(Relaxed),
            ),
            (
                "edge_instances_created_total",
                "counter",
                "Component instances created.",
                |m| m.instances_created.load(Relaxed) as i64,
            ),
            (
                "edge_sessions_active",
                "gauge",
                "Pinned sessions alive.",
                |m| m.sessions_active.load(Relaxed),
            ),
            (
                "edge_sessions_evicted_total",
                "counter",
                "Sessions evicted when idle.",
                |m| m.sessions_evicted.load(Relaxed) as i64,
            ),
            (
                "edge_sessions_rejected_total",
                "counter",
                "Requests refused by a full session cap or queue.",
                |m| m.sessions_rejected.load(Relaxed) as i64,
            ),
        ];
        for (name, kind, help, get) in per_route {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for ((t, c), m) in &routes {
                let _ = writeln!(out, "{name}{{{}}} {}", labels(t, c), get(m));
            }
        }
        let global: [(&str, &str, &str, i64); 8] = [
            (
                "edge_unrouted_host_total",
                "counter",
                "Requests for a host no tenant serves.",
                self.unrouted_host.load(Relaxed) as i64,
            ),
            (
                "edge_unrouted_path_total",
                "counter",
                "Requests whose path matched no route.",
                self.unrouted_path.load(Relaxed) as i64,
            ),
            (
                "edge_connections",
                "gauge",
                "Open client connections.",
                self.connections.load(Relaxed),
            ),
            (
                "edge_stalled_clients_total",
                "counter",
                "Connections cut because the client stopped taking a response (write_timeout_ms).",
                self.stalled_clients.load(Relaxed) as i64,
            ),
            (
                "edge_reloads_total{result=\"ok\"}",
                "counter",
                "Config reloads.",
                self.reloads_ok.load(Relaxed) as i64,
            ),
            (
                "edge_reloads_total{result=\"refused\"}",
                "",
                "",
                self.reloads_failed.load(Relaxed) as i64,
            ),
            (
                "edge_components_failed",
                "gauge",
                "Components that failed to load.",
                self.components_failed.load(Relaxed),
            ),
            (
                "edge_panics_total",
                "counter",
                "Panics in the host: each a bug, failing its call alone (reports past 10 a minute are not logged).",
                crate::panics::count() as i64,
            ),
        ];
        for (name, kind, help, v) in global {
            if !kind.is_empty() {
                let base = name.split('{').next().unwrap_or(name);
                let _ = writeln!(out, "# HELP {base} {help}\n# TYPE {base} {kind}");
            }
            let _ = writeln!(out, "{name} {v}");
        }
        let kv_errors = edge_keyvalue::ErrorCounts::global().snapshot();
        if !kv_errors.is_empty() {
            out.push_str("# HELP edge_kv_storage_errors_total Key-value operations that failed on the disk (full or failing); the log names store and file.\n# TYPE edge_kv_storage_errors_total counter\n");
            for (tenant, n) in kv_errors {
                let _ = writeln!(
                    out,
                    "edge_kv_storage_errors_total{{tenant=\"{}\"}} {n}",
                    escape(&tenant)
                );
            }
        }
        // Both engines' pools together (the concurrent one once built).
        let mut pool = PoolFigures::default();
        let mut any = false;
        for p in pools {
            any = true;
            pool.add(&p);
        }
        if any {
            pool.render(&mut out);
        }
        out
    }
}

/// The pooling allocator's figures, summed over the engines' pools.
#[derive(Default)]
struct PoolFigures {
    /// Slots in use: component instances, core instances, memories,
    /// tables, stacks.
    in_use: [u64; 5],
    /// Slots used before and free now (memories, tables, stacks): what
    /// a burst of concurrency leaves behind.
    unused_warm: [u64; 3],
    /// Bytes those unused slots keep resident (memories, tables; stacks
    /// are not counted by Wasmtime unless it zeroes them).
    unused_resident: [u64; 2],
}

impl PoolFigures {
    const IN_USE: [&str; 5] = [
        "component_instances",
        "core_instances",
        "memories",
        "tables",
        "stacks",
    ];
    const WARM: [&str; 3] = ["memories", "tables", "stacks"];
    const RESIDENT: [&str; 2] = ["memories", "tables"];

    fn add(&mut self, p: &wasmtime::PoolingAllocatorMetrics) {
        let in_use = [
            p.component_instances(),
            p.core_instances(),
            p.memories() as u64,
            p.tables() as u64,
            p.stacks() as u64,
        ];
        let warm = [
            p.unused_warm_memories(),
            p.unused_warm_tables(),
            p.unused_warm_stacks(),
        ];
        let resident = [
            p.unused_memory_bytes_resident(),
            p.unused_table_bytes_resident(),
        ];
        for (total, n) in self.in_use.iter_mut().zip(in_use) {
            *total += n;
        }
        for (total, n) in self.unused_warm.iter_mut().zip(warm) {
            *total += u64::from(n);
        }
        for (total, n) in self.unused_resident.iter_mut().zip(resident) {
            *total += n as u64;
        }
    }

    fn render(&self, out: &mut String) {
        out.push_str("# HELP edge_pool_slots_in_use Pooling allocator slots in use.\n# TYPE edge_pool_slots_in_use gauge\n");
        for (kind, v) in Self::IN_USE.iter().zip(self.in_use) {
            let _ = writeln!(out, "edge_pool_slots_in_use{{kind=\"{kind}\"}} {v}");
        }
        out.push_str("# HELP edge_pool_unused_warm_slots Pooling allocator slots used before and free now.\n# TYPE edge_pool_unused_warm_slots gauge\n");
        for (kind, v) in Self::WARM.iter().zip(self.unused_warm) {
            let _ = writeln!(out, "edge_pool_unused_warm_slots{{kind=\"{kind}\"}} {v}");
        }
        out.push_str("# HELP edge_pool_unused_resident_bytes Bytes that free slots keep resident (reset in place, keep_resident_bytes).\n# TYPE edge_pool_unused_resident_bytes gauge\n");
        for (kind, v) in Self::RESIDENT.iter().zip(self.unused_resident) {
            let _ = writeln!(
                out,
                "edge_pool_unused_resident_bytes{{kind=\"{kind}\"}} {v}"
            );
        }
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_nothing_serves_are_forgotten() {
        let m = Metrics::default();
        let served = m.route("t", "t/app@2/api");
        drop(m.route("t", "t/app@1/api"));
        assert_eq!(m.forget_unserved(), 1);
        let mut left = Vec::new();
        m.each_route(|t, c, _| left.push(format!("{t} {c}")));
        assert_eq!(left, ["t t/app@2/api"]);
        assert!(m.render(std::iter::empty()).contains("t/app@2/api"));
        drop(served);
        assert_eq!(m.forget_unserved(), 1);
        assert!(!m.render(std::iter::empty()).contains("t/app@2/api"));
    }

    #[test]
    fn guest_counters_are_named_sparingly() {
        let m = Metrics::default();
        let r = m.route("t", "c");
        assert!(r.guest.add("packets_concealed", 2));
        assert!(r.guest.add("packets_concealed", 3));
        assert!(!r.guest.add("Bad-Name", 1));
        assert!(!r.guest.add("", 1));
        for i in 1..MAX_GUEST_COUNTERS {
            assert!(r.guest.add(&format!("c{i}"), 1));
        }
        assert!(!r.guest.add("one_too_many", 1), "the cap holds");
        assert!(r.guest.add("c1", 1), "known names still count");
        let text = m.render(std::iter::empty());
        assert!(text.contains("edge_guest_counter_total{tenant=\"t\",component=\"c\",name=\"packets_concealed\"} 5"), "{text}");
    }

    #[test]
    fn renders_counters_and_cumulative_buckets() {
        let m = Metrics::default();
        let r = m.route("t", "c");
        r.record(200, Duration::from_micros(50));
        r.record(503, Duration::from_millis(3));
        let text = m.render(std::iter::empty());
        assert!(text.contains("edge_requests_total{tenant=\"t\",component=\"c\",code=\"2xx\"} 1"));
        assert!(text.contains("edge_requests_total{tenant=\"t\",component=\"c\",code=\"5xx\"} 1"));
        assert!(text.contains(
            "edge_request_duration_seconds_bucket{tenant=\"t\",component=\"c\",le=\"0.0001\"} 1"
        ));
        assert!(text.contains(
            "edge_request_duration_seconds_bucket{tenant=\"t\",component=\"c\",le=\"+Inf\"} 2"
        ));
    }
}
