//! The wire types of the agent API (`/api/v1/enroll`, `/api/v1/agent/*`).
//!
//! The agent defines the same structures in `hearth_agent::remote` (the agent does not depend on
//! the server); `tests/wire.rs` serialises each one on one side and reads it on the other, so
//! the two cannot drift apart. Field names are camelCase JSON.

use hearth_config::model::{DisruptionPolicies, MachineConfigSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// `POST /api/v1/enroll` request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnrollRequest {
    /// The node's name (a DNS-1123 subdomain, usually its host name).
    pub node: String,
    /// Labels for a node the server does not know yet (ignored for a known node, whose labels
    /// the admin owns). Empty: the pool's `nodeSelector.matchLabels`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The pool's bootstrap token (may also be sent as `Authorization: Bearer`).
    #[serde(default)]
    pub bootstrap_token: Option<String>,
}

/// `POST /api/v1/enroll` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnrollResponse {
    /// The node's name.
    pub node: String,
    /// Its pool.
    pub pool: String,
    /// The node's labels as the server keeps them.
    pub labels: BTreeMap<String, String>,
    /// The node's own credential: send it as `Authorization: Bearer` from now on. The server
    /// keeps only its sha256; a new enrollment replaces it.
    pub credential: String,
}

/// `GET /api/v1/agent/desired` response (200).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DesiredConfig {
    /// The rendered config's name (`rendered-<pool>-<hash>`).
    pub name: String,
    /// Its spec.
    pub spec: MachineConfigSpec,
    /// The node-disruption policies in force.
    #[serde(default)]
    pub policies: DisruptionPolicies,
}

/// The state an agent reports (the agent's `State`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum NodeState {
    /// In its current config, nothing pending.
    Done,
    /// Applying.
    Working,
    /// The last apply failed and was undone.
    Degraded,
    /// The desired config cannot be applied on a running node.
    Unreconcilable,
    /// Applied, waiting for or in the reboot.
    Rebooting,
}

impl NodeState {
    /// Every state.
    pub const ALL: [NodeState; 5] = [
        NodeState::Done,
        NodeState::Working,
        NodeState::Degraded,
        NodeState::Unreconcilable,
        NodeState::Rebooting,
    ];

    /// The name.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Done => "Done",
            NodeState::Working => "Working",
            NodeState::Degraded => "Degraded",
            NodeState::Unreconcilable => "Unreconcilable",
            NodeState::Rebooting => "Rebooting",
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryItem {
    /// When (RFC 3339).
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
/// (`hearth-agent status -o json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// When the state last changed (RFC 3339).
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
    /// The apply in progress (phase, step, total, ...), as the agent's journal has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<serde_json::Value>,
    /// Drift found on the host, one line per path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<String>,
    /// Recent transitions, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryItem>,
}

/// `POST /api/v1/agent/reboot-slot` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlotRequest {
    /// Acquire or release.
    pub action: SlotAction,
}

/// What to do with the reboot slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SlotAction {
    /// Take a slot before rebooting.
    Acquire,
    /// Give it back after the boot was verified.
    Release,
}

/// `POST /api/v1/agent/reboot-slot` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlotAnswer {
    /// Whether the node holds a slot now (always false after a release).
    pub granted: bool,
    /// When not granted: ask again after this many seconds.
    #[serde(default)]
    pub retry_after_seconds: u64,
    /// When not granted: why (all slots taken, or outside the maintenance window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
