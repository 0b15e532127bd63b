//! `tune.ssl.keylog on`: the secrets of each accepted handshake kept for the `ssl_fc_*_secret`
//! fetches, so that a log line in the NSS key log format lets Wireshark decrypt a capture.
//!
//! rustls hands secrets to one `KeyLog` per configuration, not per connection, while it
//! processes the records a handshake step feeds it: [`Stash`] leaves them in a thread-local
//! that the handshake takes right after the step ([`take`]), as `tls::sni` does with the
//! certificate its resolver chose. Nothing is kept without `tune.ssl.keylog on`.

use std::cell::RefCell;

/// The secrets of one handshake, by NSS key log label, and the client random they go with.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Secrets {
    pub client_random: Vec<u8>,
    pub client_early_traffic: Option<Vec<u8>>,
    pub client_handshake_traffic: Option<Vec<u8>>,
    pub server_handshake_traffic: Option<Vec<u8>>,
    pub client_traffic_0: Option<Vec<u8>>,
    pub server_traffic_0: Option<Vec<u8>>,
    pub exporter: Option<Vec<u8>>,
    pub early_exporter: Option<Vec<u8>>,
}

impl Secrets {
    /// The secret of kind `k`, if this handshake had it (TLS 1.3 secrets of a TLS 1.2
    /// handshake: none).
    pub fn get(&self, k: crate::rules::source::SecretKind) -> Option<&[u8]> {
        use crate::rules::source::SecretKind as K;
        match k {
            K::ClientRandom => Some(&self.client_random).filter(|r| !r.is_empty()),
            K::ClientEarlyTraffic => self.client_early_traffic.as_ref(),
            K::ClientHandshakeTraffic => self.client_handshake_traffic.as_ref(),
            K::ServerHandshakeTraffic => self.server_handshake_traffic.as_ref(),
            K::ClientTraffic0 => self.client_traffic_0.as_ref(),
            K::ServerTraffic0 => self.server_traffic_0.as_ref(),
            K::Exporter => self.exporter.as_ref(),
            K::EarlyExporter => self.early_exporter.as_ref(),
        }
        .map(Vec::as_slice)
    }

    /// Adds what a later handshake step logged.
    pub fn merge(&mut self, other: Secrets) {
        if !other.client_random.is_empty() {
            self.client_random = other.client_random;
        }
        let pairs = [
            (&mut self.client_early_traffic, other.client_early_traffic),
            (
                &mut self.client_handshake_traffic,
                other.client_handshake_traffic,
            ),
            (
                &mut self.server_handshake_traffic,
                other.server_handshake_traffic,
            ),
            (&mut self.client_traffic_0, other.client_traffic_0),
            (&mut self.server_traffic_0, other.server_traffic_0),
            (&mut self.exporter, other.exporter),
            (&mut self.early_exporter, other.early_exporter),
        ];
        for (mine, theirs) in pairs {
            if theirs.is_some() {
                *mine = theirs;
            }
        }
    }

    fn set(&mut self, label: &str, client_random: &[u8], secret: &[u8]) {
        let slot = match label {
            "CLIENT_EARLY_TRAFFIC_SECRET" => &mut self.client_early_traffic,
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET" => &mut self.client_handshake_traffic,
            "SERVER_HANDSHAKE_TRAFFIC_SECRET" => &mut self.server_handshake_traffic,
            "CLIENT_TRAFFIC_SECRET_0" => &mut self.client_traffic_0,
            "SERVER_TRAFFIC_SECRET_0" => &mut self.server_traffic_0,
            "EXPORTER_SECRET" => &mut self.exporter,
            "EARLY_EXPORTER_SECRET" => &mut self.early_exporter,
            // TLS 1.2's master secret (`CLIENT_RANDOM`) is no fetch's here; its client random is.
            _ => {
                self.client_random = client_random.to_vec();
                return;
            }
        };
        *slot = Some(secret.to_vec());
        self.client_random = client_random.to_vec();
    }
}

thread_local! {
    static STASH: RefCell<Option<Secrets>> = const { RefCell::new(None) };
}

/// The `KeyLog` of a `bind` with `tune.ssl.keylog on`.
#[derive(Debug)]
pub struct Stash;

impl rustls::KeyLog for Stash {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        STASH.with(|s| {
            s.borrow_mut()
                .get_or_insert_with(Secrets::default)
                .set(label, client_random, secret)
        });
    }

    fn will_log(&self, _label: &str) -> bool {
        true
    }
}

/// The secrets the handshake step that just returned on this thread logged.
pub fn take() -> Option<Secrets> {
    STASH.with(|s| s.borrow_mut().take())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::KeyLog;

    #[test]
    fn secrets_are_kept_by_label_and_taken_once() {
        Stash.log("SERVER_HANDSHAKE_TRAFFIC_SECRET", &[1; 32], &[7; 48]);
        Stash.log("CLIENT_RANDOM", &[1; 32], &[9; 48]);
        let mut got = take().unwrap();
        assert_eq!(
            got.server_handshake_traffic.as_deref(),
            Some(&[7u8; 48][..])
        );
        assert_eq!(got.client_random, [1u8; 32]);
        assert!(take().is_none());
        Stash.log("CLIENT_TRAFFIC_SECRET_0", &[1; 32], &[8; 48]);
        got.merge(take().unwrap());
        assert_eq!(got.client_traffic_0.as_deref(), Some(&[8u8; 48][..]));
        assert!(got.server_handshake_traffic.is_some() && got.exporter.is_none());
    }
}
