//! Spin's `files` and `exclude_files`: which files of the app a component
//! sees, read-only, and where.
//!
//! An entry is a glob relative to the app's directory (each matching file
//! appears at its relative path under `/`), or `{ source = "DIR",
//! destination = "/PATH" }` (the directory's files under `/PATH`).
//! `exclude_files` are globs (relative to the app's directory) of files to
//! leave out. No file may come from outside the app's directory, whatever
//! a pattern or a symbolic link says.

use std::path::{Path, PathBuf};

/// One file a component sees.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileMount {
    /// The file on the host.
    pub host: PathBuf,
    /// Its absolute path in the guest (`/static/a.css`).
    pub guest: String,
    /// Its content's digest (`sha256:HEX`) when `host` is a stored,
    /// immutable file (a control-plane app's): the staged directory is then
    /// named by the paths and digests alone.
    pub digest: Option<String>,
}

/// The files `files` and `exclude_files` give, in guest-path order.
pub(crate) fn expand(
    app_dir: &Path,
    files: &toml::Value,
    exclude: &[String],
) -> Result<Vec<FileMount>, String> {
    let root = app_dir
        .canonicalize()
        .map_err(|e| format!("the app's directory {}: {e}", app_dir.display()))?;
    let excludes = exclude
        .iter()
        .map(|p| {
            glob::Pattern::new(p).map_err(|e| format!("exclude_files: {p:?} is not a glob: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let entries = files
        .as_array()
        .ok_or("expected a list of globs and { source, destination } tables")?;
    let mut out = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let (pattern, base, destination) = match entry {
            toml::Value::String(glob) => (glob.clone(), String::new(), "/".to_string()),
            toml::Value::Table(t) => {
                let (Some(source), Some(dest)) = (
                    t.get("source").and_then(|v| v.as_str()),
                    t.get("destination").and_then(|v| v.as_str()),
                ) else {
                    return Err(format!(
                        "[{i}]: a table needs `source` (a directory of the app) and `destination` (an absolute path)"
                    ));
                };
                if let Some(extra) = t.keys().find(|k| *k != "source" && *k != "destination") {
                    return Err(format!(
                        "[{i}]: unknown key {extra:?} (allowed: source, destination)"
                    ));
                }
                if !dest.starts_with('/') {
                    return Err(format!(
                        "[{i}]: destination {dest:?} must be an absolute path"
                    ));
                }
                let base = source.trim_end_matches('/').to_string();
                (format!("{base}/**/*"), base, dest.to_string())
            }
            _ => {
                return Err(format!(
                    "[{i}]: expected a glob or a {{ source, destination }} table"
                ));
            }
        };
        let full = root.join(&pattern);
        let matches = glob::glob(&full.to_string_lossy())
            .map_err(|e| format!("[{i}]: {pattern:?} is not a glob: {e}"))?;
        for path in matches {
            let path = path.map_err(|e| format!("[{i}]: {e}"))?;
            if !path.is_file() {
                continue;
            }
            let real = path
                .canonicalize()
                .map_err(|e| format!("[{i}]: {}: {e}", path.display()))?;
            if !real.starts_with(&root) {
                return Err(format!(
                    "[{i}]: {} is outside the app's directory",
                    path.display()
                ));
            }
            let relative = path.strip_prefix(&root).unwrap_or(&path);
            if excludes.iter().any(|x| x.matches_path(relative)) {
                continue;
            }
            let under_base = if base.is_empty() {
                relative.to_path_buf()
            } else {
                relative
                    .strip_prefix(&base)
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|_| relative.to_path_buf())
            };
            let guest = format!(
                "{}/{}",
                destination.trim_end_matches('/'),
                under_base.to_string_lossy()
            );
            out.push(FileMount {
                host: real,
                guest,
                digest: None,
            });
        }
    }
    out.sort();
    out.dedup_by(|a, b| a.guest == b.guest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_tables_and_excludes() {
        let dir = std::env::temp_dir().join(format!("edge-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for f in [
            "static/a.css",
            "static/sub/b.js",
            "static/secret.key",
            "assets/logo.svg",
            "other.txt",
        ] {
            let p = dir.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, f).unwrap();
        }
        let files: toml::Value = toml::from_str::<toml::Table>(
            "f = [\"static/**/*\", { source = \"assets\", destination = \"/img\" }]",
        )
        .unwrap()["f"]
            .clone();
        let got = expand(&dir, &files, &["**/*.key".to_string()]).unwrap();
        let guests: Vec<_> = got.iter().map(|m| m.guest.as_str()).collect();
        assert_eq!(
            guests,
            ["/img/logo.svg", "/static/a.css", "/static/sub/b.js"]
        );
        let escape: toml::Value = toml::Value::Array(vec!["../*".into()]);
        assert!(
            expand(&dir.join("static"), &escape, &[])
                .unwrap_err()
                .contains("outside")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
