//! HTTP/2 servers (`server ... proto h2`, or ALPN `h2` on `server ... ssl`): the mirror image
//! of the client gateway.
//!
//! A new connection to such a server is handed to a task that speaks HTTP/2 on it (the h2
//! crate's client); the session gets the other end of a UNIX socket pair instead, and writes
//! its HTTP/1.1 requests there one after the other, as to any server: keep-alive, the idle pool
//! and retries work unchanged. Each request becomes one stream, translated as HAProxy 2.6's
//! `h2s_bck_make_req_headers` does: an origin-form target is `:path` with `:scheme http` and
//! `host` kept as a header; an absolute target gives `:scheme` and `:authority` (and `host` is
//! dropped); hop-by-hop headers are not sent. The response comes back as HTTP/1.1 as HAProxy's
//! H1 side writes it: no reason phrase, its own `content-length`, else chunked (even when
//! empty); for `HEAD` and the statuses without a body, the head alone. `Expect: 100-continue` is answered at once (an
//! HTTP/2 server takes the body as it comes). When the session closes its end, or the server
//! the connection, the other side sees it closed.

use std::io;

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::net::stream::Stream;
use crate::proto::h1::{self, BodyKind, Chunked, HeaderIdx, HopByHop};

use super::response::send_data;

/// Takes over `server`, a new connection to an HTTP/2 server: returns the stream the session
/// uses in its place.
pub fn over_h2(server: Stream) -> io::Result<Stream> {
    let (session_end, ours) = super::pair()?;
    tokio::task::spawn_local(gateway(server, ours));
    Ok(Stream::Unix(UnixStream::from_std(session_end)?))
}

async fn gateway(server: Stream, session: UnixStream) {
    let Ok((send, conn)) = h2::client::handshake(server).await else {
        return;
    };
    tokio::select! {
        _ = conn => {}
        _ = requests(send, session) => {}
    }
}

/// Why the gateway stops: the session closed, or something failed (the session then sees its
/// "server" close, and answers as for a server that closed).
struct Stop;

impl From<io::Error> for Stop {
    fn from(_: io::Error) -> Self {
        Stop
    }
}

impl From<h2::Error> for Stop {
    fn from(_: h2::Error) -> Self {
        Stop
    }
}

/// Reads the session's requests (parsed with HTTP/2's rules: a request that came from an
/// HTTP/2 client may have no `Host`) and sends each as a stream.
async fn requests(mut send: SendRequest<Bytes>, mut io: UnixStream) -> Result<(), Stop> {
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut headers: Vec<HeaderIdx> = Vec::new();
    loop {
        let head = loop {
            if !buf.is_empty() {
                if let Some(h) = h1::parse_http2_request(&buf, &mut headers).map_err(|_| Stop)? {
                    break h;
                }
            }
            if read_more(&mut io, &mut buf).await? == 0 {
                return Err(Stop);
            }
        };
        let is_head = head.is_head(&buf);
        let (req, expect) = to_h2(&buf, &head, &headers)?;
        if expect {
            io.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        }
        send = send.ready().await?;
        let no_body = head.body == BodyKind::None;
        let (response, mut stream) = send.send_request(req, no_body)?;
        buf.drain(..head.len);
        if !no_body {
            upload(&mut io, &mut buf, head.body, &mut stream).await?;
        }
        let res = response.await?;
        download(&mut io, res, is_head).await?;
    }
}

/// Reads more of the session's bytes into `buf` (0: it closed).
async fn read_more(io: &mut UnixStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    buf.reserve(16 * 1024);
    io.read_buf(buf).await
}

/// The request head as an HTTP/2 request, and whether it asked for `100 Continue`.
fn to_h2(
    buf: &[u8],
    head: &h1::RequestHead,
    headers: &[HeaderIdx],
) -> Result<(http::Request<()>, bool), Stop> {
    let target = &buf[head.target.clone()];
    let absolute = target.first() != Some(&b'/') && target != b"*";
    let uri = http::Uri::try_from(target).map_err(|_| Stop)?;
    let mut req = http::Request::builder()
        .method(http::Method::from_bytes(head.method(buf)).map_err(|_| Stop)?)
        .uri(uri)
        // A relative target: the h2 crate then sends `:scheme http` without `:authority`,
        // as HAProxy does for an origin-form request.
        .version(http::Version::HTTP_11);
    let hop = HopByHop::new(buf, headers, &head.conn, false);
    let mut expect = false;
    for h in headers {
        let name = h.name(buf);
        if hop.is(h)
            || h.is(buf, "transfer-encoding")
            || h.is(buf, "upgrade")
            || (absolute && h.is(buf, "host"))
        {
            continue;
        }
        if h.is(buf, "expect") {
            expect |= h.value(buf).eq_ignore_ascii_case(b"100-continue");
            continue;
        }
        let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name),
            http::HeaderValue::from_bytes(h.value(buf)),
        ) else {
            return Err(Stop);
        };
        req = req.header(n, v);
    }
    Ok((req.body(()).map_err(|_| Stop)?, expect))
}

/// Sends the request body the session writes (`buf` holds what came with the head), framed
/// by `kind`, as DATA frames, then ends the stream.
async fn upload(
    io: &mut UnixStream,
    buf: &mut Vec<u8>,
    kind: BodyKind,
    stream: &mut h2::SendStream<Bytes>,
) -> Result<(), Stop> {
    match kind {
        BodyKind::Length(n) => {
            let mut left = n;
            while left > 0 {
                if buf.is_empty() && read_more(io, buf).await? == 0 {
                    return Err(Stop);
                }
                let take = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                let part: Vec<u8> = buf.drain(..take).collect();
                send_data(stream, Bytes::from(part)).await?;
                left -= take as u64;
            }
        }
        BodyKind::Chunked => {
            let mut chunked = Chunked::default();
            loop {
                if buf.is_empty() && read_more(io, buf).await? == 0 {
                    return Err(Stop);
                }
                let mut ranges = Vec::new();
                let used = chunked
                    .feed_data(buf, |r| ranges.push(r))
                    .map_err(|_| Stop)?;
                for r in ranges {
                    send_data(stream, Bytes::copy_from_slice(&buf[r])).await?;
                }
                buf.drain(..used);
                if chunked.is_done() {
                    break;
                }
            }
        }
        BodyKind::None | BodyKind::UntilClose => {}
    }
    stream.send_data(Bytes::new(), true)?;
    Ok(())
}

/// Writes the server's response to the session as HTTP/1.1.
async fn download(
    io: &mut UnixStream,
    res: http::Response<h2::RecvStream>,
    is_head: bool,
) -> Result<(), Stop> {
    let status = res.status().as_u16();
    let mut out = Vec::with_capacity(512);
    // No reason phrase: HTTP/2 has none, and HAProxy sends none either.
    out.extend_from_slice(format!("HTTP/1.1 {status} \r\n").as_bytes());
    let mut length = false;
    for (n, v) in res.headers() {
        length |= n == http::header::CONTENT_LENGTH;
        out.extend_from_slice(n.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let mut body = res.into_body();
    let bodyless = is_head || status == 204 || status == 304;
    // Without a length, the body is chunked, even an empty one, as HAProxy's H1 side frames it.
    let chunked = !bodyless && !length;
    if chunked {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    out.extend_from_slice(b"\r\n");
    io.write_all(&out).await?;
    while let Some(data) = body.data().await {
        let data = data?;
        let n = data.len();
        if n == 0 || bodyless {
            let _ = body.flow_control().release_capacity(n);
            continue;
        }
        if chunked {
            io.write_all(format!("{n:x}\r\n").as_bytes()).await?;
        }
        io.write_all(&data).await?;
        if chunked {
            io.write_all(b"\r\n").await?;
        }
        let _ = body.flow_control().release_capacity(n);
    }
    if chunked {
        io.write_all(b"0\r\n\r\n").await?;
    }
    Ok(())
}
