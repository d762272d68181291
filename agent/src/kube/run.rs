//! The loop of `hearth-agent run --kubernetes`: read the Node's `desiredConfig`; when it names a
//! config the agent has not been asked for, say `Working`, fetch the MachineConfig, apply it
//! (the same `sync` as every other source: plan, journal, apply, reboot); then write what the
//! journal says into the Node's annotations and the MachineConfigNode's status. Between turns it
//! watches the Node (a turn after every change, at least every `WATCH_SECONDS`), records drift
//! as it comes, and backs off when the API server cannot be reached.

use super::annotations::{self, McoState, Refusal, DESIRED_CONFIG};
use super::client::{parse_machine_config, Kube, KubeError, API_TIMEOUT, WATCH_SECONDS};
use crate::daemon::Daemon;
use crate::journal::{now_rfc3339, Journal};
use anyhow::Result;
use hearth_hostops::drift::DriftControl;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

/// The longest back-off between two tries when the API server cannot be reached, or the
/// MachineConfig cannot be fetched.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// What to do after a turn.
enum Next {
    /// Wait for the Node to change after this resource version.
    Watch(String),
    /// The MachineConfig could not be fetched: try again after the back-off, or at once when
    /// the Node changes after this resource version (a new desiredConfig).
    Retry(String),
    /// The API server could not be reached: try again after the back-off.
    Unreachable,
}

/// What the loop keeps between turns.
#[derive(Default)]
struct Turns {
    /// The desired config the agent could not take in, while `desiredConfig` names it.
    refusal: Option<Refusal>,
    /// The MachineConfigNode status last written (not written again while the same).
    mcn_written: Option<serde_json::Value>,
}

impl Daemon<'_> {
    /// The daemon following its Node on a Kubernetes API server.
    pub(crate) async fn follow_kubernetes(&self, kube: Kube) -> Result<ExitCode> {
        let notify = crate::logging::Notifier::new();
        // Ready first: see `Daemon::watch`.
        notify.ready(&crate::journal::Summary::load(self.agent.root())?.status_line());
        self.resume().await?;
        let (drift, mut drift_events) = self.start_drift()?;
        let mut turns = Turns::default();
        let mut backoff = Duration::from_secs(1);
        tracing::info!(node = kube.node(), "following the Node's desiredConfig");
        loop {
            crate::watchdog::beat();
            let summary = self.retry_blocked_reboot().await?;
            // Each call to the API server marks itself busy for its own bound (client.rs); the
            // apply feeds the watchdog itself. An error of the agent itself (its journal) ends
            // the daemon as in the other modes; one of the API server is retried.
            let next = self.kube_turn(&kube, &drift, &mut turns).await?;
            let summary = if next.is_ok() {
                crate::journal::Summary::load(self.agent.root())?
            } else {
                summary
            };
            self.metrics.set_state(summary.state);
            notify.status(&summary.status_line());
            hearth_daemon::memory::trim_heap();
            let next = match next {
                Ok(Next::Watch(version)) => {
                    backoff = Duration::from_secs(1);
                    Next::Watch(version)
                }
                Ok(retry) => retry,
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?backoff, "cannot follow the Node; working from the journal");
                    Next::Unreachable
                }
            };
            let _idle = crate::watchdog::busy(
                "waiting for a change of the Node",
                Duration::from_secs(u64::from(WATCH_SECONDS))
                    + API_TIMEOUT * 2
                    + backoff
                    + Duration::from_secs(10),
            );
            let delay = backoff;
            let (kube, next) = (&kube, &next);
            let wait = async move {
                let watch = |version| async move {
                    match kube.changed_since(version).await {
                        Ok(()) => false,
                        Err(e) => {
                            tracing::warn!(error = %e, retry_in = ?delay, "cannot watch the Node");
                            tokio::time::sleep(delay).await;
                            true
                        }
                    }
                };
                match next {
                    Next::Watch(version) => watch(version).await,
                    Next::Retry(version) => tokio::select! {
                        failed = watch(version) => failed,
                        _ = tokio::time::sleep(delay) => true,
                    },
                    Next::Unreachable => {
                        tokio::time::sleep(delay).await;
                        true
                    }
                }
            };
            let mut wait = std::pin::pin!(wait);
            let failed = tokio::select! {
                failed = &mut wait => failed,
                ev = drift_events.recv() => match ev {
                    // Drift changes what the annotations say: a turn at once.
                    Some(ev) => {
                        self.record_drift(ev)?;
                        false
                    }
                    None => (&mut wait).await,
                },
            };
            if failed {
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }

    /// One turn: read the Node, apply a new desired config, write the annotations and the
    /// MachineConfigNode's status. The inner error: the API server could not be reached.
    async fn kube_turn(
        &self,
        kube: &Kube,
        drift: &DriftControl,
        turns: &mut Turns,
    ) -> Result<Result<Next, KubeError>> {
        let root = self.agent.root();
        let (mut have, mut version) = match kube.annotations().await {
            Ok(v) => v,
            Err(e) => return Ok(Err(e)),
        };
        let desired = have.get(DESIRED_CONFIG).cloned();
        if turns.refusal.as_ref().map(|r| &r.desired) != desired.as_ref() {
            turns.refusal = None;
        }
        if let Some(name) = &desired {
            let j = Journal::load(root)?;
            let force = root.stat(crate::apply::FORCE_FILE)?.is_some();
            let retry = match &turns.refusal {
                None => true,
                Some(r) => r.state == McoState::Degraded || force,
            };
            if annotations::needs_apply(name, &j, force) && retry {
                let current = j.current.as_ref().map(|c| c.name.clone());
                drop(j);
                tracing::info!(config = %name, "taking in desiredConfig");
                // Working, unless this is another try of a config that could not be fetched
                // (it stays Degraded until it is had: no flapping).
                let working = if turns.refusal.is_none() {
                    annotations::working(&have, current)
                } else {
                    None
                };
                if let Some(p) = working {
                    version = match self.patch(kube, &mut have, &p).await {
                        Ok(v) => v,
                        Err(e) => return Ok(Err(e)),
                    };
                }
                let policies = match kube.cluster_policy().await {
                    Ok(None) => Ok(self.policies.clone()),
                    Ok(Some(json)) => super::policy::merged(&json, &self.policies),
                    Err(e) => Err(e.to_string()),
                };
                turns.refusal = match (annotations::check_name(name), policies) {
                    (Err(reason), _) => Some(refused(name, McoState::Unreconcilable, reason)),
                    (_, Err(reason)) => Some(refused(name, McoState::Degraded, reason)),
                    (Ok(()), Ok(policies)) => match kube.machine_config(name).await {
                        Ok(bytes) => match parse_machine_config(name, bytes) {
                            Ok(config) => {
                                self.apply_paused(drift, config, policies).await?;
                                None
                            }
                            Err(e) => {
                                Some(refused(name, McoState::Unreconcilable, e.to_string()))
                            }
                        },
                        Err(e) if e.not_found() => Some(refused(
                            name,
                            McoState::Degraded,
                            format!("{e}: desiredConfig names a MachineConfig that does not exist; create it or set desiredConfig to one that does"),
                        )),
                        Err(e) => Some(refused(name, McoState::Degraded, e.to_string())),
                    },
                };
            }
        }
        let j = Journal::load(root)?;
        if let Some(want) = annotations::wanted(&j, turns.refusal.as_ref()) {
            if let Some(p) = annotations::patch(&have, &want) {
                version = match self.patch(kube, &mut have, &p).await {
                    Ok(v) => v,
                    Err(e) => return Ok(Err(e)),
                };
            }
            if let Some(name) = &desired {
                let since = match &turns.refusal {
                    Some(r) => r.since.clone(),
                    None => j.last_transition.clone(),
                };
                let status = super::mcn::status_patch(&want, name, &since, None);
                if turns.mcn_written.as_ref() != Some(&status) {
                    match kube.write_mcn(&want, name, &since).await {
                        Ok(()) => turns.mcn_written = Some(status),
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot write the MachineConfigNode's status")
                        }
                    }
                }
            }
        } else if desired.is_none() {
            tracing::info!("no desiredConfig on the Node yet and no config applied: waiting");
        }
        Ok(Ok(match &turns.refusal {
            Some(r) if r.state == McoState::Degraded => Next::Retry(version),
            _ => Next::Watch(version),
        }))
    }

    /// Patches the Node's annotations; `have` then says what the Node says. Returns the Node's
    /// new resource version.
    async fn patch(
        &self,
        kube: &Kube,
        have: &mut BTreeMap<String, String>,
        patch: &serde_json::Value,
    ) -> Result<String, KubeError> {
        let version = kube.patch_node(patch).await?;
        if let Some(changes) = patch["metadata"]["annotations"].as_object() {
            for (k, v) in changes {
                if let Some(v) = v.as_str() {
                    have.insert(k.clone(), v.to_string());
                }
            }
        }
        Ok(version)
    }
}

fn refused(desired: &str, state: McoState, reason: String) -> Refusal {
    tracing::error!(config = %desired, state = state.as_str(), %reason, "cannot take in the desired config");
    Refusal {
        desired: desired.to_string(),
        state,
        reason,
        since: now_rfc3339(),
    }
}
