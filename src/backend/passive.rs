//! Passive health, fed from the data path: what live traffic says about a server (`observe`,
//! `on-error`, `error-limit`, and Bascule's `outlier-ejection`).
//!
//! A connect outcome (layer 4) or a response status (layer 7) bumps or clears a count on the
//! server's state with one atomic operation. At the limit, `on-error mark-down` marks the
//! server DOWN at once; the other actions leave a verdict in [`ServerState::passive`](super::server::ServerState::passive) that the
//! server's checker applies on its next round. So the connector and the HTTP session call
//! down into this module and the server state, never into the checker.

use std::sync::atomic::Ordering;

use super::health::{log_change, Verdict};
use super::server::{Outcome, PASSIVE_FAIL_CHECK, PASSIVE_FASTINTER, PASSIVE_SUDDEN_DEATH};
use super::Backend;
use crate::base::clock;
use crate::config::model::{Observe, OnError};

/// `outlier-ejection` (Bascule extension, after Envoy's outlier detection): count consecutive
/// live errors; at the threshold, eject the server for a while unless too many already are.
fn outlier(
    be: &Backend,
    server: usize,
    outcome: Outcome,
    o: crate::config::model::OutlierEjection,
) {
    let state = &be.servers[server];
    let http = be.config.mode == crate::config::model::Mode::Http;
    match outcome {
        Outcome::Layer4Error | Outcome::Layer7Error => {}
        // In HTTP a connect succeeding says nothing yet: only a good answer clears the count.
        Outcome::Layer7Ok | Outcome::Layer4Ok if !(http && outcome == Outcome::Layer4Ok) => {
            state.outlier_errors.store(0, Ordering::Relaxed);
            return;
        }
        _ => return,
    }
    let n = state.outlier_errors.fetch_add(1, Ordering::Relaxed) + 1;
    if n < o.consecutive || state.is_ejected() {
        return;
    }
    state.outlier_errors.store(0, Ordering::Relaxed);
    let total = be.servers.live().count();
    let ejected = be.servers.iter().filter(|s| s.is_ejected()).count();
    let allowed = (total * o.max_percent as usize / 100).max(1);
    if ejected >= allowed {
        return;
    }
    let until = clock::uptime_ms() + o.ejection_time.as_millis() as u64;
    state
        .ejected_until_ms
        .store(until.max(1), Ordering::Relaxed);
    eprintln!(
        "[WARNING] Server {}/{} ejected as an outlier after {n} consecutive errors, for {} ms ({} of {total} servers ejected).",
        be.config.name,
        state.config.name,
        o.ejection_time.as_millis(),
        ejected + 1
    );
}

/// Passive health: records what live traffic said about a server with `observe`, and after
/// `error-limit` consecutive errors applies `on-error`. Called from the data path: a couple of
/// atomic operations, and nothing at all for servers without `observe`.
pub fn observe(be: &Backend, server: usize, outcome: Outcome) {
    let state = &be.servers[server];
    if let Some(o) = be.config.outlier {
        outlier(be, server, outcome, o);
    }
    let Some(level) = state.config.observe else {
        return;
    };
    // A layer-4 observer judges connections only; a layer-7 one also judges responses, and
    // only a good response clears its count.
    match (level, outcome) {
        (_, Outcome::Layer4Error) | (Observe::Layer7, Outcome::Layer7Error) => {}
        (Observe::Layer4, Outcome::Layer4Ok) | (Observe::Layer7, Outcome::Layer7Ok) => {
            state.live_errors.store(0, Ordering::Relaxed);
            return;
        }
        _ => return,
    }
    let n = state.live_errors.fetch_add(1, Ordering::Relaxed) + 1;
    if n < state.config.error_limit {
        return;
    }
    state.live_errors.store(0, Ordering::Relaxed);
    match state.config.on_error {
        OnError::MarkDown => {
            if state.up.swap(false, Ordering::Relaxed) {
                state.check.health.store(0, Ordering::Relaxed);
                state.check.generation.fetch_add(1, Ordering::Release);
                state.check.downs.fetch_add(1, Ordering::Relaxed);
                state
                    .check
                    .last_change_s
                    .store(clock::uptime_secs(), Ordering::Relaxed);
                let v = Verdict {
                    info: Some(format!("{n} consecutive errors on live traffic")),
                    ..Verdict::new(false, "Health analyze")
                };
                // Passive health has no log targets at hand: stderr only.
                log_change(be, server, false, &v, 0, &|_, _| {});
            }
        }
        OnError::FastInter => state.passive.store(PASSIVE_FASTINTER, Ordering::Relaxed),
        OnError::FailCheck => state.passive.store(PASSIVE_FAIL_CHECK, Ordering::Relaxed),
        OnError::SuddenDeath => state.passive.store(PASSIVE_SUDDEN_DEATH, Ordering::Relaxed),
    }
}
