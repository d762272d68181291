//! Undoing a failed apply: a plan from the desired config back to the current one, executed
//! and verified, ending `Degraded` with why (see the module doc of `apply`).

use super::agent::{managed_paths, Agent};
use super::error::AgentError;
use super::execute::service_steps;
use super::os::is_os_action;
use super::outcome::Outcome;
use crate::drift_policy::{touched_paths, DriftPolicies};
use crate::journal::{Journal, OsProgress, Phase, Progress};
use crate::state::{Event, State};
use hearth_config::plan::plan;

use std::collections::BTreeSet;

impl Agent {
    /// After the reboot back into the previous deployment (an automatic rollback): check that
    /// it is the booted one, put files and units back to the current config, and report
    /// `Degraded` with why the new deployment was rolled back.
    pub(super) async fn after_os_rollback(
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

    pub(super) async fn start_rollback(
        &self,
        j: &mut Journal,
        reason: String,
        drift_policies: &DriftPolicies,
    ) -> Result<Outcome, AgentError> {
        tracing::warn!(%reason, "apply failed; rolling back");
        // The failed apply's writes are durable before the journal says `RollingBack`.
        if let Err(e) = self.sync_written_dirs() {
            tracing::warn!(error = %e, "cannot fsync the directories the apply wrote into");
        }
        j.progress = Some(Progress {
            phase: Phase::RollingBack,
            step: 0,
            total: 0,
            failure: Some(reason.clone()),
            boot_id: None,
            reboot_requests: 0,
            os: None,
            trial_seconds: None,
            deadline: None,
            trial_policy: None,
        });
        j.save(&self.root)?;
        self.run_rollback(j, reason, drift_policies).await
    }

    pub(super) async fn run_rollback(
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
        // An undo step that failed on a path counts only when something is left to undo there:
        // a path the current config manages, when the verification below finds it not as that
        // config has it; any other path (what the apply would have created), when it exists now
        // or existed before the apply. A write that failed wrote nothing, and undoing it may
        // fail the same way (a path beneath a regular file cannot even be looked up) while
        // there is nothing to undo.
        let verified = managed_paths(&current.config);
        let preexisting = self.load_preexisting();
        let mut failed_on_paths: Vec<(String, String)> = Vec::new();
        for action in back.actions.iter().filter(|a| !is_os_action(a)) {
            if let Err(e) = self
                .execute(action, &managed_before, &BTreeSet::new())
                .await
            {
                let problem = format!("undo ({action}): {}", e.cause);
                if verified.contains(&e.object) {
                    failed_on_paths.push((e.object.clone(), problem));
                } else if !preexisting.contains(&e.object)
                    && matches!(self.root.stat(&e.object), Ok(None))
                {
                    tracing::info!(path = %e.object, "{problem}; the path does not exist: nothing to undo");
                } else {
                    problems.push(problem);
                }
            }
        }
        if let Err(e) = self.sync_written_dirs() {
            problems.push(format!("undo: {e}"));
        }
        for step in service_steps(&back) {
            match self.service_step(&step, &back, &j.policies).await {
                Ok(Some(warning)) => tracing::warn!("undo: {warning}"),
                Ok(None) => {}
                Err(e) => problems.push(format!("undo ({step}): {}", e.cause)),
            }
        }
        let mismatches = self.verify(&current.config).await;
        // Drift the undo did not touch (a hand edit left in place under `report`, or exempt
        // under `ignore`) is not an incomplete undo.
        let (mismatches, drift) = drift_policies.split(mismatches, &touched_paths(&back));
        for (path, problem) in failed_on_paths {
            if mismatches.iter().any(|m| m.subject == path) {
                problems.push(problem);
            } else {
                tracing::info!(%path, "{problem}; the path is as the current config has it: nothing to undo");
            }
        }
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
            State::Trial => {
                j.transition(Event::TrialFailed, Some(full.clone()))?;
            }
            _ => j.reason = Some(full.clone()),
        }
        j.drift = drift;
        j.save(&self.root)?;
        Ok(Outcome::Degraded(full))
    }
}
