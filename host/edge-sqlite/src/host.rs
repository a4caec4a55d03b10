//! The WIT host functions, one set per interface version; all run the
//! same [`crate::Database`] operations.

use crate::{Connection, QueryResult, SqlError, Sqlite, SqliteView, Value, execute, open};
use wasmtime::component::{Accessor, FutureReader, HasData, Linker, Resource, StreamReader};

mod generated {
    wasmtime::component::bindgen!({
        inline: "
            package edge:spin-sqlite;
            world host {
                import fermyon:spin/sqlite@2.0.0;
                import spin:sqlite/sqlite@3.0.0;
                import spin:sqlite/sqlite@3.1.0;
            }
        ",
        path: [
            "../../wit/spin/fermyon-spin@2.0.0",
            "../../wit/spin/spin-sqlite@3.0.0",
            "../../wit/spin/spin-sqlite@3.1.0",
        ],
        imports: {
            "spin:sqlite/sqlite@3.1.0.[method]connection.execute-async": trappable,
            default: async | trappable,
        },
        with: {
            "fermyon:spin/sqlite.connection": crate::Connection,
            "spin:sqlite/sqlite@3.0.0.connection": crate::Connection,
            "spin:sqlite/sqlite@3.1.0.connection": crate::Connection,
        },
    });
}

use generated::fermyon::spin::sqlite as v2;
use generated::spin::sqlite3_0_0::sqlite as v30;
use generated::spin::sqlite3_1_0::sqlite as v31;

/// Conversions between the crate's types and one version's.
macro_rules! conversions {
    ($v:ident) => {
        impl From<SqlError> for $v::Error {
            fn from(e: SqlError) -> Self {
                match e {
                    SqlError::NoSuchDatabase => Self::NoSuchDatabase,
                    SqlError::AccessDenied => Self::AccessDenied,
                    SqlError::InvalidConnection => Self::InvalidConnection,
                    SqlError::DatabaseFull => Self::DatabaseFull,
                    SqlError::OutOfMemory => Self::Io("out of memory".into()),
                    SqlError::Io(m) => Self::Io(m),
                    SqlError::Host(_) => {
                        Self::Io("the database is unavailable; try again later".into())
                    }
                }
            }
        }

        impl From<$v::Value> for Value {
            fn from(v: $v::Value) -> Self {
                match v {
                    $v::Value::Integer(i) => Value::Integer(i),
                    $v::Value::Real(f) => Value::Real(f),
                    $v::Value::Text(s) => Value::Text(s),
                    $v::Value::Blob(b) => Value::Blob(b),
                    $v::Value::Null => Value::Null,
                }
            }
        }

        impl From<Value> for $v::Value {
            fn from(v: Value) -> Self {
                match v {
                    Value::Integer(i) => Self::Integer(i),
                    Value::Real(f) => Self::Real(f),
                    Value::Text(s) => Self::Text(s),
                    Value::Blob(b) => Self::Blob(b),
                    Value::Null => Self::Null,
                }
            }
        }

        impl From<Vec<Value>> for $v::RowResult {
            fn from(values: Vec<Value>) -> Self {
                Self {
                    values: values.into_iter().map(Into::into).collect(),
                }
            }
        }

        impl From<QueryResult> for $v::QueryResult {
            fn from(r: QueryResult) -> Self {
                Self {
                    columns: r.columns,
                    rows: r.rows.into_iter().map(Into::into).collect(),
                }
            }
        }
    };
}

conversions!(v2);
conversions!(v30);
conversions!(v31);

/// The store-free functions of every version, on `Sqlite`; the 3.x
/// versions add the connection's counters (`counters`).
macro_rules! sync_host {
    ($v:ident $(, $counters:ident)?) => {
        impl $v::Host for Sqlite<'_> {}

        impl $v::HostConnection for Sqlite<'_> {
            async fn open(
                &mut self,
                database: String,
            ) -> wasmtime::Result<Result<Resource<Connection>, $v::Error>> {
                let (file, files) = (self.file(&database), self.grant.open_files.clone());
                Ok(match open(file, files, self.grant.slots.clone(), self.deadline).await {
                    Ok(c) => Ok(self.table.push(c)?),
                    Err(e) => Err(e.into()),
                })
            }

            async fn execute(
                &mut self,
                conn: Resource<Connection>,
                statement: String,
                parameters: Vec<$v::Value>,
            ) -> wasmtime::Result<Result<$v::QueryResult, $v::Error>> {
                let params = parameters.into_iter().map(Into::into).collect();
                let db = self.connection(&conn);
                Ok(execute(db, statement, params, self.deadline, self.grant.slots.clone(), self.unread)
                    .await
                    .map(Into::into)
                    .map_err(Into::into))
            }

            $(
            async fn last_insert_rowid(&mut self, conn: Resource<Connection>) -> wasmtime::Result<i64> {
                Ok(self.$counters(&conn).0)
            }

            async fn changes(&mut self, conn: Resource<Connection>) -> wasmtime::Result<u64> {
                Ok(self.$counters(&conn).1)
            }
            )?

            async fn drop(&mut self, conn: Resource<Connection>) -> wasmtime::Result<()> {
                self.table.delete(conn)?;
                Ok(())
            }
        }
    };
}

sync_host!(v2);
sync_host!(v30, counters);
sync_host!(v31, counters);

impl Sqlite<'_> {
    /// The connection's last insert rowid and change count.
    pub(crate) fn counters(&self, conn: &Resource<Connection>) -> (i64, u64) {
        // (Not through the database's lock: a statement may hold it on
        // the blocking pool for as long as the request's deadline.)
        self.table.get(conn).map_or((0, 0), |c| c.counters.get())
    }
}

struct HasSqlite;

impl HasData for HasSqlite {
    type Data<'a> = Sqlite<'a>;
}

impl<T: SqliteView + Send> v31::HostConnectionWithStore<T> for HasSqlite {
    async fn open_async(
        accessor: &Accessor<T, Self>,
        database: String,
    ) -> wasmtime::Result<Result<Resource<Connection>, v31::Error>> {
        let (file, files, slots, deadline) = accessor.with(|mut a| {
            let s = a.get();
            let files = s.grant.open_files.clone();
            (s.file(&database), files, s.grant.slots.clone(), s.deadline)
        });
        let opened = open(file, files, slots, deadline).await;
        accessor.with(|mut a| {
            Ok(match opened {
                Ok(c) => Ok(a.get().table.push(c)?),
                Err(e) => Err(e.into()),
            })
        })
    }

    async fn execute_async(
        accessor: &Accessor<T, Self>,
        conn: Resource<Connection>,
        statement: String,
        parameters: Vec<v31::Value>,
    ) -> wasmtime::Result<
        Result<
            (
                Vec<String>,
                StreamReader<v31::RowResult>,
                FutureReader<Result<(), v31::Error>>,
            ),
            v31::Error,
        >,
    > {
        let params = parameters.into_iter().map(Into::into).collect();
        let (db, deadline, unread, slots) = accessor.with(|mut a| {
            let s = a.get();
            (
                s.connection(&conn),
                s.deadline,
                s.unread.clone(),
                s.grant.slots.clone(),
            )
        });
        // The rows are read before the stream opens (bounded by
        // MAX_RESULT_BYTES), so a failure is the call's, never the stream's.
        let result = match execute(db, statement, params, deadline, slots, &unread).await {
            Ok(r) => r,
            Err(e) => return Ok(Err(e.into())),
        };
        let rows: Vec<v31::RowResult> = result.rows.into_iter().map(Into::into).collect();
        let rows = match unread.stream(rows, result.bytes) {
            Ok(r) => r,
            Err(refused) => return Ok(Err(v31::Error::Io(refused.to_string()))),
        };
        accessor.with(|mut a| {
            let rows = StreamReader::new(&mut a, rows)?;
            let done = FutureReader::new(&mut a, async { wasmtime::Result::<_>::Ok(Ok(())) })?;
            Ok(Ok((result.columns, rows, done)))
        })
    }

    async fn last_insert_rowid_async(
        accessor: &Accessor<T, Self>,
        conn: Resource<Connection>,
    ) -> wasmtime::Result<i64> {
        Ok(accessor.with(|mut a| a.get().counters(&conn).0))
    }

    async fn changes_async(
        accessor: &Accessor<T, Self>,
        conn: Resource<Connection>,
    ) -> wasmtime::Result<u64> {
        Ok(accessor.with(|mut a| a.get().counters(&conn).1))
    }
}

/// Adds Spin's SQLite interfaces (every version) to a linker.
///
/// `concurrent`: whether the linker's engine has Wasmtime's concurrency
/// support; the versions with async functions are linked only then.
pub fn add_to_linker<T: SqliteView + Send + 'static>(
    linker: &mut Linker<T>,
    concurrent: bool,
) -> wasmtime::Result<()> {
    fn view<T: SqliteView>(t: &mut T) -> Sqlite<'_> {
        t.sqlite()
    }
    v2::add_to_linker::<T, HasSqlite>(linker, view::<T>)?;
    v30::add_to_linker::<T, HasSqlite>(linker, view::<T>)?;
    if concurrent {
        v31::add_to_linker::<T, HasSqlite>(linker, view::<T>)?;
    }
    Ok(())
}
