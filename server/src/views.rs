//! What the admin API shows: objects in the MCO's shapes (`apiVersion`, `kind`, `metadata`,
//! `spec`, `status`), with the status counts `oc get mcp` shows.

use crate::api::NodeState;
use crate::fleet::{Fleet, Rec};
use crate::records::{EventRecord, McRecord, NodeRecord, PoolRecord, RenderedRecord};
use crate::time::rfc3339;
use hearth_config::ignition::SpecVersion;
use hearth_config::model::MCO_API_VERSION;
use serde_json::{json, Value};

/// The MCO's annotation naming the controller that generated a rendered config.
pub const GENERATED_BY_ANNOTATION: &str =
    "machineconfiguration.openshift.io/generated-by-controller-version";

/// The server's version, as written into rendered configs' annotations.
pub fn controller_version() -> String {
    format!("hearth-server {}", env!("CARGO_PKG_VERSION"))
}

fn set_timestamp(v: &mut Value, key: &str, secs: u64) {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert(key.into(), Value::String(rfc3339(secs)));
    }
}

/// A MachineConfig as applied, its Ignition config in the version it was written in.
pub fn machine_config(rec: &Rec<McRecord>) -> Value {
    let r = &rec.value;
    let model = r.to_model();
    let mut v = model.to_manifest();
    if let Some(version) = r.source_version.as_deref().and_then(SpecVersion::parse) {
        if let Ok(config) = model.spec.config.to_version(version) {
            v["spec"]["config"] = config;
        }
    }
    set_timestamp(&mut v, "creationTimestamp", r.created_at);
    v["metadata"]["resourceVersion"] = Value::String(rec.mod_revision.to_string());
    v
}

/// A rendered config, as the MCO shows one.
pub fn rendered(rec: &Rec<RenderedRecord>) -> Value {
    let r = &rec.value;
    let mut v = r.to_model().to_manifest();
    set_timestamp(&mut v, "creationTimestamp", r.created_at);
    v["metadata"]["annotations"][GENERATED_BY_ANNOTATION] = Value::String(controller_version());
    v["metadata"]["resourceVersion"] = Value::String(rec.mod_revision.to_string());
    v
}

/// The counts and conditions of a pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolCounts {
    /// Nodes in the pool.
    pub machine: usize,
    /// Nodes in their target config, Done.
    pub updated: usize,
    /// Updated and heard from recently.
    pub ready: usize,
    /// Degraded or Unreconcilable (or a server-side problem).
    pub degraded: usize,
    /// Handed a config they have not reached, not Done, or silent.
    pub unavailable: usize,
}

/// Counts a pool's nodes; `fresh` says whether a node was heard from recently.
pub fn pool_counts(fleet: &Fleet, pool: &str, fresh: &dyn Fn(&NodeRecord) -> bool) -> PoolCounts {
    let mut c = PoolCounts::default();
    for n in fleet.nodes.values() {
        let n = &n.value;
        if n.pool.as_deref() != Some(pool) {
            continue;
        }
        c.machine += 1;
        let updated = n.is_updated_to(n.target.as_deref());
        if updated {
            c.updated += 1;
            if fresh(n) {
                c.ready += 1;
            }
        }
        if n.state().is_some_and(NodeState::is_degraded) || n.error.is_some() {
            c.degraded += 1;
        }
        if n.is_unavailable() || (n.report.is_some() && !fresh(n)) {
            c.unavailable += 1;
        }
    }
    c
}

fn condition(kind: &str, status: bool, reason: &str, message: String) -> Value {
    json!({
        "type": kind,
        "status": if status { "True" } else { "False" },
        "reason": reason,
        "message": message,
    })
}

/// A pool's maintenance windows and whether they are open at `now` (the window clock).
fn maintenance(p: &PoolRecord, now: u64) -> Value {
    let Some(windows) = crate::window::Windows::of(&p.metadata.annotations) else {
        return Value::Null;
    };
    let (state, message) = match windows {
        Err(e) => ("Invalid", e.to_string()),
        Ok(w) => match w.state(now) {
            crate::window::WindowState::Open { window, closes_at } => (
                "Open",
                format!(
                    "in the maintenance window {window}, closes in {}",
                    crate::window::human(closes_at.saturating_sub(now))
                ),
            ),
            crate::window::WindowState::Closed(wait) => ("Closed", wait.message(now)),
        },
    };
    let waiting = p.status.waiting.as_ref().map(|w| w.message(now));
    json!({
        "windows": p.metadata.annotations.get(crate::window::ANNOTATION),
        "state": state,
        "message": message,
        "waiting": waiting,
    })
}

/// A pool with its status; `halted_by` names the degraded node that halts its rollout; `now`
/// is the maintenance windows' clock.
pub fn pool(rec: &Rec<PoolRecord>, c: &PoolCounts, halted_by: Option<&str>, now: u64) -> Value {
    let p = &rec.value;
    let s = &p.status;
    let updated = s.target.is_some() && c.updated == c.machine && s.configuration == s.target;
    let updating = !updated && !p.spec.paused && s.target.is_some();
    let (updating_reason, updating_message) = match (p.spec.paused, halted_by) {
        (true, _) if !updated => ("Paused", "the pool is paused".to_string()),
        (_, Some(n)) if !updated => (
            "Halted",
            format!("node {n} is degraded: the rollout waits until it recovers (or annotate the pool hearth.io/on-degraded: continue)"),
        ),
        _ => match &s.waiting {
            Some(w) if !updated => ("MaintenanceWindow", w.message(now)),
            _ => ("Rollout", format!("{} node(s) unavailable", c.unavailable)),
        },
    };
    let render_degraded = s.render_error.is_some();
    let node_degraded = c.degraded > 0;
    let mut v = json!({
        "apiVersion": MCO_API_VERSION,
        "kind": "MachineConfigPool",
        "metadata": {
            "name": p.metadata.name,
            "labels": p.metadata.labels,
            "annotations": p.metadata.annotations,
            "resourceVersion": rec.mod_revision.to_string(),
        },
        "spec": {
            "machineConfigSelector": p.spec.machine_config_selector,
            "nodeSelector": p.spec.node_selector,
            "paused": p.spec.paused,
            "maxUnavailable": p.spec.max_unavailable,
            "configuration": { "name": s.target },
        },
        "status": {
            "configuration": { "name": s.configuration, "source": s.source.iter().map(|n| json!({"name": n})).collect::<Vec<_>>() },
            "machineCount": c.machine,
            "readyMachineCount": c.ready,
            "updatedMachineCount": c.updated,
            "degradedMachineCount": c.degraded,
            "unavailableMachineCount": c.unavailable,
            "rolloutHaltedBy": halted_by,
            "maintenance": maintenance(p, now),
            "conditions": [
                condition("Updated", updated, if updated { "AllNodesUpdated" } else { "NotAllNodesUpdated" },
                    format!("{} of {} nodes run {}", c.updated, c.machine, s.target.as_deref().unwrap_or("no config yet"))),
                condition("Updating", updating, updating_reason, updating_message),
                condition("Degraded", render_degraded || node_degraded, "", String::new()),
                condition("NodeDegraded", node_degraded, if node_degraded { "NodesDegraded" } else { "" },
                    if node_degraded { format!("{} node(s) degraded; hearth describe node NAME shows why", c.degraded) } else { String::new() }),
                condition("RenderDegraded", render_degraded, if render_degraded { "RenderFailed" } else { "" },
                    s.render_error.clone().unwrap_or_default()),
            ],
        },
    });
    if p.builtin {
        v["metadata"]["annotations"]["hearth.io/builtin"] = Value::String("true".into());
    }
    set_timestamp(&mut v, "creationTimestamp", p.created_at);
    v
}

/// A node; `now` is the maintenance windows' clock.
pub fn node(rec: &Rec<NodeRecord>, last_seen: Option<u64>, ready: bool, now: u64) -> Value {
    let n = &rec.value;
    let waiting = n.waiting.as_ref().map(|w| w.message(now));
    let r = n.report.as_ref();
    let ts = |t: Option<u64>| t.map(rfc3339);
    json!({
        "apiVersion": "hearth.io/v1",
        "kind": "Node",
        "metadata": {
            "name": n.name,
            "labels": n.labels,
            "creationTimestamp": rfc3339(n.created_at),
            "resourceVersion": rec.mod_revision.to_string(),
        },
        "status": {
            "pool": n.pool,
            "state": r.map(|r| r.state),
            "reason": waiting.clone().or_else(|| r.and_then(|r| r.reason.clone())),
            "waiting": waiting,
            "current": r.and_then(|r| r.current.clone()),
            "desired": n.desired,
            "agentDesired": r.and_then(|r| r.desired.clone()),
            "target": n.target,
            "ready": ready,
            "enrolled": n.credential_sha256.is_some(),
            "enrolledAt": ts(n.enrolled_at),
            "desiredAt": ts(n.desired_at),
            "lastReport": ts(n.report_at),
            "lastSeen": ts(last_seen),
            "lastTransition": r.and_then(|r| r.last_transition.clone()),
            "pendingReboot": r.is_some_and(|r| r.pending_reboot),
            "rebootSlot": ts(n.reboot_slot),
            "rebootSlotHolders": n.slot_holders,
            "progress": r.and_then(|r| r.progress.clone()),
            "drift": r.map(|r| r.drift.clone()).unwrap_or_default(),
            "history": r.map(|r| r.history.clone()).unwrap_or_default(),
            "error": n.error,
        },
    })
}

/// An event.
pub fn event(e: &EventRecord) -> Value {
    json!({
        "time": rfc3339(e.time),
        "type": e.kind,
        "object": e.object,
        "reason": e.reason,
        "message": e.message,
    })
}
