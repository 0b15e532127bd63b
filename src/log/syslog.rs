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
}
