//! Conformance with the MCO's reconcilability table:
//! openshift/machine-config-operator `pkg/controller/common/reconcile_test.go`
//! (`TestIsRenderedConfigReconcilable`, `TestReconcilableSSH`) at commit
//! 7ff337a4ffac8e7562692181178ede61e4b2eec5, against `IsRenderedConfigReconcilable` in
//! `pkg/controller/common/reconcile.go`. Each test is one entry of the table, named after it;
//! "reconcilable" there is `Plan::is_reconcilable()` here. Entries where hearth differs on
//! purpose test hearth's documented behaviour (docs/config-model.md, "Differences from the MCO").
#![allow(non_snake_case)]

use crate::mco_support as support;

use serde_json::{json, Value};
use support::*;

fn empty() -> Value {
    json!({"config": ign("3.5.0", json!({}))})
}

fn with(sections: Value) -> Value {
    json!({"config": ign("3.5.0", sections)})
}

fn disks() -> Value {
    json!({"storage": {"disks": [{"device": "/dev/one"}]}})
}

fn filesystems() -> Value {
    json!({"storage": {"filesystems": [{"device": "/dev/sda1", "format": "ext4", "path": "/foo/bar"}]}})
}

fn raid() -> Value {
    json!({"storage": {"raid": [{"name": "data", "level": "stripe", "devices": ["/dev/vda", "/dev/vdb"]}]}})
}

fn machine_configuration(overrides: Value) -> String {
    json!({
        "apiVersion": "operator.openshift.io/v1",
        "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"},
        "spec": {"irreconcilableValidationOverrides": overrides},
    })
    .to_string()
}

// reconcile_test.go TestIsRenderedConfigReconcilable: "Set improper version" (4.0.0) is not
// reconcilable: the MCO cannot parse it. hearth refuses it when reading the manifest.
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_improper_ignition_version() {
    let text = manifest("v4", "worker", json!({"config": ign("4.0.0", json!({}))}));
    let e = error_text(&text);
    assert!(e.contains("spec.config.ignition.version"), "{e}");
    assert!(e.contains("\"4.0.0\"") && e.contains("3.5.0"), "{e}");
}

// TestIsRenderedConfigReconcilable: "reset to proper Ignition version" is reconcilable.
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_proper_ignition_version() {
    let p = plan_of(&spec_of(empty()), &spec_of(empty()));
    assert!(p.is_reconcilable() && p.is_empty(), "{p}");
}

// TestIsRenderedConfigReconcilable: "Verify Disk changes react as expected" (a disk only in the
// old config) is not reconcilable.
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_disk_change() {
    let p = plan_of(&spec_of(with(disks())), &spec_of(empty()));
    assert_eq!(unreconcilable(&p), ["spec.config.storage.disks[0]"]);
}

/// The storage override entries: the MCO accepts the change with the override; hearth differs
/// on purpose and refuses the override itself (item 3 of issue 15): with it the MCO leaves the
/// node's disks as they were while the node reports the new config, and hearth never reports a
/// node in a config it is not in. The change stays unreconcilable.
fn override_refused(kind: &str, current: Value, path: &str) {
    let text = machine_configuration(json!({"storage": [kind]}));
    let e = error_text(&text);
    assert!(
        e.contains("spec.irreconcilableValidationOverrides")
            && e.contains("hearth does not honour"),
        "{kind}: {e}"
    );
    let p = plan_of(&spec_of(with(current)), &spec_of(empty()));
    assert_eq!(unreconcilable(&p), [path], "{kind}");
}

// TestIsRenderedConfigReconcilable: "Verify Disk changes are allowed if an override is given".
// Differs on purpose (see override_refused).
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_disk_change_with_override() {
    override_refused("Disks", disks(), "spec.config.storage.disks[0]");
}

// TestIsRenderedConfigReconcilable: "Match storage disks" is reconcilable.
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_same_disks() {
    let p = plan_of(&spec_of(with(disks())), &spec_of(with(disks())));
    assert!(p.is_reconcilable(), "{p}");
}

// TestIsRenderedConfigReconcilable: "Verify Filesystems changes react as expected".
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_filesystem_change() {
    let p = plan_of(&spec_of(with(filesystems())), &spec_of(empty()));
    assert_eq!(unreconcilable(&p), ["spec.config.storage.filesystems[0]"]);
}

// TestIsRenderedConfigReconcilable: "Verify Filesystems changes are allowed if an override is
// given". Differs on purpose (see override_refused).
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_filesystem_change_with_override() {
    override_refused(
        "FileSystems",
        filesystems(),
        "spec.config.storage.filesystems[0]",
    );
}

// TestIsRenderedConfigReconcilable: "Match Storage filesystems".
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_same_filesystems() {
    let p = plan_of(&spec_of(with(filesystems())), &spec_of(with(filesystems())));
    assert!(p.is_reconcilable(), "{p}");
}

// TestIsRenderedConfigReconcilable: "Verify Raid changes react as expected".
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_raid_change() {
    let p = plan_of(&spec_of(with(raid())), &spec_of(empty()));
    assert_eq!(unreconcilable(&p), ["spec.config.storage.raid[0]"]);
}

// TestIsRenderedConfigReconcilable: "Verify Raid changes are allowed if an override is given".
// Differs on purpose (see override_refused).
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_raid_change_with_override() {
    override_refused("Raid", raid(), "spec.config.storage.raid[0]");
}

// TestIsRenderedConfigReconcilable: "Match storage raid".
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_same_raid() {
    let p = plan_of(&spec_of(with(raid())), &spec_of(with(raid())));
    assert!(p.is_reconcilable(), "{p}");
}

// An override that asks for nothing is not refused (the MCO's own objects carry an empty one).
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_empty_override_is_accepted() {
    for empty in [json!(null), json!({}), json!({"storage": []})] {
        let e = error_text(&machine_configuration(empty.clone()));
        assert!(e.is_empty(), "{empty}: {e}");
    }
}

// TestIsRenderedConfigReconcilable: "Verify Passwd Groups changes unsupported": unchanged
// groups are reconcilable, an added group is not.
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_passwd_groups() {
    let p = plan_of(&spec_of(empty()), &spec_of(empty()));
    assert!(p.is_reconcilable());
    let group = with(json!({"passwd": {"groups": [{"name": "testGroup"}]}}));
    let p = plan_of(&spec_of(empty()), &spec_of(group));
    assert_eq!(unreconcilable(&p), ["spec.config.passwd.groups[0]"]);
}

// TestIsRenderedConfigReconcilable: "Verify Ignition kernelArguments changes unsupported".
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_ignition_kernel_arguments() {
    let kargs = with(json!({"kernelArguments": {
        "shouldExist": ["foo=bar"], "shouldNotExist": ["baz=foo"]}}));
    let p = plan_of(&spec_of(empty()), &spec_of(kargs));
    assert!(!p.is_reconcilable(), "{p}");
    let paths = unreconcilable(&p);
    assert!(
        paths
            .iter()
            .all(|p| p.starts_with("spec.config.kernelArguments")),
        "{paths:?}"
    );
}

// TestIsRenderedConfigReconcilable: "Verify Tang changes are supported (even though we don't do
// anything with them yet)": removing a LUKS volume bound to Tang is reconcilable in the MCO.
// Differs on purpose: hearth cannot create, change or remove a LUKS volume on a running node, so
// it reports the change instead of marking the node updated while its disks stay as they were.
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_luks_clevis_tang() {
    let luks = with(json!({"storage": {"luks": [{
        "name": "luks-tang",
        "device": "/dev/sdb",
        "clevis": {"tang": [{
            "url": "https://tang.example.com",
            "thumbprint": "REPLACE-THIS-WITH-YOUR-TANG-THUMBPRINT",
            "advertisement": "{\"payload\": \"...\", \"protected\": \"...\", \"signature\": \"...\"}"
        }]}
    }]}}));
    let p = plan_of(&spec_of(luks), &spec_of(empty()));
    assert_eq!(unreconcilable(&p), ["spec.config.storage.luks[0]"]);
    assert!(p.unreconcilable[0].reason.contains("re-provision"), "{p}");
}

// TestIsRenderedConfigReconcilable: "FIPS changes are not reconcilable".
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_fips() {
    let mut fips = empty();
    fips["fips"] = json!(true);
    let p = plan_of(&spec_of(empty()), &spec_of(fips));
    assert_eq!(unreconcilable(&p), ["spec.fips"]);
}

// TestIsRenderedConfigReconcilable: "Cannot use MachineConfigs to create the forcefile" (the
// MCO's /run/machine-config-daemon-force; hearth's is /run/hearth-force). hearth refuses such a
// config when reading it, before any node sees it (issue 15, item 4): the force file makes the
// agent apply again, so a config writing it would loop.
#[test]
fn mco_reconcile_test__TestIsRenderedConfigReconcilable_forcefile() {
    let force = with(json!({"storage": {"files": [
        {"path": "/run/hearth-force", "mode": 0o644, "contents": {"source": "data:,"}}]}}));
    let e = error_text(&manifest("force", "worker", force));
    assert!(
        e.contains("spec.config.storage.files[0].path") && e.contains("/run/hearth-force"),
        "{e}"
    );
    assert!(e.contains("force file"), "{e}");
    // A link or a directory at the path, or a file under it, is refused too.
    for sections in [
        json!({"storage": {"links": [{"path": "/run/hearth-force", "target": "/dev/null"}]}}),
        json!({"storage": {"directories": [{"path": "/run/hearth-force"}]}}),
        json!({"storage": {"files": [{"path": "/run/hearth-force/x", "contents": {"source": "data:,"}}]}}),
    ] {
        let e = error_text(&manifest("force", "worker", with(sections.clone())));
        assert!(e.contains("/run/hearth-force"), "{sections}: {e}");
    }
    // A neighbour is fine.
    let fine = with(json!({"storage": {"files": [
        {"path": "/run/hearth-forced", "contents": {"source": "data:,"}}]}}));
    assert_eq!(error_text(&manifest("fine", "worker", fine)), "");
}

fn core(keys: &[&str]) -> Value {
    json!({"name": "core", "sshAuthorizedKeys": keys})
}

fn users(list: Vec<Value>) -> Value {
    with(json!({"passwd": {"users": list}}))
}

// reconcile_test.go TestReconcilableSSH: "Check that updating SSH Key of user core supported".
#[test]
fn mco_reconcile_test__TestReconcilableSSH_core_keys_added() {
    let p = plan_of(
        &spec_of(empty()),
        &spec_of(users(vec![core(&["5678", "abc"])])),
    );
    assert!(p.is_reconcilable(), "{p}");
}

// TestReconcilableSSH: "Check that updating User with User that is not core is not supported".
#[test]
fn mco_reconcile_test__TestReconcilableSSH_user_not_core() {
    let other = json!({"name": "another user", "sshAuthorizedKeys": ["5678"]});
    let p = plan_of(
        &spec_of(users(vec![core(&["1234"])])),
        &spec_of(users(vec![other])),
    );
    assert!(!p.is_reconcilable(), "{p}");
    assert!(
        unreconcilable(&p).contains(&"spec.config.passwd.users[0]".to_string()),
        "{p}"
    );
}

// TestReconcilableSSH: "check that we cannot make updates if any other Passwd.User field is
// changed" (homeDir).
#[test]
fn mco_reconcile_test__TestReconcilableSSH_core_other_field() {
    let mut c = core(&["5678"]);
    c["homeDir"] = json!("somedir");
    let p = plan_of(
        &spec_of(users(vec![core(&["1234"])])),
        &spec_of(users(vec![c])),
    );
    assert_eq!(unreconcilable(&p), ["spec.config.passwd.users[0].homeDir"]);
}

// TestReconcilableSSH: "check that we cannot add a user or have len(Passwd.Users)> 1".
#[test]
fn mco_reconcile_test__TestReconcilableSSH_second_user() {
    let some = json!({"name": "some user", "sshAuthorizedKeys": ["5678"]});
    let p = plan_of(
        &spec_of(users(vec![core(&["1234"])])),
        &spec_of(users(vec![core(&["5678"]), some])),
    );
    assert_eq!(unreconcilable(&p), ["spec.config.passwd.users[1]"]);
}

// TestReconcilableSSH: "check that user is not attempting to remove the only sshkey from core
// user" is not reconcilable (issue 15, item 5: hearth follows the MCO).
#[test]
fn mco_reconcile_test__TestReconcilableSSH_remove_only_core_key() {
    let p = plan_of(
        &spec_of(users(vec![core(&["1234"])])),
        &spec_of(users(vec![core(&[])])),
    );
    assert_eq!(
        unreconcilable(&p),
        ["spec.config.passwd.users[0].sshAuthorizedKeys"]
    );
    let reason = &p.unreconcilable[0].reason;
    assert!(
        reason.contains("no SSH key") && reason.contains("passwordHash"),
        "{reason}"
    );
    // With a password hash there is still a way in: reconcilable.
    let mut with_password = core(&[]);
    with_password["passwordHash"] = json!("$6$salt$hash");
    let p = plan_of(
        &spec_of(users(vec![core(&["1234"])])),
        &spec_of(users(vec![with_password])),
    );
    assert!(p.is_reconcilable(), "{p}");
}

// TestReconcilableSSH: "check that empty Users does not cause panic": a config with no users at
// all is reconcilable (the MCO then writes an empty authorized_keys, and so does hearth): the
// explicit way to clear core's keys.
#[test]
fn mco_reconcile_test__TestReconcilableSSH_no_users() {
    let p = plan_of(&spec_of(users(vec![core(&["1234"])])), &spec_of(empty()));
    assert!(p.is_reconcilable(), "{p}");
    assert!(
        p.actions.iter().any(|a| matches!(
            a,
            hearth_config::plan::Action::WriteSshKeys { keys, .. } if keys.is_empty()
        )),
        "{p}"
    );
}
