//! Running commands with captured output and a timeout.

use std::fmt;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// What a command run inside a host (see [`SystemdHost::exec`](crate::SystemdHost::exec))
/// returned.
#[derive(Debug, Clone)]
pub struct ExecOutput {
    /// The exit status (of the command: `nsenter` passes it through).
    pub status: ExitStatus,
    /// Standard output, lossily decoded as UTF-8.
    pub stdout: String,
    /// Standard error, lossily decoded as UTF-8.
    pub stderr: String,
}

impl ExecOutput {
    /// Whether the command exited with status 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// The exit code, or `None` if the command was killed by a signal.
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Standard output with surrounding whitespace removed.
    pub fn stdout_trimmed(&self) -> &str {
        self.stdout.trim()
    }
}

impl fmt::Display for ExecOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.status.code(), self.status.signal()) {
            (Some(code), _) => write!(f, "exit code {code}")?,
            (None, Some(sig)) => write!(f, "killed by signal {sig}")?,
            _ => write!(f, "{}", self.status)?,
        }
        write!(
            f,
            "\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout.trim_end(),
            self.stderr.trim_end()
        )
    }
}

/// Runs `cmd` (stdin from /dev/null, stdout and stderr captured) in its own process group;
/// after `timeout` the whole group is killed and an error returned.
pub(crate) fn run(mut cmd: Command, timeout: Duration, what: &str) -> Result<ExecOutput> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().with_context(|| format!("starting {what}"))?;
    let out = reader(child.stdout.take());
    let err = reader(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .with_context(|| format!("waiting for {what}"))?
        {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.wait();
            bail!("{what} did not finish within {timeout:?} (killed)");
        }
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    };
    // A daemon started by the command may keep the pipes open: do not wait for it long.
    let grace = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(200));
    let stdout = out.recv_timeout(grace).unwrap_or_default();
    let stderr = err.recv_timeout(grace).unwrap_or_default();
    Ok(ExecOutput {
        status,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

/// Reads a pipe to its end on a thread; the bytes arrive on the returned channel.
fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    if let Some(mut pipe) = pipe {
        thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            let _ = tx.send(buf);
        });
    } else {
        let _ = tx.send(Vec::new());
    }
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    #[test]
    fn captures_status_and_output() {
        let out = run(
            sh("echo out; echo err >&2; exit 3"),
            Duration::from_secs(10),
            "sh",
        )
        .unwrap();
        assert_eq!(out.code(), Some(3));
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
        assert!(!out.success());
        assert!(out.to_string().contains("exit code 3"));
    }

    #[test]
    fn kills_on_timeout() {
        let started = Instant::now();
        let err = run(sh("sleep 30"), Duration::from_millis(200), "sleep").unwrap_err();
        assert!(err.to_string().contains("did not finish"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn background_children_do_not_block() {
        let started = Instant::now();
        let out = run(sh("sleep 5 & echo hi"), Duration::from_millis(500), "sh").unwrap();
        assert!(out.success());
        assert!(started.elapsed() < Duration::from_secs(3));
    }
}
