//! The results of sample expressions an `http-request` list has already evaluated, kept while
//! nothing they read can have changed.
//!
//! Why: a rule set often evaluates one expression in several rules, e.g.
//! `set-var(txn.tag) req.hdr(host),lower,map(hosts.map,none)` and then
//! `set-header X-Tag %[req.hdr(host),lower,map(hosts.map,none)]`: a header lookup, a copy
//! folded to lower case and a lookup in a large map (a cache miss or more) each time. An
//! expression whose fetch reads only the request and the connection's addresses and whose
//! converters read only their input ([`super::expr::Expr::memo_id`], given at compile time
//! to expressions with at least one converter, the same id to the same text) is evaluated once;
//! the next evaluation copies the recorded value.
//!
//! Validity: the runtime switches the memo on when an `http-request` list starts
//! ([`Memo::start`]) and off when it ends ([`Memo::stop`]), and empties it ([`Memo::clear`])
//! after every action that may change what such an expression reads: anything but `set-var`,
//! `unset-var`, `capture`, `set-log-level` and `strict-mode`. Other evaluations (response
//! rules, log formats, `tcp-request` rules) never see it on.
//!
//! Allocation: entries and bytes live in vectors that are cleared, never freed.

use std::net::{Ipv4Addr, Ipv6Addr};

/// A recorded result (`None`: the expression gave no value).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Entry {
    None,
    Bool(bool),
    Sint(i64),
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
    /// Kind (0 str, 1 bin, 2 method) and range in the memo's bytes.
    Bytes(u8, u32, u32),
}

/// The memo of one evaluation scratch space ([`super::Eval`]).
#[derive(Debug, Default)]
pub struct Memo {
    on: bool,
    pub(crate) entries: Vec<(u32, Entry)>,
    pub(crate) bytes: Vec<u8>,
}

impl Memo {
    /// Switches the memo on, empty: a rule list starts.
    pub fn start(&mut self) {
        self.on = true;
        self.clear();
    }

    /// Switches the memo off, empty: the rule list ended.
    pub fn stop(&mut self) {
        self.on = false;
        self.clear();
    }

    /// Forgets every result: an action may have changed what they were computed from.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes.clear();
    }

    pub fn is_on(&self) -> bool {
        self.on
    }

    pub(crate) fn find(&self, id: u32) -> Option<Entry> {
        self.entries.iter().find(|e| e.0 == id).map(|e| e.1)
    }
}
