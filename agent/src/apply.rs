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

use crate::drift_policy::{drift_reason, touched_paths, DriftPolicies};
use crate::journal::{Journal, JournalError, NamedConfig, OsProgress, Phase, Progress};
use crate::state::{Event, State};
use hearth_config::disruption::{Outcome as DisruptionOutcome, ServiceStep};
use hearth_config::ignition::Config;
use hearth_config::model::{DisruptionPolicies, MachineConfigSpec};
use hearth_config::plan::{plan, Action, Plan, SYSTEMD_UNIT_DIR};
use hearth_hostops::files::{self, FileError};
use hearth_hostops::fs::Root;
use hearth_hostops::offline;
use hearth_hostops::os::{NoneBackend, OsBackend, OsChange, OsConfig, OsExpectation};
use hearth_hostops::passwd;
use hearth_hostops::reboot::{self, RebootOutcome};
use hearth_hostops::systemd::Systemd;
use hearth_hostops::users::{self, SshKeyLayout};
use hearth_hostops::verify::{self, Mismatch, OfflineUnitStates, VerifyOptions};

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

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

/// Written (in the `/run` tmpfs) before a reboot is requested; its absence after a restart
/// means the node rebooted.
pub const REBOOT_MARKER: &str = "/run/hearth/reboot-requested";
/// How many times the agent asks for a reboot for one config before it gives up (Degraded).
pub const MAX_REBOOT_REQUESTS: u32 = 5;

/// The lock that keeps two agents from changing a host at once.
pub const LOCK_FILE: &str = "/var/lib/hearth/agent.lock";

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
}

/// The unit that finalizes a staged ostree deployment at shutdown.
pub const FINALIZE_UNIT: &str = "ostree-finalize-staged.service";

/// Why an offline image root has no OS backend.
pub const OFFLINE_OS_REASON: &str = "an offline image root cannot take OS-level changes";

fn unit_path(name: &str) -> String {
    format!("{SYSTEMD_UNIT_DIR}/{name}")
}

fn dropin_path(unit: &str, name: &str) -> String {
    format!("{SYSTEMD_UNIT_DIR}/{unit}.d/{name}")
}

/// Every path a config manages (files, unit files, drop-ins, masks).
pub fn managed_paths(config: &Config) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = config
        .storage
        .files
        .iter()
        .map(|f| f.path.clone())
        .collect();
    for u in &config.systemd.units {
        if u.contents.as_deref().is_some_and(|c| !c.is_empty()) || u.mask == Some(true) {
            out.insert(unit_path(&u.name));
        }
        for d in &u.dropins {
            if d.contents.as_deref().is_some_and(|c| !c.is_empty()) {
                out.insert(dropin_path(&u.name, &d.name));
            }
        }
    }
    out
}

fn is_os_action(a: &Action) -> bool {
    matches!(
        a,
        Action::KernelArguments { .. }
            | Action::KernelType { .. }
            | Action::OsImage { .. }
            | Action::Extensions { .. }
    )
}

/// The OS fields of a spec (kernel arguments, kernel type, OS image, extensions), without files
/// and units: what OS changes are planned from.
fn os_fields(spec: &MachineConfigSpec) -> MachineConfigSpec {
    MachineConfigSpec {
        kernel_arguments: spec.kernel_arguments.clone(),
        kernel_type: spec.kernel_type,
        os_image_url: spec.os_image_url.clone(),
        extensions: spec.extensions.clone(),
        ..MachineConfigSpec::default()
    }
}

/// The systemd unit this process runs in (`hearth-agent.service`), from `/proc/self/cgroup`.
fn own_unit() -> Option<String> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // `0::/system.slice/x.service` (unified) or `1:name=systemd:/system.slice/x.service`
    // (hybrid): the unit is the last component that names one.
    cgroup.lines().find_map(|l| {
        l.splitn(3, ':')
            .nth(2)?
            .rsplit('/')
            .find(|c| c.ends_with(".service") || c.ends_with(".scope"))
            .map(str::to_string)
    })
}

/// Reads the boot id of the running system (`/proc/sys/kernel/random/boot_id`).
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
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
        // The config being applied, waiting for its reboot, or in place, arrives again under
        // another name with the same content (a node moved into a pool that renders the same
        // config): it is the same config; record the new name, or whoever asks for it (the
        // server's long-poll, which compares names) hands it out again and again.
        if let Some(d) = j.desired.as_mut().filter(|d| d.spec == desired.spec) {
            if d.name != desired.name {
                tracing::info!(config = %desired.name, was = %d.name, "the same config under a new name");
                d.name = desired.name.clone();
                if let Some(c) = j.current.as_mut().filter(|c| c.spec == desired.spec) {
                    c.name = desired.name.clone();
                }
                j.save(&self.root)?;
            }
        }
        let pending_same = j.desired.as_ref().map(|d| &d.spec) == Some(&desired.spec);
        let waiting_for_reboot = j
            .progress
            .as_ref()
            .is_some_and(|p| p.phase == Phase::Rebooting && !self.rebooted_since(p));
        let force = opts.force || self.root.stat(FORCE_FILE)?.is_some();
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
            if pending_same && !matches!(outcome, Outcome::Degraded(_)) {
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
        });
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
        self.resume_locked(j, opts).await
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
                let force = self.root.stat(FORCE_FILE)?.is_some();
                self.run_apply(j, force, opts).await?
            }
            Phase::RollingBack => {
                let reason = progress.failure.unwrap_or_else(|| "an apply failed".into());
                self.run_rollback(j, reason, &opts.drift).await?
            }
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

    const PREEXISTING: &'static str = "/var/lib/hearth/apply-preexisting.json";

    /// Paths the desired config takes over that existed before this apply (their originals
    /// must be kept). Computed once per apply; a resumed apply reads the saved list.
    fn preexisting(&self, j: &Journal) -> Result<BTreeSet<String>, AgentError> {
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

    fn save_preexisting(&self, set: &BTreeSet<String>) -> Result<(), AgentError> {
        let bytes = serde_json::to_vec(set).unwrap_or_default();
        self.root
            .write_atomic(Self::PREEXISTING, &bytes, 0o600, None)?;
        Ok(())
    }

    fn load_preexisting(&self) -> BTreeSet<String> {
        self.root
            .read(Self::PREEXISTING)
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Removes temporary files that a write interrupted by a crash left in the directories of
    /// managed paths.
    fn remove_stale_temporaries(&self, a: &BTreeSet<String>, b: &BTreeSet<String>) {
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
    fn lock(&self) -> Result<nix::fcntl::Flock<std::fs::File>, AgentError> {
        let lock = self.lock_file()?;
        if !self
            .cleaned_state
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            self.remove_own_temporaries();
        }
        Ok(lock)
    }

    /// Removes the temporary files a `kill -9` or a power cut left in the agent's own state
    /// directories (the journal, stored configs, originals, undo snapshots, the reboot marker,
    /// the kernel argument ledger). Called with the lock held: no other agent writes them.
    fn remove_own_temporaries(&self) {
        for d in [
            hearth_hostops::files::STATE_DIR,
            crate::journal::CONFIG_DIR,
            hearth_hostops::files::ORIGINALS_DIR,
            crate::journal::UNDO_DIR,
            "/run/hearth",
        ] {
            match self.root.remove_stale_temporaries(d) {
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

    fn current_spec(j: &Journal) -> MachineConfigSpec {
        j.current
            .as_ref()
            .map(|c| c.spec.clone())
            .unwrap_or_default()
    }

    async fn run_apply(
        &self,
        j: &mut Journal,
        force: bool,
        opts: &Options,
    ) -> Result<Outcome, AgentError> {
        let Some(desired) = j.desired.clone() else {
            return Ok(Outcome::Done);
        };
        let current = Self::current_spec(j);
        let from = if force {
            MachineConfigSpec::default()
        } else {
            current.clone()
        };
        let p = plan(&from, &desired.spec, &j.policies);
        if !p.is_reconcilable() {
            let reason = format!(
                "{} cannot be applied to a running node: {}",
                desired.name,
                p.unreconcilable
                    .iter()
                    .map(|u| u.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            return self.end_failed(j, Event::FoundUnreconcilable, reason);
        }
        // OS changes are planned from what is booted (not from nothing, even when forced: kernel
        // arguments are a diff) and staged last, after files and units are in and verified.
        let os_from = match j.os_base.clone() {
            Some(base) => base,
            None if j.current.is_none() => self.adopt_booted_os(&desired.spec).await,
            None => os_fields(&current),
        };
        let os_actions: Vec<Action> = plan(&os_from, &desired.spec, &j.policies)
            .actions
            .into_iter()
            .filter(is_os_action)
            .collect();
        let os_change = match self.os_change(&os_actions) {
            Ok(change) => change,
            Err(why) => {
                let reason = format!(
                    "{}: {why}; nothing was changed. Refused: {}",
                    desired.name,
                    os_actions
                        .iter()
                        .map(|a| a.to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                );
                return self.end_failed(j, Event::Failed, reason);
            }
        };
        let managed_before = managed_paths(&current.config);
        let preexisting = self.load_preexisting();
        self.remove_stale_temporaries(&managed_before, &managed_paths(&desired.spec.config));
        let total = p.actions.len() + service_steps(&p).len();
        tracing::info!(config = %desired.name, actions = p.actions.len(), "applying");
        for (i, action) in p.actions.iter().enumerate() {
            if is_os_action(action) {
                continue;
            }
            tracing::debug!(step = i + 1, %action, "step");
            crate::watchdog::beat();
            if let Err(e) = self.execute(action, &managed_before, &preexisting).await {
                let reason = format!("step {} of {total} ({action}) failed: {e}", i + 1);
                return self.start_rollback(j, reason, &opts.drift).await;
            }
        }
        let mut warnings = Vec::new();
        for (k, step) in service_steps(&p).iter().enumerate() {
            match self.service_step(step, &p, &j.policies).await {
                Ok(Some(warning)) => warnings.push(warning),
                Ok(None) => {}
                Err(e) => {
                    let reason = format!(
                        "step {} of {total} ({step}) failed: {e}",
                        p.actions.len() + k + 1
                    );
                    return self.start_rollback(j, reason, &opts.drift).await;
                }
            }
        }
        let mismatches = self.verify(&desired.spec.config).await;
        // A managed path this apply did not write that differs is drift (exempt under
        // `ignore`, reported under `report`), not a failure of this apply.
        let (mismatches, drift) = opts.drift.split(mismatches, &touched_paths(&p));
        if !mismatches.is_empty() {
            let reason = format!(
                "after applying {}, the host does not match it: {}",
                desired.name,
                mismatches
                    .iter()
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            return self.start_rollback(j, reason, &opts.drift).await;
        }
        let os_progress = match os_change {
            Some(change) => match self.stage_os(&change).await {
                Ok(progress) => Some(progress),
                Err(e) => {
                    let reason = format!(
                        "step {total} of {total} (stage the OS change: {change}) failed: {e}"
                    );
                    return self.start_rollback(j, reason, &opts.drift).await;
                }
            },
            None => {
                if j.os_base.take().is_some() {
                    // The newer config no longer has the OS change that was staged for the
                    // superseded one: drop the staged deployment.
                    self.cancel_pending_os().await;
                }
                None
            }
        };
        let _ = self.root.remove(Self::PREEXISTING);
        if (p.disruption.reboot() || j.reboot_pending || os_progress.is_some())
            && !self.is_offline()
        {
            self.root
                .write_atomic(REBOOT_MARKER, desired.name.as_bytes(), 0o644, None)
                .map_err(AgentError::Fs)?;
            j.progress = Some(Progress {
                phase: Phase::Rebooting,
                step: total,
                total,
                failure: None,
                boot_id: boot_id(),
                reboot_requests: 0,
                os: os_progress,
            });
            let mut reasons: Vec<String> = p
                .disruption
                .reboot_reasons()
                .map(|d| d.reason.clone())
                .collect();
            if j.reboot_pending && reasons.is_empty() {
                reasons.push(
                    "reboot: an earlier config applied before this one still needs its reboot"
                        .into(),
                );
            }
            j.transition(Event::NeedsReboot, Some(reasons.join("; ")))?;
            j.drift = drift;
            j.save(&self.root)?;
            return self.request_reboot(j, opts).await;
        }
        self.finish(j, drift, warnings)
    }

    /// Ends the apply in progress with `event` (a failure) and `reason`: no progress left,
    /// journaled. `Unreconcilable` for [`Event::FoundUnreconcilable`], else `Degraded`.
    fn end_failed(
        &self,
        j: &mut Journal,
        event: Event,
        reason: String,
    ) -> Result<Outcome, AgentError> {
        j.progress = None;
        j.transition(event, Some(reason.clone()))?;
        j.save(&self.root)?;
        Ok(match event {
            Event::FoundUnreconcilable => Outcome::Unreconcilable(reason),
            _ => Outcome::Degraded(reason),
        })
    }

    /// Ends an OS boot that did not go as staged: `Degraded`, and the config is not staged
    /// again (no reboot loop) until another one or the force file asks.
    fn end_failed_os(
        &self,
        j: &mut Journal,
        desired: &NamedConfig,
        reason: String,
    ) -> Result<Outcome, AgentError> {
        j.os_base = None;
        j.failed_os = Some(desired.name.clone());
        self.end_failed(j, Event::BootVerificationFailed, reason)
    }

    /// The OS change a plan's OS actions make, or why this host cannot make it (checked before
    /// anything is changed).
    fn os_change(&self, actions: &[Action]) -> Result<Option<OsChange>, String> {
        if actions.is_empty() {
            return Ok(None);
        }
        if let Some(reason) = self.os.unsupported_reason() {
            return Err(if self.is_offline() {
                reason.to_string()
            } else {
                format!("this host has no OS backend that can make them ({reason})")
            });
        }
        let change = self
            .os
            .change_from_actions(actions)
            .map_err(|e| e.to_string())?;
        Ok((!change.is_empty()).then_some(change))
    }

    /// The first config of a host (hearth takes it over, from the MCO or from an installer that
    /// set kernel arguments): what the booted deployment already has of the config's OS fields
    /// is taken as the starting point, so no argument the former manager appended is appended
    /// twice and an image already booted is not deployed again. Arguments adopted this way are recorded as hearth's (a later
    /// config may remove them, as the MCO would).
    async fn adopt_booted_os(&self, desired: &MachineConfigSpec) -> MachineConfigSpec {
        let nothing = os_fields(&MachineConfigSpec::default());
        let wants_os = !desired.kernel_arguments.is_empty()
            || !desired.os_image_url.is_empty()
            || desired.kernel_type != hearth_config::model::KernelType::Default;
        if !wants_os || self.os.unsupported_reason().is_some() {
            return nothing;
        }
        let booted = match self.os.status().await {
            Ok(status) => status.booted,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the booted deployment; planning the OS change from nothing");
                return nothing;
            }
        };
        // The arguments a former manager (the MCO, an installer) appended in the config's order
        // end the booted list: adopt the longest start of the config's list found there, so the
        // plan (order-sensitive) appends only the rest.
        // Entries are kept as written ("a=1 b=2"); the booted command line holds arguments.
        let wanted = hearth_config::kargs::split_kernel_arguments(&desired.kernel_arguments);
        let len = hearth_config::kargs::booted_prefix_len(&booted.kernel_args, &wanted);
        let mut adopted = wanted[..len].to_vec();
        if !adopted.is_empty() {
            match self.os.adopt_kernel_arguments(&adopted).await {
                Ok(_) => {
                    tracing::info!(kargs = %adopted.join(" "), "kernel arguments already booted adopted")
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot record the adopted kernel arguments");
                    adopted.clear();
                }
            }
        }
        MachineConfigSpec {
            kernel_arguments: adopted,
            kernel_type: booted.kernel_type,
            os_image_url: if booted.image == desired.os_image_url.trim() {
                desired.os_image_url.clone()
            } else {
                String::new()
            },
            ..MachineConfigSpec::default()
        }
    }

    /// Stages the OS change as one new deployment; what the boot must show.
    async fn stage_os(&self, change: &OsChange) -> Result<OsProgress, String> {
        tracing::info!(%change, backend = self.os.kind(), "staging the OS change");
        // Pulling an image can take long: the watchdog is fed meanwhile.
        let _busy = crate::watchdog::busy("staging the OS change", crate::watchdog::STAGE_MAX);
        let staged = self.os.stage(change).await.map_err(|e| e.to_string())?;
        if staged.finalization == hearth_hostops::os::Finalization::AtShutdown {
            // The staged deployment becomes bootable only when ostree-finalize-staged.service
            // runs its stop action at shutdown. Its path unit starts it when the staging file
            // appears, but a reboot asked for right after staging can cancel that start job:
            // the host then boots the old deployment. Start it now and wait (as newer
            // libostree does itself).
            if let Units::Online(sd) = &self.units {
                if let Err(e) = sd.start(FINALIZE_UNIT).await {
                    self.cancel_pending_os().await;
                    return Err(format!(
                        "the deployment was staged, but {FINALIZE_UNIT} (which finalizes it at \
                         shutdown) cannot be started, so it was dropped again: {e}"
                    ));
                }
            }
        }
        for skipped in &staged.skipped_deletes {
            tracing::warn!(
                karg = %skipped.argument,
                reason = %skipped.reason,
                "kernel argument not deleted"
            );
        }
        tracing::info!(
            deployment = %staged.deployment.id,
            from = %staged.from,
            kargs = %staged.deployment.kernel_args.join(" "),
            "OS deployment staged"
        );
        Ok(OsProgress {
            change: change.to_string(),
            expect: staged.expectation(),
            from: staged.from.clone(),
            rollback: None,
        })
    }

    /// Drops a staged (or pending) OS deployment, so that the next boot starts the booted one
    /// again. Failures are logged: the caller is already on a failure path.
    async fn cancel_pending_os(&self) {
        match self.os.status().await {
            Ok(status) if status.pending.is_some() => match self.os.rollback().await {
                Ok(outcome) => tracing::info!(?outcome, "pending OS deployment dropped"),
                Err(e) => tracing::warn!(error = %e, "cannot drop the pending OS deployment"),
            },
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot read the OS deployments"),
        }
    }

    /// Waits for systemd to finish booting and judges the boot (see
    /// [`hearth_hostops::os::HealthCheck`]): `Ok` when the system is `running`, or `degraded`
    /// only by ignored units; otherwise why not, naming each failed unit with its log.
    async fn boot_health(&self, check: &hearth_hostops::os::HealthCheck) -> Result<(), String> {
        let Units::Online(sd) = &self.units else {
            return Ok(());
        };
        let timeout = std::time::Duration::from_secs(check.timeout_seconds);
        let _busy = crate::watchdog::busy(
            "the boot health check",
            timeout + std::time::Duration::from_secs(60),
        );
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last;
        loop {
            match sd.system_state().await {
                Ok(state) => match state.as_str() {
                    "running" => return Ok(()),
                    "degraded" => return self.failed_units_verdict(sd, check).await,
                    "maintenance" | "stopping" | "offline" => {
                        return Err(format!("the system is in state {state} after the boot"))
                    }
                    _ => {
                        if self.boot_waits_only_for_this_agent(sd).await {
                            // Run from a unit the boot waits for (a oneshot `apply`): the boot
                            // cannot finish before this check does, so judge it by what failed
                            // so far.
                            return self.failed_units_verdict(sd, check).await;
                        }
                        last = state;
                    }
                },
                Err(e) => last = format!("unreadable ({e})"),
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "the boot did not finish within {} s (system state: {last})",
                    check.timeout_seconds
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }

    /// `Ok` unless units other than the ignored ones failed; then each with its state and log.
    async fn failed_units_verdict(
        &self,
        sd: &Systemd,
        check: &hearth_hostops::os::HealthCheck,
    ) -> Result<(), String> {
        let failed: Vec<String> = sd
            .failed_units()
            .await
            .map_err(|e| format!("cannot list the failed units: {e}"))?
            .into_iter()
            .filter(|u| !check.ignore_failed_units.contains(u))
            .collect();
        if failed.is_empty() {
            return Ok(());
        }
        let mut why = Vec::new();
        for unit in &failed {
            why.push(sd.describe_unit(unit).await);
        }
        Err(format!(
            "the boot ended degraded: {} failed: {}",
            failed.join(", "),
            why.join("; ")
        ))
    }

    /// Whether the only job systemd is still running is the start of the unit this agent runs
    /// in (`/proc/self/cgroup`): everything else left waits for it.
    async fn boot_waits_only_for_this_agent(&self, sd: &Systemd) -> bool {
        let Some(own) = own_unit() else {
            return false;
        };
        match sd.running_jobs().await {
            Ok(jobs) => !jobs.is_empty() && jobs.iter().all(|u| *u == own),
            Err(_) => false,
        }
    }

    /// Ends an apply that needs no reboot: current := desired, `Done`, with `drift` (paths the
    /// apply did not write that differ; see [`DriftPolicies::split`]) listed and in the reason.
    /// `warnings` are steps of the plan that were skipped (a unit the built-in policies name
    /// that this host does not have): they go into the reason too.
    fn finish(
        &self,
        j: &mut Journal,
        drift: Vec<String>,
        warnings: Vec<String>,
    ) -> Result<Outcome, AgentError> {
        j.os_base = None;
        j.current = j.desired.clone();
        j.progress = None;
        j.reboot_pending = false;
        let reason = warnings
            .into_iter()
            .map(|w| format!("warning: {w}"))
            .chain(drift_reason(&drift))
            .collect::<Vec<_>>();
        j.transition(
            Event::Applied,
            (!reason.is_empty()).then(|| reason.join("; ")),
        )?;
        j.drift = drift.clone();
        j.save(&self.root)?;
        let _ = self.root.remove(FORCE_FILE);
        tracing::info!(
            config = j.current.as_ref().map(|c| c.name.as_str()).unwrap_or(""),
            "done"
        );
        Ok(if drift.is_empty() {
            Outcome::Done
        } else {
            Outcome::Drifted(drift)
        })
    }

    /// Asks for the reboot an applied config is waiting for (after the caller took a reboot
    /// slot). Does nothing unless the node is waiting to reboot.
    pub async fn reboot_now(&self) -> Result<Outcome, AgentError> {
        let _lock = self.lock()?;
        let mut j = Journal::load(&self.root)?;
        match j.progress.as_ref() {
            Some(p) if p.phase == Phase::Rebooting && !self.rebooted_since(p) => {
                self.request_reboot(&mut j, &Options::default()).await
            }
            _ => Ok(match j.state {
                State::Degraded => Outcome::Degraded(j.reason.clone().unwrap_or_default()),
                State::Unreconcilable => {
                    Outcome::Unreconcilable(j.reason.clone().unwrap_or_default())
                }
                _ => Outcome::Done,
            }),
        }
    }

    async fn request_reboot(&self, j: &mut Journal, opts: &Options) -> Result<Outcome, AgentError> {
        if opts.no_reboot {
            return Ok(Outcome::Rebooting {
                requested: false,
                inhibited: None,
            });
        }
        if self
            .root
            .read(REBOOT_MARKER)
            .ok()
            .flatten()
            .is_some_and(|m| m.ends_with(b"\nrequested"))
        {
            // logind already accepted a reboot in this boot: it is on its way.
            return Ok(Outcome::Rebooting {
                requested: true,
                inhibited: None,
            });
        }
        if let Some(p) = j.progress.as_mut() {
            if p.reboot_requests >= MAX_REBOOT_REQUESTS {
                let reason = format!(
                    "the node was asked to reboot {} times for this config without coming back in it; stopping to avoid a reboot loop",
                    p.reboot_requests
                );
                if p.os.is_some() {
                    self.cancel_pending_os().await;
                }
                j.os_base = None;
                return self.end_failed(j, Event::BootVerificationFailed, reason);
            }
        }
        let address = self.bus.clone().unwrap_or_else(|| SYSTEM_BUS.to_string());
        match reboot::reboot(&address).await {
            Ok(RebootOutcome::Requested { method }) => {
                if let Some(p) = j.progress.as_mut() {
                    p.reboot_requests += 1;
                }
                j.save(&self.root)?;
                let marker = format!(
                    "{}\nrequested",
                    j.desired.as_ref().map(|d| d.name.as_str()).unwrap_or("")
                );
                let _ = self
                    .root
                    .write_atomic(REBOOT_MARKER, marker.as_bytes(), 0o644, None);
                tracing::info!(%method, "reboot requested");
                Ok(Outcome::Rebooting {
                    requested: true,
                    inhibited: None,
                })
            }
            Ok(RebootOutcome::Inhibited { by }) => {
                let why = format!(
                    "reboot blocked by inhibitors: {}; will retry",
                    by.join(", ")
                );
                j.reason = Some(why.clone());
                j.save(&self.root)?;
                Ok(Outcome::Rebooting {
                    requested: false,
                    inhibited: Some(why),
                })
            }
            Err(e) => {
                let why = format!("reboot request failed: {e}; will retry");
                j.reason = Some(why.clone());
                j.save(&self.root)?;
                Ok(Outcome::Rebooting {
                    requested: false,
                    inhibited: Some(why),
                })
            }
        }
    }

    /// Whether the node rebooted since the reboot of `progress` was requested: the boot id
    /// changed, or the marker in `/run` (a tmpfs, emptied by every boot) is gone.
    fn rebooted_since(&self, progress: &Progress) -> bool {
        let id_changed = match (boot_id(), &progress.boot_id) {
            (Some(now), Some(then)) => &now != then,
            _ => false,
        };
        let marker_gone = matches!(self.root.stat(REBOOT_MARKER), Ok(None));
        id_changed || marker_gone
    }

    async fn after_reboot(&self, j: &mut Journal, opts: &Options) -> Result<Outcome, AgentError> {
        let Some(desired) = j.desired.clone() else {
            j.progress = None;
            j.save(&self.root)?;
            return Ok(Outcome::Done);
        };
        if let Some(os) = j.progress.as_ref().and_then(|p| p.os.clone()) {
            if let Some(why) = os.rollback.clone() {
                return self.after_os_rollback(j, &os, why, &opts.drift).await;
            }
            if let Some(outcome) = self.check_os_boot(j, &desired, &os).await? {
                return Ok(outcome);
            }
        }
        let mismatches = self.verify(&desired.spec.config).await;
        // What the apply before the reboot wrote: the plan from the current config.
        let touched = touched_paths(&plan(&Self::current_spec(j), &desired.spec, &j.policies));
        let (mismatches, drift) = opts.drift.split(mismatches, &touched);
        if mismatches.is_empty() {
            j.current = Some(desired);
            j.os_base = None;
            j.progress = None;
            j.reboot_pending = false;
            j.transition(Event::BootVerified, drift_reason(&drift))?;
            j.drift = drift.clone();
            j.save(&self.root)?;
            let _ = self.root.remove(FORCE_FILE);
            Ok(if drift.is_empty() {
                Outcome::Done
            } else {
                Outcome::Drifted(drift)
            })
        } else {
            let reason = format!(
                "after the reboot the host does not match {}: {}",
                desired.name,
                mismatches
                    .iter()
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            self.end_failed(j, Event::BootVerificationFailed, reason)
        }
    }

    /// After the boot that should have started a new OS deployment: it must be the booted one,
    /// with its kernel arguments, and the boot must be healthy. `None` when it is (the caller
    /// goes on verifying files and units); otherwise how the sync ended: `Degraded`, or
    /// `Rebooting` back into the previous deployment.
    async fn check_os_boot(
        &self,
        j: &mut Journal,
        desired: &NamedConfig,
        os: &OsProgress,
    ) -> Result<Option<Outcome>, AgentError> {
        let differences = match self.os.verify_booted(&os.expect).await {
            Ok(d) => d,
            Err(e) => vec![format!("cannot read the booted deployment: {e}")],
        };
        if !differences.is_empty() {
            // Not what was staged (the boot loader fell back, or the deployment was never
            // finalized): report it, and make sure the next boot does not surprise anyone.
            self.cancel_pending_os().await;
            let reason = format!(
                "after the reboot the host does not run the OS change of {} ({}): {}",
                desired.name,
                os.change,
                differences.join("; ")
            );
            tracing::error!(%reason, "OS verification failed");
            return self.end_failed_os(j, desired, reason).map(Some);
        }
        let config = OsConfig::load(&self.root_path).unwrap_or_default();
        let Err(why) = self.boot_health(&config.health).await else {
            tracing::info!(deployment = ?os.expect.deployment, "the new OS deployment booted healthy");
            return Ok(None);
        };
        let deployment = os
            .expect
            .deployment
            .as_ref()
            .map(|d| d.to_string())
            .unwrap_or_else(|| "the new deployment".into());
        let why = format!(
            "the new OS deployment {deployment} of {} booted unhealthy: {why}",
            desired.name
        );
        tracing::error!(reason = %why, "OS health check failed");
        if !config.health.rollback {
            let reason = format!(
                "{why} (automatic rollback is off in {})",
                hearth_hostops::os::CONFIG_PATH
            );
            return self.end_failed_os(j, desired, reason).map(Some);
        }
        match self.os.rollback().await {
            Ok(outcome) => tracing::warn!(?outcome, "rolled back to the previous deployment"),
            Err(e) => {
                let reason = format!("{why}; the automatic rollback failed: {e}");
                return self.end_failed_os(j, desired, reason).map(Some);
            }
        }
        // Journal the rollback before the reboot: after it, the previous deployment must be
        // booted and the files and units go back to the current config.
        j.failed_os = Some(desired.name.clone());
        if let Some(p) = j.progress.as_mut() {
            p.os = Some(OsProgress {
                change: os.change.clone(),
                expect: OsExpectation {
                    deployment: Some(os.from.clone()),
                    kernel_args: None,
                },
                from: os.from.clone(),
                rollback: Some(why.clone()),
            });
            p.boot_id = boot_id();
            p.reboot_requests = 0;
        }
        j.transition(
            Event::Resume,
            Some(format!("{why}; rolling back to deployment {}", os.from)),
        )?;
        j.save(&self.root)?;
        self.root
            .write_atomic(REBOOT_MARKER, desired.name.as_bytes(), 0o644, None)
            .map_err(AgentError::Fs)?;
        Ok(Some(self.request_reboot(j, &Options::default()).await?))
    }

    /// After the reboot back into the previous deployment (an automatic rollback): check that
    /// it is the booted one, put files and units back to the current config, and report
    /// `Degraded` with why the new deployment was rolled back.
    async fn after_os_rollback(
        &self,
        j: &mut Journal,
        os: &OsProgress,
        why: String,
        drift_policies: &DriftPolicies,
    ) -> Result<Outcome, AgentError> {
        let differences = match self.os.verify_booted(&os.expect).await {
            Ok(d) => d,
            Err(e) => vec![format!("cannot read the booted deployment: {e}")],
        };
        let reason = if differences.is_empty() {
            format!("{why}; rolled back to deployment {}", os.from)
        } else {
            format!(
                "{why}; the rollback to deployment {} did not take: {}",
                os.from,
                differences.join("; ")
            )
        };
        j.os_base = None;
        self.run_rollback(j, reason, drift_policies).await
    }

    async fn start_rollback(
        &self,
        j: &mut Journal,
        reason: String,
        drift_policies: &DriftPolicies,
    ) -> Result<Outcome, AgentError> {
        tracing::warn!(%reason, "apply failed; rolling back");
        j.progress = Some(Progress {
            phase: Phase::RollingBack,
            step: 0,
            total: 0,
            failure: Some(reason.clone()),
            boot_id: None,
            reboot_requests: 0,
            os: None,
        });
        j.save(&self.root)?;
        self.run_rollback(j, reason, drift_policies).await
    }

    async fn run_rollback(
        &self,
        j: &mut Journal,
        reason: String,
        drift_policies: &DriftPolicies,
    ) -> Result<Outcome, AgentError> {
        let current = Self::current_spec(j);
        let desired = j
            .desired
            .as_ref()
            .map(|d| d.spec.clone())
            .unwrap_or_default();
        let back = plan(&desired, &current, &j.policies);
        let managed_before = managed_paths(&desired.config);
        let mut problems = Vec::new();
        for action in back.actions.iter().filter(|a| !is_os_action(a)) {
            if let Err(e) = self
                .execute(action, &managed_before, &BTreeSet::new())
                .await
            {
                problems.push(format!("undo ({action}): {e}"));
            }
        }
        for step in service_steps(&back) {
            match self.service_step(&step, &back, &j.policies).await {
                Ok(Some(warning)) => tracing::warn!("undo: {warning}"),
                Ok(None) => {}
                Err(e) => problems.push(format!("undo ({step}): {e}")),
            }
        }
        let mismatches = self.verify(&current.config).await;
        // Drift the undo did not touch (a hand edit left in place under `report`, or exempt
        // under `ignore`) is not an incomplete undo.
        let (mismatches, drift) = drift_policies.split(mismatches, &touched_paths(&back));
        problems.extend(mismatches.iter().map(|m| format!("after undo: {m}")));
        let _ = self.root.remove(Self::PREEXISTING);
        let full = if problems.is_empty() {
            format!("{reason}; every change was undone")
        } else {
            format!("{reason}; undo was incomplete: {}", problems.join("; "))
        };
        j.progress = None;
        match j.state {
            State::Working => {
                j.transition(Event::Failed, Some(full.clone()))?;
            }
            State::Rebooting => {
                j.transition(Event::BootVerificationFailed, Some(full.clone()))?;
            }
            _ => j.reason = Some(full.clone()),
        }
        j.drift = drift;
        j.save(&self.root)?;
        Ok(Outcome::Degraded(full))
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

    /// Writes a managed path: keeps its original first when hearth takes it over.
    fn take_over(
        &self,
        path: &str,
        managed_before: &BTreeSet<String>,
        preexisting: &BTreeSet<String>,
    ) -> Result<(), FileError> {
        if !managed_before.contains(path) && preexisting.contains(path) {
            files::save_original_once(&self.root, path)?;
        }
        Ok(())
    }

    fn write(
        &self,
        path: &str,
        content: &[u8],
        mode: u32,
        owner: (u32, u32),
        managed_before: &BTreeSet<String>,
        preexisting: &BTreeSet<String>,
    ) -> Result<(), String> {
        if files::is_current(&self.root, path, content, mode, owner).map_err(|e| e.to_string())? {
            return Ok(());
        }
        self.take_over(path, managed_before, preexisting)
            .map_err(|e| e.to_string())?;
        self.root
            .write_atomic(path, content, mode, Some(owner))
            .map_err(|e| e.to_string())
    }

    fn release(&self, path: &str) -> Result<(), String> {
        files::restore_original(&self.root, path)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn execute(
        &self,
        action: &Action,
        managed_before: &BTreeSet<String>,
        preexisting: &BTreeSet<String>,
    ) -> Result<(), String> {
        match action {
            Action::WriteFile { file } => {
                let content = files::file_content(file).map_err(|e| e.to_string())?;
                let owner = passwd::resolve_owner(&self.root, &file.user, &file.group)
                    .map_err(|e| e.to_string())?;
                self.write(
                    &file.path,
                    &content,
                    files::file_mode(file),
                    owner,
                    managed_before,
                    preexisting,
                )
            }
            Action::DeleteFile { path } => self.release(path),
            Action::WriteUnit { name, contents } => self.write(
                &unit_path(name),
                contents.as_bytes(),
                0o644,
                (0, 0),
                managed_before,
                preexisting,
            ),
            Action::DeleteUnit { name } => self.release(&unit_path(name)),
            Action::WriteDropin {
                unit,
                name,
                contents,
            } => self.write(
                &dropin_path(unit, name),
                contents.as_bytes(),
                0o644,
                (0, 0),
                managed_before,
                preexisting,
            ),
            Action::DeleteDropin { unit, name } => {
                self.release(&dropin_path(unit, name))?;
                let _ = self
                    .root
                    .remove_empty_dir(&format!("{SYSTEMD_UNIT_DIR}/{unit}.d"));
                Ok(())
            }
            Action::DaemonReload => match &self.units {
                Units::Online(sd) => sd.daemon_reload().await.map_err(|e| e.to_string()),
                Units::Offline => Ok(()),
            },
            Action::EnableUnit { name } => match &self.units {
                Units::Online(sd) => sd
                    .enable(std::slice::from_ref(name))
                    .await
                    .map_err(|e| e.to_string()),
                Units::Offline => offline::enable(&self.root, name).map_err(|e| e.to_string()),
            },
            // Disabling a unit that does not exist leaves it not enabled, and a unit that does
            // not exist has no preset to go back to (as the MCO): nothing to do.
            Action::DisableUnit { name } => match &self.units {
                Units::Online(sd) => missing_is_fine(
                    name,
                    "disable",
                    sd.disable(std::slice::from_ref(name)).await,
                ),
                Units::Offline => offline::disable(&self.root, name).map_err(|e| e.to_string()),
            },
            Action::PresetUnit { name } => match &self.units {
                Units::Online(sd) => {
                    missing_is_fine(name, "preset", sd.preset(std::slice::from_ref(name)).await)
                }
                Units::Offline => match offline::preset(&self.root, name) {
                    Err(hearth_hostops::offline::OfflineError::NoSuchUnit { .. }) => Ok(()),
                    other => other.map_err(|e| e.to_string()),
                },
            },
            Action::MaskUnit { name } => {
                let path = unit_path(name);
                if self
                    .root
                    .read_link(&path)
                    .map_err(|e| e.to_string())?
                    .as_deref()
                    != Some("/dev/null")
                {
                    self.take_over(&path, managed_before, preexisting)
                        .map_err(|e| e.to_string())?;
                    self.root
                        .symlink_atomic(&path, "/dev/null")
                        .map_err(|e| e.to_string())?;
                }
                match &self.units {
                    Units::Online(sd) => sd.daemon_reload().await.map_err(|e| e.to_string()),
                    Units::Offline => Ok(()),
                }
            }
            Action::UnmaskUnit { name } => {
                let path = unit_path(name);
                if self
                    .root
                    .read_link(&path)
                    .map_err(|e| e.to_string())?
                    .as_deref()
                    == Some("/dev/null")
                {
                    self.release(&path)?;
                }
                Ok(())
            }
            Action::WriteSshKeys { user, keys } => {
                users::write_ssh_keys(&self.root, user, keys, self.ssh_layout)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
            Action::SetPasswordHash { user, hash } => {
                users::set_password_hash(&self.root, user, hash.as_deref())
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
            Action::KernelArguments { .. }
            | Action::KernelType { .. }
            | Action::OsImage { .. }
            | Action::Extensions { .. } => {
                Err("OS-level changes need an OS backend (ostree or rpm-ostree)".to_string())
            }
        }
    }

    /// Runs one service step of plan `p`. `Ok(Some(warning))` when it was skipped and the
    /// admin must hear of it: a unit that does not exist on this host, named by the built-in
    /// policies (crio on a host without it). A unit named by the admin's own policies
    /// (`policies`) that does not exist is an error: the change would not take effect (a typo
    /// in a `serviceName`). A unit the plan itself removes is skipped quietly.
    async fn service_step(
        &self,
        step: &ServiceStep,
        p: &Plan,
        policies: &DisruptionPolicies,
    ) -> Result<Option<String>, String> {
        let Units::Online(sd) = &self.units else {
            return Ok(None);
        };
        // Waiting for a unit's job can take long (a slow start): the watchdog is fed meanwhile.
        let _busy = crate::watchdog::busy("waiting for a unit job", crate::watchdog::UNIT_JOB_MAX);
        match step {
            ServiceStep::Drain => {
                tracing::info!(
                    "drain requested: no workload scheduler is attached; nothing to drain"
                );
                Ok(None)
            }
            ServiceStep::DaemonReload => sd
                .daemon_reload()
                .await
                .map(|()| None)
                .map_err(|e| e.to_string()),
            ServiceStep::Reload { unit } | ServiceStep::Restart { unit } => {
                if sd
                    .unit_file_state(unit)
                    .await
                    .map_err(|e| e.to_string())?
                    .is_none()
                {
                    let removed = p
                        .actions
                        .iter()
                        .any(|a| matches!(a, Action::DeleteUnit { name } if name == unit));
                    if removed {
                        // A unit the plan removed has nothing to reload or restart.
                        tracing::info!(unit = %unit, "{step}: the unit no longer exists; skipped");
                        return Ok(None);
                    }
                    if policy_units(policies).contains(unit.as_str()) {
                        return Err(format!(
                            "unit {unit} does not exist on this host, and the node-disruption \
                             policy names it (serviceName): the change would not take effect; \
                             fix the policy or install the unit"
                        ));
                    }
                    let warning = format!(
                        "{step} skipped: unit {unit} does not exist on this host (the built-in \
                         node-disruption policy names it)"
                    );
                    tracing::warn!(unit = %unit, "{warning}");
                    return Ok(Some(warning));
                }
                match step {
                    ServiceStep::Reload { .. } => sd.reload(unit).await,
                    _ => sd.restart(unit).await,
                }
                .map(|()| None)
                .map_err(|e| e.to_string())
            }
        }
    }
}

/// `Ok` for a result that failed only because the unit does not exist.
fn missing_is_fine(
    unit: &str,
    op: &str,
    result: Result<(), hearth_hostops::systemd::SystemdError>,
) -> Result<(), String> {
    match result {
        Err(e) if e.is_no_such_unit() => {
            tracing::info!(unit, "{op}: no such unit; nothing to do");
            Ok(())
        }
        other => other.map_err(|e| e.to_string()),
    }
}

/// The service steps a plan's disruption asks for (none for `None` and `Reboot`).
pub fn service_steps(p: &Plan) -> Vec<ServiceStep> {
    match &p.disruption.outcome {
        DisruptionOutcome::Services { steps } => steps.clone(),
        _ => Vec::new(),
    }
}

/// The units the admin's node-disruption policies reload or restart (`serviceName`).
fn policy_units(policies: &DisruptionPolicies) -> BTreeSet<&str> {
    use hearth_config::model::PolicyAction;
    policies
        .files
        .iter()
        .flat_map(|f| f.actions.iter())
        .chain(policies.units.iter().flat_map(|u| u.actions.iter()))
        .chain(policies.ssh_key.iter().flatten())
        .filter_map(|a| match a {
            PolicyAction::Reload { service } | PolicyAction::Restart { service } => {
                Some(service.as_str())
            }
            _ => None,
        })
        .collect()
}
