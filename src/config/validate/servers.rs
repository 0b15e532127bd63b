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
