//! `stats ...` in a proxy section: HAProxy's statistics web page (`stats enable`, `uri`,
//! `realm`, `auth`, `refresh`, `scope`, `admin`, `http-request`, `hide-version`,
//! `show-legends`, `show-modules`, `show-node`, `show-desc`).
//!
//! As in HAProxy, any `stats` line enables the page; a proxy inherits its `defaults` section's
//! settings until its own first `stats` line, which starts over from nothing (HAProxy detaches
//! the proxy from the defaults' settings there). `stats admin` and `stats http-request` are
//! rule lines (their conditions read the proxy's ACLs), compiled with the other rules.

use super::rules::{RuleKind, RuleLine};
use super::{Ctx, Problem, ProxyDraft, SectionKind};
use crate::config::model::StatsPage;

/// The page's settings as the lines leave them; the rules are in the draft's `rule_lines`.
pub type StatsDraft = StatsPage;

/// The words HAProxy names when a `stats` line has none it knows.
const EXPECTS: &str = "expects 'admin', 'uri', 'realm', 'auth', 'scope', 'enable', 'hide-version', 'show-node', 'show-desc' or 'show-legends'";

pub(super) fn stats(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    if ctx.kind != SectionKind::Defaults && !p.stats_own {
        // The first `stats` line of a proxy detaches it from its defaults' settings.
        p.stats = None;
        p.stats_own = true;
    }
    let Some(sub) = ctx.arg(1) else {
        return Err(format!("missing keyword in 'stats', {EXPECTS}.").into());
    };
    let sub = sub.to_string();
    let page = p.stats.get_or_insert_with(StatsPage::default);
    let need = |ctx: &Ctx<'_>, what: &str| -> Result<String, Problem> {
        match ctx.arg(2) {
            Some(w) if !w.is_empty() => Ok(w.to_string()),
            _ => Err(Problem::from(what.to_string())),
        }
    };
    match sub.as_str() {
        "enable" => {}
        "uri" => page.uri = need(ctx, "'uri' needs an URI prefix.")?,
        "realm" => {
            // HAProxy's documentation: spaces are escaped with a backslash, which the
            // lexer already removed.
            page.realm = Some(need(ctx, "'realm' needs an realm name.")?);
        }
        "auth" => {
            let account = need(ctx, "'auth' needs a user:password account.")?;
            let (user, pass) = account.split_once(':').ok_or_else(|| {
                Problem::from(format!(
                    "'stats auth {account}': expects 'user:password' (no ':' found)"
                ))
            })?;
            page.users.push((user.to_string(), pass.to_string()));
        }
        "refresh" => {
            let w = need(ctx, "'stats refresh' expects an interval.")?;
            let d = crate::config::values::time(&format!(
                "{w}{}",
                if w.bytes().all(|b| b.is_ascii_digit()) {
                    "s"
                } else {
                    ""
                }
            ))
            .map_err(|e| format!("stats refresh interval: {e}"))?;
            if d.as_secs() == 0 && !d.is_zero() {
                return Err(format!("timer underflow in argument <{w}> to stats refresh interval, minimum non-null value is 1 s.").into());
            }
            page.refresh = (!d.is_zero()).then_some(d);
        }
        "scope" => {
            let name = need(ctx, "'scope' needs a proxy name.")?;
            page.scope.push(name);
        }
        "hide-version" => page.hide_version = true,
        "show-legends" => page.show_legends = true,
        "show-modules" => page.show_modules = true,
        "show-node" => {
            let name = ctx.arg(2).unwrap_or("");
            if !name.is_empty()
                && !name
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
            {
                return Err("'stats show-node' invalid node name - should be a stringwith digits(0-9), letters(A-Z, a-z), hyphen(-) or underscode(_).".into());
            }
            page.show_node = Some((!name.is_empty()).then(|| name.to_string()));
        }
        "show-desc" => {
            let desc = ctx.args[2..].join(" ");
            page.show_desc = Some((!desc.is_empty()).then_some(desc));
        }
        "admin" | "http-request" => {
            if ctx.kind == SectionKind::Defaults {
                return Err(format!("'stats {sub}' not allowed in 'defaults' section.").into());
            }
            let kind = if sub == "admin" {
                if !matches!(ctx.arg(2), Some("if" | "unless")) {
                    return Err(
                        "'stats admin' requires either 'if' or 'unless' followed by a condition."
                            .into(),
                    );
                }
                RuleKind::StatsAdmin
            } else {
                ctx.need(2, "an action")?;
                RuleKind::StatsHttpRequest
            };
            p.rule_lines.push(RuleLine {
                kind,
                words: ctx.args.to_vec(),
                span: ctx.span.clone(),
            });
        }
        other => return Err(format!("unknown stats parameter '{other}', {EXPECTS}.").into()),
    }
    Ok(())
}
