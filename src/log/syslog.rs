//! Syslog framing of a log message, as HAProxy writes it for each `log ... format F`:
//!
//! | format | bytes |
//! |---|---|
//! | `rfc3164` | `<PRI>Mmm dd HH:MM:SS [host ]tag[pid]: msg` |
//! | `local` | `<PRI>Mmm dd HH:MM:SS tag[pid]: msg` |
//! | `rfc5424` | `<PRI>1 ISO-DATE host tag pid - SD msg` (`-` for an absent host or SD) |
//! | `priority` | `<PRI>msg` |
//! | `short` | `<LEVEL>msg` |
//! | `timed` | `<LEVEL>ISO-DATE msg` |
//! | `iso` | `ISO-DATE msg` |
//! | `raw` | `msg` |
//!
//! PRI is facility × 8 + level. Each line ends with a newline; the part before it is cut to the
//! target's `len`. Dates are local time; ISO dates have microseconds and the UTC offset.

use super::record::{broken_down, MONTHS};

/// A `format` of a `log` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Rfc3164,
    Rfc5424,
    Short,
    Raw,
    Iso,
    Timed,
    Priority,
    Local,
}

impl Framing {
    pub fn parse(s: &str) -> Framing {
        match s {
            "rfc5424" => Framing::Rfc5424,
            "short" => Framing::Short,
            "raw" => Framing::Raw,
            "iso" => Framing::Iso,
            "timed" => Framing::Timed,
            "priority" => Framing::Priority,
            "local" => Framing::Local,
            _ => Framing::Rfc3164,
        }
    }
}

/// What goes around a message besides its priority and date.
#[derive(Debug, Clone, Copy)]
pub struct Header<'a> {
    pub tag: &'a str,
    pub hostname: Option<&'a str>,
    pub pid: u32,
    /// RFC 5424 structured data (already rendered).
    pub sd: Option<&'a [u8]>,
}

fn two(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&[b'0' + (v / 10 % 10) as u8, b'0' + (v % 10) as u8]);
}

fn iso_date(out: &mut Vec<u8>, now_us: i64) {
    let secs = now_us.div_euclid(1_000_000);
    let tm = broken_down(secs, true);
    super::format::num(out, i64::from(tm.year));
    out.push(b'-');
    two(out, tm.month + 1);
    out.push(b'-');
    two(out, tm.day);
    out.push(b'T');
    two(out, tm.hour);
    out.push(b':');
    two(out, tm.min);
    out.push(b':');
    two(out, tm.sec);
    let us = now_us.rem_euclid(1_000_000) as u32;
    out.push(b'.');
    two(out, us / 10_000);
    two(out, us / 100 % 100);
    two(out, us % 100);
    out.push(if tm.gmtoff < 0 { b'-' } else { b'+' });
    let m = (tm.gmtoff.unsigned_abs() / 60) as u32;
    two(out, m / 60);
    out.push(b':');
    two(out, m % 60);
}

fn pri(out: &mut Vec<u8>, v: u32) {
    out.push(b'<');
    super::format::num(out, i64::from(v));
    out.push(b'>');
}

/// Appends `msg` framed as `framing` says, cut to `len` bytes, then a newline.
#[allow(clippy::too_many_arguments)]
pub fn frame(
    out: &mut Vec<u8>,
    framing: Framing,
    facility: u8,
    level: u8,
    now_us: i64,
    hdr: &Header<'_>,
    msg: &[u8],
    len: usize,
) {
    let start = out.len();
    let prio = u32::from(facility) * 8 + u32::from(level);
    match framing {
        Framing::Rfc3164 | Framing::Local => {
            pri(out, prio);
            let tm = broken_down(now_us.div_euclid(1_000_000), true);
            out.extend_from_slice(MONTHS[tm.month as usize].as_bytes());
            out.push(b' ');
            out.push(if tm.day < 10 {
                b' '
            } else {
                b'0' + (tm.day / 10) as u8
            });
            out.push(b'0' + (tm.day % 10) as u8);
            out.push(b' ');
            two(out, tm.hour);
            out.push(b':');
            two(out, tm.min);
            out.push(b':');
            two(out, tm.sec);
            out.push(b' ');
            if framing == Framing::Rfc3164 {
                if let Some(h) = hdr.hostname {
                    out.extend_from_slice(h.as_bytes());
                    out.push(b' ');
                }
            }
            out.extend_from_slice(hdr.tag.as_bytes());
            out.push(b'[');
            super::format::num(out, i64::from(hdr.pid));
            out.extend_from_slice(b"]: ");
        }
        Framing::Rfc5424 => {
            pri(out, prio);
            out.extend_from_slice(b"1 ");
            iso_date(out, now_us);
            out.push(b' ');
            out.extend_from_slice(hdr.hostname.unwrap_or("-").as_bytes());
            out.push(b' ');
            out.extend_from_slice(hdr.tag.as_bytes());
            out.push(b' ');
            super::format::num(out, i64::from(hdr.pid));
            out.extend_from_slice(b" - ");
            match hdr.sd {
                Some(sd) if !sd.is_empty() => out.extend_from_slice(sd),
                _ => out.push(b'-'),
            }
            out.push(b' ');
        }
        Framing::Priority => pri(out, prio),
        Framing::Short => pri(out, u32::from(level)),
        Framing::Timed => {
            pri(out, u32::from(level));
            iso_date(out, now_us);
            out.push(b' ');
        }
        Framing::Iso => {
            iso_date(out, now_us);
            out.push(b' ');
        }
        Framing::Raw => {}
    }
    out.extend_from_slice(msg);
    if out.len() - start > len {
        out.truncate(start + len);
    }
    out.push(b'\n');
}

/// A syslog message as received by a `log-forward` section: its priority and header fields
/// (RFC 3164 or RFC 5424, as HAProxy's `parse_log_message` reads them) and its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received<'a> {
    pub facility: u8,
    pub level: u8,
    /// The received date, kept (converted between the two syslog date forms when needed).
    pub time: Time<'a>,
    pub host: Option<&'a [u8]>,
    pub tag: Option<&'a [u8]>,
    pub pid: Option<&'a [u8]>,
    pub msgid: Option<&'a [u8]>,
    pub sd: Option<&'a [u8]>,
    pub msg: &'a [u8],
}

/// A received message's date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Time<'a> {
    None,
    /// RFC 3164's `Mmm dd hh:mm:ss`.
    Legacy(&'a [u8]),
    /// RFC 5424's ISO 8601 date.
    Iso(&'a [u8]),
}

/// Writes `t` as an RFC 5424 date: an ISO date as received, a legacy one in this year at
/// offset `-00:00` (unknown), as HAProxy converts it; `None` for none.
fn iso_of(out: &mut Vec<u8>, t: Time<'_>, now_us: i64) -> Option<()> {
    match t {
        Time::None => None,
        Time::Iso(d) => {
            out.extend_from_slice(d);
            Some(())
        }
        Time::Legacy(d) => {
            let month = MONTHS.iter().position(|m| d.starts_with(m.as_bytes()))? as u32;
            let day: u32 = std::str::from_utf8(&d[4..6]).ok()?.trim().parse().ok()?;
            let year = broken_down(now_us.div_euclid(1_000_000), true).year;
            super::format::num(out, i64::from(year));
            out.push(b'-');
            two(out, month + 1);
            out.push(b'-');
            two(out, day);
            out.push(b'T');
            out.extend_from_slice(&d[7..15]);
            out.extend_from_slice(b"-00:00");
            Some(())
        }
    }
}

/// Writes `t` as an RFC 3164 date (`Mmm dd hh:mm:ss`); `None` if it has none or does not
/// read.
fn legacy_of(out: &mut Vec<u8>, t: Time<'_>) -> Option<()> {
    match t {
        Time::None => None,
        Time::Legacy(d) => {
            out.extend_from_slice(d);
            Some(())
        }
        Time::Iso(d) => {
            // YYYY-MM-DDThh:mm:ss...
            if d.len() < 19 || d[4] != b'-' || d[7] != b'-' || d[10] != b'T' {
                return None;
            }
            let num = |r: std::ops::Range<usize>| -> Option<u32> {
                std::str::from_utf8(&d[r]).ok()?.parse().ok()
            };
            let month = num(5..7)?.checked_sub(1)? as usize;
            let day = num(8..10)?;
            out.extend_from_slice(MONTHS.get(month)?.as_bytes());
            out.push(b' ');
            out.push(if day < 10 {
                b' '
            } else {
                b'0' + (day / 10) as u8
            });
            out.push(b'0' + (day % 10) as u8);
            out.push(b' ');
            out.extend_from_slice(&d[11..19]);
            Some(())
        }
    }
}

/// A word up to the next space, and what follows the space.
fn word(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let i = b.iter().position(|&c| c == b' ')?;
    Some((&b[..i], &b[i + 1..]))
}

/// `-` is RFC 5424's nil value.
fn nil(w: &[u8]) -> Option<&[u8]> {
    (w != b"-" && !w.is_empty()).then_some(w)
}

/// Reads a received message. Without a valid `<PRI>`, the whole line is the text, at
/// facility user (1) and level notice (5); a header that does not parse leaves the rest as
/// the text.
pub fn parse(line: &[u8]) -> Received<'_> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut r = Received {
        facility: 1,
        level: 5,
        time: Time::None,
        host: None,
        tag: None,
        pid: None,
        msgid: None,
        sd: None,
        msg: line,
    };
    let Some(rest) = line.strip_prefix(b"<") else {
        return r;
    };
    let Some(end) = rest.iter().take(4).position(|&c| c == b'>') else {
        return r;
    };
    let Some(prio) = std::str::from_utf8(&rest[..end])
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
        .filter(|&p| p < 192)
    else {
        return r;
    };
    (r.facility, r.level) = ((prio / 8) as u8, (prio % 8) as u8);
    let rest = &rest[end + 1..];
    r.msg = rest;
    if let Some(v5) = rest.strip_prefix(b"1 ") {
        // TIMESTAMP HOST APP PROCID MSGID SD MSG
        let parsed = (|| {
            let (ts, b) = word(v5)?;
            let (host, b) = word(b)?;
            let (app, b) = word(b)?;
            let (pid, b) = word(b)?;
            let (msgid, b) = word(b)?;
            let (sd, msg) = if b.first() == Some(&b'[') {
                // Elements until the first space outside brackets.
                let mut depth = 0;
                let mut end = b.len();
                for (i, &c) in b.iter().enumerate() {
                    match c {
                        b'[' => depth += 1,
                        b']' => depth -= 1,
                        b' ' if depth == 0 => {
                            end = i;
                            break;
                        }
                        _ => {}
                    }
                }
                (&b[..end], b.get(end + 1..).unwrap_or(b""))
            } else {
                match word(b) {
                    Some((sd, msg)) => (sd, msg),
                    None => (b, &b""[..]),
                }
            };
            Some((ts, host, app, pid, msgid, sd, msg))
        })();
        if let Some((ts, host, app, pid, msgid, sd, msg)) = parsed {
            r.time = match nil(ts) {
                Some(t) => Time::Iso(t),
                None => Time::None,
            };
            r.host = nil(host);
            r.tag = nil(app);
            r.pid = nil(pid);
            r.msgid = nil(msgid);
            r.sd = nil(sd);
            r.msg = msg;
        }
        return r;
    }
    // RFC 3164: `Mmm dd hh:mm:ss HOST [TAG[[PID]]: ]MSG`, the host mandatory (as HAProxy
    // reads it: HAProxy's own lines without a host give their tag as the host).
    if rest.len() > 16 && MONTHS.iter().any(|m| rest.starts_with(m.as_bytes())) && rest[15] == b' '
    {
        let Some((host, b)) = word(&rest[16..]).filter(|(h, _)| !h.is_empty()) else {
            return r;
        };
        r.time = Time::Legacy(&rest[..15]);
        r.host = Some(host);
        r.msg = b;
        // A tag is a first word ending with `:` then a space, `TAG[PID]:` with a pid.
        let end = b.iter().position(|&c| c == b' ' || c == b':');
        if let Some(e) = end.filter(|&e| b[e] == b':' && b.get(e + 1) == Some(&b' ')) {
            let t = &b[..e];
            match t.iter().position(|&c| c == b'[') {
                Some(i) if t.ends_with(b"]") => {
                    r.tag = Some(&t[..i]);
                    r.pid = Some(&t[i + 1..t.len() - 1]);
                }
                _ => r.tag = Some(t),
            }
            r.tag = r.tag.filter(|t| !t.is_empty());
            r.msg = &b[e + 2..];
        }
    }
    r
}

/// Appends a received message `r` framed as `framing` says for a `log-forward` target (its
/// host, tag, pid, message id and structured data kept, the date the time of forwarding),
/// cut to `len` bytes, then a newline.
pub fn frame_received(
    out: &mut Vec<u8>,
    framing: Framing,
    level: u8,
    now_us: i64,
    r: &Received<'_>,
    len: usize,
) {
    let start = out.len();
    let prio = u32::from(r.facility) * 8 + u32::from(level);
    match framing {
        Framing::Rfc3164 | Framing::Local => {
            pri(out, prio);
            let at = out.len();
            if legacy_of(out, r.time).is_none() {
                out.truncate(at);
                // The date as `frame` writes it: `<PRI>DATE [0]: \n`, keep `DATE `.
                let hdr = Header {
                    tag: "",
                    hostname: None,
                    pid: 0,
                    sd: None,
                };
                let mut tmp = Vec::new();
                frame(
                    &mut tmp,
                    Framing::Local,
                    0,
                    0,
                    now_us,
                    &hdr,
                    b"",
                    usize::MAX,
                );
                let date = &tmp[3..tmp.len().saturating_sub(6)];
                out.extend_from_slice(date.strip_suffix(b" ").unwrap_or(date));
            }
            out.push(b' ');
            if framing == Framing::Rfc3164 {
                if let Some(h) = r.host {
                    out.extend_from_slice(h);
                    out.push(b' ');
                }
            }
            if let Some(t) = r.tag {
                out.extend_from_slice(t);
                if let Some(p) = r.pid {
                    out.push(b'[');
                    out.extend_from_slice(p);
                    out.push(b']');
                }
                out.extend_from_slice(b": ");
            }
        }
        Framing::Rfc5424 => {
            pri(out, prio);
            out.extend_from_slice(b"1 ");
            let at = out.len();
            if iso_of(out, r.time, now_us).is_none() {
                out.truncate(at);
                iso_date(out, now_us);
            }
            for f in [r.host, r.tag, r.pid, r.msgid, r.sd] {
                out.push(b' ');
                out.extend_from_slice(f.unwrap_or(b"-"));
            }
            out.push(b' ');
        }
        other => {
            let hdr = Header {
                tag: "",
                hostname: None,
                pid: 0,
                sd: None,
            };
            return frame(out, other, r.facility, level, now_us, &hdr, r.msg, len);
        }
    }
    out.extend_from_slice(r.msg);
    if out.len() - start > len {
        out.truncate(start + len);
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(f: Framing, host: Option<&str>, len: usize) -> String {
        let mut out = Vec::new();
        let hdr = Header {
            tag: "haproxy",
            hostname: host,
            pid: 42,
            sd: None,
        };
        frame(&mut out, f, 16, 6, 0, &hdr, b"hello world", len);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn framings() {
        // The date depends on TZ: check the parts around it.
        let s = framed(Framing::Rfc3164, None, 1024);
        assert!(
            s.starts_with("<134>") && s.ends_with(" haproxy[42]: hello world\n"),
            "{s}"
        );
        let s = framed(Framing::Rfc3164, Some("h"), 1024);
        assert!(s.ends_with(":00 h haproxy[42]: hello world\n"), "{s}");
        let s = framed(Framing::Rfc5424, None, 1024);
        assert!(
            s.starts_with("<134>1 19") || s.starts_with("<134>1 1970"),
            "{s}"
        );
        assert!(s.ends_with(" - haproxy 42 - - hello world\n"), "{s}");
        assert_eq!(framed(Framing::Raw, None, 1024), "hello world\n");
        assert_eq!(framed(Framing::Short, None, 1024), "<6>hello world\n");
        assert_eq!(framed(Framing::Priority, None, 1024), "<134>hello world\n");
        assert_eq!(framed(Framing::Raw, None, 5), "hello\n");
    }

    #[test]
    fn received_messages_are_read_and_framed_again() {
        // HAProxy's own line without a host: its tag reads as the host, as haproxy reads it.
        let r = parse(b"<134>Nov 24 21:00:00 haproxy[42]: GET / HTTP/1.1\n");
        assert_eq!((r.facility, r.level), (16, 6));
        assert_eq!(r.time, Time::Legacy(b"Nov 24 21:00:00"));
        assert_eq!(r.host, Some(&b"haproxy[42]:"[..]));
        assert_eq!((r.tag, r.pid), (None, None));
        assert_eq!(r.msg, b"GET / HTTP/1.1");
        let r = parse(b"<134>Nov 24 21:00:00 h haproxy[42]: GET /");
        assert_eq!(r.host, Some(&b"h"[..]));
        assert_eq!(r.tag, Some(&b"haproxy"[..]));
        assert_eq!(r.pid, Some(&b"42"[..]));
        assert_eq!(r.msg, b"GET /");
        let r = parse(b"<134>Nov  4 21:00:00 host1 app: text");
        assert_eq!(
            (r.host, r.tag, r.pid),
            (Some(&b"host1"[..]), Some(&b"app"[..]), None)
        );
        assert_eq!(r.msg, b"text");
        let r = parse(
            b"<165>1 2026-11-24T21:00:00.000000+00:00 h app 42 ID47 [a b=\"c d\"][e] msg here",
        );
        assert_eq!((r.facility, r.level), (20, 5));
        assert_eq!(r.host, Some(&b"h"[..]));
        assert_eq!(r.msgid, Some(&b"ID47"[..]));
        assert_eq!(r.sd, Some(&b"[a b=\"c d\"][e]"[..]));
        assert_eq!(r.msg, b"msg here");
        let r = parse(b"<14>1 - - - - - - m");
        assert_eq!((r.host, r.tag, r.sd, r.msg), (None, None, None, &b"m"[..]));
        let r = parse(b"no header");
        assert_eq!((r.facility, r.level, r.msg), (1, 5, &b"no header"[..]));

        // The received date is kept, converted between the two forms.
        let r = parse(b"<134>1 2026-11-04T21:00:00.000000+00:00 - haproxy 42 - - GET /");
        let mut out = Vec::new();
        frame_received(&mut out, Framing::Rfc3164, 6, 0, &r, 1024);
        assert_eq!(out, b"<134>Nov  4 21:00:00 haproxy[42]: GET /\n");
        let mut out = Vec::new();
        frame_received(&mut out, Framing::Rfc5424, 6, 0, &r, 1024);
        assert_eq!(
            out,
            b"<134>1 2026-11-04T21:00:00.000000+00:00 - haproxy 42 - - GET /\n"
        );
        let r = parse(b"<134>Nov 24 21:00:00 h t[1]: x");
        let mut out = Vec::new();
        frame_received(&mut out, Framing::Rfc5424, 6, 0, &r, 1024);
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.starts_with("<134>1 19") || s.starts_with("<134>1 1970"),
            "{s}"
        );
        assert!(s.ends_with("-11-24T21:00:00-00:00 h t 1 - - x\n"), "{s}");
        let mut out = Vec::new();
        frame_received(&mut out, Framing::Raw, 6, 0, &r, 1024);
        assert_eq!(out, b"x\n");
    }
}
