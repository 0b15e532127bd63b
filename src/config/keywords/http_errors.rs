//! `http-errors NAME` sections (`errorfile CODE FILE` lines) and how a proxy's error pages are
//! put together from `errorfile`, `errorfiles NAME [CODE...]` and `http-error status N ...`.
//!
//! As in HAProxy, a proxy's lines (after those inherited from its `defaults`) are applied in
//! order once every section is read, so a line overrides what an earlier one set for the same
//! status and a section may be declared after the proxies that use it (see [`resolve`]).

use super::{Ctx, Keyword, Problem, Sections};
use crate::config::diag::{Diagnostic, Span};
use std::sync::Arc;

use crate::config::model::ErrorFile;
use crate::rules::action::Reply;

/// An `http-errors` section as written.
#[derive(Debug, Clone)]
pub struct HttpErrorsDraft {
    pub name: String,
    pub span: Span,
    /// Its `errorfile` lines, the last one for a status winning.
    pub files: Vec<ErrorFile>,
}

impl HttpErrorsDraft {
    /// The raw response the section declares for `status`.
    pub fn get(&self, status: u16) -> Option<&[u8]> {
        self.files
            .iter()
            .rev()
            .find(|f| f.status == status)
            .map(|f| &f.response[..])
    }
}

/// One proxy line that sets error pages, kept in order until the sections are known.
#[derive(Debug, Clone)]
pub enum ErrorLine {
    /// `errorfile CODE FILE`, or an `http-error` whose reply is a fixed response.
    File(ErrorFile),
    /// `http-error status N` without a body, or with `default-errorfiles`: back to the
    /// built-in page.
    Builtin(u16),
    /// `http-error status N ...` whose headers or body are log-format strings: its words
    /// (after `http-error`), compiled in the validate stage with the proxy's names.
    Format {
        status: u16,
        words: Vec<String>,
        span: Span,
    },
    /// `errorfiles NAME [CODE...]` (no codes: every status the section declares), or
    /// `http-error status N errorfiles NAME`.
    Section {
        name: String,
        codes: Option<Vec<u16>>,
        span: Span,
    },
}

/// The `http-errors` keywords.
pub static KEYWORDS: &[Keyword<HttpErrorsDraft>] = &[Keyword {
    name: "errorfile",
    sections: Sections::HTTP_ERRORS,
    misplaced_warns: false,
    parse: errorfile,
    doc: "The response for a status: errorfile CODE FILE (a raw HTTP response, or empty).",
}];

fn errorfile(h: &mut HttpErrorsDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let file = super::proxy::read_errorfile(ctx)?;
    h.files.push(file);
    ctx.no_more(2)
}

/// Compiles the words of an [`ErrorLine::Format`] at its span (`None`: the error is reported).
pub type CompileReply<'a> =
    dyn FnMut(&[String], &Span, &mut Vec<Diagnostic>) -> Option<Arc<Reply>> + 'a;

/// A proxy's error pages: its `lines` applied in order over `sections`. Unknown sections are
/// errors; a status asked for but not declared in a section is a warning (both at the line).
/// `compile` turns the words of an [`ErrorLine::Format`] into its reply (`None`: it reported
/// why not).
pub fn resolve(
    lines: &[ErrorLine],
    sections: &[HttpErrorsDraft],
    section_label: &str,
    diags: &mut Vec<Diagnostic>,
    compile: &mut CompileReply<'_>,
) -> Vec<ErrorFile> {
    let mut out: Vec<ErrorFile> = Vec::new();
    let set = |out: &mut Vec<ErrorFile>, status: u16, response: Option<&[u8]>| {
        out.retain(|e| e.status != status);
        if let Some(r) = response {
            out.push(ErrorFile {
                status,
                response: r.to_vec(),
                reply: None,
            });
        }
    };
    for line in lines {
        match line {
            ErrorLine::Format {
                status,
                words,
                span,
            } => {
                out.retain(|e| e.status != *status);
                if let Some(reply) = compile(words, span, diags) {
                    out.push(ErrorFile {
                        status: *status,
                        response: Vec::new(),
                        reply: Some(reply),
                    });
                }
            }
            ErrorLine::File(f) => set(&mut out, f.status, Some(&f.response)),
            ErrorLine::Builtin(status) => set(&mut out, *status, None),
            ErrorLine::Section { name, codes, span } => {
                let Some(sec) = sections.iter().find(|s| &s.name == name) else {
                    let hint = crate::config::diag::suggest(
                        name,
                        sections.iter().map(|s| s.name.as_str()),
                    );
                    diags.push(
                        Diagnostic::alert(
                            Some(span),
                            Some(section_label),
                            format!("unknown http-errors section '{name}'"),
                        )
                        .with_hint(hint),
                    );
                    continue;
                };
                match codes {
                    None => {
                        for f in &sec.files {
                            set(&mut out, f.status, Some(&f.response));
                        }
                    }
                    Some(codes) => {
                        for &status in codes {
                            match sec.get(status) {
                                Some(r) => set(&mut out, status, Some(r)),
                                None => diags.push(Diagnostic::warning(
                                    Some(span),
                                    Some(section_label),
                                    format!("status '{status}' not declared in http-errors section '{name}'"),
                                )),
                            }
                        }
                    }
                }
            }
        }
    }
    out
}
