//! Properties of plans over generated configs: plan(A, A) is empty, and applying a plan's actions
//! to a model of a node in state `current` yields exactly `desired` (the plan never loses a
//! field), with the ordering rules an agent relies on checked on the way.

use crate::plan_support as support;

use hearth_config::disruption::Change;
use hearth_config::ignition::{Directory, Dropin, File, Group, Resource, Unit, User};
use hearth_config::model::{DisruptionPolicies, KernelType, MachineConfigSpec};
use hearth_config::plan::{apply_kernel_argument_ops, plan, split_kernel_arguments, Action};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use support::owner;

// ---------------------------------------------------------------------------------------------
// Generators: few distinct names and values, so that entries collide, repeat and change.
// ---------------------------------------------------------------------------------------------

fn pick<T: Clone + std::fmt::Debug + 'static>(v: Vec<T>) -> impl Strategy<Value = T> {
    prop::sample::select(v)
}

fn gen_file() -> impl Strategy<Value = File> {
    (
        pick(vec![
            "/etc/a",
            "/etc/b",
            "/etc/c/d",
            "/etc/containers/policy.json",
            "/etc/systemd/system/e.service",
        ]),
        pick(vec![None, Some("data:,1"), Some("data:,2")]),
        pick(vec![None, Some(0o644), Some(0o600)]),
        pick(vec![None, Some(true)]),
        any::<bool>(),
    )
        .prop_map(|(path, source, mode, overwrite, owned)| File {
            path: path.into(),
            overwrite,
            user: if owned {
                owner("core")
            } else {
                Default::default()
            },
            contents: Resource {
                source: source.map(str::to_string),
                ..Default::default()
            },
            mode,
            ..Default::default()
        })
}

fn gen_contents() -> impl Strategy<Value = Option<String>> {
    pick(vec![
        None,
        Some(""),
        Some("[Unit]\n"),
        Some("[Unit]\nX=1\n"),
    ])
    .prop_map(|c| c.map(str::to_string))
}

fn gen_dropin() -> impl Strategy<Value = Dropin> {
    (
        pick(vec!["1.conf", "2.conf"]),
        pick(vec![None, Some(""), Some("A"), Some("B")]),
    )
        .prop_map(|(name, contents)| Dropin {
            name: name.into(),
            contents: contents.map(str::to_string),
        })
}

fn gen_unit() -> impl Strategy<Value = Unit> {
    (
        pick(vec!["a.service", "b.service", "c.service", "d.timer"]),
        gen_contents(),
        prop::collection::vec(gen_dropin(), 0..3),
        pick(vec![None, Some(true), Some(false)]),
        pick(vec![None, None, Some(true), Some(false)]),
    )
        .prop_map(|(name, contents, dropins, enabled, mask)| Unit {
            name: name.into(),
            contents,
            dropins,
            enabled,
            mask,
        })
}

fn gen_core() -> impl Strategy<Value = Option<User>> {
    prop::option::of((
        prop::collection::vec(pick(vec!["k1", "k2", "k3"]), 0..3),
        pick(vec![None, Some(""), Some("$6$a"), Some("$6$b")]),
    ))
    .prop_map(|o| {
        o.map(|(keys, hash)| User {
            name: "core".into(),
            ssh_authorized_keys: keys.into_iter().map(str::to_string).collect(),
            password_hash: hash.map(str::to_string),
            ..Default::default()
        })
    })
}

fn gen_karg() -> impl Strategy<Value = String> {
    pick(vec!["nosmt", "y=0", "y=1", "z=4", "quiet"]).prop_map(str::to_string)
}

/// Specs made only of what can change on day 2.
fn gen_spec() -> impl Strategy<Value = MachineConfigSpec> {
    (
        prop::collection::vec(gen_file(), 0..5),
        prop::collection::vec(gen_unit(), 0..5),
        gen_core(),
        prop::collection::vec(gen_karg(), 0..6),
        pick(vec![KernelType::Default, KernelType::Realtime]),
        pick(vec!["", "quay.io/os@sha256:1", "quay.io/os@sha256:2"]),
        prop::collection::vec(pick(vec!["usbguard", "kerberos", "kernel-devel"]), 0..3),
    )
        .prop_map(|(files, units, core, kargs, kernel_type, image, ext)| {
            let mut s = MachineConfigSpec::default();
            s.config.storage.files = files;
            s.config.systemd.units = units;
            s.config.passwd.users = core.into_iter().collect();
            s.kernel_arguments = kargs;
            s.kernel_type = kernel_type;
            s.os_image_url = image.into();
            s.extensions = ext.into_iter().map(str::to_string).collect();
            s
        })
}

/// Specs with day-1 fields too.
fn gen_full_spec() -> impl Strategy<Value = MachineConfigSpec> {
    (
        gen_spec(),
        any::<bool>(),
        prop::collection::vec(pick(vec!["/var/a", "/var/b"]), 0..2),
        any::<bool>(),
        prop::collection::vec(pick(vec!["nosmt", "quiet"]), 0..2),
        pick(vec![None, Some(10i64)]),
    )
        .prop_map(|(mut s, fips, dirs, admin, ign_kargs, timeout)| {
            s.fips = fips;
            s.config.storage.directories = dirs
                .into_iter()
                .map(|p| Directory {
                    path: p.into(),
                    ..Default::default()
                })
                .collect();
            if admin {
                s.config.passwd.users.push(User {
                    name: "admin".into(),
                    ..Default::default()
                });
                s.config.passwd.groups.push(Group {
                    name: "admin".into(),
                    ..Default::default()
                });
            }
            s.config.kernel_arguments.should_exist =
                ign_kargs.into_iter().map(str::to_string).collect();
            s.config.ignition.timeouts.http_total = timeout;
            s
        })
}

// ---------------------------------------------------------------------------------------------
// A model node and the agent's semantics of each action.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum UnitFile {
    Content(String),
    Masked,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Enablement {
    /// What hearth last asserted (`None`: the preset, or never touched).
    Known(Option<bool>),
    /// Not applied (the unit was masked).
    Unknown,
}

/// A file as it lands on a node: `overwrite` only matters to Ignition at first boot (the agent
/// always replaces the file), so an unset flag and `true` leave the same node.
fn on_disk(f: &File) -> File {
    File {
        overwrite: Some(f.overwrite.unwrap_or(true)),
        ..f.clone()
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Node {
    files: BTreeMap<String, File>,
    unit_files: BTreeMap<String, UnitFile>,
    dropins: BTreeMap<(String, String), String>,
    enablement: BTreeMap<String, Enablement>,
    keys: Vec<String>,
    password: Option<String>,
    kargs: Vec<String>,
    kernel_type: KernelType,
    os_image: String,
    extensions: BTreeSet<String>,
    /// Unit files changed since the last daemon-reload.
    dirty: bool,
}

fn nonempty(c: &Option<String>) -> Option<String> {
    c.clone().filter(|c| !c.is_empty())
}

/// The last entry of each key, as rendered configs are read.
fn last_by<T: Clone>(items: &[T], key: impl Fn(&T) -> String) -> BTreeMap<String, T> {
    items.iter().map(|i| (key(i), i.clone())).collect()
}

impl Node {
    /// A node on which `spec` was fully applied.
    fn from_spec(spec: &MachineConfigSpec) -> Node {
        let c = &spec.config;
        let units = last_by(&c.systemd.units, |u| u.name.clone());
        let mut unit_files = BTreeMap::new();
        let mut dropins = BTreeMap::new();
        let mut enablement = BTreeMap::new();
        for (name, u) in &units {
            let masked = u.mask == Some(true);
            if masked {
                unit_files.insert(name.clone(), UnitFile::Masked);
                enablement.insert(name.clone(), Enablement::Unknown);
            } else {
                if let Some(text) = nonempty(&u.contents) {
                    unit_files.insert(name.clone(), UnitFile::Content(text));
                }
                enablement.insert(name.clone(), Enablement::Known(u.enabled));
            }
            for (dname, d) in last_by(&u.dropins, |d| d.name.clone()) {
                if let Some(text) = nonempty(&d.contents) {
                    dropins.insert((name.clone(), dname), text);
                }
            }
        }
        let core = last_by(&c.passwd.users, |u| u.name.clone()).remove("core");
        Node {
            files: last_by(&c.storage.files, |f| f.path.clone())
                .into_iter()
                .map(|(k, f)| (k, on_disk(&f)))
                .collect(),
            unit_files,
            dropins,
            enablement,
            keys: core
                .as_ref()
                .map(|u| u.ssh_authorized_keys.clone())
                .unwrap_or_default(),
            password: core.and_then(|u| nonempty(&u.password_hash)),
            kargs: split_kernel_arguments(&spec.kernel_arguments),
            kernel_type: spec.kernel_type,
            os_image: spec.os_image_url.clone(),
            extensions: spec.extensions.iter().cloned().collect(),
            dirty: false,
        }
    }

    fn enablement(&self, name: &str) -> Enablement {
        self.enablement
            .get(name)
            .copied()
            .unwrap_or(Enablement::Known(None))
    }

    /// Runs one action as the agent would, refusing what an agent could not do.
    fn apply(&mut self, a: &Action) -> Result<(), String> {
        let unit_path = |p: &str| p.starts_with("/etc/systemd/system/");
        match a {
            Action::WriteFile { file } => {
                self.dirty |= unit_path(&file.path);
                self.files.insert(file.path.clone(), on_disk(file));
            }
            Action::DeleteFile { path } => {
                self.files
                    .remove(path)
                    .ok_or(format!("deleting absent file {path}"))?;
                self.dirty |= unit_path(path);
            }
            Action::WriteUnit { name, contents } => {
                if self.unit_files.get(name) == Some(&UnitFile::Masked) {
                    return Err(format!("writing {name} through its /dev/null link"));
                }
                if contents.is_empty() {
                    return Err(format!("writing empty unit {name}"));
                }
                self.unit_files
                    .insert(name.clone(), UnitFile::Content(contents.clone()));
                self.dirty = true;
            }
            Action::DeleteUnit { name } => match self.unit_files.remove(name) {
                Some(UnitFile::Content(_)) => self.dirty = true,
                other => return Err(format!("deleting unit {name} in state {other:?}")),
            },
            Action::WriteDropin {
                unit,
                name,
                contents,
            } => {
                if contents.is_empty() {
                    return Err(format!("writing empty drop-in {unit}/{name}"));
                }
                self.dropins
                    .insert((unit.clone(), name.clone()), contents.clone());
                self.dirty = true;
            }
            Action::DeleteDropin { unit, name } => {
                self.dropins.remove(&(unit.clone(), name.clone()));
                self.dirty = true;
            }
            Action::DaemonReload => self.dirty = false,
            Action::EnableUnit { name } | Action::PresetUnit { name } => {
                if self.dirty {
                    return Err(format!("{a} before daemon-reload"));
                }
                if self.unit_files.get(name) == Some(&UnitFile::Masked) {
                    return Err(format!("{a} on a masked unit"));
                }
                let state = matches!(a, Action::EnableUnit { .. }).then_some(true);
                self.enablement
                    .insert(name.clone(), Enablement::Known(state));
            }
            Action::DisableUnit { name } => {
                self.enablement
                    .insert(name.clone(), Enablement::Known(Some(false)));
            }
            Action::MaskUnit { name } => {
                if self.dirty {
                    return Err(format!("{a} before daemon-reload"));
                }
                if self.unit_files.insert(name.clone(), UnitFile::Masked) == Some(UnitFile::Masked)
                {
                    return Err(format!("masking masked unit {name}"));
                }
            }
            Action::UnmaskUnit { name } => {
                if self.unit_files.remove(name) != Some(UnitFile::Masked) {
                    return Err(format!("unmasking unit {name} that is not masked"));
                }
                self.enablement.insert(name.clone(), Enablement::Unknown);
                self.dirty = true;
            }
            Action::WriteSshKeys { user, keys } => {
                if user != "core" {
                    return Err(format!("keys for {user}"));
                }
                self.keys = keys.clone();
            }
            Action::SetPasswordHash { hash, .. } => self.password = hash.clone(),
            Action::KernelArguments { delete, append } => {
                for d in delete {
                    if !self.kargs.contains(d) {
                        return Err(format!("deleting absent kernel argument {d}"));
                    }
                }
                self.kargs = apply_kernel_argument_ops(&self.kargs, delete, append);
            }
            Action::KernelType { from, to } => {
                if *from != self.kernel_type {
                    return Err(format!(
                        "kernel type from {from}, node has {}",
                        self.kernel_type
                    ));
                }
                self.kernel_type = *to;
            }
            Action::OsImage { from, to } => {
                if *from != self.os_image {
                    return Err(format!("OS image from {from}, node has {}", self.os_image));
                }
                self.os_image = to.clone();
            }
            Action::Extensions { from, to } => {
                if from.iter().cloned().collect::<BTreeSet<_>>() != self.extensions {
                    return Err("extensions from another set".into());
                }
                self.extensions = to.iter().cloned().collect();
            }
        }
        Ok(())
    }
}

fn run(current: &MachineConfigSpec, desired: &MachineConfigSpec) -> Result<(), TestCaseError> {
    // Leaving core with no way in is refused on purpose (the MCO's rule; tested in
    // mco_reconcile_test.rs), so such pairs are not "reconcilable changes" to apply here.
    prop_assume!(hearth_config::mco::core_lockout(&current.config, &desired.config).is_none());
    let p = plan(current, desired, &DisruptionPolicies::default());
    prop_assert!(p.is_reconcilable(), "{}", p);
    let mut node = Node::from_spec(current);
    for a in &p.actions {
        if let Err(e) = node.apply(a) {
            return Err(TestCaseError::fail(format!("{e}\nplan:\n{p}")));
        }
    }
    prop_assert!(
        !node.dirty,
        "unit files changed without a final daemon-reload:\n{}",
        p
    );

    let mut want = Node::from_spec(desired);
    if desired.os_image_url.is_empty() {
        want.os_image = current.os_image_url.clone();
    }
    prop_assert_eq!(&node.files, &want.files, "files\n{}", p);
    prop_assert_eq!(&node.unit_files, &want.unit_files, "unit files\n{}", p);
    prop_assert_eq!(&node.dropins, &want.dropins, "drop-ins\n{}", p);
    prop_assert_eq!(&node.keys, &want.keys, "keys\n{}", p);
    prop_assert_eq!(&node.password, &want.password, "password\n{}", p);
    prop_assert_eq!(&node.kargs, &want.kargs, "kargs\n{}", p);
    prop_assert_eq!(node.kernel_type, want.kernel_type);
    prop_assert_eq!(&node.os_image, &want.os_image);
    prop_assert_eq!(&node.extensions, &want.extensions);

    // Enablement: what the desired config sets is asserted; an unset `enabled` is never left
    // enabled or disabled by hearth; removed units are not left enabled.
    let desired_units = last_by(&desired.config.systemd.units, |u| u.name.clone());
    for (name, u) in &desired_units {
        if u.mask == Some(true) {
            continue;
        }
        let got = node.enablement(name);
        match u.enabled {
            Some(b) => prop_assert_eq!(got, Enablement::Known(Some(b)), "{}\n{}", name, p),
            None => prop_assert!(
                !matches!(got, Enablement::Known(Some(_))),
                "{} left {:?}\n{}",
                name,
                got,
                p
            ),
        }
    }
    for name in last_by(&current.config.systemd.units, |u| u.name.clone()).keys() {
        if !desired_units.contains_key(name) {
            prop_assert_ne!(
                node.enablement(name),
                Enablement::Known(Some(true)),
                "{}\n{}",
                name,
                p
            );
        }
    }

    // Every changed file has a disruption decision.
    let cur_files = last_by(&current.config.storage.files, |f| f.path.clone());
    let des_files = last_by(&desired.config.storage.files, |f| f.path.clone());
    let paths: BTreeSet<&String> = cur_files.keys().chain(des_files.keys()).collect();
    for path in paths {
        if cur_files.get(path).map(on_disk) != des_files.get(path).map(on_disk) {
            prop_assert!(
                p.disruption
                    .decisions
                    .iter()
                    .any(|d| matches!(&d.change, Change::File { path: q, .. } if q == path)),
                "no decision for {}\n{}",
                path,
                p
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn plan_of_a_config_to_itself_is_empty(a in gen_full_spec()) {
        let p = plan(&a, &a, &DisruptionPolicies::default());
        prop_assert!(p.is_empty(), "{}", p);
        prop_assert!(p.is_reconcilable());
    }

    #[test]
    fn applying_the_plan_yields_desired(current in gen_spec(), desired in gen_spec()) {
        run(&current, &desired)?;
    }

    #[test]
    fn applying_the_plan_from_an_empty_node_yields_desired(desired in gen_spec()) {
        run(&MachineConfigSpec::default(), &desired)?;
    }
}
