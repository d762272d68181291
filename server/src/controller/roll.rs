//! Steps 2 and 3 of a reconcile: which nodes get their target as desired config now (under
//! `maxUnavailable`, pause, maintenance windows and reboot plans), why the others wait, and a pool's
//! configuration once all its nodes run its target.

use super::index::PoolIndex;
use super::settings::Settings;
use crate::controller::memo::RebootPlans;
use crate::controller::policy::{self, NodeView, PoolView, Why};
use crate::controller::window::{self, WindowWait};
use crate::fleet::{update, Fleet};
use crate::store::records::{EventRecord, NodeRecord};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

pub(super) fn roll_out(
    fleet: &mut Fleet,
    now: u64,
    settings: &Settings,
    silent: &HashSet<String>,
    events: &mut Vec<EventRecord>,
    plans: &mut RebootPlans,
    index: &mut PoolIndex,
) {
    // Decide on borrowed views (no node is copied), then write the assignments.
    // Per pool: why its reboots wait, and the nodes that wait (only pools where some do).
    let mut waits: BTreeMap<String, (Option<WindowWait>, BTreeSet<String>)> = BTreeMap::new();
    let window_now = settings.window_clock.now();
    let policies = fleet.policies();
    plans.for_policies(&policies);
    // Every pool is decided from the index: the nodes waiting for their target (only those are
    // ever handed one, or wait for a window) by name, the rest by their counts. A status
    // report's commit does not walk thousands of nodes, nor does an enrollment's, nor one in a
    // pool whose maintenance window is closed.
    index.follow(&fleet.nodes);
    let mut silent_by_pool: Option<HashMap<&str, usize>> = None;
    let mut decided: Vec<policy::Assignment> = Vec::new();
    // Pools whose halt began or ended: (pool, the node that halts it now).
    let mut halts: Vec<(String, Option<String>)> = Vec::new();
    for (pool, p) in fleet.pools.iter() {
        let pool = pool.as_str();
        let mut view = pool_view(&p.value);
        let wait = window::gate(&p.value, window_now);
        view.window_closed = wait.is_some();
        let c = index.counts(Some(pool));
        let d = if c.pending == 0 && (wait.is_none() || c.slotless == 0) {
            Decision::default()
        } else {
            let silent_counts =
                silent_by_pool.get_or_insert_with(|| silent_in_pools(fleet, silent));
            let ctx = Ctx {
                fleet,
                view: &view,
                silent,
                policies: &policies,
            };
            from_index(&ctx, pool, silent_counts, index, plans)
        };
        // Debug builds (the tests') decide every pool by walking it too.
        #[cfg(debug_assertions)]
        {
            let ctx = Ctx {
                fleet,
                view: &view,
                silent,
                policies: &policies,
            };
            assert_eq!(
                d,
                walk_pool(&ctx, pool, plans),
                "the pool index and a walk of pool {pool} decide alike"
            );
        }
        if let Some(w) = wait.filter(|_| !d.waiting.is_empty()) {
            waits.insert(pool.to_string(), (Some(w), d.waiting));
        }
        decided.extend(d.assign);
        // Halted: nodes wait for the target while a Degraded node stops the rollout.
        let halted = view.halt_on_degraded && c.degraded > 0 && c.pending > 0;
        if halted != p.value.status.halted_by.is_some() {
            let by = halted.then(|| halted_by(fleet, pool)).flatten();
            if by != p.value.status.halted_by {
                halts.push((pool.to_string(), by));
            }
        }
    }
    for (pool, by) in halts {
        record_halt(fleet, now, &pool, by, events);
    }
    let assignments: Vec<(policy::Assignment, Option<String>)> = decided
        .into_iter()
        .map(|a| {
            // A lookup, not a scan of the pool: an apply assigns every node of a pool.
            let previous = fleet
                .nodes
                .get(a.node.as_str())
                .and_then(|n| n.value.desired.clone());
            (a, previous)
        })
        .collect();
    for (a, previous) in assignments {
        let why = match a.why {
            Why::NewNode => "new node",
            Why::AlreadyUnavailable => "the node was already updating, degraded or silent",
            Why::Rollout => "within maxUnavailable",
        };
        events.push(EventRecord::normal(
            now,
            format!("Node/{}", a.node),
            "DesiredChanged",
            format!(
                "desired config {} (was {}; {why})",
                a.config,
                previous.as_deref().unwrap_or("none")
            ),
        ));
        update(&mut fleet.nodes, &a.node, |n| {
            n.desired = Some(a.config.clone());
            n.desired_at = Some(now);
        });
    }
    record_waits(fleet, now, &waits, index, events);
}

/// What the rollout decides for one pool: the configs to hand out now, and who waits for the
/// maintenance window (while it is closed).
#[derive(Debug, Default, PartialEq, Eq)]
struct Decision {
    assign: Vec<policy::Assignment>,
    waiting: BTreeSet<String>,
}

/// What deciding a pool reads.
struct Ctx<'a> {
    fleet: &'a Fleet,
    view: &'a PoolView,
    silent: &'a HashSet<String>,
    policies: &'a hearth_config::model::DisruptionPolicies,
}

/// Per pool, the silent nodes the index does not count as unavailable already (taking part,
/// reported, otherwise available): silent, they are unavailable too.
fn silent_in_pools<'a>(fleet: &'a Fleet, silent: &HashSet<String>) -> HashMap<&'a str, usize> {
    let mut out: HashMap<&str, usize> = HashMap::new();
    for n in silent
        .iter()
        .filter_map(|name| fleet.nodes.get(name.as_str()))
    {
        let n = &n.value;
        if let Some(pool) = n.pool.as_deref() {
            if n.excluded.is_none() && n.report.is_some() && !n.is_unavailable() {
                *out.entry(pool).or_default() += 1;
            }
        }
    }
    out
}

/// A pool decided from the index: its pending nodes and its counts (with the silent ones of
/// `silent_counts`), and, while its window is closed, the nodes rebooting without a slot. The
/// same decision as [`walk_pool`]'s, without looking at the pool's other nodes.
fn from_index(
    ctx: &Ctx<'_>,
    pool: &str,
    silent_counts: &HashMap<&str, usize>,
    index: &PoolIndex,
    plans: &mut RebootPlans,
) -> Decision {
    let c = index.counts(Some(pool));
    let counts = policy::PoolCounts {
        size: c.size,
        unavailable: c.unavailable + silent_counts.get(pool).copied().unwrap_or(0),
        halted: ctx.view.halt_on_degraded && c.degraded > 0,
    };
    let candidates: Vec<NodeView<'_>> = index
        .pending(pool)
        .filter_map(|name| ctx.fleet.nodes.get(name))
        .map(|n| view_of(ctx, &n.value, plans))
        .collect();
    let mut waiting = BTreeSet::new();
    if ctx.view.window_closed {
        waiting.extend(
            policy::waiting_for_window_of(ctx.view, counts.halted, &candidates)
                .into_iter()
                .map(str::to_string),
        );
        // And the nodes whose reboot waits for a slot the window does not grant.
        waiting.extend(index.slotless(pool).map(str::to_string));
    }
    Decision {
        assign: policy::next_desired_of(ctx.view, counts, &candidates),
        waiting,
    }
}

/// A pool decided by walking every node of it (taking part): what [`from_index`] must decide
/// (compared in debug builds, the tests').
#[cfg(any(debug_assertions, test))]
fn walk_pool(ctx: &Ctx<'_>, pool: &str, plans: &mut RebootPlans) -> Decision {
    let nodes = members(ctx.fleet, pool);
    let views: Vec<NodeView<'_>> = nodes.iter().map(|n| view_of(ctx, n, plans)).collect();
    let mut waiting = BTreeSet::new();
    if ctx.view.window_closed {
        waiting.extend(
            policy::waiting_for_window(ctx.view, &views)
                .into_iter()
                .map(str::to_string),
        );
        waiting.extend(
            nodes
                .iter()
                .filter(|n| {
                    n.state() == Some(crate::api::NodeState::Rebooting) && n.reboot_slot.is_none()
                })
                .map(|n| n.name.clone()),
        );
    }
    Decision {
        assign: policy::next_desired(ctx.view, &views),
        waiting,
    }
}

/// The rollout's view of `n` in the pool of `ctx` (whether its update needs a reboot is asked
/// only while the window is closed, and only of a node that needs an update).
fn view_of<'a>(ctx: &Ctx<'_>, n: &'a NodeRecord, plans: &mut RebootPlans) -> NodeView<'a> {
    let reboot = ctx.view.window_closed
        && n.target.is_some()
        && n.desired != n.target
        && needs_reboot(ctx.fleet, n, ctx.policies, plans);
    node_view(n, ctx.silent.contains(&n.name), reboot)
}

/// Whether `n`'s update from its desired config to its target needs a reboot (the agent's own
/// plan, with the fleet's disruption policies); unknown configs count as needing one.
pub(super) fn needs_reboot(
    fleet: &Fleet,
    n: &NodeRecord,
    policies: &hearth_config::model::DisruptionPolicies,
    plans: &mut RebootPlans,
) -> bool {
    let (Some(from), Some(to)) = (n.desired.as_deref(), n.target.as_deref()) else {
        return true;
    };
    if from == to {
        return false;
    }
    if let Some(r) = plans.get(from, to) {
        return r;
    }
    let r = match (fleet.rendered.get(from), fleet.rendered.get(to)) {
        (Some(a), Some(b)) => hearth_config::plan::plan(&a.value.spec, &b.value.spec, policies)
            .disruption
            .reboot(),
        _ => true,
    };
    plans.insert(from, to, r);
    r
}

/// Writes who waits for a maintenance window into the nodes and pools (only what changed), with
/// an event when a node starts waiting.
///
/// Only the nodes that wait now (`waits`) or are recorded as waiting (`index`) can change: the
/// others are not looked at.
pub(super) fn record_waits(
    fleet: &mut Fleet,
    now: u64,
    waits: &BTreeMap<String, (Option<WindowWait>, BTreeSet<String>)>,
    index: &PoolIndex,
    events: &mut Vec<EventRecord>,
) {
    let none = (None, BTreeSet::new());
    let concerned: BTreeSet<&str> = waits
        .values()
        .flat_map(|(_, names)| names.iter().map(String::as_str))
        .chain(index.waiting())
        .collect();
    let node_updates: Vec<(String, Option<WindowWait>)> = concerned
        .into_iter()
        .filter_map(|name| fleet.nodes.get(name))
        .filter_map(|n| {
            let n = &n.value;
            let (wait, waiting) = n.pool.as_ref().and_then(|p| waits.get(p)).unwrap_or(&none);
            let want = if waiting.contains(&n.name) {
                wait.clone()
            } else {
                None
            };
            (want != n.waiting).then(|| (n.name.clone(), want))
        })
        .collect();
    for (name, want) in node_updates {
        if let Some(w) = &want {
            let was_waiting = fleet
                .nodes
                .get(&name)
                .is_some_and(|n| n.value.waiting.is_some());
            if !was_waiting {
                events.push(EventRecord::normal(
                    now,
                    format!("Node/{name}"),
                    "WaitingForMaintenanceWindow",
                    w.message(now),
                ));
            }
        }
        update(&mut fleet.nodes, &name, |n| n.waiting = want);
    }
    record_pool_waits(fleet, waits);
}

/// The pools' part of [`record_waits`]: each pool says why its updates wait, if they do.
fn record_pool_waits(
    fleet: &mut Fleet,
    waits: &BTreeMap<String, (Option<WindowWait>, BTreeSet<String>)>,
) {
    let pool_updates: Vec<(String, Option<WindowWait>)> = fleet
        .pools
        .values()
        .filter_map(|p| {
            let p = &p.value;
            let want = waits
                .get(p.name())
                .filter(|(_, waiting)| !waiting.is_empty())
                .and_then(|(w, _)| w.clone());
            (want != p.status.waiting).then(|| (p.name().to_string(), want))
        })
        .collect();
    for (name, want) in pool_updates {
        update(&mut fleet.pools, &name, |p| p.status.waiting = want);
    }
}

/// A pool whose nodes all run their target (desired, current, `Done`) takes its target as its
/// configuration (counted by `index`, not by walking the pool's nodes).
pub(super) fn update_configurations(fleet: &mut Fleet, index: &mut PoolIndex) {
    index.follow(&fleet.nodes);
    let pool_names: Vec<String> = fleet.pools.keys().cloned().collect();
    for name in pool_names {
        let status = &fleet.pools[&name].value.status;
        let Some(target) = status.target.clone() else {
            continue;
        };
        if status.configuration.as_deref() == Some(target.as_str()) {
            continue;
        }
        if index.counts(Some(&name)).behind == 0 {
            update(&mut fleet.pools, &name, |p| {
                p.status.configuration = Some(target)
            });
        }
    }
}

/// Records that `pool`'s rollout is halted by node `by` (or no longer is), with a Warning event
/// that says what to do (or a Normal one when it goes on).
fn record_halt(
    fleet: &mut Fleet,
    now: u64,
    pool: &str,
    by: Option<String>,
    events: &mut Vec<EventRecord>,
) {
    let object = format!("MachineConfigPool/{pool}");
    match &by {
        Some(node) => {
            let reason = fleet
                .nodes
                .get(node.as_str())
                .and_then(|n| n.value.report.as_ref())
                .and_then(|r| r.reason.clone())
                .map(|r| format!(": {}", crate::text::cut(&r, 300)))
                .unwrap_or_default();
            events.push(EventRecord::warning(
                now,
                object,
                "RolloutHalted",
                format!(
                    "the rollout stops: node {node} is Degraded{reason}. Fix the node (hearth \
                     describe node {node}; then hearth node force {node}), or go on without it \
                     (hearth node exclude {node}), or let the pool roll past degraded nodes \
                     (annotation {}: continue)",
                    policy::ON_DEGRADED_ANNOTATION
                ),
            ));
        }
        None => events.push(EventRecord::normal(
            now,
            object,
            "RolloutResumed",
            "the rollout is no longer halted (no node is Degraded, or none waits for the \
             target any more)"
                .to_string(),
        )),
    }
    update(&mut fleet.pools, pool, |p| p.status.halted_by = by);
}

/// The rollout's view of a pool.
pub fn pool_view(p: &crate::store::records::PoolRecord) -> PoolView {
    PoolView {
        paused: p.spec.paused,
        max_unavailable: p.spec.max_unavailable,
        halt_on_degraded: p
            .metadata
            .annotations
            .get(policy::ON_DEGRADED_ANNOTATION)
            .is_none_or(|v| v != "continue"),
        window_closed: false,
    }
}

/// The degraded node that halts a pool's rollout, if any.
pub fn halted_by(fleet: &Fleet, pool: &str) -> Option<String> {
    let p = fleet.pools.get(pool)?;
    let nodes = members(fleet, pool);
    let views: Vec<NodeView<'_>> = nodes.iter().map(|n| node_view(n, false, false)).collect();
    policy::halted_by(&pool_view(&p.value), &views).map(str::to_string)
}

/// The nodes of `pool` that take part in its rollouts (not excluded by an admin): a walk of
/// the fleet.
fn members<'a>(fleet: &'a Fleet, pool: &str) -> Vec<&'a NodeRecord> {
    fleet
        .nodes
        .values()
        .map(|n| &n.value)
        .filter(|n| n.pool.as_deref() == Some(pool) && n.excluded.is_none())
        .collect()
}

/// The rollout's view of a node.
fn node_view(n: &NodeRecord, silent: bool, needs_reboot: bool) -> NodeView<'_> {
    NodeView {
        name: &n.name,
        target: n.target.as_deref(),
        desired: n.desired.as_deref(),
        current: n.current(),
        state: n.state(),
        silent,
        needs_reboot,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::NodeState;
    use crate::controller::tests::status;
    use crate::fleet::{put, update};
    use crate::store::records::{Hold, PoolRecord};
    use hearth_config::model::MaxUnavailable;

    /// A small deterministic generator (the test needs variety, not randomness).
    struct Lcg(u64);

    impl Lcg {
        fn pick<'a, T>(&mut self, of: &'a [T]) -> &'a T {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            &of[((self.0 >> 33) as usize) % of.len()]
        }
    }

    /// Through hundreds of fleets changed a few nodes at a time (targets, desired and reported
    /// configs, states, reboot slots, exclusions, pools, silent nodes, maxUnavailable, pause,
    /// halting, the window open or closed), the rollout decided from the followed index is the
    /// rollout decided by walking each pool: the configs handed out and who waits.
    #[test]
    fn the_index_decides_as_a_walk_of_the_pool() {
        let configs = [None, Some("r1"), Some("r2")];
        let states = [
            None,
            Some(NodeState::Done),
            Some(NodeState::Working),
            Some(NodeState::Rebooting),
            Some(NodeState::Degraded),
            Some(NodeState::Unreconcilable),
        ];
        let pools = [
            Some("worker"),
            Some("worker"),
            Some("worker"),
            Some("master"),
            None,
        ];
        let limits = [
            MaxUnavailable::Count(1),
            MaxUnavailable::Count(3),
            MaxUnavailable::Percent(10),
            MaxUnavailable::Percent(100),
        ];
        let mut rng = Lcg(42);
        let mut fleet = Fleet::default();
        for role in ["master", "worker"] {
            put(&mut fleet.pools, role, PoolRecord::builtin(role, 0));
        }
        let names: Vec<String> = (0..80).map(|i| format!("n{i:02}")).collect();
        let mut index = PoolIndex::default();
        let mut plans = RebootPlans::default();
        let (mut decided, mut waiting) = (0, 0);
        for round in 0..400 {
            // A few nodes change each round (a first round sets them all).
            let changed = if round == 0 { names.len() } else { 3 };
            for _ in 0..changed {
                let name = rng.pick(&names).clone();
                let n = NodeRecord {
                    name: name.clone(),
                    pool: rng.pick(&pools).map(str::to_string),
                    target: rng.pick(&configs).map(str::to_string),
                    desired: rng.pick(&configs).map(str::to_string),
                    report: rng
                        .pick(&states)
                        .map(|s| status(s, rng.pick(&configs).map(str::to_string), None).into()),
                    excluded: (*rng.pick(&[false, false, false, true])).then(|| Hold {
                        by: "test".into(),
                        at: 0,
                    }),
                    reboot_slot: (*rng.pick(&[false, true])).then(Default::default),
                    ..Default::default()
                };
                put(&mut fleet.nodes, &name, n);
            }
            let limit = *rng.pick(&limits);
            let paused = *rng.pick(&[false, false, false, true]);
            let halt = *rng.pick(&["continue", "halt"]);
            update(&mut fleet.pools, "worker", |p| {
                p.spec.max_unavailable = limit;
                p.spec.paused = paused;
                p.metadata
                    .annotations
                    .insert(policy::ON_DEGRADED_ANNOTATION.into(), halt.into());
            });
            let silent: HashSet<String> = names
                .iter()
                .filter(|_| *rng.pick(&[false, false, false, false, true]))
                .cloned()
                .collect();
            index.follow(&fleet.nodes);
            let policies = fleet.policies();
            let silent_counts = silent_in_pools(&fleet, &silent);
            for pool in ["worker", "master"] {
                let mut view = pool_view(&fleet.pools[pool].value);
                view.window_closed = *rng.pick(&[false, false, true]);
                let ctx = Ctx {
                    fleet: &fleet,
                    view: &view,
                    silent: &silent,
                    policies: &policies,
                };
                let from = from_index(&ctx, pool, &silent_counts, &index, &mut plans);
                assert_eq!(
                    from,
                    walk_pool(&ctx, pool, &mut plans),
                    "round {round}, pool {pool}"
                );
                decided += from.assign.len();
                waiting += from.waiting.len();
            }
        }
        assert!(decided > 100, "the rounds handed out configs: {decided}");
        assert!(waiting > 20, "nodes waited for a window: {waiting}");
    }
}
