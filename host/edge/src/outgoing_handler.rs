//! `wasi:http/outgoing-handler`, as wasmtime-wasi-http links it, except
//! that the `request-options` a guest passes are deleted from the store's
//! resource table after the call.
//!
//! `handle` takes the options as an owned handle: the guest gives them up
//! and can never drop them. wasmtime-wasi-http 48.0.8 (`p2/http_impl.rs`,
//! `outgoing_handler::Host::handle`) reads them with `table.get` and never
//! deletes them, so every request sent with options leaves one entry in the
//! instance's table. In a session instance (one instance, many requests:
//! the rewriter) that grew host memory without bound, and under
//! `max_host_resources` it failed the instance at its cap (the rewriter's
//! ~1,016th request at the default 1,024) with "resource table has no
//! free keys". The request itself is deleted by the library; only the
//! options are left behind.

use crate::state::HostState;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::http::{outgoing_handler, types};
use wasmtime_wasi_http::p2::types::{HostFutureIncomingResponse, HostOutgoingRequest};

/// The interface as wasmtime-wasi-http 48 names it (its WIT's version;
/// guests importing an older 0.2 are matched to it by semver).
const INTERFACE: &str = "wasi:http/outgoing-handler@0.2.12";

/// Links `handle` over the one
/// `wasmtime_wasi_http::p2::add_only_http_to_linker_async` linked (call it
/// after that): the library's, then the options deleted.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let linked = linker.instance(INTERFACE).and_then(|mut i| {
        i.func_wrap(
            "handle",
            |mut store,
             (request, options): (
                Resource<HostOutgoingRequest>,
                Option<Resource<types::RequestOptions>>,
            )| {
                let state: &mut HostState = store.data_mut();
                let mut http = state.http();
                // The guest gave the handle up (the component model checked
                // it is its own), so its entry is there whatever `handle`
                // answers, and nothing else refers to it after.
                let rep = options.as_ref().map(Resource::rep);
                let sent = outgoing_handler::Host::handle(&mut http, request, options);
                if let Some(rep) = rep {
                    let _ = http
                        .table
                        .delete(Resource::<types::RequestOptions>::new_own(rep));
                }
                let sent: Result<Resource<HostFutureIncomingResponse>, types::ErrorCode> =
                    match sent {
                        Ok(future) => Ok(future),
                        // An error code is the guest's answer; anything
                        // else traps, as in the library's binding.
                        Err(e) => Err(e.downcast()?),
                    };
                Ok((sent,))
            },
        )
    });
    linker.allow_shadowing(false);
    linked
}
