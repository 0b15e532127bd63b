//! The connections of rings and `log-forward` listeners, TCP or TLS, and the TLS handshakes
//! they need, given from above.
//!
//! `log` sits below `net::tls` (docs/ARCHITECTURE.md, "Layers"): a ring server with `ssl` and a
//! log-forward `bind ... ssl` cannot run their handshakes themselves. The process hands them a
//! [`Handshakes`] that does (`runtime::process` implements it with `net::tls::TlsSock`), and
//! they read and write whatever it returns as a plain byte stream ([`Conn`]).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::tls::client::ServerTls;
use crate::tls::server::Built;

/// A connected byte stream: a TCP socket, or a TLS connection over one.
pub trait Conn: AsyncRead + AsyncWrite + Unpin {}

impl<T: AsyncRead + AsyncWrite + Unpin> Conn for T {}

/// A handshake under way: the TLS connection, or why it failed.
pub type Handshake = Pin<Box<dyn Future<Output = io::Result<Box<dyn Conn>>>>>;

/// The TLS handshakes of rings and log-forward listeners (on the main thread, so neither the
/// futures nor the connections need to be `Send`).
pub trait Handshakes {
    /// The client handshake of a ring's `server ... ssl` at `addr`, within `limit`.
    fn connect(
        &self,
        sock: TcpStream,
        tls: &ServerTls,
        addr: SocketAddr,
        limit: Option<Duration>,
    ) -> Handshake;

    /// The server handshake of a log-forward `bind ... ssl`, within `limit`.
    fn accept(&self, sock: TcpStream, tls: Arc<Built>, limit: Option<Duration>) -> Handshake;
}
