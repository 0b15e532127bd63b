//! A session's tracked entries (`track-sc0|1|2`) and the events HAProxy 2.6 counts on them.
//!
//! Why two levels: HAProxy keeps the counters tracked by `tcp-request connection|session`
//! rules on the session (they live as long as the client connection) and those tracked by
//! `tcp-request content` and `http-request` rules on the stream (in HTTP, one transaction:
//! each request of a keep-alive connection tracks again). A fetch of `scN_*` looks at the
//! stream's slot first, then the session's. Each level has three slots.
//!
//! What is counted where (HAProxy 2.6's `stream_start_counters`, `session_count_new`,
//! `stream_inc_http_*_ctr`, `stream_process_counters`, `stream_store_counters`):
//!
//! - tracking an entry counts `conn_cnt`, `conn_cur` and `conn_rate` on it;
//! - a new session (after the `tcp-request session` rules) counts `sess_cnt`/`sess_rate` on
//!   the session-level entries;
//! - an HTTP request counts `http_req_*` on every tracked entry (an `http-request track-sc`
//!   counts the request it runs on, which the others already counted), a 4xx answer from
//!   the server `http_err_*`, a 5xx one but 501 and 505 `http_fail_*`;
//! - the bytes of each direction go to `bytes_in_*` (from the client) and `bytes_out_*`
//!   (to the client) of every tracked entry;
//! - releasing an entry takes 1 from `conn_cur` and re-arms its expiry.
//!
//! A slot is set once (a later `track-sc` of the same slot does nothing, as in HAProxy:
//! "only the first valid tracking parameter of each applies"), so it is a [`OnceCell`] that
//! rule evaluation reads and the track action fills through a shared reference; releasing
//! takes `&mut`. Dropping [`Trackers`] without releasing still gives the references back
//! ([`Tracked`]'s drop), so an error path cannot leak an entry.

use std::cell::OnceCell;
use std::sync::Arc;

use super::data::DataType;
use super::table::{Entry, Table, Tracked};
use super::Tick;

/// How many `track-sc` slots a session has (HAProxy's `MAX_SESS_STKCTR`, 3 by default).
pub const SLOTS: usize = 3;

/// One tracked entry and the table (index into the process's tables) it belongs to.
#[derive(Debug)]
pub struct Track {
    pub table: usize,
    pub entry: Tracked,
    /// What releasing needs from the table, copied at track time so that a drop can
    /// release without the tables: `conn_cur`'s slot and the table's `expire`.
    conn_cur: Option<super::table::Slot>,
    expire: u64,
    /// The table's peers feed, if it is replicated: the entry's final counts go out when
    /// the session gives it back.
    feed: Option<super::table::Feed>,
}

impl Track {
    /// Gives the entry back at `now`: `conn_cur` loses one, the expiry is re-armed, the
    /// reference goes back.
    fn release(self, now: Tick) {
        if let Some(s) = self.conn_cur {
            self.entry.decrement(s);
        }
        self.entry.rearm(now + self.expire);
        if let Some(f) = &self.feed {
            f.notify(self.entry.key());
        }
        drop(self.entry);
    }
}

/// Where a tracked entry lives: with the connection or with one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `tcp-request connection` and `tcp-request session` rules.
    Session,
    /// `tcp-request content` and `http-request` rules (one HTTP transaction).
    Stream,
}

/// A session's tracked entries. Dropping it releases them all at the process clock's now.
#[derive(Debug, Default)]
pub struct Trackers {
    sess: [OnceCell<Track>; SLOTS],
    stream: [OnceCell<Track>; SLOTS],
    /// The current HTTP request was counted (`http_req_*`) on the entries tracked so far;
    /// an entry tracked after that counts it when tracked.
    req_counted: std::cell::Cell<bool>,
}

impl Drop for Trackers {
    fn drop(&mut self) {
        if self.any() {
            self.release_all(super::Clock::now(&super::ProcessClock));
        }
    }
}

/// The events counted on tracked entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Session,
    HttpReq,
    HttpErr,
    HttpFail,
}

impl Event {
    fn data(self) -> (DataType, DataType) {
        match self {
            Event::Session => (DataType::SessCnt, DataType::SessRate),
            Event::HttpReq => (DataType::HttpReqCnt, DataType::HttpReqRate),
            Event::HttpErr => (DataType::HttpErrCnt, DataType::HttpErrRate),
            Event::HttpFail => (DataType::HttpFailCnt, DataType::HttpFailRate),
        }
    }
}

/// Counts one `event` on `e` (its count and its rate, those the table stores).
pub fn count(t: &Table, e: &Entry, event: Event, now: Tick) {
    let (cnt, rate) = event.data();
    if let Some(s) = t.schema.slot(cnt, 0) {
        e.add(s, now, 1);
    }
    if let Some(s) = t.schema.slot(rate, 0) {
        e.add(s, now, 1);
    }
}

impl Trackers {
    pub fn new() -> Trackers {
        Trackers::default()
    }

    /// Whether any slot is in use (the session's fast path skips the rest when not).
    pub fn any(&self) -> bool {
        self.sess
            .iter()
            .chain(&self.stream)
            .any(|s| s.get().is_some())
    }

    /// The entry slot `n` tracks: the stream's, else the session's.
    pub fn get(&self, n: usize) -> Option<&Track> {
        self.stream
            .get(n)?
            .get()
            .or_else(|| self.sess.get(n)?.get())
    }

    /// Whether slot `n` is already taken at `level` or below it (a stream slot is also
    /// taken when the session tracks that slot).
    pub fn taken(&self, n: usize, level: Level) -> bool {
        match level {
            Level::Session => self.sess.get(n).is_none_or(|s| s.get().is_some()),
            Level::Stream => self.get(n).is_some() || n >= SLOTS,
        }
    }

    /// Tracks the entry of `key`'s already-made entry in slot `n` at `level`, counting the
    /// connection on it (`conn_cnt`, `conn_cur`, `conn_rate`). Returns the entry, or `None`
    /// if the slot was taken (the reference then goes back at once).
    pub fn set(
        &self,
        n: usize,
        level: Level,
        table_idx: usize,
        table: &Table,
        entry: Tracked,
        now: Tick,
    ) -> Option<&Track> {
        if self.taken(n, level) {
            return None;
        }
        for d in [DataType::ConnCnt, DataType::ConnCur, DataType::ConnRate] {
            if let Some(s) = table.schema.slot(d, 0) {
                entry.add(s, now, 1);
            }
        }
        table.touch(&entry, now);
        let cell = match level {
            Level::Session => &self.sess[n],
            Level::Stream => &self.stream[n],
        };
        let _ = cell.set(Track {
            table: table_idx,
            entry,
            conn_cur: table.schema.slot(DataType::ConnCur, 0),
            expire: u64::from(table.spec.expire.unwrap_or(0)),
            feed: table.feed.clone(),
        });
        cell.get()
    }

    /// Every tracked entry with its table, session level first.
    pub fn each<'t>(
        &'t self,
        tables: &'t [Arc<Table>],
    ) -> impl Iterator<Item = (&'t Table, &'t Entry)> + 't {
        self.sess
            .iter()
            .chain(&self.stream)
            .filter_map(|c| c.get())
            .filter_map(|t| Some((tables.get(t.table)?.as_ref(), t.entry.entry())))
    }

    /// Counts `event` on every tracked entry (`session` only on session-level ones, where
    /// HAProxy counts it).
    pub fn count(&self, tables: &[Arc<Table>], event: Event, now: Tick) {
        if event == Event::Session {
            for t in self.sess.iter().filter_map(|c| c.get()) {
                if let Some(table) = tables.get(t.table) {
                    count(table, &t.entry, event, now);
                }
            }
            return;
        }
        for (t, e) in self.each(tables) {
            count(t, e, event, now);
        }
    }

    /// Counts a response status: 4xx as an HTTP error, 5xx but 501 and 505 as a failure.
    pub fn count_status(&self, tables: &[Arc<Table>], status: u16, now: Tick) {
        match status / 100 {
            4 => self.count(tables, Event::HttpErr, now),
            5 if status != 501 && status != 505 => self.count(tables, Event::HttpFail, now),
            _ => {}
        }
    }

    /// Adds bytes received from the client (`bytes_in_*`) and sent to it (`bytes_out_*`) to
    /// every tracked entry.
    pub fn add_bytes(&self, tables: &[Arc<Table>], bytes_in: u64, bytes_out: u64, now: Tick) {
        if bytes_in == 0 && bytes_out == 0 {
            return;
        }
        for (t, e) in self.each(tables) {
            for (n, cnt, rate) in [
                (bytes_in, DataType::BytesInCnt, DataType::BytesInRate),
                (bytes_out, DataType::BytesOutCnt, DataType::BytesOutRate),
            ] {
                if n == 0 {
                    continue;
                }
                if let Some(s) = t.schema.slot(cnt, 0) {
                    e.add(s, now, n);
                }
                if let Some(s) = t.schema.slot(rate, 0) {
                    e.add(s, now, n);
                }
            }
        }
    }

    /// Marks the current HTTP request counted on the entries tracked so far (after the
    /// frontend's `tcp-request content` rules, as HAProxy counts it when the HTTP analysers
    /// start), counting it on them.
    pub fn count_request(&self, tables: &[Arc<Table>], now: Tick) {
        self.req_counted.set(true);
        if self.any() {
            self.count(tables, Event::HttpReq, now);
        }
    }

    /// The connection-level (`Level::Session`) entries, for one HTTP/2 stream of the
    /// connection: the stream's rules read and count on them as on their own, and releasing
    /// the copy gives back its reference only (the connection's `conn_cur` stays counted
    /// until the connection's own trackers are released).
    pub fn connection_copy(&self) -> Trackers {
        let t = Trackers::default();
        for (from, to) in self.sess.iter().zip(&t.sess) {
            if let Some(track) = from.get() {
                let _ = to.set(Track {
                    table: track.table,
                    entry: track.entry.clone(),
                    conn_cur: None,
                    expire: track.expire,
                    feed: None,
                });
            }
        }
        t
    }

    /// Whether the current request was already counted (see [`Trackers::count_request`]).
    pub fn request_counted(&self) -> bool {
        self.req_counted.get()
    }

    /// Ends a stream (an HTTP transaction): releases the stream-level entries.
    pub fn release_stream(&mut self, now: Tick) {
        self.req_counted.set(false);
        for c in &mut self.stream {
            if let Some(t) = c.take() {
                t.release(now);
            }
        }
    }

    /// Ends the session: releases every entry.
    pub fn release_all(&mut self, now: Tick) {
        self.release_stream(now);
        for c in &mut self.sess {
            if let Some(t) = c.take() {
                t.release(now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stick::data::Store;
    use crate::stick::table::{Key, KeyType, TableSpec, Value};

    fn table(store: &[(DataType, u32)]) -> Arc<Table> {
        Arc::new(Table::new(
            "t",
            TableSpec {
                key: KeyType::Ip,
                size: 10,
                expire: Some(1000),
                nopurge: false,
                srvkey_addr: false,
                store: store
                    .iter()
                    .map(|&(data, period)| Store {
                        data,
                        count: 1,
                        period,
                    })
                    .collect(),
            },
        ))
    }

    fn read(t: &Table, key: &Key, d: DataType, now: Tick) -> Value {
        let e = t.get(key, now).unwrap();
        e.read(t.schema.slot(d, 0).unwrap(), now)
    }

    #[test]
    fn conn_cur_counts_trackers_and_release_gives_back() {
        let t = table(&[(DataType::ConnCur, 0), (DataType::ConnCnt, 0)]);
        let key = Key::Ip([10, 0, 0, 1]);
        let mut a = Trackers::new();
        let b = Trackers::new();
        assert!(a
            .set(0, Level::Session, 0, &t, t.track(&key, 5).unwrap(), 5)
            .is_some());
        assert!(b
            .set(1, Level::Stream, 0, &t, t.track(&key, 6).unwrap(), 6)
            .is_some());
        // The same slot again: ignored, and its reference went back.
        assert!(a
            .set(0, Level::Stream, 0, &t, t.track(&key, 7).unwrap(), 7)
            .is_none());
        assert_eq!(read(&t, &key, DataType::ConnCur, 7), Value::Uint(2));
        assert_eq!(read(&t, &key, DataType::ConnCnt, 7), Value::Uint(2));
        assert_eq!(t.get(&key, 7).unwrap().refs(), 2);
        a.release_all(8);
        assert_eq!(read(&t, &key, DataType::ConnCur, 8), Value::Uint(1));
        drop(b);
        assert_eq!(t.get(&key, 8).unwrap().refs(), 0);
    }

    #[test]
    fn a_connection_copy_shares_the_entries_but_not_conn_cur() {
        let t = table(&[(DataType::ConnCur, 0), (DataType::HttpReqCnt, 0)]);
        let tables = [t.clone()];
        let key = Key::Ip([10, 0, 0, 2]);
        let conn = Trackers::new();
        conn.set(0, Level::Session, 0, &t, t.track(&key, 1).unwrap(), 1);
        let stream = conn.connection_copy();
        assert!(stream.taken(0, Level::Session));
        assert_eq!(t.get(&key, 1).unwrap().refs(), 2);
        stream.count(&tables, Event::HttpReq, 1);
        assert_eq!(read(&t, &key, DataType::HttpReqCnt, 1), Value::Uint(1));
        drop(stream);
        // The stream gave its reference back; the connection still counts.
        assert_eq!(t.get(&key, 2).unwrap().refs(), 1);
        assert_eq!(read(&t, &key, DataType::ConnCur, 2), Value::Uint(1));
        drop(conn);
        assert_eq!(read(&t, &key, DataType::ConnCur, 2), Value::Uint(0));
    }

    #[test]
    fn events_and_bytes_counted_on_every_level() {
        let t = table(&[
            (DataType::SessCnt, 0),
            (DataType::HttpReqCnt, 0),
            (DataType::HttpErrCnt, 0),
            (DataType::HttpFailCnt, 0),
            (DataType::BytesInCnt, 0),
            (DataType::BytesOutRate, 1000),
        ]);
        let tables = [t.clone()];
        let key = Key::Ip([10, 0, 0, 1]);
        let tr = Trackers::new();
        tr.set(0, Level::Session, 0, &t, t.track(&key, 1).unwrap(), 1);
        tr.set(1, Level::Stream, 0, &t, t.track(&key, 1).unwrap(), 1);
        tr.count(&tables, Event::Session, 1);
        tr.count(&tables, Event::HttpReq, 1);
        for s in [404, 500, 501, 505, 200] {
            tr.count_status(&tables, s, 1);
        }
        tr.add_bytes(&tables, 10, 20, 1);
        assert_eq!(read(&t, &key, DataType::SessCnt, 1), Value::Uint(1));
        assert_eq!(read(&t, &key, DataType::HttpReqCnt, 1), Value::Uint(2));
        assert_eq!(read(&t, &key, DataType::HttpErrCnt, 1), Value::Uint(2));
        assert_eq!(read(&t, &key, DataType::HttpFailCnt, 1), Value::Uint(2));
        assert_eq!(read(&t, &key, DataType::BytesInCnt, 1), Value::Uint(20));
        assert_eq!(read(&t, &key, DataType::BytesOutRate, 1), Value::Uint(40));
    }
}
