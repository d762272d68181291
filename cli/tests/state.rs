//! A node's state is named the same by `get nodes`, `describe node` and `rollout status`
//! (issue 13): the real `hearth` binary against a real hearth-server, with nodes in each
//! situation a test can produce through the API (never enrolled, enrolled without a report,
//! working, rebooting after its last step, done).

use crate::common;

use common::{columns, setup, Env};
use serde_json::json;

const MC: &str = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 10-a\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n    storage:\n      files:\n      - path: /etc/a\n        contents:\n          source: data:,one\n";

const NODE: &str = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n-manifest\n  labels:\n    node-role.kubernetes.io/worker: \"\"\n";

/// The value of `describe`'s field `name` (`State:          Done` gives `Done`).
fn field(describe: &str, name: &str) -> String {
    let prefix = format!("{name}:");
    describe
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no field {name} in\n{describe}"))
        .trim()
        .to_string()
}

/// (state, ready) of `node` in `get nodes`, `describe node` and `rollout status`.
fn shown(env: &Env, node: &str) -> [(String, String); 2] {
    let get = columns(&env.ok(&["get", "nodes"]), node);
    let describe = env.ok(&["describe", "node", node]);
    let rollout = columns(&env.ok(&["rollout", "status", "worker"]), node);
    assert_eq!(
        get[2], rollout[1],
        "get nodes and rollout status disagree on {node}"
    );
    [
        (get[2].clone(), get[3].clone()),
        (field(&describe, "State"), field(&describe, "Ready")),
    ]
}

#[test]
fn get_describe_and_rollout_status_name_a_node_state_alike() {
    let env = setup();
    env.login();
    let dir = env.dir.path();
    std::fs::write(dir.join("mc.yaml"), MC).unwrap();
    std::fs::write(dir.join("node.yaml"), NODE).unwrap();
    env.ok(&["apply", "-f", dir.join("mc.yaml").to_str().unwrap()]);
    env.ok(&["apply", "-f", dir.join("node.yaml").to_str().unwrap()]);

    env.enroll("n-enrolled");
    let working = env.enroll("n-working");
    let rebooting = env.enroll("n-rebooting");
    let done = env.enroll("n-done");
    let d = env.desired(&done);
    env.report(&done, json!({"state": "Done", "current": d, "desired": d}));
    let d = env.desired(&working);
    env.report(
        &working,
        json!({"state": "Working", "current": null, "desired": d,
               "progress": {"phase": "applying", "step": 2, "total": 7}}),
    );
    // The agent's journal while it reboots: every step ran, `step` is past the last one.
    let d = env.desired(&rebooting);
    env.report(
        &rebooting,
        json!({"state": "Rebooting", "current": null, "desired": d, "pendingReboot": true,
               "progress": {"phase": "rebooting", "step": 7, "total": 7}}),
    );

    for (node, state, ready) in [
        ("n-manifest", "NotEnrolled", "False"),
        ("n-enrolled", "Enrolled", "False"),
        ("n-working", "Working", "False"),
        ("n-rebooting", "Rebooting", "False"),
        ("n-done", "Done", "True"),
    ] {
        let expected = (state.to_string(), ready.to_string());
        assert_eq!(
            shown(&env, node),
            [expected.clone(), expected],
            "{node}: (state, ready) in get nodes, describe"
        );
    }

    // Progress is written one way, and never past its total.
    let describe = env.ok(&["describe", "node", "n-rebooting"]);
    assert_eq!(
        field(&describe, "Progress"),
        "rebooting, 7 of 7 steps done",
        "{describe}"
    );
    let describe = env.ok(&["describe", "node", "n-working"]);
    assert_eq!(
        field(&describe, "Progress"),
        "applying, step 3 of 7",
        "{describe}"
    );
    let rollout = env.ok(&["rollout", "status", "worker"]);
    assert!(
        rollout.contains("rebooting, 7 of 7 steps done")
            && rollout.contains("applying, step 3 of 7")
            && !rollout.contains("step 8 of 7"),
        "{rollout}"
    );
    let describe = env.ok(&["describe", "node", "n-manifest"]);
    assert!(
        field(&describe, "Reason").contains("never enrolled"),
        "{describe}"
    );

    // The pool counts a node ready exactly when the node shows Ready True.
    let nodes = env.ok(&["get", "nodes"]);
    let ready_rows = nodes
        .lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(3) == Some("True"))
        .count();
    let mcp = env.ok(&["get", "mcp"]);
    assert_eq!(
        columns(&mcp, "worker")[6],
        ready_rows.to_string(),
        "READYMACHINECOUNT\n{mcp}\n{nodes}"
    );
    assert_eq!(ready_rows, 1, "{nodes}");
}
