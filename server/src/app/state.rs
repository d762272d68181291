//! The server's state ([`App`], [`Options`], [`Caller`], [`Replica`]), its start-up and
//! authentication. The operations on it live in one file per concept beside this one.

use super::background::Background;
use super::claims::RefusedClaims;
use crate::controller::memo::RebootPlans;
use crate::controller::{PoolIndex, Scope, Settings};
use crate::error::ApiError;
use crate::fleet::{put, Fleet};
use crate::pki::{self, Layout};
use crate::store::backend::Backend;
use crate::store::etcd::session::{Role, SessionState};
use crate::store::records::{
    bootstrap_token_name, PoolRecord, TokenRecord, TokenScope, ADMIN_TOKEN,
};
use crate::store::{Link, StoreError};
use crate::telemetry::metrics::Metrics;
use crate::time::now;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// What the request bodies of nodes (reports, reboot slots, FleetLock, enrollments with a
/// credential in their header) may hold of the server's memory at once, all together.
/// hearth's agents send reports of some KiB: 100,000 agents reporting at the default pace hold a
/// few MiB at a time.
pub const NODE_BODIES_BYTES: usize = 256 << 20;
/// What the bodies of enrollments whose credential is in the body (a bootstrap token, not yet
/// checked) may hold at once, all together: filling it delays new nodes, never enrolled ones.
pub const ENROLL_BODIES_BYTES: usize = 16 << 20;

/// Server settings that are not the store's.
#[derive(Debug, Clone)]
pub struct Options {
    /// Controller settings.
    pub settings: Settings,
    /// The URLs first-booting nodes are told to use: the server's, or every replica's (empty:
    /// the request's `Host`).
    pub advertise_urls: Vec<String>,
    /// The longest long-poll.
    pub max_wait: Duration,
    /// A node not heard from for this long is not ready, and unavailable for rollouts.
    pub stale_after: Duration,
    /// How many desired-config answers may be unacknowledged at once
    /// (`--desired-answers-at-once`; 0: no pacing); see [`crate::pace`].
    pub desired_answers_at_once: usize,
    /// How many deferred reports a second agents that can wait are asked for
    /// (`--deferred-reports-per-second`; 0: none, they are paced by turns); see [`crate::pace`].
    pub deferred_reports_per_second: u32,
    /// How long a turn lasts without its node being heard from ([`crate::pace::LEASE`]; tests
    /// make it long to see turns end by reports alone).
    pub pace_lease: Duration,
    /// The longest an answer waits for a turn ([`crate::pace::WAIT_LIMIT`]).
    pub pace_wait_limit: Duration,
    /// The log's budget for nodes' events of each type: a burst, then so many a second
    /// ([`crate::telemetry::logging::NodeEventLog`]; the defaults are its constants, tests set others).
    pub node_events_budget: (f64, f64),
    /// How often rollouts are re-evaluated without any change (for nodes going silent or
    /// coming back).
    pub tick: Duration,
    /// An ostree repository (archive mode) served to authenticated nodes and admins under
    /// `/ostree/repo/` (`--ostree-repo`), for OS image pivots without another server.
    pub ostree_repo: Option<std::path::PathBuf>,
    /// Resolves MachineConfigs' tagged `osImageURL`s to digests when they are applied
    /// ([`crate::registry`]; `--registry-auth`, `--registry-ca`). `None`: the default resolver
    /// (no credentials, the system's CAs).
    pub registry: Option<Arc<crate::registry::Resolver>>,
    /// The agent's binaries written by first-boot configs (`--serve-agent DIR`), so that a stock
    /// image becomes a node ([`crate::served_agent`]).
    pub served_agent: Option<Arc<crate::served_agent::ServedAgent>>,
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
    /// What the request bodies of nodes may hold of memory at once, all together, in bytes; a
    /// body beyond it is answered 503 (`crate::http::limits`). Default
    /// [`NODE_BODIES_BYTES`]; not a flag (tests set it).
    pub node_bodies: usize,
    /// What the bodies of enrollments whose bootstrap token is in the body may hold at once;
    /// default [`ENROLL_BODIES_BYTES`]; not a flag (tests set it).
    pub enroll_bodies: usize,
}

/// The refusal of a token the server does not hold, whichever kind was meant: where each kind
/// lives and how to get a new one (a revoked viewer token reads the same).
pub const UNKNOWN_TOKEN: &str = "unknown token: this server holds no such token. The admin \
    token is <state-dir>/admin.token on the server (or use an admin client certificate: \
    hearth-server issue-admin-cert); a pool's bootstrap token is \
    <state-dir>/tokens/POOL.token, and `hearth bootstrap-token POOL` makes a new one and prints \
    it; a node whose record was deleted, or whose credential was reset, enrolls again with its \
    pool's bootstrap token; a viewer token may have been revoked (hearth viewer-token create)";

/// The default lifetime of a bootstrap token: 24 hours.
pub const DEFAULT_BOOTSTRAP_TTL: Duration = Duration::from_secs(24 * 3600);

impl Default for Options {
    fn default() -> Self {
        Options {
            settings: Settings::default(),
            advertise_urls: Vec::new(),
            max_wait: Duration::from_secs(300),
            stale_after: Duration::from_secs(600),
            desired_answers_at_once: crate::pace::Pacer::turns_for_this_machine(),
            deferred_reports_per_second: crate::pace::Pacer::deferred_reports_for_this_machine(),
            pace_lease: crate::pace::LEASE,
            pace_wait_limit: crate::pace::WAIT_LIMIT,
            node_events_budget: (
                crate::telemetry::logging::NODE_EVENTS_BURST,
                crate::telemetry::logging::NODE_EVENTS_PER_SECOND,
            ),
            tick: Duration::from_secs(10),
            ostree_repo: None,
            registry: None,
            served_agent: None,
            render_gate: None,
            bootstrap_ttl: Some(DEFAULT_BOOTSTRAP_TTL),
            token_dir: None,
            metrics_token_sha256: None,
            node_bodies: NODE_BODIES_BYTES,
            enroll_bodies: ENROLL_BODIES_BYTES,
        }
    }
}

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The admin token.
    Admin,
    /// A viewer token: reads what an admin reads, changes nothing.
    Viewer,
    /// A node, by its credential.
    Node(String),
    /// A pool's bootstrap token (the token itself is kept to embed it in first-boot configs).
    Bootstrap {
        /// The pool.
        pool: String,
        /// The token.
        token: String,
        /// The one node a node-bound token is for.
        node: Option<String>,
    },
}

/// How often a change is rendered again when the fleet changed while it was being rendered.
pub(super) const RENDER_ATTEMPTS: usize = 5;

/// Encoded desired-config answers by rendered name, valid for one policies revision.
type BodyCache = (u64, HashMap<String, Arc<Vec<u8>>>);

/// A desired config's name and its encoded answer.
pub type DesiredBody = (String, Arc<Vec<u8>>);

/// One change of a group commit ([`App::group_commit`]). It must leave the fleet untouched
/// when it returns an error (the others of its group are committed without it).
pub(super) type GroupOp = Box<dyn FnMut(&mut Fleet, u64) -> Result<(), ApiError> + Send>;

/// A change waiting for the next group commit, and where its outcome goes.
pub(super) struct Pending {
    pub(super) op: GroupOp,
    pub(super) done: oneshot::Sender<Result<(), ApiError>>,
}

/// What a replica knows of its link to the shared store.
#[derive(Debug, Clone)]
pub struct Replica {
    /// The change stream's link.
    pub link: watch::Receiver<Link>,
    /// The etcd session.
    pub session: watch::Receiver<SessionState>,
    /// The controller role.
    pub role: watch::Receiver<Role>,
}

/// The server state.
pub struct App {
    pub(super) store: Backend,
    pub(super) fleet: RwLock<Arc<Fleet>>,
    pub(super) write: tokio::sync::Mutex<()>,
    /// Admins' changes in the order they arrived ([`App::admin_turn`]; tokio's mutex is fair).
    pub(super) admin_order: tokio::sync::Mutex<()>,
    /// Options.
    pub options: Options,
    /// The fleet CA (PEM).
    pub ca_pem: String,
    /// Counters.
    pub metrics: Metrics,
    pub(super) last_seen: Mutex<HashMap<String, u64>>,
    pub(super) body_cache: Mutex<BodyCache>,
    /// Per node: ticks when that node's desired config or credential changes (long-polls wait
    /// on their own node's channel, so a change wakes only the nodes it concerns).
    pub(super) node_watch: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// Changes waiting for the next group commit.
    pub(super) group: Mutex<Vec<Pending>>,
    /// Held by the task committing a group.
    pub(super) group_flush: Arc<tokio::sync::Mutex<()>>,
    /// Tasks for work that outlives its request (detached changes, group commits).
    pub background: Background,
    /// Turns for desired-config answers ([`crate::pace`]).
    pub pacer: Arc<crate::pace::Pacer>,
    /// The log's budget for nodes' events ([`crate::telemetry::logging::NodeEventLog`]).
    pub node_event_log: crate::telemetry::logging::NodeEventLog,
    /// Node credential hash → node name, kept up to date change by change after each commit
    /// (rebuilding it from the snapshot on every enrollment was O(fleet)); the snapshot's own
    /// `Fleet::credentials` is only read when the fleet is loaded.
    pub(super) credentials: RwLock<HashMap<String, String>>,
    /// Which updates need a reboot, kept across reconciles ([`RebootPlans`]).
    pub(super) reboot_plans: Mutex<RebootPlans>,
    /// Machines refused a node's name, by node ([`RefusedClaims`]).
    pub(super) refused_claims: Mutex<RefusedClaims>,
    /// What each pool has left to do, followed commit by commit ([`PoolIndex`]): a status
    /// report's reconcile does not walk a pool with nothing to hand out.
    pub(super) pool_index: Mutex<PoolIndex>,
    /// The nodes found silent at a time (Unix seconds), reused for `liveness::SILENT_REUSE` s:
    /// finding them walks the fleet, which every commit would otherwise do.
    pub(super) silent_cache: Mutex<Option<(u64, Arc<std::collections::HashSet<String>>)>>,
    /// Token hash → token name (admin, viewer and bootstrap tokens), kept change by change as
    /// the node credentials are: authenticating a token is a lookup, not a scan of the tokens
    /// (node-bound first-boot tokens make them as many as the nodes).
    token_hashes: RwLock<HashMap<String, String>>,
    /// The store revision the published snapshot reflects (ticks on every publication).
    pub(super) applied: watch::Sender<u64>,
    /// Set when the store is shared with other replicas (etcd): the snapshot then follows the
    /// store's changes ([`App::start_following`]) and is published only by that follower.
    pub(super) replica: std::sync::OnceLock<Replica>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("revision", &self.snapshot().revision)
            .finish()
    }
}

pub(super) fn meta_object(kind: &str, name: &str) -> String {
    format!("{kind}/{name}")
}

impl App {
    /// Loads the fleet from `store`.
    pub async fn new(store: Backend, options: Options, ca_pem: String) -> Result<App, StoreError> {
        let fleet = Fleet::load(&store).await?;
        let credentials = RwLock::new((*fleet.credentials).clone());
        let token_hashes = RwLock::new(token_index(&fleet));
        let applied = watch::channel(fleet.revision).0;
        let metrics = Metrics::default();
        let pacer = crate::pace::Pacer::new(
            options.desired_answers_at_once,
            options.pace_lease,
            options.pace_wait_limit,
            options.deferred_reports_per_second,
            metrics.pace(),
        );
        let node_event_log = crate::telemetry::logging::NodeEventLog::new(
            std::time::Instant::now(),
            metrics.events_not_logged(),
        )
        .with_budget(options.node_events_budget.0, options.node_events_budget.1);
        Ok(App {
            store,
            fleet: RwLock::new(Arc::new(fleet)),
            write: tokio::sync::Mutex::new(()),
            admin_order: tokio::sync::Mutex::new(()),
            options,
            ca_pem,
            metrics,
            last_seen: Mutex::new(HashMap::new()),
            body_cache: Mutex::new((0, HashMap::new())),
            node_watch: Mutex::new(HashMap::new()),
            group: Mutex::new(Vec::new()),
            group_flush: Arc::new(tokio::sync::Mutex::new(())),
            background: Background::default(),
            pacer,
            node_event_log,
            credentials,
            reboot_plans: Mutex::new(RebootPlans::default()),
            refused_claims: Mutex::new(RefusedClaims::default()),
            pool_index: Mutex::new(PoolIndex::default()),
            token_hashes,
            silent_cache: Mutex::new(None),
            applied,
            replica: std::sync::OnceLock::new(),
        })
    }

    /// The published snapshot.
    pub fn snapshot(&self) -> Arc<Fleet> {
        self.fleet.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Yields the revision of the published snapshot after each change (any change: configs,
    /// pools, node reports; on etcd, made through any replica).
    pub fn revision_watch(&self) -> watch::Receiver<u64> {
        self.applied.subscribe()
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
        if self.is_replica() {
            if let Some(stored) = self.snapshot().tokens.get(ADMIN_TOKEN) {
                if stored.value.sha256 != admin_hash {
                    anyhow::bail!(
                        "{} is not the admin token the other replicas on this etcd prefix use: copy admin.token (and pki/ca.crt, pki/ca.key) from the first replica's state directory before starting another one (a replica never replaces the fleet's admin token)",
                        layout.admin_token().display()
                    );
                }
            }
        }
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
                        scope: TokenScope::Bootstrap {
                            pool: pool.clone(),
                            node: None,
                        },
                        created_at: t,
                        expires_at: ttl.map(|d| t.saturating_add(d.as_secs())),
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
        let name = self
            .token_hashes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&hash)
            .cloned();
        if let Some(rec) = name
            .and_then(|n| fleet.tokens.get(&n).cloned())
            .filter(|rec| rec.value.sha256 == hash)
        {
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
                TokenScope::Viewer => Caller::Viewer,
                TokenScope::Bootstrap { pool, node } => Caller::Bootstrap {
                    pool: pool.clone(),
                    token: token.trim().to_string(),
                    node: node.clone(),
                },
            });
        }
        if self.options.metrics_token_sha256.as_deref() == Some(hash.as_str()) {
            return Err(ApiError::forbidden(
                "the metrics token may read /metrics and nothing else",
            ));
        }
        Err(ApiError::unauthorized(UNKNOWN_TOKEN))
    }
}

/// Token hash → name of every token of `fleet`.
fn token_index(fleet: &Fleet) -> HashMap<String, String> {
    fleet
        .tokens
        .iter()
        .map(|(name, rec)| (rec.value.sha256.clone(), name.clone()))
        .collect()
}

impl App {
    /// After `new` was published in place of `old`: the token index follows the tokens named
    /// (those a commit or a batch of changes touched).
    pub(super) fn reindex_tokens<'a>(
        &self,
        old: &Fleet,
        new: &Fleet,
        names: impl IntoIterator<Item = &'a str>,
    ) {
        let mut index = self.token_hashes.write().unwrap_or_else(|e| e.into_inner());
        for name in names {
            if let Some(rec) = old.tokens.get(name) {
                if index.get(&rec.value.sha256).map(String::as_str) == Some(name) {
                    index.remove(&rec.value.sha256);
                }
            }
            if let Some(rec) = new.tokens.get(name) {
                index.insert(rec.value.sha256.clone(), name.to_string());
            }
        }
    }

    /// The token index rebuilt from `fleet` (after a reload).
    pub(super) fn index_all_tokens(&self, fleet: &Fleet) {
        *self.token_hashes.write().unwrap_or_else(|e| e.into_inner()) = token_index(fleet);
    }
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
