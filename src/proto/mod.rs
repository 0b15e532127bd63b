//! Wire protocols, sans-IO: bytes in, parsed structure (as offsets) or bytes out.
//!
//! Nothing here touches a socket, a clock or a thread: every parser takes the caller's read buffer
//! and answers complete, partial or error, so that the I/O layers (`session`, `http`) drive them and
//! tests and fuzz targets can feed them arbitrary bytes. See [`h1`] for HTTP/1.x.

pub mod h1;
