//! Variables set by rules (`set-var(txn.x)`, the `set-var` converter) and read by `var()`.
//!
//! Names are interned at load into ids (`config::model::Config::vars`), so a store is a vector
//! indexed by id whose byte buffers are kept when a variable is unset or its store cleared: a
//! transaction that sets the same variables as the previous one allocates nothing. Each scope
//! lives as long as HAProxy says: `txn`, `req` and `res` for one transaction (one store,
//! cleared when the next starts), `sess` for the client connection, `proc` for the process:
//! shared by every worker without a lock (read through an `ArcSwap`; a write, rare, copies the
//! store and swaps it in).

use arc_swap::ArcSwap;
use std::cell::RefCell;

use super::source::Stored;
use super::{Scope, Value};

/// One store of variables.
#[derive(Debug, Default, Clone)]
pub struct Vars {
    slots: Vec<(Option<Stored>, Vec<u8>)>,
}

impl Vars {
    /// Forgets every value, keeping the buffers.
    pub fn clear(&mut self) {
        for (kind, _) in &mut self.slots {
            *kind = None;
        }
    }

    pub fn set(&mut self, id: usize, v: Value<'_>) {
        if self.slots.len() <= id {
            self.slots.resize_with(id + 1, Default::default);
        }
        let (kind, bytes) = &mut self.slots[id];
        bytes.clear();
        *kind = Some(match v {
            Value::Bool(b) => Stored::Bool(b),
            Value::Sint(i) => Stored::Sint(i),
            Value::Ipv4(a) => Stored::Ipv4(a),
            Value::Ipv6(a) => Stored::Ipv6(a),
            Value::Str(b) => {
                bytes.extend_from_slice(b);
                Stored::Str
            }
            Value::Bin(b) => {
                bytes.extend_from_slice(b);
                Stored::Bin
            }
            Value::Meth(b) => {
                bytes.extend_from_slice(b);
                Stored::Meth
            }
        });
    }

    pub fn unset(&mut self, id: usize) {
        if let Some((kind, _)) = self.slots.get_mut(id) {
            *kind = None;
        }
    }

    /// The value of `id`; its bytes (string, binary, method) are appended to `out`.
    pub fn get(&self, id: usize, out: &mut Vec<u8>) -> Option<Stored> {
        let (kind, bytes) = self.slots.get(id)?;
        let kind = (*kind)?;
        out.extend_from_slice(bytes);
        Some(kind)
    }
}

/// The stores a stream sees, by scope.
pub struct Scopes<'a> {
    /// `txn`, `req` and `res`.
    pub txn: &'a RefCell<Vars>,
    pub sess: &'a RefCell<Vars>,
    pub proc: &'a ArcSwap<Vars>,
}

impl Scopes<'_> {
    pub fn get(&self, scope: Scope, id: usize, out: &mut Vec<u8>) -> Option<Stored> {
        match scope {
            Scope::Txn | Scope::Req | Scope::Res => self.txn.borrow().get(id, out),
            Scope::Sess => self.sess.borrow().get(id, out),
            Scope::Proc => self.proc.load().get(id, out),
        }
    }

    pub fn set(&self, scope: Scope, id: usize, v: Value<'_>) {
        match scope {
            Scope::Txn | Scope::Req | Scope::Res => self.txn.borrow_mut().set(id, v),
            Scope::Sess => self.sess.borrow_mut().set(id, v),
            Scope::Proc => {
                self.proc.rcu(|cur| {
                    let mut next = Vars::clone(cur);
                    next.set(id, v);
                    next
                });
            }
        }
    }

    pub fn unset(&self, scope: Scope, id: usize) {
        match scope {
            Scope::Txn | Scope::Req | Scope::Res => self.txn.borrow_mut().unset(id),
            Scope::Sess => self.sess.borrow_mut().unset(id),
            Scope::Proc => {
                self.proc.rcu(|cur| {
                    let mut next = Vars::clone(cur);
                    next.unset(id);
                    next
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_buffers_are_kept() {
        let mut v = Vars::default();
        v.set(2, Value::Str(b"abc"));
        let mut out = Vec::new();
        assert_eq!(v.get(2, &mut out), Some(Stored::Str));
        assert_eq!(out, b"abc");
        v.clear();
        out.clear();
        assert_eq!(v.get(2, &mut out), None);
        v.set(2, Value::Sint(7));
        assert_eq!(v.get(2, &mut out), Some(Stored::Sint(7)));
        assert_eq!(v.get(0, &mut out), None);
        assert_eq!(v.get(9, &mut out), None);
    }
}
