//! Embeds the web workspace's files when `BILLING_UI_DIR` names a
//! directory (`make billing` sets it to `build/billing/ui`), so the app
//! serves them wherever it runs: the control plane deploys a Spin app's
//! components but not its `files`. A directory mounted at `ui_dir` (Spin
//! `files`, under `edge up` or Spin) is served instead when present.

use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.is_file() {
            out.push(p);
        }
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=BILLING_UI_DIR");
    let mut files = Vec::new();
    let root = std::env::var("BILLING_UI_DIR").ok().map(PathBuf::from);
    if let Some(root) = &root {
        println!("cargo:rerun-if-changed={}", root.display());
        walk(root, &mut files);
    }
    // Sorted as strings: the app finds them by binary search.
    let mut entries: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            let rel = f
                .strip_prefix(root.as_ref().unwrap())
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (rel, f.canonicalize().unwrap().display().to_string())
        })
        .collect();
    entries.sort();
    let mut code = String::from(
        "/// The embedded files: path under the root, contents.\npub static EMBEDDED: &[(&str, &[u8])] = &[\n",
    );
    for (rel, abs) in &entries {
        code.push_str(&format!("    ({rel:?}, include_bytes!({abs:?})),\n"));
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("ui.rs");
    std::fs::write(out, code).unwrap();
}
