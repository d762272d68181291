//! The rules, the index, combining and validation.

use super::evaluate::combine;
use super::rules::RuleIndex;
use super::*;
use crate::model::{DisruptionPolicies, FilePolicy, PolicyAction, UnitPolicy};

fn file(path: &str, actions: Vec<PolicyAction>) -> FilePolicy {
    FilePolicy {
        path: path.into(),
        actions,
    }
}

#[test]
fn rule_paths_match_at_slash_boundaries() {
    assert_eq!(rule_match_len("/etc/foo", "/etc/foo"), Some(8));
    assert_eq!(rule_match_len("/etc/foo", "/etc/foo/bar"), Some(8));
    assert_eq!(rule_match_len("/etc/foo/", "/etc/foo/bar"), Some(8));
    assert_eq!(rule_match_len("/etc/foo", "/etc/foobar"), None);
    assert_eq!(rule_match_len("/etc/foo/bar", "/etc/foo"), None);
    assert_eq!(rule_match_len("/", "/etc/x"), Some(1));
    assert_eq!(rule_match_len("", "/etc/x"), None);
}

#[test]
fn the_rule_index_answers_as_the_rules_do() {
    let user = DisruptionPolicies {
        files: vec![
            file("/", vec![PolicyAction::Drain]),
            file("/etc/containers", vec![PolicyAction::None]),
            file("/etc/foo/", vec![PolicyAction::None]),
            file("/etc/foo", vec![PolicyAction::DaemonReload]),
            file("relative/x", vec![PolicyAction::None]),
        ],
        units: vec![UnitPolicy {
            name: "a.service".into(),
            actions: vec![PolicyAction::None],
        }],
        ..Default::default()
    };
    for policies in [
        effective_policies(&user),
        effective_policies(&Default::default()),
    ] {
        let index = RuleIndex::new(&policies);
        for path in [
            "/etc/containers/policy.json",
            "/etc/containers/storage.conf",
            "/etc/containers",
            "/etc/foo",
            "/etc/foo/bar/baz",
            "/etc/foobar",
            "/usr/local/bin/load-registry-image.sh",
            "/x",
            "relative/x",
            "",
        ] {
            assert_eq!(index.file_rule(path), policies.file_rule(path), "{path}");
        }
        for unit in ["a.service", "iri-registry.service", "b.service"] {
            assert_eq!(index.unit_rule(unit), policies.unit_rule(unit), "{unit}");
        }
    }
}

#[test]
fn user_rule_replaces_default_of_same_path_in_place() {
    let user = DisruptionPolicies {
        files: vec![file(
            "/etc/containers/policy.json/",
            vec![PolicyAction::None],
        )],
        ..Default::default()
    };
    let eff = effective_policies(&user);
    assert_eq!(eff.files.len(), MCO_DEFAULT_FILES.len());
    let r = eff.file_rule("/etc/containers/policy.json").unwrap();
    assert_eq!(r.origin, RuleOrigin::User);
    assert_eq!(r.actions, vec![PolicyAction::None]);
    assert_eq!(eff.files[2].origin, RuleOrigin::User);
}

#[test]
fn more_specific_default_beats_user_directory_rule_as_in_the_mco() {
    let user = DisruptionPolicies {
        files: vec![file("/etc/containers", vec![PolicyAction::None])],
        ..Default::default()
    };
    let eff = effective_policies(&user);
    let r = eff.file_rule("/etc/containers/policy.json").unwrap();
    assert_eq!(r.origin, RuleOrigin::McoDefault);
    let r = eff.file_rule("/etc/containers/storage.conf").unwrap();
    assert_eq!(r.origin, RuleOrigin::User);
}

#[test]
fn empty_user_ssh_rule_keeps_default() {
    let user = DisruptionPolicies {
        ssh_key: Some(vec![]),
        ..Default::default()
    };
    assert_eq!(
        effective_policies(&user).ssh_key.origin,
        RuleOrigin::McoDefault
    );
}

#[test]
fn combine_orders_drain_then_daemon_reload_and_drops_subsumed_reload() {
    let d = |actions: Vec<PolicyAction>| Decision {
        change: Change::OsImage,
        actions,
        rule: Rule::Fixed,
        reason: String::new(),
    };
    let out = combine(&[
        d(vec![PolicyAction::Reload {
            service: "crio.service".into(),
        }]),
        d(vec![PolicyAction::None]),
        d(vec![
            PolicyAction::DaemonReload,
            PolicyAction::Restart {
                service: "crio.service".into(),
            },
        ]),
        d(vec![PolicyAction::Special]),
    ]);
    assert_eq!(
        out,
        Outcome::Services {
            steps: vec![
                ServiceStep::Drain,
                ServiceStep::DaemonReload,
                ServiceStep::Restart {
                    unit: "crio.service".into()
                },
            ]
        }
    );
    assert_eq!(combine(&[d(vec![PolicyAction::None])]), Outcome::None);
    assert_eq!(
        combine(&[d(vec![PolicyAction::Drain]), d(vec![PolicyAction::Reboot])]),
        Outcome::Reboot
    );
}

#[test]
fn validation_reports_every_problem() {
    let p = DisruptionPolicies {
        files: vec![
            file("etc/x", vec![PolicyAction::Reboot, PolicyAction::Drain]),
            file("/etc/y", vec![PolicyAction::Special]),
            file("/etc/y/", vec![PolicyAction::None]),
        ],
        units: vec![UnitPolicy {
            name: "crio".into(),
            actions: vec![PolicyAction::Restart {
                service: "bad name.service".into(),
            }],
        }],
        ssh_key: Some(vec![PolicyAction::None, PolicyAction::Drain]),
    };
    let errors = validate_policies(&p);
    let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 7, "{text:#?}");
    assert!(
        matches!(&errors[0], PolicyError::RelativePath { field, .. } if field == "spec.nodeDisruptionPolicy.files[0].path")
    );
    assert!(matches!(
        &errors[1],
        PolicyError::NotStandalone {
            action: "Reboot",
            ..
        }
    ));
    assert!(
        matches!(&errors[2], PolicyError::Special { field } if field == "spec.nodeDisruptionPolicy.files[1].actions[0]")
    );
    assert!(
        matches!(&errors[3], PolicyError::Duplicate { first, .. } if first == "spec.nodeDisruptionPolicy.files[1].path")
    );
    assert!(matches!(&errors[4], PolicyError::UnitName { name, .. } if name == "crio"));
    assert!(
        matches!(&errors[5], PolicyError::UnitName { field, .. } if field.ends_with("units[0].actions[0].serviceName"))
    );
    assert!(
        matches!(&errors[6], PolicyError::NotStandalone { action: "None", field } if field.ends_with("sshkey.actions"))
    );
    assert!(validate_policies(&mco_defaults_without_special()).is_empty());
}

fn mco_defaults_without_special() -> DisruptionPolicies {
    let mut d = mco_defaults();
    d.files
        .retain(|f| !f.actions.contains(&PolicyAction::Special));
    d
}

#[test]
fn unit_names() {
    assert!(is_valid_unit_name("crio.service"));
    assert!(is_valid_unit_name("dev-disk-by\\x2duuid.swap"));
    // The MCO's API refuses template instances too.
    assert!(!is_valid_unit_name("getty@tty1.service"));
    assert!(is_valid_unit_name("var-lib.mount"));
    assert!(!is_valid_unit_name(".service"));
    assert!(!is_valid_unit_name("crio.conf"));
    assert!(!is_valid_unit_name("a b.service"));
}
