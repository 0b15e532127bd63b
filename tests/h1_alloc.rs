//! Proves the HTTP/1 hot path allocates nothing: parse, frame, decode a body and write the
//! forwarded head of a request and a response under a counting global allocator.
//!
//! The counting allocator needs `unsafe impl GlobalAlloc`; it lives in this test crate only (the
//! library keeps `#![deny(unsafe_code)]`) and just forwards to the system allocator.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bascule::proto::h1::{
    parse_request, parse_response, write_request_head, write_response_head, BodyDecoder,
    HeaderSlots, Limits, Method, Rewrite, Side, Status,
};

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every method forwards unchanged to `System`, which upholds the GlobalAlloc contract;
// the thread-local counter is const-initialised and has no destructor, so it never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr was returned by System.alloc with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> usize {
    ALLOCS.with(|c| c.get())
}

#[test]
fn parse_frame_decode_write_allocates_nothing() {
    let request: &[u8] = b"POST /upload HTTP/1.1\r\nHost: example.com\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n5\r\nhello\r\n0\r\nT: v\r\n\r\n";
    let response: &[u8] =
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nKeep-Alive: timeout=5\r\n\r\nok";
    let limits = Limits::default();
    let mut slots = HeaderSlots::<101>::new();
    let mut out = [0u8; 1024];
    let mut ip = [0u8; 45];

    let before = allocations();
    for _ in 0..100 {
        let Ok(Status::Complete(head, len)) = parse_request(request, &mut slots, &limits) else {
            panic!("request did not parse")
        };
        let xff = bascule::proto::h1::format_ip([10, 0, 0, 1].into(), &mut ip);
        let add = [(&b"x-forwarded-for"[..], xff)];
        let remove = [&b"x-forwarded-for"[..]];
        let rw = Rewrite {
            add: &add,
            remove: &remove,
            ..Rewrite::default()
        };
        let n = write_request_head(request, &head, slots.headers(), &rw, &mut out).unwrap();
        assert!(n > 0);
        let mut body = BodyDecoder::new(head.body, &limits, Side::Request);
        let mut rest = &request[len..];
        loop {
            let p = body.feed(rest).unwrap();
            rest = &rest[p.consumed..];
            if p.done {
                break;
            }
        }
        assert!(rest.is_empty());

        let Ok(Status::Complete(head, _)) =
            parse_response(response, &mut slots, &limits, Method::Post)
        else {
            panic!("response did not parse")
        };
        let n = write_response_head(
            response,
            &head,
            slots.headers(),
            &Rewrite::default(),
            &mut out,
        )
        .unwrap();
        assert!(n > 0);
    }
    let after = allocations();
    assert_eq!(after - before, 0, "allocations on the HTTP/1 hot path");
    // The counter itself works: a real allocation is seen.
    let v = std::hint::black_box(vec![1u8; 16]);
    assert!(allocations() > after && v.len() == 16);
}
