//! The controller's rules, on fleets in memory.

use super::*;
use crate::api::{AgentStatus, NodeState};
use crate::fleet::{put, update};
use crate::store::records::{McRecord, NodeRecord, PoolRecord};
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

/// A report of `state` in `current`, on the way to `desired` (the controller's tests').
pub(super) fn status(
    state: NodeState,
    current: Option<String>,
    desired: Option<String>,
) -> AgentStatus {
    AgentStatus {
        api_version: None,
        kind: None,
        state,
        reason: None,
        last_transition: None,
        current,
        desired,
        pending_reboot: false,
        progress: None,
        drift: vec![],
        history: vec![],
        requests_done: 0,
        request_results: vec![],
        actions: vec![],
        os: None,
    }
}

fn report(f: &mut Fleet, node: &str, state: NodeState) {
    let desired = f.nodes[node].value.desired.clone();
    update(&mut f.nodes, node, |n| {
        n.report = Some(status(state, desired.clone(), desired).into())
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
                    x.report = x.report.as_ref().map(|r| {
                        r.edited(|r| {
                            r.state = NodeState::Degraded;
                            r.desired = d.clone();
                        })
                    });
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
        f.rendered.keys().collect::<Vec<_>>()
    );
    assert!(f.rendered.len() < 5);
}

/// The reconcile with the pool index kept from commit to commit (as hearth-server keeps it,
/// set aside around each commit's stamp) gives the fleet and the events a fresh index gives,
/// through renders, enrollments, reports, reboots without a slot, exclusions, silent nodes and
/// a maintenance window that closes and opens; debug builds also compare every pool's decision
/// with a walk of the pool inside the reconcile.
#[test]
fn a_kept_pool_index_reconciles_as_a_fresh_one() {
    let s = Settings::default();
    // Tuesday 2026-11-24 12:00 UTC: the window below is closed.
    s.window_clock.set_now(1_795_521_600);
    let mut f = fleet();
    let mut index = PoolIndex::default();
    let mut plans = RebootPlans::default();
    let states = [
        NodeState::Done,
        NodeState::Working,
        NodeState::Rebooting,
        NodeState::Degraded,
    ];
    let (mut waited, mut handed) = (0, 0);
    let mut seed = 7u64;
    let mut pick = |n: usize| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((seed >> 33) as usize) % n
    };
    for round in 1..=60u64 {
        // Changes an admin or the agents make.
        match pick(6) {
            0 => put(
                &mut f.mcs,
                "10-w",
                mc("10-w", "worker", &format!("v{round}")),
            ),
            1 => {
                let name = format!("w{}", 3 + pick(20));
                put(&mut f.nodes, &name, worker(&name));
            }
            2 => {
                update(&mut f.pools, "worker", |p| {
                    let closed = p
                        .metadata
                        .annotations
                        .remove(hearth_config::window::ANNOTATION);
                    if closed.is_none() {
                        p.metadata.annotations.insert(
                            hearth_config::window::ANNOTATION.into(),
                            "Mon 00:00-00:01 UTC".into(),
                        );
                    }
                    p.spec.max_unavailable = hearth_config::model::MaxUnavailable::Count(2);
                });
            }
            _ => {}
        }
        let names: Vec<String> = f.nodes.keys().cloned().collect();
        for _ in 0..4 {
            let name = names[pick(names.len())].clone();
            let state = states[pick(states.len())];
            let desired = f.nodes[&name].value.desired.clone();
            let current = if pick(2) == 0 { desired.clone() } else { None };
            let excluded = pick(8) == 0;
            update(&mut f.nodes, &name, |n| {
                n.report = Some(status(state, current, desired).into());
                n.reboot_slot = (pick(3) == 0).then_some(round);
                n.excluded = excluded.then(|| crate::store::records::Hold {
                    by: "test".into(),
                    at: round,
                });
            });
        }
        let silent: HashSet<String> = names.iter().filter(|_| pick(6) == 0).cloned().collect();
        let scope = if pick(3) == 0 {
            Scope::Full
        } else {
            Scope::Rollout
        };
        let old = f.clone();
        let mut fresh = f.clone();
        let fresh_events = reconcile_with(&mut fresh, scope, round, &s, &silent);
        let events = reconcile_memo(
            &mut f,
            scope,
            round,
            &s,
            &silent,
            Kept {
                memo: &mut RenderMemo::computing(),
                plans: &mut plans,
                index: &mut index,
            },
        );
        let describe = |f: &Fleet| -> Vec<String> {
            f.nodes
                .values()
                .map(|n| format!("{:?}", (&n.value.desired, &n.value.waiting)))
                .chain(f.pools.values().map(|p| format!("{:?}", p.value.status)))
                .collect()
        };
        assert_eq!(describe(&f), describe(&fresh), "round {round}");
        let reasons = |e: &[EventRecord]| -> Vec<String> {
            e.iter()
                .map(|e| format!("{} {}", e.object, e.message))
                .collect()
        };
        assert_eq!(reasons(&events), reasons(&fresh_events), "round {round}");
        waited += f
            .nodes
            .values()
            .filter(|n| n.value.waiting.is_some())
            .count();
        handed += events
            .iter()
            .filter(|e| e.reason == "DesiredChanged")
            .count();
        // The commit, as hearth-server makes it: the index set aside while the stamp changes
        // revisions.
        let ops = f.diff(&old).unwrap();
        let counted = index.set_aside(&f.nodes);
        let rev = f.revision + 1;
        f.stamp(&ops, rev);
        if let Some(counted) = counted {
            index.restamped(counted, &f.nodes);
        }
    }
    assert!(
        waited > 0 && handed > 20,
        "waited {waited}, handed out {handed}"
    );
}
