//! # hearth-vm-tests: real test hosts for hearth (Tier 1)
//!
//! [`SystemdHost`] boots a real Debian 12 systemd with its own system bus in
//! `systemd-nspawn`, so that tests of the agent talk to the real thing: real units, real
//! `systemctl`, real logind, real reboots.
//!
//! ```no_run
//! use std::time::Duration;
//! use hearth_vm_tests::SystemdHost;
//!
//! # fn main() -> anyhow::Result<()> {
//! let mut host = SystemdHost::boot()?; // fresh container, ~0.5 s once the rootfs is cached
//! std::fs::write(host.path("/etc/motd"), "hello\n")?; // files below root() are seen inside
//! let out = host.exec(&["cat", "/etc/motd"])?; // nsenter -t <leader> -a cat /etc/motd
//! assert_eq!(out.stdout, "hello\n");
//! let address = host.bus_address(); // unix:path=.../system_bus_socket, for zbus as root
//! # let _ = address;
//! host.exec(&["systemctl", "reboot"])?;
//! let boot = host.wait_for_reboot(Duration::from_secs(60))?; // exit 133 -> boot again
//! assert_eq!(boot.boot_count, 2);
//! drop(host); // stops the container, removes mounts, cgroups and directories
//! # Ok(()) }
//! ```
//!
//! ## How it works
//!
//! - **Root filesystem**: `scripts/build-rootfs.sh` (debootstrap minbase bookworm with
//!   systemd, dbus, logind, a `core` user) runs once; the tree is cached in
//!   `$HEARTH_TEST_CACHE` (default `/var/tmp/hearth-test-cache`) under the sha256 of the
//!   script, built under an exclusive `flock` into a temporary directory and renamed into
//!   place. See [`cached_rootfs`].
//! - **Per host**: an overlay mount (lower: the cached tree, upper/work: the host's
//!   directory in `$HEARTH_TEST_TMPDIR` or `/tmp`), a fresh machine-id, a bus directory
//!   bound at `/run/dbus`, and a cgroup of its own (`<our cgroup>/hearth-vm-tests/<name>`)
//!   that nspawn is started in.
//! - **Boot**: `systemd-nspawn --boot --register=no --keep-unit --private-network
//!   --bind=BUS:/run/dbus --console=read-only`, output (nspawn's and the container
//!   console's) appended to `nspawn.log` in the host directory; the harness polls the
//!   Manager's `SystemState` over the container's bus with zbus until `running` or
//!   `degraded`. Errors carry the tail of that log.
//! - **Reboot**: a reboot inside makes nspawn exit with 133;
//!   [`SystemdHost::wait_for_reboot`] boots the same root again. [`BootInfo`] has the boot
//!   count and the container's boot id, which changes on every boot.
//! - **Stop**: SIGTERM to nspawn (a clean shutdown inside, ~0.2 s), SIGKILL to the host's
//!   whole cgroup after [`HostOptions::stop_timeout`], then the overlay is unmounted and the
//!   directories removed. Hosts of test processes that died without cleaning up are removed
//!   before the next process's first boot.
//!
//! ## Requirements
//!
//! Root, `systemd-nspawn` (Debian `systemd-container`), `nsenter` (`util-linux`), and for the
//! first build `debootstrap` and the Debian archive: `scripts/install-deps.sh` installs them.
//! Without them [`SystemdHost::boot`] fails with a message that says what is missing: tests
//! never skip silently.
//!
//! The API is blocking (booting takes about half a second) and works in plain `#[test]`s as
//! well as inside `#[tokio::test]`s (the bus polling runs on a thread of its own). Only
//! [`SystemdHost::bus`] and the [`bus`] helpers are async (zbus 6 has no blocking API).
//!
//! ## Modules
//!
//! One concept per file, each named in its module doc; imports between files run one way.
//!
//! - `host/`: [`SystemdHost`]. `mod.rs` holds its state and what can be read from it (paths,
//!   bus, boot); `options.rs` ([`HostOptions`], [`HostNetwork`], the environment variables),
//!   `procs.rs` (the systemd-nspawn process, the container's PID 1) and `reap.rs` (what nspawn
//!   leaves behind, hosts of dead test processes) know nothing of the host; the phases,
//!   `impl SystemdHost` each, are `setup.rs` (directory, writable root, machine-id, cgroups),
//!   `launch.rs` (booting), `exec.rs`, `reboot.rs` and `cleanup.rs` (stopping, also on drop).
//! - `netns.rs`: [`SharedNetwork`], a network namespace hosts and test processes share.
//! - [`bus`]: async helpers for a host's system bus; waiting for `SystemState` `running`.
//! - `exit_slot.rs`: the exit status of systemd-nspawn, set by its waiter thread and read by
//!   `host/` and `bus.rs`.
//! - `exec.rs`: running a command with captured output and a timeout ([`ExecOutput`]).
//! - `cgroup.rs`, `mounts.rs`: a host's cgroups; the overlay, mount points, removing trees.
//! - `rootfs.rs`, `util.rs`: the cached Debian tree; host checks, log tails, random names,
//!   cached builds under a lock.
//! - [`ostree`]: the ostree tier: `images.rs`, `entries.rs` (boot entries), `sysroot.rs`
//!   ([`ostree::TestSysroot`]), `booted.rs` ([`ostree::OstreeHost`]).
//! - [`qemu`]: the VM tier: `image.rs`, `entries.rs` (boot entries read with `debugfs`),
//!   `vm.rs` ([`qemu::Vm`]), `boot.rs` (one boot: QEMU, serial log, reboots), `guest.rs`
//!   (scripts run in the guest), `workspace.rs` (binaries for the guest).
//! - [`kube`]: the Kubernetes tier: `build.rs` (the cached kube-apiserver,
//!   kube-controller-manager and kubectl of `images/build-kube.sh`), `pki.rs` (CA,
//!   certificates, tokens, kubeconfigs), `procs.rs` (the cluster's processes), `mod.rs`
//!   ([`kube::KubeCluster`]).

pub mod bus;
mod cgroup;
mod exec;
mod exit_slot;
mod host;
pub mod kube;
mod mounts;
mod netns;
pub mod ostree;
pub mod qemu;
pub mod registry;
mod relay;
mod rootfs;
mod util;
mod wait;

pub use exec::ExecOutput;
pub use host::{
    BootInfo, HostNetwork, HostOptions, SystemdHost, COPY_ROOT_ENV, KEEP_ENV,
    NSPAWN_REBOOT_EXIT_CODE, TMPDIR_ENV,
};
pub use netns::SharedNetwork;
pub use relay::relay_into;
pub use rootfs::{
    cache_dir, cached_rootfs, rootfs_key, BUILD_ROOTFS_SCRIPT, CACHE_ENV, DEFAULT_CACHE_DIR,
};
pub use wait::wait_for;
