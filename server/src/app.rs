//! The server's state and its operations: every change goes through [`App::mutate`], which
//! changes a copy of the fleet, reconciles it, commits the difference to the store in one
//! transaction and only then publishes the copy. Reads use the published snapshot.

use crate::api::{
    AgentStatus, DesiredConfig, EnrollRequest, EnrollResponse, NodeState, SlotAction, SlotAnswer,
};
use crate::controller::{self, Scope, Settings};
use crate::error::ApiError;
use crate::fleet::{put, update, Fleet, POLICIES_NAME};
use crate::metrics::Metrics;
use crate::pki::{self, Layout};
use crate::records::{
    bootstrap_token_name, EventRecord, McRecord, NodeRecord, PoliciesRecord, PoolRecord,
    SlotHolder, TokenRecord, TokenScope, ADMIN_TOKEN,
};
use crate::render_memo::{RebootPlans, RenderMemo};
use crate::store::{Store, StoreError};
use crate::time::now;
use hearth_config::diag::Diagnostic;
use hearth_config::manifest::{check_object_name, read_str, Manifests};
use hearth_config::render;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// Server settings that are not the store's.
#[derive(Debug, Clone)]
pub struct Options {
    /// Controller settings.
    pub settings: Settings,
    /// The URL first-booting nodes are told to use (none: from the request's `Host`).
    pub advertise_url: Option<String>,
    /// The longest long-poll.
    pub max_wait: Duration,
    /// A node not heard from for this long is not ready, and unavailable for rollouts.
    pub stale_after: Duration,
    /// How often rollouts are re-evaluated without any change (for nodes going silent or
    /// coming back).
    pub tick: Duration,
    /// An ostree repository (archive mode) served to authenticated nodes and admins under
    /// `/ostree/repo/` (`--ostree-repo`), for OS image pivots without another server.
    pub ostree_repo: Option<std::path::PathBuf>,
    /// For tests only: a directory; while `<dir>/hold` exists, every render writes
    /// `<dir>/rendering` and waits ([`RenderMemo::with_gate`]).
    pub render_gate: Option<std::path::PathBuf>,
    /// How long a bootstrap token is valid when nobody says otherwise: the built-in pools'
    /// tokens made at start and `POST /api/v1/pools/{name}/bootstrap-token` without
    /// `ttlSeconds` (`--bootstrap-token-ttl`; `None`: never expires).
    pub bootstrap_ttl: Option<Duration>,
    /// Where each pool's current bootstrap token is written (`<state-dir>/tokens`), so that the
    /// file stays the valid token after a rotation; `None`: nowhere.
    pub token_dir: Option<std::path::PathBuf>,
    /// A sha256 (hex) of the metrics token (`<state-dir>/metrics.token`), which may read
    /// `/metrics` and nothing else.
    pub metrics_token_sha256: Option<String>,
}

/// The default lifetime of a bootstrap token: 24 hours.
pub const DEFAULT_BOOTSTRAP_TTL: Duration = Duration::from_secs(24 * 3600);

impl Default for Options {
    fn default() -> Self {
        Options {
            settings: Settings::default(),
            advertise_url: None,
            max_wait: Duration::from_secs(300),
            stale_after: Duration::from_secs(600),
            tick: Duration::from_secs(10),
            ostree_repo: None,
            render_gate: None,
            bootstrap_ttl: Some(DEFAULT_BOOTSTRAP_TTL),
            token_dir: None,
            metrics_token_sha256: None,
        }
    }
}

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The admin token.
    Admin,
    /// A node, by its credential.
    Node(String),
    /// A pool's bootstrap token (the token itself is kept to embed it in first-boot configs).
    Bootstrap {
        /// The pool.
        pool: String,
        /// The token.
        token: String,
    },
}

/// One file of an apply.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct ApplyFile {
    /// File name (for diagnostics).
    pub name: String,
    /// Its text (YAML or JSON).
    pub text: String,
}

/// What an apply did to one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyResult {
    /// `MachineConfig`, `MachineConfigPool`, `Node`, `MachineConfiguration`.
    pub kind: String,
    /// Name.
    pub name: String,
    /// `created`, `configured` or `unchanged`.
    pub action: String,
}

/// The answer to an apply.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyOutcome {
    /// Per object, in the order read.
    pub results: Vec<ApplyResult>,
    /// Warnings (unknown fields, ignored settings).
    pub warnings: Vec<Diagnostic>,
    /// Each pool's target after the apply.
    pub pools: Vec<PoolTarget>,
    /// True when nothing was stored (dry run).
    pub dry_run: bool,
}

/// A pool's target after an apply.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolTarget {
    /// Pool.
    pub name: String,
    /// Target rendered config.
    pub target: Option<String>,
    /// Why rendering failed.
    pub render_error: Option<String>,
}

/// How often a change is rendered again when the fleet changed while it was being rendered.
const RENDER_ATTEMPTS: usize = 5;

/// Encoded desired-config answers by rendered name, valid for one policies revision.
type BodyCache = (u64, HashMap<String, Arc<Vec<u8>>>);

/// A desired config's name and its encoded answer.
pub type DesiredBody = (String, Arc<Vec<u8>>);

/// One change of a group commit ([`App::group_commit`]). It must leave the fleet untouched
/// when it returns an error (the others of its group are committed without it).
type GroupOp = Box<dyn FnMut(&mut Fleet, u64) -> Result<(), ApiError> + Send>;

/// A change waiting for the next group commit, and where its outcome goes.
struct Pending {
    op: GroupOp,
    done: oneshot::Sender<Result<(), ApiError>>,
}

/// The server state.
pub struct App<S: Store> {
    store: S,
    fleet: RwLock<Arc<Fleet>>,
    write: tokio::sync::Mutex<()>,
    desired_tx: watch::Sender<u64>,
    /// Options.
    pub options: Options,
    /// The fleet CA (PEM).
    pub ca_pem: String,
    /// Counters.
    pub metrics: Metrics,
    last_seen: Mutex<HashMap<String, u64>>,
    body_cache: Mutex<BodyCache>,
    /// Per node: ticks when that node's desired config or credential changes (long-polls wait
    /// on their own node's channel, so a change wakes only the nodes it concerns).
    node_watch: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// Changes waiting for the next group commit.
    group: Mutex<Vec<Pending>>,
    /// Held by whoever is committing a group.
    group_flush: tokio::sync::Mutex<()>,
    /// Node credential hash → node name, kept up to date change by change after each commit
    /// (rebuilding it from the snapshot on every enrollment was O(fleet)); the snapshot's own
    /// `Fleet::credentials` is only read when the fleet is loaded.
    credentials: RwLock<HashMap<String, String>>,
    /// Which updates need a reboot, kept across reconciles ([`RebootPlans`]).
    reboot_plans: Mutex<RebootPlans>,
}

impl<S: Store> std::fmt::Debug for App<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("revision", &self.snapshot().revision)
            .finish()
    }
}

fn meta_object(kind: &str, name: &str) -> String {
    format!("{kind}/{name}")
}

impl<S: Store> App<S> {
    /// Loads the fleet from `store`.
    pub async fn new(store: S, options: Options, ca_pem: String) -> Result<App<S>, StoreError> {
        let fleet = Fleet::load(&store).await?;
        let credentials = RwLock::new((*fleet.credentials).clone());
        let (desired_tx, _) = watch::channel(0);
        Ok(App {
            store,
            fleet: RwLock::new(Arc::new(fleet)),
            write: tokio::sync::Mutex::new(()),
            desired_tx,
            options,
            ca_pem,
            metrics: Metrics::default(),
            last_seen: Mutex::new(HashMap::new()),
            body_cache: Mutex::new((0, HashMap::new())),
            node_watch: Mutex::new(HashMap::new()),
            group: Mutex::new(Vec::new()),
            group_flush: tokio::sync::Mutex::new(()),
            credentials,
            reboot_plans: Mutex::new(RebootPlans::default()),
        })
    }

    /// The published snapshot.
    pub fn snapshot(&self) -> Arc<Fleet> {
        self.fleet.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Ticks whenever some node's desired config changes (or a node goes away).
    pub fn desired_watch(&self) -> watch::Receiver<u64> {
        self.desired_tx.subscribe()
    }

    /// Ticks whenever `node`'s desired config or credential changes, or the node goes away.
    pub fn node_desired_watch(&self, node: &str) -> watch::Receiver<u64> {
        let mut m = self.node_watch.lock().unwrap_or_else(|e| e.into_inner());
        match m.get(node) {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = watch::channel(0);
                m.insert(node.to_string(), tx);
                rx
            }
        }
    }

    /// Wakes the long-polls of `nodes` (all of them when `None`), and forgets channels nobody
    /// waits on.
    fn notify_nodes(&self, nodes: Option<&[String]>) {
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
    async fn group_commit(&self, op: GroupOp) -> Result<(), ApiError> {
        let (done, mut rx) = oneshot::channel();
        self.group
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Pending { op, done });
        let guard = self.group_flush.lock().await;
        match rx.try_recv() {
            // A previous group took this change.
            Ok(r) => return r,
            Err(oneshot::error::TryRecvError::Closed) => {
                return Err(ApiError::internal("a group commit was abandoned"))
            }
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
        let mut pending =
            std::mem::take(&mut *self.group.lock().unwrap_or_else(|e| e.into_inner()));
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
        drop(guard);
        rx.await
            .unwrap_or_else(|_| Err(ApiError::internal("a group commit was abandoned")))
    }

    /// Changes the fleet: `f` edits a copy, the controller reconciles it (`scope`), the
    /// difference is committed in one transaction. A conflict with another writer reloads the
    /// fleet from the store and runs `f` again (up to three times).
    ///
    /// A change that needs a render ([`Scope::Full`]) renders first, outside the writer lock
    /// and on a blocking thread ([`crate::render_memo`]): status reports, enrollments, reboot
    /// slots and FleetLock, which commit under that lock, never wait for a render.
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
        let mut attempts = 0;
        loop {
            attempts += 1;
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
                let before = plans.made();
                let events = controller::reconcile_memo(
                    &mut new,
                    scope,
                    t,
                    &self.options.settings,
                    &silent,
                    memo_now,
                    &mut plans,
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
            match self.store.commit(ops.clone()).await {
                Ok(revision) => {
                    self.metrics.commit();
                    new.stamp(&ops, revision);
                    let (changed, credentials) = node_changes(&old, &new);
                    let new = Arc::new(new);
                    *self.fleet.write().unwrap_or_else(|e| e.into_inner()) = new.clone();
                    if credentials {
                        // After publishing: a new credential never names a node the snapshot
                        // does not have yet.
                        let mut index = self.credentials.write().unwrap_or_else(|e| e.into_inner());
                        for name in &changed {
                            let hash = |f: &Fleet| {
                                f.nodes
                                    .get(name)
                                    .and_then(|n| n.value.credential_sha256.clone())
                            };
                            let (before, after) = (hash(&old), hash(&new));
                            if before == after {
                                continue;
                            }
                            if let Some(h) = before {
                                index.remove(&h);
                            }
                            if let Some(h) = after {
                                index.insert(h, name.clone());
                            }
                        }
                    }
                    if !changed.is_empty() {
                        self.notify_nodes(Some(&changed));
                        self.desired_tx.send_modify(|v| *v += 1);
                    }
                    return Ok(Some(out));
                }
                Err(StoreError::Conflict { .. }) if attempts < 3 => {
                    self.metrics.conflict();
                    tracing::warn!("store conflict: reloading the fleet and retrying");
                    let fresh = Fleet::load(&self.store).await?;
                    *self.credentials.write().unwrap_or_else(|e| e.into_inner()) =
                        (*fresh.credentials).clone();
                    *self.fleet.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(fresh);
                    self.notify_nodes(None);
                    self.desired_tx.send_modify(|v| *v += 1);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// First-start and every-start setup: the built-in pools, the admin token's hash and the
    /// bootstrap tokens of the built-in pools (written to the state directory when created).
    /// Returns the pools whose bootstrap token was created now.
    pub async fn ensure_defaults(
        &self,
        layout: &Layout,
        admin_token: &str,
    ) -> anyhow::Result<Vec<String>> {
        let mut created = Vec::new();
        let mut files: Vec<(String, String)> = Vec::new();
        for role in ["master", "worker"] {
            let name = bootstrap_token_name(role);
            if !self.snapshot().tokens.contains_key(&name) {
                let path = layout.bootstrap_token(role);
                let token = match std::fs::read_to_string(&path) {
                    Ok(t) if !t.trim().is_empty() => t.trim().to_string(),
                    _ => {
                        let t = pki::new_token(pki::BOOTSTRAP_PREFIX)?;
                        pki::write_private(&path, format!("{t}\n").as_bytes())?;
                        created.push(role.to_string());
                        t
                    }
                };
                files.push((role.to_string(), token));
            }
        }
        let admin_hash = pki::token_hash(admin_token);
        let ttl = self.options.bootstrap_ttl;
        self.mutate(Scope::Full, false, |fleet, t| {
            for role in ["master", "worker"] {
                if !fleet.pools.contains_key(role) {
                    put(&mut fleet.pools, role, PoolRecord::builtin(role, t));
                }
            }
            let admin = TokenRecord {
                sha256: admin_hash.clone(),
                scope: TokenScope::Admin,
                created_at: t,
                expires_at: None,
            };
            let same = fleet
                .tokens
                .get(ADMIN_TOKEN)
                .is_some_and(|r| r.value.sha256 == admin_hash);
            if !same {
                put(&mut fleet.tokens, ADMIN_TOKEN, admin.clone());
            }
            for (pool, token) in &files {
                put(
                    &mut fleet.tokens,
                    &bootstrap_token_name(pool),
                    TokenRecord {
                        sha256: pki::token_hash(token),
                        scope: TokenScope::Bootstrap { pool: pool.clone() },
                        created_at: t,
                        expires_at: ttl.map(|d| t + d.as_secs()),
                    },
                );
            }
            Ok(())
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(created)
    }

    /// Who holds `token`.
    pub fn authenticate(&self, token: &str) -> Result<Caller, ApiError> {
        let hash = pki::token_hash(token);
        let node = self
            .credentials
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&hash)
            .cloned();
        if let Some(node) = node {
            return Ok(Caller::Node(node));
        }
        let fleet = self.snapshot();
        for rec in fleet.tokens.values() {
            if rec.value.sha256 != hash {
                continue;
            }
            if let Some(exp) = rec.value.expires_at {
                if now() >= exp {
                    return Err(ApiError::unauthorized(format!(
                        "the token expired at {}",
                        crate::time::rfc3339(exp)
                    )));
                }
            }
            return Ok(match &rec.value.scope {
                TokenScope::Admin => Caller::Admin,
                TokenScope::Bootstrap { pool } => Caller::Bootstrap {
                    pool: pool.clone(),
                    token: token.trim().to_string(),
                },
            });
        }
        if self.options.metrics_token_sha256.as_deref() == Some(hash.as_str()) {
            return Err(ApiError::forbidden(
                "the metrics token may read /metrics and nothing else",
            ));
        }
        Err(ApiError::unauthorized(
            "unknown token (a node whose record was deleted must enroll again)",
        ))
    }

    /// Notes that a node was heard from.
    pub fn seen(&self, node: &str) {
        if let Ok(mut m) = self.last_seen.lock() {
            m.insert(node.to_string(), now());
        }
    }

    /// When a node was last heard from (a request, or its last report).
    pub fn last_seen(&self, node: &NodeRecord) -> Option<u64> {
        let mem = self
            .last_seen
            .lock()
            .ok()
            .and_then(|m| m.get(&node.name).copied());
        match (mem, node.report_at) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// The nodes that have reported once but have not been heard from within `stale_after`.
    pub fn silent(&self, fleet: &Fleet) -> std::collections::HashSet<String> {
        let seen = self.last_seen.lock().unwrap_or_else(|e| e.into_inner());
        let now = now();
        let stale = self.options.stale_after.as_secs();
        fleet
            .nodes
            .values()
            .map(|n| &n.value)
            .filter(|n| n.report.is_some())
            .filter(|n| {
                let last = match (seen.get(&n.name).copied(), n.report_at) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                last.is_none_or(|t| now.saturating_sub(t) > stale)
            })
            .map(|n| n.name.clone())
            .collect()
    }

    /// Re-evaluates the rollouts (nodes going silent or coming back are no events of their
    /// own); commits only if something changed.
    pub async fn tick(&self) -> Result<(), ApiError> {
        self.mutate(Scope::Rollout, false, |_, _| Ok(())).await
    }

    /// Whether the node was heard from within `stale_after`.
    pub fn is_fresh(&self, node: &NodeRecord) -> bool {
        self.last_seen(node)
            .is_some_and(|t| now().saturating_sub(t) <= self.options.stale_after.as_secs())
    }

    // ---------------------------------------------------------------------------------------
    // Admin operations.

    /// Applies manifests: all or nothing.
    pub async fn apply(
        &self,
        files: &[ApplyFile],
        dry_run: bool,
    ) -> Result<ApplyOutcome, ApiError> {
        self.apply_as(files, dry_run, None).await
    }

    /// [`App::apply`] by a named admin (a client certificate's CN): the events name them.
    pub async fn apply_as(
        &self,
        files: &[ApplyFile],
        dry_run: bool,
        by: Option<&str>,
    ) -> Result<ApplyOutcome, ApiError> {
        // Reading and validating is linear but can be long for big manifests: on a blocking
        // thread, so that it holds up no request of anyone else.
        let owned = files.to_vec();
        let (m, warnings) = tokio::task::spawn_blocking(move || read_manifests(&owned))
            .await
            .map_err(|e| ApiError::internal(format!("reading the manifests failed: {e}")))??;
        let results = self
            .mutate(Scope::Full, dry_run, |fleet, t| {
                Ok(apply_manifests(fleet, &m, t, by))
            })
            .await?;
        self.metrics.apply();
        let pools = if dry_run {
            Vec::new()
        } else {
            self.snapshot()
                .pools
                .values()
                .map(|p| PoolTarget {
                    name: p.value.metadata.name.clone(),
                    target: p.value.status.target.clone(),
                    render_error: p.value.status.render_error.clone(),
                })
                .collect()
        };
        Ok(ApplyOutcome {
            results,
            warnings,
            pools,
            dry_run,
        })
    }

    /// Deletes a MachineConfig.
    pub async fn delete_machine_config(&self, name: &str) -> Result<(), ApiError> {
        self.mutate(Scope::Full, false, |fleet, t| {
            if fleet.mcs.remove(name).is_none() {
                return Err(ApiError::not_found(format!(
                    "MachineConfig {name:?} not found"
                )));
            }
            fleet.record_events(vec![EventRecord::normal(
                t,
                meta_object("MachineConfig", name),
                "Deleted",
                "deleted".into(),
            )]);
            Ok(())
        })
        .await
    }

    /// Deletes a pool (a built-in pool goes back to its built-in definition).
    pub async fn delete_pool(&self, name: &str) -> Result<String, ApiError> {
        let what = self.delete_pool_record(name).await?;
        if what == "deleted" {
            // Its bootstrap token went with it: so does the token's file.
            if let Some(dir) = &self.options.token_dir {
                let _ = std::fs::remove_file(dir.join(format!("{name}.token")));
            }
        }
        Ok(what)
    }

    async fn delete_pool_record(&self, name: &str) -> Result<String, ApiError> {
        self.mutate(Scope::Full, false, |fleet, t| {
            let Some(existing) = fleet.pools.get(name).map(|p| p.value.clone()) else {
                return Err(ApiError::not_found(format!(
                    "MachineConfigPool {name:?} not found"
                )));
            };
            let what = if matches!(name, "master" | "worker") {
                if existing.builtin {
                    return Err(ApiError::conflict(format!(
                        "{name} is a built-in pool; it cannot be deleted"
                    )));
                }
                let mut b = PoolRecord::builtin(name, existing.created_at);
                b.status = existing.status.clone();
                put(&mut fleet.pools, name, b);
                "reset to its built-in definition"
            } else {
                fleet.pools.remove(name);
                fleet.tokens.remove(&bootstrap_token_name(name));
                "deleted"
            };
            fleet.record_events(vec![EventRecord::normal(
                t,
                meta_object("MachineConfigPool", name),
                "Deleted",
                what.into(),
            )]);
            Ok(what.to_string())
        })
        .await
    }

    /// Deletes a node (its credential stops working).
    pub async fn delete_node(&self, name: &str) -> Result<(), ApiError> {
        self.mutate(Scope::Full, false, |fleet, t| {
            if fleet.nodes.remove(name).is_none() {
                return Err(ApiError::not_found(format!("node {name:?} not found")));
            }
            fleet.record_events(vec![EventRecord::normal(
                t,
                meta_object("Node", name),
                "Deleted",
                "deleted; its credential no longer works".into(),
            )]);
            Ok(())
        })
        .await
    }

    /// Revokes a node's credential (an admin's decision, for a node that lost it): its
    /// requests get 401 and it may enroll again with its pool's bootstrap token. The node keeps
    /// its labels, status and reboot slot.
    pub async fn reset_credential(&self, name: &str) -> Result<bool, ApiError> {
        self.mutate(Scope::Rollout, false, |fleet, t| {
            let Some(node) = fleet.nodes.get(name).map(|n| n.value.clone()) else {
                return Err(ApiError::not_found(format!("node {name:?} not found")));
            };
            if node.credential_sha256.is_none() {
                return Ok(false);
            }
            update(&mut fleet.nodes, name, |n| n.credential_sha256 = None);
            fleet.record_events(vec![EventRecord::warning(
                t,
                meta_object("Node", name),
                "CredentialReset",
                "an admin revoked the node's credential; it may enroll again with its pool's bootstrap token".into(),
            )]);
            Ok(true)
        })
        .await
    }

    /// Sets and removes labels of a node.
    pub async fn label_node(
        &self,
        name: &str,
        set: &BTreeMap<String, String>,
        remove: &[String],
        overwrite: bool,
    ) -> Result<BTreeMap<String, String>, ApiError> {
        for k in set.keys().chain(remove.iter()) {
            if k.is_empty() || k.contains(char::is_whitespace) {
                return Err(ApiError::bad_request(format!("invalid label key {k:?}")));
            }
        }
        self.mutate(Scope::Full, false, |fleet, t| {
            let Some(node) = fleet.nodes.get(name).map(|n| n.value.clone()) else {
                return Err(ApiError::not_found(format!("node {name:?} not found")));
            };
            let mut labels = node.labels.clone();
            for (k, v) in set {
                if let Some(old) = labels.get(k) {
                    if old != v && !overwrite {
                        return Err(ApiError::conflict(format!(
                            "node {name} already has a value ({old:?}) for label {k}; use --overwrite to change it"
                        )));
                    }
                }
                labels.insert(k.clone(), v.clone());
            }
            for k in remove {
                labels.remove(k);
            }
            if labels != node.labels {
                update(&mut fleet.nodes, name, |n| n.labels = labels.clone());
                fleet.record_events(vec![EventRecord::normal(
                    t,
                    meta_object("Node", name),
                    "Labeled",
                    format!("labels are now {}", format_labels(&labels)),
                )]);
            }
            Ok(labels)
        })
        .await
    }

    /// Pauses or resumes a pool's rollouts.
    pub async fn set_paused(&self, pool: &str, paused: bool) -> Result<bool, ApiError> {
        self.mutate(Scope::Rollout, false, |fleet, t| {
            let Some(p) = fleet.pools.get(pool) else {
                return Err(ApiError::not_found(format!(
                    "MachineConfigPool {pool:?} not found"
                )));
            };
            let changed = p.value.spec.paused != paused;
            if changed {
                update(&mut fleet.pools, pool, |p| p.spec.paused = paused);
                fleet.record_events(vec![EventRecord::normal(
                    t,
                    meta_object("MachineConfigPool", pool),
                    if paused { "Paused" } else { "Resumed" },
                    if paused {
                        "rollouts paused".into()
                    } else {
                        "rollouts resumed".into()
                    },
                )]);
            }
            Ok(changed)
        })
        .await
    }

    /// A new bootstrap token for a pool (replacing the old one).
    pub async fn new_bootstrap_token(
        &self,
        pool: &str,
        ttl: Option<Duration>,
    ) -> Result<(String, Option<u64>), ApiError> {
        let token =
            pki::new_token(pki::BOOTSTRAP_PREFIX).map_err(|e| ApiError::internal(e.to_string()))?;
        let hash = pki::token_hash(&token);
        let expires = self
            .mutate(Scope::Rollout, false, |fleet, t| {
                if !fleet.pools.contains_key(pool) {
                    return Err(ApiError::not_found(format!(
                        "MachineConfigPool {pool:?} not found"
                    )));
                }
                let expires_at = ttl.map(|d| t + d.as_secs());
                put(
                    &mut fleet.tokens,
                    &bootstrap_token_name(pool),
                    TokenRecord {
                        sha256: hash.clone(),
                        scope: TokenScope::Bootstrap {
                            pool: pool.to_string(),
                        },
                        created_at: t,
                        expires_at,
                    },
                );
                fleet.record_events(vec![EventRecord::normal(
                    t,
                    meta_object("MachineConfigPool", pool),
                    "BootstrapTokenCreated",
                    match expires_at {
                        Some(e) => format!(
                            "a new bootstrap token replaces the old one; it expires at {}",
                            crate::time::rfc3339(e)
                        ),
                        None => "a new bootstrap token replaces the old one".into(),
                    },
                )]);
                Ok(expires_at)
            })
            .await?;
        if let Some(dir) = &self.options.token_dir {
            // The file keeps holding the pool's valid token (the old one no longer works).
            let path = dir.join(format!("{pool}.token"));
            pki::write_private(&path, format!("{token}\n").as_bytes()).map_err(|e| {
                ApiError::internal(format!(
                    "the new token works, but writing {} failed: {e:#}",
                    path.display()
                ))
            })?;
        }
        Ok((token, expires))
    }

    // ---------------------------------------------------------------------------------------
    // Agent operations.

    /// Enrolls a node with its pool's bootstrap token.
    ///
    /// A node that already holds a credential is enrolled again only with that credential
    /// (`old_credential`), so that a bootstrap token (which every node of the pool has in its
    /// `agent.env`) cannot take over another node's name; an admin revokes a lost credential
    /// with [`App::reset_credential`].
    pub async fn enroll(
        &self,
        token_pool: &str,
        req: &EnrollRequest,
        old_credential: Option<&str>,
    ) -> Result<EnrollResponse, ApiError> {
        let proof = old_credential.map(pki::token_hash);
        if let Some(msg) = check_object_name(&req.node) {
            return Err(ApiError::bad_request(format!("node: {msg}")));
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
        Ok(EnrollResponse {
            node: req.node.clone(),
            pool,
            labels,
            credential,
        })
    }

    /// The desired config of `node` as a JSON body (cached per rendered config).
    pub fn desired_body(&self, node: &str) -> Result<Option<DesiredBody>, ApiError> {
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
        {
            let mut cache = self.body_cache.lock().unwrap_or_else(|e| e.into_inner());
            if cache.0 != policies_rev {
                *cache = (policies_rev, HashMap::new());
            }
            if let Some(b) = cache.1.get(&name) {
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
        })
        .map_err(|e| ApiError::internal(e.to_string()))?;
        let body = Arc::new(body);
        let mut cache = self.body_cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.0 == policies_rev {
            if cache.1.len() > 1024 {
                cache.1.clear();
            }
            cache.1.insert(name.clone(), body.clone());
        }
        Ok(Some((name, body)))
    }

    /// Records a status report. Reports arriving together are committed together
    /// ([`App::group_commit`]); the answer comes after the commit, so an acknowledged report is
    /// stored.
    pub async fn report(&self, node: &str, status: AgentStatus) -> Result<(), ApiError> {
        self.seen(node);
        if !self.snapshot().nodes.contains_key(node) {
            return Err(unknown_node(node));
        }
        let node = node.to_string();
        self.group_commit(Box::new(move |fleet, t| {
            record_report(fleet, &node, &status, t)
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
                    if let Some(wait) = crate::window::gate(&pool, window_now) {
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

fn unknown_node(node: &str) -> ApiError {
    ApiError::unauthorized(format!("node {node} is no longer known; enroll again"))
}

/// Stores one status report in `fleet` (nothing when the node is unknown: an error).
fn record_report(
    fleet: &mut Fleet,
    node: &str,
    status: &AgentStatus,
    t: u64,
) -> Result<(), ApiError> {
    let Some(n) = fleet.nodes.get(node).map(|n| n.value.clone()) else {
        return Err(unknown_node(node));
    };
    let before = n.state();
    let mut events = Vec::new();
    if before != Some(status.state)
        || n.report.as_ref().and_then(|r| r.reason.as_ref()) != status.reason.as_ref()
    {
        let object = meta_object("Node", node);
        let reason = status.reason.clone().unwrap_or_default();
        let desired = status.desired.clone().unwrap_or_else(|| "-".into());
        events.push(match status.state {
            NodeState::Degraded | NodeState::Unreconcilable => EventRecord::warning(
                t,
                object,
                status.state.as_str(),
                format!("{desired}: {reason}"),
            ),
            s => EventRecord::normal(
                t,
                object,
                s.as_str(),
                if reason.is_empty() {
                    desired
                } else {
                    format!("{desired}: {reason}")
                },
            ),
        });
    }
    // A Done report in the desired config gives back the agent's part of the slot only: a
    // FleetLock client's holds until its steady-state.
    let release = status.state == NodeState::Done
        && status.current.is_some()
        && status.current == n.desired
        && n.reboot_slot.is_some();
    update(&mut fleet.nodes, node, |n| {
        n.report = Some(status.clone());
        n.report_at = Some(t);
        if release {
            n.release_slot(SlotHolder::Agent);
        }
    });
    fleet.record_events(events);
    Ok(())
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
    let existing = fleet.nodes.get(&req.node).map(|n| n.value.clone());
    if let Some(current) = existing
        .as_ref()
        .and_then(|n| n.credential_sha256.as_deref())
    {
        if proof != Some(current) {
            return Err(ApiError::conflict(format!(
                "node {} is already enrolled: enrolling it again needs its current credential \
                 (Authorization: Bearer); if the node lost it (a reinstalled machine), an admin \
                 revokes it with POST /api/v1/nodes/{}/reset-credential and the node enrolls \
                 again",
                req.node, req.node
            )));
        }
    }
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
    let models: Vec<_> = fleet.pools.values().map(|p| p.value.to_model()).collect();
    let pools = render::with_builtin_pools(&models);
    let probe = NodeRecord {
        name: req.node.clone(),
        labels: labels.clone(),
        ..Default::default()
    };
    let pool = render::pool_for_node(&pools, &probe.to_model())
        .map_err(|e| ApiError::forbidden(e.to_string()))?
        .name()
        .to_string();
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

/// The nodes whose desired config or credential changed between two snapshots (including
/// nodes added and removed), and whether some credential did.
fn node_changes(old: &Fleet, new: &Fleet) -> (Vec<String>, bool) {
    // Both maps are sorted by name: one walk, no lookups (this runs after every commit).
    let mut changed = Vec::new();
    let mut credentials = false;
    let mut o = old.nodes.iter().peekable();
    let mut n = new.nodes.iter().peekable();
    loop {
        match (o.peek(), n.peek()) {
            (None, None) => break,
            (Some((name, _)), None) => {
                credentials = true;
                changed.push((*name).clone());
                o.next();
            }
            (None, Some((name, _))) => {
                credentials = true;
                changed.push((*name).clone());
                n.next();
            }
            (Some((on, ov)), Some((nn, nv))) => match on.cmp(nn) {
                std::cmp::Ordering::Less => {
                    credentials = true;
                    changed.push((*on).clone());
                    o.next();
                }
                std::cmp::Ordering::Greater => {
                    credentials = true;
                    changed.push((*nn).clone());
                    n.next();
                }
                std::cmp::Ordering::Equal => {
                    if !Arc::ptr_eq(ov, nv) {
                        let cred = ov.value.credential_sha256 != nv.value.credential_sha256;
                        credentials |= cred;
                        if cred || ov.value.desired != nv.value.desired {
                            changed.push((*nn).clone());
                        }
                    }
                    o.next();
                    n.next();
                }
            },
        }
    }
    (changed, credentials)
}

/// `k=v, k2=v2` (or `none`).
pub fn format_labels(labels: &BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return "none".into();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads every file; refuses the whole apply on any error (422 with every diagnostic).
pub fn read_manifests(files: &[ApplyFile]) -> Result<(Manifests, Vec<Diagnostic>), ApiError> {
    let mut all = Manifests::default();
    let mut diags = Vec::new();
    for f in files {
        let (m, d) = read_str(&f.name, &f.text);
        all.extend(m);
        diags.extend(d);
    }
    // The same object twice in one apply.
    let mut seen: HashMap<(String, String), String> = HashMap::new();
    let mut dup = |kind: &str, name: &str, origin: &hearth_config::model::Origin| {
        let key = (kind.to_string(), name.to_string());
        match seen.get(&key) {
            Some(first) => Some(
                Diagnostic::error(
                    &origin.file,
                    Some(origin.line),
                    "metadata.name",
                    format!("{kind} {name:?} is given twice in this apply (first at {first}); names must be unique"),
                )
                .with_object(Some(format!("{kind}/{name}"))),
            ),
            None => {
                seen.insert(key, origin.to_string());
                None
            }
        }
    };
    let mut dups = Vec::new();
    for s in &all.machine_configs {
        dups.extend(dup("MachineConfig", s.item.name(), &s.origin));
    }
    for s in &all.pools {
        dups.extend(dup("MachineConfigPool", s.item.name(), &s.origin));
    }
    for s in &all.nodes {
        dups.extend(dup("Node", &s.item.metadata.name, &s.origin));
    }
    diags.extend(dups);
    let count = all.machine_configs.len() + all.pools.len() + all.nodes.len() + all.policies.len();
    if diags.iter().any(Diagnostic::is_error) {
        let errors = diags.iter().filter(|d| d.is_error()).count();
        return Err(ApiError::invalid(
            format!("{errors} error(s) in the manifests; nothing was applied"),
            diags,
        ));
    }
    if count == 0 {
        return Err(ApiError::invalid(
            "no objects to apply (hearth takes MachineConfig, MachineConfigPool, Node and MachineConfiguration)",
            diags,
        ));
    }
    Ok((all, diags))
}

fn apply_manifests(fleet: &mut Fleet, m: &Manifests, t: u64, by: Option<&str>) -> Vec<ApplyResult> {
    let mut results = Vec::new();
    let mut events = Vec::new();
    let mut record = |kind: &str, name: &str, action: &str, events: &mut Vec<EventRecord>| {
        results.push(ApplyResult {
            kind: kind.into(),
            name: name.into(),
            action: action.into(),
        });
        if action != "unchanged" {
            events.push(EventRecord::normal(
                t,
                meta_object(kind, name),
                if action == "created" {
                    "Created"
                } else {
                    "Configured"
                },
                match by {
                    Some(who) => format!("{action} by apply (admin {who})"),
                    None => format!("{action} by apply"),
                },
            ));
        }
    };
    for s in &m.machine_configs {
        let mc = &s.item;
        let mut spec = mc.spec.clone();
        spec.source_version = None;
        let existing = fleet.mcs.get(mc.name()).map(|r| r.value.clone());
        let new = McRecord {
            metadata: mc.metadata.clone(),
            spec,
            source_version: mc.spec.source_version.map(|v| v.as_str().to_string()),
            created_at: existing.as_ref().map(|e| e.created_at).unwrap_or(t),
            updated_at: t,
        };
        let action = match &existing {
            Some(e) if e.same_content(&new) => "unchanged",
            Some(_) => "configured",
            None => "created",
        };
        if action != "unchanged" {
            put(&mut fleet.mcs, mc.name(), new);
        }
        record("MachineConfig", mc.name(), action, &mut events);
    }
    for s in &m.pools {
        let p = &s.item;
        let existing = fleet.pools.get(p.name()).map(|r| r.value.clone());
        let mut new = PoolRecord::from_model(p, false, t);
        if let Some(e) = &existing {
            new.created_at = e.created_at;
            new.status = e.status.clone();
        }
        let action = match &existing {
            Some(e) if e.metadata == new.metadata && e.spec == new.spec && !e.builtin => {
                "unchanged"
            }
            Some(_) => "configured",
            None => "created",
        };
        if action != "unchanged" {
            put(&mut fleet.pools, p.name(), new);
        }
        record("MachineConfigPool", p.name(), action, &mut events);
    }
    for s in &m.nodes {
        let n = &s.item.metadata;
        let action = match fleet.nodes.get(&n.name).map(|r| r.value.clone()) {
            Some(e) if e.labels == n.labels => "unchanged",
            Some(_) => {
                update(&mut fleet.nodes, &n.name, |x| x.labels = n.labels.clone());
                "configured"
            }
            None => {
                put(
                    &mut fleet.nodes,
                    &n.name,
                    NodeRecord {
                        name: n.name.clone(),
                        labels: n.labels.clone(),
                        created_at: t,
                        ..Default::default()
                    },
                );
                "created"
            }
        };
        record("Node", &n.name, action, &mut events);
    }
    if !m.policies.is_empty() {
        let policies = m.disruption_policies();
        let action = match fleet.policies.get(POLICIES_NAME) {
            Some(p) if p.value.policies == policies => "unchanged",
            Some(_) => "configured",
            None => "created",
        };
        if action != "unchanged" {
            put(
                &mut fleet.policies,
                POLICIES_NAME,
                PoliciesRecord {
                    policies,
                    updated_at: t,
                },
            );
        }
        record("MachineConfiguration", POLICIES_NAME, action, &mut events);
    }
    fleet.record_events(events);
    results
}
