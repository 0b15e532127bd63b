//! TLS with rustls (the aws-lc-rs provider): the certificates a `bind ... ssl crt ...` line
//! loads, and how a handshake picks one.
//!
//! - [`ca`]: `ca-file` and `crl-file` (a PEM file, a directory of them, or `@system-ca`);
//! - [`cafiles`]: CA and CRL files in memory, read by the client certificate verifiers, and
//!   the stats socket's `new`/`set`/`commit`/`abort`/`del`/`show ssl ca-file|crl-file`;
//! - [`cert`]: PEM bundles and directories, checked at load with errors naming the file;
//! - [`sni`]: HAProxy's certificate selection by server name (exact, wildcard, ECDSA or RSA
//!   by what the client accepts, default or `strict-sni`), as a rustls certificate resolver;
//! - [`params`]: OpenSSL's names of versions, suites and groups mapped to rustls's (what cannot
//!   be honoured is an error, what a list merely narrows a warning);
//! - [`server`]: a bind line's TLS settings and the rustls configuration they build (one more
//!   per `crt-list` line with options of its own);
//! - [`crtlist`]: `crt-list` files, their SNI filters and per-line SSL options;
//! - [`crtlists`]: the stats socket's `show`/`add`/`del ssl crt-list`, editing the lists
//!   and the certificate indexes of the binds that read them;
//! - [`tickets`]: `tls-ticket-keys` files, sealing session tickets with the operator's keys
//!   (HAProxy's rotation rule) so that processes sharing a file resume each other's sessions;
//! - [`client`]: a server line's TLS settings (verification as HAProxy does it, client
//!   certificate, SNI, ALPN, resumption) and the rustls client configuration they build;
//! - [`dh`]: `ssl-dh-param-file` and `tune.ssl.default-dh-param`, checked as HAProxy checks
//!   them (rustls offers no DHE suite: a cipher list naming one beside DH parameters is refused);
//! - [`hkdf`]: the TLS 1.3 key schedule's HKDF with one extract per secret (the provider's
//!   repeats it at every expansion);
//! - [`der`]: the few DER reads that webpki does not offer (a certificate's common name, the
//!   fields `show ssl cert` prints);
//! - [`verify`]: client certificates checked as OpenSSL checks them for HAProxy (version 1
//!   certificates and CRLs, OpenSSL's error codes, `crt-ignore-err`/`ca-ignore-err`);
//! - [`show`]: `show ssl cert FILE`'s details of a certificate, as HAProxy prints them;
//! - [`cli`]: the stats socket's certificate commands (`show`/`set`/`commit`/`abort`/`new`/
//!   `del ssl cert`): HAProxy's transaction model, rotating a certificate in every bind without a
//!   reload.
//!
//! This sits beside the configuration (layer 1): loading a `crt` is part of checking a
//! configuration, so that `bascule -c` refuses a bad certificate.

pub mod ca;
pub mod cafiles;
pub mod cert;
pub mod cli;
pub mod client;
pub mod crtlist;
pub mod crtlists;
pub mod der;
pub mod dh;
pub mod hkdf;
pub mod keylog;
pub mod params;
pub mod server;
pub mod show;
pub mod sni;
pub mod tickets;
pub mod verify;

pub use cert::Cert;
pub use sni::CertStore;
