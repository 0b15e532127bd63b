//! What the stats socket and the statistics web page show and change: the `show stat` lines
//! (`csv`), server administrative changes (`admin`) and the page itself (`page`: its HTML,
//! CSV and JSON views and its admin form's actions).
//!
//! It sits above `state` (it reads the shared atomics) and below `http` and `runtime`, which
//! both serve it: the page is answered by the HTTP session of the proxy that has `stats
//! enable`, the socket by the main thread. Nothing here does I/O.

pub mod admin;
pub mod csv;
pub mod page;
