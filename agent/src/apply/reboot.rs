//! The reboot: asking logind for it (bounded, no reboot loop), telling whether the node
//! rebooted since, and verifying the host after the boot.

use super::agent::{Agent, SYSTEM_BUS};
use super::error::AgentError;
use super::options::{Options, FORCE_FILE};
use super::outcome::Outcome;
use crate::drift_policy::{drift_reason, touched_paths};
use crate::journal::{Journal, Phase, Progress};
use crate::state::{Event, State};
use hearth_config::plan::plan;
use hearth_hostops::reboot::{self, RebootOutcome};

/// Written (in the `/run` tmpfs) before a reboot is requested; its absence after a restart
/// means the node rebooted.
pub const REBOOT_MARKER: &str = "/run/hearth/reboot-requested";
/// How many times the agent asks for a reboot for one config before it gives up (Degraded).
pub const MAX_REBOOT_REQUESTS: u32 = 5;

/// Reads the boot id of the running system (`/proc/sys/kernel/random/boot_id`).
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
}

impl Agent {
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

    pub(super) async fn request_reboot(
        &self,
        j: &mut Journal,
        opts: &Options,
    ) -> Result<Outcome, AgentError> {
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
    pub(super) fn rebooted_since(&self, progress: &Progress) -> bool {
        let id_changed = match (boot_id(), &progress.boot_id) {
            (Some(now), Some(then)) => &now != then,
            _ => false,
        };
        let marker_gone = matches!(self.root.stat(REBOOT_MARKER), Ok(None));
        id_changed || marker_gone
    }

    pub(super) async fn after_reboot(
        &self,
        j: &mut Journal,
        opts: &Options,
    ) -> Result<Outcome, AgentError> {
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
            if let Some(seconds) = j.progress.as_ref().and_then(|p| p.trial_seconds) {
                // On trial: it starts now, after the boot.
                return self.start_trial(j, seconds, drift);
            }
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
}
