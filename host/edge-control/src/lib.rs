//! The control plane: tenants deploy, version and roll back their own
//! components through an HTTP API, and the node serves what the database
//! says.
//!
//! - [`db`]: SQLite in the data directory by default, MariaDB in
//!   production, one set of migrations and queries ([`store`]);
//! - [`blobs`]: uploaded components by content digest;
//! - [`inspect`]: what an upload is before it is compiled;
//! - [`api`]: the HTTP API, its authentication and its tenant checks;
//! - [`model`]: the objects, as JSON and as stored, and [`model::Desired`],
//!   what the node is asked to serve.
//!
//! The node (the `edge` host) implements [`api::Node`]: compiling uploads
//! in a bounded worker and applying a desired state through the same
//! build-then-swap path as a config reload.
#![deny(missing_docs)]

pub mod api;
pub mod blobs;
pub mod db;
pub mod inspect;
pub mod model;
pub mod registry;
pub mod secret;
pub mod spin_app;
pub mod store;
pub mod variables;

pub use api::{Control, Node, SmokeRequest, router};
pub use db::Db;
