//! Sockets, timers and moving bytes: the I/O mechanics every session uses (layer 2).
//!
//! Binding and accepting under connection limits ([`listener`]), a client socket that joins the
//! reactor only when it must wait ([`lazy`]), re-armable per-side timers ([`deadline`]), moving
//! bytes between two sockets ([`forward`], through kernel pipes with [`pipe`]), and idle client
//! connections parked outside tokio's reactor ([`idle`]).
//!
//! This layer knows sockets and the configuration model, never a session: it must not import
//! `backend`, `state`, `session`, `http` or `runtime`. What it needs from above (timeouts,
//! splice choices, sizes) comes in as arguments.

pub mod deadline;
pub mod forward;
pub mod idle;
pub mod lazy;
pub mod listener;
pub mod pipe;
