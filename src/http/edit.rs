//! Rewriting a message head in place for the rules that change it (`set-header`,
//! `del-header`, `replace-value`, `set-path`, `set-status`...).
//!
//! A head is kept as offsets into the buffer it was read into ([`HeaderIdx`]), and everything
//! downstream (framing, hop-by-hop filtering, [`h1::copy_head`], logs, fetches) reads it that
//! way. An edit keeps that shape: the first edit copies the head into the session's edit buffer
//! (a few hundred bytes), and from then on a deleted header is an index removed from the list,
//! a new or changed header is a line appended to the edit buffer with an index that points
//! there (at the end of the list, or in place of the old one), and a new start line is appended
//! the same way with the head's ranges moved to it. Nothing is re-parsed, and a later rule, the
//! balancer and the copy to the other side all see the edited head through the same offsets.
//! An unedited head costs nothing: it is read where it was received.
//!
//! [`h1::copy_head`]: crate::proto::h1::copy_head

use std::ops::Range;

use crate::proto::h1::{HeaderIdx, RequestHead, ResponseHead};

/// Starts editing a head of `len` bytes at the start of `bytes`: copies it to `edited`, where
/// its offsets stay valid.
pub fn begin(edited: &mut Vec<u8>, bytes: &[u8], len: usize) {
    edited.clear();
    edited.extend_from_slice(&bytes[..len]);
}

/// Appends the line `name: value` to `buf` and returns its index.
fn line(buf: &mut Vec<u8>, name: &[u8], value: &[u8]) -> HeaderIdx {
    let start = buf.len();
    buf.extend_from_slice(name);
    buf.extend_from_slice(b": ");
    let v0 = buf.len();
    buf.extend_from_slice(value);
    let v1 = buf.len();
    buf.extend_from_slice(b"\r\n");
    HeaderIdx::new(buf, start..start + name.len(), v0..v1, start..buf.len())
}

/// Appends a header (`add-header`).
pub fn add(buf: &mut Vec<u8>, headers: &mut Vec<HeaderIdx>, name: &[u8], value: &[u8]) {
    let h = line(buf, name, value);
    headers.push(h);
}

/// Removes header `first` and every later one for which `matches(name, value)` holds (the
/// caller found the first already: the headers before it are neither read nor moved); returns
/// how many.
pub fn delete_from(
    buf: &[u8],
    headers: &mut Vec<HeaderIdx>,
    first: usize,
    mut matches: impl FnMut(&[u8], &[u8]) -> bool,
) -> usize {
    let before = headers.len();
    let mut kept = first;
    for i in first + 1..before {
        let h = headers[i];
        if !matches(h.name(buf), h.value(buf)) {
            headers[kept] = h;
            kept += 1;
        }
    }
    headers.truncate(kept);
    before - kept
}

/// Removes every header for which `matches(name, value)` holds; returns how many.
pub fn delete(
    buf: &[u8],
    headers: &mut Vec<HeaderIdx>,
    mut matches: impl FnMut(&[u8], &[u8]) -> bool,
) -> usize {
    let before = headers.len();
    headers.retain(|h| !matches(h.name(buf), h.value(buf)));
    before - headers.len()
}

/// Replaces every header named `name` (any case) by one `name: value` at the end
/// (`set-header`).
pub fn set(buf: &mut Vec<u8>, headers: &mut Vec<HeaderIdx>, name: &[u8], value: &[u8]) {
    // Usually there is none to delete: a look at the lengths first spares the `retain`.
    let len = name.len() as u32;
    if headers
        .iter()
        .any(|h| h.name.1 - h.name.0 == len && h.name(buf).eq_ignore_ascii_case(name))
    {
        delete(buf, headers, |n, _| n.eq_ignore_ascii_case(name));
    }
    add(buf, headers, name, value);
}

/// Gives header `i` a new value, keeping its name and its place (`replace-header`,
/// `replace-value`).
pub fn set_value(buf: &mut Vec<u8>, headers: &mut [HeaderIdx], i: usize, value: &[u8]) {
    let name = headers[i].name;
    let name = name.0 as usize..name.1 as usize;
    let start = buf.len();
    buf.extend_from_within(name.clone());
    buf.extend_from_slice(b": ");
    let v0 = buf.len();
    buf.extend_from_slice(value);
    let v1 = buf.len();
    buf.extend_from_slice(b"\r\n");
    headers[i] = HeaderIdx::new(buf, start..start + name.len(), v0..v1, start..buf.len());
}

/// Gives the request a new request line `method target version` (the version is kept), as
/// `set-method`, `set-path`, `set-query` and `set-uri` do. The head's ranges move to it; the
/// default port the parser would have cut is gone with the old target.
pub fn set_request_line(buf: &mut Vec<u8>, head: &mut RequestHead, method: &[u8], target: &[u8]) {
    let old = head.start_line.clone();
    let version = version_of(&buf[old.clone()], head.target.end - old.start);
    let version = version.start + old.start..version.end + old.start;
    let start = buf.len();
    buf.extend_from_slice(method);
    let m_end = buf.len();
    buf.push(b' ');
    let t0 = buf.len();
    buf.extend_from_slice(target);
    let t1 = buf.len();
    buf.push(b' ');
    buf.extend_from_within(version);
    buf.extend_from_slice(b"\r\n");
    head.method = start..m_end;
    head.target = t0..t1;
    head.start_line = start..buf.len();
    head.fixes.default_port = None;
}

/// The version in a request line (`line[after_target..]` holds ` HTTP/1.x` and the EOL).
fn version_of(line: &[u8], after_target: usize) -> Range<usize> {
    let rest = &line[after_target..];
    let start = after_target + rest.iter().take_while(|&&c| c == b' ').count();
    let end = line[start..]
        .iter()
        .position(|&c| c == b'\r' || c == b'\n' || c == b' ')
        .map_or(line.len(), |p| start + p);
    start..end
}

/// Gives the response a new status line (`set-status`): the version is kept; `reason`
/// defaults to the status's standard phrase.
pub fn set_status(buf: &mut Vec<u8>, head: &mut ResponseHead, status: u16, reason: Option<&[u8]>) {
    let old = head.start_line.clone();
    let line = &buf[old.clone()];
    let vlen = line.iter().position(|&c| c == b' ').unwrap_or(line.len());
    let start = buf.len();
    buf.extend_from_within(old.start..old.start + vlen);
    let reason = reason.unwrap_or_else(|| crate::proto::h1::reason(status).as_bytes());
    use std::io::Write;
    let _ = write!(buf, " {status} ");
    buf.extend_from_slice(reason);
    buf.extend_from_slice(b"\r\n");
    head.start_line = start..buf.len();
    head.status = status;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::h1::{self, Fixes};

    fn parsed(raw: &[u8]) -> (Vec<u8>, RequestHead, Vec<HeaderIdx>) {
        let mut headers = Vec::new();
        let head = h1::parse_request(raw, &mut headers).unwrap().unwrap();
        let mut buf = Vec::new();
        begin(&mut buf, raw, head.len);
        (buf, head, headers)
    }

    fn written(buf: &[u8], head: &RequestHead, headers: &[HeaderIdx]) -> String {
        let mut out = Vec::new();
        h1::copy_head(
            buf,
            head.start_line.clone(),
            headers,
            &head.fixes,
            &mut out,
            |_| true,
        );
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn set_add_delete_and_replace_keep_offsets_valid() {
        let raw = b"GET /a?x=1 HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-a: 2\r\nB: b\r\n\r\nBODY";
        let (mut buf, head, mut hs) = parsed(raw);
        set(&mut buf, &mut hs, b"X-A", b"three");
        assert_eq!(
            written(&buf, &head, &hs),
            "GET /a?x=1 HTTP/1.1\r\nHost: h\r\nB: b\r\nX-A: three\r\n"
        );
        add(&mut buf, &mut hs, b"Host", b"other");
        assert_eq!(
            delete(&buf, &mut hs, |n, v| n.eq_ignore_ascii_case(b"host")
                && v == b"h"),
            1
        );
        set_value(&mut buf, &mut hs, 0, b"bee");
        assert_eq!(
            written(&buf, &head, &hs),
            "GET /a?x=1 HTTP/1.1\r\nB: bee\r\nX-A: three\r\nHost: other\r\n"
        );
        // An added Host is classified as the parser would have.
        let host = hs.iter().find(|h| h.is(&buf, "host")).unwrap();
        assert_eq!(host.value(&buf), b"other");
    }

    #[test]
    fn delete_from_the_first_match_keeps_the_order() {
        let raw = b"GET / HTTP/1.1\r\nHost: h\r\nX: 1\r\nB: 2\r\nx: 2\r\nC: 3\r\n\r\n";
        let (buf, head, mut hs) = parsed(raw);
        let is_x = |n: &[u8], _: &[u8]| n.eq_ignore_ascii_case(b"x");
        let first = hs.iter().position(|h| is_x(h.name(&buf), b"")).unwrap();
        assert_eq!(delete_from(&buf, &mut hs, first, is_x), 2);
        assert_eq!(
            written(&buf, &head, &hs),
            "GET / HTTP/1.1\r\nHost: h\r\nB: 2\r\nC: 3\r\n"
        );
    }

    #[test]
    fn a_new_request_line_keeps_the_version_and_drops_the_port_fix() {
        let raw = b"GET http://h:80/a HTTP/1.0\r\nHost: h:80\r\n\r\n";
        let (mut buf, mut head, hs) = parsed(raw);
        assert!(head.fixes.default_port.is_some());
        set_request_line(&mut buf, &mut head, b"POST", b"/b?q");
        assert_eq!(head.method(&buf), b"POST");
        assert_eq!(&buf[head.target.clone()], b"/b?q");
        assert_eq!(
            head.fixes,
            Fixes {
                default_port: None,
                ..head.fixes
            }
        );
        assert!(written(&buf, &head, &hs).starts_with("POST /b?q HTTP/1.0\r\n"));
    }

    #[test]
    fn set_status_keeps_the_version() {
        let raw = b"HTTP/1.0 200 OK\r\nA: b\r\n\r\n";
        let mut hs = Vec::new();
        let mut head = h1::parse_response(raw, &mut hs, false).unwrap().unwrap();
        let mut buf = Vec::new();
        begin(&mut buf, raw, head.len);
        set_status(&mut buf, &mut head, 503, None);
        assert_eq!(
            &buf[head.start_line.clone()],
            b"HTTP/1.0 503 Service Unavailable\r\n"
        );
        set_status(&mut buf, &mut head, 299, Some(b"Fine"));
        assert_eq!(&buf[head.start_line.clone()], b"HTTP/1.0 299 Fine\r\n");
        assert_eq!(head.status, 299);
    }
}
