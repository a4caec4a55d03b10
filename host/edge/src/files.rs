//! A component's files (Spin's `files`), staged once per distinct set into
//! `DATA_DIR/files/HASH/` (hard links where the filesystem allows, copies
//! otherwise) and mounted read-only at `/` in each of its instances: the
//! guest sees exactly the files its manifest lists, at their paths, and
//! nothing else of the host.

use anyhow::{Context, Result};
use edge_config::FileMount;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The staged directory of `files` under `root`, making it if needed.
pub fn stage(root: &Path, files: &[FileMount]) -> Result<Arc<Path>> {
    // Named by the files' paths, sizes and times: an edited file makes a
    // new directory, an unchanged set reuses the one made before.
    let mut h = Sha256::new();
    for f in files {
        let meta =
            std::fs::metadata(&f.host).with_context(|| format!("reading {}", f.host.display()))?;
        h.update(f.guest.as_bytes());
        h.update([0]);
        h.update(f.host.as_os_str().as_encoded_bytes());
        h.update([0]);
        h.update(meta.len().to_le_bytes());
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        h.update(modified.to_le_bytes());
    }
    let dir = root.join(hex::encode(&h.finalize()[..16]));
    if dir.is_dir() {
        return Ok(dir.into());
    }
    let tmp: PathBuf = root.join(format!(
        ".staging-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    for f in files {
        let to = tmp.join(f.guest.trim_start_matches('/'));
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        if std::fs::hard_link(&f.host, &to).is_err() {
            std::fs::copy(&f.host, &to).with_context(|| format!("copying {}", f.host.display()))?;
        }
    }
    std::fs::create_dir_all(&tmp)?;
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(dir.into()),
        // Another build staged the same set meanwhile.
        Err(_) if dir.is_dir() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dir.into())
        }
        Err(e) => Err(e).with_context(|| format!("staging {}", dir.display())),
    }
}
