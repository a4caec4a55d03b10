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
//! - `GET /sql-open/LABEL`: opens another database (the error, if any);
//! - `/redis/OP/KEY` with the server's address in `redis-address`:
//!   `POST set` (body), `GET get`, `GET incr`, `POST sadd` (body: values,
//!   comma-separated), `GET smembers` (sorted), `POST del`,
//!   `POST execute` (body: a command and integer arguments, space-separated);
//! - `POST /mqtt/TOPIC` with the broker's address in `mqtt-address` and
//!   the QoS (0, 1, 2) in `mqtt-qos`: publishes the body;
//! - `POST /pg` (`fermyon:spin/postgres@2.0.0`) and `POST /pg3`
//!   (`spin:postgres@3.0.0`) (`?execute` for a statement without rows) with the
//!   server's address in `pg-address`: the body's first line as a
//!   statement, the following lines as parameters (`i:N` int4, `l:N` int8,
//!   `t:TEXT`, `b:BOOL`, `f:F` float8, `null`); answers the column names
//!   and types, one line per row (or the count changed);
//! - `POST /mysql` (`?execute` for a statement without rows) with the
//!   server's address in `mysql-address`: as `/pg`, parameters `i:N`
//!   (int32), `u:N` (uint64), `t:TEXT`, `f:F`, `null`;
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
    } else if let Some(rest) = path.strip_prefix("/redis/") {
        let address = req
            .header("redis-address")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        let (op, key) = rest.split_once('/').unwrap_or((rest, ""));
        match redis(&address, op, key, req.body()) {
            Ok(answer) => (200, answer),
            Err(e) => (500, format!("{e:?}")),
        }
    } else if let Some(topic) = path.strip_prefix("/mqtt/") {
        use spin_sdk::mqtt::{Connection, Qos};
        let header = |name: &str| {
            req.header(name)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string()
        };
        let qos = match header("mqtt-qos").as_str() {
            "1" => Qos::AtLeastOnce,
            "2" => Qos::ExactlyOnce,
            _ => Qos::AtMostOnce,
        };
        let published = Connection::open(&header("mqtt-address"), "", "", 30)
            .and_then(|conn| conn.publish(topic, &req.body().to_vec(), qos));
        match published {
            Ok(()) => (200, "published".to_string()),
            Err(e) => (500, format!("{e:?}")),
        }
    } else if path == "/mysql" {
        let address = req
            .header("mysql-address")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        let execute = req.query() == "execute";
        let text = String::from_utf8_lossy(req.body()).into_owned();
        match mysql(&address, execute, &text) {
            Ok(answer) => (200, answer),
            Err(e) => (500, format!("{e:?}")),
        }
    } else if path == "/pg" || path == "/pg3" {
        let address = req
            .header("pg-address")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        let execute = req.query() == "execute";
        let text = String::from_utf8_lossy(req.body()).into_owned();
        let answer = if path == "/pg" {
            pg(&address, execute, &text).map_err(|e| format!("{e:?}"))
        } else {
            pg3(&address, execute, &text).map_err(|e| format!("{e:?}"))
        };
        match answer {
            Ok(answer) => (200, answer),
            Err(e) => (500, e),
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

fn redis(address: &str, op: &str, key: &str, body: &[u8]) -> Result<String, spin_sdk::redis::Error> {
    use spin_sdk::redis::{Connection, RedisParameter, RedisResult};
    let conn = Connection::open(address)?;
    let text = String::from_utf8_lossy(body).into_owned();
    Ok(match op {
        "set" => {
            conn.set(key, &body.to_vec())?;
            "ok".to_string()
        }
        "get" => match conn.get(key)? {
            Some(v) => String::from_utf8_lossy(&v).into_owned(),
            None => "nil".to_string(),
        },
        "incr" => conn.incr(key)?.to_string(),
        "sadd" => {
            let values: Vec<String> = text.split(',').map(str::to_string).collect();
            conn.sadd(key, &values)?.to_string()
        }
        "smembers" => {
            let mut m = conn.smembers(key)?;
            m.sort();
            m.join(",")
        }
        "del" => conn.del(&[key.to_string()])?.to_string(),
        "execute" => {
            let mut words = text.split(' ');
            let command = words.next().unwrap_or_default().to_string();
            let args: Vec<RedisParameter> = words
                .map(|w| match w.parse::<i64>() {
                    Ok(i) => RedisParameter::Int64(i),
                    Err(_) => RedisParameter::Binary(w.as_bytes().to_vec()),
                })
                .collect();
            conn.execute(&command, &args)?
                .iter()
                .map(|r| match r {
                    RedisResult::Nil => "nil".to_string(),
                    RedisResult::Status(s) => format!("status:{s}"),
                    RedisResult::Int64(i) => format!("int:{i}"),
                    RedisResult::Binary(b) => format!("bin:{}", String::from_utf8_lossy(b)),
                })
                .collect::<Vec<_>>()
                .join(",")
        }
        other => format!("unknown op {other}"),
    })
}

fn pg(address: &str, execute: bool, text: &str) -> Result<String, spin_sdk::pg::Error> {
    use spin_sdk::pg::{Connection, DbValue, ParameterValue};
    let mut lines = text.lines();
    let statement = lines.next().unwrap_or_default().to_string();
    let params: Vec<ParameterValue> = lines
        .map(|l| match l.split_once(':') {
            Some(("i", n)) => ParameterValue::Int32(n.parse().unwrap_or_default()),
            Some(("l", n)) => ParameterValue::Int64(n.parse().unwrap_or_default()),
            Some(("t", t)) => ParameterValue::Str(t.to_string()),
            Some(("b", b)) => ParameterValue::Boolean(b == "true"),
            Some(("f", f)) => ParameterValue::Floating64(f.parse().unwrap_or_default()),
            _ => ParameterValue::DbNull,
        })
        .collect();
    let conn = Connection::open(address)?;
    if execute {
        return Ok(format!("changed {}", conn.execute(&statement, &params)?));
    }
    let set = conn.query(&statement, &params)?;
    let mut out = vec![set
        .columns
        .iter()
        .map(|c| format!("{}:{:?}", c.name, c.data_type))
        .collect::<Vec<_>>()
        .join(",")];
    for row in &set.rows {
        out.push(
            row.iter()
                .map(|v| match v {
                    DbValue::Boolean(b) => format!("{b}"),
                    DbValue::Int16(i) => format!("{i}"),
                    DbValue::Int32(i) => format!("{i}"),
                    DbValue::Int64(i) => format!("{i}"),
                    DbValue::Floating64(f) => format!("{f}"),
                    DbValue::Str(s) => s.clone(),
                    DbValue::DbNull => "null".to_string(),
                    other => format!("{other:?}"),
                })
                .collect::<Vec<_>>()
                .join("|"),
        );
    }
    Ok(out.join("\n"))
}

fn pg3(address: &str, execute: bool, text: &str) -> Result<String, spin_sdk::pg3::Error> {
    use spin_sdk::pg3::{Connection, DbValue, ParameterValue};
    let mut lines = text.lines();
    let statement = lines.next().unwrap_or_default().to_string();
    let params: Vec<ParameterValue> = lines
        .map(|l| match l.split_once(':') {
            Some(("i", n)) => ParameterValue::Int32(n.parse().unwrap_or_default()),
            Some(("l", n)) => ParameterValue::Int64(n.parse().unwrap_or_default()),
            Some(("t", t)) => ParameterValue::Str(t.to_string()),
            Some(("b", b)) => ParameterValue::Boolean(b == "true"),
            Some(("f", f)) => ParameterValue::Floating64(f.parse().unwrap_or_default()),
            _ => ParameterValue::DbNull,
        })
        .collect();
    let conn = Connection::open(address)?;
    if execute {
        return Ok(format!("changed {}", conn.execute(&statement, &params)?));
    }
    let set = conn.query(&statement, &params)?;
    let mut out = vec![set
        .columns
        .iter()
        .map(|c| format!("{}:{:?}", c.name, c.data_type))
        .collect::<Vec<_>>()
        .join(",")];
    for row in &set.rows {
        out.push(
            row.iter()
                .map(|v| match v {
                    DbValue::Boolean(b) => format!("{b}"),
                    DbValue::Int16(i) => format!("{i}"),
                    DbValue::Int32(i) => format!("{i}"),
                    DbValue::Int64(i) => format!("{i}"),
                    DbValue::Floating64(f) => format!("{f}"),
                    DbValue::Str(s) => s.clone(),
                    DbValue::Date((y, m, d)) => format!("{y}-{m:02}-{d:02}"),
                    DbValue::DbNull => "null".to_string(),
                    other => format!("{other:?}"),
                })
                .collect::<Vec<_>>()
                .join("|"),
        );
    }
    Ok(out.join("\n"))
}

use spin_sdk::mysql::ParameterValue as MysqlParam;

fn mysql_params(lines: std::str::Lines<'_>) -> Vec<MysqlParam> {
    lines
        .map(|l| match l.split_once(':') {
            Some(("i", n)) => MysqlParam::Int32(n.parse().unwrap_or_default()),
            Some(("u", n)) => MysqlParam::Uint64(n.parse().unwrap_or_default()),
            Some(("t", t)) => MysqlParam::Str(t.to_string()),
            Some(("f", f)) => MysqlParam::Floating64(f.parse().unwrap_or_default()),
            _ => MysqlParam::DbNull,
        })
        .collect()
}

fn mysql(address: &str, execute: bool, text: &str) -> Result<String, spin_sdk::mysql::Error> {
    use spin_sdk::mysql::{Connection, DbValue};
    let mut lines = text.lines();
    let statement = lines.next().unwrap_or_default().to_string();
    let params = mysql_params(lines);
    let conn = Connection::open(address)?;
    if execute {
        conn.execute(&statement, &params)?;
        return Ok("done".to_string());
    }
    let set = conn.query(&statement, &params)?;
    let width = set.columns.len();
    let mut out = vec![set
        .columns
        .iter()
        .map(|c| format!("{}:{:?}", c.name, c.data_type))
        .collect::<Vec<_>>()
        .join(",")];
    for row in &set.rows {
        out.push(
            (0..width)
                .map(|i| match &row[i] {
                    DbValue::Int8(v) => v.to_string(),
                    DbValue::Int32(v) => v.to_string(),
                    DbValue::Int64(v) => v.to_string(),
                    DbValue::Uint32(v) => v.to_string(),
                    DbValue::Uint64(v) => v.to_string(),
                    DbValue::Floating64(v) => v.to_string(),
                    DbValue::Str(s) => s.clone(),
                    DbValue::Binary(b) => format!("0x{}", b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
                    DbValue::DbNull => "null".to_string(),
                    other => format!("{other:?}"),
                })
                .collect::<Vec<_>>()
                .join("|"),
        );
    }
    Ok(out.join("\n"))
}
