//! Artifacts by content: `DIR/sha256/HEX.wasm`, written once, never
//! changed. Two tenants uploading the same bytes share one file; what each
//! uploaded is recorded per tenant in the database, so one cannot learn of
//! the other's.
//!
//! Spin apps' files (`files` in a manifest) are kept alike, read-only
//! (mode 0444), in a sibling store, `DIR/files/sha256/HEX` ([`Blobs::files`]);
//! a file and a component never share a path, whatever their bytes.
//!
//! Several nodes will share artifacts through an OCI registry; this
//! directory is then each node's pull-through cache, by the same digests,
//! so the host reads artifacts from here either way.

use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The local artifact store.
#[derive(Clone, Debug)]
pub struct Blobs {
    dir: PathBuf,
    /// `.wasm` for components; empty for files.
    ext: &'static str,
}

/// `sha256:HEX` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The hex part of a well-formed `sha256:HEX` digest.
pub fn digest_hex(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    .then_some(hex)
}

impl Blobs {
    /// A store in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            ext: ".wasm",
        }
    }

    /// The store of Spin apps' files beside this one (`DIR/files`).
    pub fn files(&self) -> Self {
        Self {
            dir: self.dir.join("files"),
            ext: "",
        }
    }

    /// Where the artifact with `digest` is (or would be).
    pub fn path(&self, digest: &str) -> Option<PathBuf> {
        digest_hex(digest).map(|hex| self.dir.join("sha256").join(format!("{hex}{}", self.ext)))
    }

    /// Removes the stored bytes of `digest` (no one names them any more);
    /// bytes already gone are no error.
    pub fn remove(&self, digest: &str) -> std::io::Result<()> {
        match self.path(digest).map(std::fs::remove_file) {
            Some(Err(e)) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Stores `bytes` under their digest (once: the same bytes again leave
    /// the file as it is); the digest and the file.
    pub fn put(&self, bytes: &[u8]) -> std::io::Result<(String, PathBuf)> {
        let digest = digest(bytes);
        let path = self.path(&digest).expect("a digest this module made");
        if !path.exists() {
            write_durably(&path, bytes, self.read_only())?;
        }
        Ok((digest, path))
    }

    /// Files are kept read-only; components as they always were.
    fn read_only(&self) -> bool {
        self.ext.is_empty()
    }
}

/// An upload written beside the store, not in it yet: checked (compiled)
/// first, then [`Staged::commit`]ted, or dropped and gone.
pub struct Staged {
    path: PathBuf,
    store: Blobs,
}

impl Blobs {
    /// Writes `bytes` to a temporary file of the store.
    pub fn stage(&self, bytes: &[u8]) -> std::io::Result<Staged> {
        let dir = self.dir.join("staging");
        std::fs::create_dir_all(&dir)?;
        let name = format!("{}.wasm", crate::secret::new_id("s"));
        let path = dir.join(name);
        std::fs::write(&path, bytes)?;
        Ok(Staged {
            path,
            store: self.clone(),
        })
    }
}

impl Staged {
    /// The temporary file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Moves the file into the store under `digest` (its bytes' digest);
    /// if the store has those bytes already, keeps them.
    pub fn commit(self, digest: &str) -> std::io::Result<PathBuf> {
        let path = self
            .store
            .path(digest)
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a digest"))?;
        if !path.exists() {
            let bytes = std::fs::read(&self.path)?;
            write_durably(&path, &bytes, self.store.read_only())?;
        }
        Ok(path)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes to a temporary file, syncs it and renames it into place, so a
/// reader (or a crash) never sees half an artifact; `read_only`: mode 0444.
fn write_durably(path: &Path, bytes: &[u8], read_only: bool) -> std::io::Result<()> {
    let dir = path.parent().expect("artifact paths have a directory");
    std::fs::create_dir_all(dir)?;
    // Its own name: two uploads of the same bytes at once each write
    // theirs (the same name would have one remove or truncate the other's).
    let tmp = path.with_extension(format!("tmp-{}", crate::secret::new_id("w")));
    let result = (|| {
        let mut f = std::fs::File::create_new(&tmp)?;
        f.write_all(bytes)?;
        if read_only {
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(0o444))?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_one_file() {
        let dir = std::env::temp_dir().join(format!("edge-blobs-{}", std::process::id()));
        let blobs = Blobs::new(&dir);
        let (d1, p1) = blobs.put(b"abc").unwrap();
        let (d2, p2) = blobs.put(b"abc").unwrap();
        assert_eq!((d1.as_str(), &p1), (d2.as_str(), &p2));
        assert_eq!(
            d1,
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(std::fs::read(&p1).unwrap(), b"abc");
        assert!(blobs.path("sha256:../../etc/passwd").is_none());
        let files = blobs.files();
        let (d3, p3) = files.put(b"abc").unwrap();
        assert_eq!(d3, d1);
        assert_ne!(p3, p1);
        assert!(!p3.to_string_lossy().ends_with(".wasm"));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p3).unwrap().permissions().mode() & 0o777,
            0o444
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
