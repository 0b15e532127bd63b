//! The stream-level WINDOW_UPDATE frames the h2 crate does not send: for a request body the
//! client finished (END_STREAM), HAProxy still acknowledges every byte it received on the
//! stream; the crate never writes a WINDOW_UPDATE for a stream that no longer receives.
//!
//! Why it matters: an HTTP/2 client may wait for the credit of what it sent before it goes on
//! (HAProxy's reg-tests do: `rxwinup` after a body); HAProxy 2.6 acknowledges each DATA frame as
//! it takes it (`h2c_send_strm_wu`), whatever the stream's state.
//!
//! How, without touching the crate's flow control: a frame for a stream whose receiving side is
//! over changes no window the crate keeps (the client may not send on that stream again), so it
//! can be written beside the crate's own frames. [`Acked`] wraps the client connection the crate
//! writes to: it follows the crate's output frame by frame (9-byte headers and their lengths),
//! counts the stream WINDOW_UPDATE increments the crate sends for the streams being watched, and
//! writes the frames [`Acks`] queued only between two of the crate's frames (before the crate's
//! next frame, or when the crate flushes, which it does once all it buffered is written). A
//! stream whose body ended ([`Watch::ended`]) gets one WINDOW_UPDATE for the bytes it received
//! that the crate's increments did not cover. Connection-level credit stays the crate's alone
//! (see `serve`, which raises the connection window as HAProxy does): a frame written beside it
//! would give the client credit the crate does not know of, and the crate would then refuse the
//! client's data.
//!
//! Padding: the crate releases a DATA frame's padding itself and counts it in its increments;
//! the bytes counted here are the payloads, so a padded body's last acknowledgement can fall
//! short by its padding, which no client needs once the stream is ended.

use std::cell::RefCell;
use std::collections::HashMap;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The frame type of WINDOW_UPDATE (RFC 9113 §6.9).
const WINDOW_UPDATE: u8 = 0x8;

/// The largest window increment (2^31 - 1).
const MAX_INCREMENT: u64 = 0x7fff_ffff;

/// What the connection's stream tasks and its writer share.
#[derive(Default)]
pub struct Acks(RefCell<State>);

#[derive(Default)]
struct State {
    /// Whole frames waiting for a boundary between two of the crate's frames.
    queued: Vec<u8>,
    /// Streams being watched: the sum of the crate's WINDOW_UPDATE increments for each.
    acked: HashMap<u32, u64>,
    /// The connection's task (the one polling the crate), woken when a frame is queued.
    waker: Option<Waker>,
}

impl Acks {
    /// Starts counting the crate's acknowledgements for stream `sid`, whose body is coming.
    /// Must come before any of the stream's capacity is released (the crate acknowledges only
    /// released capacity).
    pub fn watch(self: &Rc<Self>, sid: u32) -> Watch {
        self.0.borrow_mut().acked.insert(sid, 0);
        Watch {
            acks: Rc::clone(self),
            sid,
            received: 0,
        }
    }

    /// The crate wrote a WINDOW_UPDATE of `increment` for stream `sid`.
    fn crate_acked(&self, sid: u32, increment: u32) {
        if let Some(n) = self.0.borrow_mut().acked.get_mut(&sid) {
            *n += u64::from(increment);
        }
    }

    /// Frames to write at the next boundary (empty: none).
    fn take_queued(&self) -> Vec<u8> {
        std::mem::take(&mut self.0.borrow_mut().queued)
    }

    /// Puts back what of `rest` could not be written yet, ahead of anything queued since.
    fn put_back(&self, mut rest: Vec<u8>) {
        let mut s = self.0.borrow_mut();
        rest.extend_from_slice(&s.queued);
        s.queued = rest;
    }

    fn has_queued(&self) -> bool {
        !self.0.borrow().queued.is_empty()
    }

    fn set_waker(&self, w: &Waker) {
        let mut s = self.0.borrow_mut();
        if !s.waker.as_ref().is_some_and(|o| o.will_wake(w)) {
            s.waker = Some(w.clone());
        }
    }
}

/// A stream whose acknowledgements are being counted; stops the counting when dropped.
pub struct Watch {
    acks: Rc<Acks>,
    sid: u32,
    received: u64,
}

impl Watch {
    /// `n` bytes of the body were received (and their capacity released).
    pub fn received(&mut self, n: usize) {
        self.received += n as u64;
    }

    /// The body ended (END_STREAM): queues a WINDOW_UPDATE for what the crate did not
    /// acknowledge, and wakes the connection so that it goes out now.
    pub fn ended(self) {
        let mut s = self.acks.0.borrow_mut();
        let acked = s.acked.get(&self.sid).copied().unwrap_or(0);
        let owed = self.received.saturating_sub(acked).min(MAX_INCREMENT);
        if owed == 0 {
            return;
        }
        s.queued
            .extend_from_slice(&window_update(self.sid, owed as u32));
        if let Some(w) = s.waker.take() {
            w.wake();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.acks.0.borrow_mut().acked.remove(&self.sid);
    }
}

/// A WINDOW_UPDATE frame of `increment` for stream `sid`.
fn window_update(sid: u32, increment: u32) -> [u8; 13] {
    let mut f = [0u8; 13];
    f[2] = 4;
    f[3] = WINDOW_UPDATE;
    f[5..9].copy_from_slice(&(sid & 0x7fff_ffff).to_be_bytes());
    f[9..13].copy_from_slice(&(increment & 0x7fff_ffff).to_be_bytes());
    f
}

/// Where the crate's output stands, frame by frame.
#[derive(Default)]
struct Frames {
    /// The header of the frame being written, as far as it came.
    head: [u8; 9],
    head_len: usize,
    /// Payload bytes of the current frame still to come.
    left: usize,
    /// A stream WINDOW_UPDATE's payload being read: its stream and the bytes so far.
    update: Option<(u32, [u8; 4], usize)>,
}

impl Frames {
    /// Between two frames.
    fn at_boundary(&self) -> bool {
        self.head_len == 0 && self.left == 0
    }

    /// Follows `bytes` the crate wrote; reports each stream WINDOW_UPDATE to `acks`.
    fn advance(&mut self, mut bytes: &[u8], acks: &Acks) {
        while !bytes.is_empty() {
            if self.left == 0 {
                let n = (9 - self.head_len).min(bytes.len());
                self.head[self.head_len..self.head_len + n].copy_from_slice(&bytes[..n]);
                self.head_len += n;
                bytes = &bytes[n..];
                if self.head_len < 9 {
                    return;
                }
                self.head_len = 0;
                let h = self.head;
                self.left = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                let sid = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
                self.update = (h[3] == WINDOW_UPDATE && sid != 0 && self.left == 4)
                    .then_some((sid, [0; 4], 0));
                continue;
            }
            let n = self.left.min(bytes.len());
            if let Some((sid, buf, got)) = &mut self.update {
                buf[*got..*got + n].copy_from_slice(&bytes[..n]);
                *got += n;
                if *got == 4 {
                    acks.crate_acked(*sid, u32::from_be_bytes(*buf) & 0x7fff_ffff);
                }
            }
            self.left -= n;
            bytes = &bytes[n..];
            if self.left == 0 {
                self.update = None;
            }
        }
    }
}

/// The client connection as the crate sees it: reads pass through; the frames [`Acks`] queued
/// are written between the crate's frames.
pub struct Acked<T> {
    io: T,
    acks: Rc<Acks>,
    frames: Frames,
}

impl<T> Acked<T> {
    pub fn new(io: T, acks: Rc<Acks>) -> Self {
        Acked {
            io,
            acks,
            frames: Frames::default(),
        }
    }
}

impl<T: AsyncWrite + Unpin> Acked<T> {
    /// Writes the queued frames, if the crate's output is between two frames. Ready once none
    /// is left to write now.
    fn poll_queued(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if !self.frames.at_boundary() || !self.acks.has_queued() {
            return Poll::Ready(Ok(()));
        }
        let mut out = self.acks.take_queued();
        let mut at = 0;
        while at < out.len() {
            match Pin::new(&mut self.io).poll_write(cx, &out[at..]) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => at += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    // The rest waits, and nothing of the crate's goes before it.
                    self.acks.put_back(out.split_off(at));
                    return Poll::Pending;
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Acked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        // The crate always has a read pending: its waker is the connection task's.
        self.acks.set_waker(cx.waker());
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Acked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        std::task::ready!(this.poll_queued(cx))?;
        let n = std::task::ready!(Pin::new(&mut this.io).poll_write(cx, buf))?;
        this.frames.advance(&buf[..n], &this.acks);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        this.acks.set_waker(cx.waker());
        std::task::ready!(this.poll_queued(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, sid: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, 0];
        f.extend_from_slice(&sid.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn the_crates_stream_updates_are_counted_across_split_writes() {
        let acks = Rc::new(Acks::default());
        let w = acks.watch(5);
        let mut out = frame(0x1, 5, b"headers");
        out.extend(window_update(5, 1000));
        out.extend(window_update(0, 7));
        out.extend(window_update(3, 9));
        out.extend(frame(0x0, 5, &[b'x'; 300]));
        out.extend(window_update(5, 24));
        let mut f = Frames::default();
        for piece in out.chunks(5) {
            f.advance(piece, &acks);
        }
        assert!(f.at_boundary());
        assert_eq!(acks.0.borrow().acked.get(&5), Some(&1024));
        assert_eq!(acks.0.borrow().acked.get(&3), None);
        drop(w);
        assert!(acks.0.borrow().acked.is_empty());
    }

    #[test]
    fn an_ended_body_owes_what_the_crate_did_not_acknowledge() {
        let acks = Rc::new(Acks::default());
        let mut w = acks.watch(7);
        w.received(40_000);
        let mut f = Frames::default();
        f.advance(&window_update(7, 32_768), &acks);
        w.received(38);
        w.ended();
        assert_eq!(
            acks.take_queued(),
            window_update(7, 40_038 - 32_768).to_vec()
        );
        assert!(acks.0.borrow().acked.is_empty());
        // All acknowledged: nothing owed.
        let mut w = acks.watch(9);
        w.received(10);
        f.advance(&window_update(9, 10), &acks);
        w.ended();
        assert!(!acks.has_queued());
    }

    /// A writer taking at most 4 bytes a call.
    struct Trickle(Vec<u8>);

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            let n = buf.len().min(4);
            self.0.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn queued_frames_go_out_between_the_crates_frames() {
        use tokio::io::AsyncWriteExt;
        let acks = Rc::new(Acks::default());
        let mut io = Acked::new(Trickle(Vec::new()), Rc::clone(&acks));
        let data = frame(0x0, 1, b"0123456789");
        let headers = frame(0x1, 1, b"hd");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            // Half a frame out, then an acknowledgement is queued: it waits for the boundary.
            io.write_all(&data[..6]).await.unwrap();
            let mut w = acks.watch(1);
            w.received(10);
            w.ended();
            io.write_all(&data[6..]).await.unwrap();
            io.write_all(&headers).await.unwrap();
            io.flush().await.unwrap();
        });
        let mut want = data.clone();
        want.extend(window_update(1, 10));
        want.extend(headers);
        assert_eq!(io.io.0, want);
    }
}
