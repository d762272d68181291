//! An admin's one-off requests to a node (`hearth node force`, `hearth node restore-file`):
//! asked for on the admin API, carried to the node in its desired-config answer until it
//! reports them done, acted on by the agent exactly once (by id), shown in the node's view.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a request asks the node to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RequestAction {
    /// Re-apply the whole current config over drift (the MCO's force file), through the
    /// journal-guarded apply.
    Force,
    /// Put one managed file back as the node's config has it.
    RestoreFile,
}

impl RequestAction {
    /// The name as the wire has it.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestAction::Force => "force",
            RequestAction::RestoreFile => "restoreFile",
        }
    }
}

impl std::fmt::Display for RequestAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One request, as the desired-config answer carries it (`DesiredConfig::requests`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeRequest {
    /// The request's id: per node, increasing; the agent acts on each id once.
    pub id: u64,
    /// What to do.
    pub action: RequestAction,
    /// The file (`restoreFile` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// How a node reports a request it acted on (`AgentStatus::requestResults`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestResult {
    /// The request's id.
    pub id: u64,
    /// What it asked.
    pub action: RequestAction,
    /// The file (`restoreFile` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Whether it did what was asked.
    pub ok: bool,
    /// What happened (the apply's outcome, or why not).
    pub message: String,
}

/// `POST /api/v1/nodes/{name}/restore-file` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreFileRequest {
    /// An absolute path the node's current config manages.
    pub path: String,
}

/// The answer to `POST /api/v1/nodes/{name}/force` and `/restore-file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestAnswer {
    /// `Node`.
    pub kind: String,
    /// The node.
    pub name: String,
    /// The request's id (`hearth describe node` shows its state under it).
    pub id: u64,
    /// What it asks.
    pub action: RequestAction,
    /// The file (`restoreFile` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `requested`, or `unchanged` when the same request was still pending (its id is
    /// answered).
    pub outcome: String,
}

/// A request in a node's view: pending, or one of its last finished ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestView {
    /// The id.
    pub id: u64,
    /// What it asks.
    pub action: RequestAction,
    /// The file (`restoreFile` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `Pending`, `Done` or `Failed`.
    pub state: String,
    /// Who asked (`the admin token`, `admin certificate NAME`).
    pub by: String,
    /// When (RFC 3339).
    pub requested_at: String,
    /// When the node reported it (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// What the node reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
