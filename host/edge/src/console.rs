//! The web console on the control API's listener, same origin as the API
//! (its session cookie and CSRF token): every path under `/v1/` is the
//! API as `edge_control` routes it; every other `GET` or `HEAD` is a file
//! of the console's build directory (SvelteKit's static build), or else
//! its `index.html`, so the console's own routes (`/t/acme/apps`) load on
//! a reload or a shared link. `edge_control` knows nothing of files.
//!
//! Files go out as `ServeDir` sends them (ranges, conditional requests,
//! the `.br` or `.gz` sibling a client accepts); this module adds the
//! headers: content-hashed `/_app/immutable/` files cached for a year,
//! everything else revalidated (`no-cache`), and on every answer
//! `nosniff`, no framing, same-origin referrers. The page's script policy
//! is the meta tag SvelteKit writes, so no `script-src` here.

use axum::Router;
use axum::body::Body;
use axum::response::IntoResponse;
use edge_control::api::ApiError;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use percent_encoding::percent_decode_str;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use tower::ServiceExt;
use tower_http::services::{ServeDir, ServeFile};

/// Where a console build is looked for when `[control] console` is unset.
pub const DEFAULT_INDEX: &str = "web-ui/build/index.html";

/// The console's directory: `configured`, or else the directory of
/// [`DEFAULT_INDEX`] above the working directory or the edge binary.
pub fn dir(configured: Option<&Path>) -> Option<PathBuf> {
    match configured {
        Some(d) => Some(d.to_path_buf()),
        None => crate::worker::find_above(DEFAULT_INDEX)
            .and_then(|index| index.parent().map(Path::to_path_buf)),
    }
}

/// `api` for `/v1` and everything under it; the console in `dir` for
/// every other path.
pub fn router(api: Router, dir: &Path) -> Router {
    let files = ServeDir::new(dir)
        .precompressed_br()
        .precompressed_gzip()
        .append_index_html_on_directories(false);
    let index = ServeFile::new(dir.join("index.html"))
        .precompressed_br()
        .precompressed_gzip();
    let pages = files.clone().fallback(index);
    let service = tower::service_fn(move |req: Request<Body>| {
        let (api, files, pages) = (api.clone(), files.clone(), pages.clone());
        async move {
            let path = req.uri().path();
            if path == "/v1" || path.starts_with("/v1/") {
                return api.oneshot(req).await;
            }
            Ok::<_, Infallible>(console(files, pages, req).await)
        }
    });
    Router::new().fallback_service(service)
}

/// Answers a request for the console's files.
async fn console(
    files: ServeDir,
    pages: ServeDir<ServeFile>,
    req: Request<Body>,
) -> Response<Body> {
    let method = req.method().clone();
    if method != Method::GET && method != Method::HEAD {
        let mut r = ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            None,
            format!("{method} is not allowed here: the console's files answer GET and HEAD (the API is under /v1/)"),
        )
        .into_response();
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        guard(r.headers_mut());
        return r;
    }
    let path = req.uri().path().to_string();
    if !servable(&path) {
        let mut r = ApiError::not_found("no such file").into_response();
        guard(r.headers_mut());
        return r;
    }
    // The build's own files (scripts, styles, fonts) are never the page:
    // a missing one is 404, not index.html (which a stale client would
    // otherwise run as a script, or cache for a year).
    let answer = if path.starts_with("/_app/") {
        files.oneshot(req).await
    } else {
        pages.oneshot(req).await
    };
    let mut r = match answer {
        Ok(r) => r.map(Body::new),
        Err(never) => match never {},
    };
    let immutable = path.starts_with("/_app/immutable/")
        && (r.status().is_success() || r.status() == StatusCode::NOT_MODIFIED);
    let headers = r.headers_mut();
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if immutable {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        }),
    );
    // Any file may have a precompressed sibling: caches must key on it.
    headers.append(header::VARY, HeaderValue::from_static("accept-encoding"));
    guard(headers);
    r
}

/// The headers every console answer carries.
fn guard(headers: &mut HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("frame-ancestors 'none'"),
    );
}

/// Whether `path` (as sent, percent-encoded) may name a file of the
/// console: no segment that is `.`, `..` or a dotfile, whether sent
/// plainly or percent-encoded (once or twice), no backslash, no NUL.
fn servable(path: &str) -> bool {
    let Ok(once) = percent_decode_str(path).decode_utf8() else {
        return false;
    };
    let Ok(twice) = percent_decode_str(&once).decode_utf8() else {
        return false;
    };
    [path, &once, &twice]
        .iter()
        .all(|p| !p.contains(['\\', '\0']) && p.split('/').all(|s| !s.starts_with('.')))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A console build with a page, its compressed siblings, an
    /// immutable asset, a dotfile and a directory; the API's stand-in.
    fn console() -> (Router, PathBuf) {
        let dir = std::env::temp_dir().join(format!("edge-console-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("_app/immutable/chunks")).unwrap();
        std::fs::create_dir_all(dir.join("docs")).unwrap();
        std::fs::write(dir.join("index.html"), "<!doctype html><title>edge</title>").unwrap();
        std::fs::write(dir.join("index.html.br"), "BROTLI").unwrap();
        std::fs::write(dir.join("index.html.gz"), "GZIP").unwrap();
        std::fs::write(dir.join("_app/immutable/chunks/a1b2.js"), "export {}").unwrap();
        std::fs::write(dir.join("_app/version.json"), "{\"version\":\"1\"}").unwrap();
        std::fs::write(dir.join("favicon.png"), "PNG").unwrap();
        std::fs::write(dir.join(".env"), "SECRET=1").unwrap();
        std::fs::write(dir.join("docs/notes.txt"), "notes").unwrap();
        let api = Router::new()
            .route("/v1/whoami", axum::routing::get(|| async { "api" }))
            .fallback(|| async { ApiError::not_found("no such endpoint") });
        (router(api, &dir), dir)
    }

    async fn get(app: &Router, method: &str, path: &str, accept: &str) -> (u16, HeaderMap, String) {
        let mut req = Request::builder().method(method).uri(path);
        if !accept.is_empty() {
            req = req.header(header::ACCEPT_ENCODING, accept);
        }
        let resp = app
            .clone()
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let (parts, body) = resp.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
        (
            parts.status.as_u16(),
            parts.headers,
            String::from_utf8_lossy(&bytes).into_owned(),
        )
    }

    fn guarded(h: &HeaderMap) {
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert_eq!(h["x-frame-options"], "DENY");
        assert_eq!(h["referrer-policy"], "same-origin");
        assert_eq!(h["content-security-policy"], "frame-ancestors 'none'");
    }

    #[tokio::test]
    async fn serves_files_pages_and_the_api_apart() {
        let (app, dir) = console();
        const PAGE: &str = "<!doctype html><title>edge</title>";

        // The page, and the console's routes as the page, revalidated.
        for path in [
            "/",
            "/index.html",
            "/t/acme/apps",
            "/t/acme/apps?x=1",
            "/docs/",
            "/docs",
        ] {
            let (s, h, body) = get(&app, "GET", path, "").await;
            assert_eq!((s, body.as_str()), (200, PAGE), "{path}");
            assert_eq!(h["cache-control"], "no-cache", "{path}");
            assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
            guarded(&h);
        }
        // A file of the build; a missing one is the page too.
        let (s, h, body) = get(&app, "GET", "/favicon.png", "").await;
        assert_eq!((s, body.as_str()), (200, "PNG"));
        assert_eq!(h["content-type"], "image/png");
        assert_eq!(get(&app, "GET", "/docs/notes.txt", "").await.2, "notes");
        assert_eq!(get(&app, "GET", "/robots.txt", "").await.2, PAGE);

        // Precompressed siblings for the clients that take them.
        let (s, h, body) = get(&app, "GET", "/t/acme", "gzip, br").await;
        assert_eq!((s, body.as_str()), (200, "BROTLI"));
        assert_eq!(h["content-encoding"], "br");
        assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
        assert!(
            h.get_all("vary")
                .iter()
                .any(|v| v.to_str().unwrap().eq_ignore_ascii_case("accept-encoding")),
            "{h:?}"
        );
        let (_, h, body) = get(&app, "GET", "/index.html", "gzip").await;
        assert_eq!(
            (h["content-encoding"].to_str().unwrap(), body.as_str()),
            ("gzip", "GZIP")
        );

        // Content-hashed assets for a year; other build files revalidated;
        // a missing asset is 404, never the page.
        let (s, h, body) = get(&app, "GET", "/_app/immutable/chunks/a1b2.js", "").await;
        assert_eq!((s, body.as_str()), (200, "export {}"));
        assert_eq!(h["cache-control"], "public, max-age=31536000, immutable");
        assert!(h["content-type"].to_str().unwrap().contains("javascript"));
        guarded(&h);
        let (s, h, _) = get(&app, "GET", "/_app/version.json", "").await;
        assert_eq!((s, h["cache-control"].to_str().unwrap()), (200, "no-cache"));
        let (s, h, body) = get(&app, "GET", "/_app/immutable/chunks/gone.js", "").await;
        assert_eq!(s, 404, "{body}");
        assert_eq!(h["cache-control"], "no-cache");
        assert_eq!(get(&app, "GET", "/_app/immutable/", "").await.0, 404);

        // HEAD: the head alone.
        let (s, h, body) = get(&app, "HEAD", "/t/acme", "").await;
        assert_eq!((s, body.as_str()), (200, ""));
        assert_eq!(h["content-length"], PAGE.len().to_string().as_str());

        // Nothing outside the directory, no dotfiles, however spelled.
        for path in [
            "/../c.db",
            "/_app/../../c.db",
            "/%2e%2e/c.db",
            "/%2E%2E%2Fc.db",
            "/%252e%252e/c.db",
            "/.env",
            "/%2eenv",
            "/docs/./notes.txt",
            "/docs/..%5cnotes.txt",
            "/docs%00",
        ] {
            let (s, h, body) = get(&app, "GET", path, "").await;
            assert_eq!(s, 404, "{path}: {body}");
            assert!(!body.contains("SECRET"), "{path}");
            guarded(&h);
        }

        // Changes are the API's alone.
        let (s, h, body) = get(&app, "POST", "/t/acme", "").await;
        assert_eq!(s, 405);
        assert_eq!(h["allow"], "GET, HEAD");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("GET and HEAD"),
            "{v}"
        );
        guarded(&h);

        // The API as it is, its own 404 included.
        assert_eq!(get(&app, "GET", "/v1/whoami", "").await.2, "api");
        for path in ["/v1/nothing", "/v1", "/v1/index.html"] {
            let (s, h, body) = get(&app, "GET", path, "").await;
            assert_eq!(s, 404, "{path}");
            assert!(
                h["content-type"]
                    .to_str()
                    .unwrap()
                    .starts_with("application/json")
            );
            assert!(body.contains("no such endpoint"), "{path}: {body}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn unservable_paths() {
        for ok in [
            "/",
            "/t/acme/apps",
            "/_app/immutable/x.js",
            "/a..b",
            "/a%20b",
        ] {
            assert!(servable(ok), "{ok}");
        }
        for bad in [
            "/..",
            "/.git/config",
            "/%2e",
            "/a/%2E%2E/b",
            "/%252E%252E",
            "/a\\b",
            "/a%5cb",
            "/%00",
            "/%ff",
        ] {
            assert!(!servable(bad), "{bad}");
        }
    }
}
