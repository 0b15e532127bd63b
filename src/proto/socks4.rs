//! The SOCKS4 CONNECT handshake a `server ... socks4 ADDR` connection starts with, as HAProxy
//! sends it: version 4, command 1 (CONNECT), the destination's port and IPv4 address, and the
//! user id `HAProxy`; the proxy's 8-byte reply grants it with status 0x5A.

use std::net::{SocketAddr, SocketAddrV4};

/// The user id HAProxy sends.
const USER_ID: &[u8; 8] = b"HAProxy\0";

/// The request's length.
pub const REQUEST_LEN: usize = 16;
/// The reply's length.
pub const REPLY_LEN: usize = 8;

/// The CONNECT request for `to`; `None` for an IPv6 destination, which SOCKS4 cannot name.
pub fn request(to: SocketAddr) -> Option<[u8; REQUEST_LEN]> {
    let SocketAddr::V4(to) = to else {
        return None;
    };
    Some(request_v4(to))
}

fn request_v4(to: SocketAddrV4) -> [u8; REQUEST_LEN] {
    let mut r = [0u8; REQUEST_LEN];
    r[0] = 4;
    r[1] = 1;
    r[2..4].copy_from_slice(&to.port().to_be_bytes());
    r[4..8].copy_from_slice(&to.ip().octets());
    r[8..].copy_from_slice(USER_ID);
    r
}

/// Whether the proxy's reply grants the connection.
pub fn granted(reply: &[u8; REPLY_LEN]) -> bool {
    reply[1] == 0x5A
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_haproxys() {
        let r = request("127.0.0.1:8080".parse().unwrap()).unwrap();
        assert_eq!(
            r,
            [4, 1, 0x1f, 0x90, 127, 0, 0, 1, b'H', b'A', b'P', b'r', b'o', b'x', b'y', 0]
        );
        assert!(request("[::1]:80".parse().unwrap()).is_none());
        assert!(granted(&[0, 0x5A, 0, 0, 0, 0, 0, 0]));
        assert!(!granted(&[0, 0x5B, 0, 0, 0, 0, 0, 0]));
    }
}
