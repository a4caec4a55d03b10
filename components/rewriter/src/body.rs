//! The body pipeline of a rewritten response:
//!
//! ```text
//! origin stream → decode (gzip, br or none) → rewrite → encode (gzip or none) → client stream
//! ```
//!
//! Each stage is an `io::Write` that passes what it produces straight on, so
//! memory stays bounded whatever the body's size or compression ratio: the
//! decoders write out in buffer-sized pieces, the rewriter holds back only a
//! possible match in progress (capped), and the client stream applies
//! back-pressure.

use flate2::Compression;
use flate2::write::{GzEncoder, MultiGzDecoder};
use rewrite_engine::Rewriter;
use std::io::{self, Write};
use wasi::io::streams::{OutputStream, StreamError};

/// Bytes rewritten at a time: a large read is rewritten a piece at a time
/// (and written to the client at once), so that the bytes the rewriter
/// copies, scans and writes out stay in the CPU's caches. At 50 rules
/// `bench/rewriter.sh`, reading 256 KiB at a time: 32 KiB pieces answer
/// 5-12% more requests than one piece, 16 KiB no more than 32.
const REWRITE_PIECE: usize = 32 * 1024;

/// Decoded bytes handed to the rewriter at a time by the brotli decoder.
const DECODE_BUFFER: usize = 32 * 1024;

/// Writes to the client's body stream, waiting when it is full.
///
/// Once `abandoned` is set it refuses every write: a body that failed must
/// not get the gzip trailer an encoder writes when it is dropped, or the
/// client would see a complete stream of truncated content.
pub struct ClientWriter<'s> {
    stream: &'s OutputStream,
    pollable: wasi::io::poll::Pollable,
    abandoned: &'s std::cell::Cell<bool>,
}

impl<'s> ClientWriter<'s> {
    /// A writer over the response body stream.
    pub fn new(stream: &'s OutputStream, abandoned: &'s std::cell::Cell<bool>) -> Self {
        Self {
            pollable: stream.subscribe(),
            stream,
            abandoned,
        }
    }
}

impl Write for ClientWriter<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.abandoned.get() {
            return Err(io::Error::other("the body was abandoned"));
        }
        guest_http::write_all(self.stream, &self.pollable, data).map_err(client_gone)?;
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn client_gone(e: StreamError) -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, format!("client stream: {e:?}"))
}

/// Where rewritten bytes go: straight to the client, or through gzip.
enum Output<'s> {
    Plain(ClientWriter<'s>),
    Gzip(GzEncoder<ClientWriter<'s>>),
}

/// The rewriter stage: everything written to it is rewritten and passed on.
pub struct RewriteStage<'r, 's> {
    rewriter: Rewriter<'r>,
    out: Output<'s>,
    scratch: Vec<u8>,
}

impl<'r, 's> RewriteStage<'r, 's> {
    /// Rewrites with `rewriter` into `client`, gzip-compressed if `gzip`.
    pub fn new(rewriter: Rewriter<'r>, client: ClientWriter<'s>, gzip: bool) -> Self {
        let out = if gzip {
            // Level 1: at the edge, compression is paid per response, and
            // fast deflate already saves most of the bytes on text.
            Output::Gzip(GzEncoder::new(client, Compression::fast()))
        } else {
            Output::Plain(client)
        };
        Self {
            rewriter,
            out,
            scratch: Vec::with_capacity(64 * 1024),
        }
    }

    fn emit(&mut self) -> io::Result<()> {
        let result = match &mut self.out {
            Output::Plain(w) => w.write_all(&self.scratch),
            Output::Gzip(w) => w.write_all(&self.scratch),
        };
        self.scratch.clear();
        result
    }

    /// Ends the body: the rewriter's held bytes, then the gzip trailer.
    /// Returns the rewriter for its stats.
    pub fn finish(mut self) -> io::Result<Rewriter<'r>> {
        self.rewriter.finish(&mut self.scratch);
        self.emit()?;
        if let Output::Gzip(w) = self.out {
            w.finish()?;
        }
        Ok(self.rewriter)
    }
}

impl Write for RewriteStage<'_, '_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        for piece in data.chunks(REWRITE_PIECE) {
            self.rewriter.write(piece, &mut self.scratch);
        }
        self.emit()?;
        Ok(data.len())
    }

    /// Pushes compressed output to the client (a gzip sync flush), so a
    /// slow origin's bytes do not wait in the encoder.
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.out {
            Output::Plain(_) => Ok(()),
            Output::Gzip(w) => w.flush(),
        }
    }
}

/// The content coding of an origin body, as decoded here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    /// No content coding.
    Identity,
    /// `gzip` (or `x-gzip`), possibly several members.
    Gzip,
    /// `br`.
    Brotli,
}

impl Coding {
    /// The coding named by a `Content-Encoding` value, if this component
    /// can decode it.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "identity" => Some(Self::Identity),
            "gzip" | "x-gzip" => Some(Self::Gzip),
            "br" => Some(Self::Brotli),
            _ => None,
        }
    }
}

/// The decode stage in front of the rewriter.
pub enum Decoder<'r, 's> {
    /// Nothing came yet; becomes one of the others at the first byte (an
    /// empty compressed body is an empty body, not a truncated stream).
    Pending(Coding, Box<RewriteStage<'r, 's>>),
    /// Only while switching from `Pending`.
    Idle,
    /// Passes bytes as they are.
    Identity(Box<RewriteStage<'r, 's>>),
    /// Gunzips.
    Gzip(Box<MultiGzDecoder<RewriteStage<'r, 's>>>),
    /// Decodes brotli.
    Brotli(Box<brotli_decompressor::DecompressorWriter<RewriteStage<'r, 's>>>),
}

impl<'r, 's> Decoder<'r, 's> {
    /// A decoder for `coding` feeding `next`.
    pub fn new(coding: Coding, next: RewriteStage<'r, 's>) -> Self {
        Self::Pending(coding, Box::new(next))
    }

    fn start(coding: Coding, next: RewriteStage<'r, 's>) -> Self {
        match coding {
            Coding::Identity => Self::Identity(Box::new(next)),
            Coding::Gzip => Self::Gzip(Box::new(MultiGzDecoder::new(next))),
            Coding::Brotli => Self::Brotli(Box::new(brotli_decompressor::DecompressorWriter::new(
                next,
                DECODE_BUFFER,
            ))),
        }
    }

    /// Feeds a piece of the origin body.
    pub fn write_chunk(&mut self, chunk: &[u8]) -> io::Result<()> {
        if chunk.is_empty() {
            return Ok(());
        }
        if let Self::Pending(..) = self {
            let Self::Pending(coding, next) = std::mem::replace(self, Self::Idle) else {
                unreachable!("matched above")
            };
            *self = Self::start(coding, *next);
        }
        match self {
            Self::Pending(..) | Self::Idle => unreachable!("started above"),
            Self::Identity(w) => {
                w.write_all(chunk)?;
                w.flush()
            }
            Self::Gzip(w) => {
                w.write_all(chunk)?;
                w.flush()
            }
            Self::Brotli(w) => {
                w.write_all(chunk)?;
                w.flush()
            }
        }
    }

    /// Ends the origin body: a compressed stream that stopped early is an
    /// error (the body was truncated), not an end. On error `abandoned` is
    /// set before anything is dropped.
    pub fn finish(self, abandoned: &std::cell::Cell<bool>) -> io::Result<RewriteStage<'r, 's>> {
        let fail = |e: io::Error| {
            abandoned.set(true);
            e
        };
        match self {
            Self::Pending(_, w) | Self::Identity(w) => Ok(*w),
            Self::Idle => Err(fail(io::Error::other("decoder in an impossible state"))),
            Self::Gzip(mut w) => {
                w.try_finish().map_err(fail)?;
                w.finish().map_err(fail)
            }
            Self::Brotli(mut w) => {
                w.close().map_err(fail)?;
                (*w).into_inner().map_err(|_| {
                    fail(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "brotli stream cut short",
                    ))
                })
            }
        }
    }
}
