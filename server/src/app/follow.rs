//! A replica's fleet follows the shared store (etcd): every change, whichever replica made it,
//! arrives through the store's change stream and is applied to the snapshot here, and only
//! here; a replica's own commits are published the same way (the commit waits until the
//! follower has applied its revision). So the snapshot is always the store at one revision, the
//! long-polls of nodes whose desired config changed wake on every replica, and a commit's fence
//! ([`crate::store::Store::commit_fenced`]) is the snapshot's revision.
//!
//! A replica cut off from etcd (its change stream down for longer than [`CUT_OFF_GRACE`], or its
//! session lost) says so: [`App::cut_off`] is the reason, and the server answers with it
//! (503) instead of serving what may be stale.

use super::state::{App, Replica};
use crate::error::ApiError;
use crate::fleet::{update, Fleet, Map, Rec};
use crate::store::etcd::session::{Role, SessionState};
use crate::store::records::{NodeRecord, Record, ReportRecord};
use crate::store::{Batch, Change, Link};
use crate::store::{Kind, Store};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How long the link to etcd may be down before the replica counts as cut off (a member dying
/// costs a reconnection of well under a second).
pub const CUT_OFF_GRACE: Duration = Duration::from_secs(5);
/// How long a commit waits for the follower to apply its revision (or the newer revision it
/// conflicted with).
pub(super) const APPLY_WAIT: Duration = Duration::from_secs(10);

/// Applies one change to a map; returns whether it changed anything.
fn apply_one<T: Record>(map: &mut Map<T>, c: &Change) -> bool {
    let current = map.get(&c.name).map(|r| r.mod_revision);
    match &c.value {
        None => {
            if current.is_some_and(|r| r < c.revision) {
                map.remove(&c.name);
                true
            } else {
                false
            }
        }
        Some(v) => {
            if current.is_some_and(|r| r >= v.mod_revision) {
                return false;
            }
            match serde_json::from_slice::<T>(&v.value) {
                Ok(value) => {
                    map.insert(
                        c.name.clone(),
                        Arc::new(Rec {
                            value,
                            create_revision: v.create_revision,
                            mod_revision: v.mod_revision,
                        }),
                    );
                    true
                }
                Err(e) => {
                    tracing::error!(kind = %c.kind, name = %c.name, error = %e, "a stored object written by another replica is unreadable; kept the previous one");
                    false
                }
            }
        }
    }
}

/// A node's document: [`apply_one`], keeping the report the node had (stored apart, it comes as
/// a change of its own), unless the new document carries one and no report was stored apart
/// (a document from before reports were apart, not yet rewritten).
fn apply_node(map: &mut Map<NodeRecord>, c: &Change) -> bool {
    let kept = map.get(&c.name).map(|r| {
        (
            r.value.report.clone(),
            r.value.report_at,
            r.value.report_revision,
        )
    });
    let changed = apply_one(map, c);
    if let (true, Some((report, report_at, revision))) = (changed, kept) {
        update(map, &c.name, |n| {
            if revision != 0 || n.report.is_none() {
                n.report = report;
                n.report_at = report_at;
                n.report_revision = revision;
            }
        });
    }
    changed
}

/// A node's report: into its node's record, if newer than the one it has.
fn apply_report(map: &mut Map<NodeRecord>, c: &Change) {
    let Some(current) = map.get(&c.name).map(|r| r.value.report_revision) else {
        return;
    };
    match &c.value {
        None if current < c.revision => {
            update(map, &c.name, |n| {
                n.report = None;
                n.report_at = None;
                n.report_revision = 0;
            });
        }
        None => {}
        Some(v) if current < v.mod_revision => {
            match serde_json::from_slice::<ReportRecord>(&v.value) {
                Ok(r) => {
                    update(map, &c.name, |n| n.take_report(r, v.mod_revision));
                }
                Err(e) => {
                    tracing::error!(name = %c.name, error = %e, "a stored report written by another replica is unreadable; kept the previous one");
                    update(map, &c.name, |n| n.report_revision = v.mod_revision);
                }
            }
        }
        Some(_) => {}
    }
}

impl App {
    /// Whether the store is shared with other replicas (and the snapshot follows it).
    pub fn is_replica(&self) -> bool {
        self.replica.get().is_some()
    }

    /// On a shared store: starts following its changes (from the snapshot's revision) and
    /// records the session and role to report. Nothing on the embedded store.
    pub fn start_following(
        self: &Arc<Self>,
        session: watch::Receiver<SessionState>,
        role: watch::Receiver<Role>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let (rx, link) = self.store.changes(self.snapshot().revision)?;
        let _ = self.replica.set(Replica {
            link: link.clone(),
            session: session.clone(),
            role,
        });
        let app = self.clone();
        // Long-polls waiting here end (503) once the replica counts as cut off, so that their
        // agents ask another replica at once instead of at the end of their wait.
        let cut = {
            let app = self.clone();
            let (mut link, mut session) = (link, session);
            async move {
                loop {
                    tokio::select! {
                        r = link.changed() => if r.is_err() { return },
                        r = session.changed() => if r.is_err() { return },
                    }
                    let lost = matches!(*session.borrow_and_update(), SessionState::Lost { .. });
                    let down = *link.borrow_and_update() != Link::Up;
                    if !lost && down {
                        // A link counts as cut only after its grace.
                        tokio::time::sleep(CUT_OFF_GRACE + Duration::from_millis(100)).await;
                    }
                    if (lost || down) && app.cut_off().is_some() {
                        app.notify_nodes(None);
                    }
                }
            }
        };
        tokio::spawn(cut);
        Some(tokio::spawn(async move { app.follow(rx).await }))
    }

    async fn follow(&self, mut rx: tokio::sync::mpsc::Receiver<Batch>) {
        while let Some(batch) = rx.recv().await {
            match batch {
                Batch::Changes { revision, changes } => self.apply_changes(revision, &changes),
                Batch::Reload => loop {
                    match Fleet::load(&self.store).await {
                        Ok(fresh) => {
                            self.install_reloaded(fresh);
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot read the fleet again from etcd; retrying");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                },
            }
        }
    }

    /// Applies a batch of changes to a copy of the snapshot and publishes it.
    fn apply_changes(&self, revision: u64, changes: &[Change]) {
        tracing::debug!(
            revision,
            changes = changes.len(),
            "applying the store's changes"
        );
        let old = self.snapshot();
        let mut new = (*old).clone();
        let (mut nodes, mut tokens) = (Vec::new(), Vec::new());
        // Nodes before reports: a report goes into its node's record.
        let (reports, others): (Vec<&Change>, Vec<&Change>) =
            changes.iter().partition(|c| c.kind == Kind::Report);
        for c in others {
            let changed = match c.kind {
                Kind::MachineConfig => apply_one(&mut new.mcs, c),
                Kind::Pool => apply_one(&mut new.pools, c),
                Kind::Node => apply_node(&mut new.nodes, c),
                Kind::Report => false,
                Kind::Rendered => apply_one(&mut new.rendered, c),
                Kind::Policies => apply_one(&mut new.policies, c),
                Kind::Token => apply_one(&mut new.tokens, c),
                Kind::Event => apply_one(new.events.map_mut(&c.name), c),
            };
            match c.kind {
                Kind::Node if changed => nodes.push(c.name.clone()),
                Kind::Token if changed => tokens.push(c.name.clone()),
                _ => {}
            }
        }
        for c in reports {
            apply_report(&mut new.nodes, c);
        }
        new.revision = new.revision.max(revision);
        self.publish(&old, Arc::new(new), &nodes, &tokens, revision);
    }

    /// Publishes `new` in place of `old` (the snapshot it was made from): the snapshot, then the
    /// credential and token indexes for the `nodes` and `tokens` named (after publishing: an
    /// index never names what the snapshot lacks), the long-polls of those nodes whose desired
    /// config, credential or requests changed, and the revision. One way for a process's own
    /// commits (embedded store) and for the changes a replica follows.
    pub(super) fn publish(
        &self,
        old: &Fleet,
        new: Arc<Fleet>,
        nodes: &[String],
        tokens: &[String],
        revision: u64,
    ) {
        let mut wake = Vec::new();
        let mut credentials = Vec::new();
        for name in nodes {
            let before = old.nodes.get(name).map(|n| &n.value);
            let after = new.nodes.get(name).map(|n| &n.value);
            let cred = |n: Option<&NodeRecord>| n.and_then(|n| n.credential_sha256.clone());
            let (cb, ca) = (cred(before), cred(after));
            let woken = match (before, after) {
                (Some(b), Some(a)) => {
                    cb != ca || b.desired != a.desired || b.requests.last_id != a.requests.last_id
                }
                (None, None) => false,
                _ => true,
            };
            if cb != ca {
                credentials.push((cb, ca, name.clone()));
            }
            if woken {
                wake.push(name.clone());
            }
        }
        // Before publishing: a long-poll may answer from the new snapshot at once, and the pacer
        // reckons a burst's report times from how many answers the change may bring.
        if !wake.is_empty() {
            self.pacer.woke(wake.len());
        }
        *self.fleet.write().unwrap_or_else(|e| e.into_inner()) = new.clone();
        self.reindex_tokens(old, &new, tokens.iter().map(String::as_str));
        if !credentials.is_empty() {
            let mut index = self.credentials.write().unwrap_or_else(|e| e.into_inner());
            for (before, after, name) in credentials {
                if let Some(h) = before {
                    index.remove(&h);
                }
                if let Some(h) = after {
                    index.insert(h, name);
                }
            }
        }
        if !wake.is_empty() {
            self.notify_nodes(Some(&wake));
        }
        self.applied.send_modify(|a| *a = (*a).max(revision));
    }

    /// Publishes a fleet read whole from the store (after a conflict, or when a replica's
    /// changes were compacted away): every index rebuilt, every long-poll woken. Its revision is
    /// never below the snapshot it replaces (it was read after that).
    pub(super) fn install_reloaded(&self, mut fresh: Fleet) {
        fresh.revision = fresh.revision.max(self.snapshot().revision);
        let revision = fresh.revision;
        // Every long-poll is woken: any node may have a new answer (a conservative count for
        // the pacer, at most its cap).
        self.pacer.woke(fresh.nodes.len());
        *self.credentials.write().unwrap_or_else(|e| e.into_inner()) = (*fresh.credentials).clone();
        self.index_all_tokens(&fresh);
        *self.fleet.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(fresh);
        self.notify_nodes(None);
        self.applied.send_modify(|a| *a = (*a).max(revision));
    }

    /// Waits until the published snapshot reflects `revision` (bounded); whether it does.
    pub(super) async fn wait_applied(&self, revision: u64) -> bool {
        let mut rx = self.applied.subscribe();
        let reached = tokio::time::timeout(APPLY_WAIT, rx.wait_for(|a| *a >= revision))
            .await
            .is_ok_and(|r| r.is_ok());
        reached
    }

    /// Why this replica must not serve now: cut off from etcd for longer than
    /// [`CUT_OFF_GRACE`], or without a session. `None` on the embedded store.
    pub fn cut_off(&self) -> Option<String> {
        let r = self.replica.get()?;
        // Said to anyone (`/healthz` is public): when, not etcd's own words (they may name its
        // addresses); those are in the replica's log.
        if let SessionState::Lost { since, .. } = &*r.session.borrow() {
            return Some(format!(
                "this replica lost its etcd session at {} (its log says why); another replica serves meanwhile",
                crate::time::rfc3339(*since)
            ));
        }
        match &*r.link.borrow() {
            Link::Down { since, .. }
                if crate::time::now().saturating_sub(*since) >= CUT_OFF_GRACE.as_secs() =>
            {
                Some(format!(
                    "this replica is cut off from etcd since {} (its log says why); another replica serves meanwhile",
                    crate::time::rfc3339(*since)
                ))
            }
            _ => None,
        }
    }

    /// [`App::cut_off`] as an error answer (503).
    pub fn check_linked(&self) -> Result<(), ApiError> {
        match self.cut_off() {
            Some(why) => Err(ApiError::replica_unavailable(why)),
            None => Ok(()),
        }
    }

    /// Whether this server does the periodic controller work: always on the embedded store;
    /// on etcd, the replica elected to the controller role.
    pub fn is_controller(&self) -> bool {
        match self.replica.get() {
            None => true,
            Some(r) => r.role.borrow().held,
        }
    }

    /// The replica's view for `/healthz`: the controller role and its holder (`None` on the
    /// embedded store).
    pub fn role(&self) -> Option<Role> {
        self.replica.get().map(|r| r.role.borrow().clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Versioned;

    fn change(kind: Kind, revision: u64, doc: Option<serde_json::Value>) -> Change {
        Change {
            kind,
            name: "n1".into(),
            value: doc.map(|d| Versioned {
                value: serde_json::to_vec(&d).unwrap(),
                create_revision: 1,
                mod_revision: revision,
            }),
            revision,
        }
    }

    fn report(state: &str, at: u64) -> serde_json::Value {
        serde_json::json!({"report": {"state": state}, "reportAt": at})
    }

    fn state(map: &Map<NodeRecord>) -> Option<(String, u64)> {
        let n = &map.get("n1")?.value;
        Some((
            n.report.as_ref()?.state.as_str().to_string(),
            n.report_revision,
        ))
    }

    /// What another replica wrote, applied as a replica does: a node's document keeps the
    /// report stored apart; a report goes into its node if newer; a stale one, or one for a
    /// node this replica does not have, changes nothing; a document from before reports were
    /// apart brings its own until a report is stored apart; a delete takes the report away.
    #[test]
    fn a_replica_keeps_a_nodes_report_apart_from_its_document() {
        let mut map: Map<NodeRecord> = Map::new();
        apply_report(&mut map, &change(Kind::Report, 3, Some(report("Done", 1))));
        assert!(map.is_empty(), "no node, no report");

        // A document from before: its own report.
        let legacy =
            serde_json::json!({"name": "n1", "createdAt": 1, "report": {"state": "Working"}});
        assert!(apply_node(&mut map, &change(Kind::Node, 4, Some(legacy))));
        assert_eq!(state(&map), Some(("Working".into(), 0)));
        // A report stored apart replaces it; the document rewritten without it keeps it.
        apply_report(&mut map, &change(Kind::Report, 5, Some(report("Done", 2))));
        assert_eq!(state(&map), Some(("Done".into(), 5)));
        let doc = serde_json::json!({"name": "n1", "createdAt": 1, "desired": "rendered-b"});
        assert!(apply_node(&mut map, &change(Kind::Node, 6, Some(doc))));
        assert_eq!(state(&map), Some(("Done".into(), 5)));
        assert_eq!(map["n1"].value.desired.as_deref(), Some("rendered-b"));
        // Stale (already applied), then newer.
        apply_report(
            &mut map,
            &change(Kind::Report, 5, Some(report("Degraded", 3))),
        );
        assert_eq!(state(&map), Some(("Done".into(), 5)));
        apply_report(
            &mut map,
            &change(Kind::Report, 7, Some(report("Degraded", 3))),
        );
        assert_eq!(state(&map), Some(("Degraded".into(), 7)));
        assert_eq!(map["n1"].value.report_at, Some(3));
        // Deleted: the report, then the node.
        apply_report(&mut map, &change(Kind::Report, 8, None));
        assert_eq!(state(&map), None);
        assert_eq!(map["n1"].value.report_revision, 0);
        assert!(apply_node(&mut map, &change(Kind::Node, 8, None)));
        assert!(map.is_empty());
    }
}
