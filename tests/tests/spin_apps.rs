//! Unmodified Spin apps, built with Spin's own SDKs from the registries
//! (`scripts/spin-apps.sh` builds them as `spin build` would), served by
//! `edge up` from their manifests as written.

use edge_tests::{Edge, get, repo};
use std::path::PathBuf;

/// The manifest of the app `name` under tests/spin-apps, after checking
/// its build ran.
fn app(name: &str) -> PathBuf {
    let dir = repo().join("tests/spin-apps").join(name);
    assert!(
        dir.join("target").exists(),
        "{name} is not built: run scripts/spin-apps.sh (make test does)"
    );
    dir.join("spin.toml")
}

#[tokio::test]
async fn rust_sdk_7_template_app_answers_over_wasi_0_3() {
    let edge = Edge::up(&app("rust-hello"), &[]);
    let (status, body) = get(&format!("{}/anything", edge.url)).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "Hello World!"),
        "{}",
        edge.log()
    );
    // The template prints the spin-full-url header it was given.
    let log = edge.log_after("Handling request to").await;
    assert!(
        log.contains(&format!("{}/anything", edge.url.replace("http://", ""))),
        "{log}"
    );
}

#[tokio::test]
async fn rust_sdk_3_template_module_is_componentized_and_answers() {
    let edge = Edge::up(&app("rust-v3-hello"), &[]);
    let (status, body) = get(&format!("{}/", edge.url)).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "Hello, Fermyon"),
        "{}",
        edge.log()
    );
}
