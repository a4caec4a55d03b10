//! Who the client is behind the operator's own proxies
//! (`[server] trusted_proxies`): the address components are given as the
//! client's (`spin-client-addr`, `cf-connecting-ip`), on which they key
//! their rate limits. Behind a load balancer every connection's peer is the
//! balancer, so one client's failed logins would lock out all of them.

use http::HeaderMap;
use std::net::{IpAddr, SocketAddr};

/// The client of a request that came on a connection from `peer`, one of
/// the `trusted` proxies: the nearest address in its `X-Forwarded-For`
/// that is not a trusted proxy. The list is read from the right: each
/// proxy appends the address it got the request from, so only the entries
/// trusted proxies wrote are the truth, and whatever a client put left of
/// them is not. An entry that is no address stops the walk at the hop
/// that wrote it; with no header, the peer. Addresses carry the port they
/// were given with, else 0.
pub fn client(peer: SocketAddr, trusted: &[ipnet::IpNet], headers: &HeaderMap) -> SocketAddr {
    // Split as bytes, each entry judged alone: a client's unreadable entry
    // (non-UTF-8) must not take the whole value, and with it the entry
    // the proxy appended, out of the list.
    let entries: Vec<&[u8]> = headers
        .get_all("x-forwarded-for")
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .collect();
    let mut client = peer;
    for entry in entries.iter().rev() {
        let Some(addr) = std::str::from_utf8(entry)
            .ok()
            .and_then(|e| address(e.trim()))
        else {
            break;
        };
        client = addr;
        if !is_trusted(trusted, addr.ip()) {
            break;
        }
    }
    client
}

/// Whether `ip` is one of the `trusted` proxies: an IPv4 address (or an
/// IPv4-mapped IPv6 one) matches a range written either way.
pub fn is_trusted(trusted: &[ipnet::IpNet], ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    let mapped = match ip {
        IpAddr::V4(v4) => Some(IpAddr::V6(v4.to_ipv6_mapped())),
        IpAddr::V6(_) => None,
    };
    trusted
        .iter()
        .any(|net| net.contains(&ip) || mapped.is_some_and(|m| net.contains(&m)))
}

/// An `X-Forwarded-For` entry: an address, with or without a port
/// (`203.0.113.7`, `203.0.113.7:4711`, `2001:db8::7`, `[2001:db8::7]:4711`).
fn address(entry: &str) -> Option<SocketAddr> {
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip.to_canonical(), 0));
    }
    let addr = entry.parse::<SocketAddr>().ok()?;
    Some(SocketAddr::new(addr.ip().to_canonical(), addr.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client_of(peer: &str, xff: &[&str]) -> String {
        let trusted = ["10.0.0.0/8", "::1"].map(|t| edge_config::parse_ip_range(t).unwrap());
        let mut headers = HeaderMap::new();
        for v in xff {
            headers.append("x-forwarded-for", v.parse().unwrap());
        }
        client(peer.parse().unwrap(), &trusted, &headers).to_string()
    }

    #[test]
    fn the_nearest_untrusted_hop_is_the_client() {
        assert_eq!(
            client_of("10.0.0.1:5000", &["203.0.113.7"]),
            "203.0.113.7:0"
        );
        // What the client wrote itself (left of its proxy's entry) is not
        // believed, nor are trusted hops taken for the client.
        assert_eq!(
            client_of("10.0.0.1:5000", &["1.2.3.4, 203.0.113.7, 10.9.9.9"]),
            "203.0.113.7:0"
        );
        // Several headers are one list, in order.
        assert_eq!(
            client_of("[::1]:5000", &["1.2.3.4", "[2001:db8::7]:4711", "10.1.1.1"]),
            "[2001:db8::7]:4711"
        );
        assert_eq!(
            client_of("10.0.0.1:5000", &["203.0.113.7:80"]),
            "203.0.113.7:80"
        );
    }

    #[test]
    fn without_a_usable_entry_the_last_trusted_hop_is_the_client() {
        assert_eq!(client_of("10.0.0.1:5000", &[]), "10.0.0.1:5000");
        assert_eq!(client_of("10.0.0.1:5000", &["10.2.2.2"]), "10.2.2.2:0");
        assert_eq!(
            client_of("10.0.0.1:5000", &["203.0.113.7, unknown, 10.2.2.2"]),
            "10.2.2.2:0"
        );
        assert_eq!(
            client_of("10.0.0.1:5000", &["203.0.113.7, "]),
            "10.0.0.1:5000"
        );
    }

    #[test]
    fn an_unreadable_entry_does_not_hide_the_proxys_own() {
        // A proxy appending to the client's header makes one value: the
        // client's bytes must not take the proxy's entry with them.
        let trusted = [edge_config::parse_ip_range("10.0.0.0/8").unwrap()];
        let mut headers = HeaderMap::new();
        headers.append(
            "x-forwarded-for",
            http::HeaderValue::from_bytes(b"\xff, 203.0.113.7").unwrap(),
        );
        let peer = "10.0.0.1:5000".parse().unwrap();
        assert_eq!(
            client(peer, &trusted, &headers).to_string(),
            "203.0.113.7:0"
        );
        // Unreadable nearest the proxy: the proxy is the client.
        let mut headers = HeaderMap::new();
        headers.append(
            "x-forwarded-for",
            http::HeaderValue::from_bytes(b"203.0.113.7, \xff").unwrap(),
        );
        assert_eq!(
            client(peer, &trusted, &headers).to_string(),
            "10.0.0.1:5000"
        );
        // A range written in the IPv4-mapped form matches IPv4 peers.
        let mapped = [edge_config::parse_ip_range("::ffff:10.0.0.0/104").unwrap()];
        assert!(is_trusted(&mapped, "10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn mapped_addresses_are_their_ipv4_selves() {
        let trusted = [edge_config::parse_ip_range("10.0.0.0/8").unwrap()];
        assert!(is_trusted(&trusted, "::ffff:10.0.0.1".parse().unwrap()));
        assert!(!is_trusted(&trusted, "::ffff:11.0.0.1".parse().unwrap()));
        assert_eq!(
            client_of("10.0.0.1:5000", &["::ffff:203.0.113.7"]),
            "203.0.113.7:0"
        );
    }
}
