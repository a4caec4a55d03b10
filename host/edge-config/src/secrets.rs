//! Generated secrets: `{ generate = "ed25519" }` gives a development
//! Ed25519 private key (PKCS#8 PEM), created once under the data directory
//! (`DATA_DIR/keys/TENANT/SECRET.pem`, mode 0600) and read back on every
//! later load, so tokens signed before a restart still verify.
//! `{ generate = "api-key" }` gives a development API key for the signer
//! (`DATA_DIR/keys/TENANT/SECRET.key`, the key itself, for callers to
//! send); the secret's value is the signer's `clients` line for it, which
//! holds only the key's hash (`signing::clients`).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// The file name extension of a generated secret of `kind`.
pub(crate) fn extension(kind: &str) -> &'static str {
    if kind == "api-key" { "key" } else { "pem" }
}

/// The secret's value, and whether this call created it.
pub(crate) fn generated(kind: &str, path: &Path) -> Result<(String, bool), String> {
    match kind {
        "ed25519" => generated_ed25519(path),
        "api-key" => {
            let (key, created) = generated_api_key(path)?;
            // Every room, moderator, the signer's default longest lifetime:
            // the development caller may ask for anything.
            let grants = signing::clients::Grants {
                moderator: true,
                max_ttl: Some(86_400),
                rooms: vec![signing::clients::RoomPattern::Any],
            };
            Ok((signing::clients::entry("dev", &key, &grants), created))
        }
        _ => Err(format!(
            "cannot generate {kind:?} (allowed: {{ generate = \"ed25519\" }}, {{ generate = \"api-key\" }})"
        )),
    }
}

/// A random API key (`edge_` and 32 random bytes in base64url), created
/// once at `path` like the Ed25519 key.
fn generated_api_key(path: &Path) -> Result<(String, bool), String> {
    if let Some(key) = read_existing(path)? {
        return Ok((key.trim().to_string(), false));
    }
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).map_err(|e| format!("no randomness: {e}"))?;
    let key = signing::clients::api_key(&bytes);
    let (text, created) = create_once(path, &format!("{key}\n"))?;
    Ok((text.trim().to_string(), created))
}

/// The file at `path`, or `None` when there is none yet.
fn read_existing(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}

fn generated_ed25519(path: &Path) -> Result<(String, bool), String> {
    match std::fs::read_to_string(path) {
        Ok(pem) => return Ok((pem, false)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("reading {}: {e}", path.display())),
    }
    let mut seed = [0u8; 32];
    getrandom::getrandom(&mut seed).map_err(|e| format!("no randomness: {e}"))?;
    let key = signing::Key::ed25519_from_seed("dev", &seed).map_err(|e| e.to_string())?;
    let pem = key.to_pkcs8_pem().ok_or("encoding the key")?;
    create_once(path, &pem)
}

/// Writes `text` to a new file at `path` (mode 0600, its directory 0700);
/// when another load created it first, that file's text wins.
fn create_once(path: &Path, text: &str) -> Result<(String, bool), String> {
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
            f.write_all(text.as_bytes())
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            Ok((text.to_string(), true))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => std::fs::read_to_string(path)
            .map(|p| (p, false))
            .map_err(|e| format!("reading {}: {e}", path.display())),
        Err(e) => Err(format!("creating {}: {e}", path.display())),
    }
}
