//! Fuzz target: the property checks of `checks::request_head` (fuzz/checks.rs) on arbitrary bytes.
#![no_main]

#[allow(dead_code)] // each target uses one check of the shared file
#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::request_head(data));
