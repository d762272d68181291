//! The steps of a plan ([`Action`]): what each does, the order they come in, which unit each
//! concerns and which ask for a daemon-reload; where unit files and drop-ins are written; and
//! each step in one line for people.

use crate::dataurl;
use crate::ignition::{File, NodeOwner};
use crate::model::KernelType;
use serde::Serialize;
use std::fmt;

/// The only user that can be managed on day 2.
pub const CORE_USER: &str = "core";

pub use crate::paths::SYSTEMD_UNIT_DIR;
pub(super) use crate::paths::{dropin_path, unit_path};

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
///
/// [`Plan::disruption`]: crate::plan::Plan::disruption
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
    ///
    /// [`diff_kernel_arguments`]: crate::kargs::diff_kernel_arguments
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
pub(super) fn is_systemd_unit_path(path: &str) -> bool {
    path.strip_prefix(SYSTEMD_UNIT_DIR)
        .is_some_and(|rest| rest.len() > 1 && rest.starts_with('/'))
}

pub(super) fn plural(n: usize, one: &str, many: &str) -> String {
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
