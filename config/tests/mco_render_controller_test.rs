//! Conformance with the MCO's render controller tables:
//! openshift/machine-config-operator `pkg/controller/render/render_controller_test.go` at commit
//! 7ff337a4ffac8e7562692181178ede61e4b2eec5 (`getMachineConfigsForPool`,
//! `generateRenderedMachineConfig`, `generateAndValidateRenderedMachineConfig` in
//! `render_controller.go`). The controller's queueing, OS image streams and runc checks have no
//! counterpart in hearth and are not replayed.
#![allow(non_snake_case)]

use crate::mco_support as support;

use hearth_config::model::MachineConfig;
use serde_json::json;
use support::*;

fn with_file(name: &str, role: &str, path: &str) -> MachineConfig {
    load(
        name,
        role,
        json!({"config": ign("3.5.0", json!({"storage": {"files": [
            {"path": path, "contents": {"source": "data:,x"}}]}}))}),
    )
}

// render_controller_test.go TestGetMachineConfigsForPool: the master pool takes the two master
// configs, not the worker one.
#[test]
fn mco_render_controller_test__TestGetMachineConfigsForPool_master() {
    let configs = vec![
        with_file("00-test-cluster-master", "master", "/dummy/0"),
        with_file("05-extra-master", "master", "/dummy/1"),
        with_file("00-test-cluster-worker", "worker", "/dummy/2"),
    ];
    let spec = render("master", &configs).unwrap();
    let paths: Vec<&str> = spec
        .config
        .storage
        .files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(paths, ["/dummy/0", "/dummy/1"]);
}

// TestGetMachineConfigsForPool: a worker pool without worker configs is an error.
#[test]
fn mco_render_controller_test__TestGetMachineConfigsForPool_no_configs() {
    let configs = vec![
        with_file("00-test-cluster-master", "master", "/dummy/0"),
        with_file("05-extra-master", "master", "/dummy/1"),
    ];
    let err = render("worker", &configs).unwrap_err();
    assert!(err.contains("selects no MachineConfigs"), "{err}");
}

// render_controller_test.go TestIgnValidationGenerateRenderedMachineConfig: two valid configs
// render.
#[test]
fn mco_render_controller_test__TestIgnValidationGenerateRenderedMachineConfig_valid() {
    let configs = vec![
        with_file("00-test-cluster-master", "master", "/dummy/0"),
        with_file("05-extra-master", "master", "/dummy/1"),
    ];
    assert!(render("master", &configs).is_ok());
}

// TestIgnValidationGenerateRenderedMachineConfig: a config with content and an empty version
// fails validation; hearth refuses it when reading it, so it never reaches a render.
#[test]
fn mco_render_controller_test__TestIgnValidationGenerateRenderedMachineConfig_empty_version() {
    let text = manifest(
        "05-extra-master",
        "master",
        json!({"config": {"ignition": {"version": ""}, "storage": {"files": [
            {"path": "/dummy/1", "contents": {"source": "data:,x"}}]}}}),
    );
    let e = error_text(&text);
    assert!(e.contains("spec.config.ignition.version"), "{e}");
}

// TestIgnValidationGenerateRenderedMachineConfig: a config with no Ignition content but a kernel
// argument does not fail validation.
#[test]
fn mco_render_controller_test__TestIgnValidationGenerateRenderedMachineConfig_no_ignition_content()
{
    let configs = vec![
        with_file("00-test-cluster-master", "master", "/dummy/0"),
        load(
            "05-extra-master",
            "master",
            json!({"config": ign("3.5.0", json!({})), "kernelArguments": ["test1"]}),
        ),
    ];
    let spec = render("master", &configs).unwrap();
    assert_eq!(spec.kernel_arguments, ["test1"]);
}

// render_controller_test.go TestGenerateMachineConfigValidation: a new config that turns FIPS
// on against a current rendered config without it is refused. Differs on purpose in where:
// the MCO refuses to render; hearth renders (a node installed from it gets FIPS at provisioning,
// which is when FIPS can be set) and reports the change as unreconcilable for every running
// node.
#[test]
fn mco_render_controller_test__TestGenerateMachineConfigValidation_fips() {
    let current = render(
        "master",
        &[load("00-test-cluster-master", "master", json!({}))],
    )
    .unwrap();
    let mut fips = load("00-test-cluster-master-0", "master", json!({}));
    fips.spec.fips = true;
    let desired = render(
        "master",
        &[load("00-test-cluster-master", "master", json!({})), fips],
    )
    .unwrap();
    assert!(desired.fips);
    let p = plan_of(&current, &desired);
    assert_eq!(unreconcilable(&p), ["spec.fips"]);
}
