//! Run-once actions (`spec.actions`, a hearth extension): read from manifests, refused with the
//! manifest, object, field and line, merged in config order by rendering, and part of the
//! rendered config's hash.

use hearth_config::actions::{ActionFailure, ActionWhen, DEFAULT_TIMEOUT_SECONDS};
use hearth_config::diag::Severity;
use hearth_config::manifest::read_str;
use hearth_config::model::{MachineConfig, MachineConfigPool};
use hearth_config::render::{render_pool, spec_hash, RenderError};

fn manifest(name: &str, actions_yaml: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n{actions_yaml}"
    )
}

fn read_one(name: &str, actions_yaml: &str) -> MachineConfig {
    let (m, diags) = read_str("actions.yaml", &manifest(name, actions_yaml));
    let errors: Vec<_> = diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    m.machine_configs[0].item.clone()
}

const TWO: &str = "  actions:
  - name: label-disks
    when: BeforeFiles
    script: |
      echo labelling
    timeoutSeconds: 60
    failure: Ignore
  - name: enroll
    interpreter: [/usr/bin/python3, -I]
    script: print('hi')
";

#[test]
fn actions_are_read_with_their_defaults() {
    let mc = read_one("50-actions", TWO);
    let a = &mc.spec.actions;
    assert_eq!(a.len(), 2);
    assert_eq!(a[0].name, "label-disks");
    assert_eq!(a[0].when, ActionWhen::BeforeFiles);
    assert_eq!(a[0].script, "echo labelling\n");
    assert_eq!(a[0].timeout_seconds, 60);
    assert_eq!(a[0].failure, ActionFailure::Ignore);
    assert_eq!(a[0].command(), ["/bin/sh", "-eu"]);
    // Defaults: after the files, 300 s, a failure degrades the node.
    assert_eq!(a[1].when, ActionWhen::AfterFiles);
    assert_eq!(a[1].timeout_seconds, DEFAULT_TIMEOUT_SECONDS);
    assert_eq!(a[1].failure, ActionFailure::Degrade);
    assert_eq!(a[1].command(), ["/usr/bin/python3", "-I"]);
    // The manifest form carries them (and reads back the same).
    let text = serde_json::to_string(&mc.to_manifest()).unwrap();
    let (again, diags) = read_str("again.json", &text);
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(again.machine_configs[0].item.spec.actions, mc.spec.actions);
}

#[test]
fn a_config_without_actions_has_no_actions_field_in_its_manifest() {
    let mc = read_one("00-plain", "");
    assert!(mc.to_manifest()["spec"].get("actions").is_none());
}

/// Each refusal names the file, the object, the field and its line.
#[test]
fn bad_actions_are_refused_at_their_field() {
    let cases: [(&str, &str, usize); 6] = [
        (
            "  actions:\n  - name: Bad_Name\n    script: 'true'\n",
            "spec.actions[0].name",
            12,
        ),
        (
            "  actions:\n  - name: a\n    script: 'true'\n  - name: a\n    script: 'false'\n",
            "spec.actions[1].name",
            14,
        ),
        (
            "  actions:\n  - name: a\n    script: 'true'\n    timeoutSeconds: 3601\n",
            "spec.actions[0].timeoutSeconds",
            14,
        ),
        (
            "  actions:\n  - name: a\n    script: 'true'\n    timeoutSeconds: 0\n",
            "spec.actions[0].timeoutSeconds",
            14,
        ),
        (
            "  actions:\n  - name: a\n    script: 'true'\n    when: Sometimes\n",
            "spec.actions[0].when",
            14,
        ),
        (
            "  actions:\n  - name: a\n    interpreter: [bash]\n    script: 'true'\n",
            "spec.actions[0].interpreter[0]",
            13,
        ),
    ];
    for (yaml, path, line) in cases {
        let (m, diags) = read_str("actions.yaml", &manifest("50-bad", yaml));
        assert!(m.machine_configs.is_empty(), "{yaml}: accepted");
        let d = diags
            .iter()
            .find(|d| d.severity == Severity::Error)
            .unwrap_or_else(|| panic!("{yaml}: no error"));
        assert_eq!(d.path, path, "{yaml}: {d}");
        assert_eq!(d.line, Some(line), "{yaml}: {d}");
        assert_eq!(d.object.as_deref(), Some("MachineConfig/50-bad"));
        assert_eq!(d.file, "actions.yaml");
    }
}

#[test]
fn a_script_over_64_kib_is_refused() {
    let big = format!(
        "  actions:\n  - name: big\n    script: '{}'\n",
        "x".repeat(64 * 1024 + 1)
    );
    let (m, diags) = read_str("big.yaml", &manifest("50-big", &big));
    assert!(m.machine_configs.is_empty());
    let d = diags
        .iter()
        .find(|d| d.severity == Severity::Error)
        .unwrap();
    assert_eq!(d.path, "spec.actions[0].script");
    assert!(d.message.contains("65537 bytes"), "{d}");
}

fn worker() -> MachineConfigPool {
    MachineConfigPool::builtin("worker")
}

#[test]
fn rendering_merges_actions_in_config_order() {
    let first = read_one(
        "10-first",
        "  actions:\n  - name: one\n    script: echo 1\n  - name: two\n    script: echo 2\n",
    );
    let second = read_one(
        "20-second",
        "  actions:\n  - name: three\n    script: echo 3\n",
    );
    // Given in reverse: the render orders configs by name.
    let r = render_pool(&worker(), &[second, first]).unwrap();
    let names: Vec<&str> = r.spec.actions.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["one", "two", "three"]);
}

#[test]
fn an_action_name_twice_in_a_pool_is_refused_naming_both_configs() {
    let first = read_one(
        "10-first",
        "  actions:\n  - name: same\n    script: echo 1\n",
    );
    let second = read_one(
        "20-second",
        "  actions:\n  - name: same\n    script: echo 2\n",
    );
    let e = render_pool(&worker(), &[first, second]).unwrap_err();
    assert_eq!(
        e,
        RenderError::ActionConflict {
            name: "same".into(),
            first_config: "10-first".into(),
            second_config: "20-second".into(),
        }
    );
    assert!(e.to_string().contains("rename one"), "{e}");
}

#[test]
fn too_many_actions_across_a_pool_are_refused() {
    let mk = |cfg: &str, from: usize| {
        let list: String = (from..from + 20)
            .map(|i| format!("  - name: a{i}\n    script: echo {i}\n"))
            .collect();
        read_one(cfg, &format!("  actions:\n{list}"))
    };
    let e = render_pool(&worker(), &[mk("10-a", 0), mk("20-b", 20)]).unwrap_err();
    assert!(
        matches!(&e, RenderError::Invalid(m) if m[0].contains("40 actions")),
        "{e}"
    );
}

#[test]
fn an_action_is_part_of_the_rendered_config_and_its_hash() {
    let plain = read_one("10-plain", "");
    let with = |script: &str| {
        read_one(
            "20-act",
            &format!("  actions:\n  - name: a\n    script: {script}\n"),
        )
    };
    let none = render_pool(&worker(), std::slice::from_ref(&plain)).unwrap();
    let a = render_pool(&worker(), &[plain.clone(), with("echo 1")]).unwrap();
    let a_again = render_pool(&worker(), &[plain.clone(), with("echo 1")]).unwrap();
    let b = render_pool(&worker(), &[plain, with("echo 2")]).unwrap();
    assert_ne!(none.name(), a.name());
    assert_ne!(a.name(), b.name());
    assert_eq!(a.name(), a_again.name());
    assert_eq!(spec_hash(&a.spec), spec_hash(&a_again.spec));
    // A config without actions hashes as before the field existed: no `actions` key at all.
    let v = serde_json::to_value(&none.spec).unwrap();
    assert!(v.get("actions").is_none());
}

#[test]
fn a_node_overlay_runs_its_actions_after_the_pools_and_may_not_reuse_a_name() {
    use hearth_config::model::{NodeInfo, ObjectMeta, NODE_LABEL};
    use hearth_config::render::render_node;
    use std::collections::BTreeMap;
    let node = NodeInfo {
        metadata: ObjectMeta {
            name: "w1".into(),
            labels: BTreeMap::from([("node-role.kubernetes.io/worker".into(), String::new())]),
            annotations: BTreeMap::new(),
        },
    };
    let overlay = |name: &str, action: &str| {
        let mut mc = read_one(
            name,
            &format!("  actions:\n  - name: {action}\n    script: echo node\n"),
        );
        mc.metadata.labels.clear();
        mc.metadata.labels.insert(NODE_LABEL.into(), "w1".into());
        mc
    };
    let pool_cfg = read_one(
        "10-pool",
        "  actions:\n  - name: pool-step\n    script: echo pool\n",
    );
    let r = render_node(
        &[worker()],
        &[overlay("00-node", "node-step"), pool_cfg.clone()],
        std::slice::from_ref(&node),
        "w1",
    )
    .unwrap();
    let names: Vec<&str> = r
        .config
        .spec
        .actions
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names, ["pool-step", "node-step"]);
    let e = render_node(
        &[worker()],
        &[pool_cfg, overlay("00-node", "pool-step")],
        &[node],
        "w1",
    )
    .unwrap_err();
    assert!(
        matches!(&e, RenderError::ActionConflict { first_config, second_config, .. }
            if first_config == "10-pool" && second_config == "00-node"),
        "{e}"
    );
}
