//! `hearth describe node` shows the run-once actions a node reported (against a real
//! hearth-server): config, when, outcome, exit status, duration, and the end of a failed run's
//! output, escaped (a node is not trusted).

use crate::common;

use common::setup;
use serde_json::json;

#[test]
fn describe_node_shows_action_runs_escaped() {
    let env = setup();
    env.login();
    let file = env.dir.path().join("mc.yaml");
    std::fs::write(&file, "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 10-a\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n  actions:\n  - name: enroll-bmc\n    script: /usr/local/bin/enroll-bmc\n").unwrap();
    env.ok(&["apply", "-f", file.to_str().unwrap()]);
    let cred = env.enroll("w0");
    let config = env.desired(&cred);
    let run = |name: &str, outcome: &str, exit: i32, tail: &str| {
        json!({"name": name, "config": config, "scriptDigest": "ab12", "when": "AfterFiles",
               "failure": "Ignore", "startedAt": "2026-11-24T16:00:00Z", "outcome": outcome,
               "exitStatus": exit, "durationMs": 2250, "outputTail": tail})
    };
    env.report(
        &cred,
        json!({"state": "Done", "current": config, "desired": config, "actions": [
            run("enroll-bmc", "Succeeded", 0, "enrolled\n"),
            run("label-disks", "Failed", 3, "first\n\u{1b}]0;owned\u{7}no disk\n"),
        ]}),
    );
    let out = env.ok(&["describe", "node", "w0"]);
    assert!(out.contains("Actions:"), "{out}");
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    let row = |name: &str| -> Vec<String> {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row {name} in {out}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        row("label-disks"),
        [
            "label-disks",
            config.as_str(),
            "AfterFiles",
            "2026-11-24T16:00:00Z",
            "Failed",
            "3",
            "2.250s",
            "Ignore"
        ]
    );
    assert_eq!(row("enroll-bmc")[4], "Succeeded");
    // The failed run's output, escaped; the successful one's is not repeated.
    assert!(
        out.contains(&format!(
            "Output of label-disks ({config}, end):\n  | first\n  | \\x1b]0;owned\\x07no disk\n"
        )),
        "{out}"
    );
    assert!(!out.contains("  | enrolled"), "{out}");
}
