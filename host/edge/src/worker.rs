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
