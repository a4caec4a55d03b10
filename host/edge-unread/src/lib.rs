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
//! leave the host only as fast as the guest reads them.
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

/// The bytes an instance's unread result streams hold. Cheap to clone
/// (shared); one per instance.
#[derive(Clone, Debug, Default)]
pub struct UnreadBudget(Arc<AtomicUsize>);

/// A result the budget has no room for.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    /// What the instance's unread streams hold.
    pub held: usize,
    /// What the result would add.
    pub asked: usize,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "this instance holds {} bytes of results it has not read; {} more would pass the {MAX_UNREAD_BYTES}-byte limit: read or drop those streams first",
            self.held, self.asked
        )
    }
}

impl UnreadBudget {
    /// What the instance's unread streams hold.
    pub fn held(&self) -> usize {
        self.0.load(Relaxed)
    }

    /// A stream producer of `items`, which take `bytes` of host memory,
    /// charged to the budget; refused if it would pass it.
    pub fn stream<T>(&self, items: Vec<T>, bytes: usize) -> Result<Rationed<T>, Refused> {
        let mut held = self.0.load(Relaxed);
        loop {
            let after = held.saturating_add(bytes);
            if after > MAX_UNREAD_BYTES {
                return Err(Refused { held, asked: bytes });
            }
            match self.0.compare_exchange_weak(held, after, Relaxed, Relaxed) {
                Ok(_) => break,
                Err(now) => held = now,
            }
        }
        Ok(Rationed {
            items: items.into(),
            bytes,
            budget: self.clone(),
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
        self.budget
            .0
            .fetch_sub(std::mem::take(&mut self.bytes), Relaxed);
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
                asked: 30 << 20
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
}
