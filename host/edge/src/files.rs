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
//! into place, so a crash never leaves half of one. Each build touches the
//! directories it uses; once an app is in place, directories no build has
//! used for [`UNUSED_FOR`] (a day: an older version's instances are long
//! gone) are removed, and so are stagings a crash left ([`sweep`]).

use anyhow::{Context, Result};
use edge_config::FileMount;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How long a staged directory no build uses is kept.
pub const UNUSED_FOR: Duration = Duration::from_secs(24 * 3600);

/// Marks `path` (a file or a directory) as used now: its modification
/// time, which [`unused_for`] reads.
pub fn touch(path: &Path) {
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// Whether `entry` was last used (modified) at least `how_long` ago.
pub fn unused_for(entry: &std::fs::DirEntry, how_long: Duration) -> bool {
    entry
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age >= how_long)
}

/// Removes, under `root`, the staged directories not used for
/// `unused_for` and the temporary ones as old (a staging a crash
/// interrupted); the number removed. Failures are logged.
pub fn sweep(root: &Path, unused_for: Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let staged = name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit());
        if !staged && !name.starts_with(".staging-") {
            continue;
        }
        if !self::unused_for(&e, unused_for) {
            continue;
        }
        match std::fs::remove_dir_all(e.path()) {
            Ok(()) => removed += 1,
            Err(err) => {
                tracing::warn!(dir = %e.path().display(), error = %err, "an unused staged files directory was not removed")
            }
        }
    }
    removed
}

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
        touch(&dir);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn stored_files_stage_once_read_only_or_not_at_all() {
        let root = std::env::temp_dir().join(format!("edge-stage-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let store = edge_control::blobs::Blobs::new(root.join("blobs")).files();
        let (d1, p1) = store.put(b"<h1>hi</h1>").unwrap();
        let (d2, p2) = store.put(b"body {}").unwrap();
        let mount = |guest: &str, digest: &str, host: &Path| FileMount {
            host: host.to_path_buf(),
            guest: guest.into(),
            digest: Some(digest.into()),
        };
        let list = vec![
            mount("/ui/index.html", &d1, &p1),
            mount("/ui/css/site.css", &d2, &p2),
        ];
        let trees = root.join("files");
        let dir = stage(&trees, &list).unwrap();
        assert_eq!(
            std::fs::read(dir.join("ui/index.html")).unwrap(),
            b"<h1>hi</h1>"
        );
        let mode = std::fs::metadata(dir.join("ui/css/site.css"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o444);
        // The same list is the same tree, wherever its blobs are.
        assert_eq!(stage(&trees, &list).unwrap(), dir);
        // A file the store lacks fails the whole tree, leaving nothing.
        let gone = format!("sha256:{}", "0".repeat(64));
        let missing = vec![
            mount("/a", &d1, &p1),
            mount("/b", &gone, &root.join("nowhere")),
        ];
        let e = stage(&trees, &missing).unwrap_err().to_string();
        assert!(
            e.contains(&format!("file /b ({gone}) is not in the node's store")),
            "{e}"
        );
        let left: Vec<_> = std::fs::read_dir(&trees)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, [dir.file_name().unwrap().to_owned()]);
        // A path that would leave the tree is refused.
        let e = stage(&trees, &[mount("/../escape", &d1, &p1)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a path inside"), "{e}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn unused_stagings_are_swept_used_ones_kept() {
        let root = std::env::temp_dir().join(format!("edge-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let store = edge_control::blobs::Blobs::new(root.join("blobs")).files();
        let (d, p) = store.put(b"x").unwrap();
        let trees = root.join("files");
        let list = |guest: &str| {
            vec![FileMount {
                host: p.clone(),
                guest: guest.into(),
                digest: Some(d.clone()),
            }]
        };
        let (a, b) = (
            stage(&trees, &list("/a")).unwrap(),
            stage(&trees, &list("/b")).unwrap(),
        );
        let crashed = trees.join(".staging-1-ThreadId(9)");
        std::fs::create_dir_all(crashed.join("x")).unwrap();
        let other = trees.join("not-a-staging");
        std::fs::create_dir_all(&other).unwrap();
        let age = |dir: &Path, ago: Duration| {
            std::fs::File::open(dir)
                .unwrap()
                .set_modified(SystemTime::now() - ago)
                .unwrap()
        };
        let day = Duration::from_secs(24 * 3600);
        for dir in [&*a, &*b, &*crashed, &*other] {
            age(dir, day * 2);
        }
        // A build uses `a` again: touched, kept.
        assert_eq!(stage(&trees, &list("/a")).unwrap(), a);
        assert_eq!(sweep(&trees, day), 2);
        assert!(a.join("a").is_file());
        assert!(!b.exists() && !crashed.exists());
        assert!(other.exists(), "only stagings are swept");
        // Nothing younger than the limit goes.
        assert_eq!(sweep(&trees, day), 0);
        let _ = std::fs::remove_dir_all(&root);
    }
}
