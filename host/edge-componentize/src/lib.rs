//! Spin's older SDKs (Rust `spin-sdk` up to 5.x, Go, and others built
//! for `wasm32-wasip1`) produce core modules, not components: the module
//! imports WASI preview 1 and carries its component interfaces in a
//! `component-type` custom section written by wit-bindgen. Spin turns
//! such a module into a component when it loads it; so do we, with the
//! same tools: `wit-component`'s encoder and Wasmtime's preview 1 adapter
//! (a reactor: the component exports the handler, no `_start`).
//!
//! ```
//! // A component is returned as it is.
//! let component = b"\0asm\x0d\0\x01\0";
//! assert!(matches!(
//!     edge_componentize::componentize_if_module(component),
//!     Ok(std::borrow::Cow::Borrowed(_))
//! ));
//! ```
#![deny(missing_docs)]

use std::borrow::Cow;
use wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER;
use wasmparser::{Encoding, Parser, Payload};
use wit_component::ComponentEncoder;

/// Why a binary could not be made a component.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not a WebAssembly binary at all.
    #[error("not a WebAssembly module or component: {0}")]
    NotWasm(String),
    /// A core module without the interface description wit-bindgen
    /// writes: nothing says which component it should become.
    #[error(
        "a WebAssembly module without component interfaces (no `component-type` section written by wit-bindgen): build it with an SDK that targets components, or as a component (wasm32-wasip2)"
    )]
    NoInterfaces,
    /// The encoder refused the module.
    #[error("turning the module into a component: {0:#}")]
    Encode(String),
}

/// Whether `bytes` is a core module (`Some(false)`), a component
/// (`Some(true)`) or neither (`None`).
pub fn is_component(bytes: &[u8]) -> Option<bool> {
    match Parser::new(0).parse_all(bytes).next()? {
        Ok(Payload::Version { encoding, .. }) => Some(encoding == Encoding::Component),
        _ => None,
    }
}

/// `bytes` as a component: unchanged if it is one, adapted if it is a
/// preview 1 module with wit-bindgen's interface description.
pub fn componentize_if_module(bytes: &[u8]) -> Result<Cow<'_, [u8]>, Error> {
    match is_component(bytes) {
        Some(true) => Ok(Cow::Borrowed(bytes)),
        Some(false) => componentize(bytes).map(Cow::Owned),
        None => Err(Error::NotWasm("no WebAssembly header".into())),
    }
}

/// Adapts a preview 1 core module to a component.
pub fn componentize(module: &[u8]) -> Result<Vec<u8>, Error> {
    if !has_component_type(module)? {
        return Err(Error::NoInterfaces);
    }
    ComponentEncoder::default()
        .validate(true)
        .module(module)
        .and_then(|e| {
            e.adapter(
                "wasi_snapshot_preview1",
                WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            )
        })
        .and_then(|mut e| e.encode())
        .map_err(|e| Error::Encode(format!("{e:#}")))
}

fn has_component_type(module: &[u8]) -> Result<bool, Error> {
    for payload in Parser::new(0).parse_all(module) {
        match payload {
            Ok(Payload::CustomSection(s)) if s.name().starts_with("component-type") => {
                return Ok(true);
            }
            Ok(_) => {}
            Err(e) => return Err(Error::NotWasm(e.to_string())),
        }
    }
    Ok(false)
}

/// The names a component imports at its top level (`wasi:http/types@0.2.6`,
/// `spin:postgres/postgres@4.0.0`, ...); nested components' and modules'
/// imports are not counted.
pub fn component_imports(component: &[u8]) -> Result<Vec<String>, Error> {
    let mut names = Vec::new();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(component) {
        match payload.map_err(|e| Error::NotWasm(e.to_string()))? {
            Payload::Version { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 1 => {
                for import in reader {
                    let import = import.map_err(|e| Error::NotWasm(e.to_string()))?;
                    names.push(import.name.0.to_string());
                }
            }
            _ => {}
        }
    }
    Ok(names)
}

/// How many core module instances one instance of `component` makes:
/// every `instantiate` of a core module in it. `None` when a nested
/// component instantiates modules (it may itself be instantiated any
/// number of times); the nested components toolchains add to re-export
/// interfaces instantiate none.
pub fn core_instantiations(component: &[u8]) -> Result<Option<u32>, Error> {
    let mut count = 0u32;
    // Components and modules open around the current payload.
    let mut components = 0usize;
    let mut open = Vec::new();
    for payload in Parser::new(0).parse_all(component) {
        match payload.map_err(|e| Error::NotWasm(e.to_string()))? {
            Payload::Version { encoding, .. } => {
                let is_component = encoding == Encoding::Component;
                components += usize::from(is_component);
                open.push(is_component);
            }
            Payload::End(_) if open.pop() == Some(true) => components -= 1,
            Payload::InstanceSection(reader) => {
                for instance in reader {
                    let instance = instance.map_err(|e| Error::NotWasm(e.to_string()))?;
                    if matches!(instance, wasmparser::Instance::Instantiate { .. }) {
                        if components > 1 {
                            return Ok(None);
                        }
                        count = count.saturating_add(1);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(Some(count))
}

/// The payload of the component's own (top-level) custom section `name`,
/// if it has one; sections of nested modules and components are skipped
/// without being parsed.
pub fn top_level_custom_section<'a>(
    component: &'a [u8],
    name: &str,
) -> Result<Option<&'a [u8]>, Error> {
    let mut parser = Parser::new(0);
    let mut rest = component;
    loop {
        let chunk = parser
            .parse(rest, true)
            .map_err(|e| Error::NotWasm(e.to_string()))?;
        let wasmparser::Chunk::Parsed { consumed, payload } = chunk else {
            return Ok(None);
        };
        rest = &rest[consumed..];
        match payload {
            Payload::CustomSection(reader) if reader.name() == name => {
                return Ok(Some(reader.data()));
            }
            Payload::ModuleSection {
                unchecked_range, ..
            }
            | Payload::ComponentSection {
                unchecked_range, ..
            } => {
                // The outer parser goes on past the nested one's bytes.
                rest = &rest[unchecked_range.end - unchecked_range.start..];
            }
            Payload::End(_) => return Ok(None),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_instances_are_counted_and_unknown_in_a_nested_component() {
        let module = wasm_encoder::Module::new();
        // (component (core module $m ...) (core instance (instantiate $m)) x2)
        let mut c = wasm_encoder::Component::new();
        c.section(&wasm_encoder::ModuleSection(&module));
        let mut instances = wasm_encoder::InstanceSection::new();
        instances.instantiate(0, std::iter::empty::<(&str, wasm_encoder::ModuleArg)>());
        instances.instantiate(0, std::iter::empty::<(&str, wasm_encoder::ModuleArg)>());
        c.section(&instances);
        assert_eq!(core_instantiations(&c.finish()).unwrap(), Some(2));
        // The same inside a nested component: not known.
        let mut inner = wasm_encoder::Component::new();
        inner.section(&wasm_encoder::ModuleSection(&module));
        let mut one = wasm_encoder::InstanceSection::new();
        one.instantiate(0, std::iter::empty::<(&str, wasm_encoder::ModuleArg)>());
        inner.section(&one);
        let mut outer = wasm_encoder::Component::new();
        outer.section(&wasm_encoder::NestedComponentSection(&inner));
        assert_eq!(core_instantiations(&outer.finish()).unwrap(), None);
    }

    #[test]
    fn a_plain_module_is_refused_with_what_to_do() {
        // (module) with nothing in it.
        let empty = b"\0asm\x01\0\0\0";
        let err = componentize_if_module(empty).unwrap_err();
        assert!(matches!(err, Error::NoInterfaces), "{err}");
        assert!(err.to_string().contains("wasm32-wasip2"));
    }

    #[test]
    fn a_top_level_custom_section_is_found_past_nested_modules() {
        // A component holding a module whose own custom section has the
        // same name, then the component's section.
        let module = [
            b"\0asm\x01\0\0\0".as_slice(),
            &[0, 12, 6],
            b"edge:w",
            b"inner",
        ]
        .concat();
        let c = [
            b"\0asm\x0d\0\x01\0".as_slice(),
            &[1, module.len() as u8],
            &module,
            &[0, 10, 6],
            b"edge:w",
            b"out",
        ]
        .concat();
        assert_eq!(
            top_level_custom_section(&c, "edge:w").unwrap(),
            Some(b"out".as_slice())
        );
        assert_eq!(top_level_custom_section(&c, "other").unwrap(), None);
    }

    #[test]
    fn garbage_is_not_wasm() {
        assert!(matches!(
            componentize_if_module(b"hello"),
            Err(Error::NotWasm(_))
        ));
    }
}
