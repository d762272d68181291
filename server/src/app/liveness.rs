//! Liveness: when each node was last heard from (kept in memory, not in the store), which
//! nodes are silent or stale, and the periodic tick that reconciles when that changes.

use super::state::App;
use crate::controller::Scope;
use crate::error::ApiError;
use crate::fleet::Fleet;
use crate::store::records::NodeRecord;
use crate::time::now;
use std::collections::HashSet;
use std::sync::Arc;

/// When a node was last heard from: a request this process saw (`mem`) or its last stored
/// report, whichever is later. (On etcd, a replica sees only its own requests; every agent
/// reports at each turn of its follow loop, at least every 30 s plus its long-poll, so the
/// stored report keeps a node fresh on every replica against `--stale-after` of minutes.)
fn last_heard(mem: Option<u64>, report_at: Option<u64>) -> Option<u64> {
    match (mem, report_at) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// How long (seconds) a set of silent nodes found by walking the fleet is reused.
pub const SILENT_REUSE: u64 = 1;

impl App {
    /// Notes that a node was heard from.
    pub fn seen(&self, node: &str) {
        if let Ok(mut m) = self.last_seen.lock() {
            m.insert(node.to_string(), now());
        }
    }

    /// When a node was last heard from (a request, or its last report).
    pub fn last_seen(&self, node: &NodeRecord) -> Option<u64> {
        let mem = self
            .last_seen
            .lock()
            .ok()
            .and_then(|m| m.get(&node.name).copied());
        last_heard(mem, node.report_at)
    }

    /// The nodes that have reported once but have not been heard from within `stale_after`.
    ///
    /// Walking the fleet for them is O(fleet) and every commit asks (a third of a busy server's
    /// time at 60,000 nodes), so the set found is reused for [`SILENT_REUSE`] seconds: a node
    /// heard from since leaves it at once (only the set's members are looked at again); a node
    /// going silent is seen at most that much later, against a `stale_after` of minutes.
    pub fn silent(&self, fleet: &Fleet) -> Arc<HashSet<String>> {
        let t = now();
        let stale = self.options.stale_after.as_secs();
        let is_silent = |n: &NodeRecord, seen: &std::collections::HashMap<String, u64>| {
            n.report.is_some()
                && last_heard(seen.get(&n.name).copied(), n.report_at)
                    .is_none_or(|l| t.saturating_sub(l) > stale)
        };
        let mut cache = self.silent_cache.lock().unwrap_or_else(|e| e.into_inner());
        let seen = self.last_seen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, set)) = cache.as_ref() {
            if t.saturating_sub(*at) < SILENT_REUSE {
                let still: HashSet<String> = set
                    .iter()
                    .filter(|name| {
                        fleet
                            .nodes
                            .get(name.as_str())
                            .is_some_and(|n| is_silent(&n.value, &seen))
                    })
                    .cloned()
                    .collect();
                return Arc::new(still);
            }
        }
        let set: Arc<HashSet<String>> = Arc::new(
            fleet
                .nodes
                .values()
                .map(|n| &n.value)
                .filter(|n| is_silent(n, &seen))
                .map(|n| n.name.clone())
                .collect(),
        );
        *cache = Some((t, set.clone()));
        set
    }

    /// Re-evaluates the rollouts (nodes going silent or coming back are no events of their
    /// own); commits only if something changed.
    pub async fn tick(&self) -> Result<(), ApiError> {
        self.mutate(Scope::Rollout, false, |_, _| Ok(())).await
    }

    /// Whether the node was heard from within `stale_after`.
    pub fn is_fresh(&self, node: &NodeRecord) -> bool {
        self.last_seen(node)
            .is_some_and(|t| now().saturating_sub(t) <= self.options.stale_after.as_secs())
    }
}
