//! Fuzz target: the chunked body decoder, fed in pieces whose sizes come from the input.
//!
//! Invariants checked: no panic; `consumed` never exceeds the input; payload ranges lie within
//! the consumed bytes; feeding byte-by-byte and all-at-once reach the same verdict.
#![no_main]

use bascule::proto::h1::{ChunkedDecoder, Limits, Side};
use libfuzzer_sys::fuzz_target;

fn run(data: &[u8], step: usize) -> Result<(usize, usize, bool), ()> {
    let limits = Limits {
        max_trailers: 256,
        max_chunk_ext: 64,
        ..Limits::default()
    };
    let mut dec = ChunkedDecoder::new(&limits, Side::Request);
    let (mut pos, mut payload) = (0usize, 0usize);
    while pos < data.len() {
        let end = (pos + step).min(data.len());
        let window = &data[pos..end];
        let p = dec.feed(window).map_err(|_| ())?;
        assert!(p.consumed <= window.len());
        assert!(p.data.start <= p.data.end && p.data.end <= p.consumed);
        payload += p.data.len();
        pos += p.consumed;
        if p.done {
            return Ok((pos, payload, true));
        }
        if p.consumed == 0 {
            break;
        }
    }
    Ok((pos, payload, dec.is_done()))
}

fuzz_target!(|data: &[u8]| {
    let whole = run(data, usize::MAX / 2);
    let bytewise = run(data, 1);
    assert_eq!(whole, bytewise);
});
