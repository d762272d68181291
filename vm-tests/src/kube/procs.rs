//! The cluster's processes (etcd, kube-apiserver, kube-controller-manager): each in its own
//! process group with its output in a log file; killed (SIGKILL to the group) and reaped on
//! drop.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::util;

/// One running program of the cluster.
#[derive(Debug)]
pub(crate) struct Proc {
    name: &'static str,
    child: Option<Child>,
    log: PathBuf,
}

impl Proc {
    /// Starts `cmd` with stdin from /dev/null and stdout and stderr appended to `log`.
    pub fn spawn(name: &'static str, mut cmd: Command, log: &Path) -> Result<Proc> {
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("creating {}", log.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0);
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({:?})", cmd.get_program()))?;
        Ok(Proc {
            name,
            child: Some(child),
            log: log.to_path_buf(),
        })
    }

    /// An error when the program has exited (with the tail of its log), `Ok` while it runs.
    pub fn check_running(&mut self) -> Result<()> {
        let Some(child) = self.child.as_mut() else {
            anyhow::bail!("{} was stopped", self.name);
        };
        if let Some(status) = child.try_wait()? {
            anyhow::bail!(
                "{} exited ({status}); last lines of {}:\n{}",
                self.name,
                self.log.display(),
                util::tail(&self.log, 30)
            );
        }
        Ok(())
    }

    /// The last lines of the program's log.
    pub fn log_tail(&self, lines: usize) -> String {
        util::tail(&self.log, lines)
    }

    /// Kills the program's process group and reaps it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")
        .context("binding 127.0.0.1:0 to find a free port")?
        .local_addr()?
        .port())
}
