//! Outbound HTTP capability.
//!
//! Every component can import `wasi:http/outgoing-handler` (it is part of
//! the `wasi:http/proxy` world), so the grant is not whether the import is
//! linked but where requests may go: a request is sent only if its
//! `scheme://host:port` matches an entry of the component's
//! `allowed_outbound_hosts` (Spin's syntax, see [`edge_config::OutboundRule`]).
//! Anything else fails with `HTTP-request-denied` before a socket is opened.
//! The name's addresses are then checked ([`address`]: no loopback,
//! private, link-local... unless the operator allowed the range; a refusal
//! is `destination-IP-prohibited`), and the tenant's requests in flight are
//! capped ([`limit`]: `connection-limit-reached`). Allowed requests go out
//! over kept-alive connections ([`pool`]) to the checked address.
//!
//! ```
//! use edge_outbound_http::OutboundPolicy;
//! let policy = OutboundPolicy::new(
//!     vec![edge_config::OutboundRule::parse("http://127.0.0.1:*").unwrap()],
//!     "tenant/component",
//! );
//! assert!(policy.allows("http", "127.0.0.1", 8080));
//! assert!(!policy.allows("https", "example.com", 443));
//! ```
#![deny(missing_docs)]

pub mod address;
pub mod checked;
pub mod limit;
pub mod lookup;
pub mod pool;
pub mod tcp;

/// Removes the headers that a `Connection` header names: hop-by-hop by
/// declaration (RFC 9110 §7.6.1), meant for this connection only and never
/// to be forwarded. Done by the host, in both directions, because
/// wasi-http hides `Connection` itself from guests, so a guest that proxies
/// (the rewriter) cannot see which headers to drop. `Host` is kept: it is
/// end to end whatever a client claims.
///
/// ```
/// use http::HeaderMap;
/// let mut h = HeaderMap::new();
/// h.insert("connection", "X-Trace, close".parse().unwrap());
/// h.insert("x-trace", "1".parse().unwrap());
/// h.insert("x-kept", "2".parse().unwrap());
/// edge_outbound_http::strip_connection_listed(&mut h);
/// assert!(h.get("x-trace").is_none());
/// assert!(h.get("x-kept").is_some());
/// ```
pub fn strip_connection_listed(headers: &mut http::HeaderMap) {
    let listed: Vec<http::HeaderName> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| http::HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .filter(|name| *name != http::header::HOST)
        .collect();
    for name in listed {
        headers.remove(name);
    }
}

use edge_config::OutboundRule;
use std::sync::Arc;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

pub use address::AddressPolicy;
pub use limit::{Registry, TenantOutbound};

/// Where one component of one tenant may send requests: the names of its
/// allowlist, the addresses they may resolve to, and its tenant's cap on
/// requests in flight. Cheap to clone (shared), so each store gets its own
/// handle.
#[derive(Clone, Debug)]
pub struct OutboundPolicy {
    rules: Arc<[OutboundRule]>,
    who: Arc<str>,
    addresses: AddressPolicy,
    tenant: Arc<TenantOutbound>,
}

impl OutboundPolicy {
    /// A policy allowing exactly `rules`, refusing every special address
    /// range, with the default cap; `who` names the caller in logs.
    pub fn new(rules: Vec<OutboundRule>, who: &str) -> Self {
        Self {
            rules: rules.into(),
            who: who.into(),
            addresses: AddressPolicy::default(),
            tenant: Arc::new(TenantOutbound::new(
                who.split('/').next().unwrap_or(who),
                limit::DEFAULT_MAX_REQUESTS,
            )),
        }
    }

    /// The tenant's outbound state (its cap, counters and lookups).
    pub fn tenant(&self) -> &Arc<TenantOutbound> {
        &self.tenant
    }

    /// Who the policy is for (`tenant/component`), as logs name it.
    pub fn who(&self) -> &str {
        &self.who
    }

    /// A place in the tenant's cap for a connection the host does not make
    /// itself (a guest's `wasi:sockets` socket), or `None` (counted and
    /// logged) at the cap.
    pub fn place(&self) -> Option<limit::Permit> {
        let place = self.tenant.acquire();
        if place.is_none() {
            tracing::warn!(component = %self.who, "socket refused: the tenant has its max_outbound_requests open");
        }
        place
    }

    /// The same with `addresses` as the address policy.
    pub fn with_addresses(mut self, addresses: AddressPolicy) -> Self {
        self.addresses = addresses;
        self
    }

    /// The same counting against (and capped by) `tenant`.
    pub fn with_tenant(mut self, tenant: Arc<TenantOutbound>) -> Self {
        self.tenant = tenant;
        self
    }

    /// A policy that allows nothing.
    pub fn deny_all(who: &str) -> Self {
        Self::new(Vec::new(), who)
    }

    /// Whether both allow exactly the same destinations.
    pub fn same_rules(&self, other: &OutboundPolicy) -> bool {
        self.rules == other.rules && self.addresses.same_ranges(&other.addresses)
    }

    /// Whether a request to `scheme://host:port` may be sent (by name:
    /// the address it resolves to is checked when connecting).
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        self.rules.iter().any(|r| r.allows(scheme, host, port))
    }

    fn check(&self, request: &http::Request<WasiBody>) -> Result<pool::Destination, Error> {
        let uri = request.uri();
        let scheme = uri.scheme_str().unwrap_or("https");
        let Some(raw) = uri.host() else {
            return Err(Error::HttpRequestUriInvalid);
        };
        // The host as a WHATWG URL parser reads it: `0x7f.1`, `127.1` and
        // `2130706433` are 127.0.0.1, IDNs are punycode. Matched and
        // connected to in this form, whatever the guest wrote.
        let host = match url::Host::parse(raw) {
            Ok(h) if !raw.is_empty() => h,
            _ => return Err(Error::HttpRequestUriInvalid),
        };
        let name = match &host {
            url::Host::Domain(d) => d.clone(),
            url::Host::Ipv4(a) => a.to_string(),
            url::Host::Ipv6(a) => a.to_string(),
        };
        let tls = scheme == "https";
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        if self.allows(scheme, &name, port) {
            Ok(pool::Destination {
                host,
                name,
                port,
                tls,
            })
        } else {
            self.tenant
                .refused_allowlist
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(
                component = %self.who,
                %scheme, host = %name, port,
                "outbound request denied: not in allowed_outbound_hosts"
            );
            Err(Error::HttpRequestDenied)
        }
    }
}

type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), Error>> + Send>,
                ),
                Error,
            >,
        > + Send,
>;

impl OutboundPolicy {
    /// Sends `request` exactly as a guest holding this policy sends one
    /// through `wasi:http/outgoing-handler`: its URI against the
    /// allowlist, a place under the tenant's cap (held until the response
    /// body is dropped), the resolved addresses against the address
    /// policy, over the owner's kept-alive connections, with `options`'
    /// timeouts (connect, first byte, between bytes). The request's headers
    /// go as they are (`Host` included: a guest's is the URI's authority).
    /// What the host itself fetches for a tenant (the console's preview of
    /// a site's origin) goes this way, so it reaches nothing the tenant's
    /// component could not.
    pub fn send(
        &self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> impl Future<Output = Result<pool::Sent, Error>> + Send + 'static {
        let checked = self.check(&request).and_then(|destination| {
            let Some(permit) = self.tenant.acquire() else {
                tracing::warn!(
                    component = %self.who,
                    host = %destination.name,
                    limit = self.tenant.max_requests(),
                    "outbound request refused: the tenant has max_outbound_requests in flight"
                );
                return Err(Error::ConnectionLimitReached);
            };
            Ok(pool::Call {
                owner: self.who.clone(),
                destination,
                addresses: self.addresses.clone(),
                tenant: self.tenant.clone(),
                permit,
            })
        });
        async move {
            let call = checked?;
            // Its lookup, connect and TLS handshake are the tenant's
            // work: run in its lane, charged to it.
            let work = call.tenant.work();
            work.paced(pool::send(call, request, options)).await
        }
    }
}

impl WasiHttpHooks for OutboundPolicy {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> SendFuture {
        Box::new(self.send(request, options))
    }
}
