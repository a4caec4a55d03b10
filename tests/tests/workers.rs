//! Workers on edge against workerd (through miniflare): the corpus in tests/workers/corpus/
//! runs on both in the same test, and every response must match in
//! status, headers (but those each server sets for itself) and body.

use bytes::Bytes;
use edge_tests::workers::{CorpusWorker, Reference, edge};
use http_body_util::{BodyExt, Full};
use std::collections::BTreeMap;

/// Headers each server sets its own way, not the Worker's doing.
const OWN_HEADERS: &[&str] = &[
    "date",
    "server",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "cf-ray",
];

struct Case {
    worker: &'static str,
    method: &'static str,
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: &'static str,
}

const fn get(worker: &'static str, path: &'static str) -> Case {
    Case {
        worker,
        method: "GET",
        path,
        headers: &[],
        body: "",
    }
}

const fn post(
    worker: &'static str,
    path: &'static str,
    content_type: &'static str,
    body: &'static str,
) -> Case {
    Case {
        worker,
        method: "POST",
        path,
        headers: match content_type.len() {
            0 => &[],
            _ => &[],
        },
        body,
    }
    .with_type(content_type)
}

impl Case {
    const fn with_type(self, content_type: &'static str) -> Self {
        let headers: &'static [(&'static str, &'static str)] = match content_type.as_bytes() {
            b"application/json" => &[("content-type", "application/json")],
            b"application/x-www-form-urlencoded" => {
                &[("content-type", "application/x-www-form-urlencoded")]
            }
            _ => &[],
        };
        Case { headers, ..self }
    }
}

const CASES: &[Case] = &[
    get("basics", "/basics/echo?q=1&r=two"),
    Case {
        worker: "basics",
        method: "PUT",
        path: "/basics/echo",
        headers: &[("x-one", "1"), ("x-two", "zwei")],
        body: "put body",
    },
    Case {
        worker: "basics",
        method: "DELETE",
        path: "/basics/echo",
        headers: &[],
        body: "",
    },
    get("basics", "/basics/status"),
    get("basics", "/basics/no-content"),
    get("basics", "/basics/cookies"),
    get("basics", "/basics/headers"),
    post(
        "basics",
        "/basics/json",
        "application/json",
        r#"{"numbers":[1,2,3.5],"name":"ü"}"#,
    ),
    post("basics", "/basics/bytes", "", "some bytes to sum"),
    get("basics", "/basics/clone"),
    post(
        "basics",
        "/basics/form",
        "application/x-www-form-urlencoded",
        "a=1&b=two+words&c=%C3%A9",
    ),
    get("basics", "/basics/missing"),
    get("url", "/url/parse"),
    get("url", "/url/params?z=last&a=first&a=again"),
    get("url", "/url/pattern/books/42"),
    get("url", "/url/pattern/books/nope"),
    get("url", "/url/invalid"),
    post("streams", "/streams/upper", "", "make me loud"),
    get("streams", "/streams/generate"),
    post("streams", "/streams/text-streams", "", "héllo streams"),
    get("streams", "/streams/codec"),
    get("streams", "/streams/tee"),
    get("streams", "/streams/identity"),
    post("crypto", "/crypto/digest", "", "digest me"),
    get("crypto", "/crypto/hmac"),
    get("crypto", "/crypto/ecdsa"),
    get("crypto", "/crypto/ecdsa-import"),
    get("crypto", "/crypto/random"),
    get("redirects", "/redirects/permanent"),
    get("redirects", "/redirects/default"),
    get("redirects", "/redirects/manual"),
    get("redirects", "/redirects/invalid"),
    get("redirects", "/redirects/target?from=test"),
    get("errors", "/errors/throw"),
    get("errors", "/errors/throw-string"),
    get("errors", "/errors/reject"),
    get("errors", "/errors/not-response"),
    get("errors", "/errors/caught"),
    get("errors", "/errors/fine"),
    get("env", "/env/"),
    get("kv", "/kv/scenario?run=RUN"),
    get("kv", "/kv/paging?run=RUN"),
    get("kv", "/kv/errors?run=RUN"),
];

/// What tells this test run's KV keys from earlier runs' (edge's stores
/// live in the shared data directory).
fn run_id() -> String {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{nanos:x}-{}", std::process::id())
    })
    .clone()
}

#[derive(Debug, PartialEq)]
struct Answer {
    status: u16,
    headers: BTreeMap<String, Vec<String>>,
    body: String,
}

async fn ask(base: &str, case: &Case) -> Answer {
    let client = edge_tests::client();
    let mut req = http::Request::builder()
        .method(case.method)
        .uri(format!("{base}{}", case.path.replace("RUN", &run_id())))
        .header("host", "example.test");
    for (k, v) in case.headers {
        req = req.header(*k, *v);
    }
    let resp = client
        .request(
            req.body(Full::new(Bytes::from_static(case.body.as_bytes())))
                .unwrap(),
        )
        .await
        .unwrap_or_else(|e| panic!("{} {} on {base}: {e:?}", case.method, case.path));
    let status = resp.status().as_u16();
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in resp.headers() {
        if !OWN_HEADERS.contains(&name.as_str()) {
            headers
                .entry(name.as_str().to_string())
                .or_default()
                .push(String::from_utf8_lossy(value.as_bytes()).into_owned());
        }
    }
    // A header sent as several lines is the same as one line of the values
    // joined by commas (RFC 9110 5.3); workerd keeps a Worker's separate
    // lines, StarlingMonkey's Headers joins them. Set-Cookie is the
    // exception and is compared line by line.
    for (name, values) in headers.iter_mut() {
        if name != "set-cookie" {
            *values = vec![values.join(", ")];
        }
    }
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

#[tokio::test]
async fn the_corpus_answers_as_on_workerd() {
    let mut names: Vec<&str> = CASES.iter().map(|c| c.worker).collect();
    names.dedup();
    let workers: Vec<CorpusWorker> = names.iter().map(|n| CorpusWorker::load(n)).collect();
    let reference = Reference::start(&workers);
    let edge = edge(&workers, "");
    let mut differences = Vec::new();
    for case in CASES {
        let theirs = ask(&reference.url, case).await;
        let ours = ask(&edge.url, case).await;
        if theirs != ours {
            differences.push(format!(
                "{} {}:\n  workerd: {theirs:?}\n  edge:    {ours:?}",
                case.method, case.path
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} answers differ:\n{}\nedge's log:\n{}",
        differences.len(),
        CASES.len(),
        differences.join("\n"),
        edge.log()
    );
}
