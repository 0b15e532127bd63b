//! `server ... track [BACKEND/]SERVER`: a server with no check of its own whose state follows
//! another's (the tracked server, itself checked, or tracking a third one).
//!
//! As in HAProxy, the tracked server pushes each change to its trackers when it happens:
//! operational ones (UP, DOWN, stopping: [`follow_op`]) and administrative ones (maintenance
//! and drain, which trackers inherit as `IMAINT`/`IDRAIN`: [`change_admin`]), each logged in
//! HAProxy's words ("Server be/s3 is DOWN via be/s2", "... is going DOWN for maintenance via
//! be/s2"); a tracker passes them on to its own trackers, depth first. A tracker's state is
//! then ordinary server state (`up`, the admin flags), which every worker's picker reads at
//! its next pick as for any server: the data path looks nothing up and takes no lock.
//!
//! Who tracks whom is in each server's configuration (`model::Server::track`, resolved at load
//! or by `add server`); a server's trackers are found by scanning the backends, since changes
//! are rare, in HAProxy's order: the server that started tracking last comes first. Changes run
//! on the main thread (checks, agents and the stats socket all do), one at a time.

use std::sync::atomic::Ordering;

use super::health::{log_admin, log_state, AdminStep, OpState};
use super::server::{admin, ServerState};
use super::{AdminChange, Backend};

/// Sends a line (backend index, level, text) to a backend's log targets.
pub type LogFn<'a> = &'a dyn Fn(usize, u8, &str);

/// The live servers tracking server `s` of backend `b`, latest tracker first, as HAProxy's
/// list of trackers (servers added at run time by arrival, then configured ones in reverse
/// file order).
pub fn trackers(backends: &[Backend], b: usize, s: usize) -> Vec<(usize, usize)> {
    let mut found: Vec<(u64, usize, usize)> = Vec::new();
    for (tb, be) in backends.iter().enumerate() {
        for (ts, srv) in be.servers.live() {
            if srv.config.track == Some((b, s)) {
                found.push((srv.track_seq, tb, ts));
            }
        }
    }
    found.sort_unstable_by(|x, y| y.cmp(x));
    found.into_iter().map(|(_, tb, ts)| (tb, ts)).collect()
}

/// More links than any tracking chain has (a guard for [`reference`]).
const MAX_CHAIN: u32 = 1 << 20;

/// The server `srv` tracks, directly.
fn tracked<'a>(backends: &'a [Backend], srv: &ServerState) -> Option<&'a ServerState> {
    let (b, s) = srv.config.track?;
    backends.get(b)?.servers.get(s)
}

/// `BE/SRV` of the server `srv` tracks.
pub fn via_name(backends: &[Backend], srv: &ServerState) -> Option<String> {
    let (b, s) = srv.config.track?;
    let be = backends.get(b)?;
    Some(format!(
        "{}/{}",
        be.config.name,
        be.servers.get(s)?.config.name
    ))
}

/// The end of the tracking chain from `srv` (the server whose checks decide), `srv` itself when
/// it tracks none: `show stat` reads its health.
pub fn reference<'a>(backends: &'a [Backend], srv: &'a ServerState) -> &'a ServerState {
    let mut cur = srv;
    // A chain never loops (the configuration refuses it, and no server may track one added at
    // run time); the bound is only a guard.
    let mut hops = 0u32;
    while let Some(next) = tracked(backends, cur) {
        cur = next;
        hops += 1;
        if hops >= MAX_CHAIN {
            break;
        }
    }
    cur
}

/// Whether the server `srv` tracks is UP and out of maintenance (true when it tracks none):
/// what `srv` becomes when it leaves maintenance.
fn tracked_up(backends: &[Backend], srv: &ServerState) -> bool {
    tracked(backends, srv).is_none_or(|t| t.usable())
}

/// The inherited flags a server's trackers take from its admin flags.
fn inherited(flags: u8) -> u8 {
    (if flags & admin::MAINT != 0 {
        admin::IMAINT
    } else {
        0
    }) | (if flags & admin::DRAIN != 0 {
        admin::IDRAIN
    } else {
        0
    })
}

/// Sets the inherited flags of every tracking server from the start-up state (a tracked server
/// declared `disabled` or without an address puts its trackers in maintenance), silently, as
/// HAProxy does while starting.
pub fn init(backends: &[Backend]) {
    // Chains are short; each pass settles one more link.
    loop {
        let mut changed = false;
        for be in backends {
            for (ts, t) in be.servers.live() {
                let Some(src) = tracked(backends, t) else {
                    continue;
                };
                let want = inherited(src.admin.load(Ordering::Relaxed));
                let cur = t.admin.load(Ordering::Relaxed) & (admin::IMAINT | admin::IDRAIN);
                if want != cur {
                    be.change_admin_following(ts, want & !cur, cur & !want, src.usable());
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
}

/// An administrative change of server `s` of backend `b` (the operator, an agent): applies
/// it with HAProxy's transitions (a tracking server leaving maintenance comes back only if
/// the server it tracks is UP), logs it, and passes the inherited maintenance or drain on to
/// its trackers. Returns what happened to `s` itself; the trackers that came back UP are
/// added to `came_up` (their `slowstart` ramps are the caller's).
pub fn change_admin(
    backends: &[Backend],
    b: usize,
    s: usize,
    set: u8,
    clear: u8,
    log: LogFn<'_>,
    came_up: &mut Vec<(usize, usize)>,
) -> AdminChange {
    let be = &backends[b];
    let srv = &be.servers[s];
    let before = srv.admin.load(Ordering::Relaxed);
    let was_up = srv.up.load(Ordering::Relaxed);
    let was_stopping = srv.stopping.load(Ordering::Relaxed);
    let change = be.change_admin_following(s, set, clear, tracked_up(backends, srv));
    if change == AdminChange::None {
        return change;
    }
    let after = srv.admin.load(Ordering::Relaxed);
    let via = via_name(backends, srv);
    let step = AdminStep {
        before,
        after,
        was_up,
        was_stopping,
        via: via.as_deref(),
    };
    log_admin(be, s, step, &|level, text| log(b, level, text));
    // HAProxy stops going down the chain where the inherited state does not change.
    let want = inherited(after);
    if want != inherited(before) {
        for (tb, ts) in trackers(backends, b, s) {
            let t = &backends[tb].servers[ts];
            let cur = t.admin.load(Ordering::Relaxed) & (admin::IMAINT | admin::IDRAIN);
            if cur != want {
                let c = change_admin(backends, tb, ts, want & !cur, cur & !want, log, came_up);
                if c == AdminChange::LeftMaint && t.usable() {
                    came_up.push((tb, ts));
                }
            }
        }
    }
    change
}

/// After an operational change of server `s` of backend `b` (a check, an agent, `set server
/// ... health`): each of its trackers that is not in maintenance takes the same state, logs
/// it ("is DOWN via BE/SRV"), and passes it on to its own trackers. The trackers that came UP
/// are added to `came_up`.
pub fn follow_op(
    backends: &[Backend],
    b: usize,
    s: usize,
    log: LogFn<'_>,
    came_up: &mut Vec<(usize, usize)>,
) {
    let src = &backends[b].servers[s];
    let up = src.usable();
    let stopping = up && src.stopping.load(Ordering::Relaxed);
    let via = format!(" via {}/{}", backends[b].config.name, src.config.name);
    for (tb, ts) in trackers(backends, b, s) {
        let be = &backends[tb];
        let t = &be.servers[ts];
        if t.in_maint() {
            continue;
        }
        let was_up = t.up.load(Ordering::Relaxed);
        let was_stopping = was_up && t.stopping.load(Ordering::Relaxed);
        if was_up == up && was_stopping == stopping {
            continue;
        }
        t.stopping.store(stopping, Ordering::Relaxed);
        t.up.store(up, Ordering::Relaxed);
        t.changed();
        let state = match (up, stopping) {
            (false, _) => {
                t.check.downs.fetch_add(1, Ordering::Relaxed);
                OpState::Down
            }
            (true, true) => OpState::Stopping,
            (true, false) => {
                if !was_up {
                    came_up.push((tb, ts));
                }
                OpState::Up
            }
        };
        let draining = was_stopping || t.draining();
        log_state(be, ts, state, &via, draining, &|level, text| {
            log(tb, level, text)
        });
        follow_op(backends, tb, ts, log, came_up);
    }
}

/// Resolves the `track` word of a server added at run time to backend `b` (`add server ...
/// track [BACKEND/]SERVER`), with HAProxy's refusals; the tracked server is pinned (`del
/// server` refuses it from then on) once the caller adds the tracker.
pub fn resolve_dynamic(
    backends: &[Backend],
    b: usize,
    word: &str,
) -> Result<(usize, usize), String> {
    let (tb, sname) = match word.rsplit_once('/') {
        Some((px, sv)) => match backends.iter().position(|x| x.config.name == px) {
            Some(tb) => (tb, sv),
            None => {
                return Err(format!(
                    "unable to find required proxy '{px}' for tracking."
                ))
            }
        },
        None => (b, word),
    };
    let be = &backends[tb];
    let ts = be
        .servers
        .find(sname)
        .ok_or_else(|| format!("unable to find required server '{sname}' for tracking."))?;
    let t = &be.servers[ts];
    let name = format!("{}/{}", be.config.name, t.config.name);
    if t.dynamic {
        return Err(format!(
            "unable to use {name} for tracking as it is a dynamic server."
        ));
    }
    if t.config.check.is_none() && t.config.agent.is_none() && t.config.track.is_none() {
        return Err(format!(
            "unable to use {name} for tracking as it does not have any check nor agent enabled."
        ));
    }
    Ok((tb, ts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    fn backends(cfg: &str) -> Vec<Backend> {
        let text = format!(
            "defaults\n  timeout connect 1s\n  timeout client 1s\n  timeout server 1s\n{cfg}"
        );
        let c = crate::config::load_str("t.cfg", &text).unwrap().config;
        let bes: Vec<Backend> = c.backends.into_iter().map(|b| Backend::new(b, 1)).collect();
        init(&bes);
        bes
    }

    #[test]
    fn trackers_follow_state_and_maintenance_in_haproxy_order() {
        let bes = backends(
            "backend b\n  server s 127.0.0.1:1 check\n  server t1 127.0.0.1:2 track s\n  server t2 127.0.0.1:3 track s\n  server u 127.0.0.1:4 track t1\n",
        );
        assert_eq!(trackers(&bes, 0, 0), [(0, 2), (0, 1)]);
        assert!(std::ptr::eq(
            reference(&bes, &bes[0].servers[3]),
            &bes[0].servers[0]
        ));
        let lines = RefCell::new(Vec::new());
        let log = |_b: usize, _l: u8, t: &str| lines.borrow_mut().push(t.to_string());
        // The check says DOWN: every tracker follows, the chain too.
        bes[0].servers[0].up.store(false, Ordering::Relaxed);
        follow_op(&bes, 0, 0, &log, &mut Vec::new());
        assert!((1..4).all(|i| !bes[0].servers[i].up.load(Ordering::Relaxed)));
        let got = lines.take();
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[3], "backend b has no server available!");
        assert!(
            got[0].starts_with("Server b/t2 is DOWN via b/s. "),
            "{got:?}"
        );
        assert!(
            got[1].starts_with("Server b/t1 is DOWN via b/s. "),
            "{got:?}"
        );
        assert!(
            got[2].starts_with("Server b/u is DOWN via b/t1. 0 active"),
            "{got:?}"
        );
        bes[0].servers[0].up.store(true, Ordering::Relaxed);
        let mut up = Vec::new();
        follow_op(&bes, 0, 0, &log, &mut up);
        assert!((0..4).all(|i| bes[0].servers[i].usable()));
        // The caller starts their `slowstart` ramps.
        assert_eq!(up, [(0, 2), (0, 1), (0, 3)]);
        lines.take();
        // Maintenance is inherited down the chain, and leaving it brings them back.
        change_admin(&bes, 0, 0, admin::FMAINT, 0, &log, &mut Vec::new());
        assert_eq!(
            bes[0].servers[3].admin.load(Ordering::Relaxed),
            admin::IMAINT
        );
        let got = lines.take();
        assert_eq!(
            got.iter()
                .filter_map(|l| l.find('.').map(|i| &l[..i]))
                .collect::<Vec<_>>(),
            [
                "Server b/s is going DOWN for maintenance",
                "Server b/t2 is going DOWN for maintenance via b/s",
                "Server b/t1 is going DOWN for maintenance via b/s",
                "Server b/u is going DOWN for maintenance via b/t1",
            ]
        );
        // A tracker in forced maintenance stays there; the others come back.
        change_admin(&bes, 0, 1, admin::FMAINT, 0, &log, &mut Vec::new());
        let mut up = Vec::new();
        change_admin(&bes, 0, 0, 0, admin::FMAINT, &log, &mut up);
        assert_eq!(up, [(0, 2)]);
        assert!(bes[0].servers[2].usable());
        assert!(bes[0].servers[1].in_maint());
        assert!(bes[0].servers[3].in_maint());
        let got = lines.take();
        assert_eq!(
            got[0],
            "Server b/s is UP/READY (leaving forced maintenance)."
        );
        assert_eq!(got[1], "Server b/t2 is UP/READY (leaving maintenance).");
        assert_eq!(got[2], "Server b/t1 remains in forced maintenance.");
        // Leaving forced maintenance while the tracked server is DOWN: DOWN.
        bes[0].servers[0].up.store(false, Ordering::Relaxed);
        follow_op(&bes, 0, 0, &log, &mut Vec::new());
        lines.take();
        change_admin(&bes, 0, 1, 0, admin::FMAINT, &log, &mut Vec::new());
        assert!(!bes[0].servers[1].up.load(Ordering::Relaxed));
        assert_eq!(
            lines.take()[0],
            "Server b/t1 is DOWN/READY (leaving forced maintenance)."
        );
    }

    #[test]
    fn a_disabled_tracked_server_starts_its_trackers_in_maintenance() {
        let bes = backends(
            "backend b\n  server s 127.0.0.1:1 check disabled\n  server t 127.0.0.1:2 track s\n",
        );
        let t = &bes[0].servers[1];
        assert_eq!(t.admin.load(Ordering::Relaxed), admin::IMAINT);
        assert!(!t.usable());
        assert_eq!(via_name(&bes, t).as_deref(), Some("b/s"));
    }

    #[test]
    fn added_servers_track_only_checked_configured_ones() {
        let bes = backends("backend b\n  server s 127.0.0.1:1 check\n  server n 127.0.0.1:2\n");
        assert_eq!(resolve_dynamic(&bes, 0, "s"), Ok((0, 0)));
        assert_eq!(
            resolve_dynamic(&bes, 0, "b/n"),
            Err(
                "unable to use b/n for tracking as it does not have any check nor agent enabled."
                    .into()
            )
        );
        assert_eq!(
            resolve_dynamic(&bes, 0, "x/s"),
            Err("unable to find required proxy 'x' for tracking.".into())
        );
        let mut added = bes[0].config.servers[0].clone();
        added.name = "d".into();
        added.check = None;
        added.track = Some((0, 0));
        let i = bes[0].add_server(added).unwrap();
        assert_eq!(
            resolve_dynamic(&bes, 0, "d"),
            Err("unable to use b/d for tracking as it is a dynamic server.".into())
        );
        // The latest tracker comes first.
        assert_eq!(trackers(&bes, 0, 0), [(0, i)]);
    }
}
