//! A [`Vm`]: its options, its directory (a sparse copy of the disk, the share, the serial log),
//! what can be read from it, stopping it, and VMs left behind by dead test processes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Once;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tracing::{debug, info, warn};

use super::entries::EspEntry;
use super::image::{cached_vm_image, VmImage};
use crate::host::{KEEP_ENV, TMPDIR_ENV};
use crate::util;

/// Lines of the serial log that errors carry.
pub(super) const LOG_TAIL_LINES: usize = 100;

const VM_DIR_PREFIX: &str = "hearth-vm-";

/// OVMF's code (Debian's `ovmf`), read-only.
pub(super) const OVMF_CODE: &str = "/usr/share/OVMF/OVMF_CODE_4M.fd";

/// OVMF's variables template: each VM gets a copy (systemd-boot writes variables).
const OVMF_VARS: &str = "/usr/share/OVMF/OVMF_VARS_4M.fd";

/// How to run a [`Vm`].
#[derive(Debug, Clone)]
pub struct VmOptions {
    /// Guest memory (MiB).
    pub memory_mib: u32,
    /// Virtual CPUs (TCG threads).
    pub cpus: u32,
    /// How long one boot may take until the guest script reports (TCG is slow: generous).
    pub boot_timeout: Duration,
    /// How long [`Vm::wait_for_reboot`] waits for QEMU to exit: whatever the guest does before
    /// it reboots (an agent staging a deployment) plus the shutdown.
    pub shutdown_timeout: Duration,
    /// How long one [`Vm::exec`] may take.
    pub exec_timeout: Duration,
    /// Keep the VM's directory (disk, serial log, share) after it stops (`HEARTH_TEST_KEEP=1`).
    pub keep_dir: bool,
}

impl Default for VmOptions {
    fn default() -> Self {
        VmOptions {
            memory_mib: 1024,
            cpus: 2,
            boot_timeout: Duration::from_secs(300),
            shutdown_timeout: Duration::from_secs(300),
            exec_timeout: Duration::from_secs(300),
            keep_dir: std::env::var_os(KEEP_ENV).is_some_and(|v| !v.is_empty() && v != "0"),
        }
    }
}

/// One boot of a [`Vm`].
#[derive(Debug, Clone)]
pub struct VmBoot {
    /// 1 for the first boot, +1 for each reboot.
    pub boot_count: u32,
    /// The entry systemd-boot booted (`LoaderEntrySelected`, the file name), without its boot
    /// counter: `hearth-<deployment>.conf`.
    pub entry: String,
    /// The guest's boot id.
    pub boot_id: String,
    /// `/proc/cmdline` as the guest read it.
    pub proc_cmdline: String,
    /// From starting QEMU to the guest script's report.
    pub boot_time: Duration,
    /// Boots that reset the machine before the guest script ran, before this one.
    pub failed_boots: Vec<FailedBoot>,
}

/// A boot that reset the machine before the guest script ran.
#[derive(Debug, Clone)]
pub struct FailedBoot {
    /// The kernel command line it printed (what systemd-boot started).
    pub cmdline: String,
    /// The ESP's entries right after it (QEMU stopped): the boot counters as systemd-boot
    /// left them.
    pub esp: Vec<EspEntry>,
}

/// A QEMU guest booted from a copy of the cached VM image (see the module documentation).
/// Dropping it kills QEMU and removes its directory.
#[derive(Debug)]
pub struct Vm {
    pub(super) opts: VmOptions,
    pub(super) image: VmImage,
    pub(super) dir: PathBuf,
    pub(super) disk: PathBuf,
    pub(super) efi_vars: PathBuf,
    pub(super) share: PathBuf,
    pub(super) serial_log: PathBuf,
    pub(super) qemu: Option<Child>,
    /// Offset of the current boot's first byte in the serial log.
    pub(super) boot_log_offset: u64,
    pub(super) boot: Option<VmBoot>,
    pub(super) boot_count: u32,
    pub(super) next_cmd: u64,
}

impl Vm {
    /// Copies the cached disk and boots its default entry; returns once the guest script runs.
    pub fn boot(opts: VmOptions) -> Result<Vm> {
        let qemu = util::require_program("qemu-system-x86_64", "qemu-system-x86")?;
        if !Path::new(OVMF_CODE).exists() {
            bail!(
                "{OVMF_CODE} is missing: install Debian's ovmf (vm-tests/scripts/install-deps.sh)"
            );
        }
        debug!(qemu = %qemu.display(), "QEMU found");
        let image = cached_vm_image()?;
        let base = base_dir();
        reap_stale_vms_once(&base);
        fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
        let base = fs::canonicalize(&base)?;
        let dir = loop {
            let dir = base.join(format!("{VM_DIR_PREFIX}{}", &util::random_hex32()?[..8]));
            match fs::create_dir(&dir) {
                Ok(()) => break dir,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
            }
        };
        let me = std::process::id() as i32;
        fs::write(
            dir.join("owner"),
            format!(
                "{me} {}\n",
                util::process_start_time(me).unwrap_or_default()
            ),
        )?;
        let share = dir.join("share");
        fs::create_dir_all(share.join("cmd"))?;
        let mut vm = Vm {
            opts,
            disk: dir.join("disk.raw"),
            efi_vars: dir.join("efi-vars.fd"),
            serial_log: dir.join("serial.log"),
            share,
            dir,
            image,
            qemu: None,
            boot_log_offset: 0,
            boot: None,
            boot_count: 0,
            next_cmd: 1,
        };
        let started = Instant::now();
        let status = Command::new("cp")
            .args(["--sparse=always", "--reflink=auto"])
            .arg(&vm.image.disk)
            .arg(&vm.disk)
            .status()
            .context("running cp")?;
        if !status.success() {
            bail!(
                "copying {} to {} failed: {status}",
                vm.image.disk.display(),
                vm.disk.display()
            );
        }
        fs::copy(OVMF_VARS, &vm.efi_vars)
            .with_context(|| format!("copying {OVMF_VARS} (Debian's ovmf)"))?;
        debug!(seconds = started.elapsed().as_secs_f64(), "disk copied");
        vm.start(0)?;
        Ok(vm)
    }

    /// The image this VM was made from.
    pub fn image(&self) -> &VmImage {
        &self.image
    }

    /// The VM's directory (disk, serial log, share).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The host side of the guest's [`SHARE_INSIDE`](super::SHARE_INSIDE): files put here are
    /// seen inside.
    pub fn share_dir(&self) -> &Path {
        &self.share
    }

    /// The serial console log (all boots).
    pub fn serial_log(&self) -> &Path {
        &self.serial_log
    }

    /// The last `lines` lines of the serial log.
    pub fn log_tail(&self, lines: usize) -> String {
        util::tail(&self.serial_log, lines)
    }

    /// The current boot.
    pub fn current_boot(&self) -> Option<&VmBoot> {
        self.boot.as_ref()
    }

    /// How many times the guest has booted.
    pub fn boot_count(&self) -> u32 {
        self.boot_count
    }

    /// `/proc/cmdline` of the current boot, as the guest read it.
    pub fn proc_cmdline(&self) -> &str {
        self.boot.as_ref().map_or("", |b| b.proc_cmdline.as_str())
    }

    /// Stops QEMU (SIGKILL: the guest's disk is a per-VM copy that nobody reads afterwards) and
    /// removes the VM's directory (unless kept), like dropping it, but reports what went wrong.
    pub fn shutdown(mut self) -> Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> Result<()> {
        if let Some(mut child) = self.qemu.take() {
            if child.try_wait()?.is_none() {
                // The guest's disk does not matter any more: no clean shutdown needed.
                let _ = child.kill();
            }
            let _ = child.wait();
        }
        if self.opts.keep_dir {
            let _ = fs::remove_file(self.dir.join("owner"));
            info!(dir = %self.dir.display(), "keeping the VM directory ({KEEP_ENV})");
            return Ok(());
        }
        if self.dir.exists() {
            fs::remove_dir_all(&self.dir)
                .with_context(|| format!("removing {}", self.dir.display()))?;
        }
        Ok(())
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "hearth-vm-tests: the VM's serial log ({}), last {LOG_TAIL_LINES} lines:\n{}",
                self.serial_log.display(),
                self.log_tail(LOG_TAIL_LINES)
            );
        }
        if let Err(e) = self.stop() {
            warn!("stopping the VM: {e:#}");
        }
    }
}

/// Where VM directories go: `$HEARTH_TEST_TMPDIR`, or `/var/tmp` (the disk copy is large).
fn base_dir() -> PathBuf {
    match std::env::var_os(TMPDIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from("/var/tmp"),
    }
}

/// Removes VMs left behind by test processes that died without cleaning up: kills their QEMU
/// (recorded in `qemu.pid`, checked against its command line) and removes the directory.
fn reap_stale_vms_once(base: &Path) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Ok(entries) = fs::read_dir(base) else {
            return;
        };
        for entry in entries.flatten() {
            let dir = entry.path();
            if !entry
                .file_name()
                .to_string_lossy()
                .starts_with(VM_DIR_PREFIX)
            {
                continue;
            }
            let Ok(owner) = fs::read_to_string(dir.join("owner")) else {
                continue; // kept on purpose or not ours
            };
            let mut fields = owner.split_whitespace();
            let pid: i32 = fields.next().and_then(|p| p.parse().ok()).unwrap_or(0);
            let start: u64 = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
            if pid > 0 && util::process_start_time(pid) == Some(start) {
                continue;
            }
            warn!(dir = %dir.display(), "removing a VM left behind by a dead test process");
            if let Some(qpid) = fs::read_to_string(dir.join("qemu.pid"))
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok())
            {
                let cmdline = fs::read(format!("/proc/{qpid}/cmdline")).unwrap_or_default();
                if String::from_utf8_lossy(&cmdline).contains(&*dir.to_string_lossy()) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(qpid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            if let Err(e) = fs::remove_dir_all(&dir) {
                warn!("removing {}: {e}", dir.display());
            }
        }
    });
}
