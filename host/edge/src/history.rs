//! A short history of every route's traffic, for the console's plots
//! (`GET /v1/tenants/{tenant}/metrics`) and the node's request rate
//! (`GET /v1/health`); `/metrics` keeps only cumulative counters.
//!
//! A task reads every route's counters ([`Metrics::each_route`]: atomics,
//! nothing the request path waits on) each interval and keeps, per
//! (tenant, component), what the last [`SAMPLES`] intervals added:
//! responses by class, latency bucket counts, traps, deadline kills. Only
//! intervals with traffic are stored, so an idle route costs nothing and
//! a route that no longer serves (a version rolled away, a removed app)
//! is dropped once its last traffic is [`SAMPLES`] intervals old: memory
//! is bounded by the routes that served within the window. An app's point
//! is its components' sum (every version of a rollout), and its
//! percentiles come from the summed buckets, not from averaged
//! percentiles.

use crate::metrics::{BUCKETS, Metrics, RouteMetrics};
use edge_control::api::{AppSeries, Point, Responses};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Samples kept: an hour at the default interval.
pub const SAMPLES: usize = 720;

/// How often every route is sampled, unless [`INTERVAL_ENV`] says else.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// The node's environment variable that sets the interval, in ms (from
/// 10 to 3,600,000; tests sample faster).
pub const INTERVAL_ENV: &str = "EDGE_METRICS_SAMPLE_MS";

/// Latency buckets: [`BUCKETS`] and the one for what is slower.
const LATENCY: usize = BUCKETS.len() + 1;

/// A route's counters: cumulative as read, or what one interval added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Responses by status class, 1xx to 5xx.
    pub responses: [u64; 5],
    /// Latency observations per bucket.
    pub latency: [u64; LATENCY],
    /// Guest traps.
    pub traps: u64,
    /// Requests stopped at their deadline.
    pub deadline_kills: u64,
}

impl Counts {
    /// A route's counters now.
    pub fn read(m: &RouteMetrics) -> Self {
        Self {
            responses: std::array::from_fn(|i| m.responses[i].load(Relaxed)),
            latency: m.latency.counts(),
            traps: m.traps.load(Relaxed),
            deadline_kills: m.deadline_kills.load(Relaxed),
        }
    }

    /// What was added from `before` to `self`.
    pub fn since(&self, before: &Self) -> Self {
        let sub = |a: u64, b: u64| a.saturating_sub(b);
        Self {
            responses: std::array::from_fn(|i| sub(self.responses[i], before.responses[i])),
            latency: std::array::from_fn(|i| sub(self.latency[i], before.latency[i])),
            traps: sub(self.traps, before.traps),
            deadline_kills: sub(self.deadline_kills, before.deadline_kills),
        }
    }

    fn add(&mut self, other: &Self) {
        for (a, b) in self.responses.iter_mut().zip(other.responses) {
            *a += b;
        }
        for (a, b) in self.latency.iter_mut().zip(other.latency) {
            *a += b;
        }
        self.traps += other.traps;
        self.deadline_kills += other.deadline_kills;
    }

    fn requests(&self) -> u64 {
        self.responses.iter().sum()
    }
}

/// `q` (0 to 1) of the observations in `latency`, in ms: found in its
/// bucket by rank and placed linearly between the bucket's bounds (the
/// slowest bucket has no upper bound: its lower one); `None` without
/// observations.
pub fn percentile_ms(latency: &[u64; LATENCY], q: f64) -> Option<f64> {
    let total: u64 = latency.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * total as f64;
    let mut below = 0u64;
    for (i, &n) in latency.iter().enumerate() {
        if n == 0 {
            continue;
        }
        if (below + n) as f64 >= rank {
            let lower = if i == 0 { 0.0 } else { BUCKETS[i - 1] };
            let Some(&upper) = BUCKETS.get(i) else {
                return Some(micros(lower * 1000.0));
            };
            let within = ((rank - below as f64) / n as f64).clamp(0.0, 1.0);
            return Some(micros((lower + (upper - lower) * within) * 1000.0));
        }
        below += n;
    }
    None
}

/// `ms` to the microsecond.
fn micros(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// One sample: when it was taken and how long its interval was.
#[derive(Clone, Copy, Debug)]
struct Tick {
    seq: u64,
    /// ms since the epoch.
    t: i64,
    secs: f64,
}

/// What one route added in one interval, compactly (a count past
/// `u32::MAX` in one interval saturates).
#[derive(Clone, Copy, Debug)]
struct Stored {
    seq: u64,
    responses: [u32; 5],
    latency: [u32; LATENCY],
    traps: u32,
    deadline_kills: u32,
}

impl Stored {
    fn new(seq: u64, c: &Counts) -> Self {
        let n = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        Self {
            seq,
            responses: c.responses.map(n),
            latency: c.latency.map(n),
            traps: n(c.traps),
            deadline_kills: n(c.deadline_kills),
        }
    }

    fn counts(&self) -> Counts {
        Counts {
            responses: self.responses.map(u64::from),
            latency: self.latency.map(u64::from),
            traps: self.traps.into(),
            deadline_kills: self.deadline_kills.into(),
        }
    }
}

type Key = (String, String);

/// The samples: the last [`SAMPLES`] ticks and, per route with traffic
/// in them, what it added in each.
#[derive(Default)]
pub struct Rings {
    /// Each route's counters at the last tick.
    last: HashMap<Key, Counts>,
    ticks: VecDeque<Tick>,
    next_seq: u64,
    routes: BTreeMap<Key, VecDeque<Stored>>,
}

impl Rings {
    /// Records a sample taken at `t` (ms since the epoch), `secs` after
    /// the one before, of every route's cumulative counters `now`. A route
    /// not seen before counts from zero (a route's counters start at zero
    /// and every route is read every tick); one missing from `now` is
    /// forgotten.
    pub fn record(&mut self, t: i64, secs: f64, now: Vec<(Key, Counts)>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.ticks.push_back(Tick { seq, t, secs });
        if self.ticks.len() > SAMPLES {
            self.ticks.pop_front();
        }
        let mut last = HashMap::with_capacity(now.len());
        for (key, counts) in now {
            let added = counts.since(&self.last.get(&key).copied().unwrap_or_default());
            if added != Counts::default() {
                self.routes
                    .entry(key.clone())
                    .or_default()
                    .push_back(Stored::new(seq, &added));
            }
            last.insert(key, counts);
        }
        self.last = last;
        let oldest = self.ticks.front().map_or(seq, |t| t.seq);
        self.routes.retain(|_, ring| {
            while ring.front().is_some_and(|s| s.seq < oldest) {
                ring.pop_front();
            }
            !ring.is_empty()
        });
    }

    /// Routes with traffic in the kept samples.
    pub fn routes_kept(&self) -> usize {
        self.routes.len()
    }

    /// Per deployed app of `tenant` (components `TENANT/APP@N/COMPONENT`)
    /// with traffic in the kept samples, and each of `serving` however
    /// idle: one point per kept sample, oldest first, by app name.
    pub fn series(&self, tenant: &str, serving: &[String]) -> Vec<AppSeries> {
        let n = self.ticks.len();
        let first = self.ticks.front().map_or(0, |t| t.seq);
        let mut apps: BTreeMap<String, Vec<Counts>> = serving
            .iter()
            .map(|a| (a.clone(), vec![Counts::default(); n]))
            .collect();
        let from = (tenant.to_string(), String::new());
        for ((t, component), ring) in self.routes.range(from..) {
            if t != tenant {
                break;
            }
            let app = crate::app::app_of(tenant, component);
            if app == component {
                // Not a deployed app's (the node's own rewriter, for sites).
                continue;
            }
            let sums = apps
                .entry(app.to_string())
                .or_insert_with(|| vec![Counts::default(); n]);
            for s in ring {
                let slot = s
                    .seq
                    .checked_sub(first)
                    .and_then(|i| sums.get_mut(i as usize));
                if let Some(slot) = slot {
                    slot.add(&s.counts());
                }
            }
        }
        apps.into_iter()
            .map(|(app, sums)| AppSeries {
                app,
                points: self
                    .ticks
                    .iter()
                    .zip(&sums)
                    .map(|(t, c)| point(t, c))
                    .collect(),
            })
            .collect()
    }

    /// Responses of every route in the samples taken after `since` (ms
    /// since the epoch), and the seconds those samples cover.
    pub fn total_since(&self, since: i64) -> (u64, f64) {
        let Some(from) = self.ticks.iter().find(|t| t.t > since).map(|t| t.seq) else {
            return (0, 0.0);
        };
        let secs = self
            .ticks
            .iter()
            .filter(|t| t.seq >= from)
            .map(|t| t.secs)
            .sum();
        let requests = self
            .routes
            .values()
            .flatten()
            .filter(|s| s.seq >= from)
            .map(|s| s.counts().requests())
            .sum();
        (requests, secs)
    }
}

/// An app's point for one sample.
fn point(tick: &Tick, c: &Counts) -> Point {
    let requests = c.requests();
    Point {
        t: tick.t,
        rps: if tick.secs > 0.0 {
            micros(requests as f64 / tick.secs)
        } else {
            0.0
        },
        p50_ms: percentile_ms(&c.latency, 0.5),
        p99_ms: percentile_ms(&c.latency, 0.99),
        errors: c.traps + c.deadline_kills,
        traps: c.traps,
        deadline_kills: c.deadline_kills,
        responses: Responses {
            success: c.responses[1],
            redirection: c.responses[2],
            client_error: c.responses[3],
            server_error: c.responses[4],
        },
    }
}

/// The node's history, sampled by a task of its own.
pub struct History {
    /// How often it samples.
    pub interval: Duration,
    rings: Mutex<Rings>,
}

impl History {
    /// A history sampled every `interval`.
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            rings: Mutex::default(),
        }
    }

    /// The interval [`INTERVAL_ENV`] sets, or [`DEFAULT_INTERVAL`] (with
    /// a warning if it is set to something else than a number of ms from
    /// 10 to 3,600,000).
    pub fn interval_from_env() -> Duration {
        let Ok(v) = std::env::var(INTERVAL_ENV) else {
            return DEFAULT_INTERVAL;
        };
        match v.trim().parse::<u64>() {
            Ok(ms) if (10..=3_600_000).contains(&ms) => Duration::from_millis(ms),
            _ => {
                tracing::warn!(
                    value = %v,
                    "{INTERVAL_ENV} is not a number of ms from 10 to 3600000; sampling every {} ms",
                    DEFAULT_INTERVAL.as_millis()
                );
                DEFAULT_INTERVAL
            }
        }
    }

    /// Samples `metrics` every interval until `stop` turns true.
    pub fn spawn(
        self: &Arc<Self>,
        metrics: Arc<Metrics>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let me = self.clone();
        tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            let mut ticker = tokio::time::interval_at(start + me.interval, me.interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut last = start;
            loop {
                tokio::select! {
                    _ = ticker.tick() => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                let now = tokio::time::Instant::now();
                let secs = now.duration_since(last).as_secs_f64();
                last = now;
                let mut counts = Vec::new();
                metrics.each_route(|t, c, m| {
                    counts.push(((t.to_string(), c.to_string()), Counts::read(m)));
                });
                me.rings().record(edge_control::db::now_ms(), secs, counts);
            }
        });
    }

    fn rings(&self) -> std::sync::MutexGuard<'_, Rings> {
        self.rings.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`Rings::series`] of the samples so far.
    pub fn series(&self, tenant: &str, serving: &[String]) -> Vec<AppSeries> {
        self.rings().series(tenant, serving)
    }

    /// Responses of the last minute's samples, every route's, and those
    /// per second.
    pub fn last_minute(&self) -> (u64, f64) {
        let (requests, secs) = self
            .rings()
            .total_since(edge_control::db::now_ms() - 60_000);
        let rps = if secs > 0.0 {
            micros(requests as f64 / secs)
        } else {
            0.0
        };
        (requests, rps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bucket counts with `n` observations in bucket `i`, for each pair.
    fn buckets(pairs: &[(usize, u64)]) -> [u64; LATENCY] {
        let mut b = [0; LATENCY];
        for &(i, n) in pairs {
            b[i] += n;
        }
        b
    }

    #[test]
    fn percentiles_interpolate_within_their_bucket() {
        assert_eq!(percentile_ms(&[0; LATENCY], 0.5), None);
        // All 100 in (0.5 ms, 1 ms]: the median halfway, p99 near the top.
        let b = buckets(&[(3, 100)]);
        assert_eq!(percentile_ms(&b, 0.5), Some(0.75));
        assert_eq!(percentile_ms(&b, 0.99), Some(0.995));
        // One observation in the first bucket, [0, 0.1 ms].
        assert_eq!(percentile_ms(&buckets(&[(0, 1)]), 0.5), Some(0.05));
        // 90 fast (≤ 0.1 ms), 10 in (1 ms, 2.5 ms]: the median among the
        // fast, p99 the 9th of 10 slow ones.
        let b = buckets(&[(0, 90), (4, 10)]);
        assert_eq!(percentile_ms(&b, 0.5), Some(0.056));
        assert_eq!(percentile_ms(&b, 0.99), Some(2.35));
        // Past the last bound (10 s): its lower bound, not infinity.
        let b = buckets(&[(0, 1), (BUCKETS.len(), 99)]);
        assert_eq!(percentile_ms(&b, 0.99), Some(10_000.0));
        // Empty buckets between are skipped.
        let b = buckets(&[(1, 50), (9, 50)]);
        assert_eq!(percentile_ms(&b, 0.5), Some(0.25));
        assert_eq!(percentile_ms(&b, 0.51), Some(51.0));
    }

    /// Cumulative counters: `ok` 2xx and `failed` 5xx responses, all in
    /// the 0.5-1 ms bucket, and `traps` traps.
    fn route(ok: u64, failed: u64, traps: u64) -> Counts {
        let mut c = Counts::default();
        c.responses[1] = ok;
        c.responses[4] = failed;
        c.latency[3] = ok + failed;
        c.traps = traps;
        c
    }

    fn key(t: &str, c: &str) -> Key {
        (t.to_string(), c.to_string())
    }

    #[test]
    fn rings_keep_what_each_interval_added_per_app() {
        let mut r = Rings::default();
        // First sample: counted from zero.
        r.record(
            5_000,
            5.0,
            vec![(key("acme", "acme/web@1/api"), route(10, 0, 0))],
        );
        // Second: two versions of web in a rollout, a second app, another
        // tenant, and the node's own component (no app).
        r.record(
            10_000,
            5.0,
            vec![
                (key("acme", "acme/web@1/api"), route(20, 2, 1)),
                (key("acme", "acme/web@2/api"), route(5, 0, 0)),
                (key("acme", "acme/shop@1/front"), route(1, 0, 0)),
                (key("acme", "rewriter"), route(7, 0, 0)),
                (key("beta", "beta/web@1/api"), route(100, 0, 0)),
            ],
        );
        let series = r.series("acme", &["idle".to_string(), "web".to_string()]);
        let names: Vec<&str> = series.iter().map(|s| s.app.as_str()).collect();
        assert_eq!(names, ["idle", "shop", "web"]);
        let idle = &series[0].points;
        assert_eq!(idle.len(), 2);
        assert_eq!(
            (idle[1].t, idle[1].rps, idle[1].p50_ms),
            (10_000, 0.0, None)
        );
        let web = &series[2].points;
        assert_eq!((web[0].t, web[0].rps), (5_000, 2.0));
        assert_eq!(web[0].responses.success, 10);
        // 10 more of v1 (2 of them 5xx, one trap) and 5 of v2.
        assert_eq!(web[1].rps, 3.4);
        assert_eq!(web[1].responses.success, 15);
        assert_eq!(web[1].responses.server_error, 2);
        assert_eq!((web[1].errors, web[1].traps), (1, 1));
        assert_eq!(web[1].p50_ms, Some(0.75));
        // Another tenant's traffic is not acme's.
        assert_eq!(r.series("beta", &[])[0].points[1].rps, 20.0);
        assert!(r.series("gamma", &[]).is_empty());
        // Every route counts toward the node's rate.
        assert_eq!(r.total_since(0), (10 + 12 + 5 + 1 + 7 + 100, 10.0));
        assert_eq!(r.total_since(5_000), (12 + 5 + 1 + 7 + 100, 5.0));
        assert_eq!(r.total_since(10_000), (0, 0.0));
    }

    #[test]
    fn rings_are_bounded_and_drop_routes_gone_quiet() {
        let mut r = Rings::default();
        let busy = key("acme", "acme/web@2/api");
        let retired = key("acme", "acme/web@1/api");
        r.record(0, 5.0, vec![(retired.clone(), route(3, 0, 0))]);
        for i in 1..=(SAMPLES as u64 + 10) {
            // v1 stops serving after the first sample (rolled away: its
            // counters stay as they were); v2 serves every interval.
            r.record(
                i as i64 * 5_000,
                5.0,
                vec![
                    (retired.clone(), route(3, 0, 0)),
                    (busy.clone(), route(i, 0, 0)),
                ],
            );
            if i < SAMPLES as u64 {
                assert_eq!(
                    r.routes_kept(),
                    2,
                    "v1's traffic is still within the window at {i}"
                );
            }
        }
        assert_eq!(
            r.routes_kept(),
            1,
            "v1 dropped once its traffic left the window"
        );
        let web = &r.series("acme", &[])[0].points;
        assert_eq!(web.len(), SAMPLES);
        assert!(web.iter().all(|p| p.rps == 0.2), "one request per 5 s");
        assert_eq!(web.last().unwrap().t, (SAMPLES as i64 + 10) * 5_000);
        assert!(r.routes.values().all(|ring| ring.len() <= SAMPLES));

        // A route that disappears from the metrics is forgotten; if it
        // comes back its counters are new ones, counted from zero.
        r.record(1 << 40, 5.0, vec![]);
        r.record((1 << 40) + 5_000, 5.0, vec![(busy.clone(), route(2, 0, 0))]);
        let web = &r.series("acme", &[])[0].points;
        assert_eq!(web.last().unwrap().responses.success, 2);
        // Counters that went back (never, but) add nothing.
        r.record((1 << 40) + 10_000, 5.0, vec![(busy, route(1, 0, 0))]);
        let web = &r.series("acme", &[])[0].points;
        assert_eq!(web.last().unwrap().rps, 0.0);
    }
}
