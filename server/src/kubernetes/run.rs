//! The controller's loop against a Kubernetes API server: caches that follow watches of
//! MachineConfigs, pools, nodes and `MachineConfiguration`s; a reconcile after every change
//! (and every [`TICK`], for maintenance windows), on the caches; the writes that follow; and a
//! wait until the caches show those writes before the next decision.

use super::annotations::DESIRED_CONFIG;
use super::decide::{Decider, Decision};
use super::drain;
use super::drain_run::{self, DRAIN_RETRY};
use super::observe::{Observed, Writes};
use super::resources::{
    configurations, machine_config_nodes, machine_configs, nodes, pools, CALL_TIMEOUT,
};
use crate::controller::Settings;
use anyhow::{Context, Result};
use futures_util::StreamExt;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How often the controller reconciles without a change (maintenance windows open and close).
pub const TICK: Duration = Duration::from_secs(30);
/// How long changes are gathered before a reconcile (a burst of node updates is one decision).
const GATHER: Duration = Duration::from_millis(100);
/// How long the controller waits for its caches to show its own writes before deciding again.
const OWN_WRITES: Duration = Duration::from_secs(10);

/// Where the controller finds its API server.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// A kubeconfig file; `None`: the usual places (in-cluster service account, `KUBECONFIG`,
    /// `~/.kube/config`).
    pub kubeconfig: Option<PathBuf>,
    /// Controller settings (retention, the maintenance windows' clock).
    pub settings: Settings,
    /// The Lease that elects one controller: namespace and name.
    pub lease: (String, String),
}

async fn client(kubeconfig: Option<&PathBuf>) -> Result<Client> {
    let mut config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("the kubeconfig {} is not usable", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no Kubernetes API server found (in-cluster service account, KUBECONFIG or ~/.kube/config); give --kubeconfig")?,
    };
    config.connect_timeout = Some(CALL_TIMEOUT);
    config.write_timeout = Some(CALL_TIMEOUT);
    // No read timeout on the client: the watches wait on purpose (each call that is not a
    // watch is bounded by CALL_TIMEOUT where it is made). No retries inside the client either:
    // an eviction a budget refuses answers 429, which kube's default policy would retry for up
    // to 15 times with growing pauses; the controller retries by itself every DRAIN_RETRY.
    config.default_retry = false;
    Client::try_from(config).context("cannot build the Kubernetes client")
}

/// A cache of one resource that follows its watch, waking `changed` on every event.
struct Cache {
    what: &'static str,
    store: Store<DynamicObject>,
}

impl Cache {
    fn start(client: &Client, ar: ApiResource, what: &'static str, changed: Arc<Notify>) -> Cache {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let writer = reflector::store::Writer::new(ar);
        let store = writer.as_reader();
        let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
            .default_backoff();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(_) => changed.notify_one(),
                    Err(e) => tracing::warn!(resource = what, error = %e, "watch failed; retrying"),
                }
            }
        });
        Cache { what, store }
    }

    fn values(&self) -> Vec<Value> {
        self.store
            .state()
            .iter()
            .filter_map(|o| serde_json::to_value(&**o).ok())
            .collect()
    }

    /// The objects without their `status` (a Node's is large — images, conditions — and the
    /// controller reads none of it).
    fn values_without_status(&self) -> Vec<Value> {
        self.store
            .state()
            .iter()
            .filter_map(|o| {
                let mut v = serde_json::to_value(&o.metadata).ok()?;
                let mut out = json!({"metadata": null});
                out["metadata"] = v.take();
                if let Some(spec) = o.data.get("spec") {
                    out["spec"] = spec.clone();
                }
                Some(out)
            })
            .collect()
    }
}

/// Runs the controller until the process ends.
pub async fn run(opts: KubeOptions) -> Result<()> {
    let client = client(opts.kubeconfig.as_ref()).await?;
    let version = client
        .apiserver_version()
        .await
        .context("cannot reach the Kubernetes API server")?;
    tracing::info!(version = %version.git_version, "following the Kubernetes API server");
    let (namespace, name) = &opts.lease;
    // SIGTERM (a rolling update) and SIGINT end the controller, giving the Lease up; while it
    // waits for the Lease they end it at once.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let identity = super::lease::identity();
    let acquire = super::lease::Lease::acquire(client.clone(), namespace, name, &identity);
    let mut lease = tokio::select! {
        l = acquire => l?,
        _ = term.recv() => return Ok(()),
        _ = tokio::signal::ctrl_c() => return Ok(()),
    };
    let result = tokio::select! {
        e = lease.keep() => return Err(e),
        r = control(client, &opts) => r,
        _ = term.recv() => Ok(()),
        _ = tokio::signal::ctrl_c() => Ok(()),
    };
    // Stopping (a signal, or the work ended): the next controller need not wait for the Lease
    // to run out.
    match lease.release().await {
        Ok(true) => tracing::info!("released the controller lease"),
        Ok(false) => tracing::info!("the controller lease was no longer this controller's"),
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "cannot release the controller lease; it runs out by itself")
        }
    }
    result
}

/// The controller's work, while it holds the Lease.
async fn control(client: Client, opts: &KubeOptions) -> Result<()> {
    let changed = Arc::new(Notify::new());
    let mcs = Cache::start(
        &client,
        machine_configs(),
        "machineconfigs",
        changed.clone(),
    );
    let mcps = Cache::start(&client, pools(), "machineconfigpools", changed.clone());
    let nodes_cache = Cache::start(&client, nodes(), "nodes", changed.clone());
    // The node-disruption policies are optional: without their CRD there are none.
    let configurations_api: Api<DynamicObject> = Api::all_with(client.clone(), &configurations());
    let confs = match configurations_api
        .list(&kube::api::ListParams::default().limit(1))
        .await
    {
        Ok(_) => Some(Cache::start(
            &client,
            configurations(),
            "machineconfigurations",
            changed.clone(),
        )),
        Err(e) => {
            tracing::warn!(error = %e, "no MachineConfiguration objects (node-disruption policies): the built-in policies apply");
            None
        }
    };
    let mcn_api: Api<DynamicObject> = Api::all_with(client.clone(), &machine_config_nodes());
    let mcns = match mcn_api
        .list(&kube::api::ListParams::default().limit(1))
        .await
    {
        Ok(_) => Some(Cache::start(
            &client,
            machine_config_nodes(),
            "machineconfignodes",
            changed.clone(),
        )),
        Err(e) => {
            tracing::warn!(error = %e, "no MachineConfigNodes (their CRD is not installed): nodes' status is on their annotations only");
            None
        }
    };
    for c in [&mcs, &mcps, &nodes_cache]
        .into_iter()
        .chain(confs.as_ref())
        .chain(mcns.as_ref())
    {
        tokio::time::timeout(CALL_TIMEOUT * 4, c.store.wait_until_ready())
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "the {} could not be listed within {:?} (see the warnings above)",
                    c.what,
                    CALL_TIMEOUT * 4
                )
            })?
            .with_context(|| format!("the {} cache never filled", c.what))?;
    }
    let writer = Writer::new(client.clone());
    let drainer = drain::Drainer::new(client.clone());
    let recorder = super::events::Recorder::new(client);
    let mut last_drain: HashMap<String, Instant> = HashMap::new();
    let mut reported: HashSet<String> = HashSet::new();
    let mut decider = Decider::new();
    loop {
        let observed = Observed {
            machine_configs: mcs.values(),
            pools: mcps.values(),
            nodes: nodes_cache.values_without_status(),
            configurations: confs.as_ref().map(Cache::values).unwrap_or_default(),
            machine_config_nodes: mcns.as_ref().map(Cache::values),
        };
        let now = crate::time::now();
        let Decision {
            read,
            after,
            mut events,
            mut writes,
        } = decider.decide(&observed, now, &opts.settings);
        // Each refused object once, until it changes.
        let mut now_reported = HashSet::new();
        for d in read.diagnostics.iter().filter(|d| d.is_error()) {
            let line = d.to_string();
            if !reported.contains(&line) {
                tracing::warn!("{line}");
            }
            now_reported.insert(line);
        }
        reported = now_reported;
        let todo = drain::split(
            &observed.nodes,
            &read.fleet,
            &after,
            &mut writes.node_desired,
        );
        // A node that drains first gets its config (and the event) once drained.
        events.retain(|e| {
            !(e.reason == "DesiredChanged"
                && todo.iter().any(|t| e.object == format!("Node/{}", t.node)))
        });
        for e in &events {
            tracing::info!(object = %e.object, reason = %e.reason, "{}", e.message);
        }
        if !writes.is_empty() {
            if tokio::time::timeout(CALL_TIMEOUT * 4, writer.write(&writes))
                .await
                .is_err()
            {
                tracing::warn!(
                    "the API server did not take the writes within {:?}; deciding again",
                    CALL_TIMEOUT * 4
                );
            }
            wait_for_own_writes(&writes, &mcs, &nodes_cache).await;
        }
        // Every call below is bounded: a hung API server cannot stall the loop (the Lease's
        // renewal would go on while nothing is decided).
        if tokio::time::timeout(CALL_TIMEOUT, recorder.record(&events))
            .await
            .is_err()
        {
            tracing::warn!("posting the events took longer than {CALL_TIMEOUT:?}; going on");
        }
        let set = drain_run::drain_nodes(
            &drainer,
            &recorder,
            &todo,
            &observed.nodes,
            &mut last_drain,
            now,
        )
        .await;
        if tokio::time::timeout(
            CALL_TIMEOUT,
            drain_run::end_drains(&drainer, &recorder, &observed.nodes, &todo),
        )
        .await
        .is_err()
        {
            tracing::warn!("ending drains took longer than {CALL_TIMEOUT:?}; trying again");
        }
        if !set.is_empty() {
            let drained = Writes {
                node_desired: set,
                ..Writes::default()
            };
            wait_for_own_writes(&drained, &mcs, &nodes_cache).await;
        }
        last_drain.retain(|n, _| todo.iter().any(|t| &t.node == n));
        let idle = if todo.is_empty() { TICK } else { DRAIN_RETRY };
        tokio::select! {
            () = changed.notified() => tokio::time::sleep(GATHER).await,
            () = tokio::time::sleep(idle) => {}
        }
    }
}

/// Waits (at most [`OWN_WRITES`]) until the caches show the renders created and removed and
/// the nodes' new desired configs: the next decision is made on a view that includes them, so
/// a node handed a config is counted as updating before another is chosen.
async fn wait_for_own_writes(w: &Writes, mcs: &Cache, nodes: &Cache) {
    let started = Instant::now();
    loop {
        let names: HashSet<String> = mcs
            .store
            .state()
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        let renders = w
            .create
            .iter()
            .filter_map(|v| v["metadata"]["name"].as_str())
            .all(|n| names.contains(n))
            && w.delete.iter().all(|n| !names.contains(n));
        let state = nodes.store.state();
        let desired: HashMap<&str, &str> = state
            .iter()
            .filter_map(|o| {
                let d = o.metadata.annotations.as_ref()?.get(DESIRED_CONFIG)?;
                Some((o.metadata.name.as_deref()?, d.as_str()))
            })
            .collect();
        let handed = w
            .node_desired
            .iter()
            .all(|(node, d)| desired.get(node.as_str()) == Some(&d.as_str()));
        if renders && handed {
            return;
        }
        if started.elapsed() > OWN_WRITES {
            tracing::warn!("the watches do not show this controller's own writes after {OWN_WRITES:?}; deciding on what they show");
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Makes the writes, each on its own: one that fails is logged and made again by the next
/// reconcile (which decides from what the API server then holds).
struct Writer {
    mcs: Api<DynamicObject>,
    pools: Api<DynamicObject>,
    nodes: Api<DynamicObject>,
    mcns: Api<DynamicObject>,
}

impl Writer {
    fn new(client: Client) -> Writer {
        Writer {
            mcs: Api::all_with(client.clone(), &machine_configs()),
            pools: Api::all_with(client.clone(), &pools()),
            mcns: Api::all_with(client.clone(), &machine_config_nodes()),
            nodes: Api::all_with(client, &nodes()),
        }
    }

    async fn write(&self, w: &Writes) {
        let pp = PatchParams::default();
        // Renders first: a node is never handed a config that does not exist yet.
        for v in &w.create {
            let name = v["metadata"]["name"].as_str().unwrap_or_default();
            let obj: DynamicObject = match serde_json::from_value(v.clone()) {
                Ok(o) => o,
                Err(e) => {
                    tracing::error!(name, error = %e, "a rendered config is not an object");
                    continue;
                }
            };
            match self.mcs.create(&PostParams::default(), &obj).await {
                Ok(_) => tracing::info!(name, "rendered config created"),
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => tracing::warn!(name, error = %e, "cannot create a rendered config"),
            }
        }
        for (name, patch) in &w.pool_specs {
            if let Err(e) = self.pools.patch(name, &pp, &Patch::Merge(patch)).await {
                tracing::warn!(pool = %name, error = %e, "cannot set the pool's target");
            }
        }
        for (name, desired) in &w.node_desired {
            let patch = json!({"metadata": {"annotations": {DESIRED_CONFIG: desired}}});
            match self.nodes.patch(name, &pp, &Patch::Merge(&patch)).await {
                Ok(_) => tracing::info!(node = %name, desired = %desired, "desired config set"),
                Err(e) => tracing::warn!(node = %name, error = %e, "cannot set the desired config"),
            }
        }
        for (name, status) in &w.pool_statuses {
            let patch = json!({"status": status});
            if let Err(e) = self
                .pools
                .patch_status(name, &pp, &Patch::Merge(&patch))
                .await
            {
                tracing::warn!(pool = %name, error = %e, "cannot write the pool's status");
            }
        }
        for v in &w.mcn_create {
            let name = v["metadata"]["name"].as_str().unwrap_or_default();
            let Ok(obj) = serde_json::from_value::<DynamicObject>(v.clone()) else {
                continue;
            };
            match self.mcns.create(&PostParams::default(), &obj).await {
                Ok(_) => tracing::info!(node = name, "MachineConfigNode created"),
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => {
                    tracing::warn!(node = name, error = %e, "cannot create the MachineConfigNode")
                }
            }
        }
        for (name, patch) in &w.mcn_spec {
            if let Err(e) = self.mcns.patch(name, &pp, &Patch::Merge(patch)).await {
                tracing::warn!(node = %name, error = %e, "cannot update the MachineConfigNode");
            }
        }
        for name in &w.delete {
            match self.mcs.delete(name, &DeleteParams::default()).await {
                Ok(_) => tracing::info!(name, "rendered config deleted (unused)"),
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => tracing::warn!(name, error = %e, "cannot delete a rendered config"),
            }
        }
    }
}
