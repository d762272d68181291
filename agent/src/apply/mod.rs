//! Applying a desired config to the host: plan, journal, execute, verify, reboot or roll back.
//!
//! ## Crash safety
//! The journal is written (atomically) before each phase: `Applying` (with the paths that
//! existed before the apply), `RollingBack` (with the failure), `Rebooting` (with the boot id),
//! and the final state. Every action is an absolute, idempotent "make it so" (write this file,
//! enable that unit), and every file write is atomic, so after a `kill -9` or a power cut the
//! agent simply runs the interrupted phase again from its start: identical files are skipped,
//! and the result is the same as an uninterrupted run. A half-applied host is never reported
//! as `Done`: `Done` is written only after the host was verified against the config.
//!
//! ## Rollback
//! Undoing a failed apply is itself a plan: from the desired config back to the current one.
//! Files the desired config added are restored from the originals hearth kept when it first
//! overwrote them (or removed when there were none), files both configs manage get their
//! current content back, and unit states, SSH keys and the password hash return to the current
//! config's. Then the host is verified against the current config again.
//!
//! ## Files
//! - `mod.rs`: the agent's handle on a host, `sync` and `resume` (which phase runs next),
//!   `verify`.
//! - `action.rs`: run-once actions (`spec.actions`): each run at most once per rendered config,
//!   recorded in the journal before it starts.
//! - `adopt.rs`: taking over what Ignition wrote at first boot, without rewriting it.
//! - `lock.rs`: the agent lock, temporaries of interrupted writes, the preexisting paths.
//! - `run.rs`: the `Applying` phase, ending `Done`, drifted, `Rebooting` or rolling back.
//! - `execute.rs`: one step of a plan, and the service steps of its disruption.
//! - `os.rs`: OS changes: planning, staging, and checking the boot into them.
//! - `reboot.rs`: requesting the reboot and verifying after it.
//! - `rollback.rs`: undoing a failed apply.
//! - `request.rs`: an admin's force and restore-file requests, each acted on once.
//! - `step.rs`: why a step failed ([`step::StepError`]: the step, its object, the cause).

use crate::drift_policy::{drift_reason, DriftPolicies};
use crate::journal::{Journal, JournalError, NamedConfig, Phase, Progress};
use crate::state::{Event, State};
use hearth_config::ignition::Config;
use hearth_config::model::{DisruptionPolicies, MachineConfigSpec};
use hearth_hostops::fs::{DirSyncs, Root};
use hearth_hostops::os::{NoneBackend, OsBackend};
use hearth_hostops::systemd::Systemd;
use hearth_hostops::users::SshKeyLayout;
use hearth_hostops::verify::{self, Mismatch, OfflineUnitStates, VerifyOptions};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

mod action;
mod adopt;
mod execute;
mod lock;
mod os;
mod reboot;
mod request;
mod rollback;
mod run;
mod step;
mod trial;

pub use action::{MAX_ACTION_RECORDS, MAX_OUTPUT_TAIL, SCRIPT_DIR};
pub use adopt::FIRSTBOOT_STAMP;
pub use execute::service_steps;
pub(crate) use lock::remove_own_temporaries;
pub use lock::LOCK_FILE;
pub use os::FINALIZE_UNIT;
pub use reboot::{boot_id, MAX_REBOOT_REQUESTS, REBOOT_MARKER};
pub use request::{new_requests, MAX_REQUEST_RESULTS};
pub use trial::{trial_deadline, trial_window, unix_now};

use os::os_fields;

/// A file whose presence asks for a full re-apply on the next sync (the MCO's
/// `/run/machine-config-daemon-force`).
pub const FORCE_FILE: &str = "/run/hearth-force";
/// The default system bus.
pub const SYSTEM_BUS: &str = "unix:path=/run/dbus/system_bus_socket";

/// How the agent reaches systemd.
#[derive(Debug)]
pub enum Units {
    /// A running systemd over D-Bus.
    Online(Systemd),
    /// An offline image root: enablement through symlinks, no daemon to reload or restart.
    Offline,
}

/// Options of one sync.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Re-apply everything even if the host is already in the desired config.
    pub force: bool,
    /// Do not reboot even if the plan needs it (leave the node `Rebooting`, reboot pending).
    pub no_reboot: bool,
    /// The drift policies: which paths that differ without the apply having written them are
    /// exempt (`ignore`) or reported as drift (`report`, `revert`) instead of failing it.
    pub drift: DriftPolicies,
    /// An admin's force request (`hearth node force`) this sync serves: it re-applies
    /// everything, and the request's id is written into the journal with the apply's start
    /// (`Journal::forcing`), so that it is acted on once, also across a crash.
    pub force_request: Option<u64>,
    /// The pool's trial policy (only when following a server: the trial needs one to answer):
    /// a change it covers ends in `Trial`, not `Done` (`trial.rs`).
    pub trial: Option<hearth_config::trial::TrialPolicy>,
}

/// How a sync ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The host is in the desired config (verified).
    Done,
    /// The desired config is applied, but managed paths differ from it that the apply did not
    /// write (drift under the `report` or `revert` policy, or, on a host that already had the
    /// config, any difference). Each line names the path and the difference. The journal's state
    /// is `Done` with these listed as drift; the host is not in the desired config.
    Drifted(Vec<String>),
    /// The config is applied and the node must reboot; `requested` says whether the reboot was
    /// asked for, `inhibited` why not.
    Rebooting {
        /// Whether logind accepted the reboot.
        requested: bool,
        /// Who blocks it, if anyone.
        inhibited: Option<String>,
    },
    /// The apply failed and was undone; the reason names the step, the object and the cause.
    Degraded(String),
    /// The desired config cannot be applied to a running node; every field is listed.
    Unreconcilable(String),
    /// Applied and verified, on trial: the server must answer before the deadline (the
    /// reason says when), or the change is undone.
    Trial(String),
}

/// Errors that stop the agent itself (not an apply failure, which is [`Outcome::Degraded`]).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The journal cannot be read or written.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Connecting to systemd failed.
    #[error("cannot connect to systemd: {0}")]
    Systemd(#[from] hearth_hostops::systemd::SystemdError),
    /// The root cannot be opened.
    #[error(transparent)]
    Fs(#[from] hearth_hostops::fs::FsError),
    /// The agent lock cannot be taken.
    #[error("cannot take the agent lock {path}: {message}")]
    Lock {
        /// The lock file.
        path: String,
        /// Why.
        message: String,
    },
}

/// The agent's handle on one host.
#[derive(Debug)]
pub struct Agent {
    root: Root,
    root_path: PathBuf,
    units: Units,
    bus: Option<String>,
    ssh_layout: SshKeyLayout,
    os: OsBackend,
    /// Whether this process cleaned the temporaries of its own state yet (see
    /// [`Agent::lock`]).
    cleaned_state: std::sync::atomic::AtomicBool,
    /// Whether this process recorded the booted OS in the journal yet (see
    /// [`Agent::note_booted_os`]).
    noted_os: std::sync::atomic::AtomicBool,
    /// Directories the steps wrote into, fsynced once each before the journal records the
    /// steps (see `execute.rs`).
    written_dirs: DirSyncs,
}

/// Why an offline image root has no OS backend.
pub const OFFLINE_OS_REASON: &str = "an offline image root cannot take OS-level changes";

/// Every path a config manages (files, unit files, drop-ins, masks).
pub fn managed_paths(config: &Config) -> BTreeSet<String> {
    hearth_config::paths::written(config)
        .into_iter()
        .map(|w| w.path)
        .collect()
}

impl Agent {
    /// A handle on the host whose root is `root`, with systemd on `bus` (`None`: an offline
    /// image root).
    pub async fn new(root: &Path, bus: Option<&str>) -> Result<Agent, AgentError> {
        let root_handle = Root::open(root)?;
        let units = match bus {
            Some(address) => Units::Online(Systemd::connect_with_root(address, root).await?),
            None => Units::Offline,
        };
        let ssh_layout = SshKeyLayout::detect(&root_handle).unwrap_or_default();
        let os = match &units {
            Units::Offline => OsBackend::None(NoneBackend::new(OFFLINE_OS_REASON)),
            Units::Online(_) => {
                match OsBackend::detect_on_bus(root, bus.unwrap_or(SYSTEM_BUS)).await {
                    Ok(backend) => backend,
                    Err(e) => OsBackend::None(NoneBackend::new(e.to_string())),
                }
            }
        };
        tracing::debug!(backend = os.kind(), "OS backend");
        Ok(Agent {
            root: root_handle,
            root_path: root.to_path_buf(),
            units,
            bus: bus.map(str::to_string),
            ssh_layout,
            os,
            cleaned_state: std::sync::atomic::AtomicBool::new(false),
            noted_os: std::sync::atomic::AtomicBool::new(false),
            written_dirs: DirSyncs::new(),
        })
    }

    /// The OS backend (kernel arguments, kernel type, OS images) this host has.
    pub fn os(&self) -> &OsBackend {
        &self.os
    }

    /// The root.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// Whether this is an offline image root.
    pub fn is_offline(&self) -> bool {
        matches!(self.units, Units::Offline)
    }

    /// Brings the host to `desired`. Returns how it ended; an `Err` is only for problems that
    /// stop the agent itself (its journal unreadable, systemd unreachable).
    pub async fn sync(
        &self,
        desired: NamedConfig,
        policies: DisruptionPolicies,
        opts: &Options,
    ) -> Result<Outcome, AgentError> {
        let _lock = self.lock()?;
        let mut j = Journal::load(&self.root)?;
        if self.note_booted_os(&mut j, false).await {
            j.save(&self.root)?;
        }
        // The config being applied, waiting for its reboot, or in place, arrives again under
        // another name with the same content (a node moved into a pool that renders the same
        // config): it is the same config; record the new name, or whoever asks for it (the
        // server's long-poll, which compares names) hands it out again and again.
        if let Some(d) = j.desired.as_mut().filter(|d| d.spec == desired.spec) {
            if d.name != desired.name {
                tracing::info!(config = %desired.name, was = %d.name, "the same config under a new name");
                action::rename_records(&mut j.actions, &d.name, &desired.name);
                d.name = desired.name.clone();
                if let Some(c) = j.current.as_mut().filter(|c| c.spec == desired.spec) {
                    c.name = desired.name.clone();
                }
                j.save(&self.root)?;
            }
        }
        // A trial under way ends first (confirmed by the server, or undone at its deadline):
        // nothing else is applied meanwhile.
        if trial_deadline(&j).is_some()
            && self
                .expire_trial_locked(&mut j, &opts.drift)
                .await?
                .is_none()
        {
            return Ok(Outcome::Trial(j.reason.clone().unwrap_or_default()));
        }
        let pending_same = j.desired.as_ref().map(|d| &d.spec) == Some(&desired.spec);
        let waiting_for_reboot = j
            .progress
            .as_ref()
            .is_some_and(|p| p.phase == Phase::Rebooting && !self.rebooted_since(p));
        let force =
            opts.force || opts.force_request.is_some() || self.root.stat(FORCE_FILE)?.is_some();
        if waiting_for_reboot && (!pending_same || force) {
            // A new config (or the force file) supersedes the one waiting for its reboot: what
            // is on disk is the applied config, and its reboot stays pending until the new one
            // is in.
            tracing::info!("a new config or the force file supersedes the pending reboot");
            if j.progress.as_ref().is_some_and(|p| p.os.is_some()) && j.os_base.is_none() {
                // The staged deployment is not booted yet: plan the next OS change from what
                // is booted.
                j.os_base = Some(os_fields(&Self::current_spec(&j)));
            }
            j.current = j.desired.clone();
            j.reboot_pending = true;
            j.progress = None;
        } else if let Some(outcome) = self.resume_locked(&mut j, opts).await? {
            // An interrupted apply finished first; then carry on with this config.
            if pending_same
                && opts.force_request.is_none()
                && !matches!(outcome, Outcome::Degraded(_))
            {
                return Ok(outcome);
            }
        }
        if !force
            && j.state == State::Degraded
            && j.failed_os.is_some()
            && j.desired.as_ref().map(|d| &d.spec) == Some(&desired.spec)
        {
            // Its OS deployment failed after the boot and was rolled back: staging it again
            // would reboot into the same failure. A new config or the force file retries.
            return Ok(Outcome::Degraded(j.reason.clone().unwrap_or_default()));
        }
        if !force
            && j.state == State::Degraded
            && j.failed_trial.is_some()
            && j.desired.as_ref().map(|d| &d.spec) == Some(&desired.spec)
        {
            // Its trial failed (the server did not answer after it was applied) and it was
            // undone: applying it again would cut the node off again. A new config or a force
            // retries.
            return Ok(Outcome::Degraded(j.reason.clone().unwrap_or_default()));
        }
        if !force
            && j.state == State::Degraded
            && j.desired.as_ref().map(|d| &d.spec) == Some(&desired.spec)
            && action::failed_degrading(&j, &desired.name)
        {
            // A run-once action of it failed under `Degrade` and the apply was undone: the
            // action does not run twice, so applying again would only rewrite and roll back
            // the same files. A new config or a force retries.
            return Ok(Outcome::Degraded(j.reason.clone().unwrap_or_default()));
        }
        let same = j.current.as_ref().is_some_and(|c| c.spec == desired.spec);
        if same && !force && j.state == State::Done {
            // Nothing to do but make sure the host still matches: every difference is drift
            // (the paths under `ignore` excepted).
            let mismatches = self.verify(&desired.spec.config).await;
            let (others, mut drift) = opts.drift.split(mismatches, &BTreeSet::new());
            drift.extend(others.iter().map(|m| m.to_string()));
            // The same content under another name (a node moved into a pool that renders the
            // same config): the host is in the new config; record its name, or whoever asks for
            // it (the server's long-poll) asks again and again.
            let renamed = j.current.as_ref().map(|c| &c.name) != Some(&desired.name)
                || j.desired.as_ref().map(|d| &d.name) != Some(&desired.name);
            if renamed {
                tracing::info!(
                    config = %desired.name,
                    was = j.current.as_ref().map(|c| c.name.as_str()).unwrap_or("-"),
                    "the host already has this config's content: recorded under its new name"
                );
                j.current = Some(desired.clone());
                j.desired = Some(desired);
            }
            if renamed || drift != j.drift {
                j.reason = drift_reason(&drift);
                j.drift = drift.clone();
                j.save(&self.root)?;
            }
            return Ok(if drift.is_empty() {
                Outcome::Done
            } else {
                Outcome::Drifted(drift)
            });
        }

        j.desired = Some(desired);
        j.policies = policies;
        j.failed_os = None;
        j.failed_trial = None;
        j.transition(Event::Start, None)?;
        let preexisting = self.preexisting(&j)?;
        j.progress = Some(Progress {
            phase: Phase::Applying,
            step: 0,
            total: 0,
            failure: None,
            boot_id: None,
            reboot_requests: 0,
            os: None,
            trial_seconds: None,
            deadline: None,
            trial_policy: opts.trial,
        });
        if let Some(id) = opts.force_request {
            j.forcing = Some(id);
        }
        j.save(&self.root)?;
        // The preexisting set is part of the apply: kept in the journal for a resume.
        self.save_preexisting(&preexisting)?;
        self.run_apply(&mut j, force, opts).await
    }

    /// Finishes an apply interrupted by a crash or a reboot. Returns `None` when there was
    /// nothing to finish.
    pub async fn resume(
        &self,
        j: &mut Journal,
        opts: &Options,
    ) -> Result<Option<Outcome>, AgentError> {
        let _lock = self.lock()?;
        *j = Journal::load(&self.root)?;
        if self.note_booted_os(j, false).await {
            j.save(&self.root)?;
        }
        let outcome = self.resume_locked(j, opts).await?;
        // Nothing in this boot was left to judge, or it was judged above: the booted
        // deployment is good unless the health check said otherwise.
        if matches!(self.units, Units::Online(_)) {
            crate::boot_verdict::record_unless_set(&self.root, &crate::boot_verdict::Verdict::Good);
        }
        Ok(outcome)
    }

    async fn resume_locked(
        &self,
        j: &mut Journal,
        opts: &Options,
    ) -> Result<Option<Outcome>, AgentError> {
        let Some(progress) = j.progress.clone() else {
            return Ok(None);
        };
        tracing::info!(phase = ?progress.phase, "resuming an interrupted apply");
        let outcome = match progress.phase {
            Phase::Applying => {
                j.transition(Event::Resume, None)?;
                // A forced apply (the force file, or an admin's request) resumes forced.
                let force = self.root.stat(FORCE_FILE)?.is_some() || j.forcing.is_some();
                self.run_apply(j, force, opts).await?
            }
            Phase::RollingBack => {
                let reason = progress.failure.unwrap_or_else(|| "an apply failed".into());
                self.run_rollback(j, reason, &opts.drift).await?
            }
            Phase::Trial => match self.expire_trial_locked(j, &opts.drift).await? {
                Some(outcome) => outcome,
                None => Outcome::Trial(j.reason.clone().unwrap_or_default()),
            },
            Phase::Rebooting => {
                if self.rebooted_since(&progress) {
                    self.after_reboot(j, opts).await?
                } else {
                    self.request_reboot(j, opts).await?
                }
            }
        };
        Ok(Some(outcome))
    }

    fn current_spec(j: &Journal) -> MachineConfigSpec {
        j.current
            .as_ref()
            .map(|c| c.spec.clone())
            .unwrap_or_default()
    }

    /// Checks the host against `config`.
    pub async fn verify(&self, config: &Config) -> Vec<Mismatch> {
        let opts = VerifyOptions {
            ssh_layout: self.ssh_layout,
        };
        match &self.units {
            Units::Offline => {
                verify::verify_with(
                    &self.root,
                    &OfflineUnitStates::new(&self.root),
                    config,
                    &opts,
                )
                .mismatches
            }
            Units::Online(sd) => {
                let names = verify::units_to_query(config);
                let states: HashMap<String, String> =
                    match verify::unit_file_states(sd.connection(), &names).await {
                        Ok(s) => s,
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot read unit states");
                            HashMap::new()
                        }
                    };
                verify::verify_with(&self.root, &states, config, &opts).mismatches
            }
        }
    }
}
