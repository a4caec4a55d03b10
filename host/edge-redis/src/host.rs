//! The WIT host functions of both versions, over [`crate::ops`].

use crate::{Connection, Error, Param, Redis, RedisView, Reply, ops};
use wasmtime::component::{Accessor, HasData, Linker, Resource};

mod generated {
    wasmtime::component::bindgen!({
        inline: "
            package edge:spin-redis;
            world host {
                import fermyon:spin/redis@2.0.0;
                import spin:redis/redis@3.0.0;
            }
        ",
        path: [
            "../../wit/spin/fermyon-spin@2.0.0",
            "../../wit/spin/spin-redis@3.0.0",
        ],
        imports: {
            "fermyon:spin/redis": async | trappable,
            default: trappable,
        },
        with: {
            "fermyon:spin/redis.connection": crate::Connection,
            "spin:redis/redis.connection": crate::Connection,
        },
    });
}

use generated::fermyon::spin::redis as v2;
use generated::spin::redis::redis as v3;

macro_rules! conversions {
    ($v:ident) => {
        impl From<Error> for $v::Error {
            fn from(e: Error) -> Self {
                match e {
                    Error::InvalidAddress => Self::InvalidAddress,
                    Error::TooManyConnections => Self::TooManyConnections,
                    Error::TypeError => Self::TypeError,
                    Error::Other(m) => Self::Other(m),
                }
            }
        }

        impl From<$v::RedisParameter> for Param {
            fn from(p: $v::RedisParameter) -> Self {
                match p {
                    $v::RedisParameter::Int64(i) => Param::Int(i),
                    $v::RedisParameter::Binary(b) => Param::Binary(b),
                }
            }
        }

        impl From<Reply> for $v::RedisResult {
            fn from(r: Reply) -> Self {
                match r {
                    Reply::Nil => Self::Nil,
                    Reply::Status(s) => Self::Status(s),
                    Reply::Int(i) => Self::Int64(i),
                    Reply::Binary(b) => Self::Binary(b),
                }
            }
        }
    };
}

conversions!(v2);
conversions!(v3);

impl Redis<'_> {
    fn conn(
        &self,
        c: &Resource<Connection>,
    ) -> wasmtime::Result<redis::aio::MultiplexedConnection> {
        Ok(self.table.get(c)?.handle())
    }
}

/// Runs `op`, with its error in the version's terms.
async fn run<T, E: From<Error>>(
    op: impl Future<Output = Result<T, Error>>,
) -> wasmtime::Result<Result<T, E>> {
    Ok(op.await.map_err(E::from))
}

impl v2::Host for Redis<'_> {}

impl v2::HostConnection for Redis<'_> {
    async fn open(
        &mut self,
        address: String,
    ) -> wasmtime::Result<Result<Resource<Connection>, v2::Error>> {
        match crate::open(self.outbound.clone(), &address).await {
            Ok(c) => Ok(Ok(self.table.push(c)?)),
            Err(e) => Ok(Err(e.into())),
        }
    }

    async fn publish(
        &mut self,
        c: Resource<Connection>,
        channel: String,
        payload: Vec<u8>,
    ) -> wasmtime::Result<Result<(), v2::Error>> {
        run(ops::publish(self.conn(&c)?, channel, payload)).await
    }

    async fn get(
        &mut self,
        c: Resource<Connection>,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, v2::Error>> {
        run(ops::get(self.conn(&c)?, key)).await
    }

    async fn set(
        &mut self,
        c: Resource<Connection>,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), v2::Error>> {
        run(ops::set(self.conn(&c)?, key, value)).await
    }

    async fn incr(
        &mut self,
        c: Resource<Connection>,
        key: String,
    ) -> wasmtime::Result<Result<i64, v2::Error>> {
        run(ops::incr(self.conn(&c)?, key)).await
    }

    async fn del(
        &mut self,
        c: Resource<Connection>,
        keys: Vec<String>,
    ) -> wasmtime::Result<Result<u32, v2::Error>> {
        run(ops::del(self.conn(&c)?, keys)).await
    }

    async fn sadd(
        &mut self,
        c: Resource<Connection>,
        key: String,
        values: Vec<String>,
    ) -> wasmtime::Result<Result<u32, v2::Error>> {
        run(ops::sadd(self.conn(&c)?, key, values)).await
    }

    async fn smembers(
        &mut self,
        c: Resource<Connection>,
        key: String,
    ) -> wasmtime::Result<Result<Vec<String>, v2::Error>> {
        run(ops::smembers(self.conn(&c)?, key)).await
    }

    async fn srem(
        &mut self,
        c: Resource<Connection>,
        key: String,
        values: Vec<String>,
    ) -> wasmtime::Result<Result<u32, v2::Error>> {
        run(ops::srem(self.conn(&c)?, key, values)).await
    }

    async fn execute(
        &mut self,
        c: Resource<Connection>,
        command: String,
        arguments: Vec<v2::RedisParameter>,
    ) -> wasmtime::Result<Result<Vec<v2::RedisResult>, v2::Error>> {
        let args = arguments.into_iter().map(Into::into).collect();
        Ok(ops::execute(self.conn(&c)?, command, args)
            .await
            .map(|r| r.into_iter().map(Into::into).collect())
            .map_err(Into::into))
    }

    async fn drop(&mut self, c: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(c)?;
        Ok(())
    }
}

struct HasRedis;

impl HasData for HasRedis {
    type Data<'a> = Redis<'a>;
}

impl v3::Host for Redis<'_> {}

impl v3::HostConnection for Redis<'_> {
    fn drop(&mut self, c: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(c)?;
        Ok(())
    }
}

fn conn_of<T: RedisView>(
    a: &Accessor<T, HasRedis>,
    c: &Resource<Connection>,
) -> wasmtime::Result<redis::aio::MultiplexedConnection> {
    a.with(|mut v| v.get().conn(c))
}

impl<T: RedisView + Send> v3::HostConnectionWithStore<T> for HasRedis {
    async fn open(
        a: &Accessor<T, Self>,
        address: String,
    ) -> wasmtime::Result<Result<Resource<Connection>, v3::Error>> {
        let outbound = a.with(|mut v| v.get().outbound.clone());
        match crate::open(outbound, &address).await {
            Ok(c) => a.with(|mut v| Ok(Ok(v.get().table.push(c)?))),
            Err(e) => Ok(Err(e.into())),
        }
    }

    async fn publish(
        a: &Accessor<T, Self>,
        c: Resource<Connection>,
        channel: String,
        payload: Vec<u8>,
    ) -> wasmtime::Result<Result<(), v3::Error>> {
        run(ops::publish(conn_of(a, &c)?, channel, payload)).await
    }

    async fn get(
        a: &Accessor<T, Self>,
        c: Resource<Connection>,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, v3::Error>> {
        run(ops::get(conn_of(a, &c)?, key)).await
    }

    async fn set(
        a: &Accessor<T, Self>,
        c: Resource<Connection>,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), v3::Error>> {
        run(ops::set(conn_of(a, &c)?, key, value)).await
    }

    async fn incr(
        a: &Accessor<T, Self>,
        c: Resource<Connection>,
        key: String,
    ) -> wasmtime::Result<Result<i64, v3::Error>> {
        run(ops::incr(conn_of(a, &c)?, key)).await
    }

    async fn del(
        a: &Accessor<T, Self>,
        c: Resource<Connection>,
        keys: Vec<String>,
    ) -> wasmtime::Result<Result<u32, v3::Error>> {
        run(ops::del(conn_of(a, &c)?, keys)).await
    }

    async fn sadd(
        a: &Accessor<T, Self>,
        c: Resource<Connection>,
        key: String,
        values: Vec<String>,
    ) -> wasmtime::Result<Result<u32, v3::Error>> {
        run(ops::sadd(conn_of(a, &c)?, key, values)).await
    }

    async fn smembers(
        a: &Accessor<T, Self>,
        c: Resource<Connection>,
        key: String,
    ) -> wasmtime::Result<Result<Vec<String>, v3::Error>> {
        run(ops::smembers(conn_of(a, &c)?, key)).await
    }

    async fn srem(
        a: &Accessor<T, Self>,
        c: Resource<Connection>,
        key: String,
        values: Vec<String>,
    ) -> wasmtime::Result<Result<u32, v3::Error>> {
        run(ops::srem(conn_of(a, &c)?, key, values)).await
    }

    async fn execute(
        a: &Accessor<T, Self>,
        c: Resource<Connection>,
        command: String,
        arguments: Vec<v3::RedisParameter>,
    ) -> wasmtime::Result<Result<Vec<v3::RedisResult>, v3::Error>> {
        let args = arguments.into_iter().map(Into::into).collect();
        Ok(ops::execute(conn_of(a, &c)?, command, args)
            .await
            .map(|r| r.into_iter().map(Into::into).collect())
            .map_err(Into::into))
    }
}

/// Adds Spin's Redis interfaces (both versions) to a linker.
///
/// `concurrent`: whether the linker's engine has Wasmtime's concurrency
/// support; the versions with async functions are linked only then.
pub fn add_to_linker<T: RedisView + Send + 'static>(
    linker: &mut Linker<T>,
    concurrent: bool,
) -> wasmtime::Result<()> {
    fn view<T: RedisView>(t: &mut T) -> Redis<'_> {
        t.redis()
    }
    v2::add_to_linker::<T, HasRedis>(linker, view::<T>)?;
    if concurrent {
        v3::add_to_linker::<T, HasRedis>(linker, view::<T>)?;
    }
    Ok(())
}
