//! Answers what Spin's key-value and variables APIs give it (the same
//! routes as rust-features, on the older SDK):
//!
//! - `GET /kv/KEY`, `PUT /kv/KEY` (body is the value), `DELETE /kv/KEY`,
//!   `HEAD /kv/KEY`, `GET /kv` (all keys, sorted, one per line);
//! - `GET /kv-open/LABEL`: opens another store (the error, if any);
//! - `GET /var/NAME`: a variable (the error variant, if any);
//! - `POST /sql`: runs the body's first line as a statement on the default
//!   database, with the following lines as parameters (`i:N`, `r:F`,
//!   `t:TEXT`, `b:HEX`, `null`); answers the columns and one line per row;
//! - `GET /sql-open/LABEL`: opens another database (the error, if any).
use spin_sdk::http::{IntoResponse, Method, Request, Response};
use spin_sdk::sqlite::{Connection, Value};
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
    } else if path == "/sql" {
        let text = String::from_utf8_lossy(req.body()).into_owned();
        let mut lines = text.lines();
        let statement = lines.next().unwrap_or_default().to_string();
        let params: Vec<Value> = lines.map(param).collect();
        let db = Connection::open_default()?;
        match db.execute(&statement, &params) {
            Ok(result) => {
                let mut out = vec![format!("columns: {}", result.columns.join(","))];
                for row in &result.rows {
                    out.push(row.values.iter().map(show).collect::<Vec<_>>().join("|"));
                }
                (200, out.join("\n"))
            }
            Err(e) => (500, format!("{e:?}")),
        }
    } else if let Some(label) = path.strip_prefix("/sql-open/") {
        match Connection::open(label) {
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

fn param(line: &str) -> Value {
    match line.split_once(':') {
        Some(("i", n)) => Value::Integer(n.parse().unwrap_or_default()),
        Some(("r", f)) => Value::Real(f.parse().unwrap_or_default()),
        Some(("t", t)) => Value::Text(t.to_string()),
        Some(("b", hex)) => Value::Blob(
            (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or_default())
                .collect(),
        ),
        _ => Value::Null,
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Integer(i) => format!("i:{i}"),
        Value::Real(f) => format!("r:{f}"),
        Value::Text(t) => format!("t:{t}"),
        Value::Blob(b) => format!("b:{}", b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
        Value::Null => "null".to_string(),
    }
}
