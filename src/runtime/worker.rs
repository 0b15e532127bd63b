//! Worker threads: one OS thread per `nbthread`, each running its own single-threaded tokio
//! runtime.
//!
//! A connection is accepted, served and closed on one worker, so sessions are `!Send` tasks on a
//! local runtime and the per-worker balancer state needs no lock. Workers learn about a soft stop
//! through a `watch` channel: their accept loops drop their listening descriptors at once, then
//! the worker waits for its last session to end and tells the process it is done.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, watch, Notify};

use tokio::time::Instant;

use crate::config::model::{Mode, Mux};
use crate::http;
use crate::net::idle::Parking;
use crate::net::lazy::LazyStream;
use crate::net::listener::Listener;
use crate::net::stream::{StdStream, Stream};
use crate::net::tls::TlsSock;
use crate::runtime::reclaim;
use crate::session::facts::Addrs;
use crate::session::{self, takeover, WorkerCtx};
use crate::state::{SessionSlots, Shared};

/// A listener handed to a worker: its own duplicate of the shared socket.
pub struct WorkerListener {
    pub frontend: usize,
    pub bind: usize,
    pub socket: Listener,
}

/// What a worker needs to start.
pub struct WorkerSpec {
    pub id: usize,
    pub cpus: Option<Vec<usize>>,
    pub listeners: Vec<WorkerListener>,
    /// Every worker, to take over idle server connections from one another, and where this
    /// one's asks arrive (`session::takeover`).
    pub peers: takeover::Peers,
    pub inbox: takeover::Inbox,
}

/// Starts a worker thread. It runs until `stop` turns true and its sessions are over, then
/// sends its id on `done`.
pub fn spawn(
    spec: WorkerSpec,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    done: mpsc::UnboundedSender<usize>,
) -> io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("bascule-w{}", spec.id))
        .spawn(move || {
            let id = spec.id;
            // A local runtime: sessions are `!Send` tasks spawned straight onto it, with no
            // LocalSet layered over a current-thread runtime.
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build_local(tokio::runtime::LocalOptions::default())
            {
                Ok(rt) => {
                    rt.block_on(run_here(spec, shared, stop));
                }
                Err(e) => eprintln!("[ALERT] worker {}: cannot start its runtime: {e}", id + 1),
            }
            let _ = done.send(id);
        })
}

/// Runs a worker on the calling thread, which must be inside a local tokio runtime, until
/// `stop` turns true and its sessions are over. With `nbthread 1` the process runs its only
/// worker this way, on the main thread: a process with a single thread is cheaper for the
/// kernel on every socket call (see `process`).
pub async fn run_here(spec: WorkerSpec, shared: Arc<Shared>, stop: watch::Receiver<bool>) {
    if let Some(cpus) = &spec.cpus {
        if let Err(e) = crate::sys::pin_current_thread(cpus) {
            eprintln!(
                "[WARNING] worker {}: cannot pin to CPUs {cpus:?}: {e}",
                spec.id + 1
            );
        }
    }
    crate::base::counter::enter_worker(spec.id);
    run(spec, shared, stop).await
}

/// What a client connection holds from accept to close, whichever task serves it at the moment
/// (an HTTP keep-alive connection that idles is parked without a task, see [`crate::net::idle`]):
/// its limit slots and its place in the worker's live count, both given back when it drops.
struct Life {
    worker: Worker,
    slots: SessionSlots,
    frontend: usize,
    /// The client's address (`None` for a UNIX socket's client, which has none) and the id of
    /// the listener that accepted it.
    origin: session::Origin,
    /// When the last transaction of a parked connection ended (the next one's log counts from
    /// there, as HAProxy does).
    since: Option<Instant>,
    /// The stick-table entries a parked connection tracks (dropped with it: released).
    stick: Option<Box<crate::stick::track::Trackers>>,
    /// The PROXY protocol header the connection began with (`accept-proxy`).
    proxied: Option<Rc<crate::proto::proxy::Header>>,
    /// A parked connection's session addresses, when its `tcp-request session` rules made
    /// them differ from the connection's.
    sess: Option<Box<http::SessionState>>,
}

/// The state of one worker that its tasks share.
#[derive(Clone)]
struct Worker {
    shared: Arc<Shared>,
    ctx: Rc<WorkerCtx>,
    sessions: Rc<Sessions>,
    parking: Rc<Parking<Life>>,
    /// Set when the worker stops softly (HTTP/2 connections then send a GOAWAY).
    stop: watch::Receiver<bool>,
}

impl Drop for Life {
    fn drop(&mut self) {
        let s = &self.worker.sessions;
        s.live.set(s.live.get() - 1);
        if s.live.get() == 0 {
            s.none_left.notify_one();
        }
    }
}

/// Serves a connection in a task of its own until it closes or, in HTTP mode, idles long
/// enough to be parked.
fn serve(life: Life, stream: StdStream, start: http::Start) {
    // Boxed: the session future is a few KiB and tokio moves a task's future by value several
    // times (into the task, and when it completes); boxed, only a pointer moves. One allocation
    // per connection (or resumed connection), none per request. Each mode has a task type of
    // its own, so an HTTP task is not sized for a TCP session too.
    let running = Running::start(&life.worker.sessions);
    let Life {
        worker: Worker { shared, .. },
        frontend,
        ..
    } = &life;
    if shared.frontends[*frontend].config.mode == Mode::Http {
        tokio::task::spawn_local(Box::pin(serve_http(running, life, stream, start)));
    } else {
        tokio::task::spawn_local(Box::pin(serve_tcp(running, life, stream)));
    }
}

/// An HTTP-mode session task: runs until the connection closes or idles long enough to be
/// parked.
async fn serve_http(running: Running, mut life: Life, stream: StdStream, start: http::Start) {
    let _running = running;
    let stream = match start {
        http::Start::New => match proxy_header(&mut life, stream).await {
            Some(s) => s,
            None => return,
        },
        _ => stream,
    };
    let Life {
        worker: Worker {
            shared, ctx, stop, ..
        },
        frontend,
        origin,
        slots,
        ..
    } = &life;
    let listener = (origin.listener_id, stream.is_unix());
    let proto = bind_proto(shared, *frontend, origin);
    let client = match tls_config(shared, *frontend, origin, &start) {
        None if proto == Some(Mux::H2) && matches!(start, http::Start::New) => {
            Client::H2(Stream::from_std(stream).ok())
        }
        // Joins the reactor only if it has to wait (see `net::lazy`).
        None => Client::H1(LazyStream::new(stream)),
        Some(config) => match tls_accept(shared, slots, *frontend, origin, stream, config).await {
            // ALPN chose `h2` (unless the line says `proto h1`), or the line says `proto h2`.
            Some(tls) if h2_over_tls(proto, &tls) => Client::H2(Some(Stream::Tls(Box::new(tls)))),
            Some(tls) => Client::H1(LazyStream::tls(Box::new(tls))),
            None => return,
        },
    };
    let at = Addrs {
        src: origin.peer,
        dst: origin.local,
    };
    let addrs = (at, life.proxied.clone());
    let client = match client {
        Client::H1(c) => c,
        Client::H2(Some(c)) => {
            let (shared, ctx) = (Arc::clone(shared), Rc::clone(ctx));
            let stop = stop.clone();
            let conn = (*frontend, listener, stop);
            return http::h2::serve(shared, ctx, c, addrs, conn, None).await;
        }
        Client::H2(None) => return,
    };
    let ended = http::run(
        shared,
        ctx,
        *frontend,
        client,
        addrs.clone(),
        listener,
        start,
    );
    let upgrade = match ended.await {
        http::Ended::Closed => return,
        http::Ended::Parked(http::Parked {
            client,
            idle_until,
            since,
            stick,
            conn,
            sess,
        }) => {
            if let Ok(client) = client.into_std() {
                let mut life = life;
                life.since = since;
                life.stick = stick;
                // What `tcp-request connection|session` rules made of the addresses outlives
                // the task: the next request's starts from them.
                life.origin.peer = conn.src;
                life.origin.local = conn.dst;
                life.sess = sess;
                let parking = Rc::clone(&life.worker.parking);
                parking.park(client, idle_until, life);
            }
            return;
        }
        http::Ended::Http2(u) => u,
    };
    // The HTTP/2 preface on an HTTP/1 listener: the connection speaks HTTP/2 from here.
    let http::Upgrade {
        client,
        read,
        facts,
    } = *upgrade;
    let Ok(c) = client.into_std().and_then(Stream::from_std) else {
        return;
    };
    let (shared, ctx) = (Arc::clone(shared), Rc::clone(ctx));
    let conn = (*frontend, listener, stop.clone());
    http::h2::serve(shared, ctx, c, addrs, conn, Some((read, facts))).await;
}

/// A TCP-mode session task.
async fn serve_tcp(running: Running, mut life: Life, stream: StdStream) {
    let _running = running;
    let Some(stream) = proxy_header(&mut life, stream).await else {
        return;
    };
    let Life {
        worker: Worker { shared, ctx, .. },
        frontend,
        origin,
        slots,
        ..
    } = &life;
    let stream = match tls_config(shared, *frontend, origin, &http::Start::New) {
        None => Stream::from_std(stream).ok(),
        Some(config) => tls_accept(shared, slots, *frontend, origin, stream, config)
            .await
            .map(|tls| Stream::Tls(Box::new(tls))),
    };
    if let Some(stream) = stream {
        let proxied = life.proxied.as_deref();
        session::tcp::run_tcp(shared, ctx, *frontend, stream, *origin, proxied).await;
    }
}

/// What a new connection goes through before its TLS handshake, in HAProxy's order: the
/// `tcp-request connection` rules (`session::accept`; `None` when one rejects), then, on an
/// `accept-proxy` bind or when an `expect-proxy layer4` rule fired, its PROXY protocol header,
/// read within `timeout client`, whose client and destination addresses it takes. A
/// connection whose header is missing or invalid is closed, with a log line in HAProxy's words
/// (none for a client that sent nothing, under `option dontlognull`).
async fn proxy_header(life: &mut Life, stream: StdStream) -> Option<StdStream> {
    let shared = Arc::clone(&life.worker.shared);
    let fe = &shared.frontends[life.frontend];
    // A connection accepted, before any rule (`conn_tot`: HAProxy's `cum_conn`).
    fe.counters.count_connection(fe.limit.current());
    let bind = usize::try_from(life.origin.listener_id)
        .ok()?
        .checked_sub(1)?;
    let local = || {
        socket2::SockRef::from(&stream)
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
    };
    let o = &life.origin;
    let expect_proxy = match session::accept::connection_rules(
        &shared,
        life.frontend,
        o.peer,
        local,
        o.listener_id,
    ) {
        session::accept::AtAccept::Reject => {
            // Counted (`dcon`), not logged, and closed with a reset, as HAProxy does.
            crate::state::Denied::count(&fe.denied.conn);
            let _ = socket2::SockRef::from(&stream).set_linger(Some(std::time::Duration::ZERO));
            return None;
        }
        session::accept::AtAccept::Go { expect_proxy } => expect_proxy,
    };
    if !(expect_proxy || fe.config.binds.get(bind).is_some_and(|b| b.accept_proxy)) {
        return Some(stream);
    }
    let accepted_us = crate::log::now_us();
    match crate::net::proxied::read_header(stream, fe.config.timeouts.client).await {
        Ok((stream, header)) => {
            if let Some((src, dst)) = header.addrs {
                life.origin.peer = Some(src);
                life.origin.local = Some(dst);
            }
            life.proxied = Some(Rc::new(header));
            if fe.log.format().is_none() && fe.log.enabled() {
                let o = &life.origin;
                fe.log.connect_line(
                    &shared.log_outputs,
                    &fe.config,
                    o.peer,
                    o.local,
                    o.listener_id,
                );
            }
            Some(stream)
        }
        Err(f) => {
            if !(f.empty() && fe.config.options.dontlognull) {
                fe.log.embryonic_line(
                    &shared.log_outputs,
                    &fe.config,
                    life.origin.peer,
                    life.origin.listener_id,
                    accepted_us,
                    f.words(),
                );
            }
            None
        }
    }
}

/// A new HTTP client connection, by the version it speaks.
enum Client {
    H1(LazyStream),
    /// `None`: the socket could not join the reactor.
    H2(Option<Stream>),
}

/// The `proto` of the listener that accepted a connection.
fn bind_proto(shared: &Shared, frontend: usize, origin: &session::Origin) -> Option<Mux> {
    let bind = usize::try_from(origin.listener_id).ok()?.checked_sub(1)?;
    shared.frontends[frontend].config.binds.get(bind)?.proto
}

/// Whether a TLS client speaks HTTP/2: its listener says `proto h2`, or ALPN chose `h2` and
/// the listener does not force `proto h1`.
fn h2_over_tls(proto: Option<Mux>, tls: &TlsSock) -> bool {
    match proto {
        Some(Mux::H2) => true,
        Some(Mux::H1) => false,
        None => tls.facts().alpn.as_deref() == Some(b"h2"),
    }
}

/// The TLS settings of the listener that accepted a new connection, if it is `ssl` (a
/// resumed connection is never TLS: those are not parked).
fn tls_config(
    shared: &Shared,
    frontend: usize,
    origin: &session::Origin,
    start: &http::Start,
) -> Option<Arc<crate::tls::server::Built>> {
    if !matches!(start, http::Start::New) {
        return None;
    }
    let bind = usize::try_from(origin.listener_id).ok()?.checked_sub(1)?;
    let tls = shared.frontends[frontend]
        .config
        .binds
        .get(bind)?
        .tls
        .as_ref()?;
    Some(Arc::clone(tls))
}

/// Runs the TLS handshake of an accepted connection, bounded by `timeout client` as HAProxy
/// bounds it. A failure is logged in HAProxy's words (`fe/bind: SSL handshake failure`), except
/// a connection that closed without sending a byte under `option dontlognull`.
async fn tls_accept(
    shared: &Shared,
    slots: &SessionSlots,
    frontend: usize,
    origin: &session::Origin,
    stream: StdStream,
    tls: Arc<crate::tls::server::Built>,
) -> Option<TlsSock> {
    let accepted_us = crate::log::now_us();
    let fe = &shared.frontends[frontend];
    // TCP or UNIX (`bind unix@PATH ssl`); a parked TLS connection never comes back here.
    let sock: std::io::Result<crate::net::tls::Sock> = match stream {
        StdStream::Tcp(s) => tokio::net::TcpStream::from_std(s).map(Into::into),
        StdStream::Unix(s) => tokio::net::UnixStream::from_std(s).map(Into::into),
        StdStream::Tls(_) => Err(std::io::Error::other("a TLS connection accepted twice")),
    };
    let chosen = std::cell::RefCell::new(Arc::clone(&tls.config));
    let result = match sock {
        // One configuration (the common case): the handshake starts at once. `crt-list`
        // lines with options of their own: the ClientHello chooses the configuration.
        Ok(sock) if !tls.has_lines() => {
            let (config, limit) = (Arc::clone(&tls.config), fe.config.timeouts.client);
            TlsSock::accept(sock, config, limit, tls.settings.capture).await
        }
        Ok(sock) => {
            TlsSock::accept_by_hello(
                sock,
                |h| {
                    let c = tls.config_for(h);
                    *chosen.borrow_mut() = Arc::clone(&c);
                    c
                },
                fe.config.timeouts.client,
                tls.settings.capture,
            )
            .await
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(mut s) => {
            slots.handshake_done(!s.facts().resumed);
            if s.facts().resumed {
                if let Some(v) = tls.verifier_of(&chosen.borrow()) {
                    s.reverify(&v);
                }
            }
            Some(s)
        }
        Err(e) => {
            slots.handshake_done(false);
            let (words, empty) = crate::net::tls::handshake_failure(&e);
            if !(empty && fe.config.options.dontlognull) {
                fe.log.embryonic_line(
                    &shared.log_outputs,
                    &fe.config,
                    origin.peer,
                    origin.listener_id,
                    accepted_us,
                    words,
                );
            }
            None
        }
    }
}

/// Counts a session task as running (for [`reclaim`]) until it drops.
struct Running(Rc<Sessions>);

impl Running {
    fn start(sessions: &Rc<Sessions>) -> Running {
        sessions.tasks.start();
        Running(Rc::clone(sessions))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.tasks.end();
    }
}

/// A parked connection's next request is arriving: its session resumes in a new task.
fn resume(client: StdStream, idle_until: Option<Instant>, mut life: Life) {
    let since = life.since;
    let stick = life.stick.take();
    let sess = life.sess.take();
    serve(
        life,
        client,
        http::Start::Resumed {
            idle_until,
            since,
            stick,
            sess,
        },
    );
}

/// See the clock tick in [`run`].
const TICK: Duration = Duration::from_millis(50);

/// Counts the live sessions of one worker so a soft stop knows when it is over.
struct Sessions {
    live: Cell<usize>,
    none_left: Notify,
    /// The tasks serving them: fewer, since idle HTTP connections park without one.
    tasks: reclaim::Tasks,
}

async fn run(spec: WorkerSpec, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let ctx = Rc::new(WorkerCtx::new(&shared, spec.id, Arc::clone(&spec.peers)));
    if spec.peers.len() > 1 {
        tokio::task::spawn_local(takeover::serve(Rc::clone(&ctx), spec.inbox));
    }
    // Idle server connections close after `POOL_IDLE` even when no request takes one.
    tokio::task::spawn_local({
        let ctx = Rc::clone(&ctx);
        async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                ctx.purge_idle();
            }
        }
    });
    let sessions = Rc::new(Sessions {
        live: Cell::new(0),
        none_left: Notify::new(),
        tasks: reclaim::Tasks::default(),
    });
    let parking = match Parking::new() {
        Ok(p) => Rc::new(p),
        Err(e) => {
            eprintln!(
                "[ALERT] worker {}: cannot create its set of idle connections: {e}",
                spec.id + 1
            );
            std::process::exit(1);
        }
    };
    // The reactor's clock tick. Arming a timer that is due before the reactor's next planned
    // wake-up makes tokio interrupt the reactor with a write(2) to its eventfd; a tick never
    // more than TICK away keeps that wake-up near, so the timeouts armed on the hot path
    // (connect, server, keep-alive: seconds; parking: `http::PARK_AFTER`, 100 ms) never need
    // it. Measured: one write per connection without it. 20 wake-ups a second cost nothing.
    tokio::task::spawn_local(async {
        loop {
            tokio::time::sleep(TICK).await;
        }
    });
    // Log lines queued by this worker's sessions go out from here (see `log::sender`).
    tokio::task::spawn_local(crate::log::sender::flusher(Arc::clone(&shared.log_outputs)));
    // Memory freed after a burst goes back to the kernel (see `reclaim`).
    tokio::task::spawn_local({
        let sessions = Rc::clone(&sessions);
        async move { reclaim::run(&sessions.tasks).await }
    });
    tokio::task::spawn_local({
        let parking = Rc::clone(&parking);
        async move {
            parking
                .run(|e| resume(e.socket, e.idle_until, e.data))
                .await
        }
    });
    for l in spec.listeners {
        let unix = l.socket.is_unix();
        let fd = match crate::sys::watch_listener(l.socket.into_fd()) {
            Ok(fd) => fd,
            Err(e) => {
                eprintln!(
                    "[ALERT] worker {}: cannot watch a listener: {e}",
                    spec.id + 1
                );
                continue;
            }
        };
        let worker = Worker {
            shared: Arc::clone(&shared),
            ctx: Rc::clone(&ctx),
            sessions: Rc::clone(&sessions),
            parking: Rc::clone(&parking),
            stop: stop.clone(),
        };
        let at = At {
            frontend: l.frontend,
            bind: l.bind,
            unix,
        };
        tokio::task::spawn_local(accept_loop(fd, at, worker, stop.clone()));
    }
    let _ = stop.wait_for(|s| *s).await;
    // Idle keep-alive connections close at once; active sessions finish.
    parking.close();
    while sessions.live.get() > 0 {
        sessions.none_left.notified().await;
    }
}

/// Which listener an accept loop serves.
#[derive(Clone, Copy)]
struct At {
    frontend: usize,
    bind: usize,
    /// A UNIX socket: its connections are `Stream::Unix` and have no client address.
    unix: bool,
}

async fn accept_loop(
    listener: AsyncFd<OwnedFd>,
    at: At,
    worker: Worker,
    mut stop: watch::Receiver<bool>,
) {
    let At {
        frontend,
        bind,
        unix,
    } = at;
    let shared = &worker.shared;
    let sessions = &worker.sessions;
    let accept_one = || async {
        loop {
            let mut ready = match listener.readable().await {
                Ok(r) => r,
                Err(e) => return Err(e),
            };
            // Over a rate limit the listener waits (the backlog holds the connections).
            shared.pace(frontend, bind).await;
            let mut slots = shared.take_slots(frontend, bind).await;
            match ready.try_io(|l| crate::sys::accept_nonblocking(l.get_ref().as_fd())) {
                Ok(Ok((fd, addr))) => {
                    slots.confirm();
                    shared.count_accept(frontend);
                    let (stream, peer) = if unix {
                        (StdStream::Unix(fd.into()), None)
                    } else {
                        (StdStream::Tcp(fd.into()), addr.as_socket())
                    };
                    return Ok((stream, peer, slots));
                }
                Ok(Err(e)) => return Err(e),
                // Another worker took it: the slots go back and we wait again.
                Err(_would_block) => continue,
            }
        }
    };
    loop {
        let accepted = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            r = accept_one() => r,
        };
        match accepted {
            Ok((stream, peer, slots)) => {
                let listener_id = u32::try_from(bind + 1).unwrap_or(u32::MAX);
                // Client sockets inherit TCP_NODELAY from the listener (see `listener::bind`).
                let fe = &shared.frontends[frontend];
                if fe.config.options.clitcpka && !unix {
                    let _ = socket2::SockRef::from(&stream).set_keepalive(true);
                }
                let proxied = fe.config.binds.get(bind).is_some_and(|b| b.accept_proxy);
                if fe.log.format().is_none() && fe.log.enabled() && !proxied {
                    // A frontend that logs with no format writes HAProxy's legacy line.
                    let local = socket2::SockRef::from(&stream)
                        .local_addr()
                        .ok()
                        .and_then(|a| a.as_socket());
                    fe.log
                        .connect_line(&shared.log_outputs, &fe.config, peer, local, listener_id);
                }
                sessions.live.set(sessions.live.get() + 1);
                let life = Life {
                    worker: worker.clone(),
                    slots,
                    frontend,
                    origin: session::Origin {
                        peer,
                        listener_id,
                        local: None,
                    },
                    since: None,
                    stick: None,
                    proxied: None,
                    sess: None,
                };
                serve(life, stream, http::Start::New);
            }
            // Out of descriptors or memory: back off instead of spinning on a readable
            // listener we cannot serve. Other errors (ECONNABORTED: the client gave up before
            // we accepted) concern one connection only.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                ) =>
            {
                eprintln!(
                    "[WARNING] frontend '{}': accept failed: {e}; pausing 100 ms",
                    shared.frontends[frontend].config.name
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(_) => {}
        }
    }
    // Dropping `listener` here closes this worker's descriptor of the socket.
}
