//! One pass over a query log through the address engine, exported as
//! `run` for `host/edge/examples/wasm_replay.rs`. The index and the log
//! are baked in (`REPLAY_INDEX`, `REPLAY_LOG` at build time), like the
//! hints component embeds its index.

static INDEX: &[u8] = include_bytes!(env!("REPLAY_INDEX"));
static LOG: &str = include_str!(env!("REPLAY_LOG"));

/// Replays the log once; returns the number of suggestions.
#[unsafe(no_mangle)]
pub extern "C" fn run() -> u64 {
    let Ok(index) = hints_engine::address::AddressIndex::open(INDEX) else {
        return u64::MAX;
    };
    LOG.lines().map(|q| index.suggest(q, 5).len() as u64).sum()
}
