//! Rules hearth takes from the MCO that no Ignition field implies (issue 15, "fidelity to the
//! MCO"). Each names the MCO source it follows; `config/tests/mco_*.rs` replay the MCO's own
//! unit-test tables against them, and `docs/config-model.md` ("Differences from the MCO") lists
//! where hearth decides otherwise on purpose.
//!
//! - Rendered files whose `overwrite` is unset get `overwrite: true`
//!   (`pkg/controller/common/helpers.go`, `MergeMachineConfigs`): Ignition 3 otherwise refuses
//!   to replace a file the OS image already has, and a new node fails its first boot.
//! - A user's SSH keys are kept once each, in order (`dedupePasswdUserSSHKeys`; the functions
//!   live in `ignition/ssh_keys.rs`, as the 2.x translation applies the rule too, and are
//!   re-exported here); a 3.x config that repeats a key is refused, as Ignition 3 refuses
//!   repeated list entries.
//! - No MachineConfig may create the agent's force file ([`FORCE_FILE`]; the MCO's
//!   `isConfigReconcilable` refuses its `/run/machine-config-daemon-force`).
//! - The `kernel-devel` extension needs the default kernel (`MergeMachineConfigs`).
//! - A change may not leave user `core` with neither an SSH key nor a password hash
//!   (`verifyUserFields`).
//! - Node-disruption policy paths may be `/` or end in `/` (the API only asks for an absolute
//!   path).

use crate::finding::Finding;
use crate::ignition::{Config, File};
use crate::model::{KernelType, MachineConfig, MachineConfigSpec};
use crate::node::{Node, NodeValue};

// The SSH-key rule lives with the Ignition model, as the 2.x translation applies it too; it is
// one of the MCO's rules all the same, so it answers here as well.
pub use crate::ignition::{dedup_ssh_keys, dedup_users_ssh_keys};

/// The agent's force file (hearth-agent `apply::FORCE_FILE`; the MCO's
/// `/run/machine-config-daemon-force`): touching it makes the agent re-apply its config. A
/// MachineConfig that wrote it would force every apply again, a reboot loop.
pub const FORCE_FILE: &str = "/run/hearth-force";

/// The extension that builds against the running kernel's headers: only the default kernel's
/// exist in the image.
pub const KERNEL_DEVEL: &str = "kernel-devel";

/// The MCO's opt-in (`MachineConfiguration.spec.irreconcilableValidationOverrides.storage:
/// [Disks, FileSystems, Raid]`) to accept disk, filesystem and RAID changes on day 2.
pub const OVERRIDES_FIELD: &str = "irreconcilableValidationOverrides";

/// Why hearth refuses [`OVERRIDES_FIELD`] rather than ignore it.
pub const OVERRIDES_REFUSED: &str = "hearth does not honour irreconcilableValidationOverrides: \
     with it the MCO accepts a storage change and leaves the node's disks as they were, so the \
     node would report a config it does not have; hearth reports such changes as unreconcilable \
     instead. Remove this field; new nodes get the new storage layout at provisioning, running \
     nodes need re-provisioning";

/// Whether a value of [`OVERRIDES_FIELD`] asks for anything: null, an empty mapping and a
/// mapping of null or empty lists do not.
pub fn asks_for_something(n: &Node) -> bool {
    match &n.value {
        NodeValue::Null => false,
        NodeValue::Map(entries) => entries.iter().any(|(_, v)| match &v.value {
            NodeValue::Null => false,
            NodeValue::Seq(items) => !items.is_empty(),
            NodeValue::Map(m) => !m.is_empty(),
            NodeValue::Scalar { .. } => true,
        }),
        _ => true,
    }
}

/// Gives every file whose `overwrite` is unset `overwrite: true`, as the MCO's merge does.
/// Ignition 3's default is `false`: a file the OS image already has (`/etc/chrony.conf`, say)
/// would stop the first boot of every new node with "file already exists".
pub fn default_file_overwrite(config: &mut Config) {
    for f in &mut config.storage.files {
        if f.overwrite.is_none() {
            f.overwrite = Some(true);
        }
    }
}

/// Whether two file entries need no write between them on a running node: equal, taking an
/// unset `overwrite` as `true` (what rendering now gives it). The agent always replaces the
/// file, so the flag does not matter on day 2; without this, the first render after upgrading
/// hearth would rewrite every file (and reboot every node) for a flag alone.
pub fn same_file(a: &File, b: &File) -> bool {
    // Destructured so that a new field cannot be forgotten here.
    let File {
        path,
        overwrite,
        user,
        group,
        append,
        contents,
        mode,
    } = a;
    *path == b.path
        && overwrite.unwrap_or(true) == b.overwrite.unwrap_or(true)
        && *user == b.user
        && *group == b.group
        && *append == b.append
        && *contents == b.contents
        && *mode == b.mode
}

fn is_force_path(path: &str) -> bool {
    path == FORCE_FILE
        || path
            .strip_prefix(FORCE_FILE)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// What `kernel-devel` with a non-default kernel type is refused with, or `None` when the
/// combination is fine.
pub fn kernel_devel_conflict(kernel_type: KernelType, extensions: &[String]) -> Option<String> {
    if kernel_type == KernelType::Default || !extensions.iter().any(|e| e == KERNEL_DEVEL) {
        return None;
    }
    let kt = match kernel_type {
        KernelType::Realtime => "realtime",
        KernelType::Pages64k => "64k-pages",
        KernelType::Default => "default",
    };
    Some(format!(
        "the kernel-devel extension cannot be installed with kernelType {kt}: it provides the \
         default kernel's headers only (the MCO refuses this too); drop kernel-devel or use \
         kernelType default"
    ))
}

/// The MCO's checks of one MachineConfig that go beyond Ignition's own: the force file, repeated
/// SSH keys, kernel-devel with a non-default kernel.
pub fn validate_spec(spec: &MachineConfigSpec, out: &mut Vec<Finding>) {
    let c = &spec.config;
    let force = |kind: &str| {
        format!(
            "a MachineConfig cannot create {FORCE_FILE} (a {kind} here): it is the agent's force \
             file, and writing it would make the agent re-apply (and reboot) again and again; \
             remove this entry (touch the file by hand on a node to retry an apply)"
        )
    };
    let entries = c
        .storage
        .files
        .iter()
        .map(|f| (f.path.as_str(), "files", "file"))
        .enumerate()
        .chain(
            c.storage
                .directories
                .iter()
                .map(|d| (d.path.as_str(), "directories", "directory"))
                .enumerate(),
        )
        .chain(
            c.storage
                .links
                .iter()
                .map(|l| (l.path.as_str(), "links", "link"))
                .enumerate(),
        );
    for (i, (path, list, kind)) in entries {
        if is_force_path(path) {
            out.push(Finding::error(
                format!("spec.config.storage.{list}[{i}].path"),
                force(kind),
            ));
        }
    }
    // A 2.x config's keys were de-duplicated by the translation (as the MCO does), so only a
    // 3.x config can get here with a repeat.
    for (i, u) in c.passwd.users.iter().enumerate() {
        let mut seen: std::collections::HashMap<&str, usize> =
            std::collections::HashMap::with_capacity(u.ssh_authorized_keys.len());
        for (j, k) in u.ssh_authorized_keys.iter().enumerate() {
            match seen.get(k.as_str()) {
                Some(first) => out.push(Finding::error(
                    format!("spec.config.passwd.users[{i}].sshAuthorizedKeys[{j}]"),
                    format!(
                        "this key repeats spec.config.passwd.users[{i}].sshAuthorizedKeys[{first}]; \
                         Ignition 3 refuses repeated entries: remove one"
                    ),
                )),
                None => {
                    seen.insert(k.as_str(), j);
                }
            }
        }
    }
    if let Some(msg) = kernel_devel_conflict(spec.kernel_type, &spec.extensions) {
        let i = spec
            .extensions
            .iter()
            .position(|e| e == KERNEL_DEVEL)
            .unwrap_or(0);
        out.push(Finding::error(format!("spec.extensions[{i}]"), msg));
    }
}

/// The render-time check of kernel-devel with a non-default kernel, naming the configs that
/// brought each: the combination can come from two configs that are each fine alone.
pub fn check_merged(configs: &[&MachineConfig], merged: &MachineConfigSpec) -> Result<(), String> {
    let Some(msg) = kernel_devel_conflict(merged.kernel_type, &merged.extensions) else {
        return Ok(());
    };
    let devel: Vec<&str> = configs
        .iter()
        .filter(|mc| mc.spec.extensions.iter().any(|e| e == KERNEL_DEVEL))
        .map(|mc| mc.name())
        .collect();
    let kernel: Vec<&str> = configs
        .iter()
        .filter(|mc| mc.spec.kernel_type == merged.kernel_type)
        .map(|mc| mc.name())
        .collect();
    Err(format!(
        "spec.extensions: {msg} (kernel-devel from MachineConfig {}; kernelType from MachineConfig {})",
        devel.join(", "),
        kernel.join(", ")
    ))
}

/// Whether a change leaves user `core` with no way in: the current config gives `core` at
/// least one SSH key, and the desired config still has a `core` entry but with no key and no
/// password hash. The MCO refuses exactly this entry (`verifyUserFields`: "user must be core
/// and have 1 or more sshKeys"); like the MCO, a desired config with no `core` entry at all is
/// the explicit way to clear the keys.
pub fn core_lockout(current: &Config, desired: &Config) -> Option<(usize, String)> {
    let core = |c: &Config| {
        c.passwd
            .users
            .iter()
            .enumerate()
            .rev()
            .find(|(_, u)| u.name == "core")
            .map(|(i, u)| (i, u.clone()))
    };
    let had_keys = core(current).is_some_and(|(_, u)| !u.ssh_authorized_keys.is_empty());
    let (i, u) = core(desired)?;
    let no_password = u.password_hash.as_deref().is_none_or(str::is_empty);
    if had_keys && u.ssh_authorized_keys.is_empty() && no_password {
        Some((
            i,
            "user \"core\" would be left with no SSH key and no password hash, locking people \
             out of the node (the MCO refuses this too); keep at least one key, set a \
             passwordHash, or remove the core entry from the config to clear its keys on purpose"
                .to_string(),
        ))
    } else {
        None
    }
}

/// What is wrong with a node-disruption policy path, if anything. The MCO's API asks only for
/// an absolute path; `/` (every file) and a trailing `/` (`/etc/myapp/`, a directory) are
/// fine. hearth also refuses `.` and `..` components and empty ones inside the path (`//`),
/// which would never match a file path of a valid MachineConfig.
pub fn check_policy_path(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return Some(format!(
            "path {path:?} is relative; it must be absolute (start with /)"
        ));
    }
    if path.contains('\0') {
        return Some("path contains a NUL byte".into());
    }
    let inner = path.trim_end_matches('/');
    for comp in inner.split('/').skip(1) {
        match comp {
            "." | ".." => {
                return Some(format!(
                    "path {path:?} contains {comp:?}; write the path without it"
                ))
            }
            "" => {
                return Some(format!(
                    "path {path:?} contains an empty component ('//') before its end; write \
                     each directory once (a single trailing '/' is fine)"
                ))
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_keeps_first_occurrence_in_order() {
        let mut k: Vec<String> = ["b", "a", "b", "c", "a"].map(String::from).to_vec();
        dedup_ssh_keys(&mut k);
        assert_eq!(k, ["b", "a", "c"]);
    }

    #[test]
    fn policy_paths() {
        assert_eq!(check_policy_path("/"), None);
        assert_eq!(check_policy_path("/etc/myapp/"), None);
        assert_eq!(check_policy_path("/etc/myapp"), None);
        assert!(check_policy_path("etc").is_some());
        assert!(check_policy_path("/etc/../x").is_some());
        assert!(check_policy_path("/etc//x").is_some());
    }

    #[test]
    fn force_paths() {
        assert!(is_force_path("/run/hearth-force"));
        assert!(is_force_path("/run/hearth-force/x"));
        assert!(!is_force_path("/run/hearth-forced"));
    }
}
