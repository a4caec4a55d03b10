//! Per-session instances: requests carrying the same session key go, in
//! order, to one long-lived instance pinned to that key.
//!
//! Each session is a task that owns its store and instance and takes jobs
//! from a bounded queue. The pool's map is locked only to look up, create or
//! evict a session (never across a guest call), and jobs are queued while
//! holding it, so an idle session can check "no queued job" and remove
//! itself atomically: a request never lands on a session that is exiting.

use crate::app::{Prepared, Target};
use crate::engine::ContentHash;
use crate::invoke::{bind_request, call, count_failure, new_store};
use crate::metrics::ActiveInstance;
use crate::respond::{Body, Failure};
use bytes::Bytes;
use edge_config::{SessionKey, SessionSettings};
use http::Response;
use http_body_util::combinators::UnsyncBoxBody;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tokio::sync::{mpsc, oneshot};

/// Longest accepted session key.
const MAX_KEY_BYTES: usize = 256;

/// The request type queued to a session.
pub type SessionRequest = http::Request<UnsyncBoxBody<Bytes, wasmtime_wasi_http::Error>>;

struct Job {
    target: Arc<Target>,
    request: SessionRequest,
    reply: oneshot::Sender<Result<Response<Body>, Failure>>,
}

struct Session {
    id: u64,
    tx: mpsc::Sender<Job>,
    /// Requests queued or running on it.
    inflight: Arc<std::sync::atomic::AtomicUsize>,
}

/// The sessions of one (tenant, component).
pub struct SessionPool {
    settings: SessionSettings,
    /// The grants its stores were built with: a reload that changes them
    /// (memory cap, outbound hosts, variables, stores) gets a new pool, so
    /// no live session keeps rights the new config took away.
    spec: crate::state::StoreSpec,
    prepared: Arc<Prepared>,
    sessions: Mutex<HashMap<String, Session>>,
    next_id: AtomicU64,
    workers: Arc<Workers>,
}

type PoolKey = (String, String, ContentHash);

/// Session pools by (tenant, component, content hash), so a reload that
/// leaves a component unchanged keeps its sessions.
#[derive(Default)]
pub struct SessionRegistry {
    pools: Mutex<HashMap<PoolKey, Weak<SessionPool>>>,
    workers: Arc<Workers>,
}

/// The worker threads' runtimes, which session tasks run on.
///
/// Instance `i` of a key lives on worker `i % workers`, so the instances
/// of a busy key (say the hint engine's four) are spread over the cores;
/// spawned wherever the request that created them ran, they could all land
/// on one thread and leave the other cores idle. A request prefers an idle
/// instance on its own worker: handing it a job is then a push onto the
/// thread's own run queue, where a job for another thread wakes that
/// thread (an eventfd write, often a context switch, and the reply wakes
/// this one back).
#[derive(Default)]
struct Workers {
    handles: Mutex<Vec<tokio::runtime::Handle>>,
    /// `handles.len()`, read on every request without the lock.
    count: std::sync::atomic::AtomicUsize,
}

thread_local! {
    /// This thread's index among the workers, if it is one.
    static WORKER: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

impl Workers {
    fn handles(&self) -> MutexGuard<'_, Vec<tokio::runtime::Handle>> {
        self.handles.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many workers there are (0 outside the server: tests, checks).
    fn count(&self) -> usize {
        self.count.load(Relaxed)
    }

    /// The worker the calling thread is, if any.
    fn current() -> Option<usize> {
        WORKER.with(|w| w.get())
    }

    /// Runs `task` on worker `home`, or right here without workers.
    fn spawn<F>(&self, home: Option<usize>, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let handles = self.handles();
        match home {
            Some(i) if !handles.is_empty() => {
                handles[i % handles.len()].spawn(task);
            }
            _ => {
                drop(handles);
                tokio::spawn(task);
            }
        }
    }
}

impl SessionRegistry {
    /// Registers the calling worker thread's runtime for session tasks.
    pub fn add_worker(&self, handle: tokio::runtime::Handle) {
        let mut handles = self.workers.handles();
        WORKER.with(|w| w.set(Some(handles.len())));
        handles.push(handle);
        self.workers.count.store(handles.len(), Relaxed);
    }

    /// The pool for a tenant's component, reusing a live one when the
    /// component and its session settings are unchanged.
    pub fn pool(
        &self,
        tenant: &str,
        component: &str,
        prepared: &Arc<Prepared>,
        settings: &SessionSettings,
        spec: &crate::state::StoreSpec,
    ) -> Arc<SessionPool> {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        pools.retain(|_, p| p.strong_count() > 0);
        let key = (tenant.to_string(), component.to_string(), prepared.hash);
        if let Some(pool) = pools.get(&key).and_then(Weak::upgrade)
            && pool.settings == *settings
            && pool.spec.same_grants(spec)
        {
            return pool;
        }
        let pool = Arc::new(SessionPool {
            settings: settings.clone(),
            spec: spec.clone(),
            prepared: prepared.clone(),
            sessions: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            workers: self.workers.clone(),
        });
        pools.insert(key, Arc::downgrade(&pool));
        pool
    }
}

impl SessionPool {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Session>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sessions alive now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no session is alive.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queues a request on its session, creating the session if needed, and
    /// waits for the response head.
    pub async fn dispatch(
        self: &Arc<Self>,
        engine: &wasmtime::Engine,
        target: &Arc<Target>,
        request: SessionRequest,
    ) -> Result<Response<Body>, Failure> {
        let base = session_key(&self.settings.key, &request)?;
        let (reply, response) = oneshot::channel();
        let job = Job {
            target: target.clone(),
            request,
            reply,
        };
        {
            let mut sessions = self.lock();
            let (key, home) = self.pick_instance(&sessions, base);
            let unqueued = match sessions.get(&key) {
                Some(session) => match session.tx.try_send(job) {
                    Ok(()) => {
                        session.inflight.fetch_add(1, Relaxed);
                        None
                    }
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        target.metrics.sessions_rejected.fetch_add(1, Relaxed);
                        return Err(Failure::SessionsFull(format!(
                            "session queue full: {} requests already wait on this session of component {}",
                            self.settings.max_queued, target.component
                        )));
                    }
                    Err(mpsc::error::TrySendError::Closed(job)) => {
                        // The session ended after a failure; start afresh.
                        sessions.remove(&key);
                        Some(job)
                    }
                },
                None => Some(job),
            };
            if let Some(job) = unqueued {
                if sessions.len() >= self.settings.max_sessions {
                    target.metrics.sessions_rejected.fetch_add(1, Relaxed);
                    return Err(Failure::SessionsFull(format!(
                        "session capacity reached: component {} already has {} active sessions (max_sessions); retry later",
                        target.component, self.settings.max_sessions
                    )));
                }
                let (tx, rx) = mpsc::channel(self.settings.max_queued);
                let id = self.next_id.fetch_add(1, Relaxed);
                // A fresh channel has room for the first job.
                let _ = tx.try_send(job);
                let inflight = Arc::new(std::sync::atomic::AtomicUsize::new(1));
                sessions.insert(
                    key.clone(),
                    Session {
                        id,
                        tx,
                        inflight: inflight.clone(),
                    },
                );
                self.workers.spawn(
                    home,
                    run_session(
                        self.clone(),
                        engine.clone(),
                        key,
                        id,
                        rx,
                        target.clone(),
                        inflight,
                    ),
                );
            }
        }
        response
            .await
            .unwrap_or_else(|_| Err(Failure::Internal("session ended without answering".into())))
    }

    /// Which instance of the key's `instances_per_key` takes the request,
    /// and the worker it lives on: an idle one on this worker, else a new
    /// one here, else an idle one elsewhere, else a new one elsewhere, else
    /// the least loaded (this worker's on a tie).
    fn pick_instance(
        &self,
        sessions: &HashMap<String, Session>,
        base: String,
    ) -> (String, Option<usize>) {
        let workers = self.workers.count();
        let n = self.settings.instances_per_key.count(workers);
        let here = Workers::current().filter(|&w| w < workers);
        if n <= 1 {
            // A key's one instance lives where its first request came in:
            // that connection's later requests then stay on one thread.
            return (base, here);
        }
        let home = |i: usize| (workers > 0).then(|| i % workers);
        let mut name = base;
        name.push('#');
        let stem = name.len();
        let (mut missing_here, mut idle_elsewhere, mut missing) = (None, None, None);
        let mut least: Option<(usize, bool, usize)> = None;
        for i in 0..n {
            name.truncate(stem);
            let _ = write!(name, "{i}");
            let local = here.is_none() || home(i) == here;
            match sessions.get(name.as_str()) {
                Some(s) => {
                    let load = s.inflight.load(Relaxed);
                    if load == 0 && local {
                        return (name, home(i));
                    }
                    if load == 0 {
                        idle_elsewhere.get_or_insert(i);
                    }
                    let rank = (load, !local, i);
                    if least.is_none_or(|l| rank < l) {
                        least = Some(rank);
                    }
                }
                None if local => {
                    missing_here.get_or_insert(i);
                }
                None => {
                    missing.get_or_insert(i);
                }
            }
        }
        let i = missing_here
            .or(idle_elsewhere)
            .or(missing)
            .or(least.map(|(_, _, i)| i))
            .expect("instances_per_key >= 2");
        name.truncate(stem);
        let _ = write!(name, "{i}");
        (name, home(i))
    }

    /// Removes the session if it is still `id` and nothing is queued on it.
    fn evict_if_idle(&self, key: &str, id: u64, rx: &mpsc::Receiver<Job>) -> bool {
        let mut sessions = self.lock();
        if !rx.is_empty() {
            return false;
        }
        if sessions.get(key).is_some_and(|s| s.id == id) {
            sessions.remove(key);
        }
        true
    }

    fn remove(&self, key: &str, id: u64) {
        let mut sessions = self.lock();
        if sessions.get(key).is_some_and(|s| s.id == id) {
            sessions.remove(key);
        }
    }
}

fn session_key(source: &SessionKey, request: &SessionRequest) -> Result<String, Failure> {
    let key = match source {
        SessionKey::Header(name) => request
            .headers()
            .get(name.as_str())
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        SessionKey::Cookie(name) => request
            .headers()
            .get_all(http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.to_string()),
        SessionKey::PathSegment(n) => request
            .uri()
            .path()
            .split('/')
            .filter(|s| !s.is_empty())
            .nth(n - 1)
            .map(str::to_string),
        SessionKey::Host => request
            .uri()
            .host()
            .or_else(|| {
                request
                    .headers()
                    .get(http::header::HOST)
                    .and_then(|v| v.to_str().ok())
            })
            .map(|h| crate::app::strip_port(h).to_ascii_lowercase()),
        SessionKey::Bearer => {
            // The token itself never becomes a key (keys show in logs); its
            // hash names one session per token, unguessable without it.
            let token = request
                .headers()
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split_once(' '))
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .map(|(_, token)| token.trim())
                .filter(|t| !t.is_empty());
            let Some(token) = token else {
                return Err(Failure::Unauthorized(
                    "this route needs an Authorization: Bearer token".into(),
                ));
            };
            use sha2::Digest;
            Some(hex::encode(sha2::Sha256::digest(token.as_bytes())))
        }
    };
    let describe = || match source {
        SessionKey::Header(h) => format!("header {h}"),
        SessionKey::Cookie(c) => format!("cookie {c}"),
        SessionKey::PathSegment(n) => format!("path segment {n}"),
        SessionKey::Host => "Host header".to_string(),
        SessionKey::Bearer => "bearer token".to_string(),
    };
    match key {
        Some(k) if !k.is_empty() && k.len() <= MAX_KEY_BYTES => Ok(k),
        Some(k) if !k.is_empty() => Err(Failure::BadRequest(format!(
            "session key ({}) is longer than {MAX_KEY_BYTES} bytes",
            describe()
        ))),
        _ => Err(Failure::BadRequest(format!(
            "missing session key: this route needs a non-empty {}",
            describe()
        ))),
    }
}

struct SessionGauge(Arc<crate::metrics::RouteMetrics>);
impl Drop for SessionGauge {
    fn drop(&mut self) {
        self.0.sessions_active.fetch_sub(1, Relaxed);
    }
}

async fn run_session(
    pool: Arc<SessionPool>,
    engine: wasmtime::Engine,
    key: String,
    id: u64,
    mut rx: mpsc::Receiver<Job>,
    first: Arc<Target>,
    inflight: Arc<std::sync::atomic::AtomicUsize>,
) {
    first.metrics.sessions_active.fetch_add(1, Relaxed);
    let _gauge = SessionGauge(first.metrics.clone());
    let _active = ActiveInstance::new(&first.metrics);
    let mut store = new_store(&engine, &first);
    let deadline = tokio::time::Instant::from_std(store.data().deadline);
    let instantiate = pool.prepared.pre.instantiate_async(&mut store);
    let instantiated = match tokio::time::timeout_at(deadline, instantiate).await {
        Ok(r) => r.map_err(|e| Failure::classify(&e, store.data().limiter.hit)),
        Err(_) => Err(Failure::Deadline),
    };
    let proxy = match instantiated {
        Ok(p) => p,
        Err(failure) => {
            count_failure(&first, &failure);
            crate::invoke::log_guest_output(&store, &first);
            pool.remove(&key, id);
            rx.close();
            while let Ok(job) = rx.try_recv() {
                let _ = job.reply.send(Err(failure.clone()));
            }
            return;
        }
    };
    loop {
        let job = match tokio::time::timeout(pool.settings.idle_timeout, rx.recv()).await {
            Ok(Some(job)) => job,
            Ok(None) => return,
            Err(_) => {
                if pool.evict_if_idle(&key, id, &rx) {
                    first.metrics.sessions_evicted.fetch_add(1, Relaxed);
                    tracing::debug!(component = %first.component, session = %key, "idle session evicted");
                    return;
                }
                continue;
            }
        };
        let Job {
            target,
            request,
            reply,
        } = job;
        if reply.is_closed() {
            // The client gave up while this waited in the queue: running
            // it would only delay the requests queued behind it.
            inflight.fetch_sub(1, Relaxed);
            continue;
        }
        store.data_mut().deadline = std::time::Instant::now() + target.deadline;
        store.set_epoch_deadline(1);
        let (req, out, mut head) = match bind_request(&mut store, request) {
            Ok(bound) => bound,
            Err(f) => {
                let _ = reply.send(Err(f));
                inflight.fetch_sub(1, Relaxed);
                continue;
            }
        };
        let mut reply = Some(reply);
        let outcome = {
            let mut guest = pin!(call(&mut store, &proxy, &target, req, out));
            tokio::select! {
                h = &mut head => {
                    // The body streams while the guest runs on: it ends
                    // cleanly only if the guest does (a trap or deadline
                    // cuts it short visibly, as for per-request guests).
                    let (done, guest_ok) = oneshot::channel();
                    if let (Ok(h), Some(r)) = (h, reply.take()) {
                        let _ = r.send(
                            h.map(|response| {
                                response.map(|body| {
                                    http_body_util::BodyExt::boxed_unsync(
                                        crate::body::GuestOutcomeBody::new(body, guest_ok),
                                    )
                                })
                            })
                            .map_err(|code| Failure::GuestError(format!("{code:?}"))),
                        );
                    }
                    let result = guest.await;
                    let _ = done.send(result.is_ok());
                    result
                }
                r = &mut guest => r,
            }
        };
        crate::invoke::log_guest_output(&store, &target);
        if outcome.is_err() {
            // A trapped instance cannot be entered again: take the session
            // out of the pool before answering, so a request sent after
            // this answer starts a fresh instance.
            pool.remove(&key, id);
            rx.close();
        }
        if let Some(r) = reply.take() {
            let result = match (&outcome, head.try_recv()) {
                // The guest failed after setting the head: nothing has gone
                // to the client yet, so answer the failure rather than a
                // body the failure cut short.
                (Err(f), _) => Err(f.clone()),
                (Ok(()), Ok(h)) => h.map_err(|code| Failure::GuestError(format!("{code:?}"))),
                (Ok(()), Err(_)) => Err(Failure::NoResponse),
            };
            let _ = r.send(result);
        }
        inflight.fetch_sub(1, Relaxed);
        if outcome.is_err() {
            // Whoever queued behind the failure retries on a fresh one.
            while let Ok(job) = rx.try_recv() {
                let _ = job.reply.send(Err(Failure::SessionsFull(
                    "the session was reset after a failure; retry".into(),
                )));
            }
            return;
        }
    }
}
