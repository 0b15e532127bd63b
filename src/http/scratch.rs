//! A session's scratch space for messages, on loan from a per-worker pool.
//!
//! Header indexes, the head being rewritten, a normalised target and the log record of the
//! transaction in progress are reused from message to message. Between sessions each worker
//! keeps a few, so a short connection allocates none of them; what a burst left behind is freed
//! by the worker's periodic look ([`shrink_scratch`], called from `reclaim`).

use std::cell::RefCell;

use crate::base::pool::Pool;
use crate::proto::h1::HeaderIdx;
use crate::rules::vars::Vars;
use crate::rules::Eval;

use super::txnlog::TxnLog;

/// Sized for typical messages, grown when one needs more.
#[derive(Default)]
pub(super) struct Parts {
    /// The request's header lines, as offsets into the client buffer.
    pub headers: Vec<HeaderIdx>,
    /// The response's header lines, as offsets into the server buffer.
    pub rheaders: Vec<HeaderIdx>,
    /// A head being rewritten for the other side, or an error response.
    pub out: Vec<u8>,
    /// A request target that normalisation changed, as it is forwarded and hashed.
    pub target: Vec<u8>,
    /// The log facts of the transaction in progress.
    pub txn: TxnLog,
    /// The request head, once a rule edited it (see `edit`).
    pub edited: Vec<u8>,
    /// The response head, once a rule edited it.
    pub redited: Vec<u8>,
    /// The rules engine's scratch buffers and the values rules render.
    pub eval: Eval,
    pub val: Vec<u8>,
    pub tmp: Vec<u8>,
    /// A `103 Early Hints` response that `early-hint` rules built.
    pub hints: Vec<u8>,
    /// The transaction's variables (`txn.`, `req.`, `res.`).
    pub vars: RefCell<Vars>,
    /// The values of the backend's `sni` expressions for this request (`server ... sni`),
    /// rewritten in place request after request.
    pub sni: Vec<Option<String>>,
}

/// [`Parts`] on loan from the worker's pool, given back when dropped.
pub(super) struct Scratch(pub Parts);

/// Scratch spaces kept per worker; extra ones, or ones grown past `SCRATCH_KEEP` bytes of
/// head, are freed, and so are those unused since the worker's last look (see [`shrink_scratch`]).
const SCRATCH_POOL: usize = 256;
const SCRATCH_KEEP: usize = 16 * 1024;

thread_local! {
    static SCRATCH: Pool<Parts> = const { Pool::new(SCRATCH_POOL) };
}

/// Frees the scratch spaces of this worker's pool that no session needed since the last call;
/// returns about how many bytes. Called from the worker's periodic look ([`crate::reclaim`]).
pub fn shrink_scratch() -> usize {
    let size = |p: &Parts| {
        (p.headers.capacity() + p.rheaders.capacity()) * std::mem::size_of::<HeaderIdx>()
            + p.out.capacity()
    };
    SCRATCH.try_with(|pool| pool.shrink(size)).unwrap_or(0)
}

impl Scratch {
    pub fn take() -> Scratch {
        let pooled = SCRATCH.try_with(Pool::take).ok().flatten();
        Scratch(pooled.unwrap_or_else(|| Parts {
            headers: Vec::with_capacity(16),
            rheaders: Vec::with_capacity(16),
            out: Vec::with_capacity(1024),
            target: Vec::new(),
            txn: TxnLog::default(),
            edited: Vec::new(),
            redited: Vec::new(),
            eval: Eval::new(),
            val: Vec::new(),
            tmp: Vec::new(),
            hints: Vec::new(),
            vars: RefCell::default(),
            sni: Vec::new(),
        }))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.0.out.capacity() > SCRATCH_KEEP {
            return;
        }
        let parts = std::mem::take(&mut self.0);
        // At thread exit the pool may be gone already: the parts are then simply freed.
        let _ = SCRATCH.try_with(|p| p.put(parts));
    }
}
