//! Draining a node before a disruptive update, in Kubernetes mode.
//!
//! When the rollout hands a node a config whose update needs a reboot (hearth's own plan, with
//! the fleet's disruption policies), the controller first **cordons** the node and **evicts**
//! its pods through the Eviction API, which honours PodDisruptionBudgets; only once no pod is
//! left (DaemonSet and mirror pods stay, as with `kubectl drain`) does the node get its
//! `desiredConfig`. A blocked drain says which pod and which budget, on the node
//! (`hearth.io/drain-blocked`) and in its pool's `Updating` condition, and the controller's log.
//! After the node reports `Done` in that config (its boot verified), the controller uncordons
//! it — only if it was the controller that cordoned it.
//!
//! Each pool chooses what a drain that takes longer than `hearth.io/drain-timeout` (default 1h)
//! does, in `hearth.io/on-drain-timeout`: `wait` (the default: keep trying, keep saying why),
//! `skip` (update the node anyway), or `fail` (the node counts as Degraded, which halts the
//! pool's rollout, until an admin removes `hearth.io/drain-failed` from it).
//!
//! The drain's state lives in the node's annotations, so a restarted (or another) controller
//! goes on where the last one was.

use super::annotations::{
    CORDONED, DRAINED_FOR, DRAIN_BLOCKED, DRAIN_FAILED, DRAIN_FOR, DRAIN_STARTED,
    ON_TIMEOUT_ANNOTATION, TIMEOUT_ANNOTATION,
};
use anyhow::{Context, Result};
use hearth_config::model::LabelSelector;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    ApiResource, DynamicObject, EvictParams, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::{Api, Client};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// The default drain timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);
/// The longest a message about a blocked drain gets on a node.
const MAX_MESSAGE: usize = 1024;

/// What a drain past its timeout does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnTimeout {
    /// Keep trying (and saying why).
    Wait,
    /// Update the node anyway.
    Skip,
    /// The node counts as Degraded until an admin clears it.
    Fail,
}

/// A pool's drain settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainPolicy {
    /// How long a drain may take.
    pub timeout: Duration,
    /// What happens then.
    pub on_timeout: OnTimeout,
}

impl Default for DrainPolicy {
    fn default() -> Self {
        DrainPolicy {
            timeout: DEFAULT_TIMEOUT,
            on_timeout: OnTimeout::Wait,
        }
    }
}

impl DrainPolicy {
    /// From a pool's annotations; an unreadable value is refused, naming the annotation.
    pub fn of(annotations: &BTreeMap<String, String>) -> Result<DrainPolicy, String> {
        let timeout = match annotations.get(TIMEOUT_ANNOTATION) {
            None => DEFAULT_TIMEOUT,
            Some(t) => t
                .parse::<jiff::SignedDuration>()
                .ok()
                .and_then(|d| d.try_into().ok())
                .ok_or_else(|| {
                    format!("{TIMEOUT_ANNOTATION}: {t:?} is not a duration (e.g. 30m, 2h)")
                })?,
        };
        let on_timeout = match annotations.get(ON_TIMEOUT_ANNOTATION).map(String::as_str) {
            None | Some("wait") => OnTimeout::Wait,
            Some("skip") => OnTimeout::Skip,
            Some("fail") => OnTimeout::Fail,
            Some(other) => {
                return Err(format!(
                    "{ON_TIMEOUT_ANNOTATION}: {other:?} is not one of wait, skip, fail"
                ))
            }
        };
        Ok(DrainPolicy {
            timeout,
            on_timeout,
        })
    }
}

/// How far a node's drain got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// No pod left to evict.
    Drained,
    /// Pods are left: why (the pods and what holds them).
    Waiting(String),
}

/// Whether a drain evicts `pod`: not DaemonSet pods (their controller puts them back at once),
/// not mirror (static) pods, not pods that have finished.
pub fn evictable(pod: &Value) -> bool {
    let owned_by_daemonset = pod["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|o| o.iter().any(|r| r["kind"] == "DaemonSet"));
    let mirror = pod["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string();
    let finished = matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    !owned_by_daemonset && !mirror && !finished
}

fn pod_name(pod: &Value) -> String {
    format!(
        "{}/{}",
        pod["metadata"]["namespace"].as_str().unwrap_or_default(),
        pod["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// The budgets of `pdbs` that select `pod`, as words: `PodDisruptionBudget ns/name
/// (minAvailable 1; 0 of 1 pods healthy, 0 disruptions allowed)`.
pub fn budgets_of(pod: &Value, pdbs: &[Value]) -> Vec<String> {
    let labels: BTreeMap<String, String> = pod["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    pdbs.iter()
        .filter(|b| b["metadata"]["namespace"] == pod["metadata"]["namespace"])
        .filter(|b| {
            serde_json::from_value::<LabelSelector>(b["spec"]["selector"].clone())
                .is_ok_and(|s| s.matches(&labels))
        })
        .map(|b| {
            let spec = &b["spec"];
            let rule = if !spec["minAvailable"].is_null() {
                format!("minAvailable {}", spec["minAvailable"])
            } else {
                format!("maxUnavailable {}", spec["maxUnavailable"])
            };
            let s = &b["status"];
            format!(
                "PodDisruptionBudget {} ({rule}; {} of {} pods healthy, {} disruptions allowed)",
                pod_name(b),
                s["currentHealthy"].as_i64().unwrap_or(0),
                s["desiredHealthy"].as_i64().unwrap_or(0),
                s["disruptionsAllowed"].as_i64().unwrap_or(0),
            )
        })
        .collect()
}

/// Drains nodes through the API server.
pub struct Drainer {
    client: Client,
    nodes: Api<DynamicObject>,
}

impl std::fmt::Debug for Drainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Drainer")
    }
}

fn pdbs_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("policy", "v1beta1", "PodDisruptionBudget"),
        "poddisruptionbudgets",
    )
}

impl Drainer {
    /// A drainer on `client`.
    pub fn new(client: Client) -> Drainer {
        Drainer {
            nodes: Api::all_with(client.clone(), &super::resources::nodes()),
            client,
        }
    }

    /// Merge-patches `node`'s annotations (`None`: removed) and, when given, `unschedulable`.
    pub async fn mark(
        &self,
        node: &str,
        annotations: &[(&str, Option<String>)],
        unschedulable: Option<bool>,
    ) -> Result<()> {
        let mut patch = json!({"metadata": {"annotations": {}}});
        for (k, v) in annotations {
            patch["metadata"]["annotations"][*k] = json!(v);
        }
        if let Some(u) = unschedulable {
            patch["spec"] = json!({"unschedulable": u});
        }
        self.nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("patching node {node}"))?;
        Ok(())
    }

    /// One step of draining `node`: evicts what can be evicted; says what is left and why.
    pub async fn step(&self, node: &str) -> Result<Progress> {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let list = pods
            .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await
            .with_context(|| format!("listing the pods of node {node}"))?;
        let left: Vec<Value> = list
            .items
            .iter()
            .filter_map(|p| serde_json::to_value(p).ok())
            .filter(evictable)
            .collect();
        if left.is_empty() {
            return Ok(Progress::Drained);
        }
        let mut why = Vec::new();
        let mut pdbs: Option<Vec<Value>> = None;
        for pod in &left {
            let name = pod_name(pod);
            if pod["metadata"]["deletionTimestamp"].is_string() {
                why.push(format!("pod {name} is terminating"));
                continue;
            }
            let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
            let short = pod["metadata"]["name"].as_str().unwrap_or_default();
            match api.evict(short, &EvictParams::default()).await {
                Ok(_) => {
                    tracing::info!(node, pod = %name, "evicted");
                    why.push(format!("pod {name} is terminating"));
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(kube::Error::Api(e)) if e.code == 429 => {
                    if pdbs.is_none() {
                        let api: Api<DynamicObject> =
                            Api::all_with(self.client.clone(), &pdbs_resource());
                        pdbs = Some(
                            api.list(&ListParams::default())
                                .await
                                .map(|l| {
                                    l.items
                                        .iter()
                                        .filter_map(|b| serde_json::to_value(b).ok())
                                        .collect()
                                })
                                .unwrap_or_default(),
                        );
                    }
                    let budgets = budgets_of(pod, pdbs.as_deref().unwrap_or_default());
                    why.push(if budgets.is_empty() {
                        format!("pod {name}: eviction refused: {}", e.message)
                    } else {
                        format!("pod {name}: eviction refused by {}", budgets.join(", "))
                    });
                }
                Err(e) => why.push(format!("pod {name}: eviction failed: {e}")),
            }
        }
        if why.is_empty() {
            return Ok(Progress::Drained);
        }
        Ok(Progress::Waiting(crate::text::cut(
            &why.join("; "),
            MAX_MESSAGE,
        )))
    }
}

/// A node to drain before it gets `config`.
#[derive(Debug, Clone, PartialEq)]
pub struct Todo {
    /// The node.
    pub node: String,
    /// The config it gets once drained.
    pub config: String,
    /// Its pool's drain settings (or why they cannot be read: the defaults apply).
    pub policy: Result<DrainPolicy, String>,
    /// The drain of this config started then (Unix seconds); none: not started.
    pub started: Option<u64>,
    /// What the node shows about its drain now.
    pub blocked: Option<String>,
}

fn annotation<'a>(node: &'a Value, key: &str) -> Option<&'a str> {
    node["metadata"]["annotations"][key]
        .as_str()
        .filter(|s| !s.is_empty())
}

fn seconds_of(s: &str) -> Option<u64> {
    s.parse::<jiff::Timestamp>()
        .ok()
        .and_then(|t| u64::try_from(t.as_second()).ok())
}

/// Takes out of `desired` (node, config) the nodes that must be drained first: nodes that run
/// (they have reported) and whose update from the config they were handed to the new one
/// needs a reboot; a node already drained for that config keeps its assignment.
pub fn split(
    nodes: &[Value],
    before: &crate::fleet::Fleet,
    after: &crate::fleet::Fleet,
    desired: &mut Vec<(String, String)>,
) -> Vec<Todo> {
    let policies = after.policies();
    let by_name: HashMap<&str, &Value> = nodes
        .iter()
        .filter_map(|n| Some((n["metadata"]["name"].as_str()?, n)))
        .collect();
    let mut todo = Vec::new();
    desired.retain(|(name, config)| {
        let Some(node) = by_name.get(name.as_str()) else {
            return true;
        };
        // A drain that failed (`on-drain-timeout: fail`) holds the node where it is until an
        // admin removes the annotation: no config, no new drain.
        if annotation(node, DRAIN_FAILED).is_some() {
            return false;
        }
        if annotation(node, DRAINED_FOR) == Some(config.as_str()) {
            return true;
        }
        let Some(rec) = before.nodes.get(name) else {
            return true;
        };
        // A node that never reported runs nothing yet: nothing to drain.
        if rec.value.report.is_none() {
            return true;
        }
        // From what the node runs (its desired config may be one it is being drained for).
        let from = rec.value.current().or(rec.value.desired.as_deref());
        let reboot = match from
            .and_then(|from| after.rendered.get(from))
            .zip(after.rendered.get(config))
        {
            Some((from, to)) => {
                hearth_config::plan::plan(&from.value.spec, &to.value.spec, &policies)
                    .disruption
                    .reboot()
            }
            None => true,
        };
        if !reboot {
            return true;
        }
        todo.push(todo_for(node, name, config, after));
        false
    });
    // Drains under way whose config the rollout still wants for the node (it counts them as
    // handed out, so they are not among the new assignments).
    for (name, node) in &by_name {
        let Some(config) = annotation(node, DRAIN_FOR) else {
            continue;
        };
        let pending = annotation(node, super::annotations::DESIRED_CONFIG) != Some(config)
            && annotation(node, DRAIN_FAILED).is_none()
            && !todo.iter().any(|t: &Todo| t.node == *name)
            && after
                .nodes
                .get(*name)
                .is_some_and(|n| n.value.desired.as_deref() == Some(config));
        if pending {
            todo.push(todo_for(node, name, config, after));
        }
    }
    todo
}

/// The drain of `node` (named `name`) for `config`, with its pool's settings and how far the
/// node's annotations say it got.
fn todo_for(node: &Value, name: &str, config: &str, after: &crate::fleet::Fleet) -> Todo {
    let pool = after
        .nodes
        .get(name)
        .and_then(|n| n.value.pool.as_ref())
        .and_then(|p| after.pools.get(p));
    let policy = DrainPolicy::of(
        &pool
            .map(|p| p.value.metadata.annotations.clone())
            .unwrap_or_default(),
    );
    let started = (annotation(node, DRAIN_FOR) == Some(config))
        .then(|| annotation(node, DRAIN_STARTED).and_then(seconds_of))
        .flatten();
    Todo {
        node: name.to_string(),
        config: config.to_string(),
        policy,
        started,
        blocked: annotation(node, DRAIN_BLOCKED).map(str::to_string),
    }
}

/// Nodes whose drain is over: they report `Done` in the config they were drained for, or the
/// drain was abandoned (the node is not being drained now and never finished). Their drain
/// annotations go, and those the controller cordoned are uncordoned (the bool).
pub fn finished(nodes: &[Value], draining: &[Todo]) -> Vec<(String, bool)> {
    nodes
        .iter()
        .filter_map(|n| {
            let name = n["metadata"]["name"].as_str()?;
            let ours = [DRAIN_FOR, DRAINED_FOR, CORDONED, DRAIN_BLOCKED]
                .iter()
                .any(|k| annotation(n, k).is_some());
            if !ours
                || draining.iter().any(|t| t.node == name)
                || annotation(n, DRAIN_FAILED).is_some()
            {
                return None;
            }
            let done_in = |c: &str| {
                annotation(n, super::annotations::STATE) == Some("Done")
                    && annotation(n, super::annotations::CURRENT_CONFIG) == Some(c)
                    && annotation(n, super::annotations::DESIRED_CONFIG) == Some(c)
            };
            let over = match annotation(n, DRAINED_FOR) {
                Some(c) => done_in(c),
                None => true,
            };
            over.then(|| (name.to_string(), annotation(n, CORDONED) == Some("true")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, annotations: Value) -> Value {
        json!({"metadata": {"name": name, "annotations": annotations}})
    }

    #[test]
    fn a_drain_is_over_when_the_node_is_done_in_its_config_or_it_was_abandoned() {
        let done = node(
            "a",
            json!({DRAINED_FOR: "r2", CORDONED: "true", "machineconfiguration.openshift.io/state": "Done",
                   "machineconfiguration.openshift.io/currentConfig": "r2",
                   "machineconfiguration.openshift.io/desiredConfig": "r2"}),
        );
        let rebooting = node(
            "b",
            json!({DRAINED_FOR: "r2", CORDONED: "true", "machineconfiguration.openshift.io/state": "Working",
                   "machineconfiguration.openshift.io/currentConfig": "r1",
                   "machineconfiguration.openshift.io/desiredConfig": "r2"}),
        );
        // Cordoned by an admin before: hearth does not uncordon it.
        let abandoned = node("c", json!({DRAIN_FOR: "r2"}));
        let failed = node(
            "d",
            json!({DRAIN_FOR: "r2", DRAIN_FAILED: "pod x", CORDONED: "true"}),
        );
        let draining = node("e", json!({DRAIN_FOR: "r2", CORDONED: "true"}));
        let todo = vec![Todo {
            node: "e".into(),
            config: "r2".into(),
            policy: DrainPolicy::of(&BTreeMap::new()),
            started: Some(1),
            blocked: None,
        }];
        assert_eq!(
            finished(&[done, rebooting, abandoned, failed, draining], &todo),
            vec![("a".to_string(), true), ("c".to_string(), false)]
        );
    }

    #[test]
    fn a_pool_chooses_how_long_and_what_then_and_bad_values_are_named() {
        let a = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(
            DrainPolicy::of(&a(&[])).unwrap(),
            DrainPolicy {
                timeout: DEFAULT_TIMEOUT,
                on_timeout: OnTimeout::Wait
            }
        );
        let p = DrainPolicy::of(&a(&[
            (TIMEOUT_ANNOTATION, "90s"),
            (ON_TIMEOUT_ANNOTATION, "fail"),
        ]))
        .unwrap();
        assert_eq!(p.timeout, Duration::from_secs(90));
        assert_eq!(p.on_timeout, OnTimeout::Fail);
        let e = DrainPolicy::of(&a(&[(TIMEOUT_ANNOTATION, "soon")])).unwrap_err();
        assert!(e.contains(TIMEOUT_ANNOTATION) && e.contains("soon"), "{e}");
        let e = DrainPolicy::of(&a(&[(ON_TIMEOUT_ANNOTATION, "ignore")])).unwrap_err();
        assert!(e.contains("wait, skip, fail"), "{e}");
    }

    #[test]
    fn daemonset_mirror_and_finished_pods_are_not_evicted() {
        let pod = |extra: Value| {
            let mut p = json!({"metadata": {"name": "p", "namespace": "ns"}, "status": {"phase": "Running"}});
            if let (Some(a), Some(b)) = (p.as_object_mut(), extra.as_object()) {
                for (k, v) in b {
                    a.insert(k.clone(), v.clone());
                }
            }
            p
        };
        assert!(evictable(&pod(json!({}))));
        assert!(!evictable(&pod(
            json!({"metadata": {"ownerReferences": [{"kind": "DaemonSet"}]}})
        )));
        assert!(!evictable(&pod(
            json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}})
        )));
        assert!(!evictable(&pod(json!({"status": {"phase": "Succeeded"}}))));
    }

    #[test]
    fn the_budget_that_holds_a_pod_is_named_with_its_numbers() {
        let pod =
            json!({"metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web"}}});
        let pdb = |ns: &str, app: &str| {
            json!({
                "metadata": {"name": "web", "namespace": ns},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
                "status": {"currentHealthy": 1, "desiredHealthy": 1, "disruptionsAllowed": 0},
            })
        };
        assert_eq!(
            budgets_of(&pod, &[pdb("shop", "web"), pdb("other", "web"), pdb("shop", "db")]),
            vec!["PodDisruptionBudget shop/web (minAvailable 1; 1 of 1 pods healthy, 0 disruptions allowed)"]
        );
    }
}
