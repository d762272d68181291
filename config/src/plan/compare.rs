//! [`plan`]: the two specs compared field by field (files, units, the core user, the OS) into
//! actions in their phase order, the changes disruption is decided for, and what cannot be done
//! on a running node.

use super::action::{Action, CORE_USER};
use super::entries::keyed;
use super::output::Plan;
use super::units::plan_units;
use super::unreconcilable::unreconcilable;
use crate::disruption::{self, Change, Disruption};
use crate::ignition::{Config, User};
use crate::kargs::{diff_kernel_arguments, split_kernel_arguments};
use crate::model::{DisruptionPolicies, MachineConfigSpec};
use std::collections::{BTreeSet, HashSet};

/// Computes the plan from `current` to `desired` (both rendered configs; a node without config
/// uses `MachineConfigSpec::default()` as `current`), deciding disruption with the MCO defaults
/// merged with `policies`.
pub fn plan(
    current: &MachineConfigSpec,
    desired: &MachineConfigSpec,
    policies: &DisruptionPolicies,
) -> Plan {
    let cur = &current.config;
    let des = &desired.config;

    let desired_files: HashSet<&str> = des.storage.files.iter().map(|f| f.path.as_str()).collect();
    // Paths that units and drop-ins own (a file there would fight them).
    let unit_owned: HashSet<String> = crate::paths::written(des)
        .into_iter()
        .filter(|w| !matches!(w.what, crate::paths::Written::File(_)))
        .map(|w| w.path)
        .collect();

    let mut actions = plan_files(cur, des, &unit_owned);
    let units = plan_units(cur, des, &desired_files);
    let reload_needed = actions
        .iter()
        .chain(units.files.iter())
        .any(Action::changes_unit_files);
    actions.extend(units.files);
    if reload_needed {
        actions.push(Action::DaemonReload);
    }
    actions.extend(units.state);
    actions.extend(plan_core_user(cur, des));
    actions.extend(plan_os(current, desired));

    let mut changes = changes_of(&actions);
    if current.fips != desired.fips {
        changes.push(Change::Fips);
    }
    let disruption = if changes.is_empty() {
        Disruption::default()
    } else {
        disruption::evaluate(&changes, policies)
    };
    Plan {
        actions,
        disruption,
        unreconcilable: unreconcilable(current, desired),
    }
}

fn plan_files(cur: &Config, des: &Config, unit_owned: &HashSet<String>) -> Vec<Action> {
    let cur_files = keyed(&cur.storage.files, |f| f.path.as_str());
    let des_files = keyed(&des.storage.files, |f| f.path.as_str());
    let mut out = Vec::new();
    for path in cur_files.keys() {
        // A path that a desired unit or drop-in now owns is replaced there, not deleted (the MCO
        // keeps a file "replaced with systemd dropin").
        if !des_files.contains_key(path) && !unit_owned.contains(*path) {
            out.push(Action::DeleteFile {
                path: path.to_string(),
            });
        }
    }
    for (path, (_, file)) in &des_files {
        if !cur_files
            .get(path)
            .is_some_and(|(_, c)| crate::mco::same_file(c, file))
        {
            out.push(Action::WriteFile {
                file: (*file).clone(),
            });
        }
    }
    out
}
fn core_user(config: &Config) -> Option<(usize, &User)> {
    keyed(&config.passwd.users, |u| u.name.as_str())
        .get(CORE_USER)
        .copied()
}

fn password_hash(user: Option<&User>) -> Option<String> {
    user.and_then(|u| u.password_hash.clone())
        .filter(|h| !h.is_empty())
}

fn plan_core_user(cur: &Config, des: &Config) -> Vec<Action> {
    let c = core_user(cur).map(|(_, u)| u);
    let d = core_user(des).map(|(_, u)| u);
    let keys = |u: Option<&User>| u.map(|u| u.ssh_authorized_keys.clone()).unwrap_or_default();
    let mut out = Vec::new();
    if keys(c) != keys(d) {
        out.push(Action::WriteSshKeys {
            user: CORE_USER.to_string(),
            keys: keys(d),
        });
    }
    if password_hash(c) != password_hash(d) {
        out.push(Action::SetPasswordHash {
            user: CORE_USER.to_string(),
            hash: password_hash(d),
        });
    }
    out
}

fn plan_os(current: &MachineConfigSpec, desired: &MachineConfigSpec) -> Vec<Action> {
    let mut out = Vec::new();
    if !desired.os_image_url.is_empty() && desired.os_image_url != current.os_image_url {
        out.push(Action::OsImage {
            from: current.os_image_url.clone(),
            to: desired.os_image_url.clone(),
        });
    }
    let cur_kargs = split_kernel_arguments(&current.kernel_arguments);
    let des_kargs = split_kernel_arguments(&desired.kernel_arguments);
    if cur_kargs != des_kargs {
        let diff = diff_kernel_arguments(&cur_kargs, &des_kargs);
        out.push(Action::KernelArguments {
            delete: diff.delete,
            append: diff.append,
        });
    }
    if current.kernel_type != desired.kernel_type {
        out.push(Action::KernelType {
            from: current.kernel_type,
            to: desired.kernel_type,
        });
    }
    let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<String>>();
    if set(&current.extensions) != set(&desired.extensions) {
        out.push(Action::Extensions {
            from: current.extensions.clone(),
            to: desired.extensions.clone(),
        });
    }
    out
}

/// The changes the disruption is decided for: one per file path, one per unit, then users and
/// the OS, in action order.
fn changes_of(actions: &[Action]) -> Vec<Change> {
    let mut out: Vec<Change> = Vec::new();
    let mut seen: HashSet<Change> = HashSet::new();
    let mut push = |c: Change| {
        if seen.insert(c.clone()) {
            out.push(c);
        }
    };
    for a in actions {
        if let Some(unit) = a.unit() {
            push(Change::Unit {
                name: unit.to_string(),
            });
            continue;
        }
        match a {
            Action::WriteFile { file } => push(Change::File {
                path: file.path.clone(),
                removed: false,
            }),
            Action::DeleteFile { path } => push(Change::File {
                path: path.clone(),
                removed: true,
            }),
            Action::WriteSshKeys { .. } => push(Change::SshKeys),
            Action::SetPasswordHash { .. } => push(Change::PasswordHash),
            Action::KernelArguments { .. } => push(Change::KernelArguments),
            Action::KernelType { from, to } => push(Change::KernelType {
                from: *from,
                to: *to,
            }),
            Action::Extensions { .. } => push(Change::Extensions),
            Action::OsImage { .. } => push(Change::OsImage),
            _ => {}
        }
    }
    out
}
