//! The pure half of Kubernetes mode: objects to fleet, reconcile, fleet to writes, and the
//! writes fed back as the API server would hold them.

use super::observe::{read_cached, ReadCache};
use super::*;
use crate::controller::Settings;
use serde_json::{json, Value};

fn mc(name: &str, role: &str, path: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {
            "name": name,
            "uid": "u-1",
            "resourceVersion": "12",
            "creationTimestamp": "2026-11-24T10:00:00Z",
            "labels": {"machineconfiguration.openshift.io/role": role},
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [
            {"path": path, "contents": {"source": "data:,hello"}, "mode": 420}
        ]}}},
    })
}

fn pool(name: &str, max_unavailable: u32) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": name, "uid": "pool-uid", "generation": 3,
                     "creationTimestamp": "2026-11-24T09:00:00Z"},
        "spec": {
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": name}},
            "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
            "maxUnavailable": max_unavailable,
        },
    })
}

fn node(name: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": ""},
                     "annotations": annotations},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    })
}

/// One decision of a fresh controller at time 1,000.
fn step(o: &Observed) -> Writes {
    Decider::new().decide(o, 1_000, &Settings::default()).writes
}

/// The writes applied to the observed objects, as the API server would hold them after.
fn apply(o: &mut Observed, w: &Writes) {
    for v in &w.create {
        let mut v = v.clone();
        v["metadata"]["creationTimestamp"] = json!("2026-11-24T11:00:00Z");
        o.machine_configs.push(v);
    }
    o.machine_configs
        .retain(|m| !w.delete.iter().any(|d| m["metadata"]["name"] == *d));
    for (p, patch) in &w.pool_specs {
        let obj = o
            .pools
            .iter_mut()
            .find(|x| x["metadata"]["name"] == *p)
            .unwrap();
        obj["spec"]["configuration"] = patch["spec"]["configuration"].clone();
    }
    for (p, status) in &w.pool_statuses {
        let obj = o
            .pools
            .iter_mut()
            .find(|x| x["metadata"]["name"] == *p)
            .unwrap();
        obj["status"] = status.clone();
    }
    if let Some(mcns) = o.machine_config_nodes.as_mut() {
        mcns.extend(w.mcn_create.iter().cloned());
        for (n, patch) in &w.mcn_spec {
            let obj = mcns
                .iter_mut()
                .find(|x| x["metadata"]["name"] == *n)
                .unwrap();
            obj["spec"] = patch["spec"].clone();
            if !patch["metadata"].is_null() {
                obj["metadata"]["ownerReferences"] = patch["metadata"]["ownerReferences"].clone();
            }
        }
    }
    for (n, d) in &w.node_desired {
        let obj = o
            .nodes
            .iter_mut()
            .find(|x| x["metadata"]["name"] == *n)
            .unwrap();
        obj["metadata"]["annotations"][DESIRED_CONFIG] = json!(d);
    }
}

fn report(o: &mut Observed, node: &str, current: &str, state: &str) {
    let obj = o
        .nodes
        .iter_mut()
        .find(|x| x["metadata"]["name"] == node)
        .unwrap();
    obj["metadata"]["annotations"][CURRENT_CONFIG] = json!(current);
    obj["metadata"]["annotations"][STATE] = json!(state);
}

fn desired_of(o: &Observed, node: &str) -> Option<String> {
    o.nodes
        .iter()
        .find(|x| x["metadata"]["name"] == node)
        .and_then(|x| {
            x["metadata"]["annotations"][DESIRED_CONFIG]
                .as_str()
                .map(str::to_string)
        })
}

/// A worker pool (`maxUnavailable: 1`) with one MachineConfig writing `/etc/a`, and `nodes`.
fn worker_fleet(nodes: &[&str]) -> Observed {
    Observed {
        machine_configs: vec![mc("50-a", "worker", "/etc/a")],
        pools: vec![pool("worker", 1)],
        nodes: nodes.iter().map(|n| node(n, json!({}))).collect(),
        configurations: vec![],
        machine_config_nodes: None,
    }
}

/// `o` on a cluster that has MachineConfigNodes (none yet), its first node with a uid (the
/// owner a MachineConfigNode names).
fn watching_machine_config_nodes(mut o: Observed) -> Observed {
    o.machine_config_nodes = Some(vec![]);
    o.nodes[0]["metadata"]["uid"] = json!("node-uid");
    o
}

/// The first render handed out and every node `Done` in it; its name.
fn rolled_out(o: &mut Observed) -> String {
    let w = step(o);
    apply(o, &w);
    let first = desired_of(o, name_of_first(o)).unwrap();
    let names: Vec<String> = o
        .nodes
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    for n in names {
        report(o, &n, &first, "Done");
    }
    first
}

fn name_of_first(o: &Observed) -> &str {
    o.nodes[0]["metadata"]["name"].as_str().unwrap()
}

#[test]
fn a_pool_renders_into_an_owned_rendered_config_and_new_nodes_get_it() {
    let mut o = worker_fleet(&["w0", "w1"]);
    let w = step(&o);
    assert_eq!(w.create.len(), 1, "{w:#?}");
    let r = &w.create[0];
    let name = r["metadata"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("rendered-worker-"), "{name}");
    assert!(is_rendered(r));
    assert_eq!(r["metadata"]["ownerReferences"][0]["uid"], "pool-uid");
    assert_eq!(
        r["metadata"]["ownerReferences"][0]["kind"],
        "MachineConfigPool"
    );
    assert_eq!(r["spec"]["config"]["storage"]["files"][0]["path"], "/etc/a");
    // The pool's target, and both nodes (never heard from) handed it at once.
    assert_eq!(
        w.pool_specs[0].1["spec"]["configuration"]["name"],
        name.as_str()
    );
    assert_eq!(
        w.pool_specs[0].1["spec"]["configuration"]["source"][0]["name"],
        "50-a"
    );
    assert_eq!(w.node_desired.len(), 2);
    let status = &w.pool_statuses[0].1;
    assert_eq!(status["machineCount"], 2);
    assert_eq!(status["updatedMachineCount"], 0);
    assert_eq!(status["observedGeneration"], 3);
    assert!(status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Updated" && c["status"] == "False"));

    // Held by the API server, the same objects need no further writes: the render keeps its
    // name and is recognised as hearth's.
    apply(&mut o, &w);
    let again = step(&o);
    assert!(again.is_empty(), "{again:#?}");
}

#[test]
fn a_change_rolls_out_one_node_at_a_time_under_max_unavailable() {
    let mut o = worker_fleet(&["w0", "w1"]);
    let first = rolled_out(&mut o);
    let w = step(&o);
    apply(&mut o, &w);
    // All updated: the pool's configuration is the render.
    let status = &o.pools[0]["status"];
    assert_eq!(
        status["configuration"]["name"],
        first.as_str(),
        "{status:#}"
    );
    assert_eq!(status["updatedMachineCount"], 2);
    assert_eq!(status["readyMachineCount"], 2);

    // A change: one node at a time.
    o.machine_configs[0] = mc("50-a", "worker", "/etc/b");
    let w = step(&o);
    assert_eq!(w.create.len(), 1);
    assert_eq!(w.node_desired.len(), 1, "{w:#?}");
    apply(&mut o, &w);
    let second = w.create[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(desired_of(&o, "w0").as_deref(), Some(second.as_str()));
    assert_eq!(desired_of(&o, "w1").as_deref(), Some(first.as_str()));
    // Nothing more while w0 works on it.
    report(&mut o, "w0", &first, "Working");
    assert!(step(&o).node_desired.is_empty());
    // Done: w1's turn; the first render stays while w1 still runs it.
    report(&mut o, "w0", &second, "Done");
    let w = step(&o);
    assert_eq!(w.node_desired, vec![("w1".to_string(), second.clone())]);
    assert!(!w.delete.contains(&first), "{w:#?}");
    apply(&mut o, &w);
    report(&mut o, "w1", &second, "Done");
    let w = step(&o);
    apply(&mut o, &w);
    assert_eq!(
        o.pools[0]["status"]["configuration"]["name"],
        second.as_str()
    );
}

#[test]
fn a_degraded_node_halts_the_rollout_and_shows_in_the_pool() {
    let mut o = worker_fleet(&["w0", "w1"]);
    let first = rolled_out(&mut o);
    o.machine_configs[0] = mc("50-a", "worker", "/etc/b");
    let w = step(&o);
    apply(&mut o, &w);
    report(&mut o, "w0", &first, "Degraded");
    let w = step(&o);
    assert!(w.node_desired.is_empty(), "{w:#?}");
    apply(&mut o, &w);
    let status = &o.pools[0]["status"];
    assert_eq!(status["degradedMachineCount"], 1);
    let cond = |t: &str| {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == t)
            .unwrap()
            .clone()
    };
    assert_eq!(cond("NodeDegraded")["status"], "True");
    assert_eq!(cond("Degraded")["status"], "True");
    assert!(cond("Updating")["message"].as_str().unwrap().contains("w0"));
}

#[test]
fn an_invalid_machine_config_is_left_out_and_named() {
    let mut bad = mc("60-bad", "worker", "relative/path");
    bad["spec"]["kernelType"] = json!("nonsense");
    let o = Observed {
        machine_configs: vec![mc("50-a", "worker", "/etc/a"), bad],
        pools: vec![pool("worker", 1)],
        nodes: vec![node("w0", json!({}))],
        configurations: vec![],
        machine_config_nodes: None,
    };
    let r = read_cached(&o, 1_000, &mut ReadCache::default());
    assert!(r.fleet.mcs.contains_key("50-a"));
    assert!(!r.fleet.mcs.contains_key("60-bad"));
    let errors: Vec<String> = r
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.to_string())
        .collect();
    assert!(
        errors.iter().any(|e| e.contains("MachineConfig/60-bad")),
        "{errors:#?}"
    );
    assert!(r.held["worker"].contains("60-bad"), "{:?}", r.held);
}

#[test]
fn a_pool_that_selects_a_refused_machine_config_keeps_its_last_render() {
    let mut o = worker_fleet(&["w0"]);
    rolled_out(&mut o);
    let w = step(&o);
    apply(&mut o, &w);
    // A change of 50-a and a new config the reader refuses: nothing is rendered or handed
    // out (rendering without the refused config would drop what the admin meant to add).
    o.machine_configs[0] = mc("50-a", "worker", "/etc/b");
    o.machine_configs
        .push(mc("60-bad", "worker", "relative/path"));
    let w = step(&o);
    assert!(w.create.is_empty(), "{w:#?}");
    assert!(w.node_desired.is_empty(), "{w:#?}");
    assert!(w.pool_specs.is_empty(), "{w:#?}");
    apply(&mut o, &w);
    let status = &o.pools[0]["status"];
    let render = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "RenderDegraded")
        .unwrap();
    assert_eq!(render["status"], "True", "{status:#}");
    assert!(render["message"].as_str().unwrap().contains("60-bad"));
    // Fixed (deleted): the change renders and rolls out.
    o.machine_configs.pop();
    let w = step(&o);
    assert_eq!(w.create.len(), 1);
    assert_eq!(w.node_desired.len(), 1);
}

#[test]
fn renders_of_another_controller_are_neither_kept_nor_collected() {
    let mut foreign = mc("rendered-worker-0123", "worker", "/etc/x");
    foreign["metadata"]["annotations"] = json!({
        "machineconfiguration.openshift.io/generated-by-controller-version": "4.16.0"
    });
    let o = Observed {
        machine_configs: vec![mc("50-a", "worker", "/etc/a"), foreign],
        pools: vec![pool("worker", 1)],
        nodes: vec![],
        configurations: vec![],
        machine_config_nodes: None,
    };
    let w = step(&o);
    assert!(w.delete.is_empty(), "{w:#?}");
    // Nor is it rendered into the pool (it carries the role label, but is a render).
    assert_eq!(
        w.pool_specs[0].1["spec"]["configuration"]["source"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn every_node_of_a_pool_gets_a_machine_config_node_that_follows_its_desired_config() {
    let mut o = watching_machine_config_nodes(worker_fleet(&["w0"]));
    let w = step(&o);
    apply(&mut o, &w);
    let w = step(&o);
    assert_eq!(w.mcn_create.len(), 1, "{w:#?}");
    let m = &w.mcn_create[0];
    let first = desired_of(&o, "w0").unwrap();
    assert_eq!(m["metadata"]["name"], "w0");
    assert_eq!(m["metadata"]["ownerReferences"][0]["uid"], "node-uid");
    assert_eq!(m["spec"]["pool"]["name"], "worker");
    assert_eq!(m["spec"]["configVersion"]["desired"], first.as_str());
    apply(&mut o, &w);
    assert!(step(&o).is_empty());
    // A new config handed to the node: its MachineConfigNode follows.
    report(&mut o, "w0", &first, "Done");
    o.machine_configs[0] = mc("50-a", "worker", "/etc/b");
    let w = step(&o);
    apply(&mut o, &w);
    let second = desired_of(&o, "w0").unwrap();
    assert_ne!(first, second);
    let w = step(&o);
    assert_eq!(w.mcn_spec.len(), 1, "{w:#?}");
    assert_eq!(
        w.mcn_spec[0].1["spec"]["configVersion"]["desired"],
        second.as_str()
    );
}

#[test]
fn hearths_run_once_actions_survive_the_trip_through_the_api_server() {
    let mut with_actions = mc("50-a", "worker", "/etc/a");
    with_actions["spec"]["actions"] = json!([{"name": "hello", "script": "echo hi\n"}]);
    let o = Observed {
        machine_configs: vec![with_actions],
        pools: vec![pool("worker", 1)],
        nodes: vec![],
        configurations: vec![],
        machine_config_nodes: None,
    };
    let w = step(&o);
    assert_eq!(w.create.len(), 1);
    assert_eq!(
        w.create[0]["spec"]["actions"][0]["name"], "hello",
        "{:#}",
        w.create[0]
    );
}

#[test]
fn a_cached_read_reads_again_what_the_api_server_changed() {
    let mut cache = observe::ReadCache::default();
    let mut o = worker_fleet(&[]);
    let path = |r: &Read| {
        r.fleet.mcs["50-a"].value.spec.config.storage.files[0]
            .path
            .clone()
    };
    assert_eq!(path(&observe::read_cached(&o, 1, &mut cache)), "/etc/a");
    // Changed: a new resourceVersion.
    o.machine_configs[0] = mc("50-a", "worker", "/etc/b");
    o.machine_configs[0]["metadata"]["resourceVersion"] = json!("13");
    assert_eq!(path(&observe::read_cached(&o, 2, &mut cache)), "/etc/b");
    // Unchanged (the same resourceVersion): what was read is kept, not read again (the API
    // server never changes an object without a new version; this shows the cache is used).
    o.machine_configs[0] = mc("50-a", "worker", "/etc/not-read");
    o.machine_configs[0]["metadata"]["resourceVersion"] = json!("13");
    assert_eq!(path(&observe::read_cached(&o, 3, &mut cache)), "/etc/b");
    // Deleted, then created again under the old version number: read anew.
    o.machine_configs.clear();
    assert!(observe::read_cached(&o, 3, &mut cache).fleet.mcs.is_empty());
    o.machine_configs.push(mc("50-a", "worker", "/etc/c"));
    o.machine_configs[0]["metadata"]["resourceVersion"] = json!("13");
    assert_eq!(path(&observe::read_cached(&o, 4, &mut cache)), "/etc/c");
}

#[test]
fn a_machine_config_node_made_without_its_owner_gets_the_node_as_owner() {
    let mut o = watching_machine_config_nodes(worker_fleet(&["w0"]));
    let w = step(&o);
    apply(&mut o, &w);
    let desired = desired_of(&o, "w0").unwrap();
    // An agent made it first, without an owner.
    o.machine_config_nodes = Some(vec![json!({
        "metadata": {"name": "w0"},
        "spec": {"node": {"name": "w0"}, "pool": {"name": "worker"}, "configVersion": {"desired": desired}},
    })]);
    let w = step(&o);
    assert_eq!(w.mcn_spec.len(), 1, "{w:#?}");
    assert_eq!(
        w.mcn_spec[0].1["metadata"]["ownerReferences"][0]["uid"],
        "node-uid"
    );
    apply(&mut o, &w);
    assert!(step(&o).mcn_spec.is_empty());
}

#[test]
fn a_node_whose_drain_failed_is_held_until_an_admin_clears_it() {
    let mut o = worker_fleet(&["w0"]);
    rolled_out(&mut o);
    o.nodes[0]["metadata"]["annotations"]["hearth.io/drain-failed"] = json!("pod a/b: refused");
    o.machine_configs[0] = mc("50-a", "worker", "/etc/b");
    // Degraded by its failed drain, and neither handed the change nor drained again.
    let r = read_cached(&o, 1_000, &mut ReadCache::default());
    assert_eq!(
        r.fleet.nodes["w0"].value.state(),
        Some(crate::api::NodeState::Degraded)
    );
    let Decision {
        read: r,
        after,
        writes: mut w,
        ..
    } = Decider::new().decide(&o, 1_000, &Settings::default());
    let todo = super::drain::split(&o.nodes, &r.fleet, &after, &mut w.node_desired);
    assert!(todo.is_empty(), "{todo:#?}");
    assert!(w.node_desired.is_empty(), "{w:#?}");
    // Cleared by an admin: the drain starts again (the update needs a reboot).
    o.nodes[0]["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("hearth.io/drain-failed");
    let Decision {
        read: r,
        after,
        writes: mut w,
        ..
    } = Decider::new().decide(&o, 1_001, &Settings::default());
    let todo = super::drain::split(&o.nodes, &r.fleet, &after, &mut w.node_desired);
    assert_eq!(todo.len(), 1, "{w:#?}");
}

#[test]
fn a_node_being_drained_counts_under_max_unavailable_and_its_drain_goes_on() {
    let mut o = worker_fleet(&["w0", "w1"]);
    let first = rolled_out(&mut o);
    o.machine_configs[0] = mc("50-a", "worker", "/etc/b");
    let split_step = |o: &Observed| {
        let Decision {
            read: r,
            after,
            writes: mut w,
            ..
        } = Decider::new().decide(o, 1_000, &Settings::default());
        let todo = super::drain::split(&o.nodes, &r.fleet, &after, &mut w.node_desired);
        (w, todo)
    };
    // The change needs a reboot (a file the default policy reboots for): w0 is to be drained.
    let (w, todo) = split_step(&o);
    assert!(w.node_desired.is_empty(), "{w:#?}");
    assert_eq!(todo.len(), 1);
    assert_eq!(todo[0].node, "w0");
    let second = todo[0].config.clone();
    apply(&mut o, &w);
    // The drain started (as drain_run marks it); meanwhile w1 goes Working for some reason
    // (an unavailable node is handed the change at once by the rollout's rules, and is
    // drained for it too).
    o.nodes[0]["metadata"]["annotations"]["hearth.io/drain-for"] = json!(second);
    o.nodes[0]["metadata"]["annotations"]["hearth.io/drain-started"] =
        json!("2026-11-24T10:00:00Z");
    report(&mut o, "w1", &first, "Working");
    let (w, todo) = split_step(&o);
    // w0's drain goes on where it was (not abandoned, not started again).
    let w0 = todo
        .iter()
        .find(|t| t.node == "w0")
        .expect("w0's drain goes on");
    assert_eq!(w0.config, second);
    assert!(w0.started.is_some());
    assert!(w.node_desired.is_empty(), "{w:#?}");
    assert!(super::drain::finished(&o.nodes, &todo).is_empty());
    // Both Done in their old config again (w1 recovered): still only w0, under maxUnavailable 1.
    report(&mut o, "w1", &first, "Done");
    let (_, todo) = split_step(&o);
    assert_eq!(todo.len(), 1, "{todo:#?}");
    assert_eq!(todo[0].node, "w0");
}

#[test]
fn a_paused_pool_renders_but_hands_out_nothing_until_resumed() {
    let mut o = worker_fleet(&["w0"]);
    rolled_out(&mut o);
    o.pools[0]["spec"]["paused"] = json!(true);
    o.machine_configs[0] = mc("50-a", "worker", "/etc/b");
    let w = step(&o);
    // The new render and the pool's target, but no node handed it.
    assert_eq!(w.create.len(), 1, "{w:#?}");
    assert_eq!(w.pool_specs.len(), 1);
    assert!(w.node_desired.is_empty(), "{w:#?}");
    apply(&mut o, &w);
    let updating = o.pools[0]["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Updating")
        .unwrap()
        .clone();
    assert_eq!(updating["reason"], "Paused", "{updating:#}");
    o.pools[0]["spec"]["paused"] = json!(false);
    assert_eq!(step(&o).node_desired.len(), 1);
}

#[test]
fn outside_its_maintenance_window_a_pool_holds_updates_that_reboot() {
    let mut o = worker_fleet(&["w0"]);
    rolled_out(&mut o);
    o.pools[0]["metadata"]["annotations"] =
        json!({"hearth.io/maintenance-windows": "Sat 02:00-06:00 UTC"});
    o.machine_configs[0] = mc("50-a", "worker", "/etc/b");
    // Wednesday 2026-11-18 12:00 UTC: closed. The change (a file: a reboot by default) waits.
    let wednesday = 1_795_003_200;
    let settings = Settings::default();
    settings.window_clock.set_now(wednesday);
    let decide =
        |o: &Observed, settings: &Settings| Decider::new().decide(o, wednesday, settings).writes;
    let w = decide(&o, &settings);
    assert!(w.node_desired.is_empty(), "{w:#?}");
    // Saturday 03:00 UTC: open.
    let saturday = wednesday + 3 * 86_400 - 9 * 3_600;
    let open = Settings::default();
    open.window_clock.set_now(saturday);
    assert_eq!(decide(&o, &open).node_desired.len(), 1);
}

#[test]
fn a_kept_decider_decides_as_fresh_ones_and_renders_again_only_what_changed() {
    let mut o = worker_fleet(&["w0", "w1", "w2"]);
    let settings = Settings::default();
    let mut kept = Decider::new();
    // Each decision made by the kept decider and by a fresh one: the same writes, applied.
    let decide = |o: &mut Observed, kept: &mut Decider| {
        let fresh = Decider::new().decide(o, 1_000, &settings).writes;
        let w = kept.decide(o, 1_000, &settings).writes;
        assert_eq!(w, fresh);
        apply(o, &w);
    };
    decide(&mut o, &mut kept);
    let first = desired_of(&o, "w0").expect("the first render handed out");
    let renders = kept.renders();
    assert_eq!(renders, 1, "the one pool rendered once");
    // Nodes report, one after another (only Node objects change): nothing is rendered again.
    for n in ["w0", "w1", "w2"] {
        report(&mut o, n, &first, "Done");
        decide(&mut o, &mut kept);
    }
    assert_eq!(kept.renders(), renders);

    // A MachineConfig changes (the API server gives it a new resourceVersion): its pool is
    // rendered again, once, and rolled out one node at a time as a fresh decider would.
    o.machine_configs[0] = mc("50-a", "worker", "/etc/b");
    o.machine_configs[0]["metadata"]["resourceVersion"] = json!("13");
    decide(&mut o, &mut kept);
    assert_eq!(kept.renders(), renders + 1);
    let second = desired_of(&o, "w0").expect("the new render handed to w0");
    assert_ne!(second, first);
    for n in ["w0", "w1", "w2"] {
        let desired = desired_of(&o, n).expect("handed the new render in turn");
        assert_eq!(desired, second);
        report(&mut o, n, &second, "Done");
        decide(&mut o, &mut kept);
    }
    assert_eq!(kept.renders(), renders + 1);
}
