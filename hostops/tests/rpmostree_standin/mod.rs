//! A STAND-IN for rpm-ostree's daemon (`rpm-ostreed`), for the tests of hearth's rpm-ostree
//! backend (`hostops/tests/os_rpmostree_standin/`). rpm-ostree cannot run on the Debian test
//! machines; this service implements the part of its documented D-Bus interface
//! (`src/daemon/org.projectatomic.rpmostree1.xml` in coreos/rpm-ostree) that hearth uses, with
//! the same names, signatures, object paths and transaction protocol, and keeps deployments in
//! memory:
//!
//! - it runs on a REAL `dbus-daemon` ([`PrivateBus`]: a private bus whose policy lets only
//!   `org.projectatomic.rpmostree1` be owned) and owns that name;
//! - `/org/projectatomic/rpmostree1/Sysroot` (`...Sysroot`): `RegisterClient`,
//!   `UnregisterClient`, `Reload`, `ReloadConfig`, `GetOS`, the properties `Booted`, `Path`,
//!   `Deployments`, `ActiveTransaction`, `ActiveTransactionPath`;
//! - `/org/projectatomic/rpmostree1/<osname>` (`...OS`): `UpdateDeployment`, `KernelArgs`,
//!   `Cleanup`, `Rollback`, `FinalizeDeployment`, `GetDeploymentBootConfig`, the properties
//!   `Name`, `BootedDeployment`, `DefaultDeployment`, `RollbackDeployment`;
//! - transactions: every mutating method binds a unix socket and returns its address; the
//!   client connects peer-to-peer, calls `Transaction.Start` on `/`, and the stand-in does the
//!   work then, emitting `Message`, `TaskBegin`, `TaskEnd`, `PercentProgress` and
//!   `Finished(success, error_message)` on that connection. The server side is zbus, or
//!   ([`Standin::use_glib_transactions`]) GLib's `GDBusServer` on a GLib main loop, as in
//!   rpm-ostreed.
//!
//! Its semantics follow the daemon's source where hearth depends on them: new deployments are
//! built on the *origin merge deployment* (the pending one if any, else the booted one) and
//! staged (replacing a staged one); `KernelArgs` with `final-kernel-args` sets exactly that list
//! and does nothing when it equals `existing_kernel_arg_string`; layering errors on packages
//! already requested / not requested unless `idempotent-layering`; `Cleanup` accepts
//! `pending-deploy`, `rollback-deploy`, `base`, `repomd`. It is stricter than the daemon in one
//! way: it refuses modifiers it does not implement, so that a typo in hearth fails a test.
//! Every method call is recorded ([`Standin::calls`]) with its arguments as JSON.

#![allow(dead_code)]

mod bus;
mod glib;
mod json;
mod names;
mod os_iface;
mod service;
mod state;
mod transaction;

pub use bus::PrivateBus;
// Not every test target that includes this module names every item.
#[allow(unused_imports)]
pub use json::to_json;
#[allow(unused_imports)]
pub use names::{BUS_NAME, SYSROOT_PATH, TRANSACTION_IFACE};
pub use service::Standin;
#[allow(unused_imports)]
pub use state::{Call, Deployment};
