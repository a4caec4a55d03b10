//! Answers what Spin's key-value and variables APIs give it (the same
//! routes as rust-features, on the older SDK):
//!
//! - `GET /kv/KEY`, `PUT /kv/KEY` (body is the value), `DELETE /kv/KEY`,
//!   `HEAD /kv/KEY`, `GET /kv` (all keys, sorted, one per line);
//! - `GET /kv-open/LABEL`: opens another store (the error, if any);
//! - `GET /var/NAME`: a variable (the error variant, if any).
use spin_sdk::http::{IntoResponse, Method, Request, Response};
use spin_sdk::http_component;
use spin_sdk::key_value::Store;
use spin_sdk::variables;

#[http_component]
fn handle(req: Request) -> anyhow::Result<impl IntoResponse> {
    let path = req.path().to_string();
    let (status, body) = if let Some(name) = path.strip_prefix("/var/") {
        match variables::get(name) {
            Ok(value) => (200, value),
            Err(e) => (500, format!("{e:?}")),
        }
    } else if let Some(label) = path.strip_prefix("/kv-open/") {
        match Store::open(label) {
            Ok(_) => (200, "opened".to_string()),
            Err(e) => (500, format!("{e:?}")),
        }
    } else if path == "/kv" {
        let store = Store::open_default()?;
        let mut keys = store.get_keys()?;
        keys.sort();
        (200, keys.join("\n"))
    } else if let Some(key) = path.strip_prefix("/kv/") {
        let store = Store::open_default()?;
        match req.method() {
            Method::Put => {
                store.set(key, req.body())?;
                (200, "stored".to_string())
            }
            Method::Delete => {
                store.delete(key)?;
                (200, "deleted".to_string())
            }
            Method::Head => {
                let status = if store.exists(key)? { 200 } else { 404 };
                (status, String::new())
            }
            _ => match store.get(key)? {
                Some(v) => (200, String::from_utf8_lossy(&v).into_owned()),
                None => (404, "no such key".to_string()),
            },
        }
    } else {
        (404, "no such route".to_string())
    };
    Ok(Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(body)
        .build())
}
