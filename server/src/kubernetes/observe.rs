//! From the objects a Kubernetes API server holds to a [`Fleet`], and from a reconciled fleet
//! back to the writes that make the API server hold it. Pure: no client, no I/O.
//!
//! The objects are read with the same reader as `hearth apply` (`hearth_config::manifest`):
//! a MachineConfig or pool that `hearth apply` would refuse is refused here too, with the same
//! diagnostics, and left out of the fleet (its pool renders without it and shows why).

use super::annotations::{CURRENT_CONFIG, DESIRED_CONFIG, REASON, STATE};
use crate::api::NodeState;
use crate::fleet::{put, update, Fleet, Rec};
use crate::store::records::{NodeRecord, RenderedRecord};
use crate::views;
use hearth_api::AgentStatus;
use hearth_config::diag::Diagnostic;
use hearth_config::manifest::{read_str, Manifests};
use hearth_config::model::{RENDERED_NODE_ANNOTATION, RENDERED_POOL_ANNOTATION};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The objects the controller reads, each as the API server answers it (JSON).
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// MachineConfigs (admins' and rendered ones).
    pub machine_configs: Vec<Value>,
    /// MachineConfigPools.
    pub pools: Vec<Value>,
    /// Nodes.
    pub nodes: Vec<Value>,
    /// `MachineConfiguration` objects (node-disruption policies).
    pub configurations: Vec<Value>,
    /// MachineConfigNodes (`None`: their CRD is not installed).
    pub machine_config_nodes: Option<Vec<Value>>,
}

/// What was read: the fleet, and the objects left out with why.
#[derive(Debug)]
pub struct Read {
    /// The fleet the objects describe (before the controller's reconcile).
    pub fleet: Fleet,
    /// Problems with objects (errors: the object was left out).
    pub diagnostics: Vec<Diagnostic>,
    /// Pools that select a MachineConfig hearth refuses, with why: they are not rendered
    /// again until it is fixed or removed ([`hold_refused`]), as the MCO keeps a pool whose
    /// configs do not render on its last good render.
    pub held: BTreeMap<String, String>,
}

fn name_of(v: &Value) -> &str {
    v["metadata"]["name"].as_str().unwrap_or_default()
}

fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Unix seconds of an RFC 3339 time (`creationTimestamp`); 0 when absent or unreadable.
fn seconds(v: &Value) -> u64 {
    v.as_str()
        .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        .and_then(|t| u64::try_from(t.as_second()).ok())
        .unwrap_or(0)
}

/// The object as a manifest `hearth apply` reads: `apiVersion`, `kind`, the name, labels and
/// annotations, and `spec` (the server's fields — `uid`, `managedFields`, `status` — dropped).
fn as_manifest(v: &Value, kind: &str) -> String {
    let m = &v["metadata"];
    let mut meta = Map::new();
    meta.insert("name".into(), m["name"].clone());
    for k in ["labels", "annotations"] {
        if m[k].is_object() {
            meta.insert(k.into(), m[k].clone());
        }
    }
    json!({
        "apiVersion": v["apiVersion"],
        "kind": kind,
        "metadata": meta,
        "spec": v.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
    .to_string()
}

/// Whether a MachineConfig is a rendered one (made by a controller, hearth's or the MCO's).
pub fn is_rendered(v: &Value) -> bool {
    v["metadata"]["annotations"][views::GENERATED_BY_ANNOTATION].is_string()
}

fn node_state(s: &str) -> Option<NodeState> {
    NodeState::ALL.into_iter().find(|x| x.as_str() == s)
}

/// Objects already read, by kind and name, with the `resourceVersion` they were read at: an
/// object the API server has not changed is not read again (a reconcile follows every change
/// of any object; reading every MachineConfig each time would cost their whole size).
#[derive(Debug, Default)]
pub struct ReadCache {
    entries: HashMap<(String, String), (String, Manifests, Vec<Diagnostic>)>,
    seen: HashSet<(String, String)>,
}

impl ReadCache {
    /// `v` (of `kind`) read with `hearth apply`'s reader, or as it was read before.
    fn read(&mut self, v: &Value, kind: &str) -> (Manifests, Vec<Diagnostic>) {
        let key = (kind.to_string(), name_of(v).to_string());
        let version = v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        self.seen.insert(key.clone());
        if let Some((rv, m, d)) = self.entries.get(&key) {
            if !version.is_empty() && rv == version {
                return (m.clone(), d.clone());
            }
        }
        let file = format!("{kind}/{}", name_of(v));
        let (m, d) = read_str(&file, &as_manifest(v, kind));
        if !version.is_empty() {
            self.entries
                .insert(key, (version.to_string(), m.clone(), d.clone()));
        }
        (m, d)
    }

    /// Forgets the objects not read since the last call (deleted ones).
    fn sweep(&mut self) {
        let seen = std::mem::take(&mut self.seen);
        self.entries.retain(|k, _| seen.contains(k));
    }
}

/// The fleet `o` describes, as of `now`, reading again only the objects that changed since
/// `cache` saw them.
pub fn read_cached(o: &Observed, now: u64, cache: &mut ReadCache) -> Read {
    let mut fleet = Fleet::default();
    let mut diagnostics = Vec::new();
    let mut text = |v: &Value, kind: &str| {
        let (m, d) = cache.read(v, kind);
        let refused = d.iter().any(Diagnostic::is_error);
        diagnostics.extend(d);
        (!refused).then_some(m)
    };
    let mut manifests = Manifests::default();
    let mut rendered = Vec::new();
    let mut refused: Vec<(&str, BTreeMap<String, String>)> = Vec::new();
    for v in &o.machine_configs {
        let Some(m) = text(v, "MachineConfig") else {
            if !is_rendered(v) {
                refused.push((name_of(v), string_map(&v["metadata"]["labels"])));
            }
            continue;
        };
        if is_rendered(v) {
            rendered.extend(m.machine_configs.into_iter().map(|s| (s.item, v)));
        } else {
            manifests.extend(m);
        }
    }
    for v in &o.pools {
        if let Some(m) = text(v, "MachineConfigPool") {
            manifests.extend(m);
        }
    }
    for v in &o.configurations {
        if let Some(m) = text(v, "MachineConfiguration") {
            manifests.extend(m);
        }
    }
    cache.sweep();
    crate::app::apply_manifests(&mut fleet, &manifests, now, None);
    // What the objects record of themselves: creation times, and a pool's configuration (the
    // render all its nodes run), which the controller keeps in the pool's status.
    for v in &o.machine_configs {
        let created = seconds(&v["metadata"]["creationTimestamp"]);
        update(&mut fleet.mcs, name_of(v), |r| r.created_at = created);
    }
    // A pool's target and its sources are in its spec (`spec.configuration`, which the
    // controller sets); the render all its nodes run is in its status.
    for v in &o.pools {
        let created = seconds(&v["metadata"]["creationTimestamp"]);
        let name = |c: &Value| {
            c["name"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let target = name(&v["spec"]["configuration"]);
        let source: Vec<String> = v["spec"]["configuration"]["source"]
            .as_array()
            .map(|a| a.iter().filter_map(name).collect())
            .unwrap_or_default();
        let configuration = name(&v["status"]["configuration"]);
        update(&mut fleet.pools, name_of(v), |r| {
            r.created_at = created;
            r.status.target = target;
            r.status.source = source;
            r.status.configuration = configuration;
        });
    }
    let mut held = BTreeMap::new();
    for p in fleet.pools.values() {
        let bad: Vec<&str> = refused
            .iter()
            .filter(|(_, labels)| p.value.spec.machine_config_selector.matches(labels))
            .map(|(n, _)| *n)
            .collect();
        if !bad.is_empty() {
            held.insert(
                p.value.name().to_string(),
                format!(
                    "MachineConfig {} cannot be read (see the controller's log or `hearth apply --dry-run -f` of it); the pool keeps its last render until it is fixed or deleted",
                    bad.join(", ")
                ),
            );
        }
    }
    for (mc, v) in rendered {
        let a = &mc.metadata.annotations;
        let Some(pool) = a.get(RENDERED_POOL_ANNOTATION).cloned() else {
            // The MCO's own renders (no hearth.io/pool): not hearth's to keep or collect.
            continue;
        };
        let node = a.get(RENDERED_NODE_ANNOTATION).cloned();
        let created = seconds(&v["metadata"]["creationTimestamp"]);
        let r = RenderedRecord::from_model(&mc, &pool, node.as_deref(), created);
        put(&mut fleet.rendered, &r.name.clone(), r);
    }
    for v in &o.nodes {
        let name = name_of(v);
        if name.is_empty() {
            continue;
        }
        let a = string_map(&v["metadata"]["annotations"]);
        // A drain that failed (its pool said `fail` on timeout) makes the node Degraded until
        // an admin removes the annotation: the rollout halts as for a failed update.
        let drain_failed = a
            .get(super::annotations::DRAIN_FAILED)
            .filter(|r| !r.is_empty())
            .map(|r| {
                format!(
                    "drain failed: {r} (remove the node's annotation {} to try again)",
                    super::annotations::DRAIN_FAILED
                )
            });
        let report = a
            .get(STATE)
            .and_then(|s| node_state(s))
            .map(|state| AgentStatus {
                api_version: None,
                kind: None,
                state: if drain_failed.is_some() {
                    NodeState::Degraded
                } else {
                    state
                },
                reason: drain_failed
                    .clone()
                    .or_else(|| a.get(REASON).filter(|r| !r.is_empty()).cloned()),
                last_transition: None,
                current: a.get(CURRENT_CONFIG).cloned(),
                desired: a.get(DESIRED_CONFIG).cloned(),
                pending_reboot: false,
                os: None,
                progress: None,
                drift: Vec::new(),
                history: Vec::new(),
                requests_done: 0,
                request_results: Vec::new(),
                actions: Vec::new(),
            });
        // A node being drained for a config counts as handed it: it takes its place under
        // `maxUnavailable` (the rollout does not choose another meanwhile) and the drain goes
        // on whatever else changes, until the node gets the config or the config changes.
        let draining = a
            .get(super::annotations::DRAIN_FOR)
            .filter(|c| !c.is_empty() && a.get(DESIRED_CONFIG) != Some(*c))
            .filter(|_| drain_failed.is_none());
        put(
            &mut fleet.nodes,
            name,
            NodeRecord {
                name: name.to_string(),
                labels: string_map(&v["metadata"]["labels"]),
                created_at: seconds(&v["metadata"]["creationTimestamp"]),
                desired: draining.or(a.get(DESIRED_CONFIG)).cloned(),
                report_at: report.as_ref().map(|_| now),
                report: report.map(crate::store::report::Report::new),
                ..Default::default()
            },
        );
    }
    Read {
        fleet,
        diagnostics,
        held,
    }
}

/// Undoes, for the pools in `held`, what a reconcile changed from `before` to `after`: the
/// pool keeps its target (with the render error saying why) and its nodes keep their target
/// and desired config; the events about them are dropped. Renders made for them are dropped
/// too (nothing refers to them).
pub fn hold_refused(
    before: &Fleet,
    after: &mut Fleet,
    held: &BTreeMap<String, String>,
    events: &mut Vec<crate::store::records::EventRecord>,
) {
    if held.is_empty() {
        return;
    }
    for (pool, why) in held {
        let Some(old) = before.pools.get(pool) else {
            continue;
        };
        let mut status = old.value.status.clone();
        status.render_error = Some(why.clone());
        update(&mut after.pools, pool, |p| p.status = status);
    }
    let nodes: Vec<String> = after
        .nodes
        .values()
        .filter(|n| n.value.pool.as_ref().is_some_and(|p| held.contains_key(p)))
        .map(|n| n.value.name.clone())
        .collect();
    for name in &nodes {
        let (target, desired) = before
            .nodes
            .get(name)
            .map(|n| (n.value.target.clone(), n.value.desired.clone()))
            .unwrap_or_default();
        update(&mut after.nodes, name, |n| {
            n.target = target;
            n.desired = desired;
        });
    }
    let unused: Vec<String> = after
        .rendered
        .values()
        .filter(|r| {
            held.contains_key(&r.value.pool) && !before.rendered.contains_key(&r.value.name)
        })
        .map(|r| r.value.name.clone())
        .collect();
    for r in unused {
        after.rendered.remove(&r);
    }
    events.retain(|e| {
        !held
            .keys()
            .any(|p| e.object == format!("MachineConfigPool/{p}"))
            && !nodes.iter().any(|n| e.object == format!("Node/{n}"))
    });
}

/// The writes that make the API server hold a reconciled fleet.
#[derive(Debug, Default, PartialEq)]
pub struct Writes {
    /// Rendered MachineConfigs to create (whole objects).
    pub create: Vec<Value>,
    /// Rendered MachineConfigs to delete (no longer referenced, past the retention).
    pub delete: Vec<String>,
    /// Pools whose `spec.configuration` (the target) changes: a merge patch of the object.
    pub pool_specs: Vec<(String, Value)>,
    /// Pools whose status changes: the whole new `status`.
    pub pool_statuses: Vec<(String, Value)>,
    /// Nodes handed a new desired config.
    pub node_desired: Vec<(String, String)>,
    /// MachineConfigNodes to create (one per node of a pool, named like it, owned by it).
    pub mcn_create: Vec<Value>,
    /// MachineConfigNodes whose `spec` (pool, desired config) changes: a merge patch.
    pub mcn_spec: Vec<(String, Value)>,
}

impl Writes {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        *self == Writes::default()
    }
}

/// The pool's status in the MCO's shape, as hearth's admin API shows it, without what only
/// hearth's API carries (`rolloutHaltedBy`, `maintenance`, `rollback` stay out: the CRD has no
/// place for them). `observedGeneration` is the pool's `metadata.generation`.
fn pool_status(
    fleet: &Fleet,
    rec: &Rec<crate::store::records::PoolRecord>,
    object: &Value,
    now: u64,
) -> Value {
    let name = rec.value.name();
    let counts = views::pool_counts(fleet, name, &|_| true);
    let halted = crate::controller::halted_by(fleet, name);
    let view = views::pool(rec, &counts, halted.as_deref(), now);
    let mut status = serde_json::to_value(&view.status).unwrap_or_else(|_| json!({}));
    if let Some(m) = status.as_object_mut() {
        m.remove("rolloutHaltedBy");
        m.remove("maintenance");
        m.remove("rollback");
        m.insert(
            "observedGeneration".into(),
            object["metadata"]["generation"].clone(),
        );
        // Kubernetes' conditions carry a transition time; kept from the object while the
        // status of a condition stays the same.
        if let Some(conds) = m.get_mut("conditions").and_then(Value::as_array_mut) {
            for c in conds {
                let old = object["status"]["conditions"]
                    .as_array()
                    .and_then(|a| a.iter().find(|o| o["type"] == c["type"]));
                let time = match old {
                    Some(o)
                        if o["status"] == c["status"] && o["lastTransitionTime"].is_string() =>
                    {
                        o["lastTransitionTime"].clone()
                    }
                    _ => Value::String(crate::time::rfc3339(now)),
                };
                c["lastTransitionTime"] = time;
            }
        }
    }
    status
}

/// Whether two statuses differ in more than their conditions' transition times.
fn same_status(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(c) = v.get_mut("conditions").and_then(Value::as_array_mut) {
            for c in c {
                if let Some(m) = c.as_object_mut() {
                    m.remove("lastTransitionTime");
                }
            }
        }
        v
    };
    strip(a) == strip(b)
}

/// The writes that take the API server from `o` (read into `before`) to `after`.
pub fn writes(o: &Observed, before: &Fleet, after: &Fleet, now: u64) -> Writes {
    let mut w = Writes::default();
    for (name, r) in after.rendered.iter() {
        if !before.rendered.contains_key(name) {
            let mut v = views::rendered(r);
            if let Some(m) = v["metadata"].as_object_mut() {
                m.remove("resourceVersion");
                m.remove("creationTimestamp");
            }
            // Owned by its pool, as the MCO's renders are: deleting the pool deletes them.
            if let Some(pool) = o.pools.iter().find(|p| name_of(p) == r.value.pool) {
                v["metadata"]["ownerReferences"] = json!([{
                    "apiVersion": pool["apiVersion"],
                    "kind": "MachineConfigPool",
                    "name": r.value.pool,
                    "uid": pool["metadata"]["uid"],
                    "controller": true,
                    "blockOwnerDeletion": true,
                }]);
            }
            w.create.push(v);
        }
    }
    for name in before.rendered.keys() {
        if !after.rendered.contains_key(name) {
            w.delete.push(name.clone());
        }
    }
    for v in &o.pools {
        let name = name_of(v);
        let Some(rec) = after.pools.get(name) else {
            continue;
        };
        let target = rec.value.status.target.clone();
        let source: Vec<Value> = rec
            .value
            .status
            .source
            .iter()
            .map(|s| json!({"apiVersion": hearth_config::model::MCO_API_VERSION, "kind": "MachineConfig", "name": s}))
            .collect();
        if target.is_some() && v["spec"]["configuration"]["name"].as_str() != target.as_deref() {
            w.pool_specs.push((
                name.to_string(),
                json!({"spec": {"configuration": {"name": target, "source": source}}}),
            ));
        }
        let mut status = pool_status(after, rec, v, now);
        // A drain that waits says why in the pool's Updating condition: the pod and budget.
        let blocked: Vec<String> = o
            .nodes
            .iter()
            .filter(|n| {
                after
                    .nodes
                    .get(name_of(n))
                    .is_some_and(|r| r.value.pool.as_deref() == Some(name))
            })
            .filter_map(|n| {
                let why =
                    n["metadata"]["annotations"][super::annotations::DRAIN_BLOCKED].as_str()?;
                Some(format!("node {}: drain waits: {why}", name_of(n)))
            })
            .collect();
        if !blocked.is_empty() {
            if let Some(c) = status["conditions"]
                .as_array_mut()
                .and_then(|c| c.iter_mut().find(|c| c["type"] == "Updating"))
            {
                c["status"] = json!("True");
                c["reason"] = json!("DrainBlocked");
                c["message"] = json!(blocked.join("; "));
            }
        }
        if !same_status(&status, &v["status"]) {
            w.pool_statuses.push((name.to_string(), status));
        }
    }
    if let Some(mcns) = &o.machine_config_nodes {
        machine_config_nodes(o, mcns, after, &mut w);
    }
    let known: HashSet<&str> = o.nodes.iter().map(name_of).collect();
    for (name, n) in after.nodes.iter() {
        if !known.contains(name.as_str()) {
            continue;
        }
        let was = before.nodes.get(name).and_then(|b| b.value.desired.clone());
        if let Some(d) = &n.value.desired {
            if was.as_deref() != Some(d.as_str()) {
                w.node_desired.push((name.clone(), d.clone()));
            }
        }
    }
    w
}

/// Every node of a pool has a MachineConfigNode named like it (as the MCO's controller makes
/// them): `spec.node`, `spec.pool` and `spec.configVersion.desired` (the node's
/// `desiredConfig` as it is now) written by the controller; its `status` is the agent's.
fn machine_config_nodes(o: &Observed, mcns: &[Value], after: &Fleet, w: &mut Writes) {
    let by_name: HashMap<&str, &Value> = mcns.iter().map(|m| (name_of(m), m)).collect();
    for n in &o.nodes {
        let name = name_of(n);
        let Some(pool) = after.nodes.get(name).and_then(|r| r.value.pool.clone()) else {
            continue;
        };
        let Some(desired) = n["metadata"]["annotations"][DESIRED_CONFIG]
            .as_str()
            .filter(|d| !d.is_empty())
        else {
            continue;
        };
        let spec = json!({
            "node": {"name": name},
            "pool": {"name": pool},
            "configVersion": {"desired": desired},
        });
        let owner = json!([{
            "apiVersion": "v1",
            "kind": "Node",
            "name": name,
            "uid": n["metadata"]["uid"],
        }]);
        match by_name.get(name) {
            None => w.mcn_create.push(json!({
                "apiVersion": hearth_config::model::MCO_API_VERSION,
                "kind": "MachineConfigNode",
                "metadata": {"name": name, "ownerReferences": owner},
                "spec": spec,
            })),
            // Made by an agent or an admin without the Node as its owner (deleting the Node
            // would leave it behind): the owner is added with the spec.
            Some(m)
                if m["metadata"]["ownerReferences"]
                    .as_array()
                    .is_none_or(Vec::is_empty) =>
            {
                w.mcn_spec.push((
                    name.to_string(),
                    json!({"metadata": {"ownerReferences": owner}, "spec": spec}),
                ));
            }
            Some(m) if m["spec"] != spec => {
                w.mcn_spec.push((name.to_string(), json!({"spec": spec})));
            }
            Some(_) => {}
        }
    }
}
