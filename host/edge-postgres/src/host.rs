//! The WIT host functions of every version; 2.0 and 3.0 map onto 4.2.

use crate::wit::{v2, v2types, v3, v4};
use crate::{Builder, Connection, MAX_ADDRESS_BYTES, Postgres, PostgresView, execute, open, query};
use std::sync::Arc;
use wasmtime::component::{Accessor, FutureReader, HasData, Linker, Resource, StreamReader};

type Client = Arc<crate::Link>;

impl Postgres<'_> {
    fn client(&self, c: &Resource<Connection>) -> wasmtime::Result<Client> {
        Ok(self.table.get(c)?.client.clone())
    }
}

// 4.2 (and 4.0, 4.1 through semver).

impl v4::Host for Postgres<'_> {}

impl v4::HostConnection for Postgres<'_> {
    async fn open(
        &mut self,
        address: String,
    ) -> wasmtime::Result<Result<Resource<Connection>, v4::Error>> {
        match open(self.outbound.clone(), &address).await {
            Ok(c) => Ok(Ok(self.table.push(c)?)),
            Err(e) => Ok(Err(e)),
        }
    }

    async fn query(
        &mut self,
        c: Resource<Connection>,
        statement: String,
        params: Vec<v4::ParameterValue>,
    ) -> wasmtime::Result<Result<v4::RowSet, v4::Error>> {
        Ok(query(self.client(&c)?, statement, params, self.unread).await)
    }

    async fn execute(
        &mut self,
        c: Resource<Connection>,
        statement: String,
        params: Vec<v4::ParameterValue>,
    ) -> wasmtime::Result<Result<u64, v4::Error>> {
        Ok(execute(self.client(&c)?, statement, params, self.unread).await)
    }

    async fn drop(&mut self, c: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(c)?;
        Ok(())
    }
}

impl v4::HostConnectionBuilder for Postgres<'_> {
    async fn new(&mut self, address: String) -> wasmtime::Result<Resource<Builder>> {
        let address = if address.len() > MAX_ADDRESS_BYTES {
            Err(address.len())
        } else {
            Ok(address)
        };
        Ok(self.table.push(Builder { address })?)
    }

    async fn set_ca_root(
        &mut self,
        _builder: Resource<Builder>,
        _certificate: String,
    ) -> wasmtime::Result<Result<(), v4::Error>> {
        Ok(Err(v4::Error::Other(
            "TLS to PostgreSQL (and so a CA root) is not supported on edge yet".into(),
        )))
    }

    async fn build(
        &mut self,
        builder: Resource<Builder>,
    ) -> wasmtime::Result<Result<Resource<Connection>, v4::Error>> {
        let address = match self.table.get(&builder)?.address() {
            Ok(a) => a,
            Err(e) => return Ok(Err(e)),
        };
        match open(self.outbound.clone(), &address).await {
            Ok(c) => Ok(Ok(self.table.push(c)?)),
            Err(e) => Ok(Err(e)),
        }
    }

    async fn drop(&mut self, b: Resource<Builder>) -> wasmtime::Result<()> {
        self.table.delete(b)?;
        Ok(())
    }
}

struct HasPostgres;

impl Builder {
    /// The address to connect to, or why there is none.
    fn address(&self) -> Result<String, v4::Error> {
        self.address.clone().map_err(|len| {
            v4::Error::ConnectionFailed(format!(
                "the address is {len} bytes; at most {MAX_ADDRESS_BYTES}"
            ))
        })
    }
}

impl HasData for HasPostgres {
    type Data<'a> = Postgres<'a>;
}

async fn open_in<T: PostgresView>(
    a: &Accessor<T, HasPostgres>,
    address: String,
) -> wasmtime::Result<Result<Resource<Connection>, v4::Error>> {
    let outbound = a.with(|mut v| v.get().outbound.clone());
    match open(outbound, &address).await {
        Ok(c) => a.with(|mut v| Ok(Ok(v.get().table.push(c)?))),
        Err(e) => Ok(Err(e)),
    }
}

impl<T: PostgresView + Send> v4::HostConnectionWithStore<T> for HasPostgres {
    async fn open_async(
        a: &Accessor<T, Self>,
        address: String,
    ) -> wasmtime::Result<Result<Resource<Connection>, v4::Error>> {
        open_in(a, address).await
    }

    async fn query_async(
        a: &Accessor<T, Self>,
        c: Resource<Connection>,
        statement: String,
        params: Vec<v4::ParameterValue>,
    ) -> wasmtime::Result<
        Result<
            (
                Vec<v4::Column>,
                StreamReader<v4::Row>,
                FutureReader<Result<(), v4::Error>>,
            ),
            v4::Error,
        >,
    > {
        let (client, unread) = a.with(|mut v| {
            let v = v.get();
            (v.client(&c), v.unread.clone())
        });
        let client = client?;
        // Rows are read before the stream opens (bounded by
        // MAX_RESULT_BYTES): a failure is the call's, never the stream's.
        let set = match query(client, statement, params, &unread).await {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        let bytes = crate::held_bytes(&set);
        let rows = match unread.stream(set.rows, bytes) {
            Ok(r) => r,
            Err(refused) => return Ok(Err(v4::Error::Other(refused.to_string()))),
        };
        a.with(|mut v| {
            let rows = StreamReader::new(&mut v, rows)?;
            let done = FutureReader::new(&mut v, async { wasmtime::Result::<_>::Ok(Ok(())) })?;
            Ok(Ok((set.columns, rows, done)))
        })
    }

    async fn execute_async(
        a: &Accessor<T, Self>,
        c: Resource<Connection>,
        statement: String,
        params: Vec<v4::ParameterValue>,
    ) -> wasmtime::Result<Result<u64, v4::Error>> {
        let (client, unread) = a.with(|mut v| {
            let v = v.get();
            (v.client(&c), v.unread.clone())
        });
        Ok(execute(client?, statement, params, &unread).await)
    }
}

impl<T: PostgresView + Send> v4::HostConnectionBuilderWithStore<T> for HasPostgres {
    async fn build_async(
        a: &Accessor<T, Self>,
        builder: Resource<Builder>,
    ) -> wasmtime::Result<Result<Resource<Connection>, v4::Error>> {
        match a.with(|mut v| v.get().table.get(&builder).map(Builder::address))? {
            Ok(address) => open_in(a, address).await,
            Err(e) => Ok(Err(e)),
        }
    }
}

// 3.0 and 2.0: the same operations, values mapped onto 4.2's.

fn query_failed_text(e: v4::Error) -> (u8, String) {
    match e {
        v4::Error::ConnectionFailed(m) => (0, m),
        v4::Error::BadParameter(m) => (1, m),
        v4::Error::QueryFailed(v4::QueryError::Text(m)) => (2, m),
        v4::Error::QueryFailed(v4::QueryError::DbError(d)) => (2, d.as_text),
        v4::Error::ValueConversionFailed(m) => (3, m),
        v4::Error::Other(m) => (4, m),
    }
}

macro_rules! older_errors {
    ($e:ty) => {
        impl From<v4::Error> for $e {
            fn from(e: v4::Error) -> Self {
                match query_failed_text(e) {
                    (0, m) => Self::ConnectionFailed(m),
                    (1, m) => Self::BadParameter(m),
                    (2, m) => Self::QueryFailed(m),
                    (3, m) => Self::ValueConversionFailed(m),
                    (_, m) => Self::Other(m),
                }
            }
        }
    };
}

older_errors!(v3::Error);
older_errors!(v2types::Error);

fn v3_param(p: v3::ParameterValue) -> v4::ParameterValue {
    use v3::ParameterValue as P;
    use v4::ParameterValue as Q;
    match p {
        P::Boolean(v) => Q::Boolean(v),
        P::Int8(v) => Q::Int8(v),
        P::Int16(v) => Q::Int16(v),
        P::Int32(v) => Q::Int32(v),
        P::Int64(v) => Q::Int64(v),
        P::Floating32(v) => Q::Floating32(v),
        P::Floating64(v) => Q::Floating64(v),
        P::Str(v) => Q::Str(v),
        P::Binary(v) => Q::Binary(v),
        P::Date(v) => Q::Date(v),
        P::Time(v) => Q::Time(v),
        P::Datetime(v) => Q::Datetime(v),
        P::Timestamp(v) => Q::Timestamp(v),
        P::DbNull => Q::DbNull,
    }
}

/// `fn $name(v4::RowSet) -> $gen::RowSet`: a row set in an older
/// generation's types, its `$variant`s (named alike in both) mapped one to
/// one; a column type it lacks is `Other`, a value `Unsupported`.
macro_rules! older_row_set {
    ($name:ident, $gen:ident, [$($variant:ident),*]) => {
        fn $name(set: v4::RowSet) -> $gen::RowSet {
            $gen::RowSet {
                columns: set
                    .columns
                    .into_iter()
                    .map(|c| $gen::Column {
                        name: c.name,
                        data_type: match c.data_type {
                            $(v4::DbDataType::$variant => $gen::DbDataType::$variant,)*
                            _ => $gen::DbDataType::Other,
                        },
                    })
                    .collect(),
                rows: set
                    .rows
                    .into_iter()
                    .map(|row| {
                        row.into_iter()
                            .map(|v| match v {
                                $(v4::DbValue::$variant(v) => $gen::DbValue::$variant(v),)*
                                v4::DbValue::DbNull => $gen::DbValue::DbNull,
                                _ => $gen::DbValue::Unsupported,
                            })
                            .collect()
                    })
                    .collect(),
            }
        }
    };
}

older_row_set!(
    v3_row_set,
    v3,
    [
        Boolean, Int8, Int16, Int32, Int64, Floating32, Floating64, Str, Binary, Date, Time,
        Datetime, Timestamp
    ]
);
older_row_set!(
    v2_row_set,
    v2types,
    [
        Boolean, Int8, Int16, Int32, Int64, Floating32, Floating64, Str, Binary
    ]
);

fn v2_param(p: v2types::ParameterValue) -> Result<v4::ParameterValue, v4::Error> {
    use v2types::ParameterValue as P;
    use v4::ParameterValue as Q;
    Ok(match p {
        P::Boolean(v) => Q::Boolean(v),
        P::Int8(v) => Q::Int8(v),
        P::Int16(v) => Q::Int16(v),
        P::Int32(v) => Q::Int32(v),
        P::Int64(v) => Q::Int64(v),
        // PostgreSQL has no unsigned integers: the next wider signed one.
        P::Uint8(v) => Q::Int16(v.into()),
        P::Uint16(v) => Q::Int32(v.into()),
        P::Uint32(v) => Q::Int64(v.into()),
        P::Uint64(v) => Q::Int64(i64::try_from(v).map_err(|_| {
            v4::Error::BadParameter(format!("{v} is too large for a PostgreSQL bigint"))
        })?),
        P::Floating32(v) => Q::Floating32(v),
        P::Floating64(v) => Q::Floating64(v),
        P::Str(v) => Q::Str(v),
        P::Binary(v) => Q::Binary(v),
        P::DbNull => Q::DbNull,
    })
}

impl v3::Host for Postgres<'_> {}

impl v3::HostConnection for Postgres<'_> {
    async fn open(
        &mut self,
        address: String,
    ) -> wasmtime::Result<Result<Resource<Connection>, v3::Error>> {
        match open(self.outbound.clone(), &address).await {
            Ok(c) => Ok(Ok(self.table.push(c)?)),
            Err(e) => Ok(Err(e.into())),
        }
    }

    async fn query(
        &mut self,
        c: Resource<Connection>,
        statement: String,
        params: Vec<v3::ParameterValue>,
    ) -> wasmtime::Result<Result<v3::RowSet, v3::Error>> {
        let params = params.into_iter().map(v3_param).collect();
        Ok(query(self.client(&c)?, statement, params, self.unread)
            .await
            .map(v3_row_set)
            .map_err(Into::into))
    }

    async fn execute(
        &mut self,
        c: Resource<Connection>,
        statement: String,
        params: Vec<v3::ParameterValue>,
    ) -> wasmtime::Result<Result<u64, v3::Error>> {
        let params = params.into_iter().map(v3_param).collect();
        Ok(execute(self.client(&c)?, statement, params, self.unread)
            .await
            .map_err(Into::into))
    }

    async fn drop(&mut self, c: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(c)?;
        Ok(())
    }
}

impl v2types::Host for Postgres<'_> {}
impl v2::Host for Postgres<'_> {}

impl v2::HostConnection for Postgres<'_> {
    async fn open(
        &mut self,
        address: String,
    ) -> wasmtime::Result<Result<Resource<Connection>, v2types::Error>> {
        match open(self.outbound.clone(), &address).await {
            Ok(c) => Ok(Ok(self.table.push(c)?)),
            Err(e) => Ok(Err(e.into())),
        }
    }

    async fn query(
        &mut self,
        c: Resource<Connection>,
        statement: String,
        params: Vec<v2types::ParameterValue>,
    ) -> wasmtime::Result<Result<v2types::RowSet, v2types::Error>> {
        let params = match params.into_iter().map(v2_param).collect() {
            Ok(p) => p,
            Err(e) => return Ok(Err(e.into())),
        };
        Ok(query(self.client(&c)?, statement, params, self.unread)
            .await
            .map(v2_row_set)
            .map_err(Into::into))
    }

    async fn execute(
        &mut self,
        c: Resource<Connection>,
        statement: String,
        params: Vec<v2types::ParameterValue>,
    ) -> wasmtime::Result<Result<u64, v2types::Error>> {
        let params = match params.into_iter().map(v2_param).collect() {
            Ok(p) => p,
            Err(e) => return Ok(Err(e.into())),
        };
        Ok(execute(self.client(&c)?, statement, params, self.unread)
            .await
            .map_err(Into::into))
    }

    async fn drop(&mut self, c: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(c)?;
        Ok(())
    }
}

/// Adds Spin's PostgreSQL interfaces (every version) to a linker.
///
/// `concurrent`: whether the linker's engine has Wasmtime's concurrency
/// support; the versions with async functions are linked only then.
pub fn add_to_linker<T: PostgresView + Send + 'static>(
    linker: &mut Linker<T>,
    concurrent: bool,
) -> wasmtime::Result<()> {
    fn view<T: PostgresView>(t: &mut T) -> Postgres<'_> {
        t.postgres()
    }
    v2types::add_to_linker::<T, HasPostgres>(linker, view::<T>)?;
    v2::add_to_linker::<T, HasPostgres>(linker, view::<T>)?;
    v3::add_to_linker::<T, HasPostgres>(linker, view::<T>)?;
    if concurrent {
        v4::add_to_linker::<T, HasPostgres>(linker, view::<T>)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use edge_outbound_http::OutboundPolicy;
    use v4::HostConnectionBuilder;
    use wasmtime::component::ResourceTable;

    #[tokio::test]
    async fn a_builder_keeps_no_address_past_its_limit() {
        let outbound = OutboundPolicy::deny_all("t/c");
        let mut table = ResourceTable::new();
        let unread = Default::default();
        let mut pg = Postgres {
            outbound: &outbound,
            table: &mut table,
            unread: &unread,
        };
        let b = pg.new("x".repeat(1 << 20)).await.unwrap();
        assert!(matches!(pg.table.get(&b).unwrap().address, Err(1_048_576)));
        match pg.build(b).await.unwrap() {
            Err(v4::Error::ConnectionFailed(m)) => {
                assert_eq!(m, "the address is 1048576 bytes; at most 4096")
            }
            other => panic!("{:?}", other.map(|c| c.rep())),
        }
    }
}
