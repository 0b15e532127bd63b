//! `tls-ticket-keys FILE`: session tickets sealed with keys the operator gives, so that several
//! Bascule processes (or a reloaded one) resume each other's sessions.
//!
//! The file is HAProxy's: one base64 key per line, 48 bytes (a 16-byte name, a 16-byte AES-128
//! key, a 16-byte HMAC-SHA256 key) or 80 bytes (a 16-byte name, AES-256 and HMAC keys of 32
//! bytes), all of the first key's size. As HAProxy (built with its default `TLS_TICKETS_NO`
//! of 3) does, the last three keys are kept, at least three are needed, and the penultimate
//! key of the file seals new tickets while all three open them: appending a key and reloading
//! rotates the keys with no ticket in flight left unreadable.
//!
//! The stats socket shows and rotates them without a reload, as HAProxy's does ([`Registry`]:
//! `show tls-keys`, `set ssl tls-key`): a new key becomes the last, the oldest is dropped, and
//! the one that was last now seals. Binds naming the same file share its keys.
//!
//! A ticket is sealed as RFC 5077 recommends (and OpenSSL does): the key's name, a random IV,
//! the session encrypted with AES-CBC, then an HMAC-SHA256 over all of it. The name finds the
//! key that opens it; the MAC is checked, in constant time, before anything is decrypted.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;

use aws_lc_rs::cipher::{
    DecryptionContext, EncryptionContext, PaddedBlockDecryptingKey, PaddedBlockEncryptingKey,
    UnboundCipherKey, AES_128, AES_256,
};
use aws_lc_rs::hmac;
use aws_lc_rs::iv::FixedLength;
use rustls::server::ProducesTickets;

/// Keys HAProxy keeps from a file (its `TLS_TICKETS_NO` build option, 3 by default).
pub const KEPT: usize = 3;
const NAME: usize = 16;
const IV: usize = 16;
const MAC: usize = 32;
/// The ticket lifetime hint: HAProxy's `tune.ssl.lifetime` default (300 s).
const LIFETIME: u32 = 300;

/// One ticket key: its name and the secrets it holds.
struct Key {
    name: [u8; NAME],
    aes: Vec<u8>,
    mac: hmac::Key,
}

impl Key {
    fn from_bytes(raw: &[u8]) -> Key {
        let half = (raw.len() - NAME) / 2;
        let mut name = [0; NAME];
        name.copy_from_slice(&raw[..NAME]);
        Key {
            name,
            aes: raw[NAME..NAME + half].to_vec(),
            mac: hmac::Key::new(hmac::HMAC_SHA256, &raw[NAME + half..]),
        }
    }

    fn cipher(&self) -> Option<UnboundCipherKey> {
        let alg = if self.aes.len() == 32 {
            &AES_256
        } else {
            &AES_128
        };
        UnboundCipherKey::new(alg, &self.aes).ok()
    }

    fn seal(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let mut iv = [0u8; IV];
        aws_lc_rs::rand::fill(&mut iv).ok()?;
        let mut body = plain.to_vec();
        PaddedBlockEncryptingKey::cbc_pkcs7(self.cipher()?)
            .ok()?
            .less_safe_encrypt(&mut body, EncryptionContext::Iv128(FixedLength::from(iv)))
            .ok()?;
        let mut out = Vec::with_capacity(NAME + IV + body.len() + MAC);
        out.extend_from_slice(&self.name);
        out.extend_from_slice(&iv);
        out.extend_from_slice(&body);
        let tag = hmac::sign(&self.mac, &out);
        out.extend_from_slice(tag.as_ref());
        Some(out)
    }

    /// Opens a ticket this key sealed (its name was matched); `None` if it was tampered with.
    fn open(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        let (signed, tag) = ticket.split_at(ticket.len() - MAC);
        hmac::verify(&self.mac, signed, tag).ok()?;
        let iv: [u8; IV] = signed[NAME..NAME + IV].try_into().ok()?;
        let mut body = signed[NAME + IV..].to_vec();
        let n = PaddedBlockDecryptingKey::cbc_pkcs7(self.cipher()?)
            .ok()?
            .decrypt(&mut body, DecryptionContext::Iv128(FixedLength::from(iv)))
            .ok()?
            .len();
        body.truncate(n);
        Some(body)
    }
}

/// The keys in use at one time.
struct Ring {
    /// The kept keys, oldest first: the penultimate seals.
    keys: Vec<Key>,
    /// The same, as read (for `show tls-keys *`).
    raw: Vec<Vec<u8>>,
}

impl Ring {
    fn new(raw: Vec<Vec<u8>>) -> Ring {
        Ring {
            keys: raw.iter().map(|r| Key::from_bytes(r)).collect(),
            raw,
        }
    }
}

/// The keys of a `tls-ticket-keys` file, as rustls's ticket producer.
pub struct FileTickets {
    /// The file, as configured.
    pub path: PathBuf,
    /// Swapped whole by `set ssl tls-key`; a handshake reads it without a lock.
    ring: ArcSwap<Ring>,
}

impl std::fmt::Debug for FileTickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets.
        f.debug_struct("FileTickets")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl FileTickets {
    /// Reads a keys file; errors name the file and the line.
    pub fn load(path: &Path) -> Result<FileTickets, String> {
        let shown = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("'tls-ticket-keys': unable to read '{shown}': {e}"))?;
        let raw = parse(&text).map_err(|(line, e)| match line {
            Some(n) => format!("'tls-ticket-keys': '{shown}' line {n}: {e}"),
            None => format!("'tls-ticket-keys': '{shown}': {e}"),
        })?;
        Ok(FileTickets {
            path: path.to_path_buf(),
            ring: ArcSwap::from_pointee(Ring::new(raw)),
        })
    }

    /// The keys in use, oldest first, in base64 (the penultimate seals).
    pub fn keys_base64(&self) -> Vec<String> {
        self.ring
            .load()
            .raw
            .iter()
            .map(|r| {
                let mut out = Vec::new();
                crate::rules::hash::base64_encode(r, &mut out);
                String::from_utf8_lossy(&out).into_owned()
            })
            .collect()
    }

    /// Rotates: `raw` becomes the last key, the oldest is dropped. `false` when `raw` is not
    /// the size of the keys in use.
    pub fn push(&self, raw: &[u8]) -> bool {
        let ring = self.ring.load();
        if ring.raw.first().is_some_and(|k| k.len() != raw.len()) {
            return false;
        }
        let mut next: Vec<Vec<u8>> = ring.raw[1..].to_vec();
        next.push(raw.to_vec());
        self.ring.store(Arc::new(Ring::new(next)));
        true
    }
}

/// Parses a keys file's text into the kept keys, oldest first; an error carries the line it
/// is about, if one.
fn parse(text: &str) -> Result<Vec<Vec<u8>>, (Option<usize>, String)> {
    let mut all: Vec<Vec<u8>> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let word = line.trim();
        if word.is_empty() || word.starts_with('#') {
            continue;
        }
        let mut raw = Vec::new();
        if !crate::rules::hash::base64_decode(word.as_bytes(), &mut raw) {
            return Err((Some(i + 1), "not a base64-encoded key".into()));
        }
        match (raw.len(), all.first().map(Vec::len)) {
            (48 | 80, None) => {}
            (n, Some(first)) if n == first => {}
            (n, Some(first)) => {
                return Err((
                    Some(i + 1),
                    format!(
                        "a {n}-byte key after {first}-byte ones (the first key sets the size: AES-128 and AES-256 keys cannot be mixed)"
                    ),
                ))
            }
            (n, None) => {
                return Err((
                    Some(i + 1),
                    format!(
                        "a key is 48 bytes (AES-128) or 80 bytes (AES-256) once decoded, not {n}"
                    ),
                ))
            }
        }
        all.push(raw);
    }
    if all.len() < KEPT {
        return Err((
            None,
            format!(
                "{} key(s), at least {KEPT} are needed (the last {KEPT} are used: the penultimate seals new tickets, all open them)",
                all.len()
            ),
        ));
    }
    Ok(all.split_off(all.len() - KEPT))
}

/// The keys files of all binds, for the stats socket. A file named by several binds is one
/// reference (each bind's copy is rotated alike); references are numbered as haproxy 2.6
/// numbers them, the file named last first.
#[derive(Debug, Default)]
pub struct Registry {
    refs: Vec<Vec<Arc<FileTickets>>>,
}

const NOT_FOUND_SHOW: &str = "'show tls-keys' unable to locate referenced filename\n";
const NOT_FOUND_SET: &str = "'set ssl tls-key' unable to locate referenced filename\n";

impl Registry {
    /// The binds' keys, in configuration order.
    pub fn new<'a>(all: impl Iterator<Item = &'a Arc<FileTickets>>) -> Registry {
        let mut refs: Vec<Vec<Arc<FileTickets>>> = Vec::new();
        for t in all {
            match refs.iter_mut().find(|r| r[0].path == t.path) {
                Some(r) => r.push(Arc::clone(t)),
                None => refs.push(vec![Arc::clone(t)]),
            }
        }
        refs.reverse();
        Registry { refs }
    }

    /// `#ID` or the file as configured.
    fn find(&self, arg: &str) -> Option<(usize, &[Arc<FileTickets>])> {
        let by_id = arg.strip_prefix('#').and_then(|n| n.parse::<usize>().ok());
        self.refs
            .iter()
            .enumerate()
            .find(|(i, r)| by_id == Some(*i) || r[0].path.as_os_str() == arg)
            .map(|(i, r)| (i, r.as_slice()))
    }

    /// `show tls-keys [ID|FILE|*]`: the files, or the keys of one or all.
    pub fn show(&self, arg: Option<&str>) -> String {
        let Some(arg) = arg else {
            let mut out = String::from("# id (file)\n");
            for (i, r) in self.refs.iter().enumerate() {
                out.push_str(&format!("{i} ({})\n", r[0].path.display()));
            }
            return out;
        };
        let chosen: Vec<(usize, &Arc<FileTickets>)> = if arg == "*" {
            self.refs
                .iter()
                .enumerate()
                .map(|(i, r)| (i, &r[0]))
                .collect()
        } else {
            match self.find(arg) {
                Some((i, r)) => vec![(i, &r[0])],
                None => return NOT_FOUND_SHOW.into(),
            }
        };
        let mut out = String::from("# id secret\n");
        for (i, t) in chosen {
            out.push_str(&format!("# {i} ({})\n", t.path.display()));
            for (j, k) in t.keys_base64().iter().enumerate() {
                out.push_str(&format!("{i}.{j} {k}\n"));
            }
        }
        out
    }

    /// `set ssl tls-key ID|FILE KEY`: `KEY` becomes the last key, the one before it seals.
    pub fn set(&self, arg: Option<&str>, key: Option<&str>) -> String {
        let (Some(arg), Some(key)) = (arg, key) else {
            return "'set ssl tls-key' expects a filename and the new TLS key in base64 encoding.\n"
                .into();
        };
        let Some((_, refs)) = self.find(arg) else {
            return NOT_FOUND_SET.into();
        };
        let mut raw = Vec::new();
        if !crate::rules::hash::base64_decode(key.as_bytes(), &mut raw) {
            return "'set ssl tls-key' received invalid base64 encoded TLS key.\n".into();
        }
        if !refs.iter().all(|t| t.push(&raw)) {
            return "'set ssl tls-key' received a key of wrong size.\n".into();
        }
        "TLS ticket key updated!\n".into()
    }
}

impl ProducesTickets for FileTickets {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        LIFETIME
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let ring = self.ring.load();
        ring.keys[ring.keys.len() - 2].seal(plain)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        // The smallest ticket: a name, an IV, one block, a MAC.
        if ticket.len() < NAME + IV + 16 + MAC || (ticket.len() - NAME - IV - MAC) % 16 != 0 {
            return None;
        }
        self.ring
            .load()
            .keys
            .iter()
            .find(|k| k.name[..] == ticket[..NAME])?
            .open(ticket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        let mut out = Vec::new();
        crate::rules::hash::base64_encode(bytes, &mut out);
        String::from_utf8(out).unwrap()
    }

    fn tickets(text: &str) -> Result<FileTickets, (Option<usize>, String)> {
        parse(text).map(|raw| FileTickets {
            path: PathBuf::from("k"),
            ring: ArcSwap::from_pointee(Ring::new(raw)),
        })
    }

    fn file(sizes: &[(u8, usize)]) -> String {
        sizes
            .iter()
            .map(|&(b, n)| b64(&vec![b; n]) + "\n")
            .collect()
    }

    #[test]
    fn the_penultimate_key_seals_and_the_last_three_open() {
        let t = tickets(&file(&[(1, 48), (2, 48), (3, 48), (4, 48)])).unwrap();
        let sealed = t.encrypt(b"session state").unwrap();
        assert_eq!(&sealed[..16], &[3; 16], "the penultimate key's name leads");
        assert_eq!(t.decrypt(&sealed).unwrap(), b"session state");
        // After a rotation (one key appended), the ticket still opens; two rotations later
        // its key is gone.
        let next = tickets(&file(&[(2, 48), (3, 48), (4, 48), (5, 48)])).unwrap();
        assert_eq!(next.decrypt(&sealed).unwrap(), b"session state");
        assert_eq!(&next.encrypt(b"x").unwrap()[..16], &[4; 16]);
        let later = tickets(&file(&[(4, 48), (5, 48), (6, 48)])).unwrap();
        assert!(later.decrypt(&sealed).is_none());
    }

    #[test]
    fn tampered_or_foreign_tickets_do_not_open() {
        let t = tickets(&file(&[(1, 80), (2, 80), (3, 80)])).unwrap();
        let mut sealed = t.encrypt(&[7; 100]).unwrap();
        assert_eq!(t.decrypt(&sealed).unwrap(), [7; 100]);
        let n = sealed.len();
        sealed[n - 40] ^= 1;
        assert!(t.decrypt(&sealed).is_none());
        for bad in [&[][..], &[2; 16][..], &sealed[..n - 1], &[2; 96][..]] {
            assert!(t.decrypt(bad).is_none());
        }
        // Same names, other secrets: the MAC refuses it.
        let mut other = file(&[(1, 80)]);
        other.push_str(&(b64(&[[2u8; 16].as_slice(), &[9; 64]].concat()) + "\n"));
        other.push_str(&file(&[(3, 80)]));
        let o = tickets(&other).unwrap();
        assert!(o.decrypt(&t.encrypt(b"s").unwrap()).is_none());
    }

    #[test]
    fn the_stats_socket_shows_and_rotates_the_keys() {
        let dir = std::env::temp_dir().join(format!("bascule-tlskeys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.keys"), dir.join("b.keys"));
        std::fs::write(&a, file(&[(1, 48), (2, 48), (3, 48)])).unwrap();
        std::fs::write(&b, file(&[(4, 80), (5, 80), (6, 80)])).unwrap();
        let binds: Vec<Arc<FileTickets>> = [&a, &b, &a]
            .iter()
            .map(|p| Arc::new(FileTickets::load(p).unwrap()))
            .collect();
        let reg = Registry::new(binds.iter());
        assert_eq!(
            reg.show(None),
            format!("# id (file)\n0 ({})\n1 ({})\n", b.display(), a.display())
        );
        let k = |b: u8, n: usize| b64(&vec![b; n]);
        assert_eq!(
            reg.show(Some("#1")),
            format!(
                "# id secret\n# 1 ({})\n1.0 {}\n1.1 {}\n1.2 {}\n",
                a.display(),
                k(1, 48),
                k(2, 48),
                k(3, 48)
            )
        );
        assert_eq!(reg.show(Some("*")).lines().count(), 9);
        assert!(reg.show(Some("#2")).contains("unable to locate"));
        let sealed = binds[2].encrypt(b"s").unwrap();
        assert_eq!(&sealed[..16], &[2; 16]);
        // By file name: both binds of a.keys rotate.
        assert_eq!(
            reg.set(Some(a.to_str().unwrap()), Some(&k(7, 48))),
            "TLS ticket key updated!\n"
        );
        for t in [&binds[0], &binds[2]] {
            assert_eq!(&t.encrypt(b"s").unwrap()[..16], &[3; 16]);
            assert_eq!(t.decrypt(&sealed).unwrap(), b"s");
        }
        assert!(reg
            .show(Some("#1"))
            .ends_with(&format!("1.2 {}\n", k(7, 48))));
        assert!(reg.set(Some("#1"), Some(&k(8, 80))).contains("wrong size"));
        assert!(reg.set(Some("#1"), Some("!!")).contains("invalid base64"));
        assert!(reg
            .set(Some("#3"), Some(&k(8, 48)))
            .contains("unable to locate"));
        assert!(reg.set(Some("#1"), None).contains("expects a filename"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_files_name_the_line() {
        let e = |text: &str| tickets(text).err().unwrap();
        assert_eq!(e("# keys\nnot base64!\n").0, Some(2));
        assert!(e(&file(&[(1, 32)])).1.contains("not 32"));
        let mixed = e(&file(&[(1, 48), (2, 80), (3, 48)]));
        assert_eq!(mixed.0, Some(2));
        assert!(mixed.1.contains("cannot be mixed"), "{}", mixed.1);
        let few = e(&file(&[(1, 48), (2, 48)]));
        assert_eq!(few.0, None);
        assert!(few.1.contains("at least 3"), "{}", few.1);
    }
}
