//! Points the component at the indexes it embeds: `$EDGE_HINTS_DIR` (default
//! `build/hints` of the repository), written by `edge hints build` (`make
//! hints-index`).
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=EDGE_HINTS_DIR");
    let dir = std::env::var_os("EDGE_HINTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../build/hints")
        });
    for name in ["address.idx", "names.idx"] {
        let path = dir.join(name);
        if !path.exists() {
            panic!(
                "{} is missing: the hints component embeds its indexes; run `make hints-index` (or set EDGE_HINTS_DIR)",
                path.display()
            );
        }
        println!("cargo:rerun-if-changed={}", path.display());
        let var = name.replace('.', "_").to_uppercase();
        println!(
            "cargo:rustc-env=HINTS_{var}={}",
            path.canonicalize().unwrap().display()
        );
    }
}
