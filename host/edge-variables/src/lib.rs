//! Variables capability: `wasi:config/store` (WIT in `wit/deps/config`).
//!
//! A component gets this import only if its manifest entry declares
//! `[component.NAME.variables]`. Values are resolved once per config load
//! (templates, tenant values, secrets; see `edge-config`) and shared by all
//! instances, so preparing a store costs one reference-count increment.
//!
//! ```
//! use std::collections::BTreeMap;
//! let mut values = BTreeMap::new();
//! values.insert("greeting".to_string(), "hello".to_string());
//! let vars = edge_variables::Variables::from_map(&values);
//! assert_eq!(vars.get("greeting"), Some("hello"));
//! ```
#![deny(missing_docs)]

pub mod spin;

use std::collections::BTreeMap;
use std::sync::Arc;
use wasmtime::component::Linker;
use wasmtime_wasi_config::{WasiConfig, WasiConfigVariables};

/// The resolved variables of one component for one tenant.
#[derive(Clone, Default)]
pub struct Variables {
    shared: Arc<(WasiConfigVariables, BTreeMap<String, String>)>,
    /// The component's id in its manifest, for Spin's error words.
    component: Arc<str>,
}

impl Variables {
    /// Variables from resolved name/value pairs.
    pub fn from_map(values: &BTreeMap<String, String>) -> Self {
        let wasi: WasiConfigVariables = values
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Self {
            shared: Arc::new((wasi, values.clone())),
            component: Arc::from(""),
        }
    }

    /// These variables as `component`'s (its id as the manifest writes it).
    pub fn for_component(mut self, component: &str) -> Self {
        self.component = component.into();
        self
    }

    /// The component's id.
    pub fn component(&self) -> &str {
        &self.component
    }

    /// Every name and value.
    pub fn all(&self) -> impl Iterator<Item = (&str, &str)> {
        self.shared.1.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Whether both hold the same names and values.
    pub fn same_values(&self, other: &Variables) -> bool {
        self.shared.1 == other.shared.1
    }

    /// One value by name.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.shared.1.get(name).map(String::as_str)
    }
}

/// Store data that carries a component's [`Variables`].
pub trait VariablesView {
    /// The variables of the component running in this store.
    fn variables(&mut self) -> &Variables;
}

/// Adds `wasi:config/store` to a linker.
pub fn add_to_linker<T: VariablesView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wasmtime_wasi_config::add_to_linker(linker, |t: &mut T| {
        WasiConfig::new(&t.variables().shared.0)
    })
}
