//! Changes the node cannot take on day 2: every offending field is listed.

use crate::plan_support as support;

use hearth_config::ignition::{Directory, Disk, Group, Link, Resource, User};
use hearth_config::model::MachineConfigSpec;
use hearth_config::plan::{Action, Plan};
use support::*;

fn paths(p: &Plan) -> Vec<&str> {
    p.unreconcilable.iter().map(|u| u.path.as_str()).collect()
}

fn user(name: &str) -> User {
    User {
        name: name.into(),
        ..Default::default()
    }
}

#[test]
fn new_user_admin() {
    let current = spec(|s| s.config.passwd.users = vec![core(&["k"])]);
    let desired = spec(|s| s.config.passwd.users = vec![core(&["k"]), user("admin")]);
    let p = plan_default(&current, &desired);
    assert!(!p.is_reconcilable());
    assert_eq!(paths(&p), ["spec.config.passwd.users[1]"]);
    let reason = &p.unreconcilable[0].reason;
    assert!(reason.contains("\"admin\""), "{reason}");
    assert!(
        reason.contains("only user core can be managed on day 2"),
        "{reason}"
    );
    assert!(reason.contains("re-provision the node"), "{reason}");
}

#[test]
fn removed_user_is_named_at_its_current_index() {
    let current = spec(|s| s.config.passwd.users = vec![user("admin"), core(&["k"])]);
    let desired = spec(|s| s.config.passwd.users = vec![core(&["k"])]);
    let p = plan_default(&current, &desired);
    assert_eq!(paths(&p), ["spec.config.passwd.users[0]"]);
    assert!(p.unreconcilable[0].reason.contains("removed"));
}

#[test]
fn core_fields_other_than_keys_and_password_each_listed() {
    let current = spec(|s| s.config.passwd.users = vec![core(&["k"])]);
    let desired = spec(|s| {
        let mut c = core(&["k2"]);
        c.shell = Some("/bin/zsh".into());
        c.groups = vec!["wheel".into()];
        c.password_hash = Some("$6$x".into());
        s.config.passwd.users = vec![c];
    });
    let p = plan_default(&current, &desired);
    assert_eq!(
        paths(&p),
        [
            "spec.config.passwd.users[0].groups",
            "spec.config.passwd.users[0].shell"
        ]
    );
    // The parts that can change are still planned.
    assert!(matches!(p.actions[0], Action::WriteSshKeys { .. }));
    assert!(matches!(p.actions[1], Action::SetPasswordHash { .. }));
}

#[test]
fn every_offending_field_is_listed_and_the_rest_still_planned() {
    let current = spec(|s| {
        s.config.passwd.users = vec![core(&["k"])];
        s.config.storage.links = vec![Link {
            path: "/etc/localtime".into(),
            target: Some("/usr/share/zoneinfo/UTC".into()),
            ..Default::default()
        }];
    });
    let desired = spec(|s| {
        s.config.passwd.users = vec![core(&["k"]), user("admin")];
        s.config.passwd.groups = vec![Group {
            name: "ops".into(),
            ..Default::default()
        }];
        s.config.storage.directories = vec![Directory {
            path: "/var/data".into(),
            mode: Some(0o755),
            ..Default::default()
        }];
        s.config.storage.disks = vec![Disk {
            device: "/dev/vdb".into(),
            wipe_table: Some(true),
            ..Default::default()
        }];
        let mut appended = file("/etc/hosts", "");
        appended.contents = Resource::default();
        appended.append = vec![Resource {
            source: Some("data:,10.0.0.1%20db%0A".into()),
            ..Default::default()
        }];
        s.config.storage.files = vec![file("/etc/chrony.conf", "server a\n"), appended];
        s.config.kernel_arguments.should_exist = vec!["nosmt".into()];
        s.config.ignition.timeouts.http_total = Some(30);
        s.config.ignition.config.merge = vec![Resource {
            source: Some("https://example.com/extra.ign".into()),
            ..Default::default()
        }];
        s.fips = true;
    });
    let p = plan_default(&current, &desired);
    assert_eq!(
        paths(&p),
        [
            "spec.config.passwd.users[1]",
            "spec.config.passwd.groups[0]",
            "spec.config.storage.directories[0]",
            "spec.config.storage.links[0]",
            "spec.config.storage.disks[0]",
            "spec.config.storage.files[1].append",
            "spec.config.kernelArguments.shouldExist",
            "spec.config.ignition.config.merge",
            "spec.config.ignition.timeouts",
            "spec.fips",
        ]
    );
    assert!(!p.is_reconcilable());
    let err = p.check_reconcilable().unwrap_err();
    assert_eq!(err.fields.len(), 10);
    assert!(err.to_string().contains("10 unreconcilable changes"));
    // What else would change is still listed.
    assert!(p
        .actions
        .iter()
        .any(|a| matches!(a, Action::WriteFile { file } if file.path == "/etc/chrony.conf")));
    let text = p.summary();
    for u in &p.unreconcilable {
        assert!(text.contains(&u.to_string()), "{text}");
    }
}

#[test]
fn each_kind_alone() {
    let dir = |p: &str| Directory {
        path: p.into(),
        ..Default::default()
    };
    let cases: Vec<(MachineConfigSpec, MachineConfigSpec, &str, &str)> = vec![
        (
            spec(|_| {}),
            spec(|s| s.config.storage.directories = vec![dir("/var/a")]),
            "spec.config.storage.directories[0]",
            "directory \"/var/a\" added",
        ),
        (
            spec(|s| s.config.storage.directories = vec![dir("/var/a")]),
            spec(|s| {
                s.config.storage.directories = vec![Directory {
                    mode: Some(0o700),
                    ..dir("/var/a")
                }]
            }),
            "spec.config.storage.directories[0]",
            "directory \"/var/a\" changed",
        ),
        (
            spec(|_| {}),
            spec(|s| {
                s.config.storage.disks = vec![Disk {
                    device: "/dev/sdb".into(),
                    ..Default::default()
                }]
            }),
            "spec.config.storage.disks[0]",
            "disk \"/dev/sdb\" added",
        ),
        (
            spec(|s| s.fips = true),
            spec(|_| {}),
            "spec.fips",
            "FIPS mode cannot be switched on a running node (true -> false)",
        ),
        (
            spec(|_| {}),
            spec(|s| s.config.kernel_arguments.should_not_exist = vec!["quiet".into()]),
            "spec.config.kernelArguments.shouldNotExist",
            "use the MachineConfig's spec.kernelArguments",
        ),
        (
            spec(|_| {}),
            spec(|s| s.config.ignition.proxy.https_proxy = Some("http://proxy:3128".into())),
            "spec.config.ignition.proxy.httpsProxy",
            "only matters when Ignition runs at first boot",
        ),
    ];
    for (current, desired, path, reason) in cases {
        let p = plan_default(&current, &desired);
        assert_eq!(paths(&p), [path]);
        assert!(
            p.unreconcilable[0].reason.contains(reason),
            "{}",
            p.unreconcilable[0].reason
        );
    }
}

#[test]
fn unchanged_day1_sections_and_the_ignition_version_are_fine() {
    let s = spec(|s| {
        s.config.ignition.version = Some("3.2.0".into());
        s.config.storage.directories = vec![Directory {
            path: "/var/a".into(),
            ..Default::default()
        }];
        s.config.passwd.users = vec![core(&["k"]), user("admin")];
        let mut appended = file("/etc/hosts", "");
        appended.append = vec![Resource {
            source: Some("data:,x".into()),
            ..Default::default()
        }];
        s.config.storage.files = vec![appended];
        s.fips = true;
    });
    let mut other_version = s.clone();
    other_version.config.ignition.version = Some("3.5.0".into());
    let p = plan_default(&s, &other_version);
    assert!(p.is_empty(), "{p}");
    assert!(p.check_reconcilable().is_ok());
}
