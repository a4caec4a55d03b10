//! Key-value capability: `wasi:keyvalue@0.2.0-draft` (`store`, `atomics`,
//! `batch`; WIT in `wit/deps/keyvalue`) over an embedded [redb] database.
//!
//! A component gets these imports only if its manifest entry lists
//! `key_value_stores = ["label", ...]`; `store.open(label)` then succeeds for
//! exactly those labels (others answer `access-denied`). Each tenant has its
//! own database file per label, `DATA_DIR/kv/TENANT/LABEL.redb`, shared by
//! that tenant's components that name the label (Spin's semantics), never by
//! two tenants.
//!
//! Host calls are async: each operation runs on tokio's blocking pool
//! (see [`Handle`]), so a slow or full disk holds a pool thread, never the
//! async worker serving other connections.
//!
//! Writes commit without waiting for the disk; a background thread makes
//! them durable within [`FLUSH_INTERVAL`] (as Redis' `appendfsync everysec`),
//! and a store is flushed when it is dropped. A crash loses at most that
//! window, never consistency: redb is copy-on-write. A disk error (a full
//! disk, `EIO`) loses nothing acknowledged: the store answers errors, keeps
//! its unflushed writes in memory and, once the disk allows, reopens its
//! file and replays them (the module `store` says how).
//!
//! Limits, because tenants are hostile: keys up to [`MAX_KEY_BYTES`], values
//! up to [`MAX_VALUE_BYTES`], and each store up to the tenant's
//! `limits.kv_store_bytes`, counted as the larger of its keys plus values
//! and its file's size on disk (less [`FILE_OVERHEAD_BYTES`]); a write past
//! a limit fails with `error::other` saying which limit, and changes
//! nothing. Storage faults reach the guest in fixed words
//! (`error::other("storage full: ...")`); the log names tenant, store and
//! file.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let stores = edge_keyvalue::Registry::new(dir.path());
//! let store = stores.open("acme", "default", 1 << 20)?;
//! store.set("greeting", b"hello")?;
//! assert_eq!(store.get("greeting")?.as_deref(), Some(&b"hello"[..]));
//! assert_eq!(store.increment("visits", 2)?, 2);
//! assert_eq!(store.used_bytes()?, "greeting".len() as u64 + 5 + "visits".len() as u64 + 1);
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod draft2;
mod error;
mod handle;
mod host;
mod redis_store;
mod registry;
pub mod spin;
mod store;

pub use error::{ErrorCounts, KvError};
pub use handle::{Handle, MAX_LISTED_BYTES, Swap, listed_bytes};
pub use redis_store::{CONNECT_TIMEOUT, IO_TIMEOUT};
pub use registry::{Placement, Registry};
pub use store::{
    FILE_OVERHEAD_BYTES, FLUSH_INTERVAL, MAX_BATCH_BYTES, MAX_BATCH_KEYS, MAX_KEY_BYTES,
    MAX_VALUE_BYTES, PENDING_MAX_BYTES, RETRY_INTERVAL, RETRY_MAX_INTERVAL,
};

use std::collections::BTreeMap;
use std::sync::Arc;
use wasmtime::component::{HasData, Linker, ResourceTable};

mod generated {
    wasmtime::component::bindgen!({
        path: "../../wit/deps/keyvalue",
        world: "wasi:keyvalue/imports",
        imports: { default: async | trappable },
        with: {
            "wasi:keyvalue/store.bucket": crate::Bucket,
        },
        trappable_error_type: {
            "wasi:keyvalue/store.error" => crate::KvError,
        },
    });
}

use generated::wasi::keyvalue::{atomics, batch, store as wit};

/// The stores one component may open, by label; shared by every instance.
#[derive(Clone, Default)]
pub struct Grants {
    stores: Arc<BTreeMap<String, Handle>>,
}

impl Grants {
    /// Grants the given stores (each with its cap) under their labels.
    pub fn new(stores: BTreeMap<String, Handle>) -> Self {
        Self {
            stores: Arc::new(stores),
        }
    }

    /// Whether both grant the same stores, with the same caps, under the
    /// same labels.
    pub fn same_stores(&self, other: &Grants) -> bool {
        self.stores.len() == other.stores.len()
            && self
                .stores
                .iter()
                .zip(other.stores.iter())
                .all(|((la, a), (lb, b))| la == lb && a.same(b))
    }
}

/// An open bucket: a guest's handle to one granted store.
pub struct Bucket {
    store: Handle,
}

/// What the linked functions see of the store data.
pub struct KeyValue<'a> {
    /// The component's grants.
    pub grants: &'a Grants,
    /// The instance's resource table.
    pub table: &'a mut ResourceTable,
    /// Bytes of values its compare-and-swap handles hold
    /// ([`draft2::MAX_CAS_BYTES`]).
    pub cas_bytes: &'a mut usize,
    /// Host memory the instance's unread streams of keys hold.
    pub unread: &'a edge_unread::UnreadBudget,
}

/// Store data that carries a component's key-value [`Grants`].
pub trait KeyValueView {
    /// The grants and resource table of the instance in this store.
    fn keyvalue(&mut self) -> KeyValue<'_>;
}

/// Adds `wasi:keyvalue/{store,atomics,batch}` to a linker.
pub fn add_to_linker<T: KeyValueView + Send + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    fn view<T: KeyValueView>(t: &mut T) -> KeyValue<'_> {
        t.keyvalue()
    }
    wit::add_to_linker::<T, HasKeyValue>(linker, view::<T>)?;
    atomics::add_to_linker::<T, HasKeyValue>(linker, view::<T>)?;
    batch::add_to_linker::<T, HasKeyValue>(linker, view::<T>)?;
    Ok(())
}

pub(crate) struct HasKeyValue;

impl HasData for HasKeyValue {
    type Data<'a> = KeyValue<'a>;
}
