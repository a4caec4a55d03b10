//! Workers: components built from Cloudflare-style Workers by `workers/`
//! (the adapter and StarlingMonkey). Such a component declares itself in a
//! top-level custom section, `edge:worker` (JSON), which the host reads to
//! serve it as Workers run: warm instances shared by its requests (an
//! isolate, [`edge_config::InstanceMode::isolate`]) unless the config says
//! otherwise, and the PoP's name and country for `request.cf`.

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// The section's name.
pub const SECTION: &str = "edge:worker";

/// The section's format this host reads.
const FORMAT: u32 = 1;

/// What a Worker component declares about itself.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Declaration {
    /// Its section's format.
    format: u32,
    /// `compatibility_date` from its wrangler.toml, if any.
    #[serde(default)]
    pub compatibility_date: Option<String>,
    /// Variables its secrets are read from (lower-case binding names).
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Key-value store labels its KV namespace bindings open.
    #[serde(default)]
    pub kv_namespaces: Vec<String>,
    /// Apps its service bindings call.
    #[serde(default)]
    pub services: Vec<String>,
    /// For a Worker *script* (no engine of its own): the Workers engine
    /// interface it was built for ([`ENGINE_ABI`]).
    #[serde(default)]
    pub engine: Option<u32>,
}

impl Declaration {
    /// The declaration of the component with these bytes, if it is a Worker.
    /// Bytes that are not a component declare nothing (compiling them says
    /// what is wrong); a Worker's section that does not parse is an error.
    pub fn of(component: &[u8]) -> Result<Option<Self>> {
        let Ok(Some(section)) = edge_componentize::top_level_custom_section(component, SECTION)
        else {
            return Ok(None);
        };
        let declared: Declaration = serde_json::from_slice(section)
            .with_context(|| format!("its {SECTION} section is not valid"))?;
        if declared.format != FORMAT {
            bail!(
                "its {SECTION} section has format {}, this host reads format {FORMAT}: rebuild the Worker with this edge's workers/ package",
                declared.format
            );
        }
        Ok(Some(declared))
    }
}

/// The section a Worker script's bundle is in.
pub const SCRIPT_SECTION: &str = "edge:worker-script";

/// The section that marks the Workers engine, with its interface version.
pub const ENGINE_SECTION: &str = "edge:worker-engine";

/// The Workers engine interface this host runs scripts through: the
/// engine's `edge:worker/script` import and the bundle's shape
/// (`workers/runtime/script.js`).
pub const ENGINE_ABI: u32 = 1;

/// The interface the engine imports its Worker's bundle through.
const SCRIPT_INTERFACE: &str = "edge:worker/script@0.1.0";

/// The bundle of a Worker script.
pub fn script_of(component: &[u8], declared: &Declaration) -> Result<std::sync::Arc<str>> {
    if declared.engine != Some(ENGINE_ABI) {
        bail!(
            "it is a Worker script for Workers engine interface {:?}; this host runs interface {ENGINE_ABI}: rebuild the Worker with this edge's workers/ package",
            declared.engine
        );
    }
    let bytes = edge_componentize::top_level_custom_section(component, SCRIPT_SECTION)
        .ok()
        .flatten()
        .with_context(|| format!("it is a Worker script without its {SCRIPT_SECTION} section"))?;
    let text = std::str::from_utf8(bytes)
        .with_context(|| format!("its {SCRIPT_SECTION} section is not UTF-8"))?;
    Ok(text.into())
}

/// Checks that `component` is a Workers engine for [`ENGINE_ABI`].
pub fn check_engine(component: &[u8]) -> Result<()> {
    #[derive(Deserialize)]
    struct Engine {
        abi: u32,
    }
    let section = edge_componentize::top_level_custom_section(component, ENGINE_SECTION)
        .ok()
        .flatten()
        .with_context(|| format!("it is not a Workers engine (no {ENGINE_SECTION} section): build it with `node workers/build.mjs --engine`"))?;
    let engine: Engine = serde_json::from_slice(section)
        .with_context(|| format!("its {ENGINE_SECTION} section is not valid"))?;
    if engine.abi != ENGINE_ABI {
        bail!(
            "it is a Workers engine for interface {}; this host runs interface {ENGINE_ABI}: rebuild it with this edge's workers/ package",
            engine.abi
        );
    }
    Ok(())
}

/// Where the Workers engine is: `given` (`[server] workers_engine`), else
/// `build/workers/engine.wasm` above the working directory or the `edge`
/// binary (a checkout where `make workers` ran).
pub fn engine_path(given: Option<&std::path::Path>) -> Option<std::path::PathBuf> {
    match given {
        Some(path) => Some(path.to_path_buf()),
        None => find_above("build/workers/engine.wasm"),
    }
}

/// `relative` (a file) in the nearest directory above the working
/// directory, or else above the `edge` binary, that has it: where a
/// checkout's files are found from wherever edge runs in it.
pub fn find_above(relative: &str) -> Option<std::path::PathBuf> {
    let starts = [std::env::current_dir().ok(), std::env::current_exe().ok()];
    starts.into_iter().flatten().find_map(|start| {
        start
            .ancestors()
            .map(|d| d.join(relative))
            .find(|p| p.is_file())
    })
}

/// Links `edge:worker/script`: the engine asks its store for the script
/// it runs (a store of any other component has none, and the call traps).
pub fn add_to_linker(
    linker: &mut wasmtime::component::Linker<crate::state::HostState>,
) -> wasmtime::Result<()> {
    linker
        .instance(SCRIPT_INTERFACE)?
        .func_wrap("source", |store, (): ()| {
            let state: &crate::state::HostState = store.data();
            match &state.script {
                Some(script) => Ok((script.to_string(),)),
                None => wasmtime::bail!("{SCRIPT_INTERFACE}: this component runs no Worker script"),
            }
        })
}

/// The interface the engine exports its deploy-time check through.
const CHECK_INTERFACE: &str = "edge:worker/check@0.1.0";

/// Runs the top level of `target`'s Worker script in the Workers engine,
/// as its first request would, under the target's limits: a deploy is
/// refused with the engine's error (and the line in worker.js) rather than
/// every request failing with it. Targets that are not scripts pass.
pub async fn check_top_level(target: &std::sync::Arc<crate::app::Target>) -> Result<(), String> {
    let Ok(prepared) = &target.prepared else {
        return Ok(());
    };
    let (Some(_), crate::app::Entry::P2(pre)) = (&prepared.script, &prepared.entry) else {
        return Ok(());
    };
    let clock = crate::lanes::CallClock::new(target.share.clone());
    let deadline = std::time::Instant::now() + target.deadline;
    let mut store = crate::invoke::new_store(target, deadline, clock);
    let failed = |e: wasmtime::Error| format!("the Workers engine failed: {e:#}");
    let run = async {
        let instance = pre
            .instance_pre()
            .instantiate_async(&mut store)
            .await
            .map_err(failed)?;
        let interface = instance
            .get_export_index(&mut store, None, CHECK_INTERFACE)
            .ok_or_else(|| format!("the Workers engine exports no {CHECK_INTERFACE}"))?;
        let run = instance
            .get_export_index(&mut store, Some(&interface), "run")
            .ok_or_else(|| format!("the Workers engine's {CHECK_INTERFACE} has no `run`"))?;
        let run = instance
            .get_typed_func::<(), (String,)>(&mut store, run)
            .map_err(failed)?;
        let (error,) = run.call_async(&mut store, ()).await.map_err(failed)?;
        Ok::<_, String>(error)
    };
    let error = tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), run)
        .await
        .map_err(|_| {
            format!(
                "its top level ran past the request deadline ({} ms)",
                target.deadline.as_millis()
            )
        })??;
    if error.is_empty() {
        Ok(())
    } else {
        Err(format!("the Worker throws at top level: {error}"))
    }
}

/// Environment variables a Worker's adapter reads for `request.cf`.
pub fn cf_environment(pop: Option<&str>, country: Option<&str>) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if let Some(pop) = pop {
        env.push(("EDGE_COLO".to_string(), pop.to_string()));
    }
    if let Some(country) = country {
        env.push(("EDGE_COUNTRY".to_string(), country.to_string()));
    }
    env
}

/// The environment variable naming, for each host of the sites a Worker
/// serves, the site's origin: where `ctx.passThroughOnException()` sends a
/// request whose handler threw (`EDGE_ORIGINS`, JSON `{host: origin}`).
pub fn origins_environment<'a>(
    sites: impl Iterator<Item = &'a edge_config::Site>,
) -> Option<(String, String)> {
    let mut origins = serde_json::Map::new();
    for site in sites {
        for host in &site.hosts {
            origins.insert(host.to_ascii_lowercase(), site.origin.clone().into());
        }
    }
    (!origins.is_empty()).then(|| {
        (
            "EDGE_ORIGINS".to_string(),
            serde_json::Value::Object(origins).to_string(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component_with(section: &[u8]) -> Vec<u8> {
        let name = SECTION.as_bytes();
        let mut c = b"\0asm\x0d\0\x01\0".to_vec();
        c.push(0);
        c.push((1 + name.len() + section.len()) as u8);
        c.push(name.len() as u8);
        c.extend_from_slice(name);
        c.extend_from_slice(section);
        c
    }

    #[test]
    fn a_worker_declares_itself() {
        let c = component_with(br#"{"format":1,"secrets":["api_key"],"kv_namespaces":["cache"]}"#);
        let d = Declaration::of(&c).unwrap().unwrap();
        assert_eq!(d.secrets, ["api_key"]);
        assert_eq!(d.kv_namespaces, ["cache"]);
        assert!(Declaration::of(b"\0asm\x0d\0\x01\0").unwrap().is_none());
        assert!(Declaration::of(b"this is not wasm").unwrap().is_none());
    }

    fn with_section(mut component: Vec<u8>, name: &str, data: &[u8]) -> Vec<u8> {
        component.push(0);
        component.push((1 + name.len() + data.len()) as u8);
        component.push(name.len() as u8);
        component.extend_from_slice(name.as_bytes());
        component.extend_from_slice(data);
        component
    }

    #[test]
    fn a_script_is_run_only_by_the_engine_interface_it_was_built_for() {
        let script = with_section(
            component_with(br#"{"format":1,"engine":1}"#),
            SCRIPT_SECTION,
            b"var x = 1;",
        );
        let declared = Declaration::of(&script).unwrap().unwrap();
        assert_eq!(&*script_of(&script, &declared).unwrap(), "var x = 1;");
        let newer = component_with(br#"{"format":1,"engine":2}"#);
        let declared = Declaration::of(&newer).unwrap().unwrap();
        let e = script_of(&newer, &declared).unwrap_err();
        assert!(format!("{e:#}").contains("interface Some(2)"), "{e:#}");
        let bare = component_with(br#"{"format":1,"engine":1}"#);
        let declared = Declaration::of(&bare).unwrap().unwrap();
        let e = script_of(&bare, &declared).unwrap_err();
        assert!(
            format!("{e:#}").contains("without its edge:worker-script section"),
            "{e:#}"
        );
    }

    #[test]
    fn an_engine_says_which_interface_it_runs() {
        let empty = b"\0asm\x0d\0\x01\0".to_vec();
        assert!(
            check_engine(&with_section(
                empty.clone(),
                ENGINE_SECTION,
                br#"{"abi":1}"#
            ))
            .is_ok()
        );
        let e = check_engine(&with_section(
            empty.clone(),
            ENGINE_SECTION,
            br#"{"abi":7}"#,
        ))
        .unwrap_err();
        assert!(format!("{e:#}").contains("interface 7"), "{e:#}");
        let e = check_engine(&empty).unwrap_err();
        assert!(format!("{e:#}").contains("not a Workers engine"), "{e:#}");
    }

    #[test]
    fn a_newer_format_or_garbage_is_refused_with_the_reason() {
        let e = Declaration::of(&component_with(br#"{"format":2}"#)).unwrap_err();
        assert!(
            format!("{e:#}").contains("format 2, this host reads format 1"),
            "{e:#}"
        );
        let e = Declaration::of(&component_with(b"{nope")).unwrap_err();
        assert!(format!("{e:#}").contains("not valid"), "{e:#}");
    }
}
