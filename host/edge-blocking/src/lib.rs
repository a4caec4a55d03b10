//! A tenant's work on the blocking pool, counted as its CPU and run in its
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
//! tenant behind is behind itself. A task already running stays where it
//! started: a thread cannot take back its priority once it has given it up
//! (`sched_setscheduler` needs `CAP_SYS_NICE` to leave `SCHED_IDLE`).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Where a tenant's CPU is counted, and which lane it is in.
pub trait Lane: Send + Sync + 'static {
    /// Counts CPU the tenant used outside its guests' calls.
    fn charge(&self, cpu: Duration);
    /// Whether the tenant runs in the background lane now.
    fn in_background(&self) -> bool;
}

/// The background lane's runtime, whose blocking threads run at
/// `SCHED_IDLE`; set once by the host when it starts the lane.
static BACKGROUND: OnceLock<tokio::runtime::Handle> = OnceLock::new();

/// Makes `handle` (a runtime whose threads all run at `SCHED_IDLE`) the
/// one background tenants' blocking work is spawned on. Later calls are
/// ignored: the lane lives as long as the process.
pub fn set_background(handle: tokio::runtime::Handle) {
    let _ = BACKGROUND.set(handle);
}

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
    /// otherwise; the CPU it takes is charged to the tenant.
    pub fn spawn<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> tokio::task::JoinHandle<R> {
        let Some(lane) = self.0.clone() else {
            return tokio::task::spawn_blocking(f);
        };
        let background = lane.in_background().then(|| BACKGROUND.get()).flatten();
        let timed = move || {
            let start = thread_cpu();
            let result = f();
            lane.charge(thread_cpu().saturating_sub(start));
            result
        };
        match background {
            Some(runtime) => runtime.spawn_blocking(timed),
            None => tokio::task::spawn_blocking(timed),
        }
    }
}

/// CPU the calling thread has used.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

    #[derive(Default)]
    struct Meter {
        charged: Mutex<Duration>,
        background: AtomicBool,
    }

    impl Lane for Meter {
        fn charge(&self, cpu: Duration) {
            *self.charged.lock().unwrap() += cpu;
        }
        fn in_background(&self) -> bool {
            self.background.load(Relaxed)
        }
    }

    /// Spins until the calling thread has used `cpu`.
    fn burn(cpu: Duration) {
        let start = thread_cpu();
        while thread_cpu() - start < cpu {
            std::hint::black_box(0u64);
        }
    }

    fn policy() -> i32 {
        // SAFETY: asks for the calling thread's (pid 0) policy.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn work_is_charged_to_its_tenant_and_runs_in_its_lane() {
        // A background lane as the host makes one: every thread at
        // SCHED_IDLE.
        let background = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .on_thread_start(|| {
                let param = libc::sched_param { sched_priority: 0 };
                // SAFETY: sets the calling thread's own policy.
                assert_eq!(
                    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) },
                    0
                );
            })
            .build()
            .unwrap();
        set_background(background.handle().clone());
        let front = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let meter = Arc::new(Meter::default());
        let work = TenantWork::new(meter.clone());
        let run = |work: &TenantWork, f: fn() -> i32| front.block_on(async { work.spawn(f).await });
        let in_front = run(&work, || {
            burn(Duration::from_millis(30));
            policy()
        })
        .unwrap();
        assert_eq!(in_front, libc::SCHED_OTHER);
        assert!(*meter.charged.lock().unwrap() >= Duration::from_millis(30));

        meter.background.store(true, Relaxed);
        let behind = run(&work, policy).unwrap();
        assert_eq!(behind, libc::SCHED_IDLE);

        // Work with no lane runs where it is, uncharged.
        let before = *meter.charged.lock().unwrap();
        let plain = run(&TenantWork::default(), policy).unwrap();
        assert_eq!(plain, libc::SCHED_OTHER);
        assert_eq!(*meter.charged.lock().unwrap(), before);
    }
}
