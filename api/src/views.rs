//! What the admin API shows (`GET /api/v1/nodes`, `/pools`, `/events` and one object each):
//! objects in the MCO's shapes (`apiVersion`, `kind`, `metadata`, `spec`, `status`), with the
//! counts and conditions `oc get mcp` shows. The server builds them, the CLI reads them.
//!
//! Fields are written in this order, `null` included, so `hearth get -o json` looks like the
//! MCO's objects. Many strings here (a node's state reason, drift, history, progress; an
//! event's message) come from nodes, which are not trusted: a reader that prints them escapes
//! them first (the CLI's `term` module).

use crate::status::{HistoryItem, NodeState};
use hearth_config::model::{LabelSelector, MaxUnavailable};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A list, as Kubernetes answers one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct List<T> {
    /// `v1`.
    pub api_version: String,
    /// `List`.
    pub kind: String,
    /// Only in a page of a list asked for with `limit` that has more to come.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ListMeta>,
    /// The objects.
    pub items: Vec<T>,
}

/// A list's metadata (Kubernetes' `ListMeta`): where the next page starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ListMeta {
    /// Pass as `continue=` (URL-encoded) to get the next page; absent on the last page.
    #[serde(default, rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_from: Option<String>,
}

impl<T> List<T> {
    /// A `v1` `List` of `items`.
    pub fn new(items: Vec<T>) -> Self {
        List {
            api_version: "v1".into(),
            kind: "List".into(),
            metadata: None,
            items,
        }
    }

    /// One page of a list: `continue_from` is where the next one starts (none: the last page).
    pub fn page(items: Vec<T>, continue_from: Option<String>) -> Self {
        List {
            metadata: continue_from.map(|c| ListMeta {
                continue_from: Some(c),
            }),
            ..List::new(items)
        }
    }

    /// Where the next page starts, if there is one.
    pub fn continue_from(&self) -> Option<&str> {
        self.metadata.as_ref()?.continue_from.as_deref()
    }
}

/// A node (`GET /api/v1/nodes/NAME`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    /// `hearth.io/v1`.
    pub api_version: String,
    /// `Node`.
    pub kind: String,
    /// Name, labels, times.
    pub metadata: NodeMeta,
    /// What the server and the node's agent say about it.
    pub status: NodeStatus,
}

/// A node's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeMeta {
    /// The node's name.
    pub name: String,
    /// Its labels (they choose its pool).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// When the server first knew it (RFC 3339, UTC).
    #[serde(default)]
    pub creation_timestamp: Option<String>,
    /// The store revision of its record.
    #[serde(default)]
    pub resource_version: Option<String>,
}

/// A node's status: the server's view (pool, target, desired, slot) and its agent's last
/// report (state, reason, current, progress, drift, history).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// Its pool (none: no pool selects it, see `error`).
    #[serde(default)]
    pub pool: Option<String>,
    /// The reported state (none: no report yet).
    #[serde(default)]
    pub state: Option<NodeState>,
    /// Why: what it waits for, else the reported reason.
    #[serde(default)]
    pub reason: Option<String>,
    /// What its update waits for (the pool's maintenance window).
    #[serde(default)]
    pub waiting: Option<String>,
    /// The config the agent verified the host is in.
    #[serde(default)]
    pub current: Option<String>,
    /// The config the rollout has handed it.
    #[serde(default)]
    pub desired: Option<String>,
    /// The config the agent reports working towards.
    #[serde(default)]
    pub agent_desired: Option<String>,
    /// The config it should end up in.
    #[serde(default)]
    pub target: Option<String>,
    /// Updated to its target and heard from recently.
    #[serde(default)]
    pub ready: bool,
    /// It holds a credential.
    #[serde(default)]
    pub enrolled: bool,
    /// When it (last) enrolled.
    #[serde(default)]
    pub enrolled_at: Option<String>,
    /// When `desired` last changed.
    #[serde(default)]
    pub desired_at: Option<String>,
    /// When its last status report arrived.
    #[serde(default)]
    pub last_report: Option<String>,
    /// When it was last heard from (a report or a long poll).
    #[serde(default)]
    pub last_seen: Option<String>,
    /// When its state last changed, as it reported.
    #[serde(default)]
    pub last_transition: Option<String>,
    /// It reported a pending reboot.
    #[serde(default)]
    pub pending_reboot: bool,
    /// Holds a reboot slot since.
    #[serde(default)]
    pub reboot_slot: Option<String>,
    /// Who holds the reboot slot.
    #[serde(default)]
    pub reboot_slot_holders: Vec<SlotHolder>,
    /// The apply in progress, as its agent reported it.
    #[serde(default)]
    pub progress: Option<serde_json::Value>,
    /// Drift it reported, one line per path (none in a list's summary view:
    /// `GET /api/v1/nodes?view=summary`).
    #[serde(default)]
    pub drift: Vec<String>,
    /// How many drift lines it reported (in every view: the summary view leaves the lines out).
    #[serde(default)]
    pub drift_count: usize,
    /// The OS it booted, as it reported it (nodes with an OS backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<crate::status::BootedOs>,
    /// Its recent transitions, oldest first (none in a list's summary view).
    #[serde(default)]
    pub history: Vec<HistoryItem>,
    /// A problem the server has with it (no pool, two pools, a failed overlay render).
    #[serde(default)]
    pub error: Option<String>,
    /// Held on one rendered config by an admin (`hearth node pin`): its target, whatever its
    /// pool renders.
    #[serde(default)]
    pub pinned: Option<PinView>,
    /// Taken out of rollouts by an admin (`hearth node exclude`): it gets no new desired
    /// config and counts for nothing in its pool's rollout.
    #[serde(default)]
    pub excluded: Option<HoldView>,
    /// An admin's one-off requests (`hearth node force`, `restore-file`): the pending ones and
    /// the last finished ones, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<crate::request::RequestView>,
    /// The run-once actions its agent reported (how each ended, its exit status, when, how long,
    /// the end of its output), oldest first (none in a list's summary view). From the node:
    /// untrusted, escaped when printed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<crate::status::ActionRun>,
}

/// A node pinned to a rendered config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PinView {
    /// The rendered config it is held on.
    pub config: String,
    /// Who pinned it (`the admin token`, `admin certificate NAME`).
    pub by: String,
    /// Since when (RFC 3339).
    pub since: String,
}

/// An admin's hold on a node (an exclusion from rollouts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HoldView {
    /// Who set it.
    pub by: String,
    /// Since when (RFC 3339).
    pub since: String,
}

/// Who took a node's reboot slot.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum SlotHolder {
    /// hearth-agent (`/api/v1/agent/reboot-slot`); it gives the slot back with `release` or by
    /// reporting `Done` in its desired config.
    Agent,
    /// A FleetLock client on the node (`/v1/pre-reboot`); only `/v1/steady-state` gives it back.
    FleetLock,
}

/// What `hearth get mcp -o wide`, `hearth describe mcp` and the pool's `SelectsNoNode` event say
/// of a pool whose node selector matches no node (`machineCount` 0).
pub const SELECTS_NO_NODE: &str = "selects no node";

/// A MachineConfigPool with its status (`GET /api/v1/pools/NAME`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolView {
    /// `machineconfiguration.openshift.io/v1`.
    pub api_version: String,
    /// `MachineConfigPool`.
    pub kind: String,
    /// Name, labels, annotations, times.
    pub metadata: PoolMeta,
    /// The pool as applied, and its target config.
    pub spec: PoolSpec,
    /// Counts, conditions, maintenance windows.
    pub status: PoolStatus,
}

/// A pool's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolMeta {
    /// The pool's name.
    pub name: String,
    /// Its labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Its annotations (`hearth.io/maintenance-windows`, `hearth.io/on-degraded`,
    /// `hearth.io/builtin` for the MCO's built-in pools, ...).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// The store revision of its record.
    #[serde(default)]
    pub resource_version: Option<String>,
    /// When it was created (RFC 3339, UTC).
    #[serde(default)]
    pub creation_timestamp: Option<String>,
}

/// A pool's spec, as the MCO has it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolSpec {
    /// Which MachineConfigs it renders.
    #[schemars(schema_with = "selector_schema")]
    pub machine_config_selector: LabelSelector,
    /// Which nodes belong to it.
    #[schemars(schema_with = "selector_schema")]
    pub node_selector: LabelSelector,
    /// Rollouts paused.
    #[serde(default)]
    pub paused: bool,
    /// How many nodes may be unavailable at once.
    #[serde(default)]
    #[schemars(schema_with = "max_unavailable_schema")]
    pub max_unavailable: MaxUnavailable,
    /// The rendered config its nodes should run.
    #[serde(default)]
    pub configuration: ConfigRef,
}

/// A reference to a rendered config; `name` is none while there is none yet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigRef {
    /// The config's name.
    #[serde(default)]
    pub name: Option<String>,
}

/// A pool's status: the MCO's counts and conditions, plus hearth's rollout and maintenance
/// windows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    /// The config every node of the pool runs, and what it was rendered from.
    #[serde(default)]
    pub configuration: PoolConfiguration,
    /// Nodes in the pool.
    #[serde(default)]
    pub machine_count: u64,
    /// Nodes in their target config and heard from recently.
    #[serde(default)]
    pub ready_machine_count: u64,
    /// Nodes in their target config, Done.
    #[serde(default)]
    pub updated_machine_count: u64,
    /// Nodes Degraded or Unreconcilable (or with a server-side problem).
    #[serde(default)]
    pub degraded_machine_count: u64,
    /// Nodes handed a config they have not reached, not Done, or silent.
    #[serde(default)]
    pub unavailable_machine_count: u64,
    /// The degraded node that halts the rollout.
    #[serde(default)]
    pub rollout_halted_by: Option<String>,
    /// Nodes an admin excluded from rollouts that do not run the pool's target: the rollout
    /// is over without them (`hearth node include NODE` takes one back).
    #[serde(default, skip_serializing_if = "ExcludedNodes::is_none")]
    pub excluded: ExcludedNodes,
    /// Its maintenance windows (none: the pool has none).
    #[serde(default)]
    pub maintenance: Option<Maintenance>,
    /// `Updated`, `Updating`, `Degraded`, `NodeDegraded`, `RenderDegraded`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// Rolled back by an admin (`hearth rollback mcp`): the pool's target is an earlier
    /// rendered config until its configs render to something new.
    #[serde(default)]
    pub rollback: Option<RollbackView>,
}

/// Some of a pool's nodes, counted, the first few named.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExcludedNodes {
    /// How many.
    pub count: u64,
    /// The first [`ExcludedNodes::NAMED`] by name.
    #[serde(default)]
    pub names: Vec<String>,
}

impl ExcludedNodes {
    /// How many are named.
    pub const NAMED: usize = 10;

    /// None of them.
    pub fn is_none(&self) -> bool {
        self.count == 0
    }
}

/// A pool rolled back to an earlier rendered config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackView {
    /// The rendered config the pool was rolled back to (its target now).
    pub to: String,
    /// The rendered config its configs render to, rolled back from.
    pub from: String,
    /// Who rolled it back.
    pub by: String,
    /// Since when (RFC 3339).
    pub since: String,
}

impl PoolStatus {
    /// The status (`True`, `False`) of the condition `kind`; none when the pool has none.
    pub fn condition(&self, kind: &str) -> Option<&str> {
        self.conditions
            .iter()
            .find(|c| c.kind == kind)
            .map(|c| c.status.as_str())
    }
}

/// The config a pool's nodes all run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PoolConfiguration {
    /// Its name (none until every node of the pool runs the first target).
    #[serde(default)]
    pub name: Option<String>,
    /// The MachineConfigs the target was rendered from.
    #[serde(default)]
    pub source: Vec<SourceRef>,
}

/// A MachineConfig a rendered config was made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SourceRef {
    /// Its name.
    pub name: String,
}

/// A pool's maintenance windows and whether they are open now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Maintenance {
    /// The `hearth.io/maintenance-windows` annotation as written.
    #[serde(default)]
    pub windows: Option<String>,
    /// Open, closed, or the annotation cannot be read.
    pub state: WindowState,
    /// For people: when it closes, when it opens next, or what is wrong with it.
    #[serde(default)]
    pub message: String,
    /// What the pool's reboots wait for, when some do.
    #[serde(default)]
    pub waiting: Option<String>,
}

/// Whether a pool's maintenance window is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum WindowState {
    /// In a window: disruptive updates may run.
    Open,
    /// Outside every window: disruptive updates wait.
    Closed,
    /// The annotation cannot be read (disruptive updates wait; `message` says why).
    Invalid,
}

/// A condition, as Kubernetes writes one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Condition {
    /// `Updated`, `Updating`, `Degraded`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// `True` or `False`.
    pub status: String,
    /// A CamelCase word, or empty.
    #[serde(default)]
    pub reason: String,
    /// For people, or empty.
    #[serde(default)]
    pub message: String,
}

/// An event (`GET /api/v1/events`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EventView {
    /// When (RFC 3339, UTC).
    pub time: String,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `Node/worker-0`, `MachineConfigPool/worker`, ...
    pub object: String,
    /// A CamelCase word: `Enrolled`, `DesiredChanged`, `Degraded`, ...
    pub reason: String,
    /// What happened (it may quote a node's report).
    pub message: String,
}

fn selector_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "A Kubernetes label selector.",
        "type": "object",
        "properties": {
            "matchLabels": { "type": "object", "additionalProperties": { "type": "string" } },
            "matchExpressions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "key": { "type": "string" },
                        "operator": { "enum": ["In", "NotIn", "Exists", "DoesNotExist"] },
                        "values": { "type": "array", "items": { "type": "string" } }
                    },
                    "required": ["key", "operator"]
                }
            }
        }
    })
}

fn max_unavailable_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "A number of nodes, or a percentage of the pool (\"25%\").",
        "anyOf": [
            { "type": "integer", "minimum": 0 },
            { "type": "string", "pattern": "^[0-9]+%$" }
        ]
    })
}
