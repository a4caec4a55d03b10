//! The wire format on the sidecar's Unix socket: one request per
//! connection, each message a 4-byte big-endian length and a JSON object.
//! Bytes (stdin, stdout, stderr) travel as base64.
//!
//! Request: `{"tenant": "acme", "program": "/bin/echo", "args": ["hi"], "stdin": "", "timeout_ms": 1000, "max_output": 65536}`
//! (or `{"metrics": true}`).
//! Answer: `{"ok": {"exit_code": 0, "stdout": "aGkK", "stderr": ""}}` or
//! `{"error": {"kind": "not-allowed", "message": "..."}}`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

/// Largest message accepted (stdin included).
pub const MAX_MESSAGE: usize = 32 << 20;

/// Most arguments a run may pass (the program's name not counted).
pub const MAX_ARGS: usize = 65_536;
/// Most bytes all arguments of a run may take, each counted with its
/// terminating NUL: half the kernel's usual `ARG_MAX` (2 MiB with an
/// 8 MiB stack), which also counts the pointers to them.
pub const MAX_ARG_BYTES: usize = 1 << 20;

// An answer with both streams at the largest output cap, base64 (4 bytes
// per 3), plus its JSON, must be readable.
const _: () = assert!(
    2 * (edge_config::sidecar::MAX_OUTPUT_BYTES as usize).div_ceil(3) * 4 + 4096 <= MAX_MESSAGE
);

/// A run request.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The tenant whose component asks: the program must be among its
    /// `sidecar_programs`.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Absolute path of the program.
    pub program: String,
    /// Arguments, verbatim: at most [`MAX_ARGS`] of them, of at most
    /// [`MAX_ARG_BYTES`] in all (a request with more is refused as it is
    /// read, before they are all held).
    #[serde(default, deserialize_with = "capped_args")]
    pub args: Vec<String>,
    /// Standard input, base64.
    #[serde(default)]
    pub stdin: String,
    /// Time limit (capped by the sidecar's own).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Output cap per stream (capped by the sidecar's own).
    #[serde(default)]
    pub max_output: Option<usize>,
    /// Ask for the counters instead of running anything.
    #[serde(default)]
    pub metrics: bool,
}

/// Why `args` cannot be passed, if they cannot: more than [`MAX_ARGS`] or
/// [`MAX_ARG_BYTES`].
pub fn check_args<S: AsRef<str>>(args: &[S]) -> Result<(), String> {
    if args.len() > MAX_ARGS {
        return Err(too_many_args());
    }
    let bytes = args.iter().map(|a| a.as_ref().len() + 1).sum::<usize>();
    if bytes > MAX_ARG_BYTES {
        return Err(too_long_args());
    }
    Ok(())
}

fn too_many_args() -> String {
    format!("more than {MAX_ARGS} arguments (the most a run may pass)")
}

fn too_long_args() -> String {
    format!(
        "arguments of more than {MAX_ARG_BYTES} bytes in all, each counted with its NUL (the most a run may pass)"
    )
}

/// `args`, refused as soon as they pass [`MAX_ARGS`] or [`MAX_ARG_BYTES`]:
/// a 32 MiB request of empty strings would otherwise be millions of them.
fn capped_args<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct Capped;
    impl<'de> serde::de::Visitor<'de> for Capped {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of strings")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            use serde::de::Error;
            let mut args = Vec::new();
            let mut bytes = 0usize;
            while let Some(arg) = seq.next_element::<String>()? {
                if args.len() == MAX_ARGS {
                    return Err(A::Error::custom(too_many_args()));
                }
                bytes += arg.len() + 1;
                if bytes > MAX_ARG_BYTES {
                    return Err(A::Error::custom(too_long_args()));
                }
                args.push(arg);
            }
            Ok(args)
        }
    }
    d.deserialize_seq(Capped)
}

/// What a run produced.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunOutput {
    /// Exit code, or 128 + N when signal N ended it.
    pub exit_code: i32,
    /// Standard output, base64.
    pub stdout: String,
    /// Standard error, base64.
    pub stderr: String,
}

/// Why a run was refused or failed: `kind` is one of the `KIND_*` values.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunError {
    /// Machine-readable kind.
    pub kind: String,
    /// What happened, for people.
    pub message: String,
}

/// The answer.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Response {
    /// It ran.
    Ok(RunOutput),
    /// It did not (or not to the end).
    Error(RunError),
    /// Counters.
    Metrics(serde_json::Value),
}

/// The program is not on the allowlist.
pub const KIND_NOT_ALLOWED: &str = "not-allowed";
/// The path is relative or not normalised.
pub const KIND_BAD_PATH: &str = "bad-path";
/// The program does not exist.
pub const KIND_NOT_FOUND: &str = "not-found";
/// It ran past its time.
pub const KIND_TIMEOUT: &str = "timeout";
/// It wrote more than allowed.
pub const KIND_OUTPUT_TOO_LARGE: &str = "output-too-large";
/// Too many runs at once.
pub const KIND_BUSY: &str = "busy";
/// The request itself is malformed.
pub const KIND_BAD_REQUEST: &str = "bad-request";
/// Any other failure to start.
pub const KIND_SPAWN_FAILED: &str = "spawn-failed";
/// The connecting process may not use the sidecar (another user, or a
/// program the sidecar runs, or one of theirs).
pub const KIND_PEER_REFUSED: &str = "peer-refused";

impl RunOutput {
    /// Decoded stdout.
    pub fn stdout_bytes(&self) -> Vec<u8> {
        B64.decode(&self.stdout).unwrap_or_default()
    }
    /// Decoded stderr.
    pub fn stderr_bytes(&self) -> Vec<u8> {
        B64.decode(&self.stderr).unwrap_or_default()
    }
}

/// Encodes bytes for the wire.
pub fn encode(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

/// Decodes bytes from the wire.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    B64.decode(text).ok()
}

/// Writes one message.
pub fn write_message<T: Serialize>(w: &mut impl Write, value: &T) -> io::Result<()> {
    let body = serde_json::to_vec(value)?;
    if body.len() > MAX_MESSAGE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("message of {} bytes is over {MAX_MESSAGE}", body.len()),
        ));
    }
    w.write_all(&(body.len() as u32).to_be_bytes())?;
    w.write_all(&body)?;
    w.flush()
}

/// Reads one message.
pub fn read_message<T: for<'de> Deserialize<'de>>(r: &mut impl Read) -> io::Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_MESSAGE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("message of {len} bytes is over {MAX_MESSAGE}"),
        ));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    serde_json::from_slice(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Sends a request to the sidecar at `socket` and waits for the answer.
pub fn call(socket: &std::path::Path, request: &Request) -> io::Result<Response> {
    call_within(socket, request, None)
}

/// Like [`call`], giving up after `limit` for each read and write (the
/// run's own timeout plus a margin): a stalled sidecar must not pin the
/// caller's thread.
///
/// The server must run as this process's user (`SO_PEERCRED`), as the
/// sidecar only serves its own user: a socket bound by another user
/// (in a directory it could write) is refused before anything is sent.
pub fn call_within(
    socket: &std::path::Path,
    request: &Request,
    limit: Option<std::time::Duration>,
) -> io::Result<Response> {
    let mut stream = std::os::unix::net::UnixStream::connect(socket)?;
    check_server(&stream, socket)?;
    stream.set_read_timeout(limit)?;
    stream.set_write_timeout(limit)?;
    write_message(&mut stream, request)?;
    read_message(&mut stream)
}

/// Refuses a server that does not run as this process's user.
fn check_server(
    stream: &std::os::unix::net::UnixStream,
    socket: &std::path::Path,
) -> io::Result<()> {
    let cred = peer_credentials(stream)?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if cred.uid != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is served by uid {}, not this process's uid {me}: no sidecar of ours; nothing was sent",
                socket.display(),
                cred.uid
            ),
        ));
    }
    Ok(())
}

/// The credentials (pid, uid, gid) of the process at the other end of
/// `stream`, as the kernel took them when it connected.
pub(crate) fn peer_credentials(stream: &std::os::unix::net::UnixStream) -> io::Result<libc::ucred> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt into a ucred of the size given.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred)
}
