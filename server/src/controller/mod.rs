//! The controller: from MachineConfigs, pools and nodes to rendered configs, pool targets and
//! each node's desired config. Pure: it changes a [`Fleet`] in memory and returns events; the
//! caller commits the difference to the store in one transaction.
//!
//! A reconcile runs after every change. Its steps:
//!
//! 1. **render** (after changes of MachineConfigs, pools or node labels; [`Scope::Full`]): each
//!    pool is rendered with `hearth-config`; a new rendered config is stored (content-addressed,
//!    so an unchanged pool renders to the name it has), and becomes the pool's target. A render
//!    that fails leaves the last good target in place and records why. Each node gets its pool
//!    (by its labels) and its target: the pool's, or its own render when per-node overlays
//!    (`hearth.io/node`) exist for it;
//! 2. **rollout**: [`policy::next_desired`] decides which nodes get their target as their
//!    desired config now;
//! 3. a pool whose nodes all run its target gets it as its current configuration;
//! 4. **garbage collection** of rendered configs ([`Scope::Full`] only): everything a pool or
//!    node refers to (target, current configuration, desired, reported current and desired) is
//!    kept, and so are the newest `retention` renders of each pool (and of each node with
//!    overlays); the rest goes.
//!
//! Files: `mod.rs` (the reconcile sequence, pre-rendering), `settings.rs`, `render.rs` (step 1)
//! with `memo.rs` (rendering off the write lock), `roll.rs` (steps 2 and 3, and the rollout's
//! views of pools) with `policy.rs` (which nodes now, a pure function), `index.rs` (what the
//! rollout keeps of each pool between reconciles) and `window.rs` (maintenance windows), `gc.rs`
//! (step 4).

use crate::fleet::Fleet;
use crate::store::records::EventRecord;
use std::collections::HashSet;

mod gc;
mod index;
pub mod memo;
pub mod policy;
mod render;
mod roll;
mod settings;
#[cfg(test)]
mod tests;
pub mod window;

use gc::collect_garbage;
pub use gc::referenced;
pub use index::PoolIndex;
use memo::{RebootPlans, RenderMemo};
use render::render_all;
pub use roll::{halted_by, pool_view};
use roll::{needs_reboot, roll_out, update_configurations};
pub use settings::{Scope, Settings};

/// Reconciles `fleet` in place; returns the events to record.
pub fn reconcile(
    fleet: &mut Fleet,
    scope: Scope,
    now: u64,
    settings: &Settings,
) -> Vec<EventRecord> {
    reconcile_with(fleet, scope, now, settings, &HashSet::new())
}

/// [`reconcile`], with the nodes that have gone silent (not heard from for too long: they count
/// as unavailable).
pub fn reconcile_with(
    fleet: &mut Fleet,
    scope: Scope,
    now: u64,
    settings: &Settings,
    silent: &HashSet<String>,
) -> Vec<EventRecord> {
    reconcile_memo(
        fleet,
        scope,
        now,
        settings,
        silent,
        Kept {
            memo: &mut RenderMemo::computing(),
            plans: &mut RebootPlans::default(),
            index: &mut PoolIndex::default(),
        },
    )
}

/// What reconciles keep from one to the next so as to do less: renders, reboot plans, the
/// pools' counts. Fresh ones give the same results, more slowly.
#[derive(Debug)]
pub struct Kept<'a> {
    /// Renders ([`RenderMemo`]).
    pub memo: &'a mut RenderMemo,
    /// Which updates need a reboot ([`RebootPlans`]).
    pub plans: &'a mut RebootPlans,
    /// What each pool has left to do ([`PoolIndex`]).
    pub index: &'a mut PoolIndex,
}

/// What a controller that reconciles again and again keeps between reconciles, owned
/// ([`Kept`] borrows it): Kubernetes mode's controller, which reconciles after every change of
/// any object, renders again only what changed.
#[derive(Debug)]
pub struct Memory {
    /// Renders, computed when missing; keep only those in use with
    /// [`RenderMemo::forget_unused`] after each reconcile.
    pub memo: RenderMemo,
    /// Which updates need a reboot.
    pub plans: RebootPlans,
    /// What each pool has left to do.
    pub index: PoolIndex,
}

impl Default for Memory {
    fn default() -> Self {
        Memory {
            memo: RenderMemo::computing(),
            plans: RebootPlans::default(),
            index: PoolIndex::default(),
        }
    }
}

impl Memory {
    /// Borrowed for one reconcile.
    pub fn kept(&mut self) -> Kept<'_> {
        Kept {
            memo: &mut self.memo,
            plans: &mut self.plans,
            index: &mut self.index,
        }
    }
}

/// [`reconcile_with`], rendering through `kept.memo`. With a lookup-only memo that misses
/// ([`RenderMemo::missed`]) the result is incomplete and must be thrown away.
pub fn reconcile_memo(
    fleet: &mut Fleet,
    scope: Scope,
    now: u64,
    settings: &Settings,
    silent: &HashSet<String>,
    kept: Kept<'_>,
) -> Vec<EventRecord> {
    let Kept { memo, plans, index } = kept;
    let mut events = Vec::new();
    if scope == Scope::Full {
        render_all(fleet, now, &mut events, memo);
        if memo.missed() {
            return events;
        }
    }
    roll_out(fleet, now, settings, silent, &mut events, plans, index);
    update_configurations(fleet, index);
    // Collection only ever removes what nothing refers to, so it can wait for the next full
    // reconcile; status reports (the hot path) skip it.
    if scope == Scope::Full {
        collect_garbage(fleet, settings, now, &mut events);
    }
    events
}

/// Renders every pool and every node with overlays of `fleet` into `memo` (the expensive step,
/// run outside the write lock; see [`crate::controller::memo`]).
/// Then answers, into `plans`, whether each node's update to its new target needs a reboot,
/// for the pools outside their maintenance windows (what the rollout will ask).
pub fn prerender(
    mut fleet: Fleet,
    now: u64,
    settings: &Settings,
    memo: &mut RenderMemo,
    plans: &mut RebootPlans,
) {
    render_all(&mut fleet, now, &mut Vec::new(), memo);
    let policies = fleet.policies();
    plans.for_policies(&policies);
    let window_now = settings.window_clock.now();
    for n in fleet.nodes.values() {
        let closed = n
            .value
            .pool
            .as_ref()
            .and_then(|p| fleet.pools.get(p))
            .is_some_and(|p| window::gate(&p.value, window_now).is_some());
        if closed {
            needs_reboot(&fleet, &n.value, &policies, plans);
        }
    }
}
