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

impl OutboundPolicy {
    /// Connects to `host:port` for `scheme`, within `timeout`.
    pub async fn connect_tcp(
        &self,
        scheme: &str,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<Connected, TcpError> {
        let shown = format!("{scheme}://{host}:{port}");
        // The host as a URL parser reads it (`127.1` is 127.0.0.1).
        let parsed = url::Host::parse(host.trim_start_matches('[').trim_end_matches(']'))
            .or_else(|_| url::Host::parse(host))
            .map_err(|_| TcpError::Connect(shown.clone(), "not a host name or address".into()))?;
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
        let connect = async {
            let resolved: Vec<SocketAddr> = match parsed {
                url::Host::Ipv4(a) => vec![SocketAddr::new(IpAddr::V4(a), port)],
                url::Host::Ipv6(a) => vec![SocketAddr::new(IpAddr::V6(a), port)],
                url::Host::Domain(d) => tokio::net::lookup_host((d.as_str(), port))
                    .await
                    .map_err(|e| TcpError::Connect(shown.clone(), e.to_string()))?
                    .collect(),
            };
            let mut refused = None;
            let mut failed = None;
            for addr in resolved {
                let addr = match self.addresses.check(addr) {
                    Ok(a) => a,
                    Err(why) => {
                        refused = Some(why);
                        continue;
                    }
                };
                match TcpStream::connect(addr).await {
                    Ok(stream) => {
                        if let Ok(local) = stream.local_addr()
                            && let Err(why) = self.addresses.check_connected(local, addr)
                        {
                            refused = Some(why);
                            continue;
                        }
                        let _ = stream.set_nodelay(true);
                        return Ok(stream);
                    }
                    Err(e) => failed = Some(e),
                }
            }
            Err(match (failed, refused) {
                (Some(e), _) => TcpError::Connect(shown.clone(), e.to_string()),
                (None, Some(why)) => {
                    tracing::warn!(component = %self.who, destination = %shown, reason = %why, "outbound connection refused by the address policy");
                    TcpError::Prohibited(shown.clone())
                }
                (None, None) => TcpError::Connect(shown.clone(), "the name has no address".into()),
            })
        };
        let stream = tokio::time::timeout(timeout, connect)
            .await
            .map_err(|_| TcpError::Connect(shown.clone(), "timed out".into()))??;
        Ok(Connected { stream, permit })
    }
}
