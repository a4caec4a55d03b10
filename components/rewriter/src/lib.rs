//! The streaming rewriter: a reverse proxy for a site's origin that rewrites
//! responses with the site's rules while they stream (a `wasi:http/proxy`
//! component; the engine is `rewrite-engine`).
//!
//! # What it does with a request
//!
//! 1. Finds the site by the request's host (see [`site`]); an unknown host
//!    answers `404`.
//! 2. Forwards the request to the origin: same method, path, query, headers
//!    and body, minus hop-by-hop headers, plus `X-Forwarded-For`,
//!    `X-Forwarded-Host` and `X-Forwarded-Proto`. `Accept-Encoding` is cut
//!    to what the client accepts of `gzip` and `br` (the codings decoded
//!    here), or `identity`. A `206` (part of a body) of a type the site
//!    rewrites is not passed on: a `GET` or `HEAD` is asked again without
//!    `Range` and `If-Range` and answered whole, rewritten; a part that
//!    still comes is refused with `502` (see [`partial_of_rewritten`]).
//! 3. Answers the origin's response. Its body is rewritten when its media
//!    type is one of the site's `content_types` and at least one rule applies;
//!    everything else (images, fonts, their `206` partial content, unknown or
//!    stacked codings, read from every `Content-Encoding` line) passes
//!    through untouched, `Content-Length` and all.
//! 4. A rewritten body is decoded (gzip/br), rewritten in one streaming pass,
//!    and re-encoded with gzip when it came compressed and the client accepts
//!    gzip (otherwise sent as identity). `Content-Length` is dropped (the body
//!    is chunked), `Accept-Ranges` too. A `HEAD` gets the headers the `GET`
//!    would get. Every response of a rewritable type (`200`, `HEAD`, `304`,
//!    rewritten or passed on by the match cache) carries its `ETag` weak:
//!    the bytes may differ from the origin's, the meaning does not, and one
//!    resource keeps one validator. A `304` without a type is weakened when
//!    the client's `If-None-Match` holds the weak form.
//! 5. `Location` headers pointing at the origin are pointed at the site's
//!    host (nginx's `proxy_redirect default`).
//!
//! # Failures
//!
//! - Origin unreachable: `502`; no response head within the site's
//!   `origin_timeout_ms` (or a body that stalls that long): `504`. The
//!   client gets fixed words; the origin and why are logged.
//! - A body that ends early (the origin's connection drops, a compressed
//!   stream is cut short) is passed on as a truncated response: the
//!   component never finishes the client's body, so the client sees an
//!   incomplete chunked body (or a short `Content-Length`), never a
//!   fabricated complete one.
//!
//! # The match cache
//!
//! For responses with an `ETag` or `Last-Modified`, the site remembers
//! which rules ever matched the resource (URL + validator). The next time
//! only those rules run, and a resource no rule touches passes through
//! untouched, still compressed. Each instance keeps its own cache.

mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "edge:platform/variables",
        generate_all,
    });
}

mod body;
mod site;

use body::{ClientWriter, Coding, Decoder, RewriteStage};
use rewrite_engine::Rewriter;
use site::Site;
use wasi::http::types::{
    ErrorCode, Fields, IncomingBody, IncomingRequest, IncomingResponse, Method, OutgoingBody,
    OutgoingRequest, OutgoingResponse, RequestOptions, ResponseOutparam,
};
use wasi::io::streams::{InputStream, StreamError};

/// Bytes asked of a stream per read. Each read and the write after it
/// are calls into the host (and a wait on the stream when it is empty or
/// full): 1 MiB, not 64 KiB, takes a few of them for a 1.5 MB page
/// instead of two dozen (the rewriter still works through it a piece at
/// a time, see `body::REWRITE_PIECE`). A read returns what the origin
/// has sent so far, so it does not wait for a full MiB; a body in flight
/// takes at most about twice this much guest memory, whatever its size.
const READ_SIZE: u64 = 1024 * 1024;

/// Headers that belong to one connection, never forwarded either way.
const HOP_BY_HOP: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "http2-settings",
];

struct Component;

impl wasi::exports::http::incoming_handler::Guest for Component {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let headers = request.headers().entries();
        let authority = request
            .authority()
            .or_else(|| header(&headers, "host").map(str::to_string))
            .unwrap_or_default()
            .to_ascii_lowercase();
        let host = strip_port(&authority).to_string();
        match site::for_host(&host) {
            Ok(Some(site)) => proxy(&site, &host, &authority, request, headers, out),
            Ok(None) => respond(out, 404, "no site is configured for this host\n"),
            // Why (the site's config, its rules, a store error) is the
            // operator's: to the log, fixed words to the client.
            Err(why) => {
                eprintln!("site for host {host:?} cannot be served: {why}");
                respond(out, 500, "the site cannot be served\n")
            }
        }
    }
}

wasi::http::proxy::export!(Component);

/// Proxies one request to the site's origin and answers its response.
fn proxy(
    site: &Site,
    host: &str,
    authority: &str,
    request: IncomingRequest,
    headers: Vec<(String, Vec<u8>)>,
    out: ResponseOutparam,
) {
    let method = request.method();
    let path = request.path_with_query().unwrap_or_else(|| "/".into());
    let accepted = accepted_codings(&headers);

    let forwarded = Fields::new();
    let dropped = connection_listed(&headers);
    for (name, value) in &headers {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n)
            || n == "host"
            || n == "accept-encoding"
            || n.starts_with("spin-")
            || dropped.iter().any(|d| d == n)
        {
            continue;
        }
        // The host refuses some names (forbidden headers); skipping them is right.
        let _ = forwarded.append(name, value);
    }
    let offer = match (accepted.gzip, accepted.br) {
        (true, true) => "gzip, br",
        (true, false) => "gzip",
        (false, true) => "br",
        (false, false) => "identity",
    };
    let _ = forwarded.set("accept-encoding", &[offer.as_bytes().to_vec()]);
    if let Some(client) = header(&headers, "spin-client-addr") {
        let ip = strip_port(client).trim_matches(['[', ']']);
        let xff = match header(&headers, "x-forwarded-for") {
            Some(before) => format!("{before}, {ip}"),
            None => ip.to_string(),
        };
        let _ = forwarded.set("x-forwarded-for", &[xff.into_bytes()]);
    }
    let _ = forwarded.set("x-forwarded-host", &[host.as_bytes().to_vec()]);
    let _ = forwarded.set("x-forwarded-proto", &[b"http".to_vec()]);

    // A range is forwarded (media keep theirs), but a part of a body the
    // site rewrites is asked again whole (below): kept for that.
    let whole = (matches!(method, Method::Get | Method::Head) && forwarded.has("range"))
        .then(|| forwarded.clone());
    let mut response = match ask_origin(site, &method, &path, forwarded, Some(request)) {
        Ok(r) => r,
        Err(failed) => return origin_unanswered(out, site, failed),
    };
    if partial_of_rewritten(site, &response) {
        // Its bytes cannot be rewritten: the range counts the origin's
        // bytes, not the rewritten ones; a match may straddle its edges;
        // a compressed body cannot be decoded from the middle. Passed on,
        // it would show the client what the site rewrites (the origin's
        // links). So the whole body is asked for, without `Range` and
        // `If-Range`, and answered rewritten with `200`, as a server that
        // ignores a range may (RFC 9110 §14.2).
        if let Some(fields) = whole {
            drop(response);
            let _ = fields.delete("range");
            let _ = fields.delete("if-range");
            response = match ask_origin(site, &method, &path, fields, None) {
                Ok(r) => r,
                Err(failed) => return origin_unanswered(out, site, failed),
            };
        }
        // A part still (an origin that answers ranges unasked, or to a
        // method that cannot be asked again): refused rather than passed
        // unrewritten or rewritten as if whole.
        if partial_of_rewritten(site, &response) {
            eprintln!(
                "site {}: {path}: origin {} answered 206 for a rewritten type; refused (a partial body cannot be rewritten)",
                site.name, site.origin
            );
            return respond(
                out,
                502,
                "bad gateway: the origin answered with part of a body that is rewritten\n",
            );
        }
    }
    let if_none_match = header(&headers, "if-none-match");
    answer(
        site,
        host,
        authority,
        &method,
        &path,
        accepted,
        if_none_match,
        response,
        out,
    );
}

/// Why the origin gave no response.
enum Unanswered {
    /// The request could not be made here.
    Local,
    /// The client's body could not be read to its end.
    ClientBody,
    /// The origin failed (refused, timed out, ...).
    Origin(ErrorCode),
    /// The host lost the response.
    Lost,
}

/// Sends a request to the site's origin, with the client's body (`None`:
/// an empty one), and waits for the response head.
fn ask_origin(
    site: &Site,
    method: &Method,
    path: &str,
    fields: Fields,
    body: Option<IncomingRequest>,
) -> Result<IncomingResponse, Unanswered> {
    let outgoing = OutgoingRequest::new(fields);
    let _ = outgoing.set_method(method);
    let _ = outgoing.set_scheme(Some(&site.scheme));
    let _ = outgoing.set_authority(Some(&site.authority));
    let _ = outgoing.set_path_with_query(Some(path));
    let options = RequestOptions::new();
    let _ = options.set_connect_timeout(Some(site.timeout_ns));
    let _ = options.set_first_byte_timeout(Some(site.timeout_ns));
    let _ = options.set_between_bytes_timeout(Some(site.timeout_ns));
    let outgoing_body = outgoing.body().map_err(|_| Unanswered::Local)?;
    let future = wasi::http::outgoing_handler::handle(outgoing, Some(options))
        .map_err(Unanswered::Origin)?;
    match body {
        Some(request) => {
            send_request_body(request, outgoing_body).map_err(|_| Unanswered::ClientBody)?
        }
        None => OutgoingBody::finish(outgoing_body, None).map_err(|_| Unanswered::Local)?,
    }
    future.subscribe().block();
    match future.get() {
        Some(Ok(Ok(r))) => Ok(r),
        Some(Ok(Err(e))) => Err(Unanswered::Origin(e)),
        _ => Err(Unanswered::Lost),
    }
}

/// Answers a request the origin gave no response to.
fn origin_unanswered(out: ResponseOutparam, site: &Site, why: Unanswered) {
    match why {
        Unanswered::Local => respond(out, 500, "outgoing request body unavailable\n"),
        Unanswered::ClientBody => {
            respond(out, 400, "the request body could not be read to the end\n")
        }
        Unanswered::Origin(e) => origin_failed(out, site, &e),
        Unanswered::Lost => respond(out, 502, "the origin's response was lost\n"),
    }
}

/// Whether a response is a part (`206`) of a body the site would rewrite.
fn partial_of_rewritten(site: &Site, response: &IncomingResponse) -> bool {
    response.status() == 206
        && media_type(&response.headers().entries())
            .and_then(|media| site.rules_for(&media))
            .is_some_and(|rules| rules.contains(&true))
}

/// Streams the client's request body to the origin.
fn send_request_body(request: IncomingRequest, body: OutgoingBody) -> Result<(), ()> {
    let incoming = request.consume()?;
    let input = incoming.stream()?;
    let output = body.write()?;
    let pollable = output.subscribe();
    loop {
        match input.blocking_read(READ_SIZE) {
            Ok(bytes) => guest_http::write_all(&output, &pollable, &bytes).map_err(|_| ())?,
            Err(StreamError::Closed) => break,
            // Dropping the body unfinished tells the origin it was cut short.
            Err(StreamError::LastOperationFailed(_)) => return Err(()),
        }
    }
    drop(pollable);
    drop(output);
    drop(input);
    drop(incoming);
    OutgoingBody::finish(body, None).map_err(|_| ())
}

/// Which of the codings this component decodes the client accepts.
#[derive(Clone, Copy)]
struct Accepted {
    gzip: bool,
    br: bool,
}

fn accepted_codings(headers: &[(String, Vec<u8>)]) -> Accepted {
    // Explicit codings first; `*` then speaks only for codings not named
    // (RFC 9110 §12.5.3), so `gzip;q=0, *` still refuses gzip.
    let (mut gzip, mut br, mut star) = (None, None, None);
    for item in header_list(headers, "accept-encoding") {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim();
        let q = parts
            .filter_map(|p| p.trim().split_once('='))
            .find(|(k, _)| k.trim() == "q")
            .and_then(|(_, v)| v.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        let ok = Some(q > 0.0);
        match coding {
            "gzip" | "x-gzip" => gzip = ok,
            "br" => br = ok,
            "*" => star = ok,
            _ => {}
        }
    }
    Accepted {
        gzip: gzip.or(star).unwrap_or(false),
        br: br.or(star).unwrap_or(false),
    }
}

/// Header names listed in `Connection` (hop-by-hop by declaration). The
/// edge host already drops them and hides `Connection`; other hosts may not.
fn connection_listed(headers: &[(String, Vec<u8>)]) -> Vec<String> {
    header_list(headers, "connection")
}

/// The items of a comma-separated header over all its lines (RFC 9110
/// §5.3: several lines are one list), trimmed and lower-cased, empty ones
/// left out.
fn header_list(headers: &[(String, Vec<u8>)], name: &str) -> Vec<String> {
    headers
        .iter()
        .filter(|(n, _)| n == name)
        .flat_map(|(_, v)| {
            String::from_utf8_lossy(v)
                .split(',')
                .map(|item| item.trim().to_ascii_lowercase())
                .filter(|item| !item.is_empty())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What to do with an origin response's body.
enum Plan {
    /// Pass it through byte for byte.
    Pass,
    /// Rewrite it with the enabled rules; `record` is the match-cache key
    /// when those are all the rules that apply (so what matched may be
    /// recorded once the body ended cleanly).
    Rewrite {
        coding: Coding,
        enabled: Vec<bool>,
        record: Option<(String, String)>,
        gzip_out: bool,
    },
}

fn plan(
    site: &Site,
    method: &Method,
    host: &str,
    path: &str,
    accepted: Accepted,
    status: u16,
    headers: &[(String, Vec<u8>)],
) -> Plan {
    if matches!(method, Method::Head) || matches!(status, 100..=199 | 204 | 206 | 304) {
        return Plan::Pass;
    }
    let Some(media) = media_type(headers) else {
        return Plan::Pass;
    };
    let Some(applicable) = site.rules_for(&media) else {
        return Plan::Pass;
    };
    let Some(coding) = content_coding(headers) else {
        return Plan::Pass;
    };
    let mut enabled = applicable.clone();
    let mut full = true;
    // The cache key names everything the output depends on: host, media
    // type (per-rule types), path with query, and a strong validator.
    let key = cache_validator(headers).map(|v| (format!("{host}\0{media}\0{path}"), v.to_string()));
    if let Some((url, validator)) = &key
        && let Some(matched) = site.cache.lookup(url, validator)
    {
        for (e, m) in enabled.iter_mut().zip(matched.iter()) {
            *e &= *m;
        }
        full = enabled == applicable;
    }
    if !enabled.contains(&true) {
        return Plan::Pass;
    }
    Plan::Rewrite {
        coding,
        enabled,
        record: key.filter(|_| full),
        gzip_out: coding != Coding::Identity && accepted.gzip,
    }
}

/// The origin's content coding, read from every `Content-Encoding` line
/// (a second line adds a coding, it does not replace the first);
/// `identity` entries drop out. `None` if it is not one this component
/// decodes, stacked codings included: such a body passes untouched.
fn content_coding(headers: &[(String, Vec<u8>)]) -> Option<Coding> {
    let codings = header_list(headers, "content-encoding");
    let mut codings = codings.iter().filter(|c| *c != "identity");
    match (codings.next(), codings.next()) {
        (None, _) => Some(Coding::Identity),
        (Some(c), None) => Coding::parse(c),
        _ => None,
    }
}

/// A strong `ETag` that identifies this exact representation, if the
/// response may be cached by it: weak ETags and `Last-Modified` (one-second
/// resolution) can stay the same across different bytes, and a `Vary` on
/// anything but `Accept-Encoding` means one URL has several bodies.
fn cache_validator(headers: &[(String, Vec<u8>)]) -> Option<&str> {
    let varies = header_list(headers, "vary")
        .iter()
        .any(|f| f != "accept-encoding");
    if varies {
        return None;
    }
    header(headers, "etag").filter(|e| e.starts_with('"'))
}

/// Sends the origin's response on, rewritten or not.
#[allow(clippy::too_many_arguments)]
fn answer(
    site: &Site,
    host: &str,
    authority: &str,
    method: &Method,
    path: &str,
    accepted: Accepted,
    if_none_match: Option<&str>,
    response: IncomingResponse,
    out: ResponseOutparam,
) {
    let status = response.status();
    let headers = response.headers().entries();
    let plan = plan(site, method, host, path, accepted, status, &headers);
    // A HEAD's headers describe what a GET would get now: rewritten
    // (no length, the coding it would be sent in) or passed as it is.
    let as_get = matches!(method, Method::Head)
        .then(|| self::plan(site, &Method::Get, host, path, accepted, status, &headers));
    let (rewriting, gzip_out) = match as_get.as_ref().unwrap_or(&plan) {
        Plan::Rewrite { gzip_out, .. } => (true, *gzip_out),
        Plan::Pass => (false, false),
    };
    // Every response of a type the site rewrites carries a weak ETag,
    // rewritten or passed on (the match cache), 200, HEAD or 304: one
    // validator for one resource whichever path served it.
    let weak_etag = match media_type(&headers) {
        Some(media) => site.rules_for(&media).is_some(),
        // A 304 often omits its type: the client's `If-None-Match` then
        // tells, since it holds the weak form given out with the 200.
        None => {
            status == 304
                && header(&headers, "etag").is_some_and(|etag| {
                    if_none_match.is_some_and(|asked| asked.contains(&format!("W/{etag}")))
                })
        }
    };
    let dropped = connection_listed(&headers);
    let fields = Fields::new();
    for (name, value) in &headers {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n) || dropped.iter().any(|d| d == n) {
            continue;
        }
        let value = match n {
            "content-length" | "content-encoding" | "accept-ranges" | "content-md5" | "digest"
            | "content-digest"
                if rewriting =>
            {
                continue;
            }
            "etag" if weak_etag && !value.starts_with(b"W/") => [b"W/".as_slice(), value].concat(),
            // The client's own authority, port included.
            "location" | "content-location" => redirect_to_site(site, authority, value),
            _ => value.clone(),
        };
        let _ = fields.append(name, &value);
    }
    if gzip_out {
        let _ = fields.set("content-encoding", &[b"gzip".to_vec()]);
        if !headers.iter().any(|(n, v)| {
            n == "vary"
                && String::from_utf8_lossy(v)
                    .to_ascii_lowercase()
                    .contains("accept-encoding")
        }) {
            let _ = fields.append("vary", b"accept-encoding");
        }
    }
    let outgoing = OutgoingResponse::new(fields);
    let _ = outgoing.set_status_code(status);
    let Ok(client_body) = outgoing.body() else {
        return respond(out, 500, "response body unavailable\n");
    };
    let Ok(origin_body) = response.consume() else {
        return respond(out, 502, "the origin's body was unavailable\n");
    };
    ResponseOutparam::set(out, Ok(outgoing));
    let Ok(input) = origin_body.stream() else {
        return;
    };
    let (complete, record) = match plan {
        Plan::Pass => (pass_through(&input, &client_body), None),
        Plan::Rewrite {
            coding,
            enabled,
            record,
            gzip_out,
        } => match rewrite(site, path, &input, &client_body, coding, &enabled, gzip_out) {
            Some(matched) => (true, record.zip(matched)),
            None => (false, None),
        },
    };
    drop(input);
    // A body the origin cut short (or whose trailers report an error) is
    // left unfinished: the host then ends the client's response as
    // incomplete. Only a clean end teaches the match cache.
    if complete && body_ended_cleanly(origin_body) {
        if let Some(((url, validator), matched)) = record {
            site.cache.record(&url, &validator, &matched);
        }
        let _ = OutgoingBody::finish(client_body, None);
    }
}

/// Whether the origin's body ended without an error after its stream closed.
fn body_ended_cleanly(body: IncomingBody) -> bool {
    let trailers = IncomingBody::finish(body);
    trailers.subscribe().block();
    matches!(trailers.get(), Some(Ok(Ok(_))))
}

/// Copies the body host-side (splice), never through this instance's memory.
fn pass_through(input: &InputStream, client: &OutgoingBody) -> bool {
    let Ok(output) = client.write() else {
        return false;
    };
    loop {
        match output.blocking_splice(input, READ_SIZE) {
            Ok(_) => {}
            Err(StreamError::Closed) => {
                // Closed: the origin's end, or the client's. Only the origin's
                // (its stream at end) is a complete body.
                return matches!(input.read(0), Err(StreamError::Closed));
            }
            Err(StreamError::LastOperationFailed(_)) => return false,
        }
    }
}

/// Streams the body through decode → rewrite → encode. Returns the rules
/// that matched (for the match cache, `None` if there were forced emits:
/// what matched then depends on chunking), or `None` if the body failed.
fn rewrite(
    site: &Site,
    path: &str,
    input: &InputStream,
    client: &OutgoingBody,
    coding: Coding,
    enabled: &[bool],
    gzip_out: bool,
) -> Option<Option<Vec<bool>>> {
    let Ok(output) = client.write() else {
        return None;
    };
    let abandoned = std::cell::Cell::new(false);
    let stage = RewriteStage::new(
        Rewriter::with_rules(&site.rules, enabled),
        ClientWriter::new(&output, &abandoned),
        gzip_out,
    );
    let mut decoder = Decoder::new(coding, stage);
    loop {
        match input.blocking_read(READ_SIZE) {
            Ok(chunk) => {
                if let Err(e) = decoder.write_chunk(&chunk) {
                    eprintln!("site {}: {path}: {e}", site.name);
                    abandoned.set(true);
                    return None;
                }
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                eprintln!(
                    "site {}: {path}: origin body failed: {}",
                    site.name,
                    e.to_debug_string()
                );
                abandoned.set(true);
                return None;
            }
        }
    }
    let finished = decoder.finish(&abandoned).and_then(RewriteStage::finish);
    let rewriter = match finished {
        Ok(r) => r,
        Err(e) => {
            abandoned.set(true);
            eprintln!("site {}: {path}: {e}", site.name);
            return None;
        }
    };
    let stats = rewriter.stats();
    if stats.forced_emits > 0 {
        eprintln!(
            "site {}: {path}: {} forced emits (a possible match outgrew the hold cap; it was passed on unreplaced)",
            site.name, stats.forced_emits
        );
        return Some(None);
    }
    Some(Some(rewriter.matched_rules().to_vec()))
}

/// Points an origin URL at the site (nginx's `proxy_redirect default`).
fn redirect_to_site(site: &Site, host: &str, value: &[u8]) -> Vec<u8> {
    let origin = site.origin.as_bytes();
    if value.len() >= origin.len()
        && value[..origin.len()].eq_ignore_ascii_case(origin)
        && matches!(value.get(origin.len()), None | Some(b'/' | b'?' | b'#'))
    {
        let mut v = format!("http://{host}").into_bytes();
        v.extend_from_slice(&value[origin.len()..]);
        return v;
    }
    value.to_vec()
}

/// Answers a failed origin request: `504` for timeouts, `502` otherwise.
/// The client gets fixed words; the origin, the site and why go to the
/// log (stderr, which the host logs with the request).
fn origin_failed(out: ResponseOutparam, site: &Site, e: &ErrorCode) {
    let (status, what) = match e {
        ErrorCode::ConnectionTimeout => (504, "did not accept a connection in time".to_string()),
        ErrorCode::ConnectionReadTimeout | ErrorCode::HttpResponseTimeout => (
            504,
            format!("did not answer within {} ms", site.timeout_ns / 1_000_000),
        ),
        ErrorCode::ConnectionRefused => (502, "refused the connection".to_string()),
        ErrorCode::DnsError(_) | ErrorCode::DestinationNotFound => {
            (502, "could not be resolved".to_string())
        }
        ErrorCode::HttpRequestDenied => (
            502,
            "is not allowed for this component (outbound allowlist)".to_string(),
        ),
        ErrorCode::DestinationIpProhibited => (
            502,
            "resolves to an address outbound HTTP may not reach (outbound.allow_ranges)"
                .to_string(),
        ),
        other => (502, format!("failed: {other:?}")),
    };
    eprintln!("origin {} of site {} {what}", site.origin, site.name);
    let text = if status == 504 {
        "gateway timeout: the origin did not answer in time\n"
    } else {
        "bad gateway: the origin could not be reached\n"
    };
    respond(out, status, text);
}

fn respond(out: ResponseOutparam, status: u16, text: &str) {
    guest_http::respond(
        out,
        status,
        &[("content-type", "text/plain; charset=utf-8")],
        text.as_bytes(),
    );
}

/// The `Content-Type`'s media type: lower-case, no parameters.
fn media_type(headers: &[(String, Vec<u8>)]) -> Option<String> {
    let content_type = header(headers, "content-type")?;
    Some(
        content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase(),
    )
}

fn header<'h>(headers: &'h [(String, Vec<u8>)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |i| &host[..=i]);
    }
    match host.rfind(':') {
        Some(i) if host[i + 1..].bytes().all(|b| b.is_ascii_digit()) => &host[..i],
        _ => host,
    }
}
