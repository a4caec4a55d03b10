//! The `wasi:keyvalue` host functions: each checks the bucket, then runs the
//! store operation on the blocking pool ([`Handle`]'s `blocking`).

use crate::generated::wasi::keyvalue::{atomics, batch, store as wit};
use crate::handle::{Access, Args};
use crate::{Bucket, Handle, KeyValue, KvError};
use wasmtime::component::Resource;

impl KeyValue<'_> {
    fn store(&self, bucket: &Resource<Bucket>) -> Result<Handle, KvError> {
        Ok(self.table.get(bucket)?.store.clone())
    }
}

impl wit::Host for KeyValue<'_> {
    async fn open(&mut self, identifier: String) -> Result<Resource<Bucket>, KvError> {
        let store = self
            .grants
            .stores
            .get(&identifier)
            .ok_or(KvError::AccessDenied)?
            .clone();
        Ok(self.table.push(Bucket { store })?)
    }

    fn convert_error(&mut self, err: KvError) -> wasmtime::Result<wit::Error> {
        Ok(match err {
            KvError::AccessDenied => wit::Error::AccessDenied,
            KvError::Trap(e) => return Err(e),
            // Detail (file, redb's words) is for the operator's log.
            KvError::Storage(_) | KvError::Db(_) | KvError::Script(..) => {
                wit::Error::Other(KvError::Unavailable.to_string())
            }
            other => wit::Error::Other(other.to_string()),
        })
    }
}

impl wit::HostBucket for KeyValue<'_> {
    async fn get(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> Result<Option<Vec<u8>>, KvError> {
        let s = self.store(&bucket)?.before(Args::Key(&key))?;
        s.blocking(Access::Read, move |s| s.get(&key)).await
    }

    async fn set(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        value: Vec<u8>,
    ) -> Result<(), KvError> {
        let s = self.store(&bucket)?.before(Args::Pair(&key, &value))?;
        s.blocking(Access::Write, move |s| s.set(&key, &value))
            .await
    }

    async fn delete(&mut self, bucket: Resource<Bucket>, key: String) -> Result<(), KvError> {
        let s = self.store(&bucket)?.before(Args::Key(&key))?;
        s.blocking(Access::Write, move |s| s.delete(&key)).await
    }

    async fn exists(&mut self, bucket: Resource<Bucket>, key: String) -> Result<bool, KvError> {
        let s = self.store(&bucket)?.before(Args::Key(&key))?;
        s.blocking(Access::Read, move |s| Ok(s.get(&key)?.is_some()))
            .await
    }

    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        cursor: Option<u64>,
    ) -> Result<wit::KeyResponse, KvError> {
        let s = self.store(&bucket)?;
        let (keys, cursor) = s
            .blocking(Access::Read, move |s| s.list_keys(cursor.unwrap_or(0)))
            .await?;
        Ok(wit::KeyResponse { keys, cursor })
    }

    async fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.delete(bucket)?;
        Ok(())
    }
}

impl atomics::Host for KeyValue<'_> {
    async fn increment(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        delta: u64,
    ) -> Result<u64, KvError> {
        let s = self.store(&bucket)?.before(Args::Key(&key))?;
        s.blocking(Access::Write, move |s| s.increment(&key, delta))
            .await
    }
}

impl batch::Host for KeyValue<'_> {
    async fn get_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> Result<Vec<Option<(String, Vec<u8>)>>, KvError> {
        let s = self.store(&bucket)?.before(Args::Keys(&keys))?;
        s.blocking(Access::Read, move |s| {
            let values = s.get_many(&keys)?;
            Ok(keys
                .into_iter()
                .zip(values)
                .map(|(k, v)| v.map(|v| (k, v)))
                .collect())
        })
        .await
    }

    async fn set_many(
        &mut self,
        bucket: Resource<Bucket>,
        key_values: Vec<(String, Vec<u8>)>,
    ) -> Result<(), KvError> {
        let s = self.store(&bucket)?.before(Args::Pairs(&key_values))?;
        s.blocking(Access::Write, move |s| s.set_many(&key_values))
            .await
    }

    async fn delete_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> Result<(), KvError> {
        let s = self.store(&bucket)?.before(Args::Keys(&keys))?;
        s.blocking(Access::Write, move |s| s.delete_many(&keys))
            .await
    }
}
