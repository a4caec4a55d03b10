//! The signing library natively behind HTTP: the baseline that shows what
//! the signer component's sandbox costs, HTTP being equal. `POST /tokens`
//! with `{"room", "user": {"id", "name"}}` answers `{"token"}` (EdDSA,
//! Jitsi claims), like the component's default; two worker threads, like
//! `edge serve` on this 2-core machine. Used by `bench/udf.sh`:
//!
//!   cargo run --release -p signing --example sign_server -- 127.0.0.1:18290

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use signing::{Key, KeySet, jwt, presets};
use std::sync::Arc;

fn issue(keys: &KeySet, body: &[u8]) -> (u16, Value) {
    let Ok(Value::Object(req)) = serde_json::from_slice::<Value>(body) else {
        return (
            400,
            json!({"error": {"message": "the body is not a JSON object"}}),
        );
    };
    let field = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let user = req.get("user");
    let (Some(room), Some(id), Some(name)) = (
        field(req.get("room")),
        field(user.and_then(|u| u.get("id"))),
        field(user.and_then(|u| u.get("name"))),
    ) else {
        return (
            400,
            json!({"error": {"message": "room, user.id and user.name are required"}}),
        );
    };
    let user = presets::User {
        id,
        name,
        ..Default::default()
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let claims = presets::jitsi("edge", "*", &room, &user, false, now, 3600);
    match jwt::sign(keys, None, &claims) {
        Ok(token) => (200, json!({"token": token, "expires_at": now + 3600})),
        Err(e) => (500, json!({"error": {"message": e.to_string()}})),
    }
}

async fn serve(
    keys: Arc<KeySet>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let body = request.into_body().collect().await?.to_bytes();
    let (status, answer) = issue(&keys, &body);
    let mut response = Response::new(Full::new(Bytes::from(answer.to_string())));
    *response.status_mut() = hyper::StatusCode::from_u16(status).expect("a status");
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18290".into());
    let keys =
        Arc::new(KeySet::new(vec![Key::ed25519_from_seed("ed", &[1; 32]).unwrap()], "ed").unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&addr).await.unwrap();
        eprintln!("sign_server on http://{addr}");
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let _ = tcp.set_nodelay(true);
            let keys = keys.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |r| serve(keys.clone(), r));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
}
