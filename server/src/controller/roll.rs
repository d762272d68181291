//! Steps 2 and 3 of a reconcile: which nodes get their target as desired config now (under
//! `maxUnavailable`, pause, maintenance windows and reboot plans), why the others wait, and a pool's
//! configuration once all its nodes run its target.

use super::Settings;
use crate::fleet::{update, Fleet};
use crate::records::{EventRecord, NodeRecord};
use crate::render_memo::RebootPlans;
use crate::rollout::{self, NodeView, PoolView, Why};
use crate::window::{self, WindowWait};
use std::collections::{BTreeMap, HashSet};

pub(super) fn roll_out(
    fleet: &mut Fleet,
    now: u64,
    settings: &Settings,
    silent: &HashSet<String>,
    events: &mut Vec<EventRecord>,
    plans: &mut RebootPlans,
) {
    // Decide on borrowed views (no node is copied), then write the assignments.
    let mut assignments: Vec<(rollout::Assignment, Option<String>)> = Vec::new();
    // Per pool: why its reboots wait (none: they do not), and the nodes that wait.
    let mut waits: BTreeMap<String, (Option<WindowWait>, HashSet<String>)> = BTreeMap::new();
    let window_now = settings.window_clock.now();
    let policies = fleet.policies();
    plans.for_policies(&policies);
    {
        let mut by_pool: BTreeMap<&str, Vec<&NodeRecord>> = BTreeMap::new();
        // A node an admin excluded takes no part: no new desired config, no capacity, no halt.
        for n in fleet.nodes.values().filter(|n| n.value.excluded.is_none()) {
            if let Some(p) = &n.value.pool {
                by_pool.entry(p.as_str()).or_default().push(&n.value);
            }
        }
        for (pool, nodes) in by_pool {
            let Some(p) = fleet.pools.get(pool) else {
                continue;
            };
            let mut view = pool_view(&p.value);
            let wait = window::gate(&p.value, window_now);
            view.window_closed = wait.is_some();
            let views: Vec<NodeView<'_>> = nodes
                .iter()
                .map(|n| {
                    node_view(
                        n,
                        silent.contains(&n.name),
                        view.window_closed && needs_reboot(fleet, n, &policies, plans),
                    )
                })
                .collect();
            if let Some(w) = &wait {
                let mut waiting: HashSet<String> = rollout::waiting_for_window(&view, &views)
                    .into_iter()
                    .map(str::to_string)
                    .collect();
                // And the nodes whose reboot waits for a slot the window does not grant.
                waiting.extend(
                    nodes
                        .iter()
                        .filter(|n| {
                            n.state() == Some(crate::api::NodeState::Rebooting)
                                && n.reboot_slot.is_none()
                        })
                        .map(|n| n.name.clone()),
                );
                waits.insert(pool.to_string(), (Some(w.clone()), waiting));
            }
            for a in rollout::next_desired(&view, &views) {
                // A lookup, not a scan of the pool: an apply assigns every node of a pool.
                let previous = fleet
                    .nodes
                    .get(a.node.as_str())
                    .and_then(|n| n.value.desired.clone());
                assignments.push((a, previous));
            }
        }
    }
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
    record_waits(fleet, now, &waits, events);
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
pub(super) fn record_waits(
    fleet: &mut Fleet,
    now: u64,
    waits: &BTreeMap<String, (Option<WindowWait>, HashSet<String>)>,
    events: &mut Vec<EventRecord>,
) {
    let none = (None, HashSet::new());
    let node_updates: Vec<(String, Option<WindowWait>)> = fleet
        .nodes
        .values()
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

pub(super) fn update_configurations(fleet: &mut Fleet) {
    let pool_names: Vec<String> = fleet.pools.keys().cloned().collect();
    for name in pool_names {
        let status = &fleet.pools[&name].value.status;
        let Some(target) = status.target.clone() else {
            continue;
        };
        if status.configuration.as_deref() == Some(target.as_str()) {
            continue;
        }
        let all_updated = fleet
            .nodes
            .values()
            .filter(|n| n.value.pool.as_deref() == Some(name.as_str()))
            .all(|n| n.value.is_updated_to(n.value.target.as_deref()));
        if all_updated {
            update(&mut fleet.pools, &name, |p| {
                p.status.configuration = Some(target)
            });
        }
    }
}

/// The rollout's view of a pool.
pub fn pool_view(p: &crate::records::PoolRecord) -> PoolView {
    PoolView {
        paused: p.spec.paused,
        max_unavailable: p.spec.max_unavailable,
        halt_on_degraded: p
            .metadata
            .annotations
            .get(rollout::ON_DEGRADED_ANNOTATION)
            .is_none_or(|v| v != "continue"),
        window_closed: false,
    }
}

/// The degraded node that halts a pool's rollout, if any.
pub fn halted_by(fleet: &Fleet, pool: &str) -> Option<String> {
    let p = fleet.pools.get(pool)?;
    let nodes: Vec<&NodeRecord> = fleet
        .nodes
        .values()
        .map(|n| &n.value)
        .filter(|n| n.pool.as_deref() == Some(pool) && n.excluded.is_none())
        .collect();
    let views: Vec<NodeView<'_>> = nodes.iter().map(|n| node_view(n, false, false)).collect();
    rollout::halted_by(&pool_view(&p.value), &views).map(str::to_string)
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
