//! How a transaction fails, and what the client then gets: an answer Bascule writes itself
//! (the backend's or frontend's `errorfile`, else the built-in page), or a close.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::model::{Backend as BackendConfig, Frontend as FrontendConfig};
use crate::net::lazy::LazyStream;
use crate::proto::h1;
use crate::rules::action::Reply;

use super::body::BodyError;
use super::txnlog::{self, Term};

/// Why a transaction failed, and which status (if any) the client still gets.
#[derive(Debug)]
pub(super) enum Failure {
    /// Answer with this status, then close; the termination state for the log.
    Respond(u16, Term),
    /// Close without a word (the client went away, or the response already started).
    Close(Term),
    /// The request is safe to send again and failed in a way that allows it (a reused
    /// connection the server had closed, or a `retry-on` condition): retry on a new connection.
    Retry,
}

/// The termination state of a body transfer that failed; `client_src`: the client sends it.
pub(super) fn body_term(e: BodyError, client_src: bool) -> Term {
    let (src_closed, src_timeout, dst_closed, dst_timeout) = if client_src {
        (*b"CD", *b"cD", *b"SD", *b"sD")
    } else {
        (*b"SD", *b"sD", *b"CD", *b"cD")
    };
    match e {
        BodyError::Src => src_closed,
        BodyError::SrcTimeout => src_timeout,
        BodyError::Dst => dst_closed,
        BodyError::DstTimeout => dst_timeout,
        BodyError::Invalid(_) => *b"PD",
    }
}

/// Writes the response for a status Bascule generates to `out`: the chosen backend's
/// `errorfile`, else the frontend's, else the built-in one. An `http-error` page with
/// log-format strings ([`format_page`]) is rendered by the caller, who has the transaction.
pub(super) fn error_response(
    status: u16,
    out: &mut Vec<u8>,
    fe: &FrontendConfig,
    be: Option<&BackendConfig>,
) {
    let custom = be
        .into_iter()
        .flat_map(|b| b.errorfiles.iter())
        .chain(fe.errorfiles.iter())
        .find(|e| e.status == status);
    out.clear();
    match custom {
        Some(e) if e.reply.is_none() => out.extend_from_slice(&e.response),
        _ => h1::error_response(status, out),
    }
}

/// Writes the answer to a request HAProxy's HTTP/1 multiplexer refuses before any stream
/// exists (one it could not parse, or whose head did not arrive in time): the frontend's
/// `errorfile` for `status` if it has one, else the built-in page as that multiplexer sends
/// it, raw ([`h1::raw_error_page`]).
pub(super) fn raw_error_response(status: u16, out: &mut Vec<u8>, fe: &FrontendConfig) {
    out.clear();
    match fe
        .errorfiles
        .iter()
        .find(|e| e.status == status && e.reply.is_none())
    {
        Some(e) => out.extend_from_slice(&e.response),
        None => h1::raw_error_page(status, out),
    }
}

/// The `http-error` page with log-format strings that answers `status` (the chosen backend's,
/// else the frontend's), when that is what [`error_response`] would send: the caller renders
/// it on the transaction (`Session::generated_page`).
pub(super) fn format_page<'a>(
    status: u16,
    fe: &'a FrontendConfig,
    be: Option<&'a BackendConfig>,
) -> Option<&'a Reply> {
    be.into_iter()
        .flat_map(|b| b.errorfiles.iter())
        .chain(fe.errorfiles.iter())
        .find(|e| e.status == status)
        .and_then(|e| e.reply.as_deref())
}

/// Like [`error_response`], for a connection that stays open: the built-in page does not say
/// `connection: close`.
pub(super) fn error_response_keep(
    status: u16,
    out: &mut Vec<u8>,
    fe: &FrontendConfig,
    be: Option<&BackendConfig>,
) {
    error_response(status, out, fe, be);
    let custom = be
        .into_iter()
        .flat_map(|b| b.errorfiles.iter())
        .chain(fe.errorfiles.iter())
        .any(|e| e.status == status && e.reply.is_none());
    if !custom {
        out.clear();
        h1::error_page(status, false, out);
    }
}

/// Ends the head of a response Bascule generated as HAProxy's HTTP/1 multiplexer ends it when
/// the head names no connection option: `connection: close` when the connection closes after
/// it, `connection: keep-alive` for an HTTP/1.0 client whose connection stays open.
pub(super) fn mark_connection(out: &mut Vec<u8>, closing: bool, http10: bool) {
    let value: &[u8] = match (closing, http10) {
        (true, _) => b"close",
        (false, true) => b"keep-alive",
        (false, false) => return,
    };
    let Some(end) = out.windows(4).position(|w| w == b"\r\n\r\n") else {
        return;
    };
    let named = out[..end]
        .split(|&c| c == b'\n')
        .skip(1)
        .any(|line| line.len() > 11 && line[..11].eq_ignore_ascii_case(b"connection:"));
    if !named {
        super::policy::insert_header(out, b"connection", |v| v.extend_from_slice(value));
    }
}

/// Writes a whole response Bascule generated; returns the bytes counted for the log. They
/// count whether or not the client is still there to read them: HAProxy counts a response it
/// generates when it puts it in the response channel (a client that reset its connection
/// while queued is logged with the 503's size).
pub(super) async fn send_counted(client: &mut LazyStream, bytes: &[u8]) -> usize {
    // A write error (the client left) changes nothing in what is logged.
    let _ = client.write_all(bytes).await;
    txnlog::counted_response(bytes) as usize
}

/// Resolves once the client has left, `Some(true)` when it reset its connection, or sent
/// more bytes (`None`: the client is still there).
pub(super) async fn client_left(client: &mut LazyStream) -> Option<bool> {
    let mut b = [0u8; 1];
    match client.peek(&mut b).await {
        Ok(0) => Some(false),
        Ok(_) => None,
        Err(_) => Some(true),
    }
}

/// Resolves once the client has closed (true) or sent more bytes, such as a pipelined request
/// (false: the client is still there).
pub(super) async fn client_gone(client: &mut LazyStream) -> bool {
    let mut b = [0u8; 1];
    !matches!(client.peek(&mut b).await, Ok(n) if n > 0)
}

/// Ends a TLS client connection whose request was read whole: the records rustls still holds,
/// then close_notify, written within `timeout client` (at most [`TLS_CLOSE`] without one).
pub(super) async fn close_tls(mut client: LazyStream, timeout: Option<Duration>) {
    let _ = tokio::time::timeout(timeout.unwrap_or(TLS_CLOSE), client.shutdown()).await;
}

/// How long a TLS connection's last records may take to leave when no `timeout client` bounds
/// them.
const TLS_CLOSE: Duration = Duration::from_secs(10);

/// How long a client that may still be sending is read from, and what it sends dropped, before
/// its connection closes (at most `timeout client`).
const LINGER: Duration = Duration::from_secs(1);

/// Closes a client connection that may still be sending: answered with an error before its
/// request was read whole (a denied upload, a bad head) or before its body was (`Expect:
/// 100-continue` met by a final answer). Closing a socket with unread bytes sends a reset,
/// which can destroy the answer before the client reads it (RFC 9112 §9.6), so the write side
/// closes first and what arrives is read and dropped until the client closes, or for
/// [`LINGER`]. Every other session ends with a plain close, which sends the FIN.
pub(super) async fn close_client(mut client: LazyStream, timeout: Option<Duration>) {
    if client.shutdown().await.is_err() {
        return;
    }
    let mut sink = vec![0u8; 16 * 1024];
    let limit = timeout.map_or(LINGER, |t| t.min(LINGER));
    let _ = tokio::time::timeout(limit, async {
        while let Ok(1..) = client.read(&mut sink).await {}
    })
    .await;
}
