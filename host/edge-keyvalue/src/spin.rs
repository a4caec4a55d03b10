//! Spin's key-value interfaces over the same stores as `wasi:keyvalue`:
//! `fermyon:spin/key-value@2.0.0` (Spin's SDKs up to 5.x) and
//! `spin:key-value/key-value@3.0.0` (async functions, SDK 6 and 7). A
//! component reaches the same data whichever interface it uses.
//!
//! As on Spin: opening a label the component was not granted
//! (`key_value_stores`) is `access-denied`; too many open stores is
//! `store-table-full`; anything else is `other` with fixed words (a
//! storage fault's detail goes to the log).

use crate::handle::{Access, Args};
use crate::{Bucket, Handle, KeyValue, KeyValueView, KvError};
use wasmtime::component::{Accessor, FutureReader, HasData, Linker, Resource, StreamReader};

mod generated {
    wasmtime::component::bindgen!({
        inline: "
            package edge:spin-key-value;
            world host {
                import fermyon:spin/key-value@2.0.0;
                import spin:key-value/key-value@3.0.0;
            }
        ",
        path: [
            "../../wit/spin/fermyon-spin@2.0.0",
            "../../wit/spin/spin-key-value@3.0.0",
        ],
        imports: {
            "fermyon:spin/key-value": async | trappable,
            default: trappable,
        },
        with: {
            "fermyon:spin/key-value.store": crate::Bucket,
            "spin:key-value/key-value.store": crate::Bucket,
        },
    });
}

use generated::fermyon::spin::key_value as v2;
use generated::spin::key_value::key_value as v3;

/// The words a guest gets for a failed operation, in Spin's variants.
fn spin_error(err: KvError) -> wasmtime::Result<v2::Error> {
    Ok(match err {
        KvError::AccessDenied => v2::Error::AccessDenied,
        KvError::Trap(e) => return Err(e),
        // Detail (file, redb's words) is for the operator's log.
        KvError::Storage(_) | KvError::Db(_) | KvError::Script(..) => {
            v2::Error::Other(KvError::Unavailable.to_string())
        }
        other => v2::Error::Other(other.to_string()),
    })
}

fn v3_error(err: v2::Error) -> v3::Error {
    match err {
        v2::Error::StoreTableFull => v3::Error::StoreTableFull,
        v2::Error::NoSuchStore => v3::Error::NoSuchStore,
        v2::Error::AccessDenied => v3::Error::AccessDenied,
        v2::Error::Other(m) => v3::Error::Other(m),
    }
}

/// Runs a store operation, with its error in Spin's terms (a trap stays a
/// trap).
async fn run<R: Send + 'static>(
    store: Result<Handle, KvError>,
    access: Access,
    f: impl FnOnce(&Handle) -> Result<R, KvError> + Send + 'static,
) -> wasmtime::Result<Result<R, v2::Error>> {
    let result = match store {
        Ok(s) => s.blocking(access, f).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(v) => Ok(Ok(v)),
        Err(e) => spin_error(e).map(Err),
    }
}

impl KeyValue<'_> {
    /// Opens `label` as a Spin store.
    fn spin_open(&mut self, label: &str) -> wasmtime::Result<Result<Resource<Bucket>, v2::Error>> {
        let Some(store) = self.grants.stores.get(label).cloned() else {
            return Ok(Err(v2::Error::AccessDenied));
        };
        Ok(self
            .table
            .push(Bucket { store })
            .map_err(|_| v2::Error::StoreTableFull))
    }

    fn spin_store(&self, store: &Resource<Bucket>) -> Result<Handle, KvError> {
        Ok(self.table.get(store)?.store.clone())
    }
}

impl v2::Host for KeyValue<'_> {}

impl v2::HostStore for KeyValue<'_> {
    async fn open(
        &mut self,
        label: String,
    ) -> wasmtime::Result<Result<Resource<Bucket>, v2::Error>> {
        self.spin_open(&label)
    }

    async fn get(
        &mut self,
        store: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, v2::Error>> {
        run(
            self.spin_store(&store)
                .and_then(|s| s.before(Args::Key(&key))),
            Access::Read,
            move |s| s.get(&key),
        )
        .await
    }

    async fn set(
        &mut self,
        store: Resource<Bucket>,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), v2::Error>> {
        run(
            self.spin_store(&store)
                .and_then(|s| s.before(Args::Pair(&key, &value))),
            Access::Write,
            move |s| s.set(&key, &value),
        )
        .await
    }

    async fn delete(
        &mut self,
        store: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<(), v2::Error>> {
        run(
            self.spin_store(&store)
                .and_then(|s| s.before(Args::Key(&key))),
            Access::Write,
            move |s| s.delete(&key),
        )
        .await
    }

    async fn exists(
        &mut self,
        store: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<bool, v2::Error>> {
        run(
            self.spin_store(&store)
                .and_then(|s| s.before(Args::Key(&key))),
            Access::Read,
            move |s| Ok(s.get(&key)?.is_some()),
        )
        .await
    }

    async fn get_keys(
        &mut self,
        store: Resource<Bucket>,
    ) -> wasmtime::Result<Result<Vec<String>, v2::Error>> {
        run(self.spin_store(&store), Access::Read, all_keys).await
    }

    async fn drop(&mut self, store: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.delete(store)?;
        Ok(())
    }
}

/// Every key of a store, page by page.
fn all_keys(s: &Handle) -> Result<Vec<String>, KvError> {
    s.all_keys()
}

struct HasKeyValue;

impl HasData for HasKeyValue {
    type Data<'a> = KeyValue<'a>;
}

impl v3::Host for KeyValue<'_> {}

impl v3::HostStore for KeyValue<'_> {
    fn drop(&mut self, store: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.delete(store)?;
        Ok(())
    }
}

/// The store behind `store`, read from the table.
fn v3_store<T: KeyValueView>(
    accessor: &Accessor<T, HasKeyValue>,
    store: &Resource<Bucket>,
) -> Result<Handle, KvError> {
    accessor.with(|mut access| access.get().spin_store(store))
}

async fn run_v3<R: Send + 'static>(
    store: Result<Handle, KvError>,
    access: Access,
    f: impl FnOnce(&Handle) -> Result<R, KvError> + Send + 'static,
) -> wasmtime::Result<Result<R, v3::Error>> {
    Ok(run(store, access, f).await?.map_err(v3_error))
}

impl<T: KeyValueView + Send> v3::HostStoreWithStore<T> for HasKeyValue {
    async fn open(
        accessor: &Accessor<T, Self>,
        label: String,
    ) -> wasmtime::Result<Result<Resource<Bucket>, v3::Error>> {
        accessor.with(|mut access| Ok(access.get().spin_open(&label)?.map_err(v3_error)))
    }

    async fn get(
        accessor: &Accessor<T, Self>,
        store: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, v3::Error>> {
        let store = v3_store(accessor, &store).and_then(|s| s.before(Args::Key(&key)));
        run_v3(store, Access::Read, move |s| s.get(&key)).await
    }

    async fn set(
        accessor: &Accessor<T, Self>,
        store: Resource<Bucket>,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), v3::Error>> {
        let store = v3_store(accessor, &store).and_then(|s| s.before(Args::Pair(&key, &value)));
        run_v3(store, Access::Write, move |s| s.set(&key, &value)).await
    }

    async fn delete(
        accessor: &Accessor<T, Self>,
        store: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<(), v3::Error>> {
        let store = v3_store(accessor, &store).and_then(|s| s.before(Args::Key(&key)));
        run_v3(store, Access::Write, move |s| s.delete(&key)).await
    }

    async fn exists(
        accessor: &Accessor<T, Self>,
        store: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<bool, v3::Error>> {
        let store = v3_store(accessor, &store).and_then(|s| s.before(Args::Key(&key)));
        run_v3(store, Access::Read, move |s| Ok(s.get(&key)?.is_some())).await
    }

    async fn get_keys(
        accessor: &Accessor<T, Self>,
        store: Resource<Bucket>,
    ) -> wasmtime::Result<(StreamReader<String>, FutureReader<Result<(), v3::Error>>)> {
        // The keys are read before the stream opens: a store's keys are
        // bounded by its size cap.
        let (keys, result) =
            match run_v3(v3_store(accessor, &store), Access::Read, all_keys).await? {
                Ok(keys) => (keys, Ok(())),
                Err(e) => (Vec::new(), Err(e)),
            };
        let bytes = keys.iter().map(|k| crate::listed_bytes(k)).sum();
        let unread = accessor.with(|mut access| access.get().unread.clone());
        let (keys, result) = match unread.stream(keys, bytes) {
            Ok(keys) => (keys, result),
            Err(refused) => (
                unread
                    .stream(Vec::new(), 0)
                    .expect("an empty stream takes no room"),
                Err(v3::Error::Other(refused.to_string())),
            ),
        };
        accessor.with(|mut access| {
            let keys = StreamReader::new(&mut access, keys)?;
            let result =
                FutureReader::new(
                    &mut access,
                    async move { wasmtime::Result::<_>::Ok(result) },
                )?;
            Ok((keys, result))
        })
    }
}

/// Adds Spin's key-value interfaces (both generations) to a linker.
///
/// `concurrent`: whether the linker's engine has Wasmtime's concurrency
/// support; the versions with async functions are linked only then.
pub fn add_to_linker<T: KeyValueView + Send + 'static>(
    linker: &mut Linker<T>,
    concurrent: bool,
) -> wasmtime::Result<()> {
    fn view<T: KeyValueView>(t: &mut T) -> KeyValue<'_> {
        t.keyvalue()
    }
    v2::add_to_linker::<T, HasKeyValue>(linker, view::<T>)?;
    if concurrent {
        v3::add_to_linker::<T, HasKeyValue>(linker, view::<T>)?;
    }
    Ok(())
}
