//! Outbound TCP for clients other than HTTP (databases, Redis, MQTT,
//! `wasi:sockets`): the same gates as an HTTP request, in the same order:
//! the component's allowlist by name (`scheme://host:port`, Spin's rules),
//! then each address the name resolves to against the tenant's address
//! policy, then the connection's own ends (the host's listeners), with a
//! place in the tenant's outbound cap held for as long as the connection.

use crate::OutboundPolicy;
use crate::limit::Permit;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::net::TcpStream;

/// Why a connection was not made.
#[derive(Debug, thiserror::Error)]
pub enum TcpError {
    /// Not in `allowed_outbound_hosts`.
    #[error("{0} is not allowed by the component's allowed_outbound_hosts")]
    NotAllowed(String),
    /// The address is one the tenant may not reach (a private range not
    /// in `allow_ranges`, the host's own listeners).
    #[error("{0} is not reachable from this tenant")]
    Prohibited(String),
    /// The tenant has its cap of outbound connections open.
    #[error("too many outbound connections")]
    TooMany,
    /// DNS, refusal, timeout.
    #[error("cannot connect to {0}: {1}")]
    Connect(String, String),
}

/// A connection and its place in the tenant's cap.
pub struct Connected {
    /// The stream.
    pub stream: TcpStream,
    /// Given back when the connection is dropped.
    pub permit: Permit,
}

/// An address checked for a client that connects by itself, and the
/// place in the tenant's cap the connection holds.
pub struct Checked {
    /// Connect to exactly this address (its name was checked, and it was
    /// resolved and checked here: the client must not resolve it again).
    pub addr: SocketAddr,
    /// Given back when the connection is dropped.
    pub permit: Permit,
}

impl OutboundPolicy {
    /// Whether a guest's own socket (`wasi:sockets`) may reach `addr` with
    /// `scheme` (`tcp` or `udp`): Spin's rule (the address against
    /// `allowed_outbound_hosts`, by address: a rule naming a host never
    /// matches a socket address), then the tenant's address policy.
    pub fn allows_socket(&self, scheme: &str, addr: SocketAddr) -> bool {
        let ip = crate::address::canonical(addr.ip()).to_string();
        if !self.allows(scheme, &ip, addr.port()) {
            self.tenant
                .refused_allowlist
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(component = %self.who, %scheme, %addr, "socket denied: not in allowed_outbound_hosts");
            return false;
        }
        match self.addresses.check(addr) {
            Ok(_) => true,
            Err(why) => {
                tracing::warn!(component = %self.who, %scheme, %addr, reason = %why, "socket refused by the address policy");
                false
            }
        }
    }

    /// Whether some rule may allow sockets of `scheme` (`tcp`, `udp`).
    pub fn covers_scheme(&self, scheme: &str) -> bool {
        self.rules.iter().any(|r| r.covers_scheme(scheme))
    }

    /// Checks `scheme://host:port` against the allowlist by name, takes a
    /// place in the tenant's cap, and resolves the name to the addresses
    /// the tenant may reach.
    async fn checked_addresses(
        &self,
        scheme: &str,
        host: &str,
        port: u16,
    ) -> Result<(Vec<SocketAddr>, Permit), TcpError> {
        let shown = format!("{scheme}://{host}:{port}");
        // An address with or without its brackets (clients hand over an
        // IPv6 literal either way), else the host as a URL parser reads
        // it (`127.1` is 127.0.0.1).
        let parsed = match host.trim_start_matches('[').trim_end_matches(']').parse() {
            Ok(IpAddr::V4(a)) => url::Host::Ipv4(a),
            Ok(IpAddr::V6(a)) => url::Host::Ipv6(a),
            Err(_) => url::Host::parse(host).map_err(|_| {
                TcpError::Connect(shown.clone(), "not a host name or address".into())
            })?,
        };
        let name = match &parsed {
            url::Host::Domain(d) => d.clone(),
            url::Host::Ipv4(a) => a.to_string(),
            url::Host::Ipv6(a) => a.to_string(),
        };
        if !self.allows(scheme, &name, port) {
            self.tenant
                .refused_allowlist
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(component = %self.who, %scheme, host = %name, port, "outbound connection denied: not in allowed_outbound_hosts");
            return Err(TcpError::NotAllowed(shown));
        }
        let permit = self.tenant.acquire().ok_or(TcpError::TooMany)?;
        let resolved: Vec<SocketAddr> = match parsed {
            url::Host::Ipv4(a) => vec![SocketAddr::new(IpAddr::V4(a), port)],
            url::Host::Ipv6(a) => vec![SocketAddr::new(IpAddr::V6(a), port)],
            url::Host::Domain(d) => crate::lookup::resolve(self.tenant.clone(), d, port)
                .await
                .map_err(|e| TcpError::Connect(shown.clone(), e.to_string()))?,
        };
        let mut refused = None;
        let mut accepted = Vec::new();
        for addr in resolved {
            match self.addresses.check(addr) {
                Ok(a) if !accepted.contains(&a) => accepted.push(a),
                Ok(_) => {}
                Err(why) => refused = Some(why),
            }
        }
        if accepted.is_empty() {
            return Err(match refused {
                Some(why) => {
                    tracing::warn!(component = %self.who, destination = %shown, reason = %why, "outbound connection refused by the address policy");
                    TcpError::Prohibited(shown)
                }
                None => TcpError::Connect(shown, "the name has no address".into()),
            });
        }
        Ok((accepted, permit))
    }

    /// Checks `scheme://host:port` for a client that connects by itself:
    /// the first address it may use.
    pub async fn check_tcp(
        &self,
        scheme: &str,
        host: &str,
        port: u16,
    ) -> Result<Checked, TcpError> {
        let (addrs, permit) = self.checked_addresses(scheme, host, port).await?;
        Ok(Checked {
            addr: addrs[0],
            permit,
        })
    }

    /// Connects to `host:port` for `scheme`, within `timeout`.
    pub async fn connect_tcp(
        &self,
        scheme: &str,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<Connected, TcpError> {
        let shown = format!("{scheme}://{host}:{port}");
        let connect = async {
            let (addrs, permit) = self.checked_addresses(scheme, host, port).await?;
            let mut failed = None;
            for addr in addrs {
                // Made on a serving runtime even during a call in the
                // background lane: its reactor wakes the connection's
                // tasks for its whole life.
                let made = self
                    .tenant()
                    .work()
                    .in_front(TcpStream::connect(addr))
                    .await;
                match made.unwrap_or_else(|e| Err(std::io::Error::other(e))) {
                    Ok(stream) => {
                        // Listeners bound to every address are reached
                        // under any address of this machine: known only
                        // now, from the connection's own end.
                        if let Ok(local) = stream.local_addr()
                            && let Err(why) = self.addresses.check_connected(local, addr)
                        {
                            tracing::warn!(component = %self.who, destination = %shown, reason = %why, "outbound connection refused by the address policy");
                            return Err(TcpError::Prohibited(shown.clone()));
                        }
                        let _ = stream.set_nodelay(true);
                        return Ok(Connected { stream, permit });
                    }
                    Err(e) => failed = Some(e),
                }
            }
            Err(TcpError::Connect(
                shown.clone(),
                failed.map_or("no address".into(), |e| e.to_string()),
            ))
        };
        tokio::time::timeout(timeout, connect)
            .await
            .map_err(|_| TcpError::Connect(shown.clone(), "timed out".into()))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_ipv6_literal_is_read_with_or_without_brackets() {
        let policy = OutboundPolicy::new(
            vec![edge_config::OutboundRule::parse("postgres://[::1]:*").unwrap()],
            "t/c",
        )
        .with_addresses(crate::AddressPolicy::new(
            vec!["::1/128".parse().unwrap()],
            Default::default(),
        ));
        for host in ["::1", "[::1]"] {
            let checked = policy.check_tcp("postgres", host, 5432).await;
            assert_eq!(
                checked.map(|c| c.addr).ok(),
                Some("[::1]:5432".parse().unwrap()),
                "{host}"
            );
        }
        // A name is still a name, and `127.1` still 127.0.0.1.
        let other = policy.check_tcp("postgres", "127.1", 5432).await;
        assert!(
            matches!(other, Err(TcpError::NotAllowed(_))),
            "{:?}",
            other.err()
        );
    }
}
