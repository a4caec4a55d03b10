//! Exercises the capabilities the host grants, so tests (and people) can see
//! over HTTP what a component may and may not do. Paths after `/probe`:
//!
//! | request                          | does                                              |
//! |----------------------------------|---------------------------------------------------|
//! | `GET /var/NAME`                  | `wasi:config/store.get(NAME)`: the value, or 404  |
//! | `GET /kv/LABEL/KEY`              | the value, or 404                                 |
//! | `PUT /kv/LABEL/KEY` (body)       | sets the value                                    |
//! | `DELETE /kv/LABEL/KEY`           | deletes it                                        |
//! | `POST /kv/LABEL/KEY/incr?by=N`   | atomic increment: the new value                   |
//! | `GET /kv/LABEL`                  | every key, one per line (follows the cursor)      |
//! | `GET /fetch?url=URL`             | outbound GET: `STATUS\nBODY`, or 502 and why       |
//! | `POST /run?program=P&arg=A...` (body: stdin) | sidecar run: `EXIT\nSTDOUT`, or 403/502 and `KIND: why` |
//!
//! Failures answer 500 with the host's error text (403 for `access-denied`),
//! which is what the tests check.

mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "edge:platform/capabilities",
        generate_all,
    });
}

use bindings::wasi::config::store as config;
use bindings::wasi::keyvalue::{atomics, store as kv};
use wasi::http::types::{
    ErrorCode, Fields, IncomingRequest, Method, OutgoingBody, OutgoingRequest, OutgoingResponse,
    ResponseOutparam, Scheme,
};

struct Probe;

fn respond(out: ResponseOutparam, status: u16, body: &[u8]) {
    let headers = Fields::new();
    let _ = headers.set("content-type", &[b"text/plain".to_vec()]);
    let response = OutgoingResponse::new(headers);
    let _ = response.set_status_code(status);
    let Ok(outgoing) = response.body() else {
        return;
    };
    ResponseOutparam::set(out, Ok(response));
    if let Ok(stream) = outgoing.write() {
        for chunk in body.chunks(4096) {
            let _ = stream.blocking_write_and_flush(chunk);
        }
    }
    let _ = OutgoingBody::finish(outgoing, None);
}

fn read_body(request: &IncomingRequest) -> Vec<u8> {
    let mut all = Vec::new();
    if let Ok(body) = request.consume()
        && let Ok(stream) = body.stream()
    {
        while let Ok(bytes) = stream.blocking_read(64 * 1024) {
            all.extend(bytes);
        }
    }
    all
}

fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn kv_failure(e: kv::Error) -> (u16, String) {
    match e {
        kv::Error::AccessDenied => (403, "access-denied\n".into()),
        kv::Error::NoSuchStore => (404, "no-such-store\n".into()),
        kv::Error::Other(m) => (500, format!("{m}\n")),
    }
}

fn key_value(method: &Method, rest: &[&str], query: &str, body: Vec<u8>) -> (u16, Vec<u8>) {
    let Some(label) = rest.first() else {
        return (400, b"usage: /kv/LABEL[/KEY[/incr]]\n".to_vec());
    };
    let bucket = match kv::open(label) {
        Ok(b) => b,
        Err(e) => {
            let (s, m) = kv_failure(e);
            return (s, m.into_bytes());
        }
    };
    let result = match (method, &rest[1..]) {
        (Method::Get, []) => {
            let mut keys = Vec::new();
            let mut cursor = None;
            loop {
                match bucket.list_keys(cursor) {
                    Ok(page) => {
                        keys.extend(page.keys);
                        cursor = page.cursor;
                        if cursor.is_none() {
                            break Ok(keys
                                .iter()
                                .map(|k| format!("{k}\n"))
                                .collect::<String>()
                                .into_bytes());
                        }
                    }
                    Err(e) => break Err(e),
                }
            }
        }
        (Method::Get, [key]) => match bucket.get(key) {
            Ok(Some(v)) => Ok(v),
            Ok(None) => return (404, b"no such key\n".to_vec()),
            Err(e) => Err(e),
        },
        (Method::Put, [key]) => bucket.set(key, &body).map(|()| b"stored\n".to_vec()),
        (Method::Delete, [key]) => bucket.delete(key).map(|()| b"deleted\n".to_vec()),
        (Method::Post, [key, "incr"]) => {
            let by = query_param(query, "by")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1);
            atomics::increment(&bucket, key, by).map(|n| format!("{n}\n").into_bytes())
        }
        _ => return (405, b"unsupported method or path\n".to_vec()),
    };
    match result {
        Ok(body) => (200, body),
        Err(e) => {
            let (s, m) = kv_failure(e);
            (s, m.into_bytes())
        }
    }
}

fn run(query: &str, stdin: Vec<u8>) -> (u16, Vec<u8>) {
    use bindings::edge::platform::process::{self, Error};
    let mut program = None;
    let mut args = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("program", p)) => program = Some(percent_decode(p)),
            Some(("arg", a)) => args.push(percent_decode(a)),
            _ => {}
        }
    }
    let Some(program) = program else {
        return (400, b"usage: /run?program=P&arg=A...\n".to_vec());
    };
    match process::run(&program, &args, &stdin, None, None) {
        Ok(out) => {
            let mut body = format!("{}\n", out.exit_code).into_bytes();
            body.extend(out.stdout);
            (200, body)
        }
        Err(e) => {
            let (status, kind, why) = match e {
                Error::NotAllowed(m) => (403, "not-allowed", m),
                Error::BadPath(m) => (400, "bad-path", m),
                Error::NotFound(m) => (502, "not-found", m),
                Error::Timeout(m) => (504, "timeout", m),
                Error::OutputTooLarge(m) => (502, "output-too-large", m),
                Error::Busy(m) => (503, "busy", m),
                Error::Unavailable(m) => (503, "unavailable", m),
                Error::Failed(m) => (502, "failed", m),
            };
            (status, format!("{kind}: {why}\n").into_bytes())
        }
    }
}

fn fetch(url: &str) -> (u16, Vec<u8>) {
    let (scheme, rest) = match url.split_once("://") {
        Some(("http", r)) => (Scheme::Http, r),
        Some(("https", r)) => (Scheme::Https, r),
        _ => return (400, b"url must start with http:// or https://\n".to_vec()),
    };
    let (authority, path) = rest
        .find('/')
        .map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
    let request = OutgoingRequest::new(Fields::new());
    let _ = request.set_scheme(Some(&scheme));
    let _ = request.set_authority(Some(authority));
    let _ = request.set_path_with_query(Some(path));
    let failed = |e: ErrorCode| (502, format!("{e:?}\n").into_bytes());
    let future = match wasi::http::outgoing_handler::handle(request, None) {
        Ok(f) => f,
        Err(e) => return failed(e),
    };
    future.subscribe().block();
    let response = match future.get() {
        Some(Ok(Ok(r))) => r,
        Some(Ok(Err(e))) => return failed(e),
        _ => return (502, b"no response\n".to_vec()),
    };
    let mut body = format!("{}\n", response.status()).into_bytes();
    if let Ok(incoming) = response.consume()
        && let Ok(stream) = incoming.stream()
    {
        while let Ok(bytes) = stream.blocking_read(64 * 1024) {
            body.extend(bytes);
        }
    }
    (200, body)
}

impl wasi::exports::http::incoming_handler::Guest for Probe {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let pq = request.path_with_query().unwrap_or_default();
        let (path, query) = pq.split_once('?').unwrap_or((pq.as_str(), ""));
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let start = segments
            .iter()
            .position(|s| *s == "probe")
            .map_or(0, |i| i + 1);
        let method = request.method();
        let (status, body) = match &segments[start..] {
            ["var", name] => match config::get(name) {
                Ok(Some(v)) => (200, v.into_bytes()),
                Ok(None) => (404, b"no such variable\n".to_vec()),
                Err(e) => (500, format!("{e:?}\n").into_bytes()),
            },
            ["kv", rest @ ..] => {
                let body = read_body(&request);
                key_value(&method, rest, query, body)
            }
            ["run"] => {
                let body = read_body(&request);
                run(query, body)
            }
            ["fetch"] => match query_param(query, "url") {
                Some(url) => fetch(&percent_decode(url)),
                None => (400, b"usage: /fetch?url=URL\n".to_vec()),
            },
            _ => (404, b"unknown probe\n".to_vec()),
        };
        respond(out, status, &body);
    }
}

wasi::http::proxy::export!(Probe);
