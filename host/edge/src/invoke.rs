//! The guest call, in one place: a store under the request's deadline, the
//! instance made within it, the handler called, the response head raced
//! against the guest, the body tied to the guest's outcome, and every
//! failure mapped by its source. Per-request instances ([`per_request`])
//! and pinned sessions ([`crate::session`]) both go through it.

use crate::app::{Entry, Target};
use crate::body::ClientPace;
use crate::lanes::{CallClock, GuestCall, Paced};
use crate::metrics::ActiveInstance;
use crate::respond::{Body, Failure};
use crate::share::Limit;
use crate::state::HostState;
use bytes::Bytes;
use http::Response;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::sync::oneshot;
use wasmtime::{Store, UpdateDeadline};
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::Proxy;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::p2::types::{HostIncomingRequest, HostResponseOutparam};
use wasmtime_wasi_http::p3;
use wasmtime_wasi_http::p3::bindings::Service;

/// A WASI 0.2 guest's response head, once it sets it.
type P2Head = oneshot::Receiver<Result<Response<Body>, ErrorCode>>;

/// A WASI 0.3 guest's response head, once it returns it.
type P3Head = oneshot::Receiver<Result<Response<Body>, p3::bindings::http::types::ErrorCode>>;

type Resource<T> = wasmtime::component::Resource<T>;

/// A made instance: its HTTP entry point, in either WASI generation.
pub enum Guest {
    /// `wasi:http/incoming-handler@0.2`.
    P2(Proxy),
    /// `wasi:http/handler@0.3`.
    P3(Service),
}

/// A request put into a store, ready for [`call`].
pub enum Bound {
    /// The request and the response slot, in the store's table.
    P2 {
        /// The request.
        req: Resource<HostIncomingRequest>,
        /// Where the guest sets its response.
        out: Resource<HostResponseOutparam>,
    },
    /// The request, and where its head goes once the guest returns it.
    P3 {
        /// The request (moved into the table by the call).
        request: p3::Request,
        /// Ends when the host is done reading the request body; its
        /// result goes to the guest with the response.
        io: Pin<Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>>,
        /// The response head.
        head: oneshot::Sender<Result<Response<Body>, p3::bindings::http::types::ErrorCode>>,
    },
}

/// What a guest call hands back to the request: the response head once
/// the guest gives it, in either generation.
pub enum ResponseReceiver {
    /// From a `response-outparam`.
    P2(P2Head),
    /// From `handle`'s result.
    P3(P3Head),
}

/// Why no head came: the guest dropped its slot without setting it.
pub struct NoHead;

impl ResponseReceiver {
    /// The head, if the guest has given it already.
    fn try_recv(&mut self) -> Result<Result<Response<Body>, Failure>, NoHead> {
        match self {
            Self::P2(rx) => rx
                .try_recv()
                .map(|h| h.map_err(Failure::from_guest_code))
                .map_err(|_| NoHead),
            Self::P3(rx) => rx
                .try_recv()
                .map(|h| h.map_err(Failure::from_guest_code))
                .map_err(|_| NoHead),
        }
    }
}

impl Future for ResponseReceiver {
    type Output = Result<Result<Response<Body>, Failure>, NoHead>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Self::P2(rx) => Pin::new(rx).poll(cx).map(|r| {
                r.map(|h| h.map_err(Failure::from_guest_code))
                    .map_err(|_| NoHead)
            }),
            Self::P3(rx) => Pin::new(rx).poll(cx).map(|r| {
                r.map(|h| h.map_err(Failure::from_guest_code))
                    .map_err(|_| NoHead)
            }),
        }
    }
}

/// A fresh store for `target`, with its limiter and `deadline` set; its
/// epoch ticks go to `clock` (the call budget of [`crate::lanes`]).
///
/// A running guest yields to the executor at every epoch tick, so a guest
/// spinning in a loop cannot hold its thread (and the other connections
/// on it) for longer than a tick; the wall-clock timeout in [`call`] ends
/// it at its deadline. Should the guest be re-entered past the deadline
/// anyway, the epoch callback traps it as a backstop.
pub fn new_store(target: &Target, deadline: Instant, clock: CallClock) -> Store<HostState> {
    let mut store = Store::new(
        &target.engine,
        HostState::new(&target.spec, target.metrics.clone()),
    );
    store.data_mut().call_clock = Some(clock);
    store.limiter(|s| &mut s.limiter);
    store.data_mut().deadline = deadline;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut store| {
        let data = store.data_mut();
        if let Some(clock) = &data.call_clock {
            clock.tick();
        }
        data.count_host_memory()?;
        if Instant::now() >= data.deadline {
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

/// How many idle sessions one instantiation may end to find a pool slot.
const RECLAIM_TRIES: usize = 4;

/// Waits between tries once a session was ended for a slot (ms).
const SLOT_WAITS_MS: [u64; 6] = [1, 2, 4, 8, 16, 32];

/// Makes `target`'s instance in `store`, within the store's deadline.
/// A full pool is first answered by ending idle sessions
/// ([`crate::session::IdleSessions`]); only then is it a failure.
pub async fn instantiate(store: &mut Store<HostState>, target: &Target) -> Result<Guest, Failure> {
    let prepared = match &target.prepared {
        Ok(p) => p.clone(),
        Err(why) => return Err(Failure::Unavailable(why.to_string())),
    };
    let deadline = tokio::time::Instant::from_std(store.data().deadline);
    let mut reclaimed = 0;
    let mut waits = [].iter();
    let result = loop {
        // (A refusal of an earlier try is not this one's.)
        store.data_mut().limiter.refused = None;
        let taken = store.data().limiter.linear();
        let made = tokio::time::timeout_at(deadline, async {
            match &prepared.entry {
                Entry::P2(pre) => pre.instantiate_async(&mut *store).await.map(Guest::P2),
                Entry::P3(pre) => pre.instantiate_async(&mut *store).await.map(Guest::P3),
            }
        })
        .await;
        let failure = match made {
            Ok(Ok(guest)) => return Ok(guest),
            Ok(Err(e)) => Failure::classify(&e, &store.data().limiter),
            Err(_) => Failure::Deadline,
        };
        // The pool is full, or the host's memory for guests: take a slot
        // and its memory back from an idle session of the tenant that holds
        // the most (its instance is dropped right there) and try again at
        // once, before another instantiation takes it; the tenant's own
        // memory share full, from one of its own idle sessions. Should one
        // have, wait a little longer each time.
        // (Only if the try took no memory: what a failed instantiation
        // made stays in the store, and a second would count it twice.)
        let took_none = store.data().limiter.linear() == taken;
        let from = match failure {
            Failure::PoolExhausted => None,
            Failure::MemoryExhausted if took_none => None,
            Failure::OverShare(crate::share::Limit::Memory) if took_none => Some(&*target.tenant),
            _ => break failure,
        };
        let wait = match waits.next() {
            Some(ms) => Some(*ms),
            None if reclaimed < RECLAIM_TRIES => target.idle_sessions.reclaim_from(from).map(|from| {
                reclaimed += 1;
                tracing::debug!(tenant = %target.tenant, component = %target.component, from = %from, "no slot or memory: an idle session was ended for this instance");
                waits = SLOT_WAITS_MS.iter();
                0
            }),
            None => None,
        };
        match wait {
            Some(0) => {}
            Some(ms) => tokio::time::sleep(std::time::Duration::from_millis(ms)).await,
            None => break failure,
        }
    };
    count_failure(target, &result);
    log_guest_output(store, target);
    Err(result)
}

/// Puts a request into the store, the way `target`'s component takes it.
pub fn bind<B>(
    store: &mut Store<HostState>,
    target: &Target,
    request: http::Request<B>,
) -> Result<(Bound, ResponseReceiver), Failure>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<wasmtime_wasi_http::Error>,
{
    store.data_mut().client_pace = request.extensions().get::<ClientPace>().cloned();
    let chain = request
        .extensions()
        .get::<crate::services::Chain>()
        .cloned()
        .unwrap_or_default();
    store.data_mut().begin_request(chain);
    let p3 = matches!(&target.prepared, Ok(p) if matches!(p.entry, Entry::P3(_)));
    let mut http = store.data_mut().http();
    if p3 {
        let (tx, rx) = oneshot::channel();
        let (request, io) = p3::Request::from_http(http.hooks, request);
        return Ok((
            Bound::P3 {
                request,
                io: Box::pin(io),
                head: tx,
            },
            ResponseReceiver::P3(rx),
        ));
    }
    let (tx, rx) = oneshot::channel();
    // A client's request is plain HTTP here (TLS ends before the host); a
    // service call keeps the scheme its caller gave its URL.
    let scheme = match request.uri().scheme() {
        Some(s) if *s == http::uri::Scheme::HTTPS => Scheme::Https,
        _ => Scheme::Http,
    };
    let req = http
        .new_incoming_request(scheme, request)
        .map_err(|e| Failure::Internal(format!("{e:#}")))?;
    let out = http
        .new_response_outparam(tx)
        .map_err(|e| Failure::Internal(format!("{e:#}")))?;
    Ok((Bound::P2 { req, out }, ResponseReceiver::P2(rx)))
}

/// Calls the guest's handler once, under the store's wall-clock deadline.
///
/// A WASI 0.3 guest's body is written by its tasks while the host reads
/// it, so its store runs (`run_concurrent`) until the body has been read
/// to its end or dropped; a 0.2 guest has written its body when its call
/// returns (or streams it through host-owned pipes).
pub async fn call(
    store: &mut Store<HostState>,
    guest: &Guest,
    target: &Target,
    bound: Bound,
) -> Result<(), Failure> {
    // One deadline per request, set when the request arrived: the call
    // gets what the queue and instantiation left of it.
    let deadline = tokio::time::Instant::from_std(store.data().deadline);
    let ran = match (guest, bound) {
        (Guest::P2(proxy), Bound::P2 { req, out }) => {
            let call = proxy
                .wasi_http_incoming_handler()
                .call_handle(&mut *store, req, out);
            unless_panicked(tokio::time::timeout_at(deadline, call)).await
        }
        (Guest::P3(service), Bound::P3 { request, io, head }) => {
            let run = store.run_concurrent(async move |store| {
                let response = match service.handle(store, request).await? {
                    Ok(response) => response,
                    Err(code) => {
                        let _ = head.send(Err(code));
                        return Ok(());
                    }
                };
                let response = store.with(|mut store| response.into_http(&mut store, io))?;
                let (read, done) = oneshot::channel();
                let response = response.map(|body| {
                    http_body_util::BodyExt::boxed_unsync(crate::body::EndSignal::new(body, read))
                });
                if head.send(Ok(response)).is_ok() {
                    // Read to its end, or dropped: either way the guest's
                    // part is over.
                    let _ = done.await;
                }
                wasmtime::Result::<()>::Ok(())
            });
            unless_panicked(tokio::time::timeout_at(deadline, async {
                run.await.and_then(|r| r)
            }))
            .await
        }
        _ => {
            return Err(Failure::Internal(
                "request bound for the other WASI generation".into(),
            ));
        }
    };
    let result = match ran {
        Err(panicked) => Err(panicked),
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(e))) => Err(Failure::classify(&e, &store.data().limiter)),
        // The guest was blocked in the host: if on a request body the
        // client is still to send, the client is the slow one.
        Ok(Err(_))
            if store
                .data()
                .client_pace
                .as_ref()
                .is_some_and(ClientPace::waiting) =>
        {
            Err(Failure::ClientTimeout)
        }
        Ok(Err(_)) => Err(Failure::Deadline),
    };
    if let Err(f) = &result {
        count_failure(target, f);
    }
    log_guest_output(store, target);
    result
}

/// `call`'s outcome, or its panic as this call's failure. A host function
/// that panics (a bug, or a library's on what a tenant's server sent) has
/// its panic carried by wasmtime out through the guest's frames to here,
/// where it would end the request's task: the client's connection closed
/// with no answer. It is a 500 with fixed words instead, logged with the
/// tenant like any failure; the instance is not entered again (no failed
/// call's is).
async fn unless_panicked<T>(call: impl Future<Output = T>) -> Result<T, Failure> {
    use futures_util::FutureExt;
    std::panic::AssertUnwindSafe(call)
        .catch_unwind()
        .await
        .map_err(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Failure::Internal(format!("a host function panicked: {what}"))
        })
}

/// How a guest call's race between its response head and its own end came
/// out.
pub enum Race<G> {
    /// The guest finished (or failed) before anything could stream.
    Done {
        /// Whether the guest itself returned cleanly (its instance can be
        /// used again).
        guest_ok: bool,
        /// What the client gets.
        response: Result<Response<Body>, Failure>,
    },
    /// The head is ready while the guest still writes its body: the
    /// response streams, and `finish` must run `guest` to its end (its
    /// result decides whether the body ends cleanly).
    Streaming {
        /// The response to send now.
        response: Response<Body>,
        /// The guest, still running.
        guest: G,
        /// Tell the body how the guest ended.
        finish: oneshot::Sender<bool>,
    },
}

/// Runs `guest` until either it ends or its response head is ready.
///
/// Most guests finish (body written) before the head could even be sent,
/// so the guest runs right here, in the caller's task; only one still
/// streaming its body when the head is ready is handed back to be run on
/// ([`Race::Streaming`]).
pub async fn race<G>(mut guest: G, mut head: ResponseReceiver) -> Race<G>
where
    G: Future<Output = Result<(), Failure>> + Unpin,
{
    tokio::select! {
        biased;
        result = &mut guest => {
            let guest_ok = result.is_ok();
            let response = match (result, head.try_recv()) {
                // The guest failed after setting the head: nothing has gone
                // to the client yet, so answer the failure rather than a
                // body the failure cut short.
                (Err(f), _) => Err(f),
                (Ok(()), Ok(h)) => h,
                (Ok(()), Err(_)) => Err(Failure::NoResponse),
            };
            Race::Done { guest_ok, response }
        }
        h = &mut head => match h {
            Ok(Ok(response)) => {
                let (finish, outcome) = oneshot::channel();
                let response = response.map(|body| {
                    http_body_util::BodyExt::boxed_unsync(crate::body::GuestOutcomeBody::new(
                        body, outcome,
                    ))
                });
                Race::Streaming { response, guest, finish }
            }
            Ok(Err(failure)) => {
                let result = guest.await;
                Race::Done {
                    guest_ok: result.is_ok(),
                    response: Err(result.err().unwrap_or(failure)),
                }
            }
            // The outparam was dropped unset: the guest's own result says why.
            Err(_) => {
                let result = guest.await;
                Race::Done {
                    guest_ok: result.is_ok(),
                    response: Err(result.err().unwrap_or(Failure::NoResponse)),
                }
            }
        }
    }
}

/// Logs what the guest wrote to stdout/stderr during its request, if
/// anything (after the failure, if there was one, so they read together),
/// within its tenant's log budget ([`crate::share::LogBudget`]).
pub fn log_guest_output(store: &Store<HostState>, target: &Target) {
    if let Some(output) = store.data().log.take()
        && let Some(suppressed) = target.share.log.admit()
    {
        // Debug formatting escapes newlines: a guest cannot forge log lines.
        tracing::info!(tenant = %target.tenant, component = %target.component, suppressed, ?output, "guest output");
    }
}

/// Counts a guest failure, and logs it within its tenant's log budget: a
/// tenant whose guests trap thousands of times a second would otherwise
/// write as many lines, filling the host's disk and taking the serving
/// threads' time.
pub fn count_failure(target: &Target, failure: &Failure) {
    let m = &target.metrics;
    // The tenant's own doing (its guest failed, or it asked past its
    // share) counts toward its going to the background lane.
    if matches!(
        failure,
        Failure::Deadline
            | Failure::MemoryCap(_)
            | Failure::Trap(_)
            | Failure::NoResponse
            | Failure::OverShare(_)
            | Failure::SessionsFull(_)
    ) {
        target.share.cpu.fault();
    }
    match failure {
        Failure::Deadline => {
            m.deadline_kills.fetch_add(1, Relaxed);
        }
        Failure::OverShare(crate::share::Limit::Memory) => {
            target
                .share
                .refuse_memory(crate::share::MemoryRefusal::Tenant);
        }
        Failure::MemoryExhausted => {
            target
                .share
                .refuse_memory(crate::share::MemoryRefusal::Host);
        }
        Failure::MemoryCap(_) => {
            m.traps.fetch_add(1, Relaxed);
            m.memory_cap_kills.fetch_add(1, Relaxed);
        }
        Failure::Trap(_) => {
            m.traps.fetch_add(1, Relaxed);
        }
        _ => {}
    }
    let Some(suppressed) = target.share.log.admit() else {
        return;
    };
    let (tenant, component) = (&target.tenant, &target.component);
    match failure {
        Failure::Deadline => {
            tracing::warn!(%tenant, %component, suppressed, "deadline exceeded; instance killed");
        }
        Failure::MemoryCap(why) => {
            tracing::warn!(%tenant, %component, suppressed, error = %why, "memory cap exceeded; instance killed");
        }
        Failure::Trap(why) => {
            tracing::warn!(%tenant, %component, suppressed, error = %why, "guest trapped");
        }
        Failure::OverShare(limit) => {
            tracing::warn!(%tenant, %component, suppressed, limit = limit.key(), "tenant over its share; refused");
        }
        other => {
            tracing::warn!(%tenant, %component, suppressed, failure = ?other, "request failed")
        }
    }
}

/// Serves one request on a fresh instance that is dropped when the guest
/// returns (after it has written the whole body).
pub async fn per_request<B>(
    target: &Arc<Target>,
    request: http::Request<B>,
    deadline: Instant,
) -> Result<Response<Body>, Failure>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<wasmtime_wasi_http::Error>,
{
    let clock = CallClock::new(target.share.clone());
    clock.begin();
    let mut store = new_store(target, deadline, clock.clone());
    let (bound, head) = bind(&mut store, target, request)?;
    let target = target.clone();
    let background = target.background.clone();
    let guest = Box::pin(async move {
        // The tenant's instance share, taken when the call first runs (not
        // while it waits its turn in the background lane: a waiting call
        // has no instance) and held for as long as the store lives.
        let _permit = target
            .share
            .acquire_units(Limit::Instances, target.weight())
            .map_err(|limit| {
                let f = Failure::OverShare(limit);
                count_failure(&target, &f);
                f
            })?;
        let _active = ActiveInstance::new(&target.metrics);
        // A tick from now, not from when the store was made: a call that
        // waited its turn would otherwise yield at its first epoch check,
        // holding its instance while the lane's other calls start theirs.
        store.set_epoch_deadline(1);
        let guest = instantiate(&mut store, &target).await?;
        call(&mut store, &guest, &target, bound).await
    });
    // In its tenant's CPU lane; the store goes with it, so a big memory is
    // reset where the guest ran.
    let guest = Paced::new(guest, GuestCall::new(clock), background);
    match race(guest, head).await {
        Race::Done { response, .. } => response,
        Race::Streaming {
            response,
            guest,
            finish,
        } => {
            tokio::spawn(async move {
                let _ = finish.send(guest.await.is_ok());
            });
            Ok(response)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_in_a_host_function_is_the_calls_failure() {
        let failed = unless_panicked::<()>(async { panic!("a library's bug") }).await;
        match failed {
            Err(f @ Failure::Internal(_)) => {
                assert!(matches!(&f, Failure::Internal(why) if why.contains("a library's bug")));
                // Fixed words for the client; the detail is the log's.
                assert_eq!(f.response().status(), 500);
            }
            _ => panic!("expected an internal failure"),
        }
        assert!(matches!(unless_panicked(async { 7 }).await, Ok(7)));
    }
}
