//! Idle server connections handed from one worker to another.
//!
//! Each worker keeps its idle server connections in a pool of its own (no lock on the request
//! path), but HAProxy users count on one pool per server for the whole process: with
//! `http-reuse safe|aggressive|always`, a request on one thread reuses the connection a
//! request on another thread left idle, and `pool-max-conn` bounds the process's idle
//! connections, not each thread's. A worker whose own pool has no connection for a request
//! therefore asks a worker that has one (each worker counts its idle connections per server on
//! its own line of [`crate::backend::ServerState::idle`]): the owner takes the connection out
//! of its pool and off its reactor and sends the bare socket back, and the asker registers it
//! with its own reactor. HAProxy does the same between its threads (its connection
//! "takeover").
//!
//! The exchange is a message and its answer, so it costs a cross-thread wake-up, paid only
//! when a request would otherwise open a new connection.

use std::rc::Rc;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::{IdleConn, WorkerCtx};
use crate::net::stream::{StdStream, Stream};

/// What the asker wants: a connection it could have taken from its own pool.
pub struct Ask {
    /// Backend, server and PROXY header key, as [`WorkerCtx::take_idle`] takes them.
    key: (usize, usize, u64),
    sni: Option<Box<str>>,
    only_proven: bool,
    reply: oneshot::Sender<Option<Handed>>,
}

/// A connection on its way from one worker to another, off both reactors.
pub struct Handed {
    socket: StdStream,
    since: Instant,
    proven: bool,
}

/// Where a worker's asks arrive.
pub type Inbox = mpsc::UnboundedReceiver<Ask>;

/// Every worker's address, indexed by worker id.
pub type Peers = Arc<[mpsc::UnboundedSender<Ask>]>;

/// The addresses of `workers` workers and their inboxes (one each, in the same order).
pub fn peers(workers: usize) -> (Peers, Vec<Inbox>) {
    let (senders, inboxes): (Vec<_>, Vec<_>) =
        (0..workers).map(|_| mpsc::unbounded_channel()).unzip();
    (senders.into(), inboxes)
}

/// Answers the other workers' asks from this worker's pool until every other worker is gone.
pub async fn serve(ctx: Rc<WorkerCtx>, mut inbox: Inbox) {
    while let Some(ask) = inbox.recv().await {
        let handed = ctx
            .take_idle(
                ask.key,
                ask.sni.as_deref(),
                ask.only_proven,
                super::POOL_IDLE,
            )
            .and_then(hand_over);
        if let Err(Some(h)) = ask.reply.send(handed) {
            // The asker went away meanwhile: nobody holds this connection any more.
            drop(h.socket);
        }
    }
}

/// Takes a connection out of this worker's reactor, or closes it if it cannot leave (a TLS
/// connection with bytes in flight).
fn hand_over(c: IdleConn) -> Option<Handed> {
    if !c.stream.can_park() {
        super::abort(c.stream);
        return None;
    }
    let socket = c.stream.into_std().ok()?;
    Some(Handed {
        socket,
        since: c.since,
        proven: c.proven,
    })
}

impl WorkerCtx {
    /// Takes an idle connection matching what [`WorkerCtx::take_idle`] would from another
    /// worker's pool, asking in turn the workers that hold idle connections to `server`.
    pub async fn take_idle_elsewhere(
        &self,
        key: (usize, usize, u64),
        sni: Option<&str>,
        only_proven: bool,
    ) -> Option<IdleConn> {
        if !self.shared.global.idle_pool_shared {
            return None;
        }
        let (backend, server, proxy_key) = key;
        let state = self.shared.backends[backend].servers.get(server)?;
        for (worker, peer) in self.peers.iter().enumerate() {
            if worker == self.id || state.idle.line(worker) == 0 {
                continue;
            }
            let (reply, answer) = oneshot::channel();
            let ask = Ask {
                key,
                sni: sni.map(Box::from),
                only_proven,
                reply,
            };
            if peer.send(ask).is_err() {
                continue;
            }
            let Ok(Some(h)) = answer.await else { continue };
            let Ok(stream) = Stream::from_std(h.socket) else {
                continue;
            };
            return Some(IdleConn {
                server,
                stream,
                since: h.since,
                proxy_key,
                proven: h.proven,
            });
        }
        None
    }
}
