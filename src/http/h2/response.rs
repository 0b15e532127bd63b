//! The session's HTTP/1.1 response, read from its end of the stream's socket pair, sent back
//! as HTTP/2 HEADERS and DATA frames.
//!
//! The head is parsed with the proxy's own parser (`proto::h1::parse_response`); interim
//! `1xx` responses (`100 Continue`, `103 Early Hints`) go out as informational HEADERS; hop-by-hop
//! headers and `transfer-encoding` are dropped (HTTP/2 frames the body itself). The body is
//! de-chunked with `proto::h1::Chunked` (trailers are dropped), read to its `content-length`,
//! or read until the session closes. DATA goes out as the stream's flow-control window
//! allows, so a slow client slows the session down rather than filling memory.

use std::future::poll_fn;
use std::io;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::SendStream;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::proto::h1::{self, BodyKind, Chunked, HeaderIdx, HopByHop};

/// Why a response could not be relayed whole: the stream is reset.
#[derive(Debug)]
pub enum Broken {
    /// The session closed before a complete response (`tcp-request content reject`,
    /// `silent-drop`, a truncated body).
    Closed,
    /// The response could not be read or framed.
    Unreadable,
    /// The client reset the stream or the connection ended.
    Client,
}

impl From<io::Error> for Broken {
    fn from(_: io::Error) -> Self {
        Broken::Unreadable
    }
}

impl From<h2::Error> for Broken {
    fn from(_: h2::Error) -> Self {
        Broken::Client
    }
}

/// The largest response head accepted from the session (it wrote it within its own buffer).
const MAX_HEAD: usize = 256 * 1024;

/// Reads one response from `from` and sends it on `respond`; `head_request`: the request was
/// `HEAD` (no body follows the head). Returns the status sent.
pub async fn relay(
    from: &mut (impl AsyncRead + Unpin),
    respond: &mut SendResponse<Bytes>,
    head_request: bool,
) -> Result<u16, Broken> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut headers: Vec<HeaderIdx> = Vec::new();
    let head = loop {
        match h1::parse_response(&buf, &mut headers, head_request) {
            Ok(Some(h)) if h.status < 200 => {
                // `100 Continue`, `103 Early Hints`: informational HEADERS (a `101` cannot
                // be: HTTP/2 has no upgrade).
                if h.status != 101 {
                    let info = response_head(&buf, &headers, &h)?;
                    respond.send_informational(info)?;
                }
                buf.drain(..h.len);
                continue;
            }
            Ok(Some(h)) => break h,
            Ok(None) if buf.len() < MAX_HEAD => {}
            Ok(None) | Err(_) => return Err(Broken::Unreadable),
        }
        if from.read_buf(&mut buf).await? == 0 {
            return Err(Broken::Closed);
        }
    };
    let res = response_head(&buf, &headers, &head)?;
    let status = head.status;
    if head_request || head.body == BodyKind::None || head.body == BodyKind::Length(0) {
        // The stream ends when the session's transaction does: it may still be draining a
        // body the server sent (to a `HEAD` it made a `GET`, say) before its connection goes
        // back to the pool, and a next stream sent on the strength of this END_STREAM must
        // find it there. The session half-closes its end when the transaction is over (or
        // closes it, with a request body left unread: a reset, which ends the wait too; the
        // head is whole).
        buf.truncate(head.len);
        while let Ok(n) = from.read_buf(&mut buf).await {
            if n == 0 {
                break;
            }
            buf.truncate(head.len);
        }
        respond.send_response(res, true)?;
        return Ok(status);
    }
    let mut send = respond.send_response(res, false)?;
    let mut rest = buf.split_off(head.len);
    drop(buf);
    match head.body {
        BodyKind::Length(n) => {
            let mut left = n;
            loop {
                let take = rest.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                if take > 0 {
                    send_data(&mut send, Bytes::copy_from_slice(&rest[..take])).await?;
                    left -= take as u64;
                }
                if left == 0 {
                    break;
                }
                if refill(from, &mut rest).await? == 0 {
                    return Err(Broken::Closed);
                }
            }
        }
        BodyKind::Chunked => {
            let mut chunked = Chunked::default();
            loop {
                let mut ranges = Vec::new();
                chunked
                    .feed_data(&rest, |r| ranges.push(r))
                    .map_err(|_| Broken::Unreadable)?;
                for r in ranges {
                    send_data(&mut send, Bytes::copy_from_slice(&rest[r])).await?;
                }
                if chunked.is_done() {
                    break;
                }
                if refill(from, &mut rest).await? == 0 {
                    return Err(Broken::Closed);
                }
            }
        }
        BodyKind::UntilClose => loop {
            if !rest.is_empty() {
                send_data(&mut send, Bytes::copy_from_slice(&rest)).await?;
            }
            if refill(from, &mut rest).await? == 0 {
                break;
            }
        },
        BodyKind::None => {}
    }
    send.send_data(Bytes::new(), true)?;
    Ok(status)
}

/// A response head as HTTP/2 sends it: its status and its headers but the hop-by-hop ones and
/// the HTTP/1 framing.
fn response_head(
    buf: &[u8],
    headers: &[HeaderIdx],
    head: &h1::ResponseHead,
) -> Result<http::Response<()>, Broken> {
    let mut res = http::Response::builder().status(head.status);
    let hop = HopByHop::new(buf, headers, &head.conn, false);
    for h in headers {
        if hop.is(h) || h.is(buf, "transfer-encoding") || h.is(buf, "upgrade") {
            continue;
        }
        let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(h.name(buf)),
            http::HeaderValue::from_bytes(h.value(buf)),
        ) else {
            continue;
        };
        res = res.header(n, v);
    }
    res.body(()).map_err(|_| Broken::Unreadable)
}

/// Replaces what `buf` holds with the next bytes read (0: the session closed).
async fn refill(from: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>) -> io::Result<usize> {
    buf.clear();
    buf.reserve(READ_SIZE);
    from.read_buf(buf).await
}

/// How much a body read asks for at once.
const READ_SIZE: usize = 16 * 1024;

/// Sends `data` as the stream's window allows (waiting for the client's WINDOW_UPDATEs).
pub async fn send_data(send: &mut SendStream<Bytes>, mut data: Bytes) -> Result<(), h2::Error> {
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let granted = match poll_fn(|cx| send.poll_capacity(cx)).await {
            Some(r) => r?,
            None => return Err(h2::Error::from(h2::Reason::CANCEL)),
        };
        if granted == 0 {
            continue;
        }
        let part = data.split_to(granted.min(data.len()));
        send.send_data(part, false)?;
    }
    Ok(())
}
