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
    wire: std::sync::Arc<tokio::sync::Mutex<Wire>>,
    /// The largest packet the connection sends ([`max_packet_bytes`]).
    max_packet: usize,
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

/// The longest broker address taken.
const MAX_ADDRESS_BYTES: usize = 4096;

/// The longest string an MQTT packet carries (its length is two bytes).
const MAX_STRING_BYTES: usize = 65535;

/// The largest packet a publish may send unless the address says
/// otherwise (rumqttc's default, which it checks only when it writes the
/// packet).
const MAX_PACKET_BYTES: usize = 10 * 1024;

/// The largest packet a connection to `address` sends: its
/// `max_outgoing_packet_size_bytes` (read by rumqttc's `parse_url`, which
/// does not say it back), else [`MAX_PACKET_BYTES`].
fn max_packet_bytes(address: &str) -> usize {
    address
        .split_once('?')
        .and_then(|(_, query)| {
            query.split('&').find_map(|pair| {
                pair.strip_prefix("max_outgoing_packet_size_bytes=")?
                    .parse()
                    .ok()
            })
        })
        .unwrap_or(MAX_PACKET_BYTES)
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
    // Checked before anything waits (the outbound place, the name lookup):
    // until then the host holds the guest's copies, up to its memory each.
    if address.len() > MAX_ADDRESS_BYTES {
        return Err(Error::InvalidAddress);
    }
    if username.len() > MAX_STRING_BYTES || password.len() > MAX_STRING_BYTES {
        return Err(Error::Other(format!(
            "the user name and password are {} and {} bytes: MQTT allows at most {MAX_STRING_BYTES} each",
            username.len(),
            password.len()
        )));
    }
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
            wire: std::sync::Arc::new(tokio::sync::Mutex::new(Wire { events, unsent: 0 })),
            max_packet: max_packet_bytes(address),
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

/// The connection's event loop, and how many publishes were queued and
/// not yet seen going out (a publish whose call was abandoned).
struct Wire {
    events: EventLoop,
    unsent: usize,
}

impl Publisher {
    /// Publishes `payload` on `topic` and waits as `qos` asks: for this
    /// publish's own packet to go out (QoS 0), or for the broker's
    /// acknowledgement of its packet id (1) or its completion (2).
    /// Publishes on one connection go one at a time.
    pub async fn publish(&self, topic: String, payload: Vec<u8>, qos: Qos) -> Result<(), Error> {
        let qos = match qos {
            Qos::AtMostOnce => QoS::AtMostOnce,
            Qos::AtLeastOnce => QoS::AtLeastOnce,
            Qos::ExactlyOnce => QoS::ExactlyOnce,
        };
        // Refused before waiting for the connection (which a publish the
        // broker never acknowledges can hold until the deadline) rather
        // than when written: until then the host holds the guest's copies.
        // (rumqttc adds the packet's header when it checks.)
        if topic.len() + payload.len() > self.max_packet {
            return Err(Error::Other(format!(
                "the topic and payload are {} bytes: a packet may be at most {}",
                topic.len() + payload.len(),
                self.max_packet
            )));
        }
        let mut wire = self.wire.lock().await;
        self.client
            .publish(topic, qos, false, payload)
            .await
            .map_err(|e| Error::Other(e.to_string()))?;
        wire.unsent += 1;
        // Publishes queued before this one go out first.
        let mut ahead = wire.unsent - 1;
        let mut ours = None;
        loop {
            let event = wire
                .events
                .poll()
                .await
                .map_err(|e| Error::ConnectionFailed(e.to_string()))?;
            match event {
                Event::Outgoing(Outgoing::Publish(pkid)) => {
                    wire.unsent = wire.unsent.saturating_sub(1);
                    if ahead > 0 {
                        ahead -= 1;
                    } else if ours.is_none() {
                        if qos == QoS::AtMostOnce {
                            return Ok(());
                        }
                        ours = Some(pkid);
                    }
                }
                Event::Incoming(Incoming::PubAck(ack))
                    if qos == QoS::AtLeastOnce && ours == Some(ack.pkid) =>
                {
                    return Ok(());
                }
                Event::Incoming(Incoming::PubComp(done))
                    if qos == QoS::ExactlyOnce && ours == Some(done.pkid) =>
                {
                    return Ok(());
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A broker that accepts one client and acknowledges each QoS 1
    /// publish at once.
    async fn broker() -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            loop {
                let mut head = [0u8; 1];
                if s.read_exact(&mut head).await.is_err() {
                    return;
                }
                let (mut len, mut shift) = (0usize, 0);
                loop {
                    let b = s.read_u8().await.unwrap();
                    len |= usize::from(b & 0x7f) << shift;
                    shift += 7;
                    if b & 0x80 == 0 {
                        break;
                    }
                }
                let mut body = vec![0u8; len];
                s.read_exact(&mut body).await.unwrap();
                match head[0] >> 4 {
                    // CONNECT: CONNACK, accepted.
                    1 => s.write_all(&[0x20, 2, 0, 0]).await.unwrap(),
                    // PUBLISH at QoS 1: PUBACK of its packet id.
                    3 if (head[0] >> 1) & 3 == 1 => {
                        let topic = usize::from(u16::from_be_bytes([body[0], body[1]]));
                        let id = &body[2 + topic..4 + topic];
                        s.write_all(&[0x40, 2, id[0], id[1]]).await.unwrap();
                    }
                    // PINGREQ: PINGRESP.
                    12 => s.write_all(&[0xd0, 0]).await.unwrap(),
                    _ => {}
                }
            }
        });
        port
    }

    #[tokio::test]
    async fn a_publish_too_large_to_send_is_refused_without_waiting_for_the_connection() {
        let (client, events) = AsyncClient::new(MqttOptions::new("t", "127.0.0.1", 1), 4);
        let publisher = Publisher {
            client,
            wire: std::sync::Arc::new(tokio::sync::Mutex::new(Wire { events, unsent: 0 })),
            max_packet: max_packet_bytes("mqtt://127.0.0.1:1?client_id=t"),
        };
        // The connection is busy (a publish the broker never acknowledges).
        let _busy = publisher.wire.clone().lock_owned().await;
        let refused = tokio::time::timeout(
            Duration::from_secs(5),
            publisher.publish("t".into(), vec![0; MAX_PACKET_BYTES], Qos::AtMostOnce),
        )
        .await
        .expect("refused at once");
        assert!(
            matches!(&refused, Err(Error::Other(m)) if m.contains("at most 10240")),
            "{refused:?}"
        );
        // An address may raise it, as rumqttc reads it.
        let raised = "mqtt://b:1883?client_id=t&max_outgoing_packet_size_bytes=1048576";
        assert_eq!(max_packet_bytes(raised), 1 << 20);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn publishes_at_once_each_wait_for_their_own_packet() {
        let port = broker().await;
        let outbound = OutboundPolicy::new(
            vec![edge_config::OutboundRule::parse("mqtt://127.0.0.1:*").unwrap()],
            "t/c",
        )
        .with_addresses(edge_outbound_http::AddressPolicy::new(
            vec!["127.0.0.1/32".parse::<ipnet::IpNet>().unwrap()],
            Default::default(),
        ));
        let address = format!("mqtt://127.0.0.1:{port}?client_id=t");
        let c = open(
            outbound,
            &address,
            String::new(),
            String::new(),
            Duration::ZERO,
        )
        .await
        .unwrap();
        let (a, b) = (c.publisher(), c.publisher());
        // Both queued before either goes out: the first to wait saw both
        // packets go out and the second waited for one already gone.
        let both = async {
            tokio::join!(
                a.publish("t".into(), b"one".to_vec(), Qos::AtLeastOnce),
                b.publish("t".into(), b"two".to_vec(), Qos::AtMostOnce),
            )
        };
        let (one, two) = tokio::time::timeout(Duration::from_secs(20), both)
            .await
            .expect("a publish waited for a packet another had taken");
        assert!(one.is_ok() && two.is_ok());
    }
}
