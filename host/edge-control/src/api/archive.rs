//! A Spin app as one upload: a tar archive (gzip or not) with `spin.toml`
//! at its root and the files it names. Read in memory within the upload
//! limit; paths that leave the archive, links and devices, and a path
//! given twice are refused. The components' `files` are resolved here
//! against the archive's entries, whatever the client resolved.

use super::artifacts::{Upload, check};
use super::{ApiError, Control};
use crate::model::{FileSpec, VersionSpec};
use crate::store::TenantRow;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::io::Read;

/// Most entries an archive may have (a component may see
/// [`crate::spin_app::MAX_FILES`] files).
const MAX_ENTRIES: usize = 2 * crate::spin_app::MAX_FILES;

/// A file of the app (Spin's `files`), not stored yet.
pub struct FileUpload {
    /// `sha256:HEX`.
    pub digest: String,
    /// The bytes.
    pub bytes: Bytes,
}

/// A reader that ends after `left` bytes and says whether it ended there.
struct Capped<R> {
    inner: R,
    left: u64,
    hit: std::rc::Rc<std::cell::Cell<bool>>,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            self.hit.set(!buf.is_empty());
            return Ok(0);
        }
        let want = buf.len().min(self.left as usize);
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// The files of `bytes` (a tar, or a gzipped tar) by normal path.
fn files(bytes: &[u8], max: usize) -> Result<BTreeMap<String, Vec<u8>>, ApiError> {
    let reader: Box<dyn Read> = if bytes.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::GzDecoder::new(bytes))
    } else {
        Box::new(bytes)
    };
    // Unpacked size is bounded as the upload is: a small gzip of zeros
    // must not grow past it. Cut there, the tar reads as truncated: that
    // is the size's fault, and said so.
    let hit: std::rc::Rc<std::cell::Cell<bool>> = std::rc::Rc::default();
    let too_large = || {
        ApiError::too_large(
            None,
            format!(
                "the archive unpacks to more than this node accepts ({max} bytes, [control] max_upload_bytes)"
            ),
        )
    };
    let bad = |m: String| {
        if hit.get() {
            too_large()
        } else {
            ApiError::bad(None, format!("the archive: {m}"))
        }
    };
    let mut tar = tar::Archive::new(Capped {
        inner: reader,
        left: max as u64 + 1,
        hit: std::rc::Rc::clone(&hit),
    });
    let mut out = BTreeMap::new();
    let mut total = 0usize;
    for (i, entry) in tar.entries().map_err(|e| bad(e.to_string()))?.enumerate() {
        if i >= MAX_ENTRIES {
            return Err(ApiError::bad(
                None,
                format!("the archive: more than {MAX_ENTRIES} entries"),
            ));
        }
        let mut entry = entry.map_err(|e| bad(e.to_string()))?;
        let path = entry
            .path()
            .map_err(|e| bad(e.to_string()))?
            .to_string_lossy()
            .into_owned();
        let kind = entry.header().entry_type();
        // Directories, and the PAX headers `git archive` and others write
        // (the commit id; extended attributes), hold no file of the app.
        if kind.is_dir() || kind.is_pax_global_extensions() || kind.is_pax_local_extensions() {
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
            return Err(too_large());
        }
        if out.insert(name, data).is_some() {
            return Err(bad(format!("{path:?} is in it twice")));
        }
    }
    Ok(out)
}

/// The version a Spin app archive describes, its components checked and
/// its files (each distinct content once), none stored yet.
pub fn version(
    c: &Control,
    t: &TenantRow,
    bytes: &[u8],
) -> Result<(VersionSpec, Vec<Upload>, Vec<FileUpload>), ApiError> {
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
    let mut file_uploads: BTreeMap<String, Bytes> = BTreeMap::new();
    for (id, decl) in &app.files {
        let field = format!("component.{id}.files");
        let resolved = crate::spin_app::resolve_files(decl, files.keys().map(String::as_str))
            .map_err(|e| {
                ApiError::invalid(Some(&field), format!("spin.toml: component.{id}.{e}"))
            })?;
        let mut list = Vec::new();
        for f in resolved {
            let data = &files[&f.source];
            let max = t.tenant.quota.max_artifact_bytes;
            if data.len() as u64 > max {
                return Err(ApiError::too_large(
                    Some(&field),
                    format!(
                        "component {id:?}: file {} ({}) is {} bytes; this tenant's quota allows {max} per file (max_artifact_bytes)",
                        f.guest,
                        f.source,
                        data.len()
                    ),
                ));
            }
            let digest = crate::blobs::digest(data);
            file_uploads
                .entry(digest.clone())
                .or_insert_with(|| Bytes::copy_from_slice(data));
            list.push(FileSpec {
                path: f.guest,
                digest,
                size: data.len() as u64,
            });
        }
        if let Some(c) = spec.components.get_mut(id) {
            c.files = list;
        }
    }
    let file_uploads = file_uploads
        .into_iter()
        .map(|(digest, bytes)| FileUpload { digest, bytes })
        .collect();
    Ok((spec, uploads, file_uploads))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A tar of `entries`: (name, kind, bytes), names written as given.
    fn tar_of(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        for (name, kind, bytes) in entries {
            let mut h = tar::Header::new_gnu();
            h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
            h.set_entry_type(*kind);
            h.set_size(bytes.len() as u64);
            h.set_mode(0o644);
            if kind.is_symlink() || kind.is_hard_link() {
                h.set_link_name("/etc/passwd").unwrap();
            }
            h.set_cksum();
            tar.append(&h, *bytes).unwrap();
        }
        tar.into_inner().unwrap()
    }

    #[test]
    fn archives_hold_plain_files_inside_once() {
        use tar::EntryType as E;
        let ok = tar_of(&[
            ("spin.toml", E::Regular, b"x"),
            ("./static/", E::Directory, b""),
            ("./static/a.css", E::Regular, b"a"),
        ]);
        let got = files(&ok, 1 << 20).unwrap();
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            ["spin.toml", "static/a.css"]
        );
        for (entries, why) in [
            (
                vec![("static/link", E::Symlink, &b""[..])],
                "\"static/link\" is not a regular file (links and devices are refused)",
            ),
            (
                vec![("hard", E::Link, b"")],
                "\"hard\" is not a regular file",
            ),
            (vec![("dev", E::Char, b"")], "\"dev\" is not a regular file"),
            (
                vec![("fifo", E::Fifo, b"")],
                "\"fifo\" is not a regular file",
            ),
            (
                vec![("../x", E::Regular, b"x")],
                "\"../x\" leaves the archive",
            ),
            (
                vec![("/etc/x", E::Regular, b"x")],
                "\"/etc/x\" leaves the archive",
            ),
            (
                vec![("a/b", E::Regular, b"1"), ("./a//b", E::Regular, b"2")],
                "\"./a//b\" is in it twice",
            ),
        ] {
            let e = files(&tar_of(&entries), 1 << 20).unwrap_err();
            assert!(e.message.contains(why), "{why}: {}", e.message);
        }
        // Past the unpacked limit: refused, whatever the tar says.
        assert!(files(&tar_of(&[("big", E::Regular, &[0u8; 2000])]), 1000).is_err());
    }

    #[test]
    fn a_gzip_that_unpacks_past_the_limit_is_too_large() {
        use std::io::Write;
        // 2 MB of zeros in a few KB: cut at the limit, the tar reads as
        // truncated; the answer says it is the size.
        let tar = tar_of(&[("big", tar::EntryType::Regular, &vec![0u8; 2_000_000])]);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&tar).unwrap();
        let gz = gz.finish().unwrap();
        assert!(gz.len() < 100_000);
        let e = files(&gz, 1_000_000).unwrap_err();
        assert_eq!(
            e.status,
            http::StatusCode::PAYLOAD_TOO_LARGE,
            "{}",
            e.message
        );
        assert!(e.message.contains("max_upload_bytes"), "{}", e.message);
    }

    #[test]
    fn pax_headers_of_git_archive_are_no_files() {
        use tar::EntryType as E;
        // `git archive` starts with a global header holding the commit id.
        let with_pax = tar_of(&[
            (
                "pax_global_header",
                E::XGlobalHeader,
                b"52 comment=0123456789abcdef0123456789abcdef01234567\n",
            ),
            ("spin.toml", E::Regular, b"x"),
        ]);
        let got = files(&with_pax, 1 << 20).unwrap();
        assert_eq!(got.keys().collect::<Vec<_>>(), ["spin.toml"]);
    }
}
