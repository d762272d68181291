//! [`SystemdHost`]: a booted systemd container with its own writable root and system bus.
//!
//! This file holds the host's state and what can be read from it (paths, bus, boot); the
//! phases of its life are in the files below, each an `impl SystemdHost` block:
//!
//! - `options.rs`: [`HostOptions`], [`HostNetwork`], the environment variables, where host
//!   directories go
//! - `procs.rs`: the systemd-nspawn process (its exit codes, its waiter thread) and the process
//!   tree below it
//! - `reap.rs`: what systemd-nspawn leaves outside the host directory; hosts of dead test
//!   processes
//! - `setup.rs`: the host's directory, writable root (overlay, copy or direct), machine-id,
//!   cgroups
//! - `launch.rs`: booting: systemd-nspawn in the host's cgroups, its PID 1, waiting for
//!   `running`
//! - `exec.rs`: running commands inside (`nsenter`)
//! - `reboot.rs`: waiting for a reboot inside and booting again
//! - `cleanup.rs`: stopping the host and removing what it made (also on drop)
//!
//! Imports run one way: `options`, `procs` and `reap` use nothing of the host; this file uses
//! them (and re-exports from them); the phase files (`setup`, `launch`, `exec`, `reboot`,
//! `cleanup`) use this file and those three, and `launch` uses `setup`.

mod cleanup;
mod exec;
mod launch;
mod options;
mod procs;
mod reap;
mod reboot;
mod setup;

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use nix::unistd::Pid;

use crate::cgroup::HostCgroup;
use crate::util::{self, Tools};
use procs::Nspawn;

pub use options::{HostNetwork, HostOptions, COPY_ROOT_ENV, KEEP_ENV, TMPDIR_ENV};
pub use procs::NSPAWN_REBOOT_EXIT_CODE;
pub(crate) use reap::reap_stale_hosts_once;

/// What one boot of a host reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootInfo {
    /// 1 for the first boot, incremented by every reboot.
    pub boot_count: u32,
    /// The container's boot id (`/proc/sys/kernel/random/boot_id` inside; new on every boot).
    pub boot_id: String,
    /// The systemd Manager's `SystemState` when the boot was judged complete: `running`, or
    /// `degraded` with the failed units in `failed_units`.
    pub system_state: String,
    /// Units in the `failed` state when the boot completed (empty when `running`).
    pub failed_units: Vec<String>,
    /// From starting systemd-nspawn to the state above.
    pub boot_time: Duration,
}

/// How the host's writable root was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RootKind {
    /// Nothing mounted or copied yet.
    None,
    /// An overlay mounted at `root` (lower: the rootfs, upper/work in the host directory).
    Overlay,
    /// A full copy of the rootfs at `root`.
    Copy,
    /// `root` is booted as it is (an ostree deployment directory, see `crate::ostree`):
    /// nothing is mounted or copied, and nothing below it is removed.
    Direct,
}

/// A real systemd host: a Debian 12 tree booted with `systemd-nspawn -b`, with its own
/// writable root, system bus, cgroups and network namespace (loopback only).
///
/// Dropping it stops the container and removes everything it made (processes, mounts,
/// cgroups, directories), also while a test panics.
#[derive(Debug)]
pub struct SystemdHost {
    name: String,
    dir: PathBuf,
    root: PathBuf,
    bus_dir: PathBuf,
    log_path: PathBuf,
    lower: PathBuf,
    root_kind: RootKind,
    machine_id: String,
    cgroup: Option<HostCgroup>,
    tools: Tools,
    opts: HostOptions,
    nspawn: Option<Nspawn>,
    leader: Option<Pid>,
    last_exit: Option<ExitStatus>,
    boot: Option<BootInfo>,
    boots: u32,
    cleaned: bool,
}

impl SystemdHost {
    /// Adds the tail of the nspawn log to an error.
    fn with_log(&self, e: anyhow::Error) -> anyhow::Error {
        anyhow!(
            "host {}: {e:#}\n--- last lines of {} ---\n{}",
            self.name,
            self.log_path.display(),
            util::tail(&self.log_path, 40)
        )
    }

    /// The host's name: its machine name and hostname (`hearth-<8 hex digits>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host-side path of the container's root directory. Files written below it are seen
    /// inside (and the other way round).
    ///
    /// This is the container's disk: what the container mounts itself (`/run`, `/tmp`,
    /// `/proc`, ...) is not here; see [`SystemdHost::live_path`]. Beware of absolute symlinks
    /// inside the tree: on the host side they point into the host's own filesystem.
    /// [`SystemdHost::path`] does not resolve them either.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The host-side path of the absolute path `inside` of the container:
    /// `host.path("/etc/hostname")` is `<root>/etc/hostname`.
    pub fn path(&self, inside: impl AsRef<Path>) -> PathBuf {
        join_inside(&self.root, inside.as_ref())
    }

    /// The host-side path of the absolute path `inside`, as the running container sees it
    /// (`/proc/<leader>/root/...`): unlike [`SystemdHost::path`] this reaches the container's
    /// own mounts too (`/run`, `/tmp`, `/dev`, `/proc`). Valid while the host runs; after a
    /// reboot it points into the new boot.
    pub fn live_path(&self, inside: impl AsRef<Path>) -> PathBuf {
        join_inside(
            &PathBuf::from(format!("/proc/{}/root", self.leader_pid())),
            inside.as_ref(),
        )
    }

    /// The host-side path of the container's system bus socket.
    pub fn bus_socket(&self) -> PathBuf {
        self.bus_dir.join("system_bus_socket")
    }

    /// The container's system bus as a D-Bus address, `unix:path=/.../system_bus_socket`;
    /// usable with zbus as root (EXTERNAL authentication).
    pub fn bus_address(&self) -> String {
        format!("unix:path={}", self.bus_socket().display())
    }

    /// A new zbus connection to the container's system bus (needs a tokio runtime).
    pub async fn bus(&self) -> Result<zbus::Connection> {
        crate::bus::connect(&self.bus_address())
            .await
            .with_context(|| format!("connecting to {}", self.bus_address()))
    }

    /// The pid (in the machine's pid namespace) of the container's PID 1, systemd, in the
    /// current boot. After the container exited (e.g. for a reboot not yet waited for with
    /// [`SystemdHost::wait_for_reboot`]) it is the pid of the last boot.
    pub fn leader_pid(&self) -> u32 {
        self.leader.map(|p| p.as_raw() as u32).unwrap_or(0)
    }

    /// The pid of the running systemd-nspawn process, if any.
    pub fn nspawn_pid(&self) -> Option<u32> {
        self.nspawn.as_ref().map(|n| n.pid.as_raw() as u32)
    }

    /// How many times the host booted: 1 after [`SystemdHost::boot`], +1 per reboot.
    pub fn boot_count(&self) -> u32 {
        self.boot.as_ref().map(|b| b.boot_count).unwrap_or(0)
    }

    /// The boot id of the current boot (changes on every reboot).
    pub fn boot_id(&self) -> &str {
        self.boot.as_ref().map(|b| b.boot_id.as_str()).unwrap_or("")
    }

    /// What the current boot reached (state, failed units, boot time).
    pub fn boot_info(&self) -> Option<&BootInfo> {
        self.boot.as_ref()
    }

    /// The host's machine-id (`/etc/machine-id`), unique per host, kept across reboots.
    pub fn machine_id(&self) -> &str {
        &self.machine_id
    }

    /// The host's directory (root, overlay layers, bus directory, nspawn log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The host's cgroup directories (one per cgroup hierarchy).
    pub fn cgroup_dirs(&self) -> Vec<PathBuf> {
        self.cgroup
            .as_ref()
            .map(|c| c.dirs().to_vec())
            .unwrap_or_default()
    }

    /// The file that collects systemd-nspawn's output and the container's console.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The last `lines` lines of the nspawn log.
    pub fn log_tail(&self, lines: usize) -> String {
        util::tail(&self.log_path, lines)
    }

    /// Whether systemd-nspawn is still running (false after a reboot or power-off inside
    /// until [`SystemdHost::wait_for_reboot`]).
    pub fn is_running(&self) -> bool {
        self.nspawn.as_ref().is_some_and(|n| n.exit.get().is_none())
    }
}

/// `root` joined with `inside` taken as an absolute path in the container: `..` never climbs
/// above `root`.
fn join_inside(root: &Path, inside: &Path) -> PathBuf {
    let mut parts: Vec<&OsStr> = Vec::new();
    for c in inside.components() {
        match c {
            Component::Normal(part) => parts.push(part),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    let mut out = root.to_path_buf();
    out.extend(parts);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_maps_inside_paths_below_the_root() {
        let root = Path::new("/x/root");
        let join = |inside: &str| join_inside(root, Path::new(inside));
        assert_eq!(join("/etc/hostname"), PathBuf::from("/x/root/etc/hostname"));
        assert_eq!(
            join("etc/./hostname"),
            PathBuf::from("/x/root/etc/hostname")
        );
        assert_eq!(join("/etc/../passwd"), PathBuf::from("/x/root/passwd"));
        assert_eq!(join("/../../etc"), PathBuf::from("/x/root/etc"));
        assert_eq!(join("/"), PathBuf::from("/x/root"));
    }
}
