//! A Spin manifest (version 2) as a version of an app: its HTTP-triggered
//! components with their local sources and grants, its routes, and its
//! app variables, and its components' `files`. What edge cannot serve
//! (sources from a URL or registry, triggers other than HTTP) is refused
//! with the key that names it.
//!
//! `files` resolve against the app's files as relative paths (an archive's
//! entries, or what `edge deploy` found in the app's directory), the same
//! way on both sides: [`resolve_files`].

use crate::model::{ComponentSpec, FileSpec, RouteSpec, VariableDecl, VersionSpec};
use serde::Deserialize;
use std::collections::BTreeMap;

/// A parsed manifest: the version it makes (digests left empty) and each
/// component's source file.
#[derive(Debug)]
pub struct SpinApp {
    /// `[application] name`, lower-cased.
    pub name: String,
    /// The version, components' `digest` empty until uploaded.
    pub spec: VersionSpec,
    /// Component id → source path (relative to the manifest).
    pub sources: BTreeMap<String, String>,
    /// Component id → its `files` and `exclude_files` (components with
    /// files only).
    pub files: BTreeMap<String, FilesDecl>,
}

/// Most files one component may see.
pub const MAX_FILES: usize = 10_000;

/// Longest path a file may have in the guest, in bytes.
pub const MAX_FILE_PATH: usize = 1024;

/// Most entries a component's `files` (and, apart, its `exclude_files`)
/// may have: each is matched against every file of the app.
pub const MAX_FILE_ENTRIES: usize = 64;

/// Longest glob (or `source`) of `files` and `exclude_files`, in bytes,
/// and most `*` in one: matching costs grow with both.
const MAX_GLOB: usize = 256;
const MAX_STARS: usize = 8;

/// `glob` within [`MAX_GLOB`] bytes and [`MAX_STARS`] `*`, and a glob.
fn check_glob(glob: &str) -> Result<(), String> {
    if glob.len() > MAX_GLOB || glob.matches('*').count() > MAX_STARS {
        return Err(format!(
            "{glob:?} is longer than {MAX_GLOB} bytes or has more than {MAX_STARS} '*'"
        ));
    }
    glob::Pattern::new(glob)
        .map(|_| ())
        .map_err(|e| format!("{glob:?} is not a glob: {e}"))
}

/// A component's `files` and `exclude_files`, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilesDecl {
    /// The entries, in the manifest's order.
    pub entries: Vec<FileEntry>,
    /// Globs (relative to the app's directory) of files left out.
    pub exclude: Vec<String>,
}

/// One entry of `files`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileEntry {
    /// A glob relative to the app's directory (`static/**/*`): each match
    /// at its relative path under `/`.
    Glob(String),
    /// `{ source = "DIR", destination = "/PATH" }`: the directory's files
    /// under `/PATH` (`source` empty: the app's directory; a file: that
    /// file at `/PATH`).
    Dir {
        /// A normal relative path, or empty.
        source: String,
        /// A normal absolute path.
        destination: String,
    },
}

/// One file a component sees: its path in the guest and the app's file
/// (a normal relative path) it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResolvedFile {
    /// Absolute in the guest: `/ui/index.html`.
    pub guest: String,
    /// Relative to the app's directory: `build/ui/index.html`.
    pub source: String,
}

#[derive(Deserialize)]
struct Manifest {
    spin_manifest_version: toml::Value,
    application: Application,
    #[serde(default)]
    variables: BTreeMap<String, VariableDecl>,
    #[serde(default)]
    trigger: BTreeMap<String, Vec<Trigger>>,
    #[serde(default)]
    component: BTreeMap<String, Component>,
}

#[derive(Deserialize)]
struct Application {
    name: String,
}

#[derive(Deserialize)]
struct Trigger {
    #[serde(default)]
    route: Option<toml::Value>,
    component: toml::Value,
}

#[derive(Deserialize)]
struct Component {
    source: toml::Value,
    #[serde(default)]
    key_value_stores: Vec<String>,
    #[serde(default)]
    sqlite_databases: Vec<String>,
    #[serde(default)]
    allowed_outbound_hosts: Vec<String>,
    #[serde(default)]
    variables: BTreeMap<String, String>,
    #[serde(default)]
    files: Option<toml::Value>,
    #[serde(default)]
    exclude_files: Vec<String>,
}

/// Parses `text` (a `spin.toml`).
pub fn parse(text: &str) -> Result<SpinApp, String> {
    let m: Manifest = toml::from_str(text).map_err(|e| format!("spin.toml: {e}"))?;
    if m.spin_manifest_version.as_integer() != Some(2)
        && m.spin_manifest_version.as_str() != Some("2")
    {
        return Err("spin.toml: spin_manifest_version: edge reads version 2".into());
    }
    if let Some(kind) = m.trigger.keys().find(|k| *k != "http") {
        return Err(format!(
            "spin.toml: trigger.{kind}: edge serves HTTP triggers only"
        ));
    }
    let mut spec = VersionSpec {
        components: BTreeMap::new(),
        routes: Vec::new(),
        variables: m.variables,
    };
    let mut sources = BTreeMap::new();
    let mut files = BTreeMap::new();
    for (i, t) in m.trigger.get("http").into_iter().flatten().enumerate() {
        let at = format!("spin.toml: trigger.http[{i}]");
        let Some(id) = t.component.as_str() else {
            return Err(format!(
                "{at}.component: a component id (inline components are not supported)"
            ));
        };
        let route = match &t.route {
            Some(toml::Value::String(r)) => r.clone(),
            // `{ private = true }`: reachable only by service chaining.
            Some(toml::Value::Table(t)) if t.contains_key("private") => continue,
            _ => return Err(format!("{at}.route: a route such as \"/...\"")),
        };
        let c = m
            .component
            .get(id)
            .ok_or_else(|| format!("{at}.component: no [component.{id}] in the manifest"))?;
        spec.routes.push(RouteSpec {
            route,
            component: id.to_string(),
        });
        if spec.components.contains_key(id) {
            continue;
        }
        let source = c.source.as_str().ok_or_else(|| {
            format!("spin.toml: component.{id}.source: a file in the app (a URL or registry source is not supported)")
        })?;
        sources.insert(id.to_string(), source.to_string());
        if let Some(decl) = files_decl(c.files.as_ref(), &c.exclude_files)
            .map_err(|e| format!("spin.toml: component.{id}.{e}"))?
        {
            files.insert(id.to_string(), decl);
        }
        spec.components.insert(
            id.to_string(),
            ComponentSpec {
                digest: String::new(),
                key_value_stores: c.key_value_stores.clone(),
                sqlite_databases: c.sqlite_databases.clone(),
                allowed_outbound_hosts: c.allowed_outbound_hosts.clone(),
                variables: c.variables.clone(),
                files: Vec::new(),
            },
        );
    }
    if spec.routes.is_empty() {
        return Err("spin.toml: no [[trigger.http]] with a route".into());
    }
    Ok(SpinApp {
        name: m.application.name.to_ascii_lowercase(),
        spec,
        sources,
        files,
    })
}

/// A component's `files` and `exclude_files` checked: none without
/// `files`. Errors start with the key (`files[1].destination: ...`).
fn files_decl(
    files: Option<&toml::Value>,
    exclude: &[String],
) -> Result<Option<FilesDecl>, String> {
    let Some(files) = files else {
        return Ok(None);
    };
    let list = files
        .as_array()
        .ok_or("files: a list of globs and { source, destination } tables")?;
    if list.len() > MAX_FILE_ENTRIES {
        return Err(format!(
            "files: {} entries; at most {MAX_FILE_ENTRIES}",
            list.len()
        ));
    }
    if exclude.len() > MAX_FILE_ENTRIES {
        return Err(format!(
            "exclude_files: {} entries; at most {MAX_FILE_ENTRIES}",
            exclude.len()
        ));
    }
    let mut entries = Vec::new();
    for (i, entry) in list.iter().enumerate() {
        let at = format!("files[{i}]");
        entries.push(match entry {
            toml::Value::String(glob) => {
                let g = normal_path(glob).ok_or_else(|| {
                    format!("{at}: {glob:?} leaves the app's directory (globs are relative to it, without '..')")
                })?;
                check_glob(&g).map_err(|e| format!("{at}: {e}"))?;
                FileEntry::Glob(g)
            }
            toml::Value::Table(t) => {
                if let Some(extra) = t.keys().find(|k| *k != "source" && *k != "destination") {
                    return Err(format!(
                        "{at}: unknown key {extra:?} (allowed: source, destination)"
                    ));
                }
                let (Some(source), Some(dest)) = (
                    t.get("source").and_then(|v| v.as_str()),
                    t.get("destination").and_then(|v| v.as_str()),
                ) else {
                    return Err(format!(
                        "{at}: a table needs `source` (a directory of the app) and `destination` (an absolute path)"
                    ));
                };
                let source = if source.split('/').all(|p| p.is_empty() || p == ".") && !source.starts_with('/') {
                    String::new()
                } else {
                    normal_path(source).ok_or_else(|| {
                        format!("{at}.source: {source:?} leaves the app's directory")
                    })?
                };
                let destination = dest
                    .strip_prefix('/')
                    .and_then(|rest| {
                        if rest.split('/').all(|p| p.is_empty() || p == ".") {
                            Some(String::new())
                        } else {
                            normal_path(rest)
                        }
                    })
                    .map(|d| format!("/{d}"))
                    .ok_or_else(|| {
                        format!("{at}.destination: {dest:?} is not an absolute path without '..'")
                    })?;
                if source.len() > MAX_GLOB || destination.len() > MAX_FILE_PATH {
                    return Err(format!("{at}: a source longer than {MAX_GLOB} bytes or a destination longer than {MAX_FILE_PATH}"));
                }
                FileEntry::Dir {
                    source,
                    destination,
                }
            }
            _ => {
                return Err(format!(
                    "{at}: a glob or a {{ source, destination }} table"
                ));
            }
        });
    }
    let mut excludes = Vec::new();
    for (i, x) in exclude.iter().enumerate() {
        check_glob(x).map_err(|e| format!("exclude_files[{i}]: {e}"))?;
        excludes.push(x.trim_start_matches("./").to_string());
    }
    Ok(Some(FilesDecl {
        entries,
        exclude: excludes,
    }))
}

/// The files `decl` gives of the app's files `names` (normal relative
/// paths), in guest-path order, as `edge up` mounts them: a glob's
/// matches at their paths (`*` within a directory, `**` across them), a
/// directory's files under its destination, less those an
/// `exclude_files` glob matches. Two different files at one path, or
/// more than [`MAX_FILES`], are refused.
pub fn resolve_files<'a>(
    decl: &FilesDecl,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<ResolvedFile>, String> {
    let names: Vec<&str> = names.into_iter().collect();
    let walk = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: false,
    };
    let excludes: Vec<glob::Pattern> = decl
        .exclude
        .iter()
        .filter_map(|x| glob::Pattern::new(x).ok())
        .collect();
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (i, entry) in decl.entries.iter().enumerate() {
        let mut add = |guest: String, source: &str| -> Result<(), String> {
            if excludes.iter().any(|x| x.matches(source)) {
                return Ok(());
            }
            match out.get(&guest) {
                Some(other) if other != source => Err(format!(
                    "files[{i}]: {guest} would be both {other:?} and {source:?}; one destination holds one file"
                )),
                _ => {
                    out.insert(guest, source.to_string());
                    if out.len() > MAX_FILES {
                        return Err(format!(
                            "files: more than {MAX_FILES} files; a component may see at most {MAX_FILES}"
                        ));
                    }
                    Ok(())
                }
            }
        };
        match entry {
            FileEntry::Glob(g) => {
                let pattern = glob::Pattern::new(g)
                    .map_err(|e| format!("files[{i}]: {g:?} is not a glob: {e}"))?;
                for name in names.iter().filter(|n| pattern.matches_with(n, walk)) {
                    add(format!("/{name}"), name)?;
                }
            }
            FileEntry::Dir {
                source,
                destination,
            } => {
                let dest = destination.trim_end_matches('/');
                for name in &names {
                    let rest = if source.is_empty() {
                        Some(*name)
                    } else if *name == source {
                        add(destination.clone(), name)?;
                        continue;
                    } else {
                        name.strip_prefix(source.as_str())
                            .and_then(|r| r.strip_prefix('/'))
                    };
                    if let Some(rest) = rest {
                        add(format!("{dest}/{rest}"), name)?;
                    }
                }
            }
        }
    }
    let list: Vec<ResolvedFile> = out
        .into_iter()
        .map(|(guest, source)| ResolvedFile { guest, source })
        .collect();
    if let Some(conflict) = dir_conflict(list.iter().map(|f| f.guest.as_str())) {
        return Err(format!("files: {conflict}"));
    }
    Ok(list)
}

/// A path that is a file and, for another, a directory (`/a` and
/// `/a/b`), said so; a tree cannot hold both.
fn dir_conflict<'a>(paths: impl Iterator<Item = &'a str> + Clone) -> Option<String> {
    let all: std::collections::BTreeSet<&str> = paths.clone().collect();
    for p in paths {
        let mut at = p;
        while let Some((parent, _)) = at.rsplit_once('/') {
            if parent.is_empty() {
                break;
            }
            if all.contains(parent) {
                return Some(format!(
                    "{parent} is a file, and a directory of {p}; it cannot be both"
                ));
            }
            at = parent;
        }
    }
    None
}

/// Whether `path` is a file's path in the guest edge accepts: absolute,
/// normal (no empty, `.` or `..` segment), not `/` itself, within
/// [`MAX_FILE_PATH`] bytes, no NUL.
pub fn is_guest_path(path: &str) -> bool {
    path.len() <= MAX_FILE_PATH
        && !path.contains('\0')
        && path.strip_prefix('/').is_some_and(|rest| {
            !rest.is_empty() && rest.split('/').all(|p| !matches!(p, "" | "." | ".."))
        })
}

/// Checks a component's files as a version names them (from JSON, or
/// resolved from an archive): at most [`MAX_FILES`], each path a guest
/// path ([`is_guest_path`]) given once and no path both a file and a
/// directory, each digest well formed. The error names the index.
pub fn check_file_list(files: &[FileSpec]) -> Result<(), (Option<usize>, String)> {
    if files.len() > MAX_FILES {
        return Err((
            None,
            format!(
                "{} files; a component may see at most {MAX_FILES}",
                files.len()
            ),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, f) in files.iter().enumerate() {
        if !is_guest_path(&f.path) {
            return Err((
                Some(i),
                format!(
                    "path {:?} is not an absolute, normal path of a file (no '.', '..' or empty segments; at most {MAX_FILE_PATH} bytes)",
                    f.path
                ),
            ));
        }
        if crate::blobs::digest_hex(&f.digest).is_none() {
            return Err((
                Some(i),
                format!("{:?} is not a digest (sha256:64 hex digits)", f.digest),
            ));
        }
        if !seen.insert(f.path.as_str()) {
            return Err((Some(i), format!("path {} is listed twice", f.path)));
        }
    }
    if let Some(conflict) = dir_conflict(files.iter().map(|f| f.path.as_str())) {
        return Err((None, conflict));
    }
    Ok(())
}
/// `path` as a normal relative path inside an archive (`./a/b` → `a/b`),
/// or `None` if it leaves the archive.
pub fn normal_path(path: &str) -> Option<String> {
    let mut parts = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => return None,
            p => parts.push(p),
        }
    }
    (!path.starts_with('/') && !parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_become_versions() {
        let app = parse(
            r#"spin_manifest_version = 2
[application]
name = "Shop"
[variables]
api_key = { required = true, secret = true }
[[trigger.http]]
route = "/api/..."
component = "api"
[[trigger.http]]
route = { private = true }
component = "api"
[component.api]
source = "target/api.wasm"
key_value_stores = ["default"]
[component.api.variables]
key = "{{ api_key }}"
[component.api.build]
command = "cargo build"
"#,
        )
        .unwrap();
        assert_eq!(app.name, "shop");
        assert_eq!(app.sources["api"], "target/api.wasm");
        assert_eq!(app.spec.routes.len(), 1);
        assert!(app.spec.variables["api_key"].secret);
        assert_eq!(app.spec.components["api"].variables["key"], "{{ api_key }}");
    }

    #[test]
    fn what_edge_cannot_serve_is_named() {
        let e = parse("spin_manifest_version = 2\n[application]\nname = \"a\"\n[[trigger.redis]]\ncomponent = \"x\"\n").unwrap_err();
        assert!(e.contains("trigger.redis"), "{e}");
        let e = parse("spin_manifest_version = 2\n[application]\nname = \"a\"\n[[trigger.http]]\nroute = \"/\"\ncomponent = \"x\"\n[component.x]\nsource = { url = \"https://x\", digest = \"sha256:0\" }\n").unwrap_err();
        assert!(e.contains("component.x.source"), "{e}");
        assert_eq!(normal_path("./a/./b.wasm").as_deref(), Some("a/b.wasm"));
        assert_eq!(normal_path("../x"), None);
        assert_eq!(normal_path("/etc/passwd"), None);
    }

    fn decl(files: &str, exclude: &str) -> Result<FilesDecl, String> {
        let t: toml::Table = toml::from_str(&format!("f = {files}\nx = {exclude}")).unwrap();
        let x: Vec<String> = t["x"].clone().try_into().unwrap();
        files_decl(Some(&t["f"]), &x).map(|d| d.unwrap())
    }

    fn guests(r: &[ResolvedFile]) -> Vec<String> {
        r.iter()
            .map(|f| format!("{}={}", f.guest, f.source))
            .collect()
    }

    const APP: &[&str] = &[
        "spin.toml",
        "static/index.html",
        "static/css/site.css",
        "static/server.key",
        "assets/logo.svg",
        "assets/deep/x.png",
        "ui/index.html",
        "top.txt",
    ];

    #[test]
    fn files_resolve_globs_mappings_and_excludes_as_spin_does() {
        let d = decl(
            r#"["static/**/*", { source = "assets", destination = "/img" }, "*.txt", { source = "./ui/", destination = "/ui/" }]"#,
            r#"["**/*.key"]"#,
        )
        .unwrap();
        assert_eq!(
            guests(&resolve_files(&d, APP.iter().copied()).unwrap()),
            [
                "/img/deep/x.png=assets/deep/x.png",
                "/img/logo.svg=assets/logo.svg",
                "/static/css/site.css=static/css/site.css",
                "/static/index.html=static/index.html",
                "/top.txt=top.txt",
                "/ui/index.html=ui/index.html",
            ]
        );
        // `*` stays within a directory; `./` is the app's directory.
        let d = decl(r#"["static/*", "./top.txt"]"#, "[]").unwrap();
        assert_eq!(
            guests(&resolve_files(&d, APP.iter().copied()).unwrap()),
            [
                "/static/index.html=static/index.html",
                "/static/server.key=static/server.key",
                "/top.txt=top.txt",
            ]
        );
        // One file as the source: that file at the destination.
        let d = decl(
            r#"[{ source = "top.txt", destination = "/etc/motd" }]"#,
            "[]",
        )
        .unwrap();
        assert_eq!(
            guests(&resolve_files(&d, APP.iter().copied()).unwrap()),
            ["/etc/motd=top.txt"]
        );
        // The whole app under a destination; a file also matched by a
        // second entry at the same path is one file.
        let d = decl(
            r#"[{ source = ".", destination = "/app" }, { source = "static", destination = "/app/static" }]"#,
            r#"["spin.toml"]"#,
        )
        .unwrap();
        let all = resolve_files(&d, APP.iter().copied()).unwrap();
        assert_eq!(all.len(), APP.len() - 1);
        assert!(all.iter().all(|f| f.guest.starts_with("/app/")));
    }

    #[test]
    fn files_refuse_traversal_collisions_and_too_many() {
        for (files, why) in [
            (
                r#"["../secrets/*"]"#,
                "files[0]: \"../secrets/*\" leaves the app's directory",
            ),
            (
                r#"["/etc/*"]"#,
                "files[0]: \"/etc/*\" leaves the app's directory",
            ),
            (r#"["a/../../b"]"#, "leaves the app's directory"),
            (
                r#"[{ source = "../x", destination = "/x" }]"#,
                "files[0].source: \"../x\" leaves",
            ),
            (
                r#"[{ source = "/etc", destination = "/x" }]"#,
                "files[0].source: \"/etc\" leaves",
            ),
            (
                r#"[{ source = "x", destination = "rel" }]"#,
                "files[0].destination: \"rel\" is not an absolute path",
            ),
            (
                r#"[{ source = "x", destination = "/a/../../etc" }]"#,
                "files[0].destination",
            ),
            (
                r#"[{ source = "x", destination = "/x", mode = "rw" }]"#,
                "unknown key \"mode\"",
            ),
            (r#"["[unclosed"]"#, "is not a glob"),
            (r#""static""#, "files: a list"),
        ] {
            let e = decl(files, "[]").unwrap_err();
            assert!(e.contains(why), "{files}: {e}");
        }
        assert!(
            decl("[]", r#"["[x"]"#)
                .unwrap_err()
                .contains("exclude_files[0]")
        );
        // Bounded work: entries, glob lengths and wildcards.
        let many = format!("[{}]", vec!["\"a\""; MAX_FILE_ENTRIES + 1].join(","));
        assert!(
            decl(&many, "[]")
                .unwrap_err()
                .contains("files: 65 entries; at most 64")
        );
        assert!(
            decl("[]", &many)
                .unwrap_err()
                .contains("exclude_files: 65 entries")
        );
        let stars = format!("[\"{}\"]", "*a".repeat(MAX_STARS + 1));
        assert!(decl(&stars, "[]").unwrap_err().contains("more than 8 '*'"));
        let long = format!("[\"{}\"]", "a".repeat(MAX_GLOB + 1));
        assert!(
            decl(&long, "[]")
                .unwrap_err()
                .contains("longer than 256 bytes")
        );
        // Two files at one destination.
        let d = decl(
            r#"[{ source = "static", destination = "/s" }, { source = "ui", destination = "/s" }]"#,
            "[]",
        )
        .unwrap();
        let e = resolve_files(&d, APP.iter().copied()).unwrap_err();
        assert!(
            e.contains("/s/index.html would be both \"static/index.html\" and \"ui/index.html\""),
            "{e}"
        );
        // A file where another needs a directory.
        let d = decl(
            r#"[{ source = "top.txt", destination = "/static" }, "static/*"]"#,
            "[]",
        )
        .unwrap();
        let e = resolve_files(&d, APP.iter().copied()).unwrap_err();
        assert!(e.contains("/static is a file, and a directory of"), "{e}");
        // More than a component may see.
        let many: Vec<String> = (0..=MAX_FILES).map(|i| format!("d/{i}")).collect();
        let d = decl(r#"["d/*"]"#, "[]").unwrap();
        let e = resolve_files(&d, many.iter().map(String::as_str)).unwrap_err();
        assert!(e.contains("at most 10000"), "{e}");
        assert_eq!(
            resolve_files(&d, many[..MAX_FILES].iter().map(String::as_str))
                .unwrap()
                .len(),
            MAX_FILES
        );
    }

    #[test]
    fn file_lists_in_versions_are_checked() {
        let f = |path: &str| FileSpec {
            path: path.into(),
            digest: format!("sha256:{}", "a".repeat(64)),
            size: 1,
        };
        assert!(check_file_list(&[f("/ui/index.html"), f("/a")]).is_ok());
        for bad in ["ui/x", "/", "/a/../b", "/a//b", "/a/./b", "/a/", "/a\0b"] {
            let (i, e) = check_file_list(&[f("/ok"), f(bad)]).unwrap_err();
            assert_eq!(i, Some(1), "{bad}");
            assert!(e.contains("not an absolute, normal path"), "{bad}: {e}");
        }
        let long = format!("/{}", "a".repeat(MAX_FILE_PATH));
        assert!(check_file_list(&[f(&long)]).is_err());
        let (i, e) = check_file_list(&[f("/a"), f("/a")]).unwrap_err();
        assert_eq!((i, e.as_str()), (Some(1), "path /a is listed twice"));
        let (_, e) = check_file_list(&[f("/a"), f("/a/b")]).unwrap_err();
        assert!(e.contains("/a is a file, and a directory of /a/b"), "{e}");
        let mut g = f("/x");
        g.digest = "sha256:../../etc/passwd".into();
        assert!(
            check_file_list(&[g])
                .unwrap_err()
                .1
                .contains("not a digest")
        );
        let many: Vec<FileSpec> = (0..=MAX_FILES).map(|i| f(&format!("/{i}"))).collect();
        assert!(
            check_file_list(&many)
                .unwrap_err()
                .1
                .contains("at most 10000")
        );
    }

    #[test]
    fn manifests_carry_their_files() {
        let app = parse(
            r#"spin_manifest_version = 2
[application]
name = "ui"
[[trigger.http]]
route = "/..."
component = "web"
[component.web]
source = "web.wasm"
files = [{ source = "build/ui", destination = "/ui" }]
exclude_files = ["**/*.map"]
"#,
        )
        .unwrap();
        assert_eq!(
            app.files["web"],
            FilesDecl {
                entries: vec![FileEntry::Dir {
                    source: "build/ui".into(),
                    destination: "/ui".into()
                }],
                exclude: vec!["**/*.map".into()],
            }
        );
        let e = parse(
            "spin_manifest_version = 2\n[application]\nname = \"a\"\n[[trigger.http]]\nroute = \"/\"\ncomponent = \"x\"\n[component.x]\nsource = \"x.wasm\"\nfiles = [\"../../etc/*\"]\n",
        )
        .unwrap_err();
        assert!(e.starts_with("spin.toml: component.x.files[0]: "), "{e}");
    }
}
