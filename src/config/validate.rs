//! Stage two: drafts to the typed [`Config`], with the checks that need the whole configuration.
//!
//! Here proxy names are resolved into backend indices (with "did you mean"), duplicates and mode
//! mismatches are found, ids are assigned, `log global` and `cpu-map` are expanded, and HAProxy's
//! load-time warnings (missing timeouts, a frontend that reaches no backend) are raised. Errors
//! point at the line of the keyword that references the faulty name.

mod formats;
mod rules;
mod servers;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::diag::{suggest, Diagnostic, Span};
use super::keywords::global::{CpuMapLine, ThreadSel, MAX_THREADS};
use super::keywords::{LogEntry, NameRef, ProxyDraft, SectionKind};
use super::model::{Backend, Balance, Config, CpuMap, Frontend, LogTarget, Mode};
use super::parser::{label, Parsed};

/// Expands `cpu-map` lines into one entry per thread (0-based), later lines overriding earlier.
pub fn resolve_cpu_maps(
    lines: &[CpuMapLine],
    nbthread: Option<usize>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<CpuMap> {
    let limit = nbthread.unwrap_or(MAX_THREADS);
    let mut map: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for line in lines {
        let threads: Vec<usize> = match &line.threads {
            ThreadSel::All => (1..=limit).collect(),
            ThreadSel::Odd => (1..=limit).filter(|t| t % 2 == 1).collect(),
            ThreadSel::Even => (1..=limit).filter(|t| t % 2 == 0).collect(),
            ThreadSel::Set(v) => v.clone(),
        };
        if line.auto {
            if let ThreadSel::Set(v) = &line.threads {
                if v.len() != line.cpus.len() {
                    diags.push(Diagnostic::alert(
                        Some(&line.span),
                        Some("global"),
                        format!(
                            "'cpu-map': with 'auto:', the thread set ({} threads) and the CPU set ({} CPUs) must have the same size",
                            v.len(),
                            line.cpus.len()
                        ),
                    ));
                    continue;
                }
            }
            for (t, cpu) in threads.iter().zip(&line.cpus) {
                map.insert(*t, vec![*cpu]);
            }
        } else {
            for t in threads {
                map.insert(t, line.cpus.clone());
            }
        }
    }
    map.into_iter()
        .filter(|(t, _)| *t <= limit)
        .map(|(t, cpus)| CpuMap {
            thread: t - 1,
            cpus,
        })
        .collect()
}

fn expand_logs(entries: &[LogEntry], global: &[LogTarget]) -> Vec<LogTarget> {
    let mut out = Vec::new();
    for e in entries {
        match e {
            LogEntry::Global => out.extend(global.iter().cloned()),
            LogEntry::Target(t) => out.push(t.clone()),
        }
    }
    out
}

fn mode_word(m: Mode) -> &'static str {
    match m {
        Mode::Tcp => "tcp",
        Mode::Http => "http",
    }
}

/// Reports a name declared twice among the proxies of one kind.
fn check_duplicate(
    seen: &mut HashMap<String, (SectionKind, Span)>,
    p: &ProxyDraft,
    what: &str,
    diags: &mut Vec<Diagnostic>,
) {
    if let Some((kind, first)) = seen.get(&p.name) {
        diags.push(Diagnostic::alert(
            Some(&p.span),
            Some(&label(p.kind, &p.name)),
            format!(
                "{what} name '{}' is already used by {} declared at {first}",
                p.name,
                label(*kind, &p.name)
            ),
        ));
    } else {
        seen.insert(p.name.clone(), (p.kind, p.span.clone()));
    }
}

/// Resolves the backend named by `r` for frontend `fe`, checking its mode.
fn resolve_backend(
    r: &NameRef,
    keyword: &str,
    fe: &ProxyDraft,
    backends: &[Backend],
    by_name: &HashMap<&str, usize>,
    frontend_names: &HashMap<String, (SectionKind, Span)>,
    diags: &mut Vec<Diagnostic>,
) -> Option<usize> {
    let section = label(fe.kind, &fe.name);
    let Some(&idx) = by_name.get(r.name.as_str()) else {
        let msg = if frontend_names.contains_key(&r.name) {
            format!(
                "'{keyword} {}': '{}' is a frontend, not a backend",
                r.name, r.name
            )
        } else {
            format!("'{keyword} {}': no backend named '{}'", r.name, r.name)
        };
        let hint = suggest(&r.name, by_name.keys().copied());
        diags.push(Diagnostic::alert(Some(&r.span), Some(&section), msg).with_hint(hint));
        return None;
    };
    let be = &backends[idx];
    if be.mode != fe.mode {
        diags.push(Diagnostic::alert(
            Some(&r.span),
            Some(&section),
            format!(
                "'{keyword} {}': backend '{}' is in mode {} but {section} is in mode {}; the modes must match",
                r.name,
                be.name,
                mode_word(be.mode),
                mode_word(fe.mode)
            ),
        ));
    }
    Some(idx)
}

/// Warns about the timeouts HAProxy also warns about when they are missing.
fn check_timeouts(p: &ProxyDraft, diags: &mut Vec<Diagnostic>) {
    if p.disabled {
        return;
    }
    let t = &p.timeouts;
    let unset = |d: Option<std::time::Duration>| d.is_none_or(|d| d.is_zero());
    let mut missing = Vec::new();
    if p.kind.has_frontend() && unset(t.client) {
        missing.push("'timeout client'");
    }
    if p.kind.has_backend() {
        if unset(t.connect) {
            missing.push("'timeout connect'");
        }
        if unset(t.server) {
            missing.push("'timeout server'");
        }
    }
    if !missing.is_empty() {
        let section = label(p.kind, &p.name);
        diags.push(Diagnostic::warning(
            Some(&p.span),
            Some(&section),
            format!(
                "missing timeouts for {section} ({}): not strictly invalid, but idle connections may then stay open forever and cause various problems; set each to a non-zero value",
                missing.join(", ")
            ),
        ));
    }
}

/// Builds the model from the drafts, pushing every problem found to `diags`.
pub fn build(parsed: Parsed, diags: &mut Vec<Diagnostic>) -> Config {
    let mut global = parsed.global.global;
    global.env = parsed.global.env.into_map();
    global.cpu_map = resolve_cpu_maps(&parsed.global.cpu_maps, global.nbthread, diags);
    if global.tune_maxrewrite >= global.tune_bufsize {
        // The defaults pass, so one of the two lines was read: report at the later one.
        diags.push(Diagnostic::alert(
            parsed.global.tune_span.as_ref(),
            Some("global"),
            format!(
                "'tune.maxrewrite' ({}) must be smaller than 'tune.bufsize' ({})",
                global.tune_maxrewrite, global.tune_bufsize
            ),
        ));
    }

    // Names: frontends and backends each have their own namespace; listen is in both.
    let mut fe_seen: HashMap<String, (SectionKind, Span)> = HashMap::new();
    let mut be_seen: HashMap<String, (SectionKind, Span)> = HashMap::new();
    for p in &parsed.proxies {
        if p.kind.has_frontend() {
            check_duplicate(&mut fe_seen, p, "frontend", diags);
        }
        if p.kind.has_backend() {
            check_duplicate(&mut be_seen, p, "backend", diags);
        }
    }

    for p in &parsed.proxies {
        check_runtime_support(p, diags);
    }
    let local_peer = parsed.global.local_peer.as_deref().unwrap_or("");
    let (mut tables, table_of, peers) =
        stick_tables(&parsed.proxies, &parsed.peers, local_peer, diags);
    let ids = proxy_ids(&parsed.proxies, !global.stats_sockets.is_empty(), diags);
    let proxy_id = |i: usize| ids[i];
    // Backends first, so frontends can refer to them by index.
    let mut backends = Vec::new();
    let mut backend_of: Vec<Option<usize>> = Vec::new();
    for (i, p) in parsed.proxies.iter().enumerate() {
        let id = proxy_id(i);
        if !p.kind.has_backend() {
            backend_of.push(None);
            continue;
        }
        let mut names: HashMap<&str, &str> = HashMap::new();
        for s in &p.servers {
            if let Some(first) = names.get(s.name.as_str()) {
                diags.push(Diagnostic::alert(
                    Some(&span_of(&s.location, p)),
                    Some(&label(p.kind, &p.name)),
                    format!(
                        "server name '{}' is already used by the server declared at {first}",
                        s.name
                    ),
                ));
            } else {
                names.insert(&s.name, &s.location);
            }
        }
        backend_of.push(Some(backends.len()));
        backends.push(Backend {
            name: p.name.clone(),
            id,
            mode: p.mode,
            balance: p.balance.clone(),
            hash_type: p.hash_type,
            rdp_persist: p.rdp_persist.clone(),
            servers: p.servers.clone(),
            timeouts: p.timeouts,
            retries: p.retries,
            http_reuse: p.http_reuse,
            retry_on: p.retry_on.clone(),
            outlier: p.outlier,
            // Set below, once the names their log-format strings may use are known.
            errorfiles: Vec::new(),
            redispatch: p.redispatch,
            options: p.options.clone(),
            logs: expand_logs(&p.logs, &global.logs),
            disabled: p.disabled,
            rules: Arc::default(),
            table: table_of[i],
            cookie: cookie_of(p, diags),
            dynamic_cookie_key: p.dynamic_cookie_key.clone(),
            sni_exprs: Vec::new(),
        });
    }
    let userlists = rules::userlists(&parsed.userlists, diags);
    rules::check_inheritance(&parsed.proxies, diags);
    let names = crate::rules::NameTable {
        backends: backends
            .iter()
            .map(|b| {
                (
                    b.name.clone(),
                    b.servers.iter().map(|s| s.name.clone()).collect(),
                )
            })
            .collect(),
        frontends: parsed
            .proxies
            .iter()
            .filter(|p| p.kind.has_frontend() && !p.binds.is_empty())
            .map(|p| p.name.clone())
            .collect(),
        userlists: userlists.iter().map(|u| u.name.clone()).collect(),
        http_errors: parsed
            .http_errors
            .iter()
            .map(|h| {
                let files = h.files.iter().map(|f| (f.status, f.response.clone()));
                (h.name.clone(), files.collect())
            })
            .collect(),
        vars: Default::default(),
        tables: tables.iter().map(|t| t.name.clone()).collect(),
        current_table: Default::default(),
        exprs: Default::default(),
        referenced: Default::default(),
        pat_files: Default::default(),
    };
    for (i, p) in parsed.proxies.iter().enumerate() {
        if let Some(b) = backend_of[i] {
            names.current_table.set(table_of[i]);
            servers::compile_sni(p, &mut backends[b], &names, diags);
        }
    }
    // Each proxy's error pages, its `errorfile`/`errorfiles`/`http-error` lines applied in
    // order over the `http-errors` sections.
    let error_pages: Vec<Vec<crate::config::model::ErrorFile>> = parsed
        .proxies
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let section = label(p.kind, &p.name);
            names.current_table.set(table_of[i]);
            let mut compile = |words: &[String], span: &Span, diags: &mut Vec<Diagnostic>| {
                let acls = crate::rules::acl::Acls::default();
                let mut c = crate::rules::action::Compiler {
                    names: &names,
                    acls: &acls,
                    has_backend: p.kind.has_backend(),
                    experimental: global.expose_experimental,
                    req_captures: 0,
                    res_captures: 0,
                    warnings: Vec::new(),
                };
                let r = crate::rules::action::compile_http_error(words, &mut c);
                for w in c.warnings {
                    diags.push(Diagnostic::warning(Some(span), Some(&section), w));
                }
                match r {
                    Ok(r) => Some(Arc::new(r)),
                    Err(e) => {
                        let mut msg = e.message;
                        if !msg.starts_with("'http-error'") {
                            msg = format!("'http-error': {msg}");
                        }
                        diags.push(Diagnostic::alert(Some(span), Some(&section), msg));
                        None
                    }
                }
            };
            super::keywords::http_errors::resolve(
                &p.errorfiles,
                &parsed.http_errors,
                &section,
                diags,
                &mut compile,
            )
        })
        .collect();
    for (i, b) in backend_of.iter().enumerate() {
        if let Some(b) = b {
            backends[*b].errorfiles = error_pages[i].clone();
        }
    }
    let mut proc_lines = Vec::new();
    for (words, span) in &parsed.global.set_vars {
        match crate::rules::proc_vars::compile(words, &names) {
            Ok(l) => proc_lines.push(l),
            Err(e) => diags.push(Diagnostic::alert(Some(span), Some("global"), e.message)),
        }
    }
    let modes: Vec<Mode> = backends.iter().map(|b| b.mode).collect();
    let env = rules::Env {
        names: &names,
        modes: &modes,
        experimental: global.expose_experimental,
    };
    let mut proxy_rules: Vec<Arc<crate::config::model::ProxyRules>> = Vec::new();
    for (i, p) in parsed.proxies.iter().enumerate() {
        names.current_table.set(table_of[i]);
        let r = Arc::new(rules::compile_proxy(p, backend_of[i], &env, diags));
        if let Some(b) = backend_of[i] {
            backends[b].rules = r.clone();
        }
        proxy_rules.push(r);
    }
    // A table that `stick` rules use stores the server (HAProxy 2.6 adds `server_id` and
    // `server_key` to it, whatever its `store` list says).
    for r in &proxy_rules {
        for rule in &r.stick {
            if let Some(t) = tables.get_mut(rule.action.table) {
                for data in [
                    crate::stick::DataType::ServerId,
                    crate::stick::DataType::ServerKey,
                ] {
                    if !t.spec.store.iter().any(|s| s.data == data) {
                        t.spec.store.push(crate::stick::Store {
                            data,
                            count: 1,
                            period: 0,
                        });
                    }
                }
            }
        }
    }
    // A defaults section has no stick table of its own: as in HAProxy, its `track-sc*` rules must
    // name one (`table NAME`) rather than borrow the table of whichever proxy inherits them.
    names.current_table.set(None);
    for d in &parsed.rule_defaults {
        // Checked even when no proxy inherits them; duplicates are not reported twice.
        let _ = rules::compile_proxy(d, None, &env, diags);
    }
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for (i, b) in backends.iter().enumerate() {
        by_name.entry(b.name.as_str()).or_insert(i);
    }

    let mut frontends = Vec::new();
    for (i, p) in parsed.proxies.iter().enumerate() {
        let id = proxy_id(i);
        check_timeouts(p, diags);
        if !p.kind.has_frontend() {
            continue;
        }
        if p.binds.is_empty() {
            if p.kind == SectionKind::Frontend {
                diags.push(Diagnostic::alert(
                    Some(&p.span),
                    Some(&label(p.kind, &p.name)),
                    "no 'bind' line: a frontend needs at least one listening address (declare it as a backend if that was intended)",
                ));
            }
            continue;
        }
        let own = if p.kind == SectionKind::Listen {
            backend_of[i]
        } else {
            None
        };
        let default_backend = match &p.default_backend {
            Some(r) => resolve_backend(
                r,
                "default_backend",
                p,
                &backends,
                &by_name,
                &fe_seen,
                diags,
            ),
            None => own,
        };
        let has_use_backend = p
            .rule_lines
            .iter()
            .any(|l| l.kind == super::keywords::rules::RuleKind::UseBackend);
        if p.default_backend.is_none() && own.is_none() && !has_use_backend {
            diags.push(Diagnostic::warning(
                Some(&p.span),
                Some(&label(p.kind, &p.name)),
                "no 'default_backend' and no 'use_backend': every connection will be refused",
            ));
        }
        frontends.push(Frontend {
            name: p.name.clone(),
            id,
            mode: p.mode,
            binds: p.binds.clone(),
            maxconn: p.maxconn,
            backlog: p.backlog,
            default_backend,
            monitor_uri: p.monitor_uri.clone(),
            rules: proxy_rules[i].clone(),
            timeouts: p.timeouts,
            options: with_capture_slots(&p.options, &proxy_rules[i]),
            errorfiles: error_pages[i].clone(),
            logs: expand_logs(&p.logs, &global.logs),
            disabled: p.disabled,
            table: table_of[i],
            formats: Arc::new(formats::compile(p, &names, diags)),
            rate_limit_sessions: p.rate_limit_sessions,
        });
    }
    // A backend's `unique-id-format`, for its errors (the frontend's is the one used).
    for p in parsed.proxies.iter().filter(|p| !p.kind.has_frontend()) {
        formats::compile(p, &names, diags);
    }
    servers::resolve_tracks(&parsed.proxies, &backend_of, &mut backends, diags);
    // Servers that rules point to (a sample fetch's `BE/SRV`, `use-server`) stay for the life
    // of the process: `del server` refuses them, as HAProxy does.
    for (b, s) in names.referenced.take() {
        if let Some(srv) = backends.get_mut(b).and_then(|be| be.servers.get_mut(s)) {
            srv.pinned = true;
        }
    }
    for be in &mut backends {
        for u in &be.rules.use_servers {
            if let Some(srv) = be.servers.get_mut(u.action) {
                srv.pinned = true;
            }
        }
    }
    let vars = names.vars.into_inner();
    let pat_files = Arc::new(names.pat_files.into_inner());
    let proc_vars = crate::rules::proc_vars::initial(
        &proc_lines,
        vars.iter()
            .enumerate()
            .filter(|(_, v)| v.0 == crate::rules::Scope::Proc)
            .map(|(i, _)| i),
        &global.env,
    );
    let rings: Vec<crate::config::model::Ring> =
        parsed.rings.iter().map(|r| r.ring.clone()).collect();
    let log_forwards: Vec<crate::config::model::LogForward> = parsed
        .log_forwards
        .iter()
        .map(|f| crate::config::model::LogForward {
            name: f.name.clone(),
            binds: f.binds.clone(),
            dgram_binds: f.dgram_binds.clone(),
            logs: f.logs.clone(),
            maxconn: f.maxconn,
            timeout_client: f.timeout_client,
        })
        .collect();
    // `log ring@NAME` names a ring section (which may come later in the file).
    let mut named = Vec::new();
    named.extend(global.logs.iter().map(|t| (t, "global".to_string())));
    for f in &frontends {
        named.extend(f.logs.iter().map(|t| (t, format!("frontend '{}'", f.name))));
    }
    for b in &backends {
        named.extend(b.logs.iter().map(|t| (t, format!("backend '{}'", b.name))));
    }
    for f in &log_forwards {
        named.extend(
            f.logs
                .iter()
                .map(|t| (t, format!("log-forward '{}'", f.name))),
        );
    }
    let mut reported = Vec::new();
    for (t, section) in named {
        if let crate::config::model::LogAddress::Ring(name) = &t.address {
            if !rings.iter().any(|r| &r.name == name) && !reported.contains(name) {
                reported.push(name.clone());
                diags.push(Diagnostic::alert(
                    None,
                    Some(&section),
                    format!("log target 'ring@{name}': no ring section named '{name}'"),
                ));
            }
        }
    }
    for f in &parsed.log_forwards {
        if f.binds.is_empty() && f.dgram_binds.is_empty() {
            diags.push(Diagnostic::warning(
                Some(&f.span),
                Some(&format!("log-forward '{}'", f.name)),
                "no 'bind' or 'dgram-bind': it receives nothing",
            ));
        }
    }
    Config {
        global,
        frontends,
        backends,
        userlists,
        vars,
        proc_vars,
        tables,
        peers,
        rings,
        log_forwards,
        pat_files,
    }
}

/// The backend's `cookie`, in HTTP mode; HAProxy ignores it in TCP mode, with a warning per
/// server that has a cookie.
fn cookie_of(
    p: &ProxyDraft,
    diags: &mut Vec<Diagnostic>,
) -> Option<crate::config::model::CookiePersist> {
    if p.mode != Mode::Http {
        for s in p.servers.iter().filter(|s| s.cookie.is_some()) {
            diags.push(Diagnostic::warning(
                Some(&p.span),
                Some(&label(p.kind, &p.name)),
                format!(
                    "ignoring cookie for server '{}' as HTTP mode is disabled",
                    s.name
                ),
            ));
        }
        return None;
    }
    let (c, span) = p.cookie.as_ref()?;
    if c.dynamic && p.dynamic_cookie_key.is_none() {
        diags.push(Diagnostic::warning(
            Some(span),
            Some(&label(p.kind, &p.name)),
            "'cookie ... dynamic' without 'dynamic-cookie-key': servers without a 'cookie' get none, as in HAProxy",
        ));
    }
    Some(c.clone())
}

/// Collects the stick tables: one per proxy that has a `stick-table` line, named after it, so
/// a frontend and a backend of one name cannot both have one (HAProxy: the names conflict);
/// then the `table` lines of `peers` sections, named `SECTION/NAME`. Says what the peers
/// sections do ([`peers_support`]) and ties each replicated table to its section. Returns
/// the tables, per proxy the index of its own, and the sections that replicate.
fn stick_tables(
    proxies: &[ProxyDraft],
    peers: &[crate::config::keywords::peers::PeersDraft],
    local_peer: &str,
    diags: &mut Vec<Diagnostic>,
) -> (
    Vec<crate::config::model::StickTable>,
    Vec<Option<usize>>,
    Vec<crate::config::model::PeersSync>,
) {
    let mut tables: Vec<crate::config::model::StickTable> = Vec::new();
    let mut declared: HashMap<&str, (usize, &Span, SectionKind)> = HashMap::new();
    let mut table_of = Vec::new();
    // Each section's replication, if it has one (by section index).
    let syncs: Vec<Option<crate::config::model::PeersSync>> = peers
        .iter()
        .map(|section| peers_support(section, local_peer, diags))
        .collect();
    let mut sync_index: Vec<Option<usize>> = Vec::new();
    let mut active = Vec::new();
    for s in syncs {
        sync_index.push(s.as_ref().map(|_| active.len()));
        active.extend(s);
    }
    let sync_of = |section: &str| {
        peers
            .iter()
            .position(|s| s.name == section)
            .and_then(|i| sync_index[i])
    };
    for p in proxies {
        let Some(line) = &p.stick_table else {
            table_of.push(None);
            continue;
        };
        if let Some((_, span, kind)) = declared.get(p.name.as_str()) {
            diags.push(Diagnostic::alert(
                Some(&line.span),
                Some(&label(p.kind, &p.name)),
                format!(
                    "stick-table name '{}' conflicts with the table declared in {} at {span}",
                    p.name,
                    label(*kind, &p.name)
                ),
            ));
            table_of.push(None);
            continue;
        }
        if let Some(section) = &line.peers {
            if !peers.iter().any(|s| &s.name == section) {
                let hint = suggest(section, peers.iter().map(|s| s.name.as_str()));
                diags.push(
                    Diagnostic::alert(
                        Some(&line.span),
                        Some(&label(p.kind, &p.name)),
                        format!(
                            "stick-table: 'peers {section}': no peers section named '{section}'"
                        ),
                    )
                    .with_hint(hint),
                );
            }
        }
        declared.insert(&p.name, (tables.len(), &line.span, p.kind));
        table_of.push(Some(tables.len()));
        tables.push(crate::config::model::StickTable {
            name: p.name.clone(),
            spec: line.spec.clone(),
            peers: line
                .peers
                .as_deref()
                .and_then(sync_of)
                .map(|i| (i, p.name.clone())),
        });
    }
    let mut spans: Vec<&Span> = proxies
        .iter()
        .filter_map(|p| p.stick_table.as_ref())
        .filter(|l| declared.values().any(|(_, span, _)| *span == &l.span))
        .map(|l| &l.span)
        .collect();
    for section in peers {
        for (name, line) in &section.tables {
            spans.push(&line.span);
            tables.push(crate::config::model::StickTable {
                name: format!("{}/{name}", section.name),
                spec: line.spec.clone(),
                // haproxy names such a table "/NAME" on the wire (the section's name is cut
                // from "SECTION/NAME", not its slash).
                peers: sync_of(&section.name).map(|i| (i, format!("/{name}"))),
            });
        }
    }
    // Declaration order, wherever the table was declared (`show table` lists them in reverse,
    // as haproxy does).
    let mut order: Vec<usize> = (0..tables.len()).collect();
    order.sort_by_key(|&i| spans[i]);
    let mut new_index = vec![0; tables.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let mut slots: Vec<Option<crate::config::model::StickTable>> =
        tables.into_iter().map(Some).collect();
    let tables = order.iter().filter_map(|&i| slots[i].take()).collect();
    let table_of = table_of
        .into_iter()
        .map(|t| t.map(|i| new_index[i]))
        .collect();
    (tables, table_of, active)
}

/// Says what a `peers` section does here, and returns its replication when it has remote
/// peers. Its tables always work in this process. Without a peer named after the local peer
/// (`-L`, `localpeer`, else the host name) haproxy 2.6 removes the section's replication
/// with a warning and keeps its tables: so does Bascule. With remote peers, the local peer
/// listens and connects to them (HAProxy's peers protocol, [`crate::peers`]); the local peer
/// alone is accepted with a warning, since the tables are not handed over to the next
/// process on a reload yet.
fn peers_support(
    section: &crate::config::keywords::peers::PeersDraft,
    local_peer: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<crate::config::model::PeersSync> {
    let label = label(SectionKind::Peers, &section.name);
    if section.disabled {
        return None;
    }
    let Some(local) = section.peers.iter().find(|p| p.name == local_peer) else {
        diags.push(Diagnostic::warning(
            Some(&section.span),
            Some(&label),
            format!(
                "Removing incomplete section 'peers {}' (no peer named '{local_peer}'); its tables are kept",
                section.name
            ),
        ));
        return None;
    };
    let bound = match (&local.addr, &section.bind) {
        (_, Some((addr, span))) => Some((addr, span)),
        (Some(addr), None) => Some((addr, &local.span)),
        (None, None) => None,
    };
    let listen = match bound {
        Some((addr, span)) => match crate::config::keywords::bind::listen_addresses(addr) {
            Ok(mut a)
                if a.len() == 1 && !matches!(a[0], crate::config::model::ListenAddr::Unix(_)) =>
            {
                Some(a.remove(0))
            }
            Ok(_) => {
                diags.push(Diagnostic::alert(
                    Some(span),
                    Some(&label),
                    format!("the local peer's address '{addr}' must be one IP:PORT or fd@N"),
                ));
                None
            }
            Err(e) => {
                diags.push(Diagnostic::alert(Some(span), Some(&label), e));
                None
            }
        },
        None => {
            diags.push(Diagnostic::alert(
                Some(&local.span),
                Some(&label),
                format!(
                    "the local peer '{}' has no address: give it one ('server {} ADDR:PORT') or add a 'bind ADDR:PORT' line",
                    local.name, local.name
                ),
            ));
            None
        }
    };
    let mut remotes = Vec::new();
    for p in section.peers.iter().filter(|p| p.name != local_peer) {
        let Some(addr) = &p.addr else {
            diags.push(Diagnostic::alert(
                Some(&p.span),
                Some(&label),
                format!(
                    "remote peer '{}' has no address (only the local peer, '{local_peer}', may omit it)",
                    p.name
                ),
            ));
            continue;
        };
        match crate::config::keywords::bind::expand_address(addr) {
            Ok(a) if a.len() == 1 => remotes.push((p.name.clone(), a[0])),
            Ok(_) => diags.push(Diagnostic::alert(
                Some(&p.span),
                Some(&label),
                format!("remote peer '{}': '{addr}' must be one IP:PORT", p.name),
            )),
            Err(e) => diags.push(Diagnostic::alert(
                Some(&p.span),
                Some(&label),
                format!("remote peer '{}': {e}", p.name),
            )),
        }
    }
    if section.peers.iter().all(|p| p.name == local_peer) {
        diags.push(Diagnostic::warning(
            Some(&local.span),
            Some(&label),
            format!(
                "local peer '{}': the tables' entries are not handed over to the next process on a reload yet, as haproxy does (see docs/SCALE-OUT.md); the tables work in this process",
                local.name
            ),
        ));
        return None;
    }
    Some(crate::config::model::PeersSync {
        name: section.name.clone(),
        local: local.name.clone(),
        listen: listen?,
        remotes,
    })
}

/// Resolves the `table NAME` argument of a rule or fetch (later: `track-sc0 src table NAME`,
/// `sc_http_req_rate(0,NAME)`) to an index into `tables`, with a did-you-mean.
pub fn resolve_table(
    name: &str,
    tables: &[crate::config::model::StickTable],
) -> Result<usize, (String, Option<String>)> {
    tables.iter().position(|t| t.name == name).ok_or_else(|| {
        (
            format!("no stick table named '{name}' (a table is declared by a proxy's 'stick-table' line, or as PEERS/NAME by a 'table' line of a peers section)"),
            suggest(name, tables.iter().map(|t| t.name.as_str())),
        )
    })
}

/// Rejects what parses but the runtime cannot do yet, so nothing is silently ignored.
/// A frontend's options with its whole capture list: the request slots in HAProxy's numbering
/// (the rules added some, see [`crate::config::model::ProxyRules::req_captures`]), then the
/// response ones. The runtime numbers slots by their place in this list.
fn with_capture_slots(
    o: &crate::config::model::ProxyOptions,
    rules: &crate::config::model::ProxyRules,
) -> crate::config::model::ProxyOptions {
    let mut o = o.clone();
    let res = o.captures.iter().filter(|c| c.response).cloned();
    o.captures = rules.req_captures.iter().cloned().chain(res).collect();
    o
}

fn check_runtime_support(p: &ProxyDraft, diags: &mut Vec<Diagnostic>) {
    let section = label(p.kind, &p.name);
    let http_only = match p.balance {
        Balance::Uri { .. } => Some("uri"),
        Balance::UrlParam { .. } => Some("url_param"),
        Balance::Hdr { .. } => Some("hdr"),
        _ => None,
    };
    if let (true, Mode::Tcp, Some(algo)) = (p.kind.has_backend(), p.mode, http_only) {
        diags.push(Diagnostic::alert(
            Some(&p.span),
            Some(&section),
            format!("'balance {algo}' needs 'mode http': a TCP backend has no request to hash"),
        ));
    }
    // HAProxy's own check: an HTTP multiplexer serves HTTP-mode proxies only.
    if p.mode == Mode::Tcp {
        let mut lines: Vec<&str> = p
            .binds
            .iter()
            .filter(|b| b.proto.is_some())
            .map(|b| b.location.as_str())
            .collect();
        lines.dedup();
        for location in lines {
            diags.push(Diagnostic::alert(
                Some(&span_of(location, p)),
                Some(&section),
                "'bind ... proto': an HTTP MUX protocol is not usable in 'mode tcp'",
            ));
        }
        for s in p.servers.iter().filter(|s| s.proto.is_some()) {
            diags.push(Diagnostic::alert(
                Some(&span_of(&s.location, p)),
                Some(&section),
                format!(
                    "'server {}': 'proto': an HTTP MUX protocol is not usable in 'mode tcp'",
                    s.name
                ),
            ));
        }
    }
}

/// Proxy ids (`iid` in `show stat`, `be_id` in `show servers state`), numbered as HAProxy
/// numbers them: an `id N` line gives its own (two proxies with one id are an error); the
/// others, in declaration order, take the first id not given explicitly from a counter that
/// every proxy moves on by one. With a `stats socket`, HAProxy's own CLI proxy ("GLOBAL", id
/// 0) comes first and moves the counter too, so automatic ids start at 2.
fn proxy_ids(proxies: &[ProxyDraft], cli: bool, diags: &mut Vec<Diagnostic>) -> Vec<u32> {
    let mut used: HashMap<u32, &ProxyDraft> = HashMap::new();
    for p in proxies {
        let Some(id) = p.id else { continue };
        if let Some(first) = used.get(&id) {
            diags.push(Diagnostic::alert(
                Some(&p.span),
                Some(&label(p.kind, &p.name)),
                format!(
                    "proxy {} reuses same custom id as proxy {} (declared at {})",
                    p.name, first.name, first.span
                ),
            ));
        } else {
            used.insert(id, p);
        }
    }
    let mut next = if cli { 2 } else { 1 };
    let mut ids = Vec::with_capacity(proxies.len());
    for p in proxies {
        let id = match p.id {
            Some(id) => id,
            None => {
                while used.contains_key(&next) {
                    next += 1;
                }
                next
            }
        };
        ids.push(id);
        next += 1;
    }
    ids
}

/// The span of a server, from its recorded `file:line` location (same file as its proxy).
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

#[cfg(test)]
mod tests {
    use super::*;

    fn line(auto: bool, threads: ThreadSel, cpus: &[usize]) -> CpuMapLine {
        CpuMapLine {
            span: Span {
                file_index: 0,
                file: "t".into(),
                line: 1,
            },
            auto,
            threads,
            cpus: cpus.to_vec(),
        }
    }

    #[test]
    fn cpu_maps_expand() {
        let mut d = Vec::new();
        let got = resolve_cpu_maps(
            &[
                line(false, ThreadSel::All, &[0, 1]),
                line(false, ThreadSel::Set(vec![1]), &[0]),
                line(true, ThreadSel::Set(vec![3, 4]), &[2, 3]),
            ],
            Some(4),
            &mut d,
        );
        assert!(d.is_empty());
        assert_eq!(
            got,
            vec![
                CpuMap {
                    thread: 0,
                    cpus: vec![0]
                },
                CpuMap {
                    thread: 1,
                    cpus: vec![0, 1]
                },
                CpuMap {
                    thread: 2,
                    cpus: vec![2]
                },
                CpuMap {
                    thread: 3,
                    cpus: vec![3]
                },
            ]
        );
        let bad = resolve_cpu_maps(
            &[line(true, ThreadSel::Set(vec![1, 2]), &[0])],
            None,
            &mut d,
        );
        assert!(bad.is_empty());
        assert_eq!(d.len(), 1);
    }
}
