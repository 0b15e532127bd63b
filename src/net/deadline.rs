//! One timer per side of a session, moved for each wait instead of armed anew.
//!
//! `tokio::time::timeout` arms a timer for every wait: a clock read, then, when the wait is not
//! over at once, an insertion into the runtime's timer wheel under the driver's lock, and a
//! removal when the wait ends. A keep-alive session waits twice per request (for the request,
//! for the response), and those timers almost never fire. A [`Deadline`] keeps one `Sleep`
//! instead: the awaited operation is polled first, so a wait that is over at once reads no
//! clock and touches no timer; otherwise the sleep's deadline moves, which tokio does with one
//! atomic update when the new deadline is later than the armed one (its wheel entry is re-filed
//! only when the old time comes). A session keeps one `Deadline` per side, so that each one's
//! deadlines mostly move forward: the client's (`timeout http-keep-alive`, `http-request`,
//! `client`) and the server's (`timeout server`).

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::task::Poll;
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// A wait ran out of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

/// A reusable deadline over a pinned, not yet polled `Sleep` (which costs nothing until a wait
/// has to arm it).
pub struct Deadline<'a> {
    sleep: Pin<&'a mut Sleep>,
}

impl<'a> Deadline<'a> {
    pub fn new(sleep: Pin<&'a mut Sleep>) -> Self {
        Deadline { sleep }
    }

    /// Runs `f`, allowing it `t` from the moment it has to wait (`None`: no limit).
    pub async fn within<F: Future>(
        &mut self,
        t: Option<Duration>,
        f: F,
    ) -> Result<F::Output, Elapsed> {
        match t {
            None => Ok(f.await),
            Some(t) => self.race(f, || Instant::now() + t).await,
        }
    }

    /// Runs `f` until `at` at the latest (`None`: no limit).
    pub async fn until<F: Future>(
        &mut self,
        at: Option<Instant>,
        f: F,
    ) -> Result<F::Output, Elapsed> {
        match at {
            None => Ok(f.await),
            Some(at) => self.race(f, || at).await,
        }
    }

    async fn race<F: Future>(
        &mut self,
        f: F,
        at: impl FnOnce() -> Instant,
    ) -> Result<F::Output, Elapsed> {
        let mut f = pin!(f);
        let mut at = Some(at);
        poll_fn(|cx| {
            if let Poll::Ready(v) = f.as_mut().poll(cx) {
                return Poll::Ready(Ok(v));
            }
            if let Some(at) = at.take() {
                self.sleep.as_mut().reset(at());
            }
            self.sleep.as_mut().poll(cx).map(|()| Err(Elapsed))
        })
        .await
    }
}

/// A sleep for a [`Deadline`]: its own deadline is never used, every wait sets one.
pub fn sleep() -> Sleep {
    tokio::time::sleep_until(Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn ready_at_once_needs_no_time_and_pending_runs_out() {
        let mut s = pin!(sleep());
        let mut d = Deadline::new(s.as_mut());
        let t = Some(Duration::from_secs(5));
        assert_eq!(d.within(t, async { 7 }).await, Ok(7));
        let start = Instant::now();
        let never = std::future::pending::<()>();
        assert_eq!(d.within(t, never).await, Err(Elapsed));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_moves_both_ways_between_waits() {
        let mut s = pin!(sleep());
        let mut d = Deadline::new(s.as_mut());
        // A long wait that finishes early leaves a later deadline armed ...
        let done = tokio::time::sleep(Duration::from_secs(1));
        assert_eq!(d.within(Some(Duration::from_secs(30)), done).await, Ok(()));
        // ... which a shorter wait after it must not inherit.
        let start = Instant::now();
        let never = std::future::pending::<()>();
        assert_eq!(
            d.until(Some(start + Duration::from_millis(100)), never)
                .await,
            Err(Elapsed)
        );
        assert_eq!(start.elapsed(), Duration::from_millis(100));
        // Nor does a longer one stop at the earlier deadline.
        let start = Instant::now();
        let later = tokio::time::sleep(Duration::from_secs(20));
        assert_eq!(d.within(Some(Duration::from_secs(30)), later).await, Ok(()));
        assert_eq!(start.elapsed(), Duration::from_secs(20));
        assert_eq!(d.within(None, async { 1 }).await, Ok(1));
    }
}
