//! Service bindings: a Worker's `env.NAME.fetch(request)` reaches another
//! app of the same tenant in process, never over the network, as
//! Cloudflare's service bindings do.
//!
//! The Worker's adapter sends the request with wasi:http's outgoing handler
//! and marks it with [`HEADER`], naming the app; the host takes the mark
//! off and, if the component declared that app among its services (its
//! `edge:worker` section), serves the request through the app's routes as
//! it would serve a client's ([`crate::server::serve_route`]): the same
//! body cap, the tenant's shares, instance pools and metrics. A name is
//! looked up among the caller's own tenant's apps only: no binding reaches
//! another tenant.
//!
//! How deep a chain of calls is travels with each request ([`Chain`], a
//! request extension the guest cannot see or forge); past [`MAX_DEPTH`]
//! the call fails. A call into an isolate whose instances are all busy
//! runs on a fresh instance rather than queueing, since the instance it
//! would wait for may be its own caller.

use crate::respond::Body;
use crate::server::Shared;
use http::{HeaderName, HeaderValue, Request, Response};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;
use wasmtime_wasi_http::{Error, WasiBody};

/// The header that makes an outgoing request a service call: its value is
/// the app's name. The workers/ adapter sets it (`runtime/env.js`).
pub const HEADER: HeaderName = HeaderName::from_static("edge-service");

/// The header a Worker's adapter marks its 500 with when its handler threw
/// (`runtime/adapter.js`), so that a Worker calling it through a binding
/// throws too, as on workerd; taken off every response to a client.
pub const UNCAUGHT_HEADER: HeaderName = HeaderName::from_static("edge-uncaught");

/// Calls a chain of service bindings may nest, as on Cloudflare (a
/// Worker's invocations through bindings, counting the first): deeper
/// calls fail, so a Worker calling itself ends.
pub const MAX_DEPTH: u32 = 32;

/// Where a request is in a chain of service calls: 0 for a client's, and
/// the client's address, which every call of the chain carries on.
#[derive(Clone, Debug)]
pub struct Chain {
    /// Service calls between the client's request and this one.
    pub depth: u32,
    /// `spin-client-addr`: the client at the start of the chain.
    pub client_addr: HeaderValue,
}

impl Chain {
    /// A client's request.
    pub fn top(client_addr: HeaderValue) -> Self {
        Self {
            depth: 0,
            client_addr,
        }
    }
}

impl Default for Chain {
    fn default() -> Self {
        Self::top(HeaderValue::from_static("127.0.0.1:0"))
    }
}

/// The server service calls go to, once it runs: set once, read by every
/// store's calls.
#[derive(Clone, Default)]
pub struct Router(Arc<OnceLock<Weak<Shared>>>);

impl Router {
    /// Service calls from now on go to `shared`'s serving app.
    pub fn attach(&self, shared: &Arc<Shared>) {
        let _ = self.0.set(Arc::downgrade(shared));
    }

    fn shared(&self) -> Option<Arc<Shared>> {
        self.0.get().and_then(Weak::upgrade)
    }
}

/// What one component may call: the apps its bindings name, in its
/// tenant.
#[derive(Clone)]
pub struct Grant {
    router: Router,
    tenant: Arc<str>,
    who: Arc<str>,
    apps: Arc<[String]>,
}

impl Grant {
    /// `who` (tenant/component) of `tenant` may call `apps`.
    pub fn new(router: Router, tenant: &str, who: &str, apps: &[String]) -> Self {
        Self {
            router,
            tenant: tenant.into(),
            who: who.into(),
            apps: apps.into(),
        }
    }

    /// The apps it may call.
    pub fn apps(&self) -> &[String] {
        &self.apps
    }

    /// Whether `other` lets call exactly the same apps.
    pub fn same(&self, other: &Grant) -> bool {
        self.tenant == other.tenant && self.apps == other.apps
    }
}

/// What a service call answers: the response, and (as wasi-http's hook
/// wants) a future for errors after it, which an in-process call has none
/// of.
pub type Answer = Result<
    (
        Response<WasiBody>,
        Box<dyn Future<Output = Result<(), Error>> + Send>,
    ),
    Error,
>;

/// Serves `request`, marked with [`HEADER`] by a store of `grant` (or of
/// no grant: a component with no bindings) that is serving `chain`.
pub fn call(
    grant: Option<&Grant>,
    chain: &Chain,
    mut request: Request<WasiBody>,
) -> Box<dyn Future<Output = Answer> + Send> {
    let refuse = |e: Error| -> Box<dyn Future<Output = Answer> + Send> {
        Box::new(std::future::ready(Err(e)))
    };
    let name = request
        .headers_mut()
        .remove(HEADER)
        .and_then(|v| v.to_str().ok().map(str::to_string))
        .unwrap_or_default();
    let Some(grant) = grant.filter(|g| g.apps.contains(&name)) else {
        tracing::warn!(app = %name, "service call refused: the component has no service binding to that app");
        return refuse(Error::HttpRequestDenied);
    };
    if chain.depth + 1 >= MAX_DEPTH {
        tracing::warn!(component = %grant.who, app = %name, depth = chain.depth, "service call refused: the chain of service calls is {MAX_DEPTH} deep");
        return refuse(Error::InternalError(Some(format!(
            "subrequest depth limit exceeded: {MAX_DEPTH} service calls in one chain"
        ))));
    }
    let Some(shared) = grant.router.shared() else {
        return refuse(Error::InternalError(Some("the server is stopping".into())));
    };
    let chain = Chain {
        depth: chain.depth + 1,
        client_addr: chain.client_addr.clone(),
    };
    let grant = grant.clone();
    Box::new(async move {
        let started = Instant::now();
        let app = shared.app.load_full();
        let routes = app
            .tenant_named(&grant.tenant)
            .and_then(|t| t.services.get(name.as_str()));
        let Some(routes) = routes else {
            tracing::warn!(component = %grant.who, app = %name, "service call failed: the tenant has no such app");
            return Err(Error::InternalError(Some(format!(
                "service binding: the tenant has no app {name:?}"
            ))));
        };
        let response =
            match routes.find(request.uri().path(), routes.splits().then(crate::app::draw)) {
                Some(matched) => {
                    crate::server::serve_route(&app, &matched, request, chain, started).await
                }
                None => crate::respond::text(
                    http::StatusCode::NOT_FOUND,
                    format!("no route for {} in app {name}", request.uri().path()),
                ),
            };
        let response: Response<Body> = response;
        let done: Box<dyn Future<Output = Result<(), Error>> + Send> =
            Box::new(std::future::ready(Ok(())));
        Ok((response, done))
    })
}
