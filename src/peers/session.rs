//! One peers session: the handshake (either side), then the exchange of table definitions
//! and updates until the connection ends, the peer stays silent too long, or a newer session
//! with the same peer replaces it.
//!
//! The loop never blocks on one direction: reading, writing (from a buffer), the tables'
//! feed and the timers are one `select!` of cancel-safe operations, so two peers sending
//! whole tables to each other at once cannot fill each other's socket buffers and stall.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use super::wire::{self, get_varint, put_control, put_message, put_varint};
use super::{collision_delay, Section, RECONNECT};
use crate::stick::{DataType, Entry, Key, Kind, Table, Value};

/// A silent session sends a heartbeat this often (haproxy's `PEER_HEARTBEAT_TIMEOUT`).
const HEARTBEAT: Duration = Duration::from_secs(3);
/// Updates queued per turn of the loop while teaching a whole table (haproxy sends 200 at
/// once).
const TEACH_BATCH: usize = 200;
/// Output held before the loop stops producing more.
const OUT_HIGH: usize = 64 * 1024;

/// A session the peer opened: reads its hello, answers, and runs the session.
pub(super) async fn accepted(section: Rc<Section>, mut conn: TcpStream) {
    let mut buf = Vec::new();
    let hello = tokio::time::timeout(RECONNECT, read_lines(&mut conn, &mut buf, 3)).await;
    let Ok(Some(lines)) = hello else {
        return;
    };
    let (code, remote) = check_hello(&section, &lines);
    if code != wire::status::SUCCESS {
        let _ = conn.write_all(format!("{code}\n").as_bytes()).await;
        return;
    }
    let Some(r) = remote else { return };
    if section.remotes[r].up.get() {
        // The peer called while a session was up (or being opened): the new one wins, as
        // in haproxy, and this side waits before calling again.
        section.remotes[r]
            .hold_until
            .set(Some(Instant::now() + collision_delay()));
    }
    let g = section.open(r);
    if conn.write_all(b"200\n").await.is_err() {
        section.close(r, g);
        return;
    }
    run(&section, r, g, conn, buf).await;
    section.close(r, g);
}

/// A session this side opens on `conn`: sends the hello, reads the status, runs the session.
pub(super) async fn called(section: Rc<Section>, r: usize, mut conn: TcpStream) {
    if section.remotes[r].up.get() {
        return;
    }
    let g = section.open(r);
    let hello = format!(
        "{} {}.{}\n{}\n{} {} 1\n",
        wire::PROTO,
        wire::MAJOR,
        wire::MINOR,
        section.remotes[r].name,
        section.rep.sync.local,
        std::process::id()
    );
    let mut buf = Vec::new();
    let answered = async {
        conn.write_all(hello.as_bytes()).await.ok()?;
        read_lines(&mut conn, &mut buf, 1).await
    };
    let status = tokio::time::timeout(RECONNECT, answered).await;
    match status {
        Ok(Some(lines)) if lines[0] == "200" && section.current(r, g) => {
            run(&section, r, g, conn, buf).await;
        }
        _ => {}
    }
    section.close(r, g);
}

/// Reads `n` lines (`\n`, an optional `\r` before it) from `conn` into `buf`; what follows
/// them stays in `buf`. `None` if the connection ends first or a line is too long.
async fn read_lines(conn: &mut TcpStream, buf: &mut Vec<u8>, n: usize) -> Option<Vec<String>> {
    let mut lines = Vec::new();
    loop {
        while let Some(end) = buf.iter().position(|&c| c == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            let line = line.strip_suffix(b"\n").unwrap_or(&line);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            lines.push(String::from_utf8_lossy(line).into_owned());
            if lines.len() == n {
                return Some(lines);
            }
        }
        if buf.len() > 1024 {
            return None;
        }
        if conn.read_buf(buf).await.ok()? == 0 {
            return None;
        }
    }
}

/// Checks a hello's three lines: the protocol and version, the name the peer calls us by,
/// and its own name, which must be one of the section's remote peers.
fn check_hello(section: &Section, lines: &[String]) -> (u16, Option<usize>) {
    let Some(version) = lines[0]
        .strip_prefix(wire::PROTO)
        .and_then(|v| v.strip_prefix(' '))
    else {
        return (wire::status::ERR_PROTO, None);
    };
    let ok = version
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
        .is_some_and(|(major, minor)| major == wire::MAJOR && minor <= wire::MINOR);
    if !ok {
        return (wire::status::ERR_VERSION, None);
    }
    if lines[1] != section.rep.sync.local {
        return (wire::status::ERR_HOST, None);
    }
    let Some((name, _)) = lines[2].split_once(' ') else {
        return (wire::status::ERR_PROTO, None);
    };
    match section.remotes.iter().position(|p| p.name == name) {
        Some(r) => (wire::status::SUCCESS, Some(r)),
        None => (wire::status::ERR_PEER, None),
    }
}

/// What the peer told us about one of its tables (a `DEFINE`).
struct RemoteTable {
    /// The table of ours with the same name (an index into the section's tables).
    local: usize,
    /// The data types the peer's updates carry, a bit per `DataType::index`.
    data: u64,
    /// Elements of each array type.
    nbelem: [u32; DataType::ALL.len()],
    /// The last update id received.
    last_get: u32,
    acked: u32,
}

/// The state of one session's exchange.
struct Exchange<'a> {
    section: &'a Section,
    out: Vec<u8>,
    /// The table our updates currently go to (the last `DEFINE` sent).
    tx_table: Option<usize>,
    /// Per table of ours, the last update id sent.
    tx_ids: Vec<u32>,
    /// The peer's tables by their id on this session, and the current one.
    rx_tables: HashMap<u64, RemoteTable>,
    rx_current: Option<u64>,
    /// Server names by dictionary id, both ways.
    dict_rx: Vec<Option<String>>,
    dict_tx: Vec<Option<String>>,
    dict_next: usize,
    /// Keys still to teach: (table, keys), drained [`TEACH_BATCH`] at a time.
    teaching: Vec<(usize, Vec<Key>)>,
    /// Send `RESYNC_FINISHED` once `teaching` is empty (the peer asked for our tables).
    finish_teaching: bool,
}

async fn run(section: &Section, r: usize, g: u64, conn: TcpStream, mut inbuf: Vec<u8>) {
    let (mut rd, mut wr) = conn.into_split();
    // Subscribed before the first lesson, so that no change made meanwhile is missed.
    let mut feed = section.rep.tx.subscribe();
    let mut x = Exchange {
        section,
        out: Vec::new(),
        tx_table: None,
        tx_ids: vec![0; section.tables.len()],
        rx_tables: HashMap::new(),
        rx_current: None,
        dict_rx: vec![None; wire::DICT_ENTRIES],
        dict_tx: vec![None; wire::DICT_ENTRIES],
        dict_next: 0,
        teaching: Vec::new(),
        finish_teaching: false,
    };
    x.teach_all();
    if !section.asked_resync.replace(true) {
        put_control(&mut x.out, wire::CTRL_RESYNC_REQ);
    }
    let mut sent = 0;
    let mut last_rx = Instant::now();
    let mut last_tx = Instant::now();
    if !inbuf.is_empty() && !x.receive(&mut inbuf) {
        return;
    }
    loop {
        if !section.current(r, g) {
            return;
        }
        x.teach_some();
        if sent == x.out.len() && sent > 0 {
            x.out.clear();
            sent = 0;
        }
        let pending = x.out.len() - sent;
        let replaced = section.remotes[r].replaced.notified();
        tokio::select! {
            _ = replaced => {}
            n = wr.write(&x.out[sent..]), if pending > 0 => match n {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    sent += n;
                    last_tx = Instant::now();
                }
            },
            n = rd.read_buf(&mut inbuf) => match n {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    last_rx = Instant::now();
                    if !x.receive(&mut inbuf) {
                        return;
                    }
                }
            },
            // Changes go out during a lesson too: a table busier than the channel is deep
            // would otherwise lag at the end of every lesson and start it over.
            k = feed.recv(), if pending < OUT_HIGH => match k {
                Ok((t, key)) => x.update(usize::from(t), &key),
                Err(RecvError::Lagged(_)) => x.teach_all(),
                Err(RecvError::Closed) => return,
            },
            _ = tokio::time::sleep_until(last_rx + RECONNECT) => return,
            _ = tokio::time::sleep_until(last_tx + HEARTBEAT), if pending == 0 => {
                put_control(&mut x.out, wire::CTRL_HEARTBEAT);
                last_tx = Instant::now();
            }
        }
    }
}

impl Exchange<'_> {
    /// Queues every entry of every table.
    fn teach_all(&mut self) {
        let now = crate::base::clock::uptime_ms();
        self.teaching = self
            .section
            .tables
            .iter()
            .enumerate()
            .map(|(t, table)| {
                (
                    t,
                    table.entries(now).iter().map(|e| e.key().clone()).collect(),
                )
            })
            .collect();
    }

    /// Sends the next batch of the queued lesson, then `RESYNC_FINISHED` if it was asked for.
    fn teach_some(&mut self) {
        let mut budget = TEACH_BATCH;
        while budget > 0 && self.out.len() < OUT_HIGH {
            let Some((t, keys)) = self.teaching.last_mut() else {
                break;
            };
            let t = *t;
            match keys.pop() {
                Some(k) => {
                    self.update(t, &k);
                    budget -= 1;
                }
                None => {
                    self.teaching.pop();
                }
            }
        }
        if self.teaching.is_empty() && self.finish_teaching {
            self.finish_teaching = false;
            put_control(&mut self.out, wire::CTRL_RESYNC_FINISHED);
        }
    }

    /// Sends table `t`'s entry of `key`, if it still exists.
    fn update(&mut self, t: usize, key: &Key) {
        let section = self.section;
        let table: &Table = &section.tables[t];
        let now = crate::base::clock::uptime_ms();
        let Some(e) = table.get(key, now) else {
            return;
        };
        if self.tx_table != Some(t) {
            self.define(t);
        }
        self.tx_ids[t] = self.tx_ids[t].wrapping_add(1);
        let mut p = Vec::with_capacity(64);
        p.extend_from_slice(&self.tx_ids[t].to_be_bytes());
        let remain = match table.spec.expire {
            Some(_) => e.expire().saturating_sub(now).min(u64::from(u32::MAX)) as u32,
            None => 0,
        };
        p.extend_from_slice(&remain.to_be_bytes());
        wire::put_key(&mut p, table.spec.key, key);
        self.put_values(&mut p, table, &e, now);
        put_message(&mut self.out, wire::STKT_UPDATE_TIMED, &p);
    }

    /// Appends every stored value of `e`, in data type order.
    fn put_values(&mut self, p: &mut Vec<u8>, table: &Table, e: &Entry, now: u64) {
        for slot in &table.schema.slots {
            match slot.data.kind() {
                Kind::Rate => {
                    let (elapsed, curr, prev) = e.export_rate(*slot, now).unwrap_or((0, 0, 0));
                    put_varint(p, u64::from(elapsed));
                    put_varint(p, u64::from(curr));
                    put_varint(p, u64::from(prev));
                }
                Kind::Str => match e.read(*slot, now) {
                    Value::Str(Some(name)) => self.put_dict(p, &name),
                    _ => put_varint(p, 0),
                },
                _ => match e.read(*slot, now) {
                    Value::Uint(v) => put_varint(p, v),
                    Value::Sint(v) => put_varint(p, v as u64),
                    Value::Str(_) => put_varint(p, 0),
                },
            }
        }
    }

    /// A server name by its dictionary id: the id alone once the peer has it, else the id
    /// and the name (haproxy's `STD_T_DICT` encoding, ids from 1).
    fn put_dict(&mut self, p: &mut Vec<u8>, name: &str) {
        let mut d = Vec::with_capacity(name.len() + 4);
        match self.dict_tx.iter().position(|n| n.as_deref() == Some(name)) {
            Some(id) => put_varint(&mut d, id as u64 + 1),
            None => {
                let id = self.dict_next;
                self.dict_next = (id + 1) % wire::DICT_ENTRIES;
                self.dict_tx[id] = Some(name.to_string());
                put_varint(&mut d, id as u64 + 1);
                put_varint(&mut d, name.len() as u64);
                d.extend_from_slice(name.as_bytes());
            }
        }
        put_varint(p, d.len() as u64);
        p.extend_from_slice(&d);
    }

    /// Sends the definition of table `t`, which makes it the current one.
    fn define(&mut self, t: usize) {
        let section = self.section;
        let table = &section.tables[t];
        let name = &section.rep.tables[t].1;
        let mut p = Vec::new();
        put_varint(&mut p, t as u64 + 1);
        put_varint(&mut p, name.len() as u64);
        p.extend_from_slice(name.as_bytes());
        let (kt, size) = wire::key_type(table.spec.key);
        put_varint(&mut p, kt);
        put_varint(&mut p, size);
        let mut stores = table.spec.store.clone();
        stores.sort_by_key(|s| s.data);
        stores.dedup_by_key(|s| s.data);
        let bits = stores.iter().fold(0, |b, s| b | wire::data_bit(s.data));
        put_varint(&mut p, bits);
        put_varint(&mut p, u64::from(table.spec.expire.unwrap_or(0)));
        for s in &stores {
            let array = matches!(s.data, DataType::Gpt | DataType::Gpc | DataType::GpcRate);
            if array {
                put_varint(&mut p, s.data.index() as u64);
                put_varint(&mut p, u64::from(s.count.max(1)));
                if s.data.kind() == Kind::Rate {
                    put_varint(&mut p, u64::from(s.period));
                }
            } else if s.data.kind() == Kind::Rate {
                put_varint(&mut p, s.data.index() as u64);
                put_varint(&mut p, u64::from(s.period));
            }
        }
        put_message(&mut self.out, wire::STKT_DEFINE, &p);
        self.tx_table = Some(t);
    }

    /// Handles every complete message in `buf` (consumed); false when the session must end
    /// (a malformed message, an error message from the peer).
    fn receive(&mut self, buf: &mut Vec<u8>) -> bool {
        let mut at = 0;
        let ok = loop {
            match wire::frame(&buf[at..]) {
                Ok(Some(f)) => {
                    let payload = at + f.payload.start..at + f.payload.end;
                    if !self.message(f.class, f.ty, &buf[payload]) {
                        break false;
                    }
                    at += f.len;
                }
                Ok(None) => break true,
                Err(_) => break false,
            }
        };
        buf.drain(..at);
        // Acknowledge what arrived, as haproxy does after each read.
        let acks: Vec<(u64, u32)> = self
            .rx_tables
            .iter_mut()
            .filter(|(_, t)| t.acked != t.last_get)
            .map(|(id, t)| {
                t.acked = t.last_get;
                (*id, t.last_get)
            })
            .collect();
        for (id, last) in acks {
            let mut p = Vec::new();
            put_varint(&mut p, id);
            p.extend_from_slice(&last.to_be_bytes());
            put_message(&mut self.out, wire::STKT_ACK, &p);
        }
        ok
    }

    fn message(&mut self, class: u8, ty: u8, p: &[u8]) -> bool {
        match class {
            wire::CLASS_CONTROL => {
                match ty {
                    wire::CTRL_RESYNC_REQ => {
                        self.teach_all();
                        self.finish_teaching = true;
                    }
                    wire::CTRL_RESYNC_FINISHED | wire::CTRL_RESYNC_PARTIAL => {
                        put_control(&mut self.out, wire::CTRL_RESYNC_CONFIRM);
                    }
                    _ => {}
                }
                true
            }
            wire::CLASS_STICKTABLE => match ty {
                wire::STKT_DEFINE => self.remote_define(p).is_some(),
                wire::STKT_SWITCH => {
                    let mut pos = 0;
                    let Some(id) = get_varint(p, &mut pos) else {
                        return false;
                    };
                    self.rx_current = self.rx_tables.contains_key(&id).then_some(id);
                    true
                }
                wire::STKT_UPDATE
                | wire::STKT_INCUPDATE
                | wire::STKT_UPDATE_TIMED
                | wire::STKT_INCUPDATE_TIMED => self.remote_update(ty, p).is_some(),
                _ => true,
            },
            wire::CLASS_ERROR | 255 => false,
            _ => true,
        }
    }

    /// Reads a peer's `DEFINE`: the table of ours with that name becomes the current one,
    /// if its key type and size match (else its updates are ignored, as haproxy does).
    /// `None` for a malformed message.
    fn remote_define(&mut self, p: &[u8]) -> Option<()> {
        let mut pos = 0;
        let id = get_varint(p, &mut pos)?;
        let len = usize::try_from(get_varint(p, &mut pos)?).ok()?;
        let name = p.get(pos..pos.checked_add(len)?)?;
        pos += len;
        let kt = get_varint(p, &mut pos)?;
        let size = get_varint(p, &mut pos)?;
        let data = get_varint(p, &mut pos)?;
        self.rx_tables.remove(&id);
        self.rx_current = None;
        let Some(local) = self
            .section
            .rep
            .tables
            .iter()
            .position(|(_, wire_name)| wire_name.as_bytes() == name)
        else {
            return Some(());
        };
        if wire::key_type(self.section.tables[local].spec.key) != (kt, size) {
            return Some(());
        }
        let mut nbelem = [1u32; DataType::ALL.len()];
        // The expiry, then the parameters of rates and arrays (absent from old peers).
        if get_varint(p, &mut pos).is_some() {
            for d in DataType::ALL {
                if data & wire::data_bit(d) == 0 {
                    continue;
                }
                let array = matches!(d, DataType::Gpt | DataType::Gpc | DataType::GpcRate);
                if array || d.kind() == Kind::Rate {
                    if get_varint(p, &mut pos)? != d.index() as u64 {
                        return Some(());
                    }
                    if array {
                        nbelem[d.index()] = u32::try_from(get_varint(p, &mut pos)?).ok()?;
                    }
                    if d.kind() == Kind::Rate {
                        get_varint(p, &mut pos)?;
                    }
                }
            }
        }
        // Data types this build does not know cannot be decoded: ignore the table.
        if data >> DataType::ALL.len() != 0 {
            return Some(());
        }
        self.rx_tables.insert(
            id,
            RemoteTable {
                local,
                data,
                nbelem,
                last_get: 0,
                acked: 0,
            },
        );
        self.rx_current = Some(id);
        Some(())
    }

    /// Applies a peer's update to the current table (none: ignored). `None` when malformed.
    fn remote_update(&mut self, ty: u8, p: &[u8]) -> Option<()> {
        let Some(rt) = self.rx_current.and_then(|id| self.rx_tables.get_mut(&id)) else {
            return Some(());
        };
        let section = self.section;
        let table: &Table = &section.tables[rt.local];
        let mut pos = 0;
        let u32_at = |pos: &mut usize| -> Option<u32> {
            let b = p.get(*pos..*pos + 4)?;
            *pos += 4;
            Some(u32::from_be_bytes(b.try_into().ok()?))
        };
        rt.last_get = if matches!(ty, wire::STKT_UPDATE | wire::STKT_UPDATE_TIMED) {
            u32_at(&mut pos)?
        } else {
            rt.last_get.wrapping_add(1)
        };
        let table_expire = table.spec.expire.unwrap_or(0);
        let expire = if matches!(ty, wire::STKT_UPDATE_TIMED | wire::STKT_INCUPDATE_TIMED) {
            u32_at(&mut pos)?.min(table_expire)
        } else {
            table_expire
        };
        let (data, nbelem) = (rt.data, rt.nbelem);
        let key = wire::get_key(p, &mut pos, table.spec.key)?;
        let now = crate::base::clock::uptime_ms();
        let entry = table.learn(&key, now);
        for d in DataType::ALL {
            if data & wire::data_bit(d) == 0 {
                continue;
            }
            for idx in 0..nbelem[d.index()] {
                let slot = u8::try_from(idx).ok().and_then(|i| table.schema.slot(d, i));
                match d.kind() {
                    Kind::Rate => {
                        let elapsed = get_varint(p, &mut pos)?;
                        let curr = get_varint(p, &mut pos)?;
                        let prev = get_varint(p, &mut pos)?;
                        if let (Some(e), Some(s)) = (&entry, slot) {
                            let elapsed = u32::try_from(elapsed).unwrap_or(u32::MAX);
                            e.import_rate(s, now, elapsed, curr as u32, prev as u32);
                        }
                    }
                    Kind::Str => {
                        let name = self.get_dict(p, &mut pos)?;
                        if let (Some(e), Some(_), Some(name)) = (&entry, slot, name) {
                            if !e.server_key_is(&name) {
                                e.set_server_key(Some(&name));
                            }
                        }
                    }
                    _ => {
                        let v = get_varint(p, &mut pos)?;
                        // `conn_cur` counts this process's connections: never learned.
                        if d == DataType::ConnCur {
                            continue;
                        }
                        if let (Some(e), Some(s)) = (&entry, slot) {
                            e.set(s, now, v as i64);
                        }
                    }
                }
            }
        }
        if let Some(e) = &entry {
            if table.spec.expire.is_some() {
                e.rearm(now + u64::from(expire));
            }
        }
        Some(())
    }

    /// Reads a server name in the dictionary encoding; `Some(None)` for no name.
    fn get_dict(&mut self, p: &[u8], pos: &mut usize) -> Option<Option<String>> {
        let len = usize::try_from(get_varint(p, pos)?).ok()?;
        if len == 0 {
            return Some(None);
        }
        let end = pos.checked_add(len)?;
        let d = p.get(..end)?;
        let id = usize::try_from(get_varint(d, pos)?).ok()?;
        if id == 0 || id > wire::DICT_ENTRIES {
            return None;
        }
        if *pos == end {
            return Some(self.dict_rx[id - 1].clone());
        }
        let n = usize::try_from(get_varint(d, pos)?).ok()?;
        let name = d.get(*pos..pos.checked_add(n)?)?;
        let name = String::from_utf8_lossy(name).into_owned();
        *pos = end;
        self.dict_rx[id - 1] = Some(name.clone());
        Some(Some(name))
    }
}
