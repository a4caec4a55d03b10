//! A Spin manifest (version 2) as a version of an app: its HTTP-triggered
//! components with their local sources and grants, its routes, and its
//! app variables. What edge cannot serve (sources from a URL or registry,
//! triggers other than HTTP) is refused with the key that names it.

use crate::model::{ComponentSpec, RouteSpec, VariableDecl, VersionSpec};
use serde::Deserialize;
use std::collections::BTreeMap;

/// A parsed manifest: the version it makes (digests left empty) and each
/// component's source file.
#[derive(Debug)]
pub struct SpinApp {
    /// `[application] name`, lower-cased.
    pub name: String,
    /// The version, components' `digest` empty until uploaded.
    pub spec: VersionSpec,
    /// Component id → source path (relative to the manifest).
    pub sources: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct Manifest {
    spin_manifest_version: toml::Value,
    application: Application,
    #[serde(default)]
    variables: BTreeMap<String, VariableDecl>,
    #[serde(default)]
    trigger: BTreeMap<String, Vec<Trigger>>,
    #[serde(default)]
    component: BTreeMap<String, Component>,
}

#[derive(Deserialize)]
struct Application {
    name: String,
}

#[derive(Deserialize)]
struct Trigger {
    #[serde(default)]
    route: Option<toml::Value>,
    component: toml::Value,
}

#[derive(Deserialize)]
struct Component {
    source: toml::Value,
    #[serde(default)]
    key_value_stores: Vec<String>,
    #[serde(default)]
    sqlite_databases: Vec<String>,
    #[serde(default)]
    allowed_outbound_hosts: Vec<String>,
    #[serde(default)]
    variables: BTreeMap<String, String>,
}

/// Parses `text` (a `spin.toml`).
pub fn parse(text: &str) -> Result<SpinApp, String> {
    let m: Manifest = toml::from_str(text).map_err(|e| format!("spin.toml: {e}"))?;
    if m.spin_manifest_version.as_integer() != Some(2)
        && m.spin_manifest_version.as_str() != Some("2")
    {
        return Err("spin.toml: spin_manifest_version: edge reads version 2".into());
    }
    if let Some(kind) = m.trigger.keys().find(|k| *k != "http") {
        return Err(format!(
            "spin.toml: trigger.{kind}: edge serves HTTP triggers only"
        ));
    }
    let mut spec = VersionSpec {
        components: BTreeMap::new(),
        routes: Vec::new(),
        variables: m.variables,
    };
    let mut sources = BTreeMap::new();
    for (i, t) in m.trigger.get("http").into_iter().flatten().enumerate() {
        let at = format!("spin.toml: trigger.http[{i}]");
        let Some(id) = t.component.as_str() else {
            return Err(format!(
                "{at}.component: a component id (inline components are not supported)"
            ));
        };
        let route = match &t.route {
            Some(toml::Value::String(r)) => r.clone(),
            // `{ private = true }`: reachable only by service chaining.
            Some(toml::Value::Table(t)) if t.contains_key("private") => continue,
            _ => return Err(format!("{at}.route: a route such as \"/...\"")),
        };
        let c = m
            .component
            .get(id)
            .ok_or_else(|| format!("{at}.component: no [component.{id}] in the manifest"))?;
        spec.routes.push(RouteSpec {
            route,
            component: id.to_string(),
        });
        if spec.components.contains_key(id) {
            continue;
        }
        let source = c.source.as_str().ok_or_else(|| {
            format!("spin.toml: component.{id}.source: a file in the app (a URL or registry source is not supported)")
        })?;
        sources.insert(id.to_string(), source.to_string());
        spec.components.insert(
            id.to_string(),
            ComponentSpec {
                digest: String::new(),
                key_value_stores: c.key_value_stores.clone(),
                sqlite_databases: c.sqlite_databases.clone(),
                allowed_outbound_hosts: c.allowed_outbound_hosts.clone(),
                variables: c.variables.clone(),
            },
        );
    }
    if spec.routes.is_empty() {
        return Err("spin.toml: no [[trigger.http]] with a route".into());
    }
    Ok(SpinApp {
        name: m.application.name.to_ascii_lowercase(),
        spec,
        sources,
    })
}

/// `path` as a normal relative path inside an archive (`./a/b` → `a/b`),
/// or `None` if it leaves the archive.
pub fn normal_path(path: &str) -> Option<String> {
    let mut parts = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => return None,
            p => parts.push(p),
        }
    }
    (!path.starts_with('/') && !parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_become_versions() {
        let app = parse(
            r#"spin_manifest_version = 2
[application]
name = "Shop"
[variables]
api_key = { required = true, secret = true }
[[trigger.http]]
route = "/api/..."
component = "api"
[[trigger.http]]
route = { private = true }
component = "api"
[component.api]
source = "target/api.wasm"
key_value_stores = ["default"]
[component.api.variables]
key = "{{ api_key }}"
[component.api.build]
command = "cargo build"
"#,
        )
        .unwrap();
        assert_eq!(app.name, "shop");
        assert_eq!(app.sources["api"], "target/api.wasm");
        assert_eq!(app.spec.routes.len(), 1);
        assert!(app.spec.variables["api_key"].secret);
        assert_eq!(app.spec.components["api"].variables["key"], "{{ api_key }}");
    }

    #[test]
    fn what_edge_cannot_serve_is_named() {
        let e = parse("spin_manifest_version = 2\n[application]\nname = \"a\"\n[[trigger.redis]]\ncomponent = \"x\"\n").unwrap_err();
        assert!(e.contains("trigger.redis"), "{e}");
        let e = parse("spin_manifest_version = 2\n[application]\nname = \"a\"\n[[trigger.http]]\nroute = \"/\"\ncomponent = \"x\"\n[component.x]\nsource = { url = \"https://x\", digest = \"sha256:0\" }\n").unwrap_err();
        assert!(e.contains("component.x.source"), "{e}");
        assert_eq!(normal_path("./a/./b.wasm").as_deref(), Some("a/b.wasm"));
        assert_eq!(normal_path("../x"), None);
        assert_eq!(normal_path("/etc/passwd"), None);
    }
}
