//! The web workspace's files (mounted with Spin `files` at the `ui_dir`
//! variable, `/ui` by default): GET or HEAD of a path outside `/api` is
//! the file, its `.br` (or `.gz`) sibling when the client takes it, or
//! else `index.html` (the single-page app's own routes); a missing
//! `/_app/` asset is 404. No `.`/`..` segments or dotfiles.

use crate::{Config, Req, Resp, error};
use billing_core::ApiError;
use billing_core::files::{SECURITY_HEADERS, accepts, cache_control, content_type, relative_path};
use bytes::Bytes;
use spin_sdk::http::FullBody;

fn is_file(p: &str) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file())
}

pub fn serve(config: &Config, req: &Req) -> Resp {
    if !matches!(req.method, http::Method::GET | http::Method::HEAD) {
        return error(&ApiError::new(405, None, "method not allowed here"));
    }
    let Some(mut rel) = relative_path(&req.path) else {
        return error(&ApiError::not_found("file"));
    };
    if !is_file(&format!("{}/{rel}", config.ui_dir)) {
        if rel.starts_with("_app/") {
            return error(&ApiError::not_found("file"));
        }
        rel = "index.html".into();
        if !is_file(&format!("{}/{rel}", config.ui_dir)) {
            return error(&ApiError::not_found(
                "file (the web workspace is not built)",
            ));
        }
    }
    let full = format!("{}/{rel}", config.ui_dir);
    let accept = req.header("accept-encoding").unwrap_or("");
    let (path, encoding) = if accepts(accept, "br") && is_file(&format!("{full}.br")) {
        (format!("{full}.br"), Some("br"))
    } else if accepts(accept, "gzip") && is_file(&format!("{full}.gz")) {
        (format!("{full}.gz"), Some("gzip"))
    } else {
        (full, None)
    };
    let Ok(body) = std::fs::read(&path) else {
        return error(&ApiError::not_found("file"));
    };
    let mut b = http::Response::builder()
        .status(200)
        .header("content-type", content_type(&rel))
        .header("cache-control", cache_control(&rel))
        .header("vary", "accept-encoding");
    for (k, v) in SECURITY_HEADERS {
        b = b.header(*k, *v);
    }
    if let Some(e) = encoding {
        b = b.header("content-encoding", e);
    }
    let body = if req.method == http::Method::HEAD {
        Bytes::new()
    } else {
        Bytes::from(body)
    };
    b.body(FullBody::new(body)).expect("a valid response")
}
