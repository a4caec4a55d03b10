//! Unmodified Spin apps, built with Spin's own SDKs from the registries
//! (`scripts/spin-apps.sh` builds them as `spin build` would), served by
//! `edge up` from their manifests as written.

use edge_tests::{Edge, client, get, repo};
use std::path::PathBuf;

/// `method` on `url` with `body`: the status and body.
async fn send(method: &str, url: &str, body: &'static str) -> (u16, String) {
    edge_tests::request(&client(), method, url, &[], body.into()).await
}

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

#[tokio::test]
async fn rust_sdk_7_key_value_and_variables() {
    key_value_and_variables("rust-features").await;
}

#[tokio::test]
async fn rust_sdk_3_key_value_and_variables() {
    key_value_and_variables("rust-v3-features").await;
}

/// The same app in two SDK generations: the same answers.
async fn key_value_and_variables(name: &str) {
    let edge = Edge::up_env(
        &app(name),
        &["--variable", "greeting=bonjour"],
        &[("SPIN_VARIABLE_API_TOKEN", "s3cret")],
    );
    let url = |p: &str| format!("{}{p}", edge.url);
    // Variables: templates over app variables, from --variable and the
    // environment (a secret), as `spin up` reads them.
    assert_eq!(
        get(&url("/var/greeting")).await,
        (200, "bonjour, world".into())
    );
    assert_eq!(get(&url("/var/token")).await, (200, "s3cret".into()));
    // Spin's error variants, with Spin's words.
    let (status, body) = get(&url("/var/missing")).await;
    assert_eq!(status, 500);
    assert!(
        body.ends_with("Undefined(\"no variable for \\\"features\\\".\\\"missing\\\"\")"),
        "{body}"
    );
    let (status, body) = get(&url("/var/Bad")).await;
    assert_eq!(status, 500);
    assert!(
        body.contains("InvalidName(\"\\\"Bad\\\": invalid character 'B'"),
        "{body}"
    );

    // Key-value on the default store.
    assert_eq!(send("PUT", &url("/kv/b"), "two").await.0, 200);
    assert_eq!(send("PUT", &url("/kv/a"), "one").await.0, 200);
    assert_eq!(get(&url("/kv/a")).await, (200, "one".into()));
    assert_eq!(send("HEAD", &url("/kv/a"), "").await.0, 200);
    assert_eq!(get(&url("/kv")).await, (200, "a\nb".into()));
    assert_eq!(send("DELETE", &url("/kv/a"), "").await.0, 200);
    assert_eq!(get(&url("/kv/a")).await.0, 404);
    assert_eq!(send("HEAD", &url("/kv/a"), "").await.0, 404);
    // A store the manifest does not grant: Spin's AccessDenied.
    let (status, body) = get(&url("/kv-open/other")).await;
    assert_eq!(status, 500);
    assert!(body.ends_with("AccessDenied"), "{body}");
}

#[tokio::test]
async fn spin_key_value_and_wasi_keyvalue_share_the_tenants_stores() {
    // A Spin app beside a component using wasi:keyvalue, for one tenant:
    // both open "default" and see the same data.
    let dir = repo().join("tests/spin-apps/rust-features");
    let spin = format!(
        r#"spin_manifest_version = 2
[application]
name = "shared"
[[trigger.http]]
route = "/probe/..."
component = "probe"
[[trigger.http]]
route = "/..."
component = "features"
[component.probe]
source = "{probe}"
key_value_stores = ["default"]
[component.features]
source = "{features}"
key_value_stores = ["default"]
"#,
        probe = edge_tests::component("probe"),
        features = dir
            .join("target/wasm32-wasip2/release/rust_features.wasm")
            .display(),
    );
    let data = edge_tests::TempDir::new("spin-kv");
    let edge = Edge::start_with(
        &spin,
        "app = \"spin.toml\"\n[[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n",
        data.path(),
    );
    let url = |p: &str| format!("{}{p}", edge.url);
    assert_eq!(send("PUT", &url("/kv/shared"), "from spin").await.0, 200);
    assert_eq!(
        get(&url("/probe/kv/default/shared")).await,
        (200, "from spin".into())
    );
    assert_eq!(
        send("PUT", &url("/probe/kv/default/back"), "from wasi")
            .await
            .0,
        200
    );
    assert_eq!(get(&url("/kv/back")).await, (200, "from wasi".into()));
}
