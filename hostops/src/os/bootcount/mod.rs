//! Boot counting with systemd-boot (systemd's Automatic Boot Assessment) for libostree hosts:
//! a deployment that never boots is given up by the boot loader alone, after a few tries.
//!
//! libostree 2022.7 writes its boot entries to `/boot/loader/entries` (on the root file system,
//! `/boot/loader` a symlink) and knows nothing of boot counting; systemd-boot reads only its
//! FAT ESP. [`sync`] puts ostree's entries on the ESP:
//!
//! - one entry per deployment, `loader/entries/hearth-<osname>-<checksum>.<serial>.conf`, with
//!   ostree's `title`, `version` and `options` (its `ostree=/ostree/boot.N/…` link, which the
//!   stateroot's `/var` is found by at boot), `sort-key hearth` (systemd-boot then orders
//!   hearth's entries by version: ostree's default deployment first), and the kernel, initramfs
//!   and device tree copied to `/hearth/<their path under /boot>`;
//! - the entry of a deployment that has not booted yet gets a boot counter,
//!   `…+<tries>.conf` ([`BootCounting::tries`]). systemd-boot renames it to `+<left>-<done>`
//!   before each try and sorts an entry with no try left last, so the previous deployment boots
//!   again; `systemd-bless-boot.service` removes the counter once `boot-complete.target` is
//!   reached, which hearth's `hearth-boot-complete.service` holds until the agent judged the
//!   boot healthy (docs/os-layer.md, "Boot counting");
//! - an entry already on the ESP keeps its name, so a rewrite never resets a counter; entries
//!   of deployments that are gone are removed, then the files no entry names.
//!
//! `hearth-boot-entries.service` runs the sync at boot and at shutdown, after
//! `ostree-finalize-staged.service` has written a staged deployment's entry; the agent runs it
//! after it changes the deployments itself (a rollback, dropping a deployment) and before it
//! stages one. ostree's links of a boot version stay until libostree's clean-up, which
//! hearth's helper runs only after a staging, when the ESP has followed (it writes deployments
//! without it). [`counter`] tells the agent, after
//! a boot into the previous deployment, that the new one used up its tries; [`forget`] gives a
//! deployment staged anew fresh tries.
//!
//! Files: `entry.rs` (BLS entries and counter names), `plan.rs` (what the ESP must hold,
//! pure), `esp.rs` (reading and applying it, [`SyncReport`]), `error.rs` ([`BootCountError`]).
//! Imports run one way: this file → `esp` → `error`, `plan` → `entry`.

mod entry;
mod error;
mod esp;
mod plan;

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use self::entry::{BlsEntry, Counter, EntryName};
pub use self::error::BootCountError;
pub use self::esp::SyncReport;
pub use self::plan::{
    entry_id, plan, split_deployment, EspPlan, OstreeEntry, PlanError, ENTRY_PREFIX,
};
use super::paths::inside;
use super::status::DeploymentId;

/// Boot counting (`"bootCounting"` in `/etc/hearth/os.json`); off when absent.
///
/// ```json
/// {"bootCounting": {"esp": "/efi", "tries": 3}}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BootCounting {
    /// Where the ESP is mounted (default `/efi`).
    #[serde(default = "BootCounting::default_esp")]
    pub esp: String,
    /// The tries a new deployment gets before the boot loader goes back to the previous one
    /// (1 to 9, default 3).
    #[serde(default = "BootCounting::default_tries")]
    pub tries: u32,
}

impl BootCounting {
    fn default_esp() -> String {
        "/efi".into()
    }

    fn default_tries() -> u32 {
        3
    }

    /// Why this configuration is wrong, if it is.
    pub fn problem(&self) -> Option<String> {
        if !self.esp.starts_with('/') || self.esp.split('/').any(|c| c == "..") {
            return Some(format!(
                "bootCounting.esp {:?} must be an absolute path without '..'",
                self.esp
            ));
        }
        if !(1..=9).contains(&self.tries) {
            return Some(format!(
                "bootCounting.tries {} must be between 1 and 9",
                self.tries
            ));
        }
        None
    }
}

impl Default for BootCounting {
    fn default() -> Self {
        BootCounting {
            esp: Self::default_esp(),
            tries: Self::default_tries(),
        }
    }
}

/// The deployment's name in boot entries: `<osname>-<checksum>.<serial>`.
pub fn deployment_name(id: &DeploymentId) -> String {
    format!("{}-{}.{}", id.osname, id.checksum, id.serial)
}

/// Puts ostree's boot entries of the host at `root` on its ESP (see the module documentation).
pub fn sync(root: &Path, config: &BootCounting) -> Result<SyncReport, BootCountError> {
    let esp = inside(root, &config.esp);
    esp::sync(root, &esp, config.tries)
}

/// The boot counter of `deployment`'s entry on the ESP: `None` when it has none (blessed, or
/// not on the ESP).
pub fn counter(
    root: &Path,
    config: &BootCounting,
    deployment: &DeploymentId,
) -> Result<Option<Counter>, BootCountError> {
    let id = entry_id(&deployment_name(deployment));
    let names = esp::read_esp_names(&inside(root, &config.esp))?;
    Ok(names
        .into_iter()
        .filter(|n| n.id == id)
        .find_map(|n| n.counter))
}

/// Whether the ESP will have room for `deployment`'s kernel and initramfs (boot checksum
/// `bootcsum`) when its entry reaches it at shutdown, counting what the sync frees first (boot
/// checksums other than those in `keep`, the booted deployment's and the new one's). Checked
/// when it is staged: at shutdown ostree's finalization removes the boot version the ESP's
/// entries name, so the sync right after it must not fail.
pub fn check_room(
    root: &Path,
    config: &BootCounting,
    deployment: &DeploymentId,
    bootcsum: &str,
    keep: &[&str],
) -> Result<(), BootCountError> {
    esp::check_room(
        root,
        &inside(root, &config.esp),
        &deployment_name(deployment),
        bootcsum,
        keep,
    )
}

/// Removes the ESP entries of `deployment` (a deployment staged anew: fresh tries, never the
/// used-up counter of an earlier deployment of the same name); the files removed.
pub fn forget(
    root: &Path,
    config: &BootCounting,
    deployment: &DeploymentId,
) -> Result<Vec<String>, BootCountError> {
    esp::forget(&inside(root, &config.esp), &deployment_name(deployment))
}
