//! Administrative changes of a server (maintenance, drain, ready), made from the stats
//! socket (`set server ... state`, `disable server`) or the statistics page's admin form, and
//! logged as HAProxy logs them.

use std::sync::Arc;

use crate::backend::Backend;
use crate::state::Shared;

/// Applies an administrative change, logs it as HAProxy does, and starts `slowstart` when
/// the server comes back.
pub fn admin_change(shared: &Arc<Shared>, be: &Backend, i: usize, set: u8, clear: u8) {
    use crate::backend::AdminChange;
    let Some(b) = shared.backends.iter().position(|x| std::ptr::eq(x, be)) else {
        return;
    };
    let change = crate::backend::check::change_admin(shared, b, i, set, clear);
    let s = &be.servers[i];
    if change == AdminChange::LeftMaint && s.usable() {
        if let Some(ramp) = s.config.slowstart {
            tokio::spawn(crate::backend::check::slow_start(
                Arc::clone(shared),
                b,
                i,
                ramp,
            ));
        }
    }
}

/// `set server ... health up|stopping|down` (`from` "CLI") or the statistics page's forced
/// health (`from` "Web interface"): forces the operational state, logs the change as HAProxy
/// does ("... is DOWN, changed from CLI") and has the servers tracking it follow.
pub fn force_health(
    shared: &Arc<Shared>,
    be: &Backend,
    i: usize,
    up: bool,
    stopping: bool,
    from: &str,
) {
    use crate::backend::health::{log_state, OpState};
    use std::sync::atomic::Ordering::Relaxed;
    let s = &be.servers[i];
    let before = (
        s.up.load(Relaxed),
        s.up.load(Relaxed) && s.stopping.load(Relaxed),
    );
    be.force_health(i, up, stopping);
    let after = (
        s.up.load(Relaxed),
        s.up.load(Relaxed) && s.stopping.load(Relaxed),
    );
    let Some(b) = shared.backends.iter().position(|x| std::ptr::eq(x, be)) else {
        return;
    };
    if before == after || s.in_maint() {
        return;
    }
    let state = match after {
        (false, _) => OpState::Down,
        (true, true) => OpState::Stopping,
        (true, false) => OpState::Up,
    };
    let details = format!(", changed from {from}");
    log_state(be, i, state, &details, before.1, &|level, text| {
        crate::backend::check::Backends::log_event(&**shared, b, level, text)
    });
    crate::backend::check::follow(shared, b, i);
}
