//! HTTP/1.1 mode: one client connection carrying a sequence of transactions.
//!
//! Each transaction runs HAProxy's phases in order: read and check the request head (strict
//! framing from `proto::h1`), choose the backend, get a server connection (the session's own one
//! from its previous request, an idle one from this worker's pool, or a new one with retries),
//! send the rewritten head and stream the body, read the response head (passing 1xx interim
//! responses through), send it rewritten and stream its body, then decide whether both sides stay
//! open. Bodies are streamed through bounded buffers and their framing bytes are forwarded
//! unchanged (a chunked body is validated as it passes, not re-encoded). `Connection: upgrade`
//! answered by `101` turns the session into a tunnel.
//!
//! Server connections are reused as `http-reuse safe` does: a client's first request gets a
//! connection of its own; later requests reuse the session's connection or an idle one that
//! another session of this worker left in the pool.

use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

mod body;
mod buf;
mod txnlog;

use body::BodyError;
use buf::Buf;
use txnlog::{Term, TxnLog};

use crate::backend::{self, ClientAddrs, ServerSlot};
use crate::base::pool::Pool;
use crate::config::model::{
    Backend as BackendConfig, Frontend as FrontendConfig, HttpConnMode, HttpReuse,
};
use crate::net::deadline::{self, Deadline, Elapsed};
use crate::net::forward::{self, SideTimeouts};
use crate::net::lazy::LazyStream;
use crate::proto::h1::{self, BodyKind, HeaderIdx, RequestHead, ResponseHead};
use crate::session::{self, IdleConn, WorkerCtx};
use crate::state::Shared;

/// A session's scratch space for messages: the header indexes of the request and of the
/// response, and the head being rewritten. Sized for typical messages, grown when one needs
/// more, reused from message to message; between sessions each worker keeps a few, so a short
/// connection allocates none of it.
#[derive(Default)]
struct Parts {
    headers: Vec<HeaderIdx>,
    rheaders: Vec<HeaderIdx>,
    out: Vec<u8>,
    /// A request target that normalisation changed, as it is forwarded and hashed.
    target: Vec<u8>,
    /// The log facts of the transaction in progress.
    txn: TxnLog,
}

/// [`Parts`] on loan from the worker's pool, given back when dropped.
struct Scratch(Parts);

/// Scratch spaces kept per worker; extra ones, or ones grown past `SCRATCH_KEEP` bytes of
/// head, are freed, and so are those unused since the worker's last look (see [`shrink_scratch`]).
const SCRATCH_POOL: usize = 256;
const SCRATCH_KEEP: usize = 16 * 1024;

thread_local! {
    static SCRATCH: Pool<Parts> = const { Pool::new(SCRATCH_POOL) };
}

/// Frees the scratch spaces of this worker's pool that no session needed since the last call;
/// returns about how many bytes. Called from the worker's periodic look ([`crate::runtime::reclaim`]).
pub fn shrink_scratch() -> usize {
    let size = |p: &Parts| {
        (p.headers.capacity() + p.rheaders.capacity()) * std::mem::size_of::<HeaderIdx>()
            + p.out.capacity()
    };
    SCRATCH.try_with(|pool| pool.shrink(size)).unwrap_or(0)
}

impl Scratch {
    fn take() -> Scratch {
        let pooled = SCRATCH.try_with(Pool::take).ok().flatten();
        Scratch(pooled.unwrap_or_else(|| Parts {
            headers: Vec::with_capacity(16),
            rheaders: Vec::with_capacity(16),
            out: Vec::with_capacity(1024),
            target: Vec::new(),
            txn: TxnLog::default(),
        }))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.0.out.capacity() > SCRATCH_KEEP {
            return;
        }
        let parts = std::mem::take(&mut self.0);
        // At thread exit the pool may be gone already: the parts are then simply freed.
        let _ = SCRATCH.try_with(|p| p.put(parts));
    }
}

/// Why a transaction failed, and which status (if any) the client still gets.
#[derive(Debug)]
enum Failure {
    /// Answer with this status, then close; the termination state for the log.
    Respond(u16, Term),
    /// Close without a word (the client went away, or the response already started).
    Close(Term),
    /// The request is safe to send again and failed in a way that allows it (a reused
    /// connection the server had closed, or a `retry-on` condition): retry on a new connection.
    Retry,
}

/// A session's deadlines, one per side (see [`crate::net::deadline`]).
struct Timers<'a> {
    client: Deadline<'a>,
    server: Deadline<'a>,
}

/// The session's server connection between transactions.
struct Attached<'a> {
    backend: usize,
    stream: TcpStream,
    slot: ServerSlot<'a>,
    sbuf: Buf,
    /// Served a request before: it may have been closed by the server meanwhile.
    reused: bool,
}

/// A keep-alive connection idles this long in its session task before it is parked.
///
/// A session task holds the state of a whole transaction (its future is sized for the largest
/// phase, a few KiB); a parked connection holds only its socket and idle deadline. Parking and
/// resuming cost a task each, nothing next to a 100 ms pause, and requests that follow each
/// other closely never park (the steady keep-alive path stays allocation-free).
const PARK_AFTER: Duration = Duration::from_millis(100);

/// How a session task starts.
pub enum Start {
    /// A newly accepted connection.
    New,
    /// A parked keep-alive connection whose next request is arriving; it may idle until
    /// `idle_until` (`timeout http-keep-alive`) before its first byte. `since`: when its
    /// previous transaction ended (when it logs).
    Resumed {
        idle_until: Option<Instant>,
        since: Option<Instant>,
    },
}

/// A keep-alive client connection between requests, to be held without a session task (see
/// `idle`) until its next request, then resumed with [`Start::Resumed`].
pub struct Parked {
    pub client: LazyStream,
    /// Its keep-alive deadline.
    pub idle_until: Option<Instant>,
    /// When its last transaction ended, for the next one's log line.
    pub since: Option<Instant>,
}

/// What waiting for a request head gave.
enum Next {
    Head(RequestHead),
    /// The client closed between requests, or idled past its keep-alive timeout.
    Closed,
    /// Idle for [`PARK_AFTER`]: the session parks until `idle_until`.
    Idle {
        idle_until: Option<Instant>,
    },
}

/// Runs an HTTP-mode session for `client`, accepted by frontend `frontend`, until the
/// connection closes (`None`) or idles long enough between requests to be parked.
pub async fn run(
    shared: &Shared,
    ctx: &WorkerCtx,
    frontend: usize,
    mut client: LazyStream,
    peer: SocketAddr,
    start: Start,
) -> Option<Parked> {
    let fe = &shared.frontends[frontend].config;
    let logging = shared.frontends[frontend].log.enabled();
    let bufsize = shared.global.tune_bufsize;
    let mut cbuf = Buf::new(bufsize);
    let mut scratch = Scratch::take();
    let Parts {
        headers,
        rheaders,
        out,
        target: target_buf,
        txn,
    } = &mut scratch.0;

    let mut client_sleep = pin!(deadline::sleep());
    let mut server_sleep = pin!(deadline::sleep());
    let mut timers = Timers {
        client: Deadline::new(client_sleep.as_mut()),
        server: Deadline::new(server_sleep.as_mut()),
    };
    let mut attached: Option<Attached<'_>> = None;
    let (mut first, mut idle_until, mut since) = match start {
        Start::New => (true, None, logging.then(Instant::now)),
        Start::Resumed { idle_until, since } => (false, idle_until, since),
    };
    let mut parked = None;
    // The client may still be sending when the session ends: see [`close_client`].
    let mut linger = false;

    loop {
        txn.start(logging, since);
        // Phase 1: the request head. Before the first byte of a later request the client may
        // idle for `timeout http-keep-alive`; then the head must complete within
        // `timeout http-request`.
        let mut started = None;
        let next = read_request(
            &mut client,
            &mut cbuf,
            headers,
            fe,
            first,
            idle_until,
            &mut timers.client,
            &mut started,
        );
        let head = match next.await {
            Ok(Next::Head(h)) => h,
            Ok(Next::Closed) => {
                // A connection that never sent a byte is logged as a bad request, as HAProxy
                // does (unless `option dontlognull`).
                if first {
                    txn.term = *b"CR";
                    txn.status = Some(400);
                    txn.emit(shared, frontend, peer, || client.local_addr().ok());
                }
                break;
            }
            Ok(Next::Idle { idle_until }) => {
                parked = Some(idle_until);
                break;
            }
            Err(Failure::Respond(status, term)) => {
                // Answered before any stream exists: HAProxy counts no bytes for it.
                respond_error(&mut client, status, out, fe, None).await;
                txn.mark(|tl, _| tl.request = tl.request.or(Some(tl.accept)));
                txn.status = Some(status);
                txn.term = term;
                txn.bytes_in = cbuf.bytes().len() as u64;
                txn.emit(shared, frontend, peer, || client.local_addr().ok());
                linger = true;
                break;
            }
            Err(Failure::Close(term)) => {
                txn.status = Some(400);
                txn.term = term;
                txn.bytes_in = cbuf.bytes().len() as u64;
                txn.emit(shared, frontend, peer, || client.local_addr().ok());
                break;
            }
            Err(Failure::Retry) => break,
        };
        {
            let bytes = cbuf.bytes();
            let line = head.start_line.clone();
            let local = || client.local_addr().ok();
            txn.request_head(shared, frontend, started, bytes, line, headers, peer, local);
        }

        // Phase 2: the backend.
        let Some(be_idx) = fe.use_backends.first().copied().or(fe.default_backend) else {
            let n = respond_error(&mut client, 503, out, fe, None).await;
            txn.answered(503, n, *b"SC");
            txn.emit(shared, frontend, peer, || client.local_addr().ok());
            linger = true;
            break;
        };
        let be = &shared.backends[be_idx];
        let bec = &be.config;
        txn.backend = Some(be_idx);

        // Phase 3: the balancer picks a server, then a connection to it: the session's own
        // if it goes there, else an idle one (as `http-reuse` allows), else a new one.
        let bytes = cbuf.bytes();
        let target = head.target(bytes, target_buf);
        let header = |name: &str| {
            headers
                .iter()
                .find(|h| h.is(bytes, name))
                .map(|h| h.value(bytes))
        };
        let key = backend::balance_key(bec, peer.ip(), Some(target), header);
        let abortonclose = fe.options.abortonclose || bec.options.abortonclose;
        let picked = if abortonclose {
            // A client that leaves while its request waits in the queue cancels it.
            tokio::select! {
                r = backend::pick(be, &ctx.pickers[be_idx], key) => Some(r),
                gone = client_gone(&mut client) => if gone { None } else {
                    Some(backend::pick(be, &ctx.pickers[be_idx], key).await)
                },
            }
        } else {
            Some(backend::pick(be, &ctx.pickers[be_idx], key).await)
        };
        let server = match picked {
            None => {
                txn.term = *b"CQ";
                txn.emit(shared, frontend, peer, || client.local_addr().ok());
                break;
            }
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                let n = respond_error(&mut client, 503, out, fe, Some(bec)).await;
                txn.answered(503, n, session::connect_term(&e));
                txn.emit(shared, frontend, peer, || client.local_addr().ok());
                linger = true;
                break;
            }
        };
        txn.mark(|tl, now| tl.queued = Some(now));
        if attached
            .as_ref()
            .is_some_and(|a| a.backend != be_idx || a.slot.server != server)
        {
            let old = attached.take();
            let old_bec = old.as_ref().map(|a| &shared.backends[a.backend].config);
            if let Some(old_bec) = old_bec {
                release(ctx, old, old_bec);
            }
        }
        let reuse_pool = match bec.http_reuse {
            HttpReuse::Never => false,
            HttpReuse::Safe => !first,
            HttpReuse::Aggressive | HttpReuse::Always => true,
        };
        let mut conn = match attached.take() {
            Some(a) => a,
            None => match server_conn(
                shared, ctx, be_idx, server, reuse_pool, &client, peer, bufsize,
            )
            .await
            {
                Ok(c) => c,
                Err(e) => {
                    let n = respond_error(&mut client, 503, out, fe, Some(bec)).await;
                    if let backend::ConnectError::Failed { attempts, .. } = &e {
                        txn.server = Some(server);
                        txn.retries = attempts.saturating_sub(1);
                    }
                    txn.answered(503, n, session::connect_term(&e));
                    txn.emit(shared, frontend, peer, || client.local_addr().ok());
                    linger = true;
                    break;
                }
            },
        };
        txn.mark(|tl, now| tl.connected = Some(now));
        txn.server = Some(conn.slot.server);
        first = false;
        idle_until = None;

        // Phases 4-5: forward the request, then the response. A retry goes out on a new
        // connection after a new server pick (which moves round-robin on).
        let mut attempt = 0;
        let result = loop {
            let r = transaction(
                &mut client,
                &mut cbuf,
                headers,
                &head,
                &mut conn,
                fe,
                bec,
                peer,
                out,
                rheaders,
                attempt < bec.retries,
                &mut timers,
                LogCtx {
                    shared,
                    frontend,
                    txn,
                },
            )
            .await;
            if !matches!(r, Err(Failure::Retry)) || attempt >= bec.retries {
                break r;
            }
            attempt += 1;
            txn.retries = attempt;
            let fresh = match backend::pick(be, &ctx.pickers[be_idx], key).await {
                Ok(server) => {
                    server_conn(shared, ctx, be_idx, server, false, &client, peer, bufsize)
                        .await
                        .ok()
                }
                Err(_) => None,
            };
            match fresh {
                Some(c) => {
                    conn = c;
                    txn.server = Some(conn.slot.server);
                }
                None => break Err(Failure::Respond(503, *b"SC")),
            }
        };
        if txn.on
            && shared.frontends[frontend]
                .log
                .uses(crate::log::format::uses::SERVER_LOCAL)
        {
            txn.server_local = conn.stream.local_addr().ok();
        }
        match result {
            Ok(Outcome::KeepBoth) => {
                conn.reused = true;
                conn.sbuf.release_if_empty();
                txn.holds_server = true;
                txn.emit(shared, frontend, peer, || client.local_addr().ok());
                attached = Some(conn);
            }
            Ok(Outcome::KeepClient) => {
                drop(conn);
                txn.emit(shared, frontend, peer, || client.local_addr().ok());
            }
            Ok(Outcome::Upgraded) => {
                let t = SideTimeouts::client(fe, bec);
                let st = SideTimeouts::server(bec);
                let splice = forward::Splice::of(&fe.options, &bec.options);
                // Boxed: a tunnel is rare, and inline its state would enlarge every session
                // task (each spawn copies the whole future).
                let Ok(client) = client.registered() else {
                    return None;
                };
                let tunnel = forward::forward_counted(client, &conn.stream, t, st, bufsize, splice);
                let (moved, r) = Box::pin(tunnel).await;
                txn.bytes_out += moved.to_client;
                txn.bytes_in += moved.to_server;
                txn.term = match r {
                    Ok(_) => *b"--",
                    Err(forward::ForwardError::Timeout(forward::Side::Client)) => *b"cD",
                    Err(forward::ForwardError::Timeout(forward::Side::Server)) => *b"sD",
                    Err(forward::ForwardError::Io(forward::Side::Client, _)) => *b"CD",
                    Err(forward::ForwardError::Io(forward::Side::Server, _)) => *b"SD",
                };
                txn.holds_server = true;
                txn.emit(shared, frontend, peer, || client.local_addr().ok());
                return None;
            }
            Ok(Outcome::CloseClient {
                keep_server,
                request_read,
            }) => {
                if keep_server {
                    release(ctx, Some(conn), bec);
                }
                txn.emit(shared, frontend, peer, || client.local_addr().ok());
                linger = !request_read;
                break;
            }
            Err(Failure::Respond(status, term)) => {
                drop(conn);
                let n = respond_error(&mut client, status, out, fe, Some(bec)).await;
                txn.answered(status, n, term);
                txn.emit(shared, frontend, peer, || client.local_addr().ok());
                linger = true;
                break;
            }
            Err(Failure::Close(term)) => {
                drop(conn);
                txn.term = term;
                txn.emit(shared, frontend, peer, || client.local_addr().ok());
                break;
            }
            Err(Failure::Retry) => {
                drop(conn);
                let n = respond_error(&mut client, 502, out, fe, Some(bec)).await;
                txn.answered(502, n, *b"SH");
                txn.emit(shared, frontend, peer, || client.local_addr().ok());
                linger = true;
                break;
            }
        }
        since = logging.then(Instant::now);
    }
    // Parked or closing, the client gives its server connection back to the pool.
    if let Some(a) = attached {
        let bec = &shared.backends[a.backend].config;
        release(ctx, Some(a), bec);
    }
    match parked {
        Some(idle_until) => Some(Parked {
            client,
            idle_until,
            since,
        }),
        None => {
            if linger {
                Box::pin(close_client(client, fe.timeouts.client)).await;
            }
            None
        }
    }
}

/// Gives a reusable server connection back to this worker's idle pool, or aborts it when the
/// backend does not keep server connections (see [`session::abort`]).
fn release(ctx: &WorkerCtx, conn: Option<Attached<'_>>, bec: &BackendConfig) {
    let Some(a) = conn else { return };
    if bec.options.http_conn_mode != HttpConnMode::KeepAlive
        || bec.http_reuse == HttpReuse::Never
        || !a.sbuf.bytes().is_empty()
    {
        session::abort(a.stream);
        return;
    }
    let server = a.slot.server;
    ctx.put_idle(a.backend, server, a.stream);
}

/// Takes an idle pooled connection (when allowed) or connects a new one.
/// How long an idle server connection stays in the pool (HAProxy's `pool-purge-delay` default).
const POOL_IDLE: Duration = Duration::from_secs(5);

/// Below this idle time a pooled connection is reused without probing it first.
const FRESH_IDLE: Duration = Duration::from_millis(200);

/// Takes an idle pooled connection to `server` (when allowed) or connects a new one, starting
/// with `server` and following the backend's retry rules.
#[allow(clippy::too_many_arguments)]
async fn server_conn<'a>(
    shared: &'a Shared,
    ctx: &WorkerCtx,
    be_idx: usize,
    server: usize,
    reuse_pool: bool,
    client: &LazyStream,
    peer: SocketAddr,
    bufsize: usize,
) -> Result<Attached<'a>, backend::ConnectError> {
    let be = &shared.backends[be_idx];
    if reuse_pool {
        while let Some(IdleConn {
            server,
            stream,
            since,
        }) = ctx.take_idle(be_idx, server, POOL_IDLE)
        {
            // A connection idle for a moment may have been closed by its server: probe it
            // (one syscall). Under load connections are idle for microseconds and the probe is
            // skipped; a late close is still caught by the retry of safe requests.
            if since.elapsed() > FRESH_IDLE && !still_open(&stream) {
                continue;
            }
            // At its maxconn, the server takes no more: this idle connection closes and the
            // request queues through the connect path below.
            let Some(slot) = ServerSlot::try_take(be, server) else {
                break;
            };
            return Ok(Attached {
                backend: be_idx,
                stream,
                slot,
                sbuf: Buf::new(bufsize),
                reused: true,
            });
        }
    }
    let addrs = ClientAddrs::of(|| client.local_addr(), peer, be);
    backend::connect_to(be, &ctx.pickers[be_idx], addrs, server)
        .await
        .map(|c| Attached {
            backend: be_idx,
            stream: c.stream,
            slot: c.slot,
            sbuf: Buf::new(bufsize),
            reused: false,
        })
}

/// Resolves once the client has closed (true) or sent more bytes, such as a pipelined request
/// (false: the client is still there).
async fn client_gone(client: &mut LazyStream) -> bool {
    let mut b = [0u8; 1];
    !matches!(client.peek(&mut b).await, Ok(n) if n > 0)
}

/// Whether an idle server connection still looks usable: nothing to read, not closed.
fn still_open(s: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.try_read(&mut b), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

/// Reads the next request head into `cbuf`. A later request (not `first`) may idle until
/// `idle_until` before its first byte (computed here from `timeout http-keep-alive` when
/// `None`), and parks after [`PARK_AFTER`] of it; then the head must complete within
/// `timeout http-request`.
#[allow(clippy::too_many_arguments)]
async fn read_request(
    client: &mut LazyStream,
    cbuf: &mut Buf,
    headers: &mut Vec<HeaderIdx>,
    fe: &FrontendConfig,
    first: bool,
    idle_until: Option<Instant>,
    timer: &mut Deadline<'_>,
    started: &mut Option<Instant>,
) -> Result<Next, Failure> {
    let request_t = fe.timeouts.http_request.or(fe.timeouts.client);
    let idle_t = if first {
        request_t
    } else {
        fe.timeouts.http_keep_alive.or(request_t)
    };
    let mut deadline: Option<Instant> = None;
    loop {
        if !cbuf.bytes().is_empty() {
            match h1::parse_request(cbuf.bytes(), headers) {
                Ok(Some(h)) => {
                    started.get_or_insert_with(Instant::now);
                    return Ok(Next::Head(h));
                }
                Ok(None) => {}
                Err(e) => return Err(Failure::Respond(e.status, *b"PR")),
            }
            if cbuf.is_full() {
                return Err(Failure::Respond(h1::too_large(cbuf.bytes()).status, *b"PR"));
            }
            if deadline.is_none() {
                let now = Instant::now();
                started.get_or_insert(now);
                deadline = request_t.map(|t| now + t);
            }
        }
        let wait = match deadline {
            Some(d) => Some(d.saturating_duration_since(Instant::now())),
            None if cbuf.bytes().is_empty() => idle_t,
            None => request_t,
        };
        if cbuf.bytes().is_empty() && !client.is_registered() {
            // A request usually arrives with its connection (or is what wakes a parked one):
            // read it without waiting, which keeps the socket out of the reactor (see `lazy`).
            match cbuf.try_fill(client) {
                Ok(0) => return Ok(Next::Closed),
                Ok(_) => {
                    if deadline.is_none() {
                        let now = Instant::now();
                        started.get_or_insert(now);
                        deadline = request_t.map(|t| now + t);
                    }
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return Err(Failure::Close(*b"CR")),
            }
        }
        if cbuf.bytes().is_empty() {
            // Idle between requests: hold no buffer while waiting for the next byte.
            cbuf.release_if_empty();
            let now = Instant::now();
            let until = match (first, idle_until) {
                (false, Some(t)) => Some(t),
                _ => wait.map(|w| now + w),
            };
            let park_at = now + PARK_AFTER;
            let parks = !first && until.is_none_or(|u| u > park_at);
            let ready = if parks {
                timer.until(Some(park_at), client.readable()).await
            } else {
                timer.until(until, client.readable()).await
            };
            match ready {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(Failure::Close(*b"CR")),
                Err(_) if parks => return Ok(Next::Idle { idle_until: until }),
                Err(_) if first => return Err(Failure::Respond(408, *b"cR")),
                Err(_) => return Ok(Next::Closed),
            }
        }
        match timer.within(wait, cbuf.fill(client)).await {
            Ok(Ok(0)) => {
                // A client that closes between requests is done; one that closes mid-head
                // sent a bad request.
                return if cbuf.bytes().is_empty() {
                    Ok(Next::Closed)
                } else {
                    Err(Failure::Close(*b"CR"))
                };
            }
            Ok(Ok(_)) => {
                if deadline.is_none() {
                    let now = Instant::now();
                    started.get_or_insert(now);
                    deadline = request_t.map(|t| now + t);
                }
            }
            Ok(Err(_)) => return Err(Failure::Close(*b"CR")),
            Err(Elapsed) => {
                return if cbuf.bytes().is_empty() && !first {
                    Ok(Next::Closed)
                } else {
                    Err(Failure::Respond(408, *b"cR"))
                }
            }
        }
    }
}

/// Where a transaction records its log facts.
struct LogCtx<'s, 't> {
    shared: &'s Shared,
    frontend: usize,
    txn: &'t mut TxnLog,
}

/// The termination state of a body transfer that failed; `client_src`: the client sends it.
fn body_term(e: BodyError, client_src: bool) -> Term {
    let (src_closed, src_timeout, dst_closed, dst_timeout) = if client_src {
        (*b"CD", *b"cD", *b"SD", *b"sD")
    } else {
        (*b"SD", *b"sD", *b"CD", *b"cD")
    };
    match e {
        BodyError::Src => src_closed,
        BodyError::SrcTimeout => src_timeout,
        BodyError::Dst => dst_closed,
        BodyError::DstTimeout => dst_timeout,
        BodyError::Invalid(_) => *b"PD",
    }
}

/// How a completed transaction leaves the connections.
enum Outcome {
    KeepBoth,
    KeepClient,
    /// `request_read`: the request was read whole (its body too), so the client has nothing
    /// more to send unless it pipelined past a `Connection: close`.
    CloseClient {
        keep_server: bool,
        request_read: bool,
    },
    Upgraded,
}

#[allow(clippy::too_many_arguments)]
async fn transaction(
    client: &mut LazyStream,
    cbuf: &mut Buf,
    headers: &[HeaderIdx],
    req: &RequestHead,
    conn: &mut Attached<'_>,
    fe: &FrontendConfig,
    be: &BackendConfig,
    peer: SocketAddr,
    out: &mut Vec<u8>,
    rheaders: &mut Vec<HeaderIdx>,
    may_retry: bool,
    timers: &mut Timers<'_>,
    lc: LogCtx<'_, '_>,
) -> Result<Outcome, Failure> {
    let LogCtx {
        shared,
        frontend,
        txn,
    } = lc;
    let mode = if fe.options.http_conn_mode == HttpConnMode::Close
        || be.options.http_conn_mode == HttpConnMode::Close
    {
        HttpConnMode::Close
    } else if fe.options.http_conn_mode == HttpConnMode::ServerClose
        || be.options.http_conn_mode == HttpConnMode::ServerClose
    {
        HttpConnMode::ServerClose
    } else {
        HttpConnMode::KeepAlive
    };
    let upgrading = req.conn.upgrade;
    let buf = cbuf.bytes();
    let is_head = req.is_head(buf);
    let is_connect = req.method(buf) == b"CONNECT";

    // The request head, rewritten: hop-by-hop headers out, ours in.
    out.clear();
    let ff = fe
        .options
        .forwardfor
        .as_ref()
        .or(be.options.forwardfor.as_ref());
    let mut has_ff = false;
    let hop = h1::HopByHop::new(buf, headers, &req.conn, upgrading);
    h1::copy_head(buf, req.start_line.clone(), headers, &req.fixes, out, |h| {
        if hop.is(h) {
            return false;
        }
        if let Some(ff) = ff {
            has_ff |= h.name(buf).eq_ignore_ascii_case(ff.header.as_bytes());
        }
        true
    });
    if txn.has_uid {
        if let Some(h) = &shared.frontends[frontend].log.unique_id_header {
            out.extend_from_slice(h.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(&txn.unique_id);
            out.extend_from_slice(b"\r\n");
        }
    }
    if let Some(ff) = ff {
        let excepted = ff
            .except
            .is_some_and(|(net, len)| in_network(peer.ip(), net, len));
        if !(excepted || ff.if_none && has_ff) {
            use std::io::Write;
            let _ = write!(out, "{}: {}\r\n", ff.header, peer.ip());
        }
    }
    if upgrading {
        out.extend_from_slice(b"Connection: upgrade\r\n");
    } else if mode != HttpConnMode::KeepAlive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if req.minor == 0 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    let head_len = req.len;
    if txn.on {
        txn.bytes_in = txnlog::counted_head(buf, &buf[req.start_line.clone()], headers);
    }

    let server_t = be.timeouts.server;
    let client_t = fe.timeouts.client;
    // A bodyless idempotent request can be sent again: its head stays in `cbuf` until the
    // response starts. It is, when a reused connection turns out closed (the server's idle
    // timeout raced us), or when `retry-on` names the failure and retries are left.
    let safe = req.body == BodyKind::None && req.idempotent(buf);
    let ro = &be.retry_on;
    let retry_if = |allowed: bool, status: u16, term: Term| {
        if safe && may_retry && allowed {
            Failure::Retry
        } else {
            Failure::Respond(status, term)
        }
    };
    let fail = |status| retry_if(conn.reused || ro.empty_response, status, *b"SH");
    match timers
        .server
        .within(server_t, conn.stream.write_all(out))
        .await
    {
        Ok(Ok(())) => {}
        _ => return Err(fail(502)),
    }
    let mut head_consumed = false;
    if req.body != BodyKind::None {
        cbuf.consume(head_len);
        head_consumed = true;
    }
    let mut watch_client = fe.options.abortonclose || be.options.abortonclose;
    let splice = forward::Splice::of(&fe.options, &be.options);

    // The request body. With `Expect: 100-continue` the server speaks first (100 or a final
    // answer), so its response is read before the body.
    let request_body = async |client: &mut LazyStream,
                              cbuf: &mut Buf,
                              server: &mut TcpStream,
                              timers: &mut Timers<'_>,
                              sent: &mut u64| {
        let timeouts = (client_t, server_t);
        let deadlines = (&mut timers.client, &mut timers.server);
        body::send_body(
            client,
            cbuf,
            server,
            req.body,
            timeouts,
            deadlines,
            splice.request,
            sent,
        )
        .await
        .map_err(|e| match e {
            // As before logs existed: a bad chunk is answered, a silent side gets 504.
            BodyError::Invalid(status) => Failure::Respond(status, *b"PD"),
            BodyError::SrcTimeout | BodyError::DstTimeout => {
                Failure::Respond(504, body_term(e, true))
            }
            _ => Failure::Close(body_term(e, true)),
        })
    };
    let mut body_sent = req.body == BodyKind::None;
    if !req.conn.expect_continue {
        request_body(client, cbuf, &mut conn.stream, timers, &mut txn.bytes_in).await?;
        body_sent = true;
    }

    // The response head, passing 1xx interim responses through.
    let mut res: ResponseHead = loop {
        let parsed = loop {
            match h1::parse_response(conn.sbuf.bytes(), rheaders, is_head) {
                Ok(Some(r)) => break r,
                Ok(None) => {}
                Err(e) => return Err(retry_if(ro.junk_response, e.status, *b"PH")),
            }
            if conn.sbuf.is_full() {
                return Err(Failure::Respond(502, *b"PH"));
            }
            let nothing_yet = conn.sbuf.bytes().is_empty();
            let fill = timers
                .server
                .within(server_t, conn.sbuf.fill(&mut conn.stream));
            let filled = if watch_client {
                // `option abortonclose`: a client that goes away cancels its pending request.
                tokio::select! {
                    r = fill => r,
                    gone = client_gone(client) => {
                        if gone {
                            return Err(Failure::Close(*b"CH"));
                        }
                        watch_client = false;
                        continue;
                    }
                }
            } else {
                fill.await
            };
            match filled {
                Ok(Ok(0)) | Ok(Err(_)) if nothing_yet => return Err(fail(502)),
                Ok(Ok(0)) | Ok(Err(_)) => return Err(Failure::Respond(502, *b"SH")),
                Ok(Ok(_)) => {}
                Err(Elapsed) => return Err(retry_if(ro.response_timeout, 504, *b"sH")),
            }
        };
        if !head_consumed && ro.statuses.contains(&parsed.status) && safe && may_retry {
            // `retry-on <status>`: this answer is dropped with its connection.
            return Err(Failure::Retry);
        }
        if !head_consumed {
            cbuf.consume(head_len);
            head_consumed = true;
        }
        if !(100..200).contains(&parsed.status) {
            let bad = (500..600).contains(&parsed.status) && !matches!(parsed.status, 501 | 505);
            let outcome = if bad {
                backend::Outcome::Layer7Error
            } else {
                backend::Outcome::Layer7Ok
            };
            crate::backend::passive::observe(conn.slot.backend(), conn.slot.server, outcome);
        }
        if parsed.status == 101 && !upgrading {
            // Switching protocols nobody asked for: the client would take what follows for
            // the response to its request.
            return Err(Failure::Respond(502, *b"PH"));
        }
        if (100..200).contains(&parsed.status) && parsed.status != 101 {
            let len = parsed.len;
            if client.write_all(&conn.sbuf.bytes()[..len]).await.is_err() {
                return Err(Failure::Close(*b"CH"));
            }
            conn.sbuf.consume(len);
            if parsed.status == 100 && !body_sent {
                request_body(client, cbuf, &mut conn.stream, timers, &mut txn.bytes_in).await?;
                body_sent = true;
            }
            continue;
        }
        break parsed;
    };

    let sbytes = conn.sbuf.bytes();
    txn.status = Some(res.status);
    txn.response_head(shared, frontend, sbytes, rheaders);
    // A 2xx answer to CONNECT has no body: the connection becomes a tunnel (RFC 9110 §9.3.6).
    let tunnel = is_connect && (200..300).contains(&res.status);
    if tunnel {
        res.body = BodyKind::None;
    }
    let upgraded = res.status == 101 && upgrading || tunnel;
    // A client that cannot read chunked (HTTP/1.0) gets the data alone: with a Content-Length
    // when the whole body came with the head, else delimited by the connection's close.
    let dechunk = res.body == BodyKind::Chunked && !req.takes_chunked;
    let whole = match dechunk {
        true => body::whole_chunked(&sbytes[res.len..]),
        false => None,
    };
    let client_keep = req.conn.keep_alive
        && mode != HttpConnMode::Close
        && res.body != BodyKind::UntilClose
        && !(dechunk && whole.is_none())
        && body_sent;
    let server_keep = res.conn.keep_alive && mode == HttpConnMode::KeepAlive && body_sent;

    out.clear();
    let hop = h1::HopByHop::new(sbytes, rheaders, &res.conn, upgraded);
    let start = res.start_line.clone();
    h1::copy_head(sbytes, start, rheaders, &res.fixes, out, |h| {
        !(hop.is(h) || dechunk && h.is(sbytes, "transfer-encoding"))
    });
    let connection: &[u8] = match () {
        _ if tunnel => b"",
        _ if upgraded => b"Connection: upgrade\r\n",
        _ if !client_keep => b"Connection: close\r\n",
        _ if req.minor == 0 => b"Connection: keep-alive\r\n",
        _ => b"",
    };
    out.extend_from_slice(connection);
    // Body bytes that came with the head go out in the same write.
    let mut body = res.body;
    let mut pre = 0;
    if let Some((len, used)) = whole {
        use std::io::Write;
        let _ = write!(out, "Content-Length: {len}\r\n\r\n");
        body::append_dechunked(&sbytes[res.len..res.len + used], out);
        pre = used;
        body = BodyKind::None;
    } else {
        out.extend_from_slice(b"\r\n");
    }
    if let BodyKind::Length(n) = body {
        pre = (n.min((sbytes.len() - res.len) as u64)) as usize;
        out.extend_from_slice(&sbytes[res.len..res.len + pre]);
        body = match n - pre as u64 {
            0 => BodyKind::None,
            left => BodyKind::Length(left),
        };
    }
    match timers.client.within(client_t, client.write_all(out)).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => return Err(Failure::Close(*b"CD")),
        Err(Elapsed) => return Err(Failure::Close(*b"cD")),
    }
    if txn.on {
        let data = whole.map_or(pre as u64, |(len, _)| len);
        let line = &sbytes[res.start_line.clone()];
        txn.bytes_out += txnlog::counted_head(sbytes, line, rheaders) + data;
    }
    conn.sbuf.consume(res.len + pre);

    if upgraded {
        // Bytes that arrived behind the heads belong to the tunnel.
        if !conn.sbuf.bytes().is_empty() && client.write_all(conn.sbuf.bytes()).await.is_err() {
            return Err(Failure::Close(*b"CD"));
        }
        if !cbuf.bytes().is_empty() && conn.stream.write_all(cbuf.bytes()).await.is_err() {
            return Err(Failure::Close(*b"SD"));
        }
        return Ok(Outcome::Upgraded);
    }

    // The response body, streamed to the client. An error here comes after the head went out,
    // so the client can only be disconnected.
    let timeouts = (server_t, client_t);
    let deadlines = (&mut timers.server, &mut timers.client);
    let sent = if dechunk && body != BodyKind::None {
        body::send_dechunked(
            &mut conn.stream,
            &mut conn.sbuf,
            client,
            out,
            timeouts,
            deadlines,
            &mut txn.bytes_out,
        )
        .await
    } else {
        let splice = splice.response;
        body::send_body(
            &mut conn.stream,
            &mut conn.sbuf,
            client,
            body,
            timeouts,
            deadlines,
            splice,
            &mut txn.bytes_out,
        )
        .await
    };
    sent.map_err(|e| Failure::Close(body_term(e, false)))?;

    // Bytes past the end of the response are a server error: never reuse that connection.
    let server_keep = server_keep && conn.sbuf.bytes().is_empty();
    Ok(match (client_keep, server_keep) {
        (true, true) => Outcome::KeepBoth,
        (true, false) => Outcome::KeepClient,
        (false, keep_server) => Outcome::CloseClient {
            keep_server,
            request_read: body_sent,
        },
    })
}

/// Sends the response for a status Bascule generates: the chosen backend's `errorfile`, else
/// the frontend's, else the built-in one.
async fn respond_error(
    client: &mut LazyStream,
    status: u16,
    out: &mut Vec<u8>,
    fe: &FrontendConfig,
    be: Option<&BackendConfig>,
) -> usize {
    let custom = be
        .into_iter()
        .flat_map(|b| b.errorfiles.iter())
        .chain(fe.errorfiles.iter())
        .find(|e| e.status == status);
    let bytes: &[u8] = match custom {
        Some(e) => &e.response,
        None => {
            out.clear();
            h1::error_response(status, out);
            out
        }
    };
    match client.write_all(bytes).await {
        Ok(()) => txnlog::counted_response(bytes) as usize,
        Err(_) => 0,
    }
}

/// How long a client that may still be sending is read from, and what it sends dropped, before
/// its connection closes (at most `timeout client`).
const LINGER: Duration = Duration::from_secs(1);

/// Closes a client connection that may still be sending: answered with an error before its
/// request was read whole (a denied upload, a bad head) or before its body was (`Expect:
/// 100-continue` met by a final answer). Closing a socket with unread bytes sends a reset,
/// which can destroy the answer before the client reads it (RFC 9112 §9.6), so the write side
/// closes first and what arrives is read and dropped until the client closes, or for
/// [`LINGER`]. Every other session ends with a plain close, which sends the FIN.
async fn close_client(mut client: LazyStream, timeout: Option<Duration>) {
    if client.shutdown().await.is_err() {
        return;
    }
    let mut sink = vec![0u8; 16 * 1024];
    let limit = timeout.map_or(LINGER, |t| t.min(LINGER));
    let _ = tokio::time::timeout(limit, async {
        while let Ok(1..) = client.read(&mut sink).await {}
    })
    .await;
}

fn in_network(ip: std::net::IpAddr, net: std::net::IpAddr, len: u8) -> bool {
    match (ip, net) {
        (std::net::IpAddr::V4(a), std::net::IpAddr::V4(n)) => {
            let mask = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len.min(32)))
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (std::net::IpAddr::V6(a), std::net::IpAddr::V6(n)) => {
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(len.min(128)))
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwardfor_except_networks() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert!(in_network(ip("127.0.0.1"), ip("127.0.0.0"), 8));
        assert!(!in_network(ip("10.0.0.1"), ip("127.0.0.0"), 8));
        assert!(in_network(ip("10.1.2.3"), ip("0.0.0.0"), 0));
        assert!(in_network(ip("::1"), ip("::1"), 128));
        assert!(!in_network(ip("::1"), ip("127.0.0.1"), 8));
    }
}
