//! Wire protocols, sans-IO: bytes in, decisions out, no socket and no clock, so each parser is
//! unit-tested on its own and can be fuzzed.

pub mod cookie;
pub mod h1;
pub mod proxy;
pub mod socks4;
pub mod tls_hello;
