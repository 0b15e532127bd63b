//! Message bodies on their way through: streamed with their framing bytes unchanged (a chunked
//! body is validated as it passes, not re-encoded), spliced when large, or de-chunked for a
//! client that cannot read chunked (HTTP/1.0).

use std::io;
use std::time::Duration;

use crate::net::stream::Stream;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::buf::Buf;
use crate::net::deadline::{Deadline, Elapsed};
use crate::net::forward::SpliceMode;
use crate::net::lazy::LazyStream;
use crate::net::pipe::{self, Pipe};
use crate::proto::h1::{BodyKind, Chunked};

/// Why a body did not make it through, by side (the caller knows which side is the client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyError {
    /// The source closed early or failed.
    Src,
    /// The source stayed silent past its timeout.
    SrcTimeout,
    /// Writing to the destination failed or timed out.
    Dst,
    DstTimeout,
    /// The body's framing is invalid (the status to answer, if still possible).
    Invalid(u16),
}

fn write_err<T, E>(r: Result<Result<T, E>, Elapsed>) -> BodyError {
    match r {
        Err(Elapsed) => BodyError::DstTimeout,
        _ => BodyError::Dst,
    }
}

/// Streams a body of `kind` from `src` (starting with what `buf` already holds) to `dst`,
/// forwarding its framing bytes unchanged. Leaves any bytes past the body in `buf`.
/// `timeouts` are `src`'s and `dst`'s. Once the buffered bytes are out, a body of known length
/// or one that ends with the connection is spliced when `splice` says so (`Auto`: when more
/// than a buffer's worth is left). Bytes written to `dst` are added to `sent`.
#[allow(clippy::too_many_arguments)]
pub async fn send_body<S: BodyEnd, D: BodyEnd>(
    src: &mut S,
    buf: &mut Buf,
    dst: &mut D,
    kind: BodyKind,
    (src_t, dst_t): (Option<Duration>, Option<Duration>),
    (src_d, dst_d): (&mut Deadline<'_>, &mut Deadline<'_>),
    mut splice: SpliceMode,
    sent: &mut u64,
) -> Result<(), BodyError> {
    let mut chunked = Chunked::default();
    let mut left = match kind {
        BodyKind::None => return Ok(()),
        BodyKind::Length(n) => n,
        BodyKind::Chunked | BodyKind::UntilClose => u64::MAX,
    };
    loop {
        let avail = buf.bytes();
        if !avail.is_empty() {
            // HAProxy counts a chunked body's data (and one byte for its end), not its framing.
            let (n, counted) = match kind {
                BodyKind::Chunked => {
                    let mut data = 0;
                    let n = chunked
                        .feed_data(avail, |r| data += r.len())
                        .map_err(|e| BodyError::Invalid(e.status))?;
                    (n, data as u64 + u64::from(chunked.is_done()))
                }
                _ => {
                    let n = (left.min(avail.len() as u64)) as usize;
                    (n, n as u64)
                }
            };
            match dst_d.within(dst_t, dst.write_all(&avail[..n])).await {
                Ok(Ok(())) => {}
                r => return Err(write_err(r)),
            }
            *sent += counted;
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
                    let Ok(src) = src.registered() else {
                        return Err(BodyError::Src);
                    };
                    let Ok(dst) = dst.registered() else {
                        return Err(BodyError::Dst);
                    };
                    let deadlines = (src_d, dst_d);
                    let t = (src_t, dst_t);
                    return splice_body(src, dst, pipe, kind, left, t, deadlines, sent).await;
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
                    Err(BodyError::Src)
                };
            }
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return Err(BodyError::Src),
            Err(Elapsed) => return Err(BodyError::SrcTimeout),
        }
    }
}

/// Either end of a body's transfer: the client (registered with the reactor only once it has
/// to wait, see `lazy`) or a server connection.
pub trait BodyEnd: AsyncRead + AsyncWrite + Unpin {
    /// The socket registered with the reactor, for splicing.
    fn registered(&mut self) -> io::Result<&Stream>;
}

impl BodyEnd for Stream {
    fn registered(&mut self) -> io::Result<&Stream> {
        Ok(self)
    }
}

impl BodyEnd for LazyStream {
    fn registered(&mut self) -> io::Result<&Stream> {
        LazyStream::registered(self)
    }
}

/// A body's destination that takes every byte and keeps none: the body of a response to a
/// `HEAD` request that a rule sent on as another method.
pub struct Discard;

impl AsyncRead for Discard {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Discard {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

impl BodyEnd for Discard {
    fn registered(&mut self) -> io::Result<&Stream> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "a discarded body is not spliced",
        ))
    }
}

/// The rest of a body (`left` bytes, or up to the end of the stream) from `src` to `dst`
/// through `pipe`, never reading past its end.
#[allow(clippy::too_many_arguments)]
async fn splice_body(
    src: &Stream,
    dst: &Stream,
    mut pipe: Pipe,
    kind: BodyKind,
    mut left: u64,
    (src_t, dst_t): (Option<Duration>, Option<Duration>),
    (src_d, dst_d): (&mut Deadline<'_>, &mut Deadline<'_>),
    sent: &mut u64,
) -> Result<(), BodyError> {
    while left > 0 {
        let max = left.min(pipe::CHUNK as u64) as usize;
        let n = match src_d.within(src_t, pipe.fill(src, max)).await {
            Ok(Ok(0)) if kind == BodyKind::UntilClose => return Ok(()),
            Ok(Ok(0)) | Ok(Err(_)) => return Err(BodyError::Src),
            Ok(Ok(n)) => n,
            Err(Elapsed) => return Err(BodyError::SrcTimeout),
        };
        left -= n as u64;
        match dst_d.within(dst_t, pipe.drain(dst)).await {
            Ok(Ok(())) => {}
            r => return Err(write_err(r)),
        }
        *sent += n as u64;
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

/// Whether the body of kind `kind`, of which `bytes` arrived so far, is all there, or holds at
/// least `at_least` bytes of data (0: no such threshold): what `wait-for-body` and `option
/// http-buffer-request` wait for, as HAProxy's `http_wait_for_msg_body` counts (data bytes,
/// without chunk framing). A chunked body with invalid framing counts as there: the streaming
/// path reports it.
pub fn body_ready(kind: BodyKind, bytes: &[u8], at_least: u64) -> bool {
    let (data, whole) = match kind {
        BodyKind::None => return true,
        BodyKind::Length(n) => {
            let got = (bytes.len() as u64).min(n);
            (got, got == n)
        }
        BodyKind::Chunked => {
            let mut c = Chunked::default();
            let mut len = 0u64;
            match c.feed_data(bytes, |r| len += r.len() as u64) {
                Ok(_) => (len, c.is_done()),
                Err(_) => return true,
            }
        }
        BodyKind::UntilClose => (bytes.len() as u64, false),
    };
    whole || (at_least > 0 && data >= at_least)
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
    sent: &mut u64,
) -> Result<(), BodyError> {
    let mut chunked = Chunked::default();
    loop {
        let avail = buf.bytes();
        if !avail.is_empty() {
            out.clear();
            let n = chunked
                .feed_data(avail, |r| out.extend_from_slice(&avail[r]))
                .map_err(|e| BodyError::Invalid(e.status))?;
            if !out.is_empty() {
                match dst_d.within(dst_t, dst.write_all(out)).await {
                    Ok(Ok(())) => {}
                    r => return Err(write_err(r)),
                }
                *sent += out.len() as u64;
            }
            buf.consume(n);
            if chunked.is_done() {
                // As in `send_body`: the end of a chunked body counts one byte.
                *sent += 1;
                return Ok(());
            }
        }
        match src_d.within(src_t, buf.fill(src)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Err(BodyError::Src),
            Ok(Ok(_)) => {}
            Err(Elapsed) => return Err(BodyError::SrcTimeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_ready_counts_data_as_haproxy_does() {
        let cases: [(BodyKind, &[u8], u64, bool); 10] = [
            (BodyKind::None, b"", 0, true),
            (BodyKind::Length(3), b"ab", 0, false),
            (BodyKind::Length(3), b"abc", 0, true),
            (BodyKind::Length(3), b"abcGET", 0, true),
            (BodyKind::Length(10), b"abc", 3, true),
            (BodyKind::Length(10), b"abc", 4, false),
            (BodyKind::Chunked, b"1\r\na\r\n", 0, false),
            (BodyKind::Chunked, b"1\r\na\r\n0\r\n\r\n", 0, true),
            // The framing does not count towards `at-least`, the data does.
            (BodyKind::Chunked, b"3\r\nabc\r\n", 4, false),
            (BodyKind::Chunked, b"zz\r\n", 0, true),
        ];
        for (kind, bytes, at_least, want) in cases {
            let got = body_ready(kind, bytes, at_least);
            assert_eq!(
                got,
                want,
                "{kind:?} {:?} at-least {at_least}",
                String::from_utf8_lossy(bytes)
            );
        }
        assert!(!body_ready(BodyKind::UntilClose, b"abc", 0));
        assert!(body_ready(BodyKind::UntilClose, b"abc", 2));
    }
}
