//! Running a request through a guest: a fresh instance per request, or the
//! pinned instance of a session (see [`crate::session`]).

use crate::app::Target;
use crate::body::ClientPace;
use crate::metrics::ActiveInstance;
use crate::respond::{Body, Failure};
use crate::state::HostState;
use bytes::Bytes;
use http::Response;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;
use tokio::sync::oneshot;
use wasmtime::{Store, UpdateDeadline};
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::Proxy;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};

/// What a guest call hands back to the request: the response head once the
/// guest sets it.
pub type ResponseReceiver = oneshot::Receiver<Result<Response<Body>, ErrorCode>>;

/// A fresh store for `target`, with its limiter and deadline set.
///
/// A running guest yields to the executor at every epoch tick, so a guest
/// spinning in a loop cannot hold its thread (and the other connections
/// on it) for longer than a tick; the wall-clock timeout in [`call`] ends
/// it at its deadline. Should the guest be re-entered past the deadline
/// anyway, the epoch callback traps it as a backstop.
pub fn new_store(engine: &wasmtime::Engine, target: &Target) -> Store<HostState> {
    let mut store = Store::new(engine, HostState::new(&target.spec, target.metrics.clone()));
    store.limiter(|s| &mut s.limiter);
    store.data_mut().deadline = Instant::now() + target.deadline;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|store| {
        if Instant::now() >= store.data().deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            // tokio's yield_now, not wasmtime's plain yield: it runs again
            // only after the scheduler has polled for I/O, so connections
            // on this thread get their turn.
            Ok(UpdateDeadline::YieldCustom(
                1,
                Box::pin(tokio::task::yield_now()),
            ))
        }
    });
    store
}

/// Puts a request and a response slot into the store's table.
pub fn bind_request<B>(
    store: &mut Store<HostState>,
    request: http::Request<B>,
) -> Result<
    (
        wasmtime::component::Resource<wasmtime_wasi_http::p2::types::HostIncomingRequest>,
        wasmtime::component::Resource<wasmtime_wasi_http::p2::types::HostResponseOutparam>,
        ResponseReceiver,
    ),
    Failure,
>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<wasmtime_wasi_http::Error>,
{
    let (tx, rx) = oneshot::channel();
    store.data_mut().client_pace = request.extensions().get::<ClientPace>().cloned();
    let mut http = store.data_mut().http();
    let req = http
        .new_incoming_request(Scheme::Http, request)
        .map_err(|e| Failure::Internal(format!("{e:#}")))?;
    let out = http
        .new_response_outparam(tx)
        .map_err(|e| Failure::Internal(format!("{e:#}")))?;
    Ok((req, out, rx))
}

/// Calls the guest's handler once, under the target's wall-clock deadline.
pub async fn call(
    store: &mut Store<HostState>,
    proxy: &Proxy,
    target: &Target,
    req: wasmtime::component::Resource<wasmtime_wasi_http::p2::types::HostIncomingRequest>,
    out: wasmtime::component::Resource<wasmtime_wasi_http::p2::types::HostResponseOutparam>,
) -> Result<(), Failure> {
    // One deadline per request, set when its store or job began: the call
    // gets what instantiation left of it.
    let deadline = tokio::time::Instant::from_std(store.data().deadline);
    let call = proxy
        .wasi_http_incoming_handler()
        .call_handle(&mut *store, req, out);
    let result = match tokio::time::timeout_at(deadline, call).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Failure::classify(&e, store.data().limiter.hit)),
        // The guest was blocked in the host: if on a request body the
        // client is still to send, the client is the slow one.
        Err(_)
            if store
                .data()
                .client_pace
                .as_ref()
                .is_some_and(ClientPace::waiting) =>
        {
            Err(Failure::ClientTimeout)
        }
        Err(_) => Err(Failure::Deadline),
    };
    if let Err(f) = &result {
        count_failure(target, f);
    }
    result
}

/// Logs what the guest wrote to stdout/stderr during its request, if
/// anything (after the failure, if there was one, so they read together).
pub fn log_guest_output(store: &Store<HostState>, target: &Target) {
    if let Some(output) = store.data().log.take() {
        // Debug formatting escapes newlines: a guest cannot forge log lines.
        tracing::info!(tenant = %target.tenant, component = %target.component, ?output, "guest output");
    }
}

/// Counts and logs a guest failure.
pub fn count_failure(target: &Target, failure: &Failure) {
    let m = &target.metrics;
    match failure {
        Failure::Deadline => {
            m.deadline_kills.fetch_add(1, Relaxed);
            tracing::warn!(tenant = %target.tenant, component = %target.component, "deadline exceeded; instance killed");
        }
        Failure::MemoryCap(why) => {
            m.traps.fetch_add(1, Relaxed);
            m.memory_cap_kills.fetch_add(1, Relaxed);
            tracing::warn!(tenant = %target.tenant, component = %target.component, error = %why, "memory cap exceeded; instance killed");
        }
        Failure::Trap(why) => {
            m.traps.fetch_add(1, Relaxed);
            tracing::warn!(tenant = %target.tenant, component = %target.component, error = %why, "guest trapped");
        }
        other => {
            tracing::warn!(tenant = %target.tenant, component = %target.component, failure = ?other, "request failed")
        }
    }
}

/// Serves one request on a fresh instance that is dropped when the guest
/// returns (after it has written the whole body).
pub async fn per_request<B>(
    engine: &wasmtime::Engine,
    target: &Arc<Target>,
    request: http::Request<B>,
) -> Result<Response<Body>, Failure>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<wasmtime_wasi_http::Error>,
{
    let prepared = match &target.prepared {
        Ok(p) => p.clone(),
        Err(why) => return Err(Failure::Unavailable(why.to_string())),
    };
    let mut store = new_store(engine, target);
    let (req, out, mut rx) = bind_request(&mut store, request)?;
    let target = target.clone();
    let mut guest = Box::pin(async move {
        let _active = ActiveInstance::new(&target.metrics);
        let deadline = tokio::time::Instant::from_std(store.data().deadline);
        let instantiate = prepared.pre.instantiate_async(&mut store);
        let proxy = match tokio::time::timeout_at(deadline, instantiate).await {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                let f = Failure::classify(&e, store.data().limiter.hit);
                count_failure(&target, &f);
                log_guest_output(&store, &target);
                return Err(f);
            }
            Err(_) => {
                count_failure(&target, &Failure::Deadline);
                return Err(Failure::Deadline);
            }
        };
        let result = call(&mut store, &proxy, &target, req, out).await;
        log_guest_output(&store, &target);
        result
    });
    // Run the guest right here, in the connection's task: most guests
    // finish (body written) before we could even hand them to another task,
    // and a spawn per request costs a task allocation and often a wake-up
    // of the other worker thread. Only a guest still streaming its body when
    // the response head is ready moves to a task of its own.
    tokio::select! {
        biased;
        result = &mut guest => match (result, rx.try_recv()) {
            // The guest failed after setting the head: nothing has gone to
            // the client yet, so answer the failure rather than a body the
            // failure cut short.
            (Err(f), _) => Err(f),
            (Ok(()), Ok(Ok(response))) => Ok(response),
            (Ok(()), Ok(Err(code))) => Err(Failure::GuestError(format!("{code:?}"))),
            (Ok(()), Err(_)) => Err(Failure::NoResponse),
        },
        head = &mut rx => match head {
            Ok(head) => {
                let (done, outcome) = oneshot::channel();
                tokio::spawn(async move {
                    let _ = done.send(guest.await.is_ok());
                });
                let response = head.map_err(|code| Failure::GuestError(format!("{code:?}")))?;
                Ok(response.map(|body| {
                    http_body_util::BodyExt::boxed_unsync(crate::body::GuestOutcomeBody::new(
                        body, outcome,
                    ))
                }))
            }
            // The outparam was dropped unset: the guest's own result says why.
            Err(_) => Err(guest.await.err().unwrap_or(Failure::NoResponse)),
        }
    }
}
