//! The rpm-ostree backend: rpm-ostree's daemon (`rpm-ostreed`) over D-Bus, on RHCOS and Fedora
//! CoreOS, where hearth must not write deployments behind rpm-ostree's back.
//!
//! ## The D-Bus API used
//!
//! Bus name [`BUS_NAME`] on the system bus (D-Bus-activated on real hosts):
//!
//! - the Sysroot object [`SYSROOT_PATH`] (`org.projectatomic.rpmostree1.Sysroot`):
//!   `RegisterClient`/`UnregisterClient` around every operation (the daemon exits when idle
//!   without clients), `Reload` after each transaction (to sync the properties), the properties
//!   `Booted` (the booted OS object), `Path` and `Deployments` (`aa{sv}`, boot order);
//! - the booted OS object (`org.projectatomic.rpmostree1.OS`): `GetDeploymentBootConfig` (the
//!   kernel arguments: the `Deployments` dicts do not carry them on any version),
//!   `UpdateDeployment`, `KernelArgs`, `Cleanup`, `Rollback`;
//! - transactions: each mutating method returns a peer-to-peer D-Bus address
//!   (`unix:path=/run/rpm-ostree/transaction.sock` on real hosts). hearth connects to it
//!   directly (no bus), subscribes to everything on that connection, calls
//!   `org.projectatomic.rpmostree1.Transaction.Start` on `/`, logs `Message`, `TaskBegin`,
//!   `TaskEnd` and `PercentProgress`, and waits for `Finished(success, error_message)`.
//!
//! ## One change, up to three transactions
//!
//! [`RpmOstreeBackend::stage`] computes everything from the **booted** deployment, as the
//! libostree backend does:
//!
//! 1. `Cleanup(["pending-deploy"])` when a deployment is pending (rpm-ostree builds new
//!    deployments on the pending one; dropping it first makes the result independent of it).
//! 2. `UpdateDeployment(modifiers, options)` for the OS image (`set-refspec`, or
//!    `set-revision` for a commit checksum), the kernel type (the MCO's override swap:
//!    `override-remove-packages` / `override-reset-packages` of the default kernel packages,
//!    `install-packages` / `uninstall-packages` of the realtime or 64k ones) and extensions
//!    (`install-packages` / `uninstall-packages`), all in **one** transaction.
//! 3. `KernelArgs` with the option `final-kernel-args`: the whole list that the ledger diff
//!    computed ([`super::ledger::plan_kernel_args`], the same code as the libostree backend),
//!    so order and duplicates follow hearth's rules, not rpm-ostree's key-grouped patching.
//!    rpm-ostree has no way to carry kernel arguments in `UpdateDeployment`; its `KernelArgs`
//!    transaction deploys from the pending deployment (no pull, package cache only), so the
//!    result is one staged deployment carrying image, kernel, packages and arguments.
//!
//! `UpdateDeployment` goes first because it is the step that can fail for reasons outside the
//! host (pulls, package resolution); `KernelArgs` is local. If `KernelArgs` fails after
//! `UpdateDeployment` staged a deployment, that deployment lacks the kernel arguments: hearth
//! removes it (`Cleanup(["pending-deploy"])`) and returns the `KernelArgs` error, saying whether
//! the removal worked (if it did not, the error says not to reboot).
//!
//! The new deployment is *staged* (finalized at shutdown by `ostree-finalize-staged.service`):
//! [`Finalization::AtShutdown`](crate::os::Finalization::AtShutdown). hearth does not use
//! `lock-finalization`/`FinalizeDeployment`.
//!
//! ## Errors
//!
//! Every failure of the daemon is [`OsError::RpmOstree`] with the method, the transaction's
//! address when there is one, and the daemon's message (`Finished`'s `error_message`, or the
//! D-Bus error as `detail (name)`). A method refused with "Transaction in progress" (another
//! client's transaction) is retried for up to [`BUSY_WAIT`]
//! ([`RpmOstreeBackend::with_busy_wait`]). A transaction connection that closes before
//! `Finished` is an error too.
//!
//! Tested against a stand-in D-Bus service only (rpm-ostree does not run on Debian): see
//! `hostops/tests/os_rpmostree_standin/` and docs/os-layer.md for what that does and does not
//! prove.

mod dbus;
mod image;
mod packages;
mod session;
mod stage;

use std::path::{Path, PathBuf};
use std::time::Duration;

use zbus::OwnedObjectPath;

use self::dbus::{connect_bus, get_property};
pub use self::dbus::{
    BUS_NAME, CLIENT_ID, OS_IFACE, SYSROOT_IFACE, SYSROOT_PATH, TRANSACTION_IFACE,
};
pub use self::image::{container_image, RpmOstreeImage};
pub use self::packages::{
    extension_packages, kernel_type_packages, DEFAULT_KERNEL_PACKAGES, EXTENSIONS,
    KERNEL_64K_PACKAGES, REALTIME_KERNEL_PACKAGES,
};
use self::session::Session;
use crate::os::change::OsChange;
use crate::os::compare::{cmdline_differences, compare_booted};
use crate::os::error::OsError;
use crate::os::ledger::KargLedger;
use crate::os::status::{OsExpectation, OsStatus, RollbackOutcome, StagedDeployment};

/// How long a method waits by default while another client's transaction runs.
pub const BUSY_WAIT: Duration = Duration::from_secs(300);

/// The rpm-ostree backend for the host at a root, talking to the daemon on a bus.
#[derive(Debug, Clone)]
pub struct RpmOstreeBackend {
    root: PathBuf,
    bus_address: String,
    busy_wait: Duration,
}

impl RpmOstreeBackend {
    /// The backend for the host at `root` (where the ledger lives and `/proc/cmdline` is read),
    /// whose rpm-ostree daemon is on the bus at `bus_address`. Nothing is connected yet.
    pub fn new(root: &Path, bus_address: &str) -> RpmOstreeBackend {
        RpmOstreeBackend {
            root: root.to_path_buf(),
            bus_address: bus_address.to_string(),
            busy_wait: BUSY_WAIT,
        }
    }

    /// How long a method waits while the daemon answers "Transaction in progress" (another
    /// client's transaction, e.g. zincati's or an admin's); [`BUSY_WAIT`] by default.
    pub fn with_busy_wait(mut self, limit: Duration) -> RpmOstreeBackend {
        self.busy_wait = limit;
        self
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The bus address.
    pub fn bus_address(&self) -> &str {
        &self.bus_address
    }

    /// Connects and reads the Sysroot's `Booted` property: whether the daemon answers.
    pub async fn probe(&self) -> Result<(), OsError> {
        let conn = connect_bus(&self.bus_address).await?;
        let booted: OwnedObjectPath =
            get_property(&conn, SYSROOT_PATH, SYSROOT_IFACE, "Booted").await?;
        if booted.as_str() == "/" {
            return Err(OsError::RpmOstree {
                method: "reading Sysroot.Booted".into(),
                transaction: None,
                message: "the daemon reports no booted OS".into(),
            });
        }
        Ok(())
    }

    /// The booted, pending and rollback deployments.
    pub async fn status(&self) -> Result<OsStatus, OsError> {
        let s = Session::open(&self.bus_address, self.busy_wait).await?;
        let r = s.status().await;
        s.close().await;
        r
    }

    /// Stages one new deployment carrying the whole change (see the module documentation).
    pub async fn stage(&self, change: &OsChange) -> Result<StagedDeployment, OsError> {
        let s = Session::open(&self.bus_address, self.busy_wait).await?;
        let r = s.stage(&self.root, change).await;
        s.close().await;
        r
    }

    /// The differences between the booted deployment and `expected`.
    pub async fn verify_booted(&self, expected: &OsExpectation) -> Result<Vec<String>, OsError> {
        let s = Session::open(&self.bus_address, self.busy_wait).await?;
        let r = s.status().await;
        s.close().await;
        let status = r?;
        let mut out = compare_booted(&status.booted, expected);
        if let Some(want) = &expected.deployment {
            if *want != status.booted.id
                && status.deployments.iter().any(|d| d.staged && d.id == *want)
            {
                out.push(format!(
                    "the deployment {want} is still staged: the host has not rebooted since it \
                     was staged (or ostree-finalize-staged.service did not run at shutdown)"
                ));
            }
        }
        out.extend(cmdline_differences(&self.root, expected));
        Ok(out)
    }

    /// Drops a pending deployment (`Cleanup(["pending-deploy"])`), or makes the rollback
    /// deployment the default (`Rollback`).
    pub async fn rollback(&self) -> Result<RollbackOutcome, OsError> {
        let s = Session::open(&self.bus_address, self.busy_wait).await?;
        let r = s.rollback().await;
        s.close().await;
        r
    }

    /// Records kernel arguments of the booted deployment as hearth's (see
    /// [`OsBackend::adopt_kernel_arguments`](crate::os::OsBackend::adopt_kernel_arguments)).
    pub async fn adopt_kernel_arguments(&self, kargs: &[String]) -> Result<Vec<String>, OsError> {
        let booted = self.status().await?.booted;
        let ledger = KargLedger::new(&self.root);
        let mut file = ledger.load()?;
        let mut owned = file.hearth_added(&booted.kernel_args);
        for arg in kargs {
            let have = owned.iter().filter(|a| *a == arg).count();
            let present = booted.kernel_args.iter().filter(|a| *a == arg).count();
            if have < present {
                owned.push(arg.clone());
            }
        }
        file.record(&booted.kernel_args, &owned);
        ledger.store(&file)?;
        Ok(file.hearth_added(&booted.kernel_args))
    }
}
