//! Serving the web workspace's files: which file a request path names (no
//! traversal, no dotfiles), its content type and caching, and whether a
//! client takes Brotli.

/// The relative file a request path names, or `None` for a path that may
/// not be served (`.`/`..` segments, dotfiles, backslashes, NUL, bad
/// escapes). `/` and paths ending in `/` name `index.html` under them.
pub fn relative_path(path: &str) -> Option<String> {
    let decoded = crate::query::decode(&path.replace('+', "%2B"))?;
    if decoded.contains(['\\', '\0']) || !decoded.starts_with('/') {
        return None;
    }
    let mut parts = Vec::new();
    for seg in decoded[1..].split('/') {
        if seg.is_empty() {
            continue;
        }
        if seg.starts_with('.') {
            return None;
        }
        parts.push(seg);
    }
    let mut rel = parts.join("/");
    if rel.is_empty() || decoded.ends_with('/') {
        if !rel.is_empty() {
            rel.push('/');
        }
        rel.push_str("index.html");
    }
    Some(rel)
}

/// Content type by extension.
pub fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    match ext.to_ascii_lowercase().as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "webmanifest" => "application/manifest+json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "avif" => "image/avif",
        "ico" => "image/x-icon",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "txt" => "text/plain; charset=utf-8",
        "wasm" => "application/wasm",
        "xml" => "application/xml",
        _ => "application/octet-stream",
    }
}

/// `Cache-Control` for a file: a year for content-hashed assets.
pub fn cache_control(rel: &str) -> &'static str {
    if rel.starts_with("_app/immutable/") {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    }
}

/// Whether an `Accept-Encoding` value takes `coding` (not with `q=0`).
pub fn accepts(accept_encoding: &str, coding: &str) -> bool {
    accept_encoding.split(',').any(|item| {
        let mut parts = item.split(';');
        let name = parts.next().unwrap_or("").trim();
        if !name.eq_ignore_ascii_case(coding) && name != "*" {
            return false;
        }
        !parts.any(|p| {
            let p = p.trim();
            p.strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        })
    })
}

/// The headers every file answer carries.
pub const SECURITY_HEADERS: &[(&str, &str)] = &[
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("content-security-policy", "frame-ancestors 'none'"),
    ("referrer-policy", "same-origin"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(relative_path("/").as_deref(), Some("index.html"));
        assert_eq!(relative_path("/clients").as_deref(), Some("clients"));
        assert_eq!(relative_path("/a/").as_deref(), Some("a/index.html"));
        assert_eq!(
            relative_path("/_app/immutable/x.js").as_deref(),
            Some("_app/immutable/x.js")
        );
        assert_eq!(relative_path("//a//b").as_deref(), Some("a/b"));
        assert_eq!(relative_path("/a%20b+c").as_deref(), Some("a b+c"));
        for bad in [
            "/../etc/passwd",
            "/a/../../b",
            "/%2e%2e/x",
            "/%2E%2E%2Fx",
            "/.env",
            "/a/.git/config",
            "/a%5c..%5cb",
            "/a%00b",
            "/%ff",
            "relative",
        ] {
            assert_eq!(relative_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn types_and_caching() {
        assert_eq!(content_type("index.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("_app/x.JS"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("noext"), "application/octet-stream");
        assert_eq!(
            cache_control("_app/immutable/a.js"),
            "public, max-age=31536000, immutable"
        );
        assert_eq!(cache_control("index.html"), "no-cache");
        assert_eq!(cache_control("_app/version.json"), "no-cache");
    }

    #[test]
    fn encodings() {
        assert!(accepts("gzip, deflate, br", "br"));
        assert!(accepts("br;q=0.5", "br"));
        assert!(accepts("*", "br"));
        assert!(!accepts("gzip", "br"));
        assert!(!accepts("br;q=0", "br"));
        assert!(!accepts("br; q=0.0, gzip", "br"));
        assert!(!accepts("", "br"));
        assert!(!accepts("brotli", "br"));
    }
}
