//! Running the stick-table rules, for both session kinds (the HTTP executor and TCP-mode
//! sessions call these): `track-sc0|1|2`, and a backend's `stick` persistence rules.
//!
//! What is counted where is in [`crate::stick::track`]; this module only evaluates the key
//! and finds or creates its entry (one shard lock of the table), then hands the entry to the
//! session's [`Trackers`].

use crate::rules::action::Rule;
use crate::rules::stick::{sample_key, StickKind, StickRule, TrackSc};
use crate::rules::Eval;
use crate::stick::track::{count, Event, Level, Trackers};

use super::facts::Facts;

/// `track-scN KEY [table T]` at `level`. Nothing happens when the slot is already tracked,
/// the key does not fetch or does not fit the table's type, or the table is full of entries
/// in use. `http`: the stream is an HTTP transaction, whose request is counted on an entry
/// tracked after the count point (see [`Trackers::count_request`]). `status`: tracked by an
/// `http-response` rule, which counts the response's status on the new entry (4xx as an error,
/// 5xx as a failure) as HAProxy 2.6 does.
pub fn track(
    t: &TrackSc,
    f: &Facts<'_>,
    trackers: &Trackers,
    level: Level,
    ev: &mut Eval,
    http: bool,
    status: Option<u16>,
) {
    let n = usize::from(t.slot);
    if trackers.taken(n, level) {
        return;
    }
    let Some(table) = f.shared.tables.get(t.table) else {
        return;
    };
    let Some(smp) = t.key.eval(f, ev) else {
        return;
    };
    let Some(key) = sample_key(table.spec.key, smp, ev) else {
        return;
    };
    let now = crate::base::clock::uptime_ms();
    let Some(entry) = table.track(&key, now) else {
        return;
    };
    if let Some(tr) = trackers.set(n, level, t.table, table, entry, now) {
        if http && trackers.request_counted() {
            count(table, &tr.entry, Event::HttpReq, now);
        }
        match status.map(|s| (s, s / 100)) {
            Some((_, 4)) => count(table, &tr.entry, Event::HttpErr, now),
            Some((s, 5)) if s != 501 && s != 505 => count(table, &tr.entry, Event::HttpFail, now),
            _ => {}
        }
    }
}

/// Runs a backend's `stick match|on|store-request` rules over `f` (HAProxy's
/// `process_sticking_rules`): a matching rule whose key is in its table sends the stream to
/// the server stored there, if no server is `assigned` yet and that server is usable; a
/// storing rule records its key in `stores`, to be given the server once the stream has one
/// (only the first storing rule of each table, at most 8). A stored server that is down is
/// still used when `persist` (`option persist`, or a `force-persist` rule that matched), as
/// HAProxy's `sticking_rule_find_target` does. Returns the server assigned.
pub fn stick_request(
    rules: &[Rule<StickRule>],
    f: &Facts<'_>,
    ev: &mut Eval,
    mut assigned: Option<usize>,
    persist: bool,
    stores: &mut Vec<(usize, crate::stick::Key)>,
) -> Option<usize> {
    let Some(be) = f.backend.map(|b| &f.shared.backends[b]) else {
        return assigned;
    };
    let now = crate::base::clock::uptime_ms();
    for rule in rules {
        let r = &rule.action;
        if r.kind == StickKind::StoreResponse
            || (r.kind.stores_request() && stores.iter().any(|(t, _)| *t == r.table))
        {
            continue;
        }
        if !rule.cond.as_ref().is_none_or(|c| c.eval(f, ev)) {
            continue;
        }
        let Some(table) = f.shared.tables.get(r.table) else {
            continue;
        };
        let Some(key) = r
            .key
            .eval(f, ev)
            .and_then(|smp| sample_key(table.spec.key, smp, ev))
        else {
            continue;
        };
        if r.kind.matches() {
            if let Some(e) = table.get(&key, now) {
                if assigned.is_none() {
                    let stuck = if table.spec.srvkey_addr {
                        // One address printed per server: only tables with `srvkey addr`.
                        // A deleted server (`del server`) matches no entry: id 0 is no
                        // server's.
                        let servers = be.servers.iter().map(|s| {
                            if s.is_deleted() {
                                (String::new(), 0)
                            } else {
                                (s.addr.load().to_string(), s.config.id)
                            }
                        });
                        crate::rules::stick::stuck_server(&e, table, servers, now)
                    } else {
                        let servers = be.servers.iter().map(|s| {
                            if s.is_deleted() {
                                ("", 0)
                            } else {
                                (s.config.name.as_str(), s.config.id)
                            }
                        });
                        crate::rules::stick::stuck_server(&e, table, servers, now)
                    };
                    assigned = stuck.filter(|&s| persist || be.servers[s].usable());
                }
                table.touch(&e, now);
            }
        }
        if r.kind.stores_request() && stores.len() < 8 {
            stores.push((r.table, key));
        }
    }
    assigned
}

/// Runs a backend's `stick store-response` rules over `f` (the response), then gives every
/// pending store the stream's server (`server_id`, `server_key`), as HAProxy's
/// `process_store_rules` does. Empties `stores`.
pub fn stick_store(
    rules: &[Rule<StickRule>],
    f: &Facts<'_>,
    ev: &mut Eval,
    stores: &mut Vec<(usize, crate::stick::Key)>,
) {
    let (Some(be), Some(server)) = (f.backend, f.server) else {
        stores.clear();
        return;
    };
    for rule in rules {
        let r = &rule.action;
        if r.kind != StickKind::StoreResponse || stores.iter().any(|(t, _)| *t == r.table) {
            continue;
        }
        if !rule.cond.as_ref().is_none_or(|c| c.eval(f, ev)) {
            continue;
        }
        let Some(table) = f.shared.tables.get(r.table) else {
            continue;
        };
        let key = r
            .key
            .eval(f, ev)
            .and_then(|smp| sample_key(table.spec.key, smp, ev));
        if let Some(key) = key.filter(|_| stores.len() < 8) {
            stores.push((r.table, key));
        }
    }
    let state = &f.shared.backends[be].servers[server];
    let srv = &state.config;
    let now = crate::base::clock::uptime_ms();
    for (t, key) in stores.drain(..) {
        if let Some(table) = f.shared.tables.get(t) {
            if table.spec.srvkey_addr {
                let addr = state.addr.load().to_string();
                crate::rules::stick::store_server(table, &key, &addr, srv.id, now);
            } else {
                crate::rules::stick::store_server(table, &key, &srv.name, srv.id, now);
            }
        }
    }
}
