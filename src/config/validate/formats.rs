//! The validate stage of log formats: every proxy's `log-format`, `log-format-sd` and
//! `unique-id-format` compiled into [`LogFormats`] once the names their `%[...]` expressions
//! may refer to are known (the same names, variables included, as the rules), as HAProxy 2.6
//! parses them in its final configuration check.
//!
//! A backend's `unique-id-format` is compiled too, for its errors only: the unique id of a
//! stream is its frontend's.

use crate::config::diag::{Diagnostic, Span};
use crate::config::keywords::ProxyDraft;
use crate::config::model::{LogFormats, Mode, TCPLOG_FORMAT};
use crate::config::parser::label;
use crate::log::format::{Context, Env, Format};
use crate::rules::Names;

/// Compiles the formats of proxy `p`, reporting errors and warnings into `diags`.
pub fn compile(p: &ProxyDraft, names: &dyn Names, diags: &mut Vec<Diagnostic>) -> LogFormats {
    let env = Env {
        names,
        proxy: &p.name,
        has_frontend: p.kind.has_frontend(),
        has_backend: p.kind.has_backend(),
        http: p.mode == Mode::Http,
    };
    let opts = &p.options;
    let spans = &opts.format_spans;
    let section = label(p.kind, &p.name);
    let mut one = |text: Option<&str>, ctx, kw: &str, span: &Option<Span>| {
        let text = text?;
        let span = span.as_ref().unwrap_or(&p.span);
        match Format::compile(text, ctx, &env) {
            Ok((f, warnings)) => {
                for w in warnings {
                    diags.push(Diagnostic::warning(
                        Some(span),
                        Some(&section),
                        format!("'{kw}': {w}"),
                    ));
                }
                Some(f)
            }
            Err(e) => {
                diags.push(Diagnostic::alert(
                    Some(span),
                    Some(&section),
                    format!("'{kw}': {e}"),
                ));
                None
            }
        }
    };
    let unique_id = one(
        opts.unique_id_format.as_deref(),
        Context::UniqueId,
        "unique-id-format",
        &spans.unique_id_format,
    );
    if !p.kind.has_frontend() {
        return LogFormats::default();
    }
    // `option httplog` on a TCP proxy falls back to `option tcplog`, as in HAProxy.
    let mut access = opts.log_format.as_deref();
    if p.mode == Mode::Tcp && opts.httplog && access.is_some_and(|f| f.contains("%TR")) {
        access = Some(TCPLOG_FORMAT);
    }
    let mut access = one(access, Context::Log, "log-format", &spans.log_format);
    let mut sd = one(
        opts.log_format_sd.as_deref(),
        Context::Log,
        "log-format-sd",
        &spans.log_format_sd,
    );
    if opts.logasap {
        access
            .iter_mut()
            .chain(sd.iter_mut())
            .for_each(Format::set_asap);
    }
    LogFormats {
        access,
        sd,
        unique_id,
    }
}
