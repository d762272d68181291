//! Liveness: when each node was last heard from (kept in memory, not in the store), which
//! nodes are silent or stale, and the periodic tick that reconciles when that changes.

use super::App;
use crate::controller::Scope;
use crate::error::ApiError;
use crate::fleet::Fleet;
use crate::records::NodeRecord;
use crate::store::Store;
use crate::time::now;

impl<S: Store> App<S> {
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
        match (mem, node.report_at) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// The nodes that have reported once but have not been heard from within `stale_after`.
    pub fn silent(&self, fleet: &Fleet) -> std::collections::HashSet<String> {
        let seen = self.last_seen.lock().unwrap_or_else(|e| e.into_inner());
        let now = now();
        let stale = self.options.stale_after.as_secs();
        fleet
            .nodes
            .values()
            .map(|n| &n.value)
            .filter(|n| n.report.is_some())
            .filter(|n| {
                let last = match (seen.get(&n.name).copied(), n.report_at) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                last.is_none_or(|t| now.saturating_sub(t) > stale)
            })
            .map(|n| n.name.clone())
            .collect()
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
