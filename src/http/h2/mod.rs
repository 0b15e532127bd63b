//! HTTP/2 clients (`bind ... proto h2`, ALPN `h2` on a `bind ... ssl`, or the HTTP/2 preface
//! on a listener without `proto`): a gateway in front of the HTTP/1 session.
//!
//! Why a gateway: every phase of a transaction (rules, persistence, balancing, connecting,
//! retries, logs, error pages) is written once, over an HTTP/1 head in a buffer
//! ([`super::session`]). HAProxy converts both versions to one internal form (HTX); Bascule's
//! internal form is the HTTP/1.1 head its session parses. So each HTTP/2 stream becomes one
//! HTTP/1.1 request, written into one end of a UNIX socket pair whose other end is the
//! "client" of an ordinary [`super::session::run`]; the session's HTTP/1.1 response comes back
//! the same way and leaves as HEADERS and DATA frames. The HTTP/1 path is untouched and
//! costs nothing more when no listener speaks HTTP/2; an HTTP/2 stream pays a socket pair
//! and a second parse of its head.
//!
//! The parts:
//! - [`serve`]: one client connection. The h2 crate does the protocol (preface, SETTINGS,
//!   HPACK, flow control, stream states, `content-length` checks, malformed-request resets);
//!   this loop accepts streams, gives each its own task, and closes an idle connection after
//!   `timeout http-keep-alive` (else `timeout client`) with a GOAWAY, as it does on a soft
//!   stop (streams in progress finish within `timeout client`).
//! - [`request`]: a stream's pseudo-headers and headers as an HTTP/1.1 head, as HAProxy 2.6
//!   translates them (absolute target from `:authority`, `Host`, cookies, refused headers).
//! - [`response`]: the session's HTTP/1.1 response back as HTTP/2.
//! - [`acks`]: the stream WINDOW_UPDATEs the crate leaves out (a body the client ended), written
//!   between the crate's frames, so that request bodies are acknowledged as HAProxy does.
//!
//! What the session is told (`Start::Stream`): the stream speaks HTTP/2 (its log line says
//! `HTTP/2.0`; an absolute target goes to the server in origin form, as HAProxy sends the
//! path of a "normalized URI"), and the TLS facts of the client's connection (`ssl_fc*`), which
//! its socket-pair end does not have. The client's addresses are the connection's.
//! The frontend's `tcp-request connection` and `session` rules run once, before the HTTP/2
//! handshake (`session::connection`); each stream starts with what they left: the addresses,
//! the `sess.` variables (a copy), and the entries they track (shared: a stream counts its
//! requests on them; the connection's `conn_cur` lasts as long as the connection). Limits of
//! this first design: CONNECT is refused, and trailers are dropped.

mod acks;
pub(super) mod client;
mod request;
mod response;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::net::lazy::LazyStream;
use crate::net::stream::{StdStream, Stream};
use crate::net::tls::Handshake;
use crate::proto::proxy::Header as ProxyHeader;
use crate::session::facts::Addrs;
use crate::session::WorkerCtx;
use crate::state::Shared;

use super::session::{self, Start, StreamStart};

/// What every stream of a connection shares.
struct Conn {
    shared: Arc<Shared>,
    ctx: Rc<WorkerCtx>,
    frontend: usize,
    /// What the connection's `tcp-request connection|session` rules left: addresses,
    /// tracked entries (released when the connection ends), `sess.` variables.
    facts: session::ConnFacts,
    proxied: Option<Rc<ProxyHeader>>,
    listener: (u32, bool),
    tls: Option<Rc<Handshake>>,
    /// Streams in progress, and a wake-up when one ends.
    live: Cell<usize>,
    ended: Notify,
    /// The stream WINDOW_UPDATEs the crate leaves out (bodies received whole).
    acks: Rc<acks::Acks>,
}

/// HAProxy's default `tune.h2.max-concurrent-streams`.
const MAX_STREAMS: u32 = 100;

/// The connection window once a client sends a body: the largest there is (2^31 - 1), as
/// HAProxy 2.6 opens it with its first connection WINDOW_UPDATE, so that a client's uploads are
/// bounded by their streams' windows alone and never wait for connection credit.
const CONNECTION_WINDOW: u32 = 0x7fff_ffff;

/// Serves an HTTP/2 client connection until it closes, or idles past its timeout.
///
/// `opened`: the connection came as HTTP/1 and opened with the HTTP/2 preface
/// ([`super::Ended::Http2`]): the bytes already read, which the HTTP/2 side reads first, and
/// what the connection's rules, run by that session, left.
pub async fn serve(
    shared: Arc<Shared>,
    ctx: Rc<WorkerCtx>,
    client: Stream,
    (at, proxied): (Addrs, Option<Rc<ProxyHeader>>),
    (frontend, listener, mut stop): (usize, (u32, bool), tokio::sync::watch::Receiver<bool>),
    opened: Option<(Vec<u8>, session::ConnFacts)>,
) {
    let t = shared.frontends[frontend].config.timeouts;
    let client_t = t.client;
    let idle_t = t.http_keep_alive.or(t.client);
    let tls = client.tls().map(|s| Rc::new(s.facts().clone()));
    let (read, mut facts) = match opened {
        Some((read, facts)) => (read, facts),
        None => {
            // A PROXY header's addresses are the session's; the connection's stay the
            // socket's (`fc_src`), as in HAProxy 2.6.
            let fc = match proxied.as_ref().and_then(|h| h.addrs) {
                Some(_) => Addrs {
                    src: client.peer_addr().ok(),
                    dst: None,
                },
                None => at,
            };
            let embryonic = tls.is_some() || proxied.is_some();
            let addrs = (fc, at, proxied.clone());
            // Rejected: closed without a word, with a reset for a `tcp-request connection
            // reject` (as HAProxy).
            match session::connection(&shared, &ctx, frontend, addrs, listener, tls.clone()) {
                Ok(f) => (Vec::new(), f),
                Err(refused) => {
                    match refused {
                        Some(session::Refused::Connection) => crate::session::abort(client),
                        // After a handshake the session was embryonic: HAProxy logs its end.
                        Some(session::Refused::Session) if embryonic => {
                            crate::session::log_session_reject(
                                &shared, frontend, at.src, listener.0,
                            );
                        }
                        _ => {}
                    }
                    return;
                }
            }
        }
    };
    // Streams reach their sessions over socket pairs: the client socket's own address is
    // read here, where it is known.
    let local = client.local_addr().ok();
    facts.conn.dst = facts.conn.dst.or(local);
    facts.sess.dst = facts.sess.dst.or(local);
    let acks = Rc::new(acks::Acks::default());
    let io = Replay {
        read,
        at: 0,
        io: client,
    };
    // The connection window stays RFC 9113's 65535 until a body comes: a WINDOW_UPDATE on
    // stream 0 before the client's SETTINGS are acknowledged would come where clients such as
    // HAProxy's test client expect the SETTINGS ACK.
    let handshake = h2::server::Builder::new()
        .max_concurrent_streams(MAX_STREAMS)
        .handshake::<_, Bytes>(acks::Acked::new(io, Rc::clone(&acks)));
    let mut h2c = match within(client_t, handshake).await {
        Some(Ok(c)) => c,
        _ => return,
    };
    let conn = Rc::new(Conn {
        shared,
        ctx,
        frontend,
        facts,
        proxied,
        listener,
        tls,
        live: Cell::new(0),
        ended: Notify::new(),
        acks,
    });
    let mut window_open = false;
    let mut idle_since = Instant::now();
    let mut closing: Option<Instant> = None;
    let mut watching = true;
    loop {
        let idle = conn.live.get() == 0;
        let deadline = match closing {
            // A GOAWAY was sent and no stream is left: the client gets `timeout client` to
            // close (streams in progress run on, bounded by the session's own timeouts).
            Some(at) if idle => client_t.map(|t| at + t),
            Some(_) => None,
            None if idle => idle_t.map(|t| idle_since + t),
            None => None,
        };
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            next = h2c.accept() => match next {
                Some(Ok((req, respond))) => {
                    if !window_open && !req.body().is_end_stream() {
                        window_open = true;
                        h2c.set_target_window_size(CONNECTION_WINDOW);
                    }
                    conn.live.set(conn.live.get() + 1);
                    tokio::task::spawn_local(stream(Rc::clone(&conn), req, respond));
                }
                Some(Err(_)) | None => break,
            },
            () = conn.ended.notified() => {
                if conn.live.get() == 0 {
                    idle_since = Instant::now();
                }
            }
            () = sleep => {
                if closing.is_some() {
                    break;
                }
                h2c.graceful_shutdown();
                closing = Some(Instant::now());
            }
            // A soft stop: no new stream, those in progress finish (as HAProxy's GOAWAY).
            r = stop.wait_for(|s| *s), if closing.is_none() && watching => match r {
                Ok(_) => {
                    h2c.graceful_shutdown();
                    closing = Some(Instant::now());
                }
                // No stop will come.
                Err(_) => watching = false,
            },
        }
    }
}

/// The client connection, with bytes an HTTP/1 session read before it saw the HTTP/2 preface
/// given back first.
struct Replay {
    read: Vec<u8>,
    at: usize,
    io: Stream,
}

impl tokio::io::AsyncRead for Replay {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.at < this.read.len() {
            let n = buf.remaining().min(this.read.len() - this.at);
            buf.put_slice(&this.read[this.at..this.at + n]);
            this.at += n;
            if this.at == this.read.len() {
                this.read = Vec::new();
                this.at = 0;
            }
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Replay {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// `fut` within `t` (`None`: no limit); `None` when it ran out.
async fn within<F: std::future::Future>(t: Option<Duration>, fut: F) -> Option<F::Output> {
    match t {
        Some(t) => tokio::time::timeout(t, fut).await.ok(),
        None => Some(fut.await),
    }
}

/// Counts a stream out when its task ends, however it ends.
struct Live(Rc<Conn>);

impl Drop for Live {
    fn drop(&mut self) {
        let c = &self.0;
        c.live.set(c.live.get() - 1);
        c.ended.notify_one();
    }
}

/// One stream: its request through a session of its own, the response back.
async fn stream(conn: Rc<Conn>, req: http::Request<RecvStream>, mut respond: SendResponse<Bytes>) {
    let live = Live(conn);
    let conn = &live.0;
    let (parts, body) = req.into_parts();
    // Counted from before any capacity is released (see `acks`).
    let watch = (!body.is_end_stream()).then(|| conn.acks.watch(body.stream_id().into()));
    let head = match request::translate(&parts, body.is_end_stream()) {
        Ok(h) => h,
        Err(_) => {
            respond.send_reset(Reason::PROTOCOL_ERROR);
            return;
        }
    };
    drop(parts);
    let Ok((inner, outer)) = pair() else {
        respond.send_reset(Reason::INTERNAL_ERROR);
        return;
    };
    let start = Start::Stream(Box::new(StreamStart {
        conn: conn.facts.conn,
        tls: conn.tls.clone(),
        stick: conn.facts.stick.connection_copy(),
        sess_vars: conn.facts.sess_vars.clone(),
    }));
    let addrs = (conn.facts.sess, conn.proxied.clone());
    let session = session::run(
        &conn.shared,
        &conn.ctx,
        conn.frontend,
        LazyStream::new(StdStream::Unix(inner)),
        addrs,
        conn.listener,
        start,
    );
    let gateway = exchange(outer, head, (body, watch), respond);
    // The session ends when the gateway, done, closes its end of the pair.
    let (parked, ()) = tokio::join!(session, gateway);
    drop(parked);
}

/// A connected pair of non-blocking UNIX sockets: the session's end, outside the reactor (it
/// joins it when it must wait, see `net::lazy`), and the gateway's.
fn pair() -> std::io::Result<(std::os::unix::net::UnixStream, tokio::net::UnixStream)> {
    let (a, b) = std::os::unix::net::UnixStream::pair()?;
    a.set_nonblocking(true)?;
    b.set_nonblocking(true)?;
    Ok((a, tokio::net::UnixStream::from_std(b)?))
}

/// Writes the request (head, then body as it arrives) to the session and relays its
/// response; resets the stream when the response cannot be relayed whole.
async fn exchange(
    mut io: tokio::net::UnixStream,
    head: request::Head,
    (body, watch): (RecvStream, Option<acks::Watch>),
    mut respond: SendResponse<Bytes>,
) {
    let (mut from, mut to) = io.split();
    if to.write_all(&head.bytes).await.is_err() {
        respond.send_reset(Reason::INTERNAL_ERROR);
        return;
    }
    let relayed = {
        let upload = send_body(body, watch, &mut to, head.chunked);
        let relay = response::relay(&mut from, &mut respond, head.head);
        tokio::pin!(upload);
        tokio::pin!(relay);
        let mut uploading = true;
        loop {
            tokio::select! {
                r = &mut relay => break r,
                r = &mut upload, if uploading => {
                    uploading = false;
                    // The client reset the stream: give up (the session sees its client go).
                    if r == Err(Upload::Client) {
                        break Err(response::Broken::Closed);
                    }
                }
            }
        }
    };
    match relayed {
        Ok(_) => {}
        // The client is gone or reset the stream: nothing to send.
        Err(response::Broken::Client) => {}
        Err(_) => respond.send_reset(Reason::INTERNAL_ERROR),
    }
}

/// Why the request body stopped.
#[derive(Debug, PartialEq, Eq)]
enum Upload {
    /// The client reset the stream or the connection failed.
    Client,
    /// The session stopped reading (it may still answer).
    Session,
}

/// Forwards the request body to the session (chunked when it has no `content-length`),
/// giving the client flow-control credit back as the session takes the bytes; once the client
/// ended the body, the credit of the stream the crate did not send goes out (`watch`).
async fn send_body(
    mut body: RecvStream,
    mut watch: Option<acks::Watch>,
    to: &mut (impl AsyncWrite + Unpin),
    chunked: bool,
) -> Result<(), Upload> {
    let session = |_| Upload::Session;
    while let Some(data) = body.data().await {
        let data = data.map_err(|_| Upload::Client)?;
        let n = data.len();
        if n == 0 {
            continue;
        }
        if chunked {
            let size = format!("{n:x}\r\n");
            to.write_all(size.as_bytes()).await.map_err(session)?;
        }
        to.write_all(&data).await.map_err(session)?;
        if chunked {
            to.write_all(b"\r\n").await.map_err(session)?;
        }
        let _ = body.flow_control().release_capacity(n);
        if let Some(w) = &mut watch {
            w.received(n);
        }
    }
    // `data()` ended without an error: the client ended the stream.
    if let Some(w) = watch {
        w.ended();
    }
    if chunked {
        to.write_all(b"0\r\n\r\n").await.map_err(session)?;
    }
    Ok(())
}
