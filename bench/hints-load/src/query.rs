//! Queries file loading and URL building.

use http::Uri;

/// Percent-encodes `s` as UTF-8, keeping only RFC 3986 unreserved
/// characters (ALPHA / DIGIT / "-" / "." / "_" / "~") as they are.
pub fn percent_encode(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len() * 3);
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 15)] as char);
        }
    }
    out
}

/// Non-empty lines of `text` (a trailing CR is dropped; other whitespace is
/// kept, since a typed space is part of the query).
pub fn parse_lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .filter(|l| !l.is_empty())
        .collect()
}

/// The log's requests, prepared as bytes, and a client for their server
/// (every URL of a template has the same one).
pub async fn build_target(template: &str, queries: &[&str]) -> Result<crate::Target, String> {
    let uris = build_uris(template, queries)?;
    let authority = uris[0].authority().map_or("", |a| a.as_str()).to_string();
    let host_port = match uris[0].port_u16() {
        Some(_) => authority.clone(),
        None => format!("{authority}:80"),
    };
    let addr = tokio::net::lookup_host(&host_port)
        .await
        .map_err(|e| format!("resolving {host_port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host_port} resolves to no address"))?;
    let requests = uris
        .iter()
        .map(|u| {
            let pq = u.path_and_query().map_or("/", |p| p.as_str());
            crate::wire::get_request(&authority, pq).into_boxed_slice()
        })
        .collect();
    Ok(crate::Target {
        client: std::sync::Arc::new(crate::wire::Client::new(addr)),
        requests,
    })
}

/// One pre-parsed URI per query, `{q}` in the template replaced by the
/// encoded query.
pub fn build_uris(template: &str, queries: &[&str]) -> Result<Vec<Uri>, String> {
    if !template.contains("{q}") {
        return Err(format!("--url-template has no {{q}}: {template}"));
    }
    queries
        .iter()
        .map(|q| {
            let url = template.replace("{q}", &percent_encode(q));
            let uri: Uri = url.parse().map_err(|e| format!("bad URL {url}: {e}"))?;
            if uri.scheme_str() != Some("http") || uri.host().is_none() {
                return Err(format!("only http://host URLs are supported: {url}"));
            }
            Ok(uri)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_reserved_and_non_ascii() {
        assert_eq!(percent_encode("AZaz09-._~"), "AZaz09-._~");
        assert_eq!(percent_encode("8 bd Paix"), "8%20bd%20Paix");
        assert_eq!(percent_encode("é"), "%C3%A9");
        assert_eq!(percent_encode("Moskva 'Ёж'"), "Moskva%20%27%D0%81%D0%B6%27");
        assert_eq!(
            percent_encode("a&b=c?d/e+f#g%h"),
            "a%26b%3Dc%3Fd%2Fe%2Bf%23g%25h"
        );
        assert_eq!(percent_encode(""), "");
    }

    #[test]
    fn lines_and_uris() {
        let lines = parse_lines("mosc\r\n\nmoscow \n\r\nrue d\n");
        assert_eq!(lines, ["mosc", "moscow ", "rue d"]);
        let uris = build_uris("http://127.0.0.1:8080/hints/address?count=5&q={q}", &lines).unwrap();
        assert_eq!(
            uris[1].to_string(),
            "http://127.0.0.1:8080/hints/address?count=5&q=moscow%20"
        );
        assert_eq!(
            uris[2].path_and_query().unwrap().as_str(),
            "/hints/address?count=5&q=rue%20d"
        );
        assert!(build_uris("http://127.0.0.1/search", &lines).is_err());
        assert!(build_uris("https://example.org/?q={q}", &lines).is_err());
    }
}
