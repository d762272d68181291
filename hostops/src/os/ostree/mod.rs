//! The libostree backend (`ostree` crate, libostree 2022.7 on Debian 12).
//!
//! ## Native and external
//!
//! The sysroot is opened **at the root** (`/` in production), exactly as `ostree admin` does
//! on a booted system: `<root>/ostree` is the deployment's link to `sysroot/ostree`,
//! `<root>/boot` is `/boot`. Two cases:
//!
//! - **native**: the root is this process's `/` (hearth runs on the booted host). libostree
//!   itself finds the booted deployment (`/run/ostree-booted` and the device and inode of `/`),
//!   and [`OstreeBackend::stage`] *stages* the new deployment (`stage_tree`): it is written to
//!   the sysroot now and finalized at shutdown by `ostree-finalize-staged.service` (bootloader
//!   entries, and the `/etc` merge as `/etc` is then). This is the production path.
//! - **external**: the root is another host's root seen from outside (in tests the live root of
//!   a container, `/proc/<pid>/root`). libostree does not consider such a sysroot booted and
//!   cannot stage for it, so hearth finds the booted deployment itself, with libostree's own
//!   rule (the deployment directory with the root's device and inode), and *writes* the new
//!   deployment as the default right away (`deploy_tree` + `write_deployments`, keeping the
//!   booted deployment, pinned ones and other stateroots, as `simple_write_deployment` does).
//!
//! ## Threads
//!
//! libostree's types are not `Send`: every operation runs on a thread of its own (a new OS
//! thread per call, awaited through a oneshot channel) that opens the sysroot, does the work and
//! drops everything. Not the tokio blocking pool: on a host whose `/sysroot` is mounted
//! read-only (Fedora CoreOS), libostree unshares the calling thread's mount namespace to remount
//! it writable, and that must not leak into a pooled thread that later writes the agent's files.
//! Mutating calls take libostree's sysroot lock (the one `ostree admin` takes).
//!
//! One operation at a time per process: the worker holds a process-wide mutex. The agent never
//! runs two anyway; the tests, which drive many sysroots from one process in parallel, once hit
//! a GLib assertion (`g_hash_table_lookup: assertion 'hash_table != NULL' failed`) followed by a
//! crash while libostree operations on different sysroots ran at the same time (once in nine
//! runs of the suite), and none in the six runs since the operations are serialized.

mod fetch;
mod rollback;
mod session;
mod space;
mod stage;
mod worker;

use std::path::{Path, PathBuf};

pub use self::session::ORIGIN_GROUP;
use self::session::{is_native, Session};
use self::worker::on_worker;
use crate::os::change::OsChange;
use crate::os::config::OsConfig;
use crate::os::error::OsError;
use crate::os::ledger::KargLedger;
use crate::os::status::{OsExpectation, OsStatus, RollbackOutcome, StagedDeployment};

/// The libostree backend for the host at a root.
#[derive(Debug, Clone)]
pub struct OstreeBackend {
    root: PathBuf,
    config: OsConfig,
}

impl OstreeBackend {
    /// The backend for the sysroot at `root` (see the module documentation).
    pub fn new(root: &Path, config: OsConfig) -> OstreeBackend {
        OstreeBackend {
            root: root.to_path_buf(),
            config,
        }
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The configuration.
    pub fn config(&self) -> &OsConfig {
        &self.config
    }

    /// Whether the root is this process's `/` (staging available), see the module docs.
    pub fn is_native(&self) -> Result<bool, OsError> {
        is_native(&self.root)
    }

    /// The booted, pending and rollback deployments.
    pub async fn status(&self) -> Result<OsStatus, OsError> {
        let (root, config) = (self.root.clone(), self.config.clone());
        on_worker(move || {
            let s = Session::open(&root, false)?;
            s.status(&config)
        })
        .await
    }

    /// Stages one new deployment carrying the whole change.
    pub async fn stage(&self, change: &OsChange) -> Result<StagedDeployment, OsError> {
        let (root, config, change) = (self.root.clone(), self.config.clone(), change.clone());
        on_worker(move || {
            let s = Session::open(&root, true)?;
            s.stage(&config, &change)
        })
        .await
    }

    /// The differences between the booted deployment and `expected`.
    pub async fn verify_booted(&self, expected: &OsExpectation) -> Result<Vec<String>, OsError> {
        let (root, config, expected) = (self.root.clone(), self.config.clone(), expected.clone());
        on_worker(move || {
            let s = Session::open(&root, false)?;
            s.verify_booted(&config, &expected)
        })
        .await
    }

    /// Makes the previous deployment the default at the next boot, or drops a pending one.
    pub async fn rollback(&self) -> Result<RollbackOutcome, OsError> {
        let (root, config) = (self.root.clone(), self.config.clone());
        on_worker(move || {
            let s = Session::open(&root, true)?;
            s.rollback(&config)
        })
        .await
    }

    /// Records kernel arguments of the booted deployment as hearth's (see
    /// [`OsBackend::adopt_kernel_arguments`](super::OsBackend::adopt_kernel_arguments)).
    pub async fn adopt_kernel_arguments(&self, kargs: &[String]) -> Result<Vec<String>, OsError> {
        let (root, config, kargs) = (self.root.clone(), self.config.clone(), kargs.to_vec());
        on_worker(move || {
            let s = Session::open(&root, true)?;
            let booted = s.info(&s.booted, &config);
            let ledger = KargLedger::new(&root);
            let mut file = ledger.load()?;
            let mut owned = file.hearth_added(&booted.kernel_args);
            for arg in &kargs {
                let have = owned.iter().filter(|a| *a == arg).count();
                let present = booted.kernel_args.iter().filter(|a| *a == arg).count();
                if have < present {
                    owned.push(arg.clone());
                }
            }
            file.record(&booted.kernel_args, &owned);
            ledger.store(&file)?;
            Ok(file.hearth_added(&booted.kernel_args))
        })
        .await
    }
}
