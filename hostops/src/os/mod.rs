//! The OS layer: kernel arguments, kernel type and OS image pivots, behind one interface.
//!
//! [`OsBackend`] is an enum over the backends (async functions in traits are not
//! dyn-compatible, and the set is closed):
//!
//! | backend | when | what |
//! | --- | --- | --- |
//! | [`OsBackend::Ostree`] | `/run/ostree-booted` exists under the root | libostree (Debian's libostree 2022.7) in a helper process, `hearth-ostree-helper`, one per operation: see [`ostree`] |
//! | [`OsBackend::RpmOstree`] | an rpm-ostree host (`/usr/bin/rpm-ostree`) whose daemon answers on the bus given to [`OsBackend::detect_on_bus`] | rpm-ostree's D-Bus API (`org.projectatomic.rpmostree1`), see [`rpmostree`] |
//! | [`OsBackend::None`] | a plain systemd host, or an rpm-ostree host without a reachable rpm-ostree daemon | every operation fails with the reason; files, units and keys still work |
//!
//! ## One change, one deployment
//!
//! The agent collects the OS actions of a plan into an [`OsChange`]
//! ([`OsChange::from_actions`]) and calls [`OsBackend::stage`] once: it stages **one** new
//! deployment that carries the OS image, the kernel type and the kernel arguments together.
//! The new deployment becomes the default at the next boot. After that boot,
//! [`OsBackend::verify_booted`] with the [`OsExpectation`] of the [`StagedDeployment`] lists
//! every difference (booted another deployment, kernel arguments missing or extra) as a
//! sentence; [`OsBackend::rollback`] makes the previous deployment the default again.
//!
//! ## Kernel arguments and the ledger
//!
//! Kernel arguments are a real diff on the booted deployment's arguments: the `delete` entries
//! of the plan are applied, then the `append` entries, with the semantics of
//! [`hearth_config::plan::apply_kernel_argument_ops`] within hearth's own arguments (order and duplicates are kept; of several identical arguments, hearth's are the last ones and the image's are never touched). hearth
//! only removes arguments that it added itself: [`ledger::KargLedger`]
//! (`/var/lib/hearth/kargs.json`) records them. A `delete` of an argument the ledger does not
//! cover (the image, the installer or an admin set it) is **skipped**, not refused: the rest of
//! the change is staged and the skipped deletion is reported with its reason in
//! [`StagedDeployment::skipped_deletes`]; the expectation that the agent verifies after the
//! boot contains what was really staged.
//!
//! ## Kernel types and OS images (libostree)
//!
//! On plain ostree a kernel type names an OS ref: [`OsConfig::kernel_types`] maps `realtime`
//! and `64k-pages` to a template such as `{ref}-rt`, applied to the image's ref
//! (`hearth/debian/v1` → `hearth/debian/v1-rt`). The default kernel is the image ref itself.
//! Every new deployment records its image and kernel type in its origin file (group
//! `[hearth]`), so that a pivot keeps the kernel type: moving a realtime host to
//! `hearth/debian/v2` deploys `hearth/debian/v2-rt`. An OS image (`osImageURL`) is an ostree
//! ref or a commit checksum, pulled from the configured remote ([`OsConfig::remote`]) into the
//! sysroot's repository.
//!
//! ## Files
//!
//! This file holds [`OsBackend`] (detection and dispatch). Shared by the backends, each public
//! item re-exported here: `error.rs` ([`OsError`]), `config.rs` ([`OsConfig`], `os.json`),
//! `image_ref.rs` ([`ImageRef`]), `change.rs` ([`OsChange`]), `status.rs` (deployments, status,
//! staging results), `compare.rs` (booted versus expected), [`paths`], [`ledger`],
//! [`bootcount`] (ostree's entries on the ESP with boot counters, for systemd-boot). The
//! backends: [`ostree`] (the client of the helper process and its [`ostree::protocol`]; the
//! libostree code is the crate `hearth-ostree-helper`, `hostops/ostree-helper/`), [`rpmostree`]
//! (a directory, one file per phase), [`none`]. hearth-hostops itself does not link libostree
//! or GLib.

pub mod bootcount;
mod change;
mod compare;
mod config;
mod error;
mod image_ref;
pub mod ledger;
pub mod none;
pub mod ostree;
pub mod paths;
mod progress;
pub mod rpmostree;
mod status;

use std::path::Path;

use hearth_config::plan::Action;

use self::change::extensions_refused;
pub use self::change::OsChange;
pub use self::compare::{
    cmdline_differences, compare_booted, compare_kernel_args, MAX_KARG_DIFFERENCES,
    MAX_KARG_LIST_SHOWN,
};
pub use self::config::{HealthCheck, MinFree, OsConfig, RemoteConfig, CONFIG_PATH};
pub use self::error::{human_bytes, OsError};
pub use self::image_ref::{is_valid_ref, ImageRef};
pub use self::ledger::KargLedger;
pub use self::none::NoneBackend;
pub use self::ostree::OstreeBackend;
pub use self::progress::{ProgressSink, PullPhase, PullProgress, PROGRESS_PREFIX};
pub use self::rpmostree::RpmOstreeBackend;
pub use self::status::{
    DeploymentId, DeploymentInfo, Finalization, OsExpectation, OsStatus, RollbackOutcome,
    SkippedKarg, SpaceCheck, StagedDeployment,
};
pub use hearth_config::container::{
    is_sha256_digest, ContainerImage, SigVerify, Transport, SHA256,
};

/// The reason given on hosts that are not ostree hosts.
pub const NOT_OSTREE_REASON: &str = "not an ostree host: kernel arguments, kernel type and OS \
     images can only be managed on ostree or rpm-ostree hosts";

/// The reason [`OsBackend::detect`] gives on rpm-ostree hosts: the rpm-ostree backend talks to
/// rpm-ostree's daemon over D-Bus, and `detect` has no bus ([`OsBackend::detect_on_bus`] has).
pub const RPM_OSTREE_REASON: &str = "rpm-ostree manages this host (/usr/bin/rpm-ostree is \
     present): hearth drives it only through rpm-ostree's D-Bus service, and no bus was given \
     (OsBackend::detect_on_bus); hearth does not write deployments behind rpm-ostree's back";

/// The marker file that says the host booted an ostree deployment (created by
/// ostree-prepare-root in the initramfs).
pub const OSTREE_BOOTED: &str = "run/ostree-booted";

/// The host's OS backend.
#[derive(Debug, Clone)]
pub enum OsBackend {
    /// libostree directly.
    Ostree(OstreeBackend),
    /// rpm-ostree's daemon over D-Bus.
    RpmOstree(RpmOstreeBackend),
    /// No OS backend: every operation fails with the reason.
    None(NoneBackend),
}

impl OsBackend {
    /// Picks the backend for the host whose root is `root` (`/` in production; in tests the live
    /// root of a container, `/proc/<pid>/root`: the marker lives in its `/run`), with the
    /// configuration in `<root>/etc/hearth/os.json` (defaults when absent).
    ///
    /// - `<root>/run/ostree-booted` absent: [`OsBackend::None`] with [`NOT_OSTREE_REASON`];
    /// - rpm-ostree present: [`OsBackend::None`] with [`RPM_OSTREE_REASON`] (the rpm-ostree
    ///   backend needs a bus: [`OsBackend::detect_on_bus`]);
    /// - else [`OsBackend::Ostree`] on the sysroot at `root`.
    ///
    /// Fails only when the configuration file is unreadable or invalid.
    pub fn detect(root: &Path) -> Result<OsBackend, OsError> {
        if !root.join(OSTREE_BOOTED).exists() {
            return Ok(OsBackend::None(NoneBackend::new(NOT_OSTREE_REASON)));
        }
        let config = OsConfig::load(root)?;
        Ok(Self::detect_with_config(root, config))
    }

    /// Like [`OsBackend::detect`] with a configuration passed in (not read from the root).
    pub fn detect_with_config(root: &Path, config: OsConfig) -> OsBackend {
        if !root.join(OSTREE_BOOTED).exists() {
            return OsBackend::None(NoneBackend::new(NOT_OSTREE_REASON));
        }
        if root.join("usr/bin/rpm-ostree").exists() {
            return OsBackend::None(NoneBackend::new(RPM_OSTREE_REASON));
        }
        OsBackend::Ostree(OstreeBackend::new(root, config))
    }

    /// Like [`OsBackend::detect`], and on an rpm-ostree host (`/usr/bin/rpm-ostree` under the
    /// root) the rpm-ostree backend talking to the daemon on the bus at `bus_address` (the
    /// system bus, [`crate::systemd::SYSTEM_BUS_ADDRESS`], in production): it connects, and
    /// reads the Sysroot's `Booted` property (which starts the D-Bus-activated daemon). When
    /// that fails the host gets [`OsBackend::None`] with a reason that says the rpm-ostree
    /// service could not be reached, on which bus, and why.
    ///
    /// Fails only when the configuration file of a libostree host is unreadable or invalid.
    pub async fn detect_on_bus(root: &Path, bus_address: &str) -> Result<OsBackend, OsError> {
        if !root.join(OSTREE_BOOTED).exists() || !root.join("usr/bin/rpm-ostree").exists() {
            return Self::detect(root);
        }
        let backend = RpmOstreeBackend::new(root, bus_address);
        match backend.probe().await {
            Ok(()) => Ok(OsBackend::RpmOstree(backend)),
            Err(e) => Ok(OsBackend::None(NoneBackend::new(format!(
                "rpm-ostree manages this host (/usr/bin/rpm-ostree is present) but its D-Bus \
                 service {} cannot be reached on the bus {bus_address}: {e}; hearth does not \
                 write deployments behind rpm-ostree's back",
                rpmostree::BUS_NAME
            )))),
        }
    }

    /// `ostree`, `rpm-ostree` or `none`.
    pub fn kind(&self) -> &'static str {
        match self {
            OsBackend::Ostree(_) => "ostree",
            OsBackend::RpmOstree(_) => "rpm-ostree",
            OsBackend::None(_) => "none",
        }
    }

    /// Why OS changes are impossible here, for [`OsBackend::None`].
    pub fn unsupported_reason(&self) -> Option<&str> {
        match self {
            OsBackend::Ostree(_) | OsBackend::RpmOstree(_) => None,
            OsBackend::None(n) => Some(n.reason()),
        }
    }

    /// The root this backend works on.
    pub fn root(&self) -> Option<&Path> {
        match self {
            OsBackend::Ostree(o) => Some(o.root()),
            OsBackend::RpmOstree(r) => Some(r.root()),
            OsBackend::None(_) => None,
        }
    }

    /// Collects the OS actions of a plan into one change for this backend: like
    /// [`OsChange::from_actions`], and `Extensions` is accepted on the rpm-ostree backend (package
    /// layering) and refused on the others.
    pub fn change_from_actions(&self, actions: &[Action]) -> Result<OsChange, OsError> {
        OsChange::from_actions_for(actions, matches!(self, OsBackend::RpmOstree(_)))
    }

    /// The booted, pending and rollback deployments.
    pub async fn status(&self) -> Result<OsStatus, OsError> {
        match self {
            OsBackend::Ostree(o) => o.status().await,
            OsBackend::RpmOstree(r) => r.status().await,
            OsBackend::None(n) => Err(n.error()),
        }
    }

    /// Stages one new deployment carrying the whole change (see the module documentation).
    /// Staging again before the reboot replaces the pending deployment: the change is always
    /// computed from the booted deployment.
    pub async fn stage(&self, change: &OsChange) -> Result<StagedDeployment, OsError> {
        self.stage_with_progress(change, None).await
    }

    /// [`OsBackend::stage`], with the progress of a container image's pull going to `progress`
    /// while it runs (libostree backend; rpm-ostree reports its own in its journal).
    pub async fn stage_with_progress(
        &self,
        change: &OsChange,
        progress: Option<ProgressSink>,
    ) -> Result<StagedDeployment, OsError> {
        match self {
            OsBackend::Ostree(o) => match &change.extensions {
                Some((from, to)) => Err(extensions_refused(from, to)),
                None => o.stage(change, progress.as_ref()).await,
            },
            OsBackend::RpmOstree(r) => r.stage(change).await,
            OsBackend::None(n) => Err(n.error()),
        }
    }

    /// The differences between the booted deployment and `expected`, one sentence each; empty
    /// when the host booted what was staged.
    pub async fn verify_booted(&self, expected: &OsExpectation) -> Result<Vec<String>, OsError> {
        match self {
            OsBackend::Ostree(o) => o.verify_booted(expected).await,
            OsBackend::RpmOstree(r) => r.verify_booted(expected).await,
            OsBackend::None(n) => Err(n.error()),
        }
    }

    /// Makes the previous deployment the default at the next boot (or drops a pending one).
    pub async fn rollback(&self) -> Result<RollbackOutcome, OsError> {
        match self {
            OsBackend::Ostree(o) => o.rollback().await,
            OsBackend::RpmOstree(r) => r.rollback().await,
            OsBackend::None(n) => Err(n.error()),
        }
    }

    /// Records `kargs` (those present in the booted deployment) as added by hearth, so that
    /// later configs may remove them: for a host that hearth takes over from the MCO, whose
    /// current config already has kernel arguments. Returns hearth's arguments after.
    pub async fn adopt_kernel_arguments(&self, kargs: &[String]) -> Result<Vec<String>, OsError> {
        match self {
            OsBackend::Ostree(o) => o.adopt_kernel_arguments(kargs).await,
            OsBackend::RpmOstree(r) => r.adopt_kernel_arguments(kargs).await,
            OsBackend::None(n) => Err(n.error()),
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backend_and_its_futures_are_send() {
        fn send<T: Send + Sync>(_: &T) {}
        fn send_future<T: Send>(_: &T) {}
        let backends = [
            OsBackend::None(NoneBackend::new("x")),
            OsBackend::Ostree(OstreeBackend::new(Path::new("/"), OsConfig::default())),
            OsBackend::RpmOstree(RpmOstreeBackend::new(
                Path::new("/"),
                "unix:path=/nonexistent",
            )),
        ];
        let change = OsChange::default();
        let expected = OsExpectation::default();
        for b in &backends {
            send(b);
            send_future(&b.status());
            send_future(&b.stage(&change));
            send_future(&b.verify_booted(&expected));
            send_future(&b.rollback());
            send_future(&b.adopt_kernel_arguments(&[]));
        }
    }
}
