//! Refused claims of a node's name: a machine that enrolls under the name of an enrolled node
//! without that node's credential is refused (409); the refusals are remembered here (in memory,
//! by node) so that the node's events say so (from where, with which pool's token, when, how
//! many), and so that an admin about to reset the node's credential is warned that a second
//! machine still claims the name.
//!
//! An event costs a commit, and whoever holds a bootstrap token can be refused as often as it
//! likes: a node gets at most one such event every [`EVENT_EVERY`] seconds, which counts the
//! refusals since the last one; the map holds at most [`MAX_NAMES`] names (the oldest claims go
//! first).

use std::collections::HashMap;

/// The least time between two refused-claim events of one node, in seconds.
pub const EVENT_EVERY: u64 = 60;
/// How recent a refused claim makes a credential reset risky, in seconds.
pub const RECENT: u64 = 300;
/// The most names remembered.
pub const MAX_NAMES: usize = 10_000;

/// The refused claims of one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// The first refusal (Unix seconds).
    pub first: u64,
    /// The last one.
    pub last: u64,
    /// How many, in all.
    pub count: u64,
    /// How many since the last event (the next event counts them).
    pub unreported: u64,
    /// When the last event was recorded.
    pub last_event: Option<u64>,
    /// The pool of the bootstrap token the last claim came with.
    pub pool: String,
    /// Where the last claim came from (the client's address), when known.
    pub from: Option<String>,
}

/// The refused claims of every name.
#[derive(Debug, Default)]
pub struct RefusedClaims {
    by_node: HashMap<String, Claims>,
}

impl RefusedClaims {
    /// Notes a refused claim of `node` at `now`; returns the message of the event to record
    /// when one is due.
    pub fn note(&mut self, node: &str, pool: &str, from: Option<&str>, now: u64) -> Option<String> {
        if !self.by_node.contains_key(node) && self.by_node.len() >= MAX_NAMES {
            // Forget the name claimed longest ago (a linear walk, only when the map is full).
            if let Some(oldest) = self
                .by_node
                .iter()
                .min_by_key(|(_, c)| c.last)
                .map(|(n, _)| n.clone())
            {
                self.by_node.remove(&oldest);
            }
        }
        let c = self
            .by_node
            .entry(node.to_string())
            .or_insert_with(|| Claims {
                first: now,
                last: now,
                count: 0,
                unreported: 0,
                last_event: None,
                pool: pool.to_string(),
                from: None,
            });
        c.last = now;
        c.count += 1;
        c.unreported += 1;
        c.pool = pool.to_string();
        c.from = from.map(str::to_string);
        if c.last_event
            .is_some_and(|t| now.saturating_sub(t) < EVENT_EVERY)
        {
            return None;
        }
        let message = format!(
            "a machine{} claimed this node's name with pool {}'s bootstrap token and was refused: \
             it holds no credential of this node ({} refused claim(s) since {}, {} since the \
             last event). If this node was reinstalled, `hearth node reset-credential {node}` \
             lets it enroll again; if another machine holds the name, give it another name, and \
             do not reset while both run",
            c.from
                .as_deref()
                .map(|f| format!(" at {f}"))
                .unwrap_or_default(),
            c.pool,
            c.count,
            crate::time::rfc3339(c.first),
            c.unreported,
        );
        c.last_event = Some(now);
        c.unreported = 0;
        Some(message)
    }

    /// The claims of `node` if the last one is recent at `now` ([`RECENT`]).
    pub fn recent(&self, node: &str, now: u64) -> Option<&Claims> {
        self.by_node
            .get(node)
            .filter(|c| now.saturating_sub(c.last) < RECENT)
    }

    /// Forgets `node`'s claims (the node was deleted).
    pub fn forget(&mut self, node: &str) {
        self.by_node.remove(node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_event_a_minute_counts_the_refusals_between() {
        let mut r = RefusedClaims::default();
        let first = r.note("w0", "worker", Some("10.0.0.9:4711"), 1000).unwrap();
        assert!(first.contains("at 10.0.0.9:4711") && first.contains("pool worker"));
        assert!(first.contains("1 refused claim(s)"), "{first}");
        for t in 1001..1010 {
            assert_eq!(r.note("w0", "worker", None, t), None);
        }
        let next = r.note("w0", "worker", None, 1000 + EVENT_EVERY).unwrap();
        assert!(next.contains("11 refused claim(s)") && next.contains("10 since the last event"));
        assert!(r.recent("w0", 1000 + EVENT_EVERY + RECENT - 1).is_some());
        assert!(r.recent("w0", 1000 + EVENT_EVERY + RECENT).is_none());
        r.forget("w0");
        assert!(r.recent("w0", 1000 + EVENT_EVERY).is_none());
    }

    #[test]
    fn the_map_keeps_at_most_its_bound_forgetting_the_oldest() {
        let mut r = RefusedClaims::default();
        for i in 0..MAX_NAMES as u64 {
            r.note(&format!("n{i}"), "p", None, i);
        }
        r.note("new", "p", None, MAX_NAMES as u64);
        assert_eq!(r.by_node.len(), MAX_NAMES);
        assert!(!r.by_node.contains_key("n0") && r.by_node.contains_key("new"));
    }
}
