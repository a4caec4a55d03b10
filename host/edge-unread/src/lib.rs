//! Results (rows, keys) a host call hands a WASI 0.3 guest as a stream.
//!
//! The calls read a whole result before the stream opens, so that a
//! failure is the call's and never the stream's (SQLite, PostgreSQL, the
//! key-value store's keys). Until the guest reads it, the result lives in
//! host memory, outside the guest's memory cap: each is bounded (16 MiB
//! of rows), but a guest could open hundreds and read none. So each
//! instance has an [`UnreadBudget`]: a result that would take the bytes
//! its unread streams hold past [`MAX_UNREAD_BYTES`] is refused, and a
//! stream gives its bytes back once read to the end or dropped. Items
//! leave the host only as fast as the guest reads them. A tenant's
//! instances share [`MAX_TENANT_UNREAD_BYTES`] as well: hundreds of them,
//! each within its own budget, would otherwise hold gigabytes. Other host
//! memory an instance holds for its guest (a compare-and-swap handle's
//! value) is [`Held`] in the tenant's budget too.
#![deny(missing_docs)]

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::task::{Context, Poll};
use wasmtime::StoreContextMut;
use wasmtime::component::{Destination, StreamProducer, StreamResult, VecBuffer};

/// Host memory one instance's unread result streams may hold.
pub const MAX_UNREAD_BYTES: usize = 64 << 20;

/// Host memory all of one tenant's instances' unread streams may hold.
pub const MAX_TENANT_UNREAD_BYTES: usize = 256 << 20;

/// The bytes an instance's unread result streams hold, and its tenant's.
/// Cheap to clone (shared); one per instance.
#[derive(Clone, Debug, Default)]
pub struct UnreadBudget {
    instance: Arc<AtomicUsize>,
    tenant: Option<Arc<AtomicUsize>>,
}

/// A result the budget has no room for.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    /// What the instance's (or, if `tenant`, the tenant's) unread streams
    /// hold.
    pub held: usize,
    /// What the result would add.
    pub asked: usize,
    /// Whether the tenant's budget refused (not the instance's).
    pub tenant: bool,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (who, max) = match self.tenant {
            false => ("this instance holds", MAX_UNREAD_BYTES),
            true => ("this tenant's instances hold", MAX_TENANT_UNREAD_BYTES),
        };
        write!(
            f,
            "{who} {} bytes of results not read; {} more would pass the {max}-byte limit: read or drop those streams first",
            self.held, self.asked
        )
    }
}

/// Adds `bytes` to `counter` unless that passes `max`; else what it held.
fn reserve(counter: &AtomicUsize, bytes: usize, max: usize) -> Result<(), usize> {
    let mut held = counter.load(Relaxed);
    loop {
        let after = held.saturating_add(bytes);
        if after > max {
            return Err(held);
        }
        match counter.compare_exchange_weak(held, after, Relaxed, Relaxed) {
            Ok(_) => return Ok(()),
            Err(now) => held = now,
        }
    }
}

impl UnreadBudget {
    /// An instance's budget within its tenant's (`tenant`: the bytes all
    /// of the tenant's instances' unread streams hold).
    pub fn for_tenant(tenant: Arc<AtomicUsize>) -> Self {
        Self {
            instance: Arc::default(),
            tenant: Some(tenant),
        }
    }

    /// What the instance's unread streams hold.
    pub fn held(&self) -> usize {
        self.instance.load(Relaxed)
    }

    /// A stream producer of `items`, which take `bytes` of host memory,
    /// charged to the budget; refused if it would pass the instance's or
    /// the tenant's.
    pub fn stream<T>(&self, items: Vec<T>, bytes: usize) -> Result<Rationed<T>, Refused> {
        reserve(&self.instance, bytes, MAX_UNREAD_BYTES).map_err(|held| Refused {
            held,
            asked: bytes,
            tenant: false,
        })?;
        if let Some(tenant) = &self.tenant
            && let Err(held) = reserve(tenant, bytes, MAX_TENANT_UNREAD_BYTES)
        {
            self.instance.fetch_sub(bytes, Relaxed);
            return Err(Refused {
                held,
                asked: bytes,
                tenant: true,
            });
        }
        Ok(Rationed {
            items: items.into(),
            bytes,
            budget: self.clone(),
        })
    }
}

/// Bytes of host memory held for an instance outside a stream (a
/// compare-and-swap handle's value), in its tenant's budget; given back
/// when dropped.
#[derive(Debug)]
pub struct Held {
    bytes: usize,
    tenant: Option<Arc<AtomicUsize>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(tenant) = &self.tenant {
            tenant.fetch_sub(self.bytes, Relaxed);
        }
    }
}

impl UnreadBudget {
    /// `bytes` held in the tenant's budget (shared with its unread
    /// streams) until the answer is dropped; refused past it with what
    /// the tenant holds. The instance's own share of such bytes is its
    /// caller's to bound.
    pub fn hold(&self, bytes: usize) -> Result<Held, usize> {
        if let Some(tenant) = &self.tenant {
            reserve(tenant, bytes, MAX_TENANT_UNREAD_BYTES)?;
        }
        Ok(Held {
            bytes,
            tenant: self.tenant.clone(),
        })
    }
}

impl UnreadBudget {
    /// [`UnreadBudget::hold`] for a call's arguments (a statement and its
    /// values): the host's copies of the guest's (up to Wasmtime's 128 MiB
    /// a call), held while the call waits for a slot, its connection or
    /// the tenant's server, so that the tenant's instances cannot pile up
    /// gigabytes of them. Refused in words.
    pub fn hold_call(&self, bytes: usize) -> Result<Held, String> {
        self.hold(bytes).map_err(|held| {
            format!(
                "the statement and its values take {bytes} bytes, and this tenant's calls and unread results hold {held}: more would pass the {MAX_TENANT_UNREAD_BYTES}-byte limit"
            )
        })
    }
}

/// Items handed out as the reader asks for them; their bytes are given
/// back to the budget when the last is handed out or the stream is
/// dropped.
pub struct Rationed<T> {
    items: VecDeque<T>,
    bytes: usize,
    budget: UnreadBudget,
}

impl<T> Rationed<T> {
    fn give_back(&mut self) {
        let bytes = std::mem::take(&mut self.bytes);
        self.budget.instance.fetch_sub(bytes, Relaxed);
        if let Some(tenant) = &self.budget.tenant {
            tenant.fetch_sub(bytes, Relaxed);
        }
    }
}

impl<T> Drop for Rationed<T> {
    fn drop(&mut self) {
        self.give_back();
    }
}

impl<T, D> StreamProducer<D> for Rationed<T>
where
    T: Unpin + Send + Sync + 'static,
{
    type Item = T;
    type Buffer = VecBuffer<T>;

    fn poll_produce<'a>(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        store: StoreContextMut<'a, D>,
        mut dst: Destination<'a, Self::Item, Self::Buffer>,
        _: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        let me = self.get_mut();
        // As many as the reader asked for (a host reader: all).
        let n = dst
            .remaining(store)
            .unwrap_or(usize::MAX)
            .min(me.items.len());
        dst.set_buffer(me.items.drain(..n).collect::<Vec<T>>().into());
        if me.items.is_empty() {
            me.give_back();
            Poll::Ready(Ok(StreamResult::Dropped))
        } else {
            Poll::Ready(Ok(StreamResult::Completed))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_refuses_past_its_limit_and_streams_give_back() {
        let budget = UnreadBudget::default();
        let a = budget.stream(vec![1u8; 4], 40 << 20).unwrap();
        let refused = budget.stream(vec![2u8], 30 << 20).map(|_| ()).unwrap_err();
        assert_eq!(
            refused,
            Refused {
                held: 40 << 20,
                asked: 30 << 20,
                tenant: false,
            }
        );
        assert!(refused.to_string().contains("67108864-byte limit"));
        let b = budget.stream(vec![3u8], 24 << 20).unwrap();
        assert_eq!(budget.held(), MAX_UNREAD_BYTES);
        drop(a);
        assert_eq!(budget.held(), 24 << 20);
        drop(b);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_tenants_instances_share_its_budget() {
        let tenant = Arc::new(AtomicUsize::new(0));
        let instances: Vec<_> = (0..5)
            .map(|_| UnreadBudget::for_tenant(tenant.clone()))
            .collect();
        let held: Vec<_> = instances[..4]
            .iter()
            .map(|b| b.stream(vec![0u8], MAX_UNREAD_BYTES).unwrap())
            .collect();
        assert_eq!(tenant.load(Relaxed), MAX_TENANT_UNREAD_BYTES);
        // A fifth instance, within its own budget, past the tenant's.
        let refused = instances[4].stream(vec![0u8], 1).map(|_| ()).unwrap_err();
        assert!(refused.tenant, "{refused:?}");
        assert!(
            refused.to_string().contains("this tenant's instances hold"),
            "{refused}"
        );
        assert_eq!(
            instances[4].held(),
            0,
            "the instance's reservation was undone"
        );
        drop(held);
        assert_eq!(tenant.load(Relaxed), 0);
        instances[4].stream(vec![0u8], 1).unwrap();
    }
}
