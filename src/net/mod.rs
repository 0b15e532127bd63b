//! Sockets, timers and moving bytes: the I/O mechanics every session uses (layer 2).
//!
//! Binding and accepting under connection limits ([`listener`]), a client socket that joins the
//! reactor only when it must wait ([`lazy`]), re-armable per-side timers ([`deadline`]), moving
//! bytes between two sockets ([`forward`], through kernel pipes with [`pipe`]), idle client
//! connections parked outside tokio's reactor ([`idle`]), and TLS over a client socket with the
//! same readiness interface ([`tls`]). Sessions hold their sockets as [`stream::Stream`]: TCP
//! or UNIX, chosen at accept or connect time.
//!
//! [`drained`] is here, below both [`forward`] and [`pipe`], because both clear a socket's
//! readiness after a short read.
//!
//! This layer knows sockets and the configuration model, never a session: it must not import
//! `backend`, `state`, `session`, `http` or `runtime`. What it needs from above (timeouts,
//! splice choices, sizes) comes in as arguments.

pub mod deadline;
pub mod forward;
pub mod idle;
pub mod lazy;
pub mod listener;
pub mod pipe;
pub mod proxied;
pub mod rate;
pub mod stream;
pub mod tls;

use std::io;

use stream::Stream;

/// Records that a short read emptied `socket`, so that the next read waits for the reactor
/// instead of first failing with EAGAIN: one `recvfrom` per chunk instead of two (tokio's own
/// `AsyncRead` does the same). Sound because readiness is cleared only if the reactor has
/// reported nothing newer since the read (tokio compares its readiness ticks).
pub fn drained(socket: &Stream) {
    let _ = socket.try_io(tokio::io::Interest::READABLE, || {
        Err::<(), _>(io::ErrorKind::WouldBlock.into())
    });
}
