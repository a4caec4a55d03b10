//! Signing for the conferencing service and its billing: JWT join tokens
//! ([`jwt`], [`presets`], verified for a room by [`join`]), the callers
//! allowed to ask for them ([`clients`]) and row signatures ([`row`]). One
//! implementation, used by `components/signer` (Wasm) and the MariaDB UDF
//! library (native).
//!
//! Only RustCrypto / dalek primitives (`hmac`, `sha2`, `ed25519-dalek`,
//! `p256`); nothing here is hand-written cryptography.
#![deny(missing_docs)]

pub mod clients;
pub mod join;
pub mod jwt;
pub mod keyfile;
pub mod keys;
pub mod presets;
pub mod row;

pub use keys::{Algorithm, Key, KeyError, KeySet};
