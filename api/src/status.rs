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
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
