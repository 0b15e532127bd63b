//! The statistics web page (`stats enable`, `stats uri`): which requests it answers, the
//! options of its URI (`;csv`, `;json`, `;up`, `;no-maint`, `;norefresh`, `;st=`, `scope=`),
//! its views (HTML, CSV, JSON) and the actions of its admin form (`stats admin`), as HAProxy
//! 2.6's stats applet has them.
//!
//! The HTTP session decides whether a request is for the page ([`hit`]), runs the `stats
//! http-request` rules and the `stats auth` check, then asks [`answer`] for the response. The
//! views read the same lines as `show stat` ([`super::csv::lines`]): the page and the socket
//! never disagree.

use std::fmt::Write as _;
use std::sync::Arc;

use super::csv::{self, Kind, Line};
use crate::backend::server::admin::{FDRAIN, FMAINT};
use crate::config::model::StatsPage;
use crate::state::Shared;

/// Whether a request with `method` and `target` is for the page at `page.uri`: GET, HEAD or
/// POST, and the URI (its path when the configured URI starts with `/`) starts with it.
pub fn hit(page: &StatsPage, method: &[u8], target: &[u8]) -> bool {
    if !matches!(method, b"GET" | b"HEAD" | b"POST") {
        return false;
    }
    let uri = if page.uri.starts_with('/') {
        path_of(target)
    } else {
        target
    };
    uri.starts_with(page.uri.as_bytes())
}

/// The path of a request target, query included (an absolute-form target's part after its
/// authority), as HAProxy's `http_parse_path` returns it.
fn path_of(target: &[u8]) -> &[u8] {
    if target.first() == Some(&b'/') {
        return target;
    }
    match target.windows(3).position(|w| w == b"://") {
        Some(i) => {
            let after = &target[i + 3..];
            match after.iter().position(|&c| c == b'/') {
                Some(j) => &after[j..],
                None => &b""[..],
            }
        }
        None => target,
    }
}

/// The view a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Html,
    Csv,
    Json,
}

/// What the URI after the page's prefix asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub format: Format,
    /// `;up`: hide servers that are down.
    pub hide_down: bool,
    /// `;no-maint`: hide servers in maintenance.
    pub hide_maint: bool,
    /// `;norefresh` (only when `stats refresh` is set).
    pub no_refresh: bool,
    /// `;st=CODE`: the outcome of an admin action, shown once.
    pub status: Option<String>,
    /// `scope=TEXT`: only proxies whose name contains it (case-insensitively).
    pub scope: Option<String>,
}

/// The outcomes of an admin action HAProxy reports in `;st=` (its `stat_status_codes`).
const STATUS_CODES: [&str; 7] = ["NONE", "DONE", "ERRP", "EXCD", "DENY", "PART", "UNKN"];

/// Reads the options from `rest`, the target after the page's prefix, as HAProxy looks for
/// them: anywhere in it.
pub fn options(page: &StatsPage, rest: &[u8]) -> Options {
    let has = |pat: &[u8]| rest.windows(pat.len()).any(|w| w == pat);
    // HAProxy looks for `;st=` and `scope=` only where 8 bytes remain.
    let find = |pat: &[u8]| {
        rest.windows(pat.len())
            .position(|w| w == pat)
            .filter(|i| i + 8 <= rest.len())
    };
    let mut format = Format::Html;
    if has(b";csv") {
        format = Format::Csv;
    }
    if has(b";json") {
        format = Format::Json;
    }
    let status = find(b";st=").map(|i| {
        let code = &rest[i + 4..rest.len().min(i + 8)];
        STATUS_CODES
            .iter()
            .find(|c| c.as_bytes() == code)
            .unwrap_or(&"UNKN")
            .to_string()
    });
    let scope = find(b"scope=").and_then(|i| {
        let v = &rest[i + 6..];
        let end = v
            .iter()
            .position(|&c| matches!(c, b';' | b'&' | b' '))
            .unwrap_or(v.len());
        let v = &v[..end.min(SCOPE_MAX)];
        // HAProxy clears a scope with characters it does not allow in names.
        let ok = v
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b':'));
        (ok && !v.is_empty()).then(|| String::from_utf8_lossy(v).into_owned())
    });
    Options {
        format,
        hide_down: has(b";up"),
        hide_maint: has(b";no-maint"),
        no_refresh: page.refresh.is_some() && has(b";norefresh"),
        status,
        scope,
    }
}

/// HAProxy's longest scope text (`STAT_SCOPE_TXT_MAXLEN`).
const SCOPE_MAX: usize = 20;

/// The request as the page needs it.
pub struct Request<'a> {
    /// GET, HEAD or POST.
    pub method: &'a [u8],
    /// The request target as sent.
    pub target: &'a [u8],
    /// The body of a POST (the admin form).
    pub body: &'a [u8],
    /// A `stats admin` condition held.
    pub admin: bool,
    /// The proxy whose page this is (`stats scope .`).
    pub proxy: &'a str,
}

/// The page's response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub reason: &'static str,
    /// Headers after `cache-control: no-cache`, in order.
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
}

/// Answers a request for the page (after its rules and authentication passed).
pub fn answer(shared: &Arc<Shared>, page: &StatsPage, req: &Request<'_>) -> Reply {
    let prefix_len = if page.uri.starts_with('/') {
        // The options follow the prefix in the target as sent (HAProxy skips the prefix's
        // length from the start of the URI).
        let path = path_of(req.target);
        req.target.len() - path.len() + page.uri.len()
    } else {
        page.uri.len()
    };
    let rest = req.target.get(prefix_len..).unwrap_or(b"");
    let opts = options(page, rest);
    if req.method == b"POST" {
        let code = if req.admin {
            post(shared, req.body)
        } else {
            "DENY"
        };
        return redirect(page, &opts, code);
    }
    let keep = |name: &str| in_scope(page, &opts, req.proxy, name);
    let mut lines = csv::lines(shared, &keep);
    lines.retain(|l| {
        l.kind != Kind::Server
            || !((opts.hide_down && l.get("status").starts_with("DOWN"))
                || (opts.hide_maint && l.get("status").starts_with("MAINT")))
    });
    let mut headers = Vec::new();
    let (ctype, body) = match opts.format {
        Format::Csv => ("text/plain", csv::csv(&lines)),
        Format::Json => ("application/json", json(&lines)),
        Format::Html => ("text/html", html(shared, page, &opts, req, &lines)),
    };
    headers.push(("content-type", ctype.to_string()));
    if let (Some(r), false) = (page.refresh, opts.no_refresh) {
        headers.push(("refresh", r.as_secs().to_string()));
    }
    Reply {
        status: 200,
        reason: "OK",
        headers,
        body,
    }
}

/// Whether proxy `name` is shown: `stats scope` lines (`.`: the page's own proxy), then the
/// request's `scope=` (a case-insensitive substring).
fn in_scope(page: &StatsPage, opts: &Options, own: &str, name: &str) -> bool {
    if !page.scope.is_empty()
        && !page
            .scope
            .iter()
            .any(|s| s == name || (s == "." && name == own))
    {
        return false;
    }
    match &opts.scope {
        Some(s) => name.to_ascii_lowercase().contains(&s.to_ascii_lowercase()),
        None => true,
    }
}

/// The 303 that follows a POST, to the page with the outcome (`;st=`), as HAProxy sends it.
fn redirect(page: &StatsPage, opts: &Options, code: &str) -> Reply {
    let mut loc = format!("{};st={code}", page.uri);
    if opts.hide_down {
        loc.push_str(";up");
    }
    if opts.no_refresh {
        loc.push_str(";norefresh");
    }
    if let Some(s) = &opts.scope {
        let _ = write!(loc, "?scope={s}");
    }
    Reply {
        status: 303,
        reason: "See Other",
        headers: vec![
            ("content-type", "text/plain".into()),
            ("content-length", "0".into()),
            ("location", loc),
        ],
        body: String::new(),
    }
}

/// Decodes `%XX` and `+` in a form value.
fn url_decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(c) => {
                        out.push(c);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Applies the admin form (`b=BACKEND&action=ACTION&s=SERVER...`; the backend by name or
/// `#ID`) and returns HAProxy's outcome code: NONE (no server named), DONE (all changed),
/// PART (some), ERRP (none, or a bad backend or action).
fn post(shared: &Arc<Shared>, body: &[u8]) -> &'static str {
    let body = String::from_utf8_lossy(body);
    let (mut backend, mut action, mut servers) = (None, None, Vec::new());
    // HAProxy reads the parameters from the end and keeps the last backend and action.
    for pair in body.split('&').rev() {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (k, v) = (url_decode(k), url_decode(v));
        match k.as_str() {
            "b" if backend.is_none() => backend = Some(v),
            "action" if action.is_none() => action = Some(v),
            "s" => servers.push(v),
            _ => {}
        }
    }
    let Some(b) = backend.and_then(|b| find_backend(shared, &b)) else {
        return if servers.is_empty() { "NONE" } else { "ERRP" };
    };
    let Some(action) = action else {
        return if servers.is_empty() { "NONE" } else { "ERRP" };
    };
    let be = &shared.backends[b];
    let (mut total, mut altered) = (0, 0);
    for name in servers.iter().rev() {
        total += 1;
        let Some(i) = be.servers.find(name) else {
            continue;
        };
        let s = &be.servers[i];
        let flags = s.admin.load(std::sync::atomic::Ordering::Relaxed);
        let (set, clear) = match action.as_str() {
            "ready" => (0, FMAINT | FDRAIN),
            "drain" => (FDRAIN, FMAINT),
            "maint" => (FMAINT, FDRAIN),
            "disable" if flags & FMAINT == 0 => (FMAINT, 0),
            "enable" if flags & FMAINT != 0 => (0, FMAINT),
            "stop" if flags & FDRAIN == 0 => (FDRAIN, 0),
            "start" if flags & FDRAIN != 0 => (0, FDRAIN),
            "disable" | "enable" | "stop" | "start" => continue,
            "hrunn" | "hnolb" | "hdown" => {
                // As HAProxy: a tracking server's health follows the tracked server's; the
                // request leaves it out of its counts.
                if s.config.track.is_some() {
                    total -= 1;
                    continue;
                }
                let (up, stopping) = (action != "hdown", action == "hnolb");
                super::admin::force_health(shared, be, i, up, stopping, "Web interface");
                altered += 1;
                continue;
            }
            _ => return "ERRP",
        };
        super::admin::admin_change(shared, be, i, set, clear);
        altered += 1;
    }
    match (total, altered) {
        (0, _) => "NONE",
        (_, 0) => "ERRP",
        (t, a) if t == a => "DONE",
        _ => "PART",
    }
}

/// A backend by name or `#ID`, as HAProxy's `proxy_be_by_name` finds it.
fn find_backend(shared: &Shared, name: &str) -> Option<usize> {
    match name.strip_prefix('#') {
        Some(id) => {
            let id: u32 = id.parse().ok()?;
            shared.backends.iter().position(|b| b.config.id == id)
        }
        None => shared.backends.iter().position(|b| b.config.name == name),
    }
}

/// The lines as HAProxy's JSON view lays them out: an array per line of one object per
/// non-empty column (position, name, value and its type).
fn json(lines: &[Line]) -> String {
    let mut out = String::from("[");
    for (n, l) in lines.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        let obj = match l.kind {
            Kind::Frontend => "Frontend",
            Kind::Backend => "Backend",
            Kind::Server => "Server",
        };
        out.push('[');
        let mut first = true;
        for (pos, col) in csv::COLUMNS.iter().enumerate() {
            let v = l.get(col);
            if v.is_empty() || *col == "-" {
                continue;
            }
            if !first {
                out.push(',');
            }
            first = false;
            let numeric = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
            let value = if numeric {
                format!("{{\"type\":\"u64\",\"value\":{v}}}")
            } else {
                format!("{{\"type\":\"str\",\"value\":\"{}\"}}", json_escape(v))
            };
            let _ = write!(
                out,
                "{{\"objType\":\"{obj}\",\"proxyId\":{},\"id\":{},\"field\":{{\"pos\":{pos},\"name\":\"{col}\"}},\"processNum\":1,\"tags\":{{\"origin\":\"Metric\",\"nature\":\"Value\",\"scope\":\"Process\"}},\"value\":{value}}}",
                l.get("iid"),
                l.get("sid"),
            );
        }
        out.push(']');
    }
    out.push_str("]\n");
    out
}

fn json_escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Escapes text for HTML.
fn esc(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:arial,helvetica,sans-serif;font-size:12px;font-weight:normal;color:black;background:white;}
th,td{font-size:10px;}
h1{font-size:x-large;margin-bottom:0.5em;}
h2{font-family:helvetica,arial;font-size:x-large;font-weight:bold;font-style:italic;color:#6020a0;margin-top:0em;margin-bottom:0em;}
table.tbl{border-collapse:collapse;border-style:none;}
table.tbl td{text-align:right;border-width:1px 1px 1px 1px;border-style:solid solid solid solid;padding:2px 3px;border-color:gray;white-space:nowrap;}
table.tbl th{border-width:1px;border-style:solid solid solid solid;border-color:gray;}
table.tbl th.pxname{background:#b00040;color:#ffff40;font-weight:bold;border-style:solid solid none solid;padding:2px 3px;white-space:nowrap;}
table.tbl th.empty{border-style:none;empty-cells:hide;background:white;}
.titre{background:#20D0D0;color:#000000;font-weight:bold;text-align:center;}
.frontend{background:#e8e8d0;}
.socket{background:#d0d0d0;}
.backend{background:#e8e8d0;}
.active_down{background:#ff9090;}
.active_up{background:#c0ffc0;}
.active_nolb{background:#20a0ff;}
.active_draining{background:#20a0FF;}
.maintain{background:#c07820;}
.active_no_check{background:#e0e0e0;}
a.px:link{color:#ffff40;text-decoration:none;}
a.px:visited{color:#ffff40;text-decoration:none;}
";

/// The server status colour classes HAProxy's page uses.
fn row_class(l: &Line) -> &'static str {
    match l.kind {
        Kind::Frontend => "frontend",
        Kind::Backend => "backend",
        Kind::Server => {
            let s = l.get("status");
            if s.starts_with("MAINT") {
                "maintain"
            } else if s.starts_with("DOWN") {
                "active_down"
            } else if s.starts_with("NOLB") {
                "active_nolb"
            } else if s.starts_with("DRAIN") {
                "active_draining"
            } else if s == "no check" {
                "active_no_check"
            } else {
                "active_up"
            }
        }
    }
}

/// Seconds as HAProxy's page shows a duration (`1d2h`, `3h4m`, `5m6s`, `7s`).
fn human(secs: &str) -> String {
    let Ok(s) = secs.parse::<u64>() else {
        return String::new();
    };
    let (d, h, m, sec) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d{h}h")
    } else if h > 0 {
        format!("{h}h{m}m")
    } else if m > 0 {
        format!("{m}m{sec}s")
    } else {
        format!("{sec}s")
    }
}

/// The HTML view: the process's information, then one table per proxy with its frontend,
/// its servers and its backend, as HAProxy's page shows them.
fn html(
    shared: &Shared,
    page: &StatsPage,
    opts: &Options,
    req: &Request<'_>,
    lines: &[Line],
) -> String {
    let g = &shared.global;
    let mut o = String::with_capacity(8192 + lines.len() * 1024);
    let pid = std::process::id();
    let _ = writeln!(
        o,
        "<!DOCTYPE html>\n<html><head><title>Statistics Report for HAProxy{}</title>\n<meta http-equiv=\"content-type\" content=\"text/html; charset=iso-8859-1\">\n<style type=\"text/css\"><!--\n{STYLE}--></style></head>\n<body><h1><a href=\"http://www.haproxy.org/\" style=\"text-decoration:none;\">HAProxy{}</a></h1>\n<h2>Statistics Report for pid {pid}{}</h2>\n<hr width=\"100%\" class=\"hr\">",
        page.show_node
            .as_ref()
            .map(|n| format!(" on {}", esc(&node_name(g, n))))
            .unwrap_or_default(),
        if page.hide_version {
            String::new()
        } else {
            format!(
                " version {} (Bascule {})",
                crate::compat::HAPROXY_COMPAT_VERSION,
                crate::compat::BASCULE_VERSION
            )
        },
        page.show_node
            .as_ref()
            .map(|n| format!(" on {}", esc(&node_name(g, n))))
            .unwrap_or_default(),
    );
    let _ = writeln!(
        o,
        "<h3>&gt; General process information</h3>\n<table border=0><tr><td align=\"left\" nowrap width=\"1%\">\n<p><b>pid = </b> {pid} (process #1, nbproc = 1, nbthread = {})<br>\n<b>uptime = </b> {}<br>\n<b>system limits:</b> maxconn = {}<br>\ncurrent conns = {}<br>",
        shared.nbthread,
        human(&crate::base::clock::uptime_secs().to_string()),
        shared.global_limit.max(),
        shared.global_limit.current(),
    );
    if let Some(d) = page.show_desc.as_ref() {
        if let Some(d) = d.as_ref().or(g.description.as_ref()) {
            let _ = writeln!(o, "<b>description:</b> {}<br>", esc(d));
        }
    }
    o.push_str("</td></tr></table>\n");
    if let Some(code) = &opts.status {
        let msg = match code.as_str() {
            "DONE" => "Action processed successfully.",
            "NONE" => "Nothing has changed.",
            "PART" => "Action not processed for all servers.",
            "ERRP" => "Action not processed because of invalid parameters.",
            "EXCD" => "Action not processed: the buffer couldn't store all the data.",
            "DENY" => "Action denied.",
            _ => "Unexpected result.",
        };
        let _ = writeln!(o, "<p><div class=active_up><b>{msg}</b></div>");
    }
    if let Some(r) = page.refresh {
        let _ = writeln!(
            o,
            "<p>Refresh every {}s: <a href=\"{}{}\">{}</a></p>",
            r.as_secs(),
            esc(&page.uri),
            if opts.no_refresh { "" } else { ";norefresh" },
            if opts.no_refresh { "enable" } else { "disable" },
        );
    }
    let _ = writeln!(
        o,
        "<ul><li><a href=\"{0};csv\">CSV export</a></li><li><a href=\"{0};json\">JSON export</a></li></ul>",
        esc(&page.uri)
    );
    // One table per proxy, in the order of the lines.
    let mut i = 0;
    while i < lines.len() {
        let name = lines[i].proxy().to_string();
        let end = lines[i..]
            .iter()
            .position(|l| l.proxy() != name)
            .map_or(lines.len(), |n| i + n);
        proxy_table(shared, page, req, &name, &lines[i..end], &mut o);
        i = end;
    }
    o.push_str("</body></html>\n");
    o
}

fn node_name(g: &crate::config::model::Global, n: &Option<String>) -> String {
    n.clone()
        .or_else(|| g.node.clone())
        .unwrap_or_else(crate::sys::hostname)
}

/// One proxy's table; with the admin form around it when `stats admin` allowed it and the
/// proxy has servers.
fn proxy_table(
    shared: &Shared,
    page: &StatsPage,
    req: &Request<'_>,
    name: &str,
    lines: &[Line],
    o: &mut String,
) {
    let backend = shared.backends.iter().find(|b| b.config.name == name);
    let form = req.admin && lines.iter().any(|l| l.kind == Kind::Server);
    if form {
        let _ = write!(o, "<form method=\"post\">");
    }
    let _ = writeln!(
        o,
        "<table class=\"tbl\" width=\"100%\">\n<tr class=\"titre\"><th class=\"pxname\" width=\"10%\"><a name=\"{0}\"></a><a class=px href=\"#{0}\">{0}</a></th><th class=\"empty\" width=\"90%\"></th></tr>\n</table>\n<table class=\"tbl\" width=\"100%\">\n<tr class=\"titre\">{1}<th rowspan=2></th><th colspan=3>Queue</th><th colspan=3>Session rate</th><th colspan=6>Sessions</th><th colspan=2>Bytes</th><th colspan=2>Denied</th><th colspan=3>Errors</th><th colspan=2>Warnings</th><th colspan=9>Server</th></tr>\n<tr class=\"titre\"><th>Cur</th><th>Max</th><th>Limit</th><th>Cur</th><th>Max</th><th>Limit</th><th>Cur</th><th>Max</th><th>Limit</th><th>Total</th><th>LbTot</th><th>Last</th><th>In</th><th>Out</th><th>Req</th><th>Resp</th><th>Req</th><th>Conn</th><th>Resp</th><th>Retr</th><th>Redis</th><th>Status</th><th>LastChk</th><th>Wght</th><th>Act</th><th>Bck</th><th>Chk</th><th>Dwn</th><th>Dwntme</th><th>Thrtle</th></tr>",
        esc(name),
        if form { "<th rowspan=2 width=1></th>" } else { "" },
    );
    for l in lines {
        let class = row_class(l);
        let _ = write!(o, "<tr class=\"{class}\">");
        if form {
            if l.kind == Kind::Server {
                let _ = write!(
                    o,
                    "<td><input type=\"checkbox\" name=\"s\" value=\"{}\"></td>",
                    esc(l.name())
                );
            } else {
                o.push_str("<td></td>");
            }
        }
        let label = match l.kind {
            Kind::Frontend => "Frontend".to_string(),
            Kind::Backend => "Backend".to_string(),
            Kind::Server => esc(l.name()),
        };
        if page.show_legends && l.kind == Kind::Server {
            let _ = write!(
                o,
                "<td class=ac><a name=\"{0}/{1}\"></a><a class=lfsb href=\"#{0}/{1}\" title=\"IP: {2}, id: {3}\">{1}</a></td>",
                esc(name),
                label,
                esc(l.get("addr")),
                l.get("sid"),
            );
        } else {
            let _ = write!(o, "<td class=ac>{label}</td>");
        }
        let last = if l.kind == Kind::Server {
            human(l.get("lastchg"))
        } else {
            String::new()
        };
        let status = match l.kind {
            Kind::Server => format!("{} {}", human(l.get("lastchg")), esc(l.get("status"))),
            _ => esc(l.get("status")),
        };
        let chk = {
            let cs = l.get("check_status");
            let code = l.get("check_code");
            if cs.is_empty() {
                String::new()
            } else if code.is_empty() {
                format!("{cs} in {}ms", l.get("check_duration"))
            } else {
                format!("{cs}/{code} in {}ms", l.get("check_duration"))
            }
        };
        let cells: [String; 30] = [
            l.get("qcur").into(),
            l.get("qmax").into(),
            l.get("qlimit").into(),
            l.get("rate").into(),
            l.get("rate_max").into(),
            l.get("rate_lim").into(),
            l.get("scur").into(),
            l.get("smax").into(),
            l.get("slim").into(),
            l.get("stot").into(),
            l.get("lbtot").into(),
            String::new(),
            l.get("bin").into(),
            l.get("bout").into(),
            l.get("dreq").into(),
            l.get("dresp").into(),
            l.get("ereq").into(),
            l.get("econ").into(),
            l.get("eresp").into(),
            l.get("wretr").into(),
            l.get("wredis").into(),
            status,
            chk,
            l.get("weight").into(),
            match l.kind {
                Kind::Server if l.get("act") == "1" => "Y".into(),
                Kind::Server => "-".into(),
                _ => l.get("act").into(),
            },
            match l.kind {
                Kind::Server if l.get("bck") == "1" => "Y".into(),
                Kind::Server => "-".into(),
                _ => l.get("bck").into(),
            },
            l.get("chkfail").into(),
            l.get("chkdown").into(),
            if l.kind == Kind::Server {
                last
            } else {
                String::new()
            },
            l.get("throttle").into(),
        ];
        for c in cells {
            let _ = write!(o, "<td>{c}</td>");
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
    if form {
        let id = backend.map_or(0, |b| b.config.id);
        let _ = writeln!(
            o,
            "Choose the action to perform on the checked servers : <select name=action><option value=\"\"></option><option value=\"ready\">Set state to READY</option><option value=\"drain\">Set state to DRAIN</option><option value=\"maint\">Set state to MAINT</option><option value=\"hrunn\">Health: force UP</option><option value=\"hnolb\">Health: force NOLB</option><option value=\"hdown\">Health: force DOWN</option></select><input type=\"hidden\" name=\"b\" value=\"#{id}\">&nbsp;<input type=\"submit\" value=\"Apply\"></form>"
        );
    }
    o.push_str("<p>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(uri: &str) -> StatsPage {
        StatsPage {
            uri: uri.into(),
            ..StatsPage::default()
        }
    }

    #[test]
    fn hit_compares_the_path_as_a_prefix() {
        let p = page("/stats");
        assert!(hit(&p, b"GET", b"/stats"));
        assert!(hit(&p, b"GET", b"/stats;csv"));
        assert!(hit(&p, b"HEAD", b"http://h/stats?x"));
        assert!(hit(&p, b"POST", b"/statsx"));
        assert!(!hit(&p, b"PUT", b"/stats"));
        assert!(!hit(&p, b"GET", b"/stat"));
        let d = StatsPage::default();
        assert!(hit(&d, b"GET", b"/haproxy?stats;csv"));
    }

    #[test]
    fn options_are_found_anywhere_after_the_prefix() {
        let p = page("/");
        // Too short for HAProxy to look for a scope.
        assert_eq!(options(&p, b"?scope=b").scope, None);
        let o = options(&p, b"?;csv;scope=b1");
        assert_eq!(o.format, Format::Csv);
        assert_eq!(o.scope.as_deref(), Some("b1"));
        let o = options(&p, b";json;up;no-maint;st=DONE");
        assert_eq!(o.format, Format::Json);
        assert!(o.hide_down && o.hide_maint);
        assert_eq!(o.status.as_deref(), Some("DONE"));
        assert_eq!(options(&p, b";st=WHAT").status.as_deref(), Some("UNKN"));
        // A scope with a character HAProxy refuses is dropped.
        assert_eq!(options(&p, b"?scope=a<b").scope, None);
        // `;norefresh` only counts with `stats refresh`.
        assert!(!options(&p, b";norefresh").no_refresh);
    }

    #[test]
    fn form_values_are_url_decoded() {
        assert_eq!(url_decode("%233"), "#3");
        assert_eq!(url_decode("a+b%2"), "a b%2");
    }

    #[test]
    fn durations_read_as_haproxy_shows_them() {
        assert_eq!(human("7"), "7s");
        assert_eq!(human("65"), "1m5s");
        assert_eq!(human("3700"), "1h1m");
        assert_eq!(human("90000"), "1d1h");
    }
}
