//! Conformance with the MCO daemon's kernel-argument diff:
//! openshift/machine-config-operator `pkg/daemon/daemon_test.go` (`TestSetRunningKargs`) at
//! commit 7ff337a4ffac8e7562692181178ede61e4b2eec5, against `newMachineConfigDiff` in
//! `pkg/daemon/update.go`. The entries that read the running kernel command line
//! (`setRunningKargsWithCmdline`) are the agent's: it compares against what the node booted.
#![allow(non_snake_case)]

use crate::mco_support as support;

use hearth_config::plan::Action;
use serde_json::json;
use support::*;

const A: &str = "systemd.unified_cgroup_hierarchy=0";
const B: &str = "systemd.legacy_systemd_cgroup_controller=1";

fn kargs_change(cur: &[&str], des: &[&str]) -> bool {
    let p = plan_of(
        &spec_of(json!({"kernelArguments": cur})),
        &spec_of(json!({"kernelArguments": des})),
    );
    p.actions
        .iter()
        .any(|a| matches!(a, Action::KernelArguments { .. }))
}

// daemon_test.go TestSetRunningKargs: the same arguments in the same order are no change.
#[test]
fn mco_daemon_test__TestSetRunningKargs_same() {
    assert!(!kargs_change(&[A, B], &[A, B]));
}

// TestSetRunningKargs: the same arguments in another order are a change (order is part of the
// command line).
#[test]
fn mco_daemon_test__TestSetRunningKargs_reordered() {
    assert!(kargs_change(&[A, B], &[B, A]));
}

// TestSetRunningKargs: a repeated argument is a change (duplicates are kept).
#[test]
fn mco_daemon_test__TestSetRunningKargs_repeated() {
    assert!(kargs_change(&[A, B], &[A, B, A]));
    assert!(!kargs_change(&[A, B, A], &[A, B, A]));
}
