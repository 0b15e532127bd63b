//! The `tcp-request connection` rules run at accept, before the connection's PROXY protocol
//! header is read and before its TLS handshake, as HAProxy runs them (`tcp_exec_l4_rules` in
//! `session_accept_fd`): a rejected client costs no handshake, `src` is the socket's peer
//! even on an `accept-proxy` bind, and `expect-proxy layer4` decides whether a PROXY header
//! comes first.
//!
//! Only a list of `accept`, `reject` and `expect-proxy` rules runs here
//! (`ProxyRules::connection_at_accept`): those need nothing but the addresses. A list that
//! tracks or sets variables or addresses runs with the `tcp-request session` rules once the
//! session exists (the configuration refuses `expect-proxy` in such a list).

use std::cell::RefCell;
use std::net::SocketAddr;

use crate::rules::action::TcpReqAction;
use crate::rules::vars::{Scopes, Vars};
use crate::rules::Eval;
use crate::state::Shared;

use super::facts::Facts;

/// What the connection rules decided at accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtAccept {
    /// Go on; `expect_proxy`: an `expect-proxy layer4` rule fired.
    Go { expect_proxy: bool },
    /// A rule rejected the connection: close it with a reset, without a log line, and count it
    /// in the frontend's `dcon` (as HAProxy).
    Reject,
}

/// Runs frontend `frontend`'s `tcp-request connection` rules for a client `peer` connected to
/// `local` through listener `listener_id`, if they run at accept.
pub fn connection_rules(
    shared: &Shared,
    frontend: usize,
    peer: Option<SocketAddr>,
    local: impl FnOnce() -> Option<SocketAddr>,
    listener_id: u32,
) -> AtAccept {
    let rules = &shared.frontends[frontend].config.rules;
    let mut expect_proxy = false;
    if !rules.connection_at_accept() {
        return AtAccept::Go { expect_proxy };
    }
    let (txn, sess) = (RefCell::new(Vars::default()), RefCell::new(Vars::default()));
    let local = local();
    let f = Facts {
        shared,
        frontend,
        backend: None,
        server: None,
        peer,
        unix_listener: None,
        listener_id,
        client: None,
        sock: None,
        tls: None,
        server_tls: None,
        local: std::cell::OnceCell::from(local),
        payload: None,
        res_payload: None,
        req: None,
        res: None,
        captured: None,
        vars: Scopes {
            txn: &txn,
            sess: &sess,
            proc: &shared.proc_vars,
        },
        wait_over: true,
        kept: Default::default(),
        stick: None,
        proxied: None,
        fc: super::facts::Addrs {
            src: peer,
            dst: local,
        },
    };
    let mut ev = Eval::new();
    for rule in &rules.tcp_request_connection {
        if !rule.cond.as_ref().is_none_or(|c| c.eval(&f, &mut ev)) {
            continue;
        }
        match rule.action {
            TcpReqAction::Accept => break,
            TcpReqAction::Reject => return AtAccept::Reject,
            TcpReqAction::ExpectProxy => expect_proxy = true,
            // Not in a list that runs at accept (`connection_at_accept`).
            _ => {}
        }
    }
    AtAccept::Go { expect_proxy }
}
