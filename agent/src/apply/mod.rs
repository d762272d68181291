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
//! - `mod.rs`: `sync` and `resume` (which phase runs next); the re-exports of the public face.
//! - `agent.rs`: the agent's handle on a host ([`Agent`], [`Units`]): opening it, `verify`.
//! - `options.rs`: what one sync is asked to do ([`Options`]), the force file.
//! - `outcome.rs`: how a sync ended ([`Outcome`]).
//! - `error.rs`: the errors that stop the agent itself ([`AgentError`]).
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

use crate::drift_policy::drift_reason;
use crate::journal::{Journal, NamedConfig, Phase, Progress};
use crate::state::{Event, State};
use hearth_config::model::DisruptionPolicies;
use std::collections::BTreeSet;

mod action;
mod adopt;
mod agent;
mod error;
mod execute;
mod lock;
mod options;
mod os;
mod outcome;
mod reboot;
mod request;
mod rollback;
mod run;
mod step;
mod trial;

pub use action::{MAX_ACTION_RECORDS, MAX_OUTPUT_TAIL, SCRIPT_DIR};
pub use adopt::FIRSTBOOT_STAMP;
pub use agent::{managed_paths, Agent, Units, OFFLINE_OS_REASON, SYSTEM_BUS};
pub use error::AgentError;
pub use execute::service_steps;
pub(crate) use lock::remove_own_temporaries;
pub use lock::LOCK_FILE;
pub use options::{Options, FORCE_FILE};
pub use os::FINALIZE_UNIT;
pub use outcome::Outcome;
pub use reboot::{boot_id, MAX_REBOOT_REQUESTS, REBOOT_MARKER};
pub use request::{new_requests, MAX_REQUEST_RESULTS};
pub use trial::{trial_deadline, trial_window, unix_now};

use os::os_fields;

impl Agent {
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
}
