//! Name lookups a tenant cannot pile up.
//!
//! The system resolver (`getaddrinfo`, which reads `/etc/hosts` and the
//! operator's resolvers as every other program here does) blocks a thread
//! for as long as the name's servers take to answer: seconds for one whose
//! servers are silent. `tokio::net::lookup_host` runs it on the runtime's
//! blocking pool and, when its caller stops waiting, leaves it running
//! there. A guest resolving such names and giving up at once (or a flood
//! of outbound requests to them) could fill the pool with blocked threads,
//! and every tenant's disk work (SQLite statements, key-value storage,
//! files) would queue behind them.
//!
//! So a lookup holds a place among its tenant's [`PER_TENANT`] lookups and
//! the host's [`PER_HOST`] until the resolver itself returns, not until its
//! caller gives up; one past either waits for a place (its caller's
//! deadline bounds the wait). The host's places are fewer than tokio's
//! 512 blocking threads, so disk work always finds a thread. A lookup is
//! its tenant's work (charged to it, at `SCHED_IDLE` while it is behind:
//! slow to return when the cores are busy), so tenants in the background
//! lane take theirs from [`BEHIND_SHARE`] of the host's places: the
//! others are out of their reach.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use edge_outbound_http::{TenantOutbound, lookup};
//! let tenant = std::sync::Arc::new(TenantOutbound::new("acme", 4));
//! let found = lookup::resolve(tenant.clone(), "localhost".into(), 80).await.unwrap();
//! assert!(found.iter().all(|a| a.ip().is_loopback() && a.port() == 80));
//! assert_eq!(tenant.lookups_running(), 0);
//! # });
//! ```

use crate::limit::TenantOutbound;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Lookups one tenant may have running at once.
pub const PER_TENANT: usize = 16;

/// Lookups the host runs at once, whatever their tenants.
pub const PER_HOST: usize = 128;

static HOST: Semaphore = Semaphore::const_new(PER_HOST);

/// The host's places tenants in the background lane may hold.
pub const BEHIND_SHARE: usize = PER_HOST / 2;

static BEHIND: Semaphore = Semaphore::const_new(BEHIND_SHARE);

/// The addresses of `name` (a domain name, not an address literal) with
/// `port`, as the system resolver finds them. The lookup is a task of its
/// own, started at once: it goes on whether or not its caller polls (a
/// place handed to a caller not being polled would sit unused), and
/// dropping the handle gives up on it (once at the resolver, it finishes
/// there in its places).
pub fn resolve(
    tenant: Arc<TenantOutbound>,
    name: String,
    port: u16,
) -> impl Future<Output = std::io::Result<Vec<SocketAddr>>> + Send + 'static {
    let mut task = wasmtime_wasi::runtime::spawn(async move {
        holding_places(&tenant, move || {
            Ok((name.as_str(), port).to_socket_addrs()?.collect())
        })
        .await
    });
    // Through the inner handle: a task cancelled (its runtime shutting
    // down) is an error, not a panic.
    async move {
        (&mut *task)
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}

/// Runs `lookup` on the blocking pool once it has a place of `tenant`'s and
/// one of the host's (of those for tenants behind, if it is), which it
/// keeps until it returns.
async fn holding_places<T: Send + 'static>(
    tenant: &TenantOutbound,
    lookup: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tenant
        .lookups_total
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // The tenant's place first: a tenant waiting at its own cap holds none
    // of the host's.
    let tenant_place = tenant.lookup_place().await;
    let work = tenant.work();
    let (behind_place, host_place) = loop {
        let behind_place = if work.in_background() {
            let place = BEHIND.acquire().await;
            Some(place.expect("the host's semaphore is never closed"))
        } else {
            None
        };
        let host_place = HOST
            .acquire()
            .await
            .expect("the host's semaphore is never closed");
        // A tenant that went behind while it waited takes a place of
        // theirs too, before the host's again (never while holding the
        // host's: others hold theirs while they wait for the host's).
        if behind_place.is_some() || !work.in_background() {
            break (behind_place, host_place);
        }
    };
    // Dropping the handle detaches the task; the places go with it. The
    // resolver's CPU is the tenant's.
    work.spawn(move || {
        let _places = (tenant_place, behind_place, host_place);
        lookup()
    })
    .await
    .map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_lookup_its_caller_gave_up_on_keeps_its_place_until_it_returns() {
        let tenant = std::sync::Arc::new(TenantOutbound::new("t", 1));
        // A resolver that answers only when the test says so.
        let (answer, asked) = std::sync::mpsc::channel::<()>();
        let slow = move || {
            let _ = asked.recv();
            Ok(())
        };
        // The caller gives up (its first poll takes the places and starts
        // the resolver).
        let gave_up =
            tokio::time::timeout(Duration::from_millis(20), holding_places(&tenant, slow)).await;
        assert!(gave_up.is_err());
        assert_eq!(tenant.lookups_running(), 1, "the resolver still runs");
        answer.send(()).unwrap();
        for _ in 0..1000 {
            if tenant.lookups_running() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            tenant.lookups_running(),
            0,
            "its place is back once it returned"
        );
    }

    #[tokio::test]
    async fn a_lookup_past_the_tenants_cap_waits_and_other_tenants_go_on() {
        let tenant = std::sync::Arc::new(TenantOutbound::new("t", 1));
        let mut held = Vec::new();
        for _ in 0..PER_TENANT {
            held.push(tenant.lookup_place().await);
        }
        let waiting = tokio::spawn({
            let tenant = tenant.clone();
            async move { resolve(tenant, "localhost".into(), 2).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a lookup past the cap waits");
        let other = Arc::new(TenantOutbound::new("u", 1));
        assert!(
            !resolve(other, "localhost".into(), 3)
                .await
                .unwrap()
                .is_empty()
        );
        held.pop();
        let found = waiting.await.unwrap().unwrap();
        assert!(!found.is_empty() && found.iter().all(|a| a.port() == 2));
    }

    /// A tenant in the background lane.
    struct Behind;

    impl edge_blocking::Lane for Behind {
        fn charge(&self, _cpu: Duration) {}
        fn in_background(&self) -> bool {
            true
        }
        fn long_task(&self) {}
    }

    #[tokio::test]
    async fn tenants_behind_take_at_most_their_share_of_the_hosts_places() {
        let share = BEHIND.acquire_many(BEHIND_SHARE as u32).await.unwrap();
        let behind = Arc::new(TenantOutbound::new("b", 1));
        behind.set_work(&edge_blocking::TenantWork::new(Arc::new(Behind)));
        let waiting = tokio::spawn(resolve(behind, "localhost".into(), 2));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "behind, past the share: waits");
        let front = Arc::new(TenantOutbound::new("f", 1));
        assert!(
            !resolve(front, "localhost".into(), 3)
                .await
                .unwrap()
                .is_empty()
        );
        drop(share);
        assert!(!waiting.await.unwrap().unwrap().is_empty());
    }
}
