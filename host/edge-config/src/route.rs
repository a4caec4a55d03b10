//! Spin HTTP route syntax: exact paths, `:name` parameters and a trailing
//! `/...` wildcard.
//!
//! ```
//! use edge_config::RoutePattern;
//! let r = RoutePattern::parse("/users/:id/...").unwrap();
//! assert!(r.matches("/users/7/photos"));
//! assert!(r.matches("/users/7"));
//! assert!(!r.matches("/users"));
//! ```

use std::cmp::Ordering;
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

    /// The literal prefix before the first parameter or wildcard, without a
    /// trailing slash (`""` for the root): Spin's `spin-component-route`.
    pub fn base(&self) -> String {
        let mut out = String::new();
        for seg in &self.segments {
            match seg {
                Segment::Literal(l) => {
                    out.push('/');
                    out.push_str(l);
                }
                Segment::Param(_) => break,
            }
        }
        out
    }

    /// Whether `path` (no query) matches this route.
    pub fn matches(&self, path: &str) -> bool {
        self.match_len(path).is_some()
    }

    /// Matches `path` and returns the byte length of the matched prefix,
    /// so the rest is Spin's `spin-path-info`.
    pub fn match_len(&self, path: &str) -> Option<usize> {
        let mut rest = path;
        let mut consumed = 0;
        for seg in &self.segments {
            let trimmed = rest.strip_prefix('/')?;
            let end = trimmed.find('/').unwrap_or(trimmed.len());
            let part = &trimmed[..end];
            match seg {
                Segment::Literal(l) if l == part => {}
                Segment::Param(_) if !part.is_empty() => {}
                _ => return None,
            }
            consumed += 1 + end;
            rest = &trimmed[end..];
        }
        if rest.is_empty() || rest == "/" || (self.wildcard && rest.starts_with('/')) {
            Some(consumed)
        } else {
            None
        }
    }

    /// Orders routes by specificity: more segments first, literals before
    /// parameters at the same position, exact routes before wildcards. The
    /// router tries routes in this order and takes the first match, so
    /// `/echo/health` beats `/echo/...` which beats `/...`.
    pub fn specificity_cmp(&self, other: &Self) -> Ordering {
        let rank = |r: &Self| {
            let literals = r
                .segments
                .iter()
                .filter(|s| matches!(s, Segment::Literal(_)))
                .count();
            (r.segments.len(), literals, !r.wildcard)
        };
        rank(other).cmp(&rank(self))
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
    fn exact_routes() {
        assert!(r("/").matches("/"));
        assert!(!r("/").matches("/x"));
        assert!(r("/echo").matches("/echo"));
        assert!(r("/echo").matches("/echo/"));
        assert!(!r("/echo").matches("/echo/x"));
        assert!(!r("/echo").matches("/echoes"));
    }

    #[test]
    fn wildcard_routes() {
        assert!(r("/...").matches("/"));
        assert!(r("/...").matches("/a/b"));
        assert!(r("/echo/...").matches("/echo"));
        assert!(r("/echo/...").matches("/echo/a/b"));
        assert!(!r("/echo/...").matches("/echoes"));
        assert_eq!(r("/echo/...").match_len("/echo/a/b"), Some(5));
        assert_eq!(r("/echo/...").base(), "/echo");
    }

    #[test]
    fn parameters() {
        let p = r("/users/:id");
        assert!(p.matches("/users/42"));
        assert!(!p.matches("/users/"));
        assert!(!p.matches("/users/42/x"));
    }

    #[test]
    fn specificity_orders_exact_before_wildcard() {
        let mut routes = [r("/..."), r("/echo/..."), r("/echo/health"), r("/echo/:x")];
        routes.sort_by(RoutePattern::specificity_cmp);
        let order: Vec<_> = routes.iter().map(|r| r.as_str()).collect();
        assert_eq!(order, ["/echo/health", "/echo/:x", "/echo/...", "/..."]);
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
