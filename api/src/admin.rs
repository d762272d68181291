//! The admin API's requests and answers other than the views: apply
//! (`POST /api/v1/manifests`), pause and resume, bootstrap tokens, labels, deletes, credential
//! resets, and the `Status` document every error answer is.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `POST /api/v1/manifests` with `Content-Type: application/vnd.hearth.apply+json`: several
/// files in one all-or-nothing apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApplyRequest {
    /// The files, in order.
    pub files: Vec<ApplyFile>,
}

/// One file of an apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApplyFile {
    /// File name (for diagnostics).
    pub name: String,
    /// Its text (YAML or JSON manifests).
    pub text: String,
}

/// The answer to an apply (200).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplyOutcome {
    /// Per object, in the order read.
    #[serde(default)]
    pub results: Vec<ApplyResult>,
    /// Warnings (unknown fields, ignored settings).
    #[serde(default)]
    pub warnings: Vec<Diagnostic>,
    /// Each pool's target after the apply (none for a dry run).
    #[serde(default)]
    pub pools: Vec<PoolTarget>,
    /// True when nothing was stored (dry run).
    #[serde(default)]
    pub dry_run: bool,
}

/// What an apply did to one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApplyResult {
    /// `MachineConfig`, `MachineConfigPool`, `Node`, `MachineConfiguration`.
    pub kind: String,
    /// Name.
    pub name: String,
    /// `created`, `configured` or `unchanged`.
    pub action: String,
    /// What else the apply did to it that its author may not expect (`resumed: the manifest
    /// says paused: false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A pool's target after an apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolTarget {
    /// Pool.
    pub name: String,
    /// Target rendered config.
    #[serde(default)]
    pub target: Option<String>,
    /// Why rendering failed (the target stays the last good one).
    #[serde(default)]
    pub render_error: Option<String>,
}

/// One problem found in an input (`hearth_config::diag::Diagnostic` on the wire).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The input file (or `-`).
    pub file: String,
    /// 1-based line, when known.
    #[serde(default)]
    pub line: Option<u64>,
    /// The object, as `Kind/name` (or `document N` when it has no usable name).
    #[serde(default)]
    pub object: Option<String>,
    /// The field path within the object (`spec.config.storage.files[2].contents.source`).
    #[serde(default)]
    pub path: String,
    /// What is wrong and, where it helps, what to do.
    pub message: String,
}

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The object is refused.
    Error,
    /// Accepted, but probably not what the author meant.
    Warning,
}

impl From<&hearth_config::diag::Diagnostic> for Diagnostic {
    fn from(d: &hearth_config::diag::Diagnostic) -> Self {
        Diagnostic {
            severity: match d.severity {
                hearth_config::diag::Severity::Error => Severity::Error,
                hearth_config::diag::Severity::Warning => Severity::Warning,
            },
            file: d.file.clone(),
            line: d.line.map(|l| u64::try_from(l).unwrap_or(u64::MAX)),
            object: d.object.clone(),
            path: d.path.clone(),
            message: d.message.clone(),
        }
    }
}

/// `POST /api/v1/pools/{name}/pause` and `/resume` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PauseAnswer {
    /// `MachineConfigPool`.
    pub kind: String,
    /// The pool.
    pub name: String,
    /// Paused now.
    pub paused: bool,
    /// False when it already was.
    pub changed: bool,
}

/// `POST /api/v1/pools/{name}/bootstrap-token` body (optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenRequest {
    /// Validity in seconds; none: the server's `--bootstrap-token-ttl`; 0: no expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<u64>,
    /// A token bound to this one node (not yet enrolled): its first-boot config is the node's
    /// own (the pool's plus the node's overlays), it enrolls only this name, and it does not
    /// replace the pool's token. The node is registered if it is not known yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// `POST /api/v1/pools/{name}/bootstrap-token` answer: a new token (the previous one stops
/// working).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenAnswer {
    /// The pool it enrolls nodes into.
    pub pool: String,
    /// The node a node-bound token is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The token (secret).
    pub token: String,
    /// When it expires (RFC 3339, UTC); none: never.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// It replaced the pool's token, which no longer works (false for the first token of a
    /// pool, and for a node's first-boot token, which leaves the pool's alone).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replaced: bool,
}

/// `POST /api/v1/nodes/{name}/labels` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LabelRequest {
    /// Labels to set.
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// Label keys to remove.
    #[serde(default)]
    pub remove: Vec<String>,
    /// Change a label that already has another value.
    #[serde(default)]
    pub overwrite: bool,
}

/// `POST /api/v1/nodes/{name}/labels` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LabelAnswer {
    /// `Node`.
    pub kind: String,
    /// The node.
    pub name: String,
    /// Its labels now.
    pub labels: BTreeMap<String, String>,
}

/// `DELETE /api/v1/{machineconfigs,pools,nodes}/{name}` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DeleteAnswer {
    /// `MachineConfig`, `MachineConfigPool` or `Node`.
    pub kind: String,
    /// The object.
    pub name: String,
    /// `deleted`, or `reset to its built-in definition` for a built-in pool.
    pub action: String,
}

/// `POST /api/v1/nodes/{name}/reset-credential` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialReset {
    /// `Node`.
    pub kind: String,
    /// The node.
    pub name: String,
    /// False when the node had no credential.
    pub credential_revoked: bool,
    /// Set when the reset hands the name to a second machine: claims of the name by a machine
    /// without the node's credential were refused lately, and the node itself was heard from
    /// since they began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// `POST /api/v1/nodes/{name}/pin` request: hold the node on a rendered config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PinRequest {
    /// A rendered config of the node's pool (or of the node's own overlays).
    pub config: String,
}

/// The answer to a pin, unpin, exclude or include (`/api/v1/nodes/{name}/pin`, `/exclude`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HoldAnswer {
    /// `Node`.
    pub kind: String,
    /// The node.
    pub name: String,
    /// `pinned`, `unpinned`, `excluded`, `included`, or `unchanged`.
    pub action: String,
    /// The rendered config it is pinned to now, if any.
    #[serde(default)]
    pub pinned: Option<String>,
    /// Whether it is excluded from rollouts now.
    pub excluded: bool,
}

/// `POST /api/v1/pools/{name}/rollback` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackAnswer {
    /// `MachineConfigPool`.
    pub kind: String,
    /// The pool.
    pub name: String,
    /// Its target now: the earlier rendered config.
    pub to: String,
    /// The rendered config it was rolled back from.
    pub from: String,
}

/// The `reason` of a 503 from a replica that did not act on the request at all (cut off from
/// etcd, or its view of the fleet behind etcd's): nothing was written, so any request, a change
/// too, may be sent to another replica. A 503 with another reason (`ServiceUnavailable`: the
/// store failed, perhaps during a write) gives no such promise.
pub const REPLICA_UNAVAILABLE: &str = "ReplicaUnavailable";

/// Every error answer: an HTTP status, a reason word and a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Status {
    /// `Status`.
    pub kind: String,
    /// The HTTP status.
    pub code: u16,
    /// A CamelCase word: `BadRequest`, `Unauthorized`, `Invalid`, ...
    pub reason: String,
    /// For people: what is wrong and what to do.
    pub message: String,
    /// For `Invalid` manifests: every problem found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<Diagnostic>,
}

/// `POST /api/v1/viewer-tokens` body (optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ViewerTokenRequest {
    /// Validity in seconds; none or 0: no expiry (revoke it by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<u64>,
}

/// `POST /api/v1/viewer-tokens` answer: a new read-only token for the dashboard and the admin
/// API's reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ViewerTokenAnswer {
    /// Its name, to revoke it (`DELETE /api/v1/viewer-tokens/{name}`).
    pub name: String,
    /// The token (secret, shown once).
    pub token: String,
    /// When it expires (RFC 3339, UTC); none: never.
    #[serde(default)]
    pub expires_at: Option<String>,
}
