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

/// One entry of a component's outbound allowlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundRule {
    source: String,
    scheme: Option<String>,
    host: HostMatch,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostMatch {
    Any,
    Exact(String),
    /// `*.example.com` stored as `.example.com`.
    Suffix(String),
}

impl OutboundRule {
    /// Parses one allowlist entry; the error says what is allowed.
    pub fn parse(entry: &str) -> Result<Self, String> {
        const ALLOWED: &str = "allowed: \"https://example.com\", \"http://localhost:3000\", \"https://*.example.com\", \"*://example.com:*\"";
        let Some((scheme, rest)) = entry.split_once("://") else {
            return Err(format!("{entry:?} has no scheme ({ALLOWED})"));
        };
        let scheme = match scheme {
            "*" => None,
            "http" | "https" => Some(scheme.to_string()),
            other => {
                return Err(format!(
                    "{entry:?}: scheme {other:?} is not supported (http, https or *)"
                ));
            }
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') {
            return Err(format!("{entry:?}: a path is not allowed here ({ALLOWED})"));
        }
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || rest.starts_with('[') => (h, Some(p)),
            _ => (rest, None),
        };
        let port = match port {
            None => match scheme.as_deref() {
                Some("http") => Some(80),
                Some("https") => Some(443),
                _ => {
                    return Err(format!(
                        "{entry:?}: with scheme '*' give a port or ':*' ({ALLOWED})"
                    ));
                }
            },
            Some("*") => None,
            Some(p) => Some(p.parse::<u16>().map_err(|_| {
                format!("{entry:?}: port {p:?} is not a number from 0 to 65535 or '*'")
            })?),
        };
        let host = match host {
            "" => return Err(format!("{entry:?}: the host is empty ({ALLOWED})")),
            "*" => HostMatch::Any,
            h if h.starts_with("*.") => HostMatch::Suffix(h[1..].to_ascii_lowercase()),
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

    /// The entry as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether a request to `scheme://host:port` is allowed by this entry.
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        if self.scheme.as_deref().is_some_and(|s| s != scheme) {
            return false;
        }
        if self.port.is_some_and(|p| p != port) {
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
        }
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
                .contains("not supported")
        );
        assert!(
            OutboundRule::parse("http://x:99999")
                .unwrap_err()
                .contains("port")
        );
        assert!(
            OutboundRule::parse("*://x")
                .unwrap_err()
                .contains("give a port")
        );
        assert!(
            OutboundRule::parse("http://a*b.com")
                .unwrap_err()
                .contains("'*'")
        );
    }
}
