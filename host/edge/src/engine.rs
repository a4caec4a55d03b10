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
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;
use wasmtime::component::Component;
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances: a running guest yields this often, so a
/// call moves to the background lane ([`crate::lanes`]) at most this long
/// after it has run past its budget. Deadlines are rounded up to it.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Which of the two engines a component runs in.
///
/// Wasmtime's support for the component model's concurrency (async
/// functions, streams, futures: WASI 0.3 and Spin's `@3` interfaces) is an
/// engine setting, and with it on every store carries the concurrent
/// state and every call goes through its event loop, even a WASI 0.2
/// component's, at about a fifth of the per-request cost
/// (docs/BENCHMARKS.md). So components that use none of it run in an
/// engine without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    /// No concurrency support: components without async component
    /// functions (WASI 0.2, Spin's `@2.0.0` interfaces).
    Plain,
    /// Concurrency support: components that use it.
    Concurrent,
}

/// The process's engines: the plain one, built at start, and the
/// concurrent one, built (with its own pool of the `[pool]` sizes) when
/// the first component that needs it is loaded, so a PoP serving only
/// WASI 0.2 reserves one pool.
pub struct Engines {
    plain: Engine,
    concurrent: Arc<OnceLock<Engine>>,
    /// Held while the concurrent engine is built, so two loads at once
    /// build (and reserve a pool for) one.
    building: Mutex<()>,
    /// Without a pool: for compiling and the compatibility key, without
    /// reserving the concurrent engine's pool.
    concurrent_compiler: Engine,
    pool: Pool,
    in_place: bool,
}

impl Engines {
    /// Builds the plain engine from the pool settings; `in_place`:
    /// whether dropped memories are reset in place ([`resets_in_place`],
    /// read once by the caller, which keeps the answer to check it while
    /// serving).
    pub fn new(pool: &Pool, in_place: bool) -> Result<Self> {
        Ok(Self {
            plain: build_engine(pool, in_place, EngineKind::Plain)?,
            concurrent: Arc::default(),
            building: Mutex::new(()),
            concurrent_compiler: Engine::new(&compiler_config(EngineKind::Concurrent))
                .map_err(anyhow::Error::from)?,
            pool: pool.clone(),
            in_place,
        })
    }

    /// The plain engine.
    pub fn plain(&self) -> &Engine {
        &self.plain
    }

    /// The engine of `kind`, the concurrent one built now if it was not.
    pub fn get(&self, kind: EngineKind) -> Result<&Engine> {
        match kind {
            EngineKind::Plain => Ok(&self.plain),
            EngineKind::Concurrent => {
                if let Some(e) = self.concurrent.get() {
                    return Ok(e);
                }
                let _building = self.building.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(e) = self.concurrent.get() {
                    return Ok(e);
                }
                let engine = build_engine(&self.pool, self.in_place, kind)?;
                tracing::info!(
                    "a component uses the component model's concurrency: its engine and pool are set up"
                );
                Ok(self.concurrent.get_or_init(|| engine))
            }
        }
    }

    /// Which engine `engine` is.
    pub fn kind_of(&self, engine: &Engine) -> EngineKind {
        if Engine::same(engine, &self.plain) {
            EngineKind::Plain
        } else {
            EngineKind::Concurrent
        }
    }

    /// The engines built so far.
    pub fn built(&self) -> impl Iterator<Item = &Engine> {
        std::iter::once(&self.plain).chain(self.concurrent.get())
    }

    /// An engine that compiles for `kind` (the concurrent one without
    /// building its pool).
    fn compiler(&self, kind: EngineKind) -> &Engine {
        match kind {
            EngineKind::Plain => &self.plain,
            EngineKind::Concurrent => &self.concurrent_compiler,
        }
    }
}

fn build_engine(pool: &Pool, in_place: bool, kind: EngineKind) -> Result<Engine> {
    Engine::new(&engine_config(pool, in_place, kind))
        .map_err(anyhow::Error::from)
        .context(
            "creating the Wasmtime engine (pool settings may exceed this machine's address space)",
        )
}

/// The server's engine settings, for tools that build a variant of it
/// (the bench replay narrows the CPU features for valgrind).
pub fn engine_config(pool: &Pool, in_place: bool, kind: EngineKind) -> wasmtime::Config {
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

    let mut config = compiler_config(kind);
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
fn compiler_config(kind: EngineKind) -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    match kind {
        EngineKind::Plain => config.concurrency_support(false),
        // WASI 0.3 components (async functions, streams and futures).
        EngineKind::Concurrent => config.wasm_component_model_async(true),
    };
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        // Standard since August 2026 (phase 4) and on by default from
        // Wasmtime 50; the signer is built with it
        // (components/signer/wide-arithmetic.toml).
        .wasm_wide_arithmetic(true)
        .memory_init_cow(true)
        .cranelift_opt_level(wasmtime::OptLevel::Speed);
    config
}

/// A component as [`ComponentCache::load`] gives it.
pub struct Loaded {
    /// Compiled, in the engine it needs.
    pub component: Component,
    /// Content hash of its bytes.
    pub hash: ContentHash,
    /// What it declares if it is a Worker built by `workers/`.
    pub worker: Option<crate::worker::Declaration>,
    /// For a Worker script: its bundle (and `component` is the Workers
    /// engine, which runs it).
    pub script: Option<Arc<str>>,
    /// Core module instances one instance of `component` makes (`None`:
    /// not known, it nests components).
    pub core_instances: Option<u32>,
}

/// Interfaces without async functions that the host provides only in the
/// concurrent engine: `spin:postgres@4.0.0` and `@4.1.0` imports are
/// served by the `@4.2.0` bindings (semver-compatible linking), which add
/// async functions.
const CONCURRENTLY_LINKED: &[&str] = &["spin:postgres/postgres@4."];

/// Compiles a component (or a preview 1 module, adapted first) for the
/// engine it needs: `plain` unless it uses the component model's
/// concurrency, which the plain engine's validation refuses; then
/// `concurrent` (engines of the two [`EngineKind`]s' settings).
fn precompile(plain: &Engine, concurrent: &Engine, bytes: &[u8]) -> Result<(EngineKind, Vec<u8>)> {
    let component = edge_componentize::componentize_if_module(bytes)?;
    let imports = edge_componentize::component_imports(&component)?;
    let linked_concurrently = imports
        .iter()
        .any(|i| CONCURRENTLY_LINKED.iter().any(|p| i.starts_with(p)));
    match plain.precompile_component(&component) {
        Ok(compiled) if !linked_concurrently => Ok((EngineKind::Plain, compiled)),
        // Not valid without concurrency support (or not valid at all: then
        // the concurrent engine, which accepts more, says why).
        _ => concurrent
            .precompile_component(&component)
            .map(|compiled| (EngineKind::Concurrent, compiled))
            .map_err(anyhow::Error::from),
    }
}

/// `edge compile IN DIR`: compiles a component for the engine it needs
/// and writes the artifact into the compile cache `DIR`, under the name
/// the server looks for (what the control plane runs, bounded, for each
/// upload). Returns the artifact's path.
pub fn compile_into_cache(input: &Path, dir: &Path) -> Result<PathBuf> {
    let bytes = std::fs::read(input).with_context(|| format!("reading {}", input.display()))?;
    let hash: ContentHash = Sha256::digest(&bytes).into();
    let compiler = |kind| Engine::new(&compiler_config(kind)).map_err(anyhow::Error::from);
    let (plain, concurrent) = (
        compiler(EngineKind::Plain)?,
        compiler(EngineKind::Concurrent)?,
    );
    let (kind, compiled) = precompile(&plain, &concurrent, &bytes)
        .with_context(|| format!("compiling component {}", input.display()))?;
    let engine = if kind == EngineKind::Plain {
        &plain
    } else {
        &concurrent
    };
    let output = dir.join(artifact_name(&hash, &engine_key(engine)));
    write_atomically(&output, &compiled)?;
    Ok(output)
}

/// Writes `bytes` to a temporary file beside `path`, then renames it, so a
/// concurrent reader never sees half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let result = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| std::fs::write(&tmp, bytes))
        .and_then(|_| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", path.display()))
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

/// Advances the engines' epochs every [`EPOCH_TICK`] until dropped.
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Starts the ticker thread, for the concurrent engine too once built.
    pub fn start(engines: &Engines) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let plain = engines.plain.weak();
        let concurrent = engines.concurrent.clone();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("edge-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match plain.upgrade() {
                        Some(e) => e.increment_epoch(),
                        None => break,
                    }
                    if let Some(e) = concurrent.get() {
                        e.increment_epoch();
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

/// Compiles components once and keeps them: in memory while the
/// configuration in force runs them, on disk for restarts and rollbacks
/// (a day after last use: [`ComponentCache::retain`]), keyed by content
/// hash and the compatibility hash of the engine that compiled them (the
/// file name says which engine loads it).
pub struct ComponentCache {
    engines: Arc<Engines>,
    dir: PathBuf,
    /// The engines' keys, plain then concurrent.
    keys: [(EngineKind, String); 2],
    loaded: Mutex<HashMap<ContentHash, Component>>,
    /// [`Self::core_instances`] by content hash.
    core_counts: Mutex<HashMap<ContentHash, Option<u32>>>,
    workers_engine: Mutex<WorkersEngine>,
}

/// Where the Workers engine is, and the engine as last loaded from there
/// (with the file's length and modification time, to notice a new one).
#[derive(Default)]
struct WorkersEngine {
    path: Option<PathBuf>,
    loaded: Option<((u64, std::time::SystemTime), Loaded)>,
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

/// What artifacts of `engine` are named by: its compatibility hash.
fn engine_key(engine: &Engine) -> String {
    let mut h = Sha256Hasher(Sha256::new());
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut h);
    hex::encode(&h.0.finalize()[..8])
}

/// The file name of the artifact of the component with `hash` compiled
/// by the engine with `key`.
fn artifact_name(hash: &ContentHash, key: &str) -> String {
    format!("{}-{key}.cwasm", hex::encode(hash))
}

/// The content hash an artifact's file name names, if it is one's.
fn artifact_hash(name: &str) -> Option<ContentHash> {
    let (hash, rest) = name.split_once('-')?;
    rest.strip_suffix(".cwasm")?;
    hex::decode(hash).ok()?.try_into().ok()
}

impl ComponentCache {
    /// A cache storing compiled artifacts under `dir`.
    pub fn new(engines: Arc<Engines>, dir: &Path) -> Self {
        let keys = [
            (
                EngineKind::Plain,
                engine_key(engines.compiler(EngineKind::Plain)),
            ),
            (
                EngineKind::Concurrent,
                engine_key(engines.compiler(EngineKind::Concurrent)),
            ),
        ];
        Self {
            engines,
            dir: dir.to_path_buf(),
            keys,
            loaded: Mutex::new(HashMap::new()),
            core_counts: Mutex::default(),
            workers_engine: Mutex::default(),
        }
    }

    /// The cache directory (`edge compile` writes into it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Loads the component at `path`, compiling it only if neither memory
    /// nor disk has it. Returns the component (in the engine it needs),
    /// its content hash and, for a Worker, its declaration.
    pub fn load(&self, path: &Path) -> Result<Loaded> {
        let bytes =
            std::fs::read(path).with_context(|| format!("reading component {}", path.display()))?;
        self.load_bytes(path, &bytes)
    }

    /// [`Self::load`] of `bytes`, read from `path`.
    fn load_bytes(&self, path: &Path, bytes: &[u8]) -> Result<Loaded> {
        let hash: ContentHash = Sha256::digest(bytes).into();
        let worker = crate::worker::Declaration::of(bytes)
            .with_context(|| format!("component {}", path.display()))?;
        if let Some(declared) = worker.as_ref().filter(|w| w.engine.is_some()) {
            // A Worker script: nothing of its own to compile; the one
            // Workers engine runs it.
            let script = crate::worker::script_of(bytes, declared)
                .with_context(|| format!("component {}", path.display()))?;
            let (engine, core_instances) = self
                .workers_engine()
                .with_context(|| format!("component {} is a Worker script", path.display()))?;
            return Ok(Loaded {
                component: engine,
                hash,
                worker,
                script: Some(script),
                core_instances,
            });
        }
        let core_instances = self.core_instances(&hash, bytes);
        if let Some(c) = self.lock().get(&hash) {
            return Ok(Loaded {
                component: c.clone(),
                hash,
                worker,
                script: None,
                core_instances,
            });
        }
        let component = match self.load_precompiled(&hash)? {
            Some(c) => c,
            None => {
                let started = std::time::Instant::now();
                // Spin's older SDKs build preview 1 modules: adapted here,
                // as Spin adapts them when it loads them.
                let (kind, compiled) = precompile(
                    self.engines.compiler(EngineKind::Plain),
                    self.engines.compiler(EngineKind::Concurrent),
                    bytes,
                )
                .with_context(|| format!("compiling component {}", path.display()))?;
                tracing::info!(component = %path.display(), ms = started.elapsed().as_millis() as u64, ?kind, "compiled");
                let file = self.dir.join(artifact_name(&hash, self.key(kind)));
                if let Err(e) = write_atomically(&file, &compiled) {
                    tracing::warn!(error = %format!("{e:#}"), "cannot write compile cache; will recompile next start");
                }
                // SAFETY: the bytes were produced by this engine's settings just now.
                unsafe { Component::deserialize(self.engines.get(kind)?, &compiled)? }
            }
        };
        self.lock().insert(hash, component.clone());
        Ok(Loaded {
            component,
            hash,
            worker,
            script: None,
            core_instances,
        })
    }

    /// Sets where the Workers engine is (`None`: Worker scripts cannot
    /// run here).
    pub fn set_workers_engine(&self, path: Option<PathBuf>) {
        let mut engine = self
            .workers_engine
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if engine.path != path {
            *engine = WorkersEngine { path, loaded: None };
        }
    }

    /// The Workers engine, compiled (once: every Worker script shares it;
    /// again only if its file changes).
    fn workers_engine(&self) -> Result<(Component, Option<u32>)> {
        let mut engine = self
            .workers_engine
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let path = engine.path.clone().context(
            "the Workers engine is missing: build it with `make workers` (node workers/build.mjs --engine --out build/workers/engine.wasm) or set [server] workers_engine",
        )?;
        let meta = std::fs::metadata(&path)
            .with_context(|| format!("the Workers engine {}", path.display()))?;
        let stamp = (meta.len(), meta.modified()?);
        if let Some((loaded_at, loaded)) = &engine.loaded
            && *loaded_at == stamp
        {
            return Ok((loaded.component.clone(), loaded.core_instances));
        }
        let bytes = std::fs::read(&path)
            .with_context(|| format!("reading the Workers engine {}", path.display()))?;
        crate::worker::check_engine(&bytes)
            .with_context(|| format!("the Workers engine {}", path.display()))?;
        let loaded = self.load_bytes(&path, &bytes)?;
        let answer = (loaded.component.clone(), loaded.core_instances);
        engine.loaded = Some((stamp, loaded));
        Ok(answer)
    }

    fn key(&self, kind: EngineKind) -> &str {
        &self
            .keys
            .iter()
            .find(|(k, _)| *k == kind)
            .expect("both kinds")
            .1
    }

    /// The stored artifact of the component with `hash`, and the engine
    /// it is for, if there is one.
    pub fn compiled_file(&self, hash: &ContentHash) -> Option<(EngineKind, PathBuf)> {
        self.keys.iter().find_map(|(kind, key)| {
            let file = self.dir.join(artifact_name(hash, key));
            file.exists().then_some((*kind, file))
        })
    }

    /// Keeps in memory only the components with the hashes `in_use` (and
    /// the Workers engine), marks their artifacts used now, and removes
    /// the artifacts no build has used for `unused_for` (a rollback within
    /// it loads rather than compiles); the number removed. Before, every
    /// component ever compiled stayed in memory (its code anonymous memory
    /// when compiled here) and on disk for the process's life: each deploy
    /// of a new version added its compiled code.
    pub fn retain(
        &self,
        in_use: &std::collections::HashSet<ContentHash>,
        unused_for: Duration,
    ) -> usize {
        let engine = self.workers_engine_hash();
        let keep = |hash: &ContentHash| in_use.contains(hash) || engine == Some(*hash);
        self.lock().retain(|hash, _| keep(hash));
        self.core_counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|hash, _| keep(hash));
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(hash) = artifact_hash(&name.to_string_lossy()) else {
                continue;
            };
            if keep(&hash) {
                crate::files::touch(&entry.path());
                continue;
            }
            if crate::files::unused_for(&entry, unused_for) {
                match std::fs::remove_file(entry.path()) {
                    Ok(()) => removed += 1,
                    Err(e) => {
                        tracing::warn!(file = %entry.path().display(), error = %e, "an unused compiled component was not removed")
                    }
                }
            }
        }
        removed
    }

    /// How many compiled components are held in memory.
    pub fn loaded_count(&self) -> usize {
        let engine = self.workers_engine_hash();
        let loaded = self.lock();
        loaded.len() + usize::from(engine.is_some_and(|hash| !loaded.contains_key(&hash)))
    }

    /// Its figures in the Prometheus text format.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        let _ = writeln!(
            out,
            "# HELP edge_components_loaded Compiled components held in memory: those the configuration in force runs (and any a build under way loaded), and the Workers engine.\n# TYPE edge_components_loaded gauge\nedge_components_loaded {}",
            self.loaded_count()
        );
    }

    /// The content hash of the Workers engine, if it is loaded.
    fn workers_engine_hash(&self) -> Option<ContentHash> {
        let engine = self
            .workers_engine
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        engine.loaded.as_ref().map(|(_, loaded)| loaded.hash)
    }

    /// Whether the component with `hash` is loaded in memory.
    pub fn is_loaded(&self, hash: &ContentHash) -> bool {
        self.lock().contains_key(hash)
    }

    /// Loads the artifact a compile worker wrote for `hash`, never
    /// compiling: an artifact this host cannot load is an error (and is
    /// removed).
    pub fn adopt(&self, hash: &ContentHash) -> Result<()> {
        match self.load_precompiled(hash)? {
            Some(c) => {
                self.lock().insert(*hash, c);
                Ok(())
            }
            None => anyhow::bail!("the compile worker's artifact does not load in this engine"),
        }
    }

    /// The stored artifact for `hash` loaded, if there is a usable one (an
    /// unusable one is removed); an error only if its engine cannot be
    /// built.
    fn load_precompiled(&self, hash: &ContentHash) -> Result<Option<Component>> {
        let Some((kind, file)) = self.compiled_file(hash) else {
            return Ok(None);
        };
        let engine = self.engines.get(kind)?;
        // SAFETY: the cache directory is the host's own data directory and
        // the file name carries the engine's compatibility hash; Wasmtime
        // also checks the artifact's header and engine settings. A file
        // that fails those checks is removed and recompiled.
        match unsafe { Component::deserialize_file(engine, &file) } {
            Ok(c) => {
                // Used now: a commit's sweep keeps it (a rollback's
                // artefact, adopted before the build that runs it).
                crate::files::touch(&file);
                Ok(Some(c))
            }
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "removing unusable compile-cache entry");
                let _ = std::fs::remove_file(&file);
                Ok(None)
            }
        }
    }

    /// Core module instances one instance of the component `bytes` (with
    /// `hash`) makes: a pass over its sections (a preview 1 module is
    /// adapted first), once per content, since the compiled artifact does
    /// not say. Bytes that do not parse fail to compile, with the reason.
    fn core_instances(&self, hash: &ContentHash, bytes: &[u8]) -> Option<u32> {
        let counts = || self.core_counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = counts().get(hash) {
            return *n;
        }
        let n = edge_componentize::componentize_if_module(bytes)
            .and_then(|c| edge_componentize::core_instantiations(&c))
            .unwrap_or(None);
        counts().insert(*hash, n);
        n
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ContentHash, Component>> {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner())
    }
}
