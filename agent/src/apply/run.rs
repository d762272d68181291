//! The `Applying` phase: plan, run the `BeforeFiles` actions, execute every step, verify, run the
//! `AfterFiles` actions, stage the OS change, then end `Done` (or drifted), go on to the reboot,
//! or start the rollback.

use super::agent::{managed_paths, Agent};
use super::error::AgentError;
use super::execute::service_steps;
use super::options::{Options, FORCE_FILE};
use super::os::{is_os_action, os_fields};
use super::outcome::Outcome;
use super::reboot::{boot_id, REBOOT_MARKER};
use super::step::StepError;
use crate::drift_policy::{drift_reason, touched_paths};
use crate::journal::{Journal, Phase, Progress};
use crate::state::Event;
use hearth_config::actions::ActionWhen;
use hearth_config::model::MachineConfigSpec;
use hearth_config::plan::{plan, Action};

impl Agent {
    pub(super) async fn run_apply(
        &self,
        j: &mut Journal,
        force: bool,
        opts: &Options,
    ) -> Result<Outcome, AgentError> {
        let Some(desired) = j.desired.clone() else {
            return Ok(Outcome::Done);
        };
        let current = Self::current_spec(j);
        // A first-booted node already has what Ignition wrote: adopted, nothing is rewritten
        // (and no reboot for it); the OS part is still planned from what is booted, below.
        let adopted = !force
            && j.current.is_none()
            && self.adopt_first_boot(&desired.name, &desired.spec).await;
        let from = if force {
            MachineConfigSpec::default()
        } else if adopted {
            desired.spec.clone()
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
                    "{}: {}; nothing was changed. Refused: {}",
                    desired.name,
                    why.cause,
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
        if let Err(reason) = self
            .run_actions(j, &desired, ActionWhen::BeforeFiles)
            .await?
        {
            return self.start_rollback(j, reason, &opts.drift).await;
        }
        for (i, action) in p.actions.iter().enumerate() {
            if is_os_action(action) {
                continue;
            }
            tracing::debug!(step = i + 1, %action, "step");
            crate::watchdog::beat();
            if let Err(e) = self.execute(action, &managed_before, &preexisting).await {
                let reason = failed_step(&e, i + 1, total);
                return self.start_rollback(j, reason, &opts.drift).await;
            }
        }
        if let Err(e) = self.sync_written_dirs() {
            let reason = format!(
                "the files of {} could not be made durable: {e}",
                desired.name
            );
            return self.start_rollback(j, reason, &opts.drift).await;
        }
        let mut warnings = Vec::new();
        for (k, step) in service_steps(&p).iter().enumerate() {
            match self.service_step(step, &p, &j.policies).await {
                Ok(Some(warning)) => warnings.push(warning),
                Ok(None) => {}
                Err(e) => {
                    let reason = failed_step(&e, p.actions.len() + k + 1, total);
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
        if let Err(reason) = self
            .run_actions(j, &desired, ActionWhen::AfterFiles)
            .await?
        {
            return self.start_rollback(j, reason, &opts.drift).await;
        }
        let os_progress = match os_change {
            Some(change) => match self.stage_os(&change).await {
                Ok(progress) => Some(progress),
                Err(e) => {
                    let reason = failed_step(&e, total, total);
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
        // On trial (following a server whose pool's policy covers what this apply wrote): the
        // trial starts once applied and verified, after the boot when one is needed.
        // The policy comes from the journal (the apply started with it; a daemon resuming after
        // a crash has none in its options), else from the options.
        let policy = j
            .progress
            .as_ref()
            .and_then(|p| p.trial_policy)
            .or(opts.trial);
        let trial = policy
            .filter(|t| t.covers(touched_paths(&p).iter().map(String::as_str)))
            .map(|t| t.seconds);
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
                trial_seconds: trial,
                deadline: None,
                trial_policy: None,
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
        if let Some(seconds) = trial {
            for w in &warnings {
                tracing::warn!("{w}");
            }
            return self.start_trial(j, seconds, drift);
        }
        self.finish(j, drift, warnings)
    }

    /// Ends the apply in progress with `event` (a failure) and `reason`: no progress left,
    /// journaled. `Unreconcilable` for [`Event::FoundUnreconcilable`], else `Degraded`.
    pub(super) fn end_failed(
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
}

/// The node's reason for failed step `n` of `total` (unchanged: `step n of total (…) failed: …`),
/// with the failure logged as structured fields — the object it acted on included, which the
/// reason does not name — as the rollback starts.
fn failed_step(e: &StepError, n: usize, total: usize) -> String {
    tracing::warn!(
        step = %e.step,
        object = %e.object,
        cause = %e.cause,
        n,
        total,
        "apply step failed"
    );
    e.numbered(n, total)
}
