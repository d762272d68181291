//! Builders shared by the `plan_*` integration tests (declared once in `tests/main.rs`, used as
//! `support` by each).
#![allow(dead_code)]

use hearth_config::dataurl;
use hearth_config::ignition::{Dropin, File, NodeOwner, Resource, Unit, User};
use hearth_config::model::{DisruptionPolicies, MachineConfigSpec};
use hearth_config::plan::{plan, Action, Plan};

/// A file with `text` as a base64 `data:` URL, mode 0644, overwrite.
pub fn file(path: &str, text: &str) -> File {
    File {
        path: path.to_string(),
        overwrite: Some(true),
        contents: Resource {
            source: Some(dataurl::encode(text.as_bytes())),
            ..Default::default()
        },
        mode: Some(0o644),
        ..Default::default()
    }
}

/// A unit with optional contents.
pub fn unit(name: &str, contents: Option<&str>) -> Unit {
    Unit {
        name: name.to_string(),
        contents: contents.map(str::to_string),
        ..Default::default()
    }
}

/// A drop-in.
pub fn dropin(name: &str, contents: Option<&str>) -> Dropin {
    Dropin {
        name: name.to_string(),
        contents: contents.map(str::to_string),
    }
}

/// User `core` with SSH keys.
pub fn core(keys: &[&str]) -> User {
    User {
        name: "core".into(),
        ssh_authorized_keys: keys.iter().map(|k| k.to_string()).collect(),
        ..Default::default()
    }
}

/// An owner by name.
pub fn owner(name: &str) -> NodeOwner {
    NodeOwner {
        id: None,
        name: Some(name.into()),
    }
}

/// Strings.
pub fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// A spec built by `f` from the default.
pub fn spec(f: impl FnOnce(&mut MachineConfigSpec)) -> MachineConfigSpec {
    let mut s = MachineConfigSpec::default();
    f(&mut s);
    s
}

/// The plan with no user policies.
pub fn plan_default(current: &MachineConfigSpec, desired: &MachineConfigSpec) -> Plan {
    plan(current, desired, &DisruptionPolicies::default())
}

/// The actions as their one-line descriptions.
pub fn lines(p: &Plan) -> Vec<String> {
    p.actions.iter().map(|a| a.to_string()).collect()
}

/// Position of the first action matching `f`.
pub fn position(p: &Plan, f: impl Fn(&Action) -> bool) -> Option<usize> {
    p.actions.iter().position(f)
}

/// How many `DaemonReload` actions the plan has.
pub fn daemon_reloads(p: &Plan) -> usize {
    p.actions
        .iter()
        .filter(|a| matches!(a, Action::DaemonReload))
        .count()
}
