//! The disruption of a plan: MCO default node-disruption policies, user policies, reasons.

use crate::plan_support as support;

use hearth_config::disruption::{Change, Outcome, Rule, RuleOrigin, ServiceStep};
use hearth_config::model::{
    DisruptionPolicies, FilePolicy, KernelType, MachineConfigSpec, PolicyAction, UnitPolicy,
};
use hearth_config::plan::{plan, Plan};
use support::*;

fn files(list: &[(&str, &str)]) -> MachineConfigSpec {
    spec(|s| s.config.storage.files = list.iter().map(|(p, t)| file(p, t)).collect())
}

fn reasons(p: &Plan) -> Vec<String> {
    p.disruption
        .decisions
        .iter()
        .map(|d| d.reason.clone())
        .collect()
}

fn reload(unit: &str) -> ServiceStep {
    ServiceStep::Reload { unit: unit.into() }
}

fn restart(unit: &str) -> ServiceStep {
    ServiceStep::Restart { unit: unit.into() }
}

fn services(steps: Vec<ServiceStep>) -> Outcome {
    Outcome::Services { steps }
}

#[test]
fn ssh_key_change_needs_no_reboot() {
    let current = spec(|s| s.config.passwd.users = vec![core(&["k1"])]);
    let desired = spec(|s| s.config.passwd.users = vec![core(&["k2"])]);
    let p = plan_default(&current, &desired);
    assert_eq!(p.disruption.outcome, Outcome::None);
    assert!(!p.disruption.drain());
    assert_eq!(
        reasons(&p),
        ["none: SSH keys of user core changed (MCO default policy for SSH keys)"]
    );
}

#[test]
fn user_ssh_policy_applies() {
    let current = spec(|s| s.config.passwd.users = vec![core(&["k1"])]);
    let desired = spec(|s| s.config.passwd.users = vec![core(&[])]);
    let policies = DisruptionPolicies {
        ssh_key: Some(vec![PolicyAction::Drain]),
        ..Default::default()
    };
    let p = plan(&current, &desired, &policies);
    assert_eq!(p.disruption.outcome, services(vec![ServiceStep::Drain]));
    assert!(p.disruption.drain());
}

#[test]
fn password_hash_change_needs_nothing() {
    let current = spec(|s| s.config.passwd.users = vec![core(&[])]);
    let desired = spec(|s| {
        let mut c = core(&[]);
        c.password_hash = Some("$6$x".into());
        s.config.passwd.users = vec![c];
    });
    let p = plan_default(&current, &desired);
    assert_eq!(p.disruption.outcome, Outcome::None);
    assert_eq!(p.disruption.decisions[0].change, Change::PasswordHash);
}

#[test]
fn chrony_change_reboots_with_a_reason_naming_the_path() {
    let p = plan_default(
        &files(&[("/etc/chrony.conf", "server a\n")]),
        &files(&[("/etc/chrony.conf", "server b\n")]),
    );
    assert_eq!(p.disruption.outcome, Outcome::Reboot);
    assert!(p.disruption.reboot() && p.disruption.drain());
    assert_eq!(
        reasons(&p),
        ["reboot: /etc/chrony.conf changed and no policy covers it (default: reboot)"]
    );
    assert_eq!(p.disruption.decisions[0].rule, Rule::NoRule);
}

#[test]
fn policy_json_change_reloads_crio_by_mco_default() {
    let p = plan_default(
        &files(&[("/etc/containers/policy.json", "{}")]),
        &files(&[("/etc/containers/policy.json", "{\"default\":[]}")]),
    );
    assert_eq!(p.disruption.outcome, services(vec![reload("crio.service")]));
    assert_eq!(
        reasons(&p),
        ["reload crio.service: /etc/containers/policy.json changed (MCO default policy)"]
    );
    // Removing the file is a change too.
    let p = plan_default(
        &files(&[("/etc/containers/policy.json", "{}")]),
        &files(&[]),
    );
    assert_eq!(p.disruption.outcome, services(vec![reload("crio.service")]));
    assert_eq!(
        reasons(&p),
        ["reload crio.service: /etc/containers/policy.json removed (MCO default policy)"]
    );
}

#[test]
fn mco_directory_defaults_cover_files_below_them() {
    let p = plan_default(
        &files(&[]),
        &files(&[("/etc/containers/registries.d/mirror.yaml", "docker: {}\n")]),
    );
    assert_eq!(p.disruption.outcome, services(vec![reload("crio.service")]));
    assert_eq!(
        reasons(&p),
        ["reload crio.service: /etc/containers/registries.d/mirror.yaml changed (MCO default policy for /etc/containers/registries.d)"]
    );
    // A sibling sharing the prefix but not the directory is not covered.
    let p = plan_default(
        &files(&[]),
        &files(&[("/etc/containers/registries.dx", "")]),
    );
    assert_eq!(p.disruption.outcome, Outcome::Reboot);
}

#[test]
fn registries_conf_drains_and_reloads_crio() {
    let p = plan_default(
        &files(&[]),
        &files(&[(
            "/etc/containers/registries.conf",
            "unqualified-search-registries = []\n",
        )]),
    );
    assert_eq!(
        p.disruption.outcome,
        services(vec![ServiceStep::Drain, reload("crio.service")])
    );
}

#[test]
fn user_ca_bundle_restarts_update_ca_trust_then_crio() {
    let path = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt";
    let p = plan_default(
        &files(&[]),
        &files(&[(path, "-----BEGIN CERTIFICATE-----\n")]),
    );
    assert_eq!(
        p.disruption.outcome,
        services(vec![
            restart("coreos-update-ca-trust.service"),
            restart("crio.service")
        ])
    );
    assert_eq!(
        reasons(&p),
        [format!(
            "restart coreos-update-ca-trust.service, restart crio.service: {path} changed (MCO default policy)"
        )]
    );
}

#[test]
fn kubelet_auth_file_needs_nothing() {
    let p = plan_default(
        &files(&[("/var/lib/kubelet/config.json", "{}")]),
        &files(&[("/var/lib/kubelet/config.json", "{\"auths\":{}}")]),
    );
    assert_eq!(p.disruption.outcome, Outcome::None);
}

#[test]
fn user_directory_policy_beats_default_reboot_and_longest_match_wins() {
    let policies = DisruptionPolicies {
        files: vec![
            FilePolicy {
                path: "/etc/myapp".into(),
                actions: vec![PolicyAction::Restart {
                    service: "myapp.service".into(),
                }],
            },
            FilePolicy {
                path: "/etc/myapp/static/".into(),
                actions: vec![PolicyAction::None],
            },
        ],
        ..Default::default()
    };
    let p = plan(
        &files(&[]),
        &files(&[("/etc/myapp/conf.d/a.toml", "a=1\n")]),
        &policies,
    );
    assert_eq!(
        p.disruption.outcome,
        services(vec![restart("myapp.service")])
    );
    assert_eq!(
        reasons(&p),
        ["restart myapp.service: /etc/myapp/conf.d/a.toml changed (user policy for /etc/myapp)"]
    );
    assert_eq!(
        p.disruption.decisions[0].rule,
        Rule::File {
            path: "/etc/myapp".into(),
            origin: RuleOrigin::User
        }
    );

    let p = plan(
        &files(&[]),
        &files(&[("/etc/myapp/static/logo.svg", "<svg/>")]),
        &policies,
    );
    assert_eq!(p.disruption.outcome, Outcome::None);
    assert_eq!(
        reasons(&p),
        ["none: /etc/myapp/static/logo.svg changed (user policy for /etc/myapp/static/)"]
    );
}

#[test]
fn user_rule_for_a_default_path_replaces_the_default() {
    let policies = DisruptionPolicies {
        files: vec![FilePolicy {
            path: "/etc/containers/policy.json".into(),
            actions: vec![PolicyAction::None],
        }],
        ..Default::default()
    };
    let p = plan(
        &files(&[]),
        &files(&[("/etc/containers/policy.json", "{}")]),
        &policies,
    );
    assert_eq!(p.disruption.outcome, Outcome::None);
    assert_eq!(
        reasons(&p),
        ["none: /etc/containers/policy.json changed (user policy)"]
    );
}

#[test]
fn user_unit_policy_restart() {
    let mut before = unit(
        "myapp.service",
        Some("[Service]\nExecStart=/usr/bin/myapp\n"),
    );
    before.dropins = vec![dropin("10-env.conf", Some("[Service]\nEnvironment=A=1\n"))];
    let mut after = before.clone();
    after.dropins[0].contents = Some("[Service]\nEnvironment=A=2\n".into());
    let current = spec(|s| s.config.systemd.units = vec![before]);
    let desired = spec(|s| s.config.systemd.units = vec![after]);
    let policies = DisruptionPolicies {
        units: vec![UnitPolicy {
            name: "myapp.service".into(),
            actions: vec![
                PolicyAction::Restart {
                    service: "myapp.service".into(),
                },
                PolicyAction::DaemonReload,
            ],
        }],
        ..Default::default()
    };
    let p = plan(&current, &desired, &policies);
    // daemon-reload runs before restarts, whatever order the rule lists them in.
    assert_eq!(
        p.disruption.outcome,
        services(vec![ServiceStep::DaemonReload, restart("myapp.service")])
    );
    assert_eq!(
        reasons(&p),
        ["restart myapp.service, daemon-reload: unit myapp.service changed (user policy)"]
    );
    // Without the policy, the MCO default is a reboot.
    let p = plan_default(&current, &desired);
    assert_eq!(p.disruption.outcome, Outcome::Reboot);
    assert_eq!(
        reasons(&p),
        ["reboot: unit myapp.service changed and no policy covers it (default: reboot)"]
    );
}

#[test]
fn reboot_wins_but_every_decision_is_kept() {
    let p = plan_default(
        &files(&[]),
        &files(&[
            ("/etc/containers/policy.json", "{}"),
            ("/etc/chrony.conf", "server a\n"),
        ]),
    );
    assert_eq!(p.disruption.outcome, Outcome::Reboot);
    assert_eq!(
        reasons(&p),
        [
            "reload crio.service: /etc/containers/policy.json changed (MCO default policy)",
            "reboot: /etc/chrony.conf changed and no policy covers it (default: reboot)",
        ]
    );
    let rebooting: Vec<_> = p.disruption.reboot_reasons().collect();
    assert_eq!(rebooting.len(), 1);
}

#[test]
fn os_level_changes_always_reboot() {
    let base = MachineConfigSpec::default();
    let cases: Vec<(MachineConfigSpec, &str)> = vec![
        (
            spec(|s| s.kernel_type = KernelType::Realtime),
            "reboot: kernel type changed (default -> realtime) (always needs a reboot)",
        ),
        (
            spec(|s| s.kernel_arguments = strings(&["nosmt"])),
            "reboot: kernel arguments changed (always needs a reboot)",
        ),
        (
            spec(|s| s.extensions = strings(&["usbguard"])),
            "reboot: extensions changed (always needs a reboot)",
        ),
        (
            spec(|s| s.os_image_url = "quay.io/os@sha256:1".into()),
            "reboot: OS image changed (always needs a reboot)",
        ),
        (
            spec(|s| s.fips = true),
            "reboot: FIPS mode changed (always needs a reboot)",
        ),
    ];
    for (desired, reason) in cases {
        // Even a user rule that says "none" for everything does not avoid it.
        let policies = DisruptionPolicies {
            files: vec![FilePolicy {
                path: "/".into(),
                actions: vec![PolicyAction::None],
            }],
            ..Default::default()
        };
        let p = plan(&base, &desired, &policies);
        assert_eq!(p.disruption.outcome, Outcome::Reboot, "{reason}");
        assert_eq!(reasons(&p), [reason]);
    }
}

#[test]
fn nothing_changed_nothing_to_do() {
    let s = files(&[("/etc/chrony.conf", "server a\n")]);
    let p = plan_default(&s, &s);
    assert_eq!(p.disruption.outcome, Outcome::None);
    assert!(p.disruption.decisions.is_empty());
}
