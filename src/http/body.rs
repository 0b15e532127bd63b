//! Message bodies on their way through: streamed with their framing bytes unchanged (a chunked
//! body is validated as it passes, not re-encoded), spliced when large, or de-chunked for a
//! client that cannot read chunked (HTTP/1.0).

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::buf::Buf;
use super::Failure;
use crate::deadline::{Deadline, Elapsed};
use crate::forward::SpliceMode;
use crate::lazy::LazyStream;
use crate::pipe::{self, Pipe};
use crate::proto::h1::{BodyKind, Chunked};

/// Streams a body of `kind` from `src` (starting with what `buf` already holds) to `dst`,
/// forwarding its framing bytes unchanged. Leaves any bytes past the body in `buf`.
/// `timeouts` are `src`'s and `dst`'s. Once the buffered bytes are out, a body of known length
/// or one that ends with the connection is spliced when `splice` says so (`Auto`: when more
/// than a buffer's worth is left).
pub async fn send_body<S: BodyEnd, D: BodyEnd>(
    src: &mut S,
    buf: &mut Buf,
    dst: &mut D,
    kind: BodyKind,
    (src_t, dst_t): (Option<Duration>, Option<Duration>),
    (src_d, dst_d): (&mut Deadline<'_>, &mut Deadline<'_>),
    mut splice: SpliceMode,
) -> Result<(), Failure> {
    let mut chunked = Chunked::default();
    let mut left = match kind {
        BodyKind::None => return Ok(()),
        BodyKind::Length(n) => n,
        BodyKind::Chunked | BodyKind::UntilClose => u64::MAX,
    };
    loop {
        let avail = buf.bytes();
        if !avail.is_empty() {
            let n = match kind {
                BodyKind::Chunked => chunked
                    .feed(avail)
                    .map_err(|e| Failure::Respond(e.status))?,
                _ => (left.min(avail.len() as u64)) as usize,
            };
            match dst_d.within(dst_t, dst.write_all(&avail[..n])).await {
                Ok(Ok(())) => {}
                _ => return Err(Failure::Close),
            }
            buf.consume(n);
            if let BodyKind::Length(_) = kind {
                left -= n as u64;
            }
            if left == 0 || chunked.is_done() {
                return Ok(());
            }
        }
        let bulky = match kind {
            BodyKind::Length(_) | BodyKind::UntilClose => left > buf.cap as u64,
            _ => false,
        };
        let worth = match splice {
            SpliceMode::Always => kind != BodyKind::Chunked,
            SpliceMode::Auto => bulky,
            SpliceMode::Off => false,
        };
        if worth && buf.bytes().is_empty() {
            match Pipe::take() {
                Ok(pipe) => {
                    let (Ok(src), Ok(dst)) = (src.registered(), dst.registered()) else {
                        return Err(Failure::Close);
                    };
                    let deadlines = (src_d, dst_d);
                    return splice_body(src, dst, pipe, kind, left, (src_t, dst_t), deadlines)
                        .await;
                }
                // Out of descriptors: copy instead.
                Err(_) => splice = SpliceMode::Off,
            }
        }
        match src_d.within(src_t, buf.fill(src)).await {
            Ok(Ok(0)) => {
                return if kind == BodyKind::UntilClose {
                    Ok(())
                } else {
                    Err(Failure::Close)
                };
            }
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return Err(Failure::Close),
            Err(Elapsed) => return Err(Failure::Respond(504)),
        }
    }
}

/// Either end of a body's transfer: the client (registered with the reactor only once it has
/// to wait, see `lazy`) or a server connection.
pub trait BodyEnd: AsyncRead + AsyncWrite + Unpin {
    /// The socket registered with the reactor, for splicing.
    fn registered(&mut self) -> io::Result<&TcpStream>;
}

impl BodyEnd for TcpStream {
    fn registered(&mut self) -> io::Result<&TcpStream> {
        Ok(self)
    }
}

impl BodyEnd for LazyStream {
    fn registered(&mut self) -> io::Result<&TcpStream> {
        LazyStream::registered(self)
    }
}

/// The rest of a body (`left` bytes, or up to the end of the stream) from `src` to `dst`
/// through `pipe`, never reading past its end.
async fn splice_body(
    src: &TcpStream,
    dst: &TcpStream,
    mut pipe: Pipe,
    kind: BodyKind,
    mut left: u64,
    (src_t, dst_t): (Option<Duration>, Option<Duration>),
    (src_d, dst_d): (&mut Deadline<'_>, &mut Deadline<'_>),
) -> Result<(), Failure> {
    while left > 0 {
        let max = left.min(pipe::CHUNK as u64) as usize;
        match src_d.within(src_t, pipe.fill(src, max)).await {
            Ok(Ok(0)) if kind == BodyKind::UntilClose => return Ok(()),
            Ok(Ok(0)) | Ok(Err(_)) => return Err(Failure::Close),
            Ok(Ok(n)) => left -= n as u64,
            Err(Elapsed) => return Err(Failure::Respond(504)),
        }
        match dst_d.within(dst_t, pipe.drain(dst)).await {
            Ok(Ok(())) => {}
            _ => return Err(Failure::Close),
        }
    }
    Ok(())
}

/// The length of the data of a chunked body that `bytes` holds whole, and how many bytes of
/// `bytes` it takes; `None` if it does not end within them (or is invalid: the streaming path
/// then reports it).
pub fn whole_chunked(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut c = Chunked::default();
    let mut len = 0u64;
    let used = c.feed_data(bytes, |r| len += r.len() as u64).ok()?;
    c.is_done().then_some((len, used))
}

/// Appends the data of the chunked body at the start of `bytes` (as [`whole_chunked`] found
/// it) to `out`.
pub fn append_dechunked(bytes: &[u8], out: &mut Vec<u8>) {
    let mut c = Chunked::default();
    let _ = c.feed_data(bytes, |r| out.extend_from_slice(&bytes[r]));
}

/// Streams a chunked body from `src` (starting with what `buf` holds) to `dst` as its bare data,
/// for a client that cannot read chunked and gets a body delimited by the connection's close.
/// The trailers are dropped. `out` is scratch space.
pub async fn send_dechunked<S: BodyEnd, D: BodyEnd>(
    src: &mut S,
    buf: &mut Buf,
    dst: &mut D,
    out: &mut Vec<u8>,
    (src_t, dst_t): (Option<Duration>, Option<Duration>),
    (src_d, dst_d): (&mut Deadline<'_>, &mut Deadline<'_>),
) -> Result<(), Failure> {
    let mut chunked = Chunked::default();
    loop {
        let avail = buf.bytes();
        if !avail.is_empty() {
            out.clear();
            let n = chunked
                .feed_data(avail, |r| out.extend_from_slice(&avail[r]))
                .map_err(|_| Failure::Close)?;
            if !out.is_empty() {
                match dst_d.within(dst_t, dst.write_all(out)).await {
                    Ok(Ok(())) => {}
                    _ => return Err(Failure::Close),
                }
            }
            buf.consume(n);
            if chunked.is_done() {
                return Ok(());
            }
        }
        match src_d.within(src_t, buf.fill(src)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Err(Failure::Close),
            Ok(Ok(_)) => {}
            Err(Elapsed) => return Err(Failure::Close),
        }
    }
}
