//! The VM tier: a real kernel, a dracut initramfs with the ostree module, real reboots, in QEMU
//! with software emulation (TCG: these machines have no usable KVM).
//!
//! ```no_run
//! use hearth_vm_tests::qemu::{Vm, VmOptions};
//!
//! # fn main() -> anyhow::Result<()> {
//! let mut vm = Vm::boot(VmOptions::default())?;     // ~1 min: kernel, initramfs, systemd
//! assert!(vm.proc_cmdline().contains("ostree=/ostree/boot."));
//! vm.exec_ok("ostree admin deploy --stage --karg-append=selinux=0 hearth/debian/v1")?;
//! vm.reboot()?;                                     // QEMU exits, the harness boots the new default entry
//! assert!(vm.proc_cmdline().split(' ').any(|a| a == "selinux=0"));
//! # Ok(()) }
//! ```
//!
//! ## Pieces
//!
//! - [`cached_vm_image`]: `images/build-vm-image.sh` (Debian 12, `linux-image-amd64`, dracut
//!   with the ostree module, commits `hearth/debian/v1` and `v2`, v1 deployed, written into a
//!   raw ext4 disk with `mkfs.ext4 -d`), built once and cached in
//!   `$HEARTH_TEST_CACHE/vm-image-<sha256 of the script>` like the other images.
//! - [`Vm`]: a sparse copy of the disk per VM (`$HEARTH_TEST_TMPDIR/hearth-vm-<8 hex>/disk.raw`).
//!   The harness is the boot loader: before every boot it reads the default BLS entry
//!   (`/boot/loader/entries/*.conf` with the highest `version`, as libostree orders them) from
//!   the disk with `debugfs` (no mount, no loop device), extracts that entry's kernel and initrd
//!   and starts `qemu-system-x86_64 -accel tcg,thread=multi -no-reboot -kernel ... -initrd ...
//!   -append <options>`. A reboot inside makes QEMU exit; the harness reads the entries again
//!   and boots the (new) default.
//! - The guest talks to the harness through a 9p share (`-virtfs ...,mount_tag=hearth`),
//!   mounted at `/run/hearth-test` by the image's `hearth-share.service`. `hearth-guest.service`
//!   runs `/run/hearth-test/guest.sh`, which the harness writes before every boot: it reports the
//!   boot (`ready`: boot id and `/proc/cmdline`) and then runs the scripts the harness drops
//!   into `cmd/` ([`Vm::exec`]), writing their output and exit code back. Binaries the tests
//!   need (the agent) are copied into the share ([`Vm::share_dir`]): the image does not change
//!   when hearth does.
//! - The serial console (kernel, systemd, the guest script) is appended to `serial.log` in the
//!   VM's directory; errors carry its last 100 lines.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use sha2::{Digest, Sha256};
use tracing::{debug, info, warn};

use crate::host::{KEEP_ENV, TMPDIR_ENV};
use crate::mounts;
use crate::rootfs::cache_dir;
use crate::util;

/// The content of `images/build-vm-image.sh`, the script that builds the VM disk image.
pub const BUILD_VM_IMAGE_SCRIPT: &str = include_str!("../../images/build-vm-image.sh");

/// The refs of the VM image's commits (both in the disk's repository; `v1` is deployed).
pub mod refs {
    /// Debian 12 with the real kernel; `/usr/lib/hearth-image-version` = `v1`.
    pub const V1: &str = "hearth/debian/v1";
    /// `v1` plus `/usr/lib/hearth-image-version` = `v2`.
    pub const V2: &str = "hearth/debian/v2";
}

/// Where the guest sees the harness's share.
pub const SHARE_INSIDE: &str = "/run/hearth-test";

/// Lines of the serial log that errors carry.
const LOG_TAIL_LINES: usize = 100;

const VM_DIR_PREFIX: &str = "hearth-vm-";

/// What the kernel prints on the console when the guest reboots (as opposed to powering off).
const REBOOT_MARKER: &str = "reboot: Restarting system";

// ---------------------------------------------------------------------------------------------
// The image.
// ---------------------------------------------------------------------------------------------

/// The built VM image.
#[derive(Debug, Clone)]
pub struct VmImage {
    /// The cache directory holding it.
    pub dir: PathBuf,
    /// The raw disk (ext4, label `hearth-root`, the sysroot with v1 deployed).
    pub disk: PathBuf,
    /// Ref → commit checksum.
    pub commits: BTreeMap<String, String>,
    /// The kernel version in the commits.
    pub kernel_version: String,
    /// The first deployment's kernel arguments (without `ostree=`).
    pub kargs: String,
}

impl VmImage {
    /// The commit checksum of a ref.
    pub fn commit(&self, reference: &str) -> Result<&str> {
        self.commits
            .get(reference)
            .map(String::as_str)
            .ok_or_else(|| anyhow!("no commit {reference} in {}", self.dir.display()))
    }

    fn load(dir: &Path) -> Result<VmImage> {
        let read_env = |name: &str| -> Result<BTreeMap<String, String>> {
            let text = fs::read_to_string(dir.join(name))
                .with_context(|| format!("reading {}/{name}", dir.display()))?;
            Ok(text
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
                .collect())
        };
        let commits = read_env("commits.env")?;
        let kernel = read_env("kernel.env")?;
        Ok(VmImage {
            dir: dir.to_path_buf(),
            disk: dir.join("disk.raw"),
            commits,
            kernel_version: kernel.get("KVER").cloned().unwrap_or_default(),
            kargs: kernel.get("KARGS").cloned().unwrap_or_default(),
        })
    }
}

/// The cache key of the VM image: the hex sha256 of [`BUILD_VM_IMAGE_SCRIPT`].
pub fn vm_image_key() -> String {
    hex::encode(Sha256::digest(BUILD_VM_IMAGE_SCRIPT.as_bytes()))
}

fn image_complete(dir: &Path) -> bool {
    dir.join("disk.raw").exists() && dir.join("commits.env").exists()
}

/// Returns the cached VM image, building it first (a few minutes: debootstrap, the kernel,
/// dracut, two commits, `mkfs.ext4 -d`; needs root, `debootstrap`, `ostree`, `e2fsprogs` and
/// the Debian archive). Safe to call from many threads and processes at once: one builds, the
/// others wait.
pub fn cached_vm_image() -> Result<VmImage> {
    util::require_root()?;
    let dest = util::CachedBuild {
        prefix: "vm-image",
        what: "the VM image",
        takes: "about 5 minutes",
        script: BUILD_VM_IMAGE_SCRIPT,
        script_name: "build-vm-image.sh",
        key: vm_image_key(),
        needs: &[
            ("debootstrap", "debootstrap"),
            ("ostree", "ostree"),
            ("mkfs.ext4", "e2fsprogs"),
        ],
        complete: image_complete,
        remove: remove_build_dir,
    }
    .get(&cache_dir())?;
    VmImage::load(&dest)
}

/// Removes a (possibly interrupted) build directory: its deployments may be immutable.
fn remove_build_dir(dir: &Path) -> Result<()> {
    let _ = Command::new("chattr")
        .args(["-R", "-i"])
        .arg(dir)
        .stderr(Stdio::null())
        .status();
    mounts::remove_tree(dir)
}

// ---------------------------------------------------------------------------------------------
// Boot entries, read from the disk with debugfs.
// ---------------------------------------------------------------------------------------------

/// A boot loader entry of the VM's disk (`/boot/loader/entries/*.conf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmBootEntry {
    /// The entry's file name.
    pub file: String,
    /// `title`.
    pub title: String,
    /// `version`: the highest is the default.
    pub version: u64,
    /// `options`: the kernel command line.
    pub options: String,
    /// `linux`, relative to the boot file system.
    pub linux: String,
    /// `initrd`, relative to the boot file system.
    pub initrd: String,
}

impl VmBootEntry {
    /// Parses an entry's text.
    pub fn parse(file: &str, text: &str) -> Result<VmBootEntry> {
        let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
        for line in text.lines() {
            if let Some((k, v)) = line.trim().split_once(char::is_whitespace) {
                fields.insert(k, v.trim());
            }
        }
        let get = |k: &str| -> Result<String> {
            fields
                .get(k)
                .map(|v| v.to_string())
                .ok_or_else(|| anyhow!("boot entry {file} has no `{k}` line:\n{text}"))
        };
        Ok(VmBootEntry {
            file: file.to_string(),
            title: fields
                .get("title")
                .map(|v| v.to_string())
                .unwrap_or_default(),
            version: get("version")?
                .parse()
                .with_context(|| format!("boot entry {file}: `version` is not a number"))?,
            options: get("options")?,
            linux: get("linux")?,
            initrd: get("initrd")?,
        })
    }

    /// The kernel arguments of `options`.
    pub fn kernel_args(&self) -> Vec<String> {
        self.options
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }
}

/// Runs `debugfs -R REQUEST DISK` (read-only); fails on the errors debugfs prints (it exits 0
/// on most of them).
fn debugfs(disk: &Path, request: &str) -> Result<Vec<u8>> {
    let debugfs = util::require_program("debugfs", "e2fsprogs")?;
    let out = Command::new(debugfs)
        .arg("-R")
        .arg(request)
        .arg(disk)
        .stdin(Stdio::null())
        .output()
        .context("running debugfs")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The first stderr line is debugfs's banner ("debugfs 1.47.0 (5-Feb-2023)").
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("debugfs ") && !l.trim().is_empty())
        .collect();
    if !out.status.success() || !errors.is_empty() {
        bail!(
            "debugfs -R {request:?} {} failed ({}): {}",
            disk.display(),
            out.status,
            errors.join("; ")
        );
    }
    Ok(out.stdout)
}

/// The path of a file of the boot file system on the disk: `/boot` is a directory of the root
/// file system, and the entries' paths are relative to the boot file system.
fn boot_path(path: &str) -> String {
    if path.starts_with("/boot/") {
        path.to_string()
    } else {
        format!("/boot/{}", path.trim_start_matches('/'))
    }
}

/// The entries directory: `/boot/loader` is a symlink (`loader.0` or `loader.1`), which
/// libostree swaps atomically; debugfs does not follow it, so resolve it by hand.
fn entries_dir(disk: &Path) -> Result<String> {
    let stat = debugfs(disk, "stat /boot/loader")?;
    let stat = String::from_utf8_lossy(&stat);
    if let Some(target) = stat
        .lines()
        .find_map(|l| l.trim().strip_prefix("Fast link dest: "))
    {
        let target = target.trim().trim_matches('"');
        let resolved = if target.starts_with('/') {
            target.to_string()
        } else {
            format!("/boot/{target}")
        };
        return Ok(format!("{resolved}/entries"));
    }
    Ok("/boot/loader/entries".to_string())
}

/// All boot entries of a disk, highest `version` (the default) first.
pub fn read_boot_entries(disk: &Path) -> Result<Vec<VmBootEntry>> {
    let dir = entries_dir(disk)?;
    let listing = debugfs(disk, &format!("ls -p {dir}"))?;
    let mut entries = Vec::new();
    for line in String::from_utf8_lossy(&listing).lines() {
        // `/inode/mode/uid/gid/name/size/`
        let fields: Vec<&str> = line.split('/').collect();
        let Some(name) = fields.get(5) else { continue };
        if !name.ends_with(".conf") {
            continue;
        }
        let text = debugfs(disk, &format!("cat {dir}/{name}"))?;
        entries.push(VmBootEntry::parse(name, &String::from_utf8_lossy(&text))?);
    }
    if entries.is_empty() {
        bail!(
            "no boot entries in {dir} on {}: nothing to boot",
            disk.display()
        );
    }
    entries.sort_by_key(|e| std::cmp::Reverse(e.version));
    Ok(entries)
}

/// Copies a file out of the disk's boot file system.
fn extract(disk: &Path, path: &str, dest: &Path) -> Result<()> {
    let _ = fs::remove_file(dest);
    debugfs(
        disk,
        &format!("dump {} {}", boot_path(path), dest.display()),
    )?;
    let len = fs::metadata(dest)
        .with_context(|| format!("debugfs did not write {} ({path})", dest.display()))?
        .len();
    if len == 0 {
        bail!("{path} on {} is empty", disk.display());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The VM.
// ---------------------------------------------------------------------------------------------

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

/// The output of a script run in the guest.
#[derive(Debug, Clone)]
pub struct GuestOutput {
    /// Exit code.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// One boot of a [`Vm`].
#[derive(Debug, Clone)]
pub struct VmBoot {
    /// 1 for the first boot, +1 for each reboot.
    pub boot_count: u32,
    /// The entry the harness booted.
    pub entry: VmBootEntry,
    /// The guest's boot id.
    pub boot_id: String,
    /// `/proc/cmdline` as the guest read it.
    pub proc_cmdline: String,
    /// From starting QEMU to the guest script's report.
    pub boot_time: Duration,
}

/// A QEMU guest booted from a copy of the cached VM image (see the module documentation).
/// Dropping it kills QEMU and removes its directory.
#[derive(Debug)]
pub struct Vm {
    opts: VmOptions,
    image: VmImage,
    dir: PathBuf,
    disk: PathBuf,
    share: PathBuf,
    serial_log: PathBuf,
    qemu: Option<Child>,
    /// Offset of the current boot's first byte in the serial log.
    boot_log_offset: u64,
    boot: Option<VmBoot>,
    boot_count: u32,
    next_cmd: u64,
}

impl Vm {
    /// Copies the cached disk and boots its default entry; returns once the guest script runs.
    pub fn boot(opts: VmOptions) -> Result<Vm> {
        let qemu = util::require_program("qemu-system-x86_64", "qemu-system-x86")?;
        util::require_program("debugfs", "e2fsprogs")?;
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
        debug!(seconds = started.elapsed().as_secs_f64(), "disk copied");
        vm.start()?;
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

    /// The host side of the guest's [`SHARE_INSIDE`]: files put here are seen inside.
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

    /// The boot entries on the disk now (while the guest runs, what it wrote may still be in
    /// its page cache: read them after a shutdown for certain).
    pub fn boot_entries(&self) -> Result<Vec<VmBootEntry>> {
        read_boot_entries(&self.disk)
    }

    /// Runs a bash script in the guest (as root, from `hearth-guest.service`, cwd `/`) and
    /// returns its output, whatever its exit code.
    pub fn exec(&mut self, script: &str) -> Result<GuestOutput> {
        let (n, base) = self.submit(script)?;
        let rc_path = base.with_extension("rc");
        let deadline = Instant::now() + self.opts.exec_timeout;
        loop {
            if let Ok(rc) = fs::read_to_string(&rc_path) {
                let read = |ext: &str| {
                    fs::read(base.with_extension(ext))
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                        .unwrap_or_default()
                };
                let code = rc
                    .trim()
                    .parse()
                    .map_err(|_| anyhow!("guest command {n}: exit code file says {rc:?}"))?;
                return Ok(GuestOutput {
                    code,
                    stdout: read("out"),
                    stderr: read("err"),
                });
            }
            if let Some(status) = self.qemu_exited()? {
                bail!(
                    "QEMU exited ({status}) while the guest ran {script:?}; serial log {}:\n{}",
                    self.serial_log.display(),
                    self.log_tail(LOG_TAIL_LINES)
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "the guest did not finish {script:?} within {:?}; serial log {}:\n{}",
                    self.opts.exec_timeout,
                    self.serial_log.display(),
                    self.log_tail(LOG_TAIL_LINES)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Hands a bash script to the guest without waiting for it (for scripts the guest may not
    /// live to report on, such as a reboot).
    pub fn spawn(&mut self, script: &str) -> Result<()> {
        self.submit(script).map(|_| ())
    }

    /// Drops `script` into the share's `cmd/` as the next `N.sh` (atomically: the guest only
    /// picks up complete files); returns N and the path without extension.
    fn submit(&mut self, script: &str) -> Result<(u64, PathBuf)> {
        let n = self.next_cmd;
        self.next_cmd += 1;
        let cmd = self.share.join("cmd");
        let base = cmd.join(format!("{n:04}"));
        let tmp = cmd.join(format!("{n:04}.tmp"));
        fs::write(&tmp, script).with_context(|| format!("writing {}", tmp.display()))?;
        fs::rename(&tmp, base.with_extension("sh"))
            .with_context(|| format!("renaming {}", tmp.display()))?;
        Ok((n, base))
    }

    /// Like [`Vm::exec`], but fails (with the output) unless the script exits 0; returns its
    /// standard output.
    pub fn exec_ok(&mut self, script: &str) -> Result<String> {
        let out = self.exec(script)?;
        if out.code != 0 {
            bail!(
                "guest script {script:?} exited {}\nstdout:\n{}\nstderr:\n{}",
                out.code,
                out.stdout,
                out.stderr
            );
        }
        Ok(out.stdout)
    }

    /// Asks the guest to reboot (`systemctl reboot`) and boots it again, see
    /// [`Vm::wait_for_reboot`].
    pub fn reboot(&mut self) -> Result<&VmBoot> {
        // Not waited for: the shutdown may stop the guest script before it reports.
        self.spawn("systemctl reboot")?;
        self.wait_for_reboot()
    }

    /// Waits until the guest has rebooted (QEMU exits: `-no-reboot`), then reads the boot
    /// entries from the disk and boots the default one. Fails if the guest powered off instead,
    /// or does not go down within the shutdown timeout.
    pub fn wait_for_reboot(&mut self) -> Result<&VmBoot> {
        let deadline = Instant::now() + self.opts.shutdown_timeout;
        let status = loop {
            if let Some(status) = self.qemu_exited()? {
                break status;
            }
            if Instant::now() > deadline {
                bail!(
                    "the guest did not reboot within {:?}; serial log {}:\n{}",
                    self.opts.shutdown_timeout,
                    self.serial_log.display(),
                    self.log_tail(LOG_TAIL_LINES)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        self.qemu = None;
        let this_boot = self.current_boot_log();
        if !status.success() || !this_boot.contains(REBOOT_MARKER) {
            bail!(
                "QEMU exited ({status}) but the guest did not reboot (no {REBOOT_MARKER:?} on \
                 the console); serial log {}:\n{}",
                self.serial_log.display(),
                self.log_tail(LOG_TAIL_LINES)
            );
        }
        info!(boot = self.boot_count, "the guest rebooted");
        self.start()?;
        Ok(self.boot.as_ref().expect("start() sets the boot"))
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

    /// The serial log of the current boot.
    fn current_boot_log(&self) -> String {
        let mut text = Vec::new();
        if let Ok(mut f) = File::open(&self.serial_log) {
            use std::io::{Seek, SeekFrom};
            let _ = f.seek(SeekFrom::Start(self.boot_log_offset));
            let _ = f.read_to_end(&mut text);
        }
        String::from_utf8_lossy(&text).into_owned()
    }

    fn qemu_exited(&mut self) -> Result<Option<std::process::ExitStatus>> {
        match self.qemu.as_mut() {
            Some(child) => Ok(child.try_wait().context("waiting for QEMU")?),
            None => bail!("QEMU is not running"),
        }
    }

    /// Boots the disk's default entry and waits for the guest script's report.
    fn start(&mut self) -> Result<()> {
        let entries = read_boot_entries(&self.disk)?;
        let entry = entries[0].clone();
        self.boot_count += 1;
        let n = self.boot_count;
        let kernel = self.dir.join(format!("vmlinuz-{n}"));
        let initrd = self.dir.join(format!("initrd-{n}"));
        extract(&self.disk, &entry.linux, &kernel)?;
        extract(&self.disk, &entry.initrd, &initrd)?;
        // The share's state from the previous boot must not be mistaken for this one's.
        let _ = fs::remove_file(self.share.join("ready"));
        for e in fs::read_dir(self.share.join("cmd"))?.flatten() {
            let _ = fs::remove_file(e.path());
        }
        fs::write(self.share.join("guest.sh"), GUEST_SCRIPT)?;

        self.boot_log_offset = fs::metadata(&self.serial_log).map_or(0, |m| m.len());
        let qemu = util::require_program("qemu-system-x86_64", "qemu-system-x86")?;
        let qemu_log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("qemu.log"))?;
        let mut cmd = Command::new(qemu);
        cmd.arg("-name")
            .arg(self.dir.file_name().unwrap_or_default())
            .args(["-accel", "tcg,thread=multi"])
            .args(["-smp", &self.opts.cpus.to_string()])
            .args(["-m", &self.opts.memory_mib.to_string()])
            .args(["-nodefaults", "-no-user-config", "-display", "none"])
            .args(["-monitor", "none", "-no-reboot"])
            .arg("-chardev")
            .arg(format!(
                "file,id=serial0,path={},append=on",
                self.serial_log.display()
            ))
            .args(["-serial", "chardev:serial0"])
            .arg("-kernel")
            .arg(&kernel)
            .arg("-initrd")
            .arg(&initrd)
            .arg("-append")
            .arg(&entry.options)
            .arg("-drive")
            .arg(format!(
                "file={},format=raw,if=virtio,cache=unsafe",
                self.disk.display()
            ))
            .arg("-virtfs")
            .arg(format!(
                "local,path={},mount_tag=hearth,security_model=none,id=hearth",
                self.share.display()
            ))
            // Entropy for the guest's early boot (crng init otherwise waits for interrupts).
            .args(["-device", "virtio-rng-pci"])
            .arg("-pidfile")
            .arg(self.dir.join("qemu.pid"))
            .stdin(Stdio::null())
            .stdout(qemu_log.try_clone()?)
            .stderr(qemu_log);
        info!(
            boot = n,
            entry = %entry.file,
            options = %entry.options,
            "starting QEMU (TCG)"
        );
        let started = Instant::now();
        self.qemu = Some(cmd.spawn().context("starting qemu-system-x86_64")?);

        let ready = self.share.join("ready");
        let deadline = started + self.opts.boot_timeout;
        loop {
            if let Ok(text) = fs::read_to_string(&ready) {
                let mut lines = text.lines();
                let boot_id = lines.next().unwrap_or_default().trim().to_string();
                let proc_cmdline = lines.next().unwrap_or_default().trim().to_string();
                let boot_time = started.elapsed();
                info!(boot = n, seconds = boot_time.as_secs_f64(), %proc_cmdline, "guest up");
                self.boot = Some(VmBoot {
                    boot_count: n,
                    entry,
                    boot_id,
                    proc_cmdline,
                    boot_time,
                });
                let _ = fs::remove_file(&kernel);
                let _ = fs::remove_file(&initrd);
                return Ok(());
            }
            if let Some(status) = self.qemu_exited()? {
                bail!(
                    "QEMU exited ({status}) during boot {n} (entry {}, options {:?}); QEMU's \
                     output:\n{}\nserial log {}:\n{}",
                    entry.file,
                    entry.options,
                    util::tail(&self.dir.join("qemu.log"), 20),
                    self.serial_log.display(),
                    self.log_tail(LOG_TAIL_LINES)
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "boot {n} (entry {}, options {:?}) did not reach hearth-guest.service \
                     within {:?}; serial log {}:\n{}",
                    entry.file,
                    entry.options,
                    self.opts.boot_timeout,
                    self.serial_log.display(),
                    self.log_tail(LOG_TAIL_LINES)
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
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

/// The guest's side, written into the share before every boot and run by the image's
/// `hearth-guest.service`: report the boot, then run the scripts the harness drops into `cmd/`
/// one at a time (`N.sh` → `N.run`, output in `N.out`/`N.err`, exit code in `N.rc`).
const GUEST_SCRIPT: &str = r#"#!/bin/bash
# hearth-vm-tests: the guest's side (written by the harness before every boot).
S=/run/hearth-test
mkdir -p "$S/cmd"
{ cat /proc/sys/kernel/random/boot_id; cat /proc/cmdline; } >"$S/ready.tmp"
mv "$S/ready.tmp" "$S/ready"
echo "hearth-guest: ready, boot $(cat /proc/sys/kernel/random/boot_id)"
while :; do
    for f in "$S"/cmd/*.sh; do
        [ -e "$f" ] || continue
        n=${f%.sh}
        mv "$f" "$n.run" || continue
        echo "hearth-guest: running ${n##*/}"
        (cd / && bash "$n.run" >"$n.out" 2>"$n.err" </dev/null)
        echo $? >"$n.rc.tmp"
        mv "$n.rc.tmp" "$n.rc"
        echo "hearth-guest: ${n##*/} exited $(cat "$n.rc")"
    done
    sleep 0.2
done
"#;

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

/// A binary of this workspace (e.g. `hearth-agent`) in the target directory the tests run
/// from, built with `cargo build -p PACKAGE --bin NAME` first if it is missing. It is not
/// rebuilt when it exists (`cargo test --workspace` has just built it with the workspace's
/// features; a `cargo build -p` here could rebuild half the dependency tree with others):
/// run `cargo build -p PACKAGE` before `cargo test -p hearth-vm-tests` alone.
pub fn workspace_binary(package: &str, name: &str) -> Result<PathBuf> {
    // The test binary is <target>/<profile>/deps/<test>-<hash>.
    let exe = std::env::current_exe().context("locating the test binary")?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| anyhow!("unexpected test binary location {}", exe.display()))?;
    let path = profile_dir.join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-q", "-p", package, "--bin", name]);
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            cmd.arg("--release");
        }
        let status = cmd
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .context("running cargo build")?;
        if !status.success() {
            bail!("cargo build -p {package} --bin {name} failed: {status}");
        }
    }
    if !path.exists() {
        bail!(
            "{} not found after cargo build -p {package}",
            path.display()
        );
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_and_name_what_is_missing() {
        let text = "title Debian GNU/Linux 12 (bookworm) (ostree:debian:0)\nversion 2\n\
                    options root=LABEL=hearth-root rw ostree=/ostree/boot.1/debian/abc/0\n\
                    linux /ostree/debian-abc/vmlinuz-6.1.0-28-amd64\n\
                    initrd /ostree/debian-abc/initramfs-6.1.0-28-amd64.img\n";
        let e = VmBootEntry::parse("ostree-1-debian.conf", text).unwrap();
        assert_eq!(e.version, 2);
        assert_eq!(
            boot_path(&e.linux),
            "/boot/ostree/debian-abc/vmlinuz-6.1.0-28-amd64"
        );
        assert!(e.kernel_args().contains(&"rw".to_string()));
        let err = VmBootEntry::parse("x.conf", "version 1\n").unwrap_err();
        assert!(format!("{err:#}").contains("no `options`"), "{err:#}");
    }

    #[test]
    fn key_is_the_sha256_of_the_script() {
        assert_eq!(vm_image_key().len(), 64);
        assert!(!BUILD_VM_IMAGE_SCRIPT.contains("http://"));
        assert!(!BUILD_VM_IMAGE_SCRIPT.contains("https://"));
    }
}
