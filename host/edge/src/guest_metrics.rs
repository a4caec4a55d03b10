//! `edge:platform/metrics`: counters a component reports about its own
//! work, kept in its [`crate::metrics::RouteMetrics`].

use crate::state::HostState;
use wasmtime::component::{HasData, Linker};

mod generated {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "edge:platform/metrics-imports",
    });
}

struct HasMetrics;
impl HasData for HasMetrics {
    type Data<'a> = &'a crate::metrics::RouteMetrics;
}

impl generated::edge::platform::metrics::Host for &crate::metrics::RouteMetrics {
    fn counter_add(&mut self, name: String, value: u64) -> bool {
        self.guest.add(&name, value)
    }
}

/// Adds `edge:platform/metrics` to a linker.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    generated::edge::platform::metrics::add_to_linker::<HostState, HasMetrics>(linker, |s| {
        s.metrics.as_ref()
    })
}
