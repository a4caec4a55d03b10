//! The open-loop load, sent on time.
//!
//! Latency counts from each request's scheduled send time, so queueing in
//! the server cannot hide; that also counts the generator's own lateness.
//! tokio's timer rounds a sleep up to the next millisecond and fires on
//! its driver's next turn: requests went out 1–2 ms late, most of the p99
//! then reported for an echo, and how late varied with how busy the
//! generator's threads were (a loaded phase could report a lower p50 than
//! its baseline). Here one thread sleeps to each send time on the kernel's
//! high-resolution timer (1 ns timer slack) and writes the request on an
//! idle connection, and each connection has a thread of its own blocked in
//! `read`: an answer's time is taken when the kernel wakes that thread,
//! with no runtime in between. How late the sends went out is measured
//! too ([`Sends`]), so the generator's share of a figure is known.

use crate::Stats;
use crate::hist::Histogram;
use crate::wire::{Framing, chunked_end, parse_head};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long an answer may take before its request counts as timed out.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// The most connections open at once: a server that stops answering has
/// this many requests in flight, then sends wait (and show as late).
const MAX_LINES: usize = 512;

/// How often a thread that waits on another one looks again (rare paths
/// only: every line busy, a line closed while being taken, the end).
const RECHECK: Duration = Duration::from_micros(100);

/// How late the sends went out, from their scheduled times (µs, taken
/// with a connection in hand, just before the write).
pub struct Sends {
    pub late: Histogram,
}

/// Sends `requests` in turn at `rate` per second for `warmup` + `run`,
/// each answer recorded into whatever `window` held when its request went
/// out (nothing during `warmup`). Blocks until every request sent has its
/// answer or timed out.
pub fn open_loop(
    addr: SocketAddr,
    requests: Arc<Vec<Vec<u8>>>,
    rate: f64,
    warmup: Duration,
    run: Duration,
    window: Arc<Mutex<Arc<Stats>>>,
) -> Sends {
    set_timer_slack_ns(1);
    let lines = Lines {
        addr,
        requests,
        idle: Mutex::new(Vec::new()),
        in_flight: AtomicUsize::new(0),
        open: AtomicUsize::new(0),
        stopping: AtomicBool::new(false),
    };
    let lines = Arc::new(lines);
    let mut all: Vec<(Arc<Line>, std::thread::JoinHandle<()>)> = Vec::new();
    let sends = Sends {
        late: Histogram::default(),
    };
    let warming = Arc::new(Stats::default());
    let period = Duration::from_secs_f64(1.0 / rate);
    let start = Instant::now();
    let end = start + warmup + run;
    for k in 0u64.. {
        let scheduled = start + period.mul_f64(k as f64);
        if scheduled >= end {
            break;
        }
        sleep_until(scheduled);
        let counted = scheduled >= start + warmup;
        let stats = if counted {
            window.lock().unwrap_or_else(|e| e.into_inner()).clone()
        } else {
            warming.clone()
        };
        stats.sent.fetch_add(1, Relaxed);
        let request = k as usize % lines.requests.len();
        let line = loop {
            if let Some(line) = lines.idle().pop() {
                break Some(line);
            }
            if lines.open.load(Relaxed) < MAX_LINES {
                break None;
            }
            std::thread::sleep(RECHECK);
        };
        let line = match line {
            Some(line) => line,
            None => match Line::open(&lines) {
                Ok((line, thread)) => {
                    // Lines the server closed are gone; keep the rest.
                    all.retain(|(_, t)| !t.is_finished());
                    all.push((line.clone(), thread));
                    line
                }
                Err(e) => {
                    stats.error(format!("io:{:?}", e.kind()));
                    continue;
                }
            },
        };
        if counted {
            // Before the write: a write wakes the server, which may take
            // this core before the write returns; that is not lateness.
            sends.late.record(scheduled.elapsed().as_micros() as u64);
        }
        lines.in_flight.fetch_add(1, Relaxed);
        line.send(
            Due {
                scheduled,
                stats,
                request,
            },
            &lines.requests[request],
        );
    }
    let give_up = Instant::now() + ANSWER_TIMEOUT + Duration::from_secs(1);
    while lines.in_flight.load(Relaxed) > 0 && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(1));
    }
    lines.stopping.store(true, Relaxed);
    for (line, _) in &all {
        line.close();
    }
    for (_, thread) in all {
        let _ = thread.join();
    }
    sends
}

/// What the lines share.
struct Lines {
    addr: SocketAddr,
    requests: Arc<Vec<Vec<u8>>>,
    /// Lines with no request in flight, the most recently used last.
    idle: Mutex<Vec<Arc<Line>>>,
    in_flight: AtomicUsize,
    /// Lines whose thread still runs.
    open: AtomicUsize,
    stopping: AtomicBool,
}

impl Lines {
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Line>>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A request in flight: when it was due, where its answer counts.
struct Due {
    scheduled: Instant,
    stats: Arc<Stats>,
    request: usize,
}

/// One keep-alive connection, one request in flight at a time; its own
/// thread reads the answers.
struct Line {
    /// The request in flight, set before it is written.
    due: Mutex<Option<Due>>,
    /// The connection as the pacer writes to it (its thread replaces it
    /// when it reconnects, while it owns the request in flight).
    writer: Mutex<TcpStream>,
}

impl Line {
    fn open(lines: &Arc<Lines>) -> io::Result<(Arc<Line>, std::thread::JoinHandle<()>)> {
        let stream = connect(lines.addr)?;
        let line = Arc::new(Line {
            due: Mutex::new(None),
            writer: Mutex::new(stream.try_clone()?),
        });
        let (shared, mine) = (lines.clone(), line.clone());
        lines.open.fetch_add(1, Relaxed);
        let thread = std::thread::Builder::new()
            .name("healthy-line".into())
            .spawn(move || mine.read_answers(stream, &shared))
            .inspect_err(|_| {
                lines.open.fetch_sub(1, Relaxed);
            })?;
        Ok((line, thread))
    }

    fn due(&self) -> std::sync::MutexGuard<'_, Option<Due>> {
        self.due.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, TcpStream> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `due`'s request (`bytes`). A failed write is left to the
    /// reading thread, which sees the connection end and sends it again.
    fn send(&self, due: Due, bytes: &[u8]) {
        *self.due() = Some(due);
        let _ = self.writer().write_all(bytes);
    }

    fn close(&self) {
        let _ = self.writer().shutdown(Shutdown::Both);
    }

    /// The line's thread: reads each answer as it comes, records it, and
    /// puts the line back among the idle ones.
    fn read_answers(self: Arc<Self>, stream: TcpStream, lines: &Lines) {
        self.read_until_done(stream, lines);
        lines.open.fetch_sub(1, Relaxed);
    }

    fn read_until_done(self: &Arc<Self>, mut stream: TcpStream, lines: &Lines) {
        let mut buf = Vec::with_capacity(4096);
        // Whether the request in flight was sent on this connection after
        // another one: then a connection closed with nothing read is the
        // server closing a kept one, and the request goes again on a new one.
        let mut reused = false;
        loop {
            buf.clear();
            let answer = read_answer(&mut stream, &mut buf);
            let done = Instant::now();
            if lines.stopping.load(Relaxed) && self.due().is_none() {
                return;
            }
            let closed_quietly = matches!(&answer, Err(e) if is_closed(e)) && buf.is_empty();
            // The request in flight, and whether it must go again on a new
            // connection.
            let (due, again) = match self.due().take() {
                // A kept connection closed as the request went: once more.
                Some(due) => (due, closed_quietly && reused),
                // Idle, and the read timed out: nothing was asked.
                None if matches!(&answer, Err(e) if is_timeout(e)) => continue,
                // The server closed the line (or spoke) while it was idle:
                // retired, unless the pacer has just taken it.
                None => match self.claim(lines) {
                    Some(due) => (due, true),
                    None => return,
                },
            };
            if again {
                match self.resend(due, lines) {
                    Some(s) => {
                        (stream, reused) = (s, false);
                        continue;
                    }
                    None => return,
                }
            }
            let keep = matches!(answer, Ok((_, true)));
            finish(&due, lines, answer.map(|(status, _)| status), done);
            if !keep || lines.stopping.load(Relaxed) {
                return;
            }
            reused = true;
            lines.idle().push(self.clone());
        }
    }

    /// Sends `due`'s request again on a new connection, which this line
    /// reads from then on; if that fails, the request's failure is
    /// recorded.
    fn resend(&self, due: Due, lines: &Lines) -> Option<TcpStream> {
        let request = &lines.requests[due.request];
        *self.due() = Some(due);
        let sent = connect(lines.addr).and_then(|s| {
            *self.writer() = s.try_clone()?;
            (&s).write_all(request)?;
            Ok(s)
        });
        match sent {
            Ok(s) => Some(s),
            Err(e) => {
                if let Some(due) = self.due().take() {
                    finish(&due, lines, Err(e), Instant::now());
                }
                None
            }
        }
    }

    /// The line's connection ended (or spoke) with no request in flight:
    /// if the line was idle it is retired (`None`); if the pacer had just
    /// taken it, its request is waited for and returned.
    fn claim(self: &Arc<Self>, lines: &Lines) -> Option<Due> {
        {
            let mut idle = lines.idle();
            if let Some(i) = idle.iter().position(|l| Arc::ptr_eq(l, self)) {
                idle.remove(i);
                return None;
            }
        }
        loop {
            if let Some(due) = self.due().take() {
                return Some(due);
            }
            if lines.stopping.load(Relaxed) {
                return None;
            }
            std::thread::sleep(RECHECK);
        }
    }
}

/// Where requests slower than a threshold are written, one line each:
/// when the request was due on the kernel's monotonic clock (s, as `perf
/// record -k CLOCK_MONOTONIC` stamps events), what it took (ms), and when
/// it was due by the wall clock (Unix s, as the host's log has it). From
/// `SLOW_LOG` and `SLOW_MS` (default 10), so a spike can be lined up with
/// a trace of what ran (`bench/sched-waits.sh`).
struct SlowLog {
    file: Mutex<std::fs::File>,
    threshold_us: u64,
    /// An `Instant` and the monotonic clock (ns) read together.
    base: (Instant, u64),
}

impl SlowLog {
    fn get() -> Option<&'static SlowLog> {
        static LOG: std::sync::OnceLock<Option<SlowLog>> = std::sync::OnceLock::new();
        LOG.get_or_init(|| {
            let path = std::path::PathBuf::from(std::env::var_os("SLOW_LOG")?);
            let ms: u64 = std::env::var("SLOW_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(10);
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| eprintln!("SLOW_LOG {}: {e}; not written", path.display()))
                .ok()?;
            let mut t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: writes the monotonic clock into `t`.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
            let mono = t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64;
            Some(SlowLog {
                file: Mutex::new(file),
                threshold_us: ms * 1000,
                base: (Instant::now(), mono),
            })
        })
        .as_ref()
    }

    fn note(&self, due: Instant, took_us: u64) {
        if took_us < self.threshold_us {
            return;
        }
        let (base, mono) = self.base;
        let at = if due >= base {
            mono + due.duration_since(base).as_nanos() as u64
        } else {
            mono.saturating_sub(base.duration_since(due).as_nanos() as u64)
        };
        // And by the wall clock, to line it up with the host's log.
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .saturating_sub(due.elapsed());
        let line = format!(
            "{:.6} {:.3} {:.6}\n",
            at as f64 / 1e9,
            took_us as f64 / 1e3,
            wall.as_secs_f64()
        );
        let _ = self
            .file
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_all(line.as_bytes());
    }
}

/// Records how `due`'s request ended, `done` being when its answer came.
fn finish(due: &Due, lines: &Lines, answer: io::Result<u16>, done: Instant) {
    let took = done.saturating_duration_since(due.scheduled).as_micros() as u64;
    if let Some(log) = SlowLog::get() {
        log.note(due.scheduled, took);
    }
    match answer {
        Ok(200) => {
            due.stats.ok.fetch_add(1, Relaxed);
            due.stats.hist.record(took);
        }
        Ok(status) => {
            due.stats.hist.record(took);
            due.stats.error(status.to_string());
        }
        Err(e) if is_timeout(&e) => due.stats.error("timeout".into()),
        Err(e) => due.stats.error(format!("io:{:?}", e.kind())),
    }
    lines.in_flight.fetch_sub(1, Relaxed);
}

/// Reads one whole answer into `buf`: its status, and whether the
/// connection may carry another.
fn read_answer(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<(u16, bool)> {
    let head = loop {
        if let Some(head) = parse_head(buf)? {
            break head;
        }
        fill(stream, buf)?;
    };
    let keep = match head.framing {
        Framing::Length(n) => {
            while buf.len() < head.len + n {
                fill(stream, buf)?;
            }
            head.keep_alive && buf.len() == head.len + n
        }
        Framing::Chunked => {
            let mut at = head.len;
            loop {
                match chunked_end(buf, at)? {
                    Ok(end) => break head.keep_alive && end == buf.len(),
                    Err(resume) => {
                        at = resume;
                        fill(stream, buf)?;
                    }
                }
            }
        }
        Framing::Eof => {
            while fill(stream, buf).is_ok() {
                buf.truncate(head.len); // the body is not kept
            }
            false
        }
    };
    Ok((head.status, keep))
}

/// Reads more into `buf`; the server closing first is an error.
fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<()> {
    let mut chunk = [0u8; 4096];
    match stream.read(&mut chunk)? {
        0 => Err(io::ErrorKind::UnexpectedEof.into()),
        n => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(())
        }
    }
}

fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    Ok(stream)
}

fn is_closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// Lets the kernel wake this thread within `ns` of when it asked (the
/// default slack is 50 µs).
fn set_timer_slack_ns(ns: libc::c_ulong) {
    // SAFETY: PR_SET_TIMERSLACK takes a value and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns, 0, 0, 0) };
}
