//! Spin's runtime configuration file (`spin up --runtime-config-file`):
//! where an app's stores and databases live and where its variables come
//! from, without touching the app.
//!
//! ```toml
//! [key_value_store.default]
//! type = "spin"
//! path = "data/kv.redb"         # relative to this file
//!
//! [key_value_store.shared]
//! type = "redis"
//! url = "redis://cache.internal:6379/0"
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
//! Types edge does not provide (`azure_cosmos`, `libsql`, `vault`, ...)
//! are refused with the position of the `type` key.

use crate::error::{ConfigError, SourceFile};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// What a runtime configuration file sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Where key-value stores live, by label.
    pub key_value_stores: BTreeMap<String, StorePlacement>,
    /// SQLite database files by label.
    pub sqlite_databases: BTreeMap<String, PathBuf>,
    /// Variables found by the providers, by variable name (the first
    /// provider that has one wins).
    pub variables: BTreeMap<String, String>,
    /// The files it was read from (the runtime configuration and its
    /// dotenv files): a change to one reloads the config.
    pub sources: Vec<PathBuf>,
}

/// Where Spin's runtime configuration puts a key-value store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorePlacement {
    /// `type = "spin"` with a `path`: a file of this host's, which serves
    /// one tenant.
    File(PathBuf),
    /// `type = "redis"` with a `url`: a server, where each tenant's store
    /// is its own hash.
    Redis(String),
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
    #[serde(default)]
    url: Option<Spanned<String>>,
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
    let mut out = RuntimeConfig {
        sources: vec![path.to_path_buf()],
        ..RuntimeConfig::default()
    };
    for (label, store) in &file.key_value_store {
        let store = store.get_ref();
        let key = |k: &str| Some(format!("key_value_store.{label}.{k}"));
        match store.kind.get_ref().as_str() {
            "spin" => {
                if let Some(p) = &store.path {
                    let file = dir.join(p.get_ref());
                    out.key_value_stores
                        .insert(label.clone(), StorePlacement::File(file));
                }
            }
            "redis" => {
                let Some(url) = &store.url else {
                    return Err(src.error(
                        Some(store.kind.span()),
                        key("url"),
                        "a redis store needs `url = \"redis://HOST:PORT[/DB]\"`",
                    ));
                };
                check_redis_url(url.get_ref())
                    .map_err(|why| src.error(Some(url.span()), key("url"), why))?;
                out.key_value_stores
                    .insert(label.clone(), StorePlacement::Redis(url.get_ref().clone()));
            }
            other => {
                return Err(src.error(
                    Some(store.kind.span()),
                    key("type"),
                    format!(
                        "type {other:?} is not provided by edge (allowed: \"spin\", a local file; \"redis\", a server)"
                    ),
                ));
            }
        }
    }
    for (label, store) in &file.sqlite_database {
        let store = store.get_ref();
        if store.kind.get_ref() != "spin" {
            return Err(src.error(
                Some(store.kind.span()),
                Some(format!("sqlite_database.{label}.type")),
                format!(
                    "type {:?} is not provided by edge (allowed: \"spin\", a local file)",
                    store.kind.get_ref()
                ),
            ));
        }
        if let Some(p) = &store.path {
            out.sqlite_databases
                .insert(label.clone(), dir.join(p.get_ref()));
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
                out.sources.push(file.clone());
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

/// Whether `url` names a Redis server edge can reach: `redis://HOST[:PORT][/DB]`
/// (user and password allowed) or a Unix socket (`redis+unix:///PATH`,
/// `unix:///PATH`).
fn check_redis_url(url: &str) -> Result<(), String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!("{url:?} is not a URL (redis://HOST:PORT[/DB])"));
    };
    match scheme {
        "redis" => {
            let host = rest.split('/').next().unwrap_or("");
            let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
            if host.is_empty() {
                return Err(format!("{url:?} names no host (redis://HOST:PORT[/DB])"));
            }
            let db = rest.split_once('/').map_or("", |(_, d)| d);
            if !db.is_empty() && db.parse::<u32>().is_err() {
                return Err(format!("{url:?}: the database after the host must be a number"));
            }
            Ok(())
        }
        "redis+unix" | "unix" if rest.starts_with('/') => Ok(()),
        "rediss" => Err("TLS to Redis (rediss://) is not supported: use redis:// on a trusted network or a Unix socket".into()),
        _ => Err(format!("scheme {scheme:?} is not Redis' (allowed: redis://, redis+unix://, unix://)")),
    }
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
        assert_eq!(
            got.key_value_stores["default"],
            StorePlacement::File(dir.join("kv.redb"))
        );
        assert_eq!(got.sqlite_databases["default"], dir.join("db/app.db"));
        assert_eq!(
            got.variables.get("greeting").map(String::as_str),
            Some("hi there")
        );
        assert!(!got.variables.contains_key("missing"));
        assert_eq!(got.sources, vec![rc.clone(), dir.join(".env")]);

        std::fs::write(
            &rc,
            "[key_value_store.cache]\ntype = \"redis\"\nurl = \"redis://cache:6379/2\"\n",
        )
        .unwrap();
        let got = load(&rc, &[]).unwrap();
        assert_eq!(
            got.key_value_stores["cache"],
            StorePlacement::Redis("redis://cache:6379/2".into())
        );
        for (bad, at, why) in [
            ("type = \"redis\"", "runtime.toml:2:8", "needs `url"),
            (
                "type = \"redis\"\nurl = \"rediss://c\"",
                "runtime.toml:3:7",
                "TLS",
            ),
            (
                "type = \"redis\"\nurl = \"redis:///0\"",
                "runtime.toml:3:7",
                "no host",
            ),
            (
                "type = \"redis\"\nurl = \"redis://c/x\"",
                "runtime.toml:3:7",
                "must be a number",
            ),
            (
                "type = \"azure_cosmos\"",
                "runtime.toml:2:8",
                "\"azure_cosmos\" is not provided",
            ),
        ] {
            std::fs::write(&rc, format!("[key_value_store.cache]\n{bad}\n")).unwrap();
            let e = load(&rc, &[]).unwrap_err().to_string();
            assert!(e.contains(at) && e.contains(why), "{bad}: {e}");
        }
        std::fs::write(&rc, "[llm_compute]\ntype = \"spin\"\n").unwrap();
        let e = load(&rc, &[]).unwrap_err().to_string();
        assert!(
            e.contains("runtime.toml:1:") && e.contains("unknown field"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
