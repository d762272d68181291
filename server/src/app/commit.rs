//! The commit path: every change goes through [`App::mutate`] (or a group commit of small
//! changes), which changes a copy of the fleet, reconciles it, commits the difference to the
//! store in one transaction, publishes the copy and wakes the nodes whose desired config or
//! credential changed.

use super::state::{App, GroupOp, Pending, RENDER_ATTEMPTS};
use crate::controller::memo::RenderMemo;
use crate::controller::{self, Kept, Scope};
use crate::error::ApiError;
use crate::fleet::Fleet;
use crate::store::{Kind, Op, Store, StoreError};
use crate::time::now;
use std::sync::Arc;
use tokio::sync::oneshot;

/// How long a change on a shared store is decided again and again while other replicas commit
/// first (each attempt waits until this replica has seen that commit, then a moment more:
/// replicas that lost a race do not all try again at the same instant). Under a burst of
/// reports through every replica some attempts lose several times in a row; a bound in time,
/// not in attempts, keeps that from failing requests.
const SHARED_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

impl App {
    /// An admin's turn: every change an admin makes (an apply, a delete, a label, a pause, a
    /// hold, a rollback, a request, a token) takes it before it reads its manifests or renders
    /// and keeps it until it is committed, so admins' changes land in the order they arrived (a
    /// fair lock: first come, first served). Without it an apply that took longer to read or
    /// render (a larger one, or one whose client hung up and whose change goes on) was
    /// committed after a later change and undid it: a pause, or the apply that corrected it.
    /// Nodes' requests (enrollments, reports, slots) and the tick take no turn.
    pub(super) async fn admin_turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        if let Ok(turn) = self.admin_order.try_lock() {
            return turn;
        }
        // Counted while it waits (`hearth_server_admin_changes_waiting`), also when its
        // client hangs up meanwhile.
        struct Waiting(prometheus_client::metrics::gauge::Gauge);
        impl Drop for Waiting {
            fn drop(&mut self) {
                self.0.dec();
            }
        }
        let gauge = self.metrics.admin_changes_waiting();
        gauge.inc();
        let _waiting = Waiting(gauge);
        self.admin_order.lock().await
    }

    /// Wakes the long-polls of `nodes` (all of them when `None`), and forgets channels nobody
    /// waits on.
    pub(super) fn notify_nodes(&self, nodes: Option<&[String]>) {
        let mut m = self.node_watch.lock().unwrap_or_else(|e| e.into_inner());
        match nodes {
            None => {
                m.retain(|_, tx| tx.receiver_count() > 0);
                for tx in m.values() {
                    tx.send_modify(|v| *v += 1);
                }
            }
            Some(nodes) => {
                for n in nodes {
                    if let Some(tx) = m.get(n) {
                        if tx.receiver_count() == 0 {
                            m.remove(n);
                        } else {
                            tx.send_modify(|v| *v += 1);
                        }
                    }
                }
            }
        }
    }

    /// Commits `op` together with the other changes that arrive while a commit is under way:
    /// one controller run, one store transaction (one fsync) for the whole group, and each
    /// caller's answer only after that commit. Under load, status reports and enrollments
    /// thus cost one commit per group instead of one each; alone, a change is committed at
    /// once. Only for changes that need no render (`Scope::Rollout`).
    ///
    /// The caller that finds no group under way commits the next one in a task of its own:
    /// the group's commit, and the answers of its other members, do not depend on that
    /// caller's connection (a client that hangs up must not fail its neighbours' reports, nor
    /// leave a transaction stored but not published). Its own change is committed even then.
    pub(super) async fn group_commit(self: &Arc<Self>, op: GroupOp) -> Result<(), ApiError> {
        let (done, mut rx) = oneshot::channel();
        self.group
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Pending { op, done });
        // Either a group under way takes this change (its outcome arrives on `rx`), or this
        // caller becomes the one who commits the next group. The outcome is awaited beside the
        // lock, not after it: waiting for the lock only to find the answer there made every
        // member of a group take the lock in turn, one wake-up after another on a busy runtime
        // (hundreds of milliseconds at 10,000 agents, for commits of a few).
        let guard = tokio::select! {
            biased;
            r = &mut rx => {
                return r.unwrap_or_else(|_| Err(ApiError::internal("a group commit was abandoned")))
            }
            guard = self.group_flush.clone().lock_owned() => guard,
        };
        match rx.try_recv() {
            // A previous group took this change.
            Ok(r) => return r,
            Err(oneshot::error::TryRecvError::Closed) => {
                return Err(ApiError::internal("a group commit was abandoned"))
            }
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
        let pending = std::mem::take(&mut *self.group.lock().unwrap_or_else(|e| e.into_inner()));
        let app = Arc::clone(self);
        self.background.spawn(async move {
            app.commit_group(pending).await;
            drop(guard);
        });
        rx.await
            .unwrap_or_else(|_| Err(ApiError::internal("a group commit was abandoned")))
    }

    /// Commits the changes of one group together and sends each its outcome.
    async fn commit_group(&self, mut pending: Vec<Pending>) {
        self.metrics.group(pending.len());
        let mut results: Vec<Result<(), ApiError>> = Vec::with_capacity(pending.len());
        let outcome = self
            .mutate(Scope::Rollout, false, |fleet, t| {
                results.clear();
                for p in pending.iter_mut() {
                    results.push((p.op)(fleet, t));
                }
                Ok(())
            })
            .await;
        let mut results = results.into_iter();
        for p in pending {
            let r = match &outcome {
                Ok(()) => results
                    .next()
                    .unwrap_or_else(|| Err(ApiError::internal("a group commit lost a result"))),
                Err(e) => Err(e.clone()),
            };
            let _ = p.done.send(r);
        }
    }

    /// Changes the fleet: `f` edits a copy, the controller reconciles it (`scope`), the
    /// difference is committed in one transaction. A conflict with another writer reloads the
    /// fleet from the store and runs `f` again (up to three times).
    ///
    /// A change that needs a render ([`Scope::Full`]) renders first, outside the writer lock
    /// and on a blocking thread ([`crate::controller::memo`]): status reports, enrollments, reboot
    /// slots and FleetLock, which commit under that lock, never wait for a render. (Admins'
    /// changes also wait for their turn: [`App::admin_turn`].)
    pub async fn mutate<T>(
        &self,
        scope: Scope,
        dry_run: bool,
        mut f: impl FnMut(&mut Fleet, u64) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        if scope == Scope::Rollout {
            return self
                .mutate_locked(scope, dry_run, &mut f, None)
                .await
                .and_then(|o| o.ok_or_else(|| ApiError::internal("a rollout needed a render")));
        }
        let mut memo = RenderMemo::computing().with_gate(self.options.render_gate.clone());
        for _ in 0..RENDER_ATTEMPTS {
            let mut copy = (*self.snapshot()).clone();
            let t = now();
            f(&mut copy, t)?;
            memo.compute_again();
            let mut plans = self
                .reboot_plans
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let settings = self.options.settings.clone();
            let plans_made;
            (memo, plans_made) = tokio::task::spawn_blocking(move || {
                controller::prerender(copy, t, &settings, &mut memo, &mut plans);
                (memo, plans)
            })
            .await
            .map_err(|e| ApiError::internal(format!("rendering failed: {e}")))?;
            self.reboot_plans
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .merge(plans_made);
            memo.lookup_only();
            if let Some(out) = self
                .mutate_locked(scope, dry_run, &mut f, Some(&mut memo))
                .await?
            {
                return Ok(out);
            }
            tracing::info!("the fleet changed while rendering; rendering again");
        }
        Err(ApiError::conflict(format!(
            "the MachineConfigs, pools or labels changed while this change was being rendered, {RENDER_ATTEMPTS} times; try again"
        )))
    }

    /// [`App::mutate`] under the writer lock; with a lookup-only `memo` that misses (the
    /// inputs changed since they were rendered), nothing is committed and the answer is `None`.
    async fn mutate_locked<T>(
        &self,
        scope: Scope,
        dry_run: bool,
        f: &mut impl FnMut(&mut Fleet, u64) -> Result<T, ApiError>,
        mut memo: Option<&mut RenderMemo>,
    ) -> Result<Option<T>, ApiError> {
        let _guard = self.write.lock().await;
        let started = std::time::Instant::now();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let tried = std::time::Instant::now();
            let old = self.snapshot();
            let mut new = (*old).clone();
            let t = now();
            let out = f(&mut new, t)?;
            let silent = self.silent(&new);
            let mut computing = RenderMemo::computing();
            let memo_now = match memo.as_deref_mut() {
                Some(m) => m,
                None => &mut computing,
            };
            let events = {
                let mut plans = self.reboot_plans.lock().unwrap_or_else(|e| e.into_inner());
                let mut index = self.pool_index.lock().unwrap_or_else(|e| e.into_inner());
                let before = plans.made();
                let events = controller::reconcile_memo(
                    &mut new,
                    scope,
                    t,
                    &self.options.settings,
                    &silent,
                    Kept {
                        memo: memo_now,
                        plans: &mut plans,
                        index: &mut index,
                    },
                );
                self.metrics.plans_under_lock(plans.made() - before);
                events
            };
            if memo_now.missed() {
                return Ok(None);
            }
            new.record_events(events);
            let ops = new.diff(&old)?;
            if dry_run || ops.is_empty() {
                return Ok(Some(out));
            }
            let decided = std::time::Instant::now();
            let decide = decided.saturating_duration_since(tried);
            if self.is_replica() {
                // Shared store: fenced on this snapshot's revision; published by the follower.
                self.check_linked()?;
                match self.store.commit_fenced(ops.clone(), old.revision).await {
                    Ok(revision) => {
                        self.metrics.commit(decide, decided.elapsed());
                        crate::telemetry::logging::committed_events(
                            &new.events.take_recorded(),
                            &self.node_event_log,
                        );
                        if !self.wait_applied(revision).await {
                            tracing::warn!(revision, "committed, but this replica's view has not caught up with its own commit yet");
                        }
                        return Ok(Some(out));
                    }
                    Err(e @ (StoreError::Behind { .. } | StoreError::Conflict { .. }))
                        if started.elapsed() < SHARED_DEADLINE =>
                    {
                        // Another replica committed first: decide again on the fleet as it is.
                        self.metrics.conflict();
                        let newer = match e {
                            StoreError::Behind { revision } => revision,
                            _ => self.store.revision(),
                        };
                        tracing::debug!(newer, "another replica committed first; deciding again");
                        if !self.wait_applied(newer).await {
                            return Err(ApiError::replica_unavailable(format!(
                                "this replica's view of the fleet lags behind etcd (revision {newer} not reached within {} s); try again or use another replica",
                                super::follow::APPLY_WAIT.as_secs()
                            )));
                        }
                        // A pause of 0 to 4 ms, different each time (the clock's nanoseconds).
                        let jitter = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.subsec_nanos() % 4_000_000);
                        tokio::time::sleep(std::time::Duration::from_nanos(u64::from(jitter)))
                            .await;
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            match self.store.commit(ops.clone()).await {
                Ok(revision) => {
                    self.metrics.commit(decide, decided.elapsed());
                    // Logged, and not kept in the snapshot.
                    crate::telemetry::logging::committed_events(
                        &new.events.take_recorded(),
                        &self.node_event_log,
                    );
                    // The stamp changes revisions only; the pools' counts hold for the stamped
                    // map, which the index must not share while it is stamped.
                    let counted = self
                        .pool_index
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .set_aside(&new.nodes);
                    new.stamp(&ops, revision);
                    if let Some(counted) = counted {
                        self.pool_index
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .restamped(counted, &new.nodes);
                    }
                    let named = |kind: Kind| -> Vec<String> {
                        ops.iter()
                            .filter_map(|op| match op {
                                Op::Put { kind: k, name, .. }
                                | Op::Delete { kind: k, name, .. }
                                    if *k == kind =>
                                {
                                    Some(name.clone())
                                }
                                _ => None,
                            })
                            .collect()
                    };
                    self.publish(
                        &old,
                        Arc::new(new),
                        &named(Kind::Node),
                        &named(Kind::Token),
                        revision,
                    );
                    return Ok(Some(out));
                }
                Err(StoreError::Conflict { .. }) if attempts < 3 => {
                    self.metrics.conflict();
                    tracing::warn!("store conflict: reloading the fleet and retrying");
                    let fresh = Fleet::load(&self.store).await?;
                    self.install_reloaded(fresh);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// A store's failure as an operation's: a conflict (another writer, or a newer revision) is
/// one to try again, anything else leaves the server unable to act now.
impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        match e {
            crate::store::StoreError::Conflict { .. } | crate::store::StoreError::Behind { .. } => {
                ApiError::conflict(format!(
                    "{e}; another writer changed the object first, try again"
                ))
            }
            other => ApiError::unavailable(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::Options;
    use crate::store::backend::Backend;
    use crate::store::records::NodeRecord;
    use crate::store::RedbStore;
    use crate::test_util::until;

    /// A change that adds node `name`.
    fn add_node(name: &'static str) -> GroupOp {
        Box::new(move |fleet, t| {
            crate::fleet::put(
                &mut fleet.nodes,
                name,
                NodeRecord {
                    name: name.into(),
                    created_at: t,
                    ..Default::default()
                },
            );
            Ok(())
        })
    }

    #[tokio::test]
    async fn a_group_is_committed_and_answered_when_the_caller_committing_it_hangs_up() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(&dir.path().join("fleet.redb")).unwrap();
        let app = Arc::new(
            App::new(Backend::Embedded(store), Options::default(), String::new())
                .await
                .unwrap(),
        );
        let queued = |n: usize| {
            let app = app.clone();
            move || app.group.lock().unwrap().len() == n
        };
        // A group under way (the test holds its lock): `a`, then `b`, wait for the next one.
        let flush = app.group_flush.clone().lock_owned().await;
        let a = tokio::spawn({
            let app = app.clone();
            async move { app.group_commit(add_node("a")).await }
        });
        until("a waits", queued(1)).await;
        let b = tokio::spawn({
            let app = app.clone();
            async move { app.group_commit(add_node("b")).await }
        });
        until("b waits", queued(2)).await;
        // The group ends; `a`, first in line, commits the next one (both changes), which waits
        // for the writer lock the test holds. Then `a`'s client hangs up.
        let write = app.write.lock().await;
        drop(flush);
        until("a takes both changes", queued(0)).await;
        a.abort();
        assert!(a.await.unwrap_err().is_cancelled());
        drop(write);

        b.await
            .unwrap()
            .expect("b's change is committed, though a's request is gone");
        let fleet = app.snapshot();
        assert!(fleet.nodes.contains_key("a") && fleet.nodes.contains_key("b"));
        let stored = Fleet::load(&app.store).await.unwrap();
        assert!(stored.nodes.contains_key("a") && stored.nodes.contains_key("b"));
        assert_eq!(stored.revision, fleet.revision);
    }
}
