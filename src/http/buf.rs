//! The session's read buffers: bytes read ahead of what has been parsed or forwarded.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::net::forward::PooledBuf;
use crate::net::lazy::LazyStream;

/// A read buffer with a consumed prefix: `data[start..end]` holds unprocessed bytes.
///
/// The memory comes from the worker's buffer pool only while bytes are pending or a read is in
/// progress: an idle keep-alive connection holds no buffer (see [`Buf::release_if_empty`]).
pub struct Buf {
    data: Option<PooledBuf>,
    pub cap: usize,
    start: usize,
    end: usize,
}

impl Buf {
    pub fn new(cap: usize) -> Self {
        Buf {
            data: None,
            cap,
            start: 0,
            end: 0,
        }
    }
    pub fn bytes(&self) -> &[u8] {
        match &self.data {
            Some(d) => &d[self.start..self.end],
            None => &[],
        }
    }
    pub fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }
    /// Gives the memory back to the pool when nothing is pending.
    pub fn release_if_empty(&mut self) {
        if self.start == self.end {
            self.data = None;
        }
    }
    pub fn is_full(&self) -> bool {
        self.start == 0 && self.end == self.cap
    }
    /// Reads more bytes; returns 0 at end of stream.
    pub async fn fill<S: AsyncRead + Unpin>(&mut self, s: &mut S) -> io::Result<usize> {
        let n = s.read(self.spare()).await?;
        self.end += n;
        Ok(n)
    }
    /// Reads what the client has sent, without waiting (`WouldBlock` if nothing).
    pub fn try_fill(&mut self, s: &mut LazyStream) -> io::Result<usize> {
        let n = s.try_read(self.spare())?;
        self.end += n;
        Ok(n)
    }
    /// The free space after the pending bytes, which move to the front first.
    pub fn spare(&mut self) -> &mut [u8] {
        let cap = self.cap;
        let data = self.data.get_or_insert_with(|| PooledBuf::take(cap));
        if self.start > 0 {
            data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut data[self.end..]
    }
}
