//! One boot of a [`Vm`]: the harness as boot loader (the default entry's kernel and initrd
//! copied out of the disk), the QEMU command line, waiting for the guest script's report, the
//! serial log of the boot, and reboots (QEMU exits: `-no-reboot`).

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tracing::info;

use super::entries::{extract, read_boot_entries};
use super::guest::GUEST_SCRIPT;
use super::vm::{Vm, VmBoot, LOG_TAIL_LINES};
use crate::util;

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

    /// Boots the disk's default entry and waits for the guest script's report.
    pub(super) fn start(&mut self) -> Result<()> {
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
