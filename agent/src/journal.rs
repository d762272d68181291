//! The agent's journal: what it is doing, written atomically before every step, so that a
//! `kill -9` or a power cut at any point converges when the agent starts again.
//!
//! The journal is one JSON document at [`JOURNAL_PATH`] in the target root (version 1). It
//! holds the current and desired configs (names and full specs), the node-disruption policies in
//! force, the state and its reason, the progress of an apply (phase, step) and the undo records
//! of the steps taken so far. The snapshots the undo records refer to live under [`UNDO_DIR`].

use crate::state::{transition, Event, InvalidTransition, State};
use hearth_config::model::{DisruptionPolicies, MachineConfigSpec};
use hearth_hostops::fs::{FsError, Root};
use hearth_hostops::os::{DeploymentId, OsExpectation};
use serde::{Deserialize, Serialize};

/// Where the journal lives in the target root.
pub const JOURNAL_PATH: &str = "/var/lib/hearth/journal.json";
/// Where undo snapshots of the apply in progress live.
pub const UNDO_DIR: &str = "/var/lib/hearth/undo";
/// The journal format version this agent writes.
pub const JOURNAL_VERSION: u32 = 1;
/// How many transitions the history keeps.
pub const HISTORY_LEN: usize = 32;

/// A rendered config: its name and its spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedConfig {
    /// `rendered-worker-…` (or the file's MachineConfig name).
    pub name: String,
    /// The spec.
    pub spec: MachineConfigSpec,
}

/// What an apply is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// Running the plan's actions (then its service steps).
    Applying,
    /// Undoing the steps of a failed apply.
    RollingBack,
    /// The reboot was requested.
    Rebooting,
}

/// How far an apply got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// The phase.
    pub phase: Phase,
    /// The step being run (0-based index into the plan's actions, then its service steps).
    pub step: usize,
    /// Number of steps.
    pub total: usize,
    /// While rolling back: the failure being undone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// While rebooting: the boot id before the reboot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// While rebooting: how many times the reboot was requested without the node coming back
    /// in the config (a guard against reboot loops).
    #[serde(default)]
    pub reboot_requests: u32,
    /// While rebooting for an OS change: the deployment staged and what the boot must show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<OsProgress>,
}

/// The OS part of an apply: written before the reboot, read after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsProgress {
    /// The change, for people (`kernel arguments +a -b, OS image ...`).
    pub change: String,
    /// The deployment the next boot must start, and its kernel arguments.
    pub expect: OsExpectation,
    /// The deployment the change was made from: where an automatic rollback goes.
    pub from: DeploymentId,
    /// Set when the new deployment failed after its boot and the agent rolled back to `from`:
    /// why. The boot after this one must show `from`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<String>,
}

/// How to undo one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Undo {
    /// Put the path back as its snapshot in [`UNDO_DIR`] says.
    Path {
        /// The path.
        path: String,
    },
    /// Put the unit's enablement back.
    UnitState {
        /// The unit.
        name: String,
        /// Its unit-file state before (`enabled`, `disabled`, ...; none when unknown).
        previous: Option<String>,
    },
}

/// A transition, for `status` and `describe`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// When (RFC 3339, UTC).
    pub time: String,
    /// New state.
    pub state: State,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The desired config then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<String>,
}

/// The journal document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Journal {
    /// Format version.
    pub version: u32,
    /// State.
    pub state: State,
    /// Why the node is in this state (failing step, object and cause; unreconcilable fields).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the state last changed (RFC 3339, UTC).
    pub last_transition: String,
    /// The config the host is in (verified).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<NamedConfig>,
    /// The config being applied, or the last one asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<NamedConfig>,
    /// Node-disruption policies the plan was made with.
    #[serde(default)]
    pub policies: DisruptionPolicies,
    /// The apply in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// Undo records of the apply in progress, in the order the steps ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undo: Vec<Undo>,
    /// Drift found by the monitor (one line per path).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<String>,
    /// A config applied before this one still needs its reboot (a new config superseded a
    /// pending reboot): the apply in progress ends in `Rebooting` whatever its own plan says.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reboot_pending: bool,
    /// The desired config whose OS deployment failed after its boot and was rolled back: it is
    /// not staged again (no reboot loop) until another config or the force file asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_os: Option<String>,
    /// While a staged OS deployment waits for its reboot and a newer config superseded it: the
    /// OS fields (kernel arguments, kernel type, OS image, extensions) of the config the booted
    /// deployment was made for. The next OS change is planned from these, because kernel
    /// arguments are staged as a diff on the booted deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_base: Option<MachineConfigSpec>,
    /// Recent transitions, oldest first.
    #[serde(default)]
    pub history: Vec<HistoryEntry>,
}

impl Default for Journal {
    fn default() -> Self {
        Journal {
            version: JOURNAL_VERSION,
            state: State::Done,
            reason: None,
            last_transition: now_rfc3339(),
            current: None,
            desired: None,
            policies: DisruptionPolicies::default(),
            progress: None,
            undo: Vec::new(),
            drift: Vec::new(),
            reboot_pending: false,
            failed_os: None,
            os_base: None,
            history: Vec::new(),
        }
    }
}

/// Journal errors.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Reading or writing failed.
    #[error("journal {JOURNAL_PATH}: {0}")]
    Fs(#[from] FsError),
    /// The journal cannot be parsed.
    #[error("journal {JOURNAL_PATH} is unreadable ({0}); move it away to start afresh (the host keeps its files)")]
    Parse(String),
    /// It was written by a newer agent.
    #[error("journal {JOURNAL_PATH} has version {0}, newer than this agent understands ({JOURNAL_VERSION})")]
    Version(u32),
    /// A transition the state machine does not allow (a bug).
    #[error(transparent)]
    Transition(#[from] InvalidTransition),
}

/// The small part of the journal: what a status line or a tick of the daemon needs, read
/// without building the configs (serde skips them).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// State.
    pub state: State,
    /// Reason.
    #[serde(default)]
    pub reason: Option<String>,
    /// The apply in progress.
    #[serde(default)]
    pub progress: Option<Progress>,
    /// The desired config's name.
    #[serde(default, deserialize_with = "name_only")]
    pub desired: Option<String>,
}

fn name_only<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    struct NameOnly {
        name: String,
    }
    Ok(Option::<NameOnly>::deserialize(d)?.map(|n| n.name))
}

impl Summary {
    /// Reads the summary (a fresh node's when there is no journal).
    pub fn load(root: &Root) -> Result<Summary, JournalError> {
        let Some(bytes) = root.read(JOURNAL_PATH)? else {
            return Ok(Summary {
                state: State::Done,
                reason: None,
                progress: None,
                desired: None,
            });
        };
        serde_json::from_slice(&bytes).map_err(|e| JournalError::Parse(e.to_string()))
    }

    /// The status line (`STATUS=`): state, desired config, reason.
    pub fn status_line(&self) -> String {
        let desired = self.desired.as_deref().unwrap_or("-");
        match &self.reason {
            Some(r) => format!("{} {desired}: {r}", self.state),
            None => format!("{} {desired}", self.state),
        }
    }
}

impl Journal {
    /// Reads the journal, or a fresh one when there is none.
    pub fn load(root: &Root) -> Result<Journal, JournalError> {
        let Some(bytes) = root.read(JOURNAL_PATH)? else {
            return Ok(Journal::default());
        };
        let j: Journal =
            serde_json::from_slice(&bytes).map_err(|e| JournalError::Parse(e.to_string()))?;
        if j.version > JOURNAL_VERSION {
            return Err(JournalError::Version(j.version));
        }
        Ok(j)
    }

    /// Writes the journal atomically (temp file, fsync, rename, fsync directory).
    pub fn save(&self, root: &Root) -> Result<(), JournalError> {
        let bytes =
            serde_json::to_vec_pretty(self).map_err(|e| JournalError::Parse(e.to_string()))?;
        root.write_atomic(JOURNAL_PATH, &bytes, 0o600, None)?;
        Ok(())
    }

    /// Applies `event` through the state machine, recording the reason and the time.
    pub fn transition(
        &mut self,
        event: Event,
        reason: Option<String>,
    ) -> Result<State, JournalError> {
        let next = transition(self.state, event)?;
        let changed = next != self.state || reason != self.reason;
        self.state = next;
        self.reason = reason;
        if changed {
            self.last_transition = now_rfc3339();
            self.history.push(HistoryEntry {
                time: self.last_transition.clone(),
                state: next,
                reason: self.reason.clone(),
                desired: self.desired.as_ref().map(|d| d.name.clone()),
            });
            if self.history.len() > HISTORY_LEN {
                let extra = self.history.len() - HISTORY_LEN;
                self.history.drain(..extra);
            }
        }
        Ok(next)
    }
}

/// The current time as RFC 3339 (UTC, seconds).
pub fn now_rfc3339() -> String {
    hearth_config::time::rfc3339(hearth_config::time::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_transitions() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let mut j = Journal::load(&root).unwrap();
        assert_eq!(j.state, State::Done);
        j.transition(Event::Start, None).unwrap();
        j.transition(
            Event::Failed,
            Some("step 3 (write file /etc/x): disk full".into()),
        )
        .unwrap();
        j.save(&root).unwrap();
        let back = Journal::load(&root).unwrap();
        assert_eq!(back, j);
        assert_eq!(back.state, State::Degraded);
        assert_eq!(back.history.len(), 2);
        assert!(j.transition(Event::Applied, None).is_err());
    }

    #[test]
    fn garbage_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        root.write_atomic(JOURNAL_PATH, b"{not json", 0o600, None)
            .unwrap();
        let e = Journal::load(&root).unwrap_err();
        assert!(e.to_string().contains("move it away"), "{e}");
    }
}
