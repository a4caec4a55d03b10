//! A tenant's HTTP routes, matched as Spin matches them: the same route
//! syntax and precedence (Spin's router is `routefinder`, and so is this
//! one: at the first segment where two matching routes differ, a literal
//! beats a `:name` parameter, which beats a trailing `/...`), and the same
//! values for the headers Spin gives a component about its match.
//!
//! ```
//! # use edge::routes::spin_spec;
//! assert_eq!(spin_spec("/"), "");
//! assert_eq!(spin_spec("/hello/..."), "/hello/*");
//! assert_eq!(spin_spec("/users/:id/"), "/users/:id");
//! ```

use crate::app::Target;
use http::HeaderValue;
use std::ops::Range;
use std::sync::Arc;

/// One route of a tenant: a manifest route and the component it leads to.
pub struct TenantRoute {
    /// `spin-matched-route`: the route with a trailing `/` dropped (so `/`
    /// itself is empty), as Spin's router keeps it.
    pub matched_route: HeaderValue,
    /// `spin-raw-component-route`: the route as the manifest writes it.
    pub raw_route: HeaderValue,
    /// `spin-component-route`: the route without its trailing `/...`.
    pub component_route: HeaderValue,
    /// Where it leads.
    pub target: Arc<Target>,
    /// For a gradual rollout: the draws (0 to 99) this route takes.
    pub draw: Option<Range<u8>>,
}

impl TenantRoute {
    /// A route to `target` as the manifest writes it (`raw`).
    pub fn new(raw: &str, target: Arc<Target>, draw: Option<Range<u8>>) -> Self {
        let value = |s: &str| HeaderValue::from_str(s).unwrap_or(HeaderValue::from_static(""));
        Self {
            matched_route: value(&based(raw)),
            raw_route: value(raw),
            component_route: value(raw.strip_suffix("/...").unwrap_or(raw)),
            target,
            draw,
        }
    }
}

/// The route as Spin's router keeps it: absolute, without a trailing `/`.
fn based(raw: &str) -> String {
    let abs = if raw.starts_with('/') {
        raw.to_string()
    } else {
        format!("/{raw}")
    };
    abs.strip_suffix('/').map(str::to_string).unwrap_or(abs)
}

/// The `routefinder` spec of a Spin route (`/...` becomes `/*`).
pub fn spin_spec(raw: &str) -> String {
    let based = based(raw);
    match based.strip_suffix("/...") {
        Some(prefix) => format!("{prefix}/*"),
        None => based,
    }
}

/// What a request's path matched.
pub struct Matched<'a> {
    /// The route.
    pub route: &'a TenantRoute,
    /// `spin-path-info`: what a trailing wildcard took, from its `/`.
    pub path_info: String,
    /// `spin-path-match-NAME` for each `:name` parameter.
    pub params: Vec<(String, String)>,
}

/// A tenant's routes.
#[derive(Default)]
pub struct Routes {
    finder: routefinder::Router<usize>,
    /// The routes sharing one spec: one, or two versions splitting the
    /// draws during a rollout.
    groups: Vec<Vec<TenantRoute>>,
    splits: bool,
}

impl Routes {
    /// Adds a route; a route with the spec of an earlier one joins it (the
    /// versions of a rollout).
    pub fn add(&mut self, raw: &str, route: TenantRoute) -> Result<(), String> {
        let spec = spin_spec(raw);
        self.splits |= route.draw.is_some();
        if let Some(&i) = self.finder.get_handler(spec.as_str()) {
            self.groups[i].push(route);
            return Ok(());
        }
        self.finder
            .add(spec.as_str(), self.groups.len())
            .map_err(|e| format!("route {raw:?}: {e}"))?;
        self.groups.push(vec![route]);
        Ok(())
    }

    /// Every route.
    pub fn iter(&self) -> impl Iterator<Item = &TenantRoute> {
        self.groups.iter().flatten()
    }

    /// Whether some route takes only part of the draws.
    pub fn splits(&self) -> bool {
        self.splits
    }

    /// The best route for `path`; `draw` is this request's number (0 to
    /// 99) for routes split between versions.
    pub fn find(&self, path: &str, draw: Option<u8>) -> Option<Matched<'_>> {
        // Best first; during a rollout, a route may take only some draws
        // (the other version may route differently), so the best route
        // that takes this request's draw.
        let (found, route) = self.finder.match_iter(path).find_map(|m| {
            let route = self.groups[*m.handler()]
                .iter()
                .find(|r| match (&r.draw, draw) {
                    (Some(range), Some(d)) => range.contains(&d),
                    _ => true,
                })?;
            Some((m, route))
        })?;
        let captures = found.captures();
        // Spin's spin-path-info: the wildcard's part from its slash, with
        // the request's trailing slash; empty for exact routes.
        let path_info = match captures.wildcard() {
            None => String::new(),
            Some(rest) => match (rest.is_empty(), path.ends_with('/')) {
                (true, false) => String::new(),
                (true, true) => "/".into(),
                (false, false) => format!("/{rest}"),
                (false, true) => format!("/{rest}/"),
            },
        };
        let params = captures
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        Some(Matched {
            route,
            path_info,
            params,
        })
    }
}
