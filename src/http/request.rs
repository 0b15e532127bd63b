//! The request side of a transaction: reading the head within its timeouts (and noticing an
//! idle keep-alive connection that should park instead), and rewriting it for the server.

use std::io;
use std::net::{IpAddr, SocketAddr};

use tokio::time::Instant;

use crate::config::model::{Backend as BackendConfig, Frontend as FrontendConfig, HttpConnMode};
use crate::net::deadline::{Deadline, Elapsed};
use crate::net::lazy::LazyStream;
use crate::proto::h1::{self, HeaderIdx, RequestHead};

use super::answer::Failure;
use super::buf::Buf;
use super::session::PARK_AFTER;

/// What waiting for a request head gave.
pub(super) enum Next {
    Head(RequestHead),
    /// The client closed between requests, or idled past its keep-alive timeout.
    Closed,
    /// Idle for [`PARK_AFTER`]: the session parks until `idle_until`.
    Idle {
        idle_until: Option<Instant>,
    },
}

/// Reads the next request head into `cbuf` (`http2`: a head the HTTP/2 gateway wrote, parsed
/// with HTTP/2's rules). A later request (not `first`) may idle until
/// `idle_until` before its first byte (computed here from `timeout http-keep-alive` when
/// `None`), and parks after [`PARK_AFTER`] of it; then the head must complete within
/// `timeout http-request`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn read_request(
    client: &mut LazyStream,
    cbuf: &mut Buf,
    headers: &mut Vec<HeaderIdx>,
    fe: &FrontendConfig,
    first: bool,
    idle_until: Option<Instant>,
    timer: &mut Deadline<'_>,
    started: &mut Option<Instant>,
    http2: bool,
) -> Result<Next, Failure> {
    let request_t = fe.timeouts.http_request.or(fe.timeouts.client);
    let idle_t = if first {
        request_t
    } else {
        fe.timeouts.http_keep_alive.or(request_t)
    };
    let mut deadline: Option<Instant> = None;
    loop {
        if !cbuf.bytes().is_empty() {
            let parsed = if http2 {
                h1::parse_http2_request(cbuf.bytes(), headers)
            } else {
                h1::parse_request(cbuf.bytes(), headers)
            };
            match parsed {
                Ok(Some(h)) => {
                    started.get_or_insert_with(Instant::now);
                    return Ok(Next::Head(h));
                }
                Ok(None) => {}
                Err(e) => return Err(Failure::Respond(e.status, *b"PR")),
            }
            if cbuf.is_full() {
                return Err(Failure::Respond(h1::too_large(cbuf.bytes()).status, *b"PR"));
            }
            if deadline.is_none() {
                let now = Instant::now();
                started.get_or_insert(now);
                deadline = request_t.map(|t| now + t);
            }
        }
        let wait = match deadline {
            Some(d) => Some(d.saturating_duration_since(Instant::now())),
            None if cbuf.bytes().is_empty() => idle_t,
            None => request_t,
        };
        if cbuf.bytes().is_empty() && !client.is_registered() {
            // A request usually arrives with its connection (or is what wakes a parked one):
            // read it without waiting, which keeps the socket out of the reactor (see `lazy`).
            match cbuf.try_fill(client) {
                Ok(0) => return Ok(Next::Closed),
                Ok(_) => {
                    if deadline.is_none() {
                        let now = Instant::now();
                        started.get_or_insert(now);
                        deadline = request_t.map(|t| now + t);
                    }
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return Err(Failure::Close(*b"CR")),
            }
        }
        if cbuf.bytes().is_empty() {
            // Idle between requests: hold no buffer while waiting for the next byte.
            cbuf.release_if_empty();
            let now = Instant::now();
            let until = match (first, idle_until) {
                (false, Some(t)) => Some(t),
                _ => wait.map(|w| now + w),
            };
            let park_at = now + PARK_AFTER;
            // A TLS connection parks with its rustls state, when nothing is in flight.
            let parks = !first && client.can_park() && until.is_none_or(|u| u > park_at);
            let ready = if parks {
                timer.until(Some(park_at), client.readable()).await
            } else {
                timer.until(until, client.readable()).await
            };
            match ready {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(Failure::Close(*b"CR")),
                Err(_) if parks => return Ok(Next::Idle { idle_until: until }),
                Err(_) if first => return Err(Failure::Respond(408, *b"cR")),
                Err(_) => return Ok(Next::Closed),
            }
        }
        match timer.within(wait, cbuf.fill(client)).await {
            Ok(Ok(0)) => {
                // A client that closes between requests is done; one that closes mid-head
                // sent a bad request.
                return if cbuf.bytes().is_empty() {
                    Ok(Next::Closed)
                } else {
                    Err(Failure::Close(*b"CR"))
                };
            }
            Ok(Ok(_)) => {
                if deadline.is_none() {
                    let now = Instant::now();
                    started.get_or_insert(now);
                    deadline = request_t.map(|t| now + t);
                }
            }
            Ok(Err(_)) => return Err(Failure::Close(*b"CR")),
            Err(Elapsed) => {
                return if cbuf.bytes().is_empty() && !first {
                    Ok(Next::Closed)
                } else {
                    Err(Failure::Respond(408, *b"cR"))
                }
            }
        }
    }
}

/// Writes the request head as it goes to the server into `out`: the request line and header
/// lines copied byte for byte (or rewritten line by line when the parse noted `Fixes`),
/// hop-by-hop headers dropped, then the unique-id header, `X-Forwarded-For` (`option
/// forwardfor`) and our `Connection` header added.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_head(
    out: &mut Vec<u8>,
    buf: &[u8],
    headers: &[HeaderIdx],
    req: &RequestHead,
    fe: &FrontendConfig,
    be: &BackendConfig,
    mode: HttpConnMode,
    peer: Option<SocketAddr>,
    local: Option<SocketAddr>,
    unique_id: Option<(&str, &[u8])>,
) {
    out.clear();
    let upgrading = req.conn.upgrade;
    let ff = fe
        .options
        .forwardfor
        .as_ref()
        .or(be.options.forwardfor.as_ref());
    let mut has_ff = false;
    let hop = h1::HopByHop::new(buf, headers, &req.conn, upgrading);
    h1::copy_head(buf, req.start_line.clone(), headers, &req.fixes, out, |h| {
        if hop.is(h) {
            return false;
        }
        if let Some(ff) = ff {
            has_ff |= h.name(buf).eq_ignore_ascii_case(ff.header.as_bytes());
        }
        true
    });
    if let Some((name, value)) = unique_id {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    // A UNIX socket's client has no address: HAProxy adds no header for it.
    if let (Some(ff), Some(peer)) = (ff, peer) {
        let excepted = ff
            .except
            .is_some_and(|(net, len)| in_network(peer.ip(), net, len));
        // As in HAProxy, `if-none` holds only when no side asks to add the header always.
        let if_none = [&fe.options.forwardfor, &be.options.forwardfor]
            .into_iter()
            .flatten()
            .all(|f| f.if_none);
        if !(excepted || if_none && has_ff) {
            use std::io::Write;
            let _ = write!(out, "{}: {}\r\n", ff.header, peer.ip());
        }
    }
    let ot = fe
        .options
        .originalto
        .as_ref()
        .or(be.options.originalto.as_ref());
    if let (Some(ot), Some(dst)) = (ot, local) {
        if !ot
            .except
            .is_some_and(|(net, len)| in_network(dst.ip(), net, len))
        {
            use std::io::Write;
            let _ = write!(out, "{}: {}\r\n", ot.header, dst.ip());
        }
    }
    if upgrading {
        out.extend_from_slice(b"Connection: upgrade\r\n");
    } else if mode != HttpConnMode::KeepAlive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if req.minor == 0 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// `option forwardfor except NET`: whether `ip` is in `net/len`.
fn in_network(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len.min(32)))
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(len.min(128)))
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwardfor_except_networks() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(in_network(ip("127.0.0.1"), ip("127.0.0.0"), 8));
        assert!(!in_network(ip("10.0.0.1"), ip("127.0.0.0"), 8));
        assert!(in_network(ip("10.1.2.3"), ip("0.0.0.0"), 0));
        assert!(in_network(ip("::1"), ip("::1"), 128));
        assert!(!in_network(ip("::1"), ip("127.0.0.1"), 8));
    }
}
