//! The Wasmtime engine, the epoch ticker and the compile cache.
//!
//! One engine per process: a pooling allocator sized from `[pool]`,
//! copy-on-write memory images, and epoch interruption driven by a ticker
//! thread so every store can carry a wall-clock deadline at the cost of one
//! counter check per loop back-edge.

use anyhow::{Context, Result};
use edge_config::Pool;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use wasmtime::component::Component;
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances: a running guest yields this often, so a
/// call moves to the background lane ([`crate::lanes`]) at most this long
/// after it has run past its budget. Deadlines are rounded up to it.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Builds the process-wide engine from the pool settings; `in_place`:
/// whether dropped memories are reset in place ([`resets_in_place`], read
/// once by the caller, which keeps the answer to check it while serving).
pub fn build_engine(pool: &Pool, in_place: bool) -> Result<Engine> {
    Engine::new(&engine_config(pool, in_place))
        .map_err(anyhow::Error::from)
        .context(
            "creating the Wasmtime engine (pool settings may exceed this machine's address space)",
        )
}

/// The server's engine settings, for tools that build a variant of it
/// (the bench replay narrows the CPU features for valgrind).
pub fn engine_config(pool: &Pool, in_place: bool) -> wasmtime::Config {
    let (pagemap_scan, keep_resident) = memory_reset(pool, in_place);
    let mut pooling = PoolingAllocationConfig::new();
    pooling
        .total_component_instances(pool.total_component_instances)
        .total_core_instances(pool.total_core_instances)
        .total_memories(pool.total_memories)
        .total_tables(pool.total_tables)
        .total_stacks(pool.total_stacks)
        .max_memory_size(pool.max_memory_bytes as usize)
        .max_core_instances_per_component(pool.max_core_instances_per_component)
        .max_memories_per_component(pool.max_memories_per_component)
        .max_tables_per_component(pool.max_tables_per_component)
        // Reset dirty pages in place instead of madvise(DONTNEED): no
        // syscall, no TLB shootdown, and no page faults when the next
        // instance touches the same pages. With PAGEMAP_SCAN (Linux 6.7+)
        // only pages actually written are reset, so a large budget costs
        // nothing for guests that touch little. Not with swap: see
        // [`swap_active`].
        .pagemap_scan(pagemap_scan)
        .linear_memory_keep_resident(keep_resident)
        .table_keep_resident(pool.keep_resident_bytes as usize)
        // Whatever must still be decommitted (pages past keep_resident) is
        // decommitted by the instance that dirtied them, on its own thread
        // and in its own lane: batched, one tenant's drop would pay for
        // others' (a memory bomb's 48 MiB, 32 at once) while holding the
        // process's mmap lock, and every instantiation waits on that lock.
        .decommit_batch_size(1);

    let mut config = compiler_config();
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    // `EDGE_PERFMAP=1` writes /tmp/perf-PID.map so `perf report` names
    // guest functions (for profiling only: it costs a write per compile).
    if std::env::var_os("EDGE_PERFMAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    config
}

/// The settings compiled code depends on, without the instance pool: what
/// `edge compile` (the bounded compile worker) builds its engine from, so
/// its artifacts load in the server's engine (the pool's sizes are not
/// part of Wasmtime's compatibility hash; the server checks every artifact
/// a worker writes by loading it).
fn compiler_config() -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    config
        .wasm_component_model(true)
        // WASI 0.3 components (async functions, streams and futures).
        .wasm_component_model_async(true)
        .epoch_interruption(true)
        // Standard since August 2026 (phase 4) and on by default from
        // Wasmtime 50; the signer is built with it
        // (components/signer/wide-arithmetic.toml).
        .wasm_wide_arithmetic(true)
        .memory_init_cow(true)
        .cranelift_opt_level(wasmtime::OptLevel::Speed);
    config
}

/// `edge compile IN OUT`: compiles a component for the server's engine
/// and writes the artifact (what the control plane runs, bounded, for each
/// upload).
pub fn compile_to_file(input: &Path, output: &Path) -> Result<()> {
    let bytes = std::fs::read(input).with_context(|| format!("reading {}", input.display()))?;
    let engine = Engine::new(&compiler_config()).map_err(anyhow::Error::from)?;
    let component = edge_componentize::componentize_if_module(&bytes)
        .with_context(|| format!("compiling component {}", input.display()))?;
    let compiled = engine
        .precompile_component(&component)
        .map_err(anyhow::Error::from)?;
    let tmp = output.with_extension(format!("tmp{}", std::process::id()));
    if let Some(dir) = output.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&tmp, &compiled).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, output).with_context(|| format!("writing {}", output.display()))?;
    Ok(())
}

/// Whether the machine has swap, from `/proc/swaps`.
///
/// Slots are reset from a PAGEMAP_SCAN only without swap. Wasmtime 48's
/// scan asks for pages that are written *and present*: a dirty page the
/// kernel has swapped out is not present, so it is neither reset nor
/// decommitted, and the next instance in the slot, maybe another tenant's,
/// reads the previous one's data. With swap the host resets slots the way
/// Wasmtime does by default, decommitting every page, which is right
/// whatever the kernel did with them (a manual reset of the first
/// `keep_resident_bytes` would copy the memory image into them on every
/// reset instead).
///
/// ```
/// use edge::engine::swap_active;
/// let header = "Filename\tType\tSize\tUsed\tPriority\n";
/// assert!(!swap_active(header));
/// assert!(swap_active(&format!("{header}/swapfile\tfile\t1048572\t0\t-2\n")));
/// // Unreadable (no procfs): assume swap.
/// assert!(swap_active(""));
/// ```
pub fn swap_active(proc_swaps: &str) -> bool {
    let mut lines = proc_swaps.lines();
    let has_header = lines.next().is_some_and(|l| l.starts_with("Filename"));
    !(has_header && lines.all(|l| l.trim().is_empty()))
}

/// The machine's swap table: `/proc/swaps`, or the file `EDGE_PROC_SWAPS`
/// names (for tests, which cannot turn swap on).
fn proc_swaps() -> String {
    let path = std::env::var_os("EDGE_PROC_SWAPS").unwrap_or_else(|| "/proc/swaps".into());
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Whether dropped instances' memories are reset in place from a
/// PAGEMAP_SCAN, which is safe only while the machine has no swap: decided
/// when the engine is built, and checked again while serving
/// ([`in_place_reset_now_unsafe`]).
pub fn resets_in_place() -> bool {
    !swap_active(&proc_swaps())
}

/// Whether an engine built to reset in place (`in_place`) would now leak
/// one instance's pages to the next: swap was turned on after it started.
/// Its slots cannot be switched to the safe reset while instances live, so
/// the host must stop serving (see `edge serve`).
pub fn in_place_reset_now_unsafe(in_place: bool) -> bool {
    in_place && swap_active(&proc_swaps())
}

/// How dropped instances' memories are reset: `(PAGEMAP_SCAN, bytes kept
/// resident)`, see [`swap_active`].
fn memory_reset(pool: &Pool, in_place: bool) -> (wasmtime::Enabled, usize) {
    if !in_place {
        tracing::warn!(
            "swap is on (or /proc/swaps is unreadable): dropped instances' memories are \
             decommitted, not reset from a PAGEMAP_SCAN, which would miss swapped-out pages; \
             [pool] keep_resident_bytes is not used for memories"
        );
        (wasmtime::Enabled::No, 0)
    } else {
        // Pages reset in place stay resident while their slot is unused.
        let bound = u64::from(pool.total_memories).saturating_mul(pool.keep_resident_bytes);
        if let Some(total) = memory_total_bytes()
            && bound > total / 2
        {
            tracing::warn!(
                bound_mib = bound >> 20,
                memory_mib = total >> 20,
                "[pool] total_memories x keep_resident_bytes exceeds half this machine's memory: \
                 that much may stay resident in unused slots after guests that wrote it"
            );
        }
        (wasmtime::Enabled::Auto, pool.keep_resident_bytes as usize)
    }
}

/// The machine's memory (`MemTotal` of `/proc/meminfo`), if readable.
fn memory_total_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped.
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Starts the ticker thread.
    pub fn start(engine: &Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let engine = engine.weak();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("edge-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match engine.upgrade() {
                        Some(e) => e.increment_epoch(),
                        None => break,
                    }
                }
            })
            .expect("spawning the epoch thread");
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A content hash of a component's bytes.
pub type ContentHash = [u8; 32];

/// Compiles components once and keeps them: in memory for reloads, on disk
/// (keyed by content hash and the engine's compatibility hash) for restarts.
pub struct ComponentCache {
    engine: Engine,
    dir: PathBuf,
    engine_key: String,
    loaded: Mutex<HashMap<ContentHash, Component>>,
}

struct Sha256Hasher(Sha256);
impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        unreachable!("only the digest is read")
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

impl ComponentCache {
    /// A cache storing compiled artifacts under `dir`.
    pub fn new(engine: &Engine, dir: &Path) -> Self {
        let mut h = Sha256Hasher(Sha256::new());
        std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut h);
        let engine_key = hex::encode(&h.0.finalize()[..8]);
        Self {
            engine: engine.clone(),
            dir: dir.to_path_buf(),
            engine_key,
            loaded: Mutex::new(HashMap::new()),
        }
    }

    /// Loads the component at `path`, compiling it only if neither memory
    /// nor disk has it. Returns the component and its content hash.
    pub fn load(&self, path: &Path) -> Result<(Component, ContentHash)> {
        let bytes =
            std::fs::read(path).with_context(|| format!("reading component {}", path.display()))?;
        let hash: ContentHash = Sha256::digest(&bytes).into();
        if let Some(c) = self.lock().get(&hash) {
            return Ok((c.clone(), hash));
        }
        let file = self.compiled_file(&hash);
        let component = match self.load_precompiled(&file) {
            Some(c) => c,
            None => {
                let started = std::time::Instant::now();
                // Spin's older SDKs build preview 1 modules: adapted here,
                // as Spin adapts them when it loads them.
                let component = edge_componentize::componentize_if_module(&bytes)
                    .with_context(|| format!("compiling component {}", path.display()))?;
                let compiled = self
                    .engine
                    .precompile_component(&component)
                    .map_err(anyhow::Error::from)
                    .with_context(|| format!("compiling component {}", path.display()))?;
                tracing::info!(component = %path.display(), ms = started.elapsed().as_millis() as u64, "compiled");
                self.store(&file, &compiled);
                // SAFETY: the bytes were produced by this engine just now.
                unsafe { Component::deserialize(&self.engine, &compiled)? }
            }
        };
        self.lock().insert(hash, component.clone());
        Ok((component, hash))
    }

    /// Where the compiled artifact of the component with `hash` is kept.
    pub fn compiled_file(&self, hash: &ContentHash) -> PathBuf {
        self.dir
            .join(format!("{}-{}.cwasm", hex::encode(hash), self.engine_key))
    }

    /// Whether the component with `hash` is loaded in memory.
    pub fn is_loaded(&self, hash: &ContentHash) -> bool {
        self.lock().contains_key(hash)
    }

    /// Loads the artifact a compile worker wrote for `hash`, never
    /// compiling: an artifact this engine cannot load is an error (and is
    /// removed).
    pub fn adopt(&self, hash: &ContentHash) -> Result<()> {
        let file = self.compiled_file(hash);
        match self.load_precompiled(&file) {
            Some(c) => {
                self.lock().insert(*hash, c);
                Ok(())
            }
            None => {
                let _ = std::fs::remove_file(&file);
                anyhow::bail!("the compile worker's artifact does not load in this engine")
            }
        }
    }

    fn load_precompiled(&self, file: &Path) -> Option<Component> {
        if !file.exists() {
            return None;
        }
        // SAFETY: the cache directory is the host's own data directory and
        // the file name carries the engine's compatibility hash; Wasmtime
        // also checks the artifact's header and engine settings. A file
        // that fails those checks is recompiled below.
        match unsafe { Component::deserialize_file(&self.engine, file) } {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "ignoring unusable compile-cache entry");
                None
            }
        }
    }

    fn store(&self, file: &Path, compiled: &[u8]) {
        // Write then rename so a concurrent reader never sees half a file.
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        let result = std::fs::create_dir_all(&self.dir)
            .and_then(|_| std::fs::write(&tmp, compiled))
            .and_then(|_| std::fs::rename(&tmp, file));
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            tracing::warn!(file = %file.display(), error = %e, "cannot write compile cache; will recompile next start");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ContentHash, Component>> {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner())
    }
}
