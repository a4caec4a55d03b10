//! Answers what Spin's key-value and variables APIs give it, so a test
//! can compare with what Spin documents:
//!
//! - `GET /kv/KEY`, `PUT /kv/KEY` (body is the value), `DELETE /kv/KEY`,
//!   `HEAD /kv/KEY`, `GET /kv` (all keys, sorted, one per line);
//! - `GET /kv-open/LABEL`: opens another store (the error, if any);
//! - `GET /var/NAME`: a variable (the error variant, if any);
//! - `POST /sql`: runs the body's first line as a statement on the default
//!   database, with the following lines as parameters (`i:N`, `r:F`,
//!   `t:TEXT`, `b:HEX`, `null`); answers the columns, one line per row, and
//!   the connection's last rowid and change count;
//! - `GET /sql-open/LABEL`: opens another database (the error, if any);
//! - `/redis/OP/KEY` with the server's address in `redis-address`:
//!   `POST set` (body), `GET get`, `GET incr`, `POST sadd` (body: values,
//!   comma-separated), `GET smembers` (sorted), `POST del`,
//!   `POST execute` (body: a command and integer arguments, space-separated);
//! - `POST /mqtt/TOPIC` with the broker's address in `mqtt-address` and
//!   the QoS (0, 1, 2) in `mqtt-qos`: publishes the body;
//! - `POST /pg` (`?execute` for a statement without rows) with the
//!   server's address in `pg-address`: the body's first line as a
//!   statement, the following lines as parameters (`i:N` int4, `l:N` int8,
//!   `t:TEXT`, `b:BOOL`, `f:F` float8, `null`); answers the column names
//!   and types, one line per row (or the count changed);
//! - `POST /mysql` (`?execute` for a statement without rows) with the
//!   server's address in `mysql-address`: as `/pg`, parameters `i:N`
//!   (int32), `u:N` (uint64), `t:TEXT`, `f:F`, `null`;
//! - `GET /file/PATH`: the file `/PATH` (`files`, through std::fs);
//! - `GET /hold-open?files=N&sql=M`: opens a file N times, then the default
//!   database M times, holding them all: how many of each opened, and the
//!   first refusal;
//! - `GET /list-dir?wasi=2|3`: the entries of `/static` (`name type`,
//!   sorted) through std (WASI 0.2) or `wasi:filesystem@0.3.0`; with
//!   `&hold=N`, starts N listings of it, reads one entry of each and holds
//!   them all: how many it held, and the first refusal; `&repeat=N` does
//!   it N times over (answering the last);
//! - `GET /env/NAME`: an environment variable (`environment`);
//! - `POST /tcp` with `tcp-address` (`IP:PORT`): sends the body over a TCP
//!   connection (`wasi:sockets`, through std), answers what comes back
//!   until the peer closes;
use spin_sdk::http::{IntoResponse, Request, Response};
use spin_sdk::sqlite::{Connection, Value};
use spin_sdk::http_service;
use spin_sdk::key_value::Store;
use spin_sdk::variables;

#[http_service]
async fn handle(req: Request) -> anyhow::Result<impl IntoResponse> {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let (status, body) = if let Some(name) = path.strip_prefix("/var/") {
        match variables::get(name).await {
            Ok(value) => (200, value),
            Err(e) => (500, format!("{e:?}")),
        }
    } else if let Some(label) = path.strip_prefix("/kv-open/") {
        match Store::open(label).await {
            Ok(_) => (200, "opened".to_string()),
            Err(e) => (500, format!("{e:?}")),
        }
    } else if let Some(rest) = path.strip_prefix("/redis/") {
        let address = req
            .headers()
            .get("redis-address")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let (op, key) = rest.split_once('/').unwrap_or((rest, ""));
        let (op, key) = (op.to_string(), key.to_string());
        let body = spin_sdk::http::body::IncomingBodyExt::bytes(req.into_body()).await?;
        match redis(&address, &op, &key, &body).await {
            Ok(answer) => (200, answer),
            Err(e) => (500, format!("{e:?}")),
        }
    } else if let Some(topic) = path.strip_prefix("/mqtt/") {
        use spin_sdk::mqtt::{Connection, Qos};
        let header = |name: &str| {
            req.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let (address, qos) = (header("mqtt-address"), header("mqtt-qos"));
        let qos = match qos.as_str() {
            "1" => Qos::AtLeastOnce,
            "2" => Qos::ExactlyOnce,
            _ => Qos::AtMostOnce,
        };
        let topic = topic.to_string();
        let body = spin_sdk::http::body::IncomingBodyExt::bytes(req.into_body()).await?;
        let published = async {
            let conn = Connection::open(&address, "", "", 30).await?;
            conn.publish(&topic, body.to_vec(), qos).await
        };
        match published.await {
            Ok(()) => (200, "published".to_string()),
            Err(e) => (500, format!("{e:?}")),
        }
    } else if let Some(file) = path.strip_prefix("/file/") {
        match std::fs::read_to_string(format!("/{file}")) {
            Ok(text) => (200, text),
            Err(e) => (404, format!("{:?}", e.kind())),
        }
    } else if let Some(name) = path.strip_prefix("/env/") {
        match std::env::var(name) {
            Ok(v) => (200, v),
            Err(_) => (404, "unset".to_string()),
        }
    } else if path == "/tcp" {
        let address = req
            .headers()
            .get("tcp-address")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = spin_sdk::http::body::IncomingBodyExt::bytes(req.into_body()).await?;
        let exchange = || -> std::io::Result<String> {
            use std::io::{Read, Write};
            let mut stream = std::net::TcpStream::connect(&address)?;
            stream.write_all(&body)?;
            stream.shutdown(std::net::Shutdown::Write)?;
            let mut reply = String::new();
            stream.read_to_string(&mut reply)?;
            Ok(reply)
        };
        match exchange() {
            Ok(reply) => (200, reply),
            Err(e) => (500, format!("{:?}: {e}", e.kind())),
        }
    } else if path == "/mysql" {
        let address = req
            .headers()
            .get("mysql-address")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let execute = req.uri().query() == Some("execute");
        let body = spin_sdk::http::body::IncomingBodyExt::bytes(req.into_body()).await?;
        match mysql(&address, execute, &String::from_utf8_lossy(&body)).await {
            Ok(answer) => (200, answer),
            Err(e) => (500, format!("{e:?}")),
        }
    } else if path == "/pg" {
        let address = req
            .headers()
            .get("pg-address")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let execute = req.uri().query() == Some("execute");
        let body = spin_sdk::http::body::IncomingBodyExt::bytes(req.into_body()).await?;
        match pg(&address, execute, &String::from_utf8_lossy(&body)).await {
            Ok(answer) => (200, answer),
            Err(e) => (500, format!("{e:?}")),
        }
    } else if path == "/sql" {
        let body = spin_sdk::http::body::IncomingBodyExt::bytes(req.into_body()).await?;
        let text = String::from_utf8_lossy(&body).into_owned();
        let mut lines = text.lines();
        let statement = lines.next().unwrap_or_default().to_string();
        let params: Vec<Value> = lines.map(param).collect();
        let db = Connection::open_default().await?;
        match db.execute(&statement, params).await {
            Ok(result) => {
                let mut out = vec![format!("columns: {}", result.columns().join(","))];
                for row in result.collect().await? {
                    out.push(row.values.iter().map(show).collect::<Vec<_>>().join("|"));
                }
                out.push(format!(
                    "rowid={} changes={}",
                    db.last_insert_rowid().await,
                    db.changes().await
                ));
                (200, out.join("\n"))
            }
            Err(e) => (500, format!("{e:?}")),
        }
    } else if path == "/hold-open" {
        // Opens a file `files` times, then the default database `sql`
        // times, holding all until the answer: how many of each, and the
        // first refusal.
        let count = |name: &str| -> usize {
            req.uri()
                .query()
                .unwrap_or_default()
                .split('&')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
                .unwrap_or(0)
        };
        let (mut files, mut connections, mut refused) = (Vec::new(), Vec::new(), None);
        for _ in 0..count("files") {
            match std::fs::File::open("/static/index.html") {
                Ok(f) => files.push(f),
                Err(e) => {
                    refused = Some(format!("{:?}", e.kind()));
                    break;
                }
            }
        }
        for _ in 0..count("sql") {
            match Connection::open("default").await {
                Ok(c) => connections.push(c),
                Err(e) => {
                    refused = refused.or(Some(format!("{e:?}")));
                    break;
                }
            }
        }
        let refused = refused.unwrap_or_default();
        (
            200,
            format!(
                "files {}, sql {}: {refused}",
                files.len(),
                connections.len()
            ),
        )
    } else if path == "/list-dir" {
        let query = req.uri().query().unwrap_or_default().to_string();
        let param = |name: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .unwrap_or_default()
                .to_string()
        };
        let hold = param("hold").parse().unwrap_or(0);
        let mut answer = String::new();
        for _ in 0..param("repeat").parse().unwrap_or(1) {
            answer = if param("wasi") == "3" {
                list_p3(hold).await
            } else {
                list_p2(hold)
            };
        }
        (200, answer)
    } else if let Some(label) = path.strip_prefix("/sql-open/") {
        match Connection::open(label).await {
            Ok(_) => (200, "opened".to_string()),
            Err(e) => (500, format!("{e:?}")),
        }
    } else if path == "/kv" {
        let store = Store::open_default().await?;
        let mut keys = store.get_keys().await.collect().await?;
        keys.sort();
        (200, keys.join("\n"))
    } else if let Some(key) = path.strip_prefix("/kv/") {
        let store = Store::open_default().await?;
        match method {
            http::Method::PUT => {
                let body = spin_sdk::http::body::IncomingBodyExt::bytes(req.into_body()).await?;
                store.set(key, &body).await?;
                (200, "stored".to_string())
            }
            http::Method::DELETE => {
                store.delete(key).await?;
                (200, "deleted".to_string())
            }
            http::Method::HEAD => {
                let status = if store.exists(key).await? { 200 } else { 404 };
                (status, String::new())
            }
            _ => match store.get(key).await? {
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
        .body(body))
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

async fn redis(
    address: &str,
    op: &str,
    key: &str,
    body: &[u8],
) -> Result<String, spin_sdk::redis::Error> {
    use spin_sdk::redis::{Connection, RedisParameter, RedisResult};
    let conn = Connection::open(address).await?;
    let text = String::from_utf8_lossy(body).into_owned();
    Ok(match op {
        "set" => {
            conn.set(key, body).await?;
            "ok".to_string()
        }
        "get" => match conn.get(key).await? {
            Some(v) => String::from_utf8_lossy(&v).into_owned(),
            None => "nil".to_string(),
        },
        "incr" => conn.incr(key).await?.to_string(),
        "sadd" => conn.sadd(key, text.split(',')).await?.to_string(),
        "smembers" => {
            let mut m = conn.smembers(key).await?;
            m.sort();
            m.join(",")
        }
        "del" => conn.del([key]).await?.to_string(),
        "execute" => {
            let mut words = text.split(' ');
            let command = words.next().unwrap_or_default().to_string();
            let args = words.map(|w| match w.parse::<i64>() {
                Ok(i) => RedisParameter::Int64(i),
                Err(_) => RedisParameter::Binary(w.as_bytes().to_vec()),
            });
            conn.execute(command, args)
                .await?
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

async fn pg(address: &str, execute: bool, text: &str) -> Result<String, spin_sdk::pg::Error> {
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
    let conn = Connection::open(address).await?;
    if execute {
        return Ok(format!("changed {}", conn.execute(statement, params).await?));
    }
    let result = conn.query(statement, params).await?;
    let width = result.columns().len();
    let mut out = vec![result
        .columns()
        .iter()
        .map(|c| format!("{}:{:?}", c.name, c.data_type))
        .collect::<Vec<_>>()
        .join(",")];
    for row in result.collect().await? {
        out.push(
            (0..width)
                .map(|i| match &row[i] {
                    DbValue::Boolean(b) => format!("{b}"),
                    DbValue::Int16(i) => format!("{i}"),
                    DbValue::Int32(i) => format!("{i}"),
                    DbValue::Int64(i) => format!("{i}"),
                    DbValue::Floating64(f) => format!("{f}"),
                    DbValue::Str(s) => s.clone(),
                    DbValue::Uuid(u) => u.clone(),
                    DbValue::Decimal(d) => d.clone(),
                    DbValue::Jsonb(j) => String::from_utf8_lossy(j.as_slice()).into_owned(),
                    DbValue::Date((y, m, d)) => format!("{y}-{m:02}-{d:02}"),
                    DbValue::ArrayInt32(a) => format!("{a:?}"),
                    DbValue::ArrayStr(a) => format!("{a:?}"),
                    DbValue::Interval(i) => format!("{}mo{}d{}us", i.months, i.days, i.micros),
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

async fn mysql(address: &str, execute: bool, text: &str) -> Result<String, spin_sdk::mysql::Error> {
    use spin_sdk::mysql::{Connection, DbValue};
    let mut lines = text.lines();
    let statement = lines.next().unwrap_or_default().to_string();
    let params = mysql_params(lines);
    let conn = Connection::open(address).await?;
    if execute {
        conn.execute(statement, params).await?;
        return Ok("done".to_string());
    }
    let result = conn.query(statement, params).await?;
    let width = result.columns().len();
    let mut out = vec![result
        .columns()
        .iter()
        .map(|c| format!("{}:{:?}", c.name, c.data_type))
        .collect::<Vec<_>>()
        .join(",")];
    for row in result.collect().await? {
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

/// `/static` through std's `read_dir` (WASI 0.2): see `/list-dir`.
fn list_p2(hold: usize) -> String {
    if hold == 0 {
        let lines: std::io::Result<Vec<String>> = std::fs::read_dir("/static").and_then(|rd| {
            rd.map(|e| {
                let e = e?;
                let t = e.file_type()?;
                let kind = if t.is_dir() { "dir" } else if t.is_file() { "file" } else { "other" };
                Ok(format!("{} {kind}", e.file_name().to_string_lossy()))
            })
            .collect()
        });
        return match lines {
            Ok(mut lines) => {
                lines.sort();
                lines.join("\n")
            }
            Err(e) => format!("error {:?}", e.kind()),
        };
    }
    let mut held = Vec::new();
    for _ in 0..hold {
        match std::fs::read_dir("/static").and_then(|mut rd| rd.next().transpose().map(|_| rd)) {
            Ok(rd) => held.push(rd),
            Err(e) => return format!("held {}: {:?}", held.len(), e.kind()),
        }
    }
    format!("held {}: ", held.len())
}

/// `/static` through `wasi:filesystem@0.3.0`: see `/list-dir`.
async fn list_p3(hold: usize) -> String {
    use spin_sdk::wasip3::filesystem::preopens;
    use spin_sdk::wasip3::filesystem::types::{DescriptorFlags, DescriptorType, OpenFlags, PathFlags};
    let dirs = preopens::get_directories();
    let Some((root, _)) = dirs.iter().find(|(_, path)| path == "/") else {
        return "no preopened /".into();
    };
    let dir = match root
        .open_at(PathFlags::empty(), "static".into(), OpenFlags::DIRECTORY, DescriptorFlags::READ)
        .await
    {
        Ok(dir) => dir,
        Err(e) => return format!("open {e:?}"),
    };
    if hold == 0 {
        let (entries, done) = dir.read_directory();
        let mut lines: Vec<String> = entries
            .collect()
            .await
            .into_iter()
            .map(|e| {
                let kind = match e.type_ {
                    DescriptorType::Directory => "dir",
                    DescriptorType::RegularFile => "file",
                    _ => "other",
                };
                format!("{} {kind}", e.name)
            })
            .collect();
        if let Err(e) = done.await {
            return format!("error {e:?}");
        }
        lines.sort();
        return lines.join("\n");
    }
    let mut held = Vec::new();
    for _ in 0..hold {
        let (mut entries, done) = dir.read_directory();
        match entries.next().await {
            Some(_) => held.push((entries, done)),
            None => return format!("held {}: {:?}", held.len(), done.await),
        }
    }
    format!("held {}: ", held.len())
}
