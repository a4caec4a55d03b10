//! Load generator for bench/hostile.sh and bench/soak.sh.
//!
//!   hostile-load hostile  --addr A --healthy-host H --healthy-path P --rate R --duration-s S
//!                         [--warmup-s 3] [--tenants 100] [--host-pattern 'h{i}.hostile']
//!                         [--classes trap,spin,hog,fields,slow-stream,outbound,session-flood,sqlite]
//!                         [--per-class] [--settle-s 3] [--name all] [--hostile-priority idle|normal]
//!                         [--hostile-addr A (default --addr)] [--origin-spread-ms 0]
//!   hostile-load capacity --addr A --route [POST ]HOST,PATH ... --concurrency N --duration-s S
//!   hostile-load soak     --addr A --route HOST,PATH ... --rate R --duration-s S --window-s W --pid PID
//!
//! hostile: the healthy tenant gets an open-loop load at R requests/s (each
//! request sent on schedule whether or not earlier ones came back; latency
//! counted from the scheduled time, so queueing cannot hide). First alone
//! (phase "baseline"), then beside the hostile tenants ("all"; with
//! --per-class, also one phase per behaviour). Tenant i (of --tenants) plays
//! behaviour i mod 8 in a closed loop on its own host, so every behaviour has
//! ~12 tenants at it at once. An origin for the outbound flood runs here on
//! 127.0.0.1 and holds each answer a second (or, with --origin-spread-ms
//! S, a second ± S/2 ms, spread evenly over its connections: the flood's
//! answers then do not all come back in the same millisecond).
//!
//! soak: open loop at R requests/s over the routes in turn (`{n}` in a path
//! becomes a counter mod 50: a few session keys reused), one line per window
//! with its p50/p99, errors and the host's RSS (/proc/PID/status).
//!
//! One JSON object per line on stdout, a human summary on stderr.

#[path = "../../hints-load/src/hist.rs"]
mod hist;
mod pacer;
#[path = "../../hints-load/src/wire.rs"]
mod wire;

use hist::Histogram;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};

const USAGE: &str =
    "usage: hostile-load hostile|capacity|soak --addr 127.0.0.1:PORT ... (see the source's header)";

/// `--key value` pairs, in order; a key may repeat (`--route`).
struct Args(Vec<(String, String)>);

impl Args {
    fn parse(raw: &[String]) -> Result<Args, String> {
        let mut out = Vec::new();
        let mut it = raw.iter();
        while let Some(k) = it.next() {
            let key = k
                .strip_prefix("--")
                .ok_or_else(|| format!("expected --option, got {k:?}"))?;
            // Flags without a value: the next token starts with "--" or is absent.
            let flag = matches!(key, "per-class");
            let value = if flag {
                "true".to_string()
            } else {
                it.next()
                    .ok_or_else(|| format!("--{key} needs a value"))?
                    .clone()
            };
            out.push((key.to_string(), value));
        }
        Ok(Args(out))
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    fn req<T: std::str::FromStr>(&self, key: &str) -> Result<T, String> {
        let v = self
            .get(key)
            .ok_or_else(|| format!("--{key} is required"))?;
        v.parse().map_err(|_| format!("--{key}: bad value {v:?}"))
    }

    fn or<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, String> {
        match self.get(key) {
            Some(_) => self.req(key),
            None => Ok(default),
        }
    }
}

/// What a window or phase of requests came to.
#[derive(Default)]
struct Stats {
    hist: Histogram,
    sent: AtomicU64,
    ok: AtomicU64,
    /// Non-200 answers and failures, by status or kind.
    errors: Mutex<BTreeMap<String, u64>>,
}

impl Stats {
    fn error(&self, what: String) {
        *self
            .errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(what)
            .or_default() += 1;
    }

    fn error_count(&self) -> u64 {
        self.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .sum()
    }

    fn json_fields(&self) -> String {
        let errors = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        let map: Vec<String> = errors.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        format!(
            "\"sent\":{},\"ok\":{},\"errors\":{},\"error_kinds\":{{{}}},\"p50_us\":{},\"p99_us\":{},\"p999_us\":{},\"max_us\":{},\"mean_us\":{:.0}",
            self.sent.load(Relaxed),
            self.ok.load(Relaxed),
            errors.values().sum::<u64>(),
            map.join(","),
            self.hist.quantile(0.5),
            self.hist.quantile(0.99),
            self.hist.quantile(0.999),
            self.hist.max(),
            self.hist.mean(),
        )
    }
}

/// Sends `request` and files the outcome; latency from `scheduled`.
async fn measured(
    client: &wire::Client,
    request: &[u8],
    scheduled: Instant,
    stats: &Stats,
    timeout: Duration,
) {
    match tokio::time::timeout(timeout, client.send(request)).await {
        Ok(Ok(200)) => {
            stats.ok.fetch_add(1, Relaxed);
            stats.hist.record(scheduled.elapsed().as_micros() as u64);
        }
        Ok(Ok(status)) => {
            stats.hist.record(scheduled.elapsed().as_micros() as u64);
            stats.error(status.to_string());
        }
        Ok(Err(e)) => stats.error(format!("io:{:?}", e.kind())),
        Err(_) => stats.error("timeout".into()),
    }
}

// ---------------------------------------------------------------- hostile

const CLASSES: [&str; 8] = [
    "trap",
    "spin",
    "hog",
    "fields",
    "slow-stream",
    "outbound",
    "session-flood",
    "sqlite",
];

/// The SQLite hog's statement: counts until the request's deadline stops
/// it, on a blocking thread of the host's (the guest only waits).
const ENDLESS_SQL: &str =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";

/// `POST /sql` with `statement` as its body, to `host`.
fn sql_request(host: &str, statement: &str) -> Vec<u8> {
    format!(
        "POST /sql HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\n\r\n{statement}",
        statement.len()
    )
    .into_bytes()
}

/// Outcomes of one behaviour's requests, by status or kind.
type Tally = Arc<Mutex<BTreeMap<String, u64>>>;

fn tally(t: &Tally, what: String) {
    *t.lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(what)
        .or_default() += 1;
}

/// The outbound flood's origin on 127.0.0.1: holds each answer `hold`
/// (± `spread` / 2, by a stride over the connections accepted),
/// counts connections and the most open at once.
struct Origin {
    port: u16,
    accepted: Arc<AtomicUsize>,
    most_open: Arc<AtomicUsize>,
}

async fn origin(hold: Duration, spread: Duration) -> std::io::Result<Origin> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let open = Arc::new(AtomicUsize::new(0));
    let most_open = Arc::new(AtomicUsize::new(0));
    let (a, o, m) = (accepted.clone(), open.clone(), most_open.clone());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let nth = a.fetch_add(1, Relaxed) as u64;
            let hold = match spread.as_millis() as u64 {
                0 => hold,
                ms => hold - spread / 2 + Duration::from_millis(nth * 7919 % ms),
            };
            let now = o.fetch_add(1, Relaxed) + 1;
            m.fetch_max(now, Relaxed);
            let o = o.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                tokio::time::sleep(hold).await;
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\nconnection: close\r\n\r\nslow",
                    )
                    .await;
                o.fetch_sub(1, Relaxed);
            });
        }
    });
    Ok(Origin {
        port,
        accepted,
        most_open,
    })
}

/// A client that asks for a large stream and reads it at ~10 KiB/s: the
/// host must not keep a worker, a pool slot or unbounded buffers for it.
/// Returns how it ended.
async fn slow_stream(addr: SocketAddr, host: &str, stop: &AtomicBool) -> String {
    let socket = match TcpSocket::new_v4() {
        Ok(s) => s,
        Err(e) => return format!("io:{:?}", e.kind()),
    };
    // A small receive window so the host's writes back up at once.
    let _ = socket.set_recv_buffer_size(4096);
    let mut s = match socket.connect(addr).await {
        Ok(s) => s,
        Err(e) => return format!("io:{:?}", e.kind()),
    };
    let req = format!(
        "GET /fixtures/stream?bytes=268435456 HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    );
    if let Err(e) = s.write_all(req.as_bytes()).await {
        return format!("io:{:?}", e.kind());
    }
    let started = Instant::now();
    let mut head = Vec::new();
    let mut status = String::from("no-head");
    let mut buf = [0u8; 1024];
    loop {
        if stop.load(Relaxed) || started.elapsed() > Duration::from_secs(20) {
            return format!("{status} client-gave-up");
        }
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await {
            Ok(Ok(0)) => return format!("{status} closed"),
            Ok(Ok(n)) => {
                if head.len() < 64 {
                    head.extend_from_slice(&buf[..n]);
                    if let Some(code) = std::str::from_utf8(&head[..head.len().min(12)])
                        .ok()
                        .and_then(|l| l.split(' ').nth(1))
                    {
                        status = code.to_string();
                    }
                }
            }
            Ok(Err(e)) => return format!("{status} io:{:?}", e.kind()),
            Err(_) => return format!("{status} stalled-5s"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What every hostile loop of a phase shares.
struct Shared {
    addr: SocketAddr,
    origin_port: u16,
    /// The session flood's next key, over all tenants and phases.
    flood_keys: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

/// Starts one tenant's hostile loops (behaviour `class`, on `host`) until
/// `shared.stop`.
fn spawn_hostile(
    tasks: &mut tokio::task::JoinSet<()>,
    on: &tokio::runtime::Handle,
    shared: &Shared,
    host: String,
    class: &'static str,
    t: Tally,
) {
    let (addr, origin_port) = (shared.addr, shared.origin_port);
    // Concurrency per tenant: one request at a time, except the floods,
    // which are about many at once.
    let conns = match class {
        "outbound" => 16,
        "session-flood" => 4,
        _ => 1,
    };
    let client = Arc::new(wire::Client::new(addr));
    for _ in 0..conns {
        let (client, host, stop, t, keys) = (
            client.clone(),
            host.clone(),
            shared.stop.clone(),
            t.clone(),
            shared.flood_keys.clone(),
        );
        tasks.spawn_on(
            async move {
                while !stop.load(Relaxed) {
                    if class == "slow-stream" {
                        let end = slow_stream(addr, &host, &stop).await;
                        tally(&t, end);
                        continue;
                    }
                    let get = |path: &str| wire::get_request(&host, path);
                    let req = match class {
                        "trap" => get("/fixtures/trap"),
                        "spin" => get("/fixtures/loop"),
                        "hog" => get("/fixtures/hog?mb=1024"),
                        "fields" => get("/fixtures/fields-bomb?n=100000"),
                        "outbound" => get(&format!(
                            "/probe/fetch?url=http%3A%2F%2F127.0.0.1%3A{origin_port}%2Fx"
                        )),
                        "sqlite" => sql_request(&host, ENDLESS_SQL),
                        _ => get(&format!("/flood/k{}/count", keys.fetch_add(1, Relaxed))),
                    };
                    let what = match tokio::time::timeout(
                        Duration::from_secs(30),
                        client.send(&req),
                    )
                    .await
                    {
                        Ok(Ok(status)) => status.to_string(),
                        Ok(Err(e)) => format!("io:{:?}", e.kind()),
                        Err(_) => "timeout".to_string(),
                    };
                    let failed = what.starts_with("io:");
                    tally(&t, what);
                    if failed {
                        // A refused connection would spin here: breathe.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            },
            on,
        );
    }
}

/// The threads the hostile clients run on. On one machine the clients'
/// CPU is taken from the host's cores, which measures the generator, not
/// the host; with `--hostile-priority idle` (the default) these threads
/// run at `SCHED_IDLE`, as if the clients were elsewhere: they get what the
/// host and the healthy client leave. `normal` keeps them beside the host.
fn hostile_runtime(priority: &str) -> Result<tokio::runtime::Runtime, String> {
    let idle = match priority {
        "idle" => true,
        "normal" => false,
        other => {
            return Err(format!(
                "--hostile-priority {other:?}: expected idle or normal"
            ));
        }
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("hostile-clients")
        .enable_all()
        .on_thread_start(move || {
            if idle {
                let param = libc::sched_param { sched_priority: 0 };
                // SAFETY: sets the calling thread's policy; `param` is valid.
                if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
                    eprintln!(
                        "hostile clients: SCHED_IDLE refused: {}",
                        std::io::Error::last_os_error()
                    );
                }
            }
        })
        .build()
        .map_err(|e| format!("hostile runtime: {e}"))
}

async fn hostile(args: &Args, clients: &tokio::runtime::Handle) -> Result<(), String> {
    let addr: SocketAddr = args.req("addr")?;
    // Another host for the hostile tenants: the floor of what sharing the
    // machine (not the process) costs the healthy tenant.
    let hostile_addr: SocketAddr = args.or("hostile-addr", addr)?;
    let healthy_host = args.get("healthy-host").unwrap_or("healthy.test");
    let healthy_path = args.get("healthy-path").unwrap_or("/hello");
    let rate: f64 = args.or("rate", 200.0)?;
    let run = Duration::from_secs_f64(args.or("duration-s", 20.0)?);
    let warmup = Duration::from_secs_f64(args.or("warmup-s", 3.0)?);
    let settle = Duration::from_secs_f64(args.or("settle-s", 3.0)?);
    let tenants: usize = args.or("tenants", 100)?;
    let pattern = args
        .get("host-pattern")
        .unwrap_or("h{i}.hostile")
        .to_string();
    let classes: Vec<&'static str> = match args.get("classes") {
        None => CLASSES.to_vec(),
        Some(list) => list
            .split(',')
            .map(|c| {
                CLASSES
                    .iter()
                    .find(|k| **k == c)
                    .copied()
                    .ok_or_else(|| format!("unknown class {c:?}"))
            })
            .collect::<Result<_, _>>()?,
    };
    // The outbound flood's origin answers the hostile tenants' guests: it
    // runs with their clients. At most 2 s of spread (holds of 0–2 s).
    let spread = Duration::from_millis(args.or("origin-spread-ms", 0u64)?.min(2000));
    let origin = clients
        .spawn(origin(Duration::from_secs(1), spread))
        .await
        .map_err(|e| format!("origin: {e}"))?
        .map_err(|e| format!("origin: {e}"))?;
    let requests = Arc::new(vec![wire::get_request(healthy_host, healthy_path)]);
    let flood_keys = Arc::new(AtomicU64::new(0));

    let mut phases: Vec<(String, Vec<&'static str>)> = vec![("baseline".into(), vec![])];
    if args.get("per-class").is_some() {
        for c in &classes {
            phases.push(((*c).to_string(), vec![*c]));
        }
    }
    phases.push((
        args.get("name").unwrap_or("all").to_string(),
        classes.clone(),
    ));

    for (name, active) in phases {
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Shared {
            addr: hostile_addr,
            origin_port: origin.port,
            flood_keys: flood_keys.clone(),
            stop: stop.clone(),
        };
        let mut hostiles = tokio::task::JoinSet::new();
        let tallies: BTreeMap<&'static str, Tally> =
            active.iter().map(|c| (*c, Tally::default())).collect();
        let mut hostile_tenants = 0;
        for i in 0..tenants {
            let class = CLASSES[i % CLASSES.len()];
            if let Some(t) = tallies.get(class) {
                hostile_tenants += 1;
                spawn_hostile(
                    &mut hostiles,
                    clients,
                    &shared,
                    pattern.replace("{i}", &i.to_string()),
                    class,
                    t.clone(),
                );
            }
        }
        let window = Arc::new(Mutex::new(Arc::new(Stats::default())));
        // The pacer blocks: off the runtime's threads.
        let (load, w) = (requests.clone(), window.clone());
        let sends =
            tokio::task::spawn_blocking(move || pacer::open_loop(addr, load, rate, warmup, run, w))
                .await
                .map_err(|e| format!("pacer: {e}"))?;
        stop.store(true, Relaxed);
        // Hostile requests in flight end at their deadlines; don't wait
        // for the slowest, the next phase's warm-up absorbs the rest.
        let _ = tokio::time::timeout(settle, async {
            while hostiles.join_next().await.is_some() {}
        })
        .await;
        hostiles.abort_all();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let stats = window.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let t: Vec<String> = tallies
            .iter()
            .map(|(c, t)| {
                let t = t.lock().unwrap_or_else(|e| e.into_inner());
                let m: Vec<String> = t.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("\"{c}\":{{{}}}", m.join(","))
            })
            .collect();
        eprintln!(
            "{name:>14}: healthy {} sent, {} errors, p50 {} µs, p99 {} µs; {hostile_tenants} hostile tenants; sends late p99 {} µs, max {} µs",
            stats.sent.load(Relaxed),
            stats.error_count(),
            stats.hist.quantile(0.5),
            stats.hist.quantile(0.99),
            sends.late.quantile(0.99),
            sends.late.max(),
        );
        println!(
            "{{\"phase\":\"{name}\",\"rate\":{rate},\"duration_s\":{},\"hostile_tenants\":{hostile_tenants},{},\"send_late_p99_us\":{},\"send_late_max_us\":{},\"hostile\":{{{}}},\"origin_accepted\":{},\"origin_most_open\":{}}}",
            run.as_secs_f64(),
            stats.json_fields(),
            sends.late.quantile(0.99),
            sends.late.max(),
            t.join(","),
            origin.accepted.load(Relaxed),
            origin.most_open.load(Relaxed),
        );
    }
    Ok(())
}

// ---------------------------------------------------------------- soak

/// `--route HOST,PATH` requests; `{n}` in PATH cycles over `keys` values.
fn routes(args: &Args, keys: u64) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    for r in args.all("route") {
        // `POST HOST,PATH`: an empty-bodied POST (key-value increments).
        let (post, r) = match r.strip_prefix("POST ") {
            Some(rest) => (true, rest),
            None => (false, r),
        };
        let (host, path) = r
            .split_once(',')
            .ok_or_else(|| format!("--route {r:?}: expected [POST ]HOST,PATH"))?;
        let make = |path: &str| {
            if post {
                format!("POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n")
                    .into_bytes()
            } else {
                wire::get_request(host, path)
            }
        };
        if path.contains("{n}") {
            for n in 0..keys {
                out.push(make(&path.replace("{n}", &n.to_string())));
            }
        } else {
            out.push(make(path));
        }
    }
    if out.is_empty() {
        return Err("at least one --route HOST,PATH".into());
    }
    Ok(out)
}

/// Interleaves the routes: one of each in turn, whatever their key counts.
fn interleave(args: &Args, keys: u64) -> Result<Vec<Vec<u8>>, String> {
    let mut per_route = Vec::new();
    for r in args.all("route") {
        let one = Args(vec![("route".into(), r.to_string())]);
        per_route.push(routes(&one, keys)?);
    }
    let mut out = Vec::new();
    for k in 0..keys as usize {
        for reqs in &per_route {
            out.push(reqs[k % reqs.len()].clone());
        }
    }
    Ok(out)
}

async fn capacity(args: &Args) -> Result<(), String> {
    let addr: SocketAddr = args.req("addr")?;
    let concurrency: usize = args.or("concurrency", 32)?;
    let run = Duration::from_secs_f64(args.or("duration-s", 10.0)?);
    let requests = Arc::new(interleave(args, 50)?);
    let client = Arc::new(wire::Client::new(addr));
    let stats = Arc::new(Stats::default());
    let next = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + run;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (client, requests, stats, next) = (
            client.clone(),
            requests.clone(),
            stats.clone(),
            next.clone(),
        );
        tasks.spawn(async move {
            while Instant::now() < end {
                let i = next.fetch_add(1, Relaxed) as usize % requests.len();
                stats.sent.fetch_add(1, Relaxed);
                measured(
                    &client,
                    &requests[i],
                    Instant::now(),
                    &stats,
                    Duration::from_secs(10),
                )
                .await;
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let rps = stats.ok.load(Relaxed) as f64 / run.as_secs_f64();
    eprintln!(
        "capacity: {rps:.0} req/s at {concurrency} connections, p99 {} µs, {} errors",
        stats.hist.quantile(0.99),
        stats.error_count()
    );
    println!(
        "{{\"req_per_s\":{rps:.1},\"concurrency\":{concurrency},{}}}",
        stats.json_fields()
    );
    Ok(())
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

async fn soak(args: &Args) -> Result<(), String> {
    let addr: SocketAddr = args.req("addr")?;
    let rate: f64 = args.req("rate")?;
    let run = Duration::from_secs_f64(args.req("duration-s")?);
    let every = Duration::from_secs_f64(args.or("window-s", 30.0)?);
    let pid: u32 = args.req("pid")?;
    let requests = Arc::new(interleave(args, 50)?);
    let window = Arc::new(Mutex::new(Arc::new(Stats::default())));
    let w = window.clone();
    let load = tokio::task::spawn_blocking(move || {
        pacer::open_loop(addr, requests, rate, Duration::ZERO, run, w)
    });
    let start = Instant::now();
    let mut n = 1u32;
    loop {
        let at = start + every * n;
        tokio::time::sleep_until(at.into()).await;
        let done = load.is_finished() || at >= start + run;
        let stats = std::mem::replace(
            &mut *window.lock().unwrap_or_else(|e| e.into_inner()),
            Arc::new(Stats::default()),
        );
        let rss = rss_kib(pid);
        eprintln!(
            "{:>6.0} s: RSS {} MiB, {} sent, {} errors, p99 {} µs",
            start.elapsed().as_secs_f64(),
            rss.map_or("gone".into(), |k| (k / 1024).to_string()),
            stats.sent.load(Relaxed),
            stats.error_count(),
            stats.hist.quantile(0.99),
        );
        println!(
            "{{\"t_s\":{:.0},\"rss_kib\":{},{}}}",
            start.elapsed().as_secs_f64(),
            rss.map_or("null".into(), |k| k.to_string()),
            stats.json_fields()
        );
        if rss.is_none() {
            return Err(format!("the host (pid {pid}) is gone"));
        }
        if done {
            break;
        }
        n += 1;
    }
    if let Ok(sends) = load.await {
        eprintln!(
            "the generator's sends went late by {} µs at p99, {} µs at most",
            sends.late.quantile(0.99),
            sends.late.max()
        );
    }
    Ok(())
}

fn main() {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let Some((cmd, rest)) = raw.split_first() else {
        eprintln!("{USAGE}");
        std::process::exit(2);
    };
    let args = match Args::parse(rest) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.or("threads", 2).unwrap_or(2))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            std::process::exit(1);
        }
    };
    // Made (and dropped) outside the main runtime, which cannot drop one.
    let clients = match hostile_runtime(args.get("hostile-priority").unwrap_or("idle")) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hostile-load: {e}");
            std::process::exit(2);
        }
    };
    let result = rt.block_on(async {
        match cmd.as_str() {
            "hostile" => hostile(&args, clients.handle()).await,
            "capacity" => capacity(&args).await,
            "soak" => soak(&args).await,
            _ => Err(USAGE.to_string()),
        }
    });
    if let Err(e) = result {
        eprintln!("hostile-load: {e}");
        std::process::exit(1);
    }
}
