//! One boot of a [`Vm`]: the QEMU command line (OVMF, which starts systemd-boot from the
//! disk's ESP), waiting for the guest script's report, the serial log of the boot, reboots
//! (QEMU exits: `-no-reboot`, and is started again on the same disk and EFI variables) and
//! boots that reset the machine before the guest script ran (counted tries).

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tracing::{info, warn};

use super::entries::read_esp_entries;
use super::guest::GUEST_SCRIPT;
use super::vm::{FailedBoot, Vm, VmBoot, LOG_TAIL_LINES, OVMF_CODE};
use crate::util;

/// How long a boot that may fail may print nothing before the harness resets it.
const STALL: Duration = Duration::from_secs(90);

/// What the kernel prints on the console when the guest reboots (as opposed to powering off).
const REBOOT_MARKER: &str = "reboot: Restarting system";

impl Vm {
    /// Asks the guest to reboot (`systemctl reboot`) and boots it again, see
    /// [`Vm::wait_for_reboot`].
    pub fn reboot(&mut self) -> Result<&VmBoot> {
        // Not waited for: the shutdown may stop the guest script before it reports.
        self.spawn("systemctl reboot")?;
        self.wait_for_reboot()
    }

    /// Waits until the guest has rebooted (QEMU exits: `-no-reboot`), then starts it again:
    /// the firmware and systemd-boot pick the entry. Fails if the guest powered off instead,
    /// does not go down within the shutdown timeout, or the next boot does not reach the guest
    /// script.
    pub fn wait_for_reboot(&mut self) -> Result<&VmBoot> {
        self.wait_for_reboot_with_failed_boots(0)
    }

    /// Like [`Vm::wait_for_reboot`], but up to `allowed` boots that reset the machine before
    /// the guest script runs (a kernel that panics: each is a try systemd-boot counts) are
    /// started again, as a watchdog or an operator would; the boot that comes up records them
    /// ([`VmBoot::failed_boots`]).
    pub fn wait_for_reboot_with_failed_boots(&mut self, allowed: u32) -> Result<&VmBoot> {
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
        self.start(allowed)?;
        Ok(self.boot.as_ref().expect("start() sets the boot"))
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

    pub(super) fn qemu_exited(&mut self) -> Result<Option<std::process::ExitStatus>> {
        match self.qemu.as_mut() {
            Some(child) => Ok(child.try_wait().context("waiting for QEMU")?),
            None => bail!("QEMU is not running"),
        }
    }

    /// Starts QEMU on the disk (the firmware boots what systemd-boot picks) and waits for the
    /// guest script's report; a boot that resets the machine before it is started again, up to
    /// `allowed_failures` times.
    pub(super) fn start(&mut self, allowed_failures: u32) -> Result<()> {
        self.boot_count += 1;
        let n = self.boot_count;
        let mut failed = Vec::new();
        loop {
            self.spawn_qemu(n)?;
            let started = Instant::now();
            match self.wait_ready(n, started, allowed_failures > 0)? {
                Some(mut boot) => {
                    boot.failed_boots = failed;
                    self.boot = Some(boot);
                    return Ok(());
                }
                None => {
                    let log = self.current_boot_log();
                    let cmdline = log
                        .lines()
                        .find_map(|l| l.split_once("Command line: ").map(|(_, c)| c.trim()))
                        .unwrap_or("(no kernel command line on the console)")
                        .to_string();
                    let esp = read_esp_entries(&self.disk, self.image.esp_offset)?;
                    failed.push(FailedBoot { cmdline, esp });
                    if failed.len() as u32 > allowed_failures {
                        bail!(
                            "boot {n} reset the machine before the guest script ran ({} \
                             time(s), {allowed_failures} allowed); serial log {}:\n{}",
                            failed.len(),
                            self.serial_log.display(),
                            self.log_tail(LOG_TAIL_LINES)
                        );
                    }
                    info!(
                        boot = n,
                        try_ = failed.len(),
                        cmdline = %failed.last().map(|f| f.cmdline.as_str()).unwrap_or_default(),
                        "the boot reset the machine before the guest script ran: starting it again"
                    );
                }
            }
        }
    }

    /// Starts QEMU: OVMF (the code read-only, this VM's copy of the variables), the disk as the
    /// first boot device, the share, the serial log, a user-mode NIC (the guest reaches the
    /// host's loopback at [`HOST_FROM_GUEST`](super::HOST_FROM_GUEST)).
    fn spawn_qemu(&mut self, n: u32) -> Result<()> {
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
            .args(["-machine", "q35", "-accel", "tcg,thread=multi"])
            .args(["-smp", &self.opts.cpus.to_string()])
            .args(["-m", &self.opts.memory_mib.to_string()])
            .args(["-nodefaults", "-no-user-config", "-display", "none"])
            .args(["-monitor", "none", "-no-reboot"])
            .arg("-drive")
            .arg(format!(
                "if=pflash,format=raw,unit=0,readonly=on,file={}",
                OVMF_CODE
            ))
            .arg("-drive")
            .arg(format!(
                "if=pflash,format=raw,unit=1,file={}",
                self.efi_vars.display()
            ))
            .arg("-chardev")
            .arg(format!(
                "file,id=serial0,path={},append=on",
                self.serial_log.display()
            ))
            .args(["-serial", "chardev:serial0"])
            .arg("-drive")
            .arg(format!(
                "file={},format=raw,if=none,id=disk0,cache=unsafe",
                self.disk.display()
            ))
            .args(["-device", "virtio-blk-pci,drive=disk0,bootindex=0"])
            // No option ROM: the firmware must not try a network boot.
            .args(["-netdev", "user,id=net0"])
            .args(["-device", "virtio-net-pci,netdev=net0,romfile="])
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
        info!(boot = n, "starting QEMU (TCG, OVMF, systemd-boot)");
        self.qemu = Some(cmd.spawn().context("starting qemu-system-x86_64")?);
        Ok(())
    }

    /// Waits for the guest script's report: the boot, or `None` when the machine reset before
    /// it (QEMU exits 0 under `-no-reboot`).
    ///
    /// A boot that may fail (`watchdog`) and prints nothing on the console for [`STALL`] is
    /// reset as a hardware watchdog would (software emulation hangs now and then in early
    /// kernel start-up): `None` too, a try like a panic.
    fn wait_ready(&mut self, n: u32, started: Instant, watchdog: bool) -> Result<Option<VmBoot>> {
        let ready = self.share.join("ready");
        let deadline = started + self.opts.boot_timeout;
        let log_size = |vm: &Vm| fs::metadata(&vm.serial_log).map_or(0, |m| m.len());
        let (mut last_size, mut last_change) = (log_size(self), Instant::now());
        loop {
            if let Ok(text) = fs::read_to_string(&ready) {
                let mut lines = text.lines().map(str::trim);
                let boot_id = lines.next().unwrap_or_default().to_string();
                let proc_cmdline = lines.next().unwrap_or_default().to_string();
                // systemd-boot names the entry by its file name as it was before this try
                // (`x+3.conf`): without the counter, one entry has one name across boots.
                let entry = without_counter(lines.next().unwrap_or_default());
                let boot_time = started.elapsed();
                info!(boot = n, seconds = boot_time.as_secs_f64(), %entry, %proc_cmdline, "guest up");
                return Ok(Some(VmBoot {
                    boot_count: n,
                    entry,
                    boot_id,
                    proc_cmdline,
                    boot_time,
                    failed_boots: Vec::new(),
                }));
            }
            if let Some(status) = self.qemu_exited()? {
                self.qemu = None;
                if status.success() {
                    return Ok(None);
                }
                bail!(
                    "QEMU exited ({status}) during boot {n}; QEMU's output:\n{}\nserial log {}:\n{}",
                    util::tail(&self.dir.join("qemu.log"), 20),
                    self.serial_log.display(),
                    self.log_tail(LOG_TAIL_LINES)
                );
            }
            let size = log_size(self);
            if size != last_size {
                (last_size, last_change) = (size, Instant::now());
            } else if watchdog && last_change.elapsed() > STALL {
                warn!(
                    boot = n,
                    "no console output for {STALL:?}: reset, as a watchdog would"
                );
                if let Some(mut child) = self.qemu.take() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Ok(None);
            }
            if Instant::now() > deadline {
                bail!(
                    "boot {n} did not reach hearth-guest.service within {:?}; serial log {}:\n{}",
                    self.opts.boot_timeout,
                    self.serial_log.display(),
                    self.log_tail(LOG_TAIL_LINES)
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// `x+2-1.conf` → `x.conf`; names without a boot counter as they are.
fn without_counter(file: &str) -> String {
    if let Some((id, counter)) = file.strip_suffix(".conf").and_then(|s| s.rsplit_once('+')) {
        let (left, done) = counter.split_once('-').unwrap_or((counter, "0"));
        if !left.is_empty()
            && left.bytes().all(|b| b.is_ascii_digit())
            && done.bytes().all(|b| b.is_ascii_digit())
        {
            return format!("{id}.conf");
        }
    }
    file.to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn entry_names_lose_their_counter() {
        for (name, id) in [
            ("hearth-a.0+3.conf", "hearth-a.0.conf"),
            ("hearth-a.0+0-3.conf", "hearth-a.0.conf"),
            ("hearth-a.0.conf", "hearth-a.0.conf"),
            ("a+b.conf", "a+b.conf"),
            ("", ""),
        ] {
            assert_eq!(super::without_counter(name), id);
        }
    }
}
