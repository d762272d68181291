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
//! 2. **rollout**: [`rollout::next_desired`] decides which nodes get their target as their
//!    desired config now;
//! 3. a pool whose nodes all run its target gets it as its current configuration;
//! 4. **garbage collection** of rendered configs ([`Scope::Full`] only): everything a pool or
//!    node refers to (target, current configuration, desired, reported current and desired) is
//!    kept, and so are the newest `retention` renders of each pool (and of each node with
//!    overlays); the rest goes.

use crate::fleet::{put, update, Fleet};
use crate::records::{EventRecord, NodeRecord, RenderedRecord};
use crate::render_memo::{Inputs, RebootPlans, RenderMemo};
use crate::rollout::{self, NodeView, PoolView, Why};
use crate::window::{self, WindowClock, WindowWait};
use hearth_config::model::{MachineConfig, MachineConfigPool};
use hearth_config::render::{self, RenderError};
use std::collections::{BTreeMap, HashSet};

/// Controller settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How many of the newest renders of each pool (and of each node with overlays) are kept;
    /// those in use are always kept.
    pub retention: usize,
    /// The clock maintenance windows are judged by.
    pub window_clock: WindowClock,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            retention: 5,
            window_clock: WindowClock::default(),
        }
    }
}

/// How much to reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Render everything, then roll out (MachineConfigs, pools or labels changed).
    Full,
    /// Roll out only (a status report, a reboot slot).
    Rollout,
}

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
        &mut RenderMemo::computing(),
        &mut RebootPlans::default(),
    )
}

/// [`reconcile_with`], rendering through `memo`. With a lookup-only memo that misses
/// ([`RenderMemo::missed`]) the result is incomplete and must be thrown away.
pub fn reconcile_memo(
    fleet: &mut Fleet,
    scope: Scope,
    now: u64,
    settings: &Settings,
    silent: &HashSet<String>,
    memo: &mut RenderMemo,
    plans: &mut RebootPlans,
) -> Vec<EventRecord> {
    let mut events = Vec::new();
    if scope == Scope::Full {
        render_all(fleet, now, &mut events, memo);
        if memo.missed() {
            return events;
        }
    }
    roll_out(fleet, now, settings, silent, &mut events, plans);
    update_configurations(fleet);
    // Collection only ever removes what nothing refers to, so it can wait for the next full
    // reconcile; status reports (the hot path) skip it.
    if scope == Scope::Full {
        collect_garbage(fleet, settings, now, &mut events);
    }
    events
}

/// Renders every pool and every node with overlays of `fleet` into `memo` (the expensive step,
/// run outside the write lock; see [`crate::render_memo`]).
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

fn render_all(fleet: &mut Fleet, now: u64, events: &mut Vec<EventRecord>, memo: &mut RenderMemo) {
    let inputs = Inputs::of(fleet);
    let configs: Vec<MachineConfig> = fleet.mcs.values().map(|r| r.value.to_model()).collect();
    let pools: Vec<MachineConfigPool> = render::with_builtin_pools(
        &fleet
            .pools
            .values()
            .map(|p| p.value.to_model())
            .collect::<Vec<_>>(),
    );

    // Membership first: a pool with no nodes and no configs is not a problem.
    let mut membership: BTreeMap<String, Result<String, RenderError>> = BTreeMap::new();
    let mut members: BTreeMap<String, usize> = BTreeMap::new();
    for n in fleet.nodes.values() {
        let r = render::pool_for_node(&pools, &n.value.to_model()).map(|p| p.name().to_string());
        if let Ok(p) = &r {
            *members.entry(p.clone()).or_default() += 1;
        }
        membership.insert(n.value.name.clone(), r);
    }

    let pool_names: Vec<String> = fleet.pools.keys().cloned().collect();
    for name in pool_names {
        let Some(model) = pools.iter().find(|p| p.name() == name) else {
            continue;
        };
        let old = fleet.pools[&name].value.status.clone();
        let mut status = old.clone();
        let Some(rendered) = memo.pool(&inputs, &fleet.pools[&name].value, model, &configs) else {
            return;
        };
        match rendered {
            Ok(mc) => {
                let rec = RenderedRecord::from_model(&mc, &name, None, now);
                status.source = rec.rendered_from.clone();
                status.target = Some(rec.name.clone());
                status.render_error = None;
                if !fleet.rendered.contains_key(&rec.name) {
                    put(&mut fleet.rendered, &rec.name.clone(), rec);
                }
            }
            Err(RenderError::NoConfigs(_)) if members.get(&name).copied().unwrap_or(0) == 0 => {
                status.render_error = None;
            }
            Err(e) => status.render_error = Some(e.to_string()),
        }
        if status.target != old.target {
            if let Some(t) = &status.target {
                events.push(EventRecord::normal(
                    now,
                    format!("MachineConfigPool/{name}"),
                    "Rendered",
                    format!(
                        "target config is now {t} (from {})",
                        status.source.join(", ")
                    ),
                ));
            }
        }
        if status.render_error != old.render_error {
            if let Some(e) = &status.render_error {
                events.push(EventRecord::warning(
                    now,
                    format!("MachineConfigPool/{name}"),
                    "RenderFailed",
                    format!("{e}; the pool keeps its last good target"),
                ));
            }
        }
        if status != old {
            update(&mut fleet.pools, &name, |p| p.status = status);
        }
    }

    let node_names: Vec<String> = fleet.nodes.keys().cloned().collect();
    for name in node_names {
        let node = fleet.nodes[&name].value.clone();
        let (pool, target, error) = match membership.remove(&name) {
            Some(Ok(p)) => {
                let overlays = render::overlays_for_node(&name, &configs);
                if overlays.is_empty() {
                    let t = fleet
                        .pools
                        .get(&p)
                        .and_then(|r| r.value.status.target.clone());
                    (Some(p), t, None)
                } else {
                    let Some(rendered) = memo.node(&inputs, &pools, &configs, &node.to_model())
                    else {
                        return;
                    };
                    match rendered {
                        Ok(r) => {
                            let rec = RenderedRecord::from_model(&r, &p, Some(&name), now);
                            let t = rec.name.clone();
                            if !fleet.rendered.contains_key(&t) {
                                put(&mut fleet.rendered, &t, rec);
                            }
                            (Some(p), Some(t), None)
                        }
                        Err(e) => (
                            Some(p),
                            node.target.clone(),
                            Some(format!(
                                "rendering the node's overlays failed: {e}; it keeps its last good target"
                            )),
                        ),
                    }
                }
            }
            Some(Err(e)) => (None, None, Some(e.to_string())),
            None => (node.pool.clone(), node.target.clone(), node.error.clone()),
        };
        if error != node.error {
            if let Some(e) = &error {
                events.push(EventRecord::warning(
                    now,
                    format!("Node/{name}"),
                    "NoConfig",
                    e.clone(),
                ));
            }
        }
        if pool != node.pool || target != node.target || error != node.error {
            update(&mut fleet.nodes, &name, |n| {
                n.pool = pool;
                n.target = target;
                n.error = error;
            });
        }
    }
}

fn roll_out(
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
        for n in fleet.nodes.values() {
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
                .map(|n| NodeView {
                    name: &n.name,
                    target: n.target.as_deref(),
                    desired: n.desired.as_deref(),
                    current: n.current(),
                    state: n.state(),
                    silent: silent.contains(&n.name),
                    needs_reboot: view.window_closed && needs_reboot(fleet, n, &policies, plans),
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
fn needs_reboot(
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
fn record_waits(
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

fn update_configurations(fleet: &mut Fleet) {
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
        .filter(|n| n.pool.as_deref() == Some(pool))
        .collect();
    let views: Vec<NodeView<'_>> = nodes
        .iter()
        .map(|n| NodeView {
            name: &n.name,
            target: n.target.as_deref(),
            desired: n.desired.as_deref(),
            current: n.current(),
            state: n.state(),
            silent: false,
            needs_reboot: false,
        })
        .collect();
    rollout::halted_by(&pool_view(&p.value), &views).map(str::to_string)
}

/// The names of the rendered configs something refers to.
pub fn referenced(fleet: &Fleet) -> HashSet<String> {
    let mut out = HashSet::new();
    for p in fleet.pools.values() {
        out.extend(p.value.status.target.iter().cloned());
        out.extend(p.value.status.configuration.iter().cloned());
    }
    for n in fleet.nodes.values() {
        let n = &n.value;
        out.extend(n.target.iter().cloned());
        out.extend(n.desired.iter().cloned());
        if let Some(r) = &n.report {
            out.extend(r.current.iter().cloned());
            out.extend(r.desired.iter().cloned());
        }
    }
    out
}

fn collect_garbage(
    fleet: &mut Fleet,
    settings: &Settings,
    now: u64,
    events: &mut Vec<EventRecord>,
) {
    let keep = referenced(fleet);
    // Series: (pool, node); newest first (not yet stored counts as newest).
    type Series = BTreeMap<(String, Option<String>), Vec<(u64, String)>>;
    let mut series: Series = BTreeMap::new();
    for r in fleet.rendered.values() {
        let order = if r.create_revision == 0 {
            u64::MAX
        } else {
            r.create_revision
        };
        series
            .entry((r.value.pool.clone(), r.value.node.clone()))
            .or_default()
            .push((order, r.value.name.clone()));
    }
    let mut removed = Vec::new();
    for ((pool, node), mut list) in series {
        list.sort_by(|a, b| b.cmp(a));
        // A node that is gone keeps nothing beyond what is referenced.
        let retention = match &node {
            Some(n) if !fleet.nodes.contains_key(n) => 0,
            _ if !fleet.pools.contains_key(&pool) => 0,
            _ => settings.retention,
        };
        for (i, (_, name)) in list.into_iter().enumerate() {
            if i >= retention && !keep.contains(&name) {
                removed.push(name);
            }
        }
    }
    if removed.is_empty() {
        return;
    }
    removed.sort();
    for name in &removed {
        fleet.rendered.remove(name);
    }
    events.push(EventRecord::normal(
        now,
        "RenderedConfigs".into(),
        "Pruned",
        format!(
            "removed {} rendered config(s) no longer in use: {}",
            removed.len(),
            removed.join(", ")
        ),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{AgentStatus, NodeState};
    use crate::records::{McRecord, NodeRecord, PoolRecord};
    use hearth_config::ignition::{File, Resource};
    use hearth_config::model::{MachineConfigSpec, ObjectMeta, NODE_LABEL, ROLE_LABEL};
    use std::collections::BTreeMap;

    fn mc(name: &str, role: &str, file: &str) -> McRecord {
        let mut spec = MachineConfigSpec::default();
        spec.config.storage.files.push(File {
            path: "/etc/x".into(),
            contents: Resource {
                source: Some(format!("data:,{file}")),
                ..Default::default()
            },
            ..Default::default()
        });
        McRecord {
            metadata: ObjectMeta {
                name: name.into(),
                labels: BTreeMap::from([(ROLE_LABEL.to_string(), role.to_string())]),
                annotations: BTreeMap::new(),
            },
            spec,
            source_version: Some("3.4.0".into()),
            created_at: 0,
            updated_at: 0,
        }
    }

    fn worker(name: &str) -> NodeRecord {
        NodeRecord {
            name: name.into(),
            labels: BTreeMap::from([("node-role.kubernetes.io/worker".to_string(), String::new())]),
            ..Default::default()
        }
    }

    fn fleet() -> Fleet {
        let mut f = Fleet::default();
        for role in ["master", "worker"] {
            put(&mut f.pools, role, PoolRecord::builtin(role, 0));
        }
        put(&mut f.mcs, "00-w", mc("00-w", "worker", "one"));
        for n in ["w0", "w1", "w2"] {
            put(&mut f.nodes, n, worker(n));
        }
        f
    }

    /// Commits the fleet as a store would: stamps revisions on everything new or changed.
    fn commit(f: &mut Fleet, old: &Fleet) {
        let ops = f.diff(old).unwrap();
        let rev = f.revision + 1;
        f.stamp(&ops, rev);
    }

    fn report(f: &mut Fleet, node: &str, state: NodeState) {
        let desired = f.nodes[node].value.desired.clone();
        update(&mut f.nodes, node, |n| {
            n.report = Some(AgentStatus {
                api_version: None,
                kind: None,
                state,
                reason: None,
                last_transition: None,
                current: desired.clone(),
                desired,
                pending_reboot: false,
                progress: None,
                drift: vec![],
                history: vec![],
            })
        });
    }

    fn desired(f: &Fleet) -> Vec<Option<String>> {
        f.nodes.values().map(|n| n.value.desired.clone()).collect()
    }

    #[test]
    fn renders_assigns_and_rolls_out_one_by_one() {
        let s = Settings::default();
        let mut f = fleet();
        let old = f.clone();
        let ev = reconcile(&mut f, Scope::Full, 1, &s);
        commit(&mut f, &old);
        let t1 = f.pools["worker"].value.status.target.clone().unwrap();
        assert!(t1.starts_with("rendered-worker-"));
        assert!(f.pools["master"].value.status.render_error.is_none());
        // New nodes get the target at once.
        assert_eq!(desired(&f), vec![Some(t1.clone()); 3]);
        assert!(ev.iter().any(|e| e.reason == "Rendered"));
        for n in ["w0", "w1", "w2"] {
            report(&mut f, n, NodeState::Done);
        }
        reconcile(&mut f, Scope::Rollout, 2, &s);
        assert_eq!(
            f.pools["worker"].value.status.configuration.as_deref(),
            Some(t1.as_str())
        );

        // A change: one node at a time.
        put(&mut f.mcs, "10-w", mc("10-w", "worker", "two"));
        let old = f.clone();
        reconcile(&mut f, Scope::Full, 3, &s);
        commit(&mut f, &old);
        let t2 = f.pools["worker"].value.status.target.clone().unwrap();
        assert_ne!(t1, t2);
        assert_eq!(
            desired(&f),
            vec![Some(t2.clone()), Some(t1.clone()), Some(t1.clone())]
        );
        // Nothing more moves while w0 works.
        report(&mut f, "w0", NodeState::Working);
        reconcile(&mut f, Scope::Rollout, 4, &s);
        assert_eq!(desired(&f)[1], Some(t1.clone()));
        report(&mut f, "w0", NodeState::Done);
        reconcile(&mut f, Scope::Rollout, 5, &s);
        assert_eq!(desired(&f)[1], Some(t2.clone()));
        assert_eq!(
            f.pools["worker"].value.status.configuration.as_deref(),
            Some(t1.as_str()),
            "not all nodes updated yet"
        );
    }

    #[test]
    fn overlays_give_a_node_its_own_target() {
        let s = Settings::default();
        let mut f = fleet();
        let mut ov = mc("50-w1", "worker", "mine");
        ov.metadata
            .labels
            .insert(NODE_LABEL.to_string(), "w1".to_string());
        ov.spec.config.storage.files[0].path = "/etc/y".into();
        put(&mut f.mcs, "50-w1", ov);
        reconcile(&mut f, Scope::Full, 1, &s);
        let pool_target = f.pools["worker"].value.status.target.clone().unwrap();
        assert_eq!(f.nodes["w0"].value.target.as_ref(), Some(&pool_target));
        let t = f.nodes["w1"].value.target.clone().unwrap();
        assert!(t.starts_with("rendered-worker-w1-"), "{t}");
        assert_eq!(f.rendered[&t].value.node.as_deref(), Some("w1"));
    }

    #[test]
    fn render_failures_keep_the_last_good_target() {
        let s = Settings::default();
        let mut f = fleet();
        reconcile(&mut f, Scope::Full, 1, &s);
        let t = f.pools["worker"].value.status.target.clone();
        // A node matching no pool.
        put(
            &mut f.nodes,
            "stray",
            NodeRecord {
                name: "stray".into(),
                ..Default::default()
            },
        );
        // Delete the only worker config: the worker pool has nodes, so that is an error.
        f.mcs.remove("00-w");
        let ev = reconcile(&mut f, Scope::Full, 2, &s);
        let p = &f.pools["worker"].value.status;
        assert_eq!(p.target, t);
        assert!(p
            .render_error
            .as_deref()
            .unwrap()
            .contains("selects no MachineConfigs"));
        assert!(f.nodes["stray"]
            .value
            .error
            .as_deref()
            .unwrap()
            .contains("matches no pool"));
        assert!(ev.iter().any(|e| e.reason == "RenderFailed"));
        // The master pool has no nodes and no configs: not an error.
        assert!(f.pools["master"].value.status.render_error.is_none());
    }

    #[test]
    fn garbage_collection_keeps_what_is_referenced() {
        let s = Settings {
            retention: 1,
            ..Settings::default()
        };
        let mut f = fleet();
        let old = f.clone();
        reconcile(&mut f, Scope::Full, 1, &s);
        commit(&mut f, &old);
        let first = f.pools["worker"].value.status.target.clone().unwrap();
        // w0 takes each new config but never reports reaching one: its report keeps naming the
        // first config, which must survive however many renders follow.
        for n in ["w0", "w1", "w2"] {
            report(&mut f, n, NodeState::Done);
        }
        for i in 0..4 {
            put(&mut f.mcs, "10-w", mc("10-w", "worker", &format!("v{i}")));
            let old = f.clone();
            reconcile(&mut f, Scope::Full, 10 + i, &s);
            commit(&mut f, &old);
            // Whoever got the new config is stuck Degraded in it, so it stays referenced.
            for n in ["w1", "w2"] {
                let d = f.nodes[n].value.desired.clone();
                if d != f.nodes[n].value.current().map(str::to_string) {
                    update(&mut f.nodes, n, |x| {
                        if let Some(r) = &mut x.report {
                            r.state = NodeState::Degraded;
                            r.desired = d.clone();
                        }
                    });
                }
            }
        }
        let referenced = referenced(&f);
        for name in &referenced {
            assert!(f.rendered.contains_key(name), "{name} was collected");
        }
        assert!(f.rendered.contains_key(&first));
        // Only the referenced ones and the newest one remain.
        assert!(
            f.rendered.len() <= referenced.len() + 1,
            "{:?}",
            f.rendered.keys()
        );
        assert!(f.rendered.len() < 5);
    }
}
