//! Bindings of Spin's PostgreSQL interfaces.
//!
//! `spin:postgres@4.2.0` also serves components built against 4.0.0 and
//! 4.1.0: Wasmtime links semver-compatible imports to the newest version
//! defined, and the three share their types.

// Generated: its docs are the WIT files'.
#![allow(missing_docs)]

wasmtime::component::bindgen!({
    inline: "
        package edge:spin-postgres;
        world host {
            import fermyon:spin/postgres@2.0.0;
            import spin:postgres/postgres@3.0.0;
            import spin:postgres/postgres@4.2.0;
        }
    ",
    path: [
        "../../wit/spin/fermyon-spin@2.0.0",
        "../../wit/spin/spin-postgres@3.0.0",
        "../../wit/spin/spin-postgres@4.2.0",
    ],
    imports: {
        "spin:postgres/postgres@4.2.0.[method]connection.query-async": trappable,
        "spin:postgres/postgres@4.2.0.[method]connection.execute-async": trappable,
        "spin:postgres/postgres@4.2.0.[static]connection.open-async": trappable,
        "spin:postgres/postgres@4.2.0.[method]connection-builder.build-async": trappable,
        default: async | trappable,
    },
    with: {
        "fermyon:spin/postgres.connection": crate::Connection,
        "spin:postgres/postgres@3.0.0.connection": crate::Connection,
        "spin:postgres/postgres@4.2.0.connection": crate::Connection,
        "spin:postgres/postgres@4.2.0.connection-builder": crate::Builder,
    },
});

pub use fermyon::spin::postgres as v2;
pub use fermyon::spin::rdbms_types as v2types;
pub use spin::postgres3_0_0::postgres as v3;
pub use spin::postgres4_2_0::postgres as v4;
