//! The WIT host functions of both versions.

use crate::{Connection, DataType, Error, Mysql, MysqlView, RowSet, Value, execute, open, query};
use wasmtime::component::{Accessor, FutureReader, HasData, Linker, Resource, StreamReader};

mod generated {
    wasmtime::component::bindgen!({
        inline: "
            package edge:spin-mysql;
            world host {
                import fermyon:spin/mysql@2.0.0;
                import spin:mysql/mysql@3.0.0;
            }
        ",
        path: [
            "../../wit/spin/fermyon-spin@2.0.0",
            "../../wit/spin/spin-mysql@3.0.0",
        ],
        imports: {
            "fermyon:spin/mysql": async | trappable,
            default: trappable,
        },
        with: {
            "fermyon:spin/mysql.connection": crate::Connection,
            "spin:mysql/mysql.connection": crate::Connection,
        },
    });
}

use generated::fermyon::spin::mysql as v2;
use generated::fermyon::spin::rdbms_types as v2types;
use generated::spin::mysql::mysql as v3;

macro_rules! conversions {
    ($t:ident) => {
        impl From<Error> for $t::Error {
            fn from(e: Error) -> Self {
                match e {
                    Error::ConnectionFailed(m) => Self::ConnectionFailed(m),
                    Error::BadParameter(m) => Self::BadParameter(m),
                    Error::QueryFailed(m) => Self::QueryFailed(m),
                    Error::ValueConversionFailed(m) => Self::ValueConversionFailed(m),
                    Error::Other(m) => Self::Other(m),
                }
            }
        }

        impl From<$t::ParameterValue> for Value {
            fn from(p: $t::ParameterValue) -> Self {
                use $t::ParameterValue as P;
                match p {
                    P::Boolean(v) => Value::Boolean(v),
                    P::Int8(v) => Value::Int8(v),
                    P::Int16(v) => Value::Int16(v),
                    P::Int32(v) => Value::Int32(v),
                    P::Int64(v) => Value::Int64(v),
                    P::Uint8(v) => Value::Uint8(v),
                    P::Uint16(v) => Value::Uint16(v),
                    P::Uint32(v) => Value::Uint32(v),
                    P::Uint64(v) => Value::Uint64(v),
                    P::Floating32(v) => Value::Floating32(v),
                    P::Floating64(v) => Value::Floating64(v),
                    P::Str(v) => Value::Str(v),
                    P::Binary(v) => Value::Binary(v),
                    P::DbNull => Value::Null,
                }
            }
        }

        impl From<Value> for $t::DbValue {
            fn from(v: Value) -> Self {
                match v {
                    Value::Boolean(v) => Self::Boolean(v),
                    Value::Int8(v) => Self::Int8(v),
                    Value::Int16(v) => Self::Int16(v),
                    Value::Int32(v) => Self::Int32(v),
                    Value::Int64(v) => Self::Int64(v),
                    Value::Uint8(v) => Self::Uint8(v),
                    Value::Uint16(v) => Self::Uint16(v),
                    Value::Uint32(v) => Self::Uint32(v),
                    Value::Uint64(v) => Self::Uint64(v),
                    Value::Floating32(v) => Self::Floating32(v),
                    Value::Floating64(v) => Self::Floating64(v),
                    Value::Str(v) => Self::Str(v),
                    Value::Binary(v) => Self::Binary(v),
                    Value::Null => Self::DbNull,
                    Value::Unsupported => Self::Unsupported,
                }
            }
        }

        impl From<DataType> for $t::DbDataType {
            fn from(t: DataType) -> Self {
                match t {
                    DataType::Boolean => Self::Boolean,
                    DataType::Int8 => Self::Int8,
                    DataType::Int16 => Self::Int16,
                    DataType::Int32 => Self::Int32,
                    DataType::Int64 => Self::Int64,
                    DataType::Uint8 => Self::Uint8,
                    DataType::Uint16 => Self::Uint16,
                    DataType::Uint32 => Self::Uint32,
                    DataType::Uint64 => Self::Uint64,
                    DataType::Floating32 => Self::Floating32,
                    DataType::Floating64 => Self::Floating64,
                    DataType::Str => Self::Str,
                    DataType::Binary => Self::Binary,
                    DataType::Other => Self::Other,
                }
            }
        }

        impl From<(String, DataType)> for $t::Column {
            fn from((name, t): (String, DataType)) -> Self {
                Self {
                    name,
                    data_type: t.into(),
                }
            }
        }
    };
}

conversions!(v2types);
conversions!(v3);

impl Mysql<'_> {
    fn shared(&self, c: &Resource<Connection>) -> wasmtime::Result<crate::Shared> {
        self.table
            .get(c)?
            .shared()
            .ok_or_else(|| wasmtime::format_err!("the connection is closed"))
    }
}

impl v2types::Host for Mysql<'_> {}
impl v2::Host for Mysql<'_> {}

impl v2::HostConnection for Mysql<'_> {
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
        let params = params.into_iter().map(Into::into).collect();
        Ok(query(self.shared(&c)?, statement, params, self.unread)
            .await
            .map(|RowSet { columns, rows }| v2types::RowSet {
                columns: columns.into_iter().map(Into::into).collect(),
                rows: rows
                    .into_iter()
                    .map(|r| r.into_iter().map(Into::into).collect())
                    .collect(),
            })
            .map_err(Into::into))
    }

    async fn execute(
        &mut self,
        c: Resource<Connection>,
        statement: String,
        params: Vec<v2types::ParameterValue>,
    ) -> wasmtime::Result<Result<(), v2types::Error>> {
        let params = params.into_iter().map(Into::into).collect();
        Ok(execute(self.shared(&c)?, statement, params, self.unread)
            .await
            .map_err(Into::into))
    }

    async fn drop(&mut self, c: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(c)?;
        Ok(())
    }
}

struct HasMysql;

impl HasData for HasMysql {
    type Data<'a> = Mysql<'a>;
}

impl v3::Host for Mysql<'_> {}

impl v3::HostConnection for Mysql<'_> {
    fn drop(&mut self, c: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(c)?;
        Ok(())
    }
}

impl<T: MysqlView + Send> v3::HostConnectionWithStore<T> for HasMysql {
    async fn open(
        a: &Accessor<T, Self>,
        address: String,
    ) -> wasmtime::Result<Result<Resource<Connection>, v3::Error>> {
        let outbound = a.with(|mut v| v.get().outbound.clone());
        match open(outbound, &address).await {
            Ok(c) => a.with(|mut v| Ok(Ok(v.get().table.push(c)?))),
            Err(e) => Ok(Err(e.into())),
        }
    }

    async fn query(
        a: &Accessor<T, Self>,
        c: Resource<Connection>,
        statement: String,
        params: Vec<v3::ParameterValue>,
    ) -> wasmtime::Result<
        Result<
            (
                Vec<v3::Column>,
                StreamReader<Vec<v3::DbValue>>,
                FutureReader<Result<(), v3::Error>>,
            ),
            v3::Error,
        >,
    > {
        let (shared, unread) = a.with(|mut v| {
            let v = v.get();
            (v.shared(&c), v.unread.clone())
        });
        let params = params.into_iter().map(Into::into).collect();
        // Rows are read before the stream opens (bounded by
        // MAX_RESULT_BYTES): a failure is the call's, never the stream's.
        let set = match query(shared?, statement, params, &unread).await {
            Ok(s) => s,
            Err(e) => return Ok(Err(e.into())),
        };
        // Held in the tenant's budget until read, as PostgreSQL's and
        // SQLite's results are: a guest could open hundreds and read none.
        let bytes = crate::held_bytes(&set);
        let columns = set.columns.into_iter().map(Into::into).collect();
        let rows: Vec<Vec<v3::DbValue>> = set
            .rows
            .into_iter()
            .map(|r| r.into_iter().map(Into::into).collect())
            .collect();
        let rows = match unread.stream(rows, bytes) {
            Ok(r) => r,
            Err(refused) => return Ok(Err(v3::Error::Other(refused.to_string()))),
        };
        a.with(|mut v| {
            let rows = StreamReader::new(&mut v, rows)?;
            let done = FutureReader::new(&mut v, async { wasmtime::Result::<_>::Ok(Ok(())) })?;
            Ok(Ok((columns, rows, done)))
        })
    }

    async fn execute(
        a: &Accessor<T, Self>,
        c: Resource<Connection>,
        statement: String,
        params: Vec<v3::ParameterValue>,
    ) -> wasmtime::Result<Result<(), v3::Error>> {
        let (shared, unread) = a.with(|mut v| {
            let v = v.get();
            (v.shared(&c), v.unread.clone())
        });
        let params = params.into_iter().map(Into::into).collect();
        Ok(execute(shared?, statement, params, &unread)
            .await
            .map_err(Into::into))
    }
}

/// Adds Spin's MySQL interfaces (both versions) to a linker.
///
/// `concurrent`: whether the linker's engine has Wasmtime's concurrency
/// support; the versions with async functions are linked only then.
pub fn add_to_linker<T: MysqlView + Send + 'static>(
    linker: &mut Linker<T>,
    concurrent: bool,
) -> wasmtime::Result<()> {
    fn view<T: MysqlView>(t: &mut T) -> Mysql<'_> {
        t.mysql()
    }
    v2types::add_to_linker::<T, HasMysql>(linker, view::<T>)?;
    v2::add_to_linker::<T, HasMysql>(linker, view::<T>)?;
    if concurrent {
        v3::add_to_linker::<T, HasMysql>(linker, view::<T>)?;
    }
    Ok(())
}
