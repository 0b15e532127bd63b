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
use crate::config::model::{Backend, Mode};
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

/// Takes `h2` out of the ALPN of an HTTP backend's TLS servers (warning once per line).
pub fn http1_alpn_only(p: &mut ProxyDraft, diags: &mut Vec<Diagnostic>) {
    if p.mode != Mode::Http {
        return;
    }
    let section = label(p.kind, &p.name);
    for i in 0..p.servers.len() {
        let Some(tls) = &p.servers[i].tls else {
            continue;
        };
        let offers_h2 = |c: &Option<Arc<rustls::ClientConfig>>| {
            c.as_ref()
                .is_some_and(|c| c.alpn_protocols.iter().any(|a| a == b"h2"))
        };
        if !offers_h2(&tls.config) && !offers_h2(&tls.check) {
            continue;
        }
        let without_h2 = |c: &Option<Arc<rustls::ClientConfig>>| {
            c.as_ref().map(|c| {
                let mut c = (**c).clone();
                c.alpn_protocols.retain(|a| a != b"h2");
                Arc::new(c)
            })
        };
        let mut t = (**tls).clone();
        let same = match (&t.config, &t.check) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        t.config = without_h2(&t.config);
        t.check = if same {
            t.config.clone()
        } else {
            without_h2(&t.check)
        };
        p.servers[i].tls = Some(Arc::new(t));
        let location = p.servers[i].location.clone();
        diags.push(Diagnostic::warning(
            Some(&span_of(&location, p)),
            Some(&section),
            format!(
                "'server {}': 'alpn h2': HTTP/2 to servers is not supported yet; this server is offered the other protocols of its 'alpn' list (HTTP/1.1 is spoken)",
                p.servers[i].name
            ),
        ));
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
