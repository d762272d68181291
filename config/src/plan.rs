//! Planning: what the agent must do to take a node from one rendered config (`current`) to
//! another (`desired`), what that disrupts, and what cannot be done on a running node.
//!
//! [`plan`] compares the two specs field by field and returns a [`Plan`]:
//!
//! * [`Plan::actions`]: the steps, in the order the agent runs them (see [`Action`] for the
//!   phases);
//! * [`Plan::disruption`]: what the node must do afterwards (nothing, service steps, or reboot),
//!   with a reason for every change (see [`crate::disruption`]);
//! * [`Plan::unreconcilable`]: every changed field the MCO cannot apply on day 2. Such a plan still
//!   lists its actions, but [`Plan::is_reconcilable`] is false and the agent must not run it.
//!
//! The plan is pure data: it carries everything the agent needs (a file write carries the whole
//! Ignition file entry) and serialises to JSON for `hearth plan -o json`. See `docs/plan.md`.

use crate::dataurl;
use crate::disruption::{self, Change, Disruption};
use crate::ignition::{Config, Dropin, File, NodeOwner, Unit, User};
pub use crate::kargs::{
    apply_kernel_argument_ops, diff_kernel_arguments, split_kernel_arguments, KernelArgumentsDiff,
};
use crate::model::{DisruptionPolicies, KernelType, MachineConfigSpec};
use indexmap::IndexMap;
use serde::Serialize;
use std::collections::{BTreeSet, HashSet};
use std::fmt;

/// The only user that can be managed on day 2.
pub const CORE_USER: &str = "core";

/// Where unit files and drop-ins are written.
pub const SYSTEMD_UNIT_DIR: &str = "/etc/systemd/system";

/// One step of a plan. Actions appear in this order (each phase only when needed):
///
/// 1. files: `DeleteFile` for removed files, then `WriteFile` for added or changed ones;
/// 2. units, one unit after the other (desired order, then removed units): `UnmaskUnit` (a unit
///    leaving the mask, so its path can be written), `DisableUnit` (an enabled unit whose file is
///    about to be rewritten or deleted, as the MCO does so that changed `[Install]` sections leave
///    no stale links; always for a removed unit with a unit file), `WriteDropin`/`DeleteDropin`,
///    then `WriteUnit`/`DeleteUnit`;
/// 3. `DaemonReload`, exactly when a unit file or drop-in was written, deleted or unmasked (also
///    through a `storage.files` entry under `/etc/systemd/system/`);
/// 4. unit state (desired order): `EnableUnit`, `DisableUnit`, `PresetUnit`, `MaskUnit`; then
///    `PresetUnit` for removed units that had `enabled` set and no unit file of their own;
/// 5. user `core`: `WriteSshKeys`, `SetPasswordHash`;
/// 6. the OS, as the MCO orders it: `OsImage`, `KernelArguments`, `KernelType`, `Extensions`.
///
/// The disruption ([`Plan::disruption`]) comes last: a drain it asks for happens before the first
/// action, service steps and the reboot after the last.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum Action {
    /// Write a file (create or replace it atomically) exactly as the Ignition entry says:
    /// contents, mode, owner. On first write, the agent saves the original if there is one.
    WriteFile {
        /// The desired config's entry.
        file: File,
    },
    /// A file left the config: restore the original the agent saved when it first wrote the
    /// path, or delete the file.
    DeleteFile {
        /// Path.
        path: String,
    },
    /// Write `/etc/systemd/system/NAME`.
    WriteUnit {
        /// Unit name.
        name: String,
        /// Unit file contents (never empty).
        contents: String,
    },
    /// Delete (or restore the original of) `/etc/systemd/system/NAME`.
    DeleteUnit {
        /// Unit name.
        name: String,
    },
    /// Write `/etc/systemd/system/UNIT.d/NAME`.
    WriteDropin {
        /// Unit name.
        unit: String,
        /// Drop-in file name.
        name: String,
        /// Contents (never empty).
        contents: String,
    },
    /// Delete (or restore the original of) `/etc/systemd/system/UNIT.d/NAME`. Also what a
    /// drop-in with empty or absent contents means, as in the MCO.
    DeleteDropin {
        /// Unit name.
        unit: String,
        /// Drop-in file name.
        name: String,
    },
    /// `systemctl daemon-reload`.
    DaemonReload,
    /// `systemctl enable NAME`.
    EnableUnit {
        /// Unit name.
        name: String,
    },
    /// `systemctl disable NAME`.
    DisableUnit {
        /// Unit name.
        name: String,
    },
    /// Mask: replace `/etc/systemd/system/NAME` (a unit file hearth wrote, if any) with a symlink
    /// to `/dev/null` (`systemctl mask`, which reloads systemd itself).
    MaskUnit {
        /// Unit name.
        name: String,
    },
    /// Unmask: remove the `/dev/null` symlink at `/etc/systemd/system/NAME`.
    UnmaskUnit {
        /// Unit name.
        name: String,
    },
    /// `systemctl preset NAME`: `enabled` is no longer set, so the unit goes back to its preset.
    PresetUnit {
        /// Unit name.
        name: String,
    },
    /// Replace the SSH authorized keys hearth manages for the user (on CoreOS,
    /// `~core/.ssh/authorized_keys.d/ignition`).
    WriteSshKeys {
        /// Always `core`.
        user: String,
        /// The keys, in order (empty: remove them all).
        keys: Vec<String>,
    },
    /// Set the user's password hash (`usermod -p`); `None` locks the password (`*`), as the MCO
    /// does for an absent or empty hash.
    SetPasswordHash {
        /// Always `core`.
        user: String,
        /// The hash.
        hash: Option<String>,
    },
    /// Change kernel arguments: delete each entry of `delete` (one entry removes the first
    /// remaining occurrence of exactly that argument), then append `append` in order. See
    /// [`diff_kernel_arguments`].
    KernelArguments {
        /// Arguments to delete, one entry per occurrence.
        delete: Vec<String>,
        /// Arguments to append, in order.
        append: Vec<String>,
    },
    /// Switch the kernel.
    KernelType {
        /// Before.
        from: KernelType,
        /// After.
        to: KernelType,
    },
    /// Move to another OS image.
    OsImage {
        /// Before (empty when the current config named none).
        from: String,
        /// After.
        to: String,
    },
    /// Change the installed extensions.
    Extensions {
        /// Before.
        from: Vec<String>,
        /// After.
        to: Vec<String>,
    },
}

impl Action {
    /// The systemd unit this action concerns, if any.
    pub fn unit(&self) -> Option<&str> {
        match self {
            Action::WriteUnit { name, .. }
            | Action::DeleteUnit { name }
            | Action::EnableUnit { name }
            | Action::DisableUnit { name }
            | Action::MaskUnit { name }
            | Action::UnmaskUnit { name }
            | Action::PresetUnit { name } => Some(name),
            Action::WriteDropin { unit, .. } | Action::DeleteDropin { unit, .. } => Some(unit),
            _ => None,
        }
    }

    /// True when the action changes what systemd reads from disk (a unit file or drop-in), so
    /// that a `DaemonReload` must follow.
    pub fn changes_unit_files(&self) -> bool {
        match self {
            Action::WriteUnit { .. }
            | Action::DeleteUnit { .. }
            | Action::WriteDropin { .. }
            | Action::DeleteDropin { .. }
            | Action::UnmaskUnit { .. } => true,
            Action::WriteFile { file } => is_systemd_unit_path(&file.path),
            Action::DeleteFile { path } => is_systemd_unit_path(path),
            _ => false,
        }
    }
}

fn is_systemd_unit_path(path: &str) -> bool {
    path.strip_prefix(SYSTEMD_UNIT_DIR)
        .is_some_and(|rest| rest.len() > 1 && rest.starts_with('/'))
}

fn unit_path(name: &str) -> String {
    format!("{SYSTEMD_UNIT_DIR}/{name}")
}

fn dropin_path(unit: &str, name: &str) -> String {
    format!("{SYSTEMD_UNIT_DIR}/{unit}.d/{name}")
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn owner_text(o: &NodeOwner) -> Option<String> {
    match (&o.name, o.id) {
        (Some(n), _) => Some(n.clone()),
        (None, Some(id)) => Some(id.to_string()),
        (None, None) => None,
    }
}

/// `mode 0644, owner core:core, 123 bytes`.
fn file_details(f: &File) -> String {
    let mut parts = Vec::new();
    parts.push(match f.mode {
        Some(m) => format!("mode {m:04o}"),
        None => "default mode".to_string(),
    });
    let user = owner_text(&f.user);
    let group = owner_text(&f.group);
    if user.is_some() || group.is_some() {
        parts.push(format!(
            "owner {}:{}",
            user.unwrap_or_else(|| "root".into()),
            group.unwrap_or_else(|| "root".into())
        ));
    }
    match &f.contents.source {
        None => parts.push("no contents".to_string()),
        // Counted without keeping the contents (a gzip stream is inflated into a counter).
        Some(src) => match dataurl::decoded_len(
            src,
            f.contents.compression.as_deref(),
            dataurl::MAX_DECODED_BYTES,
        ) {
            Ok(len) => parts.push(plural(len, "byte", "bytes")),
            Err(_) => match dataurl::scheme(src) {
                Some(s) if s != "data" => parts.push(format!("contents from a {s} URL")),
                _ => parts.push("undecodable contents".to_string()),
            },
        },
    }
    if !f.append.is_empty() {
        parts.push(format!(
            "append {}",
            plural(f.append.len(), "fragment", "fragments")
        ));
    }
    parts.join(", ")
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "(none)".to_string()
    } else {
        items.join(", ")
    }
}

impl fmt::Display for Action {
    /// One line for people: `write file /etc/chrony.conf (mode 0644, 123 bytes)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::WriteFile { file } => {
                write!(f, "write file {} ({})", file.path, file_details(file))
            }
            Action::DeleteFile { path } => {
                write!(f, "delete file {path} (or restore its original)")
            }
            Action::WriteUnit { name, contents } => write!(
                f,
                "write unit {name} ({})",
                plural(contents.len(), "byte", "bytes")
            ),
            Action::DeleteUnit { name } => write!(f, "delete unit {name}"),
            Action::WriteDropin {
                unit,
                name,
                contents,
            } => write!(
                f,
                "write drop-in {unit}.d/{name} ({})",
                plural(contents.len(), "byte", "bytes")
            ),
            Action::DeleteDropin { unit, name } => write!(f, "delete drop-in {unit}.d/{name}"),
            Action::DaemonReload => f.write_str("daemon-reload"),
            Action::EnableUnit { name } => write!(f, "enable unit {name}"),
            Action::DisableUnit { name } => write!(f, "disable unit {name}"),
            Action::MaskUnit { name } => write!(f, "mask unit {name}"),
            Action::UnmaskUnit { name } => write!(f, "unmask unit {name}"),
            Action::PresetUnit { name } => write!(f, "preset unit {name}"),
            Action::WriteSshKeys { user, keys } => write!(
                f,
                "write SSH keys of user {user} ({})",
                plural(keys.len(), "key", "keys")
            ),
            Action::SetPasswordHash {
                user,
                hash: Some(_),
            } => write!(f, "set password hash of user {user}"),
            Action::SetPasswordHash { user, hash: None } => {
                write!(f, "lock password of user {user} (no hash)")
            }
            Action::KernelArguments { delete, append } => {
                f.write_str("kernel arguments:")?;
                for d in delete {
                    write!(f, " -{d}")?;
                }
                for a in append {
                    write!(f, " +{a}")?;
                }
                Ok(())
            }
            Action::KernelType { from, to } => write!(f, "kernel type: {from} -> {to}"),
            Action::OsImage { from, to } => {
                let from = if from.is_empty() { "(unset)" } else { from };
                write!(f, "OS image: {from} -> {to}")
            }
            Action::Extensions { from, to } => {
                write!(
                    f,
                    "extensions: {} -> {}",
                    list_or_none(from),
                    list_or_none(to)
                )
            }
        }
    }
}

/// A changed field that cannot be applied to a running node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreconcilable {
    /// Field path in the MachineConfig (`spec.config.passwd.users[1]`), with the index in the
    /// desired config, or in the current one for removed entries.
    pub path: String,
    /// What changed and what to do instead.
    pub reason: String,
}

impl fmt::Display for Unreconcilable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

/// A plan that must not be applied: every field the node cannot take on day 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the node cannot be updated in place ({} unreconcilable {}): {}",
    .fields.len(),
    if .fields.len() == 1 { "change" } else { "changes" },
    .fields.iter().map(|u| u.to_string()).collect::<Vec<_>>().join("; "))]
pub struct UnreconcilableError {
    /// Every offending field.
    pub fields: Vec<Unreconcilable>,
}

/// What a node must do to go from one rendered config to another.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// The steps, in execution order (see [`Action`]).
    pub actions: Vec<Action>,
    /// What the node must do once the actions are applied, and why.
    pub disruption: Disruption,
    /// Changed fields that cannot be applied on day 2 (empty for a plan the agent may run).
    pub unreconcilable: Vec<Unreconcilable>,
}

impl Plan {
    /// True when nothing changes: no action, no disruption decision, nothing unreconcilable.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
            && self.unreconcilable.is_empty()
            && self.disruption.decisions.is_empty()
    }

    /// True when the agent may apply the plan.
    pub fn is_reconcilable(&self) -> bool {
        self.unreconcilable.is_empty()
    }

    /// `Ok` when the agent may apply the plan, else every unreconcilable field.
    pub fn check_reconcilable(&self) -> Result<(), UnreconcilableError> {
        if self.unreconcilable.is_empty() {
            Ok(())
        } else {
            Err(UnreconcilableError {
                fields: self.unreconcilable.clone(),
            })
        }
    }

    /// The plan for people (the [`Display`](fmt::Display) form).
    pub fn summary(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Plan {
    /// One line per action, then the disruption with a reason per change, then the
    /// unreconcilable fields.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return writeln!(f, "no changes");
        }
        if self.actions.is_empty() {
            writeln!(f, "actions: none")?;
        } else {
            writeln!(f, "actions:")?;
            let width = self.actions.len().to_string().len();
            for (i, a) in self.actions.iter().enumerate() {
                writeln!(f, "  {:>width$}. {a}", i + 1)?;
            }
        }
        write!(f, "{}", self.disruption)?;
        if !self.unreconcilable.is_empty() {
            writeln!(
                f,
                "unreconcilable: the node cannot be updated in place ({}):",
                plural(self.unreconcilable.len(), "field", "fields")
            )?;
            for u in &self.unreconcilable {
                writeln!(f, "  - {u}")?;
            }
        }
        Ok(())
    }
}

/// Entries keyed by name: the last entry of a name wins, at the position of the first; each
/// value carries the index of the entry it came from.
fn keyed<'a, T>(
    items: &'a [T],
    key: impl Fn(&'a T) -> &'a str,
) -> IndexMap<&'a str, (usize, &'a T)> {
    let mut out = IndexMap::new();
    for (i, item) in items.iter().enumerate() {
        out.insert(key(item), (i, item));
    }
    out
}

/// Non-empty contents (empty and absent contents mean the same: nothing to write).
fn content(contents: &Option<String>) -> Option<&str> {
    contents.as_deref().filter(|c| !c.is_empty())
}

fn masked(unit: &Unit) -> bool {
    unit.mask == Some(true)
}

fn enablement_action(name: &str, enabled: Option<bool>) -> Action {
    let name = name.to_string();
    match enabled {
        Some(true) => Action::EnableUnit { name },
        Some(false) => Action::DisableUnit { name },
        None => Action::PresetUnit { name },
    }
}

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
    let mut unit_owned: HashSet<String> = HashSet::new();
    for u in &des.systemd.units {
        if masked(u) || content(&u.contents).is_some() {
            unit_owned.insert(unit_path(&u.name));
        }
        for d in &u.dropins {
            if content(&d.contents).is_some() {
                unit_owned.insert(dropin_path(&u.name, &d.name));
            }
        }
    }

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

struct UnitPlan {
    /// Phase 2: unit files and drop-ins (with unmask and pre-write disables).
    files: Vec<Action>,
    /// Phase 4: enablement and masks.
    state: Vec<Action>,
}

fn plan_units(cur: &Config, des: &Config, desired_files: &HashSet<&str>) -> UnitPlan {
    let cur_units = keyed(&cur.systemd.units, |u| u.name.as_str());
    let des_units = keyed(&des.systemd.units, |u| u.name.as_str());
    let mut files = Vec::new();
    let mut state = Vec::new();
    // Deleting a path that a desired `storage.files` entry writes would undo that write.
    let may_delete = |path: String| !desired_files.contains(path.as_str());

    for (name, (_, d)) in &des_units {
        let name = name.to_string();
        let c = cur_units.get(name.as_str()).map(|(_, u)| *u);
        let cur_masked = c.is_some_and(masked);
        let des_masked = masked(d);
        let cur_content = c.and_then(|c| content(&c.contents));
        let des_content = content(&d.contents);
        // A unit file hearth wrote is on disk (a masked unit's path is the /dev/null link).
        let file_on_disk = !cur_masked && cur_content.is_some();

        if cur_masked && !des_masked {
            files.push(Action::UnmaskUnit { name: name.clone() });
        }
        let write =
            !des_masked && des_content.is_some() && (cur_masked || cur_content != des_content);
        let delete =
            !des_masked && des_content.is_none() && file_on_disk && may_delete(unit_path(&name));
        let pre_disable =
            (write || delete) && file_on_disk && c.is_some_and(|c| c.enabled == Some(true));
        if pre_disable {
            files.push(Action::DisableUnit { name: name.clone() });
        }

        let empty = Vec::new();
        let cur_dropins = keyed(c.map_or(&empty, |c| &c.dropins), |d: &Dropin| {
            d.name.as_str()
        });
        let des_dropins = keyed(&d.dropins, |d: &Dropin| d.name.as_str());
        for (dname, (_, dd)) in &des_dropins {
            let cd = cur_dropins.get(dname).map(|(_, x)| *x);
            match content(&dd.contents) {
                Some(text) => {
                    if cd.and_then(|cd| content(&cd.contents)) != Some(text) {
                        files.push(Action::WriteDropin {
                            unit: name.clone(),
                            name: dname.to_string(),
                            contents: text.to_string(),
                        });
                    }
                }
                None => {
                    // An empty drop-in means "remove it" (MCO: "Dropin for X has no content,
                    // skipping write" and "Removing ..., updated file has zero length"): once,
                    // when the entry appears or its contents go away.
                    let already_empty = cd.is_some_and(|cd| content(&cd.contents).is_none());
                    if !already_empty && may_delete(dropin_path(&name, dname)) {
                        files.push(Action::DeleteDropin {
                            unit: name.clone(),
                            name: dname.to_string(),
                        });
                    }
                }
            }
        }
        for (dname, (_, cd)) in &cur_dropins {
            if !des_dropins.contains_key(dname)
                && content(&cd.contents).is_some()
                && may_delete(dropin_path(&name, dname))
            {
                files.push(Action::DeleteDropin {
                    unit: name.clone(),
                    name: dname.to_string(),
                });
            }
        }

        if write {
            files.push(Action::WriteUnit {
                name: name.clone(),
                contents: des_content.unwrap_or_default().to_string(),
            });
        } else if delete {
            files.push(Action::DeleteUnit { name: name.clone() });
        }

        if des_masked {
            if !cur_masked {
                state.push(Action::MaskUnit { name });
            }
        } else {
            let cur_enabled = c.and_then(|c| c.enabled);
            let needed = if cur_masked {
                // Enablement is not applied to masked units, so after an unmask hearth asserts
                // it again when it is set (or presets a unit whose `enabled` became unset).
                d.enabled.is_some() || cur_enabled.is_some()
            } else {
                // A pre-write disable left the unit disabled.
                let effective = if pre_disable {
                    Some(false)
                } else {
                    cur_enabled
                };
                effective != d.enabled
            };
            if needed {
                state.push(enablement_action(&name, d.enabled));
            }
        }
    }

    for (name, (_, c)) in &cur_units {
        if des_units.contains_key(name) {
            continue;
        }
        let name = name.to_string();
        let has_file = !masked(c) && content(&c.contents).is_some();
        if masked(c) {
            files.push(Action::UnmaskUnit { name: name.clone() });
        } else if has_file {
            files.push(Action::DisableUnit { name: name.clone() });
        }
        for (dname, (_, cd)) in keyed(&c.dropins, |d: &Dropin| d.name.as_str()) {
            if content(&cd.contents).is_some() && may_delete(dropin_path(&name, dname)) {
                files.push(Action::DeleteDropin {
                    unit: name.clone(),
                    name: dname.to_string(),
                });
            }
        }
        if has_file && may_delete(unit_path(&name)) {
            files.push(Action::DeleteUnit { name: name.clone() });
        }
        if !has_file && c.enabled.is_some() {
            state.push(Action::PresetUnit { name });
        }
    }
    UnitPlan { files, state }
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

// ---------------------------------------------------------------------------------------------
// Unreconcilable changes.
// ---------------------------------------------------------------------------------------------

const REPROVISION: &str = "re-provision the node";

fn push(out: &mut Vec<Unreconcilable>, path: String, reason: String) {
    out.push(Unreconcilable { path, reason });
}

/// Every added, changed or removed entry of a keyed list, as unreconcilable.
fn keyed_changes<'a, T: PartialEq>(
    out: &mut Vec<Unreconcilable>,
    field: &str,
    what: &str,
    advice: &str,
    cur: &'a [T],
    des: &'a [T],
    key: impl Fn(&'a T) -> &'a str + Copy,
) {
    let c = keyed(cur, key);
    let d = keyed(des, key);
    for (k, (i, item)) in &d {
        let verb = match c.get(k) {
            None => "added",
            Some((_, old)) if *old != *item => "changed",
            Some(_) => continue,
        };
        push(
            out,
            format!("spec.config.{field}[{i}]"),
            format!("{what} {k:?} {verb}: {advice}"),
        );
    }
    for (k, (j, _)) in &c {
        if !d.contains_key(k) {
            push(
                out,
                format!("spec.config.{field}[{j}]"),
                format!("{what} {k:?} removed: {advice}"),
            );
        }
    }
}

type UserField = (&'static str, fn(&User) -> String);

/// The fields of a user other than `name`, `sshAuthorizedKeys` and `passwordHash`.
const OTHER_USER_FIELDS: [UserField; 11] = [
    ("gecos", |u| format!("{:?}", u.gecos)),
    ("groups", |u| format!("{:?}", u.groups)),
    ("homeDir", |u| format!("{:?}", u.home_dir)),
    ("noCreateHome", |u| format!("{:?}", u.no_create_home)),
    ("noLogInit", |u| format!("{:?}", u.no_log_init)),
    ("noUserGroup", |u| format!("{:?}", u.no_user_group)),
    ("primaryGroup", |u| format!("{:?}", u.primary_group)),
    ("shell", |u| format!("{:?}", u.shell)),
    ("shouldExist", |u| format!("{:?}", u.should_exist)),
    ("system", |u| format!("{:?}", u.system)),
    ("uid", |u| format!("{:?}", u.uid)),
];

fn unreconcilable_users(out: &mut Vec<Unreconcilable>, cur: &Config, des: &Config) {
    let c = keyed(&cur.passwd.users, |u| u.name.as_str());
    let d = keyed(&des.passwd.users, |u| u.name.as_str());
    let only_core = "only user core can be managed on day 2 (its sshAuthorizedKeys and \
                     passwordHash)";
    for (name, (i, user)) in &d {
        if *name == CORE_USER {
            continue;
        }
        let path = format!("spec.config.passwd.users[{i}]");
        match c.get(name) {
            None => push(
                out,
                path,
                format!("user {name:?} added: {only_core}; {REPROVISION} to create it"),
            ),
            Some((_, old)) if *old != *user => push(
                out,
                path,
                format!("user {name:?} changed: {only_core}; {REPROVISION} to change it"),
            ),
            Some(_) => {}
        }
    }
    for (name, (j, _)) in &c {
        if *name != CORE_USER && !d.contains_key(name) {
            push(
                out,
                format!("spec.config.passwd.users[{j}]"),
                format!(
                    "user {name:?} removed: {only_core}, and hearth does not delete users; \
                     remove it by hand or {REPROVISION}"
                ),
            );
        }
    }
    let default_core = User {
        name: CORE_USER.to_string(),
        ..Default::default()
    };
    let (ci, cu) = c
        .get(CORE_USER)
        .map_or((None, &default_core), |(i, u)| (Some(*i), *u));
    let (di, du) = d
        .get(CORE_USER)
        .map_or((None, &default_core), |(i, u)| (Some(*i), *u));
    let Some(index) = di.or(ci) else {
        return;
    };
    for (field, get) in OTHER_USER_FIELDS {
        if get(cu) != get(du) {
            push(
                out,
                format!("spec.config.passwd.users[{index}].{field}"),
                format!(
                    "user \"core\": only sshAuthorizedKeys and passwordHash can change on day 2, \
                     not {field}; {REPROVISION}"
                ),
            );
        }
    }
}

fn unreconcilable(current: &MachineConfigSpec, desired: &MachineConfigSpec) -> Vec<Unreconcilable> {
    let cur = &current.config;
    let des = &desired.config;
    let mut out = Vec::new();

    unreconcilable_users(&mut out, cur, des);
    if let Some((i, reason)) = crate::mco::core_lockout(cur, des) {
        push(
            &mut out,
            format!("spec.config.passwd.users[{i}].sshAuthorizedKeys"),
            reason,
        );
    }
    keyed_changes(
        &mut out,
        "passwd.groups",
        "group",
        &format!("groups are only created when a node is provisioned; {REPROVISION}"),
        &cur.passwd.groups,
        &des.passwd.groups,
        |g| g.name.as_str(),
    );
    keyed_changes(
        &mut out,
        "storage.directories",
        "directory",
        &format!(
            "Ignition directories are only created when a node is provisioned; {REPROVISION}, \
             or manage the directory with a systemd-tmpfiles rule (a file under /etc/tmpfiles.d/)"
        ),
        &cur.storage.directories,
        &des.storage.directories,
        |d| d.path.as_str(),
    );
    keyed_changes(
        &mut out,
        "storage.links",
        "link",
        &format!(
            "Ignition links are only created when a node is provisioned; {REPROVISION}, or \
             manage the link with a systemd-tmpfiles rule (a file under /etc/tmpfiles.d/)"
        ),
        &cur.storage.links,
        &des.storage.links,
        |l| l.path.as_str(),
    );
    let layout =
        format!("the disk layout is only applied when a node is provisioned; {REPROVISION}");
    keyed_changes(
        &mut out,
        "storage.disks",
        "disk",
        &layout,
        &cur.storage.disks,
        &des.storage.disks,
        |d| d.device.as_str(),
    );
    keyed_changes(
        &mut out,
        "storage.raid",
        "RAID array",
        &layout,
        &cur.storage.raid,
        &des.storage.raid,
        |r| r.name.as_str(),
    );
    keyed_changes(
        &mut out,
        "storage.filesystems",
        "filesystem",
        &layout,
        &cur.storage.filesystems,
        &des.storage.filesystems,
        |f| f.device.as_str(),
    );
    keyed_changes(
        &mut out,
        "storage.luks",
        "LUKS volume",
        &layout,
        &cur.storage.luks,
        &des.storage.luks,
        |l| l.name.as_str(),
    );

    let cur_files = keyed(&cur.storage.files, |f| f.path.as_str());
    for (path, (i, file)) in keyed(&des.storage.files, |f| f.path.as_str()) {
        let changed = cur_files
            .get(path)
            .is_none_or(|(_, old)| !crate::mco::same_file(old, file));
        if changed && !file.append.is_empty() {
            push(
                &mut out,
                format!("spec.config.storage.files[{i}].append"),
                format!(
                    "file {path}: appending is not idempotent, so it only happens when a node is \
                     provisioned; give the whole file as contents instead"
                ),
            );
        }
    }

    let kargs = "Ignition kernel arguments are only applied at first boot; use the \
                 MachineConfig's spec.kernelArguments, which hearth applies on day 2";
    if cur.kernel_arguments.should_exist != des.kernel_arguments.should_exist {
        push(
            &mut out,
            "spec.config.kernelArguments.shouldExist".into(),
            kargs.into(),
        );
    }
    if cur.kernel_arguments.should_not_exist != des.kernel_arguments.should_not_exist {
        push(
            &mut out,
            "spec.config.kernelArguments.shouldNotExist".into(),
            kargs.into(),
        );
    }

    let first_boot = format!(
        "the ignition section only matters when Ignition runs at first boot; {REPROVISION} for \
         it to take effect, or drop the change"
    );
    let ci = &cur.ignition;
    let di = &des.ignition;
    let sections: [(&str, bool); 7] = [
        ("config.merge", ci.config.merge != di.config.merge),
        ("config.replace", ci.config.replace != di.config.replace),
        (
            "proxy.httpProxy",
            ci.proxy.http_proxy != di.proxy.http_proxy,
        ),
        (
            "proxy.httpsProxy",
            ci.proxy.https_proxy != di.proxy.https_proxy,
        ),
        ("proxy.noProxy", ci.proxy.no_proxy != di.proxy.no_proxy),
        (
            "security.tls.certificateAuthorities",
            ci.security.tls.certificate_authorities != di.security.tls.certificate_authorities,
        ),
        ("timeouts", ci.timeouts != di.timeouts),
    ];
    for (field, changed) in sections {
        if changed {
            push(
                &mut out,
                format!("spec.config.ignition.{field}"),
                first_boot.clone(),
            );
        }
    }

    if current.fips != desired.fips {
        push(
            &mut out,
            "spec.fips".into(),
            format!(
                "FIPS mode cannot be switched on a running node ({} -> {}); {REPROVISION}",
                current.fips, desired.fips
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systemd_unit_paths() {
        assert!(is_systemd_unit_path("/etc/systemd/system/a.service"));
        assert!(is_systemd_unit_path(
            "/etc/systemd/system/a.service.d/x.conf"
        ));
        assert!(!is_systemd_unit_path("/etc/systemd/system"));
        assert!(!is_systemd_unit_path("/etc/systemd/system.conf"));
        assert!(!is_systemd_unit_path("/etc/systemd/systemd.conf"));
    }

    #[test]
    fn keyed_last_entry_wins_at_first_position() {
        let items = [("a", 1), ("b", 2), ("a", 3)];
        let k = keyed(&items, |x| x.0);
        let v: Vec<_> = k.iter().map(|(k, (i, x))| (*k, *i, x.1)).collect();
        assert_eq!(v, [("a", 2, 3), ("b", 1, 2)]);
    }
}
