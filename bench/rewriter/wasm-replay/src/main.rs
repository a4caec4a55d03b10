//! The same passes natively, timed as `wasm_replay` times the module's.

fn main() {
    let passes: usize = std::env::args()
        .nth(1)
        .map_or(4, |s| s.parse().expect("passes"));
    for pass in 0..passes {
        let started = std::time::Instant::now();
        let n = rewriter_wasm_replay::run();
        println!(
            "pass {pass}: {:.6} s ({n})",
            started.elapsed().as_secs_f64()
        );
    }
}
