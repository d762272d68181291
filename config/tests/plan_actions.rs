//! The actions of a plan: what is written, removed, enabled, and in which order.

use crate::plan_support as support;

use hearth_config::disruption::Outcome;
use hearth_config::model::{KernelType, MachineConfigSpec};
use hearth_config::plan::Action;
use support::*;

fn empty() -> MachineConfigSpec {
    MachineConfigSpec::default()
}

#[test]
fn empty_to_config_writes_everything_then_reloads_then_enables() {
    let chrony = file("/etc/chrony.conf", "server ntp.example.com iburst\n");
    let desired = spec(|s| {
        s.config.storage.files = vec![chrony.clone(), file("/etc/motd", "hi\n")];
        let mut svc = unit("hello.service", Some("[Service]\nExecStart=/bin/true\n"));
        svc.enabled = Some(true);
        let mut kubelet = unit("kubelet.service", None);
        kubelet.dropins = vec![dropin("10-env.conf", Some("[Service]\nEnvironment=A=1\n"))];
        let mut masked = unit("bluetooth.service", None);
        masked.mask = Some(true);
        s.config.systemd.units = vec![svc, kubelet, masked];
        s.config.passwd.users = vec![core(&["ssh-ed25519 AAAA key1"])];
        s.kernel_arguments = strings(&["nosmt"]);
    });
    let p = plan_default(&empty(), &desired);
    assert_eq!(
        p.actions,
        vec![
            Action::WriteFile { file: chrony },
            Action::WriteFile {
                file: file("/etc/motd", "hi\n")
            },
            Action::WriteUnit {
                name: "hello.service".into(),
                contents: "[Service]\nExecStart=/bin/true\n".into()
            },
            Action::WriteDropin {
                unit: "kubelet.service".into(),
                name: "10-env.conf".into(),
                contents: "[Service]\nEnvironment=A=1\n".into()
            },
            Action::DaemonReload,
            Action::EnableUnit {
                name: "hello.service".into()
            },
            Action::MaskUnit {
                name: "bluetooth.service".into()
            },
            Action::WriteSshKeys {
                user: "core".into(),
                keys: strings(&["ssh-ed25519 AAAA key1"])
            },
            Action::KernelArguments {
                delete: vec![],
                append: strings(&["nosmt"])
            },
        ]
    );
    assert!(p.is_reconcilable());
    assert!(!p.is_empty());
}

/// A current config from before the agent's unit was refused in configs (it wrote, enabled or
/// masked `hearth-agent.service`) goes to one that gives it a drop-in only: the plan writes the
/// drop-in and never disables, deletes, presets or unmasks the agent's own unit.
#[test]
fn the_agents_own_unit_is_never_taken_down_by_a_plan() {
    let current = spec(|s| {
        let mut agent = unit(
            "hearth-agent.service",
            Some("[Service]\nExecStart=/usr/bin/hearth-agent run\n"),
        );
        agent.enabled = Some(true);
        s.config.systemd.units = vec![agent];
    });
    let mut agent = unit("hearth-agent.service", None);
    agent.dropins = vec![dropin(
        "10-proxy.conf",
        Some("[Service]\nEnvironment=HTTPS_PROXY=http://proxy:3128\n"),
    )];
    let desired = spec(|s| s.config.systemd.units = vec![agent.clone()]);
    let p = plan_default(&current, &desired);
    assert_eq!(
        p.actions,
        [
            Action::WriteDropin {
                unit: "hearth-agent.service".into(),
                name: "10-proxy.conf".into(),
                contents: "[Service]\nEnvironment=HTTPS_PROXY=http://proxy:3128\n".into(),
            },
            Action::DaemonReload
        ],
        "{p}"
    );
    // Removed whole, or masked before and removed: nothing for the unit itself.
    let p = plan_default(&current, &empty());
    assert!(p.actions.is_empty(), "{p}");
    let masked = spec(|s| {
        let mut agent = unit("hearth-agent.service", None);
        agent.mask = Some(true);
        s.config.systemd.units = vec![agent];
    });
    let p = plan_default(&masked, &empty());
    assert!(p.actions.is_empty(), "{p}");
}

#[test]
fn removing_a_file_deletes_it_and_nothing_else() {
    let current = spec(|s| {
        s.config.storage.files = vec![file("/etc/a", "a"), file("/etc/b", "b")];
    });
    let desired = spec(|s| s.config.storage.files = vec![file("/etc/b", "b")]);
    let p = plan_default(&current, &desired);
    assert_eq!(
        p.actions,
        vec![Action::DeleteFile {
            path: "/etc/a".into()
        }]
    );
}

#[test]
fn changing_only_the_mode_rewrites_the_whole_entry() {
    let current = spec(|s| s.config.storage.files = vec![file("/usr/local/bin/x", "#!/bin/sh\n")]);
    let mut exec = file("/usr/local/bin/x", "#!/bin/sh\n");
    exec.mode = Some(0o755);
    let desired = spec(|s| s.config.storage.files = vec![exec.clone()]);
    let p = plan_default(&current, &desired);
    assert_eq!(p.actions, vec![Action::WriteFile { file: exec }]);
    assert_eq!(
        lines(&p),
        ["write file /usr/local/bin/x (mode 0755, 10 bytes)"]
    );
}

#[test]
fn owner_and_overwrite_changes_rewrite_too() {
    let base = file("/etc/x", "x");
    let mut owned = base.clone();
    owned.user = owner("core");
    let mut no_overwrite = base.clone();
    no_overwrite.overwrite = Some(false);
    for changed in [owned, no_overwrite] {
        let p = plan_default(
            &spec(|s| s.config.storage.files = vec![base.clone()]),
            &spec(|s| s.config.storage.files = vec![changed.clone()]),
        );
        assert_eq!(p.actions, vec![Action::WriteFile { file: changed }]);
    }
}

#[test]
fn identical_entries_in_another_order_produce_nothing() {
    let mut u = unit("a.service", Some("[Unit]\n"));
    u.enabled = Some(true);
    let current = spec(|s| {
        s.config.storage.files = vec![file("/etc/a", "a"), file("/etc/b", "b")];
        s.config.systemd.units = vec![u.clone(), unit("b.service", Some("[Unit]\n"))];
        s.extensions = strings(&["usbguard", "kerberos"]);
    });
    let desired = spec(|s| {
        s.config.storage.files = vec![file("/etc/b", "b"), file("/etc/a", "a")];
        s.config.systemd.units = vec![unit("b.service", Some("[Unit]\n")), u];
        s.extensions = strings(&["kerberos", "usbguard"]);
    });
    let p = plan_default(&current, &desired);
    assert!(p.is_empty(), "{p}");
    assert_eq!(p.to_string(), "no changes\n");
}

fn with_unit(u: hearth_config::ignition::Unit) -> MachineConfigSpec {
    spec(|s| s.config.systemd.units = vec![u])
}

fn enabled(e: Option<bool>) -> hearth_config::ignition::Unit {
    let mut u = unit("chronyd.service", None);
    u.enabled = e;
    u
}

#[test]
fn enablement_transitions() {
    let name = || "chronyd.service".to_string();
    let cases = [
        (None, Some(true), vec![Action::EnableUnit { name: name() }]),
        (
            None,
            Some(false),
            vec![Action::DisableUnit { name: name() }],
        ),
        (
            Some(true),
            Some(false),
            vec![Action::DisableUnit { name: name() }],
        ),
        (
            Some(false),
            Some(true),
            vec![Action::EnableUnit { name: name() }],
        ),
        // `enabled` becomes unset: back to the preset, as the MCO does.
        (Some(true), None, vec![Action::PresetUnit { name: name() }]),
        (Some(false), None, vec![Action::PresetUnit { name: name() }]),
        (Some(true), Some(true), vec![]),
        (None, None, vec![]),
    ];
    for (from, to, want) in cases {
        let p = plan_default(&with_unit(enabled(from)), &with_unit(enabled(to)));
        assert_eq!(p.actions, want, "{from:?} -> {to:?}");
    }
}

#[test]
fn mask_and_unmask() {
    let contents = "[Service]\nExecStart=/bin/true\n";
    let plain = unit("x.service", Some(contents));
    let mut masked = plain.clone();
    masked.mask = Some(true);

    let p = plan_default(&with_unit(plain.clone()), &with_unit(masked.clone()));
    assert_eq!(
        p.actions,
        vec![Action::MaskUnit {
            name: "x.service".into()
        }]
    );

    // Unmasking: the /dev/null link goes first, then the unit file is written again (masking
    // replaced it), then systemd is reloaded.
    let p = plan_default(&with_unit(masked.clone()), &with_unit(plain));
    assert_eq!(
        p.actions,
        vec![
            Action::UnmaskUnit {
                name: "x.service".into()
            },
            Action::WriteUnit {
                name: "x.service".into(),
                contents: contents.into()
            },
            Action::DaemonReload,
        ]
    );

    // mask: false on a unit without contents only removes the mask.
    let mut unmasked = unit("x.service", None);
    unmasked.mask = Some(false);
    let mut masked_empty = unit("x.service", None);
    masked_empty.mask = Some(true);
    let p = plan_default(&with_unit(masked_empty), &with_unit(unmasked));
    assert_eq!(
        p.actions,
        vec![
            Action::UnmaskUnit {
                name: "x.service".into()
            },
            Action::DaemonReload
        ]
    );
}

#[test]
fn unmasked_unit_gets_its_enablement_back() {
    let mut masked = unit("x.service", Some("[Unit]\n"));
    masked.mask = Some(true);
    masked.enabled = Some(true);
    let mut live = masked.clone();
    live.mask = None;
    let p = plan_default(&with_unit(masked), &with_unit(live));
    assert_eq!(
        lines(&p),
        [
            "unmask unit x.service",
            "write unit x.service (7 bytes)",
            "daemon-reload",
            "enable unit x.service"
        ]
    );
}

#[test]
fn dropin_only_change_writes_only_the_dropin() {
    let mut before = unit("crio.service", Some("[Service]\n"));
    before.dropins = vec![
        dropin("10-a.conf", Some("[Service]\nA=1\n")),
        dropin("20-b.conf", Some("[Service]\nB=1\n")),
    ];
    let mut after = before.clone();
    after.dropins[1].contents = Some("[Service]\nB=2\n".into());
    let p = plan_default(&with_unit(before), &with_unit(after));
    assert_eq!(
        p.actions,
        vec![
            Action::WriteDropin {
                unit: "crio.service".into(),
                name: "20-b.conf".into(),
                contents: "[Service]\nB=2\n".into()
            },
            Action::DaemonReload
        ]
    );
}

#[test]
fn empty_or_absent_dropin_contents_remove_the_dropin() {
    let mut before = unit("crio.service", None);
    before.dropins = vec![dropin("10-a.conf", Some("[Service]\nA=1\n"))];
    for contents in [None, Some("")] {
        let mut after = unit("crio.service", None);
        after.dropins = vec![dropin("10-a.conf", contents)];
        let p = plan_default(&with_unit(before.clone()), &with_unit(after.clone()));
        assert_eq!(
            p.actions,
            vec![
                Action::DeleteDropin {
                    unit: "crio.service".into(),
                    name: "10-a.conf".into()
                },
                Action::DaemonReload
            ],
            "{contents:?}"
        );
        // Once removed, the same empty entry asks for nothing more.
        assert!(plan_default(&with_unit(after.clone()), &with_unit(after)).is_empty());
    }
    // A new empty entry also removes whatever file is there, as the MCO does.
    let mut fresh = unit("crio.service", None);
    fresh.dropins = vec![dropin("99-old.conf", Some(""))];
    let p = plan_default(&empty(), &with_unit(fresh));
    assert_eq!(
        lines(&p),
        ["delete drop-in crio.service.d/99-old.conf", "daemon-reload"]
    );
}

#[test]
fn daemon_reload_exactly_when_unit_files_or_dropins_change() {
    let mut svc = unit("a.service", Some("[Unit]\n"));
    svc.dropins = vec![dropin("x.conf", Some("[Unit]\n"))];
    let base = spec(|s| {
        s.config.storage.files = vec![file("/etc/a", "a")];
        s.config.systemd.units = vec![svc.clone()];
    });
    let mut cases: Vec<(&str, MachineConfigSpec, usize)> = Vec::new();
    cases.push((
        "plain file",
        spec(|s| {
            s.config.storage.files = vec![file("/etc/a", "changed")];
            s.config.systemd.units = vec![svc.clone()];
        }),
        0,
    ));
    let mut enabled = svc.clone();
    enabled.enabled = Some(true);
    cases.push((
        "enablement",
        spec(|s| {
            s.config.storage.files = vec![file("/etc/a", "a")];
            s.config.systemd.units = vec![enabled];
        }),
        0,
    ));
    let mut new_dropin = svc.clone();
    new_dropin.dropins[0].contents = Some("[Unit]\nX=1\n".into());
    cases.push((
        "drop-in",
        spec(|s| {
            s.config.storage.files = vec![file("/etc/a", "a")];
            s.config.systemd.units = vec![new_dropin];
        }),
        1,
    ));
    let mut new_contents = svc.clone();
    new_contents.contents = Some("[Unit]\nDescription=x\n".into());
    cases.push((
        "unit file",
        spec(|s| {
            s.config.storage.files = vec![file("/etc/a", "a")];
            s.config.systemd.units = vec![new_contents];
        }),
        1,
    ));
    cases.push((
        "unit file given as a storage file",
        spec(|s| {
            s.config.storage.files = vec![
                file("/etc/a", "a"),
                file("/etc/systemd/system/b.service", "[Unit]\n"),
            ];
            s.config.systemd.units = vec![svc.clone()];
        }),
        1,
    ));
    cases.push((
        "unit removed",
        spec(|s| s.config.storage.files = vec![file("/etc/a", "a")]),
        1,
    ));
    cases.push(("nothing", base.clone(), 0));
    for (what, desired, want) in cases {
        let p = plan_default(&base, &desired);
        assert_eq!(daemon_reloads(&p), want, "{what}: {p}");
        if want == 1 {
            // After every unit file change and before any enablement change.
            let reload = position(&p, |a| matches!(a, Action::DaemonReload)).unwrap();
            assert!(
                p.actions[..reload].iter().all(|a| !matches!(
                    a,
                    Action::EnableUnit { .. } | Action::MaskUnit { .. } | Action::PresetUnit { .. }
                )),
                "{what}: {p}"
            );
            assert!(
                p.actions[reload + 1..]
                    .iter()
                    .all(|a| !a.changes_unit_files()),
                "{what}: {p}"
            );
        }
    }
}

#[test]
fn rewriting_an_enabled_unit_disables_it_first_and_enables_it_after_the_reload() {
    let mut before = unit(
        "app.service",
        Some("[Install]\nWantedBy=multi-user.target\n"),
    );
    before.enabled = Some(true);
    let mut after = before.clone();
    after.contents = Some("[Install]\nWantedBy=graphical.target\n".into());
    let p = plan_default(&with_unit(before), &with_unit(after));
    assert_eq!(
        lines(&p),
        [
            "disable unit app.service",
            "write unit app.service (36 bytes)",
            "daemon-reload",
            "enable unit app.service"
        ]
    );
}

#[test]
fn removed_unit_is_disabled_before_its_files_go() {
    let mut svc = unit("app.service", Some("[Unit]\n"));
    svc.enabled = Some(true);
    svc.dropins = vec![dropin("10-x.conf", Some("[Service]\n"))];
    let mut tuned = unit("tuned.service", None);
    tuned.enabled = Some(false);
    let current = spec(|s| s.config.systemd.units = vec![svc, tuned]);
    let p = plan_default(&current, &empty());
    assert_eq!(
        lines(&p),
        [
            "disable unit app.service",
            "delete drop-in app.service.d/10-x.conf",
            "delete unit app.service",
            "daemon-reload",
            // No unit file of its own: only its enablement goes back to the preset.
            "preset unit tuned.service",
        ]
    );
}

#[test]
fn a_file_moved_into_a_dropin_is_not_deleted() {
    let path = "/etc/systemd/system/kubelet.service.d/20-x.conf";
    let current = spec(|s| s.config.storage.files = vec![file(path, "[Service]\n")]);
    let mut kubelet = unit("kubelet.service", None);
    kubelet.dropins = vec![dropin("20-x.conf", Some("[Service]\n"))];
    let desired = with_unit(kubelet);
    let p = plan_default(&current, &desired);
    assert_eq!(
        lines(&p),
        [
            "write drop-in kubelet.service.d/20-x.conf (10 bytes)",
            "daemon-reload"
        ]
    );
}

#[test]
fn ssh_keys_and_password_of_core() {
    let current = spec(|s| {
        let mut c = core(&["k1"]);
        c.password_hash = Some("$6$old".into());
        s.config.passwd.users = vec![c];
    });
    let desired = spec(|s| s.config.passwd.users = vec![core(&["k1", "k2"])]);
    let p = plan_default(&current, &desired);
    assert_eq!(
        p.actions,
        vec![
            Action::WriteSshKeys {
                user: "core".into(),
                keys: strings(&["k1", "k2"])
            },
            Action::SetPasswordHash {
                user: "core".into(),
                hash: None
            },
        ]
    );
    assert_eq!(
        lines(&p),
        [
            "write SSH keys of user core (2 keys)",
            "lock password of user core (no hash)"
        ]
    );
    // Dropping user core from the config removes the keys hearth wrote.
    let p = plan_default(&desired, &empty());
    assert_eq!(
        p.actions,
        vec![Action::WriteSshKeys {
            user: "core".into(),
            keys: vec![]
        }]
    );
    assert!(p.is_reconcilable());
}

#[test]
fn os_changes_come_last_in_mco_order() {
    let current = spec(|s| {
        s.os_image_url = "quay.io/os@sha256:aaa".into();
        s.extensions = strings(&["usbguard"]);
    });
    let desired = spec(|s| {
        s.os_image_url = "quay.io/os@sha256:bbb".into();
        s.kernel_arguments = strings(&["nosmt"]);
        s.kernel_type = KernelType::Realtime;
        s.extensions = strings(&["usbguard", "kernel-devel"]);
        s.config.storage.files = vec![file("/etc/a", "a")];
        s.config.passwd.users = vec![core(&["k"])];
    });
    let p = plan_default(&current, &desired);
    assert_eq!(
        lines(&p),
        [
            "write file /etc/a (mode 0644, 1 byte)",
            "write SSH keys of user core (1 key)",
            "OS image: quay.io/os@sha256:aaa -> quay.io/os@sha256:bbb",
            "kernel arguments: +nosmt",
            "kernel type: default -> realtime",
            "extensions: usbguard -> usbguard, kernel-devel",
        ]
    );
    assert_eq!(p.disruption.outcome, Outcome::Reboot);
}

#[test]
fn an_empty_os_image_keeps_the_current_one() {
    let current = spec(|s| s.os_image_url = "quay.io/os@sha256:aaa".into());
    assert!(plan_default(&current, &empty()).is_empty());
}

#[test]
fn summary_lists_actions_then_disruption_then_unreconcilable_fields() {
    let current = spec(|s| s.kernel_arguments = strings(&["nosmt"]));
    let desired = spec(|s| {
        s.config.storage.files = vec![file("/etc/chrony.conf", "server a\n")];
        let mut u = unit("chronyd.service", None);
        u.enabled = Some(true);
        s.config.systemd.units = vec![u];
        s.kernel_arguments = strings(&["hugepages=32"]);
        s.config.storage.directories = vec![hearth_config::ignition::Directory {
            path: "/var/data".into(),
            ..Default::default()
        }];
    });
    let text = plan_default(&current, &desired).summary();
    let want = "\
actions:
  1. write file /etc/chrony.conf (mode 0644, 9 bytes)
  2. enable unit chronyd.service
  3. kernel arguments: -nosmt +hugepages=32
disruption: reboot
  - reboot: /etc/chrony.conf changed and no policy covers it (default: reboot)
  - reboot: unit chronyd.service changed and no policy covers it (default: reboot)
  - reboot: kernel arguments changed (always needs a reboot)
unreconcilable: the node cannot be updated in place (1 field):
  - spec.config.storage.directories[0]: directory \"/var/data\" added: Ignition directories are only created when a node is provisioned; re-provision the node, or manage the directory with a systemd-tmpfiles rule (a file under /etc/tmpfiles.d/)
";
    assert_eq!(text, want);
}

#[test]
fn json_shape() {
    let desired = spec(|s| {
        s.config.storage.files = vec![file("/etc/containers/policy.json", "{}")];
        s.kernel_type = KernelType::Realtime;
    });
    let v = serde_json::to_value(plan_default(&empty(), &desired)).unwrap();
    assert_eq!(v["actions"][0]["type"], "WriteFile");
    assert_eq!(
        v["actions"][0]["file"]["path"],
        "/etc/containers/policy.json"
    );
    assert_eq!(v["actions"][0]["file"]["mode"], 420);
    assert_eq!(v["actions"][1]["type"], "KernelType");
    assert_eq!(v["actions"][1]["from"], "default");
    assert_eq!(v["actions"][1]["to"], "realtime");
    assert_eq!(v["disruption"]["outcome"]["type"], "Reboot");
    let d = &v["disruption"]["decisions"][0];
    assert_eq!(d["change"]["type"], "File");
    assert_eq!(d["change"]["path"], "/etc/containers/policy.json");
    assert_eq!(d["actions"][0]["type"], "Reload");
    assert_eq!(d["actions"][0]["serviceName"], "crio.service");
    assert_eq!(d["rule"]["type"], "File");
    assert_eq!(d["rule"]["origin"], "McoDefault");
    assert_eq!(v["unreconcilable"], serde_json::json!([]));
}
