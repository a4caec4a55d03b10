//! A component's files (Spin's `files`), staged once per distinct set into
//! `DATA_DIR/files/HASH/` (hard links where the filesystem allows, copies
//! otherwise) and mounted read-only at `/` in each of its instances: the
//! guest sees exactly the files its manifest lists, at their paths, and
//! nothing else of the host.
//!
//! A control-plane app's files are stored by digest (`DATA_DIR/blobs/files`,
//! read-only): their directory is named by the list of paths and digests
//! alone, so it is built once and found again after a restart; its files
//! are hard links to the stored ones (copies across filesystems), mode
//! 0444 either way. A directory is made under a temporary name and renamed
//! into place, so a crash never leaves half of one. Directories no
//! longer used stay (they are mostly links; removing them while an older
//! version's instances may still read them is left to the operator).

use anyhow::{Context, Result};
use edge_config::FileMount;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The staged directory of `files` under `root`, making it if needed.
pub fn stage(root: &Path, files: &[FileMount]) -> Result<Arc<Path>> {
    let stored = !files.is_empty() && files.iter().all(|f| f.digest.is_some());
    // Named by the files' paths, sizes and times: an edited file makes a
    // new directory, an unchanged set reuses the one made before. Stored
    // files: by their paths and digests.
    let mut h = Sha256::new();
    if stored {
        h.update(b"stored\0");
    }
    for f in files {
        if let (true, Some(digest)) = (stored, &f.digest) {
            h.update(f.guest.as_bytes());
            h.update([0]);
            h.update(digest.as_bytes());
            h.update([0]);
            continue;
        }
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
    let filled = fill(&tmp, files, stored);
    if filled.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    filled?;
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

/// Links or copies `files` into `tmp`; `stored`: read-only files from the
/// control plane's store, each missing one named.
fn fill(tmp: &Path, files: &[FileMount], stored: bool) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for f in files {
        let to = tmp.join(f.guest.trim_start_matches('/'));
        if stored && !edge_control::spin_app::is_guest_path(&f.guest) {
            anyhow::bail!("file {}: not a path inside the component's files", f.guest);
        }
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        if stored && !f.host.is_file() {
            anyhow::bail!(
                "file {} ({}) is not in the node's store ({})",
                f.guest,
                f.digest.as_deref().unwrap_or("?"),
                f.host.display()
            );
        }
        if std::fs::hard_link(&f.host, &to).is_err() {
            std::fs::copy(&f.host, &to).with_context(|| format!("copying {}", f.host.display()))?;
            if stored {
                std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o444))?;
            }
        }
    }
    Ok(())
}
