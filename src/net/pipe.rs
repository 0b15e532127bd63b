//! Kernel pipes for zero-copy forwarding with splice(2).
//!
//! Bytes spliced from a socket into a pipe and from the pipe into another socket never enter
//! user space: the kernel moves page references instead of copying, which is what makes large
//! transfers cheap. A pipe costs a `pipe2` and two `close` calls, so each worker keeps the empty
//! pipes of ended transfers for reuse (a bounded pool, as HAProxy's `maxpipes` pool). A pipe that
//! still holds bytes when it is dropped is closed, never reused: its bytes belong to a transfer
//! that was cut short.

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use super::stream::Stream;
use tokio::io::Interest;

use crate::sys;

/// Bytes asked for per splice call; the kernel's default pipe holds 16 pages (64 KiB).
pub const CHUNK: usize = 64 * 1024;

/// Empty pipes kept per worker thread; beyond this, returned pipes are closed.
const POOL_MAX: usize = 64;

thread_local! {
    static POOL: RefCell<Vec<Ends>> = const { RefCell::new(Vec::new()) };
}

/// The two ends of a pipe.
struct Ends {
    read: OwnedFd,
    write: OwnedFd,
}

/// A pipe and the number of bytes in it.
pub struct Pipe {
    /// Always `Some` until dropped (taken then, to go back to the pool).
    ends: Option<Ends>,
    held: usize,
}

impl Pipe {
    /// An empty pipe from the worker's pool, or a new one. Fails when the process is out of
    /// descriptors: callers then copy through user space instead.
    pub fn take() -> io::Result<Pipe> {
        let ends = match POOL.try_with(|p| p.borrow_mut().pop()).ok().flatten() {
            Some(ends) => ends,
            None => {
                let (read, write) = sys::pipe()?;
                Ends { read, write }
            }
        };
        Ok(Pipe {
            ends: Some(ends),
            held: 0,
        })
    }

    fn ends(&self) -> &Ends {
        self.ends
            .as_ref()
            .expect("a pipe's ends are only taken when it is dropped")
    }

    /// Splices up to `max` bytes readable on `from` into the pipe, waiting until some are.
    /// Returns 0 at the end of `from`'s stream. The pipe must be empty (see [`Pipe::drain`]),
    /// so that "would block" can only mean an empty socket.
    pub async fn fill(&mut self, from: &Stream, max: usize) -> io::Result<usize> {
        debug_assert_eq!(self.held, 0);
        let max = max.min(CHUNK);
        loop {
            from.readable().await?;
            match from.try_io(Interest::READABLE, || {
                sys::splice(from.as_fd(), self.ends().write.as_fd(), max)
            }) {
                Ok(n) => {
                    self.held = n;
                    if n > 0 && n < max {
                        crate::net::drained(from);
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Splices everything the pipe holds into `to`, waiting while `to` cannot take more.
    pub async fn drain(&mut self, to: &Stream) -> io::Result<()> {
        while self.held > 0 {
            to.writable().await?;
            match to.try_io(Interest::WRITABLE, || {
                sys::splice(self.ends().read.as_fd(), to.as_fd(), self.held)
            }) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.held -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        let Some(ends) = self.ends.take() else { return };
        if self.held == 0 {
            // At thread exit the pool may be gone already: the pipe is then simply closed.
            let _ = POOL.try_with(|p| {
                let mut p = p.borrow_mut();
                if p.len() < POOL_MAX {
                    p.push(ends);
                }
            });
        }
    }
}
