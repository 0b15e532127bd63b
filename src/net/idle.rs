//! Keep-alive client connections idling between requests, held by their worker without a task.
//!
//! An active HTTP session is a task whose future is sized for a whole transaction, and its
//! socket's reactor registration (cache-line aligned) costs a few hundred bytes more: a few KiB
//! per connection, for connections that mostly wait. A connection that has idled for a moment
//! (see `http::PARK_AFTER`) is parked here instead: taken off the runtime's reactor and added to
//! this worker's own epoll set, which is registered with the runtime once. Parked, a connection
//! costs its descriptor and an entry of a few dozen bytes. When it turns readable its session
//! resumes in a new task; when its keep-alive deadline passes, or the process stops, it is
//! closed, silently, as HAProxy closes idle keep-alive connections.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::stream::StdStream;
use crate::sys;

/// A parked connection and what its owner keeps with it.
pub struct Entry<T> {
    pub socket: StdStream,
    pub idle_until: Option<Instant>,
    pub data: T,
}

/// A place in the set. The generation tells a stale epoll token or deadline (of a connection
/// that left this place) from the current occupant's.
struct Slot<T> {
    generation: u32,
    entry: Option<Entry<T>>,
}

/// One worker's parked connections.
pub struct Parking<T> {
    epoll: AsyncFd<OwnedFd>,
    slots: RefCell<Vec<Slot<T>>>,
    free: RefCell<Vec<u32>>,
    /// Keep-alive deadlines, earliest first, as (deadline, place, generation). A connection
    /// that resumed leaves its deadline behind; it is skipped when it comes up.
    deadlines: RefCell<BinaryHeap<Reverse<(Instant, u32, u32)>>>,
    /// Wakes [`Parking::run`] when an earlier deadline arrives or the set closes.
    changed: Notify,
    closed: Cell<bool>,
}

/// The epoll token of a place: generation in the high half, index in the low half.
fn token(index: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(index)
}

impl<T> Parking<T> {
    /// An empty set. Must be called inside the worker's runtime.
    pub fn new() -> io::Result<Self> {
        let epoll = sys::watch_epoll(sys::epoll_create()?)?;
        Ok(Parking {
            epoll,
            slots: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            deadlines: RefCell::new(BinaryHeap::new()),
            changed: Notify::new(),
            closed: Cell::new(false),
        })
    }

    /// Number of parked connections.
    pub fn count(&self) -> usize {
        self.slots.borrow().len() - self.free.borrow().len()
    }

    /// Parks `socket` (already off the runtime's reactor) until it turns readable or
    /// `idle_until` passes. After [`Parking::close`], or if the kernel refuses it, the
    /// connection is closed at once.
    pub fn park(&self, socket: StdStream, idle_until: Option<Instant>, data: T) {
        if self.closed.get() {
            return;
        }
        let mut slots = self.slots.borrow_mut();
        let index = match self.free.borrow_mut().pop() {
            Some(i) => i,
            None => {
                let Ok(i) = u32::try_from(slots.len()) else {
                    return;
                };
                slots.push(Slot {
                    generation: 0,
                    entry: None,
                });
                i
            }
        };
        let slot = &mut slots[index as usize];
        let generation = slot.generation;
        if sys::epoll_add(self.epoll.as_fd(), socket.as_fd(), token(index, generation)).is_err() {
            drop(slots);
            self.free.borrow_mut().push(index);
            return;
        }
        slot.entry = Some(Entry {
            socket,
            idle_until,
            data,
        });
        if let Some(t) = idle_until {
            let mut deadlines = self.deadlines.borrow_mut();
            let earliest = deadlines.peek().is_none_or(|Reverse((e, _, _))| t < *e);
            deadlines.push(Reverse((t, index, generation)));
            if earliest {
                self.changed.notify_one();
            }
        }
    }

    /// Takes the connection `token` names out of the set, if it is still there.
    fn take(&self, token: u64) -> Option<Entry<T>> {
        let (index, generation) = (token as u32, (token >> 32) as u32);
        let entry = {
            let mut slots = self.slots.borrow_mut();
            let slot = slots.get_mut(index as usize)?;
            if slot.generation != generation {
                return None;
            }
            let entry = slot.entry.take()?;
            slot.generation = slot.generation.wrapping_add(1);
            entry
        };
        self.free.borrow_mut().push(index);
        // The descriptor stays open (it goes back to the runtime): it must leave our set.
        let _ = sys::epoll_del(self.epoll.as_fd(), entry.socket.as_fd());
        Some(entry)
    }

    /// Closes every parked connection and any parked later (soft stop).
    pub fn close(&self) {
        self.closed.set(true);
        let tokens: Vec<u64> = self
            .slots
            .borrow()
            .iter()
            .enumerate()
            .filter(|(_, s)| s.entry.is_some())
            .map(|(i, s)| token(i as u32, s.generation))
            .collect();
        for t in tokens {
            drop(self.take(t));
        }
        self.deadlines.borrow_mut().clear();
        self.changed.notify_one();
    }

    /// Closes the connections whose deadline has passed.
    fn expire(&self, now: Instant) {
        loop {
            let due = {
                let mut deadlines = self.deadlines.borrow_mut();
                match deadlines.peek() {
                    Some(Reverse((t, _, _))) if *t <= now => deadlines.pop(),
                    _ => None,
                }
            };
            let Some(Reverse((_, index, generation))) = due else {
                return;
            };
            drop(self.take(token(index, generation)));
        }
    }

    /// Watches the set until it is closed: a connection that turns readable (a request, or
    /// its client closing) is handed to `resume`; one past its deadline is closed.
    pub async fn run(&self, resume: impl Fn(Entry<T>)) {
        let mut tokens = [0u64; 64];
        while !self.closed.get() {
            let next = self.deadlines.borrow().peek().map(|Reverse((t, _, _))| *t);
            let sleep = async {
                match next {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ready = self.epoll.readable() => {
                    let Ok(mut guard) = ready else { return };
                    // Nothing ready (or a failure) clears the readiness; a full batch keeps it,
                    // so the next turn reads the rest.
                    let got = guard.try_io(|fd| match sys::epoll_ready(fd.get_ref().as_fd(), &mut tokens) {
                        Ok(0) => Err(io::ErrorKind::WouldBlock.into()),
                        r => r,
                    });
                    if let Ok(Ok(n)) = got {
                        for &t in &tokens[..n] {
                            if let Some(entry) = self.take(t) {
                                resume(entry);
                            }
                        }
                    }
                }
                () = sleep => self.expire(Instant::now()),
                () = self.changed.notified() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::rc::Rc;
    use std::time::Duration;

    use std::net::TcpStream;

    fn pair() -> (TcpStream, StdStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, StdStream::Tcp(b))
    }

    #[tokio::test]
    async fn readable_connection_resumes_idle_one_expires() {
        let set = Rc::new(Parking::<&'static str>::new().unwrap());
        let (mut talker_far, talker) = pair();
        // A UNIX socket parks the same way.
        let (_quiet_far, quiet) = std::os::unix::net::UnixStream::pair().unwrap();
        let quiet = StdStream::Unix(quiet);
        let soon = Instant::now() + Duration::from_millis(200);
        set.park(talker, None, "talker");
        set.park(quiet, Some(soon), "quiet");
        assert_eq!(set.count(), 2);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let runner = {
            let set = Rc::clone(&set);
            async move {
                set.run(|e| {
                    let _ = tx.send(e.data);
                })
                .await
            }
        };
        let checks = async {
            talker_far.write_all(b"GET").unwrap();
            assert_eq!(rx.recv().await, Some("talker"));
            assert_eq!(set.count(), 1);
            // The quiet one is closed at its deadline, not resumed.
            tokio::time::sleep_until(soon + Duration::from_millis(100)).await;
            assert_eq!(set.count(), 0);
            assert!(rx.try_recv().is_err());
            set.close();
        };
        tokio::join!(runner, checks);
    }

    #[tokio::test]
    async fn close_drops_everything_and_refuses_more() {
        let set = Parking::<()>::new().unwrap();
        let (_far, near) = pair();
        set.park(near, None, ());
        set.close();
        assert_eq!(set.count(), 0);
        let (_far2, near2) = pair();
        set.park(near2, None, ());
        assert_eq!(set.count(), 0);
    }
}
