//! The billing app: dealers and the business's admins work with clients,
//! tariffs and payments through a JSON API (`/api/...`), and the web
//! workspace's files are served beside it. A plain Spin app (spin-sdk 7):
//! SQL through Spin's SQLite interface, or Spin's MySQL interface (MariaDB)
//! when the `db_url` variable is set. See `components/billing/README.md`.

mod api;
mod auth;
mod db;
mod files;
mod seed;

use billing_core::ApiError;
use bytes::Bytes;
use serde_json::Value;
use spin_sdk::http::{FullBody, Request};
use spin_sdk::http_service;

/// Every answer.
pub type Resp = http::Response<FullBody<Bytes>>;

/// The largest request body read.
const MAX_BODY: usize = 1 << 20;

/// Now, in unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `n` random bytes.
pub fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).expect("the host's random source");
    b
}

/// The app's settings, from Spin variables.
pub struct Config {
    /// `mysql://...` for MariaDB; empty for SQLite.
    pub db_url: String,
    /// The payments' row key (hex in `row_key`).
    pub row_key: Result<Vec<u8>, String>,
    /// `seed_token`: empty turns `/api/seed` off.
    pub seed_token: String,
    /// `demo_password`: the seeded users' password.
    pub demo_password: String,
    /// `seed_scale`: clients the seed makes.
    pub seed_scale: i64,
    /// `ui_dir`: where the web workspace's files are mounted.
    pub ui_dir: String,
}

async fn var(name: &str) -> String {
    spin_sdk::variables::get(name).await.unwrap_or_default()
}

impl Config {
    async fn load() -> Config {
        Config {
            db_url: var("db_url").await.trim().to_string(),
            row_key: billing_core::sign::parse_key(&var("row_key").await),
            seed_token: var("seed_token").await,
            demo_password: var("demo_password").await,
            seed_scale: var("seed_scale")
                .await
                .trim()
                .parse()
                .unwrap_or(billing_core::seed::Plan::DEMO.clients),
            ui_dir: match var("ui_dir").await.trim() {
                "" => "/ui".to_string(),
                d => d.trim_end_matches('/').to_string(),
            },
        }
    }
}

/// A request, read.
pub struct Req {
    pub method: http::Method,
    pub path: String,
    pub query: String,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Req {
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as a JSON object.
    pub fn json(&self) -> Result<serde_json::Map<String, Value>, ApiError> {
        if self.body.is_empty() {
            return Err(ApiError::malformed("the body must be a JSON object"));
        }
        match serde_json::from_slice::<Value>(&self.body) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err(ApiError::malformed("the body must be a JSON object")),
            Err(e) => Err(ApiError::malformed(format!("the body is not JSON: {e}"))),
        }
    }
}

/// A JSON answer.
pub fn json(status: u16, v: &Value) -> Resp {
    json_of(status, v)
}

/// A JSON answer of anything serializable.
pub fn json_of<T: serde::Serialize + ?Sized>(status: u16, v: &T) -> Resp {
    let body = serde_json::to_vec(v).expect("values serialize");
    http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .header("cache-control", "no-store")
        .header("x-content-type-options", "nosniff")
        .body(FullBody::new(Bytes::from(body)))
        .expect("a valid response")
}

/// An error answer.
pub fn error(e: &ApiError) -> Resp {
    let mut r = json(e.status, &e.body());
    if let Some(s) = e.retry_after {
        r.headers_mut().insert(
            "retry-after",
            http::HeaderValue::from_str(&s.to_string()).expect("digits"),
        );
    }
    r
}

#[http_service]
async fn handle(req: Request) -> anyhow::Result<Resp> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();
    let body = if matches!(parts.method, http::Method::GET | http::Method::HEAD) {
        Bytes::new()
    } else {
        match spin_sdk::http::body::IncomingBodyExt::bytes(body).await {
            Ok(b) if b.len() > MAX_BODY => {
                return Ok(error(&ApiError::new(
                    413,
                    None,
                    "the body is larger than 1 MiB",
                )));
            }
            Ok(b) => b,
            Err(_) => return Ok(error(&ApiError::malformed("the body could not be read"))),
        }
    };
    let req = Req {
        method: parts.method,
        path,
        query,
        headers: parts.headers,
        body,
    };
    let config = Config::load().await;
    if req.path == "/api" || req.path.starts_with("/api/") {
        Ok(match api::serve(&config, &req).await {
            Ok(r) => r,
            Err(e) => error(&e),
        })
    } else {
        Ok(files::serve(&config, &req))
    }
}
