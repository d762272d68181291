//! MCO conformance entries for special file modes and kernel-argument entries (from the MCO's
//! `helpers_test.go` and `update_test.go`): special mode bits refused, as the MCO refuses them;
//! a kernel-argument entry kept as written in the rendered config and split like the kernel
//! command line only when planned.
//! Sources: openshift/machine-config-operator at commit 7ff337a4ffac8e7562692181178ede61e4b2eec5.
#![allow(non_snake_case)]

use crate::mco_support as support;

use hearth_config::plan::{split_kernel_arguments, Action};
use serde_json::{json, Value};
use support::*;

fn file_with_mode(version: &str, mode: i64) -> Value {
    let mut f = json!({"path": "/etc/testfileconfig", "mode": mode,
        "contents": {"source": "data:,hearth"}});
    if version.starts_with('2') {
        f["filesystem"] = json!("root");
    }
    json!({"config": ign(version, json!({"storage": {"files": [f]}}))})
}

// pkg/controller/common/helpers_test.go TestValidateIgnition: "Test that file modes do not have
// special bits (sticky, setuid, setgid) set" (Ignition 3.x; helpers.go validateIgn3FileModes,
// bugzilla 2038240). hearth refuses them too (issue 15, item 6).
#[test]
fn mco_helpers_test__TestValidateIgnition_special_mode_bits_3x() {
    for mode in [0o1777, 0o4755, 0o2755] {
        let e = error_text(&manifest("mode", "worker", file_with_mode("3.5.0", mode)));
        assert!(
            e.contains("spec.config.storage.files[0].mode"),
            "{mode:o}: {e}"
        );
    }
    // Permission bits alone stay valid.
    assert_eq!(
        error_text(&manifest("mode", "worker", file_with_mode("3.5.0", 0o777))),
        ""
    );
}

// TestValidateIgnition: the same for an Ignition 2.x config (validateIgn2FileModes).
#[test]
fn mco_helpers_test__TestValidateIgnition_special_mode_bits_2x() {
    let e = error_text(&manifest("mode", "worker", file_with_mode("2.2.0", 0o1777)));
    assert!(e.contains("spec.config.storage.files[0].mode"), "{e}");
}

// pkg/daemon/update_test.go TestKernelAguments case 4: `bar="hello world"` is one argument (the
// MCO's parseKernelArguments splits on white space outside double quotes).
#[test]
fn mco_update_test__TestKernelAguments_case4_quoted_value() {
    let cur = spec_of(json!({"kernelArguments": [" baz=test bar=\"hello world\""]}));
    let des = spec_of(json!({"kernelArguments": [" baz=test bar=\"hello world\"", "foo"]}));
    assert_eq!(
        split_kernel_arguments(&des.kernel_arguments),
        ["baz=test", "bar=\"hello world\"", "foo"]
    );
    let p = plan_of(&cur, &des);
    let ops: Vec<_> = p
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::KernelArguments { delete, append } => Some((delete.clone(), append.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(ops, [(vec![], vec!["foo".to_string()])], "{p}");
}

// pkg/controller/common/helpers_test.go TestMergeMachineConfigs: the merged kernelArguments are
// the configs' entries concatenated as written (MergeMachineConfigs appends
// cfg.Spec.KernelArguments); an entry "a=1 b=2" stays one entry in the rendered config, and is
// two arguments on the node.
#[test]
fn mco_helpers_test__TestMergeMachineConfigs_kernel_argument_entry_kept_as_written() {
    let mc = load(
        "kargs",
        "worker",
        json!({"kernelArguments": ["a=1 b=2", "nosmt"]}),
    );
    assert_eq!(mc.spec.kernel_arguments, ["a=1 b=2", "nosmt"]);
    let rendered = render("worker", &[mc]).unwrap();
    assert_eq!(rendered.kernel_arguments, ["a=1 b=2", "nosmt"]);
    let p = plan_of(&Default::default(), &rendered);
    assert!(
        p.actions
            .iter()
            .any(|a| matches!(a, Action::KernelArguments { append, .. }
            if append == &["a=1", "b=2", "nosmt"])),
        "{p}"
    );
}
