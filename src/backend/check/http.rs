//! The judgement of an HTTP check's response by its `http-check` steps, in order, as
//! HAProxy's `tcpcheck_eval_expect_http` runs them: each `expect` must hold (the first that
//! does not gives the check's failure), and `set-var(check.NAME)` / `unset-var` lines set the
//! check's own variables from the response, for the `name-lf` / `value-lf` patterns of later
//! `expect hdr|fhdr` lines.
//!
//! The response is a [`rules::Source`](crate::rules::Source) here ([`CheckReply`]): its
//! status, version and headers, and the check's variables.

use std::cell::RefCell;

use super::probe::judge_http;
use crate::backend::health::Verdict;
use crate::config::model::{
    HdrMatch, HdrPattern, HttpCheckCode, HttpCheckStep, HttpCheckStepCode, HttpExpect,
};
use crate::proto::h1::{self, HeaderIdx, ResponseHead};
use crate::rules::source::Stored;
use crate::rules::vars::{VarCond, Vars};
use crate::rules::{Eval, Scope, Source, Value};

/// A check's response as rules read it (`head`: `None` before it is read, for the steps
/// before the first `expect`, as HAProxy reads the response only for an `expect`).
pub struct CheckReply<'a> {
    buf: &'a [u8],
    head: Option<&'a ResponseHead>,
    headers: &'a [HeaderIdx],
    /// The check's `check.` variables.
    vars: &'a RefCell<Vars>,
}

impl Source for CheckReply<'_> {
    fn status(&self) -> Option<u16> {
        Some(self.head?.status)
    }
    fn res_version(&self) -> Option<&[u8]> {
        let line = &self.buf[self.head?.start_line.clone()];
        line.split(|&c| c == b' ').next()
    }
    fn res_header_count(&self) -> usize {
        if self.head.is_some() {
            self.headers.len()
        } else {
            0
        }
    }
    fn res_header(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.head?;
        let h = self.headers.get(i)?;
        Some((h.name(self.buf), h.value(self.buf)))
    }
    fn var(&self, scope: Scope, id: usize, out: &mut Vec<u8>) -> Option<Stored> {
        match scope {
            Scope::Check => self.vars.borrow().get(id, out),
            // A check has no stream, hence none of its variables.
            _ => None,
        }
    }
    fn set_var(&self, scope: Scope, id: usize, v: Value<'_>) {
        self.set_var_if(scope, id, v, VarCond::NONE);
    }
    fn set_var_if(&self, scope: Scope, id: usize, v: Value<'_>, cond: VarCond) {
        if scope == Scope::Check {
            self.vars.borrow_mut().set_if(id, v, cond);
        }
    }
}

/// Judges `reply` by the backend's `http-check` `steps` (compiled as `code`), with the check's
/// variables `vars` (emptied first: each check starts without).
pub fn judge(
    reply: &[u8],
    steps: &[HttpCheckStep],
    code: &HttpCheckCode,
    vars: &RefCell<Vars>,
) -> Verdict {
    if !steps
        .iter()
        .any(|s| matches!(s, HttpCheckStep::Expect { .. }))
    {
        return judge_http(reply, None);
    }
    let mut idx = Vec::new();
    let Ok(Some(head)) = h1::parse_response(reply, &mut idx, false) else {
        // Not an HTTP response: the status-line check says so.
        return judge_http(reply, None);
    };
    vars.borrow_mut().clear();
    let src = CheckReply {
        buf: reply,
        head: Some(&head),
        headers: &idx,
        vars,
    };
    // The variable steps before the first `expect` run before the response is read.
    let before = CheckReply { head: None, ..src };
    let mut expected = false;
    let mut ev = Eval::new();
    let mut text = Vec::new();
    for (step, code) in steps.iter().zip(&code.steps) {
        match (step, code) {
            (
                HttpCheckStep::Expect {
                    negate,
                    expect: HttpExpect::Hdr { full, name, value },
                },
                HttpCheckStepCode::Expect {
                    name_lf,
                    value_lf,
                    name_re,
                    value_re,
                },
            ) => {
                expected = true;
                let mut pattern = |p: &HdrPattern, lf: &Option<crate::rules::lf::LfString>| {
                    let mut out = Vec::new();
                    match lf {
                        Some(lf) => lf.render(&src, &mut ev, &|_, _| {}, &mut out),
                        None => out.extend_from_slice(p.text.as_bytes()),
                    }
                    out
                };
                let npat = pattern(name, name_lf);
                let vpat = value.as_ref().map(|v| pattern(v, value_lf));
                if (name.lf && npat.is_empty())
                    || (value_lf.is_some() && vpat.as_ref().is_some_and(Vec::is_empty))
                {
                    return Verdict {
                        info: Some("log-format string evaluated to an empty string".into()),
                        ..Verdict::new(false, "Layer7 invalid response")
                    };
                }
                let name_ok = |n: &[u8]| match name.how {
                    HdrMatch::Str => n.eq_ignore_ascii_case(&npat),
                    HdrMatch::Beg => {
                        n.len() >= npat.len() && n[..npat.len()].eq_ignore_ascii_case(&npat)
                    }
                    HdrMatch::End => {
                        n.len() >= npat.len()
                            && n[n.len() - npat.len()..].eq_ignore_ascii_case(&npat)
                    }
                    HdrMatch::Sub => n
                        .to_ascii_lowercase()
                        .windows(npat.len().max(1))
                        .any(|w| w.eq_ignore_ascii_case(&npat)),
                    HdrMatch::Reg => name_re.as_ref().is_some_and(|r| r.is_match(n)),
                };
                let value_ok = |v: &[u8]| match (value, &vpat) {
                    (Some(p), Some(pat)) => match p.how {
                        HdrMatch::Str => v == &pat[..],
                        HdrMatch::Beg => v.starts_with(pat),
                        HdrMatch::End => v.ends_with(pat),
                        HdrMatch::Sub => v.windows(pat.len().max(1)).any(|w| w == &pat[..]),
                        HdrMatch::Reg => value_re.as_ref().is_some_and(|r| r.is_match(v)),
                    },
                    _ => true,
                };
                let matched = idx.iter().any(|h| {
                    if !name_ok(h.name(reply)) {
                        return false;
                    }
                    let v = h.value(reply);
                    if *full || value.is_none() {
                        return value_ok(v);
                    }
                    // `hdr`: each comma-separated value on its own.
                    v.split(|&c| c == b',')
                        .any(|part| value_ok(part.trim_ascii()))
                });
                if matched == *negate {
                    // HAProxy shows the reason phrase of the status line.
                    text.clear();
                    let line = &reply[head.start_line.clone()];
                    let phrase = line.get(13..).unwrap_or_default().trim_ascii();
                    return Verdict {
                        code: Some(head.status),
                        info: Some(String::from_utf8_lossy(phrase).into_owned()),
                        ..Verdict::new(false, "Layer7 wrong status")
                    };
                }
            }
            (HttpCheckStep::Expect { negate, expect }, _) => {
                expected = true;
                let v = judge_http(reply, Some((*negate, expect)));
                if !v.ok {
                    return v;
                }
            }
            (HttpCheckStep::Var { .. }, HttpCheckStepCode::Var(action)) => {
                use crate::rules::action::VarAction;
                let src = if expected { &src } else { &before };
                match action {
                    VarAction::Set { var, expr } => {
                        if let Some(s) = expr.eval(src, &mut ev) {
                            let v = ev.value(s);
                            src.set_var_if(var.scope, var.id, v, var.cond);
                        }
                    }
                    VarAction::SetFmt { var, fmt } => {
                        text.clear();
                        fmt.render(src, &mut ev, &|_, _| {}, &mut text);
                        src.set_var_if(var.scope, var.id, Value::Str(&text), var.cond);
                    }
                    VarAction::Unset { var } => {
                        if var.scope == Scope::Check {
                            vars.borrow_mut().unset(var.id, false);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Verdict {
        code: Some(head.status),
        ..Verdict::new(true, "Layer7 check passed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The backend `be` of `lines` (after `option httpchk`), loaded.
    fn judge_with(lines: &str, reply: &[u8]) -> Verdict {
        let text = format!(
            "defaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n\
             backend be\n  option httpchk\n{lines}\n  server s 127.0.0.1:1 check\n"
        );
        let loaded = crate::config::load_str("t.cfg", &text).unwrap_or_else(|e| panic!("{e:?}"));
        let be = &loaded.config.backends[0];
        let vars = RefCell::new(Vars::default());
        judge(
            reply,
            &be.options.http_check.steps,
            &be.rules.http_check,
            &vars,
        )
    }

    const REPLY: &[u8] = b"HTTP/1.1 202 Accepted\r\nx-test1: true, next value\r\n\
        x-test2: true, begin-value, value-end, value-sub-string, value-reg-123ABC\r\n\
        x-begin-test: 1\r\nx-test-end: 1\r\nx-sub-test: 1\r\nx-reg-test1: 1\r\n\
        x-hdr-name: x-test1\r\ncontent-length: 0\r\n\r\n";

    #[test]
    fn header_expectations_match_like_haproxy() {
        for line in [
            "http-check expect status 200-399",
            "http-check expect hdr name \"x-test1\"",
            "http-check expect hdr name -m str \"X-Test2\"",
            "http-check expect hdr name -m beg \"X-Begin-\"",
            "http-check expect hdr name -m end \"-End\"",
            "http-check expect hdr name -m sub \"-Sub-\"",
            "http-check expect hdr name -m reg \"^[a-z]+-Reg-[a-z]+[0-9]\\$\"",
            "http-check set-var(check.hdr_name) res.fhdr(x-hdr-name)\n  http-check expect hdr name-lf -m str \"%[var(check.hdr_name)]\"",
            "http-check expect hdr name-lf -m str \"%[res.fhdr(x-hdr-name)]\"",
            "http-check expect fhdr name \"x-test1\" value \"true, next value\"",
            "http-check expect hdr name \"x-test2\" value -m str \"true\"",
            "http-check expect hdr name -m beg \"x-test\" value -m beg \"begin-\"",
            "http-check expect hdr name -m beg \"x-test\" value -m end \"-end\"",
            "http-check expect hdr name -m beg \"x-test\" value -m sub \"-sub-\"",
            "http-check expect hdr name -m beg \"x-test\" value -m reg \"^value-reg-[A-Z0-9]+\\$\"",
            "http-check expect fhdr name -m beg \"x-test\" value -m reg \"value-reg-[A-Z0-9]+\"",
            "http-check set-var(check.hdr_value) str(x-test1)\n  http-check expect hdr name -m beg \"x-\" value-lf -m str \"%[var(check.hdr_value)]\"",
            "http-check expect fhdr name -m beg \"x-\" value-lf -m str \"%[res.fhdr(x-hdr-name)]\"",
        ] {
            // After a first expect, as in the reg-test: the response is read by then.
            let v = judge_with(
                &format!("  http-check expect status 202\n  {line}"),
                REPLY,
            );
            assert!(v.ok, "{line}: {v:?}");
        }
        for line in [
            "http-check expect hdr name x-none",
            "http-check expect ! hdr name x-test1",
            "http-check expect hdr name x-test1 value \"true, next value\"",
            "http-check expect fhdr name x-test1 value true",
        ] {
            let v = judge_with(&format!("  {line}"), REPLY);
            assert_eq!((v.ok, v.reason), (false, "Layer7 wrong status"), "{line}");
            assert_eq!(v.info.as_deref(), Some("Accepted"));
        }
        // Before the first expect, the response is not read yet.
        let v = judge_with(
            "  http-check set-var(check.n) res.fhdr(x-hdr-name)\n  http-check expect hdr name-lf \"%[var(check.n)]\"",
            REPLY,
        );
        assert_eq!(
            v.info.as_deref(),
            Some("log-format string evaluated to an empty string")
        );
    }
}
