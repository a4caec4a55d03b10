//! Load generator for autocomplete services (hints, Addok).
//!
//!   hints-load throughput  --url-template URL --queries FILE --concurrency N --duration-s S [--warmup-s W]
//!   hints-load typists     --url-template URL --queries FILE --users N [--interval-ms 200] --duration-s S
//!   hints-load max-typists --url-template URL --queries FILE --p99-ms T [--interval-ms 200] --duration-s S [--start 50] [--max 20000]
//!
//! `{q}` in the URL template is replaced by the percent-encoded query; the
//! queries file holds one keystroke request per line, in typing order.
//!
//! throughput: closed loop, N workers sending back to back over keep-alive
//! connections. typists: open loop, N users each sending their next query
//! every interval on schedule whether or not the previous answer came back;
//! latency is measured from the scheduled send time so a stalled server
//! (or a stalled generator) cannot hide its queueing delay. max-typists:
//! the most users for which p99 <= T, no errors, and the generator kept
//! up (achieved send rate >= 95 % of intended).
//!
//! One JSON object per line on stdout, a human summary on stderr.

mod hist;
mod query;
mod search;
mod wire;

use hist::Histogram;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

const USAGE: &str = "\
usage:
  hints-load throughput  --url-template URL --queries FILE --concurrency N --duration-s S [--warmup-s W]
  hints-load typists     --url-template URL --queries FILE --users N [--interval-ms 200] --duration-s S [--warmup-s W]
  hints-load max-typists --url-template URL --queries FILE --p99-ms T [--interval-ms 200] --duration-s S
                         [--start 50] [--max 20000] [--warmup-s W] [--pause-s 1]
common options:
  --threads N      tokio worker threads (default 1: a current-thread runtime)
  --timeout-ms MS  per-request timeout, counted as an error (default 10000)
  --seed N         user offsets and phases (typists; default 1)
  --late-ms MS     a send this much behind schedule counts as late (typists; default 10)
  --connections K  typists: at most K requests in flight, so at most ~K pooled
                   connections; excess requests queue and the wait counts as
                   latency (default 0: unlimited, a new connection whenever
                   none is idle)
URL templates contain {q}, e.g. 'http://127.0.0.1:7878/search/?limit=5&q={q}'";

/// The requests to send, in log order, and the client that sends them.
#[derive(Clone)]
struct Target {
    client: Arc<wire::Client>,
    requests: Arc<[Box<[u8]>]>,
}

#[derive(Clone, Copy)]
enum Outcome {
    Ok,
    Http,
    Transport,
    Timeout,
}

/// Sends request `k` and reads the whole response. With `limit`, first
/// waits for a permit (bounding requests in flight, and so connections);
/// the timeout covers that wait too.
async fn fetch(target: &Target, k: usize, timeout: Duration, limit: Option<&Semaphore>) -> Outcome {
    let exchange = async {
        let _permit = match limit {
            Some(limit) => Some(limit.acquire().await.map_err(|_| ())?),
            None => None,
        };
        let status = target
            .client
            .send(&target.requests[k])
            .await
            .map_err(|_| ())?;
        Ok::<bool, ()>((200..300).contains(&status))
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(true)) => Outcome::Ok,
        Ok(Ok(false)) => Outcome::Http,
        Ok(Err(())) => Outcome::Transport,
        Err(_) => Outcome::Timeout,
    }
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}

/// Shared by all tasks of one run.
#[derive(Default)]
struct Stats {
    /// Latency in µs of every answered, failed or timed-out request.
    latency: Histogram,
    /// Typists: how far behind schedule each send went out, in µs.
    lag: Histogram,
    ok: AtomicU64,
    http_errors: AtomicU64,
    transport_errors: AtomicU64,
    timeouts: AtomicU64,
    sent: AtomicU64,
    late: AtomicU64,
    /// Typists: requests sent and not yet answered, and their peak.
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
    /// Typists: latest actual send, in µs after the measurement start.
    last_send: AtomicU64,
}

impl Stats {
    fn record(&self, outcome: Outcome, latency: Duration) {
        self.latency.record(micros(latency));
        match outcome {
            Outcome::Ok => &self.ok,
            Outcome::Http => &self.http_errors,
            Outcome::Transport => &self.transport_errors,
            Outcome::Timeout => &self.timeouts,
        }
        .fetch_add(1, Relaxed);
    }

    fn errors(&self) -> u64 {
        self.http_errors.load(Relaxed)
            + self.transport_errors.load(Relaxed)
            + self.timeouts.load(Relaxed)
    }

    /// `"requests":..,"ok":..,"errors":..,...,"p50_ms":..` (no braces).
    fn json_fields(&self, out: &mut String) {
        let ms = |us: u64| us as f64 / 1000.0;
        let l = &self.latency;
        let _ = write!(
            out,
            r#""completed":{},"ok":{},"errors":{},"http_errors":{},"transport_errors":{},"timeouts":{},"mean_ms":{:.3},"p50_ms":{:.3},"p90_ms":{:.3},"p99_ms":{:.3},"p999_ms":{:.3},"max_ms":{:.3}"#,
            l.count(),
            self.ok.load(Relaxed),
            self.errors(),
            self.http_errors.load(Relaxed),
            self.transport_errors.load(Relaxed),
            self.timeouts.load(Relaxed),
            l.mean() / 1000.0,
            ms(l.quantile(0.5)),
            ms(l.quantile(0.9)),
            ms(l.quantile(0.99)),
            ms(l.quantile(0.999)),
            ms(l.max()),
        );
    }

    fn human(&self) -> String {
        let ms = |us: u64| us as f64 / 1000.0;
        let l = &self.latency;
        format!(
            "errors {}, p50 {:.2} p90 {:.2} p99 {:.2} max {:.2} ms",
            self.errors(),
            ms(l.quantile(0.5)),
            ms(l.quantile(0.9)),
            ms(l.quantile(0.99)),
            ms(l.max())
        )
    }
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

// ---------------------------------------------------------------- throughput

struct Throughput {
    concurrency: usize,
    warmup: Duration,
    duration: Duration,
    timeout: Duration,
}

async fn throughput(target: Target, cfg: &Throughput) -> (Arc<Stats>, Duration) {
    let stats = Arc::new(Stats::default());
    let measure = Instant::now() + cfg.warmup;
    let end = measure + cfg.duration;
    let mut workers = JoinSet::new();
    let concurrency = cfg.concurrency;
    for w in 0..concurrency {
        let (target, stats, timeout) = (target.clone(), stats.clone(), cfg.timeout);
        workers.spawn(async move {
            let n = target.requests.len();
            let mut k = w * n / concurrency;
            loop {
                let sent = Instant::now();
                if sent >= end {
                    break;
                }
                let outcome = fetch(&target, k, timeout, None).await;
                if sent >= measure {
                    stats.record(outcome, sent.elapsed());
                }
                k += 1;
                if k == n {
                    k = 0;
                }
            }
        });
    }
    while workers.join_next().await.is_some() {}
    (stats, measure.elapsed())
}

// ------------------------------------------------------------------- typists

struct Typists {
    users: usize,
    interval: Duration,
    warmup: Duration,
    duration: Duration,
    timeout: Duration,
    seed: u64,
    late: Duration,
    /// Most requests in flight (0: unlimited); queueing counts as latency.
    connections: usize,
}

/// splitmix64: enough randomness for offsets and phases, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

struct TypistsResult {
    stats: Arc<Stats>,
    intended: f64,
    achieved: f64,
}

impl TypistsResult {
    fn json(&self, cfg: &Typists, url: &str, extra: &str) -> String {
        let s = &self.stats;
        let mut out = format!(
            r#"{{"mode":"typists",{extra}"url":{},"users":{},"interval_ms":{},"duration_s":{},"connections":{},"max_in_flight":{},"sent":{},"intended_req_per_s":{:.1},"req_per_s":{:.1},"late":{},"send_lag_p99_ms":{:.3},"send_lag_max_ms":{:.3},"#,
            json_str(url),
            cfg.users,
            cfg.interval.as_secs_f64() * 1000.0,
            cfg.duration.as_secs_f64(),
            cfg.connections,
            s.max_in_flight.load(Relaxed),
            s.sent.load(Relaxed),
            self.intended,
            self.achieved,
            s.late.load(Relaxed),
            s.lag.quantile(0.99) as f64 / 1000.0,
            s.lag.max() as f64 / 1000.0,
        );
        s.json_fields(&mut out);
        out.push('}');
        out
    }

    fn human(&self, cfg: &Typists) -> String {
        format!(
            "typists users={}: sent {} ({:.0}/s of {:.0}/s, {} late), {}",
            cfg.users,
            self.stats.sent.load(Relaxed),
            self.achieved,
            self.intended,
            self.stats.late.load(Relaxed),
            self.stats.human()
        )
    }

    fn passes(&self, p99_ms: f64) -> bool {
        let s = &self.stats;
        s.sent.load(Relaxed) > 0
            && s.errors() == 0
            && s.latency.quantile(0.99) as f64 / 1000.0 <= p99_ms
            && self.achieved >= 0.95 * self.intended
    }
}

const TICK: Duration = Duration::from_millis(1);

async fn typists(target: Target, cfg: &Typists) -> TypistsResult {
    let n = target.requests.len();
    let limit = (cfg.connections > 0).then(|| Arc::new(Semaphore::new(cfg.connections)));
    let stats = Arc::new(Stats::default());
    // A little lead so that spawning thousands of users is not counted as lag.
    let t0 = Instant::now() + Duration::from_millis(100);
    let measure = t0 + cfg.warmup;
    let end = measure + cfg.duration;
    let interval_ns = cfg.interval.as_nanos().max(1) as u64;
    let mut rng = Rng(cfg.seed);
    let mut users = JoinSet::new();
    for _ in 0..cfg.users {
        let mut k = rng.below(n as u64) as usize;
        let phase = rng.below(interval_ns);
        let (target, stats, limit) = (target.clone(), stats.clone(), limit.clone());
        let (timeout, late) = (cfg.timeout, cfg.late);
        users.spawn(async move {
            let mut in_flight = JoinSet::new();
            for tick in 0u64.. {
                let due = t0 + Duration::from_nanos(phase + tick * interval_ns);
                if due >= end {
                    break;
                }
                // Tokio's timer rounds deadlines up to the next millisecond
                // tick: aim a tick early so sends are not systematically late
                // (up to 1 ms early instead, measured from the actual send).
                tokio::time::sleep_until(due.checked_sub(TICK).unwrap_or(due).into()).await;
                let now = Instant::now();
                let start = now.min(due);
                let measured = due >= measure;
                if measured {
                    let lag = now.saturating_duration_since(due);
                    stats.sent.fetch_add(1, Relaxed);
                    stats.lag.record(micros(lag));
                    if lag > late {
                        stats.late.fetch_add(1, Relaxed);
                    }
                    stats
                        .last_send
                        .fetch_max(micros(now.saturating_duration_since(measure)), Relaxed);
                }
                let (target, stats, limit) = (target.clone(), stats.clone(), limit.clone());
                in_flight.spawn(async move {
                    let now_in_flight = stats.in_flight.fetch_add(1, Relaxed) + 1;
                    stats.max_in_flight.fetch_max(now_in_flight, Relaxed);
                    let outcome = fetch(&target, k, timeout, limit.as_deref()).await;
                    stats.in_flight.fetch_sub(1, Relaxed);
                    if measured {
                        // From the scheduled time if sent late: the delay
                        // is the generator's or the server's, never hidden.
                        stats.record(outcome, start.elapsed());
                    }
                });
                while in_flight.try_join_next().is_some() {}
                k += 1;
                if k == n {
                    k = 0;
                }
            }
            while in_flight.join_next().await.is_some() {}
        });
    }
    while users.join_next().await.is_some() {}
    let intended = cfg.users as f64 / cfg.interval.as_secs_f64();
    let window = cfg
        .duration
        .as_secs_f64()
        .max(stats.last_send.load(Relaxed) as f64 / 1e6);
    let achieved = stats.sent.load(Relaxed) as f64 / window;
    TypistsResult {
        stats,
        intended,
        achieved,
    }
}

// ---------------------------------------------------------------------- CLI

struct Args {
    mode: String,
    opts: HashMap<String, String>,
}

impl Args {
    fn parse(mut argv: impl Iterator<Item = String>) -> Result<Self, String> {
        let mode = argv.next().ok_or("missing mode")?;
        if mode == "-h" || mode == "--help" {
            return Err(String::new());
        }
        let mut opts = HashMap::new();
        while let Some(key) = argv.next() {
            let name = key
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {key}"))?;
            if name == "help" {
                return Err(String::new());
            }
            let value = argv.next().ok_or_else(|| format!("{key} needs a value"))?;
            opts.insert(name.to_string(), value);
        }
        Ok(Self { mode, opts })
    }

    fn check_known(&self, known: &[&str]) -> Result<(), String> {
        match self.opts.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(format!("unknown option --{k} for {}", self.mode)),
            None => Ok(()),
        }
    }

    fn get<T: std::str::FromStr>(&self, name: &str, default: Option<T>) -> Result<T, String> {
        match self.opts.get(name) {
            Some(v) => v
                .parse()
                .map_err(|_| format!("bad value for --{name}: {v}")),
            None => default.ok_or_else(|| format!("--{name} is required")),
        }
    }

    fn secs(&self, name: &str, default: Option<f64>) -> Result<Duration, String> {
        let s: f64 = self.get(name, default)?;
        Duration::try_from_secs_f64(s).map_err(|_| format!("bad value for --{name}: {s}"))
    }

    fn millis(&self, name: &str, default: Option<f64>) -> Result<Duration, String> {
        let ms: f64 = self.get(name, default)?;
        Duration::try_from_secs_f64(ms / 1000.0)
            .map_err(|_| format!("bad value for --{name}: {ms}"))
    }

    fn typists(&self, users: usize) -> Result<Typists, String> {
        let interval = self.millis("interval-ms", Some(200.0))?;
        if interval.is_zero() {
            return Err("--interval-ms must be positive".into());
        }
        Ok(Typists {
            users,
            interval,
            warmup: self.secs("warmup-s", Some(0.0))?,
            duration: self.secs("duration-s", None)?,
            timeout: self.millis("timeout-ms", Some(10_000.0))?,
            seed: self.get("seed", Some(1))?,
            late: self.millis("late-ms", Some(10.0))?,
            connections: self.get("connections", Some(0))?,
        })
    }
}

const COMMON: &[&str] = &[
    "url-template",
    "queries",
    "duration-s",
    "threads",
    "timeout-ms",
    "warmup-s",
];
const TYPISTS: &[&str] = &["interval-ms", "seed", "late-ms", "connections"];

async fn run(args: Args) -> Result<(), String> {
    if !["throughput", "typists", "max-typists"].contains(&args.mode.as_str()) {
        return Err(format!("unknown mode {}", args.mode));
    }
    let template: String = args.get("url-template", None)?;
    let path: String = args.get("queries", None)?;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let lines = query::parse_lines(&text);
    if lines.is_empty() {
        return Err(format!("{path}: no queries"));
    }
    let target = query::build_target(&template, &lines).await?;
    let url = json_str(&template);
    match args.mode.as_str() {
        "throughput" => {
            args.check_known(&[COMMON, &["concurrency"]].concat())?;
            let cfg = Throughput {
                concurrency: args.get::<usize>("concurrency", None)?.max(1),
                warmup: args.secs("warmup-s", Some(0.0))?,
                duration: args.secs("duration-s", None)?,
                timeout: args.millis("timeout-ms", Some(10_000.0))?,
            };
            let (stats, elapsed) = throughput(target, &cfg).await;
            let rate = stats.latency.count() as f64 / elapsed.as_secs_f64();
            let mut out = format!(
                r#"{{"mode":"throughput","url":{url},"concurrency":{},"duration_s":{},"requests":{},"req_per_s":{rate:.1},"#,
                cfg.concurrency,
                cfg.duration.as_secs_f64(),
                stats.latency.count(),
            );
            stats.json_fields(&mut out);
            out.push('}');
            println!("{out}");
            eprintln!(
                "throughput c={}: {} requests, {rate:.0} req/s, {}",
                cfg.concurrency,
                stats.latency.count(),
                stats.human()
            );
        }
        "typists" => {
            args.check_known(&[COMMON, TYPISTS, &["users"]].concat())?;
            let cfg = args.typists(args.get("users", None)?)?;
            let r = typists(target, &cfg).await;
            println!("{}", r.json(&cfg, &template, ""));
            eprintln!("{}", r.human(&cfg));
        }
        "max-typists" => {
            args.check_known(&[COMMON, TYPISTS, &["p99-ms", "start", "max", "pause-s"]].concat())?;
            let p99_ms: f64 = args.get("p99-ms", None)?;
            let pause = args.secs("pause-s", Some(1.0))?;
            let mut search = search::Search::new(
                args.get("start", Some(50))?,
                args.get("max", Some(20_000))?,
                0.05,
            );
            let mut best: Option<String> = None;
            let mut trial = 0;
            while let Some(users) = search.next() {
                if trial > 0 {
                    tokio::time::sleep(pause).await;
                }
                trial += 1;
                let cfg = args.typists(users)?;
                let r = typists(target.clone(), &cfg).await;
                let pass = r.passes(p99_ms);
                search.record(users, pass);
                let line = r.json(
                    &cfg,
                    &template,
                    &format!(r#""trial":{trial},"pass":{pass},"#),
                );
                println!("{line}");
                eprintln!(
                    "trial {trial}: {} -> {}",
                    r.human(&cfg),
                    if pass { "pass" } else { "FAIL" }
                );
                if pass && search.result() == users {
                    best = Some(line);
                }
            }
            let n = search.result();
            println!(
                r#"{{"mode":"max-typists","url":{url},"p99_target_ms":{p99_ms},"interval_ms":{},"max_users":{n},"trials":{trial},"best":{}}}"#,
                args.millis("interval-ms", Some(200.0))?.as_secs_f64() * 1000.0,
                best.as_deref().unwrap_or("null")
            );
            eprintln!("max typists with p99 <= {p99_ms} ms: {n} (after {trial} trials)");
        }
        other => return Err(format!("unknown mode {other}")),
    }
    Ok(())
}

fn main() {
    let result = Args::parse(std::env::args().skip(1)).and_then(|args| {
        let threads: usize = args.get("threads", Some(1))?;
        let rt = if threads <= 1 {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .enable_all()
                .build()
        }
        .map_err(|e| format!("tokio runtime: {e}"))?;
        rt.block_on(run(args))
    });
    if let Err(e) = result {
        if !e.is_empty() {
            eprintln!("hints-load: {e}");
        }
        eprintln!("{USAGE}");
        std::process::exit(2);
    }
}
