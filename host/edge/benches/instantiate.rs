//! Instantiate + handle + drop cost per request, on one core.
//!
//! Builds the real app (engine, pool, linker, echo component) and pushes
//! 10,000 requests through the same per-request path the server uses,
//! collecting each response body, on a current-thread runtime.
//!
//! `cargo bench -p edge --bench instantiate` (after `make components`).

use bytes::Bytes;
use edge::app::{App, Runtime};
use http_body_util::{BodyExt, Empty};
use std::time::Instant;

// The allocator of the `edge` binary, so the figure is the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Requests measured; `EDGE_BENCH_REQUESTS` overrides it (for profiling).
fn requests() -> usize {
    std::env::var("EDGE_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

fn main() -> anyhow::Result<()> {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let echo = repo.join("build/components/echo.wasm");
    anyhow::ensure!(
        echo.exists(),
        "{} missing: run `make components`",
        echo.display()
    );
    let dir = std::env::temp_dir().join(format!("edge-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("spin.toml"),
        format!(
            "spin_manifest_version = 2\n[application]\nname = \"bench\"\n[[trigger.http]]\nroute = \"/...\"\ncomponent = \"echo\"\n[component.echo]\nsource = \"{}\"\n",
            echo.display()
        ),
    )?;
    std::fs::write(
        dir.join("edge.toml"),
        "app = \"spin.toml\"\n[server]\ndata_dir = \"data\"\n[[tenant]]\nname = \"t\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n",
    )?;
    let config = edge_config::load(&dir.join("edge.toml"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(async {
        let runtime = Runtime::new(&config)?;
        let app = App::build(&runtime, config)?;
        let tenant = app.tenant("localhost").expect("tenant");
        let matched = tenant.route("localhost", "/bench").expect("route");
        let target = matched.route.target.clone();
        let one = || async {
            let req = http::Request::builder()
                .uri("http://localhost/bench")
                .body(Empty::<Bytes>::new())
                .expect("request");
            let deadline = std::time::Instant::now() + target.deadline;
            let resp = edge::invoke::per_request(&target, req, deadline)
                .await
                .map_err(|f| anyhow::anyhow!("{f:?}"))?;
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| anyhow::anyhow!("{e:?}"))?
                .to_bytes();
            anyhow::ensure!(
                body.as_ref() == b"hello from edge: /bench\n",
                "unexpected body {body:?}"
            );
            Ok::<_, anyhow::Error>(())
        };
        for _ in 0..1_000 {
            one().await?; // warm-up: page in the pool slots and code
        }
        let start = Instant::now();
        for _ in 0..requests() {
            one().await?;
        }
        let elapsed = start.elapsed();
        Ok::<_, anyhow::Error>(elapsed)
    });
    let _ = std::fs::remove_dir_all(&dir);
    let elapsed = result?;
    let per = elapsed.as_secs_f64() * 1e6 / requests() as f64;
    println!(
        "instantiate+handle+drop: {per:.2} µs/request over {} requests on one core ({:.0} req/s)",
        requests(),
        1e6 / per
    );
    Ok(())
}
