//! `edge-sidecar`: runs programs that cannot run in a sandbox, for the
//! host's components, under its own rules.
//!
//! - Only processes of its own user connect, and none that it runs (nor
//!   their descendants: it is their child subreaper, so it stays their
//!   ancestor); others are refused on connecting (`SO_PEERCRED`, then the
//!   peer's ancestry read under a pidfd).
//! - Only programs on `[sidecar] allow` (absolute, normalised paths) run,
//!   and only for a tenant whose `sidecar_programs` grant them (read from
//!   the same edge-config, again when it changes; tenants it does not
//!   have, the control plane's, from the grants the host publishes beside
//!   the socket, [`publish_grants`]); a relative path, a
//!   `..`, a program not listed or not granted is refused before anything
//!   is spawned.
//! - The socket is created mode 0600 in a directory of mode 0700; one in
//!   a directory another user may write is refused (that user could bind
//!   it first), and the client ([`protocol::call`]) speaks only to a
//!   server of its own user.
//! - No shell, arguments verbatim (at most `protocol::MAX_ARGS` of at
//!   most `protocol::MAX_ARG_BYTES` in all), an empty environment, stdin
//!   from the request; each program starts with `[sidecar] child_*` resource
//!   limits, `no_new_privs`, and no descriptor but its three pipes.
//! - Each run is its own process group, killed whole on timeout, when its
//!   output passes the cap, and when it exits; descendants that left the
//!   group are killed when found orphaned (nothing it started lives on).
//! - At most `max_concurrent` runs at once, `max_concurrent_per_tenant`
//!   of one tenant's (half by default, so one tenant never takes them
//!   all); one more is refused as busy.
//! - Counters (`{"metrics": true}`): runs, refusals, refused peers,
//!   timeouts, output caps.
#![deny(missing_docs)]

pub mod protocol;
mod published;
mod server;

pub use published::{grants_file as published_grants_file, publish_grants};
pub use server::{Grants, Metrics, Sidecar, grants_of};
