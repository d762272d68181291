//! Shared by the OS backend tests (tests/os_*.rs): drive hearth's OS backend on an
//! [`OstreeHost`] either from outside (the backend on this machine, on the container's live
//! root: libostree's "external" mode, new deployments written directly) or from inside (the
//! test binary itself runs in the container on `/`: libostree's native mode, staged
//! deployments finalized at shutdown; the production path).
//!
//! Inside, the test binary is started as `<binary> --exact guest_entry_point` with the
//! operation in `HEARTH_OS_GUEST` (JSON); [`guest_entry_point`] runs it and prints the result
//! on a line starting with [`RESULT_MARKER`]. Every test file that runs things inside has a
//! `#[test] fn guest_entry_point()` that calls it (outside the container it does nothing).
//!
//! The libostree backend runs libostree in the helper process `hearth-ostree-helper` (crate
//! `hostops/ostree-helper/`): outside, the backend is given the workspace's helper binary
//! ([`helper`]); inside, the helper is copied next to the test binary in the container's
//! `/var` and named by `$HEARTH_OSTREE_HELPER`.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use hearth_hostops::os::ostree::HELPER_ENV;
use hearth_hostops::os::{
    Finalization, OsBackend, OsChange, OsConfig, OsError, OsExpectation, OsStatus, ProgressSink,
    PullProgress, RollbackOutcome, StagedDeployment,
};
use hearth_vm_tests::ostree::{refs, OstreeHost, OstreeHostOptions, SysrootOptions};
use hearth_vm_tests::qemu::workspace_binary;
use serde::{Deserialize, Serialize};

pub const REBOOT: Duration = Duration::from_secs(90);
pub const GUEST_ENV: &str = "HEARTH_OS_GUEST";
pub const RESULT_MARKER: &str = "HEARTH-GUEST-RESULT: ";

pub fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                "hearth_vm_tests=info,hearth_hostops=info,hearth_ostree_helper=info".into()
            }),
        )
        .with_test_writer()
        .try_init();
}

/// The workspace's `hearth-ostree-helper` (built first if missing).
pub fn helper() -> PathBuf {
    workspace_binary("hearth-ostree-helper", "hearth-ostree-helper")
        .expect("the hearth-ostree-helper binary")
}

/// `backend` with the workspace's helper, when it is the libostree backend.
pub fn with_helper(backend: OsBackend) -> OsBackend {
    match backend {
        OsBackend::Ostree(o) => OsBackend::Ostree(o.with_helper(helper())),
        other => other,
    }
}

/// Where [`Driver`] puts the helper inside the container (the stateroot's `/var`, beside the
/// test binary).
pub const HELPER_INSIDE: &str = "/var/lib/hearth-test-bin/hearth-ostree-helper";

/// Copies the helper into the container at [`HELPER_INSIDE`].
pub fn install_helper_inside(host: &OstreeHost) {
    let dir = host.sysroot().stateroot_var().join("lib/hearth-test-bin");
    std::fs::create_dir_all(&dir).unwrap();
    let dest = dir.join("hearth-ostree-helper");
    if !dest.exists() {
        std::fs::copy(helper(), &dest).unwrap();
    }
}

pub fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Where the backend runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// On this machine, on the container's live root.
    Outside,
    /// In the container, on `/`.
    Inside,
}

/// One operation for the guest.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum GuestOp {
    Status {
        config: OsConfig,
    },
    Stage {
        config: OsConfig,
        change: OsChange,
    },
    Verify {
        config: OsConfig,
        expected: OsExpectation,
    },
    Rollback {
        config: OsConfig,
    },
    Adopt {
        config: OsConfig,
        kargs: Vec<String>,
    },
}

/// Its result.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "camelCase")]
pub enum GuestReply {
    Status(Box<OsStatus>),
    Staged {
        staged: Box<StagedDeployment>,
        /// The pull's progress as the backend reported it, in order.
        progress: Vec<PullProgress>,
    },
    Differences {
        differences: Vec<String>,
    },
    Rollback(RollbackOutcome),
    Adopted {
        kargs: Vec<String>,
    },
}

/// Runs `op` with the backend detected at `root`; outside with the workspace's helper
/// (`outside`), inside with the one `$HEARTH_OSTREE_HELPER` names.
async fn run_op(root: &std::path::Path, op: GuestOp, outside: bool) -> Result<GuestReply, OsError> {
    let config = match &op {
        GuestOp::Status { config }
        | GuestOp::Stage { config, .. }
        | GuestOp::Verify { config, .. }
        | GuestOp::Rollback { config }
        | GuestOp::Adopt { config, .. } => config.clone(),
    };
    let backend = OsBackend::detect_with_config(root, config);
    let backend = if outside {
        with_helper(backend)
    } else {
        backend
    };
    Ok(match op {
        GuestOp::Status { .. } => GuestReply::Status(Box::new(backend.status().await?)),
        GuestOp::Stage { change, .. } => {
            let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let sink: ProgressSink = {
                let seen = seen.clone();
                std::sync::Arc::new(move |p: &PullProgress| seen.lock().unwrap().push(p.clone()))
            };
            let staged = backend.stage_with_progress(&change, Some(sink)).await?;
            let progress = seen.lock().unwrap().clone();
            GuestReply::Staged {
                staged: Box::new(staged),
                progress,
            }
        }
        GuestOp::Verify { expected, .. } => GuestReply::Differences {
            differences: backend.verify_booted(&expected).await?,
        },
        GuestOp::Rollback { .. } => GuestReply::Rollback(backend.rollback().await?),
        GuestOp::Adopt { kargs, .. } => GuestReply::Adopted {
            kargs: backend.adopt_kernel_arguments(&kargs).await?,
        },
    })
}

/// The guest side: runs the operation in `HEARTH_OS_GUEST` on `/`; nothing without it.
pub fn guest_entry_point() {
    let Ok(json) = std::env::var(GUEST_ENV) else {
        return; // a normal test run, not inside a container
    };
    let op: GuestOp = serde_json::from_str(&json).expect("a GuestOp in HEARTH_OS_GUEST");
    // hearth's logs on the guest's standard error (the caller prints them).
    let _ = tracing_subscriber::fmt()
        .with_env_filter("hearth_hostops=info,hearth_ostree_helper=info")
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = rt.block_on(run_op(std::path::Path::new("/"), op, false));
    // On a line of its own (libtest prints "test guest_entry_point ... " before it).
    println!(
        "\n{RESULT_MARKER}{}",
        serde_json::to_string(&result).unwrap()
    );
}

/// Drives the backend on a host, from outside or inside.
pub struct Driver {
    pub mode: Mode,
    pub config: OsConfig,
}

impl Driver {
    /// A driver whose config has the images' remote (`hearth`, file://, as seen from where the
    /// backend runs) and the realtime mapping `{ref}-rt`.
    pub fn new(host: &OstreeHost, mode: Mode) -> Driver {
        let url = match mode {
            Mode::Outside => host.images().remote_url(),
            Mode::Inside => host.images().remote_url_inside(),
        };
        let config: OsConfig = serde_json::from_value(serde_json::json!({
            "remote": {"name": "hearth", "url": url},
            "kernelTypes": {"realtime": "{ref}-rt"},
        }))
        .unwrap();
        Driver { mode, config }
    }

    fn call(&self, host: &OstreeHost, op: GuestOp) -> Result<GuestReply, OsError> {
        match self.mode {
            Mode::Outside => {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(run_op(&host.live_root(), op, true))
            }
            Mode::Inside => {
                let json = serde_json::to_string(&op).unwrap();
                install_helper_inside(host);
                let out = host
                    .run_test_inside(
                        "guest_entry_point",
                        &[(GUEST_ENV, &json), (HELPER_ENV, HELPER_INSIDE)],
                    )
                    .unwrap();
                for line in out
                    .stderr
                    .lines()
                    .filter(|l| l.contains("hearth_hostops") || l.contains("hearth_ostree_helper"))
                {
                    eprintln!("guest: {line}");
                }
                let line = out
                    .stdout
                    .lines()
                    .find_map(|l| l.split_once(RESULT_MARKER).map(|(_, r)| r))
                    .unwrap_or_else(|| panic!("no result from the guest: {out}"));
                serde_json::from_str(line).unwrap()
            }
        }
    }

    pub fn status(&self, host: &OstreeHost) -> Result<OsStatus, OsError> {
        match self.call(
            host,
            GuestOp::Status {
                config: self.config.clone(),
            },
        )? {
            GuestReply::Status(s) => Ok(*s),
            other => panic!("unexpected reply {other:?}"),
        }
    }

    pub fn stage(&self, host: &OstreeHost, change: &OsChange) -> Result<StagedDeployment, OsError> {
        self.stage_with_progress(host, change).map(|(s, _)| s)
    }

    /// Like [`Driver::stage`], with the progress the backend reported while it ran.
    pub fn stage_with_progress(
        &self,
        host: &OstreeHost,
        change: &OsChange,
    ) -> Result<(StagedDeployment, Vec<PullProgress>), OsError> {
        let op = GuestOp::Stage {
            config: self.config.clone(),
            change: change.clone(),
        };
        match self.call(host, op)? {
            GuestReply::Staged {
                staged: s,
                progress,
            } => {
                if self.mode == Mode::Inside && s.finalization == Finalization::AtShutdown {
                    // As the agent does after staging: start the unit that finalizes the
                    // staged deployment at shutdown and wait for it, so that a reboot right
                    // after staging cannot outrun ostree-finalize-staged.path.
                    host.exec_ok(&["systemctl", "start", "ostree-finalize-staged.service"])
                        .unwrap();
                }
                Ok((*s, progress))
            }
            other => panic!("unexpected reply {other:?}"),
        }
    }

    pub fn verify(
        &self,
        host: &OstreeHost,
        expected: &OsExpectation,
    ) -> Result<Vec<String>, OsError> {
        let op = GuestOp::Verify {
            config: self.config.clone(),
            expected: expected.clone(),
        };
        match self.call(host, op)? {
            GuestReply::Differences { differences } => Ok(differences),
            other => panic!("unexpected reply {other:?}"),
        }
    }

    pub fn rollback(&self, host: &OstreeHost) -> Result<RollbackOutcome, OsError> {
        match self.call(
            host,
            GuestOp::Rollback {
                config: self.config.clone(),
            },
        )? {
            GuestReply::Rollback(r) => Ok(r),
            other => panic!("unexpected reply {other:?}"),
        }
    }

    pub fn adopt(&self, host: &OstreeHost, kargs: &[String]) -> Result<Vec<String>, OsError> {
        let op = GuestOp::Adopt {
            config: self.config.clone(),
            kargs: kargs.to_vec(),
        };
        match self.call(host, op)? {
            GuestReply::Adopted { kargs } => Ok(kargs),
            other => panic!("unexpected reply {other:?}"),
        }
    }
}

/// A host with `v1` booted and only `v1` in its repository (pivots pull from the remote).
pub fn boot_v1() -> OstreeHost {
    OstreeHost::boot_with(OstreeHostOptions {
        sysroot: SysrootOptions {
            refs: strings(&[refs::V1]),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap()
}

/// `change` with kernel arguments only.
pub fn kargs_change(delete: &[&str], append: &[&str]) -> OsChange {
    OsChange {
        kargs_delete: strings(delete),
        kargs_append: strings(append),
        ..Default::default()
    }
}
