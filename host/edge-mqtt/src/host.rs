//! The WIT host functions of both versions.

use crate::{Connection, Error, Mqtt, MqttView, Qos};
use std::time::Duration;
use wasmtime::component::{Accessor, HasData, Linker, Resource};

mod generated {
    wasmtime::component::bindgen!({
        inline: "
            package edge:spin-mqtt;
            world host {
                import fermyon:spin/mqtt@2.0.0;
                import spin:mqtt/mqtt@3.0.0;
            }
        ",
        path: [
            "../../wit/spin/fermyon-spin@2.0.0",
            "../../wit/spin/spin-mqtt@3.0.0",
        ],
        imports: {
            "fermyon:spin/mqtt": async | trappable,
            default: trappable,
        },
        with: {
            "fermyon:spin/mqtt.connection": crate::Connection,
            "spin:mqtt/mqtt.connection": crate::Connection,
        },
    });
}

use generated::fermyon::spin::mqtt as v2;
use generated::spin::mqtt::mqtt as v3;

macro_rules! conversions {
    ($v:ident) => {
        impl From<Error> for $v::Error {
            fn from(e: Error) -> Self {
                match e {
                    Error::InvalidAddress => Self::InvalidAddress,
                    Error::TooManyConnections => Self::TooManyConnections,
                    Error::ConnectionFailed(m) => Self::ConnectionFailed(m),
                    Error::Other(m) => Self::Other(m),
                }
            }
        }

        impl From<$v::Qos> for Qos {
            fn from(q: $v::Qos) -> Self {
                match q {
                    $v::Qos::AtMostOnce => Qos::AtMostOnce,
                    $v::Qos::AtLeastOnce => Qos::AtLeastOnce,
                    $v::Qos::ExactlyOnce => Qos::ExactlyOnce,
                }
            }
        }
    };
}

conversions!(v2);
conversions!(v3);

impl v2::Host for Mqtt<'_> {}

impl v2::HostConnection for Mqtt<'_> {
    async fn open(
        &mut self,
        address: String,
        username: String,
        password: String,
        keep_alive: u64,
    ) -> wasmtime::Result<Result<Resource<Connection>, v2::Error>> {
        let opened = crate::open(
            self.outbound.clone(),
            &address,
            username,
            password,
            Duration::from_secs(keep_alive),
        )
        .await;
        match opened {
            Ok(c) => Ok(Ok(self.table.push(c)?)),
            Err(e) => Ok(Err(e.into())),
        }
    }

    async fn publish(
        &mut self,
        c: Resource<Connection>,
        topic: String,
        payload: Vec<u8>,
        qos: v2::Qos,
    ) -> wasmtime::Result<Result<(), v2::Error>> {
        let publisher = self.table.get(&c)?.publisher();
        Ok(publisher
            .publish(topic, payload, qos.into())
            .await
            .map_err(Into::into))
    }

    async fn drop(&mut self, c: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(c)?;
        Ok(())
    }
}

struct HasMqtt;

impl HasData for HasMqtt {
    type Data<'a> = Mqtt<'a>;
}

impl v3::Host for Mqtt<'_> {}

impl v3::HostConnection for Mqtt<'_> {
    fn drop(&mut self, c: Resource<Connection>) -> wasmtime::Result<()> {
        self.table.delete(c)?;
        Ok(())
    }
}

impl<T: MqttView + Send> v3::HostConnectionWithStore<T> for HasMqtt {
    async fn open(
        a: &Accessor<T, Self>,
        address: String,
        username: String,
        password: String,
        keep_alive: u64,
    ) -> wasmtime::Result<Result<Resource<Connection>, v3::Error>> {
        let outbound = a.with(|mut v| v.get().outbound.clone());
        let opened = crate::open(
            outbound,
            &address,
            username,
            password,
            Duration::from_secs(keep_alive),
        )
        .await;
        match opened {
            Ok(c) => a.with(|mut v| Ok(Ok(v.get().table.push(c)?))),
            Err(e) => Ok(Err(e.into())),
        }
    }

    async fn publish(
        a: &Accessor<T, Self>,
        c: Resource<Connection>,
        topic: String,
        payload: Vec<u8>,
        qos: v3::Qos,
    ) -> wasmtime::Result<Result<(), v3::Error>> {
        let publisher = a.with(|mut v| v.get().table.get(&c).map(Connection::publisher))?;
        Ok(publisher
            .publish(topic, payload, qos.into())
            .await
            .map_err(Into::into))
    }
}

/// Adds Spin's MQTT interfaces (both versions) to a linker.
///
/// `concurrent`: whether the linker's engine has Wasmtime's concurrency
/// support; the versions with async functions are linked only then.
pub fn add_to_linker<T: MqttView + Send + 'static>(
    linker: &mut Linker<T>,
    concurrent: bool,
) -> wasmtime::Result<()> {
    fn view<T: MqttView>(t: &mut T) -> Mqtt<'_> {
        t.mqtt()
    }
    v2::add_to_linker::<T, HasMqtt>(linker, view::<T>)?;
    if concurrent {
        v3::add_to_linker::<T, HasMqtt>(linker, view::<T>)?;
    }
    Ok(())
}
