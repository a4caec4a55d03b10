//! Spin HTTP route syntax, checked when a manifest loads: exact paths,
//! `:name` parameters and a trailing `/...` wildcard. (Requests are matched
//! by the host, with Spin's own router.)
//!
//! ```
//! use edge_config::RoutePattern;
//! let r = RoutePattern::parse("/users/:id/...").unwrap();
//! assert!(r.is_wildcard());
//! assert!(RoutePattern::parse("/a/.../b").is_err());
//! ```

use std::fmt;

/// One segment of a route.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Param(String),
}

/// A parsed route such as `/`, `/echo`, `/echo/...`, `/...` or `/users/:id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutePattern {
    source: String,
    segments: Vec<Segment>,
    wildcard: bool,
}

impl RoutePattern {
    /// Parses a route, saying what is wrong and what is allowed.
    pub fn parse(route: &str) -> Result<Self, String> {
        if !route.starts_with('/') {
            return Err(format!(
                "route {route:?} must start with '/' (allowed: \"/path\", \"/path/...\", \"/...\", \"/users/:id\")"
            ));
        }
        let (body, wildcard) = match route.strip_suffix("/...") {
            Some(prefix) => (prefix, true),
            None if route == "/..." => ("", true),
            None => (route, false),
        };
        let mut segments = Vec::new();
        for seg in body.split('/').skip(1) {
            if seg.is_empty() {
                // "/" alone and a trailing slash are allowed; "//" is not.
                continue;
            }
            if seg == "..." || seg.contains("...") {
                return Err(format!(
                    "route {route:?}: '...' is allowed only as the last segment"
                ));
            }
            if seg.contains(['?', '#']) {
                return Err(format!(
                    "route {route:?}: a route cannot contain '?' or '#'"
                ));
            }
            match seg.strip_prefix(':') {
                Some("") => {
                    return Err(format!("route {route:?}: parameter needs a name after ':'"));
                }
                Some(name) => segments.push(Segment::Param(name.to_string())),
                None => segments.push(Segment::Literal(seg.to_string())),
            }
        }
        Ok(Self {
            source: route.to_string(),
            segments,
            wildcard,
        })
    }

    /// The route as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the route ends in `/...`.
    pub fn is_wildcard(&self) -> bool {
        self.wildcard
    }

    /// Whether two routes are the same up to parameter names (Spin rejects
    /// such duplicates and so do we).
    pub fn same_shape(&self, other: &Self) -> bool {
        self.wildcard == other.wildcard
            && self.segments.len() == other.segments.len()
            && self
                .segments
                .iter()
                .zip(&other.segments)
                .all(|(a, b)| match (a, b) {
                    (Segment::Literal(x), Segment::Literal(y)) => x == y,
                    (Segment::Param(_), Segment::Param(_)) => true,
                    _ => false,
                })
    }
}

impl fmt::Display for RoutePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> RoutePattern {
        RoutePattern::parse(s).unwrap()
    }

    #[test]
    fn shapes_ignore_parameter_names() {
        assert!(r("/users/:id").same_shape(&r("/users/:name")));
        assert!(!r("/users/:id").same_shape(&r("/users/...")));
        assert!(!r("/echo").same_shape(&r("/echo/...")));
        assert!(r("/echo/").same_shape(&r("/echo")));
        assert!(r("/...").is_wildcard());
    }

    #[test]
    fn bad_routes_say_what_is_allowed() {
        assert!(
            RoutePattern::parse("echo")
                .unwrap_err()
                .contains("must start with '/'")
        );
        assert!(
            RoutePattern::parse("/a/.../b")
                .unwrap_err()
                .contains("last segment")
        );
        assert!(
            RoutePattern::parse("/a/:")
                .unwrap_err()
                .contains("needs a name")
        );
    }
}
