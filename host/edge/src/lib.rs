//! The `edge` host: serves `wasi:http` components described by a Spin
//! manifest, under the limits and tenants of an edge-config file.
//!
//! Modules follow the request path: [`server`] accepts and routes,
//! [`invoke`] and [`session`] run guests, [`respond`] maps failures to
//! status codes; [`app`] and [`engine`] build what they use; [`reload`]
//! swaps configs; [`admin`] and [`metrics`] report.

pub mod admin;
pub mod app;
pub mod body;
pub mod conn;
pub mod console;
pub mod control;
pub mod control_listener;
pub mod engine;
pub mod exchange;
pub mod files;
pub mod forwarded;
pub mod guest_log;
pub mod guest_metrics;
pub mod history;
pub mod invoke;
pub mod lanes;
pub mod metrics;
pub mod name_lookup;
pub mod open_files;
pub mod outgoing_handler;
pub mod panics;
pub mod read_dir;
pub mod reload;
pub mod respond;
pub mod routes;
pub mod server;
pub mod services;
pub mod session;
pub mod share;
pub mod sockets;
pub mod state;
pub mod worker;
