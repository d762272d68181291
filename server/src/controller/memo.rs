//! Rendering off the write lock.
//!
//! Rendering a pool is the one expensive step of a reconcile (a MachineConfig with 16,000
//! kernel arguments once took seconds), and everything that changes the fleet — status reports,
//! enrollments, reboot slots and FleetLock included — commits under one writer lock. So a change
//! that needs a render ([`crate::controller::Scope::Full`]) renders twice-removed from that
//! lock: [`App::mutate`](crate::app::App::mutate) first applies the change to a copy of the
//! snapshot and renders it on a blocking thread with a [`RenderMemo`] in
//! [`RenderMemo::computing`] mode, without any lock; then, under the lock, it applies the change
//! again to the then-current snapshot and reconciles with the same memo in
//! [`RenderMemo::lookup_only`] mode, where a render is a hash lookup. If the inputs changed in
//! between (another apply committed first), the lookup misses, the locked attempt is abandoned
//! ([`RenderMemo::missed`]) and the render runs again outside the lock.
//!
//! A memo entry is keyed by the sha256 of exactly what the render reads: every MachineConfig's
//! metadata, spec and source version, and the pool's (or for a node with overlays, every
//! pool's and the node's name and labels) metadata and spec; never times or status.
//!
//! A memo may also be kept from one reconcile to the next (Kubernetes mode, which reconciles
//! after every object's change): only what changed is rendered again, and
//! [`RenderMemo::forget_unused`] drops the renders the last reconcile did not ask for.

use crate::fleet::Fleet;
use hearth_config::model::{MachineConfig, MachineConfigPool, NodeInfo};
use hearth_config::render::{self, RenderError};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

type Key = [u8; 32];

/// Render results by their inputs' digest.
#[derive(Debug, Default)]
pub struct RenderMemo {
    results: HashMap<Key, Result<MachineConfig, RenderError>>,
    /// The keys asked for since the last [`RenderMemo::forget_unused`].
    used: HashSet<Key>,
    /// Renders made (not answered from the memo).
    renders: u64,
    compute: bool,
    missed: bool,
    gate: Option<PathBuf>,
}

/// The digests of one reconcile's inputs that every render shares.
#[derive(Debug, Clone, Copy)]
pub struct Inputs {
    configs: Key,
    pools: Key,
}

impl Inputs {
    /// Digests the MachineConfigs and pools of `fleet` (linear in their size).
    pub fn of(fleet: &Fleet) -> Inputs {
        let mut h = Sha256::new();
        for r in fleet.mcs.values() {
            let v = &r.value;
            feed(&mut h, &(&v.metadata, &v.spec, &v.source_version));
        }
        let configs = h.finalize().into();
        let mut h = Sha256::new();
        for r in fleet.pools.values() {
            feed(&mut h, &(&r.value.metadata, &r.value.spec));
        }
        Inputs {
            configs,
            pools: h.finalize().into(),
        }
    }
}

/// Feeds one JSON value, length-prefixed, into a digest.
fn feed(h: &mut Sha256, v: &impl serde::Serialize) {
    let bytes = serde_json::to_vec(v).unwrap_or_default();
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(&bytes);
}

impl RenderMemo {
    /// Renders what it has not seen (outside the write lock).
    pub fn computing() -> RenderMemo {
        RenderMemo {
            compute: true,
            ..Default::default()
        }
    }

    /// With a test hook: while `<gate>/hold` exists, every render first writes
    /// `<gate>/rendering` and waits (so that a test can prove what goes on during a render);
    /// a render that starts while `<gate>/pass` exists does not wait (so that a test can hold
    /// one change and let a later one through).
    pub fn with_gate(mut self, gate: Option<PathBuf>) -> RenderMemo {
        self.gate = gate;
        self
    }

    /// Switches to answering only from what was rendered (under the write lock).
    pub fn lookup_only(&mut self) {
        self.compute = false;
        self.missed = false;
    }

    /// Switches back to rendering (for the next attempt outside the lock).
    pub fn compute_again(&mut self) {
        self.compute = true;
        self.missed = false;
    }

    /// Whether a lookup found nothing since [`RenderMemo::lookup_only`]: the inputs changed
    /// and the reconcile must be redone after rendering again.
    pub fn missed(&self) -> bool {
        self.missed
    }

    /// `render::render_pool`, memoised. `None`: a miss in lookup-only mode.
    pub fn pool(
        &mut self,
        inputs: &Inputs,
        record: &crate::store::records::PoolRecord,
        pool: &MachineConfigPool,
        configs: &[MachineConfig],
    ) -> Option<Result<MachineConfig, RenderError>> {
        let mut h = Sha256::new();
        h.update(b"pool\0");
        h.update(inputs.configs);
        feed(&mut h, &(&record.metadata, &record.spec));
        let key: Key = h.finalize().into();
        self.get_or(key, || render::render_pool(pool, configs))
    }

    /// `render::render_node` (a node with overlays), memoised. `None`: a miss in lookup-only
    /// mode.
    pub fn node(
        &mut self,
        inputs: &Inputs,
        pools: &[MachineConfigPool],
        configs: &[MachineConfig],
        node: &NodeInfo,
    ) -> Option<Result<MachineConfig, RenderError>> {
        let mut h = Sha256::new();
        h.update(b"node\0");
        h.update(inputs.configs);
        h.update(inputs.pools);
        feed(&mut h, &(&node.metadata.name, &node.metadata.labels));
        let key: Key = h.finalize().into();
        let name = node.metadata.name.clone();
        self.get_or(key, || {
            render::render_node(pools, configs, std::slice::from_ref(node), &name).map(|r| r.config)
        })
    }

    /// How many renders were made (not answered from the memo) so far.
    pub fn renders(&self) -> u64 {
        self.renders
    }

    /// Drops every render not asked for since the last call: a memo kept across reconciles
    /// holds what the fleet uses now, not every render it ever made.
    pub fn forget_unused(&mut self) {
        let used = std::mem::take(&mut self.used);
        self.results.retain(|k, _| used.contains(k));
    }

    fn get_or(
        &mut self,
        key: Key,
        render: impl FnOnce() -> Result<MachineConfig, RenderError>,
    ) -> Option<Result<MachineConfig, RenderError>> {
        if let Some(r) = self.results.get(&key) {
            self.used.insert(key);
            return Some(r.clone());
        }
        if !self.compute {
            self.missed = true;
            return None;
        }
        self.wait_at_gate();
        let r = render();
        self.renders += 1;
        self.used.insert(key);
        self.results.insert(key, r.clone());
        Some(r)
    }

    fn wait_at_gate(&self) {
        let Some(gate) = &self.gate else {
            return;
        };
        if !gate.join("hold").exists() || gate.join("pass").exists() {
            return;
        }
        let _ = std::fs::write(gate.join("rendering"), b"");
        while gate.join("hold").exists() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Whether an update from one rendered config to another needs a reboot (the agent's plan with
/// the fleet's disruption policies), by config names: rendered configs are content-addressed,
/// so a pair's answer holds until the policies change. Kept by the server across reconciles and
/// filled outside the writer lock when a change renders, so that the rollout (which asks only
/// for pools outside their maintenance windows) plans under the lock only for pairs it has
/// never seen (after a restart).
#[derive(Debug, Default, Clone)]
pub struct RebootPlans {
    policies: Key,
    map: HashMap<(String, String), bool>,
    made: u64,
}

/// Pairs kept at most (then forgotten all at once).
const MAX_REBOOT_PLANS: usize = 10_000;

impl RebootPlans {
    /// Forgets every answer if `policies` differ from those they were made with.
    pub fn for_policies(&mut self, policies: &hearth_config::model::DisruptionPolicies) {
        let mut h = Sha256::new();
        feed(&mut h, policies);
        let key: Key = h.finalize().into();
        if key != self.policies {
            self.map.clear();
            self.policies = key;
        }
    }

    /// The answer for `from` → `to`, if known.
    pub fn get(&self, from: &str, to: &str) -> Option<bool> {
        self.map.get(&(from.to_string(), to.to_string())).copied()
    }

    /// Plans made through [`RebootPlans::insert`] so far (not counting merged answers).
    pub fn made(&self) -> u64 {
        self.made
    }

    /// Records an answer that was just planned.
    pub fn insert(&mut self, from: &str, to: &str, reboot: bool) {
        self.made += 1;
        self.keep(from, to, reboot);
    }

    fn keep(&mut self, from: &str, to: &str, reboot: bool) {
        if self.map.len() >= MAX_REBOOT_PLANS {
            self.map.clear();
        }
        self.map.insert((from.to_string(), to.to_string()), reboot);
    }

    /// Takes the answers of `other` (made with the same policies).
    pub fn merge(&mut self, other: RebootPlans) {
        if other.policies != self.policies {
            self.policies = other.policies;
            self.map = other.map;
            return;
        }
        for ((from, to), r) in other.map {
            self.keep(&from, &to, r);
        }
    }
}
