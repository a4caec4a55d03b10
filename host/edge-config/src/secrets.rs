//! Generated secrets: `{ generate = "ed25519" }` gives a development
//! Ed25519 private key (PKCS#8 PEM), created once under the data directory
//! (`DATA_DIR/keys/TENANT/SECRET.pem`, mode 0600) and read back on every
//! later load, so tokens signed before a restart still verify.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// The secret's value, and whether this call created it.
pub(crate) fn generated(kind: &str, path: &Path) -> Result<(String, bool), String> {
    if kind != "ed25519" {
        return Err(format!(
            "cannot generate {kind:?} (allowed: {{ generate = \"ed25519\" }})"
        ));
    }
    match std::fs::read_to_string(path) {
        Ok(pem) => return Ok((pem, false)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("reading {}: {e}", path.display())),
    }
    let mut seed = [0u8; 32];
    getrandom::getrandom(&mut seed).map_err(|e| format!("no randomness: {e}"))?;
    let key = signing::Key::ed25519_from_seed("dev", &seed).map_err(|e| e.to_string())?;
    let pem = key.to_pkcs8_pem().ok_or("encoding the key")?;
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    // create_new: two loads racing keep the first key.
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(mut f) => {
            f.write_all(pem.as_bytes())
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            Ok((pem, true))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => std::fs::read_to_string(path)
            .map(|p| (p, false))
            .map_err(|e| format!("reading {}: {e}", path.display())),
        Err(e) => Err(format!("creating {}: {e}", path.display())),
    }
}
