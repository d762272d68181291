//! The agent lock and the apply's bookkeeping: one agent at a time changes a host, the
//! temporaries interrupted writes left are removed, and the paths a config takes over that
//! existed before the apply (whose originals must be kept) are recorded for a resume.

use super::agent::{managed_paths, Agent};
use super::error::AgentError;
use crate::journal::Journal;

use std::collections::BTreeSet;

/// The lock that keeps two agents from changing a host at once.
pub const LOCK_FILE: &str = "/var/lib/hearth/agent.lock";

impl Agent {
    pub(super) const PREEXISTING: &'static str = "/var/lib/hearth/apply-preexisting.json";

    /// Paths the desired config takes over that existed before this apply (their originals
    /// must be kept). Computed once per apply; a resumed apply reads the saved list.
    pub(super) fn preexisting(&self, j: &Journal) -> Result<BTreeSet<String>, AgentError> {
        let current = j
            .current
            .as_ref()
            .map(|c| managed_paths(&c.spec.config))
            .unwrap_or_default();
        let desired = j
            .desired
            .as_ref()
            .map(|d| managed_paths(&d.spec.config))
            .unwrap_or_default();
        let mut out = BTreeSet::new();
        for p in desired.difference(&current) {
            if self.root.stat(p)?.is_some() {
                out.insert(p.clone());
            }
        }
        Ok(out)
    }

    pub(super) fn save_preexisting(&self, set: &BTreeSet<String>) -> Result<(), AgentError> {
        let bytes = serde_json::to_vec(set).unwrap_or_default();
        self.root
            .write_atomic(Self::PREEXISTING, &bytes, 0o600, None)?;
        Ok(())
    }

    pub(super) fn load_preexisting(&self) -> BTreeSet<String> {
        self.root
            .read(Self::PREEXISTING)
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Removes temporary files that a write interrupted by a crash left in the directories of
    /// managed paths.
    pub(super) fn remove_stale_temporaries(&self, a: &BTreeSet<String>, b: &BTreeSet<String>) {
        let dirs: BTreeSet<&str> = a
            .iter()
            .chain(b.iter())
            .filter_map(|p| {
                p.rsplit_once('/')
                    .map(|(d, _)| if d.is_empty() { "/" } else { d })
            })
            .collect();
        for d in dirs {
            match self.root.remove_stale_temporaries(d) {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    dir = d,
                    removed = n,
                    "removed temporary files of an interrupted write"
                ),
                Err(e) => tracing::warn!(dir = d, error = %e, "cannot clean temporary files"),
            }
        }
    }

    /// Takes the agent lock ([`LOCK_FILE`]): one agent at a time changes a host. The lock
    /// file is opened through the root like every file the agent writes (a state directory
    /// that is a symlink out of the root is refused). The first time a process holds it, the
    /// temporary files interrupted writes of the agent's own state left are removed.
    pub(super) fn lock(&self) -> Result<nix::fcntl::Flock<std::fs::File>, AgentError> {
        let lock = self.lock_file()?;
        if !self
            .cleaned_state
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            remove_own_temporaries(&self.root);
        }
        Ok(lock)
    }

    fn lock_file(&self) -> Result<nix::fcntl::Flock<std::fs::File>, AgentError> {
        let path = self.root.host_path(LOCK_FILE);
        let file = self
            .root
            .open_or_create(LOCK_FILE, 0o600)
            .map_err(|e| AgentError::Lock {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
        match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(l) => Ok(l),
            Err((file, nix::errno::Errno::EWOULDBLOCK)) => {
                tracing::info!("another hearth-agent is changing this host; waiting for it");
                nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).map_err(
                    |(_, e)| AgentError::Lock {
                        path: path.display().to_string(),
                        message: e.to_string(),
                    },
                )
            }
            Err((_, e)) => Err(AgentError::Lock {
                path: path.display().to_string(),
                message: e.to_string(),
            }),
        }
    }
}

/// Removes the temporary files a `kill -9` or a power cut left in the agent's own state
/// directories (the journal, stored configs, originals, undo snapshots, the reboot marker, the
/// kernel argument ledger). Called with the agent lock held (by `Agent::lock` the first time a
/// process takes it, and by the quick re-check): no other agent writes them.
pub(crate) fn remove_own_temporaries(root: &hearth_hostops::fs::Root) {
    for d in [
        hearth_hostops::files::STATE_DIR,
        crate::journal::CONFIG_DIR,
        hearth_hostops::files::ORIGINALS_DIR,
        crate::journal::UNDO_DIR,
        "/run/hearth",
    ] {
        match root.remove_stale_temporaries(d) {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                dir = d,
                removed = n,
                "removed temporary files of interrupted writes of the agent's state"
            ),
            Err(e) => tracing::warn!(dir = d, error = %e, "cannot clean temporary files"),
        }
    }
}
