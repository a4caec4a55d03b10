//! A tenant's work outside its guests' calls (on the blocking pool, and
//! the async tasks of its connections), counted as its CPU and run in its
//! lane.
//!
//! Key-value calls, SQLite statements and directory reads run on tokio's
//! blocking pool, beside the serving threads and at their priority. The
//! host shares CPU between tenants by timing their guests' calls (the
//! lanes of `edge::lanes`): a tenant over its share runs in the
//! background, on threads at `SCHED_IDLE`. Work on the blocking pool was
//! outside that: a tenant's recursive SQL query or its walks over a large
//! store took cores at full priority, uncharged. [`TenantWork::spawn`]
//! times each such task on the thread's CPU clock and charges the tenant,
//! and runs the tasks of a tenant in the background on the background
//! lane's own blocking threads (at `SCHED_IDLE` too), so work that puts a
//! tenant behind is behind itself. A task that runs long (a SQLite
//! statement) follows its tenant from lane to lane as it runs: it calls
//! [`follow_lane`] at safe points, and the host's keeper moves it
//! ([`move_running`]) between them (one step of a statement can run for
//! seconds); its thread's policy changes, back to the thread's own when
//! the task ends. That needs a host that may leave
//! `SCHED_IDLE` again (`CAP_SYS_NICE`, or an `RLIMIT_NICE` that allows it;
//! see [`lanes_movable`]): without it a thread would stay idle for the
//! front tasks it runs next, so a running task stays where it started.
//!
//! The same holds for async work a tenant's calls start and that runs as
//! tasks of its own, outside the guests' polls: an outbound request's
//! send (name lookup, connect, TLS handshake) and its connection's I/O
//! (TLS records, HTTP framing). [`TenantWork::spawn_async`] and
//! [`TenantWork::paced`] run them in the tenant's lane, each poll's time
//! charged to it ([`Lane::pace`]).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

/// Where a tenant's CPU is counted, and which lane it is in.
pub trait Lane: Send + Sync + 'static {
    /// Counts CPU the tenant used outside its guests' calls.
    fn charge(&self, cpu: Duration);
    /// Whether the tenant runs in the background lane now.
    fn in_background(&self) -> bool;
    /// A task of the tenant's has used [`LONG_TASK`] of CPU or more in
    /// one step ([`next_step`]): said once it has, and again for each
    /// [`LONG_TASK_AGAIN`] more (at each look it ran in while the tenant
    /// is behind).
    fn long_task(&self);
    /// `task` made to run in the tenant's lane, each poll's time charged
    /// to it. What it returns must finish only once `task` has (its
    /// callers read `task`'s result then). The default leaves it as it is
    /// (uncharged).
    fn pace(self: Arc<Self>, task: AsyncWork) -> AsyncWork {
        task
    }
}

/// An async task of a tenant's outside its guests' calls.
pub type AsyncWork = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The CPU after which a task counts as long ([`Lane::long_task`]): work
/// nothing interrupts, which holds a core at the priority it started at
/// while it runs (a full slice of the kernel's scheduler on a few cores:
/// a key-value call takes microseconds, a SQLite statement over an index
/// well under a millisecond, a recursive count of millions of rows
/// seconds).
pub const LONG_TASK: Duration = Duration::from_millis(20);

/// Once said to be long, a task is said so again only for a stretch in
/// which it used this much more CPU (between two looks of
/// [`charge_running`], or from the last look to its end), or any CPU
/// while its tenant is behind (at `SCHED_IDLE` on busy cores it may get
/// less): one that goes on burning a core is held behind, one that now
/// waits (on a lock, on the disk, for its next input) or ends just after
/// a look is not said twice for one burst. (A task starved of every slice
/// between two looks is not said at them either: the hold it renewed
/// lasts 5 s.)
pub const LONG_TASK_AGAIN: Duration = Duration::from_millis(5);

/// The background lane's runtime, whose blocking threads run at
/// `SCHED_IDLE`, while the host has one.
static BACKGROUND: RwLock<Option<tokio::runtime::Handle>> = RwLock::new(None);

/// Makes `handle` (a runtime whose threads all run at `SCHED_IDLE`) the
/// one background tenants' blocking work is spawned on.
pub fn set_background(handle: tokio::runtime::Handle) {
    *BACKGROUND.write().unwrap_or_else(|e| e.into_inner()) = Some(handle);
}

/// The background lane's runtime, if the host has one.
pub fn background() -> Option<tokio::runtime::Handle> {
    BACKGROUND.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Whether the calling thread is one of the background lane's runtime's.
pub fn on_background_runtime() -> bool {
    background().is_some_and(|b| runs_on(&b))
}

/// Whether the calling thread is one of `runtime`'s.
fn runs_on(runtime: &tokio::runtime::Handle) -> bool {
    tokio::runtime::Handle::try_current().is_ok_and(|here| here.id() == runtime.id())
}

/// Forgets the background runtime `id` (it is shutting down), unless
/// another has been set since: background tenants' work then runs where
/// it is spawned from.
pub fn clear_background(id: tokio::runtime::Id) {
    let mut background = BACKGROUND.write().unwrap_or_else(|e| e.into_inner());
    if background.as_ref().is_some_and(|h| h.id() == id) {
        *background = None;
    }
}

/// The serving runtimes (the front lane's), where a tenant's async work
/// begun on the background lane's runtime is put.
static FRONT: RwLock<Vec<tokio::runtime::Handle>> = RwLock::new(Vec::new());

/// Adds a serving runtime (a front lane's).
pub fn add_front(handle: tokio::runtime::Handle) {
    FRONT
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .push(handle);
}

/// Forgets the serving runtime `id` (it is shutting down).
pub fn remove_front(id: tokio::runtime::Id) {
    FRONT
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|h| h.id() != id);
}

/// The serving runtime for work of the tenant `key` begun here, when here
/// is the background lane's runtime (elsewhere, and on a host without
/// serving runtimes, work starts where it is). One per tenant: a
/// connection's socket and its I/O task on the same one.
fn front_for_background(key: usize) -> Option<tokio::runtime::Handle> {
    if !on_background_runtime() {
        return None;
    }
    let front = FRONT.read().unwrap_or_else(|e| e.into_inner());
    let n = front.len();
    (n > 0).then(|| front[key % n].clone())
}

/// The host is shutting down: a serving runtime stopped under work put on
/// it.
#[derive(Debug)]
pub struct ShuttingDown;

impl std::fmt::Display for ShuttingDown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the host is shutting down")
    }
}

impl std::error::Error for ShuttingDown {}

/// A tenant's blocking work: spawned, timed and charged to its lane. The
/// default has no lane (tools and tests): its work runs uncharged.
#[derive(Clone, Default)]
pub struct TenantWork(Option<Arc<dyn Lane>>);

impl std::fmt::Debug for TenantWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TenantWork")
            .field(&self.0.as_ref().map(|_| "lane"))
            .finish()
    }
}

impl TenantWork {
    /// Work charged to `lane`.
    pub fn new(lane: Arc<dyn Lane>) -> Self {
        Self(Some(lane))
    }

    /// Runs `f` on a blocking thread: the background lane's if the tenant
    /// is in the background (and the host has one), the current runtime's
    /// otherwise; the CPU it takes is charged to the tenant as it runs
    /// ([`charge_running`]) and when it ends. Work that runs long moves
    /// with its tenant as it goes ([`follow_lane`]).
    pub fn spawn<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> tokio::task::JoinHandle<R> {
        let Some(lane) = self.0.clone() else {
            return tokio::task::spawn_blocking(f);
        };
        // Read once: every key-value call and statement comes here.
        let runtime = background();
        // A front tenant's task spawned from the background lane (a call
        // still finishing there) runs on its idle threads too.
        let on_background = runtime.as_ref().is_some_and(runs_on);
        let background = runtime.filter(|_| lane.in_background());
        let lane_index = usize::from(background.is_some() || on_background);
        let timed = move || run_as_task(lane, lane_index, false, f);
        match background {
            Some(runtime) => runtime.spawn_blocking(timed),
            None => tokio::task::spawn_blocking(timed),
        }
    }

    /// Runs `f` on the calling thread, a thread of the tenant's own (not
    /// the blocking pool's) that runs nothing else meanwhile, as
    /// [`TenantWork::spawn`] runs its tasks: charged as it runs, said long
    /// past [`LONG_TASK`], its thread moved with the tenant's lane by the
    /// keeper at any point (`f` must hold no process-wide lock for long:
    /// [`may_move`]) and back at its own policy at the end. A thread that
    /// works in steps, waiting between them, says where each begins
    /// ([`next_step`]).
    pub fn run_here<R>(&self, f: impl FnOnce() -> R) -> R {
        let Some(lane) = self.0.clone() else {
            return f();
        };
        // A thread takes its creator's policy: one made from the
        // background lane starts there.
        let born_idle = Policy::own().policy == libc::SCHED_IDLE;
        run_as_task(lane, usize::from(born_idle), true, f)
    }

    /// Charges `cpu` to the tenant: work done for it where no task of its
    /// runs (its name lookups, polled on the resolver's thread).
    pub fn charge(&self, cpu: std::time::Duration) {
        if let Some(lane) = &self.0 {
            lane.charge(cpu);
        }
    }

    /// Whether the tenant is in the background lane now.
    pub fn in_background(&self) -> bool {
        self.0.as_ref().is_some_and(|lane| lane.in_background())
    }

    /// Where this tenant's work begun on the background lane goes
    /// ([`front_for_background`]), keyed by its lane.
    fn front(&self) -> Option<tokio::runtime::Handle> {
        let key = self
            .0
            .as_ref()
            .map_or(0, |lane| Arc::as_ptr(lane).cast::<u8>() as usize / 64);
        front_for_background(key)
    }

    /// Runs `future` where what it makes lives in front: called on the
    /// background lane's runtime, on the tenant's serving runtime (aborted
    /// if dropped), uncharged (only what must be made there: a socket, not
    /// a handshake). A socket registers with the reactor of the runtime it
    /// is made on, which wakes its tasks for its whole life: one made while
    /// its tenant was behind would be woken by `SCHED_IDLE` threads long
    /// after the tenant came back.
    pub async fn in_front<F>(&self, future: F) -> Result<F::Output, ShuttingDown>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let Some(front) = self.front() else {
            return Ok(future.await);
        };
        /// Aborts the task if the caller gives up on it (a timeout).
        struct Abort<T>(tokio::task::JoinHandle<T>);
        impl<T> Drop for Abort<T> {
            fn drop(&mut self) {
                self.0.abort();
            }
        }
        let mut task = Abort(front.spawn(future));
        match (&mut task.0).await {
            Ok(out) => Ok(out),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(ShuttingDown),
        }
    }

    /// Spawns `task`, an async task of the tenant's that outlives the call
    /// starting it (a connection's I/O): polled in the tenant's lane, each
    /// poll charged to it ([`Lane::pace`]). It lives on the current
    /// runtime, or on a serving one when started on the background lane's
    /// (from there its polls go back and forth with the lane; started
    /// there, it would stay there).
    pub fn spawn_async(
        &self,
        task: impl Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let task = self.in_lane(task);
        match self.front() {
            Some(front) => front.spawn(task),
            None => tokio::spawn(task),
        }
    }

    /// Spawns `task` as [`TenantWork::spawn_async`] does, but on the
    /// current runtime wherever that is (for a caller that keeps its own
    /// account of which lane drives what: the outbound HTTP pool).
    pub fn spawn_async_here(
        &self,
        task: impl Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.in_lane(task))
    }

    /// `task` polled in the tenant's lane, each poll charged to it
    /// ([`Lane::pace`]); as it is without a lane.
    fn in_lane(&self, task: impl Future<Output = ()> + Send + 'static) -> AsyncWork {
        match &self.0 {
            Some(lane) => lane.clone().pace(Box::pin(task)),
            None => Box::pin(task),
        }
    }

    /// `future`, run as its caller polls it, but in the tenant's lane and
    /// charged to it (as [`TenantWork::spawn_async`]'s tasks).
    pub fn paced<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> impl Future<Output = T> + Send + 'static {
        let lane = self.0.clone();
        async move {
            let Some(lane) = lane else {
                return future.await;
            };
            let out = Arc::new(Mutex::new(None));
            let slot = out.clone();
            lane.pace(Box::pin(async move {
                let value = future.await;
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(value);
            }))
            .await;
            let value = out.lock().unwrap_or_else(|e| e.into_inner()).take();
            value.expect("a paced future's value is set when it finishes")
        }
    }
}

/// Runs `f` on the calling thread as a task of `lane`'s tenant, registered
/// in `RUNNING[lane_index]` (1: a thread at `SCHED_IDLE`, the background
/// lane's); `movable` by the keeper from the start, or once it says so.
fn run_as_task<R>(
    lane: Arc<dyn Lane>,
    lane_index: usize,
    movable: bool,
    f: impl FnOnce() -> R,
) -> R {
    // Dropped in turn: the thread's policy restored, then the task
    // charged and unregistered.
    let place = Arc::new(Place::here(lane_index == 1, movable));
    let _running = Running::start(lane.clone(), lane_index, place.clone());
    let _current = CurrentGuard::enter(lane, place);
    f()
}

/// Whether a thread of this process can go to `SCHED_IDLE` and come back:
/// only then do running tasks follow their tenants' lanes. Tried once, on
/// a thread of its own.
pub fn lanes_movable() -> bool {
    probe().movable
}

/// What [`lanes_movable`] found, and the policy a front thread has (the
/// one a background thread takes while its tenant is in front): the
/// probing thread's, inherited from the thread that first asked (the
/// host's main thread: it asks when it starts the background lane).
struct Probe {
    movable: bool,
    front: Policy,
}

fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| {
        std::thread::spawn(|| {
            // Asked first from an idle thread, the front is SCHED_OTHER:
            // the probe must try to leave SCHED_IDLE.
            let front = match Policy::own() {
                Policy::IDLE => Policy::OTHER,
                own => own,
            };
            let movable = Policy::IDLE.set() && front.set();
            Probe { movable, front }
        })
        .join()
        .unwrap_or(Probe {
            movable: false,
            front: Policy::OTHER,
        })
    })
}

/// Moves the calling thread to its tenant's lane now, if the task it runs
/// was spawned by [`TenantWork::spawn`] and the host can move threads
/// ([`lanes_movable`]): to `SCHED_IDLE` while the tenant is in the
/// background, back to the thread's own policy once it is in front (a
/// background lane's thread to a front thread's). Cheap enough to call
/// every few microseconds: it changes the policy only when the lane has
/// changed. Long work calls it at safe points (SQLite: from the
/// statement's progress handler), and [`leave_lane`] once that is over;
/// between them, once the task said it may be moved there
/// ([`may_move`]), the host's keeper moves the thread too
/// ([`move_running`]): work can go a long time without a safe point (one
/// step of a statement: a sort, a `LIKE` of megabytes).
pub fn follow_lane() {
    CURRENT.with_borrow(|current| {
        if let Some((lane, place)) = current {
            place.follow(&**lane, Wait::Yes);
        }
    });
}

/// From here to [`leave_lane`] the task's thread may be moved by the
/// host's keeper at any point ([`move_running`]), not only at its own safe
/// points: what it does meanwhile takes no process-wide lock for long (a
/// statement's execution, not a database's open or close, where SQLite
/// holds its file-system layer's one mutex).
pub fn may_move() {
    CURRENT.with_borrow(|current| {
        if let Some((_, place)) = current {
            place.movable.store(true, Relaxed);
        }
    });
}

/// The calling task begins a new step: [`LONG_TASK`] counts its CPU from
/// here. For a thread that runs its tenant's work step after step and
/// waits between them (an HTML rewriter's parsing, chunk after chunk): a
/// step is long, not the thread's life.
pub fn next_step() {
    CURRENT.with_borrow(|current| {
        if let Some((_, place)) = current {
            place
                .step_from
                .store(thread_cpu().as_nanos() as u64, Relaxed);
        }
    });
}

/// The long part of the task is over: the thread goes back to its own
/// policy now, for the rest of the task (closing, releasing, answering:
/// where it takes locks other tenants' threads take too; a thread at
/// `SCHED_IDLE` preempted inside one would hold them all up), and follows
/// its tenant no more.
pub fn leave_lane() {
    if let Some((_, place)) = CURRENT.take() {
        place.leave();
    }
}

/// Moves the thread of every running task that may be moved
/// ([`may_move`]) and whose tenant changed lane since (as [`follow_lane`]
/// would, from outside): called by the host's keeper once it has placed
/// tenants. A task whose thread or map is busy now is left for the next
/// call: the caller must not wait on a thread at `SCHED_IDLE`.
pub fn move_running() {
    if !lanes_movable() {
        return;
    }
    for running in &RUNNING {
        // Taken out of the map first: tasks starting and ending do not
        // wait on the moves' system calls.
        let movable: Vec<(Arc<dyn Lane>, Arc<Place>)> = match running.try_lock() {
            Ok(running) => movable_of(&running),
            Err(std::sync::TryLockError::Poisoned(e)) => movable_of(&e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => continue,
        };
        // A task that ends meanwhile has left its place: not moved.
        for (lane, place) in movable {
            place.follow(&*lane, Wait::No);
        }
    }
}

/// The running tasks in `running` that may be moved.
fn movable_of(running: &BTreeMap<u64, Task>) -> Vec<(Arc<dyn Lane>, Arc<Place>)> {
    running
        .values()
        .filter(|t| t.place.movable.load(Relaxed))
        .map(|t| (t.lane.clone(), t.place.clone()))
        .collect()
}

thread_local! {
    /// The tenant task the thread runs now, for [`follow_lane`].
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
    /// The calling thread's id, read once.
    static TID: std::cell::Cell<libc::pid_t> = const { std::cell::Cell::new(0) };
}

/// The tenant task a thread runs: whose lane it follows, and where its
/// thread is.
type Current = (Arc<dyn Lane>, Arc<Place>);

/// The calling thread's id (for the keeper to move it by).
fn tid() -> libc::pid_t {
    TID.with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid has no preconditions.
            t.set(unsafe { libc::gettid() });
        }
        t.get()
    })
}

/// Whether a move waits for the place's lock: the task's own thread does
/// (only the keeper contends, briefly); the keeper does not (the thread
/// holding it may be at `SCHED_IDLE`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    Yes,
    No,
}

/// Where a running task's thread is: moved by the thread itself
/// ([`follow_lane`]) and by the host's keeper ([`move_running`]),
/// whichever sees its tenant change lane first, and put back by the
/// thread when the task leaves its lane (after which neither moves it).
struct Place {
    tid: libc::pid_t,
    /// Whether the thread runs at `SCHED_IDLE` now (read without the
    /// lock, for [`follow_lane`]'s every-few-microseconds call).
    idle: AtomicBool,
    /// Whether the keeper may move it ([`may_move`]).
    movable: AtomicBool,
    /// The thread's CPU clock (ns) when its current step began
    /// ([`next_step`]; its task's start until then).
    step_from: AtomicU64,
    state: Mutex<PlaceState>,
}

struct PlaceState {
    /// Whether the thread is one of the background lane's (which start
    /// at `SCHED_IDLE`).
    born_idle: bool,
    /// The thread's policy before the task moved it (read at the first
    /// move: most tasks never move), restored when the task leaves.
    home: Option<Policy>,
    /// Whether the task has left its lane.
    left: bool,
}

impl Place {
    /// The calling thread's place, for a task on the background lane's
    /// threads (`born_idle`) or a front one's.
    fn here(born_idle: bool, movable: bool) -> Self {
        Self {
            tid: tid(),
            idle: AtomicBool::new(born_idle),
            movable: AtomicBool::new(movable),
            step_from: AtomicU64::new(0),
            state: Mutex::new(PlaceState {
                born_idle,
                home: None,
                left: false,
            }),
        }
    }

    /// Moves the thread to the lane `lane` is in now, unless it is there,
    /// the task has left, or (`Wait::No`) its lock is busy.
    fn follow(&self, lane: &dyn Lane, wait: Wait) {
        let background = lane.in_background();
        if background == self.idle.load(Relaxed) || !lanes_movable() {
            return;
        }
        let mut state = match (self.state.try_lock(), wait) {
            (Ok(state), _) => state,
            (Err(std::sync::TryLockError::Poisoned(e)), _) => e.into_inner(),
            (Err(std::sync::TryLockError::WouldBlock), Wait::Yes) => {
                self.state.lock().unwrap_or_else(|e| e.into_inner())
            }
            (Err(std::sync::TryLockError::WouldBlock), Wait::No) => return,
        };
        if state.left || background == self.idle.load(Relaxed) {
            return;
        }
        let home = *state.home.get_or_insert_with(|| Policy::of(self.tid));
        let want = match (background, state.born_idle) {
            (true, _) => Policy::IDLE,
            (false, true) => probe().front,
            (false, false) => home,
        };
        if want.set_for(self.tid) {
            self.idle.store(background, Relaxed);
        }
    }

    /// The task leaves its lane: its thread back at its own policy (if it
    /// was ever moved), and moved no more.
    fn leave(&self) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !std::mem::replace(&mut state.left, true)
            && let Some(home) = state.home
        {
            home.restore_for(self.tid);
        }
    }
}

/// The task's place in [`CURRENT`]: left (the thread's policy restored)
/// when the task ends, panicking or not, and the task it ran inside, if
/// any, current again.
struct CurrentGuard {
    place: Arc<Place>,
    outer: Option<Current>,
}

impl CurrentGuard {
    fn enter(lane: Arc<dyn Lane>, place: Arc<Place>) -> CurrentGuard {
        let outer = CURRENT.replace(Some((lane, place.clone())));
        CurrentGuard { place, outer }
    }
}

impl Drop for CurrentGuard {
    /// Before anything else the thread does: its next task, maybe another
    /// tenant's, runs where the thread belongs.
    fn drop(&mut self) {
        self.place.leave();
        CURRENT.set(self.outer.take());
    }
}

/// A thread's scheduling policy and its priority (0 but for the real-time
/// policies).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Policy {
    policy: libc::c_int,
    priority: libc::c_int,
}

impl Policy {
    const IDLE: Policy = Policy {
        policy: libc::SCHED_IDLE,
        priority: 0,
    };
    const OTHER: Policy = Policy {
        policy: libc::SCHED_OTHER,
        priority: 0,
    };

    /// The calling thread's.
    fn own() -> Policy {
        Self::of(0)
    }

    /// Thread `tid`'s (0: the calling thread's).
    fn of(tid: libc::pid_t) -> Policy {
        let mut param = libc::sched_param { sched_priority: 0 };
        // SAFETY: asks for thread `tid`'s policy and writes its parameters
        // into `param`, a valid sched_param.
        let (policy, _) = unsafe {
            (
                libc::sched_getscheduler(tid),
                libc::sched_getparam(tid, &mut param),
            )
        };
        Policy {
            policy,
            priority: param.sched_priority,
        }
    }

    /// Makes it the calling thread's; whether that was allowed.
    fn set(self) -> bool {
        self.set_for(0)
    }

    /// Makes it thread `tid`'s (0: the calling thread's); whether that
    /// was allowed.
    fn set_for(self, tid: libc::pid_t) -> bool {
        let param = libc::sched_param {
            sched_priority: self.priority,
        };
        // SAFETY: sets thread `tid`'s policy (a thread of this process
        // running a task, which cannot end it meanwhile: see `Place`);
        // `param` is valid.
        unsafe { libc::sched_setscheduler(tid, self.policy, &param) == 0 }
    }

    /// Gives thread `tid` back this policy, which it had: said in the log
    /// if the kernel refuses (the thread then serves what comes next
    /// where it is).
    fn restore_for(self, tid: libc::pid_t) {
        if !self.set_for(tid) {
            tracing::warn!(
                policy = ?self,
                error = %std::io::Error::last_os_error(),
                "a blocking thread could not get its scheduling policy back"
            );
        }
    }
}

/// The calling thread's scheduling policy.
#[cfg(test)]
fn own_policy() -> libc::c_int {
    Policy::own().policy
}

/// A task running now: its thread's CPU clock, what it read at the start,
/// and what has been charged of it so far.
struct Task {
    clock: libc::clockid_t,
    /// Whether other threads can read `clock` (not the calling thread's
    /// alias).
    shared: bool,
    start: Duration,
    charged: Duration,
    /// The start of the step it was last charged in ([`next_step`]).
    step_seen: u64,
    /// Whether [`Lane::long_task`] was said of it (in that step).
    said_long: bool,
    lane: Arc<dyn Lane>,
    /// Where its thread is.
    place: Arc<Place>,
}

impl Task {
    /// Charges its CPU up to `used` (since it began), and says whether it
    /// is a long task now.
    fn charge_to(&mut self, used: Duration) {
        let new = used.saturating_sub(self.charged);
        self.charged = used;
        let step_from = self.place.step_from.load(Relaxed);
        if step_from != self.step_seen {
            self.step_seen = step_from;
            self.said_long = false;
        }
        let in_step = (self.start + used).saturating_sub(Duration::from_nanos(step_from));
        // Said before it is charged: whoever reads the charge sees it
        // said. While its tenant is behind, said at every look it ran in:
        // at SCHED_IDLE on busy cores it may get less than
        // LONG_TASK_AGAIN, and must not come back to the front for that
        // (one that waits, for a lock or its next input, uses nothing).
        if in_step >= LONG_TASK
            && (!self.said_long
                || new >= LONG_TASK_AGAIN
                || (self.lane.in_background() && !new.is_zero()))
        {
            self.said_long = true;
            self.lane.long_task();
        }
        self.lane.charge(new);
    }
}

/// Every tenant task running, by a number of its own: a statement that
/// runs for seconds is charged every time the host's lane keeper looks,
/// not only at its end (by then it has had a core all along). Front-lane
/// tasks and background ones (at `SCHED_IDLE`) register apart: a
/// background thread holding its map while it waits for a core delays no
/// front task.
static RUNNING: [Mutex<BTreeMap<u64, Task>>; 2] =
    [Mutex::new(BTreeMap::new()), Mutex::new(BTreeMap::new())];

/// The registration of one running task in `RUNNING[.1]`; ended by its
/// own thread.
struct Running(u64, usize);

impl Running {
    fn start(lane: Arc<dyn Lane>, lane_index: usize, place: Arc<Place>) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Relaxed);
        let mut clock: libc::clockid_t = 0;
        // SAFETY: asks for the calling thread's CPU clock into `clock`.
        let shared = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0;
        if !shared {
            // Only this thread can read it: charged at the end alone.
            clock = libc::CLOCK_THREAD_CPUTIME_ID;
        }
        let start = cpu(clock);
        let step_seen = start.as_nanos() as u64;
        place.step_from.store(step_seen, Relaxed);
        let task = Task {
            clock,
            shared,
            start,
            charged: Duration::ZERO,
            step_seen,
            said_long: false,
            lane,
            place,
        };
        lock(lane_index).insert(id, task);
        Self(id, lane_index)
    }
}

impl Drop for Running {
    /// Charges what is left to charge (a task that panicked too). The
    /// thread then goes on to other work, so the task leaves the map
    /// first, under the lock [`charge_running`] reads it under, and the
    /// thread reads its own clock after.
    fn drop(&mut self) {
        let mut running = lock(self.1);
        let task = running.remove(&self.0);
        drop(running);
        if let Some(mut task) = task {
            task.charge_to(cpu(task.clock).saturating_sub(task.start));
        }
    }
}

fn lock(lane_index: usize) -> std::sync::MutexGuard<'static, BTreeMap<u64, Task>> {
    RUNNING[lane_index]
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Charges every running task's CPU since it was last charged to its
/// tenant: called by the host each time it judges tenants' use. A map a
/// thread holds now is left for the next call (its tasks that end
/// meanwhile charge themselves): the caller must not wait on a thread at
/// `SCHED_IDLE`.
pub fn charge_running() {
    for running in &RUNNING {
        let mut running = match running.try_lock() {
            Ok(running) => running,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => continue,
        };
        for task in running.values_mut().filter(|t| t.shared) {
            // The task's thread is running it (it leaves the map, under
            // this lock, before it goes on), so its clock is valid.
            task.charge_to(cpu(task.clock).saturating_sub(task.start));
        }
    }
}

/// CPU the calling thread has used.
pub fn thread_cpu() -> Duration {
    cpu(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Puts the calling thread at `SCHED_IDLE` (the background lane's
/// threads start so).
pub fn set_idle() -> std::io::Result<()> {
    if Policy::IDLE.set() {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// CPU used by the thread whose CPU clock is `clock`.
fn cpu(clock: libc::clockid_t) -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write; `clock` is a CPU clock of
    // a live thread or the calling thread's own.
    let rc = unsafe { libc::clock_gettime(clock, &mut t) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Meter {
        charged: Mutex<Duration>,
        background: AtomicBool,
        long_tasks: AtomicU64,
        /// Async tasks paced, and their polls.
        paced: AtomicU64,
        polls: Arc<AtomicU64>,
    }

    impl Meter {
        fn charged(&self) -> Duration {
            *self.charged.lock().unwrap()
        }
    }

    impl Lane for Meter {
        fn charge(&self, cpu: Duration) {
            *self.charged.lock().unwrap() += cpu;
        }
        fn in_background(&self) -> bool {
            self.background.load(Relaxed)
        }
        fn long_task(&self) {
            self.long_tasks.fetch_add(1, Relaxed);
        }
        fn pace(self: Arc<Self>, mut task: AsyncWork) -> AsyncWork {
            self.paced.fetch_add(1, Relaxed);
            let polls = self.polls.clone();
            Box::pin(std::future::poll_fn(move |cx| {
                polls.fetch_add(1, Relaxed);
                task.as_mut().poll(cx)
            }))
        }
    }

    #[test]
    fn a_tenants_async_work_runs_through_its_lane() {
        let front = front();
        let meter = Arc::new(Meter::default());
        let work = TenantWork::new(meter.clone());
        let value = front.block_on(work.paced(async {
            tokio::task::yield_now().await;
            42
        }));
        assert_eq!(value, 42);
        assert_eq!(meter.paced.load(Relaxed), 1);
        assert_eq!(meter.polls.load(Relaxed), 2, "polled through the lane");
        front
            .block_on(async { work.spawn_async(async {}).await })
            .unwrap();
        assert_eq!(meter.paced.load(Relaxed), 2);
        // Without a lane (tools, tests): run as they are.
        let none = TenantWork::default();
        assert_eq!(front.block_on(none.paced(async { 7 })), 7);
        front
            .block_on(async { none.spawn_async(async {}).await })
            .unwrap();
        assert_eq!(meter.paced.load(Relaxed), 2);
    }

    /// A serving runtime of one thread, as the tests' front lane.
    fn front() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    /// A front runtime with one blocking thread: a task runs where the one
    /// before it ran.
    fn one_blocking_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .max_blocking_threads(1)
            .build()
            .unwrap()
    }

    /// `f` spawned from `front` as work charged to `meter`.
    fn spawn_in<R: Send + 'static>(
        front: &tokio::runtime::Runtime,
        meter: &Arc<Meter>,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> tokio::task::JoinHandle<R> {
        let _guard = front.enter();
        TenantWork::new(meter.clone()).spawn(f)
    }

    /// Spins until the calling thread has used `cpu`.
    fn burn(cpu: Duration) {
        let start = thread_cpu();
        while thread_cpu() - start < cpu {
            std::hint::black_box(0u64);
        }
    }

    /// Tests that set the host's background runtime, one at a time.
    static BACKGROUND_SET: Mutex<()> = Mutex::new(());

    /// A background lane as the host makes one: every thread at
    /// `SCHED_IDLE`.
    fn background_lane() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .on_thread_start(|| {
                let _ = set_idle();
            })
            .build()
            .unwrap()
    }

    /// A serving runtime as the host makes one: one thread, driven by its
    /// `block_on` until the guard drops; registered as a front runtime.
    struct Serving {
        handle: tokio::runtime::Handle,
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Serving {
        fn start() -> Self {
            let (ready, handle) = std::sync::mpsc::channel();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let thread = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                ready.send(rt.handle().clone()).unwrap();
                rt.block_on(async {
                    let _ = stopped.await;
                });
            });
            let handle = handle.recv().unwrap();
            add_front(handle.clone());
            Self {
                handle,
                stop: Some(stop),
                thread: Some(thread),
            }
        }
    }

    impl Drop for Serving {
        fn drop(&mut self) {
            remove_front(self.handle.id());
            let _ = self.stop.take().unwrap().send(());
            let _ = self.thread.take().unwrap().join();
        }
    }

    /// The host's background lane while the guard lives.
    struct BackgroundSet(tokio::runtime::Runtime);

    impl BackgroundSet {
        fn new() -> Self {
            let rt = background_lane();
            set_background(rt.handle().clone());
            Self(rt)
        }
    }

    impl Drop for BackgroundSet {
        fn drop(&mut self) {
            clear_background(self.0.handle().id());
        }
    }

    /// A connection opened during a call on the background lane (its
    /// socket made, its I/O task spawned) lives on the tenant's serving
    /// runtime, both on the same one: made on the background lane's, it
    /// stayed there for good.
    #[test]
    fn async_work_begun_in_the_background_lives_in_front() {
        let _one = BACKGROUND_SET.lock().unwrap_or_else(|e| e.into_inner());
        let background = BackgroundSet::new();
        let serving = [Serving::start(), Serving::start()];
        let ids: Vec<_> = serving.iter().map(|s| s.handle.id()).collect();
        let work = TenantWork::new(Arc::new(Meter::default()));
        let here = || tokio::runtime::Handle::current().id();
        let (task_ran_on, made_on) = background.0.block_on(async {
            let (tx, rx) = tokio::sync::oneshot::channel();
            work.spawn_async(async move {
                let _ = tx.send(here());
            });
            let made_on = work.in_front(async move { here() }).await.unwrap();
            (rx.await.unwrap(), made_on)
        });
        assert!(
            ids.contains(&task_ran_on),
            "the task ran on the background lane's runtime"
        );
        assert_eq!(
            made_on, task_ran_on,
            "the socket and its task on one runtime"
        );
        // Begun in front, both stay where they begin.
        let elsewhere = front();
        let (task, made) = elsewhere.block_on(async {
            let (tx, rx) = tokio::sync::oneshot::channel();
            work.spawn_async(async move {
                let _ = tx.send(here());
            });
            (
                rx.await.unwrap(),
                work.in_front(async move { here() }).await.unwrap(),
            )
        });
        assert_eq!(
            (task, made),
            (elsewhere.handle().id(), elsewhere.handle().id())
        );
        // A serving runtime that stopped: an error, not a panic.
        drop(serving);
        let gone = Serving::start();
        let id = gone.handle.id();
        let handle = gone.handle.clone();
        drop(gone);
        add_front(handle);
        let stopped = background.0.block_on(work.in_front(async {}));
        remove_front(id);
        assert!(stopped.is_err());
    }

    #[test]
    fn work_is_charged_to_its_tenant_and_runs_in_its_lane() {
        let _one = BACKGROUND_SET.lock().unwrap_or_else(|e| e.into_inner());
        // (Its threads' policy is checked below: a refusal fails the
        // test, not the lane's making.)
        let background = background_lane();
        set_background(background.handle().clone());
        let front = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let meter = Arc::new(Meter::default());
        let work = TenantWork::new(meter.clone());
        let run = |work: &TenantWork, f: fn() -> i32| front.block_on(async { work.spawn(f).await });
        let in_front = run(&work, || {
            burn(Duration::from_millis(30));
            own_policy()
        })
        .unwrap();
        assert_eq!(in_front, libc::SCHED_OTHER);
        assert!(meter.charged() >= Duration::from_millis(30));

        meter.background.store(true, Relaxed);
        assert_eq!(run(&work, own_policy).unwrap(), libc::SCHED_IDLE);

        // Work with no lane runs where it is, uncharged.
        let before = meter.charged();
        assert_eq!(
            run(&TenantWork::default(), own_policy).unwrap(),
            libc::SCHED_OTHER
        );
        assert_eq!(meter.charged(), before);

        // With the lane gone, a background tenant's work runs in front.
        clear_background(background.handle().id());
        drop(background);
        assert_eq!(run(&work, own_policy).unwrap(), libc::SCHED_OTHER);
    }

    #[test]
    fn a_long_task_is_charged_while_it_runs_and_once_in_all() {
        let front = front();
        let meter = Arc::new(Meter::default());
        let stop = Arc::new(AtomicBool::new(false));
        let task = spawn_in(&front, &meter, {
            let stop = stop.clone();
            move || {
                let start = thread_cpu();
                while !stop.load(Relaxed) {
                    std::hint::black_box(0u64);
                }
                thread_cpu() - start
            }
        });
        // Charged as it runs, not only at its end.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while meter.charged() < Duration::from_millis(20) {
            assert!(
                std::time::Instant::now() < deadline,
                "never charged while it ran"
            );
            charge_running();
            std::thread::sleep(Duration::from_millis(1));
        }
        // Past LONG_TASK: said while it runs, not only at its end.
        assert!(meter.long_tasks.load(Relaxed) >= 1);
        stop.store(true, Relaxed);
        let own = front.block_on(task).unwrap();
        // All of it, once: what the task measured of itself, and at most
        // the little around it.
        let charged = meter.charged();
        assert!(charged >= own, "{charged:?} < {own:?}");
        assert!(
            charged < own + Duration::from_millis(10),
            "{charged:?} for {own:?}"
        );
        // Ended, it is charged no more.
        charge_running();
        assert_eq!(meter.charged(), charged);
        // A short task is no long one.
        let long = meter.long_tasks.load(Relaxed);
        let short = TenantWork::new(meter.clone());
        front.block_on(async { short.spawn(|| ()).await }).unwrap();
        assert_eq!(meter.long_tasks.load(Relaxed), long);
    }

    #[test]
    fn a_long_task_that_then_waits_is_said_long_once() {
        let front = front();
        let meter = Arc::new(Meter::default());
        let done = Arc::new(AtomicBool::new(false));
        let task = spawn_in(&front, &meter, {
            let done = done.clone();
            move || {
                burn(LONG_TASK + Duration::from_millis(2));
                // Then waits (a lock, the disk), looked at all the while.
                std::thread::sleep(Duration::from_millis(300));
                done.store(true, Relaxed);
            }
        });
        while !done.load(Relaxed) {
            charge_running();
            std::thread::sleep(Duration::from_millis(10));
        }
        front.block_on(task).unwrap();
        assert_eq!(meter.long_tasks.load(Relaxed), 1);
    }

    #[test]
    fn a_task_in_steps_is_long_only_for_a_long_step() {
        let front = front();
        let run = |steps: bool| {
            let meter = Arc::new(Meter::default());
            let task = spawn_in(&front, &meter, move || {
                // Twice LONG_TASK in all, none of its steps long.
                for _ in 0..4 {
                    if steps {
                        next_step();
                    }
                    burn(LONG_TASK / 2);
                    charge_running();
                }
            });
            front.block_on(task).unwrap();
            meter.long_tasks.load(Relaxed)
        };
        assert_eq!(run(true), 0, "short steps");
        assert!(run(false) >= 1, "one long task");
    }

    #[test]
    fn a_waiting_task_of_a_tenant_behind_is_not_said_long_again() {
        let front = front();
        let meter = Arc::new(Meter::default());
        let (go_on, wait) = std::sync::mpsc::channel::<()>();
        let (to_test, burnt) = std::sync::mpsc::channel::<()>();
        let task = spawn_in(&front, &meter, move || {
            burn(LONG_TASK + Duration::from_millis(2));
            to_test.send(()).unwrap();
            // Waits for its next input, looked at all the while.
            let _ = wait.recv();
        });
        burnt.recv().unwrap();
        meter.background.store(true, Relaxed);
        let look = || {
            charge_running();
            std::thread::sleep(Duration::from_millis(10));
        };
        // Its burst charged and said (by these looks or other tests'),
        // and the thread waiting: nothing more charged for three looks.
        let charged = || *meter.charged.lock().unwrap();
        let mut still = 0;
        for _ in 0..500 {
            let before = charged();
            look();
            still = if charged() == before { still + 1 } else { 0 };
            if still == 3 {
                break;
            }
        }
        assert_eq!(still, 3, "the task never waited");
        let said = meter.long_tasks.load(Relaxed);
        assert!(said >= 1);
        (0..20).for_each(|_| look());
        assert_eq!(meter.long_tasks.load(Relaxed), said, "said while it waits");
        go_on.send(()).unwrap();
        front.block_on(task).unwrap();
    }

    #[test]
    fn a_running_task_is_moved_by_the_keeper_once_it_may_be() {
        let front = one_blocking_thread();
        let meter = Arc::new(Meter::default());
        let work = TenantWork::new(meter.clone());
        let (to_task, steps) = std::sync::mpsc::channel::<bool>();
        let (to_test, policies) = std::sync::mpsc::channel();
        // Work with no safe point (one long step of a statement): it never
        // calls follow_lane; it says when it may be moved.
        let task = {
            let _guard = front.enter();
            work.spawn(move || {
                while let Ok(movable) = steps.recv() {
                    if movable {
                        may_move();
                    }
                    to_test.send(own_policy()).unwrap();
                }
            })
        };
        let step = |movable| {
            to_task.send(movable).unwrap();
            policies.recv().unwrap()
        };
        // The keeper skips a map another test's thread holds: it looks
        // again, as it would a window later.
        let moved_to = |want| {
            for _ in 0..1000 {
                move_running();
                if step(false) == want {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            false
        };
        let idle = if lanes_movable() {
            libc::SCHED_IDLE
        } else {
            libc::SCHED_OTHER
        };
        assert_eq!(step(false), libc::SCHED_OTHER);
        meter.background.store(true, Relaxed);
        move_running();
        assert_eq!(step(false), libc::SCHED_OTHER, "not moved before it may be");
        assert_eq!(
            step(true),
            libc::SCHED_OTHER,
            "not moved before the keeper looks"
        );
        assert!(moved_to(idle));
        meter.background.store(false, Relaxed);
        assert!(moved_to(libc::SCHED_OTHER));
        meter.background.store(true, Relaxed);
        assert!(moved_to(idle));
        // Ended while idle: the thread is back at its own policy for the
        // next task, and the keeper moves it no more.
        drop(to_task);
        front.block_on(task).unwrap();
        move_running();
        let next = front.block_on(async { TenantWork::default().spawn(own_policy).await });
        assert_eq!(next.unwrap(), libc::SCHED_OTHER);
    }

    #[test]
    fn a_running_task_follows_its_tenant_from_lane_to_lane() {
        let front = one_blocking_thread();
        let meter = Arc::new(Meter::default());
        let work = TenantWork::new(meter.clone());
        let (to_task, steps) = std::sync::mpsc::channel::<()>();
        let (to_test, policies) = std::sync::mpsc::channel();
        let task = {
            let _guard = front.enter();
            work.spawn(move || {
                while steps.recv().is_ok() {
                    follow_lane();
                    to_test.send(own_policy()).unwrap();
                }
            })
        };
        let step = || {
            to_task.send(()).unwrap();
            policies.recv().unwrap()
        };
        // Where the host cannot bring a thread back from SCHED_IDLE, the
        // task stays where it started.
        let idle = if lanes_movable() {
            libc::SCHED_IDLE
        } else {
            libc::SCHED_OTHER
        };
        assert_eq!(step(), libc::SCHED_OTHER);
        meter.background.store(true, Relaxed);
        assert_eq!(step(), idle);
        assert_eq!(step(), idle);
        meter.background.store(false, Relaxed);
        assert_eq!(step(), libc::SCHED_OTHER);
        meter.background.store(true, Relaxed);
        assert_eq!(step(), idle);
        // Ended while idle: the thread is back at its own policy for the
        // next task (another tenant's, in front).
        meter.background.store(false, Relaxed);
        drop(to_task);
        front.block_on(task).unwrap();
        let next = front.block_on(async { TenantWork::default().spawn(own_policy).await });
        assert_eq!(next.unwrap(), libc::SCHED_OTHER);
    }
}
