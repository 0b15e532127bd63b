//! A backend's servers: a table that only grows, so that `add server` can give a backend a
//! server at run time while every worker keeps reading it without a lock.
//!
//! The table has a fixed number of slots, chosen at load (the configured servers plus room for
//! dynamic ones); each slot is written once ([`OnceLock`]) and the published length only grows.
//! An index, once given, names the same server for the life of the process: `del server` marks
//! the server deleted ([`ServerState::deleted`]) and leaves it in its slot, never reused, so
//! the indices that sessions, idle pools and stick tables hold stay valid.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::server::ServerState;

/// Room for servers added at run time, per backend, beyond the configured ones.
pub const DYNAMIC_ROOM: usize = 256;

/// The servers of one backend, indexed from 0 in declaration then addition order.
#[derive(Debug)]
pub struct ServerTable {
    slots: Box<[OnceLock<ServerState>]>,
    /// Slots below this are written.
    len: AtomicUsize,
}

impl ServerTable {
    /// A table holding `servers`, with room for [`DYNAMIC_ROOM`] more.
    pub fn new(servers: impl ExactSizeIterator<Item = ServerState>) -> Self {
        let n = servers.len();
        let slots: Box<[OnceLock<ServerState>]> =
            (0..n + DYNAMIC_ROOM).map(|_| OnceLock::new()).collect();
        for (slot, s) in slots.iter().zip(servers) {
            let _ = slot.set(s);
        }
        ServerTable {
            slots,
            len: AtomicUsize::new(n),
        }
    }

    /// Servers ever held, deleted ones included (indices are below this).
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> Option<&ServerState> {
        if i < self.len() {
            self.slots[i].get()
        } else {
            None
        }
    }

    /// Every server ever held, in index order (deleted ones included, so that `enumerate`
    /// gives indices).
    pub fn iter(&self) -> impl Iterator<Item = &ServerState> + Clone {
        self.slots[..self.len()].iter().filter_map(OnceLock::get)
    }

    /// The servers not deleted, with their indices.
    pub fn live(&self) -> impl Iterator<Item = (usize, &ServerState)> + Clone {
        self.iter().enumerate().filter(|(_, s)| !s.is_deleted())
    }

    /// The index of the live server called `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.live()
            .find(|(_, s)| s.config.name == name)
            .map(|(i, _)| i)
    }

    /// Appends a server and returns its index; `None` when the table is full.
    pub fn push(&self, server: ServerState) -> Option<usize> {
        let mut server = server;
        for i in self.len()..self.slots.len() {
            match self.slots[i].set(server) {
                Ok(()) => {
                    // Every slot below `i` is written (a pusher only moves past a slot it
                    // found written), so the new length publishes written slots only.
                    self.len.fetch_max(i + 1, Ordering::AcqRel);
                    return Some(i);
                }
                Err(s) => server = s,
            }
        }
        None
    }
}

impl std::ops::Index<usize> for ServerTable {
    type Output = ServerState;

    fn index(&self, i: usize) -> &ServerState {
        match self.get(i) {
            Some(s) => s,
            None => panic!("server index {i} out of range ({} servers)", self.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    fn server(name: &str) -> ServerState {
        let mut c = crate::config::load_str(
            "t.cfg",
            "defaults\n  timeout connect 1s\n  timeout client 1s\n  timeout server 1s\nbackend b\n  server x 127.0.0.1:1\n",
        )
        .unwrap()
        .config
        .backends[0]
            .servers[0]
            .clone();
        c.name = name.into();
        ServerState::new(&c, 1, true)
    }

    #[test]
    fn indices_stay_and_deleted_servers_are_skipped_by_name() {
        let t = ServerTable::new([server("a"), server("b")].into_iter());
        assert_eq!(t.len(), 2);
        assert_eq!(t.push(server("c")), Some(2));
        assert_eq!(t.find("c"), Some(2));
        t[1].deleted.store(true, Ordering::Relaxed);
        assert_eq!(t.find("b"), None);
        assert_eq!(t.push(server("b")), Some(3));
        assert_eq!(t.find("b"), Some(3));
        assert_eq!(t.iter().count(), 4);
        let live: Vec<usize> = t.live().map(|(i, _)| i).collect();
        assert_eq!(live, [0, 2, 3]);
        assert!(t.get(4).is_none());
    }

    #[test]
    fn a_full_table_refuses() {
        let t = ServerTable::new(std::iter::empty());
        for i in 0..DYNAMIC_ROOM {
            assert_eq!(t.push(server("s")), Some(i));
        }
        assert!(t.push(server("s")).is_none());
        assert_eq!(t.len(), DYNAMIC_ROOM);
    }
}
