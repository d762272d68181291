//! One keeper of the desired config at a time. `hearth-agent run` holds [`DAEMON_LOCK`] (an
//! exclusive `flock`, in `/run`: gone with the process and with every boot) for as long as it
//! runs, with its pid and what it follows written in the file. `hearth-agent apply --once-from`
//! takes the same lock without waiting: while a daemon runs, a one-shot apply would silently
//! replace the config the daemon keeps (and the daemon would put its own back on its next
//! look), so it is refused, naming the daemon and what to do. A daemon that starts while a
//! one-shot apply runs waits for it.

use anyhow::Context;
use hearth_hostops::fs::Root;
use nix::fcntl::{Flock, FlockArg};
use std::io::{Seek, Write};

/// The daemon lock, in the target root.
pub const DAEMON_LOCK: &str = "/run/hearth/daemon.lock";

/// The lock, held until dropped.
#[derive(Debug)]
pub struct DaemonLock {
    _lock: Flock<std::fs::File>,
}

fn open(root: &Root) -> anyhow::Result<std::fs::File> {
    root.open_or_create(DAEMON_LOCK, 0o644)
        .with_context(|| format!("cannot open the daemon lock {DAEMON_LOCK}"))
}

/// Who holds the lock, as its holder wrote it.
fn holder(root: &Root) -> String {
    root.read(DAEMON_LOCK)
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "another hearth-agent".into())
}

/// Takes the lock for the daemon (`what`: what it follows), waiting while a one-shot apply
/// holds it.
pub fn for_daemon(root: &Root, what: &str) -> anyhow::Result<DaemonLock> {
    let file = open(root)?;
    let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((file, nix::errno::Errno::EWOULDBLOCK)) => {
            let who = holder(root);
            if who.contains("hearth-agent run") {
                anyhow::bail!("{who} already runs on this host; one daemon at a time");
            }
            tracing::info!(holder = %who, "waiting for it to finish");
            Flock::lock(file, FlockArg::LockExclusive)
                .map_err(|(_, e)| anyhow::anyhow!("cannot take {DAEMON_LOCK}: {e}"))?
        }
        Err((_, e)) => anyhow::bail!("cannot take {DAEMON_LOCK}: {e}"),
    };
    write_holder(
        &mut lock,
        &format!("hearth-agent run (pid {}, {what})", std::process::id()),
    )?;
    Ok(DaemonLock { _lock: lock })
}

/// Takes the lock for a one-shot apply; refused while a daemon runs.
pub fn for_apply(root: &Root) -> anyhow::Result<DaemonLock> {
    let file = open(root)?;
    let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => anyhow::bail!(
            "refused: {} keeps this host in its own desired config; `apply --once-from` would \
             silently replace it. Give the config to the daemon instead (drop it into the \
             directory it watches, or `hearth apply` it on the server it follows), or stop the \
             daemon first (`systemctl stop hearth-agent.service`) and start it again after",
            holder(root)
        ),
        Err((_, e)) => anyhow::bail!("cannot take {DAEMON_LOCK}: {e}"),
    };
    write_holder(
        &mut lock,
        &format!(
            "hearth-agent apply --once-from (pid {})",
            std::process::id()
        ),
    )?;
    Ok(DaemonLock { _lock: lock })
}

fn write_holder(lock: &mut Flock<std::fs::File>, who: &str) -> anyhow::Result<()> {
    let file: &mut std::fs::File = lock;
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(format!("{who}\n").as_bytes())
        .with_context(|| format!("cannot write {DAEMON_LOCK}"))?;
    Ok(())
}
