//! The errors of the OS layer ([`OsError`]) and the byte sizes they quote.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// What went wrong in the OS layer; every message names the deployment, ref, kernel argument or
/// path concerned, and the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum OsError {
    /// This host has no OS backend.
    #[error("OS changes are not possible on this host: {reason}")]
    Unsupported {
        /// Why.
        reason: String,
    },
    /// The OS configuration (`/etc/hearth/os.json` or the one passed in) is invalid.
    #[error("OS configuration {source_name}: {message}")]
    Config {
        /// Where it came from (a path, or "passed in").
        source_name: String,
        /// What is wrong.
        message: String,
    },
    /// The change cannot be expressed on this backend.
    #[error("{0}")]
    InvalidChange(String),
    /// No deployment of the sysroot is the booted one.
    #[error("no booted deployment in the sysroot at {sysroot}: {reason}")]
    NotBooted {
        /// The sysroot.
        sysroot: String,
        /// Details.
        reason: String,
    },
    /// A libostree call failed.
    #[error("{op}: {cause}")]
    Ostree {
        /// What hearth was doing, naming the deployment or ref.
        op: String,
        /// libostree's message.
        cause: String,
    },
    /// Pulling from the remote failed.
    #[error("pulling {reference} from remote {remote} ({url}): {cause}")]
    Pull {
        /// The remote name.
        remote: String,
        /// Its URL.
        url: String,
        /// The ref or commit.
        reference: String,
        /// libostree's message.
        cause: String,
    },
    /// Fetching a container image failed (an unreachable registry, refused credentials, an
    /// unknown image, a broken layer); nothing was staged, and the layers fetched so far are
    /// kept for the next try.
    #[error("pulling container image {image}: {cause}; nothing was staged")]
    ImagePull {
        /// The image reference (as `osImageURL` names it).
        image: String,
        /// What failed, in skopeo's or ostree-ext's words.
        cause: String,
    },
    /// The containers signature policy refused the image: unsigned, or not signed by a key the
    /// policy trusts for it.
    #[error(
        "container image {image} is refused by the signature policy {policy}: {cause}; nothing \
         was staged (sign the image with a key the policy trusts, or change the policy)"
    )]
    ImageRefused {
        /// The image reference.
        image: String,
        /// The policy file.
        policy: String,
        /// Why, in skopeo's words.
        cause: String,
    },
    /// A ref or commit is neither in the sysroot's repository nor available from a remote.
    #[error("{reference} is not in the sysroot's repository ({repo}) and {why}")]
    NotFound {
        /// The ref or commit.
        reference: String,
        /// The repository.
        repo: String,
        /// Why it could not be fetched.
        why: String,
    },
    /// Not enough free space to stage.
    #[error(
        "not enough free space on {what} ({path}) to stage {target}: need {}, {} available ({detail})",
        human_bytes(*needed), human_bytes(*available)
    )]
    InsufficientSpace {
        /// `/boot` or `/sysroot`.
        what: String,
        /// The path checked on this machine.
        path: String,
        /// What was being staged.
        target: String,
        /// Bytes needed.
        needed: u64,
        /// Bytes available.
        available: u64,
        /// How `needed` is made up.
        detail: String,
    },
    /// Not enough free inodes to stage.
    #[error(
        "not enough free inodes on {what} ({path}) to stage {target}: the new deployment's \
         directories and /etc files need {needed}, {available} are free"
    )]
    InsufficientInodes {
        /// `/sysroot`.
        what: String,
        /// The path checked on this machine.
        path: String,
        /// What was being staged.
        target: String,
        /// Inodes needed.
        needed: u64,
        /// Inodes free.
        available: u64,
    },
    /// There is no deployment to roll back to.
    #[error("cannot roll back: {0}")]
    NoRollback(String),
    /// The kernel argument ledger could not be read or written.
    #[error("kernel argument ledger {path}: {cause}")]
    Ledger {
        /// Its path inside the root.
        path: String,
        /// The cause.
        cause: String,
    },
    /// A file or system call outside libostree failed.
    #[error("{path}: {cause}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        cause: String,
    },
    /// The OS helper process (`hearth-ostree-helper`, which runs libostree) is missing,
    /// crashed, timed out, or answered something that is not a protocol response.
    #[error("the OS helper {helper}: {message}")]
    Helper {
        /// The helper's path (or name when it was not found).
        helper: String,
        /// What happened, and what to do.
        message: String,
    },
    /// An rpm-ostree D-Bus call or transaction failed (rpm-ostree backend).
    #[error(
        "rpm-ostree {method}{}: {message}",
        transaction.as_ref().map(|t| format!(" (transaction {t})")).unwrap_or_default()
    )]
    RpmOstree {
        /// The D-Bus method (`UpdateDeployment`, `KernelArgs`, ...) or what hearth was doing.
        method: String,
        /// The transaction's peer-to-peer address, when the method started one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        transaction: Option<String>,
        /// The daemon's (or the bus's) message.
        message: String,
    },
}

impl OsError {
    /// A libostree call failed while doing `op`.
    pub fn ostree(op: impl Into<String>, e: impl fmt::Display) -> OsError {
        OsError::Ostree {
            op: op.into(),
            cause: e.to_string(),
        }
    }

    /// A file or system call on `path` failed.
    pub fn io(path: impl AsRef<Path>, e: impl fmt::Display) -> OsError {
        OsError::Io {
            path: path.as_ref().display().to_string(),
            cause: e.to_string(),
        }
    }
}

/// `1536` → `1.5 KiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(4 << 20), "4.0 MiB");
    }
}
