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
