//! Which addresses a guest may connect to.
//!
//! A name in `allowed_outbound_hosts` says nothing about where it leads: a
//! tenant's own DNS can point `api.tenant.example` at `127.0.0.1`, at the
//! cloud metadata service (`169.254.169.254`) or at a neighbour on the
//! private network. So the address a name resolves to is checked, and that
//! checked address is the one connected to (a second lookup could answer
//! differently: DNS rebinding). Refused by default ([`special_range`]):
//! every range that is not the public internet, in each of its IPv6
//! spellings (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`,
//! NAT64 and 6to4 addresses embed an IPv4 address that is checked as one).
//! An operator opens ranges with `allow_ranges`; the host's admin listener
//! stays closed whatever is allowed, and its application listener is
//! reached only through an allowed range.
//!
//! ```
//! use edge_outbound_http::address::special_range;
//! assert_eq!(special_range("127.0.0.1".parse().unwrap()), Some("loopback (127.0.0.0/8)"));
//! assert_eq!(special_range("::ffff:10.1.2.3".parse().unwrap()), Some("private (10.0.0.0/8)"));
//! assert_eq!(special_range("93.184.215.14".parse().unwrap()), None);
//! ```

use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, RwLock};

/// The range `ip` belongs to if it is one a guest may not reach by default,
/// named for the log; `None` for a public address.
pub fn special_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => special_v4(v4),
            None => special_v6(v6),
        },
    }
}

/// IPv4 ranges refused by default (RFC 6890's special-purpose registry,
/// less what is meant to be globally reachable).
const V4: &[([u8; 4], u8, &str)] = &[
    ([0, 0, 0, 0], 8, "unspecified (0.0.0.0/8)"),
    ([10, 0, 0, 0], 8, "private (10.0.0.0/8)"),
    ([100, 64, 0, 0], 10, "shared CGNAT (100.64.0.0/10)"),
    ([127, 0, 0, 0], 8, "loopback (127.0.0.0/8)"),
    ([169, 254, 0, 0], 16, "link-local (169.254.0.0/16)"),
    ([172, 16, 0, 0], 12, "private (172.16.0.0/12)"),
    ([192, 0, 0, 0], 24, "IETF assignments (192.0.0.0/24)"),
    ([192, 0, 2, 0], 24, "documentation (192.0.2.0/24)"),
    ([192, 168, 0, 0], 16, "private (192.168.0.0/16)"),
    ([198, 18, 0, 0], 15, "benchmarking (198.18.0.0/15)"),
    ([198, 51, 100, 0], 24, "documentation (198.51.100.0/24)"),
    ([203, 0, 113, 0], 24, "documentation (203.0.113.0/24)"),
    ([224, 0, 0, 0], 4, "multicast (224.0.0.0/4)"),
    // Includes the limited broadcast address 255.255.255.255.
    ([240, 0, 0, 0], 4, "reserved or broadcast (240.0.0.0/4)"),
];

fn special_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let ip = u32::from(ip);
    V4.iter()
        .find(|(net, len, _)| ip >> (32 - len) == u32::from_be_bytes(*net) >> (32 - len))
        .map(|(_, _, name)| *name)
}

/// IPv6 ranges refused by default (those embedding IPv4 are checked as
/// IPv4 before these are looked at).
const V6: &[([u16; 8], u8, &str)] = &[
    ([0, 0, 0, 0, 0, 0, 0, 0], 128, "unspecified (::)"),
    ([0, 0, 0, 0, 0, 0, 0, 1], 128, "loopback (::1)"),
    ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard (100::/64)"),
    (
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
        32,
        "docs (2001:db8::/32)",
    ),
    ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique local (fc00::/7)"),
    ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local (fe80::/10)"),
    ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "site-local (fec0::/10)"),
    ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast (ff00::/8)"),
];

fn special_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let ip = u128::from(ip);
    V6.iter()
        .find(|(net, len, _)| {
            let net = u128::from(Ipv6Addr::from(*net));
            let shift = 128 - u32::from(*len);
            // A /128 shifts by 0; checked_shr keeps a /0 well defined.
            ip.checked_shr(shift).unwrap_or(0) == net.checked_shr(shift).unwrap_or(0)
        })
        .map(|(_, _, name)| *name)
}

/// The IPv4 address an IPv6 address stands for, where it embeds one that
/// a connection may end up at: IPv4-mapped (`::ffff:0:0/96`, which a dual
/// stack socket connects to as IPv4), IPv4-compatible (`::/96`, deprecated;
/// `::` and `::1` excepted), NAT64 (`64:ff9b::/96`, `64:ff9b:1::/48`) and
/// 6to4 (`2002::/16`).
pub fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(low),
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0, _, _] => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        [0x64, 0xff9b, 1, ..] => Some(low),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))),
        _ => None,
    }
}

/// The address a connection to `ip` really reaches: an IPv4-mapped IPv6
/// address is its IPv4 address (so allowed ranges, listeners and the log
/// all see one spelling).
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The host's own listeners, filled in once they are bound (their ports
/// may be ephemeral, so the config does not know them).
#[derive(Default, Debug)]
pub struct Listeners {
    app: Vec<SocketAddr>,
    admin: Vec<SocketAddr>,
}

/// Shared between every policy of the process.
pub type SharedListeners = Arc<RwLock<Listeners>>;

impl Listeners {
    /// Records the bound application and admin listener addresses.
    pub fn set(&mut self, app: Vec<SocketAddr>, admin: Vec<SocketAddr>) {
        self.app = app;
        self.admin = admin;
    }

    /// Which listener `addr` reaches, if any. `local` says that `addr` is
    /// known to be this machine (a loopback or unspecified address, or a
    /// connection whose two ends have the same address), so it reaches a
    /// listener bound to the unspecified address on its port; otherwise,
    /// for such a listener's port, whether it is one of this machine's
    /// addresses is asked of the kernel (before any connection: a client
    /// that connects by itself, such as a guest's socket, is checked only
    /// here).
    fn reached(&self, addr: SocketAddr, local: bool) -> Option<Own> {
        let hits = |list: &[SocketAddr]| {
            list.iter().any(|l| {
                l.port() == addr.port()
                    && (canonical(l.ip()) == addr.ip()
                        || (l.ip().is_unspecified() && (local || is_this_machine(addr.ip()))))
            })
        };
        if hits(&self.admin) {
            Some(Own::Admin)
        } else if hits(&self.app) {
            Some(Own::App)
        } else {
            None
        }
    }
}

/// Whether `ip` is an address of this machine: the kernel binds a socket
/// only to its own addresses (`EADDRNOTAVAIL` otherwise).
fn is_this_machine(ip: IpAddr) -> bool {
    ip.is_loopback()
        || ip.is_unspecified()
        || std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Own {
    Admin,
    App,
}

/// Why an address was refused, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The address policy of one tenant: the ranges its operator opened and
/// the host's listeners.
#[derive(Clone, Debug, Default)]
pub struct AddressPolicy {
    allow: Arc<[IpNet]>,
    listeners: SharedListeners,
}

impl AddressPolicy {
    /// A policy refusing the special ranges except `allow`, and the
    /// `listeners` of the host.
    pub fn new(allow: Vec<IpNet>, listeners: SharedListeners) -> Self {
        Self {
            allow: allow.into(),
            listeners,
        }
    }

    /// Whether both open the same ranges.
    pub fn same_ranges(&self, other: &AddressPolicy) -> bool {
        self.allow == other.allow
    }

    /// Checks `addr` before connecting: `Ok` with the address to connect
    /// to (canonical, see [`canonical`]), or why not.
    pub fn check(&self, addr: SocketAddr) -> Result<SocketAddr, Refused> {
        let addr = SocketAddr::new(canonical(addr.ip()), addr.port());
        let ip = addr.ip();
        self.check_listeners(addr, ip.is_loopback() || ip.is_unspecified())?;
        if self.allow.iter().any(|r| r.contains(&ip)) {
            return Ok(addr);
        }
        match special_range(ip) {
            Some(range) => Err(Refused(format!("{ip} is {range}"))),
            None => Ok(addr),
        }
    }

    /// Checks a connection once made: if its two ends have the same
    /// address the peer is this machine, which reaches listeners bound to
    /// the unspecified address under any of the machine's addresses.
    pub fn check_connected(&self, local: SocketAddr, peer: SocketAddr) -> Result<(), Refused> {
        let peer = SocketAddr::new(canonical(peer.ip()), peer.port());
        let same = canonical(local.ip()) == peer.ip();
        self.check_listeners(peer, same)
    }

    fn check_listeners(&self, addr: SocketAddr, local: bool) -> Result<(), Refused> {
        let listeners = self.listeners.read().unwrap_or_else(|e| e.into_inner());
        match listeners.reached(addr, local) {
            // The admin listener answers /metrics and /health of every
            // tenant: never a guest's to call, whatever ranges are open.
            Some(Own::Admin) => Err(Refused(format!("{addr} is the host's admin listener"))),
            Some(Own::App) if !self.allow.iter().any(|r| r.contains(&addr.ip())) => Err(Refused(
                format!("{addr} is the host's own listener (not in allow_ranges)"),
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn special(s: &str) -> Option<&'static str> {
        special_range(s.parse().unwrap())
    }

    #[test]
    fn ipv4_special_ranges() {
        for (ip, range) in [
            ("127.0.0.1", "loopback"),
            ("127.255.255.254", "loopback"),
            ("10.0.0.1", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("100.64.0.1", "shared CGNAT"),
            ("100.127.255.255", "shared CGNAT"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("255.255.255.255", "broadcast"),
        ] {
            assert!(special(ip).is_some_and(|r| r.contains(range)), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "93.184.215.14",
            "172.15.255.255",
            "172.32.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "169.253.255.255",
            "11.0.0.0",
        ] {
            assert_eq!(special(ip), None, "{ip}");
        }
    }

    #[test]
    fn ipv6_special_ranges() {
        for (ip, range) in [
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fc00::1", "unique local"),
            ("fd12:3456::1", "unique local"),
            ("fe80::1", "link-local"),
            ("febf::1", "link-local"),
            ("ff02::1", "multicast"),
            ("fec0::1", "site-local"),
        ] {
            assert!(special(ip).is_some_and(|r| r.contains(range)), "{ip}");
        }
        for ip in ["2606:4700::1111", "2001:4860:4860::8888", "fbff::1"] {
            assert_eq!(special(ip), None, "{ip}");
        }
    }

    /// RFC 4291 §2.5.5 (IPv4-compatible and IPv4-mapped), RFC 6052
    /// (NAT64), RFC 3056 (6to4): each is checked as the IPv4 it embeds.
    #[test]
    fn ipv6_spellings_of_ipv4_are_checked_as_ipv4() {
        for ip in [
            "::ffff:127.0.0.1",
            "::ffff:7f00:1",
            "::127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b:1::a00:1",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
        ] {
            assert!(special(ip).is_some(), "{ip}");
        }
        assert_eq!(special("::ffff:8.8.8.8"), None);
        assert_eq!(special("64:ff9b::808:808"), None);
        assert_eq!(special("2002:808:808::1"), None);
    }

    fn listeners(app: &str, admin: &str) -> SharedListeners {
        let mut l = Listeners::default();
        l.set(vec![app.parse().unwrap()], vec![admin.parse().unwrap()]);
        Arc::new(RwLock::new(l))
    }

    fn policy(allow: &[&str], app: &str, admin: &str) -> AddressPolicy {
        AddressPolicy::new(
            allow.iter().map(|r| r.parse().unwrap()).collect(),
            listeners(app, admin),
        )
    }

    fn check(p: &AddressPolicy, addr: &str) -> Result<SocketAddr, Refused> {
        p.check(addr.parse().unwrap())
    }

    #[test]
    fn allowed_ranges_open_what_they_name_only() {
        let p = policy(&["127.0.0.1/32"], "127.0.0.1:8080", "127.0.0.1:9080");
        assert_eq!(
            check(&p, "127.0.0.1:3000"),
            Ok("127.0.0.1:3000".parse().unwrap())
        );
        // The mapped spelling is the same address, connected to as IPv4.
        assert_eq!(
            check(&p, "[::ffff:127.0.0.1]:3000"),
            Ok("127.0.0.1:3000".parse().unwrap())
        );
        assert!(check(&p, "127.0.0.2:3000").is_err());
        assert!(check(&p, "[::1]:3000").is_err());
        assert!(check(&p, "10.0.0.1:80").is_err());
        assert!(check(&p, "8.8.8.8:443").is_ok());
        let refused = check(&policy(&[], "127.0.0.1:1", "127.0.0.1:2"), "127.0.0.1:80");
        assert_eq!(
            refused.unwrap_err().to_string(),
            "127.0.0.1 is loopback (127.0.0.0/8)"
        );
    }

    #[test]
    fn the_admin_listener_is_never_reached() {
        let p = policy(&["0.0.0.0/0", "::/0"], "127.0.0.1:8080", "127.0.0.1:9080");
        assert!(check(&p, "127.0.0.1:9080").is_err());
        assert!(check(&p, "[::ffff:127.0.0.1]:9080").is_err());
        // Bound to every address: any loopback or local address reaches it.
        let p = policy(&["0.0.0.0/0"], "0.0.0.0:8080", "0.0.0.0:9080");
        assert!(check(&p, "127.0.0.7:9080").is_err());
        assert!(check(&p, "0.0.0.0:9080").is_err());
        assert!(check(&p, "203.0.113.9:9080").is_ok()); // not this machine's
        // This machine's own non-loopback address (the one it would send
        // from): refused before any connection.
        let own = std::net::UdpSocket::bind("0.0.0.0:0")
            .and_then(|s| s.connect("192.0.2.1:9").map(|()| s))
            .and_then(|s| s.local_addr())
            .map(|a| a.ip());
        match own {
            Ok(ip) if !ip.is_loopback() => {
                assert!(p.check(SocketAddr::new(ip, 9080)).is_err(), "{ip}");
                assert!(p.check(SocketAddr::new(ip, 9081)).is_ok(), "{ip}");
            }
            // No route off the machine: it has no address but loopback.
            _ => eprintln!("no non-loopback address to check"),
        }
        let here = "203.0.113.9:9080".parse().unwrap();
        let from = "203.0.113.9:40000".parse().unwrap();
        assert!(p.check_connected(from, here).is_err());
        let elsewhere = "198.51.100.1:9080".parse().unwrap();
        assert!(p.check_connected(from, elsewhere).is_ok());
    }

    #[test]
    fn the_app_listener_needs_an_allowed_range() {
        let p = policy(&[], "203.0.113.9:8080", "127.0.0.1:9080");
        let e = check(&p, "203.0.113.9:8080").unwrap_err();
        assert!(e.0.contains("own listener"), "{e}");
        let p = policy(&["203.0.113.9/32"], "203.0.113.9:8080", "127.0.0.1:9080");
        assert!(check(&p, "203.0.113.9:8080").is_ok());
    }
}
