//! `edge:worker/exchange`: a request's head in one call, and a response's
//! head in one call, for the Workers adapter (`workers/runtime/adapter.js`).
//!
//! Every call a JavaScript guest makes goes through componentize-js'
//! generated bindings, which cost microseconds each (lifting
//! `fields.entries()`'s list of tuples costs tens). Reading a request head
//! through wasi:http takes seven calls (method, scheme, authority, path,
//! headers, entries, drop) and making a response head four (fields,
//! response, status, body); here each is one, with the headers as one
//! JSON string, which the engine parses natively. The work is
//! wasmtime-wasi-http's own host functions, called from here.

use crate::state::HostState;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::http::types::{
    HostFields, HostIncomingRequest as IncomingRequestHost,
    HostOutgoingResponse as OutgoingResponseHost, Method, Scheme,
};
use wasmtime_wasi_http::p2::body::HostOutgoingBody;
use wasmtime_wasi_http::p2::types::{HostIncomingRequest, HostOutgoingResponse};

/// The interface, as `workers/wit/worker.wit` names it.
const INTERFACE: &str = "edge:worker/exchange@0.1.0";

/// Links `request-head` and `response-head`.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let mut i = linker.instance(INTERFACE)?;
    i.func_wrap(
        "request-head",
        |mut store, (request,): (Resource<HostIncomingRequest>,)| {
            let state: &mut HostState = store.data_mut();
            Ok((request_head(&mut state.http(), request)?,))
        },
    )?;
    i.func_wrap(
        "response-head",
        |mut store, (status, headers, body): (u16, String, Option<Vec<u8>>)| {
            let state: &mut HostState = store.data_mut();
            // Read only if its fields could fit (each byte of a name or
            // value is at most six of JSON): a string of the guest's up to
            // 128 MiB would be gigabytes of host strings before the fields'
            // own limit is checked.
            let most = state.max_fields_bytes().saturating_mul(6).saturating_add(64);
            if headers.len() > most {
                return Ok((Err(format!(
                    "response headers: {} bytes of JSON, more than fields of at most {} bytes take (limits.max_fields_bytes)",
                    headers.len(),
                    state.max_fields_bytes()
                )),));
            }
            // A body held whole is host memory outside the guest's cap: it
            // comes out of the request's body budget, as buffered body
            // writes do. Past the budget the response is made with a body
            // to write, and the guest streams it.
            let body = body.filter(|b| state.take_body_bytes(b.len()));
            Ok((response_head(&mut state.http(), status, &headers, body)?,))
        },
    )?;
    Ok(())
}

/// `[method, scheme, authority, path-with-query, [[name, value], ...]]`,
/// header values read as UTF-8 (invalid bytes replaced, as the adapter's
/// `TextDecoder` did).
fn request_head(
    http: &mut wasmtime_wasi_http::WasiHttpCtxView<'_>,
    request: Resource<HostIncomingRequest>,
) -> wasmtime::Result<String> {
    let borrow = || Resource::<HostIncomingRequest>::new_borrow(request.rep());
    let method = match IncomingRequestHost::method(http, borrow())? {
        Method::Get => "GET".to_string(),
        Method::Head => "HEAD".into(),
        Method::Post => "POST".into(),
        Method::Put => "PUT".into(),
        Method::Delete => "DELETE".into(),
        Method::Connect => "CONNECT".into(),
        Method::Options => "OPTIONS".into(),
        Method::Trace => "TRACE".into(),
        Method::Patch => "PATCH".into(),
        Method::Other(m) => m,
    };
    let scheme = match IncomingRequestHost::scheme(http, borrow())? {
        Some(Scheme::Https) => "https".to_string(),
        Some(Scheme::Other(s)) => s,
        Some(Scheme::Http) | None => "http".into(),
    };
    let authority = IncomingRequestHost::authority(http, borrow())?.unwrap_or_default();
    let path = IncomingRequestHost::path_with_query(http, borrow())?.unwrap_or_default();
    let fields = IncomingRequestHost::headers(http, borrow())?;
    let entries = HostFields::entries(http, Resource::new_borrow(fields.rep()))?;
    HostFields::drop(http, fields)?;
    let headers: Vec<(String, String)> = entries
        .into_iter()
        .map(|(name, value)| (name, String::from_utf8_lossy(&value).into_owned()))
        .collect();
    Ok(serde_json::to_string(&(
        method, scheme, authority, path, headers,
    ))?)
}

/// A response with `status` and `headers` (JSON `[[name, value], ...]`):
/// with `body`, complete (the body sent in this call); without, with its
/// body to write. What wasi:http refuses (a forbidden or malformed header,
/// a bad status, a bad content-length) is an error, and nothing is left
/// behind.
#[allow(clippy::type_complexity)]
fn response_head(
    http: &mut wasmtime_wasi_http::WasiHttpCtxView<'_>,
    status: u16,
    headers: &str,
    body: Option<Vec<u8>>,
) -> wasmtime::Result<
    Result<
        (
            Resource<HostOutgoingResponse>,
            Option<Resource<HostOutgoingBody>>,
        ),
        String,
    >,
> {
    let entries: Vec<(String, String)> = match serde_json::from_str(headers) {
        Ok(e) => e,
        Err(e) => return Ok(Err(format!("response headers: {e}"))),
    };
    if let Some(body) = &body {
        let declared = entries
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case("content-length"));
        for (_, value) in declared {
            if value.trim().parse::<usize>() != Ok(body.len()) {
                return Ok(Err(format!(
                    "content-length {value:?} does not match the body's {} bytes",
                    body.len()
                )));
            }
        }
    }
    let entries = entries
        .into_iter()
        .map(|(name, value)| (name, value.into_bytes()))
        .collect();
    let fields = match HostFields::from_list(http, entries) {
        Ok(f) => f,
        Err(e) => return Ok(Err(format!("response headers: {e:?}"))),
    };
    let response = OutgoingResponseHost::new(http, fields)?;
    let borrow = || Resource::new_borrow(response.rep());
    if OutgoingResponseHost::set_status_code(http, borrow(), status)?.is_err() {
        OutgoingResponseHost::drop(http, response)?;
        return Ok(Err(format!("{status} is not a status code")));
    }
    if let Some(body) = body {
        use http_body_util::BodyExt;
        let full = http_body_util::Full::new(bytes::Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync();
        http.table.get_mut(&response)?.body = Some(full);
        return Ok(Ok((response, None)));
    }
    let Ok(body) = OutgoingResponseHost::body(http, borrow())? else {
        OutgoingResponseHost::drop(http, response)?;
        return Ok(Err("the response's content-length is not valid".into()));
    };
    Ok(Ok((response, Some(body))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::component::ResourceTable;
    use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks};

    struct Hooks;
    impl WasiHttpHooks for Hooks {}

    fn with_view<R>(f: impl FnOnce(&mut WasiHttpCtxView<'_>) -> R) -> R {
        let (mut ctx, mut table, mut hooks) = (WasiHttpCtx::new(), ResourceTable::new(), Hooks);
        let mut view = WasiHttpCtxView {
            ctx: &mut ctx,
            table: &mut table,
            hooks: &mut hooks,
        };
        f(&mut view)
    }

    #[test]
    fn a_request_head_is_one_json_string() {
        with_view(|http| {
            let request = http::Request::builder()
                .method("PATCH")
                .uri("/a/b?c=d")
                .header("host", "example.test")
                .header("x-two", "1")
                .header("x-two", "2")
                .header("x-bytes", &b"caf\xe9"[..])
                .body(http_body_util::Empty::<bytes::Bytes>::new())
                .unwrap();
            let request = http
                .new_incoming_request(
                    wasmtime_wasi_http::p2::bindings::http::types::Scheme::Https,
                    request,
                )
                .unwrap();
            let head = request_head(http, Resource::new_borrow(request.rep())).unwrap();
            let (method, scheme, authority, path, headers): (
                String,
                String,
                String,
                String,
                Vec<(String, String)>,
            ) = serde_json::from_str(&head).unwrap();
            assert_eq!(
                (
                    method.as_str(),
                    scheme.as_str(),
                    authority.as_str(),
                    path.as_str()
                ),
                ("PATCH", "https", "example.test", "/a/b?c=d")
            );
            assert!(headers.contains(&("x-two".into(), "1".into())));
            assert!(headers.contains(&("x-two".into(), "2".into())));
            // Not UTF-8: replaced, as a TextDecoder does.
            assert!(headers.contains(&("x-bytes".into(), "caf\u{fffd}".into())));
            // Only the request stays in the table: the fields' slot is free
            // again (the next entry takes it).
            let probe = http.table.push(()).unwrap();
            assert_eq!(probe.rep(), request.rep() + 1);
        });
    }

    #[test]
    fn what_wasi_http_refuses_is_an_error_and_leaves_nothing() {
        with_view(|http| {
            let first = http.table.push(()).unwrap();
            let first_rep = first.rep();
            http.table.delete(first).unwrap();
            let refused =
                |http: &mut WasiHttpCtxView<'_>, status, headers: &str, body: Option<&[u8]>| {
                    response_head(http, status, headers, body.map(<[u8]>::to_vec))
                        .unwrap()
                        .unwrap_err()
                };
            assert!(refused(http, 200, "{", None).contains("response headers"));
            assert!(
                refused(http, 200, r#"[["bad name", "x"]]"#, None).contains("response headers")
            );
            assert!(refused(http, 200, r#"[["x", "a\nb"]]"#, None).contains("response headers"));
            assert!(refused(http, 1000, "[]", None).contains("not a status code"));
            assert!(
                refused(
                    http,
                    200,
                    r#"[["content-length", "5"]]"#,
                    Some(b"twelve bytes")
                )
                .contains("does not match the body's 12 bytes")
            );
            // Nothing a refusal made was left behind: the table's first
            // slot is free still.
            let probe = http.table.push(()).unwrap();
            assert_eq!(probe.rep(), first_rep);
            http.table.delete(probe).unwrap();
            let (response, body) = response_head(
                http,
                201,
                r#"[["content-type", "text/plain"]]"#,
                Some(b"done".to_vec()),
            )
            .unwrap()
            .unwrap();
            assert!(body.is_none(), "a complete response has no body to write");
            let made = http.table.delete(response).unwrap();
            assert_eq!(made.status, 201);
            assert!(made.body.is_some());
            let (_, body) = response_head(http, 200, "[]", None).unwrap().unwrap();
            assert!(body.is_some(), "a streamed response has its body to write");
        });
    }
}
