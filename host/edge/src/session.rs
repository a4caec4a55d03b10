//! Per-session instances: requests carrying the same session key go, in
//! order, to one long-lived instance pinned to that key.
//!
//! Each session is a task that owns its store and instance and takes jobs
//! from a bounded queue. The pool's map is locked only to look up, create or
//! evict a session (never across a guest call), and jobs are queued while
//! holding it, so an idle session can check "no queued job" and remove
//! itself atomically: a request never lands on a session that is exiting.
//!
//! Sessions are held to the tenant's share ([`crate::share`]): each holds
//! one of the tenant's `max_sessions` while it is in its pool's map, and
//! one of its `max_instances` while its instance lives. Within a tenant,
//! each session component is guaranteed an equal part of `max_sessions`
//! and may borrow what the others leave unused; a component under its part
//! takes its session from an idle borrower (its least recently used
//! session). A flood of client-chosen keys on one route thus fills at most
//! the tenant's sessions and yields them to every other route that needs
//! its part; the flooded route answers 503 past that.

use crate::app::{Prepared, Target};
use crate::engine::ContentHash;
use crate::invoke::{Guest, Race, bind, call, count_failure, instantiate, new_store, race};
use crate::lanes::{CallClock, GuestCall, Paced};
use crate::metrics::ActiveInstance;
use crate::respond::{Body, Failure};
use crate::share::{Limit, Permit, TenantShare};
use bytes::Bytes;
use edge_config::{SessionKey, SessionSettings};
use http::Response;
use http_body_util::combinators::UnsyncBoxBody;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

/// Longest accepted session key.
const MAX_KEY_BYTES: usize = 256;

/// The request type queued to a session.
pub type SessionRequest = http::Request<UnsyncBoxBody<Bytes, wasmtime_wasi_http::Error>>;

/// Where a queued request's response head comes.
type Reply = oneshot::Receiver<Result<Response<Body>, Failure>>;

/// What became of a request given to a pool.
enum Enqueued {
    /// Queued: its answer comes here.
    Waiting(Reply),
    /// Refused (no session could be had): why.
    Refused(Failure),
    /// Given back: every instance of its key is busy, and it may not wait.
    Busy(Box<SessionRequest>),
}

struct Job {
    target: Arc<Target>,
    request: SessionRequest,
    /// The request's deadline, from when it arrived: time in the queue
    /// counts.
    deadline: Instant,
    reply: oneshot::Sender<Result<Response<Body>, Failure>>,
}

struct Session {
    id: u64,
    tx: mpsc::Sender<Job>,
    /// Requests queued or running on it.
    inflight: Arc<AtomicUsize>,
    /// When a request last came for it (under the pool's lock).
    last_used: Instant,
    /// One of the tenant's sessions, given back when it leaves the map.
    _held: Permit,
    /// The session's instance while it waits for a job.
    parked: Parked,
}

/// Where an idle session keeps its instance, so that whoever ends the
/// session (to take its pool slot) drops the instance at once, on its own
/// thread: the session's task may be in the background lane, where it
/// could wait long for a core.
type Parked = Arc<Mutex<Option<Instance>>>;

/// The sessions of one (tenant, component).
pub struct SessionPool {
    settings: SessionSettings,
    /// The grants its stores were built with: a reload that changes them
    /// (memory cap, outbound hosts, variables, stores) gets a new pool, so
    /// no live session keeps rights the new config took away.
    spec: crate::state::StoreSpec,
    tenant: Arc<str>,
    share: Arc<TenantShare>,
    sessions: Mutex<HashMap<String, Session>>,
    /// `sessions.len()`, for other pools of the tenant to read unlocked.
    live: AtomicUsize,
    next_id: AtomicU64,
    workers: Arc<Workers>,
    /// Every pool, for finding an idle borrower among the tenant's.
    pools: Arc<PoolMap>,
    /// Replaced by a config now serving: its sessions end once idle.
    retired: AtomicBool,
    /// Sessions host-wide, against `[pool] session_instances`.
    host: Arc<HostSessions>,
}

/// Every pool's sessions together, and how many the host allows: the rest
/// of the instance pool is kept for per-request instances, so that those
/// never wait for a session to be ended for their slot.
#[derive(Default)]
struct HostSessions {
    live: AtomicUsize,
    cap: AtomicUsize,
}

type PoolKey = (String, String, ContentHash);
type PoolMap = Mutex<HashMap<PoolKey, Weak<SessionPool>>>;

/// Session pools by (tenant, component, content hash), so a reload that
/// leaves a component unchanged keeps its sessions.
#[derive(Default)]
pub struct SessionRegistry {
    host: Arc<HostSessions>,
    pools: Arc<PoolMap>,
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
    count: AtomicUsize,
    /// The next worker for a task with no home.
    turn: AtomicUsize,
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

    /// Runs `task` on worker `home`; with no home (the caller is not a
    /// worker: a connection in the background lane) on the next worker in
    /// turn, so the task's lane is its tenant's and not the caller's; right
    /// here without workers (tests, checks).
    fn spawn<F>(&self, home: Option<usize>, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let handles = self.handles();
        if handles.is_empty() {
            drop(handles);
            tokio::spawn(task);
            return;
        }
        let i = home.unwrap_or_else(|| self.turn.fetch_add(1, Relaxed));
        handles[i % handles.len()].spawn(task);
    }
}

/// Every tenant's idle sessions, for taking a pool slot back when the pool
/// is full.
///
/// Shares bound what each tenant holds, but several tenants each within
/// theirs can still fill the pool with sessions they pin and leave idle;
/// an instance of anyone's that then finds no slot takes one from the
/// tenant holding the most sessions (its least recently used idle one).
#[derive(Clone, Default)]
pub struct IdleSessions(Arc<PoolMap>);

impl IdleSessions {
    /// Ends one idle session of the tenant that holds the most, dropping
    /// its instance (so its pool slot is free on return); None if none of
    /// the largest holders has an idle one (or its pool is busy).
    pub fn reclaim(&self) -> Option<Arc<str>> {
        self.reclaim_holding(None, None)
    }

    /// [`Self::reclaim`], or with `tenant`, one of that tenant's own idle
    /// sessions (its least recently used in its largest pool).
    pub fn reclaim_from(&self, tenant: Option<&str>) -> Option<Arc<str>> {
        self.reclaim_holding(None, tenant)
    }

    /// [`Self::reclaim`] by a caller holding `locked`'s sessions: that
    /// pool is one to take from like the others (a pool skipped for being
    /// busy would spare the tenant that holds the most).
    fn reclaim_holding(
        &self,
        mut locked: Option<(&SessionPool, &mut HashMap<String, Session>)>,
        only: Option<&str>,
    ) -> Option<Arc<str>> {
        let pools: Vec<Arc<SessionPool>> = {
            let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
            map.values()
                .filter_map(Weak::upgrade)
                .filter(|p| only.is_none_or(|t| *p.tenant == *t))
                .collect()
        };
        let mut held: HashMap<&str, usize> = HashMap::new();
        for p in &pools {
            *held.entry(&p.tenant).or_default() += p.len();
        }
        let mut tenants: Vec<(&str, usize)> = held.into_iter().filter(|(_, n)| *n > 0).collect();
        tenants.sort_by_key(|(t, n)| (std::cmp::Reverse(*n), *t));
        for (tenant, _) in tenants {
            let mut theirs: Vec<&Arc<SessionPool>> =
                pools.iter().filter(|p| &*p.tenant == tenant).collect();
            theirs.sort_by_key(|p| std::cmp::Reverse(p.len()));
            for p in theirs {
                let evicted = match locked.as_mut() {
                    Some((own, sessions)) if std::ptr::eq(Arc::as_ptr(p), *own) => {
                        p.evict_lru(sessions)
                    }
                    _ => p
                        .sessions
                        .try_lock()
                        .is_ok_and(|mut sessions| p.evict_lru(&mut sessions)),
                };
                if evicted {
                    return Some(p.tenant.clone());
                }
            }
        }
        None
    }
}

impl SessionRegistry {
    /// A registry whose sessions may hold `cap` instances host-wide.
    pub fn new(cap: usize) -> Self {
        let registry = Self::default();
        registry.host.cap.store(cap, Relaxed);
        registry
    }

    /// The idle sessions of every pool, for [`IdleSessions::reclaim`].
    pub fn idle_sessions(&self) -> IdleSessions {
        IdleSessions(self.pools.clone())
    }

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
        share: &Arc<TenantShare>,
    ) -> Arc<SessionPool> {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        pools.retain(|_, p| p.strong_count() > 0);
        let key = (tenant.to_string(), component.to_string(), prepared.hash);
        // Under its own key or, having replaced a pool still draining,
        // under that key with `~`s after the component.
        let live = pools
            .iter()
            .filter(|((t, c, hash), _)| {
                *t == key.0 && c.trim_end_matches('~') == key.1 && *hash == key.2
            })
            .filter_map(|(_, pool)| pool.upgrade())
            .find(|pool| {
                pool.settings == *settings
                    && pool.spec.same_grants(spec)
                    && !pool.retired.load(Relaxed)
            });
        if let Some(pool) = live {
            return pool;
        }
        let pool = Arc::new(SessionPool {
            settings: settings.clone(),
            spec: spec.clone(),
            tenant: tenant.into(),
            share: share.clone(),
            sessions: Mutex::new(HashMap::new()),
            live: AtomicUsize::new(0),
            next_id: AtomicU64::new(0),
            workers: self.workers.clone(),
            pools: self.pools.clone(),
            retired: AtomicBool::new(false),
            host: self.host.clone(),
        });
        // Keyed apart from the pool it may replace, which stays reachable
        // (for eviction and its draining sessions) until it is gone.
        let mut slot = key;
        while pools.get(&slot).is_some_and(|p| p.strong_count() > 0) {
            slot.1.push('~');
        }
        pools.insert(slot, Arc::downgrade(&pool));
        pool
    }
}

impl Drop for SessionPool {
    fn drop(&mut self) {
        // Whatever it still counts leaves the host's count with it.
        self.set_live(0);
    }
}

impl SessionPool {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Session>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records how many sessions the pool has now, host-wide too.
    fn set_live(&self, n: usize) {
        let was = self.live.swap(n, Relaxed);
        if n >= was {
            self.host.live.fetch_add(n - was, Relaxed);
        } else {
            self.host.live.fetch_sub(was - n, Relaxed);
        }
    }

    /// Sessions alive now.
    pub fn len(&self) -> usize {
        self.live.load(Relaxed)
    }

    /// Whether no session is alive.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes the pool out of service: a config without it now serves. Idle
    /// sessions end now, busy ones once their queue is empty, so the slots
    /// they hold come back without waiting for their idle timeout.
    pub fn retire(&self) {
        self.retired.store(true, Relaxed);
        let mut sessions = self.lock();
        sessions.retain(|_, s| s.inflight.load(Relaxed) > 0);
        self.set_live(sessions.len());
    }

    /// Removes the least recently used idle session (its task ends once
    /// it sees its queue closed). Called with the pool's lock held.
    fn evict_lru(&self, sessions: &mut HashMap<String, Session>) -> bool {
        let lru = sessions
            .iter()
            .filter(|(_, s)| s.inflight.load(Relaxed) == 0)
            .min_by_key(|(_, s)| s.last_used)
            .map(|(k, _)| k.clone());
        match lru {
            Some(key) => {
                self.share.reclaimed.fetch_add(1, Relaxed);
                if let Some(evicted) = sessions.remove(&key) {
                    // Idle (nothing in flight), so its instance is parked.
                    let instance = evicted
                        .parked
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take();
                    drop(instance);
                }
                self.set_live(sessions.len());
                true
            }
            None => false,
        }
    }

    /// The pools of this pool's tenant now in service.
    fn siblings(&self) -> Vec<Arc<SessionPool>> {
        let pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        pools
            .iter()
            .filter(|((tenant, _, _), _)| **tenant == *self.tenant)
            .filter_map(|(_, p)| p.upgrade())
            .filter(|p| !p.retired.load(Relaxed))
            .collect()
    }

    /// Makes room for a session of this pool, which is under its
    /// guaranteed part of the tenant's sessions, by evicting an idle
    /// session of the sibling furthest over its own part. Never waits for
    /// another pool's lock (two pools evicting from each other would
    /// deadlock): a busy one is skipped.
    fn evict_borrower(self: &Arc<Self>, part: usize) -> bool {
        let mut siblings = self.siblings();
        siblings.retain(|p| !Arc::ptr_eq(p, self) && p.len() > part);
        siblings.sort_by_key(|p| std::cmp::Reverse(p.len()));
        siblings.iter().any(|p| match p.sessions.try_lock() {
            Ok(mut sessions) => p.evict_lru(&mut sessions),
            Err(_) => false,
        })
    }

    /// One of the tenant's sessions for a new session of this pool, whose
    /// map (`sessions`) is locked: within the tenant's share, or in the
    /// place of an evicted one (then `true`: its instance is on its way
    /// out).
    fn admit(
        self: &Arc<Self>,
        sessions: &mut HashMap<String, Session>,
        target: &Target,
    ) -> Result<(Permit, bool), Failure> {
        let refuse = |f: Failure| {
            target.metrics.sessions_rejected.fetch_add(1, Relaxed);
            count_failure(target, &f);
            f
        };
        if sessions.len() >= self.settings.max_sessions {
            return Err(refuse(Failure::SessionsFull(format!(
                "component {} already has {} active sessions (max_sessions)",
                target.component, self.settings.max_sessions
            ))));
        }
        self.share
            .session_start()
            .map_err(|l| refuse(Failure::OverShare(l)))?;
        let admitted = if let Some(p) = self.share.try_acquire(Limit::Sessions) {
            (p, false)
        } else {
            // The tenant's sessions are all taken. A component under its
            // part takes one from a sibling that borrowed past its own; one
            // at its part waits, whatever its keys.
            let pools = self.siblings().len().max(1);
            let part = (self.share.max_sessions() as usize / pools).max(1);
            if !(sessions.len() < part && self.evict_borrower(part)) {
                self.share.refuse(Limit::Sessions);
                return Err(refuse(Failure::OverShare(Limit::Sessions)));
            }
            // The evicted session gave its count back as it left its map.
            let p = self
                .share
                .try_acquire(Limit::Sessions)
                .unwrap_or_else(|| self.share.acquire_over(Limit::Sessions, 1));
            (p, true)
        };
        // The host's sessions are all taken: the new one takes the place of
        // an idle one (of the tenant holding the most) or is refused; the
        // rest of the pool is for per-request instances.
        let cap = self.host.cap.load(Relaxed);
        if cap > 0
            && self.host.live.load(Relaxed) >= cap
            && IdleSessions(self.pools.clone())
                .reclaim_holding(Some((self, sessions)), None)
                .is_none()
        {
            return Err(refuse(Failure::SessionsFull(format!(
                "the host's sessions are all busy ([pool] session_instances = {cap})"
            ))));
        }
        Ok(admitted)
    }

    /// Queues a request on its session, creating the session if needed, and
    /// waits for the response head.
    pub async fn dispatch(
        self: &Arc<Self>,
        target: &Arc<Target>,
        request: SessionRequest,
        deadline: Instant,
    ) -> Result<Response<Body>, Failure> {
        match self.enqueue(target, request, deadline, true) {
            Enqueued::Waiting(reply) => Self::answer(reply).await,
            Enqueued::Refused(f) => Err(f),
            Enqueued::Busy(_) => unreachable!("a request that may wait is always queued"),
        }
    }

    /// Like [`Self::dispatch`], but never behind a busy instance: the
    /// request comes back (`Err`) when every instance of its key is busy
    /// and no new one can start.
    pub async fn dispatch_idle(
        self: &Arc<Self>,
        target: &Arc<Target>,
        request: SessionRequest,
        deadline: Instant,
    ) -> Result<Result<Response<Body>, Failure>, Box<SessionRequest>> {
        match self.enqueue(target, request, deadline, false) {
            Enqueued::Waiting(reply) => Ok(Self::answer(reply).await),
            Enqueued::Refused(f) => Ok(Err(f)),
            Enqueued::Busy(request) => Err(request),
        }
    }

    async fn answer(response: Reply) -> Result<Response<Body>, Failure> {
        response
            .await
            .unwrap_or_else(|_| Err(Failure::Internal("session ended without answering".into())))
    }

    /// Queues a request on its session (creating the session if needed);
    /// gives it back, if `may_wait` is false, rather than queue it behind
    /// a running one.
    fn enqueue(
        self: &Arc<Self>,
        target: &Arc<Target>,
        request: SessionRequest,
        deadline: Instant,
        may_wait: bool,
    ) -> Enqueued {
        let base = match session_key(&self.settings.key, &request) {
            Ok(base) => base,
            Err(f) => return Enqueued::Refused(f),
        };
        let (reply, response) = oneshot::channel();
        // A new session's task is spawned once the map is unlocked: a
        // spawn onto another thread's runtime wakes that thread (a system
        // call), and a background-lane thread preempted in it would keep
        // the map locked against the serving threads.
        let start = {
            let mut sessions = self.lock();
            let (key, home) = self.pick_instance(&sessions, base);
            if !may_wait
                && sessions
                    .get(&key)
                    .is_some_and(|s| s.inflight.load(Relaxed) > 0)
            {
                return Enqueued::Busy(Box::new(request));
            }
            let job = Job {
                target: target.clone(),
                request,
                deadline,
                reply,
            };
            let unqueued = match sessions.get_mut(&key) {
                Some(session) => match session.tx.try_send(job) {
                    Ok(()) => {
                        session.inflight.fetch_add(1, Relaxed);
                        session.last_used = Instant::now();
                        None
                    }
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        target.metrics.sessions_rejected.fetch_add(1, Relaxed);
                        let f = Failure::SessionsFull(format!(
                            "session queue full: {} requests already wait on this session of component {}",
                            self.settings.max_queued, target.component
                        ));
                        count_failure(target, &f);
                        return Enqueued::Refused(f);
                    }
                    Err(mpsc::error::TrySendError::Closed(job)) => {
                        // The session ended after a failure; start afresh.
                        sessions.remove(&key);
                        self.set_live(sessions.len());
                        Some(job)
                    }
                },
                None => Some(job),
            };
            if let Some(job) = unqueued {
                let (held, replaced) = match self.admit(&mut sessions, target) {
                    Ok(admitted) => admitted,
                    Err(f) => return Enqueued::Refused(f),
                };
                let (tx, rx) = mpsc::channel(self.settings.max_queued);
                let id = self.next_id.fetch_add(1, Relaxed);
                // A fresh channel has room for the first job.
                let _ = tx.try_send(job);
                let inflight = Arc::new(AtomicUsize::new(1));
                let parked = Parked::default();
                sessions.insert(
                    key.clone(),
                    Session {
                        id,
                        tx,
                        inflight: inflight.clone(),
                        parked: parked.clone(),
                        last_used: Instant::now(),
                        _held: held,
                    },
                );
                self.set_live(sessions.len());
                // The session runs in its tenant's CPU lane, and each of
                // its calls has its own budget in the front lane.
                let clock = CallClock::new(self.share.clone());
                let session = Box::pin(run_session(
                    self.clone(),
                    SessionId {
                        key,
                        id,
                        replaced,
                        parked,
                        clock: clock.clone(),
                    },
                    rx,
                    target.clone(),
                    inflight,
                ));
                Some((
                    home,
                    Paced::new(session, GuestCall::new(clock), target.background.clone()),
                ))
            } else {
                None
            }
        };
        if let Some((home, task)) = start {
            self.workers.spawn(home, task);
        }
        Enqueued::Waiting(response)
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

    /// Removes the session if it is still `id` and nothing is queued on it
    /// (or it is no longer in the map at all): true if it should end.
    fn evict_if_idle(&self, key: &str, id: u64, rx: &mpsc::Receiver<Job>) -> bool {
        let mut sessions = self.lock();
        if !rx.is_empty() {
            return false;
        }
        if sessions.get(key).is_some_and(|s| s.id == id) {
            sessions.remove(key);
            self.set_live(sessions.len());
        }
        true
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
        SessionKey::Component => Some(String::from("*")),
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
        SessionKey::Component => "component".to_string(),
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

/// Which session a task runs: its key and id in the pool's map, whether it
/// was admitted in the place of an evicted one, where it parks its instance
/// while idle, and the clock of its current call.
struct SessionId {
    key: String,
    id: u64,
    replaced: bool,
    parked: Parked,
    clock: CallClock,
}

/// A live instance of a session, with the tenant's instance share it holds.
struct Instance {
    store: wasmtime::Store<crate::state::HostState>,
    guest: Guest,
    _permit: Permit,
    _active: ActiveInstance,
}

/// Makes the session's instance for a job whose deadline is `deadline`.
async fn start_instance(
    pool: &SessionPool,
    target: &Target,
    over: bool,
    clock: &CallClock,
) -> Result<Instance, Failure> {
    let permit = if over {
        pool.share.acquire_over(Limit::Instances, target.weight())
    } else {
        pool.share
            .acquire_units(Limit::Instances, target.weight())
            .map_err(|l| {
                let f = Failure::OverShare(l);
                count_failure(target, &f);
                f
            })?
    };
    let active = ActiveInstance::new(&target.metrics);
    // Instantiation gets its own deadline: it is the session's cost, not
    // one request's.
    let mut store = new_store(target, Instant::now() + target.deadline, clock.clone());
    let guest = instantiate(&mut store, target).await?;
    Ok(Instance {
        store,
        guest,
        _permit: permit,
        _active: active,
    })
}

async fn run_session(
    pool: Arc<SessionPool>,
    me: SessionId,
    mut rx: mpsc::Receiver<Job>,
    first: Arc<Target>,
    inflight: Arc<AtomicUsize>,
) {
    first.metrics.sessions_active.fetch_add(1, Relaxed);
    let _gauge = SessionGauge(first.metrics.clone());
    let mut instance: Option<Instance> = None;
    let mut over = me.replaced;
    let mut served: u64 = 0;
    loop {
        if pool.retired.load(Relaxed) && pool.evict_if_idle(&me.key, me.id, &rx) {
            return;
        }
        *me.parked.lock().unwrap_or_else(|e| e.into_inner()) = instance.take();
        let job = tokio::time::timeout(pool.settings.idle_timeout, rx.recv()).await;
        // Gone if the session was ended to free its slot (then no job is
        // coming: the channel is closed).
        instance = me.parked.lock().unwrap_or_else(|e| e.into_inner()).take();
        let job = match job {
            Ok(Some(job)) => job,
            Ok(None) => return,
            Err(_) => {
                if pool.evict_if_idle(&me.key, me.id, &rx) {
                    first.metrics.sessions_evicted.fetch_add(1, Relaxed);
                    tracing::debug!(component = %first.component, session = %me.key, "idle session evicted");
                    return;
                }
                continue;
            }
        };
        let Job {
            target,
            request,
            deadline,
            reply,
        } = job;
        let done = || {
            inflight.fetch_sub(1, Relaxed);
        };
        if reply.is_closed() {
            // The client gave up while this waited in the queue: running
            // it would only delay the requests queued behind it.
            done();
            continue;
        }
        if Instant::now() >= deadline {
            let f = Failure::QueueTimeout;
            count_failure(&target, &f);
            let _ = reply.send(Err(f));
            done();
            continue;
        }
        me.clock.begin();
        if instance.is_none() {
            match start_instance(&pool, &target, over, &me.clock).await {
                Ok(i) => {
                    over = false;
                    instance = Some(i);
                }
                Err(failure) => {
                    // Nothing to run on: this job and those queued behind
                    // it fail alike, and the session ends.
                    let _ = reply.send(Err(failure.clone()));
                    done();
                    let mut sessions = pool.lock();
                    if sessions.get(&me.key).is_some_and(|s| s.id == me.id) {
                        sessions.remove(&me.key);
                        pool.set_live(sessions.len());
                    }
                    drop(sessions);
                    rx.close();
                    while let Ok(job) = rx.try_recv() {
                        let _ = job.reply.send(Err(failure.clone()));
                        done();
                    }
                    return;
                }
            }
        }
        let Some(inst) = instance.as_mut() else {
            continue;
        };
        inst.store.data_mut().deadline = deadline;
        inst.store.set_epoch_deadline(1);
        let (bound, head) = match bind(&mut inst.store, &target, request) {
            Ok(bound) => bound,
            Err(f) => {
                let _ = reply.send(Err(f));
                done();
                continue;
            }
        };
        let (guest_ok, status) = {
            let guest = pin!(call(&mut inst.store, &inst.guest, &target, bound));
            match race(guest, head).await {
                Race::Done { guest_ok, response } => {
                    let status = response.as_ref().map(|r| r.status()).ok();
                    let _ = reply.send(response);
                    (guest_ok, status)
                }
                Race::Streaming {
                    response,
                    guest,
                    finish,
                } => {
                    // The body streams while the guest runs on here; the
                    // next job waits for it.
                    let status = Some(response.status());
                    let _ = reply.send(Ok(response));
                    let ok = guest.await.is_ok();
                    let _ = finish.send(ok);
                    (ok, status)
                }
            }
        };
        done();
        if !guest_ok {
            // A failed instance cannot be entered again. The request that
            // failed it fails alone: the next job gets a fresh instance.
            instance = None;
        }
        served += 1;
        let refused = status.is_some_and(|s| {
            s == http::StatusCode::UNAUTHORIZED || s == http::StatusCode::FORBIDDEN
        });
        if served == 1 && refused && pool.evict_if_idle(&me.key, me.id, &rx) {
            // The guest refused the request that made this session (no or
            // a forged token): keeping it would let anyone hold a session
            // slot per made-up key until the idle timeout.
            first.metrics.sessions_evicted.fetch_add(1, Relaxed);
            return;
        }
    }
}
