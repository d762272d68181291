//! The documents the server stores, one type per [`Kind`](crate::store::Kind). Times are Unix
//! seconds. Every type round-trips through JSON; the store holds nothing else.

use crate::api::NodeState;
use hearth_config::ignition::SpecVersion;
use hearth_config::model::{
    DisruptionPolicies, LabelSelector, MachineConfig, MachineConfigPool, MachineConfigSpec,
    MaxUnavailable, NodeInfo, ObjectMeta,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A stored document type.
pub trait Record: Serialize + DeserializeOwned + Clone + PartialEq + Send + Sync + 'static {}
impl<T: Serialize + DeserializeOwned + Clone + PartialEq + Send + Sync + 'static> Record for T {}

/// A MachineConfig as applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McRecord {
    /// Metadata (name, labels, annotations).
    pub metadata: ObjectMeta,
    /// The spec (Ignition in the internal model).
    pub spec: MachineConfigSpec,
    /// The Ignition spec version it was written in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_version: Option<String>,
    /// Created.
    pub created_at: u64,
    /// Last changed.
    pub updated_at: u64,
}

impl McRecord {
    /// The model object.
    pub fn to_model(&self) -> MachineConfig {
        let mut spec = self.spec.clone();
        spec.source_version = self.source_version.as_deref().and_then(SpecVersion::parse);
        MachineConfig {
            metadata: self.metadata.clone(),
            spec,
        }
    }

    /// Whether `other` says the same (ignoring times).
    pub fn same_content(&self, other: &McRecord) -> bool {
        self.metadata == other.metadata
            && self.spec == other.spec
            && self.source_version == other.source_version
    }
}

/// A pool's spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolSpec {
    /// Which MachineConfigs the pool renders.
    pub machine_config_selector: LabelSelector,
    /// Which nodes belong to it.
    pub node_selector: LabelSelector,
    /// Rollouts paused.
    #[serde(default)]
    pub paused: bool,
    /// How many nodes may be unavailable at once.
    #[serde(default)]
    pub max_unavailable: MaxUnavailable,
}

/// What the controller found for a pool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    /// The rendered config the pool's nodes should run (the MCO's `spec.configuration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The rendered config every node of the pool runs (the MCO's `status.configuration`):
    /// set to `target` once all nodes are updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<String>,
    /// The configs `target` was rendered from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source: Vec<String>,
    /// Why the last render failed (the target stays the last good one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render_error: Option<String>,
    /// Set while some node's reboot waits for the pool's maintenance window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<hearth_config::window::WindowWait>,
    /// An admin's rollback to an earlier rendered config, in force while the pool's configs
    /// render to `from`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<PoolRollback>,
    /// Its node selector matches no node (an event says so when it starts, for pools an admin
    /// made).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub selects_no_node: bool,
    /// The Degraded node that halts the pool's rollout while nodes still wait for the target
    /// (an event says so when it starts and when it ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted_by: Option<String>,
}

/// A pool rolled back by an admin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolRollback {
    /// The earlier rendered config: the pool's target while the rollback holds.
    pub to: String,
    /// What the pool's configs render to, rolled back from; a render to anything else ends
    /// the rollback.
    pub from: String,
    /// Who rolled it back, since when.
    #[serde(flatten)]
    pub hold: Hold,
}

/// A MachineConfigPool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolRecord {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: PoolSpec,
    /// The MCO's built-in definition (no manifest applied).
    #[serde(default)]
    pub builtin: bool,
    /// Created.
    pub created_at: u64,
    /// Status.
    #[serde(default)]
    pub status: PoolStatus,
}

impl PoolRecord {
    /// The built-in `master` or `worker` pool.
    pub fn builtin(role: &str, now: u64) -> PoolRecord {
        PoolRecord::from_model(&MachineConfigPool::builtin(role), true, now)
    }

    /// From a pool read from a manifest.
    pub fn from_model(p: &MachineConfigPool, builtin: bool, now: u64) -> PoolRecord {
        PoolRecord {
            metadata: p.metadata.clone(),
            spec: PoolSpec {
                machine_config_selector: p.machine_config_selector.clone(),
                node_selector: p.node_selector.clone(),
                paused: p.paused.unwrap_or(false),
                max_unavailable: p.max_unavailable,
            },
            builtin,
            created_at: now,
            status: PoolStatus::default(),
        }
    }

    /// The model object.
    pub fn to_model(&self) -> MachineConfigPool {
        MachineConfigPool {
            metadata: self.metadata.clone(),
            machine_config_selector: self.spec.machine_config_selector.clone(),
            node_selector: self.spec.node_selector.clone(),
            paused: Some(self.spec.paused),
            max_unavailable: self.spec.max_unavailable,
        }
    }

    /// Name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }
}

/// An admin's hold on a node: who, since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// Who set it (`the admin token`, `admin certificate NAME`).
    pub by: String,
    /// When (seconds since the epoch).
    pub at: u64,
}

/// A node held on one rendered config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    /// The rendered config.
    pub config: String,
    /// Who pinned it, since when.
    #[serde(flatten)]
    pub hold: Hold,
}

/// A node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    /// Name.
    pub name: String,
    /// Labels (they choose the pool).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Created (by enrollment or by an applied Node manifest).
    pub created_at: u64,
    /// sha256 (hex) of the node's credential; none until it enrolls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_sha256: Option<String>,
    /// When it (last) enrolled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enrolled_at: Option<u64>,
    /// Its pool, by its labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The config it should end up in: its pool's target, or its own render with overlays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The config the rollout has handed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<String>,
    /// When `desired` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_at: Option<u64>,
    /// A problem the server has with the node (no pool, two pools, a failed overlay render).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Held on a rendered config by an admin: its target, whatever its pool renders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<Pin>,
    /// Taken out of rollouts by an admin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded: Option<Hold>,
    /// The last status report. Shared: the rollout and the pools' bookkeeping copy a node's
    /// record to change its target or desired config (at an apply, every node of the pool),
    /// and the report (history, drift, actions) is most of it. Stored apart, as a
    /// [`ReportRecord`] (`reports/<node>`), so that a change to the node (an apply hands every
    /// node of a pool its desired config) does not write its report again, nor a report the
    /// node; read here from node documents written before that. Kept as a decoded summary
    /// with a SHA-256 of the whole, and the whole as JSON only until it is stored
    /// ([`crate::store::report::Report::release`]).
    #[serde(default, skip_serializing)]
    pub report: Option<crate::store::report::Report>,
    /// When it arrived (stored with the report).
    #[serde(default, skip_serializing)]
    pub report_at: Option<u64>,
    /// The store revision of the node's [`ReportRecord`] (0: none stored yet). Not stored.
    #[serde(skip)]
    pub report_revision: u64,
    /// Holds a reboot slot since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reboot_slot: Option<u64>,
    /// Who holds the reboot slot (the agent, a FleetLock client, or both); the slot is given
    /// back when every holder has released it. Empty with a slot (records written before
    /// holders were kept): the agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slot_holders: Vec<SlotHolder>,
    /// Set while its update (or its reboot) waits for its pool's maintenance window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<hearth_config::window::WindowWait>,
    /// An admin's one-off requests (`hearth node force`, `restore-file`; `app/requests.rs`).
    #[serde(default, skip_serializing_if = "NodeRequests::is_empty")]
    pub requests: NodeRequests,
}

/// A node's last status report, stored apart from the node ([`NodeRecord::report`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportRecord {
    /// The report.
    pub report: crate::store::report::Report,
    /// When it arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_at: Option<u64>,
}

impl NodeRecord {
    /// Whether the stored documents of the node (all but its report) are the same.
    pub fn same_document(&self, other: &NodeRecord) -> bool {
        // Every field named, so that a new one cannot be forgotten here.
        let NodeRecord {
            name,
            labels,
            created_at,
            credential_sha256,
            enrolled_at,
            pool,
            target,
            desired,
            desired_at,
            error,
            pin,
            excluded,
            report: _,
            report_at: _,
            report_revision: _,
            reboot_slot,
            slot_holders,
            waiting,
            requests,
        } = self;
        *name == other.name
            && *labels == other.labels
            && *created_at == other.created_at
            && *credential_sha256 == other.credential_sha256
            && *enrolled_at == other.enrolled_at
            && *pool == other.pool
            && *target == other.target
            && *desired == other.desired
            && *desired_at == other.desired_at
            && *error == other.error
            && *pin == other.pin
            && *excluded == other.excluded
            && *reboot_slot == other.reboot_slot
            && *slot_holders == other.slot_holders
            && *waiting == other.waiting
            && *requests == other.requests
    }

    /// Takes the report stored apart (at `revision`), in place of what the node document had.
    pub fn take_report(&mut self, r: ReportRecord, revision: u64) {
        // Stored: read from the store when shown ([`crate::store::report::Report::release`]).
        r.report.release();
        self.report = Some(r.report);
        self.report_at = r.report_at;
        self.report_revision = revision;
    }

    /// Whether the reports (and their times) are the same (by pointer first).
    pub fn same_report(&self, other: &NodeRecord) -> bool {
        self.report_at == other.report_at
            && match (&self.report, &other.report) {
                (Some(a), Some(b)) => a == b,
                (None, None) => true,
                _ => false,
            }
    }
}

/// A node's one-off requests: the pending ones and the last finished ones, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRequests {
    /// The last id given out (ids are per node and only grow).
    pub last_id: u64,
    /// Pending ones and the last finished ones, oldest first.
    #[serde(default)]
    pub items: Vec<RequestRecord>,
}

impl NodeRequests {
    /// No request was ever made.
    pub fn is_empty(&self) -> bool {
        self.last_id == 0 && self.items.is_empty()
    }

    /// The requests the node has not reported done.
    pub fn pending(&self) -> impl Iterator<Item = &RequestRecord> {
        self.items.iter().filter(|r| r.finished.is_none())
    }
}

/// One request to a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecord {
    /// Its id.
    pub id: u64,
    /// What it asks.
    pub action: hearth_api::RequestAction,
    /// The file (restore requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Who asked, when.
    #[serde(flatten)]
    pub hold: Hold,
    /// Set once the node reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<RequestFinish>,
}

/// How a request ended, as its node reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestFinish {
    /// Whether it did what was asked.
    pub ok: bool,
    /// What the node said (bounded).
    pub message: String,
    /// When the report arrived (seconds since the epoch).
    pub at: u64,
}

pub use hearth_api::SlotHolder;

impl NodeRecord {
    /// Gives back `holder`'s part of the reboot slot; true when the slot is now free.
    pub fn release_slot(&mut self, holder: SlotHolder) -> bool {
        if self.reboot_slot.is_none() {
            return false;
        }
        if self.slot_holders.is_empty() {
            self.slot_holders.push(SlotHolder::Agent);
        }
        self.slot_holders.retain(|h| *h != holder);
        if self.slot_holders.is_empty() {
            self.reboot_slot = None;
            true
        } else {
            false
        }
    }

    /// The model object (for pool selection and rendering).
    pub fn to_model(&self) -> NodeInfo {
        NodeInfo {
            metadata: ObjectMeta {
                name: self.name.clone(),
                labels: self.labels.clone(),
                annotations: BTreeMap::new(),
            },
        }
    }

    /// The reported state.
    pub fn state(&self) -> Option<NodeState> {
        self.report.as_ref().map(|r| r.state)
    }

    /// The reported current config.
    pub fn current(&self) -> Option<&str> {
        self.report.as_ref().and_then(|r| r.current.as_deref())
    }

    /// In its desired config, state Done.
    pub fn is_updated_to(&self, config: Option<&str>) -> bool {
        config.is_some()
            && self.desired.as_deref() == config
            && self.current() == config
            && self.state() == Some(NodeState::Done)
    }

    /// Unavailable for the rollout (see [`crate::controller::policy`]): it has reported, and was handed a
    /// config it has not reached or is not Done.
    pub fn is_unavailable(&self) -> bool {
        self.report.is_some()
            && self.desired.is_some()
            && (self.current() != self.desired.as_deref() || self.state() != Some(NodeState::Done))
    }
}

/// A rendered config (immutable).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderedRecord {
    /// `rendered-<pool>[-<node>]-<hash>`.
    pub name: String,
    /// The pool it was rendered for.
    pub pool: String,
    /// The node, for per-node renders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The configs it was rendered from, in merge order.
    pub rendered_from: Vec<String>,
    /// Labels and annotations of the rendered MachineConfig.
    pub metadata: ObjectMeta,
    /// The merged spec.
    pub spec: MachineConfigSpec,
    /// Created.
    pub created_at: u64,
}

impl RenderedRecord {
    /// From a rendered MachineConfig.
    pub fn from_model(mc: &MachineConfig, pool: &str, node: Option<&str>, now: u64) -> Self {
        let rendered_from = mc
            .metadata
            .annotations
            .get(hearth_config::model::RENDERED_FROM_ANNOTATION)
            .map(|s| {
                s.split(',')
                    .filter(|x| !x.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        RenderedRecord {
            name: mc.metadata.name.clone(),
            pool: pool.to_string(),
            node: node.map(str::to_string),
            rendered_from,
            metadata: mc.metadata.clone(),
            spec: mc.spec.clone(),
            created_at: now,
        }
    }

    /// The rendered MachineConfig.
    pub fn to_model(&self) -> MachineConfig {
        MachineConfig {
            metadata: self.metadata.clone(),
            spec: self.spec.clone(),
        }
    }
}

/// The node-disruption policies (from the MCO's `MachineConfiguration`, kept as one object).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoliciesRecord {
    /// The policies.
    pub policies: DisruptionPolicies,
    /// Last changed.
    pub updated_at: u64,
}

/// What a token is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum TokenScope {
    /// Everything.
    Admin,
    /// Reading the admin API and the dashboard, changing nothing.
    Viewer,
    /// Enroll nodes into a pool and fetch its first-boot Ignition.
    Bootstrap {
        /// The pool.
        pool: String,
        /// Bound to this one node: it enrolls only under this name and its first-boot config is
        /// the node's own (its pool's plus its overlays).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
    },
}

/// A token (only its hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRecord {
    /// sha256 (hex) of the token.
    pub sha256: String,
    /// What it allows.
    pub scope: TokenScope,
    /// Created.
    pub created_at: u64,
    /// Not valid after (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

/// The store name of the admin token.
pub const ADMIN_TOKEN: &str = "admin";

/// The store name of a pool's bootstrap token.
pub fn bootstrap_token_name(pool: &str) -> String {
    format!("bootstrap-{pool}")
}

/// The store name of a node's own bootstrap token (one per node; a new one replaces it).
pub fn node_bootstrap_token_name(node: &str) -> String {
    format!("node-bootstrap-{node}")
}

/// An event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    /// When.
    pub time: u64,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `Node/worker-0`, `MachineConfigPool/worker`, ...
    pub object: String,
    /// A CamelCase word: `Enrolled`, `DesiredChanged`, `Degraded`, ...
    pub reason: String,
    /// What happened.
    pub message: String,
}

impl EventRecord {
    /// A `Normal` event.
    pub fn normal(time: u64, object: String, reason: &str, message: String) -> Self {
        EventRecord {
            time,
            kind: "Normal".into(),
            object,
            reason: reason.into(),
            message,
        }
    }

    /// A `Warning` event.
    pub fn warning(time: u64, object: String, reason: &str, message: String) -> Self {
        EventRecord {
            kind: "Warning".into(),
            ..Self::normal(time, object, reason, message)
        }
    }
}
