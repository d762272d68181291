//! An admin's one-off requests to this node (`hearth node force`, `hearth node restore-file`),
//! each acted on once, in id order, also across a crash:
//!
//! - a force request is a sync with [`Options::force_request`]: the full re-apply of the
//!   journal-guarded apply path, its id written into the journal (`Journal::forcing`) by the
//!   same atomic write that starts the apply. A crash before that write loses nothing (the id is
//!   not done, the request is still pending on the server); after it, the agent resumes that
//!   apply (forced) and never starts another for the id. [`Agent::settle_requests`] finishes the
//!   request once the apply ended (after its reboot, if it needed one);
//! - a restore request puts one managed path back with the drift monitor's revert (an atomic
//!   write with the config's content, mode and owner), then records the id and the outcome in
//!   one journal write. A crash between the two makes the agent look again: the file already
//!   matches, so nothing is written twice.
//!
//! Every id up to `Journal::requests_done` is finished; the outcomes of the last
//! [`MAX_REQUEST_RESULTS`] go to the server with the status report.

use super::agent::Agent;
use super::error::AgentError;
use super::options::Options;
use super::outcome::Outcome;
use crate::drift_policy::drift_reason;
use crate::journal::{Journal, NamedConfig};
use crate::state::State;
use hearth_api::{NodeRequest, RequestAction, RequestResult};
use hearth_config::model::DisruptionPolicies;
use hearth_hostops::drift::{managed_paths, DriftMonitor, DriftPolicy};

/// How many request outcomes the journal keeps (and the status report carries).
pub const MAX_REQUEST_RESULTS: usize = 8;

/// The requests among `requests` this node has not acted on yet, in id order.
pub fn new_requests(j: &Journal, mut requests: Vec<NodeRequest>) -> Vec<NodeRequest> {
    let done = j.requests_done.max(j.forcing.unwrap_or(0));
    requests.retain(|r| r.id > done);
    requests.sort_by_key(|r| r.id);
    requests.dedup_by_key(|r| r.id);
    requests
}

fn record(j: &mut Journal, r: RequestResult) {
    j.requests_done = j.requests_done.max(r.id);
    j.request_results.push(r);
    let excess = j.request_results.len().saturating_sub(MAX_REQUEST_RESULTS);
    j.request_results.drain(..excess);
}

impl Agent {
    /// Re-applies `desired` in full for force request `id` (see the module documentation).
    pub async fn force(
        &self,
        id: u64,
        desired: NamedConfig,
        policies: DisruptionPolicies,
        opts: &Options,
    ) -> Result<Outcome, AgentError> {
        let opts = Options {
            force_request: Some(id),
            ..opts.clone()
        };
        tracing::info!(request = id, config = %desired.name, "re-applying the config in full (force request)");
        let outcome = self.sync(desired, policies, &opts).await?;
        self.settle_requests()?;
        Ok(outcome)
    }

    /// Finishes the force request whose apply ended (also one a crash interrupted and the
    /// resume finished): records its id and outcome. Nothing while the apply (or its reboot)
    /// is under way.
    pub fn settle_requests(&self) -> Result<(), AgentError> {
        let _lock = self.lock()?;
        let mut j = Journal::load(&self.root)?;
        let Some(id) = j.forcing else {
            return Ok(());
        };
        if j.progress.is_some() {
            return Ok(());
        }
        let name = j
            .current
            .as_ref()
            .map(|c| c.name.clone())
            .unwrap_or_else(|| "-".into());
        let reason = j.reason.clone().unwrap_or_default();
        let (ok, message) = match j.state {
            State::Done if j.drift.is_empty() => {
                (true, format!("re-applied {name} in full; verified"))
            }
            State::Done => (
                false,
                format!("re-applied {name} in full; still differs: {reason}"),
            ),
            s => (false, format!("re-apply ended {s}: {reason}")),
        };
        tracing::info!(request = id, ok, %message, "force request finished");
        j.forcing = None;
        record(
            &mut j,
            RequestResult {
                id,
                action: RequestAction::Force,
                path: None,
                ok,
                message,
            },
        );
        j.save(&self.root)?;
        Ok(())
    }

    /// Puts `path` back as the current config has it, for restore request `id` (see the module
    /// documentation); a request already acted on is left alone.
    pub fn restore_file(&self, id: u64, path: &str) -> Result<(), AgentError> {
        let _lock = self.lock()?;
        let mut j = Journal::load(&self.root)?;
        if j.requests_done >= id {
            return Ok(());
        }
        let (ok, message) = self.restore_one(&j, path);
        if ok {
            tracing::info!(request = id, path, %message, "restore request finished");
            let prefix = format!("{path}: ");
            let before = j.drift.len();
            j.drift
                .retain(|d| !(d.starts_with(&prefix) || d.starts_with(&format!("{path} "))));
            if j.drift.len() != before && j.state == State::Done {
                j.reason = drift_reason(&j.drift);
            }
        } else {
            tracing::warn!(request = id, path, %message, "restore request refused");
        }
        record(
            &mut j,
            RequestResult {
                id,
                action: RequestAction::RestoreFile,
                path: Some(path.to_string()),
                ok,
                message,
            },
        );
        j.save(&self.root)?;
        Ok(())
    }

    fn restore_one(&self, j: &Journal, path: &str) -> (bool, String) {
        if let Some(p) = &j.progress {
            return (
                false,
                format!(
                    "not restored: an apply is under way (phase {:?}); ask again once it ended",
                    p.phase
                ),
            );
        }
        let Some(current) = &j.current else {
            return (
                false,
                "not restored: no config is applied on this node".into(),
            );
        };
        let managed = match managed_paths(&self.root, &current.spec.config, DriftPolicy::Revert) {
            Ok(m) => m,
            Err(e) => return (false, format!("not restored: {}: {e}", current.name)),
        };
        let Some(m) = managed.into_iter().find(|m| m.path == path) else {
            return (
                false,
                format!(
                    "not restored: {path} is not a path {} writes with known contents (a file \
                     with data: contents, a unit file or a drop-in)",
                    current.name
                ),
            );
        };
        let mut monitor = match DriftMonitor::new(&self.root, vec![m]) {
            Ok(m) => m,
            Err(e) => return (false, format!("not restored: {path}: {e}")),
        };
        match monitor.check_all().into_iter().next() {
            None => (
                true,
                format!("{path} already as {} has it: nothing written", current.name),
            ),
            Some(ev) if ev.reverted => (
                true,
                format!("{path} restored from {} ({})", current.name, ev.what),
            ),
            Some(ev) => (false, format!("not restored: {path}: {}", ev.what)),
        }
    }
}
