//! What every `wasi:http` guest here does the same way: find the path
//! after its route, read a request body under a cap, answer a complete
//! response in one call, write a byte slice to an output stream as fast
//! as it takes it.

use wasi::http::types::{
    Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam,
};
use wasi::io::poll::Pollable;
use wasi::io::streams::{OutputStream, StreamError};

/// The request's path after the component's route (Spin's and edge's
/// `spin-path-info` header), if the host passed it. One header asked for,
/// not all of them copied into the guest.
pub fn path_info(request: &IncomingRequest) -> Option<String> {
    let value = request.headers().get("spin-path-info").into_iter().next()?;
    String::from_utf8(value).ok()
}

/// Reads the whole request body, refusing one over `max` bytes.
pub fn read_body(request: IncomingRequest, max: usize) -> Result<Vec<u8>, String> {
    let body = request.consume().map_err(|_| "no request body")?;
    let stream = body.stream().map_err(|_| "no request body")?;
    let mut out = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => {
                out.extend_from_slice(&chunk);
                if out.len() > max {
                    return Err(format!("the body is over {max} bytes"));
                }
            }
            Err(StreamError::Closed) => return Ok(out),
            Err(_) => return Err("the request body broke off".into()),
        }
    }
}

/// Writes all of `data`, waiting on `pollable` whenever the stream is full.
pub fn write_all(
    stream: &OutputStream,
    pollable: &Pollable,
    data: &[u8],
) -> Result<(), StreamError> {
    write_all_with(stream, || pollable.block(), data)
}

/// [`write_all`], calling `wait` whenever the stream is full.
fn write_all_with(
    stream: &OutputStream,
    mut wait: impl FnMut(),
    mut data: &[u8],
) -> Result<(), StreamError> {
    while !data.is_empty() {
        let room = stream.check_write()? as usize;
        if room == 0 {
            wait();
            continue;
        }
        let n = room.min(data.len());
        stream.write(&data[..n])?;
        data = &data[n..];
    }
    Ok(())
}

/// Answers `status` with `headers` and the whole `body`.
///
/// Every call into the host costs (lowering, resource tables): the headers
/// go in one call, and a pollable is made only if the body does not fit
/// the stream's first window.
pub fn respond(out: ResponseOutparam, status: u16, headers: &[(&str, &str)], body: &[u8]) {
    let entries: Vec<(String, Vec<u8>)> = headers
        .iter()
        .map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()))
        .collect();
    // A header the host refuses is left out rather than failing the answer.
    let fields = Fields::from_list(&entries).unwrap_or_else(|_| {
        let fields = Fields::new();
        for (name, value) in &entries {
            let _ = fields.append(name, value);
        }
        fields
    });
    let response = OutgoingResponse::new(fields);
    let _ = response.set_status_code(status);
    let Ok(outgoing) = response.body() else {
        return;
    };
    ResponseOutparam::set(out, Ok(response));
    if let Ok(stream) = outgoing.write() {
        let mut pollable = None;
        let wait = || pollable.get_or_insert_with(|| stream.subscribe()).block();
        let _ = write_all_with(&stream, wait, body);
    }
    let _ = OutgoingBody::finish(outgoing, None);
}
