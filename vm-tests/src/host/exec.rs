//! Running commands inside a host: `nsenter -t <leader> -a` with a clean environment and a
//! timeout.

use std::ffi::OsStr;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Result};
use nix::unistd::Pid;
use tracing::debug;

use super::SystemdHost;
use crate::exec::{self, ExecOutput};

impl SystemdHost {
    /// Runs a command inside the host (`nsenter -t <leader> -a`: all its namespaces, as
    /// root, with a clean environment), with a timeout of 2 minutes. A non-zero exit is
    /// not an error: look at [`ExecOutput::status`].
    pub fn exec<S: AsRef<OsStr>>(&self, argv: &[S]) -> Result<ExecOutput> {
        self.exec_timeout(argv, Duration::from_secs(120))
    }

    /// Like [`SystemdHost::exec`], but fails unless the command exits with 0; returns its
    /// standard output.
    pub fn exec_ok<S: AsRef<OsStr>>(&self, argv: &[S]) -> Result<String> {
        let out = self.exec(argv)?;
        if !out.success() {
            bail!("{} in {}: {out}", describe(argv), self.name);
        }
        Ok(out.stdout)
    }

    /// Like [`SystemdHost::exec`] with an explicit timeout.
    pub fn exec_timeout<S: AsRef<OsStr>>(
        &self,
        argv: &[S],
        timeout: Duration,
    ) -> Result<ExecOutput> {
        if argv.is_empty() {
            bail!("exec needs a command");
        }
        let leader = match (self.leader, self.is_running()) {
            (Some(leader), true) => leader,
            _ => bail!(
                "host {} is not running (systemd-nspawn exited: {:?}); after a reboot, call \
                 wait_for_reboot first",
                self.name,
                self.nspawn
                    .as_ref()
                    .and_then(|n| n.exit.get())
                    .or(self.last_exit)
            ),
        };
        // A binary copied into the host just before may still be open for writing in a child
        // another test thread forked meanwhile (a forked child holds the parent's descriptors
        // until it execs), and exec refuses it ("Text file busy", exit 126): nothing ran, so
        // the command is tried again, a few times, a moment apart.
        let mut tries = 0;
        loop {
            let out = self.exec_once(argv, leader, timeout)?;
            tries += 1;
            if tries < 5 && out.status.code() == Some(126) && out.stderr.contains("Text file busy")
            {
                debug!(host = %self.name, "exec {}: text file busy, again", describe(argv));
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            return Ok(out);
        }
    }

    fn exec_once<S: AsRef<OsStr>>(
        &self,
        argv: &[S],
        leader: Pid,
        timeout: Duration,
    ) -> Result<ExecOutput> {
        let mut cmd = Command::new(&self.tools.nsenter);
        cmd.arg("--target")
            .arg(leader.as_raw().to_string())
            .arg("--all")
            .arg("--")
            .args(argv)
            .env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
            .env("HOME", "/root")
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .env("SYSTEMD_COLORS", "0")
            .env("SYSTEMD_PAGER", "");
        let what = format!("{} in {}", describe(argv), self.name);
        debug!(host = %self.name, "exec {}", describe(argv));
        exec::run(cmd, timeout, &what)
    }
}

/// `argv` as a shell-like string for messages.
fn describe<S: AsRef<OsStr>>(argv: &[S]) -> String {
    let parts: Vec<String> = argv
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    format!("`{}`", parts.join(" "))
}
