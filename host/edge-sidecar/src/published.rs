//! Grants the host publishes for tenants the sidecar cannot read from the
//! edge-config file: the control plane's (`/v1/tenants`), which live in
//! the host's database. The host writes them whole, on every change of
//! what it serves, to a file beside the socket ([`grants_file`]), in the
//! directory only their user may write (the sidecar refuses to bind in
//! another); the sidecar reads it again when it changes.
//!
//! A tenant of the edge-config keeps the grant the sidecar reads from the
//! file itself: the published file only adds tenants.

use crate::server::Grants;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Largest grants file read.
const MAX_BYTES: u64 = 16 << 20;

/// The file the host publishes grants to for the sidecar at `socket`:
/// `SOCKET.grants`, beside it.
pub fn grants_file(socket: &Path) -> PathBuf {
    let mut name = socket
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "sidecar.sock".into());
    name.push(".grants");
    socket.with_file_name(name)
}

/// Publishes `grants` for the sidecar at `socket` (see [`grants_file`]):
/// written to a new file (mode 0600) renamed over the old, so the sidecar
/// never reads half of one; nothing is written if the file says the same
/// already. The directory is created mode 0700 if missing, as the sidecar
/// creates it.
pub fn publish_grants(socket: &Path, grants: &Grants) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let file = grants_file(socket);
    let sorted: BTreeMap<&String, &Vec<PathBuf>> = grants.iter().collect();
    let body = serde_json::to_vec(&sorted)?;
    if std::fs::read(&file).is_ok_and(|old| old == body) {
        return Ok(());
    }
    let dir = private_parent(&file)?;
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let temp = dir.join(format!(".{name}.{}.{n}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut f| f.write_all(&body))
        .and_then(|()| std::fs::rename(&temp, &file));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// What identifies one version of the file: a new one is renamed in, so
/// its inode changes even within one tick of the file clock.
pub(crate) type Stamp = Option<(u64, u64, i64, i64)>;

/// The file's current [`Stamp`] (`None`: there is none).
pub(crate) fn stamp(file: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(file).ok()?;
    Some((m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
}

/// Reads a published grants file. No file is no grant; one that another
/// user could have written (not owned by `uid`, or writable by its group
/// or others), or that does not parse, is an error.
pub(crate) fn read(file: &Path, uid: u32) -> Result<Grants, String> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(file)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Grants::new()),
        Err(e) => return Err(e.to_string()),
    };
    let meta = f.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(format!(
            "not a file of this user that only it may write (mode {:o}, owner uid {})",
            meta.mode() & 0o7777,
            meta.uid()
        ));
    }
    let mut body = Vec::new();
    f.take(MAX_BYTES + 1)
        .read_to_end(&mut body)
        .map_err(|e| e.to_string())?;
    if body.len() as u64 > MAX_BYTES {
        return Err(format!("over {MAX_BYTES} bytes"));
    }
    serde_json::from_slice(&body).map_err(|e| e.to_string())
}

/// The directory `file` goes in, made (mode 0700: only this user may
/// enter it) if it is not there.
pub(crate) fn private_parent(file: &Path) -> io::Result<&Path> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    Ok(dir)
}
