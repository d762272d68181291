//! One decision of the Kubernetes controller, pure: the objects as observed, read into a fleet,
//! reconciled, and the writes that bring the API server there. What it keeps from one decision
//! to the next (objects already read, renders, reboot plans, the pools' counts) only saves
//! work: a fresh [`Decider`] decides the same.

use super::observe::{hold_refused, read_cached, writes, Observed, Read, ReadCache, Writes};
use crate::controller::{self, Memory, Scope, Settings};
use crate::fleet::Fleet;
use crate::store::records::EventRecord;
use std::collections::HashSet;

/// What one decision found and decided.
#[derive(Debug)]
pub struct Decision {
    /// The objects as read (the fleet before the reconcile, problems, pools held).
    pub read: Read,
    /// The fleet after the reconcile.
    pub after: Fleet,
    /// Its events.
    pub events: Vec<EventRecord>,
    /// What to write to the API server.
    pub writes: Writes,
}

/// Decides, keeping what later decisions can reuse.
#[derive(Debug, Default)]
pub struct Decider {
    cache: ReadCache,
    memory: Memory,
}

impl Decider {
    /// A decider that has kept nothing yet.
    pub fn new() -> Decider {
        Decider::default()
    }

    /// The decision for `o` at `now`.
    pub fn decide(&mut self, o: &Observed, now: u64, settings: &Settings) -> Decision {
        let read = read_cached(o, now, &mut self.cache);
        let mut after = read.fleet.clone();
        let mut events = controller::reconcile_memo(
            &mut after,
            Scope::Full,
            now,
            settings,
            &HashSet::new(),
            self.memory.kept(),
        );
        self.memory.memo.forget_unused();
        hold_refused(&read.fleet, &mut after, &read.held, &mut events);
        let writes = writes(o, &read.fleet, &after, now);
        Decision {
            read,
            after,
            events,
            writes,
        }
    }

    /// Renders made so far (not answered from what was kept).
    pub fn renders(&self) -> u64 {
        self.memory.memo.renders()
    }
}
