//! Changes on trial ("commit confirmed", as Junos' `commit confirmed`, Talos' `--mode=try`,
//! `netplan try`): a change the pool's trial policy covers (`hearth_config::trial`) ends, once
//! applied and verified (after its boot when it needs one), in the `Trial` phase with a
//! wall-clock deadline in the journal. A status report the server accepts before the deadline
//! keeps it ([`Agent::confirm_trial`]: current := desired, `Done`); none undoes it by the
//! rollback path ([`Agent::expire_trial`]: `Degraded`, the config is not applied again until a
//! newer one or a force). A crash or a reboot keeps the deadline: the journal holds it, and
//! the resume undoes a trial whose deadline passed.

use super::agent::Agent;
use super::error::AgentError;
use super::options::FORCE_FILE;
use super::os::{is_os_action, os_fields};
use super::outcome::Outcome;
use crate::drift_policy::{drift_reason, DriftPolicies};
use crate::journal::{Journal, Phase};
use crate::state::{Event, State};
use hearth_config::plan::plan;
use hearth_config::time::{now, rfc3339};

/// Whether the journal is in a trial: its deadline.
pub fn trial_deadline(j: &Journal) -> Option<i64> {
    j.progress
        .as_ref()
        .filter(|p| p.phase == Phase::Trial)
        .map(|p| p.deadline.unwrap_or(0))
}

/// Whether the journal is in a trial: when it started and its deadline (seconds since the
/// epoch).
pub fn trial_window(j: &Journal) -> Option<(i64, i64)> {
    let p = j.progress.as_ref().filter(|p| p.phase == Phase::Trial)?;
    let deadline = p.deadline.unwrap_or(0);
    let started = deadline.saturating_sub(i64::from(p.trial_seconds.unwrap_or(0)));
    Some((started, deadline))
}

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> i64 {
    i64::try_from(now()).unwrap_or(i64::MAX)
}

impl Agent {
    /// Ends an apply (applied, verified, after its boot if it needed one) in the trial: the
    /// deadline is `seconds` from now, journalled.
    pub(super) fn start_trial(
        &self,
        j: &mut Journal,
        seconds: u32,
        drift: Vec<String>,
    ) -> Result<Outcome, AgentError> {
        let deadline = unix_now().saturating_add(i64::from(seconds));
        let name = j
            .desired
            .as_ref()
            .map(|d| d.name.clone())
            .unwrap_or_default();
        let reason = format!(
            "on trial: {name} is applied and kept once the server answers, by {} ({seconds} s); else it is undone",
            rfc3339(u64::try_from(deadline).unwrap_or(0))
        );
        if let Some(p) = j.progress.as_mut() {
            p.phase = Phase::Trial;
            p.trial_seconds = Some(seconds);
            p.deadline = Some(deadline);
            p.boot_id = None;
            p.os = None;
        }
        j.transition(Event::TrialStarted, Some(reason.clone()))?;
        j.drift = drift;
        j.save(&self.root)?;
        tracing::info!(config = %name, seconds, "on trial: waiting for the server to answer");
        Ok(Outcome::Trial(reason))
    }

    /// The server accepted a status report sent while on trial: the change is kept
    /// (current := desired, `Done`). `None` when no trial is under way.
    pub fn confirm_trial(&self) -> Result<Option<Outcome>, AgentError> {
        let _lock = self.lock()?;
        let mut j = Journal::load(&self.root)?;
        if trial_deadline(&j).is_none() {
            return Ok(None);
        }
        j.os_base = None;
        j.current = j.desired.clone();
        j.progress = None;
        j.reboot_pending = false;
        let drift = j.drift.clone();
        j.transition(Event::TrialConfirmed, drift_reason(&drift))?;
        j.save(&self.root)?;
        let _ = self.root.remove(FORCE_FILE);
        tracing::info!(
            config = j.current.as_ref().map(|c| c.name.as_str()).unwrap_or(""),
            "trial confirmed by the server: kept"
        );
        Ok(Some(if drift.is_empty() {
            Outcome::Done
        } else {
            Outcome::Drifted(drift)
        }))
    }

    /// Undoes the trial if its deadline passed (`Degraded`, why in the reason). `None` when no
    /// trial is under way or its deadline is still ahead.
    pub async fn expire_trial(&self, drift: &DriftPolicies) -> Result<Option<Outcome>, AgentError> {
        let _lock = self.lock()?;
        let mut j = Journal::load(&self.root)?;
        self.expire_trial_locked(&mut j, drift).await
    }

    pub(super) async fn expire_trial_locked(
        &self,
        j: &mut Journal,
        drift: &DriftPolicies,
    ) -> Result<Option<Outcome>, AgentError> {
        let Some(deadline) = trial_deadline(j) else {
            return Ok(None);
        };
        if unix_now() < deadline {
            return Ok(None);
        }
        let seconds = j
            .progress
            .as_ref()
            .and_then(|p| p.trial_seconds)
            .unwrap_or(0);
        let name = j
            .desired
            .as_ref()
            .map(|d| d.name.clone())
            .unwrap_or_default();
        let reason = format!(
            "trial of {name} failed: no answer from the server within {seconds} s after applying; rolled back"
        );
        tracing::warn!(config = %name, "trial failed: rolling back");
        // OS changes (kernel arguments, OS image; applied with the reboot before the trial)
        // are not undone by a trial: the reason says so rather than "every change".
        let os_changes: Vec<String> = match (&j.current, &j.desired) {
            (Some(c), Some(d)) => plan(&c.spec, &d.spec, &j.policies)
                .actions
                .iter()
                .filter(|a| is_os_action(a))
                .map(|a| a.to_string())
                .collect(),
            _ => Vec::new(),
        };
        j.failed_trial = Some(name);
        if !os_changes.is_empty() {
            // The booted deployment stays the one made for the desired config: later OS plans
            // start from its OS fields, not from the config the files go back to.
            if let Some(d) = &j.desired {
                j.os_base = Some(os_fields(&d.spec));
            }
        }
        // Journalled as a rollback: a crash during the undo resumes it.
        if let Some(p) = j.progress.as_mut() {
            p.phase = Phase::RollingBack;
            p.failure = Some(reason.clone());
        }
        j.save(&self.root)?;
        let outcome = self.run_rollback(j, reason, drift).await?;
        if os_changes.is_empty() {
            return Ok(Some(outcome));
        }
        let full = format!(
            "{}; the OS changes stay (a trial does not undo them): {}",
            j.reason.as_deref().unwrap_or_default().replace(
                "every change was undone",
                "every file and unit change was undone"
            ),
            os_changes.join("; ")
        );
        j.reason = Some(full.clone());
        if let Some(h) = j.history.last_mut().filter(|h| h.state == State::Degraded) {
            h.reason = Some(full.clone());
        }
        j.save(&self.root)?;
        Ok(Some(Outcome::Degraded(full)))
    }
}
