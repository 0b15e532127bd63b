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
    let change = be.change_admin(i, set, clear);
    let s = &be.servers[i];
    let name = format!("{}/{}", be.config.name, s.config.name);
    // Like HAProxy, these changes also go to the backend's log targets.
    let to_logs = |level: u8, text: &str| {
        if let Some(b) = shared.backends.iter().position(|x| std::ptr::eq(x, be)) {
            let log = &shared.backend_logs[b];
            if log.enabled() {
                log.event(&shared.log_outputs, level, text);
            }
        }
    };
    match change {
        AdminChange::None => {}
        AdminChange::EnteredMaint => {
            let (a, b) = be.usable_counts();
            let text = format!(
                "Server {name} is going DOWN for maintenance. {a} active and {b} backup servers left. {} sessions active, 0 requeued, 0 remaining in queue.",
                s.cur_conns.get()
            );
            eprintln!("[WARNING] {text}");
            to_logs(crate::log::LEVEL_ALERT, &text);
            if a + b == 0 {
                eprintln!(
                    "[ALERT] backend '{}' has no server available!",
                    be.config.name
                );
                let text = format!("backend {} has no server available!", be.config.name);
                to_logs(crate::log::LEVEL_EMERG, &text);
            }
        }
        AdminChange::LeftMaint => {
            let text = format!("Server {name} is UP/READY (leaving forced maintenance).");
            eprintln!("[WARNING] {text}");
            to_logs(crate::log::LEVEL_NOTICE, &text);
            if let (Some(ramp), Some(b)) = (
                s.config.slowstart,
                shared.backends.iter().position(|x| std::ptr::eq(x, be)),
            ) {
                tokio::spawn(crate::backend::check::slow_start(
                    Arc::clone(shared),
                    b,
                    i,
                    ramp,
                ));
            }
        }
        AdminChange::Drain => {
            let on = s.draining();
            eprintln!(
                "[WARNING] Server {name} {} drain mode (forced).",
                if on { "enters" } else { "leaves" }
            );
        }
    }
}
