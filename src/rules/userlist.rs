//! `userlist` sections: users, their passwords and groups, for `http_auth(LIST)` /
//! `http_auth_group(LIST)` conditions and `http-request auth`.
//!
//! A password is either a crypt(3) hash (`password $6$...`: SHA-512; also `$5$` SHA-256, `$1$`
//! MD5, `$y$` yescrypt, `$2b$` bcrypt and DES, whatever the system's libcrypt supports; an
//! algorithm it does not support is a load error) or clear text (`insecure-password`). The
//! runtime calls [`Userlist::check`] with the credentials of a request's `Authorization: Basic`
//! header.
//!
//! crypt(3) is deliberately slow (SHA-512: 5000 rounds), so [`Userlist::check`] remembers the
//! last verified (user, password) pairs in a small per-thread cache keyed by a hash of the
//! password: a client that sends the same credentials on every request pays the cost once.

use std::cell::RefCell;
use std::collections::HashMap;

/// How a user's password is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Password {
    /// `password HASH`: compared with crypt(3) of the given password.
    Hash(String),
    /// `insecure-password TEXT`: compared as is.
    Clear(String),
    /// No password given: the user never authenticates (it may still be in groups).
    None,
}

/// One `user` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub password: Password,
    /// Indices into [`Userlist::groups`]: the user's own `groups` and the groups that list it.
    pub groups: Vec<usize>,
}

/// A `userlist NAME` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Userlist {
    pub name: String,
    pub users: Vec<User>,
    /// Group names, in declaration order.
    pub groups: Vec<String>,
}

/// Verified credentials per thread: (userlist address, user index, password hash) → result.
type CacheKey = (usize, usize, u64);

thread_local! {
    static VERIFIED: RefCell<HashMap<CacheKey, bool>> = RefCell::new(HashMap::new());
}

/// Entries kept per thread before the cache starts over (a client cycling through passwords
/// cannot make it grow without bound).
const CACHE_MAX: usize = 256;

impl Userlist {
    /// The index of user `name`.
    pub fn user(&self, name: &[u8]) -> Option<usize> {
        self.users.iter().position(|u| u.name.as_bytes() == name)
    }

    /// The index of group `name`.
    pub fn group(&self, name: &[u8]) -> Option<usize> {
        self.groups.iter().position(|g| g.as_bytes() == name)
    }

    /// True when `user` exists and `password` is its password.
    pub fn check(&self, user: &[u8], password: &[u8]) -> bool {
        let Some(i) = self.user(user) else {
            return false;
        };
        match &self.users[i].password {
            Password::None => false,
            Password::Clear(p) => p.as_bytes() == password,
            Password::Hash(h) => {
                let key = (std::ptr::from_ref(self) as usize, i, fingerprint(password));
                if let Some(ok) = VERIFIED.with(|c| c.borrow().get(&key).copied()) {
                    return ok;
                }
                let ok = crate::sys::crypt(password, h).is_some_and(|out| out == *h);
                VERIFIED.with(|c| {
                    let mut c = c.borrow_mut();
                    if c.len() >= CACHE_MAX {
                        c.clear();
                    }
                    c.insert(key, ok);
                });
                ok
            }
        }
    }

    /// True when `user` exists and belongs to the group named `group`.
    pub fn user_in_group(&self, user: &[u8], group: &[u8]) -> bool {
        match (self.user(user), self.group(group)) {
            (Some(u), Some(g)) => self.users[u].groups.contains(&g),
            _ => false,
        }
    }
}

/// A 64-bit FNV-1a hash of a password: the cache never holds the password itself.
fn fingerprint(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &c in b {
        h ^= u64::from(c);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Checks at load that libcrypt understands `hash` (its algorithm and salt); the error says why
/// not.
pub fn check_hash(hash: &str) -> Result<(), String> {
    match crate::sys::crypt(b"", hash) {
        Some(_) => Ok(()),
        None => {
            let algo = hash
                .strip_prefix('$')
                .and_then(|h| h.split('$').next())
                .map_or_else(|| "DES".to_string(), |a| format!("${a}$"));
            Err(format!(
                "password hash '{hash}' is not usable: this system's crypt(3) does not support algorithm {algo} or the hash is malformed (supported: $6$ SHA-512, $5$ SHA-256, $1$ MD5, $y$ yescrypt, $2b$ bcrypt)"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list() -> Userlist {
        Userlist {
            name: "ul".into(),
            groups: vec!["admins".into()],
            users: vec![
                User {
                    name: "alice".into(),
                    // mkpasswd -m sha-512 -S saltsalt secret
                    password: Password::Hash(crate::sys::crypt(b"secret", "$6$saltsalt$").unwrap()),
                    groups: vec![0],
                },
                User {
                    name: "bob".into(),
                    password: Password::Clear("pw".into()),
                    groups: vec![],
                },
            ],
        }
    }

    #[test]
    fn passwords_verify() {
        let l = list();
        assert!(l.check(b"alice", b"secret"));
        assert!(l.check(b"alice", b"secret"), "second time, from the cache");
        assert!(!l.check(b"alice", b"Secret"));
        assert!(l.check(b"bob", b"pw"));
        assert!(!l.check(b"bob", b"pw2"));
        assert!(!l.check(b"carol", b"pw"));
        assert!(l.user_in_group(b"alice", b"admins"));
        assert!(!l.user_in_group(b"bob", b"admins"));
    }

    #[test]
    fn glibc_algorithms_are_supported() {
        for setting in ["$6$abcdefgh$", "$5$abcdefgh$", "$1$abcdefgh$"] {
            let h = crate::sys::crypt(b"pw", setting).unwrap();
            assert!(check_hash(&h).is_ok(), "{h}");
            assert_eq!(crate::sys::crypt(b"pw", &h).as_deref(), Some(h.as_str()));
        }
        assert!(check_hash("$9$zz").unwrap_err().contains("$9$"));
    }
}
