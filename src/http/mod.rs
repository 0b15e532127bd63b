//! HTTP/1.1 mode: one client connection carrying a sequence of transactions.
//!
//! Each transaction runs HAProxy's phases in HAProxy's order, each a method of the
//! [`session::Session`] that returns what the next phase needs:
//!
//! ```text
//!   accept (listener, worker)
//!     │
//!     ▼
//!   read_head ─── bad/late head: 400/408/413/414/431, log, close
//!     │           idle between requests: park (see `idle`)
//!     ▼
//!   choose_backend ── none: 503
//!     ▼
//!   persist rules, use-server, request cookies (`persist`): the server, if assigned
//!     ▼
//!   choose_server ─── (unless assigned) queue; no server: 503; client left: close
//!     ▼
//!   connect ───────── own / pooled / new connection (retries, redispatch); failed: 503
//!     ▼
//!   exchange ──────── send_request → response_head (1xx pass) → send_response
//!                     (response rules, then response cookies, then after-response rules)
//!     │  retryable failure (a reused connection closed, `retry-on`): pick, connect, again
//!     ▼
//!   settle ────────── keep both / keep client / close / tunnel; log
//!     │
//!     └─▶ next request (keep-alive), or end
//! ```
//!
//! A failure in any phase is a [`answer::Failure`]: answer with a status (the backend's or
//! frontend's `errorfile`, else the built-in page) or close, then log. Bodies stream through
//! bounded buffers and their framing bytes are forwarded unchanged (a chunked body is validated
//! as it passes, not re-encoded). `Connection: upgrade` answered by `101` turns the session into
//! a tunnel.
//!
//! Server connections are reused as `http-reuse safe` does: a client's first request gets a
//! connection of its own; later requests reuse the session's connection or an idle one that
//! another session of this worker left in the pool.

mod answer;
mod body;
mod buf;
mod edit;
mod exchange;
mod explain;
pub mod h2;
mod normalize;
mod persist;
mod phases;
mod policy;
mod request;
mod scratch;
mod server;
mod session;
mod stats;
mod txnlog;

pub use explain::{explain, head_from_lines, Input as ExplainInput};
pub use scratch::shrink_scratch;
pub use session::{run, Ended, Parked, SessionState, Start, Upgrade};
