//! What the rollout needs to know of each pool, kept from one reconcile to the next, so that it
//! decides a pool without walking its nodes.
//!
//! Per pool, by name: the nodes waiting for their target (`pending`: the only nodes a rollout
//! can hand anything, or that can wait for a window) and the nodes rebooting without a slot;
//! fleet-wide, the nodes recorded as waiting for a window; and per pool the counts of the rest
//! (taking part, unavailable, degraded, not in their target: a pool takes its target as its
//! configuration when none is). A status report changes a few nodes of a pool of thousands;
//! walking the pool at each commit was most of a group commit's work at 10,000 nodes
//! (docs/performance.md).
//!
//! The counts are followed, not trusted: the index keeps the node map they were counted on
//! (a persistent map, so keeping it costs only what later commits change) and, when asked
//! about another, counts only the difference between the two (`imbl`'s diff skips the
//! subtrees both share: O(changed nodes × log n)). A fresh index gives the same answers after
//! one walk of the fleet.

use crate::api::NodeState;
use crate::fleet::Map;
use crate::store::records::NodeRecord;
use imbl::ordmap::DiffItem;
use std::collections::{BTreeMap, BTreeSet};

/// A pool's counts (see the module documentation). "Taking part": not excluded by an admin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Nodes taking part whose desired config is not their target ([`PoolIndex::pending`]
    /// names them).
    pub pending: usize,
    /// Nodes not in their target yet (desired, reported current and `Done`).
    pub behind: usize,
    /// Nodes taking part.
    pub size: usize,
    /// Nodes taking part that report `Degraded` or `Unreconcilable`.
    pub degraded: usize,
    /// Nodes taking part that are unavailable whether silent or not: they have reported, and
    /// were handed a config they have not reached or are not `Done` in (a silent node is
    /// unavailable too; the silent set is the caller's).
    pub unavailable: usize,
    /// Nodes taking part that report `Rebooting` without holding a reboot slot (while the
    /// window is closed they wait for it; [`PoolIndex::slotless`] names them).
    pub slotless: usize,
}

impl Counts {
    fn of(n: &NodeRecord) -> Counts {
        let part = n.excluded.is_none();
        Counts {
            pending: usize::from(part && is_pending(n)),
            behind: usize::from(!n.is_updated_to(n.target.as_deref())),
            size: usize::from(part),
            degraded: usize::from(part && n.state().is_some_and(NodeState::is_degraded)),
            unavailable: usize::from(part && n.is_unavailable()),
            slotless: usize::from(part && is_slotless(n)),
        }
    }

    fn add(&mut self, o: Counts) {
        self.pending += o.pending;
        self.behind += o.behind;
        self.size += o.size;
        self.degraded += o.degraded;
        self.unavailable += o.unavailable;
        self.slotless += o.slotless;
    }

    fn sub(&mut self, o: Counts) {
        // Never below zero: the counts were made of the very records subtracted.
        self.pending = self.pending.saturating_sub(o.pending);
        self.behind = self.behind.saturating_sub(o.behind);
        self.size = self.size.saturating_sub(o.size);
        self.degraded = self.degraded.saturating_sub(o.degraded);
        self.unavailable = self.unavailable.saturating_sub(o.unavailable);
        self.slotless = self.slotless.saturating_sub(o.slotless);
    }

    fn is_zero(&self) -> bool {
        *self == Counts::default()
    }
}

/// A node waiting for its target: the only kind a rollout hands a config.
fn is_pending(n: &NodeRecord) -> bool {
    n.target.is_some() && n.desired != n.target
}

/// A node rebooting without a slot.
fn is_slotless(n: &NodeRecord) -> bool {
    n.state() == Some(NodeState::Rebooting) && n.reboot_slot.is_none()
}

/// Per pool counts of a node map, followed from one map to the next.
#[derive(Debug, Default)]
pub struct PoolIndex {
    /// The map the counts are of (none: nothing counted yet).
    nodes: Option<Map<NodeRecord>>,
    /// By pool name; nodes without a pool under `None`. Pools whose counts are all zero are
    /// left out.
    counts: BTreeMap<Option<String>, Counts>,
    /// By pool name: the pending nodes (taking part, desired config not their target), in name
    /// order. Empty sets are left out.
    pending: Names,
    /// By pool name: the nodes taking part that reboot without a slot. Empty sets left out.
    slotless: Names,
    /// The nodes recorded as waiting for a maintenance window, in any pool or none.
    waiting: BTreeSet<String>,
}

/// Node names by pool.
type Names = BTreeMap<String, BTreeSet<String>>;

/// Adds or removes `node` in `pool`'s set of `names`.
fn track(names: &mut Names, pool: &str, node: &str, add: bool) {
    if add {
        // The pool's name is copied only for its first node (an apply adds every node).
        match names.get_mut(pool) {
            Some(set) => {
                set.insert(node.to_string());
            }
            None => {
                names.insert(pool.to_string(), BTreeSet::from([node.to_string()]));
            }
        }
    } else if let Some(set) = names.get_mut(pool) {
        set.remove(node);
        if set.is_empty() {
            names.remove(pool);
        }
    }
}

impl PoolIndex {
    /// Brings the counts to `nodes`: the difference from the map they were of, or one walk of
    /// `nodes` the first time.
    pub fn follow(&mut self, nodes: &Map<NodeRecord>) {
        match self.nodes.take() {
            Some(known) if known.ptr_eq(nodes) => {}
            Some(known) => {
                for item in known.diff(nodes) {
                    match item {
                        DiffItem::Add(_, n) => self.count(&n.value, true),
                        DiffItem::Remove(_, o) => self.count(&o.value, false),
                        DiffItem::Update {
                            old: (_, o),
                            new: (_, n),
                        } => {
                            self.count(&o.value, false);
                            self.count(&n.value, true);
                        }
                    }
                }
            }
            None => {
                self.counts.clear();
                self.pending.clear();
                self.slotless.clear();
                self.waiting.clear();
                for n in nodes.values() {
                    self.count(&n.value, true);
                }
            }
        }
        self.nodes = Some(nodes.clone());
    }

    fn count(&mut self, n: &NodeRecord, add: bool) {
        if n.waiting.is_some() {
            if add {
                self.waiting.insert(n.name.clone());
            } else {
                self.waiting.remove(&n.name);
            }
        }
        let c = Counts::of(n);
        if c.is_zero() {
            return;
        }
        if let Some(pool) = &n.pool {
            if c.pending == 1 {
                track(&mut self.pending, pool, &n.name, add);
            }
            if c.slotless == 1 {
                track(&mut self.slotless, pool, &n.name, add);
            }
        }
        let entry = self.counts.entry(n.pool.clone()).or_default();
        if add {
            entry.add(c);
        } else {
            entry.sub(c);
        }
        if entry.is_zero() {
            self.counts.remove(&n.pool);
        }
    }

    /// The counts of `pool` (`None`: nodes without a pool), as of the last [`PoolIndex::follow`].
    pub fn counts(&self, pool: Option<&str>) -> Counts {
        self.counts
            .get(&pool.map(str::to_string))
            .copied()
            .unwrap_or_default()
    }

    /// The pending nodes of `pool` (see [`Counts::pending`]), in name order.
    pub fn pending(&self, pool: &str) -> impl Iterator<Item = &str> {
        self.pending
            .get(pool)
            .into_iter()
            .flat_map(|names| names.iter().map(String::as_str))
    }

    /// The nodes of `pool` rebooting without a slot (see [`Counts::slotless`]).
    pub fn slotless(&self, pool: &str) -> impl Iterator<Item = &str> {
        self.slotless
            .get(pool)
            .into_iter()
            .flat_map(|names| names.iter().map(String::as_str))
    }

    /// The nodes recorded as waiting for a window, in any pool or none, in name order.
    pub fn waiting(&self) -> impl Iterator<Item = &str> {
        self.waiting.iter().map(String::as_str)
    }

    /// Lets go of `nodes` before the caller changes only the revisions of its records (a
    /// commit's stamp), which changes no count: keeping the map would make each of those records
    /// a copy. Only when the counts are of `nodes` (the same map, not an equal one): otherwise
    /// the index keeps the map it counted, and the stamp copies. [`PoolIndex::restamped`] takes
    /// the stamped map back.
    pub fn set_aside(&mut self, nodes: &Map<NodeRecord>) -> Option<Counted> {
        match &self.nodes {
            Some(known) if known.ptr_eq(nodes) => {
                self.nodes = None;
                Some(Counted(()))
            }
            _ => None,
        }
    }

    /// After [`PoolIndex::set_aside`]: the counts are of `nodes`, the map set aside with only
    /// its records' revisions changed since.
    pub fn restamped(&mut self, _counted: Counted, nodes: &Map<NodeRecord>) {
        self.nodes = Some(nodes.clone());
    }
}

/// Proof that counts were set aside ([`PoolIndex::set_aside`]).
#[derive(Debug)]
pub struct Counted(());

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{AgentStatus, NodeState};
    use crate::fleet::{put, update};
    use crate::store::records::Hold;
    use hearth_config::window::WindowWait;

    fn node(name: &str, pool: Option<&str>, target: Option<&str>) -> NodeRecord {
        NodeRecord {
            name: name.into(),
            pool: pool.map(str::to_string),
            target: target.map(str::to_string),
            ..Default::default()
        }
    }

    fn done_in(config: Option<String>) -> AgentStatus {
        crate::controller::tests::status(NodeState::Done, config.clone(), config)
    }

    /// One change of the test's node map.
    type Step = Box<dyn Fn(&mut Map<NodeRecord>)>;

    fn fresh(nodes: &Map<NodeRecord>) -> PoolIndex {
        let mut i = PoolIndex::default();
        i.follow(nodes);
        i
    }

    fn same(a: &PoolIndex, b: &PoolIndex) -> bool {
        a.counts == b.counts
            && a.pending == b.pending
            && a.slotless == b.slotless
            && a.waiting == b.waiting
    }

    /// The counts followed change by change are the counts of a fresh walk, through nodes
    /// added, handed their target, reporting, moving pools, excluded, waiting and removed.
    #[test]
    fn followed_counts_are_the_counts_of_a_fresh_walk() {
        let mut nodes: Map<NodeRecord> = Map::new();
        for i in 0..300 {
            let pool = if i % 3 == 0 { "master" } else { "worker" };
            put(
                &mut nodes,
                &format!("n{i:03}"),
                node(&format!("n{i:03}"), Some(pool), Some("r1")),
            );
        }
        put(&mut nodes, "loose", node("loose", None, None));
        let mut index = fresh(&nodes);
        assert_eq!(index.counts(Some("worker")).pending, 200);
        assert_eq!(index.counts(Some("master")).behind, 100);
        assert_eq!(
            index.counts(None),
            Counts {
                behind: 1,
                size: 1,
                ..Counts::default()
            }
        );
        assert_eq!(index.pending("master").count(), 100);
        let steps: Vec<Step> = vec![
            Box::new(|m| {
                for i in (0..300).step_by(2) {
                    update(m, &format!("n{i:03}"), |n| n.desired = n.target.clone());
                }
            }),
            Box::new(|m| {
                for i in (0..300).step_by(4) {
                    update(m, &format!("n{i:03}"), |n| {
                        n.report = Some(done_in(n.desired.clone()).into());
                    });
                }
            }),
            Box::new(|m| {
                update(m, "n001", |n| n.pool = Some("infra".into()));
                update(m, "n002", |n| n.pool = None);
                update(m, "n005", |n| {
                    n.excluded = Some(Hold {
                        by: "test".into(),
                        at: 0,
                    })
                });
                update(m, "n007", |n| {
                    n.waiting = Some(WindowWait {
                        window: "Sat 02:00-06:00".into(),
                        opens_at: Some(1),
                        error: None,
                    })
                });
                m.remove("n010");
                update(m, "n004", |n| {
                    n.report = n
                        .report
                        .as_ref()
                        .map(|r| r.edited(|r| r.state = NodeState::Working));
                });
                update(m, "n008", |n| {
                    n.report = n
                        .report
                        .as_ref()
                        .map(|r| r.edited(|r| r.state = NodeState::Degraded));
                });
                put(m, "new", node("new", Some("worker"), Some("r2")));
            }),
            Box::new(|m| {
                for i in 0..300 {
                    update(m, &format!("n{i:03}"), |n| n.target = Some("r2".into()));
                }
            }),
        ];
        for step in steps {
            let before = nodes.clone();
            step(&mut nodes);
            assert!(!before.ptr_eq(&nodes));
            index.follow(&nodes);
            assert!(
                same(&index, &fresh(&nodes)),
                "followed {:?}, fresh {:?}",
                index.counts,
                fresh(&nodes).counts
            );
        }
        assert_eq!(index.waiting().collect::<Vec<_>>(), ["n007"]);
        assert_eq!(index.counts(Some("infra")).pending, 1);
        assert_eq!(index.pending("infra").collect::<Vec<_>>(), ["n001"]);
        assert_eq!(index.counts(Some("worker")).unavailable, 2, "n004 and n008");
        assert_eq!(index.counts(Some("worker")).degraded, 1, "n008");
        // Following the same map again changes nothing.
        index.follow(&nodes);
        assert!(same(&index, &fresh(&nodes)));
    }

    /// A stamp changes revisions only: set aside, the map is not shared while stamped (so the
    /// stamp copies no record), and the counts are still those of the stamped map.
    #[test]
    fn counts_set_aside_for_a_stamp_hold_for_the_stamped_map() {
        let mut nodes: Map<NodeRecord> = Map::new();
        put(&mut nodes, "a", node("a", Some("worker"), Some("r1")));
        let mut index = fresh(&nodes);
        assert!(
            index
                .set_aside(&nodes.clone().update("b".into(), nodes["a"].clone()))
                .is_none(),
            "another map is not the one counted"
        );
        let counted = index.set_aside(&nodes).expect("counted");
        let before = std::sync::Arc::as_ptr(&nodes["a"]);
        std::sync::Arc::make_mut(nodes.get_mut("a").unwrap()).mod_revision = 7;
        assert_eq!(
            std::sync::Arc::as_ptr(&nodes["a"]),
            before,
            "the record was changed in place, not copied"
        );
        index.restamped(counted, &nodes);
        assert!(same(&index, &fresh(&nodes)));
    }
}
