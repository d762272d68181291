//! An admin's one-off requests to a node: `hearth node force` (re-apply its config over drift,
//! the MCO's force file) and `hearth node restore-file` (put one managed file back). Each is one
//! commit and an event naming the admin; it gets the node's next id, is carried in the node's
//! desired-config answer until the node reports it done (`AgentStatus::requestsDone`), and
//! then ends with an event of the node's outcome. The agent acts on each id once.

use super::state::{meta_object, App};
use crate::controller::Scope;
use crate::error::ApiError;
use crate::fleet::{update, Fleet};
use crate::store::records::{EventRecord, Hold, NodeRecord, RequestFinish, RequestRecord};
use hearth_api::{NodeRequest, RequestAction, RequestAnswer};
use hearth_config::ignition::Config;

/// Requests a node may have pending: a node that does not take them (offline, or not
/// following the server) does not pile them up.
pub const MAX_PENDING_REQUESTS: usize = 8;
/// Finished requests kept per node (its view shows them).
pub const MAX_FINISHED_REQUESTS: usize = 8;
/// The longest path a restore request may name (Linux's `PATH_MAX`).
pub const MAX_REQUEST_PATH: usize = 4096;

/// The paths a config writes with known contents, as the agent can put them back: its files
/// (not those appended to), the unit files it writes and the drop-ins.
fn restorable(config: &Config, path: &str) -> bool {
    hearth_config::paths::written(config)
        .iter()
        .any(|w| w.path == path && w.has_known_contents())
}

/// The requests of `node` to carry in its desired answer: those pending with an id above what
/// it reported `done`.
pub fn requests_for(node: &NodeRecord, done: u64) -> Vec<NodeRequest> {
    node.requests
        .pending()
        .filter(|r| r.id > done)
        .map(|r| NodeRequest {
            id: r.id,
            action: r.action,
            path: r.path.clone(),
        })
        .collect()
}

fn what(action: RequestAction, path: Option<&str>) -> String {
    match (action, path) {
        (RequestAction::Force, _) => "re-apply of its config in full (force)".into(),
        (RequestAction::RestoreFile, Some(p)) => format!("restore of {p}"),
        (RequestAction::RestoreFile, None) => "restore".into(),
    }
}

impl App {
    /// Asks node `name` to act once on `action` (`path`: the file to restore) on behalf of `by`.
    pub async fn request_node(
        &self,
        name: &str,
        action: RequestAction,
        path: Option<String>,
        by: &str,
    ) -> Result<RequestAnswer, ApiError> {
        let _turn = self.admin_turn().await;
        if let Some(p) = &path {
            if p.len() > MAX_REQUEST_PATH || !p.starts_with('/') || p.contains('\0') {
                return Err(ApiError::bad_request(format!(
                    "path: {:?} is not an absolute path of at most {MAX_REQUEST_PATH} bytes",
                    crate::text::cut(p, 256)
                )));
            }
        }
        self.mutate(Scope::Rollout, false, |fleet, t| {
            let Some(node) = fleet.nodes.get(name).map(|n| n.value.clone()) else {
                return Err(ApiError::not_found(format!("node {name:?} not found")));
            };
            if let Some(p) = &path {
                check_managed(fleet, &node, p)?;
            }
            let answer = |id, outcome: &str| RequestAnswer {
                kind: "Node".into(),
                name: name.to_string(),
                id,
                action,
                path: path.clone(),
                outcome: outcome.into(),
            };
            // The same request still pending: it is the one.
            if let Some(same) = node
                .requests
                .pending()
                .find(|r| r.action == action && r.path == path)
            {
                return Ok(answer(same.id, "unchanged"));
            }
            let pending = node.requests.pending().count();
            if pending >= MAX_PENDING_REQUESTS {
                return Err(ApiError::conflict(format!(
                    "node {name} has {pending} requests pending, the most a node may have \
                     ({MAX_PENDING_REQUESTS}): wait until it reports them done (`hearth describe \
                     node {name}` lists them; an agent that does not follow the server never will)"
                )));
            }
            // Above what the node reported too: a node deleted and enrolled again keeps its
            // journal, and would take a reused id for one it already acted on.
            let reported = node.report.as_ref().map_or(0, |r| r.requests_done);
            let id = node.requests.last_id.max(reported) + 1;
            update(&mut fleet.nodes, name, |n| {
                n.requests.last_id = id;
                n.requests.items.push(RequestRecord {
                    id,
                    action,
                    path: path.clone(),
                    hold: Hold {
                        by: by.to_string(),
                        at: t,
                    },
                    finished: None,
                });
            });
            fleet.record_events(vec![EventRecord::normal(
                t,
                meta_object("Node", name),
                match action {
                    RequestAction::Force => "ForceRequested",
                    RequestAction::RestoreFile => "RestoreFileRequested",
                },
                format!(
                    "{} requested by {by} (request {id}); the node acts on it once",
                    what(action, path.as_deref())
                ),
            )]);
            Ok(answer(id, "requested"))
        })
        .await
    }
}

/// Refuses a path the node's current config does not write, naming it and the config.
fn check_managed(fleet: &Fleet, node: &NodeRecord, path: &str) -> Result<(), ApiError> {
    let name = &node.name;
    let Some(current) = node.report.as_ref().and_then(|r| r.current.clone()) else {
        return Err(ApiError::conflict(format!(
            "node {name} has not reported a current config yet: there is nothing to restore \
             {path} from"
        )));
    };
    let Some(rendered) = fleet.rendered.get(&current) else {
        return Err(ApiError::conflict(format!(
            "node {name}'s current config {current} is not stored on this server: cannot check \
             that it manages {path}"
        )));
    };
    if !restorable(&rendered.value.spec.config, path) {
        return Err(ApiError::bad_request(format!(
            "path: {path} is not managed by node {name}'s current config {current} (restore-file \
             puts back only what the config writes: its files, unit files and drop-ins; `hearth \
             get mc {current} -o yaml` lists them)"
        )));
    }
    Ok(())
}

/// Finishes the requests of `node` that its report says are done, with an event each; keeps
/// the last [`MAX_FINISHED_REQUESTS`] finished ones.
pub(super) fn finish_requests(
    fleet: &mut Fleet,
    node: &str,
    status: &crate::store::report::Summary,
    t: u64,
) -> Vec<EventRecord> {
    let Some(n) = fleet.nodes.get(node) else {
        return Vec::new();
    };
    let done = status.requests_done;
    if !n.value.requests.pending().any(|r| r.id <= done) {
        return Vec::new();
    }
    let mut events = Vec::new();
    update(&mut fleet.nodes, node, |n| {
        for r in n.requests.items.iter_mut() {
            if r.finished.is_some() || r.id > done {
                continue;
            }
            let result = status.request_results.iter().rev().find(|x| x.id == r.id);
            let (ok, message) = match result {
                Some(x) => (x.ok, x.message.clone()),
                None => (false, "the node reported it done without an outcome".into()),
            };
            let reason = match (r.action, ok) {
                (RequestAction::Force, true) => "ForceDone",
                (RequestAction::Force, false) => "ForceFailed",
                (RequestAction::RestoreFile, true) => "FileRestored",
                (RequestAction::RestoreFile, false) => "RestoreFileFailed",
            };
            let text = format!(
                "{} (request {}, by {}): {message}",
                what(r.action, r.path.as_deref()),
                r.id,
                r.hold.by
            );
            let object = meta_object("Node", node);
            events.push(if ok {
                EventRecord::normal(t, object, reason, text)
            } else {
                EventRecord::warning(t, object, reason, text)
            });
            r.finished = Some(RequestFinish { ok, message, at: t });
        }
        let finished = n
            .requests
            .items
            .iter()
            .filter(|r| r.finished.is_some())
            .count();
        let mut drop = finished.saturating_sub(MAX_FINISHED_REQUESTS);
        n.requests.items.retain(|r| {
            if drop > 0 && r.finished.is_some() {
                drop -= 1;
                false
            } else {
                true
            }
        });
    });
    events
}
