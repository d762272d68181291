//! Reboots: a reboot inside makes systemd-nspawn exit with [`NSPAWN_REBOOT_EXIT_CODE`]; the
//! harness waits for that and boots the same root (or, for `crate::ostree`, the next
//! deployment) again.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use tracing::info;

use super::procs::NSPAWN_REBOOT_EXIT_CODE;
use super::{BootInfo, RootKind, SystemdHost};

impl SystemdHost {
    /// Waits until the container exits because something inside asked for a reboot
    /// (systemd-nspawn exits with 133), boots it again on the same root and waits until it
    /// runs. `timeout` covers both. Fails if the container exits otherwise (e.g. power-off)
    /// or does not go down in time; the error includes the tail of the nspawn log.
    pub fn wait_for_reboot(&mut self, timeout: Duration) -> Result<BootInfo> {
        self.wait_for_reboot_then(timeout, |_| Ok(()))
    }

    /// Like [`SystemdHost::wait_for_reboot`], calling `before_boot` between the exit and the
    /// next boot (where `crate::ostree` plays bootloader: it picks the deployment to boot and
    /// calls [`SystemdHost::set_boot_root`]).
    pub(crate) fn wait_for_reboot_then(
        &mut self,
        timeout: Duration,
        before_boot: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<BootInfo> {
        let deadline = Instant::now() + timeout;
        let nspawn = self
            .nspawn
            .as_mut()
            .context("the host has no running systemd-nspawn")?;
        let Some(status) = nspawn.exit.wait(timeout) else {
            let e = anyhow!("no reboot within {timeout:?}: systemd-nspawn is still running");
            return Err(self.with_log(e));
        };
        nspawn.join_waiter();
        self.nspawn = None;
        self.last_exit = Some(status);
        if status.code() != Some(NSPAWN_REBOOT_EXIT_CODE) {
            let e = anyhow!(
                "the host went down without a reboot: systemd-nspawn exited with {status} \
                 (a reboot exits with {NSPAWN_REBOOT_EXIT_CODE})"
            );
            return Err(self.with_log(e));
        }
        info!(host = %self.name, boot = self.boots, "host rebooting");
        before_boot(self).map_err(|e| self.with_log(e))?;
        self.launch(deadline)
    }

    /// For a host booted with `boot_direct`: the tree and the extra nspawn arguments of the
    /// next boot.
    pub(crate) fn set_boot_root(&mut self, root: PathBuf, extra_nspawn_args: Vec<String>) {
        debug_assert_eq!(self.root_kind, RootKind::Direct);
        self.root = root.clone();
        self.lower = root;
        self.opts.extra_nspawn_args = extra_nspawn_args;
    }
}
