//! A lean HTTP/1.1 client for the load generator: GETs prepared as bytes,
//! sent over a pool of keep-alive connections, one request in flight per
//! connection.
//!
//! Why not hyper's client: the generator shares the cores with the servers
//! it measures, so what it spends per request is taken from them. hyper's
//! pooled client cost ~36 µs of user CPU per request here (pool checkout,
//! a connection task per socket and a hop to it per request, header maps);
//! this one writes a prepared request and parses the answer's head in the
//! reading task. Both sides of a comparison (edge, Addok) get the same
//! client, so the lighter generator favours neither.
//!
//! What it understands of a response: the status, `Content-Length`,
//! `Transfer-Encoding: chunked`, `Connection: close`, HTTP/1.0 (not kept),
//! bodies that end at EOF, and 204/304 without a body. The body is read
//! and dropped.

use std::io;
use std::net::SocketAddr;
use std::sync::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A GET for `path_and_query` on `authority`, ready to write.
pub fn get_request(authority: &str, path_and_query: &str) -> Vec<u8> {
    format!("GET {path_and_query} HTTP/1.1\r\nHost: {authority}\r\n\r\n").into_bytes()
}

/// Keep-alive connections to one server.
pub struct Client {
    addr: SocketAddr,
    idle: Mutex<Vec<Conn>>,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Client {
        Client {
            addr,
            idle: Mutex::new(Vec::new()),
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Conn>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `request` (from [`get_request`]) on an idle connection or a
    /// new one, reads the whole response and returns its status. A kept
    /// connection the server closed while idle (nothing came back) is
    /// retried once on a new one.
    pub async fn send(&self, request: &[u8]) -> io::Result<u16> {
        let idle = self.idle().pop();
        let reused = idle.is_some();
        let mut conn = match idle {
            Some(c) => c,
            None => Conn::open(self.addr).await?,
        };
        let answer = match conn.exchange(request).await {
            Err(_) if reused && conn.buf.is_empty() => {
                conn = Conn::open(self.addr).await?;
                conn.exchange(request).await
            }
            other => other,
        };
        let (status, keep) = answer?;
        if keep {
            self.idle().push(conn);
        }
        Ok(status)
    }
}

struct Conn {
    stream: TcpStream,
    /// The response being read.
    buf: Vec<u8>,
}

/// How a response's body ends.
#[derive(Debug, PartialEq)]
pub(crate) enum Framing {
    Length(usize),
    Chunked,
    Eof,
}

/// What the head says, and where the body starts in the buffer.
#[derive(Debug, PartialEq)]
pub(crate) struct Head {
    pub(crate) status: u16,
    pub(crate) framing: Framing,
    pub(crate) keep_alive: bool,
    pub(crate) len: usize,
}

impl Conn {
    async fn open(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(4096),
        })
    }

    /// Reads more into the buffer; the server closing first is an error.
    async fn fill(&mut self) -> io::Result<()> {
        if self.buf.capacity() - self.buf.len() < 1024 {
            self.buf.reserve(4096);
        }
        match self.stream.read_buf(&mut self.buf).await? {
            0 => Err(io::ErrorKind::UnexpectedEof.into()),
            _ => Ok(()),
        }
    }

    /// Writes the request and reads the response: (status, keep the
    /// connection).
    async fn exchange(&mut self, request: &[u8]) -> io::Result<(u16, bool)> {
        self.buf.clear();
        self.stream.write_all(request).await?;
        let head = loop {
            if let Some(head) = parse_head(&self.buf)? {
                break head;
            }
            self.fill().await?;
        };
        let keep = match head.framing {
            Framing::Length(n) => {
                while self.buf.len() < head.len + n {
                    self.fill().await?;
                }
                head.keep_alive && self.buf.len() == head.len + n
            }
            Framing::Chunked => {
                let mut at = head.len;
                loop {
                    match chunked_end(&self.buf, at)? {
                        Ok(end) => break head.keep_alive && end == self.buf.len(),
                        Err(resume) => {
                            at = resume;
                            self.fill().await?;
                        }
                    }
                }
            }
            Framing::Eof => {
                while self.stream.read_buf(&mut self.buf).await? > 0 {
                    self.buf.truncate(head.len); // the body is not kept
                }
                false
            }
        };
        Ok((head.status, keep))
    }
}

/// The response head at the start of `buf`, if it is all there.
pub(crate) fn parse_head(buf: &[u8]) -> io::Result<Option<Head>> {
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(bad(format!("response head: {e}"))),
    };
    let status = response.code.unwrap_or(0);
    let mut keep_alive = response.version == Some(1);
    let (mut length, mut chunked) = (None, false);
    for h in response.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| bad(format!("content-length {value:?}")))?,
            );
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        } else if h.name.eq_ignore_ascii_case("connection")
            && value
                .split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("close"))
        {
            keep_alive = false;
        }
    }
    let framing = if status == 204 || status == 304 || (100..200).contains(&status) {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        Framing::Eof
    };
    Ok(Some(Head {
        status,
        framing,
        keep_alive,
        len,
    }))
}

/// Walks a chunked body from `at` (the start of a chunk-size line):
/// `Ok(end)` when the last chunk and the trailers are all in `buf`, else
/// `Err(resume)`, where to carry on once more has been read.
pub(crate) fn chunked_end(buf: &[u8], mut at: usize) -> io::Result<Result<usize, usize>> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    loop {
        let Some(line) = find_crlf(buf, at) else {
            return Ok(Err(at));
        };
        let size_text = &buf[at..line];
        let digits = size_text
            .split(|&b| b == b';')
            .next()
            .unwrap_or_default()
            .trim_ascii();
        let size = std::str::from_utf8(digits)
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .ok_or_else(|| bad("chunk size"))?;
        if size == 0 {
            // Trailers, each a line, up to an empty one.
            let mut t = line + 2;
            loop {
                let Some(end) = find_crlf(buf, t) else {
                    return Ok(Err(at));
                };
                if end == t {
                    return Ok(Ok(end + 2));
                }
                t = end + 2;
            }
        }
        let next = line + 2 + size + 2;
        if buf.len() < next {
            return Ok(Err(at));
        }
        if &buf[next - 2..next] != b"\r\n" {
            return Err(bad("chunk not followed by CRLF"));
        }
        at = next;
    }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| from + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_and_their_framing() {
        let head = |s: &str| parse_head(s.as_bytes()).unwrap().unwrap();
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhello");
        assert_eq!(
            (h.status, &h.framing, h.keep_alive),
            (200, &Framing::Length(12), true)
        );
        assert_eq!(h.len, 39);
        let h = head("HTTP/1.1 404 Not Found\r\ntransfer-encoding: gzip, chunked\r\n\r\n");
        assert_eq!(
            (h.status, h.framing, h.keep_alive),
            (404, Framing::Chunked, true)
        );
        let h =
            head("HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n");
        assert!(!h.keep_alive);
        let h = head("HTTP/1.0 200 OK\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Eof, false));
        let h = head("HTTP/1.1 204 No Content\r\n\r\n");
        assert_eq!(h.framing, Framing::Length(0));
        assert!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Le")
                .unwrap()
                .is_none()
        );
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert!(parse_head(b"garbage\r\n\r\n").is_err());
    }

    #[test]
    fn chunked_bodies_end_where_they_end_at_every_split() {
        let body =
            b"5\r\nhello\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nx-trailer: 1\r\n\r\n";
        assert_eq!(chunked_end(body, 0).unwrap(), Ok(body.len()));
        // Read a byte at a time: never done early, done exactly at the end.
        let mut at = 0;
        for n in 0..body.len() {
            match chunked_end(&body[..n], at).unwrap() {
                Ok(end) => panic!("done at {end} with {n} of {} bytes", body.len()),
                Err(resume) => at = resume,
            }
        }
        assert_eq!(chunked_end(body, at).unwrap(), Ok(body.len()));
        assert_eq!(chunked_end(b"0\r\n\r\n", 0).unwrap(), Ok(5));
        assert!(chunked_end(b"zz\r\n", 0).is_err());
        assert!(chunked_end(b"2\r\nabXY", 0).is_err());
    }

    /// A server on loopback that answers each request on a connection with
    /// the next of `answers`, then closes.
    async fn canned(answers: Vec<&'static str>) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                let answers = answers.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0; 4096];
                    for a in answers {
                        let mut got = Vec::new();
                        while !got.ends_with(b"\r\n\r\n") {
                            let n = s.read(&mut buf).await.unwrap();
                            if n == 0 {
                                return;
                            }
                            got.extend_from_slice(&buf[..n]);
                        }
                        assert!(got.starts_with(b"GET /q?x=1 HTTP/1.1\r\nHost: h\r\n"));
                        // Byte by byte for the chunked one: every read splits.
                        if a.contains("chunked") {
                            for b in a.as_bytes() {
                                s.write_all(&[*b]).await.unwrap();
                            }
                        } else {
                            s.write_all(a.as_bytes()).await.unwrap();
                        }
                    }
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn keeps_connections_and_survives_a_server_closing_them() {
        let addr = canned(vec![
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
            "HTTP/1.1 201 Created\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
            "HTTP/1.1 500 Oops\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
        ])
        .await;
        let client = Client::new(addr);
        let req = get_request("h", "/q?x=1");
        assert_eq!(client.send(&req).await.unwrap(), 200);
        assert_eq!(client.idle().len(), 1, "kept after a sized body");
        assert_eq!(client.send(&req).await.unwrap(), 201);
        assert_eq!(client.idle().len(), 1, "kept after a chunked body");
        assert_eq!(client.send(&req).await.unwrap(), 500);
        assert_eq!(client.idle().len(), 0, "dropped after connection: close");
        // A fresh connection answers from the start of the list again.
        assert_eq!(client.send(&req).await.unwrap(), 200);
        // The server ends a kept connection after its three answers: the
        // request that finds it closed is retried on a new one.
        assert_eq!(client.send(&req).await.unwrap(), 201);
        assert_eq!(client.send(&req).await.unwrap(), 500);
        let stale = Client::new(addr);
        let fresh = Conn::open(addr).await.unwrap();
        stale.idle().push(fresh);
        for status in [200, 201, 500] {
            assert_eq!(stale.send(&req).await.unwrap(), status);
        }
        // Used up on the server's side: three answers, then closed.
        let mut used = Conn::open(addr).await.unwrap();
        for _ in 0..3 {
            used.exchange(&req).await.unwrap();
        }
        stale.idle().push(used);
        assert_eq!(
            stale.send(&req).await.unwrap(),
            200,
            "retried on a new connection"
        );
    }

    #[tokio::test]
    async fn a_body_that_ends_at_eof() {
        let addr = canned(vec!["HTTP/1.0 200 OK\r\n\r\nall of it"]).await;
        let client = Client::new(addr);
        assert_eq!(client.send(&get_request("h", "/q?x=1")).await.unwrap(), 200);
        assert_eq!(client.idle().len(), 0);
    }
}
