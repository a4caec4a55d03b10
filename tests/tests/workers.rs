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
    get("basics", "/basics/bytes-mutated"),
    get("basics", "/basics/length"),
    get("basics", "/basics/empty"),
    get("basics", "/basics/json-init"),
    get("basics", "/basics/json-undefined"),
    get("basics", "/basics/buffer"),
    Case {
        worker: "basics",
        method: "HEAD",
        path: "/basics/status",
        headers: &[],
        body: "",
    },
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
    get("html", "/html/page"),
    get("html", "/html/escape"),
    get("html", "/html/async"),
    get("html", "/html/bad-selector"),
    get("kv", "/kv/scenario?run=RUN"),
    get("kv", "/kv/paging?run=RUN"),
    get("kv", "/kv/errors?run=RUN"),
    get("services", "/services/echo"),
    Case {
        worker: "services",
        method: "PUT",
        path: "/services/forward?q=1",
        headers: &[("x-test", "through")],
        body: "the client's body",
    },
    get("services", "/services/stream"),
    get("services", "/services/status"),
    get("services", "/services/throws"),
    get("services", "/services/throws-caught"),
    get("services", "/services/depth?to=3"),
    get("services", "/services/kinds"),
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
    let workers = CorpusWorker::load_with_services(&names);
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

/// A listener that notes when each request arrives and its path.
struct Notifications {
    url: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<(String, std::time::Instant)>>>,
}

impl Notifications {
    async fn start() -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let n = stream.read(&mut buf).await.unwrap_or(0);
                    let head = String::from_utf8_lossy(&buf[..n]);
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                    log.lock().unwrap().push((path, std::time::Instant::now()));
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                        )
                        .await;
                });
            }
        });
        Self { url, seen }
    }

    async fn wait_for(&self, within: std::time::Duration) -> Option<(String, std::time::Instant)> {
        let until = std::time::Instant::now() + within;
        while std::time::Instant::now() < until {
            if let Some(first) = self.seen.lock().unwrap().first().cloned() {
                return Some(first);
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        None
    }
}

/// `ctx.waitUntil` work runs after the response is sent, on workerd and on
/// edge alike; a rejected side task does not change the response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_until_work_finishes_after_the_response() {
    let workers = [CorpusWorker::load("waituntil")];
    let reference = Reference::start(&workers);
    let edge = edge(&workers, "");
    for (server, base) in [
        ("workerd", reference.url.as_str()),
        ("edge", edge.url.as_str()),
    ] {
        let notifications = Notifications::start().await;
        let notify = format!("{}/done", notifications.url);
        let (status, body) = edge_tests::request(
            &edge_tests::client(),
            "GET",
            &format!("{base}/waituntil/"),
            &[("x-notify", notify.as_str())],
            Bytes::new(),
        )
        .await;
        let answered = std::time::Instant::now();
        assert_eq!(
            (status, body.as_str()),
            (200, "answered before the work ends"),
            "{server}"
        );
        let (path, at) = notifications
            .wait_for(std::time::Duration::from_secs(5))
            .await
            .unwrap_or_else(|| {
                panic!(
                    "{server}: the waitUntil work never reported; log:\n{}",
                    edge.log()
                )
            });
        assert_eq!(path, "/done?waited=true", "{server}");
        assert!(
            at > answered,
            "{server}: the work reported before the response was in"
        );
    }
    let log = edge.log_after("uncaught exception in waitUntil").await;
    assert!(log.contains("a failed side task"), "{log}");
}

/// Work still running past the bound is cut off and logged, and never
/// reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_until_work_past_its_time_is_cancelled_and_logged() {
    let workers = [CorpusWorker::load("waituntil")];
    let edge = edge(&workers, "");
    let notifications = Notifications::start().await;
    let notify = format!("{}/done", notifications.url);
    let (status, _) = edge_tests::request(
        &edge_tests::client(),
        "GET",
        &format!("{}/waituntil/?wait=60000", edge.url),
        &[("x-notify", notify.as_str())],
        Bytes::new(),
    )
    .await;
    assert_eq!(status, 200);
    let log = edge.log_after("waitUntil work still running").await;
    assert!(log.contains("was cancelled"), "{log}");
    assert!(
        notifications
            .wait_for(std::time::Duration::from_millis(500))
            .await
            .is_none()
    );
    // The instance serves on.
    let (status, _) = edge_tests::request(
        &edge_tests::client(),
        "GET",
        &format!("{}/waituntil/?wait=10", edge.url),
        &[("x-notify", notify.as_str())],
        Bytes::new(),
    )
    .await;
    assert_eq!(status, 200);
}

/// `request.cf` carries the PoP's name and country from the edge-config.
#[tokio::test]
async fn request_cf_names_the_pop() {
    let workers = [CorpusWorker::load("cf")];
    let at_pop = edge(&workers, "[server]\npop = \"fra-1\"\ncountry = \"DE\"\n");
    let (status, body) = edge_tests::get(&format!("{}/cf/", at_pop.url)).await;
    assert_eq!(
        (status, body.as_str()),
        (200, r#"{"colo":"fra-1","country":"DE"}"#)
    );
    let plain = edge(&workers, "");
    let (_, body) = edge_tests::get(&format!("{}/cf/", plain.url)).await;
    assert_eq!(body, r#"{"colo":null,"country":null}"#);
    // The client's address in CF-Connecting-IP (a client's own replaced),
    // and none of Spin's headers.
    let (status, body) = edge_tests::request(
        &edge_tests::client(),
        "GET",
        &format!("{}/cf/client", plain.url),
        &[
            ("cf-connecting-ip", "203.0.113.9"),
            ("spin-full-url", "forged"),
        ],
        Bytes::new(),
    )
    .await;
    assert_eq!(
        (status, body.as_str()),
        (200, r#"{"ip":"127.0.0.1","spin":["spin-full-url"]}"#)
    );
}

/// `edge deploy` of a Worker (its wrangler.toml, or its module) builds it,
/// uploads it through the control plane and makes it live, bindings and
/// secrets included; a Worker that does not build, or throws at top
/// level, is refused with the bundler's or the engine's words and the app
/// keeps serving what it served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_deploy_makes_a_worker_live_through_the_control_plane() {
    use edge_tests::{TempDir, edge_bin, link_shared_cache, repo};
    let data = TempDir::new("workers-control");
    link_shared_cache(data.path());
    let spin = format!(
        "spin_manifest_version = 2\n[application]\nname = \"operator\"\n[[trigger.http]]\nroute = \"/...\"\ncomponent = \"cf\"\n[component.cf]\nsource = {:?}\n",
        CorpusWorker::load("cf").component().display().to_string()
    );
    let edge_toml = "app = \"spin.toml\"\n[control]\nlisten = \"127.0.0.1:0\"\n[[tenant]]\nname = \"operator\"\nhosts = [\"operator.test\"]\ncomponents = [\"*\"]\n";
    let node = edge_tests::Edge::start_with(&spin, edge_toml, data.path());
    let api = node.control.clone().expect("the control API");
    let op = std::fs::read_to_string(data.path().join("control/operator.token")).unwrap();
    let call = |method: &'static str, path: String, token: String, body: serde_json::Value| {
        let api = api.clone();
        async move {
            let auth = format!("Bearer {}", token.trim());
            let (status, text) = edge_tests::request(
                &edge_tests::client(),
                method,
                &format!("{api}{path}"),
                &[("authorization", auth.as_str())],
                Bytes::from(body.to_string()),
            )
            .await;
            (
                status,
                serde_json::from_str::<serde_json::Value>(&text).unwrap_or_default(),
            )
        }
    };
    let (s, t) = call(
        "POST",
        "/v1/tenants".into(),
        op.clone(),
        serde_json::json!({"name": "acme", "hosts": ["acme.test"], "quota": {"shares": {"request_deadline_ms": 3000}}}),
    )
    .await;
    assert_eq!(s, 201, "{t}");
    let (s, t) = call(
        "POST",
        "/v1/tenants/acme/tokens".into(),
        op.clone(),
        serde_json::json!({"name": "ci"}),
    )
    .await;
    assert_eq!(s, 201, "{t}");
    let token = t["token"].as_str().unwrap().to_string();
    let deploy = |args: &[&str]| {
        let out = std::process::Command::new(edge_bin())
            .arg("deploy")
            .args(args)
            .arg("--workers-dir")
            .arg(repo().join("workers"))
            .env("EDGE_API_URL", &api)
            .env("EDGE_API_TOKEN", &token)
            .env("HOME", data.path())
            .output()
            .expect("edge deploy");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let corpus = repo().join("tests/workers/corpus");
    let env_worker = corpus.join("env/wrangler.toml");
    let (code, out, err) = deploy(&[
        env_worker.to_str().unwrap(),
        "--secret",
        "API_KEY=from-deploy",
    ]);
    assert_eq!(code, 0, "{out}{err}\nlog: {}", node.log());
    assert!(out.contains("deployed env version 1"), "{out}");
    let ask = |path: &'static str| {
        let url = format!("{}{path}", node.url);
        async move { edge_tests::get_host(&url, "acme.test").await }
    };
    let (status, body) = ask("/").await;
    assert_eq!(status, 200, "{body}\nlog: {}", node.log());
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["greeting"], "hello from vars");
    assert_eq!(v["nested"], 3);
    assert_eq!(v["secret"], "from-deploy");

    // A syntax error: the bundler's file, line and column; version 1 serves on.
    let dir = TempDir::new("broken-worker");
    let broken = dir.write(
        "worker.js",
        "export default {\n  async fetch() {\n    return new Response('x'\n  },\n};\n",
    );
    let (code, out, err) = deploy(&[broken.to_str().unwrap(), "--app", "env"]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("worker.js:4:"), "{err}");
    assert!(err.contains("nothing was deployed"), "{err}");
    // Throwing at top level: the engine's message.
    let throws = dir.write("throws.js", "throw new Error('not configured');\nexport default { fetch() { return new Response('x'); } };\n");
    let (code, _, err) = deploy(&[throws.to_str().unwrap(), "--app", "env"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("throws at top level: Error: not configured"),
        "{err}"
    );
    assert!(err.contains("@worker.js:"), "the line in the bundle: {err}");
    // A top level that never ends is stopped at the tenant's request
    // deadline, and refused.
    let spins = dir.write(
        "spins.js",
        "while (true) {}\nexport default { fetch() { return new Response('x'); } };\n",
    );
    let (code, _, err) = deploy(&[spins.to_str().unwrap(), "--app", "env"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("Workers engine failed") || err.contains("deadline"),
        "{err}"
    );
    let (status, body) = ask("/").await;
    assert_eq!(status, 200);
    assert!(body.contains("from-deploy"), "{body}");

    // A module alone, with a KV namespace through its wrangler.toml's
    // directory: version 4 (versions 2 and 3, which throw and spin, were
    // stored but never served) replaces the env Worker under the same app.
    let (code, out, err) = deploy(&[corpus.join("kv").to_str().unwrap(), "--app", "env"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("version 4"), "{out}");
    let (status, body) = ask("/kv/scenario?run=deploy").await;
    assert_eq!(status, 200, "{body}\nlog: {}", node.log());
    assert!(body.contains(r#""text":"hello""#), "{body}");

    // Service bindings between two deployed apps of the tenant: `services`
    // calls the app named `backend`.
    for (name, route) in [("backend", "/backend/..."), ("services", "/services/...")] {
        let (code, out, err) = deploy(&[corpus.join(name).to_str().unwrap(), "--route", route]);
        assert_eq!(code, 0, "{out}{err}");
    }
    let (status, body) = ask("/services/status").await;
    assert_eq!(status, 200, "{body}\nlog: {}", node.log());
    assert_eq!(body, r#"{"status":418,"text":"made up","header":"yes"}"#);
}

/// The example Worker's own vitest suite (workers/examples/links), whose
/// config differs from a Cloudflare one only in its import, passes against
/// edge: the package builds the Worker, serves it on a local edge, and
/// `cloudflare:test`'s `SELF.fetch` reaches it there.
#[test]
fn a_workers_own_vitest_suite_passes_against_edge() {
    let repo = edge_tests::repo();
    let out = std::process::Command::new(repo.join("workers/node_modules/.bin/vitest"))
        .arg("run")
        .current_dir(repo.join("workers/examples/links"))
        .env("EDGE_BIN", edge_tests::edge_bin())
        .env("NO_COLOR", "1")
        .output()
        .expect("vitest");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Tests  5 passed (5)"), "{text}");
}

/// An exception in `fetch` is a 500 with the stack in the log; after
/// `ctx.passThroughOnException()` the request goes to the origin of the
/// site the Worker serves instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exception_is_logged_with_its_stack_or_passes_through_to_the_origin() {
    let origin = Notifications::start().await;
    let workers = [CorpusWorker::load("errors")];
    let site = format!(
        "[[tenant.site]]\nname = \"shop\"\nhosts = [\"shop.test\"]\norigin = \"{}\"\ncomponent = \"errors\"\n",
        origin.url
    );
    let edge = edge(&workers, &site);
    let (status, body) = edge_tests::get(&format!("{}/errors/throw", edge.url)).await;
    assert_eq!((status, body.as_str()), (500, "Internal Server Error"));
    let log = edge
        .log_after("uncaught exception in fetch: Error: boom")
        .await;
    assert!(
        log.contains("fetch@worker.js:"),
        "the stack is logged: {log}"
    );
    // Through the site: the origin answers.
    let (status, body) = edge_tests::get_host(
        &format!("{}/errors/pass-through?x=1", edge.url),
        "shop.test",
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "ok"), "{}", edge.log());
    let (path, _) = origin
        .wait_for(std::time::Duration::from_secs(2))
        .await
        .expect("the origin was asked");
    assert_eq!(path, "/errors/pass-through?x=1");
    // On a plain route there is no origin: 500, and the log says why.
    let (status, _) = edge_tests::get(&format!("{}/errors/pass-through", edge.url)).await;
    assert_eq!(status, 500);
    let log = edge.log_after("passThroughOnException: no site").await;
    assert!(log.contains("no site with an origin serves"), "{log}");
}

/// Service bindings end: a Worker calling itself forever is refused at the
/// 32nd call of the chain (and the chain, deeper than the isolate's eight
/// instances, runs on fresh ones rather than waiting on itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_service_calls_ends_at_its_depth_limit() {
    let workers = CorpusWorker::load_with_services(&["services"]);
    let edge = edge(&workers, "");
    let (status, body) = edge_tests::get(&format!("{}/services/recurse", edge.url)).await;
    assert_eq!(status, 508, "{body}\n{}", edge.log());
    assert!(body.starts_with("refused at 31: "), "{body}");
    let log = edge
        .log_after("the chain of service calls is 32 deep")
        .await;
    assert!(log.contains("service call refused"), "{log}");
    // A chain of 20 (beyond the isolate's 8 instances) answers.
    let (status, body) = edge_tests::get(&format!("{}/services/depth?to=20", edge.url)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.ends_with("19 > bottom at 20"), "{body}");
}

/// A binding names an app of the Worker's own tenant: another tenant's app
/// of that name is never reached, and the mark a binding puts on a request
/// reaches only the apps the Worker declared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_binding_reaches_only_its_own_tenants_declared_apps() {
    let workers = CorpusWorker::load_with_services(&["services"]);
    let tenants = "[[tenant]]\nname = \"other\"\nhosts = [\"other.test\"]\ncomponents = [\"backend\", \"basics\"]\n";
    let edge_toml = format!(
        "app = \"spin.toml\"\n[outbound]\nallow_ranges = [\"127.0.0.1/32\"]\n[[tenant]]\nname = \"mine\"\nhosts = [\"*\"]\ncomponents = [\"services\"]\n{tenants}"
    );
    let edge = edge_tests::Edge::start(&edge_tests::workers::spin_toml(&workers), &edge_toml);
    // `backend` and `basics` are the other tenant's: the log says so at
    // start.
    let log = edge
        .log_after("a service binding names an app the tenant does not have")
        .await;
    let mut plain = String::new();
    let mut in_escape = false;
    for c in log.chars() {
        match (in_escape, c) {
            (false, '\x1b') => in_escape = true,
            (true, 'm') => in_escape = false,
            (false, c) => plain.push(c),
            (true, _) => {}
        }
    }
    assert!(plain.contains("app=backend"), "{plain}");
    let (status, body) = edge_tests::get(&format!("{}/services/status", edge.url)).await;
    assert_eq!(status, 500, "{body}");
    let log = edge.log_after("the tenant has no such app").await;
    assert!(log.contains("service call failed"), "{log}");
    // A plain fetch marked for an app the Worker declared no binding to.
    let (status, body) = edge_tests::get(&format!("{}/services/forged?app=kv", edge.url)).await;
    assert_eq!(status, 502, "{body}");
    let log = edge
        .log_after("the component has no service binding to that app")
        .await;
    assert!(log.contains("service call refused"), "{log}");
}

/// A Worker built as a component of its own (`build.mjs --snapshot`: the
/// runtime and the Worker snapshotted together) answers as its script
/// does on the shared Workers engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_worker_answers_as_its_script_does() {
    let script = [CorpusWorker::load("basics")];
    let answers = |edge: edge_tests::Edge| async move {
        let mut out = Vec::new();
        for case in CASES.iter().filter(|c| c.worker == "basics") {
            out.push(ask(&edge.url, case).await);
        }
        out
    };
    let from_script = answers(edge(&script, "")).await;
    let snapshot = edge_tests::repo().join("build/workers/basics-snapshot.wasm");
    assert!(snapshot.exists(), "run `make workers`");
    let spin = edge_tests::workers::spin_toml(&script).replace(
        &script[0].component().display().to_string(),
        &snapshot.display().to_string(),
    );
    let edge_toml = "app = \"spin.toml\"\n[[tenant]]\nname = \"default\"\nhosts = [\"*\"]\ncomponents = [\"*\"]\n";
    let from_snapshot = answers(edge_tests::Edge::start(&spin, edge_toml)).await;
    assert_eq!(from_script, from_snapshot);
}
