//! The daemon watching a file or directory for its desired config (`hearth-agent run`
//! without `--server`): finish an interrupted apply, apply each new config, retry a blocked
//! reboot, and record drift from the drift monitor (on a thread of its own) as it comes. The
//! daemon following hearth-server is in [`crate::follow`].

use crate::apply::{Agent, Options, Outcome};
use crate::drift_policy::DriftPolicies;
use crate::journal::{Journal, NamedConfig, Phase, Summary};
use crate::source;
use crate::state::State;
use anyhow::Result;
use hearth_config::model::DisruptionPolicies;
use hearth_hostops::drift::{DriftControl, DriftEvent, DriftMonitor, ManagedPath};
use hearth_hostops::fs::Root;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// The agent as a daemon: one host, the policies and drift policies of its applies, its metrics.
pub(crate) struct Daemon<'a> {
    pub(crate) agent: &'a Agent,
    pub(crate) root_path: PathBuf,
    pub(crate) policies: DisruptionPolicies,
    pub(crate) drift: DriftPolicies,
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
}

impl Daemon<'_> {
    /// The options of the daemon's applies.
    pub(crate) fn options(&self) -> Options {
        Options {
            drift: self.drift.clone(),
            ..Options::default()
        }
    }

    /// The managed paths of the current config.
    pub(crate) fn expected(&self) -> Vec<ManagedPath> {
        match Journal::load_current(self.agent.root()) {
            Ok(current) => current
                .map(|c| self.drift.managed(self.agent.root(), &c.spec.config))
                .unwrap_or_default(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the current config to watch for drift");
                Vec::new()
            }
        }
    }

    /// Finishes an apply that was interrupted (a crash, a reboot); the journal it read is not
    /// kept.
    pub(crate) async fn resume(&self) -> Result<()> {
        // A pull a crash interrupted is not in progress any more.
        crate::os_pull::clear(&Root::open(&self.root_path)?);
        let mut j = Journal::default();
        if let Some(outcome) = self.agent.resume(&mut j, &self.options()).await? {
            tracing::info!(?outcome, "finished an interrupted apply");
        }
        Ok(())
    }

    /// Starts the drift monitor on a thread of its own; its events arrive on the channel.
    pub(crate) fn start_drift(
        &self,
    ) -> Result<(
        DriftControl,
        tokio::sync::mpsc::UnboundedReceiver<DriftEvent>,
    )> {
        let root = Root::open(&self.root_path)?;
        let mut monitor = DriftMonitor::new(&root, self.expected())?;
        let control = monitor.control();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("hearth-drift".into())
            .spawn(move || {
                // Drift that happened while the agent was not running.
                for ev in monitor.check_all() {
                    if tx.send(ev).is_err() {
                        return;
                    }
                }
                loop {
                    match monitor.next_event(Duration::from_secs(1)) {
                        Ok(Some(ev)) => {
                            if tx.send(ev).is_err() {
                                return;
                            }
                        }
                        Ok(None) => {
                            if tx.is_closed() {
                                return;
                            }
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "the drift monitor stopped");
                            return;
                        }
                    }
                }
            })?;
        Ok((control, rx))
    }

    pub(crate) fn record_drift(&self, ev: DriftEvent) -> Result<()> {
        self.metrics.drift(ev.reverted);
        if ev.reverted {
            tracing::warn!(message_id = crate::logging::MSG_DRIFT, path = %ev.path, "drift: {}: {}", ev.path, ev.what);
        } else {
            tracing::error!(message_id = crate::logging::MSG_DRIFT, path = %ev.path, "drift: {}: {}", ev.path, ev.what);
        }
        Journal::record_drift(self.agent.root(), &ev.path, &ev.what)?;
        Ok(())
    }

    /// The daemon watching `watch` (a file or directory), looking every `interval`.
    pub(crate) async fn watch(&self, watch: &Path, interval: Duration) -> Result<ExitCode> {
        let notify = crate::logging::Notifier::new();
        // Ready before finishing an interrupted apply: after a reboot into a new OS deployment
        // the agent waits for the boot to finish (its health check), which it never would while
        // this service is still starting.
        notify.ready(&Summary::load(self.agent.root())?.status_line());
        self.resume().await?;
        let (drift, mut drift_events) = self.start_drift()?;
        let summary = Summary::load(self.agent.root())?;
        self.metrics.set_state(summary.state);
        notify.status(&summary.status_line());
        hearth_daemon::memory::trim_heap();
        let mut last_seen: Option<(PathBuf, std::time::SystemTime)> = None;
        loop {
            crate::watchdog::beat();
            match source::watched_file(watch) {
                Ok(Some(path)) => {
                    let mtime = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
                    let key = mtime.map(|t| (path.clone(), t));
                    let force = self
                        .agent
                        .root()
                        .stat(crate::apply::FORCE_FILE)
                        .ok()
                        .flatten()
                        .is_some();
                    if key != last_seen || force {
                        match std::fs::read_to_string(&path)
                            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
                            .and_then(|t| {
                                source::parse(&path.display().to_string(), &t).map_err(Into::into)
                            }) {
                            Ok(desired) => {
                                self.apply_paused(&drift, desired, self.policies.clone())
                                    .await?;
                                hearth_daemon::memory::trim_heap();
                            }
                            Err(e) => tracing::error!("{e:#}"),
                        }
                        last_seen = key;
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::error!("{e}"),
            }
            let summary = self.retry_blocked_reboot().await?;
            self.metrics.set_state(summary.state);
            notify.status(&summary.status_line());
            // Wait for the next look, recording drift as it comes (idle, not hung: the
            // watchdog is fed meanwhile).
            let deadline = tokio::time::Instant::now() + interval;
            let _idle = crate::watchdog::busy(
                "waiting for the next look at the desired config",
                interval + Duration::from_secs(10),
            );
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => break,
                    ev = drift_events.recv() => match ev {
                        Some(ev) => self.record_drift(ev)?,
                        None => {
                            tokio::time::sleep_until(deadline).await;
                            break;
                        }
                    },
                }
            }
        }
    }

    pub(crate) fn count(&self, name: &str, outcome: &Outcome) {
        use crate::metrics::ApplyResult;
        match outcome {
            Outcome::Done => {
                self.metrics.applied(ApplyResult::Done);
                tracing::info!(message_id = crate::logging::MSG_DONE, config = %name, "Done")
            }
            Outcome::Drifted(drift) => {
                self.metrics.applied(ApplyResult::Done);
                tracing::warn!(message_id = crate::logging::MSG_DONE, config = %name, drift = %drift.join("; "), "Done, with drift")
            }
            Outcome::Rebooting { .. } => {
                self.metrics.applied(ApplyResult::Rebooting);
                tracing::info!(message_id = crate::logging::MSG_REBOOTING, config = %name, "Rebooting")
            }
            Outcome::Degraded(r) => {
                self.metrics.applied(ApplyResult::Degraded);
                tracing::error!(message_id = crate::logging::MSG_DEGRADED, config = %name, reason = %r, "Degraded")
            }
            Outcome::Unreconcilable(r) => {
                self.metrics.applied(ApplyResult::Unreconcilable);
                tracing::error!(message_id = crate::logging::MSG_UNRECONCILABLE, config = %name, reason = %r, "Unreconcilable")
            }
            // Counted once it ends: Done when the server confirms it, Degraded when undone.
            Outcome::Trial(r) => tracing::info!(config = %name, reason = %r, "Trial"),
        }
    }

    /// Applies `desired` with the drift monitor paused (the apply's own writes are not drift),
    /// then watches the managed paths of the config the host is now in.
    /// `policies` are the node-disruption policies of the apply.
    pub(crate) async fn apply_paused(
        &self,
        drift: &DriftControl,
        desired: NamedConfig,
        policies: DisruptionPolicies,
    ) -> Result<Outcome> {
        let control = drift.clone();
        tokio::task::spawn_blocking(move || control.pause()).await?;
        let name = desired.name.clone();
        let result = self.agent.sync(desired, policies, &self.options()).await;
        drift.set_expected(self.expected());
        drift.resume();
        let outcome = result?;
        self.count(&name, &outcome);
        Ok(outcome)
    }

    /// The journal's summary, after asking again for a reboot that was blocked (an inhibitor)
    /// or not yet asked for.
    pub(crate) async fn retry_blocked_reboot(&self) -> Result<Summary> {
        let summary = Summary::load(self.agent.root())?;
        if summary.state == State::Rebooting
            && summary
                .progress
                .as_ref()
                .is_some_and(|p| p.phase == Phase::Rebooting)
        {
            let mut j = Journal::default();
            let _ = self.agent.resume(&mut j, &self.options()).await?;
            drop(j);
            return Ok(Summary::load(self.agent.root())?);
        }
        Ok(summary)
    }
}
