//! Outbound MQTT: Spin's `fermyon:spin/mqtt@2.0.0` and
//! `spin:mqtt/mqtt@3.0.0` (async functions): publish to a broker the
//! component names (`mqtt://host:port?client_id=ID`), as on Spin. An
//! address outside `allowed_outbound_hosts` (or one the tenant's address
//! policy refuses) is `connection-failed("address ... is not permitted")`,
//! Spin's words; an address that does not parse is `invalid-address`; more
//! connections than the tenant's outbound cap is `too-many-connections`.
//!
//! A publish returns once the broker has it as its QoS asks: sent (at most
//! once), acknowledged (at least once) or completed (exactly once).
#![deny(missing_docs)]

mod host;

pub use host::add_to_linker;

use edge_outbound_http::OutboundPolicy;
use edge_outbound_http::tcp::TcpError;
use rumqttc::{AsyncClient, Event, EventLoop, Incoming, MqttOptions, Outgoing, QoS};
use std::time::Duration;
use wasmtime::component::ResourceTable;

/// Requests queued between the client and its event loop.
const CHANNEL_CAP: usize = 100;

/// An open connection: a guest's handle.
pub struct Connection {
    publisher: Publisher,
    _permit: edge_outbound_http::limit::Permit,
}

impl Connection {
    /// A handle to publish on (shares the connection).
    pub fn publisher(&self) -> Publisher {
        self.publisher.clone()
    }
}

/// Publishes on a connection.
#[derive(Clone)]
pub struct Publisher {
    client: AsyncClient,
    events: std::sync::Arc<tokio::sync::Mutex<EventLoop>>,
}

/// What the linked functions see of the store data.
pub struct Mqtt<'a> {
    /// Where the component may connect.
    pub outbound: &'a OutboundPolicy,
    /// The instance's resource table.
    pub table: &'a mut ResourceTable,
}

/// Store data that carries a component's outbound policy.
pub trait MqttView {
    /// The outbound policy and resource table of the instance.
    fn mqtt(&mut self) -> Mqtt<'_>;
}

/// Why a call failed (Spin's variants).
#[derive(Debug)]
pub enum Error {
    /// The address does not parse.
    InvalidAddress,
    /// The tenant's outbound cap is reached.
    TooManyConnections,
    /// Not permitted, or the broker could not be reached.
    ConnectionFailed(String),
    /// Anything else.
    Other(String),
}

/// Opens a connection to `address` (connected at the first publish, as
/// rumqttc does).
pub async fn open(
    outbound: OutboundPolicy,
    address: &str,
    username: String,
    password: String,
    keep_alive: Duration,
) -> Result<Connection, Error> {
    let mut options = MqttOptions::parse_url(address).map_err(|_| Error::InvalidAddress)?;
    let (host, port) = options.broker_address();
    let checked = outbound
        .check_tcp("mqtt", &host, port)
        .await
        .map_err(|e| match e {
            TcpError::NotAllowed(_) | TcpError::Prohibited(_) => {
                Error::ConnectionFailed(format!("address {address} is not permitted"))
            }
            TcpError::TooMany => Error::TooManyConnections,
            TcpError::Connect(..) => Error::ConnectionFailed(e.to_string()),
        })?;
    // The client connects to the address checked, not to the name again.
    let mut pinned = MqttOptions::new(
        options.client_id(),
        checked.addr.ip().to_string(),
        checked.addr.port(),
    );
    if !username.is_empty() || !password.is_empty() {
        pinned.set_credentials(username, password);
    }
    // rumqttc refuses keep-alives under 5 s (other than 0).
    pinned.set_keep_alive(if keep_alive.is_zero() {
        keep_alive
    } else {
        keep_alive.max(Duration::from_secs(5))
    });
    options = pinned;
    let (client, events) = AsyncClient::new(options, CHANNEL_CAP);
    Ok(Connection {
        publisher: Publisher {
            client,
            events: std::sync::Arc::new(tokio::sync::Mutex::new(events)),
        },
        _permit: checked.permit,
    })
}

/// A publish's quality of service.
#[derive(Clone, Copy)]
pub enum Qos {
    /// Sent once, not acknowledged.
    AtMostOnce,
    /// Acknowledged.
    AtLeastOnce,
    /// Completed by the four-way handshake.
    ExactlyOnce,
}

impl Publisher {
    /// Publishes `payload` on `topic` and waits as `qos` asks.
    pub async fn publish(&self, topic: String, payload: Vec<u8>, qos: Qos) -> Result<(), Error> {
        let qos = match qos {
            Qos::AtMostOnce => QoS::AtMostOnce,
            Qos::AtLeastOnce => QoS::AtLeastOnce,
            Qos::ExactlyOnce => QoS::ExactlyOnce,
        };
        self.client
            .publish(topic, qos, false, payload)
            .await
            .map_err(|e| Error::Other(e.to_string()))?;
        let mut events = self.events.lock().await;
        loop {
            let event = events
                .poll()
                .await
                .map_err(|e| Error::ConnectionFailed(e.to_string()))?;
            match (qos, event) {
                (QoS::AtMostOnce, Event::Outgoing(Outgoing::Publish(_)))
                | (QoS::AtLeastOnce, Event::Incoming(Incoming::PubAck(_)))
                | (QoS::ExactlyOnce, Event::Incoming(Incoming::PubComp(_))) => return Ok(()),
                _ => {}
            }
        }
    }
}
