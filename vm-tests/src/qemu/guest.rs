//! Running scripts in the guest: the harness drops `cmd/N.sh` into the 9p share, the guest
//! script (written into the share before every boot) runs it and writes back its output and
//! exit code.

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::vm::{Vm, LOG_TAIL_LINES};

/// Where the guest sees the harness's share.
pub const SHARE_INSIDE: &str = "/run/hearth-test";

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

impl Vm {
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
}

/// The guest's side, written into the share before every boot and run by the image's
/// `hearth-guest.service`: report the boot (boot id, command line, systemd-boot's entry), then run the scripts the harness drops into `cmd/`
/// one at a time (`N.sh` → `N.run`, output in `N.out`/`N.err`, exit code in `N.rc`).
pub(super) const GUEST_SCRIPT: &str = r#"#!/bin/bash
# hearth-vm-tests: the guest's side (written by the harness before every boot).
S=/run/hearth-test
mkdir -p "$S/cmd"
# The entry systemd-boot booted: an EFI variable, 4 bytes of attributes then UTF-16LE.
ENTRY=/sys/firmware/efi/efivars/LoaderEntrySelected-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f
{
    cat /proc/sys/kernel/random/boot_id
    cat /proc/cmdline
    if [ -e "$ENTRY" ]; then cat "$ENTRY" | tail -c +5 | tr -d '\000'; echo; else echo; fi
} >"$S/ready.tmp"
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
