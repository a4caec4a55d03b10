//! `[sidecar]` allowlist entries: absolute, normalised paths only.

use std::path::{Component, Path, PathBuf};

/// Largest `max_output_bytes`: stdout and stderr at this cap, base64 on
/// the wire, must still fit the sidecar's largest message (32 MiB), or a
/// run within its caps would come back as an unreadable answer.
pub const MAX_OUTPUT_BYTES: u64 = 8 << 20;

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
