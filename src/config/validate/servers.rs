//! The validate stage of `server ... ssl` lines: what needs the whole configuration. `sni
//! EXPR` is compiled once the names its expression may refer to are known (variables, tables),
//! as the rules are; each backend keeps its distinct expressions once (servers of one
//! `default-server sni ...` share one), so a session evaluates each once per connection.
//!
//! An HTTP backend's servers are spoken to in HTTP/1.1: `h2` is taken out of what their
//! `alpn` offers, with a warning, as for listeners.

use std::sync::Arc;

use crate::config::diag::{Diagnostic, Span};
use crate::config::keywords::ProxyDraft;
use crate::config::model::Backend;
use crate::config::parser::label;
use crate::rules::{Expr, Names};

/// A server's line, from its `file:line` location.
fn span_of(location: &str, p: &ProxyDraft) -> Span {
    let line = location
        .rsplit_once(':')
        .and_then(|(_, l)| l.parse().ok())
        .unwrap_or(p.span.line);
    Span {
        line,
        ..p.span.clone()
    }
}

/// Resolves the `track [BACKEND/]SERVER` options of every backend's servers, in file order, with
/// HAProxy's checks and words (`srv_apply_track`): the tracked server must exist, have a check
/// or an agent or track another one itself, and the chain must not loop back. A tracked server
/// is pinned (`del server` refuses it). `backend_of` maps each proxy to its backend.
pub fn resolve_tracks(
    proxies: &[ProxyDraft],
    backend_of: &[Option<usize>],
    backends: &mut [Backend],
    diags: &mut Vec<Diagnostic>,
) {
    for (i, p) in proxies.iter().enumerate() {
        let Some(b) = backend_of[i] else { continue };
        for si in 0..backends[b].servers.len() {
            let s = &backends[b].servers[si];
            let Some(name) = s.track_name.clone() else {
                continue;
            };
            let fail = |diags: &mut Vec<Diagnostic>, msg: String| {
                diags.push(Diagnostic::alert(
                    Some(&span_of(&s.location, p)),
                    Some(&label(p.kind, &p.name)),
                    format!("'server {}': {msg}", s.name),
                ));
            };
            let (tb, sname) = match name.rsplit_once('/') {
                Some((px, sv)) => match backends.iter().position(|x| x.name == px) {
                    Some(tb) => (tb, sv),
                    None => {
                        fail(
                            diags,
                            format!("unable to find required proxy '{px}' for tracking."),
                        );
                        continue;
                    }
                },
                None => (b, name.as_str()),
            };
            let Some(ts) = backends[tb].servers.iter().position(|x| x.name == sname) else {
                fail(
                    diags,
                    format!("unable to find required server '{sname}' for tracking."),
                );
                continue;
            };
            let t = &backends[tb].servers[ts];
            let tname = format!("{}/{}", backends[tb].name, t.name);
            if t.check.is_none() && t.agent.is_none() && t.track_name.is_none() {
                fail(
                    diags,
                    format!(
                        "unable to use {tname} for tracking as it does not have any check nor agent enabled."
                    ),
                );
                continue;
            }
            // Follow the chain already resolved from the tracked server: reaching this one
            // closes a loop.
            let mut cur = Some((tb, ts));
            let mut looped = false;
            while let Some((cb, cs)) = cur {
                if (cb, cs) == (b, si) {
                    looped = true;
                    break;
                }
                cur = backends[cb].servers[cs].track;
            }
            if looped {
                fail(
                    diags,
                    format!(
                        "unable to track {tname} as it belongs to a tracking chain looping back to {}/{}.",
                        backends[tb].name, s.name
                    ),
                );
                continue;
            }
            backends[b].servers[si].track = Some((tb, ts));
            backends[tb].servers[ts].pinned = true;
        }
    }
}

/// Compiles the `sni` expressions of backend `be` (from proxy `p`), storing each distinct one
/// in `be.sni_exprs` and its index in the servers that use it.
pub fn compile_sni(
    p: &ProxyDraft,
    be: &mut Backend,
    names: &dyn Names,
    diags: &mut Vec<Diagnostic>,
) {
    let section = label(p.kind, &p.name);
    let mut texts: Vec<String> = Vec::new();
    for s in &mut be.servers {
        let Some(tls) = &s.tls else { continue };
        let Some(text) = tls.sni.clone() else {
            continue;
        };
        let slot = match texts.iter().position(|t| *t == text) {
            Some(slot) => slot,
            None => match Expr::compile(&text, names) {
                Ok(e) => {
                    texts.push(text.clone());
                    be.sni_exprs.push(Arc::new(e));
                    texts.len() - 1
                }
                Err(e) => {
                    diags.push(Diagnostic::alert(
                        Some(&span_of(&s.location, p)),
                        Some(&section),
                        format!("'server {}': 'sni {text}': {}", s.name, e.message),
                    ));
                    continue;
                }
            },
        };
        let mut t = (**tls).clone();
        t.sni_slot = Some(slot);
        s.tls = Some(Arc::new(t));
    }
}
