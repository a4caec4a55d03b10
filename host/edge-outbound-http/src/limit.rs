//! Per-tenant outbound accounting: a cap on requests in flight, and the
//! counters `/metrics` shows.
//!
//! A guest can start outbound requests as fast as it can call
//! `outgoing-handler.handle`, each holding a socket until its response body
//! is read or dropped; without a cap one tenant could take every descriptor
//! of the process. A request over the cap fails at once with
//! `connection-limit-reached` (a guest that waited would hold its instance
//! and the client's connection instead). The count is per tenant, across
//! its components, and survives reloads (a new config only changes the
//! cap), so requests started before a reload still count.
//!
//! ```
//! use edge_outbound_http::limit::Registry;
//! let registry = Registry::default();
//! let tenant = registry.tenant("acme", 1);
//! let first = tenant.acquire().unwrap();
//! assert!(tenant.acquire().is_none()); // over the cap
//! drop(first);
//! assert!(tenant.acquire().is_some());
//! assert!(registry.render().contains("edge_outbound_refused_total{tenant=\"acme\",reason=\"limit\"} 1"));
//! ```

use crate::address::SharedListeners;
use edge_blocking::TenantWork;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};

/// The default cap on a tenant's outbound requests in flight.
pub const DEFAULT_MAX_REQUESTS: usize = 64;

/// Outbound state of every tenant, and the host's listeners (which no
/// guest may reach); one per process.
#[derive(Default)]
pub struct Registry {
    tenants: Mutex<BTreeMap<String, Arc<TenantOutbound>>>,
    /// The host's bound listeners, set once they are bound.
    pub listeners: SharedListeners,
}

impl Registry {
    /// The outbound state of `tenant`, created on first use with the cap
    /// `max_requests`. An existing tenant's cap changes only by
    /// [`Registry::apply`], once the config that sets it serves.
    pub fn tenant(&self, tenant: &str, max_requests: usize) -> Arc<TenantOutbound> {
        let mut tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        tenants
            .entry(tenant.to_string())
            .or_insert_with(|| Arc::new(TenantOutbound::new(tenant, max_requests)))
            .clone()
    }

    /// Puts the caps of a config now serving in force: `(tenant, cap)`.
    pub fn apply<'a>(&self, caps: impl IntoIterator<Item = (&'a str, usize)>) {
        for (tenant, max) in caps {
            self.tenant(tenant, max).max.store(max, Relaxed);
        }
    }

    /// The counters in the Prometheus text format.
    pub fn render(&self) -> String {
        let tenants: Vec<_> = self
            .tenants
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        let mut out = String::new();
        out.push_str("# HELP edge_outbound_refused_total Outbound requests refused: allowlist (name not in allowed_outbound_hosts), address (resolved to a refused range or a listener of the host), limit (max_outbound_requests in flight).\n# TYPE edge_outbound_refused_total counter\n");
        for t in &tenants {
            for (reason, n) in [
                ("allowlist", &t.refused_allowlist),
                ("address", &t.refused_address),
                ("limit", &t.refused_limit),
            ] {
                let _ = writeln!(
                    out,
                    "edge_outbound_refused_total{{tenant=\"{}\",reason=\"{reason}\"}} {}",
                    t.label,
                    n.load(Relaxed)
                );
            }
        }
        let per_tenant: [Series; 3] = [
            (
                "edge_outbound_in_flight",
                "gauge",
                "Outbound requests sent and not yet finished.",
                |t| t.in_flight.load(Relaxed) as u64,
            ),
            (
                "edge_outbound_lookups_running",
                "gauge",
                "Name lookups running (at most 16 per tenant; one past that waits).",
                |t| t.lookups_running() as u64,
            ),
            (
                "edge_outbound_lookups_total",
                "counter",
                "Name lookups started (outbound requests, database clients and wasi:sockets).",
                |t| t.lookups_total.load(Relaxed),
            ),
        ];
        for (name, kind, help, value) in per_tenant {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for t in &tenants {
                let _ = writeln!(out, "{name}{{tenant=\"{}\"}} {}", t.label, value(t));
            }
        }
        crate::lookup::render(&mut out);
        out
    }
}

/// A series with one value per tenant: name, type, help, value.
type Series = (
    &'static str,
    &'static str,
    &'static str,
    fn(&TenantOutbound) -> u64,
);

/// One tenant's outbound cap and counters.
#[derive(Debug)]
pub struct TenantOutbound {
    /// The tenant's name, escaped for a label value.
    label: String,
    max: AtomicUsize,
    in_flight: AtomicUsize,
    /// Requests refused by name (`allowed_outbound_hosts`).
    pub refused_allowlist: AtomicU64,
    /// Requests refused by address.
    pub refused_address: AtomicU64,
    /// Requests refused over the cap.
    pub refused_limit: AtomicU64,
    /// Places for name lookups ([`crate::lookup`]).
    lookups: Arc<tokio::sync::Semaphore>,
    /// Name lookups started.
    pub lookups_total: AtomicU64,
    /// Where its outbound work outside its guests' calls (sends, lookups,
    /// connections' I/O) runs and is charged.
    work: OnceLock<TenantWork>,
}

impl TenantOutbound {
    /// State for a tenant not in any registry (tests, tools).
    pub fn new(tenant: &str, max_requests: usize) -> Self {
        Self {
            label: tenant.replace('\\', "\\\\").replace('"', "\\\""),
            max: AtomicUsize::new(max_requests),
            in_flight: AtomicUsize::new(0),
            refused_allowlist: AtomicU64::new(0),
            refused_address: AtomicU64::new(0),
            refused_limit: AtomicU64::new(0),
            lookups: Arc::new(tokio::sync::Semaphore::new(crate::lookup::PER_TENANT)),
            lookups_total: AtomicU64::new(0),
            work: OnceLock::new(),
        }
    }

    /// Charges the tenant's outbound work to `work` (its lane) from now
    /// on; a tenant has one lane, so only the first call counts.
    pub fn set_work(&self, work: &TenantWork) {
        let _ = self.work.get_or_init(|| work.clone());
    }

    /// Where the tenant's outbound work runs and is charged (uncharged
    /// before [`TenantOutbound::set_work`]: tests, tools).
    pub fn work(&self) -> TenantWork {
        self.work.get().cloned().unwrap_or_default()
    }

    /// A place for one name lookup, once one is free.
    pub async fn lookup_place(&self) -> tokio::sync::OwnedSemaphorePermit {
        self.lookups
            .clone()
            .acquire_owned()
            .await
            .expect("a tenant's lookup semaphore is never closed")
    }

    /// How many of its name lookups are running.
    pub fn lookups_running(&self) -> usize {
        crate::lookup::PER_TENANT - self.lookups.available_permits()
    }

    /// The cap in force.
    pub fn max_requests(&self) -> usize {
        self.max.load(Relaxed)
    }

    /// A place for one more request in flight, or `None` (counted) if the
    /// tenant is at its cap.
    pub fn acquire(self: &Arc<Self>) -> Option<Permit> {
        let before = self.in_flight.fetch_add(1, Relaxed);
        if before >= self.max.load(Relaxed) {
            self.in_flight.fetch_sub(1, Relaxed);
            self.refused_limit.fetch_add(1, Relaxed);
            return None;
        }
        Some(Permit(self.clone()))
    }
}

/// One request in flight; the place is given back on drop.
#[derive(Debug)]
pub struct Permit(Arc<TenantOutbound>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_per_tenant_and_changes_in_place() {
        let r = Registry::default();
        let a = r.tenant("a", 2);
        let b = r.tenant("b", 2);
        let held: Vec<_> = (0..2).filter_map(|_| a.acquire()).collect();
        assert_eq!(held.len(), 2);
        assert!(a.acquire().is_none());
        assert!(b.acquire().is_some(), "another tenant is not affected");
        // A config built but not serving changes nothing; once it serves,
        // its cap applies to the requests in flight.
        let a2 = r.tenant("a", 3);
        assert!(Arc::ptr_eq(&a, &a2));
        assert!(a.acquire().is_none());
        r.apply([("a", 3)]);
        assert!(a.acquire().is_some());
        let text = r.render();
        assert!(text.contains("edge_outbound_refused_total{tenant=\"a\",reason=\"limit\"} 2"));
        assert!(text.contains("edge_outbound_in_flight{tenant=\"a\"} 2"));
    }
}
