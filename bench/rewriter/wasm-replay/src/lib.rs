//! Rewrites a page with a rule file, exported as `run` for
//! `host/edge/examples/wasm_replay.rs` (each call one body in 32 KiB
//! chunks, as the rewriter component feeds it). The page and the rules
//! (nginx `subs_filter` lines) are baked in (`REPLAY_PAGE`,
//! `REPLAY_RULES` at build time).

use rewrite_engine::{Rewriter, RuleSet};
use std::sync::OnceLock;

static PAGE: &[u8] = include_bytes!(env!("REPLAY_PAGE"));
static RULES: &str = include_str!(env!("REPLAY_RULES"));

/// Rewrites the page once (the rules are compiled on the first call);
/// returns the output's length.
#[unsafe(no_mangle)]
pub extern "C" fn run() -> u64 {
    static SET: OnceLock<RuleSet> = OnceLock::new();
    let set = SET.get_or_init(|| {
        let rules = rewrite_engine::nginx::import(RULES).expect("rules import");
        RuleSet::new(&rules).expect("rules compile")
    });
    let mut out = Vec::with_capacity(PAGE.len() + PAGE.len() / 8);
    let mut rw = Rewriter::new(set);
    for chunk in PAGE.chunks(32 * 1024) {
        rw.write(chunk, &mut out);
    }
    rw.finish(&mut out);
    out.len() as u64
}
