//! Answers its component's name (the `name` variable) and then every
//! `spin-*` header it was given, one `name: value` line each, sorted.
use spin_sdk::http::{IntoResponse, Request, Response};
use spin_sdk::http_service;

#[http_service]
async fn handle(req: Request) -> anyhow::Result<impl IntoResponse> {
    let mut lines = vec![spin_sdk::variables::get("name").await?];
    let mut headers: Vec<String> = req
        .headers()
        .iter()
        .filter(|(k, _)| k.as_str().starts_with("spin-"))
        .map(|(k, v)| format!("{k}: {}", v.to_str().unwrap_or("<binary>")))
        .collect();
    headers.sort();
    lines.extend(headers);
    Ok(Response::builder()
        .status(200)
        .header("content-type", "text/plain")
        .body(lines.join("\n")))
}
