//! `wasi:keyvalue@0.2.0-draft2` (`store`, `atomics` with compare-and-swap,
//! `batch`): the revision Spin's hosts provide and its SDKs for interpreted
//! languages import (Python's `spin-sdk` 3.x imports it in every app),
//! over the same stores and grants as the other key-value interfaces.
//!
//! What differs from `0.2.0-draft`: `open` and every operation answer
//! `result<_, error>`; cursors are strings (ours carry the same number as
//! the draft's); `increment` is signed; `get-many` returns every key with
//! its value or none; a `cas` handle remembers a key's value when it was
//! made, and `swap` writes only if the value is still that.

use crate::handle::{Access, Args, Swap};
use crate::{Bucket, Handle, KeyValue, KeyValueView, KvError};
use wasmtime::component::{HasData, Linker, Resource};

mod generated {
    wasmtime::component::bindgen!({
        inline: "
            package edge:keyvalue-draft2;
            world host {
                import wasi:keyvalue/store@0.2.0-draft2;
                import wasi:keyvalue/atomics@0.2.0-draft2;
                import wasi:keyvalue/batch@0.2.0-draft2;
            }
        ",
        path: ["../../wit/spin/keyvalue-2024-10-17"],
        imports: { default: async | trappable },
        with: {
            "wasi:keyvalue/store.bucket": crate::Bucket,
            "wasi:keyvalue/atomics.cas": super::Cas,
        },
    });
}

use generated::wasi::keyvalue::{atomics, batch, store};

/// A compare-and-swap handle: the bucket, the key, and the value the key
/// had when the handle was made.
pub struct Cas {
    store: Handle,
    key: String,
    current: Option<Vec<u8>>,
    /// The value's bytes in the tenant's budget of host memory.
    _held: edge_unread::Held,
}

/// The words a guest gets for a failed operation, in draft2's variants.
fn error(err: KvError) -> wasmtime::Result<store::Error> {
    Ok(match err {
        KvError::AccessDenied => store::Error::AccessDenied,
        KvError::Trap(e) => return Err(e),
        // Detail (file, server, redb's words) is for the operator's log.
        KvError::Storage(_) | KvError::Db(_) | KvError::Script(..) => {
            store::Error::Other(KvError::Unavailable.to_string())
        }
        other => store::Error::Other(other.to_string()),
    })
}

/// Runs a store operation on the blocking pool, with its error in
/// draft2's terms (a trap stays a trap).
async fn run<R: Send + 'static>(
    store: Result<Handle, KvError>,
    access: Access,
    f: impl FnOnce(&Handle) -> Result<R, KvError> + Send + 'static,
) -> wasmtime::Result<Result<R, store::Error>> {
    let result = match store {
        Ok(s) => s.blocking(access, f).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(v) => Ok(Ok(v)),
        Err(e) => error(e).map(Err),
    }
}

impl KeyValue<'_> {
    fn draft2_store(&self, bucket: &Resource<Bucket>) -> Result<Handle, KvError> {
        Ok(self.table.get(bucket)?.store.clone())
    }
}

impl store::Host for KeyValue<'_> {
    async fn open(
        &mut self,
        identifier: String,
    ) -> wasmtime::Result<Result<Resource<Bucket>, store::Error>> {
        let Some(store) = self.grants.stores.get(&identifier).cloned() else {
            return Ok(Err(store::Error::AccessDenied));
        };
        Ok(Ok(self.table.push(Bucket { store })?))
    }
}

impl store::HostBucket for KeyValue<'_> {
    async fn get(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, store::Error>> {
        run(
            self.draft2_store(&bucket)
                .and_then(|s| s.before(Args::Key(&key))),
            Access::Read,
            move |s| s.get(&key),
        )
        .await
    }

    async fn set(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), store::Error>> {
        run(
            self.draft2_store(&bucket)
                .and_then(|s| s.before(Args::Pair(&key, &value))),
            Access::Write,
            move |s| s.set(&key, &value),
        )
        .await
    }

    async fn delete(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<(), store::Error>> {
        run(
            self.draft2_store(&bucket)
                .and_then(|s| s.before(Args::Key(&key))),
            Access::Write,
            move |s| s.delete(&key),
        )
        .await
    }

    async fn exists(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<bool, store::Error>> {
        run(
            self.draft2_store(&bucket)
                .and_then(|s| s.before(Args::Key(&key))),
            Access::Read,
            move |s| Ok(s.get(&key)?.is_some()),
        )
        .await
    }

    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        cursor: Option<String>,
    ) -> wasmtime::Result<Result<store::KeyResponse, store::Error>> {
        let cursor = match cursor.as_deref().map(str::parse::<u64>) {
            None => 0,
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                return Ok(Err(store::Error::Other(format!(
                    "cursor {:?} is not one this store gave (a decimal number)",
                    cursor.unwrap_or_default()
                ))));
            }
        };
        let page = run(self.draft2_store(&bucket), Access::Read, move |s| {
            s.list_keys(cursor)
        })
        .await?;
        Ok(page.map(|(keys, next)| store::KeyResponse {
            keys,
            cursor: next.map(|n| n.to_string()),
        }))
    }

    async fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.delete(bucket)?;
        Ok(())
    }
}

/// Host memory the compare-and-swap handles of one instance may hold:
/// each keeps the value it read (up to [`crate::MAX_VALUE_BYTES`]) until
/// swapped or dropped, outside the guest's memory. All of a tenant's
/// instances' handles hold no more than its budget of host memory
/// ([`edge_unread::MAX_TENANT_UNREAD_BYTES`], with its unread results).
pub const MAX_CAS_BYTES: usize = 8 << 20;

impl KeyValue<'_> {
    /// A handle on `key` holding its value `current`, within the
    /// instance's [`MAX_CAS_BYTES`] and its tenant's budget of host memory
    /// (shared with unread results); refused in words past either.
    fn cas_handle(
        &mut self,
        store: Handle,
        key: String,
        current: Option<Vec<u8>>,
    ) -> wasmtime::Result<Result<Resource<Cas>, store::Error>> {
        let size = current.as_ref().map_or(0, Vec::len);
        if *self.cas_bytes + size > MAX_CAS_BYTES {
            return Ok(Err(store::Error::Other(format!(
                "this instance's compare-and-swap handles hold {} bytes of values, at most {MAX_CAS_BYTES}: swap or drop some first",
                *self.cas_bytes
            ))));
        }
        let held = match self.unread.hold(size) {
            Ok(held) => held,
            Err(tenant_holds) => {
                return Ok(Err(store::Error::Other(format!(
                    "this tenant's instances hold {tenant_holds} bytes of compare-and-swap values and unread results; {size} more would pass its {}-byte limit: swap or drop some first",
                    edge_unread::MAX_TENANT_UNREAD_BYTES
                ))));
            }
        };
        *self.cas_bytes += size;
        Ok(Ok(self.table.push(Cas {
            store,
            key,
            current,
            _held: held,
        })?))
    }

    /// A handle holding `current` is gone.
    fn release_cas(&mut self, current: &Option<Vec<u8>>) {
        *self.cas_bytes = self
            .cas_bytes
            .saturating_sub(current.as_ref().map_or(0, Vec::len));
    }
}

impl atomics::Host for KeyValue<'_> {
    async fn increment(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        delta: i64,
    ) -> wasmtime::Result<Result<i64, store::Error>> {
        run(
            self.draft2_store(&bucket)
                .and_then(|s| s.before(Args::Key(&key))),
            Access::Write,
            move |s| s.add(&key, delta),
        )
        .await
    }

    async fn swap(
        &mut self,
        cas: Resource<Cas>,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), atomics::CasError>> {
        // Its bytes in the tenant's budget go back with the rest.
        let Cas {
            store,
            key,
            current,
            ..
        } = self.table.delete(cas)?;
        self.release_cas(&current);
        let swapped = {
            let key = key.clone();
            run(
                store.clone().before(Args::Pair(&key, &value)),
                Access::Write,
                move |s| s.swap_if(&key, current.as_deref(), &value),
            )
            .await?
        };
        Ok(match swapped {
            Ok(Swap::Done) => Ok(()),
            // Changed meanwhile: a new handle holding the value as it is
            // now, to retry from.
            // (Within the budgets as any new handle: a guest's handles on
            // a key it then fills would otherwise all come back full.)
            Ok(Swap::Changed(now)) => match self.cas_handle(store, key, now)? {
                Ok(retry) => Err(atomics::CasError::CasFailed(retry)),
                Err(refused) => Err(atomics::CasError::StoreError(refused)),
            },
            Err(e) => Err(atomics::CasError::StoreError(e)),
        })
    }
}

impl atomics::HostCas for KeyValue<'_> {
    async fn new(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<Resource<Cas>, store::Error>> {
        let store = match self.draft2_store(&bucket) {
            Ok(s) => s,
            Err(e) => return error(e).map(Err),
        };
        let read = {
            let key = key.clone();
            run(
                store.clone().before(Args::Key(&key)),
                Access::Read,
                move |s| s.get(&key),
            )
            .await?
        };
        Ok(match read {
            Ok(current) => self.cas_handle(store, key, current)?,
            Err(e) => Err(e),
        })
    }

    async fn current(
        &mut self,
        cas: Resource<Cas>,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, store::Error>> {
        Ok(Ok(self.table.get(&cas)?.current.clone()))
    }

    async fn drop(&mut self, cas: Resource<Cas>) -> wasmtime::Result<()> {
        let cas = self.table.delete(cas)?;
        self.release_cas(&cas.current);
        Ok(())
    }
}

impl batch::Host for KeyValue<'_> {
    async fn get_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> wasmtime::Result<Result<Vec<(String, Option<Vec<u8>>)>, store::Error>> {
        run(
            self.draft2_store(&bucket)
                .and_then(|s| s.before(Args::Keys(&keys))),
            Access::Read,
            move |s| {
                let values = s.get_many(&keys)?;
                Ok(keys.into_iter().zip(values).collect())
            },
        )
        .await
    }

    async fn set_many(
        &mut self,
        bucket: Resource<Bucket>,
        key_values: Vec<(String, Vec<u8>)>,
    ) -> wasmtime::Result<Result<(), store::Error>> {
        run(
            self.draft2_store(&bucket)
                .and_then(|s| s.before(Args::Pairs(&key_values))),
            Access::Write,
            move |s| s.set_many(&key_values),
        )
        .await
    }

    async fn delete_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> wasmtime::Result<Result<(), store::Error>> {
        run(
            self.draft2_store(&bucket)
                .and_then(|s| s.before(Args::Keys(&keys))),
            Access::Write,
            move |s| s.delete_many(&keys),
        )
        .await
    }
}

struct HasKeyValue;

impl HasData for HasKeyValue {
    type Data<'a> = KeyValue<'a>;
}

/// Adds `wasi:keyvalue/{store,atomics,batch}@0.2.0-draft2` to a linker.
pub fn add_to_linker<T: KeyValueView + Send + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    fn view<T: KeyValueView>(t: &mut T) -> KeyValue<'_> {
        t.keyvalue()
    }
    store::add_to_linker::<T, HasKeyValue>(linker, view::<T>)?;
    atomics::add_to_linker::<T, HasKeyValue>(linker, view::<T>)?;
    batch::add_to_linker::<T, HasKeyValue>(linker, view::<T>)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use atomics::HostCas;
    use store::HostBucket;
    use wasmtime::component::ResourceTable;

    /// One instance's key-value state, granted a fresh store `default`.
    struct Instance {
        _dir: tempfile::TempDir,
        grants: crate::Grants,
        table: ResourceTable,
        cas_bytes: usize,
        unread: edge_unread::UnreadBudget,
    }

    impl Instance {
        fn new(unread: edge_unread::UnreadBudget) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let handle = crate::Registry::new(dir.path())
                .open("t", "default", 64 << 20)
                .unwrap();
            Self {
                _dir: dir,
                grants: crate::Grants::new([("default".to_string(), handle)].into()),
                table: ResourceTable::new(),
                cas_bytes: 0,
                unread,
            }
        }

        fn kv(&mut self) -> KeyValue<'_> {
            KeyValue {
                grants: &self.grants,
                table: &mut self.table,
                cas_bytes: &mut self.cas_bytes,
                unread: &self.unread,
            }
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn oversized_arguments_are_refused_before_the_call_waits_for_the_store() {
        let mut instance = Instance::new(Default::default());
        let handle = instance.grants.stores["default"].clone();
        let _writes = handle.hold_writes();
        let mut kv = instance.kv();
        let bucket = store::Host::open(&mut kv, "default".into())
            .await
            .unwrap()
            .unwrap();
        let b = || Resource::<Bucket>::new_borrow(bucket.rep());
        let too_big = vec![0u8; crate::MAX_VALUE_BYTES + 1];
        let long_key = "k".repeat(crate::MAX_KEY_BYTES + 1);
        let soon = std::time::Duration::from_secs(5);
        let set = tokio::time::timeout(soon, kv.set(b(), "k".into(), too_big)).await;
        assert!(
            matches!(&set, Ok(Ok(Err(store::Error::Other(m)))) if m.contains("larger than")),
            "{set:?}"
        );
        let delete = tokio::time::timeout(soon, kv.delete(b(), long_key)).await;
        assert!(
            matches!(&delete, Ok(Ok(Err(store::Error::Other(m)))) if m.contains("longer")),
            "{delete:?}"
        );
        let pairs = vec![("k".to_string(), vec![]); crate::MAX_BATCH_KEYS + 1];
        let many = tokio::time::timeout(soon, batch::Host::set_many(&mut kv, b(), pairs)).await;
        assert!(
            matches!(&many, Ok(Ok(Err(store::Error::Other(m)))) if m.contains("keys in one batch")),
            "{many:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn cas_handles_hold_a_bounded_amount_of_values() {
        let mut instance = Instance::new(Default::default());
        let mut kv = instance.kv();
        let bucket = store::Host::open(&mut kv, "default".into())
            .await
            .unwrap()
            .unwrap();
        let big = vec![7u8; 1 << 20];
        let b = Resource::<Bucket>::new_borrow(bucket.rep());
        kv.set(b, "big".into(), big.clone()).await.unwrap().unwrap();
        // Eight handles of a MiB each; the ninth is refused, in words.
        let mut held = Vec::new();
        for _ in 0..8 {
            let b = Resource::<Bucket>::new_borrow(bucket.rep());
            held.push(kv.new(b, "big".into()).await.unwrap().unwrap());
        }
        let b = Resource::<Bucket>::new_borrow(bucket.rep());
        match kv.new(b, "big".into()).await.unwrap() {
            Err(store::Error::Other(m)) => assert!(m.contains("at most 8388608"), "{m}"),
            other => panic!("{:?}", other.map(|r| r.rep())),
        }
        // Dropping one makes room; a swap gives its handle's room back.
        HostCas::drop(&mut kv, held.pop().unwrap()).await.unwrap();
        let b = Resource::<Bucket>::new_borrow(bucket.rep());
        let again = kv.new(b, "big".into()).await.unwrap().unwrap();
        atomics::Host::swap(&mut kv, again, b"small".to_vec())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(*kv.cas_bytes, 7 << 20);

        // Handles on a key that is empty, then filled: each swap's retry
        // handle is held within the budget like a new one.
        while let Some(h) = held.pop() {
            HostCas::drop(&mut kv, h).await.unwrap();
        }
        let mut empty = Vec::new();
        for _ in 0..9 {
            let b = Resource::<Bucket>::new_borrow(bucket.rep());
            empty.push(kv.new(b, "later".into()).await.unwrap().unwrap());
        }
        let b = Resource::<Bucket>::new_borrow(bucket.rep());
        kv.set(b, "later".into(), big.clone())
            .await
            .unwrap()
            .unwrap();
        let mut retries = Vec::new();
        let mut refused = 0;
        for h in empty {
            match atomics::Host::swap(&mut kv, h, b"x".to_vec())
                .await
                .unwrap()
            {
                Err(atomics::CasError::CasFailed(retry)) => retries.push(retry),
                Err(atomics::CasError::StoreError(store::Error::Other(m))) => {
                    assert!(m.contains("at most 8388608"), "{m}");
                    refused += 1;
                }
                other => panic!("{:?}", other.map_err(|_| "cas error")),
            }
        }
        assert_eq!((retries.len(), refused), (8, 1));
        assert_eq!(*kv.cas_bytes, 8 << 20);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_tenants_cas_handles_together_stay_within_its_budget() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        // The tenant's other instances hold all but half a MiB.
        let max = edge_unread::MAX_TENANT_UNREAD_BYTES;
        let tenant = Arc::new(AtomicUsize::new(max - (512 << 10)));
        let mut instance = Instance::new(edge_unread::UnreadBudget::for_tenant(tenant.clone()));
        let mut kv = instance.kv();
        let bucket = store::Host::open(&mut kv, "default".into())
            .await
            .unwrap()
            .unwrap();
        let b = || Resource::<Bucket>::new_borrow(bucket.rep());
        kv.set(b(), "big".into(), vec![7u8; 1 << 20])
            .await
            .unwrap()
            .unwrap();
        kv.set(b(), "small".into(), vec![7u8; 1000])
            .await
            .unwrap()
            .unwrap();
        // This instance is far under its own 8 MiB, but the tenant is not.
        match kv.new(b(), "big".into()).await.unwrap() {
            Err(store::Error::Other(m)) => assert!(m.contains("this tenant's instances"), "{m}"),
            other => panic!("{:?}", other.map(|r| r.rep())),
        }
        assert_eq!(
            (*kv.cas_bytes, tenant.load(Relaxed)),
            (0, max - (512 << 10))
        );
        // A small one fits, and its bytes go back with the handle.
        let small = kv.new(b(), "small".into()).await.unwrap().unwrap();
        assert_eq!(tenant.load(Relaxed), max - (512 << 10) + 1000);
        HostCas::drop(&mut kv, small).await.unwrap();
        assert_eq!(tenant.load(Relaxed), max - (512 << 10));
    }
}
