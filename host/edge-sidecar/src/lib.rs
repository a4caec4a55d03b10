//! `edge-sidecar`: runs programs that cannot run in a sandbox, for the
//! host's components, under its own rules.
//!
//! - Only programs on `[sidecar] allow` (absolute, normalised paths) run;
//!   a relative path, a `..`, or a program not listed is refused before
//!   anything is spawned.
//! - `posix_spawn` with `POSIX_SPAWN_USEVFORK`, no shell, arguments
//!   verbatim, an empty environment, stdin from the request.
//! - Each run is its own process group, killed whole on timeout, when its
//!   output passes the cap, and when it exits (nothing it started lives on).
//! - At most `max_concurrent` runs at once; one more is refused as busy.
//! - Counters (`{"metrics": true}`): runs, refusals, timeouts, output caps.
#![deny(missing_docs)]

pub mod protocol;
mod server;

pub use server::{Metrics, Sidecar};
