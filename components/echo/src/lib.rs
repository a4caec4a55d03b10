//! `echo`: the smallest useful wasi:http component.
//!
//! Answers `200 OK` with `hello from edge: <path>\n`. It is the fixture for
//! routing tests and the host benchmark, so it does as little as possible: no
//! allocation beyond the body, no reads of the request body.

use wasi::http::types::{
    Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam,
};

struct Echo;

impl wasi::exports::http::incoming_handler::Guest for Echo {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let path = request.path_with_query().unwrap_or_default();
        let mut body_bytes = Vec::with_capacity(17 + path.len() + 1);
        body_bytes.extend_from_slice(b"hello from edge: ");
        body_bytes.extend_from_slice(path.as_bytes());
        body_bytes.push(b'\n');

        let headers = Fields::new();
        // A header set here cannot fail: the name and value are valid constants.
        let _ = headers.set("content-type", &[b"text/plain; charset=utf-8".to_vec()]);
        let response = OutgoingResponse::new(headers);
        let Ok(body) = response.body() else { return };
        ResponseOutparam::set(out, Ok(response));
        if let Ok(stream) = body.write() {
            // Bodies under 4 KiB fit one blocking write-and-flush call.
            let _ = stream.blocking_write_and_flush(&body_bytes);
        }
        let _ = OutgoingBody::finish(body, None);
    }
}

wasi::http::proxy::export!(Echo);
