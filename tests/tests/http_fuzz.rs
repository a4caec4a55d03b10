//! Fuzzing the HTTP front end (property tests where cargo-fuzz cannot
//! run): the real `edge` on loopback gets generated and mutated raw byte
//! streams, one connection each: HTTP/1.1 requests with bad request lines,
//! huge, duplicate and invalid headers, conflicting lengths, chunked bodies
//! with bad sizes, pipelining, cookies and bearer tokens for session keys,
//! truncated and half-closed connections; and HTTP/2 prior-knowledge
//! prefaces, whole or cut, followed by frames of every type with random
//! payloads and lengths.
//!
//! Properties: no connection is answered with a 5xx (routes are `echo`,
//! the body-reading and header-listing `fixtures` actions and two session
//! routes, none of which fails on any input: a 5xx is the host's); every
//! 25 cases and at the end, the server is alive and answers a normal
//! request; at the end `/metrics` counts no 5xx.
//!
//! `make test` runs 200 cases (about 5 s); `PROPTEST_CASES=N` runs more,
//! and `scripts/fuzz.sh SECONDS` runs batches with fresh seeds until the
//! time is up. A failing case is shrunk and saved in
//! `http_fuzz.proptest-regressions`, checked in and replayed first.
//! `HTTP_FUZZ_CHECK_EVERY=1` checks the server after every case (so a
//! failure names the case that caused it); `HTTP_FUZZ_DEBUG=1` prints
//! each answer's status (with `--nocapture`).

use edge_tests::{Edge, spin_with};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

fn spin() -> String {
    spin_with(&[
        ("/s/...", "by-cookie", "echo"),
        ("/b/...", "by-bearer", "echo"),
    ])
}

const EDGE: &str = r#"app = "spin.toml"
[[tenant]]
name = "t"
hosts = ["*"]
components = ["*"]

[component.by-cookie]
instance = "session"
session_key = "cookie:sid"
idle_timeout_ms = 2000

[component.by-bearer]
instance = "session"
session_key = "bearer"
idle_timeout_ms = 2000
"#;

const METHODS: &[&str] = &[
    "GET",
    "GET",
    "GET",
    "POST",
    "POST",
    "HEAD",
    "PUT",
    "OPTIONS",
    "DELETE",
    "PATCH",
    "CONNECT",
    "TRACE",
    "PRI",
    "get",
    "G ET",
    "",
    "GETGETGETGETGETGETGETGETGETGETGET",
    "\u{e9}",
    "POST\0",
];

const TARGETS: &[&str] = &[
    "/",
    "/hello",
    "/a/b?c=d&e",
    "/fixtures/body",
    "/fixtures/headers",
    "/fixtures/x",
    "/s/1",
    "/b/1",
    "*",
    "http://example.com/x",
    "https://h:1/",
    "//",
    "/%zz",
    "/%00",
    "/%e9",
    "/\u{e9}",
    "/../..",
    "/a b",
    "/?",
    "/#frag",
    "example.com:80",
    "",
];

const VERSIONS: &[&str] = &[
    "HTTP/1.1",
    "HTTP/1.1",
    "HTTP/1.1",
    "HTTP/1.0",
    "HTTP/2.0",
    "HTTP/1.1x",
    "HTTP/9.9",
    "HTTP/1",
    "http/1.1",
    "",
];

const HEADERS: &[(&str, &str)] = &[
    ("Host", "example.com"),
    ("Host", "localhost:8080"),
    ("Host", ""),
    ("Host", "a b"),
    ("Host", "[::1]:99999"),
    ("Host", "é.example"),
    ("Content-Length", "0"),
    ("Content-Length", "5"),
    ("Content-Length", "100"),
    ("Content-Length", "-1"),
    ("Content-Length", "+5"),
    ("Content-Length", "5, 5"),
    ("Content-Length", "5, 6"),
    ("Content-Length", "0x10"),
    ("Content-Length", "99999999999999999999999"),
    ("Content-Length", "18446744073709551615"),
    ("Transfer-Encoding", "chunked"),
    ("Transfer-Encoding", "gzip, chunked"),
    ("Transfer-Encoding", "chunked, gzip"),
    ("Transfer-Encoding", "identity"),
    ("Transfer-Encoding", "chunked\u{b}"),
    ("Connection", "close"),
    ("Connection", "keep-alive"),
    ("Connection", "Upgrade, HTTP2-Settings"),
    ("Upgrade", "h2c"),
    ("Upgrade", "websocket"),
    ("HTTP2-Settings", "AAMAAABkAAQAAP__"),
    ("Expect", "100-continue"),
    ("Expect", "nothing"),
    ("Cookie", "sid=a"),
    ("Cookie", "sid=b; sid=c"),
    ("Cookie", "sid="),
    ("Cookie", "=;;; sid"),
    ("Cookie", "sid=\u{e9}"),
    ("Authorization", "Bearer t1"),
    ("Authorization", "Bearer "),
    ("Authorization", "Bearer a b"),
    ("Authorization", "bearer t2"),
    ("Authorization", "Basic xx"),
    ("Accept-Encoding", "gzip, br"),
    ("Range", "bytes=0-1,-5"),
    ("X-Forwarded-For", "1.2.3.4"),
    ("Bad Name", "x"),
    ("Bad:Name", "x"),
    ("", "empty name"),
    ("X-Nul", "a\0b"),
    ("X-Latin", "\u{e9}\u{ff}"),
    (" Folded", "x"),
    ("X-Obs", "a\r\n continued"),
];

/// Chunks of a chunked body: a size line (right, wrong or absurd), data,
/// and whether the chunk's CRLF is there.
fn chunked_body() -> impl Strategy<Value = Vec<u8>> {
    let chunk = (
        0usize..40,
        prop_oneof![
            6 => Just(None),
            1 => prop::sample::select(&[
                "zz", "-1", "ffffffffffffffffffff", "10000000000000000", " 5", "5 ", "5;ext=1",
                "5;", "0x5", "", "\u{e9}",
            ][..]).prop_map(Some),
        ],
        any::<bool>(),
    )
        .prop_map(|(n, size, crlf)| {
            let mut c = size
                .map(str::to_string)
                .unwrap_or_else(|| format!("{n:x}"))
                .into_bytes();
            c.extend_from_slice(b"\r\n");
            c.extend(std::iter::repeat_n(b'x', n));
            if crlf {
                c.extend_from_slice(b"\r\n");
            }
            c
        });
    (
        prop::collection::vec(chunk, 0..5),
        prop::sample::select(
            &[
                "0\r\n\r\n",
                "0\r\nX-Trailer: 1\r\n\r\n",
                "0\r\n",
                "",
                "00000\r\n\r\n",
            ][..],
        ),
    )
        .prop_map(|(chunks, end)| {
            let mut b = chunks.concat();
            b.extend_from_slice(end.as_bytes());
            b
        })
}

/// One HTTP/1 request, well formed or not.
fn h1_request() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![1 => h1_clean(), 1 => h1_chaotic()]
}

/// A well-formed request with a body of its declared length (or chunked
/// right): these reach the guests, so their answers are checked too.
fn h1_clean() -> impl Strategy<Value = Vec<u8>> {
    let header = prop::sample::select(
        &[
            ("Cookie", "sid=a"),
            ("Cookie", "sid=b; other=1"),
            ("Cookie", "sid=\u{e9}"),
            ("Authorization", "Bearer t1"),
            ("Authorization", "Bearer t2"),
            ("Authorization", "Bearer \u{e9}"),
            ("Accept-Encoding", "gzip"),
            ("Expect", "100-continue"),
            ("Connection", "keep-alive"),
            ("X-Forwarded-For", "1.2.3.4"),
            ("X-Latin", "\u{e9}\u{ff}"),
        ][..],
    );
    (
        prop::sample::select(&["GET", "POST", "PUT", "HEAD", "OPTIONS", "DELETE"][..]),
        prop::sample::select(
            &[
                "/",
                "/x?y=1",
                "/fixtures/body",
                "/fixtures/headers",
                "/s/1",
                "/s/2",
                "/b/1",
                "/%e9",
            ][..],
        ),
        prop::collection::vec(header, 0..3),
        prop::collection::vec(any::<u8>(), 0..100),
        any::<bool>(),
    )
        .prop_map(|(method, target, headers, body, chunked)| {
            let mut r = format!("{method} {target} HTTP/1.1\r\nHost: fuzz\r\n");
            for (k, v) in headers {
                r.push_str(&format!("{k}: {v}\r\n"));
            }
            let mut b = if chunked {
                r.push_str("Transfer-Encoding: chunked\r\n\r\n");
                let mut b = r.into_bytes();
                for c in body.chunks(17) {
                    b.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
                    b.extend_from_slice(c);
                    b.extend_from_slice(b"\r\n");
                }
                b.extend_from_slice(b"0\r\n\r\n");
                b
            } else {
                r.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
                let mut b = r.into_bytes();
                b.extend_from_slice(&body);
                b
            };
            b.shrink_to_fit();
            b
        })
}

/// A request from bad pieces: request line, headers, body.
fn h1_chaotic() -> impl Strategy<Value = Vec<u8>> {
    let headers = prop::collection::vec(prop::sample::select(HEADERS), 0..6);
    let eol = prop_oneof![8 => Just("\r\n"), 1 => Just("\n"), 1 => Just("\r")];
    let big = prop_oneof![
        10 => Just(None),
        1 => (1usize..40_000).prop_map(Some),
    ];
    let many = prop_oneof![10 => Just(0usize), 1 => 50usize..400];
    let body = prop_oneof![
        3 => Just(Vec::new()),
        2 => prop::collection::vec(any::<u8>(), 0..200),
        3 => chunked_body(),
    ];
    (
        prop::sample::select(METHODS),
        prop::sample::select(TARGETS),
        prop::sample::select(VERSIONS),
        headers,
        eol,
        big,
        many,
        body,
        prop::bool::weighted(0.9),
    )
        .prop_map(
            |(method, target, version, headers, eol, big, many, body, host)| {
                let mut r = format!("{method} {target} {version}{eol}");
                if host {
                    r.push_str(&format!("Host: fuzz{eol}"));
                }
                for (k, v) in headers {
                    r.push_str(&format!("{k}: {v}{eol}"));
                }
                if let Some(n) = big {
                    // Past max_header_bytes (16 KiB) or not: 431, or fine.
                    r.push_str(&format!("X-Big: {}{eol}", "v".repeat(n)));
                }
                for i in 0..many {
                    r.push_str(&format!("X-Many-{i}: {i}{eol}"));
                }
                r.push_str(eol);
                let mut b = r.into_bytes();
                b.extend_from_slice(&body);
                b
            },
        )
}

/// HTTP/2 with prior knowledge: the preface (whole, or cut), then frames.
fn h2_stream() -> impl Strategy<Value = Vec<u8>> {
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    // A valid request header block (HPACK): :method GET, :scheme http,
    // :path /, :authority h (literal with indexing).
    const GET: &[u8] = &[0x82, 0x86, 0x84, 0x41, 0x01, b'h'];
    let frame = (
        prop_oneof![
            // HEADERS, DATA, SETTINGS, WINDOW_UPDATE most; all types.
            3 => Just(1u8),
            2 => Just(0u8),
            2 => Just(4u8),
            1 => Just(8u8),
            2 => 0u8..=10,
            1 => any::<u8>(),
        ],
        prop_oneof![
            3 => Just(0x5u8),
            2 => Just(0x4u8),
            1 => Just(0x1u8),
            1 => Just(0u8),
            1 => any::<u8>(),
        ],
        prop_oneof![
            4 => Just(1u32),
            2 => Just(0u32),
            2 => (0u32..20).prop_map(|n| n * 2 + 1),
            1 => any::<u32>(),
        ],
        prop_oneof![
            3 => Just(GET.to_vec()),
            3 => prop::collection::vec(any::<u8>(), 0..40),
            1 => Just(Vec::new()),
        ],
        prop_oneof![8 => Just(None), 1 => any::<u32>().prop_map(|n| Some(n & 0xff_ffff))],
    )
        .prop_map(|(ty, flags, stream, payload, len)| {
            let len = len.unwrap_or(payload.len() as u32);
            let mut f = len.to_be_bytes()[1..].to_vec();
            f.push(ty);
            f.push(flags);
            f.extend_from_slice(&stream.to_be_bytes());
            f.extend_from_slice(&payload);
            f
        });
    (
        prop_oneof![6 => Just(PREFACE.len()), 1 => 0..PREFACE.len()],
        prop::bool::weighted(0.8),
        prop::collection::vec(frame, 0..6),
    )
        .prop_map(|(cut, settings, frames)| {
            let mut b = PREFACE[..cut].to_vec();
            if settings {
                // An empty SETTINGS frame: the client's half of the preface.
                b.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
            }
            b.extend(frames.concat());
            b
        })
}

/// How the client ends the connection.
#[derive(Debug, Clone, Copy)]
enum End {
    /// Half-close, read to the end.
    HalfClose,
    /// Keep writing open, read what comes for a moment, drop.
    Hold,
    /// Drop at once without reading.
    Drop,
}

#[derive(Clone)]
struct Case {
    bytes: Vec<u8>,
    /// Where the bytes are cut into separate writes (a millisecond apart),
    /// so the server parses heads, chunk sizes and frames across reads.
    splits: Vec<usize>,
    end: End,
}

/// The bytes as text (escaped), so a saved or shrunk case reads as a
/// request.
impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} split at {:?} \"{}\"",
            self.end,
            self.splits,
            self.bytes.escape_ascii()
        )
    }
}

/// Random byte edits of a stream: set, insert or delete a byte, or cut.
fn mutate(bytes: Vec<u8>, edits: Vec<(prop::sample::Index, u8, u8)>) -> Vec<u8> {
    let mut b = bytes;
    for (i, op, v) in edits {
        let at = i.index(b.len() + 1);
        match op % 4 {
            0 if at < b.len() => b[at] = v,
            1 => b.insert(at, v),
            2 if at < b.len() => {
                b.remove(at);
            }
            3 => b.truncate(at),
            _ => {}
        }
    }
    b
}

fn case() -> impl Strategy<Value = Case> {
    let stream = prop_oneof![
        6 => prop::collection::vec(h1_request(), 1..4).prop_map(|v| v.concat()),
        3 => h2_stream(),
        1 => prop::collection::vec(any::<u8>(), 0..300),
    ];
    let edits = prop_oneof![
        3 => Just(Vec::new()),
        1 => prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), any::<u8>()), 1..4),
    ];
    let end = prop_oneof![
        17 => Just(End::HalfClose),
        1 => Just(End::Hold),
        2 => Just(End::Drop),
    ];
    let splits = prop_oneof![
        3 => Just(Vec::new()),
        1 => prop::collection::vec(any::<prop::sample::Index>(), 1..4),
    ];
    (stream, edits, splits, end).prop_map(|(s, e, splits, end)| {
        let bytes = mutate(s, e);
        let mut splits: Vec<usize> = splits.iter().map(|i| i.index(bytes.len() + 1)).collect();
        splits.sort_unstable();
        Case { bytes, splits, end }
    })
}

/// Sends one case on a fresh connection and returns what came back.
fn send(addr: &str, case: &Case) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).expect("connect to edge");
    s.set_write_timeout(Some(Duration::from_secs(2))).ok();
    // The server may close before reading everything (a 400 or 431): a
    // failed write is an answer, not a failure.
    let mut from = 0;
    for &to in case.splits.iter().chain([&case.bytes.len()]) {
        if s.write_all(&case.bytes[from..to]).is_err() {
            break;
        }
        from = to;
        if to < case.bytes.len() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let mut out = Vec::new();
    let (quiet, total) = match case.end {
        End::Drop => return out,
        End::HalfClose => {
            let _ = s.shutdown(Shutdown::Write);
            // Echo answers in a millisecond; a server that keeps a
            // half-closed connection (HTTP/2 waits for its GOAWAY) is
            // left after a second of silence.
            (Duration::from_secs(1), Duration::from_secs(3))
        }
        End::Hold => (Duration::from_millis(200), Duration::from_millis(500)),
    };
    s.set_read_timeout(Some(quiet)).ok();
    let start = Instant::now();
    let mut buf = [0u8; 16 * 1024];
    while start.elapsed() < total {
        match s.read(&mut buf) {
            Ok(0) => break,
            Err(e) => {
                if std::env::var_os("HTTP_FUZZ_DEBUG").is_some() {
                    eprintln!("read: {e} after {:?}", start.elapsed());
                }
                break;
            }
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    out
}

/// The status of the first HTTP/1 response in `answer`, if it is one.
fn first_status(answer: &[u8]) -> Option<u16> {
    let rest = answer
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| answer.strip_prefix(b"HTTP/1.0 "))?;
    std::str::from_utf8(rest.get(..3)?).ok()?.parse().ok()
}

/// A normal request on a fresh connection gets echo's answer. The
/// connection stays open both ways until the server closes it (hyper drops
/// a request whose client half-closes before the answer, so the fuzz
/// cases' half-closes are answered or not, and this check must not be).
fn alive(edge: &Edge) -> Result<(), String> {
    let addr = edge.url.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    s.write_all(b"GET /alive HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut answer = Vec::new();
    let read = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    if text.starts_with("HTTP/1.1 200") && text.contains("hello from edge: /alive") {
        Ok(())
    } else {
        Err(format!("a normal request got: {text:?} ({read:?})"))
    }
}

/// How often the server is checked (`HTTP_FUZZ_CHECK_EVERY`; 1 makes a
/// failure point at the case that caused it).
fn every() -> u32 {
    std::env::var("HTTP_FUZZ_CHECK_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25)
}

/// `FUZZ_DEADLINE` (Unix seconds), set by scripts/fuzz.sh.
fn fuzz_deadline() -> Option<std::time::SystemTime> {
    let secs: u64 = std::env::var("FUZZ_DEADLINE").ok()?.parse().ok()?;
    Some(std::time::UNIX_EPOCH + Duration::from_secs(secs))
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

#[test]
fn raw_streams_never_get_a_5xx_and_the_server_lives() {
    let edge = Edge::start(&spin(), EDGE);
    alive(&edge).expect("edge answers before the fuzzing");
    let addr = edge.url.trim_start_matches("http://").to_string();
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel(
            "proptest-regressions",
        ))),
        ..Config::default()
    });
    let n = std::cell::Cell::new(0u32);
    let deadline = fuzz_deadline();
    let result = runner.run(&case(), |case| {
        // scripts/fuzz.sh's time is up: the remaining cases pass without
        // running, so the test ends and the server is stopped by Drop.
        if deadline.is_some_and(|d| std::time::SystemTime::now() >= d) {
            return Ok(());
        }
        let answer = send(&addr, &case);
        if std::env::var_os("HTTP_FUZZ_DEBUG").is_some() {
            eprintln!(
                "status: {:?} {:?}",
                first_status(&answer),
                answer.get(..9).map(|b| b.escape_ascii().to_string())
            );
        }
        if let Some(code) = first_status(&answer)
            && code >= 500
        {
            return Err(TestCaseError::fail(format!(
                "answered {code}: {:?}",
                String::from_utf8_lossy(&answer[..answer.len().min(300)])
            )));
        }
        n.set(n.get() + 1);
        if n.get().is_multiple_of(every()) {
            alive(&edge).map_err(TestCaseError::fail)?;
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}\n--- edge log (tail) ---\n{}", tail(&edge.log()));
    }
    alive(&edge).unwrap_or_else(|e| panic!("{e}\n{}", tail(&edge.log())));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let metrics = rt.block_on(edge.metrics());
    let errors: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("edge_requests_total") && l.contains("code=\"5xx\""))
        .filter(|l| !l.ends_with(" 0"))
        .collect();
    assert!(
        errors.is_empty(),
        "5xx answered: {errors:?}\n{}",
        tail(&edge.log())
    );
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
