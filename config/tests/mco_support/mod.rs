//! Builders shared by the `mco_*` conformance tests (declared once in `tests/main.rs`, used as
//! `support` by each). The tests replay the MCO's unit-test tables
//! (openshift/machine-config-operator at commit 7ff337a4ffac8e7562692181178ede61e4b2eec5) in
//! hearth's own words and data; each names the MCO file and test it comes from.
#![allow(dead_code)]

use hearth_config::diag::Diagnostic;
use hearth_config::manifest::{read_str, Manifests};
use hearth_config::model::{DisruptionPolicies, MachineConfig, MachineConfigSpec};
use hearth_config::plan::{plan, Plan};
use hearth_config::render::{render_pool, with_builtin_pools};
use serde_json::{json, Value};

/// A MachineConfig manifest (JSON, which the reader takes as YAML flow) with the given role
/// label and spec.
pub fn manifest(name: &str, role: &str, spec: Value) -> String {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": role}},
        "spec": spec,
    })
    .to_string()
}

/// An Ignition config of `version` with the given sections.
pub fn ign(version: &str, sections: Value) -> Value {
    let mut c = sections;
    c.as_object_mut()
        .expect("sections are an object")
        .insert("ignition".into(), json!({"version": version}));
    c
}

/// Reads manifests: what was read and every diagnostic.
pub fn read(text: &str) -> (Manifests, Vec<Diagnostic>) {
    read_str("mco-conformance.yaml", text)
}

/// The errors of reading `text`.
pub fn errors(text: &str) -> Vec<Diagnostic> {
    read(text).1.into_iter().filter(|d| d.is_error()).collect()
}

/// All error messages of reading `text`, one per line (for assertions and failure output).
pub fn error_text(text: &str) -> String {
    errors(text)
        .iter()
        .map(|d| format!("{}: {}", d.path, d.message))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Reads one MachineConfig that must be valid.
pub fn load(name: &str, role: &str, spec: Value) -> MachineConfig {
    let text = manifest(name, role, spec);
    let (m, d) = read(&text);
    let errs: Vec<_> = d.iter().filter(|d| d.is_error()).collect();
    assert!(errs.is_empty(), "{name}: {errs:?}");
    assert_eq!(m.machine_configs.len(), 1, "{name}");
    m.machine_configs.into_iter().next().unwrap().item
}

/// A spec from a valid MachineConfig spec.
pub fn spec_of(spec: Value) -> MachineConfigSpec {
    load("c", "worker", spec).spec
}

/// The rendered spec of the built-in `pool` from `configs`.
pub fn render(pool: &str, configs: &[MachineConfig]) -> Result<MachineConfigSpec, String> {
    let pools = with_builtin_pools(&[]);
    let p = pools
        .iter()
        .find(|p| p.name() == pool)
        .expect("a built-in pool");
    render_pool(p, configs)
        .map(|mc| mc.spec)
        .map_err(|e| e.to_string())
}

/// The plan between two specs with no user policies.
pub fn plan_of(current: &MachineConfigSpec, desired: &MachineConfigSpec) -> Plan {
    plan(current, desired, &DisruptionPolicies::default())
}

/// The unreconcilable field paths of a plan.
pub fn unreconcilable(p: &Plan) -> Vec<String> {
    p.unreconcilable.iter().map(|u| u.path.clone()).collect()
}
