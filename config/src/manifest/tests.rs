//! Reading whole manifests: lines, objects and fields of errors, Lists and JSON, limits.

use super::read::read_str_limited;
use super::*;
use crate::ignition::SpecVersion;
use crate::node::parse_documents;

#[test]
fn seed_000_script_is_read_with_octal_mode() {
    let text = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  creationTimestamp: null
  labels:
    machineconfiguration.openshift.io/role: worker
  name: 99-kubeinit-extra-config-worker
spec:
  osImageURL: ''
  config:
    ignition:
      config:
        replace:
          verification: {}
      security:
        tls: {}
      timeouts: {}
      version: 2.2.0
    networkd: {}
    passwd: {}
    storage:
      files:
      - contents:
          source: data:text/plain;charset=utf-8;base64,aGk=
          verification: {}
        filesystem: root
        mode: 0755
        path: /usr/local/bin/script
"#;
    let (m, diags) = read_str("seed.yaml", text);
    assert!(diags.is_empty(), "{diags:?}");
    let mc = &m.machine_configs[0].item;
    assert_eq!(mc.name(), "99-kubeinit-extra-config-worker");
    assert_eq!(mc.role(), Some("worker"));
    let f = &mc.spec.config.storage.files[0];
    assert_eq!(f.mode, Some(0o755));
    assert_eq!(f.path, "/usr/local/bin/script");
    assert_eq!(mc.spec.source_version, Some(SpecVersion::V2_2));
}

#[test]
fn null_path_is_an_error_with_line_and_object() {
    let text = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: x\nspec:\n  config:\n    ignition:\n      version: 3.5.0\n    storage:\n      files:\n      - path: null\n        contents:\n          source: data:,\n";
    let (m, diags) = read_str("x.yaml", text);
    assert!(m.machine_configs.is_empty());
    let d = &diags[0];
    assert_eq!(d.path, "spec.config.storage.files[0].path");
    assert_eq!(d.line, Some(11));
    assert_eq!(d.object.as_deref(), Some("MachineConfig/x"));
    assert_eq!(
        d.to_string(),
        "x.yaml:11: error: MachineConfig/x: spec.config.storage.files[0].path: expected a string, found null"
    );
}

#[test]
fn unreadable_maintenance_windows_refuse_the_pool_with_file_line_and_field() {
    let pool = |w: &str| {
        format!("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\n  annotations:\n    hearth.io/maintenance-windows: \"{w}\"\nspec:\n  machineConfigSelector: {{}}\n  nodeSelector: {{}}\n")
    };
    let (m, diags) = read_str(
        "pools.yaml",
        &pool("Sat 02:00-06:00 UTC; Mon-Fri 23:00-01:00 +01:00"),
    );
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(m.pools.len(), 1);
    let (m, diags) = read_str("pools.yaml", &pool("Caturday 02:00-06:00"));
    assert!(m.pools.is_empty());
    assert_eq!(diags.len(), 1, "{diags:?}");
    let d = &diags[0];
    assert!(d.is_error());
    assert_eq!(d.path, crate::window::FIELD);
    assert_eq!(d.line, Some(6));
    assert!(d.message.contains("\"worker\""), "{}", d.message);
    assert!(d.message.contains("Caturday"), "{}", d.message);
}

#[test]
fn a_trial_annotation_out_of_bounds_refuses_the_pool_with_line_and_field() {
    let pool = |a: &str| {
        format!("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: edge\n  annotations:\n    hearth.io/trial: always\n    {a}\nspec:\n  machineConfigSelector: {{}}\n  nodeSelector: {{}}\n")
    };
    let (m, diags) = read_str("pools.yaml", &pool("hearth.io/trial-seconds: \"300\""));
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(m.pools.len(), 1);
    let (m, diags) = read_str("pools.yaml", &pool("hearth.io/trial-seconds: \"5\""));
    assert!(m.pools.is_empty());
    assert_eq!(diags.len(), 1, "{diags:?}");
    let d = &diags[0];
    assert_eq!(d.path, "metadata.annotations[hearth.io/trial-seconds]");
    assert_eq!(d.line, Some(7));
    assert!(
        d.message.contains("\"edge\"") && d.message.contains("10 to 3600"),
        "{}",
        d.message
    );
}

#[test]
fn lists_and_json() {
    let text = r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}}},
            {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig", "metadata": {"name": "a"}, "spec": {"kernelArguments": ["nosmt"]}}
        ]}"#;
    let (m, diags) = read_str("l.json", text);
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(m.nodes.len(), 1);
    assert_eq!(m.machine_configs[0].item.spec.kernel_arguments, ["nosmt"]);
}

#[test]
fn template_parameters_are_named() {
    let text = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: change-fips\nspec:\n  fips: ${{FIPS}}\n";
    let (_, diags) = read_str("t.yaml", text);
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0].path, "spec.fips");
    assert!(diags[0].message.contains("${{FIPS}}"), "{}", diags[0]);
}

#[test]
fn pool_selectors_are_checked() {
    let text = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: infra\nspec:\n  machineConfigSelector:\n    matchExpressions:\n    - {key: machineconfiguration.openshift.io/role, operator: In}\n  nodeSelector: {}\n";
    let (m, diags) = read_str("p.yaml", text);
    assert!(m.pools.is_empty());
    assert_eq!(
        diags[0].path,
        "spec.machineConfigSelector.matchExpressions[0]"
    );
    assert_eq!(diags[0].line, Some(8));
}

#[test]
fn oversized_files_are_refused_before_parsing() {
    let text = " ".repeat(MAX_MANIFEST_BYTES + 1);
    let (_, diags) = read_str("big.yaml", &text);
    assert_eq!(diags.len(), 1);
    assert!(diags[0].message.contains("at most 64 MiB"), "{}", diags[0]);
    // Rendered configs (read_machine_config) may be larger; the same check, another limit.
    let mc = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: a}\n";
    assert!(read_machine_config("r.yaml", mc).is_ok());
    let (_, diags) = read_str_limited(
        "r.yaml",
        mc,
        10,
        "rendered configs",
        super::FieldValidation::Warn,
    );
    assert!(
        diags[0].message.contains("rendered configs of at most"),
        "{}",
        diags[0]
    );
}

#[test]
fn node_at_walks_indexes() {
    let docs = parse_documents("a:\n  b:\n  - x\n  - c: 1\n").unwrap();
    assert_eq!(node_at(&docs[0], "a.b[1].c").unwrap().line, 4);
    assert!(node_at(&docs[0], "a.b[5]").is_none());
}

/// What `oc get -o yaml` prints, with two typos: `storage.file` and a pool's `maxUnavailble`.
const TYPOS: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-x
  labels:
    machineconfiguration.openshift.io/role: worker
  creationTimestamp: "2024-01-01T00:00:00Z"
  generation: 1
  resourceVersion: "12345"
  uid: 5b1b5e0c-1111-2222-3333-444455556666
  managedFields:
  - manager: kubectl
    operation: Update
  deletionTimestamp: "2024-01-02T00:00:00Z"
  deletionGracePeriodSeconds: 0
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      file:
      - path: /etc/x
status: {}
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: edge
spec:
  maxUnavailble: 2
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: worker
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/edge: ""
  pinnedImageSets: []
status:
  machineCount: 3
"#;

#[test]
fn an_unknown_field_is_an_error_by_default_naming_the_one_it_misspells() {
    let (_, diags) = read_str_with("t.yaml", TYPOS, FieldValidation::Strict);
    let errors: Vec<_> = diags.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 2, "{diags:?}");
    let file = errors
        .iter()
        .find(|d| d.path == "spec.config.storage.file")
        .expect("storage.file refused");
    assert!(file.message.contains("did you mean `files`?"), "{file:?}");
    assert_eq!(file.object.as_deref(), Some("MachineConfig/50-x"));
    let pool = errors
        .iter()
        .find(|d| d.path == "spec.maxUnavailble")
        .expect("maxUnavailble refused");
    assert!(
        pool.message.contains("did you mean `maxUnavailable`?"),
        "{pool:?}"
    );
    assert!(pool.message.contains("--validate=warn"), "{pool:?}");
    // What `oc get -o yaml` adds (status, managedFields, uid, ...) is no error.
    assert!(
        !diags
            .iter()
            .any(|d| d.path.starts_with("status") || d.path.starts_with("metadata")),
        "{diags:?}"
    );
}

#[test]
fn an_unknown_field_is_a_warning_or_nothing_when_asked() {
    let (m, diags) = read_str_with("t.yaml", TYPOS, FieldValidation::Warn);
    assert!(!diags.iter().any(|d| d.is_error()), "{diags:?}");
    assert_eq!(diags.len(), 2, "{diags:?}");
    assert!(
        diags.iter().all(|d| d.message.contains("did you mean")),
        "{diags:?}"
    );
    assert_eq!((m.machine_configs.len(), m.pools.len()), (1, 1));
    let (_, diags) = read_str_with("t.yaml", TYPOS, FieldValidation::Ignore);
    assert!(diags.is_empty(), "{diags:?}");
    // What is read back from a store or a Kubernetes API server warns, as before.
    let (_, diags) = read_str("t.yaml", TYPOS);
    assert!(!diags.iter().any(|d| d.is_error()), "{diags:?}");
    assert_eq!(
        ["strict", "Warn", "IGNORE", "true", "false"].map(|s| s.parse::<FieldValidation>()),
        [
            Ok(FieldValidation::Strict),
            Ok(FieldValidation::Warn),
            Ok(FieldValidation::Ignore),
            Ok(FieldValidation::Strict),
            Ok(FieldValidation::Ignore),
        ]
    );
    assert!("lenient".parse::<FieldValidation>().is_err());
}

#[test]
fn an_unknown_key_at_a_documents_top_is_an_unknown_field_too() {
    let text = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: x\nspce:\n  config:\n    ignition:\n      version: 3.2.0\n";
    let (_, diags) = read_str_with("t.yaml", text, FieldValidation::Strict);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert!(diags[0].is_error() && diags[0].path == "spce", "{diags:?}");
    assert!(
        diags[0].message.contains("did you mean `spec`?"),
        "{diags:?}"
    );
    // A List's items are documents of their own; its own keys are a List's.
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n- {}\n",
        text.replace('\n', "\n  ").trim_end()
    );
    let (_, diags) = read_str_with("l.yaml", &list, FieldValidation::Strict);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0].path, "items[0].spce", "{diags:?}");
}
