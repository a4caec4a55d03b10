//! A Spin app as one upload: a tar archive (gzip or not) with `spin.toml`
//! at its root and the files it names. Read in memory within the upload
//! limit; paths that leave the archive, links and devices are refused.

use super::artifacts::{Upload, check};
use super::{ApiError, Control};
use crate::model::VersionSpec;
use crate::store::TenantRow;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::io::Read;

/// Most entries an archive may have.
const MAX_ENTRIES: usize = 1000;

/// The files of `bytes` (a tar, or a gzipped tar) by normal path.
fn files(bytes: &[u8], max: usize) -> Result<BTreeMap<String, Vec<u8>>, ApiError> {
    let bad = |m: String| ApiError::bad(None, format!("the archive: {m}"));
    let reader: Box<dyn Read> = if bytes.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::GzDecoder::new(bytes))
    } else {
        Box::new(bytes)
    };
    // Unpacked size is bounded as the upload is: a small gzip of zeros
    // must not grow past it.
    let mut tar = tar::Archive::new(reader.take(max as u64 + 1));
    let mut out = BTreeMap::new();
    let mut total = 0usize;
    for (i, entry) in tar.entries().map_err(|e| bad(e.to_string()))?.enumerate() {
        if i >= MAX_ENTRIES {
            return Err(bad(format!("more than {MAX_ENTRIES} entries")));
        }
        let mut entry = entry.map_err(|e| bad(e.to_string()))?;
        let path = entry
            .path()
            .map_err(|e| bad(e.to_string()))?
            .to_string_lossy()
            .into_owned();
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            continue;
        }
        if !kind.is_file() {
            return Err(bad(format!(
                "{path:?} is not a regular file (links and devices are refused)"
            )));
        }
        let name = crate::spin_app::normal_path(&path)
            .ok_or_else(|| bad(format!("{path:?} leaves the archive")))?;
        let mut data = Vec::new();
        entry
            .read_to_end(&mut data)
            .map_err(|e| bad(format!("{path:?}: {e}")))?;
        total += data.len();
        if total > max {
            return Err(ApiError::too_large(
                None,
                format!(
                    "the archive unpacks to more than this node accepts ({max} bytes, [control] max_upload_bytes)"
                ),
            ));
        }
        out.insert(name, data);
    }
    Ok(out)
}

/// The version a Spin app archive describes, and its components checked
/// (not stored yet): (field, what, upload) each.
pub fn version(
    c: &Control,
    t: &TenantRow,
    bytes: &[u8],
) -> Result<(VersionSpec, Vec<Upload>), ApiError> {
    let mut files = files(bytes, c.max_upload_bytes)?;
    let manifest = files.remove("spin.toml").ok_or_else(|| {
        ApiError::invalid(
            None,
            format!(
                "the archive has no spin.toml at its root (it has: {})",
                list(&files)
            ),
        )
    })?;
    let manifest = String::from_utf8(manifest)
        .map_err(|_| ApiError::invalid(Some("spin.toml"), "spin.toml is not UTF-8"))?;
    let app =
        crate::spin_app::parse(&manifest).map_err(|e| ApiError::invalid(Some("spin.toml"), e))?;
    let mut spec = app.spec;
    let mut uploads = Vec::new();
    for (id, source) in &app.sources {
        // The field is the manifest's key; the message says it is the
        // manifest's.
        let field = format!("component.{id}.source");
        let path = crate::spin_app::normal_path(source).ok_or_else(|| {
            ApiError::invalid(
                Some(&field),
                format!("spin.toml: {field}: {source:?} leaves the app's directory"),
            )
        })?;
        let data = files.get(&path).ok_or_else(|| {
            ApiError::invalid(
                Some(&field),
                format!(
                    "spin.toml: {field}: {source:?} is not in the archive (it has: {})",
                    list(&files)
                ),
            )
        })?;
        let what = format!("component {id:?} ({source})");
        let checked = check(t, Bytes::copy_from_slice(data), Some(&field), &what)?;
        if let Some(c) = spec.components.get_mut(id) {
            c.digest = checked.digest.clone();
        }
        uploads.push(Upload {
            field: Some(field),
            what,
            checked,
        });
    }
    Ok((spec, uploads))
}

fn list(files: &BTreeMap<String, Vec<u8>>) -> String {
    if files.is_empty() {
        return "nothing".into();
    }
    let mut names: Vec<&str> = files.keys().map(String::as_str).take(20).collect();
    if files.len() > 20 {
        names.push("...");
    }
    names.join(", ")
}
