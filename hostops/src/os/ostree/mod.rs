//! The libostree backend, as a client: libostree and GLib run in a separate process,
//! `hearth-ostree-helper` (crate `hostops/ostree-helper/`), never in the agent's address space.
//!
//! ## One process per operation
//!
//! Each call of [`OstreeBackend`] starts the helper, writes one [`protocol::Request`] on its
//! standard input, reads one [`protocol::Response`] from its standard output, forwards its
//! standard error to the log (target `hearth_ostree_helper`) and waits for it to exit. This is
//! the model rpm-ostree itself uses (a small client, the heavy library in another process), for
//! three reasons:
//!
//! - **crashes are contained**: a GLib assertion followed by a SIGSEGV in libostree was seen
//!   once; now it kills the helper, and the call returns an [`OsError::Helper`] naming the
//!   helper, the operation, the signal and the last lines of the helper's standard error. The
//!   agent lives and reports it.
//! - **the agent links libc only**: hearth-hostops and hearth-agent do not depend on the
//!   `ostree` crate; they run on a plain host with nothing else installed. Only
//!   hearth-ostree-helper needs libostree (and `libostree-dev` to build).
//! - **libostree's process state stays out**: libostree may unshare the calling thread's mount
//!   namespace to remount a read-only `/sysroot` writable (Fedora CoreOS), and serializes badly
//!   across sysroots in one process; a process per operation has neither problem.
//!
//! ## Finding the helper
//!
//! [`OstreeBackend::with_helper`] when given, else `$HEARTH_OSTREE_HELPER` ([`HELPER_ENV`]),
//! else `hearth-ostree-helper` beside the running executable, else
//! [`HELPER_INSTALL_PATH`]. Without a helper every OS operation fails with a reason that says
//! what to install; files, units and SSH keys are not affected (they never use this backend).
//!
//! ## Limits
//!
//! Each operation has a time limit ([`STAGE_TIME_LIMIT`] for staging, which may pull an OS
//! image; [`OP_TIME_LIMIT`] for the others, above libostree's 300 s sysroot lock wait); on
//! expiry the helper is killed and the call fails with the reason. Responses are bounded by
//! [`protocol::MAX_RESPONSE_BYTES`], log lines by [`MAX_LOG_LINE`].
//!
//! How the helper works on the sysroot (native and external mode, staging versus writing) is
//! documented in the helper crate and in docs/os-layer.md.

mod client;
pub mod protocol;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use self::client::MAX_LOG_LINE;
use self::protocol::{helper_error, Op, Reply, Request, HELPER_NAME, PROTOCOL_VERSION};
use crate::os::change::OsChange;
use crate::os::config::OsConfig;
use crate::os::error::OsError;
use crate::os::progress::ProgressSink;
use crate::os::status::{OsExpectation, OsStatus, RollbackOutcome, StagedDeployment};

/// The environment variable that names the helper's path (tests, unusual installs).
pub const HELPER_ENV: &str = "HEARTH_OSTREE_HELPER";

/// Where packages install the helper.
pub const HELPER_INSTALL_PATH: &str = "/usr/libexec/hearth/hearth-ostree-helper";

/// The time limit of [`OstreeBackend::stage`] (50 minutes: it may pull an OS image; below the
/// agent's watchdog limit for staging, 60 minutes, so that the helper is killed and the
/// failure reported before the watchdog gives up on the agent).
pub const STAGE_TIME_LIMIT: Duration = Duration::from_secs(50 * 60);

/// The time limit of the other operations (10 minutes: a mutating call may wait 300 s for
/// libostree's sysroot lock).
pub const OP_TIME_LIMIT: Duration = Duration::from_secs(10 * 60);

/// The libostree backend for the host at a root (a client of `hearth-ostree-helper`).
#[derive(Debug, Clone)]
pub struct OstreeBackend {
    root: PathBuf,
    config: OsConfig,
    helper: Option<PathBuf>,
}

impl OstreeBackend {
    /// The backend for the sysroot at `root`, with the helper found as the module
    /// documentation says.
    pub fn new(root: &Path, config: OsConfig) -> OstreeBackend {
        OstreeBackend {
            root: root.to_path_buf(),
            config,
            helper: None,
        }
    }

    /// The same backend with the helper at `path`.
    pub fn with_helper(mut self, path: impl Into<PathBuf>) -> OstreeBackend {
        self.helper = Some(path.into());
        self
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The configuration.
    pub fn config(&self) -> &OsConfig {
        &self.config
    }

    /// The helper's path (see the module documentation), or why there is none.
    pub fn helper(&self) -> Result<PathBuf, OsError> {
        if let Some(p) = &self.helper {
            return Ok(p.clone());
        }
        let env = std::env::var_os(HELPER_ENV).filter(|v| !v.is_empty());
        let beside = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|d| d.join(HELPER_NAME)));
        locate_helper(env.map(PathBuf::from), beside)
    }

    async fn call(&self, op: Op, limit: Duration) -> Result<Reply, OsError> {
        self.call_reporting(op, limit, None).await
    }

    async fn call_reporting(
        &self,
        op: Op,
        limit: Duration,
        progress: Option<&ProgressSink>,
    ) -> Result<Reply, OsError> {
        let helper = self.helper()?;
        let request = Request {
            version: PROTOCOL_VERSION,
            root: self.root.clone(),
            config: self.config.clone(),
            op,
        };
        client::run(&helper, &request, limit, progress).await
    }

    /// The booted, pending and rollback deployments.
    pub async fn status(&self) -> Result<OsStatus, OsError> {
        match self.call(Op::Status {}, OP_TIME_LIMIT).await? {
            Reply::Status(s) => Ok(*s),
            other => Err(self.unexpected("status", &other)),
        }
    }

    /// Stages one new deployment carrying the whole change; a container image's pull reports
    /// its progress to `progress`.
    pub async fn stage(
        &self,
        change: &OsChange,
        progress: Option<&ProgressSink>,
    ) -> Result<StagedDeployment, OsError> {
        let op = Op::Stage {
            change: change.clone(),
        };
        match self.call_reporting(op, STAGE_TIME_LIMIT, progress).await? {
            Reply::Staged(s) => Ok(*s),
            other => Err(self.unexpected("stage", &other)),
        }
    }

    /// The differences between the booted deployment and `expected`.
    pub async fn verify_booted(&self, expected: &OsExpectation) -> Result<Vec<String>, OsError> {
        let op = Op::VerifyBooted {
            expected: expected.clone(),
        };
        match self.call(op, OP_TIME_LIMIT).await? {
            Reply::Differences(d) => Ok(d),
            other => Err(self.unexpected("verify-booted", &other)),
        }
    }

    /// Makes the previous deployment the default at the next boot, or drops a pending one.
    pub async fn rollback(&self) -> Result<RollbackOutcome, OsError> {
        match self.call(Op::Rollback {}, OP_TIME_LIMIT).await? {
            Reply::Rollback(r) => Ok(r),
            other => Err(self.unexpected("rollback", &other)),
        }
    }

    /// Records kernel arguments of the booted deployment as hearth's (see
    /// [`OsBackend::adopt_kernel_arguments`](super::OsBackend::adopt_kernel_arguments)).
    pub async fn adopt_kernel_arguments(&self, kargs: &[String]) -> Result<Vec<String>, OsError> {
        let op = Op::AdoptKernelArguments {
            kargs: kargs.to_vec(),
        };
        match self.call(op, OP_TIME_LIMIT).await? {
            Reply::Kargs(k) => Ok(k),
            other => Err(self.unexpected("adopt-kernel-arguments", &other)),
        }
    }

    fn unexpected(&self, op: &str, reply: &Reply) -> OsError {
        let helper = self
            .helper()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| HELPER_NAME.into());
        let kind = serde_json::to_value(reply)
            .ok()
            .and_then(|v| v.as_object().and_then(|o| o.keys().next().cloned()))
            .unwrap_or_default();
        helper_error(
            &helper,
            format!("{op}: it answered with a {kind:?} reply, which belongs to another operation"),
        )
    }
}

/// The helper: `env` (`$HEARTH_OSTREE_HELPER`) when set (it must exist), else `beside` (the
/// running executable's directory) when it exists, else [`HELPER_INSTALL_PATH`] when it exists.
fn locate_helper(env: Option<PathBuf>, beside: Option<PathBuf>) -> Result<PathBuf, OsError> {
    if let Some(p) = env {
        if p.is_file() {
            return Ok(p);
        }
        return Err(helper_error(
            &p.display().to_string(),
            format!(
                "${HELPER_ENV} names it, but it is not a file: fix ${HELPER_ENV} or unset it \
                 to use {HELPER_INSTALL_PATH}"
            ),
        ));
    }
    let mut looked = Vec::new();
    for p in beside
        .into_iter()
        .chain(std::iter::once(PathBuf::from(HELPER_INSTALL_PATH)))
    {
        if p.is_file() {
            return Ok(p);
        }
        looked.push(p.display().to_string());
    }
    Err(helper_error(
        HELPER_NAME,
        format!(
            "not installed (looked at {}; ${HELPER_ENV} is not set): install \
             hearth-ostree-helper at {HELPER_INSTALL_PATH} (it needs libostree, Debian's \
             libostree-1-1) to manage kernel arguments, kernel type and OS images on this ostree \
             host; files, units and SSH keys are applied without it",
            looked.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helper_is_found_in_order_and_its_absence_says_what_to_install() {
        let dir = tempfile::tempdir().unwrap();
        let beside = dir.path().join(HELPER_NAME);
        let env = dir.path().join("elsewhere");
        // Nothing there: the reason names where it looked and what to install.
        let e = locate_helper(None, Some(beside.clone())).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, OsError::Helper { .. }), "{e:?}");
        for want in [
            beside.to_str().unwrap(),
            HELPER_INSTALL_PATH,
            "install hearth-ostree-helper",
            "files, units and SSH keys are applied without it",
        ] {
            assert!(msg.contains(want), "{want:?} missing in {msg}");
        }
        // Beside the executable.
        std::fs::write(&beside, "").unwrap();
        assert_eq!(locate_helper(None, Some(beside.clone())).unwrap(), beside);
        // The environment wins, and must exist.
        let msg = locate_helper(Some(env.clone()), Some(beside.clone()))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains(env.to_str().unwrap()) && msg.contains(HELPER_ENV),
            "{msg}"
        );
        std::fs::write(&env, "").unwrap();
        assert_eq!(locate_helper(Some(env.clone()), Some(beside)).unwrap(), env);
    }

    #[test]
    fn a_missing_helper_fails_the_operation_not_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let b = OstreeBackend::new(dir.path(), OsConfig::default())
            .with_helper(dir.path().join("no-such-helper"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let e = rt.block_on(b.status()).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, OsError::Helper { .. }), "{e:?}");
        assert!(
            msg.contains("no-such-helper") && msg.contains("starting it"),
            "{msg}"
        );
    }
}
