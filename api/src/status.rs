//! The agent's status: `POST /api/v1/agent/status`, the document `hearth-agent status -o json`
//! prints, and the states a node reports.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The state a node reports (the agent's state machine, `hearth_agent::state`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum NodeState {
    /// The host matches its current config and nothing is pending.
    Done,
    /// Applying a config (or rolling back a failed apply).
    Working,
    /// The last apply failed and was undone; the reason says which step, object and cause.
    Degraded,
    /// The desired config holds changes a running node cannot take; every field is listed.
    Unreconcilable,
    /// Applied; waiting for (or in) the reboot the plan needs.
    Rebooting,
    /// Applied and verified, on trial: the agent must reach the server before a deadline
    /// (the reason names it) or it undoes the change by itself (`hearth.io/trial`).
    Trial,
}

impl NodeState {
    /// Every state.
    pub const ALL: [NodeState; 6] = [
        NodeState::Done,
        NodeState::Working,
        NodeState::Degraded,
        NodeState::Unreconcilable,
        NodeState::Rebooting,
        NodeState::Trial,
    ];

    /// The name.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Done => "Done",
            NodeState::Working => "Working",
            NodeState::Degraded => "Degraded",
            NodeState::Unreconcilable => "Unreconcilable",
            NodeState::Rebooting => "Rebooting",
            NodeState::Trial => "Trial",
        }
    }

    /// Degraded or Unreconcilable: needs a person.
    pub fn is_degraded(self) -> bool {
        matches!(self, NodeState::Degraded | NodeState::Unreconcilable)
    }
}

impl fmt::Display for NodeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One transition of the agent's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryItem {
    /// When (RFC 3339, UTC).
    pub time: String,
    /// The new state.
    pub state: NodeState,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The desired config then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<String>,
}

/// `POST /api/v1/agent/status` body: the agent's status document
/// (`hearth-agent status -o json`). Everything in it comes from a node, which is not trusted:
/// the server bounds it before keeping it, and the CLI escapes it before printing it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    /// `hearth.io/v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `AgentStatus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The state.
    pub state: NodeState,
    /// Why (the failing step, object and cause for Degraded; the fields for Unreconcilable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the state last changed (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition: Option<String>,
    /// The config the host is verified to be in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// The config the agent works towards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<String>,
    /// A reboot is pending.
    #[serde(default)]
    pub pending_reboot: bool,
    /// The apply in progress as the agent's journal has it (`phase`, `step` (0-based),
    /// `total`, `failure` while undoing, ...): shown, never interpreted by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<serde_json::Value>,
    /// Drift found on the host, one line per path (always written, `[]` for none).
    #[serde(default)]
    pub drift: Vec<String>,
    /// Recent transitions, oldest first (always written).
    #[serde(default)]
    pub history: Vec<HistoryItem>,
    /// The highest id of an admin's request (`DesiredConfig::requests`) the agent has acted
    /// on; every request up to it is finished.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub requests_done: u64,
    /// The outcomes of the last requests it acted on, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_results: Vec<crate::request::RequestResult>,
    /// The run-once actions the agent ran (or found interrupted), oldest first: those of the
    /// desired config and the last ones of earlier configs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<ActionRun>,
    /// The OS the node booted, as its OS backend reports it (hosts with one: ostree,
    /// rpm-ostree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<BootedOs>,
}

/// The booted OS deployment of a node.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootedOs {
    /// The deployment (`<stateroot>/<commit>.<serial>`).
    pub deployment: String,
    /// The OS image as the config named it: a container image reference, an ostree ref or a
    /// commit checksum.
    pub image: String,
    /// For a container image, the digest of the manifest deployed (`sha256:…`; of a manifest
    /// list, this node's platform's instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
    /// The image's version (its `version` metadata), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// The key of an OS image pull in progress in [`AgentStatus::progress`].
pub const OS_PULL_KEY: &str = "osPull";

/// An OS image pull in progress, in [`AgentStatus::progress`] under [`OS_PULL_KEY`] while the
/// agent stages a container image: reported as the pull moves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OsPull {
    /// The image, as the config names it.
    pub image: String,
    /// `fetching` (the layers the node lacks, into its image cache) or `importing` (them, into
    /// the OS repository).
    pub phase: String,
    /// Layers done in this phase.
    pub layers_done: u32,
    /// Layers this phase has to do.
    pub layers_total: u32,
    /// Bytes done in this phase (compressed, as the registry serves them).
    pub bytes_done: u64,
    /// Bytes this phase has to do.
    pub bytes_total: u64,
}

impl OsPull {
    /// The pull in a progress document, if it has one.
    pub fn from_progress(progress: &serde_json::Value) -> Option<OsPull> {
        serde_json::from_value(progress.get(OS_PULL_KEY)?.clone()).ok()
    }

    /// For people: `fetching IMAGE: 1 of 2 layers, 120.0 MiB of 300.0 MiB` (not escaped: it
    /// comes from a node, callers that print it escape it).
    pub fn describe(&self) -> String {
        let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0));
        format!(
            "{} {}: {} of {} layers, {} of {}",
            self.phase,
            self.image,
            self.layers_done.min(self.layers_total),
            self.layers_total,
            mib(self.bytes_done.min(self.bytes_total)),
            mib(self.bytes_total)
        )
    }
}

/// When a run-once action runs relative to its config's files (`spec.actions[].when`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ActionWhen {
    /// Before any file or unit is written.
    BeforeFiles,
    /// After the files and units are in and verified.
    AfterFiles,
}

/// What a failed run-once action does (`spec.actions[].failure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ActionFailurePolicy {
    /// The apply fails and is rolled back; the node is Degraded.
    Degrade,
    /// Recorded; the apply goes on.
    Ignore,
}

/// How a run-once action's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ActionOutcome {
    /// Started and not finished yet (or the agent stopped meanwhile and has not resumed).
    Running,
    /// Exited with status 0.
    Succeeded,
    /// Exited with another status, or was killed by a signal.
    Failed,
    /// Ran past its timeout; its process group was killed.
    TimedOut,
    /// The agent stopped (crash, reboot) while it ran: it is not run again.
    Interrupted,
}

impl ActionOutcome {
    /// The name.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionOutcome::Running => "Running",
            ActionOutcome::Succeeded => "Succeeded",
            ActionOutcome::Failed => "Failed",
            ActionOutcome::TimedOut => "TimedOut",
            ActionOutcome::Interrupted => "Interrupted",
        }
    }
}

impl fmt::Display for ActionOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One run of a run-once action: identified by the rendered config, the action's name and the
/// digest of its interpreter and script; run at most once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActionRun {
    /// The action's name.
    pub name: String,
    /// The rendered config it belongs to.
    pub config: String,
    /// sha256 (hex) of its interpreter and script.
    pub script_digest: String,
    /// Before or after the files.
    pub when: ActionWhen,
    /// Its failure policy.
    pub failure: ActionFailurePolicy,
    /// When it started (RFC 3339, UTC).
    pub started_at: String,
    /// How it ended.
    pub outcome: ActionOutcome,
    /// Its exit status, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    /// The signal that killed it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// How long it ran, in milliseconds (none while running or when interrupted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The end of its output (stdout and stderr together), at most 4 KiB from the agent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output_tail: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
