//! Running the stick-table actions of a rule list: `track-sc0|1|2` and the `sc-*` actions,
//! for both session kinds (the HTTP executor and TCP-mode rules call these).
//!
//! What is counted where is in [`crate::stick::track`]; this module only evaluates the key
//! and finds or creates its entry (one shard lock of the table), then hands the entry to the
//! session's [`Trackers`].

use crate::rules::stick::{sample_key, TrackSc};
use crate::rules::Eval;
use crate::stick::track::{count, Event, Level, Trackers};

use super::facts::Facts;

/// `track-scN KEY [table T]` at `level`. Nothing happens when the slot is already tracked,
/// the key does not fetch or does not fit the table's type, or the table is full of entries
/// in use. `http`: the stream is an HTTP transaction, whose request is counted on an entry
/// tracked after the count point (see [`Trackers::count_request`]).
pub fn track(
    t: &TrackSc,
    f: &Facts<'_>,
    trackers: &Trackers,
    level: Level,
    ev: &mut Eval,
    http: bool,
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
    }
}
