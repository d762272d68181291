//! The agent operations: enrollment (placed without a full render when possible), the
//! encoded desired-config answers, status reports and reboot slots.

use super::state::{format_labels, meta_object, App, DesiredBody};
use crate::api::{
    AgentStatus, DesiredConfig, EnrollRequest, EnrollResponse, NodeState, SlotAction, SlotAnswer,
};
use crate::controller::Scope;
use crate::error::ApiError;
use crate::fleet::{put, update, Fleet, POLICIES_NAME};
use crate::pki::{self};
use crate::store::records::{EventRecord, NodeRecord, SlotHolder};
use crate::store::report::Report;
use crate::time::now;
use hearth_config::manifest::check_object_name;
use hearth_config::render;
use hearth_config::trial::TrialPolicy;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

impl App {
    /// Enrolls a node with its pool's bootstrap token.
    ///
    /// A node that already holds a credential is enrolled again only with that credential
    /// (`old_credential`), so that a bootstrap token (which every node of the pool has in its
    /// `agent.env`) cannot take over another node's name; an admin revokes a lost credential
    /// with [`App::reset_credential`].
    pub async fn enroll(
        self: &Arc<Self>,
        token_pool: &str,
        req: &EnrollRequest,
        old_credential: Option<&str>,
        from: Option<&str>,
    ) -> Result<EnrollResponse, ApiError> {
        let proof = old_credential.map(pki::token_hash);
        if let Some(msg) = check_object_name(&req.node) {
            return Err(ApiError::bad_request(format!("node: {msg}")));
        }
        // A machine claiming an enrolled node's name without its credential: refused from the
        // snapshot, said on the node (the commit below checks again, for a race).
        if let Some(e) = name_taken(&self.snapshot(), &req.node, proof.as_deref()) {
            self.refused_claim(&req.node, token_pool, from).await;
            return Err(e);
        }
        let credential =
            pki::new_token(pki::NODE_PREFIX).map_err(|e| ApiError::internal(e.to_string()))?;
        let hash = pki::token_hash(&credential);
        // Usually the node only has to be placed in its pool, whose rendered config exists:
        // that is a group commit with a rollout, not a render of the whole fleet.
        let placed = Arc::new(Mutex::new(None));
        {
            let (placed, token_pool, req, hash, proof) = (
                placed.clone(),
                token_pool.to_string(),
                req.clone(),
                hash.clone(),
                proof.clone(),
            );
            self.group_commit(Box::new(move |fleet, t| {
                let r = enroll_node(fleet, &token_pool, &req, &hash, proof.as_deref(), t, true)?;
                *placed.lock().unwrap_or_else(|e| e.into_inner()) = match r {
                    Placed::Done(labels, pool) => Some((labels, pool)),
                    Placed::NeedsFull => None,
                };
                Ok(())
            }))
            .await?;
        }
        let placed = placed.lock().unwrap_or_else(|e| e.into_inner()).take();
        let (labels, pool) = match placed {
            Some(x) => x,
            None => {
                self.mutate(Scope::Full, false, |fleet, t| {
                    match enroll_node(fleet, token_pool, req, &hash, proof.as_deref(), t, false)? {
                        Placed::Done(labels, pool) => Ok((labels, pool)),
                        Placed::NeedsFull => Err(ApiError::internal("enrollment was not placed")),
                    }
                })
                .await?
            }
        };
        self.seen(&req.node);
        // Enrolled: earlier refused claims of the name were this machine's (a reinstall).
        self.refused_claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .forget(&req.node);
        Ok(EnrollResponse {
            node: req.node.clone(),
            pool,
            labels,
            credential,
        })
    }

    /// The desired config of `node` as a JSON body (cached per rendered config), and whether
    /// it carries requests. The admin's pending requests to the node with an id above `done`
    /// are in it (not cached) when the node says which it did (`done`: an older agent, which
    /// does not, never gets them).
    pub fn desired_body(
        &self,
        node: &str,
        done: Option<u64>,
    ) -> Result<Option<(DesiredBody, bool)>, ApiError> {
        let Some((name, body)) = self.config_body(node)? else {
            return Ok(None);
        };
        let fleet = self.snapshot();
        let requests = match (done, fleet.nodes.get(node)) {
            (Some(done), Some(n)) => super::requests::requests_for(&n.value, done),
            _ => Vec::new(),
        };
        if requests.is_empty() {
            return Ok(Some(((name, body), false)));
        }
        let mut desired: DesiredConfig = serde_json::from_slice(&body)
            .map_err(|e| ApiError::internal(format!("a cached desired config: {e}")))?;
        desired.requests = requests;
        let body = serde_json::to_vec(&desired).map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(Some(((name, Arc::new(body)), true)))
    }

    fn config_body(&self, node: &str) -> Result<Option<DesiredBody>, ApiError> {
        let fleet = self.snapshot();
        let Some(n) = fleet.nodes.get(node) else {
            return Err(ApiError::unauthorized(format!(
                "node {node} is no longer known; enroll again"
            )));
        };
        let Some(name) = n.value.desired.clone() else {
            return Ok(None);
        };
        let policies_rev = fleet
            .policies
            .get(POLICIES_NAME)
            .map(|p| p.mod_revision)
            .unwrap_or(0);
        // The pool's trial policy (its annotations were checked when the pool was applied;
        // a pool record that cannot be read gets the default). Part of the cache key: the
        // annotations change without the rendered config's name.
        let trial = n
            .value
            .pool
            .as_deref()
            .and_then(|p| fleet.pools.get(p))
            .map(|p| TrialPolicy::of(&p.value.metadata.annotations).unwrap_or_default())
            .unwrap_or_default();
        let key = format!("{name}\n{:?}/{}", trial.mode, trial.seconds);
        {
            let mut cache = self.body_cache.lock().unwrap_or_else(|e| e.into_inner());
            if cache.0 != policies_rev {
                *cache = (policies_rev, HashMap::new());
            }
            if let Some(b) = cache.1.get(&key) {
                return Ok(Some((name, b.clone())));
            }
        }
        let Some(r) = fleet.rendered.get(&name) else {
            return Err(ApiError::internal(format!(
                "rendered config {name} is missing (this is a bug: referenced configs are never collected)"
            )));
        };
        let body = serde_json::to_vec(&DesiredConfig {
            name: name.clone(),
            spec: r.value.spec.clone(),
            policies: fleet.policies(),
            requests: Vec::new(),
            trial: Some(trial),
        })
        .map_err(|e| ApiError::internal(e.to_string()))?;
        let body = Arc::new(body);
        let mut cache = self.body_cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.0 == policies_rev {
            if cache.1.len() > 1024 {
                cache.1.clear();
            }
            cache.1.insert(key, body.clone());
        }
        Ok(Some((name, body)))
    }

    /// Records a status report. Reports arriving together are committed together
    /// ([`App::group_commit`]); the answer comes after the commit, so an acknowledged report is
    /// stored.
    pub async fn report(self: &Arc<Self>, node: &str, status: AgentStatus) -> Result<(), ApiError> {
        self.seen(node);
        if !self.snapshot().nodes.contains_key(node) {
            return Err(unknown_node(node));
        }
        // Encoded here, in the request's task, so that the commit storing it does not; the
        // decoded history, drift and actions are freed here too (`crate::store::report`).
        let (node, report) = (node.to_string(), Report::new(status));
        self.group_commit(Box::new(move |fleet, t| {
            record_report(fleet, &node, &report, t)
        }))
        .await
    }

    /// Takes or gives back a reboot slot: granted while fewer than the pool's `maxUnavailable`
    /// nodes hold one.
    ///
    /// A slot is held until `holder` gives it back: the agent's and a FleetLock client's
    /// holds on the same node are one slot (one node reboots), freed when both are released.
    pub async fn reboot_slot(
        &self,
        node: &str,
        action: SlotAction,
        holder: SlotHolder,
    ) -> Result<SlotAnswer, ApiError> {
        self.seen(node);
        self.mutate(Scope::Rollout, false, |fleet, t| {
            let Some(n) = fleet.nodes.get(node).map(|n| n.value.clone()) else {
                return Err(ApiError::unauthorized(format!(
                    "node {node} is no longer known; enroll again"
                )));
            };
            match action {
                SlotAction::Release => {
                    let mut after = n.clone();
                    if after.release_slot(holder) {
                        update(&mut fleet.nodes, node, |x| *x = after);
                        fleet.record_events(vec![EventRecord::normal(
                            t,
                            meta_object("Node", node),
                            "RebootSlotReleased",
                            "released its reboot slot".into(),
                        )]);
                    } else if after != n {
                        update(&mut fleet.nodes, node, |x| *x = after);
                    }
                    Ok(SlotAnswer {
                        granted: false,
                        retry_after_seconds: 0,
                        reason: None,
                    })
                }
                SlotAction::Acquire => {
                    if n.reboot_slot.is_some() {
                        let mut holders = n.slot_holders.clone();
                        if holders.is_empty() {
                            holders.push(SlotHolder::Agent);
                        }
                        if !holders.contains(&holder) {
                            holders.push(holder);
                            update(&mut fleet.nodes, node, |x| x.slot_holders = holders);
                        }
                        return Ok(SlotAnswer {
                            granted: true,
                            retry_after_seconds: 0,
                            reason: None,
                        });
                    }
                    let Some(pool) = n
                        .pool
                        .clone()
                        .and_then(|p| fleet.pools.get(&p).map(|r| r.value.clone()))
                    else {
                        return Err(ApiError::conflict(format!("node {node} is in no pool")));
                    };
                    // Maintenance windows: no slot outside them (the controller records the
                    // wait on the node and the pool).
                    let window_now = self.options.settings.window_clock.now();
                    if let Some(wait) = crate::controller::window::gate(&pool, window_now) {
                        let retry = wait
                            .opens_at
                            .map_or(300, |at| at.saturating_sub(window_now).clamp(1, 300));
                        return Ok(SlotAnswer {
                            granted: false,
                            retry_after_seconds: retry,
                            reason: Some(wait.message(window_now)),
                        });
                    }
                    let members: Vec<&NodeRecord> = fleet
                        .nodes
                        .values()
                        .map(|x| &x.value)
                        .filter(|x| x.pool.as_deref() == Some(pool.name()))
                        .collect();
                    let held = members.iter().filter(|x| x.reboot_slot.is_some()).count();
                    let max = pool.spec.max_unavailable.resolve(members.len());
                    if held >= max {
                        return Ok(SlotAnswer {
                            granted: false,
                            retry_after_seconds: 30,
                            reason: Some(format!(
                                "all {max} reboot slot(s) of pool {} are taken",
                                pool.name()
                            )),
                        });
                    }
                    update(&mut fleet.nodes, node, |n| {
                        n.reboot_slot = Some(t);
                        n.slot_holders = vec![holder];
                    });
                    fleet.record_events(vec![EventRecord::normal(
                        t,
                        meta_object("Node", node),
                        "RebootSlotAcquired",
                        format!(
                            "took a reboot slot ({} of {max} in pool {})",
                            held + 1,
                            pool.name()
                        ),
                    )]);
                    Ok(SlotAnswer {
                        granted: true,
                        retry_after_seconds: 0,
                        reason: None,
                    })
                }
            }
        })
        .await
    }
}

/// An event when a node's drift appears (a Warning naming how many paths and the first) or is
/// gone (Normal); none while it only changes (a count that moves is in the node's view).
fn drift_event(node: &str, was: u32, status: &Report, t: u64) -> Option<EventRecord> {
    let now = status.drift_lines;
    let config = status.current.as_deref().unwrap_or("its config");
    match (was, now) {
        (0, n) if n > 0 => {
            let first = status
                .full()
                .and_then(|s| s.drift.into_iter().next())
                .map(|d| format!(": {}", crate::text::cut(&d, 300)))
                .unwrap_or_default();
            Some(EventRecord::warning(
                t,
                meta_object("Node", node),
                "DriftFound",
                format!(
                    "{n} path{} differ{} from {config}{first} (hearth describe node {node} \
                     lists them; the node's drift policy says whether it puts them back)",
                    if n == 1 { "" } else { "s" },
                    if n == 1 { "s" } else { "" },
                ),
            ))
        }
        (w, 0) if w > 0 => Some(EventRecord::normal(
            t,
            meta_object("Node", node),
            "DriftGone",
            format!("no path differs from {config} any more"),
        )),
        _ => None,
    }
}

fn unknown_node(node: &str) -> ApiError {
    ApiError::unauthorized(format!("node {node} is no longer known; enroll again"))
}

/// Stores one status report in `fleet` (nothing when the node is unknown: an error).
fn record_report(fleet: &mut Fleet, node: &str, status: &Report, t: u64) -> Result<(), ApiError> {
    // What the report is compared with, read without copying the node (reports are the
    // hottest path: the record is copied once, by the update below).
    let Some((changed, release, drift_was)) = fleet.nodes.get(node).map(|n| {
        let n = &n.value;
        let changed = n.state() != Some(status.state)
            || n.report.as_ref().and_then(|r| r.reason.as_ref()) != status.reason.as_ref();
        let drift_was = n.report.as_ref().map_or(0, |r| r.drift_lines);
        // A Done report in the desired config gives back the agent's part of the slot only: a
        // FleetLock client's holds until its steady-state.
        let release = status.state == NodeState::Done
            && status.current.is_some()
            && status.current == n.desired
            && n.reboot_slot.is_some();
        (changed, release, drift_was)
    }) else {
        return Err(unknown_node(node));
    };
    let mut events = Vec::new();
    if changed {
        let object = meta_object("Node", node);
        let reason = status.reason.clone().unwrap_or_default();
        // A node that has no config yet (it just enrolled) says so, not "-".
        let desired = status
            .desired
            .clone()
            .or_else(|| status.current.clone())
            .unwrap_or_else(|| "no config yet".into());
        // The config's name first, unless the reason names it already (the agent's OS and
        // trial reasons do).
        let message = if reason.is_empty() {
            desired
        } else if reason.contains(desired.as_str()) {
            reason
        } else {
            format!("{desired}: {reason}")
        };
        events.push(match status.state {
            NodeState::Degraded | NodeState::Unreconcilable => {
                EventRecord::warning(t, object, status.state.as_str(), message)
            }
            s => EventRecord::normal(t, object, s.as_str(), message),
        });
    }
    events.extend(drift_event(node, drift_was, status, t));
    events.extend(super::requests::finish_requests(fleet, node, status, t));
    update(&mut fleet.nodes, node, |n| {
        // The same report again within the same second: the one stored stays (nothing is
        // written, and a report is kept in memory only until it is stored).
        if n.report.as_ref() != Some(status) || n.report_at != Some(t) {
            n.report = Some(status.clone());
            n.report_at = Some(t);
        }
        if release {
            n.release_slot(SlotHolder::Agent);
        }
    });
    fleet.record_events(events);
    Ok(())
}

/// The refusal of a claim of `node`'s name by a machine without its credential (`proof`: the
/// hash of the credential it sent), if the node is enrolled with another.
fn name_taken(fleet: &Fleet, node: &str, proof: Option<&str>) -> Option<ApiError> {
    let current = fleet.nodes.get(node)?.value.credential_sha256.clone()?;
    (proof != Some(current.as_str())).then(|| {
        ApiError::conflict(format!(
            "node {node} is already enrolled: enrolling it again needs its current credential \
             (Authorization: Bearer). If this machine is that node and lost it (reinstalled), \
             an admin runs `hearth node reset-credential {node}` and the node enrolls again; if \
             another machine holds the name, give this one another name (--node-name): a \
             reset while both run hands the name to whichever enrolls first"
        ))
    })
}

impl App {
    /// Notes a refused claim of `node`'s name: logged, and an event on the node when one is due
    /// ([`super::claims`]).
    async fn refused_claim(self: &Arc<Self>, node: &str, pool: &str, from: Option<&str>) {
        tracing::warn!(
            node,
            pool,
            from = from.unwrap_or("unknown"),
            "enrollment refused: the node's name is enrolled with another credential"
        );
        let due = self
            .refused_claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .note(node, pool, from, now());
        let Some(message) = due else {
            return;
        };
        let object = meta_object("Node", node);
        let recorded = self
            .group_commit(Box::new(move |fleet, t| {
                fleet.record_events(vec![EventRecord::warning(
                    t,
                    object.clone(),
                    "EnrollRefused",
                    message.clone(),
                )]);
                Ok(())
            }))
            .await;
        if let Err(e) = recorded {
            tracing::warn!(node, error = %e, "the refused enrollment's event was not recorded");
        }
    }
}

/// How an enrollment was placed.
enum Placed {
    /// The node is in the fleet copy: its labels and pool.
    Done(BTreeMap<String, String>, String),
    /// The node needs a full reconcile (its pool has no rendered config yet, or per-node
    /// overlays exist for it); nothing was changed.
    NeedsFull,
}

/// Enrolls a node into `fleet`. With `place`, also assigns its pool and target itself (so
/// that only a rollout, not a render of the whole fleet, has to follow); when that is not
/// possible, changes nothing and answers [`Placed::NeedsFull`].
fn enroll_node(
    fleet: &mut Fleet,
    token_pool: &str,
    req: &EnrollRequest,
    hash: &str,
    proof: Option<&str>,
    t: u64,
    place: bool,
) -> Result<Placed, ApiError> {
    if let Some(e) = name_taken(fleet, &req.node, proof) {
        return Err(e);
    }
    let existing = fleet.nodes.get(&req.node).map(|n| n.value.clone());
    let Some(token_pool_rec) = fleet.pools.get(token_pool) else {
        return Err(ApiError::forbidden(format!(
            "pool {token_pool:?} of this bootstrap token no longer exists"
        )));
    };
    let labels = match &existing {
        Some(n) if !n.labels.is_empty() => n.labels.clone(),
        _ if !req.labels.is_empty() => req.labels.clone(),
        _ => token_pool_rec.value.spec.node_selector.match_labels.clone(),
    };
    let pool = pool_of(fleet, &req.node, &labels).map_err(ApiError::forbidden)?;
    if pool != token_pool {
        return Err(ApiError::forbidden(format!(
            "node {} with labels {} belongs to pool {pool}, but the bootstrap token is for pool {token_pool}",
            req.node,
            format_labels(&labels)
        )));
    }
    let mut node = existing.clone().unwrap_or_else(|| NodeRecord {
        name: req.node.clone(),
        created_at: t,
        ..Default::default()
    });
    if place {
        let target = fleet
            .pools
            .get(&pool)
            .and_then(|p| p.value.status.target.clone());
        let overlays = fleet.mcs.values().any(|m| {
            m.value
                .metadata
                .labels
                .get(hearth_config::model::NODE_LABEL)
                == Some(&req.node)
        });
        let Some(target) = target.filter(|_| !overlays) else {
            return Ok(Placed::NeedsFull);
        };
        node.pool = Some(pool.clone());
        node.target = Some(target);
        node.error = None;
    }
    node.labels = labels.clone();
    let reenrolled = node.credential_sha256.is_some();
    node.credential_sha256 = Some(hash.to_string());
    node.enrolled_at = Some(t);
    put(&mut fleet.nodes, &req.node, node);
    // A first-boot token bound to this node has served its one purpose.
    fleet
        .tokens
        .remove(&crate::store::records::node_bootstrap_token_name(&req.node));
    fleet.record_events(vec![if reenrolled {
        EventRecord::warning(
            t,
            meta_object("Node", &req.node),
            "Enrolled",
            format!("enrolled again into pool {pool}; the previous credential was revoked"),
        )
    } else {
        EventRecord::normal(
            t,
            meta_object("Node", &req.node),
            "Enrolled",
            format!("enrolled into pool {pool}"),
        )
    }]);
    Ok(Placed::Done(labels, pool))
}

/// The pool a node named `node` with `labels` belongs to, by the pools' node selectors (the
/// built-in pools included); the error says why none or several.
pub(super) fn pool_of(
    fleet: &Fleet,
    node: &str,
    labels: &BTreeMap<String, String>,
) -> Result<String, String> {
    let models: Vec<_> = fleet.pools.values().map(|p| p.value.to_model()).collect();
    let pools = render::with_builtin_pools(&models);
    let probe = NodeRecord {
        name: node.to_string(),
        labels: labels.clone(),
        ..Default::default()
    };
    render::pool_for_node(&pools, &probe.to_model())
        .map(|p| p.name().to_string())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::put;

    fn report(state: &str) -> Report {
        Report::new(
            serde_json::from_value(serde_json::json!({"state": state, "current": "rendered-a"}))
                .unwrap(),
        )
    }

    /// The same report again within the same second keeps the one stored (no write, and no
    /// report held in memory after it was stored); another report, or another second, replaces it.
    #[test]
    fn the_same_report_in_the_same_second_keeps_the_stored_one() {
        let mut fleet = Fleet::default();
        let stored = report("Done");
        stored.release();
        put(
            &mut fleet.nodes,
            "n1",
            NodeRecord {
                name: "n1".into(),
                report: Some(stored.clone()),
                report_at: Some(100),
                report_revision: 7,
                ..Default::default()
            },
        );
        record_report(&mut fleet, "n1", &report("Done"), 100).unwrap();
        let kept = fleet.nodes["n1"].value.report.clone().unwrap();
        assert!(Report::ptr_eq(&kept, &stored));
        assert_eq!(kept.json(), None);
        record_report(&mut fleet, "n1", &report("Done"), 101).unwrap();
        let n = &fleet.nodes["n1"].value;
        assert!(!Report::ptr_eq(n.report.as_ref().unwrap(), &stored));
        assert_eq!(n.report_at, Some(101));
        let working = report("Working");
        record_report(&mut fleet, "n1", &working, 101).unwrap();
        assert!(Report::ptr_eq(
            fleet.nodes["n1"].value.report.as_ref().unwrap(),
            &working
        ));
    }
}
