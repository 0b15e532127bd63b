//! Table-driven tests of the HTTP/1 codec: the smuggling corpus, split points, pipelining,
//! response framing, connection semantics, limits, chunked bodies and writing.

use super::*;

type Expect = Result<BodyKind, ErrorKind>;

fn req(input: &[u8]) -> Result<Status<RequestHead>, H1Error> {
    let mut slots = HeaderSlots::<101>::new();
    parse_request(input, &mut slots, &Limits::default())
}

fn req_body(input: &[u8]) -> Expect {
    match req(input) {
        Ok(Status::Complete(h, len)) => {
            assert_eq!(len, input.len(), "head length for {input:?}");
            Ok(h.body)
        }
        Ok(Status::Partial) => panic!("partial for {:?}", String::from_utf8_lossy(input)),
        Err(e) => {
            assert_eq!(e.side, Side::Request);
            Err(e.kind)
        }
    }
}

fn check(table: &[(&str, &[u8], Expect)], f: fn(&[u8]) -> Expect) {
    let mut failed = 0;
    for (name, input, want) in table {
        let got = f(input);
        if &got != want {
            failed += 1;
            eprintln!(
                "case {name}:\n  input:    {:?}\n  expected: {want:?}\n  got:      {got:?}",
                String::from_utf8_lossy(input)
            );
        }
    }
    assert_eq!(failed, 0, "{failed} case(s) failed");
}

use BodyKind as B;
use ErrorKind as E;

#[test]
fn request_smuggling_corpus() {
    let table: &[(&str, &[u8], Expect)] = &[
        ("plain GET", b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", Ok(B::None)),
        ("CL", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n", Ok(B::Length(5))),
        ("CL zero", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", Ok(B::Length(0))),
        ("CL leading zeros", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 007\r\n\r\n", Ok(B::Length(7))),
        ("chunked", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", Ok(B::Chunked)),
        ("chunked upper case", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\n\r\n", Ok(B::Chunked)),
        ("chunked empty list elements", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ,chunked,\r\n\r\n", Ok(B::Chunked)),
        ("CL.TE", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n", Err(E::LengthAndChunked)),
        ("TE.CL", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 6\r\n\r\n", Err(E::LengthAndChunked)),
        ("TE.TE second bogus", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n", Err(E::BadTransferEncoding)),
        ("TE.TE chunked twice", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", Err(E::BadTransferEncoding)),
        ("TE chunked, chunked", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", Err(E::BadTransferEncoding)),
        ("TE chunked, identity", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n", Err(E::BadTransferEncoding)),
        ("TE gzip, chunked (request)", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", Err(E::BadTransferEncoding)),
        ("TE identity", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", Err(E::BadTransferEncoding)),
        ("TE xchunked", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n", Err(E::BadTransferEncoding)),
        ("TE chunkedx", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunkedx\r\n\r\n", Err(E::BadTransferEncoding)),
        ("TE chunked;x", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked;x\r\n\r\n", Err(E::BadTransferEncoding)),
        ("TE quoted", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \"chunked\"\r\n\r\n", Err(E::BadTransferEncoding)),
        ("TE empty", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \r\n\r\n", Err(E::BadTransferEncoding)),
        ("TE space before colon", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n", Err(E::HeaderName)),
        ("TE tab after colon", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\tchunked\r\n\r\n", Err(E::ObfuscatedFraming)),
        ("TE trailing tab", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\t\r\n\r\n", Err(E::ObfuscatedFraming)),
        ("TE vertical tab", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \x0bchunked\r\n\r\n", Err(E::HeaderValue)),
        ("TE obs-fold", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n chunked\r\n\r\n", Err(E::HeaderName)),
        ("obs-fold any header", b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\tc\r\n\r\n", Err(E::HeaderName)),
        ("TE in HTTP/1.0", b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", Err(E::TransferEncodingInHttp10)),
        ("CL duplicate identical", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", Ok(B::Length(5))),
        ("CL list identical", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", Ok(B::Length(5))),
        ("CL duplicate differing", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", Err(E::ConflictingContentLength)),
        ("CL list differing", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5,6\r\n\r\n", Err(E::ConflictingContentLength)),
        ("CL list empty element", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5,\r\n\r\n", Err(E::BadContentLength)),
        ("CL plus sign", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", Err(E::BadContentLength)),
        ("CL minus sign", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", Err(E::BadContentLength)),
        ("CL empty", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n", Err(E::BadContentLength)),
        ("CL hex", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n", Err(E::BadContentLength)),
        ("CL inner space", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n", Err(E::BadContentLength)),
        ("CL 2^63-1", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n", Ok(B::Length(9223372036854775807))),
        ("CL 2^63", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n", Err(E::BadContentLength)),
        ("CL u64 overflow", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", Err(E::BadContentLength)),
        ("CL tab", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\t5\r\n\r\n", Err(E::ObfuscatedFraming)),
        ("NUL in value", b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\0c\r\n\r\n", Err(E::HeaderValue)),
        ("bare CR in value", b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n", Err(E::HeaderValue)),
        ("DEL in value", b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x7fc\r\n\r\n", Err(E::HeaderValue)),
        ("control in name", b"GET / HTTP/1.1\r\nHost: a\r\nX\x01A: b\r\n\r\n", Err(E::HeaderName)),
        ("empty name", b"GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n", Err(E::HeaderName)),
        ("no colon", b"GET / HTTP/1.1\r\nHost: a\r\nX-A b\r\n\r\n", Err(E::HeaderName)),
        ("space before first header", b"GET / HTTP/1.1\r\n Host: a\r\n\r\n", Err(E::HeaderName)),
        ("obs-text value accepted", b"GET / HTTP/1.1\r\nHost: a\r\nX-A: caf\xc3\xa9\r\n\r\n", Ok(B::None)),
        ("LF-only line endings accepted", b"GET / HTTP/1.1\nHost: a\nContent-Length: 3\n\n", Ok(B::Length(3))),
        ("mixed CRLF and LF accepted", b"GET / HTTP/1.1\r\nHost: a\nX: y\r\n\n", Ok(B::None)),
        ("CR without LF after request line", b"GET / HTTP/1.1\rHost: a\r\n\r\n", Err(E::NewLine)),
        ("missing Host 1.1", b"GET / HTTP/1.1\r\n\r\n", Err(E::MissingHost)),
        ("two Hosts", b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", Err(E::DuplicateHost)),
        ("two Hosts 1.0", b"GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", Err(E::DuplicateHost)),
        ("no Host 1.0", b"GET / HTTP/1.0\r\n\r\n", Ok(B::None)),
        ("empty Host 1.1", b"GET / HTTP/1.1\r\nHost:\r\n\r\n", Ok(B::None)),
        ("HTTP/2.0 version", b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", Err(E::StartLine)),
        ("lower-case version", b"GET / http/1.1\r\nHost: a\r\n\r\n", Err(E::StartLine)),
        ("space in target", b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", Err(E::StartLine)),
        ("double space", b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", Err(E::StartLine)),
        ("Connection names CL: not stripped, still framed", b"POST / HTTP/1.1\r\nHost: a\r\nConnection: content-length\r\nContent-Length: 2\r\n\r\n", Ok(B::Length(2))),
    ];
    check(table, req_body);
}

#[test]
fn every_split_point_gives_partial_then_the_same_head() {
    let full: &[u8] = b"POST /p?q=1 HTTP/1.1\r\nHost: example.com\r\nContent-Length: 3\r\nX-Y:  z \r\nConnection: keep-alive, X-Y\r\n\r\nabc";
    let head_len = full.len() - 3;
    let mut slots = HeaderSlots::<101>::new();
    let want = parse_request(full, &mut slots, &Limits::default()).unwrap();
    let want_headers = slots.headers().to_vec();
    assert_eq!(want_headers.len(), 4);
    for cut in 0..head_len {
        let got = parse_request(&full[..cut], &mut slots, &Limits::default());
        assert_eq!(got, Ok(Status::Partial), "cut at {cut}");
    }
    for cut in head_len..=full.len() {
        let got = parse_request(&full[..cut], &mut slots, &Limits::default());
        assert_eq!(got, Ok(want), "cut at {cut}");
        assert_eq!(slots.headers(), &want_headers[..]);
    }
    let Status::Complete(h, len) = want else {
        panic!()
    };
    assert_eq!(len, head_len);
    assert_eq!(h.method.get(full), b"POST");
    assert_eq!(h.method_kind, Method::Post);
    assert_eq!(h.target.get(full), b"/p?q=1");
    assert_eq!(h.version, Version::Http11);
    let names: Vec<&[u8]> = want_headers.iter().map(|h| h.name.get(full)).collect();
    assert_eq!(
        names,
        [&b"Host"[..], b"Content-Length", b"X-Y", b"Connection"]
    );
    assert_eq!(want_headers[2].value.get(full), b"z");
    assert_eq!(want_headers[2].line.get(full), b"X-Y:  z ");
    assert!(want_headers[2].hop_by_hop, "nominated by Connection");
    assert!(want_headers[3].hop_by_hop);
    assert!(!want_headers[0].hop_by_hop);
}

#[test]
fn pipelined_requests_in_one_buffer() {
    let buf: &[u8] = b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nPOST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhiGET /3 HTTP/1.1\r\nHost: a\r\n\r\nGET /4 HT";
    let mut slots = HeaderSlots::<8>::new();
    let limits = Limits::default();
    let mut rest = buf;
    let mut targets = Vec::new();
    loop {
        match parse_request(rest, &mut slots, &limits).unwrap() {
            Status::Partial => break,
            Status::Complete(h, len) => {
                targets.push(h.target.get(rest).to_vec());
                rest = &rest[len..];
                let mut dec = BodyDecoder::new(h.body, &limits, Side::Request);
                let p = dec.feed(rest).unwrap();
                assert!(p.done);
                rest = &rest[p.consumed..];
            }
        }
    }
    assert_eq!(targets, [b"/1".to_vec(), b"/2".to_vec(), b"/3".to_vec()]);
    assert_eq!(rest, b"GET /4 HT");
}

#[test]
fn leading_empty_lines_are_skipped() {
    let buf = b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
    let Ok(Status::Complete(h, len)) = req(buf) else {
        panic!()
    };
    assert_eq!(len, buf.len());
    assert_eq!(h.method.get(buf), b"GET");
}

type RespExpect = Result<(BodyKind, bool), ErrorKind>;

#[test]
fn response_framing() {
    use Method as M;
    let table: &[(&str, M, &[u8], RespExpect)] = &[
        ("CL", M::Get, b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", Ok((B::Length(3), true))),
        ("chunked", M::Get, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", Ok((B::Chunked, true))),
        ("gzip, chunked", M::Get, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", Ok((B::Chunked, true))),
        ("TE not chunked: close-delimited", M::Get, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", Ok((B::CloseDelimited, false))),
        ("chunked not last", M::Get, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", Err(E::BadTransferEncoding)),
        ("no length: close-delimited", M::Get, b"HTTP/1.1 200 OK\r\n\r\n", Ok((B::CloseDelimited, false))),
        ("HEAD with CL", M::Head, b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n", Ok((B::None, true))),
        ("HEAD with chunked", M::Head, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", Ok((B::None, true))),
        ("204", M::Get, b"HTTP/1.1 204 No Content\r\n\r\n", Ok((B::None, true))),
        ("204 with CL ignored", M::Get, b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", Ok((B::None, true))),
        ("304 with CL", M::Get, b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", Ok((B::None, true))),
        ("100", M::Post, b"HTTP/1.1 100 Continue\r\n\r\n", Ok((B::None, true))),
        ("103", M::Get, b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n", Ok((B::None, true))),
        ("101", M::Get, b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n", Ok((B::None, false))),
        ("CONNECT 200", M::Connect, b"HTTP/1.1 200 OK\r\n\r\n", Ok((B::None, false))),
        ("CONNECT 407 has a body", M::Connect, b"HTTP/1.1 407 Auth\r\nContent-Length: 2\r\n\r\n", Ok((B::Length(2), true))),
        ("CL+TE", M::Get, b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", Err(E::LengthAndChunked)),
        ("CL+TE even on 204", M::Get, b"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", Err(E::LengthAndChunked)),
        ("differing CL", M::Get, b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", Err(E::ConflictingContentLength)),
        ("1.0 with TE", M::Get, b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", Err(E::TransferEncodingInHttp10)),
        ("1.0 CL no keep-alive", M::Get, b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", Ok((B::Length(1), false))),
        ("1.0 CL keep-alive", M::Get, b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: Keep-Alive\r\n\r\n", Ok((B::Length(1), true))),
        ("1.1 close", M::Get, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\n", Ok((B::Length(1), false))),
        ("no reason phrase", M::Get, b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", Ok((B::Length(0), true))),
        ("obs-fold", M::Get, b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", Err(E::HeaderName)),
        ("space before colon", M::Get, b"HTTP/1.1 200 OK\r\nContent-Length : 1\r\n\r\n", Err(E::HeaderName)),
        ("bad status", M::Get, b"HTTP/1.1 2000 OK\r\n\r\n", Err(E::StartLine)),
    ];
    let mut failed = 0;
    for (name, method, input, want) in table {
        let mut slots = HeaderSlots::<16>::new();
        let got = match parse_response(input, &mut slots, &Limits::default(), *method) {
            Ok(Status::Complete(h, len)) => {
                assert_eq!(len, input.len());
                Ok((h.body, h.conn.persistent))
            }
            Ok(Status::Partial) => panic!("{name}: partial"),
            Err(e) => {
                assert_eq!(e.status(), 502, "{name}");
                Err(e.kind)
            }
        };
        if &got != want {
            failed += 1;
            eprintln!("case {name}:\n  expected: {want:?}\n  got:      {got:?}");
        }
    }
    assert_eq!(failed, 0);
}

#[test]
fn response_flags() {
    let mut slots = HeaderSlots::<16>::new();
    let l = Limits::default();
    let buf =
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    let Ok(Status::Complete(h, _)) = parse_response(buf, &mut slots, &l, Method::Get) else {
        panic!()
    };
    assert!(h.tunnel && !h.interim && h.conn.upgrade && h.conn.upgrade_token);
    assert_eq!(h.reason.get(buf), b"Switching Protocols");
    let buf = b"HTTP/1.1 100 Continue\r\n\r\n";
    let Ok(Status::Complete(h, _)) = parse_response(buf, &mut slots, &l, Method::Post) else {
        panic!()
    };
    assert!(h.interim && !h.tunnel);
}

#[test]
fn connection_semantics() {
    // (input, persistent, close, keep_alive, upgrade_token, upgrade, expect_continue)
    let table: &[(&[u8], [bool; 6])] = &[
        (
            b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            [true, false, false, false, false, false],
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            [false, true, false, false, false, false],
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive, CLOSE\r\n\r\n",
            [false, true, true, false, false, false],
        ),
        (
            b"GET / HTTP/1.0\r\n\r\n",
            [false, false, false, false, false, false],
        ),
        (
            b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            [true, false, true, false, false, false],
        ),
        (
            b"GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n",
            [false, true, true, false, false, false],
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
            [true, false, false, true, true, false],
        ),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n",
            [true, false, false, false, false, true],
        ),
        (
            b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n",
            [false, false, false, false, false, false],
        ),
    ];
    for (input, want) in table {
        let Ok(Status::Complete(h, _)) = req(input) else {
            panic!("{:?}", String::from_utf8_lossy(input))
        };
        let c = h.conn;
        let got = [
            c.persistent,
            c.close,
            c.keep_alive,
            c.upgrade_token,
            c.upgrade,
            c.expect_continue,
        ];
        assert_eq!(&got, want, "{:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn limits_and_status_mapping() {
    let limits = Limits {
        max_head: 64,
        max_headers: 3,
        ..Limits::default()
    };
    let mut slots = HeaderSlots::<101>::new();
    let mut p = |b: &[u8]| parse_request(b, &mut slots, &limits).map_err(|e| (e.kind, e.status()));
    let long_uri = [&b"GET /"[..], &[b'a'; 100], b" HTTP/1.1\r\nHost: a\r\n\r\n"].concat();
    assert_eq!(p(&long_uri), Err((E::UriTooLong, 414)));
    assert_eq!(
        p(&long_uri[..64]),
        Err((E::UriTooLong, 414)),
        "exactly at the limit"
    );
    assert_eq!(p(&long_uri[..63]), Ok(Status::Partial), "below the limit");
    let big_header = [
        &b"GET / HTTP/1.1\r\nHost: a\r\nX: "[..],
        &[b'b'; 100],
        b"\r\n\r\n",
    ]
    .concat();
    assert_eq!(p(&big_header), Err((E::HeadTooLarge, 431)));
    assert_eq!(
        p(b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n"),
        Ok(Status::Complete(
            match req(b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n") {
                Ok(Status::Complete(h, _)) => h,
                _ => panic!(),
            },
            39
        ))
    );
    assert_eq!(
        p(b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"),
        Err((E::TooManyHeaders, 431))
    );
    // Exactly max_head bytes is still accepted.
    let exact = [
        &b"GET / HTTP/1.1\r\nHost: a\r\nX: "[..],
        &[b'b'; 32],
        b"\r\n\r\n",
    ]
    .concat();
    assert_eq!(exact.len(), 64);
    assert!(matches!(p(&exact), Ok(Status::Complete(_, 64))));
    // Slot capacity below max_headers wins.
    let mut small = HeaderSlots::<2>::new();
    let r = parse_request(
        b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n",
        &mut small,
        &Limits::default(),
    );
    assert_eq!(r.map_err(|e| e.kind), Err(E::TooManyHeaders));
    // Response errors are 502, internal ones 500.
    assert_eq!(H1Error::new(E::UriTooLong, Side::Response).status(), 502);
    assert_eq!(
        H1Error::new(E::OutputTooSmall, Side::Internal).status(),
        500
    );
    assert_eq!(H1Error::new(E::MissingHost, Side::Request).status(), 400);
}

fn chunked_all(input: &[u8], step: usize) -> Result<(Vec<u8>, usize), ErrorKind> {
    let mut dec = ChunkedDecoder::new(
        &Limits {
            max_trailers: 64,
            max_chunk_ext: 16,
            ..Limits::default()
        },
        Side::Request,
    );
    let mut payload = Vec::new();
    let mut pos = 0;
    while !dec.is_done() {
        let end = (pos + step).min(input.len());
        let window = &input[pos..end];
        let p = dec.feed(window).map_err(|e| e.kind)?;
        payload.extend_from_slice(&window[p.data.clone()]);
        pos += p.consumed;
        if p.done {
            break;
        }
        if p.consumed == 0 && end == input.len() {
            return Err(E::NewLine); // ran out of input: marks "incomplete" in this test
        }
    }
    Ok((payload, pos))
}

#[test]
fn chunked_corpus() {
    type C = Result<(&'static [u8], usize), ErrorKind>;
    let table: &[(&str, &[u8], C)] = &[
        ("simple", b"5\r\nhello\r\n0\r\n\r\n", Ok((b"hello", 15))),
        ("two chunks + next request", b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\nGET", Ok((b"abcde", 20))),
        ("hex upper and lower", b"A\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\n", Ok((b"01234567890123456789", 35))),
        ("leading zeros", b"0005\r\nhello\r\n000\r\n\r\n", Ok((b"hello", 20))),
        ("extension", b"5;name=val\r\nhello\r\n0;x\r\n\r\n", Ok((b"hello", 26))),
        ("trailers", b"1\r\nx\r\n0\r\nChecksum: abc\r\nX-B: \r\n\r\n", Ok((b"x", 33))),
        ("leading space in size", b" 5\r\nhello\r\n0\r\n\r\n", Err(E::BadChunkSize)),
        ("trailing space in size", b"5 \r\nhello\r\n0\r\n\r\n", Err(E::BadChunkSize)),
        ("non-hex size", b"g\r\n", Err(E::BadChunkSize)),
        ("empty size", b"\r\nhello\r\n", Err(E::BadChunkSize)),
        ("0x prefix", b"0x5\r\nhello\r\n", Err(E::BadChunkSize)),
        ("sign", b"+5\r\nhello\r\n", Err(E::BadChunkSize)),
        ("2^63-1 accepted", b"7fffffffffffffff\r\n", Err(E::NewLine)),
        ("2^63 overflow", b"8000000000000000\r\n", Err(E::BadChunkSize)),
        ("u64 overflow", b"ffffffffffffffffff\r\n", Err(E::BadChunkSize)),
        ("32 digits ok", b"00000000000000000000000000000001\r\nx\r\n0\r\n\r\n", Ok((b"x", 42))),
        ("33 digits", b"000000000000000000000000000000001\r\nx\r\n0\r\n\r\n", Err(E::BadChunkSize)),
        ("bare LF after size", b"5\nhello\r\n0\r\n\r\n", Err(E::BadChunkSize)),
        ("CR not LF after size", b"5\rhello\r\n0\r\n\r\n", Err(E::BadChunkTerminator)),
        ("missing CRLF after data", b"5\r\nhelloX\r\n0\r\n\r\n", Err(E::BadChunkTerminator)),
        ("bare LF after data", b"5\r\nhello\n0\r\n\r\n", Err(E::BadChunkTerminator)),
        ("data longer than size", b"3\r\nhello\r\n0\r\n\r\n", Err(E::BadChunkTerminator)),
        ("extension too long", b"5;aaaaaaaaaaaaaaaaaaaaaaaaa\r\nhello\r\n0\r\n\r\n", Err(E::BadChunkExtension)),
        ("bare LF in extension", b"5;a\nhello\r\n0\r\n\r\n", Err(E::BadChunkExtension)),
        ("NUL in extension", b"5;a\0\r\nhello\r\n0\r\n\r\n", Err(E::BadChunkExtension)),
        ("trailer obs-fold", b"0\r\nA: b\r\n c\r\n\r\n", Err(E::BadTrailer)),
        ("trailer space before colon", b"0\r\nA : b\r\n\r\n", Err(E::BadTrailer)),
        ("trailer NUL", b"0\r\nA: b\0\r\n\r\n", Err(E::BadTrailer)),
        ("trailer bare LF", b"0\r\nA: b\n\r\n", Err(E::BadTrailer)),
        ("final bare LF", b"0\r\n\n", Err(E::BadTrailer)),
        ("final CR junk", b"0\r\n\rX", Err(E::BadTrailer)),
        ("trailers too large", b"0\r\nA: bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\r\n\r\n", Err(E::TrailersTooLarge)),
        ("incomplete", b"5\r\nhel", Err(E::NewLine)),
    ];
    let mut failed = 0;
    for (name, input, want) in table {
        let want = want.map(|(p, n)| (p.to_vec(), n));
        for step in [1usize, 2, 3, 7, usize::MAX / 2] {
            let got = chunked_all(input, step);
            if got != want {
                failed += 1;
                eprintln!("case {name} (step {step}):\n  expected: {want:?}\n  got:      {got:?}");
            }
        }
    }
    assert_eq!(failed, 0);
}

#[test]
fn chunked_state_is_inspectable_and_errors_side() {
    let mut d = ChunkedDecoder::new(&Limits::default(), Side::Response);
    assert_eq!(d.feed(b"1").unwrap().consumed, 1);
    assert_eq!(d.state(), ChunkedState::Size { size: 1, digits: 1 });
    let e = d.feed(b"z").unwrap_err();
    assert_eq!(e.status(), 502);
}

#[test]
fn length_decoder() {
    let mut d = LengthDecoder::new(5);
    assert_eq!(
        d.feed(b"abc"),
        Progress {
            consumed: 3,
            data: 0..3,
            done: false
        }
    );
    assert_eq!(
        d.feed(b"defGET"),
        Progress {
            consumed: 2,
            data: 0..2,
            done: true
        }
    );
    assert_eq!(d.remaining(), 0);
    let mut none = BodyDecoder::new(BodyKind::None, &Limits::default(), Side::Request);
    assert!(none.feed(b"x").unwrap().done);
    let mut close = BodyDecoder::new(BodyKind::CloseDelimited, &Limits::default(), Side::Response);
    assert_eq!(
        close.feed(b"xy").unwrap(),
        Progress {
            consumed: 2,
            data: 0..2,
            done: false
        }
    );
}

fn write_req(input: &[u8], rw: &Rewrite<'_>) -> Vec<u8> {
    let mut slots = HeaderSlots::<16>::new();
    let Ok(Status::Complete(h, _)) = parse_request(input, &mut slots, &Limits::default()) else {
        panic!()
    };
    let mut out = [0u8; 512];
    let n = write_request_head(input, &h, slots.headers(), rw, &mut out).unwrap();
    out[..n].to_vec()
}

#[test]
fn writing_request_heads() {
    let table: &[(&str, &[u8], Rewrite<'_>, &[u8])] = &[
        (
            "untouched lines keep case, order and spacing",
            b"GET /x HTTP/1.1\r\nhOsT:  a  \r\nX-Z: 1\r\n\r\n",
            Rewrite::default(),
            b"GET /x HTTP/1.1\r\nhOsT:  a  \r\nX-Z: 1\r\n\r\n",
        ),
        (
            "hop-by-hop stripped, nominated too, XFF and close appended",
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Secret\r\nKeep-Alive: 5\r\nX-Secret: s\r\nTE: trailers\r\nProxy-Connection: x\r\nTrailer: T\r\nUpgrade: h2c\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n",
            Rewrite { remove: &[b"x-forwarded-for"], add: &[(b"x-forwarded-for", b"10.0.0.1")], connection: Some(b"close"), ..Rewrite::default() },
            b"GET / HTTP/1.1\r\nHost: a\r\nTrailer: T\r\nx-forwarded-for: 10.0.0.1\r\nconnection: close\r\n\r\n",
        ),
        (
            "upgrade kept for a tunnel",
            b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
            Rewrite { keep_upgrade: true, connection: Some(b"upgrade"), ..Rewrite::default() },
            b"GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nconnection: upgrade\r\n\r\n",
        ),
        (
            "bare LF re-terminated with CRLF",
            b"POST / HTTP/1.0\nContent-Length: 2\n\n",
            Rewrite { strip_hop_by_hop: false, ..Rewrite::default() },
            b"POST / HTTP/1.0\r\nContent-Length: 2\r\n\r\n",
        ),
        (
            "framing headers survive a Connection nomination",
            b"POST / HTTP/1.1\r\nHost: a\r\nConnection: Content-Length, Host\r\nContent-Length: 2\r\n\r\n",
            Rewrite::default(),
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n",
        ),
    ];
    for (name, input, rw, want) in table {
        let got = write_req(input, rw);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "case {name}"
        );
    }
}

#[test]
fn writing_response_heads_and_small_output() {
    let input = b"HTTP/1.1 404 Not Found\r\nServer: x\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n";
    let mut slots = HeaderSlots::<16>::new();
    let Ok(Status::Complete(h, _)) =
        parse_response(input, &mut slots, &Limits::default(), Method::Get)
    else {
        panic!()
    };
    let mut out = [0u8; 256];
    let n = write_response_head(input, &h, slots.headers(), &Rewrite::default(), &mut out).unwrap();
    assert_eq!(
        &out[..n],
        b"HTTP/1.1 404 Not Found\r\nServer: x\r\nContent-Length: 0\r\n\r\n"
    );
    for small in 0..n {
        let e = write_response_head(
            input,
            &h,
            slots.headers(),
            &Rewrite::default(),
            &mut out[..small],
        );
        assert_eq!(e.unwrap_err().status(), 500);
    }
}

#[test]
fn error_responses_are_consistent() {
    assert_eq!(
        error_response(503),
        &b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 107\r\ncache-control: no-cache\r\ncontent-type: text/html\r\n\r\n<html><body><h1>503 Service Unavailable</h1>\nNo server is available to handle this request.\n</body></html>\n"[..]
    );
    for status in [400u16, 403, 408, 413, 414, 431, 500, 502, 503, 504] {
        let text = error_response(status);
        let s = std::str::from_utf8(text).unwrap();
        assert!(s.starts_with(&format!("HTTP/1.1 {status} ")), "{status}");
        let (head, body) = s.split_once("\r\n\r\n").unwrap();
        let cl: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(cl, body.len(), "content-length of {status}");
        assert!(body.contains(&format!("<h1>{status} ")), "{status}");
        // Our own texts must parse with our own parser.
        let mut slots = HeaderSlots::<8>::new();
        let r = parse_response(text, &mut slots, &Limits::default(), Method::Get).unwrap();
        assert!(
            matches!(r, Status::Complete(ResponseHead { status: s2, body: BodyKind::Length(_), .. }, _) if s2 == status)
        );
    }
    assert_eq!(error_response(999), error_response(500));
    assert_eq!(
        H1Error::new(E::TooManyHeaders, Side::Request).response(),
        error_response(431)
    );
}

#[test]
fn format_ip_without_allocation() {
    let mut s = [0u8; 45];
    assert_eq!(format_ip("10.1.2.3".parse().unwrap(), &mut s), b"10.1.2.3");
    assert_eq!(
        format_ip("::ffff:255.255.255.255".parse().unwrap(), &mut s),
        b"::ffff:255.255.255.255"
    );
    assert_eq!(
        format_ip(
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff".parse().unwrap(),
            &mut s
        ),
        b"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
    );
}

#[test]
fn garbage_never_panics() {
    // A cheap deterministic stand-in for the fuzz targets, run on every `cargo test`.
    let mut x: u32 = 0x1234_5678;
    let alphabet =
        b"GET /HTP1.0\r\n:; ,chunkedContent-LngthTrasfr-Ecodig\t\x00\x7f\x80Host0123456789abcdef";
    let mut buf = [0u8; 96];
    for _ in 0..20_000 {
        for b in buf.iter_mut() {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = alphabet[(x as usize) % alphabet.len()];
        }
        let len = (x as usize) % buf.len();
        let input = &buf[..len];
        let mut slots = HeaderSlots::<4>::new();
        let limits = Limits {
            max_head: 64,
            max_headers: 4,
            max_trailers: 32,
            max_chunk_ext: 8,
        };
        let _ = parse_request(input, &mut slots, &limits);
        let _ = parse_response(input, &mut slots, &limits, Method::Get);
        let mut d = ChunkedDecoder::new(&limits, Side::Request);
        let mut rest = input;
        while let Ok(p) = d.feed(rest) {
            if p.consumed == 0 || p.done {
                break;
            }
            rest = &rest[p.consumed..];
        }
    }
}
