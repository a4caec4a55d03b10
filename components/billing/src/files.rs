//! The web workspace's files, mounted with Spin `files` at the `ui_dir`
//! variable (`/ui`), under `edge up`, Spin, or the control plane. GET or HEAD of a
//! path outside `/api` is the file, its `.br` (or `.gz`) sibling when the
//! client takes it, or else `index.html` (the single-page app's own
//! routes); a missing `/_app/` asset is 404. No `.`/`..` segments or
//! dotfiles.

use crate::{Config, Req, Resp, error};
use billing_core::ApiError;
use billing_core::files::{SECURITY_HEADERS, accepts, cache_control, content_type, relative_path};
use bytes::Bytes;
use spin_sdk::http::FullBody;

/// The mounted directory's file `rel`, if it is one.
fn has(dir: &str, rel: &str) -> bool {
    std::fs::metadata(format!("{dir}/{rel}")).is_ok_and(|m| m.is_file())
}

fn read(dir: &str, rel: &str) -> Option<Bytes> {
    std::fs::read(format!("{dir}/{rel}")).ok().map(Bytes::from)
}

pub fn serve(config: &Config, req: &Req) -> Resp {
    if !matches!(req.method, http::Method::GET | http::Method::HEAD) {
        return error(&ApiError::new(405, None, "method not allowed here"));
    }
    let Some(mut rel) = relative_path(&req.path) else {
        return error(&ApiError::not_found("file"));
    };
    let dir = config.ui_dir.as_str();
    if !has(dir, &rel) {
        if rel.starts_with("_app/") {
            return error(&ApiError::not_found("file"));
        }
        rel = "index.html".into();
        if !has(dir, &rel) {
            return error(&ApiError::not_found(
                "file (the web workspace is not built)",
            ));
        }
    }
    let accept = req.header("accept-encoding").unwrap_or("");
    let (path, encoding) = if accepts(accept, "br") && has(dir, &format!("{rel}.br")) {
        (format!("{rel}.br"), Some("br"))
    } else if accepts(accept, "gzip") && has(dir, &format!("{rel}.gz")) {
        (format!("{rel}.gz"), Some("gzip"))
    } else {
        (rel.clone(), None)
    };
    let Some(body) = read(dir, &path) else {
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
        body
    };
    b.body(FullBody::new(body)).expect("a valid response")
}
