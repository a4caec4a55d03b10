//! CPU between tenants: guests run in one of two lanes of threads.
//!
//! The **front lane** is the serving threads (one per core, each with its
//! connections). The **background lane** is as many threads again at
//! `SCHED_IDLE`, which the kernel runs only on a core the serving threads
//! leave free and preempts the moment a serving thread wants it back.
//!
//! A guest call runs in the front lane unless it has run past
//! [`CALL_BUDGET_TICKS`] of CPU, or its tenant is in the background: because its
//! guests use more than their share of the serving threads' time, because
//! one of its calls ran past the budget lately, because polls of its
//! kept a thread busy past [`LONG_POLL`] in two windows within
//! [`LONG_POLL_HOLD`] (a guest's `memory.copy` of 16 MiB into fresh pages
//! is one instruction: no epoch check ends it), or because
//! they keep failing or being refused (traps, deadline and memory kills,
//! requests over the tenant's share: [`FAULT_LIMIT`] in a window).
//! A connection follows the tenant of its latest request, so the parsing
//! and refusing of a flood's requests goes to the background too. So a
//! tenant that spins, floods or allocates gets the CPU that others leave,
//! and a tenant that does not never waits behind it: its request is on a
//! thread the kernel serves first. Yielding alone cannot give that (a
//! spinning guest yields at every epoch tick, but is put straight back in
//! the same run queue, so a short request still waits a round of every
//! spinner's slices).
//!
//! A tenant's CPU share is the serving threads' time divided among the
//! tenants that used any lately, but never less than [`MIN_SHARE`] of it:
//! with a hundred tenants on two cores an equal part is a few percent of a
//! core, which one busy, well-behaved site exceeds. Use is measured by
//! timing each poll of a guest call, in either lane, and judged every
//! [`WINDOW`] by [`Keeper`]. A call moves between lanes only between polls
//! (at an epoch tick or while it waits on I/O): a Wasmtime call is a
//! `Send` future that may be resumed on any thread, and I/O it registered
//! with the serving thread's reactor keeps waking it wherever it is.

use crate::share::Shares;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

/// How often tenants' use is judged.
pub const WINDOW: Duration = Duration::from_millis(100);

/// The epoch ticks one call may run through in the front lane (about a
/// millisecond each: [`crate::engine::EPOCH_TICK`]). Ticks, not time: the
/// store's epoch callback fires at the guest's first epoch check once the
/// epoch has moved, so a call preempted between two checks counts one
/// tick, not the time it lost; a wait in an async host call longer than a
/// tick counts one too (the callback fires when the guest resumes).
pub const CALL_BUDGET_TICKS: u64 = 2;

/// The least CPU share a tenant has, as a fraction of the serving threads'
/// time, however many tenants are active.
pub const MIN_SHARE: f64 = 1.0 / 8.0;

/// Failures and refusals in one window that put a tenant in the background
/// (100 a second): a tenant whose guests trap on every request, or whose
/// clients keep asking past its share, is not one to serve first.
pub const FAULT_LIMIT: u64 = 10;

/// A tenant counts as active in a window where it used at least this much:
/// a tenant whose idle session ticks a timer is not a competitor.
const ACTIVE_NS: u64 = 100_000;

/// A tenant in the background lane returns to the front once its recent
/// use is under this fraction of its share (hysteresis: a tenant at its
/// share does not flip every window).
pub const RETURN_BELOW: f64 = 0.75;

/// Long calls in a window that can put a tenant in the background.
pub const LONG_CALLS_MIN: u64 = 2;

/// One poll of a guest call that keeps its thread busy this long (CPU
/// time) puts the tenant in the background, however rarely it happens: on
/// a serving thread, the thread's other connections waited all that time.
/// Polls end at every epoch tick (1 ms), so what gets here is work no tick
/// interrupts: a bulk memory instruction over fresh pages (a memory bomb's
/// copies under a 64 MiB cap take 1–5 ms each), a synchronous host call,
/// an instantiation or a store's reset (first and last polls); an echo
/// request's polls take tens of microseconds. CPU time, not the clock, in
/// either lane: a poll whose thread the kernel preempted, or which waited
/// for a lock another thread held, is no fault of its guest's (by the
/// clock, a loaded echo tenant had polls of 7–10 ms that were 45 µs of
/// CPU). In the background the same rule keeps a bomb there: its polls
/// renew the hold, so it never gets a turn in front between them. A task
/// of the tenant's on the blocking pool past [`edge_blocking::LONG_TASK`]
/// (a SQLite statement that counts for seconds) is the same kind of work
/// (in one step) and counts as a long poll, again for each
/// [`edge_blocking::LONG_TASK_AGAIN`] more it uses (and at each window it
/// ran in while its tenant is behind).
pub const LONG_POLL: Duration = Duration::from_millis(2);

/// The windows a tenant stays in the background after a window with a
/// long poll that follows another such window within as many windows
/// (5 s), however clean its windows: a memory bomb's calls come a few a
/// second, each with long polls, and must not get a turn in front
/// between them.
///
/// The first window with long polls in that time only warns, however
/// many it had: a well-behaved tenant's polls can be charged milliseconds
/// they did not spend on the guest, several at once (a kernel without
/// `IRQ_TIME_ACCOUNTING`, as on the test machine, charges interrupt and
/// network work to the thread it interrupts; an echo tenant's first
/// calls after its host started took three polls of 2.6–5.2 ms within
/// 10 ms), and 5 s behind for one such moment cost an echo tenant's p99
/// a hundred-fold in a hostile run. A bomb's long polls go on, window
/// after window.
pub const LONG_POLL_HOLD: u64 = 50;

/// The part of a tenant's calls in a window that must run long to put it
/// in the background.
pub const LONG_CALLS_PART: f64 = 0.25;

/// The fewest windows a tenant stays in the background lane.
pub const MIN_STAY: u64 = 5;

/// A tenant sent back within this many windows of returning to the front
/// stays twice as long as last time, up to [`MIN_STAY`] × 2^[`MAX_STRIKES`]
/// (32 s, and a spread: [`CpuMeter::stay`]); one that kept in front longer
/// starts again from [`MIN_STAY`].
/// A flood that behaves only while slowed otherwise comes back every
/// sixth window and spends it on the serving threads (traps, fields bombs
/// and session floods did, 300–500 times each in a 30 s run).
pub const REOFFEND_WINDOWS: u64 = 50;

/// The most a tenant's stay doubles ([`REOFFEND_WINDOWS`]).
pub const MAX_STRIKES: u64 = 6;

/// Strikes after a tenant that spent `front_windows` in front is sent
/// back with `strikes` ([`REOFFEND_WINDOWS`]).
fn next_strikes(strikes: u64, front_windows: u64) -> u64 {
    if front_windows < REOFFEND_WINDOWS {
        (strikes + 1).min(MAX_STRIKES)
    } else {
        0
    }
}

/// A counter on a cache line of its own.
#[derive(Default)]
#[repr(align(64))]
struct Padded(AtomicU64);

/// Counters per tenant that every serving thread adds to on each poll are
/// split this many ways, so threads do not pass one cache line around.
const SHARDS: usize = 8;

thread_local! {
    /// This thread's shard of the split counters.
    static SHARD: usize = {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        NEXT.fetch_add(1, Relaxed) % SHARDS
    };
}

/// One tenant's CPU: what its guests used, and which lane they run in.
#[derive(Default)]
pub struct CpuMeter {
    /// Used since the keeper last looked (ns), split by thread.
    used_ns: [Padded; SHARDS],
    /// Used in all (ns), for metrics.
    total_ns: AtomicU64,
    /// Recent use per window (ns, halving each window); the keeper's.
    recent_ns: AtomicU64,
    /// Failures and refusals since the keeper last looked.
    faults: AtomicU64,
    /// Calls begun since the keeper last looked, split by thread.
    calls: [Padded; SHARDS],
    /// Calls that ran past [`CALL_BUDGET_TICKS`] since the keeper last looked.
    long_calls: AtomicU64,
    /// Whether a poll ran past [`LONG_POLL`] since the keeper last looked.
    long_poll: AtomicBool,
    /// Windows left in which a window with a long poll is remembered (a
    /// warning: [`LONG_POLL_HOLD`]); the keeper's.
    warned: AtomicU64,
    /// Windows left of the stay a long poll began; the keeper's.
    hold: AtomicU64,
    /// Whether the tenant's guests run in the background lane.
    background: AtomicBool,
    /// Whether it reached [`FAULT_LIMIT`] in the current window: behind
    /// at once, until the keeper judges the window (which then puts it
    /// there in earnest).
    faulted_out: AtomicBool,
    /// Windows in its lane so far; the keeper's.
    windows: AtomicU64,
    /// Times it was sent back soon after returning; the keeper's.
    strikes: AtomicU64,
}

impl CpuMeter {
    fn charge(&self, ns: u64) {
        SHARD.with(|&i| self.used_ns[i].0.fetch_add(ns, Relaxed));
    }

    /// Takes what was used since the last take.
    fn take_used(&self) -> u64 {
        self.used_ns.iter().map(|c| c.0.swap(0, Relaxed)).sum()
    }

    /// Counts a failure or refusal of the tenant's; the one that reaches
    /// [`FAULT_LIMIT`] in a window sends the tenant behind at once rather
    /// than at the window's end: a flood back from the background would
    /// otherwise have the serving threads for up to a window.
    pub fn fault(&self) {
        if self.faults.fetch_add(1, Relaxed) + 1 == FAULT_LIMIT {
            self.faulted_out.store(true, Relaxed);
        }
    }

    /// Whether the tenant's guests run in the background lane now.
    pub fn in_background(&self) -> bool {
        self.background.load(Relaxed) || self.faulted_out.load(Relaxed)
    }

    /// CPU its guests have used in all.
    pub fn total(&self) -> Duration {
        let pending: u64 = self.used_ns.iter().map(|c| c.0.load(Relaxed)).sum();
        Duration::from_nanos(self.total_ns.load(Relaxed) + pending)
    }

    /// Ends a window: takes what was counted in it, and says what the
    /// keeper knows of the tenant now.
    fn end_window(&self) -> Use {
        let used = self.take_used();
        self.total_ns.fetch_add(used, Relaxed);
        // Halving each window: a burst counts for a few windows, a steady
        // use converges to its per-window amount.
        let recent_ns = (self.recent_ns.load(Relaxed) + used) / 2;
        self.recent_ns.store(recent_ns, Relaxed);
        // Two windows with long polls within LONG_POLL_HOLD windows hold
        // the tenant behind.
        let long_poll = self.long_poll.swap(false, Relaxed);
        let warned = self.warned.load(Relaxed);
        let hold = if long_poll && warned > 0 {
            LONG_POLL_HOLD
        } else {
            self.hold.load(Relaxed).saturating_sub(1)
        };
        self.hold.store(hold, Relaxed);
        let warned = if long_poll {
            LONG_POLL_HOLD
        } else {
            warned.saturating_sub(1)
        };
        self.warned.store(warned, Relaxed);
        // Before `in_background` below: the keeper judges the lane it
        // placed the tenant in, and places it again right after.
        self.faulted_out.store(false, Relaxed);
        Use {
            recent_ns,
            faults: self.faults.swap(0, Relaxed),
            calls: self.calls.iter().map(|c| c.0.swap(0, Relaxed)).sum(),
            long_calls: self.long_calls.swap(0, Relaxed),
            hold,
            background: self.in_background(),
            windows: self.windows.load(Relaxed),
            stay: self.stay(),
        }
    }

    /// Windows it must stay in the background: [`MIN_STAY`] doubled per
    /// strike, plus up to half as much again, different for each tenant
    /// and each strike. Tenants sent behind together (a phase of floods
    /// starting at once) would otherwise come back together, every one
    /// in front for the same window.
    fn stay(&self) -> u64 {
        let strikes = self.strikes.load(Relaxed);
        let base = MIN_STAY << strikes;
        // The meter's address tells tenants apart; the strikes, turns.
        let mut x = (self as *const Self as u64) ^ strikes.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        base + x % (base / 2 + 1)
    }

    /// Puts the tenant in the lane [`judge`] chose for the next window;
    /// whether that is a change. Sent back soon after returning, it earns
    /// a strike ([`REOFFEND_WINDOWS`]).
    fn place(&self, background: bool) -> bool {
        if self.background.swap(background, Relaxed) == background {
            self.windows.fetch_add(1, Relaxed);
            return false;
        }
        if background {
            let front = self.windows.load(Relaxed);
            let strikes = next_strikes(self.strikes.load(Relaxed), front);
            self.strikes.store(strikes, Relaxed);
        }
        self.windows.store(1, Relaxed);
        true
    }
}

/// A tenant's work on the blocking pool (key-value calls, SQLite
/// statements, directory reads) counts as its CPU, and runs in its lane.
impl edge_blocking::Lane for crate::share::TenantShare {
    fn charge(&self, cpu: Duration) {
        self.cpu
            .charge(u64::try_from(cpu.as_nanos()).unwrap_or(u64::MAX));
    }

    fn in_background(&self) -> bool {
        self.cpu.in_background()
    }

    /// As a long poll: work nothing interrupted held a core all that time
    /// (here at the priority its task began at, beside the serving
    /// threads), and a tenant that does it again within [`LONG_POLL_HOLD`]
    /// windows is held behind.
    fn long_task(&self) {
        self.cpu.long_poll.store(true, Relaxed);
    }

    /// Paced as its guests' calls are ([`TenantTask`]), on a host with a
    /// background lane (tools and tests without one run it as it is).
    fn pace(self: Arc<Self>, task: edge_blocking::AsyncWork) -> edge_blocking::AsyncWork {
        match edge_blocking::background() {
            Some(background) => Box::pin(Paced::new(task, TenantTask(self), background)),
            None => task,
        }
    }
}

/// What the keeper knows of a tenant after a window.
#[derive(Debug, Clone, Copy)]
pub struct Use {
    /// Recent CPU per window (ns).
    pub recent_ns: u64,
    /// Failures and refusals in the window.
    pub faults: u64,
    /// Calls begun in the window.
    pub calls: u64,
    /// Calls that ran past [`CALL_BUDGET_TICKS`] in the window.
    pub long_calls: u64,
    /// Windows of [`LONG_POLL_HOLD`] left after this one.
    pub hold: u64,
    /// Whether it is in the background lane now.
    pub background: bool,
    /// Windows it has spent in its lane so far.
    pub windows: u64,
    /// Windows it must stay in the background ([`MIN_STAY`], doubled per
    /// strike: [`REOFFEND_WINDOWS`], and spread: [`CpuMeter::stay`]).
    pub stay: u64,
}

impl Use {
    /// Whether a good part of its calls run long: at least
    /// [`LONG_CALLS_MIN`], and a [`LONG_CALLS_PART`] of its calls. A few
    /// long calls (a cache warming after a deploy) only move themselves.
    fn runs_long(&self) -> bool {
        self.long_calls >= LONG_CALLS_MIN
            && self.long_calls as f64 >= self.calls as f64 * LONG_CALLS_PART
    }
}

/// Which tenants run in the background lane after this window.
///
/// In: those with [`FAULT_LIMIT`] faults in the window; those whose calls
/// run past [`CALL_BUDGET_TICKS`] ([`Use::runs_long`]: as a scheduler's
/// multi-level queue does, a tenant whose calls run long starts its next
/// ones behind the short ones of others); and those over their share of
/// `capacity_ns` (an equal part among the active ones, at least
/// [`MIN_SHARE`]).
///
/// Also in: those with a poll past [`LONG_POLL`] in a window within
/// [`LONG_POLL_HOLD`] windows of another such window, for as many windows.
///
/// Out only once it has stayed its `stay` ([`MIN_STAY`] windows, doubled
/// for each time it was sent back soon after returning) and the last
/// window was clean: at most one fault, no long call, under
/// [`RETURN_BELOW`] of its share, no hold left. A flood slowed by the
/// background lane makes fewer faults there than it would in front;
/// without the stay it would come back every other window and flood the
/// front lane again.
pub fn judge(tenants: &[Use], capacity_ns: u64) -> Vec<bool> {
    let active = tenants
        .iter()
        .filter(|u| u.recent_ns >= ACTIVE_NS)
        .count()
        .max(1);
    let capacity = capacity_ns as f64;
    let share = (capacity / active as f64).max(capacity * MIN_SHARE);
    tenants
        .iter()
        .map(|u| {
            let r = u.recent_ns as f64;
            if u.background {
                let clean =
                    u.faults <= 1 && !u.runs_long() && r < share * RETURN_BELOW && u.hold == 0;
                !(clean && u.windows >= u.stay)
            } else {
                r > share || u.faults >= FAULT_LIMIT || u.runs_long() || u.hold > 0
            }
        })
        .collect()
}

/// Judges every tenant's use each [`WINDOW`], on a thread of its own (at
/// normal priority: it must run when the host is busiest).
pub struct Keeper {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Keeper {
    /// Starts judging `shares` against `front_threads` serving threads.
    pub fn start(shares: Shares, front_threads: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let capacity_ns = front_threads.max(1) as u64 * WINDOW.as_nanos() as u64;
        let thread = std::thread::Builder::new()
            .name("edge-lanes".into())
            .spawn(move || {
                while !flag.load(Relaxed) {
                    std::thread::sleep(WINDOW);
                    Self::judge_all(&shares, capacity_ns);
                }
            })
            .expect("spawning the lane keeper");
        Self {
            stop,
            thread: Some(thread),
        }
    }

    fn judge_all(shares: &Shares, capacity_ns: u64) {
        // Blocking work still running counts in the window it ran in.
        edge_blocking::charge_running();
        let all = shares.snapshot();
        let uses: Vec<Use> = all.iter().map(|(_, s)| s.cpu.end_window()).collect();
        let lanes = judge(&uses, capacity_ns);
        for (((name, s), background), u) in all.iter().zip(lanes).zip(&uses) {
            if s.cpu.place(background) {
                tracing::debug!(tenant = %name, background, window = ?u, "tenant changed CPU lane");
            }
        }
        // Blocking work running now goes with its tenant, whether or not
        // it reaches a safe point soon.
        edge_blocking::move_running();
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The background lane's threads.
pub struct Background {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Background {
    /// Starts `threads` background threads.
    pub fn start(threads: usize) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("edge-background")
            .enable_all()
            .on_thread_start(on_background_thread_start)
            .build()?;
        // Tried once, here, before the first statement asks.
        if edge_blocking::lanes_movable() {
            tracing::info!("running tasks follow their tenants' lanes");
        } else {
            tracing::info!(
                "running tasks stay at the priority they started at: leaving SCHED_IDLE needs CAP_SYS_NICE or RLIMIT_NICE"
            );
        }
        // Its blocking threads start at SCHED_IDLE too: background tenants'
        // blocking work runs there.
        edge_blocking::set_background(runtime.handle().clone());
        Ok(Self {
            runtime: Some(runtime),
        })
    }

    /// Where background calls are spawned.
    pub fn handle(&self) -> tokio::runtime::Handle {
        self.runtime
            .as_ref()
            .expect("running until dropped")
            .handle()
            .clone()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // Dropped at the end of the server's own runtime, where blocking to
        // join threads is not allowed; calls still there are abandoned.
        if let Some(rt) = self.runtime.take() {
            edge_blocking::clear_background(rt.handle().id());
            rt.shutdown_background();
        }
    }
}

thread_local! {
    /// Whether this thread is one of the background lane's.
    static IN_BACKGROUND: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is in the background lane already (a call
/// there needs no move).
fn on_background_thread() -> bool {
    IN_BACKGROUND.with(|b| b.get())
}

/// Marks the calling thread as a background one and puts it at
/// `SCHED_IDLE`. If the kernel refuses, the lane still separates long
/// calls from short ones in the run queues, and the refusal is logged.
fn on_background_thread_start() {
    IN_BACKGROUND.with(|b| b.set(true));
    if let Err(error) = edge_blocking::set_idle() {
        tracing::warn!(%error, "background lane: cannot set SCHED_IDLE");
    }
}

/// What a paced future runs for: which lane it belongs in, and whom its
/// polls' time is charged to. Cheap to clone: a move to the background
/// takes a copy along.
pub trait Pace: Clone + Unpin + Send + Sync + 'static {
    /// Whether its polls are timed (and [`Pace::charge`]d).
    const TIMED: bool;
    /// Whether it should run in the background lane now.
    fn belongs_back(&self) -> bool;
    /// Takes the time one poll took.
    fn charge(&self, ns: u64);
    /// One poll kept its thread busy past [`LONG_POLL`] of CPU time
    /// (`cpu_ns`; `wall_ns` by the clock; `ended`: the call's last poll).
    fn long_poll(&self, _wall_ns: u64, _cpu_ns: u64, _ended: bool) {}
}

/// A guest call (or a session's run of them) of one tenant: charged to the
/// tenant, in the background while the tenant is or once the call has run
/// past [`CALL_BUDGET_TICKS`].
#[derive(Clone)]
pub struct GuestCall(CallClock);

impl GuestCall {
    /// A call timed by `clock` (which knows its tenant).
    pub fn new(clock: CallClock) -> Self {
        Self(clock)
    }
}

impl Pace for GuestCall {
    const TIMED: bool = true;

    fn belongs_back(&self) -> bool {
        self.0.share.cpu.in_background() || self.0.over()
    }

    fn charge(&self, ns: u64) {
        self.0.share.cpu.charge(ns);
    }

    fn long_poll(&self, wall_ns: u64, cpu_ns: u64, ended: bool) {
        long_poll_of(&self.0.share, wall_ns, cpu_ns, ended, "long poll");
    }
}

/// Marks a long poll of `share`'s tenant ([`LONG_POLL`]), and logs it.
fn long_poll_of(
    share: &crate::share::TenantShare,
    wall_ns: u64,
    cpu_ns: u64,
    ended: bool,
    what: &'static str,
) {
    share.cpu.long_poll.store(true, Relaxed);
    tracing::debug!(
        tenant = %share.tenant,
        cpu_us = cpu_ns / 1000,
        wall_us = wall_ns / 1000,
        ended,
        background = on_background_thread(),
        "{what}"
    );
}

/// An async task of a tenant's outside its guests' calls (an outbound
/// request's send, its connection's I/O): charged to the tenant, in the
/// background while the tenant is, held to the same long-poll rule.
#[derive(Clone)]
struct TenantTask(Arc<crate::share::TenantShare>);

impl Pace for TenantTask {
    const TIMED: bool = true;

    fn belongs_back(&self) -> bool {
        self.0.cpu.in_background()
    }

    fn charge(&self, ns: u64) {
        self.0.cpu.charge(ns);
    }

    /// Only past [`edge_blocking::LONG_TASK`], as the tenant's blocking
    /// work: the host's protocol code (a TLS handshake's certificate
    /// checks, a large buffer's decoding) cannot yield as a guest does.
    fn long_poll(&self, wall_ns: u64, cpu_ns: u64, ended: bool) {
        if cpu_ns >= edge_blocking::LONG_TASK.as_nanos() as u64 {
            long_poll_of(
                &self.0,
                wall_ns,
                cpu_ns,
                ended,
                "long poll of a tenant's task",
            );
        }
    }
}

/// The epoch ticks a tenant's call has run through, counted by its store's
/// epoch callback ([`CallClock::tick`]) and shared with whoever knows where
/// calls begin (a session's task runs many).
#[derive(Clone)]
pub struct CallClock {
    ticks: Arc<AtomicU64>,
    share: Arc<crate::share::TenantShare>,
}

impl CallClock {
    /// A clock for calls of the tenant whose share is `share`.
    pub fn new(share: Arc<crate::share::TenantShare>) -> Self {
        Self {
            ticks: Arc::default(),
            share,
        }
    }

    /// A call begins: its budget is whole again, and its tenant counts it.
    pub fn begin(&self) {
        self.ticks.store(0, Relaxed);
        SHARD.with(|&i| self.share.cpu.calls[i].0.fetch_add(1, Relaxed));
    }

    /// The call ran through an epoch tick; the one that takes it past its
    /// budget counts it as a long call of its tenant.
    pub fn tick(&self) {
        if self.ticks.fetch_add(1, Relaxed) + 1 == CALL_BUDGET_TICKS + 1 {
            self.share.cpu.long_calls.fetch_add(1, Relaxed);
        }
    }

    fn over(&self) -> bool {
        self.ticks.load(Relaxed) > CALL_BUDGET_TICKS
    }
}

/// A client connection: in the lane of the tenant its latest request went
/// to. Its own time (parsing, refusing) is not charged; its guests' is, by
/// their own [`GuestCall`].
#[derive(Default, Clone)]
pub struct Connection(Arc<arc_swap::ArcSwapOption<crate::share::TenantShare>>);

impl Connection {
    /// The connection's latest request is `share`'s tenant's.
    pub fn serving(&self, share: &Arc<crate::share::TenantShare>) {
        let now = self.0.load();
        if !now.as_ref().is_some_and(|s| Arc::ptr_eq(s, share)) {
            self.0.store(Some(share.clone()));
        }
    }
}

impl Pace for Connection {
    const TIMED: bool = false;

    fn belongs_back(&self) -> bool {
        self.0
            .load()
            .as_ref()
            .is_some_and(|s| s.cpu.in_background())
    }

    fn charge(&self, _ns: u64) {}
}

/// Where a [`Paced`] future is.
enum Place<F: Future> {
    Front(F),
    Back(AbortOnDrop<Hop<F>>),
    Moving,
}

/// How a future in the background lane comes back.
enum Hop<F: Future> {
    Finished(F::Output),
    Return(F),
}

/// A future that runs in the lane its [`Pace`] says, moving between polls.
pub struct Paced<F: Future, P> {
    place: Place<F>,
    pace: P,
    background: tokio::runtime::Handle,
}

impl<F, P> Paced<F, P>
where
    F: Future + Send + Unpin + 'static,
    F::Output: Send,
    P: Pace,
{
    /// Runs `future` for `pace`; `background` is the background lane.
    pub fn new(future: F, pace: P, background: tokio::runtime::Handle) -> Self {
        Self {
            place: Place::Front(future),
            pace,
            background,
        }
    }

    /// Whether it should move now (not if this thread is a background one
    /// already: a call inside a connection that moved went with it).
    fn should_move(&self) -> bool {
        self.pace.belongs_back() && !on_background_thread()
    }
}

thread_local! {
    /// Whether this thread is inside a timed poll.
    static TIMING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Polls `future` once, charging the time to `pace`; not if it is polled
/// inside another timed poll (a WASI 0.3 guest awaits its outbound send in
/// its own call), whose time counts it already.
fn timed_poll<F: Future + Unpin, P: Pace>(
    future: &mut F,
    cx: &mut Context<'_>,
    pace: &P,
) -> Poll<F::Output> {
    if !P::TIMED || TIMING.get() {
        return Pin::new(future).poll(cx);
    }
    /// Unsets [`TIMING`] however the poll ends (a panic goes on up).
    struct Unset;
    impl Drop for Unset {
        fn drop(&mut self) {
            TIMING.set(false);
        }
    }
    let start = Instant::now();
    let sample = CpuSample::at(start);
    TIMING.set(true);
    let unset = Unset;
    let poll = Pin::new(future).poll(cx);
    drop(unset);
    let ns = start.elapsed().as_nanos() as u64;
    pace.charge(ns);
    // A poll's CPU time is at most its time by the clock: only a poll
    // that long by the clock needs the CPU clock read.
    let long = LONG_POLL.as_nanos() as u64;
    if ns >= long {
        let cpu_ns = sample.cpu_since(start);
        if cpu_ns >= long {
            pace.long_poll(ns, cpu_ns, poll.is_ready());
        }
    }
    poll
}

/// How old a reading of a thread's CPU clock may be and still serve as a
/// poll's starting point.
const CPU_SAMPLE_AGE: Duration = Duration::from_millis(1);

thread_local! {
    /// This thread's CPU clock as last read, and when.
    static LAST_CPU: std::cell::Cell<Option<CpuSample>> = const { std::cell::Cell::new(None) };
}

/// A reading of the calling thread's CPU clock (ns), and when it was
/// taken. Long polls are judged by their thread's CPU time, not by the
/// clock: a serving thread preempted, or waiting for a lock another
/// thread holds, is no fault of its guest's, and a well-behaved tenant
/// must not be sent behind for it. Reading the CPU clock is a system call,
/// so a poll starts from the thread's last reading if it is younger than
/// [`CPU_SAMPLE_AGE`].
#[derive(Clone, Copy)]
struct CpuSample {
    taken: Instant,
    cpu_ns: u64,
}

impl CpuSample {
    /// A reading at most [`CPU_SAMPLE_AGE`] older than `now`.
    fn at(now: Instant) -> Self {
        LAST_CPU.with(|last| match last.get() {
            Some(s) if now.saturating_duration_since(s.taken) <= CPU_SAMPLE_AGE => s,
            _ => {
                let s = Self {
                    taken: now,
                    cpu_ns: thread_cpu_ns(),
                };
                last.set(Some(s));
                s
            }
        })
    }

    /// The CPU time the thread has used since `start` (at least as long
    /// ago as this reading), at least: the thread used at most the time by
    /// the clock between the reading and `start`, so that is taken off.
    fn cpu_since(&self, start: Instant) -> u64 {
        let now = Self {
            taken: Instant::now(),
            cpu_ns: thread_cpu_ns(),
        };
        LAST_CPU.with(|last| last.set(Some(now)));
        let gap = start.saturating_duration_since(self.taken).as_nanos() as u64;
        now.cpu_ns.saturating_sub(self.cpu_ns).saturating_sub(gap)
    }
}

/// The calling thread's CPU time (ns).
fn thread_cpu_ns() -> u64 {
    u64::try_from(edge_blocking::thread_cpu().as_nanos()).unwrap_or(u64::MAX)
}

impl<F, P> Future for Paced<F, P>
where
    F: Future + Send + Unpin + 'static,
    F::Output: Send,
    P: Pace,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        loop {
            match &mut this.place {
                Place::Front(future) => {
                    if !this.pace.belongs_back() || on_background_thread() {
                        if let Poll::Ready(out) = timed_poll(future, cx, &this.pace) {
                            return Poll::Ready(out);
                        }
                        if !this.should_move() {
                            return Poll::Pending;
                        }
                    }
                    // On to the background lane, where it is polled at once
                    // (a spurious poll is harmless; it also moves the
                    // future's wakers there).
                    let Place::Front(future) = std::mem::replace(&mut this.place, Place::Moving)
                    else {
                        unreachable!()
                    };
                    let task = this.background.spawn(InBackground {
                        future: Some(future),
                        pace: this.pace.clone(),
                    });
                    this.place = Place::Back(AbortOnDrop(task));
                }
                Place::Back(task) => {
                    let hop = match ready!(Pin::new(&mut task.0).poll(cx)) {
                        Ok(hop) => hop,
                        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                        // Only at shutdown, when nobody waits for the answer.
                        Err(_) => return Poll::Pending,
                    };
                    match hop {
                        Hop::Finished(out) => {
                            this.place = Place::Moving;
                            return Poll::Ready(out);
                        }
                        Hop::Return(future) => this.place = Place::Front(future),
                    }
                }
                Place::Moving => panic!("Paced polled after it finished"),
            }
        }
    }
}

/// A future as the background lane runs it: until it finishes, or until
/// its pace no longer belongs there, when it goes home to the front lane.
struct InBackground<F, P> {
    future: Option<F>,
    pace: P,
}

impl<F, P> Future for InBackground<F, P>
where
    F: Future + Unpin,
    P: Pace,
{
    type Output = Hop<F>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Hop<F>> {
        let this = self.get_mut();
        let future = this.future.as_mut().expect("polled after it finished");
        if let Poll::Ready(out) = timed_poll(future, cx, &this.pace) {
            this.future = None;
            return Poll::Ready(Hop::Finished(out));
        }
        match this.future.take() {
            Some(future) if !this.pace.belongs_back() => Poll::Ready(Hop::Return(future)),
            future => {
                this.future = future;
                Poll::Pending
            }
        }
    }
}

/// A task handle that ends its task when dropped: a call whose client went
/// away must not run on in the background.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: u64 = 200_000_000; // two threads, one window

    fn at(recent_ns: u64, background: bool) -> Use {
        Use {
            recent_ns,
            faults: 0,
            calls: 100,
            long_calls: 0,
            hold: 0,
            background,
            windows: MIN_STAY,
            stay: MIN_STAY,
        }
    }

    #[test]
    fn a_long_poll_holds_its_tenant_in_the_background() {
        // Held (long polls in a second window) among a hundred calls:
        // behind at once.
        let bomb = Use {
            hold: LONG_POLL_HOLD,
            ..at(1_000_000, false)
        };
        assert_eq!(judge(&[bomb, at(1_000_000, false)], CAP), [true, false]);
        // Clean windows do not bring it back while the hold lasts.
        let held = Use {
            hold: 1,
            ..at(1_000_000, true)
        };
        assert_eq!(judge(&[held], CAP), [true]);
        assert_eq!(judge(&[at(1_000_000, true)], CAP), [false]);
    }

    #[test]
    fn a_meter_holds_a_long_poller_and_doubles_a_reoffenders_stay() {
        let m = CpuMeter::default();
        // Long polls in two windows: held for LONG_POLL_HOLD windows,
        // counting down.
        m.long_poll.store(true, Relaxed);
        assert_eq!(m.end_window().hold, 0);
        m.long_poll.store(true, Relaxed);
        assert_eq!(m.end_window().hold, LONG_POLL_HOLD);
        assert_eq!(m.end_window().hold, LONG_POLL_HOLD - 1);
        // Another long poll while remembered renews the hold.
        m.long_poll.store(true, Relaxed);
        assert_eq!(m.end_window().hold, LONG_POLL_HOLD);
        // Sent behind after long in front: the plain stay.
        for _ in 0..REOFFEND_WINDOWS {
            assert!(!m.place(false));
        }
        assert!(m.place(true));
        let stay = m.end_window().stay;
        assert!((MIN_STAY..=MIN_STAY * 3 / 2).contains(&stay), "{stay}");
        // Back in front, and behind again two windows later: twice as long.
        assert!(m.place(false));
        assert!(!m.place(false));
        assert!(m.place(true));
        let u = m.end_window();
        assert!(
            (2 * MIN_STAY..=3 * MIN_STAY).contains(&u.stay),
            "{}",
            u.stay
        );
        assert_eq!((u.windows, u.background), (1, true));
    }

    #[test]
    fn one_window_of_long_polls_warns_and_a_second_within_the_hold_holds() {
        let m = CpuMeter::default();
        // A window with long polls (a well-behaved tenant charged for the
        // kernel's work, or its first calls): no hold.
        m.long_poll.store(true, Relaxed);
        assert_eq!(m.end_window().hold, 0);
        // Forgotten after LONG_POLL_HOLD clean windows: another only warns.
        for _ in 0..LONG_POLL_HOLD {
            assert_eq!(m.end_window().hold, 0);
        }
        m.long_poll.store(true, Relaxed);
        assert_eq!(m.end_window().hold, 0);
        // A second while remembered (the last window of it): held.
        for _ in 0..LONG_POLL_HOLD - 1 {
            m.end_window();
        }
        m.long_poll.store(true, Relaxed);
        assert_eq!(m.end_window().hold, LONG_POLL_HOLD);
    }

    #[test]
    fn tenants_sent_behind_together_do_not_all_come_back_together() {
        let meters: Vec<CpuMeter> = (0..32).map(|_| CpuMeter::default()).collect();
        for strikes in 0..=MAX_STRIKES {
            let stays: std::collections::BTreeSet<u64> = meters
                .iter()
                .map(|m| {
                    m.strikes.store(strikes, Relaxed);
                    m.stay()
                })
                .collect();
            let base = MIN_STAY << strikes;
            assert!(stays.iter().all(|s| (base..=base * 3 / 2).contains(s)));
            // 32 tenants over the spread's 3 to 161 stays: at least half
            // as many different ones as there can be, up to 16.
            assert!(
                stays.len() >= (base / 2 + 1).min(32) as usize / 2,
                "{stays:?}"
            );
        }
    }

    #[test]
    fn a_tenant_reaching_the_fault_limit_goes_behind_at_once_until_judged() {
        let m = CpuMeter::default();
        for _ in 1..FAULT_LIMIT {
            m.fault();
        }
        assert!(!m.in_background());
        m.fault();
        assert!(m.in_background(), "behind before the window ends");
        // The keeper's judgement makes it so for the stay.
        let u = m.end_window();
        assert_eq!(judge(&[u], CAP), [true]);
        assert!(m.place(true));
        assert!(m.in_background());
        // The flag lasts the window; after it, the keeper's lane holds.
        let m = CpuMeter::default();
        for _ in 0..FAULT_LIMIT {
            m.fault();
        }
        m.end_window();
        assert!(!m.in_background());
    }

    #[test]
    fn a_polls_cpu_time_leaves_out_its_threads_waits() {
        // Asleep (waiting) 20 ms: no CPU time.
        let start = Instant::now();
        let sample = CpuSample::at(start);
        std::thread::sleep(Duration::from_millis(20));
        assert!(sample.cpu_since(start) < LONG_POLL.as_nanos() as u64);
        // Busy 20 ms: at least LONG_POLL of it, however old the reading
        // the poll starts from.
        let start = Instant::now();
        let sample = CpuSample::at(start);
        while start.elapsed() < Duration::from_millis(20) {
            std::hint::black_box(0u64);
        }
        assert!(sample.cpu_since(start) >= LONG_POLL.as_nanos() as u64);
    }

    #[test]
    fn tenants_over_an_equal_part_go_to_the_background() {
        // Four active tenants: 50 ms each.
        let lanes = judge(
            &[
                at(1_000_000, false),
                at(120_000_000, false),
                at(40_000_000, false),
                at(39_000_000, false),
            ],
            CAP,
        );
        assert_eq!(lanes, [false, true, false, false]);
    }

    #[test]
    fn a_lone_tenant_has_the_whole_host() {
        assert_eq!(judge(&[at(CAP, false), at(0, false)], CAP), [false, false]);
    }

    #[test]
    fn returning_needs_use_well_under_the_share() {
        // Share 100 ms: at 90 ms a background tenant stays, at 70 it returns;
        // a front tenant at 90 stays in front.
        assert_eq!(
            judge(&[at(90_000_000, true), at(90_000_000, false)], CAP),
            [true, false]
        );
        assert_eq!(
            judge(&[at(70_000_000, true), at(90_000_000, false)], CAP),
            [false, false]
        );
    }

    #[test]
    fn idle_tenants_do_not_shrink_the_share() {
        // One active tenant among many idle ones keeps the whole host.
        let mut all = vec![at(0, false); 100];
        all.push(at(150_000_000, false));
        assert!(judge(&all, CAP).iter().all(|b| !b));
    }

    #[test]
    fn many_active_tenants_leave_each_the_least_share() {
        // 100 active tenants: an equal part is 2 ms, the least share 25 ms.
        let mut all = vec![at(1_000_000, false); 99];
        all.push(at(20_000_000, false));
        all.push(at(30_000_000, false));
        let lanes = judge(&all, CAP);
        assert!(!lanes[99]);
        assert!(lanes[100]);
    }

    #[test]
    fn a_tenant_that_keeps_failing_goes_to_the_background_and_comes_back() {
        let failing = Use {
            faults: FAULT_LIMIT,
            ..at(1_000_000, false)
        };
        assert_eq!(judge(&[failing, at(1_000_000, false)], CAP), [true, false]);
        // Back in front only after a clean window (at most one fault) and
        // the least stay.
        let slowed = Use {
            faults: 2,
            ..at(1_000_000, true)
        };
        assert_eq!(judge(&[slowed], CAP), [true]);
        let mended = Use {
            faults: 1,
            ..at(1_000_000, true)
        };
        assert_eq!(judge(&[mended], CAP), [false]);
        let fresh = Use {
            windows: MIN_STAY - 1,
            ..at(1_000_000, true)
        };
        assert_eq!(judge(&[fresh], CAP), [true]);
    }

    #[test]
    fn a_tenant_whose_calls_run_long_starts_its_next_ones_behind() {
        let long = Use {
            calls: 8,
            long_calls: 2,
            ..at(1_000_000, false)
        };
        // A few long calls among many (a cache warming) move only themselves.
        let warming = Use {
            calls: 900,
            long_calls: 4,
            ..at(1_000_000, false)
        };
        assert_eq!(
            judge(&[long, warming, at(1_000_000, false)], CAP),
            [true, false, false]
        );
        // A window without one brings it back.
        assert_eq!(judge(&[at(1_000_000, true)], CAP), [false]);
    }

    /// A future that runs `polls` times, its clock ticking at each (as a
    /// guest's epoch callback does), and says on which thread it finished.
    struct Ticking {
        polls: u32,
        clock: CallClock,
    }

    impl Future for Ticking {
        type Output = String;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<String> {
            if self.polls == 0 {
                return Poll::Ready(std::thread::current().name().unwrap_or("").to_string());
            }
            self.polls -= 1;
            self.clock.tick();
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    /// A background lane of one thread, a front runtime and a tenant.
    fn lanes() -> (
        Background,
        tokio::runtime::Runtime,
        Arc<crate::share::TenantShare>,
    ) {
        let front = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        (Background::start(1).unwrap(), front, Arc::default())
    }

    #[test]
    fn a_long_call_moves_to_the_background_and_a_short_one_stays() {
        let (back, front, meter) = lanes();
        let run = |polls| {
            let clock = CallClock::new(meter.clone());
            clock.begin();
            front.block_on(Paced::new(
                Ticking {
                    polls,
                    clock: clock.clone(),
                },
                GuestCall::new(clock),
                back.handle(),
            ))
        };
        assert_ne!(run(CALL_BUDGET_TICKS as u32), "edge-background");
        assert_eq!(meter.cpu.long_calls.load(Relaxed), 0);
        assert_eq!(run(CALL_BUDGET_TICKS as u32 + 3), "edge-background");
        assert_eq!(meter.cpu.long_calls.load(Relaxed), 1);
    }

    #[test]
    fn a_call_returns_to_the_front_when_its_tenant_does() {
        let (back, front, meter) = lanes();
        meter.cpu.background.store(true, Relaxed);
        let m = meter.clone();
        // The tenant's share is back after the first background poll.
        let flip = run_once(move || m.cpu.background.store(false, Relaxed));
        let done = front.block_on(Paced::new(
            Box::pin(async move {
                flip.await;
                tokio::task::yield_now().await;
                std::thread::current().name().unwrap_or("").to_string()
            }),
            GuestCall::new(CallClock::new(meter)),
            back.handle(),
        ));
        assert_ne!(done, "edge-background");
    }

    #[test]
    fn a_tenants_task_runs_in_its_lane_and_is_charged() {
        let (back, front, share) = lanes();
        let run = || {
            front.block_on(Paced::new(
                Box::pin(async {
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_millis(1) {}
                    std::thread::current().name().unwrap_or("").to_string()
                }),
                TenantTask(share.clone()),
                back.handle(),
            ))
        };
        assert_ne!(run(), "edge-background");
        assert!(share.cpu.total() >= Duration::from_millis(1));
        share.cpu.background.store(true, Relaxed);
        assert_eq!(run(), "edge-background");
        assert!(share.cpu.total() >= Duration::from_millis(2));
    }

    /// A pace that counts the polls charged to it, always in front.
    #[derive(Clone, Default)]
    struct Counted(Arc<AtomicU64>);

    impl Pace for Counted {
        const TIMED: bool = true;
        fn belongs_back(&self) -> bool {
            false
        }
        fn charge(&self, _ns: u64) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    #[test]
    fn a_paced_future_inside_another_is_charged_once() {
        let (back, front, _) = lanes();
        let (outer, inner) = (Counted::default(), Counted::default());
        let nested = Paced::new(
            Box::pin(async {
                tokio::task::yield_now().await;
            }),
            inner.clone(),
            back.handle(),
        );
        front.block_on(Paced::new(Box::pin(nested), outer.clone(), back.handle()));
        assert_eq!(outer.0.load(Relaxed), 2, "both polls of the outer one");
        assert_eq!(inner.0.load(Relaxed), 0, "counted in the outer one's");
        // Alone, it is charged itself.
        front.block_on(Paced::new(Box::pin(async {}), inner.clone(), back.handle()));
        assert_eq!(inner.0.load(Relaxed), 1);
    }

    /// Runs `f` when first polled, then is ready.
    async fn run_once(f: impl FnOnce()) {
        f();
    }
}
