//! What the admin API shows: objects in the MCO's shapes (`apiVersion`, `kind`, `metadata`,
//! `spec`, `status`), with the status counts `oc get mcp` shows. Nodes, pools and events are
//! the typed views of `hearth_api::views` (the CLI reads the same types); MachineConfigs and
//! rendered configs are manifests, as the MCO shows them.

use crate::api::NodeState;
use crate::app::ShownReport;
use crate::fleet::{Fleet, Rec};
use crate::store::records::{EventRecord, McRecord, NodeRecord, PoolRecord, RenderedRecord};
use crate::time::rfc3339;
use hearth_api::views::{
    Condition, ConfigRef, EventView, ExcludedNodes, HoldView, Maintenance, NodeMeta, NodeStatus,
    NodeView, PinView, PoolConfiguration, PoolMeta, PoolSpec, PoolStatus, PoolView, RollbackView,
    SourceRef, WindowState,
};
use hearth_config::ignition::SpecVersion;
use hearth_config::model::MCO_API_VERSION;
use serde_json::Value;

/// The MCO's annotation naming the controller that generated a rendered config.
pub const GENERATED_BY_ANNOTATION: &str =
    "machineconfiguration.openshift.io/generated-by-controller-version";

/// The git commit this server was built from (`server/build.rs`): 40 hex digits, or `unknown`.
pub const COMMIT: &str = env!("HEARTH_BUILD_COMMIT");

/// This server's build, as `GET /api/v1/version` answers.
pub fn version_info() -> hearth_api::VersionInfo {
    hearth_api::VersionInfo {
        version: env!("CARGO_PKG_VERSION").into(),
        commit: COMMIT.into(),
    }
}

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
    /// The first degraded node by name, and why (its reason, or the server's problem with it).
    pub first_degraded: Option<(String, String)>,
    /// Excluded from rollouts and not in the target: how many, the first by name.
    pub excluded: usize,
    /// The first [`ExcludedNodes::NAMED`] of them by name.
    pub first_excluded: Vec<String>,
}

/// What of a degraded node's reason a pool's `NodeDegraded` message carries.
const DEGRADED_REASON_BYTES: usize = 512;

/// Ready, as both a node's `ready` and its pool's `readyMachineCount` count it: in its target
/// config, Done, and heard from recently (`fresh`). A node rebooting into its target is not.
pub fn is_ready(n: &NodeRecord, fresh: bool) -> bool {
    fresh && n.is_updated_to(n.target.as_deref())
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
        if n.is_updated_to(n.target.as_deref()) {
            c.updated += 1;
        }
        if is_ready(n, fresh(n)) {
            c.ready += 1;
        }
        if n.state().is_some_and(NodeState::is_degraded) || n.error.is_some() {
            c.degraded += 1;
            if c.first_degraded.is_none() {
                let why = n
                    .error
                    .clone()
                    .or_else(|| n.report.as_ref().and_then(|r| r.reason.clone()))
                    .unwrap_or_default();
                c.first_degraded = Some((n.name.clone(), why));
            }
        }
        if n.is_unavailable() || (n.report.is_some() && !fresh(n)) {
            c.unavailable += 1;
        }
        if n.excluded.is_some() && !n.is_updated_to(n.target.as_deref()) {
            c.excluded += 1;
            // The fleet's map is ordered by name: the first are the first by name.
            if c.first_excluded.len() < ExcludedNodes::NAMED {
                c.first_excluded.push(n.name.clone());
            }
        }
    }
    c
}

/// The `NodeDegraded` message: how many, and the first by name with its reason (bounded, and
/// escaped: it is a node's text, and `kubectl describe` prints it raw), where both an admin of
/// hearth-server and a kubectl user read it, as the MCO's "Node X is reporting".
fn degraded_message(c: &PoolCounts) -> String {
    let Some((name, why)) = &c.first_degraded else {
        return format!("{} node(s) degraded", c.degraded);
    };
    let mut end = why.len().min(DEGRADED_REASON_BYTES);
    while !why.is_char_boundary(end) {
        end -= 1;
    }
    let more = if end < why.len() { "…" } else { "" };
    let others = match c.degraded {
        0 | 1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    format!(
        "{} node(s) degraded: node {name} is reporting: {}{more}{others}",
        c.degraded,
        hearth_api::text::escape(&why[..end])
    )
}

fn condition(kind: &str, status: bool, reason: &str, message: String) -> Condition {
    Condition {
        kind: kind.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
    }
}

/// A pool's maintenance windows and whether they are open at `now` (the window clock).
fn maintenance(p: &PoolRecord, now: u64) -> Option<Maintenance> {
    let windows = crate::controller::window::Windows::of(&p.metadata.annotations)?;
    let (state, message) = match windows {
        Err(e) => (WindowState::Invalid, e.to_string()),
        Ok(w) => match w.state(now) {
            crate::controller::window::WindowState::Open { window, closes_at } => (
                WindowState::Open,
                format!(
                    "in the maintenance window {window}, closes in {}",
                    crate::controller::window::human(closes_at.saturating_sub(now))
                ),
            ),
            crate::controller::window::WindowState::Closed(wait) => {
                (WindowState::Closed, wait.message(now))
            }
        },
    };
    Some(Maintenance {
        windows: p
            .metadata
            .annotations
            .get(crate::controller::window::ANNOTATION)
            .cloned(),
        state,
        message,
        waiting: p.status.waiting.as_ref().map(|w| w.message(now)),
    })
}

/// A pool with its status; `halted_by` names the degraded node that halts its rollout; `now`
/// is the maintenance windows' clock.
pub fn pool(rec: &Rec<PoolRecord>, c: &PoolCounts, halted_by: Option<&str>, now: u64) -> PoolView {
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
    let mut annotations = p.metadata.annotations.clone();
    if p.builtin {
        annotations.insert("hearth.io/builtin".into(), "true".into());
    }
    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    PoolView {
        api_version: MCO_API_VERSION.into(),
        kind: "MachineConfigPool".into(),
        metadata: PoolMeta {
            name: p.metadata.name.clone(),
            labels: p.metadata.labels.clone(),
            annotations,
            resource_version: Some(rec.mod_revision.to_string()),
            creation_timestamp: Some(rfc3339(p.created_at)),
        },
        spec: PoolSpec {
            machine_config_selector: p.spec.machine_config_selector.clone(),
            node_selector: p.spec.node_selector.clone(),
            paused: p.spec.paused,
            max_unavailable: p.spec.max_unavailable,
            configuration: ConfigRef {
                name: s.target.clone(),
            },
        },
        status: PoolStatus {
            configuration: PoolConfiguration {
                name: s.configuration.clone(),
                source: s
                    .source
                    .iter()
                    .map(|n| SourceRef { name: n.clone() })
                    .collect(),
            },
            machine_count: count(c.machine),
            ready_machine_count: count(c.ready),
            updated_machine_count: count(c.updated),
            degraded_machine_count: count(c.degraded),
            unavailable_machine_count: count(c.unavailable),
            rollout_halted_by: halted_by.map(str::to_string),
            excluded: ExcludedNodes {
                count: count(c.excluded),
                names: c.first_excluded.clone(),
            },
            rollback: p.status.rollback.as_ref().map(|rb| RollbackView {
                to: rb.to.clone(),
                from: rb.from.clone(),
                by: rb.hold.by.clone(),
                since: rfc3339(rb.hold.at),
            }),
            maintenance: maintenance(p, now),
            conditions: vec![
                condition(
                    "Updated",
                    updated,
                    if updated {
                        "AllNodesUpdated"
                    } else {
                        "NotAllNodesUpdated"
                    },
                    format!(
                        "{} of {} nodes run {}",
                        c.updated,
                        c.machine,
                        s.target.as_deref().unwrap_or("no config yet")
                    ),
                ),
                condition("Updating", updating, updating_reason, updating_message),
                condition(
                    "Degraded",
                    render_degraded || node_degraded,
                    "",
                    String::new(),
                ),
                condition(
                    "NodeDegraded",
                    node_degraded,
                    if node_degraded { "NodesDegraded" } else { "" },
                    if node_degraded {
                        degraded_message(c)
                    } else {
                        String::new()
                    },
                ),
                condition(
                    "RenderDegraded",
                    render_degraded,
                    if render_degraded { "RenderFailed" } else { "" },
                    s.render_error.clone().unwrap_or_default(),
                ),
            ],
        },
    }
}

/// A node with its last report as read for it (`report`: [`crate::app::App::shown_reports`]);
/// `fresh`: heard from recently (its `ready` is [`is_ready`]); `now` is the maintenance
/// windows' clock.
pub fn node(
    rec: &Rec<NodeRecord>,
    report: Option<ShownReport>,
    last_seen: Option<u64>,
    fresh: bool,
    now: u64,
) -> NodeView {
    let n = &rec.value;
    let ready = is_ready(n, fresh);
    let waiting = n.waiting.as_ref().map(|w| w.message(now));
    // Not read for it (a list's summary view): its summary.
    let report = report.or_else(|| n.report.as_ref().map(|r| ShownReport::summary(n, r)));
    let (report_at, revision, drift_count) = report
        .as_ref()
        .map_or((None, 0, 0), |r| (r.report_at, r.revision, r.drift_lines));
    let mut r = report.map(|r| r.status);
    let (progress, drift, history, actions) = match r.as_mut() {
        Some(s) => (
            s.progress.take(),
            std::mem::take(&mut s.drift),
            std::mem::take(&mut s.history),
            std::mem::take(&mut s.actions),
        ),
        None => Default::default(),
    };
    let r = r.as_ref();
    NodeView {
        api_version: hearth_api::HEARTH_API_VERSION.into(),
        kind: "Node".into(),
        metadata: NodeMeta {
            name: n.name.clone(),
            labels: n.labels.clone(),
            creation_timestamp: Some(rfc3339(n.created_at)),
            // The node's document or its report (stored apart), whichever changed last.
            resource_version: Some(rec.mod_revision.max(revision).to_string()),
        },
        status: NodeStatus {
            pool: n.pool.clone(),
            state: r.map(|r| r.state),
            reason: waiting.clone().or_else(|| r.and_then(|r| r.reason.clone())),
            waiting,
            current: r.and_then(|r| r.current.clone()),
            desired: n.desired.clone(),
            agent_desired: r.and_then(|r| r.desired.clone()),
            target: n.target.clone(),
            ready,
            enrolled: n.credential_sha256.is_some(),
            enrolled_at: n.enrolled_at.map(rfc3339),
            desired_at: n.desired_at.map(rfc3339),
            last_report: report_at.map(rfc3339),
            last_seen: last_seen.map(rfc3339),
            last_transition: r.and_then(|r| r.last_transition.clone()),
            pending_reboot: r.is_some_and(|r| r.pending_reboot),
            reboot_slot: n.reboot_slot.map(rfc3339),
            reboot_slot_holders: n.slot_holders.clone(),
            progress,
            drift,
            drift_count,
            os: r.and_then(|r| r.os.clone()),
            history,
            error: n.error.clone(),
            pinned: n.pin.as_ref().map(|p| PinView {
                config: p.config.clone(),
                by: p.hold.by.clone(),
                since: rfc3339(p.hold.at),
            }),
            excluded: n.excluded.as_ref().map(|h| HoldView {
                by: h.by.clone(),
                since: rfc3339(h.at),
            }),
            requests: n
                .requests
                .items
                .iter()
                .map(|q| hearth_api::RequestView {
                    id: q.id,
                    action: q.action,
                    path: q.path.clone(),
                    state: match &q.finished {
                        None => "Pending",
                        Some(f) if f.ok => "Done",
                        Some(_) => "Failed",
                    }
                    .into(),
                    by: q.hold.by.clone(),
                    requested_at: rfc3339(q.hold.at),
                    finished_at: q.finished.as_ref().map(|f| rfc3339(f.at)),
                    message: q.finished.as_ref().map(|f| f.message.clone()),
                })
                .collect(),
            actions,
        },
    }
}

/// An event.
pub fn event(e: &EventRecord) -> EventView {
    EventView {
        time: rfc3339(e.time),
        kind: e.kind.clone(),
        object: e.object.clone(),
        reason: e.reason.clone(),
        message: e.message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_degraded_message_names_the_first_node_and_bounds_its_reason() {
        let mut c = PoolCounts {
            degraded: 1,
            first_degraded: Some(("w0".into(), "unit motd.service failed".into())),
            ..Default::default()
        };
        assert_eq!(
            degraded_message(&c),
            "1 node(s) degraded: node w0 is reporting: unit motd.service failed"
        );
        c.degraded = 3;
        // A three-byte character across the bound: cut before it.
        c.first_degraded = Some(("w0".into(), format!("x{}", "€".repeat(400))));
        let m = degraded_message(&c);
        assert!(m.ends_with("€… (and 2 more)"), "{m}");
        assert!(m.len() < DEGRADED_REASON_BYTES + 80, "{}", m.len());
        // A node's control characters are shown, not sent.
        c.first_degraded = Some(("w0".into(), "bad\x1b[2Jline\nforged".into()));
        let m = degraded_message(&c);
        assert!(!m.contains('\x1b') && !m.contains('\n'), "{m:?}");
        c.first_degraded = None;
        assert_eq!(degraded_message(&c), "3 node(s) degraded");
    }
}
