//! Desired-config answers handed out as fast as the agents take them.
//!
//! An apply to a whole pool wakes every waiting long-poll of the pool at once: at 10,000 agents,
//! 10,000 answers go out in the same instant, and 10,000 status reports come back in the next,
//! each waiting behind all the others (a p99 of most of a second on two cores). The [`Pacer`]
//! keeps at most N answers *unacknowledged*: an answer takes a turn, and the turn ends when its
//! node is next heard from (a status report or its next long-poll), or after [`LEASE`] at the
//! latest. The others wait for a turn, first come first served. The server's work is the same;
//! answers no longer run ahead of what the server can take back, so reports do not queue
//! behind thousands of others.
//!
//! Bounds: a node holds at most one turn (its other answers go without one, and only its own
//! requests end its turn); a turn lasts at most [`LEASE`] (an agent that applies for minutes
//! before it reports holds it no longer); an answer waits at most [`WAIT_LIMIT`] for a turn and
//! then goes without one. So the slowest the pacer can make an apply is N answers per
//! [`LEASE`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Unacknowledged answers per core by default (`--desired-answers-at-once`: this times the
/// cores).
pub const TURNS_PER_CORE: usize = 64;

/// The longest a turn lasts without its node being heard from.
pub const LEASE: Duration = Duration::from_millis(250);

/// The longest an answer waits for a turn; after it the answer goes without one.
pub const WAIT_LIMIT: Duration = Duration::from_secs(20);

/// Who answers next (one per server).
#[derive(Debug)]
pub struct Pacer {
    /// How many turns there are (0: no pacing).
    size: usize,
    turns: Arc<Semaphore>,
    /// The nodes holding a turn, since when.
    held: Mutex<HashMap<String, (Instant, OwnedSemaphorePermit)>>,
    lease: Duration,
    wait_limit: Duration,
}

/// How an answer got to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// It took a turn; `waited`: not at once.
    Taken {
        /// Whether all turns were held when it asked.
        waited: bool,
    },
    /// At once, without a turn: pacing is off, or the node already holds a turn.
    Unpaced,
    /// Without a turn, after waiting the wait limit.
    GaveUp,
}

impl Pacer {
    /// At most `turns` unacknowledged answers (0: no pacing), each turn at most `lease` long;
    /// an answer waits at most `wait_limit` for a turn. Inside a Tokio runtime, a task ends the
    /// turns that outlive their lease (it stops when the pacer is dropped).
    pub fn new(turns: usize, lease: Duration, wait_limit: Duration) -> Arc<Self> {
        let pacer = Arc::new(Pacer {
            size: turns,
            turns: Arc::new(Semaphore::new(turns)),
            held: Mutex::new(HashMap::new()),
            lease,
            wait_limit,
        });
        if turns > 0 {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(expire(Arc::downgrade(&pacer), lease));
            }
        }
        pacer
    }

    /// The default for this machine: [`TURNS_PER_CORE`] per core.
    pub fn turns_for_this_machine() -> usize {
        TURNS_PER_CORE * std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    /// Waits for `node`'s turn to answer.
    pub async fn turn(&self, node: &str) -> Turn {
        if self.size == 0 || self.holds(node) {
            return Turn::Unpaced;
        }
        let (permit, waited) = match self.turns.clone().try_acquire_owned() {
            Ok(p) => (p, false),
            Err(_) => {
                match tokio::time::timeout(self.wait_limit, self.turns.clone().acquire_owned())
                    .await
                {
                    Ok(Ok(p)) => (p, true),
                    Ok(Err(_)) => return Turn::Unpaced,
                    Err(_) => return Turn::GaveUp,
                }
            }
        };
        let Ok(mut held) = self.held.lock() else {
            return Turn::Unpaced;
        };
        if held.contains_key(node) {
            // The node took a turn meanwhile (another of its requests): this one goes without.
            return Turn::Unpaced;
        }
        held.insert(node.to_string(), (Instant::now(), permit));
        Turn::Taken { waited }
    }

    /// `node` was heard from (a status report, a long-poll): its turn, if any, ends.
    pub fn heard_from(&self, node: &str) {
        if self.size == 0 {
            return;
        }
        if let Ok(mut held) = self.held.lock() {
            held.remove(node);
        }
    }

    /// `node` is being heard from: its turn ends when the guard is dropped (when the server
    /// has answered it, so that what the server has yet to answer stays within the turns).
    pub fn hearing<'a>(&'a self, node: &'a str) -> Hearing<'a> {
        Hearing { pacer: self, node }
    }

    /// Ends the turns older than the lease; returns how many.
    fn expire(&self) -> usize {
        let Ok(mut held) = self.held.lock() else {
            return 0;
        };
        let before = held.len();
        held.retain(|_, (since, _)| since.elapsed() < self.lease);
        before - held.len()
    }

    fn holds(&self, node: &str) -> bool {
        self.held.lock().is_ok_and(|h| h.contains_key(node))
    }
}

/// Ends a node's turn when dropped ([`Pacer::hearing`]).
#[derive(Debug)]
pub struct Hearing<'a> {
    pacer: &'a Pacer,
    node: &'a str,
}

impl Drop for Hearing<'_> {
    fn drop(&mut self) {
        self.pacer.heard_from(self.node);
    }
}

/// Ends the turns that outlived their lease, every half lease, while the pacer lives.
async fn expire(pacer: Weak<Pacer>, lease: Duration) {
    let mut tick = tokio::time::interval(lease / 2);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(p) = pacer.upgrade() else { return };
        let expired = p.expire();
        if expired > 0 {
            tracing::debug!(expired, "desired-config turns ended by their lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(t: Turn) -> bool {
        matches!(t, Turn::Taken { .. })
    }

    /// Two turns: a third node waits until a node is heard from; a node never holds two; only
    /// the node itself ends its turn; a wait ends at the limit.
    #[tokio::test]
    async fn answers_wait_for_a_turn_until_a_node_is_heard_from() {
        let pacer = Pacer::new(2, Duration::from_secs(3600), Duration::from_millis(300));
        assert!(taken(pacer.turn("a").await));
        // The same node again: without a turn, at once.
        assert_eq!(pacer.turn("a").await, Turn::Unpaced);
        assert!(taken(pacer.turn("b").await));
        // c waits: both turns are held. Hearing from a node holding none changes nothing.
        let p = pacer.clone();
        let c = tokio::spawn(async move { p.turn("c").await });
        pacer.heard_from("x");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!c.is_finished(), "c got a turn while both were held");
        // a reports: c goes.
        pacer.heard_from("a");
        assert_eq!(c.await.unwrap(), Turn::Taken { waited: true });
        // Nobody reports: d gives up at the limit and goes without.
        assert_eq!(pacer.turn("d").await, Turn::GaveUp);
        pacer.heard_from("b");
        assert_eq!(pacer.turn("d").await, Turn::Taken { waited: false });
    }

    /// A node that is not heard from holds its turn for the lease, no longer.
    #[tokio::test]
    async fn a_turn_ends_with_its_lease() {
        let pacer = Pacer::new(1, Duration::from_millis(100), Duration::from_secs(10));
        assert!(taken(pacer.turn("silent").await));
        let started = Instant::now();
        assert_eq!(pacer.turn("next").await, Turn::Taken { waited: true });
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
    }

    #[tokio::test]
    async fn zero_turns_is_no_pacing() {
        let pacer = Pacer::new(0, LEASE, WAIT_LIMIT);
        assert_eq!(pacer.turn("a").await, Turn::Unpaced);
        assert_eq!(pacer.turn("b").await, Turn::Unpaced);
    }
}
