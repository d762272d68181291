//! Stopping a host and removing what it made: SIGTERM to systemd-nspawn (a clean shutdown
//! inside), SIGKILL to the host's whole cgroup after the stop timeout, then its cgroups, the
//! overlay mount and the host directory. Dropping a host does the same.

use std::fs;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tracing::{debug, info, warn};

use super::reap::{remove_nspawn_lock, remove_propagate_dir};
use super::{RootKind, SystemdHost};
use crate::mounts;

impl SystemdHost {
    /// Stops the host and removes everything it made; reports what could not be cleaned up
    /// (dropping the host does the same and logs such errors).
    pub fn shutdown(mut self) -> Result<()> {
        self.cleanup()
    }

    /// Stops nspawn (SIGTERM: a clean shutdown inside; SIGKILL to the whole cgroup after
    /// `stop_timeout`), then removes the cgroups, the overlay and the host directory.
    fn cleanup(&mut self) -> Result<()> {
        if self.cleaned {
            return Ok(());
        }
        self.cleaned = true;
        let started = Instant::now();
        let mut errors: Vec<String> = Vec::new();

        if let Some(mut nspawn) = self.nspawn.take() {
            if nspawn.exit.get().is_none() {
                debug!(host = %self.name, "stopping: SIGTERM to systemd-nspawn");
                let _ = kill(nspawn.pid, Signal::SIGTERM);
                if nspawn.exit.wait(self.opts.stop_timeout).is_none() {
                    warn!(host = %self.name, "no clean shutdown in {:?}: SIGKILL", self.opts.stop_timeout);
                    self.kill_everything(nspawn.pid);
                    if nspawn.exit.wait(Duration::from_secs(10)).is_none() {
                        errors.push(format!(
                            "systemd-nspawn (pid {}) survived SIGKILL",
                            nspawn.pid
                        ));
                    }
                }
            }
            self.last_exit = nspawn.exit.get();
            nspawn.join_waiter();
        }

        if let Some(cgroup) = self.cgroup.take() {
            if !cgroup.pids().is_empty() {
                cgroup.kill_all();
            }
            if !cgroup.wait_empty(Duration::from_secs(10)) {
                errors.push(format!(
                    "processes left in the host's cgroups: {:?}",
                    cgroup.pids()
                ));
            } else if let Err(e) = cgroup.remove() {
                errors.push(format!("{e:#}"));
            }
        }

        remove_nspawn_lock(&self.root);
        if self.root_kind == RootKind::Overlay || mounts::is_mount_point(&self.root) {
            if let Err(e) = mounts::unmount(&self.root) {
                errors.push(format!("{e:#}"));
            }
        }
        remove_propagate_dir(&self.name);

        if self.opts.keep_dir {
            let _ = fs::remove_file(self.dir.join("owner"));
            info!(host = %self.name, dir = %self.dir.display(), "keeping the host directory");
        } else if let Err(e) = mounts::remove_tree(&self.dir) {
            errors.push(format!("{e:#}"));
        }
        debug!(host = %self.name, ms = started.elapsed().as_millis() as u64, "host cleaned up");
        if errors.is_empty() {
            Ok(())
        } else {
            Err(anyhow!(
                "cleaning up host {}: {}",
                self.name,
                errors.join("; ")
            ))
        }
    }

    /// SIGKILL to all of the host's processes: the cgroup, and nspawn and the leader in case
    /// they are somewhere else.
    fn kill_everything(&self, nspawn: Pid) {
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill_all();
        }
        // Killing the container's PID 1 kills its whole pid namespace.
        if let Some(leader) = self.leader {
            let _ = kill(leader, Signal::SIGKILL);
        }
        let _ = kill(nspawn, Signal::SIGKILL);
    }
}

impl Drop for SystemdHost {
    fn drop(&mut self) {
        if let Err(e) = self.cleanup() {
            warn!("{e:#}");
        }
    }
}
