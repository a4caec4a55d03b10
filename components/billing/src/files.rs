//! The web workspace's files: mounted with Spin `files` at the `ui_dir`
//! variable (`/ui`), or else the copy embedded at build time (`build.rs`;
//! the control plane deploys components, not `files`). GET or HEAD of a
//! path outside `/api` is the file, its `.br` (or `.gz`) sibling when the
//! client takes it, or else `index.html` (the single-page app's own
//! routes); a missing `/_app/` asset is 404. No `.`/`..` segments or
//! dotfiles.

use crate::{Config, Req, Resp, error};
use billing_core::ApiError;
use billing_core::files::{SECURITY_HEADERS, accepts, cache_control, content_type, relative_path};
use bytes::Bytes;
use spin_sdk::http::FullBody;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/ui.rs"));
}

/// Where the files come from.
enum Source<'a> {
    /// A mounted directory.
    Dir(&'a str),
    /// The build's copy.
    Embedded,
}

impl Source<'_> {
    fn pick(config: &Config) -> Source<'_> {
        if std::fs::metadata(format!("{}/index.html", config.ui_dir)).is_ok_and(|m| m.is_file()) {
            Source::Dir(&config.ui_dir)
        } else {
            Source::Embedded
        }
    }

    fn has(&self, rel: &str) -> bool {
        match self {
            Source::Dir(d) => std::fs::metadata(format!("{d}/{rel}")).is_ok_and(|m| m.is_file()),
            Source::Embedded => embedded::EMBEDDED
                .binary_search_by(|(p, _)| (*p).cmp(rel))
                .is_ok(),
        }
    }

    fn read(&self, rel: &str) -> Option<Bytes> {
        match self {
            Source::Dir(d) => std::fs::read(format!("{d}/{rel}")).ok().map(Bytes::from),
            Source::Embedded => embedded::EMBEDDED
                .binary_search_by(|(p, _)| (*p).cmp(rel))
                .ok()
                .map(|i| Bytes::from_static(embedded::EMBEDDED[i].1)),
        }
    }
}

pub fn serve(config: &Config, req: &Req) -> Resp {
    if !matches!(req.method, http::Method::GET | http::Method::HEAD) {
        return error(&ApiError::new(405, None, "method not allowed here"));
    }
    let Some(mut rel) = relative_path(&req.path) else {
        return error(&ApiError::not_found("file"));
    };
    let source = Source::pick(config);
    if !source.has(&rel) {
        if rel.starts_with("_app/") {
            return error(&ApiError::not_found("file"));
        }
        rel = "index.html".into();
        if !source.has(&rel) {
            return error(&ApiError::not_found(
                "file (the web workspace is not built)",
            ));
        }
    }
    let accept = req.header("accept-encoding").unwrap_or("");
    let (path, encoding) = if accepts(accept, "br") && source.has(&format!("{rel}.br")) {
        (format!("{rel}.br"), Some("br"))
    } else if accepts(accept, "gzip") && source.has(&format!("{rel}.gz")) {
        (format!("{rel}.gz"), Some("gzip"))
    } else {
        (rel.clone(), None)
    };
    let Some(body) = source.read(&path) else {
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
