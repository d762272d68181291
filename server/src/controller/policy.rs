//! Which nodes get a new desired config now: the rollout policy, as a pure function.
//!
//! This is the seam where the rest of the rollout controller goes (maintenance windows, halting
//! on a degraded node, FleetLock-held slots): it sees the pool and its nodes and returns the
//! assignments to make; the caller writes them.
//!
//! The rules today (see `docs/server.md`):
//!
//! - a node that has **never reported** (just enrolled, or known only from a `Node` manifest)
//!   is not serving yet: it gets its target at once, paused or not, and does not count as
//!   unavailable (so a machine that was registered but never came up blocks no rollout);
//! - a node that has reported is **unavailable** when it was handed a config it has not reached
//!   (reported `current` ≠ `desired`), when it reports a state other than `Done` (`Working`,
//!   `Rebooting`, `Degraded`, `Unreconcilable`), or when it has gone **silent** (not heard from
//!   for the server's `--stale-after`: a dead machine is not available);
//! - a paused pool hands out nothing else;
//! - while a node of the pool is `Degraded` or `Unreconcilable`, the rollout **halts**: no
//!   available node gets a new config (unless the pool is annotated
//!   `hearth.io/on-degraded: continue`, in which case degraded nodes only take capacity);
//! - a node that is already unavailable and whose target changed gets the new target at once
//!   (it costs no capacity: this is how a fix reaches a degraded node);
//! - otherwise at most `maxUnavailable` (resolved against the pool's size) nodes are
//!   unavailable at once: the remaining capacity goes to available nodes in name order;
//! - outside the pool's **maintenance windows** (see [`crate::controller::window`]) an available node whose
//!   update needs a reboot is not handed it (it takes no capacity either); updates that need
//!   no reboot go on. The nodes that wait are [`waiting_for_window`].

use crate::api::NodeState;
use hearth_config::model::MaxUnavailable;

/// What the rollout needs to know about a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolView {
    /// Rollouts paused.
    pub paused: bool,
    /// How many nodes may be unavailable at once.
    pub max_unavailable: MaxUnavailable,
    /// Stop handing out new configs while a node is degraded.
    pub halt_on_degraded: bool,
    /// Outside the pool's maintenance windows: updates that need a reboot wait.
    pub window_closed: bool,
}

/// The pool annotation that lets a rollout go on past degraded nodes (`continue`).
pub const ON_DEGRADED_ANNOTATION: &str = "hearth.io/on-degraded";

/// Whether the rollout of `nodes` is halted by a degraded node (the first one, by name).
pub fn halted_by<'a>(pool: &PoolView, nodes: &[NodeView<'a>]) -> Option<&'a str> {
    if !pool.halt_on_degraded {
        return None;
    }
    nodes
        .iter()
        .filter(|n| n.state.is_some_and(NodeState::is_degraded))
        .map(|n| n.name)
        .min()
}

/// What the rollout needs to know about a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeView<'a> {
    /// Name.
    pub name: &'a str,
    /// The config it should end up in (none: the server has nothing for it).
    pub target: Option<&'a str>,
    /// The config it was handed.
    pub desired: Option<&'a str>,
    /// The config it reports being in.
    pub current: Option<&'a str>,
    /// The state it reports (none: no report yet).
    pub state: Option<NodeState>,
    /// Not heard from for too long.
    pub silent: bool,
    /// Going from its desired config to its target needs a reboot (only worked out, and only
    /// needed, while the pool's maintenance window is closed).
    pub needs_reboot: bool,
}

impl NodeView<'_> {
    /// See the module documentation.
    pub fn is_unavailable(&self) -> bool {
        self.state.is_some()
            && (self.silent
                || (self.desired.is_some()
                    && (self.current != self.desired || self.state != Some(NodeState::Done))))
    }

    fn needs_update(&self) -> bool {
        self.target.is_some() && self.desired != self.target
    }

    fn held_by_window(&self, pool: &PoolView) -> bool {
        pool.window_closed && self.needs_reboot
    }
}

/// The available nodes whose update waits for the pool's maintenance window (none while the
/// pool is paused or halted: they wait for that first).
pub fn waiting_for_window<'a>(pool: &PoolView, nodes: &[NodeView<'a>]) -> Vec<&'a str> {
    waiting_for_window_of(pool, halted_by(pool, nodes).is_some(), nodes)
}

/// [`waiting_for_window`] of a pool `halted` or not, among `candidates` (any of its nodes that
/// include those needing an update: only those can wait).
pub fn waiting_for_window_of<'a>(
    pool: &PoolView,
    halted: bool,
    candidates: &[NodeView<'a>],
) -> Vec<&'a str> {
    if !pool.window_closed || pool.paused || halted {
        return Vec::new();
    }
    let mut out: Vec<&str> = candidates
        .iter()
        .filter(|n| {
            n.state.is_some() && n.needs_update() && !n.is_unavailable() && n.held_by_window(pool)
        })
        .map(|n| n.name)
        .collect();
    out.sort();
    out
}

/// Why a node is handed a config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// It has never reported (not serving yet).
    NewNode,
    /// It was unavailable already (costs no capacity).
    AlreadyUnavailable,
    /// Within `maxUnavailable`.
    Rollout,
}

/// One new desired config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The node.
    pub node: String,
    /// The config.
    pub config: String,
    /// Why now.
    pub why: Why,
}

/// What the rollout needs to know about a pool's nodes as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolCounts {
    /// Nodes taking part (not excluded).
    pub size: usize,
    /// Of them, unavailable ([`NodeView::is_unavailable`]).
    pub unavailable: usize,
    /// A node halts the rollout ([`halted_by`]).
    pub halted: bool,
}

impl PoolCounts {
    /// The counts of `nodes`.
    pub fn of(pool: &PoolView, nodes: &[NodeView<'_>]) -> PoolCounts {
        PoolCounts {
            size: nodes.len(),
            unavailable: nodes.iter().filter(|n| n.is_unavailable()).count(),
            halted: halted_by(pool, nodes).is_some(),
        }
    }
}

/// The assignments to make now in a pool whose nodes are `nodes` (any order; ties are broken by
/// name).
pub fn next_desired(pool: &PoolView, nodes: &[NodeView<'_>]) -> Vec<Assignment> {
    let counts = PoolCounts::of(pool, nodes);
    let mut candidates: Vec<NodeView<'_>> =
        nodes.iter().filter(|n| n.needs_update()).copied().collect();
    candidates.sort_by(|a, b| a.name.cmp(b.name));
    next_desired_of(pool, counts, &candidates)
}

/// [`next_desired`] from the pool's counts and its nodes that need an update (`candidates`,
/// sorted by name): only those are ever handed a config, so a caller that keeps the counts
/// need not look at the other nodes.
pub fn next_desired_of(
    pool: &PoolView,
    counts: PoolCounts,
    candidates: &[NodeView<'_>],
) -> Vec<Assignment> {
    let assign = |n: &NodeView<'_>, why: Why| Assignment {
        node: n.name.to_string(),
        config: n.target.unwrap_or_default().to_string(),
        why,
    };
    let candidates = candidates.iter().filter(|n| n.needs_update());
    let mut out = Vec::new();
    for n in candidates.clone().filter(|n| n.state.is_none()) {
        out.push(assign(n, Why::NewNode));
    }
    if pool.paused {
        return out;
    }
    for n in candidates
        .clone()
        .filter(|n| n.state.is_some() && n.is_unavailable())
    {
        out.push(assign(n, Why::AlreadyUnavailable));
    }
    if counts.halted {
        return out;
    }
    let max = pool.max_unavailable.resolve(counts.size);
    let mut capacity = max.saturating_sub(counts.unavailable);
    for n in
        candidates.filter(|n| n.state.is_some() && !n.is_unavailable() && !n.held_by_window(pool))
    {
        if capacity == 0 {
            break;
        }
        out.push(assign(n, Why::Rollout));
        capacity -= 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use NodeState::*;

    fn node<'a>(
        name: &'a str,
        target: &'a str,
        desired: Option<&'a str>,
        current: Option<&'a str>,
        state: Option<NodeState>,
    ) -> NodeView<'a> {
        NodeView {
            name,
            target: Some(target),
            desired,
            current,
            state,
            silent: false,
            needs_reboot: false,
        }
    }

    fn pool(max: MaxUnavailable) -> PoolView {
        PoolView {
            paused: false,
            max_unavailable: max,
            halt_on_degraded: true,
            window_closed: false,
        }
    }

    fn names(a: &[Assignment]) -> Vec<&str> {
        a.iter().map(|a| a.node.as_str()).collect()
    }

    #[test]
    fn one_at_a_time_by_default() {
        let nodes = [
            node("c", "B", Some("A"), Some("A"), Some(Done)),
            node("a", "B", Some("A"), Some("A"), Some(Done)),
            node("b", "B", Some("A"), Some("A"), Some(Done)),
        ];
        let a = next_desired(&pool(MaxUnavailable::default()), &nodes);
        assert_eq!(names(&a), ["a"]);
        assert_eq!(a[0].config, "B");
        assert_eq!(a[0].why, Why::Rollout);
    }

    #[test]
    fn capacity_counts_nodes_in_flight() {
        // a is updating (desired B, still on A): no capacity left with maxUnavailable 1.
        let nodes = [
            node("a", "B", Some("B"), Some("A"), Some(Working)),
            node("b", "B", Some("A"), Some("A"), Some(Done)),
            node("c", "B", Some("A"), Some("A"), Some(Done)),
        ];
        assert!(next_desired(&pool(MaxUnavailable::Count(1)), &nodes).is_empty());
        assert_eq!(
            names(&next_desired(&pool(MaxUnavailable::Count(2)), &nodes)),
            ["b"]
        );
        // Done in B but a reboot pending (Rebooting) still counts.
        let nodes = [
            node("a", "B", Some("B"), Some("B"), Some(Rebooting)),
            node("b", "B", Some("A"), Some("A"), Some(Done)),
        ];
        assert!(next_desired(&pool(MaxUnavailable::Count(1)), &nodes).is_empty());
        // Once a is Done in B, b goes.
        let nodes = [
            node("a", "B", Some("B"), Some("B"), Some(Done)),
            node("b", "B", Some("A"), Some("A"), Some(Done)),
        ];
        assert_eq!(
            names(&next_desired(&pool(MaxUnavailable::Count(1)), &nodes)),
            ["b"]
        );
    }

    #[test]
    fn percentages_resolve_against_the_pool_size() {
        let nodes: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
        let views: Vec<NodeView<'_>> = nodes
            .iter()
            .map(|n| node(n, "B", Some("A"), Some("A"), Some(Done)))
            .collect();
        let a = next_desired(&pool(MaxUnavailable::Percent(30)), &views);
        assert_eq!(names(&a), ["n0", "n1", "n2"]);
        // 5% of 10 rounds down to 0, and at least one node always moves.
        let a = next_desired(&pool(MaxUnavailable::Percent(5)), &views);
        assert_eq!(a.len(), 1);
    }

    #[test]
    fn never_more_than_max_unavailable() {
        // Property over every mix of states: after the assignments, at most max nodes are
        // unavailable (new nodes aside), unless more were unavailable to begin with.
        let states = [
            None,
            Some(Done),
            Some(Working),
            Some(Degraded),
            Some(Rebooting),
        ];
        let names_: Vec<String> = (0..5).map(|i| format!("n{i}")).collect();
        for seed in 0..3125u32 {
            let mut s = seed;
            let views: Vec<NodeView<'_>> = names_
                .iter()
                .map(|n| {
                    let st = states[(s % 5) as usize];
                    s /= 5;
                    let (desired, current) = match st {
                        None => (Some("A"), None),
                        _ => (Some("A"), Some("A")),
                    };
                    node(n, "B", desired, current, st)
                })
                .collect();
            for max in 1..=3u32 {
                let before = views.iter().filter(|v| v.is_unavailable()).count();
                let a = next_desired(&pool(MaxUnavailable::Count(max)), &views);
                let mut after = views.clone();
                for x in &a {
                    let v = after.iter_mut().find(|v| v.name == x.node).unwrap();
                    v.desired = Some("B");
                }
                let unavailable = after.iter().filter(|v| v.is_unavailable()).count();
                assert!(
                    unavailable <= (max as usize).max(before),
                    "seed {seed} max {max}: {unavailable} unavailable"
                );
            }
        }
    }

    #[test]
    fn nodes_that_never_reported_block_nothing() {
        // Registered but never came up: it follows the target and takes no capacity.
        let nodes = [
            node("ghost", "B", Some("A"), None, None),
            node("a", "B", Some("A"), Some("A"), Some(Done)),
        ];
        let a = next_desired(&pool(MaxUnavailable::Count(1)), &nodes);
        assert_eq!(names(&a), ["ghost", "a"]);
        assert_eq!(a[0].why, Why::NewNode);
        assert_eq!(a[1].why, Why::Rollout);
    }

    #[test]
    fn a_degraded_node_halts_the_rollout_unless_told_to_continue() {
        let nodes = [
            node("a", "C", Some("C"), Some("B"), Some(Degraded)),
            node("b", "C", Some("B"), Some("B"), Some(Done)),
            node("c", "C", Some("B"), Some("B"), Some(Done)),
        ];
        let mut p = pool(MaxUnavailable::Count(2));
        assert_eq!(halted_by(&p, &nodes), Some("a"));
        assert!(next_desired(&p, &nodes).is_empty());
        p.halt_on_degraded = false;
        assert_eq!(halted_by(&p, &nodes), None);
        assert_eq!(names(&next_desired(&p, &nodes)), ["b"]);
    }

    #[test]
    fn a_silent_node_is_unavailable() {
        let mut nodes = [
            node("a", "B", Some("A"), Some("A"), Some(Done)),
            node("b", "B", Some("A"), Some("A"), Some(Done)),
        ];
        nodes[0].silent = true;
        // a takes the only slot of capacity; it gets the config for when it comes back.
        let a = next_desired(&pool(MaxUnavailable::Count(1)), &nodes);
        assert_eq!(names(&a), ["a"]);
        assert_eq!(a[0].why, Why::AlreadyUnavailable);
        nodes[0].silent = false;
        assert_eq!(
            names(&next_desired(&pool(MaxUnavailable::Count(1)), &nodes)),
            ["a"]
        );
        assert_eq!(
            next_desired(&pool(MaxUnavailable::Count(1)), &nodes)[0].why,
            Why::Rollout
        );
    }

    #[test]
    fn paused_pools_only_serve_new_nodes() {
        let nodes = [
            node("a", "B", Some("A"), Some("A"), Some(Done)),
            node("new", "B", None, None, None),
        ];
        let p = PoolView {
            paused: true,
            max_unavailable: MaxUnavailable::Count(5),
            halt_on_degraded: true,
            window_closed: false,
        };
        let a = next_desired(&p, &nodes);
        assert_eq!(names(&a), ["new"]);
        assert_eq!(a[0].why, Why::NewNode);
    }

    #[test]
    fn a_fix_reaches_a_degraded_node_without_capacity() {
        let nodes = [
            node("a", "C", Some("B"), Some("A"), Some(Degraded)),
            node("b", "C", Some("A"), Some("A"), Some(Done)),
        ];
        let a = next_desired(&pool(MaxUnavailable::Count(1)), &nodes);
        assert_eq!(names(&a), ["a"]);
        assert_eq!(a[0].why, Why::AlreadyUnavailable);
    }

    #[test]
    fn nothing_to_do_when_converged_or_without_target() {
        let nodes = [node("a", "A", Some("A"), Some("A"), Some(Done))];
        assert!(next_desired(&pool(MaxUnavailable::Count(1)), &nodes).is_empty());
        let nodes = [NodeView {
            name: "x",
            target: None,
            desired: None,
            current: None,
            state: None,
            silent: false,
            needs_reboot: false,
        }];
        assert!(next_desired(&pool(MaxUnavailable::Count(1)), &nodes).is_empty());
    }

    #[test]
    fn outside_the_window_only_updates_without_reboot_go() {
        let mut nodes = [
            node("a", "B", Some("A"), Some("A"), Some(Done)),
            node("b", "B", Some("A"), Some("A"), Some(Done)),
            node("new", "B", None, None, None),
        ];
        nodes[0].needs_reboot = true;
        nodes[2].needs_reboot = true;
        let mut p = pool(MaxUnavailable::Count(1));
        p.window_closed = true;
        // a waits (and takes no capacity), b needs no reboot and goes; a new node is served.
        let a = next_desired(&p, &nodes);
        assert_eq!(names(&a), ["new", "b"]);
        assert_eq!(waiting_for_window(&p, &nodes), ["a"]);
        // In the window a goes.
        p.window_closed = false;
        assert_eq!(names(&next_desired(&p, &nodes)), ["new", "a"]);
        assert!(waiting_for_window(&p, &nodes).is_empty());
        // A degraded node still gets a fix at once (its reboot then waits for a slot).
        let mut nodes = [
            node("a", "C", Some("B"), Some("A"), Some(Degraded)),
            node("b", "C", Some("A"), Some("A"), Some(Done)),
        ];
        nodes[0].needs_reboot = true;
        nodes[1].needs_reboot = true;
        p.window_closed = true;
        let a = next_desired(&p, &nodes);
        assert_eq!(names(&a), ["a"]);
        assert_eq!(a[0].why, Why::AlreadyUnavailable);
        // Halted: b waits for the degraded node, not for the window.
        assert!(waiting_for_window(&p, &nodes).is_empty());
    }
}
