//! Stick-table replication with remote peers: HAProxy's `peers` sections, spoken with
//! HAProxy's own peers protocol ([`wire`]) so that a Bascule process can be a peer of
//! haproxy processes as well as of other Bascule processes.
//!
//! Each `peers` section that names the local peer and at least one remote one listens on
//! the local peer's address and keeps one session per remote peer ([`session`]). A session
//! sends every entry of the section's tables when it starts, then each entry that changes
//! here ([`crate::stick::Feed`]: the tables announce the keys that local traffic touched),
//! and applies what the peer sends without announcing it back. As in HAProxy, values are
//! copied, not summed (the last writer wins), and both sides may connect at once: a session
//! the peer opens replaces the one in place, and the side that lost one waits a random
//! 50 ms to 2 s before calling again, so that the two converge on one session.
//!
//! Everything here runs on the main thread's event loop, beside the health checks and the
//! stats socket; the workers only pay a broadcast send when a replicated entry changes while
//! a session listens.
//!
//! Not done yet: handing the tables over to the next process on a reload (the local peer's
//! role), `show peers`, and the `shards` and TLS options of peers.

mod session;
pub mod wire;

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, Notify};

use crate::config::model::{ListenAddr, PeersSync, StickTable};
use crate::stick::{Key, Table};

/// How many changed keys a section's channel holds for a slow session (which then sends
/// whole tables again).
const FEED_DEPTH: usize = 4096;

/// What a replicating section needs at run time, built with the tables (whose feeds send
/// on `tx`).
#[derive(Debug, Clone)]
pub struct Replication {
    pub sync: PeersSync,
    pub tx: broadcast::Sender<(u16, Key)>,
    /// The section's tables: (index into the process's tables, name on the wire), in the
    /// order of their feeds' numbers.
    pub tables: Vec<(usize, String)>,
}

impl Replication {
    /// One per section of `peers`, with the tables of `tables` that name it.
    pub fn build(peers: &[PeersSync], tables: &[StickTable]) -> Vec<Replication> {
        peers
            .iter()
            .enumerate()
            .map(|(i, sync)| Replication {
                sync: sync.clone(),
                tx: broadcast::channel(FEED_DEPTH).0,
                tables: tables
                    .iter()
                    .enumerate()
                    .filter_map(|(t, st)| match &st.peers {
                        Some((s, wire)) if *s == i => Some((t, wire.clone())),
                        _ => None,
                    })
                    .collect(),
            })
            .collect()
    }

    /// The feed for table `table` (an index into the process's tables), if this section
    /// replicates it.
    pub fn feed(&self, table: usize) -> Option<crate::stick::Feed> {
        let n = self.tables.iter().position(|(t, _)| *t == table)?;
        Some(crate::stick::Feed::new(self.tx.clone(), n as u16))
    }
}

/// One remote peer of a section, and its session if one is up.
struct Remote {
    name: String,
    addr: SocketAddr,
    /// Bumped by each new session: a session whose number is no longer current ends.
    generation: Cell<u64>,
    up: Cell<bool>,
    /// Wakes the current session when another replaces it.
    replaced: Notify,
    /// Wakes the connector when a session ends.
    ended: Notify,
    /// When the connector may call next (a lost collision delays it).
    hold_until: Cell<Option<tokio::time::Instant>>,
}

/// A replicating section at run time.
struct Section {
    rep: Replication,
    tables: Vec<Arc<Table>>,
    remotes: Vec<Remote>,
    /// Whether a session has asked a peer for its tables yet (once per process).
    asked_resync: Cell<bool>,
}

impl Section {
    /// Takes remote `r` for a new session; returns the session's number.
    fn open(&self, r: usize) -> u64 {
        let remote = &self.remotes[r];
        let g = remote.generation.get() + 1;
        remote.generation.set(g);
        remote.up.set(true);
        remote.replaced.notify_waiters();
        g
    }

    /// Gives remote `r` back after session `g` ended.
    fn close(&self, r: usize, g: u64) {
        let remote = &self.remotes[r];
        if remote.generation.get() == g {
            remote.up.set(false);
            remote.ended.notify_waiters();
        }
    }

    fn current(&self, r: usize, g: u64) -> bool {
        self.remotes[r].generation.get() == g
    }
}

/// Starts every section's listener and connectors on the current (main) event loop.
pub fn spawn(reps: &[Replication], tables: &[Arc<Table>]) -> std::io::Result<()> {
    for rep in reps.iter().cloned() {
        let listener = listen(&rep.sync).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "peers '{}': cannot listen on {}: {e}",
                    rep.sync.name, rep.sync.listen
                ),
            )
        })?;
        let section = Rc::new(Section {
            tables: rep
                .tables
                .iter()
                .map(|(t, _)| Arc::clone(&tables[*t]))
                .collect(),
            remotes: rep
                .sync
                .remotes
                .iter()
                .map(|(name, addr)| Remote {
                    name: name.clone(),
                    addr: *addr,
                    generation: Cell::new(0),
                    up: Cell::new(false),
                    replaced: Notify::new(),
                    ended: Notify::new(),
                    hold_until: Cell::new(None),
                })
                .collect(),
            rep,
            asked_resync: Cell::new(false),
        });
        tokio::task::spawn_local(accept_loop(Rc::clone(&section), listener));
        for r in 0..section.remotes.len() {
            tokio::task::spawn_local(connect_loop(Rc::clone(&section), r));
        }
    }
    Ok(())
}

/// Binds the local peer's address, or adopts the inherited socket of `fd@N`.
fn listen(sync: &PeersSync) -> std::io::Result<TcpListener> {
    let l = match &sync.listen {
        ListenAddr::Inet(addr) => {
            let domain = socket2::Domain::for_address(*addr);
            let s = socket2::Socket::new(domain, socket2::Type::STREAM, None)?;
            s.set_reuse_address(true)?;
            s.bind(&(*addr).into())?;
            s.listen(64)?;
            std::net::TcpListener::from(s)
        }
        ListenAddr::Fd(fd) => {
            let owned = crate::sys::dup_inherited(*fd)?;
            let sock = socket2::SockRef::from(&owned);
            if sock.domain()? == socket2::Domain::UNIX || !sock.is_listener()? {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("fd@{fd} is not a listening TCP socket"),
                ));
            }
            std::net::TcpListener::from(owned)
        }
        ListenAddr::Unix(u) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("'{u}': peers listen on TCP only"),
            ))
        }
    };
    l.set_nonblocking(true)?;
    TcpListener::from_std(l)
}

async fn accept_loop(section: Rc<Section>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((conn, _)) => {
                let _ = conn.set_nodelay(true);
                tokio::task::spawn_local(session::accepted(Rc::clone(&section), conn));
            }
            Err(e) => {
                eprintln!(
                    "[WARNING] peers '{}': accept failed: {e}",
                    section.rep.sync.name
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// How long a session may stay silent, and how long to wait before calling a peer again
/// (haproxy's `PEER_RECONNECT_TIMEOUT`).
const RECONNECT: Duration = Duration::from_secs(5);

/// Calls remote `r` whenever no session with it is up.
async fn connect_loop(section: Rc<Section>, r: usize) {
    loop {
        let remote = &section.remotes[r];
        while remote.up.get() {
            let ended = remote.ended.notified();
            if !remote.up.get() {
                break;
            }
            ended.await;
        }
        if let Some(at) = remote.hold_until.take() {
            tokio::time::sleep_until(at).await;
            if remote.up.get() {
                continue;
            }
        }
        let called = tokio::time::timeout(RECONNECT, TcpStream::connect(remote.addr)).await;
        if let Ok(Ok(conn)) = called {
            let _ = conn.set_nodelay(true);
            session::called(Rc::clone(&section), r, conn).await;
        }
        if !section.remotes[r].up.get() && section.remotes[r].hold_until.get().is_none() {
            tokio::time::sleep(RECONNECT).await;
        }
    }
}

/// A random delay of 50 ms to about 2 s, as haproxy waits after killing a session.
fn collision_delay() -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mix = u64::from(nanos).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(std::process::id());
    Duration::from_millis(50 + (mix >> 33) % 2000)
}
