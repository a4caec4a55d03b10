//! Runs a core wasm module's exported `run` in the server's engine
//! configuration (epoch interruption, pooling, copy-on-write images) and
//! times each call: the hint engine in wasm without HTTP
//! (`bench/hints/wasm-instructions.sh` builds the module and counts
//! instructions under callgrind), and the rewrite engine
//! (`bench/rewriter/wasm-replay.sh`).
//!
//! ```text
//! wasm_replay MODULE.wasm|MODULE.cwasm [PASSES]
//! SAVE=OUT.cwasm wasm_replay MODULE.wasm   # compile once, for callgrind
//! NO_EPOCH=1 ...                           # the same without epoch checks
//! ```
//!
//! A cwasm (written with `SAVE`, or loaded) is compiled for AVX2-era
//! x86 so valgrind can run it.

use std::time::Instant;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: wasm_replay MODULE [PASSES]"))?;
    let passes: usize = args.next().map_or(Ok(4), |s| s.parse())?;
    let mut config = if std::env::var_os("NO_EPOCH").is_some() {
        // What the epoch checks cost: the same compiler settings without them.
        let mut config = wasmtime::Config::new();
        config
            .cranelift_opt_level(wasmtime::OptLevel::Speed)
            .memory_init_cow(true)
            .wasm_wide_arithmetic(true)
            .profiler(wasmtime::ProfilingStrategy::PerfMap);
        config
    } else {
        edge::engine::engine_config(
            &edge_config::Pool {
                total_component_instances: 4,
                total_core_instances: 4,
                total_memories: 4,
                total_tables: 4,
                total_stacks: 4,
                max_memory_bytes: 256 << 20,
                max_core_instances_per_component: 4,
                max_memories_per_component: 1,
                max_tables_per_component: 1,
                keep_resident_bytes: 1 << 20,
                session_instances: 4,
                total_memory_bytes: 1 << 30,
            },
            edge::engine::resets_in_place(),
            edge::engine::EngineKind::Plain,
        )
    };
    let for_callgrind = std::env::var_os("SAVE").is_some() || path.ends_with(".cwasm");
    if for_callgrind && cfg!(target_arch = "x86_64") {
        valgrind_cpu(&mut config)?;
    }
    let engine = wasmtime::Engine::new(&config)?;
    let module = if path.ends_with(".cwasm") {
        // SAFETY: a file this program wrote with `SAVE` for this engine.
        unsafe { wasmtime::Module::deserialize_file(&engine, &path)? }
    } else {
        let module = wasmtime::Module::from_file(&engine, &path)?;
        if let Some(out) = std::env::var_os("SAVE") {
            std::fs::write(out, module.serialize()?)?;
            return Ok(());
        }
        module
    };
    let mut store = wasmtime::Store::new(&engine, ());
    store.set_epoch_deadline(u64::MAX / 2);
    let instance = wasmtime::Instance::new(&mut store, &module, &[])?;
    let run = instance.get_typed_func::<(), u64>(&mut store, "run")?;
    for pass in 0..passes {
        let started = Instant::now();
        let n = run.call(&mut store, ())?;
        println!(
            "pass {pass}: {:.6} s ({n})",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// Code for the CPU valgrind emulates: the host's features would include
/// AVX-512 on newer machines, which valgrind cannot run ("has_avx512bitalg"
/// refused when the cwasm loads under it). AVX2 and the rest stay, so the
/// counts are of the code a 2015+ x86 server runs.
fn valgrind_cpu(config: &mut wasmtime::Config) -> anyhow::Result<()> {
    config.target("x86_64-unknown-linux-gnu")?;
    for flag in [
        "has_sse3",
        "has_ssse3",
        "has_cmpxchg16b",
        "has_sse41",
        "has_sse42",
        "has_popcnt",
        "has_avx",
        "has_avx2",
        "has_fma",
        "has_bmi1",
        "has_bmi2",
        "has_lzcnt",
    ] {
        // SAFETY: each is a feature of every CPU this bench runs on and of
        // valgrind's emulated one; Wasmtime checks them against the host
        // again when the cwasm loads.
        unsafe {
            config.cranelift_flag_enable(flag);
        }
    }
    Ok(())
}
