//! `[sidecar]` allowlist entries: absolute, normalised paths only.

use std::path::{Component, Path, PathBuf};

/// Checks one program path: absolute, no `.` or `..`, no empty parts.
pub fn check_program(p: &str) -> Result<PathBuf, String> {
    let path = Path::new(p);
    if !path.is_absolute() {
        return Err(format!(
            "{p:?} is not an absolute path (allowed: \"/usr/bin/convert\")"
        ));
    }
    if p.contains("//") || p.ends_with('/') {
        return Err(format!("{p:?} is not a normalised path"));
    }
    if path
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        || p.contains("/./")
    {
        return Err(format!("{p:?} contains '.' or '..'"));
    }
    Ok(path.to_path_buf())
}
