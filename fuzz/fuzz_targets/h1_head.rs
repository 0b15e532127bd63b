//! Fuzz target: HTTP/1 request and response heads, then the forwarded-head writer.
//!
//! Invariants checked: no panic; a complete head's length fits the input; every span points
//! inside the input; writing a parsed head either succeeds or reports a too-small output.
#![no_main]

use bascule::proto::h1::{
    parse_request, parse_response, write_request_head, write_response_head, HeaderSlots, Limits,
    Method, Rewrite, Status,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_head: 4096,
        max_headers: 32,
        ..Limits::default()
    };
    let mut slots = HeaderSlots::<32>::new();
    let mut out = [0u8; 8192];
    if let Ok(Status::Complete(head, len)) = parse_request(data, &mut slots, &limits) {
        assert!(len <= data.len());
        for h in slots.headers() {
            assert!(h.line.end as usize <= len && h.name.start <= h.value.start);
        }
        let _ = write_request_head(data, &head, slots.headers(), &Rewrite::default(), &mut out);
    }
    for method in [Method::Get, Method::Head, Method::Connect] {
        if let Ok(Status::Complete(head, len)) = parse_response(data, &mut slots, &limits, method) {
            assert!(len <= data.len());
            let _ =
                write_response_head(data, &head, slots.headers(), &Rewrite::default(), &mut out);
        }
    }
});
