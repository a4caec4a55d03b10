//! What an upload is, read before anything is compiled: a component (or a
//! preview 1 module from Spin's older SDKs, read as the component it
//! becomes), what it imports and whether it exports an HTTP handler.
//! Reading the outer component's import and export sections costs a pass
//! over the bytes; compiling (and Wasmtime's full validation) comes after,
//! in a bounded worker.

use wasmparser::{Encoding, Parser, Payload};

/// The outer component's imports and exports (instance names such as
/// `wasi:http/incoming-handler@0.2.0`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inspected {
    /// Import names, in file order.
    pub imports: Vec<String>,
    /// Export names, in file order.
    pub exports: Vec<String>,
}

/// The interface a component must export to serve HTTP (any 0.2.x), or
/// [`HTTP_HANDLER_P3`].
pub const HTTP_HANDLER: &str = "wasi:http/incoming-handler@0.2.";

/// WASI 0.3's HTTP handler (any 0.3.x).
pub const HTTP_HANDLER_P3: &str = "wasi:http/handler@0.3.";

/// Reads `bytes` as a component and checks it can serve HTTP.
pub fn inspect(bytes: &[u8]) -> Result<Inspected, String> {
    if !bytes.starts_with(b"\0asm") {
        let start: String = bytes
            .iter()
            .take(8)
            .map(|b| std::ascii::escape_default(*b).to_string())
            .collect();
        return Err(format!(
            "not a WebAssembly binary: it starts with \"{start}\", not \"\\0asm\" ({} bytes)",
            bytes.len()
        ));
    }
    let mut out = Inspected::default();
    let mut worker: Option<Vec<u8>> = None;
    let mut script = false;
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|e| format!("not a valid WebAssembly binary: {e}"))?;
        match payload {
            Payload::Version { encoding, .. } => {
                if depth == 0 && encoding == Encoding::Module {
                    // As Spin: a module built by an SDK with wit-bindgen
                    // becomes a component when loaded; read that one.
                    let component = edge_componentize::componentize(bytes)
                        .map_err(|e| format!("this is a core WebAssembly module, not a component, and it cannot be made one: {e}"))?;
                    return inspect(&component);
                }
                depth += 1;
            }
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 1 => {
                for import in reader {
                    let import = import.map_err(|e| format!("reading imports: {e}"))?;
                    out.imports.push(import.name.0.to_string());
                }
            }
            Payload::CustomSection(reader) if depth == 1 => match reader.name() {
                "edge:worker" => worker = Some(reader.data().to_vec()),
                "edge:worker-script" => script = true,
                _ => {}
            },
            Payload::ComponentExportSection(reader) if depth == 1 => {
                for export in reader {
                    let export = export.map_err(|e| format!("reading exports: {e}"))?;
                    out.exports.push(export.name.0.to_string());
                }
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("not a valid WebAssembly binary: it ends inside a section".into());
    }
    if out.exports.is_empty()
        && let Some(section) = &worker
    {
        return worker_script(section, script);
    }
    if !out
        .exports
        .iter()
        .any(|e| e.starts_with(HTTP_HANDLER) || e.starts_with(HTTP_HANDLER_P3))
    {
        let exports = if out.exports.is_empty() {
            "nothing".to_string()
        } else {
            out.exports.join(", ")
        };
        return Err(format!(
            "the component exports neither wasi:http/incoming-handler@0.2.x nor wasi:http/handler@0.3.x (it exports {exports}); edge serves HTTP handlers"
        ));
    }
    Ok(out)
}

/// A Worker script (`workers/build.mjs`): no code of its own, its
/// declaration and its bundle, which the node's Workers engine runs. Its
/// imports are what its bindings use: the engine's key-value interface
/// only if it has KV namespaces.
fn worker_script(section: &[u8], has_script: bool) -> Result<Inspected, String> {
    #[derive(serde::Deserialize)]
    struct Declared {
        engine: Option<u32>,
        #[serde(default)]
        kv_namespaces: Vec<String>,
    }
    let declared: Declared = serde_json::from_slice(section)
        .map_err(|e| format!("its edge:worker section is not valid: {e}"))?;
    if declared.engine.is_none() {
        return Err("it is a Worker without code and without a Workers engine interface: rebuild it with edge's workers/ package".into());
    }
    if !has_script {
        return Err("it is a Worker script without its edge:worker-script section (the bundle): rebuild it with edge's workers/ package".into());
    }
    let mut imports = Vec::new();
    if !declared.kv_namespaces.is_empty() {
        imports.push("wasi:keyvalue/store@0.2.0-draft".to_string());
    }
    Ok(Inspected {
        imports,
        exports: Vec::new(),
    })
}

/// What a component of a version is granted, to check its imports by.
#[derive(Clone, Debug, Default)]
pub struct Grants {
    /// It names key-value stores.
    pub key_value: bool,
    /// It names SQLite databases.
    pub sqlite: bool,
    /// The schemes its `allowed_outbound_hosts` may reach (`*` for any).
    pub schemes: Vec<String>,
    /// Its tenant may run programs through the sidecar.
    pub process: bool,
}

impl Grants {
    fn reaches(&self, scheme: &str) -> bool {
        self.schemes.iter().any(|s| s == scheme || s == "*")
    }
}

/// Interfaces every component may import: the context behind them grants
/// no files, sockets or environment but what the version lists, and every
/// outbound connection is checked against `allowed_outbound_hosts`.
const ALWAYS: &[&str] = &[
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:cli/",
    "wasi:filesystem/",
    "wasi:sockets/",
    "wasi:http/",
    "wasi:config/store@",
    "fermyon:spin/variables@",
    "spin:variables/",
    // Edge runs no models: every inference answers `model-not-supported`.
    "fermyon:spin/llm@",
    "edge:platform/metrics@",
    // Workers' HTMLRewriter: bounded per instance and per host.
    "edge:html/rewriter@",
    // The Workers adapter's one-call request and response heads.
    "edge:worker/exchange@",
];

/// Whether `grants` cover `import`, and what a manifest entry without them
/// lacks, if a manifest key grants it.
fn granted(import: &str, grants: &Grants) -> Option<(bool, &'static str)> {
    use edge_config::GrantKey;
    let g = edge_config::InterfaceGrant::of(import)?;
    let ok = match g.key {
        GrantKey::KeyValueStores => grants.key_value,
        GrantKey::SqliteDatabases => grants.sqlite,
        GrantKey::Outbound(schemes) => schemes.iter().any(|s| grants.reaches(s)),
    };
    Some((ok, g.lacks))
}

/// Checks `imports` against `grants`: an error for the first import edge
/// does not provide or the tenant may not have; for each import of Spin's
/// interfaces its manifest entry does not grant, a note (such imports are
/// linked, as on Spin, whose SDKs for interpreted languages import them
/// all; their calls are refused).
pub fn check_imports(imports: &[String], grants: &Grants) -> Result<Vec<String>, String> {
    let mut notes = Vec::new();
    for import in imports {
        if ALWAYS.iter().any(|p| import.starts_with(p)) {
            continue;
        }
        if let Some((ok, why)) = granted(import, grants) {
            if !ok {
                notes.push(format!(
                    "it imports {import} but {why}: its calls will be refused"
                ));
            }
            continue;
        }
        if import.starts_with("edge:platform/process@") {
            if grants.process {
                continue;
            }
            return Err(format!(
                "it imports {import}, but this tenant may run no programs (an operator grants them: the tenant's `programs`)"
            ));
        }
        if import.starts_with("edge:platform/mixer@") {
            return Err(format!(
                "it imports {import}: mixing rooms are not granted to uploaded apps"
            ));
        }
        return Err(format!(
            "it imports {import}, which edge does not provide (it provides wasi:http, wasi:cli, wasi:io, wasi:clocks, wasi:random, wasi:filesystem, wasi:sockets, wasi:config/store, wasi:keyvalue, edge:html/rewriter and Spin's key-value, variables, sqlite, redis, mqtt, postgres, mysql and llm)"
        ));
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_modules_and_garbage_are_refused_precisely() {
        let module = wasmparser::Parser::is_core_wasm(b"\0asm\x01\0\0\0");
        assert!(module);
        let e = inspect(b"\0asm\x01\0\0\0").unwrap_err();
        assert!(e.contains("core WebAssembly module"), "{e}");
        let e = inspect(b"hello").unwrap_err();
        assert!(
            e.contains("not a WebAssembly binary: it starts with \"hello\""),
            "{e}"
        );
        let e = inspect(b"\0asm\x0d\0\x01").unwrap_err();
        assert!(e.contains("not a valid WebAssembly binary"), "{e}");
        let e = inspect(b"\0asm\x0d\0\x01\0").unwrap_err();
        assert!(
            e.contains(
                "exports neither wasi:http/incoming-handler@0.2.x nor wasi:http/handler@0.3.x"
            ),
            "{e}"
        );
    }

    fn with_section(mut component: Vec<u8>, name: &str, data: &[u8]) -> Vec<u8> {
        let size = 1 + name.len() + data.len();
        assert!(size < 128, "one-byte sizes only");
        component.extend([0, size as u8, name.len() as u8]);
        component.extend(name.as_bytes());
        component.extend(data);
        component
    }

    #[test]
    fn a_worker_script_is_its_declaration_and_its_bundle() {
        let empty = b"\0asm\x0d\0\x01\0".to_vec();
        let declared = with_section(
            empty.clone(),
            "edge:worker",
            br#"{"format":1,"engine":1,"kv_namespaces":["cache"]}"#,
        );
        let script = with_section(declared.clone(), "edge:worker-script", b"var x;");
        let inspected = inspect(&script).unwrap();
        assert_eq!(inspected.imports, ["wasi:keyvalue/store@0.2.0-draft"]);
        let e = inspect(&declared).unwrap_err();
        assert!(e.contains("without its edge:worker-script section"), "{e}");
        // A snapshot Worker's section on a component with no handler.
        let no_engine = with_section(empty.clone(), "edge:worker", br#"{"format":1}"#);
        let e = inspect(&no_engine).unwrap_err();
        assert!(e.contains("without a Workers engine interface"), "{e}");
        let garbage = with_section(empty, "edge:worker", b"{nope");
        let e = inspect(&garbage).unwrap_err();
        assert!(e.contains("edge:worker section is not valid"), "{e}");
    }

    #[test]
    fn imports_need_their_grant() {
        let kv = vec!["wasi:keyvalue/store@0.2.0-draft".to_string()];
        let kv_granted = Grants {
            key_value: true,
            ..Grants::default()
        };
        assert_eq!(check_imports(&kv, &kv_granted), Ok(vec![]));
        let notes = check_imports(&kv, &Grants::default()).unwrap();
        assert!(notes[0].contains("key_value_stores"), "{notes:?}");
        let notes =
            check_imports(&["fermyon:spin/sqlite@2.0.0".into()], &Grants::default()).unwrap();
        assert!(notes[0].contains("sqlite_databases"), "{notes:?}");
        let pg = vec!["spin:postgres/postgres@4.2.0".to_string()];
        let notes = check_imports(&pg, &Grants::default()).unwrap();
        assert!(notes[0].contains("postgres://"), "{notes:?}");
        let reaches = Grants {
            schemes: vec!["*".into()],
            ..Grants::default()
        };
        assert_eq!(check_imports(&pg, &reaches), Ok(vec![]));
        assert!(check_imports(&["wasi:http/types@0.2.3".into()], &Grants::default()).is_ok());
        let e = check_imports(&["acme:secret/thing@1.0.0".into()], &Grants::default()).unwrap_err();
        assert!(e.contains("does not provide"), "{e}");
    }
}
