//! What the OS layer reports: deployments and their ids, the status of a sysroot, what staging
//! did, what the next boot must show, and what a rollback did.

use std::fmt;

use hearth_config::model::KernelType;
use serde::{Deserialize, Serialize};

/// Which deployment: stateroot, commit and serial (`debian/3f2a….0`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentId {
    /// The stateroot (`osname`).
    pub osname: String,
    /// The commit checksum.
    pub checksum: String,
    /// The deployment serial (deployments of the same commit count up from 0).
    pub serial: i32,
}

impl fmt::Display for DeploymentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}.{}", self.osname, self.checksum, self.serial)
    }
}

/// One deployment, as [`OsBackend::status`](super::OsBackend::status) reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentInfo {
    /// Stateroot, commit, serial.
    pub id: DeploymentId,
    /// Position in the boot order (0 is the default at the next boot).
    pub index: i32,
    /// The checksum of its kernel and initramfs (`/boot/ostree/<osname>-<bootcsum>`).
    pub boot_checksum: String,
    /// The origin's refspec (`hearth:hearth/debian/v2`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refspec: Option<String>,
    /// The commit's `version` metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The OS image (ref without the kernel-type variant, the commit checksum, or the
    /// container image reference).
    pub image: String,
    /// For a container image, the digest of the manifest it was deployed from (`sha256:…`; of a
    /// manifest list, the instance for this node's platform).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
    /// The kernel type.
    pub kernel_type: KernelType,
    /// Kernel arguments from its boot configuration (`options`), without libostree's own
    /// `ostree=` argument.
    pub kernel_args: Vec<String>,
    /// The booted deployment.
    pub booted: bool,
    /// Staged: finalized at shutdown (ostree-finalize-staged.service).
    pub staged: bool,
    /// Pinned (never garbage-collected).
    pub pinned: bool,
}

impl DeploymentInfo {
    /// `debian/<checksum>.<serial> (ref hearth:hearth/debian/v1, version v1)`.
    pub fn describe(&self) -> String {
        let mut extra = Vec::new();
        if let Some(r) = &self.refspec {
            extra.push(format!("ref {r}"));
        }
        if let Some(v) = &self.version {
            extra.push(format!("version {v}"));
        }
        if let Some(d) = &self.image_digest {
            extra.push(format!("image {} {d}", self.image));
        }
        if extra.is_empty() {
            self.id.to_string()
        } else {
            format!("{} ({})", self.id, extra.join(", "))
        }
    }
}

/// What [`OsBackend::status`](super::OsBackend::status) returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsStatus {
    /// `ostree`.
    pub backend: String,
    /// The sysroot (the root on this machine).
    pub sysroot: String,
    /// Whether hearth runs on the booted system itself (libostree sees it booted; staging is
    /// available) or drives a root from outside (new deployments are written directly).
    pub native: bool,
    /// The booted deployment.
    pub booted: DeploymentInfo,
    /// The deployment the next boot will start when it is not the booted one: staged
    /// (finalized at shutdown) or already written as the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<DeploymentInfo>,
    /// The deployment [`OsBackend::rollback`](super::OsBackend::rollback) would make the
    /// default: the one after the booted one in the boot order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<DeploymentInfo>,
    /// All deployments, in boot order (a staged deployment first).
    pub deployments: Vec<DeploymentInfo>,
}

/// How a staged deployment becomes the booted one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Finalization {
    /// Staged (libostree `stage_tree`): ostree-finalize-staged.service writes the bootloader
    /// entries at shutdown, merging `/etc` as it is then. Used when hearth runs on the booted
    /// host.
    AtShutdown,
    /// Written as the new default deployment right away (libostree `deploy_tree` +
    /// `write_deployments`): used when hearth drives a root from outside, where libostree cannot
    /// stage (it stages only for the system it runs on).
    Written,
}

/// A kernel argument deletion that was not done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedKarg {
    /// The argument.
    pub argument: String,
    /// Why.
    pub reason: String,
}

/// Free space needed and available on one filesystem, as checked before staging.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpaceCheck {
    /// `/boot` or `/sysroot`.
    pub what: String,
    /// The path that was checked.
    pub path: String,
    /// Bytes needed (including the reserve).
    pub needed: u64,
    /// Bytes available.
    pub available: u64,
    /// How `needed` is made up.
    pub detail: String,
}

/// What [`OsBackend::stage`](super::OsBackend::stage) did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StagedDeployment {
    /// The new deployment.
    pub deployment: DeploymentInfo,
    /// The deployment it was made from (the booted one).
    pub from: DeploymentId,
    /// How it becomes the booted one.
    pub finalization: Finalization,
    /// Deletions that were not done, with the reason (hearth did not add the argument).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_deletes: Vec<SkippedKarg>,
    /// The refspec pulled from the remote, if a pull was needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pulled: Option<String>,
    /// For a container image: the bytes of the layers fetched from the registry (compressed;
    /// the layers the node had already are not fetched again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_bytes: Option<u64>,
    /// The space checks that passed.
    pub space: Vec<SpaceCheck>,
}

impl StagedDeployment {
    /// What the host must show after the reboot: the agent journals this before rebooting and
    /// passes it to [`OsBackend::verify_booted`](super::OsBackend::verify_booted) after the boot.
    pub fn expectation(&self) -> OsExpectation {
        OsExpectation {
            deployment: Some(self.deployment.id.clone()),
            kernel_args: Some(self.deployment.kernel_args.clone()),
        }
    }
}

/// What the booted deployment must be.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsExpectation {
    /// This deployment must be the booted one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentId>,
    /// The booted deployment's kernel arguments (without `ostree=`) must be exactly these, in
    /// this order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_args: Option<Vec<String>>,
}

/// What [`OsBackend::rollback`](super::OsBackend::rollback) did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum RollbackOutcome {
    /// A staged or pending deployment was dropped: the booted one stays the default.
    CancelledPending {
        /// The dropped deployment.
        dropped: DeploymentId,
    },
    /// The previous deployment is the default at the next boot.
    RolledBack {
        /// The booted deployment (now second).
        from: DeploymentId,
        /// The new default.
        to: DeploymentId,
    },
}
