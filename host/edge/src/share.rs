//! Fair shares: what one tenant may hold of the host at once.
//!
//! Every tenant has a [`TenantShare`] (kept across reloads, limits updated
//! when a config is swapped in) that counts its live instances, its pinned
//! sessions and its requests in flight, and meters how fast it starts new
//! sessions, and the linear memory its instances hold together (within
//! the host's, [`HostMemory`]). A request or session over a limit is
//! refused at once with a status that names the limit's kind (503 or 429,
//! `Retry-After`); nothing of another tenant's is touched. The counts are
//! plain atomics: taking a permit is one `fetch_add` and a compare, giving
//! it back one `fetch_sub`.

use edge_config::Limits;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A limit of a tenant's share, for refusals, logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `max_instances`: live instances of the tenant.
    Instances,
    /// `max_sessions`: pinned sessions of the tenant.
    Sessions,
    /// `max_inflight`: requests being served or queued.
    Inflight,
    /// `session_rate`: new sessions per second.
    SessionRate,
    /// `max_total_memory_bytes`: linear memory of the tenant's instances.
    Memory,
}

impl Limit {
    /// Every limit, in the order metrics list them.
    pub const ALL: [Limit; 5] = [
        Limit::Instances,
        Limit::Sessions,
        Limit::Inflight,
        Limit::SessionRate,
        Limit::Memory,
    ];

    /// The config key that sets it.
    pub fn key(self) -> &'static str {
        match self {
            Limit::Instances => "max_instances",
            Limit::Sessions => "max_sessions",
            Limit::Inflight => "max_inflight",
            Limit::SessionRate => "session_rate",
            Limit::Memory => "max_total_memory_bytes",
        }
    }
}

/// The limits of a share, from a tenant's `[limits]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareLimits {
    /// `max_instances`.
    pub instances: u64,
    /// `max_sessions`.
    pub sessions: u64,
    /// `max_inflight`.
    pub inflight: u64,
    /// `session_rate`.
    pub session_rate: u64,
    /// `max_open_files`.
    pub open_files: usize,
    /// `max_total_memory_bytes`.
    pub memory: u64,
}

impl From<&Limits> for ShareLimits {
    fn from(l: &Limits) -> Self {
        Self {
            instances: l.max_instances,
            sessions: l.max_sessions,
            inflight: l.max_inflight,
            session_rate: l.session_rate,
            open_files: l.max_open_files,
            memory: l.max_total_memory_bytes,
        }
    }
}

/// One tenant's counts and limits.
#[derive(Default)]
pub struct TenantShare {
    /// The tenant's name, for logs.
    pub tenant: String,
    instances: AtomicU64,
    sessions: AtomicU64,
    inflight: AtomicU64,
    /// Bytes of linear memory its instances hold.
    memory: AtomicU64,
    max_instances: AtomicU64,
    max_sessions: AtomicU64,
    max_inflight: AtomicU64,
    session_rate: AtomicU64,
    max_memory: AtomicU64,
    /// Every tenant's memory, which its own is part of.
    host_memory: Arc<HostMemory>,
    /// Session-start tokens: (tokens, when last refilled).
    bucket: Mutex<Option<(f64, Instant)>>,
    /// Refusals by limit, in [`Limit::ALL`] order.
    refused: [AtomicU64; Limit::ALL.len()],
    /// The CPU its guests use, and which lane they run in.
    pub cpu: crate::lanes::CpuMeter,
    /// Idle sessions of its ended to make room for another instance.
    pub reclaimed: AtomicU64,
    /// What its guests' failures and output may write to the host's log.
    pub log: LogBudget,
    /// Its HTML rewriting threads running (`edge_html`'s per-tenant cap).
    pub html_threads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Bytes of results its instances' unread streams hold
    /// (`edge_unread`'s per-tenant budget).
    pub unread_bytes: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Descriptors its guests hold open (`max_open_files`).
    pub open_files: Arc<edge_open_files::OpenFiles>,
}

/// Log lines a tenant's requests may cause: a burst of [`LogBudget::BURST`],
/// then [`LogBudget::RATE`] a second (the default; [`LogBudget::new`] for
/// others). Lines past it are counted, and the next line written says how
/// many were left out (`suppressed`); metrics still count every failure.
pub struct LogBudget {
    burst: f64,
    per_second: f64,
    bucket: Mutex<Option<LogBucket>>,
}

impl Default for LogBudget {
    fn default() -> Self {
        LogBudget::new(Self::BURST, Self::RATE)
    }
}

struct LogBucket {
    tokens: f64,
    last: Instant,
    suppressed: u64,
}

impl LogBudget {
    /// Lines at once.
    pub const BURST: f64 = 20.0;
    /// Lines a second after the burst.
    pub const RATE: f64 = 10.0;

    /// A budget of `burst` lines at once, then `per_second`.
    pub const fn new(burst: f64, per_second: f64) -> LogBudget {
        LogBudget {
            burst,
            per_second,
            bucket: Mutex::new(None),
        }
    }

    /// Whether a line may be written now; if so, how many were left out
    /// since the last one.
    pub fn admit(&self) -> Option<u64> {
        let now = Instant::now();
        let mut bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let b = bucket.get_or_insert(LogBucket {
            tokens: self.burst,
            last: now,
            suppressed: 0,
        });
        b.tokens =
            (b.tokens + now.duration_since(b.last).as_secs_f64() * self.per_second).min(self.burst);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Some(std::mem::take(&mut b.suppressed))
        } else {
            b.suppressed += 1;
            None
        }
    }
}

/// Linear memory every tenant's instances hold together, and the most
/// they may (`pool.total_memory_bytes`). The pool's slots are address
/// space only: at the defaults, one tenant's half of the pool at its
/// instances' cap is 500 × 64 MiB, more memory than most machines have,
/// and the kernel's answer to that is to kill the host.
pub struct HostMemory {
    held: AtomicU64,
    max: AtomicU64,
    refused: AtomicU64,
}

impl Default for HostMemory {
    fn default() -> Self {
        Self {
            held: AtomicU64::new(0),
            max: AtomicU64::new(u64::MAX),
            refused: AtomicU64::new(0),
        }
    }
}

impl HostMemory {
    /// Applies a config's `pool.total_memory_bytes` (what is held stays).
    pub fn set_max(&self, bytes: u64) {
        self.max.store(bytes, Relaxed);
    }

    /// (held, most allowed, refusals so far).
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.held.load(Relaxed),
            self.max.load(Relaxed),
            self.refused.load(Relaxed),
        )
    }
}

/// Whose bound refused more linear memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryRefusal {
    /// The tenant's `max_total_memory_bytes`.
    Tenant,
    /// The host's `pool.total_memory_bytes`, every tenant's together.
    Host,
}

/// Gives back one unit of a count when dropped.
pub struct Permit {
    share: Arc<TenantShare>,
    limit: Limit,
    units: u64,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.share
            .counter(self.limit)
            .fetch_sub(self.units, Relaxed);
    }
}

impl TenantShare {
    /// Applies a config's limits (from now on; what is held stays held).
    pub fn set_limits(&self, limits: ShareLimits) {
        self.max_instances.store(limits.instances, Relaxed);
        self.max_sessions.store(limits.sessions, Relaxed);
        self.max_inflight.store(limits.inflight, Relaxed);
        self.session_rate.store(limits.session_rate, Relaxed);
        self.max_memory.store(limits.memory, Relaxed);
        self.open_files.set_max(limits.open_files);
    }

    /// Takes `bytes` more memory for one of the tenant's instances (a
    /// memory made or grown, host resources counted), within its share and
    /// the host's. [`TenantShare::give_memory`] gives it back. A refusal
    /// is counted by [`TenantShare::refuse_memory`] once it fails a request
    /// (an instantiation may yet succeed once an idle session is ended).
    pub fn take_memory(&self, bytes: u64) -> Result<(), MemoryRefusal> {
        // (Nothing more is never refused, even past a limit lowered since.)
        if bytes == 0 {
            return Ok(());
        }
        if self.memory.fetch_add(bytes, Relaxed) + bytes > self.max_memory.load(Relaxed) {
            self.memory.fetch_sub(bytes, Relaxed);
            return Err(MemoryRefusal::Tenant);
        }
        let host = &self.host_memory;
        if host.held.fetch_add(bytes, Relaxed) + bytes > host.max.load(Relaxed) {
            host.held.fetch_sub(bytes, Relaxed);
            self.memory.fetch_sub(bytes, Relaxed);
            return Err(MemoryRefusal::Host);
        }
        Ok(())
    }

    /// Counts a request failed for want of memory: the tenant's refusals
    /// (`max_total_memory_bytes`) or the host's.
    pub fn refuse_memory(&self, refusal: MemoryRefusal) {
        match refusal {
            MemoryRefusal::Tenant => self.refuse(Limit::Memory),
            MemoryRefusal::Host => {
                self.host_memory.refused.fetch_add(1, Relaxed);
            }
        }
    }

    /// Gives back `bytes` of linear memory taken by
    /// [`TenantShare::take_memory`] (its instance is gone).
    pub fn give_memory(&self, bytes: u64) {
        self.memory.fetch_sub(bytes, Relaxed);
        self.host_memory.held.fetch_sub(bytes, Relaxed);
    }

    fn counter(&self, limit: Limit) -> &AtomicU64 {
        match limit {
            Limit::Instances => &self.instances,
            Limit::Sessions => &self.sessions,
            Limit::Inflight | Limit::SessionRate => &self.inflight,
            Limit::Memory => &self.memory,
        }
    }

    fn max(&self, limit: Limit) -> u64 {
        match limit {
            Limit::Instances => self.max_instances.load(Relaxed),
            Limit::Sessions => self.max_sessions.load(Relaxed),
            Limit::Inflight => self.max_inflight.load(Relaxed),
            Limit::SessionRate => self.session_rate.load(Relaxed),
            Limit::Memory => self.max_memory.load(Relaxed),
        }
    }

    /// Takes one unit of `limit` (instances, sessions or in-flight), or
    /// counts a refusal and says which limit refused.
    pub fn acquire(self: &Arc<Self>, limit: Limit) -> Result<Permit, Limit> {
        self.acquire_units(limit, 1)
    }

    /// Takes `units` of `limit` (an instance of a component that holds
    /// more of the pool than most: [`crate::app::instance_weight`]), or
    /// counts a refusal and says which limit refused.
    pub fn acquire_units(self: &Arc<Self>, limit: Limit, units: u64) -> Result<Permit, Limit> {
        self.try_acquire_units(limit, units).ok_or_else(|| {
            self.refuse(limit);
            limit
        })
    }

    /// Takes one unit of `limit` if it fits, counting nothing otherwise
    /// (for a caller with another way to make room).
    pub fn try_acquire(self: &Arc<Self>, limit: Limit) -> Option<Permit> {
        self.try_acquire_units(limit, 1)
    }

    fn try_acquire_units(self: &Arc<Self>, limit: Limit, units: u64) -> Option<Permit> {
        let counter = self.counter(limit);
        if counter.fetch_add(units, Relaxed) + units > self.max(limit) {
            counter.fetch_sub(units, Relaxed);
            return None;
        }
        Some(Permit {
            share: self.clone(),
            limit,
            units,
        })
    }

    /// Takes `units` of `limit` whatever the count: for a session started
    /// in the place of one just evicted, whose instance is still on its
    /// way out.
    pub fn acquire_over(self: &Arc<Self>, limit: Limit, units: u64) -> Permit {
        self.counter(limit).fetch_add(units, Relaxed);
        Permit {
            share: self.clone(),
            limit,
            units,
        }
    }

    /// Whether one more of `limit` would fit now.
    pub fn has_room(&self, limit: Limit) -> bool {
        self.counter(limit).load(Relaxed) < self.max(limit)
    }

    /// The tenant's session limit now.
    pub fn max_sessions(&self) -> u64 {
        self.max_sessions.load(Relaxed)
    }

    /// Takes a token to start a session: `session_rate` per second, with a
    /// burst of as many.
    pub fn session_start(&self) -> Result<(), Limit> {
        let rate = self.session_rate.load(Relaxed).max(1) as f64;
        let now = Instant::now();
        let mut bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, last) = bucket.get_or_insert((rate, now));
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * rate).min(rate);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            drop(bucket);
            self.refuse(Limit::SessionRate);
            Err(Limit::SessionRate)
        }
    }

    /// Counts a refusal for `limit`.
    pub fn refuse(&self, limit: Limit) {
        let i = Limit::ALL.iter().position(|l| *l == limit).unwrap_or(0);
        self.refused[i].fetch_add(1, Relaxed);
    }

    /// Refusals so far, by limit.
    pub fn refused(&self) -> [(Limit, u64); Limit::ALL.len()] {
        Limit::ALL.map(|l| {
            let i = Limit::ALL.iter().position(|x| *x == l).unwrap_or(0);
            (l, self.refused[i].load(Relaxed))
        })
    }

    /// Counts now: (instances, sessions, in flight).
    pub fn held(&self) -> (u64, u64, u64) {
        (
            self.instances.load(Relaxed),
            self.sessions.load(Relaxed),
            self.inflight.load(Relaxed),
        )
    }

    /// Bytes of linear memory its instances hold now.
    pub fn memory_held(&self) -> u64 {
        self.memory.load(Relaxed)
    }
}

/// A tenant name as a Prometheus label value.
fn label(t: &str) -> String {
    t.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Every tenant's share by name; kept across reloads, as sessions are.
/// Clones see the same shares.
#[derive(Default, Clone)]
pub struct Shares {
    map: Arc<Mutex<HashMap<String, Arc<TenantShare>>>>,
    /// Every tenant's linear memory together.
    pub memory: Arc<HostMemory>,
}

impl Shares {
    /// The share of `tenant`, created with `limits` on first use (later
    /// limits apply only when a config is swapped in: [`Shares::apply`]).
    pub fn get(&self, tenant: &str, limits: ShareLimits) -> Arc<TenantShare> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(tenant.to_string())
            .or_insert_with(|| {
                let share = TenantShare {
                    tenant: tenant.to_string(),
                    host_memory: self.memory.clone(),
                    ..TenantShare::default()
                };
                share.set_limits(limits);
                Arc::new(share)
            })
            .clone()
    }

    /// Applies the limits of a config now serving.
    pub fn apply<'a>(&self, tenants: impl IntoIterator<Item = (&'a str, ShareLimits)>) {
        for (name, limits) in tenants {
            self.get(name, limits).set_limits(limits);
        }
    }

    /// Appends the shares' counts and refusals, Prometheus text format.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        let all = self.snapshot();
        out.push_str("# HELP edge_share_refusals_total Requests refused because their tenant was over a limit of its share.\n# TYPE edge_share_refusals_total counter\n");
        for (tenant, share) in &all {
            for (limit, n) in share.refused() {
                let _ = writeln!(
                    out,
                    "edge_share_refusals_total{{tenant=\"{}\",limit=\"{}\"}} {n}",
                    label(tenant),
                    limit.key()
                );
            }
        }
        out.push_str("# HELP edge_sessions_reclaimed_total Idle sessions of the tenant ended to make room for another instance or session.\n# TYPE edge_sessions_reclaimed_total counter\n");
        for (tenant, share) in &all {
            let _ = writeln!(
                out,
                "edge_sessions_reclaimed_total{{tenant=\"{}\"}} {}",
                label(tenant),
                share.reclaimed.load(Relaxed)
            );
        }
        out.push_str("# HELP edge_share_held What each tenant holds of its share now.\n# TYPE edge_share_held gauge\n");
        for (tenant, share) in &all {
            let (instances, sessions, inflight) = share.held();
            // Closed files still count until a sweep finds them gone.
            share.open_files.sweep();
            for (kind, n) in [
                ("instances", instances),
                ("sessions", sessions),
                ("inflight", inflight),
                ("open_files", share.open_files.held() as u64),
                ("memory_bytes", share.memory_held()),
            ] {
                let _ = writeln!(
                    out,
                    "edge_share_held{{tenant=\"{}\",kind=\"{kind}\"}} {n}",
                    label(tenant)
                );
            }
        }
        let (held, max, refused) = self.memory.counts();
        let _ = write!(
            out,
            "# HELP edge_guest_memory_bytes Linear memory every tenant's instances hold together (held), and the most they may (max: pool.total_memory_bytes).\n# TYPE edge_guest_memory_bytes gauge\nedge_guest_memory_bytes{{state=\"held\"}} {held}\nedge_guest_memory_bytes{{state=\"max\"}} {max}\n# HELP edge_guest_memory_refusals_total Instances not made, or stopped growing, because every tenant's together held pool.total_memory_bytes.\n# TYPE edge_guest_memory_refusals_total counter\nedge_guest_memory_refusals_total {refused}\n"
        );
        out.push_str("# HELP edge_open_files_refused_total Files, directories and SQLite connections a tenant's guest could not open: the tenant had max_open_files open, or guests had the host's share of descriptors.\n# TYPE edge_open_files_refused_total counter\n");
        for (tenant, share) in &all {
            let _ = writeln!(
                out,
                "edge_open_files_refused_total{{tenant=\"{}\"}} {}",
                label(tenant),
                share.open_files.refused()
            );
        }
    }

    /// Appends each tenant's guest CPU and lane, Prometheus text format.
    pub fn render_cpu(&self, out: &mut String) {
        use std::fmt::Write;
        let all = self.snapshot();
        out.push_str("# HELP edge_cpu_seconds_total Time the tenant's guests ran (polls of their calls, either lane), and CPU their key-value calls, SQLite statements and directory reads took on the blocking pool.\n# TYPE edge_cpu_seconds_total counter\n");
        for (tenant, share) in &all {
            let _ = writeln!(
                out,
                "edge_cpu_seconds_total{{tenant=\"{}\"}} {:.6}",
                label(tenant),
                share.cpu.total().as_secs_f64()
            );
        }
        out.push_str("# HELP edge_cpu_background Whether the tenant's guests run in the background lane now (over its CPU share).\n# TYPE edge_cpu_background gauge\n");
        for (tenant, share) in &all {
            let _ = writeln!(
                out,
                "edge_cpu_background{{tenant=\"{}\"}} {}",
                label(tenant),
                u8::from(share.cpu.in_background())
            );
        }
    }

    /// Every share, by tenant name.
    pub fn snapshot(&self) -> Vec<(String, Arc<TenantShare>)> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<_> = map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn limits(instances: u64, sessions: u64, rate: u64) -> ShareLimits {
        ShareLimits {
            instances,
            sessions,
            inflight: 2,
            session_rate: rate,
            open_files: 8,
            memory: 1 << 20,
        }
    }

    #[test]
    fn memory_is_taken_within_the_tenants_share_and_the_hosts() {
        let shares = Shares::default();
        shares.memory.set_max(5 << 19);
        let a = shares.get("a", limits(2, 1, 10)); // 1 MiB each
        let b = shares.get("b", limits(2, 1, 10));
        let c = shares.get("c", limits(2, 1, 10));
        a.take_memory(1 << 20).unwrap();
        assert_eq!(a.take_memory(1), Err(MemoryRefusal::Tenant));
        b.take_memory(1 << 20).unwrap();
        c.take_memory(1 << 19).unwrap();
        // c is within its own share, but the host holds all it may.
        assert_eq!(c.take_memory(1 << 19), Err(MemoryRefusal::Host));
        assert_eq!(c.memory_held(), 1 << 19, "a refusal takes nothing");
        assert_eq!(shares.memory.counts(), (5 << 19, 5 << 19, 0));
        a.refuse_memory(MemoryRefusal::Tenant);
        c.refuse_memory(MemoryRefusal::Host);
        assert_eq!(shares.memory.counts().2, 1);
        a.give_memory(1 << 20);
        c.take_memory(1 << 19).unwrap();
        assert_eq!(a.memory_held(), 0);
        assert_eq!(a.refused()[4], (Limit::Memory, 1));
        assert_eq!(c.refused()[4], (Limit::Memory, 0), "the host's, not c's");
    }

    #[test]
    fn permits_stop_at_the_limit_and_come_back_on_drop() {
        let shares = Shares::default();
        let s = shares.get("t", limits(2, 1, 10));
        let a = s.acquire(Limit::Instances).unwrap();
        let _b = s.acquire(Limit::Instances).unwrap();
        assert_eq!(s.acquire(Limit::Instances).err(), Some(Limit::Instances));
        drop(a);
        assert!(s.acquire(Limit::Instances).is_ok());
        assert_eq!(s.refused()[0], (Limit::Instances, 1));
        // Another tenant's share is its own.
        let other = shares.get("u", limits(2, 1, 10));
        assert!(other.acquire(Limit::Instances).is_ok());
    }

    #[test]
    fn log_lines_past_the_budget_are_counted_and_reported() {
        let log = LogBudget::default();
        for _ in 0..LogBudget::BURST as usize {
            assert_eq!(log.admit(), Some(0));
        }
        assert_eq!(log.admit(), None);
        assert_eq!(log.admit(), None);
        std::thread::sleep(std::time::Duration::from_millis(150));
        // A tenth of a second buys one line, which says what it left out.
        assert_eq!(log.admit(), Some(2));
    }

    #[test]
    fn session_starts_are_metered() {
        let s = Arc::new(TenantShare::default());
        s.set_limits(limits(10, 10, 3));
        for _ in 0..3 {
            assert!(s.session_start().is_ok());
        }
        assert_eq!(s.session_start(), Err(Limit::SessionRate));
    }

    #[test]
    fn new_limits_apply_only_when_applied() {
        let shares = Shares::default();
        let s = shares.get("t", limits(1, 1, 1));
        let _a = s.acquire(Limit::Instances).unwrap();
        // A config built but not swapped in changes nothing.
        let _ = shares.get("t", limits(5, 1, 1));
        assert!(s.acquire(Limit::Instances).is_err());
        shares.apply([("t", limits(5, 1, 1))]);
        assert!(s.acquire(Limit::Instances).is_ok());
    }
}
