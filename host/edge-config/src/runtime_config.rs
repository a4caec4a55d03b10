//! Spin's runtime configuration file (`spin up --runtime-config-file`):
//! where an app's stores and databases live and where its variables come
//! from, without touching the app.
//!
//! ```toml
//! [key_value_store.default]
//! type = "spin"
//! path = "data/kv.redb"         # relative to this file
//!
//! [sqlite_database.default]
//! type = "spin"
//! path = "data/app.db"
//!
//! [[variables_provider]]
//! type = "env"
//! prefix = "MYAPP"              # MYAPP_API_TOKEN gives api_token
//! dotenv_path = ".env"
//! ```
//!
//! Types edge does not provide (`redis`, `azure_cosmos`, `libsql`,
//! `vault`, ...) are refused with the position of the `type` key.

use crate::error::{ConfigError, SourceFile};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// What a runtime configuration file sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Key-value store files by label.
    pub key_value_stores: BTreeMap<String, PathBuf>,
    /// SQLite database files by label.
    pub sqlite_databases: BTreeMap<String, PathBuf>,
    /// Variables found by the providers, by variable name (the first
    /// provider that has one wins).
    pub variables: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    key_value_store: BTreeMap<String, Spanned<Store>>,
    #[serde(default)]
    sqlite_database: BTreeMap<String, Spanned<Store>>,
    #[serde(default)]
    variables_provider: Vec<Spanned<Provider>>,
}

#[derive(Deserialize)]
struct Store {
    #[serde(rename = "type")]
    kind: Spanned<String>,
    #[serde(default)]
    path: Option<Spanned<String>>,
    #[serde(flatten)]
    _other: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Provider {
    #[serde(rename = "type")]
    kind: Spanned<String>,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    dotenv_path: Option<Spanned<String>>,
}

/// Reads and checks `path`; variables from the providers are looked up
/// for `names` (the app's variables).
pub fn load(path: &Path, names: &[String]) -> Result<RuntimeConfig, ConfigError> {
    let src = SourceFile::read(path)?;
    let file: File = toml::from_str(&src.text).map_err(|e| src.toml_error(&e))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut out = RuntimeConfig::default();
    for (section, stores, target) in [
        (
            "key_value_store",
            &file.key_value_store,
            &mut out.key_value_stores,
        ),
        (
            "sqlite_database",
            &file.sqlite_database,
            &mut out.sqlite_databases,
        ),
    ] {
        for (label, store) in stores {
            let store = store.get_ref();
            let key = format!("{section}.{label}.type");
            if store.kind.get_ref() != "spin" {
                return Err(src.error(
                    Some(store.kind.span()),
                    Some(key),
                    format!(
                        "type {:?} is not provided by edge (allowed: \"spin\", a local file)",
                        store.kind.get_ref()
                    ),
                ));
            }
            if let Some(p) = &store.path {
                target.insert(label.clone(), dir.join(p.get_ref()));
            }
        }
    }
    for (i, provider) in file.variables_provider.iter().enumerate() {
        let provider = provider.get_ref();
        if provider.kind.get_ref() != "env" {
            return Err(src.error(
                Some(provider.kind.span()),
                Some(format!("variables_provider[{i}].type")),
                format!(
                    "type {:?} is not provided by edge (allowed: \"env\")",
                    provider.kind.get_ref()
                ),
            ));
        }
        let prefix = provider.prefix.as_deref().unwrap_or("SPIN_VARIABLE");
        let dotenv = match &provider.dotenv_path {
            Some(p) => {
                let file = dir.join(p.get_ref());
                let text = std::fs::read_to_string(&file).map_err(|e| {
                    src.error(
                        Some(p.span()),
                        Some(format!("variables_provider[{i}].dotenv_path")),
                        format!("cannot read {}: {e}", file.display()),
                    )
                })?;
                dotenv(&text)
            }
            None => BTreeMap::new(),
        };
        for name in names {
            let env = format!("{prefix}_{}", name.to_ascii_uppercase());
            let value = std::env::var(&env)
                .ok()
                .or_else(|| dotenv.get(&env).cloned());
            if let Some(v) = value {
                out.variables.entry(name.clone()).or_insert(v);
            }
        }
    }
    Ok(out)
}

/// `KEY=VALUE` lines (`#` comments, optional quotes), as `.env` files.
fn dotenv(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.strip_prefix("export ").unwrap_or(l).split_once('='))
        .map(|(k, v)| {
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v);
            (k.trim().to_string(), v.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_paths_and_variables() {
        let dir = std::env::temp_dir().join(format!("edge-rc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(".env"),
            "MYAPP_GREETING=\"hi there\"\n# c\nMYAPP_OTHER=x\n",
        )
        .unwrap();
        let rc = dir.join("runtime.toml");
        std::fs::write(
            &rc,
            "[key_value_store.default]\ntype = \"spin\"\npath = \"kv.redb\"\n\
             [sqlite_database.default]\ntype = \"spin\"\npath = \"db/app.db\"\n\
             [[variables_provider]]\ntype = \"env\"\nprefix = \"MYAPP\"\ndotenv_path = \".env\"\n",
        )
        .unwrap();
        let got = load(&rc, &["greeting".into(), "missing".into()]).unwrap();
        assert_eq!(got.key_value_stores["default"], dir.join("kv.redb"));
        assert_eq!(got.sqlite_databases["default"], dir.join("db/app.db"));
        assert_eq!(
            got.variables.get("greeting").map(String::as_str),
            Some("hi there")
        );
        assert!(!got.variables.contains_key("missing"));

        std::fs::write(
            &rc,
            "[key_value_store.cache]\ntype = \"redis\"\nurl = \"redis://x\"\n",
        )
        .unwrap();
        let e = load(&rc, &[]).unwrap_err().to_string();
        assert!(
            e.contains("runtime.toml:2:8") && e.contains("\"redis\" is not provided"),
            "{e}"
        );
        std::fs::write(&rc, "[llm_compute]\ntype = \"spin\"\n").unwrap();
        let e = load(&rc, &[]).unwrap_err().to_string();
        assert!(
            e.contains("runtime.toml:1:") && e.contains("unknown field"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
