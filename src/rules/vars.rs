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

/// The conditions of `set-var(NAME,COND...)` (HAProxy 2.5+): the variable is set only when
/// each holds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct VarCond(u16);

impl VarCond {
    pub const NONE: VarCond = VarCond(0);
    const IFEXISTS: u16 = 1;
    const IFNOTEXISTS: u16 = 2;
    const IFEMPTY: u16 = 4;
    const IFNOTEMPTY: u16 = 8;
    const IFSET: u16 = 16;
    const IFNOTSET: u16 = 32;
    const IFGT: u16 = 64;
    const IFLT: u16 = 128;

    /// Adds the condition named `word`; `false` if it is not one.
    pub fn add(&mut self, word: &str) -> bool {
        let bit = match word {
            "ifexists" => Self::IFEXISTS,
            "ifnotexists" => Self::IFNOTEXISTS,
            "ifempty" => Self::IFEMPTY,
            "ifnotempty" => Self::IFNOTEMPTY,
            "ifset" => Self::IFSET,
            "ifnotset" => Self::IFNOTSET,
            "ifgt" => Self::IFGT,
            "iflt" => Self::IFLT,
            _ => return false,
        };
        self.0 |= bit;
        true
    }

    fn has(self, bit: u16) -> bool {
        self.0 & bit != 0
    }
}

/// One variable: its value (`None`: unset), and whether it exists at all — HAProxy keeps a
/// variable that a conditional `set-var` created without setting, and the `proc` variables
/// the configuration names exist from the start.
#[derive(Debug, Default, Clone)]
struct Slot {
    kind: Option<Stored>,
    bytes: Vec<u8>,
    exists: bool,
}

/// One store of variables.
#[derive(Debug, Default, Clone)]
pub struct Vars {
    slots: Vec<Slot>,
}

impl Vars {
    /// True when no variable was ever set here (nothing allocated).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Forgets every value, keeping the buffers.
    pub fn clear(&mut self) {
        for s in &mut self.slots {
            s.kind = None;
            s.exists = false;
        }
    }

    /// Marks `id` as existing without a value (a `proc` variable the configuration names).
    pub fn declare(&mut self, id: usize) {
        self.slot(id).exists = true;
    }

    fn slot(&mut self, id: usize) -> &mut Slot {
        if self.slots.len() <= id {
            self.slots.resize_with(id + 1, Default::default);
        }
        &mut self.slots[id]
    }

    /// `set-var(NAME,COND...)`: sets `id` to `v` if the conditions hold, as HAProxy's
    /// `var_set` decides. Returns whether it was set.
    pub fn set_if(&mut self, id: usize, v: Value<'_>, cond: VarCond) -> bool {
        if cond == VarCond::NONE {
            self.set(id, v);
            return true;
        }
        let slot = self.slot(id);
        if slot.exists || slot.kind.is_some() {
            if cond.has(VarCond::IFNOTEXISTS) {
                return false;
            }
        } else {
            if cond.has(VarCond::IFEXISTS) {
                return false;
            }
            // HAProxy creates the variable before checking the other conditions.
            slot.exists = true;
        }
        let set = slot.kind.is_some();
        if (cond.has(VarCond::IFSET) && !set) || (cond.has(VarCond::IFNOTSET) && set) {
            return false;
        }
        let refused = match v {
            // Only strings and binaries can be empty.
            Value::Str(b) | Value::Bin(b) => {
                (cond.has(VarCond::IFNOTEMPTY) && b.is_empty())
                    || (cond.has(VarCond::IFEMPTY) && !b.is_empty())
            }
            _ if cond.has(VarCond::IFEMPTY) => true,
            // ifgt/iflt compare two integers, else do not apply.
            Value::Sint(new) => match slot.kind {
                Some(Stored::Sint(old)) => {
                    (cond.has(VarCond::IFGT) && old <= new)
                        || (cond.has(VarCond::IFLT) && old >= new)
                }
                _ => false,
            },
            _ => false,
        };
        if refused {
            return false;
        }
        self.set(id, v);
        true
    }

    pub fn set(&mut self, id: usize, v: Value<'_>) {
        let slot = self.slot(id);
        slot.exists = true;
        let (kind, bytes) = (&mut slot.kind, &mut slot.bytes);
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

    /// `unset-var`: the value goes; so does the variable, unless `permanent` (a `proc`
    /// variable the configuration names stays, unset).
    pub fn unset(&mut self, id: usize, permanent: bool) {
        if let Some(s) = self.slots.get_mut(id) {
            s.kind = None;
            s.exists = permanent;
        }
    }

    /// The value of `id`; its bytes (string, binary, method) are appended to `out`.
    pub fn get(&self, id: usize, out: &mut Vec<u8>) -> Option<Stored> {
        let s = self.slots.get(id)?;
        let kind = s.kind?;
        out.extend_from_slice(&s.bytes);
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
            // A stream has no check variables.
            Scope::Check => None,
        }
    }

    pub fn set(&self, scope: Scope, id: usize, v: Value<'_>) {
        self.set_if(scope, id, v, VarCond::NONE);
    }

    /// `set-var(NAME,COND...)` in `scope`.
    pub fn set_if(&self, scope: Scope, id: usize, v: Value<'_>, cond: VarCond) {
        match scope {
            Scope::Txn | Scope::Req | Scope::Res => {
                self.txn.borrow_mut().set_if(id, v, cond);
            }
            Scope::Sess => {
                self.sess.borrow_mut().set_if(id, v, cond);
            }
            Scope::Proc => {
                self.proc.rcu(|cur| {
                    let mut next = Vars::clone(cur);
                    next.set_if(id, v, cond);
                    next
                });
            }
            Scope::Check => {}
        }
    }

    pub fn unset(&self, scope: Scope, id: usize) {
        match scope {
            Scope::Txn | Scope::Req | Scope::Res => self.txn.borrow_mut().unset(id, false),
            Scope::Sess => self.sess.borrow_mut().unset(id, false),
            Scope::Proc => {
                self.proc.rcu(|cur| {
                    let mut next = Vars::clone(cur);
                    next.unset(id, true);
                    next
                });
            }
            Scope::Check => {}
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

    fn cond(words: &[&str]) -> VarCond {
        let mut c = VarCond::NONE;
        for w in words {
            assert!(c.add(w), "{w}");
        }
        c
    }

    /// The cases of HAProxy's reg-test sample_fetches/cond_set_var.vtc, as haproxy 2.6 sets
    /// them.
    #[test]
    fn conditions_as_haproxy_decides() {
        let mut v = Vars::default();
        let mut out = Vec::new();
        // ifexists: not created yet, nothing happens; ifnotexists creates.
        assert!(!v.set_if(0, Value::Sint(1), cond(&["ifexists"])));
        assert!(v.set_if(0, Value::Sint(1), cond(&["ifnotexists"])));
        assert!(!v.set_if(0, Value::Sint(2), cond(&["ifnotexists"])));
        assert!(v.set_if(0, Value::Sint(2), cond(&["ifexists"])));
        // ifempty: a scalar is never empty; an empty string is.
        v.set(1, Value::Str(b"x"));
        assert!(!v.set_if(1, Value::Sint(12), cond(&["ifempty"])));
        assert!(!v.set_if(1, Value::Str(b"toto"), cond(&["ifempty"])));
        assert!(v.set_if(1, Value::Str(b""), cond(&["ifempty"])));
        assert!(!v.set_if(1, Value::Str(b""), cond(&["ifnotempty"])));
        assert!(v.set_if(1, Value::Sint(3), cond(&["ifnotempty"])));
        // ifgt/iflt compare integers only when both are integers.
        v.set(2, Value::Sint(10));
        assert!(!v.set_if(2, Value::Sint(15), cond(&["ifgt"])));
        assert!(v.set_if(2, Value::Sint(5), cond(&["ifgt"])));
        assert!(!v.set_if(2, Value::Sint(3), cond(&["iflt"])));
        assert!(v.set_if(2, Value::Str(b"s"), cond(&["iflt"])));
        // ifset/ifnotset; a failed conditional set still created the variable.
        assert!(!v.set_if(3, Value::Sint(1), cond(&["ifset"])));
        assert!(
            !v.set_if(3, Value::Sint(1), cond(&["ifnotexists"])),
            "created above"
        );
        assert!(v.set_if(3, Value::Sint(1), cond(&["ifnotset"])));
        assert_eq!(v.get(3, &mut out), Some(Stored::Sint(1)));
        // unset removes a variable, except a permanent one.
        v.unset(3, false);
        assert!(!v.set_if(3, Value::Sint(1), cond(&["ifexists"])));
        v.declare(4);
        assert!(v.set_if(4, Value::Sint(1), cond(&["ifexists"])));
        v.unset(4, true);
        assert!(v.set_if(4, Value::Sint(1), cond(&["ifexists"])));
    }
}
