//! Spin's `allowed_outbound_hosts` syntax: `scheme://host[:port]`, where any
//! part may be `*` and the host may start with `*.`.
//!
//! ```
//! use edge_config::OutboundRule;
//! let rule = OutboundRule::parse("https://*.example.com").unwrap();
//! assert!(rule.allows("https", "api.example.com", 443));
//! assert!(!rule.allows("https", "api.example.com", 8443)); // port defaults to the scheme's
//! assert!(!rule.allows("http", "api.example.com", 80));
//! ```

use serde::Deserialize;
use toml::Spanned;

/// `[outbound]` and `[tenant.outbound]`: what outbound HTTP may reach
/// beyond the public internet.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutboundSection {
    #[serde(default)]
    pub allow_ranges: Vec<Spanned<String>>,
}

/// Parses one `allow_ranges` entry: a CIDR range or a single address.
///
/// ```
/// use edge_config::parse_ip_range;
/// assert_eq!(parse_ip_range("127.0.0.1").unwrap().to_string(), "127.0.0.1/32");
/// assert_eq!(parse_ip_range("10.0.0.0/8").unwrap().to_string(), "10.0.0.0/8");
/// assert!(parse_ip_range("10.0.0.1/8").unwrap_err().contains("10.0.0.0/8"));
/// ```
pub fn parse_ip_range(entry: &str) -> Result<ipnet::IpNet, String> {
    const ALLOWED: &str =
        "allowed: an address or a CIDR range such as \"127.0.0.1/32\", \"10.0.0.0/8\", \"::1/128\"";
    let entry = entry.trim();
    if let Ok(ip) = entry.parse::<std::net::IpAddr>() {
        return Ok(ipnet::IpNet::from(ip));
    }
    let net: ipnet::IpNet = entry
        .parse()
        .map_err(|_| format!("{entry:?} is not an IP range ({ALLOWED})"))?;
    if net.trunc() != net {
        return Err(format!(
            "{entry:?} has bits set past its prefix length: write {:?}, or the address alone",
            net.trunc().to_string()
        ));
    }
    Ok(net)
}

/// One entry of a component's outbound allowlist, with Spin's syntax and
/// meaning: `scheme://host[:port]`, where the scheme is a word (`https`,
/// `postgres`, `mysql`, `redis`, `mqtt`, `tcp`, ...) or `*`; the host a
/// name, `*.suffix`, `*`, an address or a CIDR range; the port a number,
/// a range `start..end` (end excluded), `*`, or omitted for the scheme's
/// well-known port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundRule {
    source: String,
    scheme: Option<String>,
    host: HostMatch,
    port: PortMatch,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostMatch {
    Any,
    Exact(String),
    /// `*.example.com` stored as `.example.com`.
    Suffix(String),
    Cidr(ipnet::IpNet),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PortMatch {
    Any,
    One(u16),
    /// `start..end`, end excluded (Spin's).
    Range(std::ops::Range<u16>),
}

/// The port a scheme uses when none is given (Spin's list).
pub fn well_known_port(scheme: &str) -> Option<u16> {
    match scheme {
        "postgres" => Some(5432),
        "mysql" => Some(3306),
        "redis" => Some(6379),
        "mqtt" => Some(1883),
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

impl OutboundRule {
    /// Parses one allowlist entry; the error says what is allowed.
    pub fn parse(entry: &str) -> Result<Self, String> {
        const ALLOWED: &str = "allowed: \"https://example.com\", \"postgres://localhost\", \"redis://*.example.com:6380\", \"tcp://10.0.0.0/8:5000..6000\", \"*://example.com:*\"";
        let Some((scheme, rest)) = entry.trim().split_once("://") else {
            return Err(format!("{entry:?} has no scheme ({ALLOWED})"));
        };
        let scheme = match scheme {
            "*" => None,
            s if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphabetic()) => {
                Some(s.to_ascii_lowercase())
            }
            other => {
                return Err(format!(
                    "{entry:?}: scheme {other:?} is not a word of letters or '*' ({ALLOWED})"
                ));
            }
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        // A CIDR range has a '/' of its own: `10.0.0.0/8:5432`.
        let (host, port) = split_host_port(rest);
        let is_range = |h: &str| {
            h.split_once('/')
                .is_some_and(|(ip, _)| ip.parse::<std::net::IpAddr>().is_ok())
        };
        if host.contains('/') && !is_range(host) {
            return Err(format!("{entry:?}: a path is not allowed here ({ALLOWED})"));
        }
        let port = match port {
            None => match scheme.as_deref().and_then(well_known_port) {
                Some(p) => PortMatch::One(p),
                None => {
                    return Err(format!(
                        "{entry:?}: no port was given and the scheme {:?} has no well-known port: give one, a range (5000..6000) or '*'",
                        scheme.as_deref().unwrap_or("*")
                    ));
                }
            },
            Some("*") => PortMatch::Any,
            Some(p) => match p.split_once("..") {
                Some((a, b)) => {
                    let (Ok(a), Ok(b)) = (a.parse::<u16>(), b.parse::<u16>()) else {
                        return Err(format!(
                            "{entry:?}: port range {p:?} is not two numbers from 0 to 65535 (start..end, end excluded)"
                        ));
                    };
                    PortMatch::Range(a..b)
                }
                None => PortMatch::One(p.parse::<u16>().map_err(|_| {
                    format!("{entry:?}: port {p:?} is not a number from 0 to 65535, a range or '*'")
                })?),
            },
        };
        let host = match host {
            "" => return Err(format!("{entry:?}: the host is empty ({ALLOWED})")),
            "*" => HostMatch::Any,
            h if h.contains('/') => HostMatch::Cidr(
                h.parse::<ipnet::IpNet>()
                    .map(|n| n.trunc())
                    .map_err(|_| format!("{entry:?}: {h:?} is not a CIDR range"))?,
            ),
            h if h.starts_with("*.") && !h[2..].contains('*') => {
                HostMatch::Suffix(h[1..].to_ascii_lowercase())
            }
            h if h.contains('*') => {
                return Err(format!(
                    "{entry:?}: '*' is allowed only as the whole host or as a leading '*.'"
                ));
            }
            h => HostMatch::Exact(
                h.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_ascii_lowercase(),
            ),
        };
        Ok(Self {
            source: entry.to_string(),
            scheme,
            host,
            port,
        })
    }

    /// An entry rendered from a template (`"https://{{ api_host }}"`) with
    /// a tenant's values: as Spin, one that renders to nothing (or to a
    /// bare scheme) allows nothing and is no error (`None`).
    pub fn parse_rendered(rendered: &str) -> Result<Option<Self>, String> {
        let rendered = rendered.trim();
        if rendered.is_empty() || rendered == "http://" || rendered == "https://" {
            return Ok(None);
        }
        Self::parse(rendered).map(Some)
    }

    /// The scheme an entry as written may reach: its own, or `*` (any)
    /// when a template may render it.
    pub fn written_scheme(entry: &str) -> &str {
        match entry.split_once("://") {
            Some((scheme, _)) if !scheme.contains("{{") => scheme,
            _ => "*",
        }
    }

    /// The entry as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether this entry may allow some connection with `scheme`.
    pub fn covers_scheme(&self, scheme: &str) -> bool {
        self.scheme.as_deref().is_none_or(|s| s == scheme)
    }

    /// Whether a connection to `scheme://host:port` is allowed by this
    /// entry (`port` is the one that will be used: the scheme's well-known
    /// one if the guest gave none).
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        if self.scheme.as_deref().is_some_and(|s| s != scheme) {
            return false;
        }
        let port_ok = match &self.port {
            PortMatch::Any => true,
            PortMatch::One(p) => *p == port,
            PortMatch::Range(r) => r.contains(&port),
        };
        if !port_ok {
            return false;
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match &self.host {
            HostMatch::Any => true,
            HostMatch::Exact(h) => {
                h.eq_ignore_ascii_case(host)
                    // One address, however it is spelled (`::ffff:7f00:1`
                    // is `::ffff:127.0.0.1`).
                    || matches!(
                        (h.parse::<std::net::IpAddr>(), host.parse::<std::net::IpAddr>()),
                        (Ok(a), Ok(b)) if a == b
                    )
            }
            HostMatch::Suffix(s) => {
                host.len() > s.len() && host[host.len() - s.len()..].eq_ignore_ascii_case(s)
            }
            HostMatch::Cidr(net) => host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| net.contains(&ip)),
        }
    }
}

/// `host[:port]`, where the host may be `[v6]` or a CIDR range.
fn split_host_port(rest: &str) -> (&str, Option<&str>) {
    if let Some(end) = rest.strip_prefix('[').and_then(|r| r.find(']')) {
        let host = &rest[..end + 2];
        return match rest[end + 2..].strip_prefix(':') {
            Some(p) => (host, Some(p)),
            None => (host, None),
        };
    }
    // A bare IPv6 address or range has several ':'; only a last part that
    // is a port (digits, '*' or a range) is one.
    match rest.rsplit_once(':') {
        Some((h, p))
            if !h.is_empty()
                && (p == "*" || p.chars().all(|c| c.is_ascii_digit() || c == '.'))
                && (!h.contains(':')
                    || h.parse::<ipnet::IpNet>().is_ok()
                    || h.parse::<std::net::IpAddr>().is_ok()) =>
        {
            (h, Some(p))
        }
        _ => (rest, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_ports() {
        let r = OutboundRule::parse("http://localhost:3000").unwrap();
        assert!(r.allows("http", "localhost", 3000));
        assert!(!r.allows("http", "localhost", 3001));
        assert!(!r.allows("https", "localhost", 3000));
        let any_port = OutboundRule::parse("http://127.0.0.1:*").unwrap();
        assert!(any_port.allows("http", "127.0.0.1", 1234));
    }

    #[test]
    fn addresses_match_in_any_spelling() {
        let r = OutboundRule::parse("http://[::ffff:127.0.0.1]:*").unwrap();
        assert!(r.allows("http", "::ffff:7f00:1", 80));
        assert!(!r.allows("http", "127.0.0.1", 80));
    }

    #[test]
    fn ranges_parse_with_precise_errors() {
        assert_eq!(parse_ip_range("::1").unwrap().to_string(), "::1/128");
        assert_eq!(parse_ip_range("fc00::/7").unwrap().to_string(), "fc00::/7");
        assert!(
            parse_ip_range("127.0.0.1/33")
                .unwrap_err()
                .contains("not an IP range")
        );
        assert!(
            parse_ip_range("localhost")
                .unwrap_err()
                .contains("not an IP range")
        );
        assert!(
            parse_ip_range("192.168.1.1/16")
                .unwrap_err()
                .contains("\"192.168.0.0/16\"")
        );
    }

    #[test]
    fn spins_schemes_ranges_and_ports() {
        let pg = OutboundRule::parse("postgres://db.internal").unwrap();
        assert!(pg.allows("postgres", "db.internal", 5432));
        assert!(!pg.allows("postgres", "db.internal", 5433));
        assert!(!pg.allows("mysql", "db.internal", 5432));
        let net = OutboundRule::parse("tcp://10.1.0.0/16:5000..5002").unwrap();
        assert!(net.allows("tcp", "10.1.2.3", 5001));
        assert!(!net.allows("tcp", "10.1.2.3", 5002));
        assert!(!net.allows("tcp", "10.2.0.1", 5001));
        let v6 = OutboundRule::parse("tcp://[::1]:7000").unwrap();
        assert!(v6.allows("tcp", "::1", 7000));
        let any = OutboundRule::parse("*://127.0.0.1:*").unwrap();
        assert!(any.allows("redis", "127.0.0.1", 6379));
        assert!(
            OutboundRule::parse("tcp://10.0.0.0/33:1")
                .unwrap_err()
                .contains("CIDR")
        );
    }

    #[test]
    fn wildcards() {
        let r = OutboundRule::parse("*://*:*").unwrap();
        assert!(r.allows("https", "x.y", 1));
        let s = OutboundRule::parse("https://*.example.com").unwrap();
        assert!(!s.allows("https", "example.com", 443));
        assert!(s.allows("https", "A.Example.com", 443));
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(
            OutboundRule::parse("example.com")
                .unwrap_err()
                .contains("no scheme")
        );
        assert!(
            OutboundRule::parse("ftp://x")
                .unwrap_err()
                .contains("no well-known port")
        );
        assert!(
            OutboundRule::parse("h2c+x://x:1")
                .unwrap_err()
                .contains("not a word")
        );
        assert!(
            OutboundRule::parse("http://x:99999")
                .unwrap_err()
                .contains("port")
        );
        assert!(
            OutboundRule::parse("*://x")
                .unwrap_err()
                .contains("no well-known port")
        );
        assert!(
            OutboundRule::parse("http://a*b.com")
                .unwrap_err()
                .contains("'*'")
        );
    }
}
