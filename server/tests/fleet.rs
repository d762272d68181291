//! Rollouts across a real fleet: hearth-server (the built binary, on the test machine) and three
//! hearth-agent services in three booted systemd containers that share one network namespace
//! with it (`hearth_vm_tests::SharedNetwork`), driven with the real `hearth` CLI over real TLS
//! with the generated CA. The containers really reboot (nspawn exits 133; the test boots them
//! again at once, as `systemd-nspawn@.service` would).
//!
//! - a MachineConfig that needs a reboot reaches all three, never more than one at a time
//!   unavailable or holding a reboot slot (seen continuously from the server, and from the
//!   containers' own boot records: their reboots never overlap);
//! - a unit that cannot start degrades one node, the rollout halts, `hearth describe node`
//!   names the unit and the error;
//! - the server SIGKILLed mid-rollout and restarted on the same state directory: the rollout
//!   resumes and completes, no node lost or counted twice, no node enrolled again.
//!
//! The scenarios run one at a time (a static lock): each boots three containers and a server.

use crate::common;

use common::hosts::{agent_unit, binary, install, mc, put, wait_for};
use hearth_vm_tests::{HostOptions, SharedNetwork, SystemdHost};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const NODES: [&str; 3] = ["node-0", "node-1", "node-2"];
const SERVER: &str = "https://127.0.0.1:22623";
const REBOOT_MC_FILE: &str = "/etc/hearth-fleet/needs-reboot.conf";

fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Records every boot of a container: `up <ns>` when it is up, `down <ns>` when it shuts down.
const BOOT_LOG_UNIT: &str = "[Unit]\nDescription=record boots for the fleet test\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sh -c 'echo \"up $(date +%%s%%N)\" >> /var/lib/boot-log'\nExecStop=/bin/sh -c 'echo \"down $(date +%%s%%N)\" >> /var/lib/boot-log'\n[Install]\nWantedBy=multi-user.target\n";

/// A reboot of a node: (node, went down, was up again), Unix ns.
type Interval = (String, u128, u128);

/// One container running an agent, rebooted by a supervisor thread whenever it asks to.
struct Node {
    name: String,
    host: Arc<Mutex<SystemdHost>>,
    /// Reboots seen from the test machine: (nspawn exited, booted again), Unix ns.
    reboots: Arc<Mutex<Vec<(u128, u128)>>>,
    stop: Arc<AtomicBool>,
    supervisor: Option<JoinHandle<()>>,
}

impl Node {
    fn host(&self) -> MutexGuard<'_, SystemdHost> {
        self.host.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A file of the container (its disk, valid across reboots).
    fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.host().path(path)).unwrap_or_default()
    }

    /// Reboot intervals from inside: each `down` with the `up` that follows it.
    fn boot_log_intervals(&self) -> Vec<(u128, u128)> {
        let mut out = Vec::new();
        let mut down = None;
        for line in self.read("/var/lib/boot-log").lines() {
            let (kind, t) = line.split_once(' ').unwrap();
            let t: u128 = t.trim().parse().unwrap();
            match kind {
                "down" => down = Some(t),
                "up" => {
                    if let Some(d) = down.take() {
                        out.push((d, t));
                    }
                }
                other => panic!("unexpected boot-log line {other:?}"),
            }
        }
        assert!(down.is_none(), "{}: a shutdown without a boot", self.name);
        out
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.supervisor.take() {
            let _ = t.join();
        }
    }
}

/// hearth-server in the shared namespace, three nodes, the CLI.
struct Fleet {
    net: Arc<SharedNetwork>,
    state: tempfile::TempDir,
    server: Option<Child>,
    nodes: Vec<Node>,
    cli: PathBuf,
    _serial: MutexGuard<'static, ()>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.nodes.clear();
        if let Some(mut c) = self.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The `hearth` CLI as the admin, in the shared namespace.
#[derive(Clone)]
struct Cli {
    net: Arc<SharedNetwork>,
    bin: PathBuf,
    ca: PathBuf,
    token: String,
}

impl Cli {
    fn run(&self, args: &[&str]) -> Output {
        self.net
            .command(&self.bin)
            .args(args)
            .env("HEARTH_SERVER", SERVER)
            .env("HEARTH_CA", &self.ca)
            .env("HEARTH_TOKEN", &self.token)
            .output()
            .expect("run hearth")
    }

    /// Standard output of a command that must succeed.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "hearth {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `hearth get nodes -o json`, by name (None while the server is unreachable).
    fn nodes(&self) -> Option<BTreeMap<String, Value>> {
        let out = self.run(&["get", "nodes", "-o", "json"]);
        if !out.status.success() {
            return None;
        }
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        Some(
            v["items"]
                .as_array()?
                .iter()
                .map(|n| {
                    (
                        n["metadata"]["name"].as_str().unwrap().to_string(),
                        n.clone(),
                    )
                })
                .collect(),
        )
    }

    /// The pool `worker` as JSON.
    fn pool(&self) -> Value {
        serde_json::from_str(&self.ok(&["get", "mcp", "worker", "-o", "json"])).unwrap()
    }

    /// The `worker` row of `hearth get mcp`, by column (None while unreachable).
    fn mcp_row(&self) -> Option<(String, BTreeMap<String, String>)> {
        let out = self.run(&["get", "mcp", "-o", "wide"]);
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next()?.split_whitespace().collect();
        let row = lines.find(|l| l.starts_with("worker "))?;
        let cols = header
            .iter()
            .zip(row.split_whitespace())
            .map(|(h, v)| (h.to_string(), v.to_string()))
            .collect();
        Some((text, cols))
    }
}

/// One look at the fleet from the server.
#[derive(Debug, Clone)]
struct Sample {
    /// Nodes with a reboot slot.
    slots: Vec<String>,
    /// Nodes that reported and are not Done in their desired config.
    unavailable: Vec<String>,
    /// `hearth get mcp` (text) and the worker row.
    mcp: Option<(String, BTreeMap<String, String>)>,
}

fn sample(cli: &Cli) -> Option<Sample> {
    let nodes = cli.nodes()?;
    let slots = nodes
        .iter()
        .filter(|(_, n)| !n["status"]["rebootSlot"].is_null())
        .map(|(k, _)| k.clone())
        .collect();
    let unavailable = nodes
        .iter()
        .filter(|(_, n)| {
            let st = &n["status"];
            !st["state"].is_null() && (st["state"] != "Done" || st["current"] != st["desired"])
        })
        .map(|(k, _)| k.clone())
        .collect();
    Some(Sample {
        slots,
        unavailable,
        mcp: cli.mcp_row(),
    })
}

/// Samples the server's view continuously until dropped.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Sample>>>,
}

impl Sampler {
    fn start(cli: &Cli) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let (s, cli) = (stop.clone(), cli.clone());
        let thread = std::thread::spawn(move || {
            let mut out = Vec::new();
            while !s.load(Ordering::SeqCst) {
                if let Some(x) = sample(&cli) {
                    out.push(x);
                }
            }
            out
        });
        Sampler {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn spawn_server(net: &SharedNetwork, state: &Path, extra: &[String]) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(state.join("server.log"))
        .unwrap();
    let mut child = net
        .command(env!("CARGO_BIN_EXE_hearth-server"))
        .arg("--state-dir")
        .arg(state)
        .args([
            "--listen",
            "127.0.0.1:22623",
            "--san",
            "127.0.0.1",
            "--max-wait",
            "30",
        ])
        .args(extra)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("start hearth-server");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines
        .next()
        .expect("hearth-server prints a line")
        .expect("readable");
    assert!(
        first.contains("listening on 127.0.0.1:22623"),
        "unexpected first line {first:?}"
    );
    std::thread::spawn(move || for _ in lines {});
    child
}

impl Fleet {
    fn start() -> Fleet {
        Fleet::start_with(&[])
    }

    /// With more arguments for hearth-server.
    fn start_with(server_args: &[String]) -> Fleet {
        let serial = common::one_fleet_at_a_time();
        let agent = binary("hearth-agent", "hearth-agent");
        let cli = binary("hearth-cli", "hearth");
        let net = Arc::new(SharedNetwork::create().expect("a shared network namespace"));
        let state = tempfile::tempdir().unwrap();
        let server = spawn_server(&net, state.path(), server_args);
        let mut fleet = Fleet {
            net: net.clone(),
            state,
            server: Some(server),
            nodes: Vec::new(),
            cli,
            _serial: serial,
        };
        let st = fleet.state.path().to_path_buf();
        wait_for("the server's first start", Duration::from_secs(30), || {
            st.join("tokens/worker.token").exists() && st.join("pki/ca.crt").exists()
        });
        // The pool, and a first config that needs no reboot (changes below /etc/hearth-fleet/base
        // only need `None`).
        let dir = fleet.state.path().join("manifests");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("00-pool.yaml"),
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\nspec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n  maxUnavailable: 1\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("10-policy.yaml"),
            "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/hearth-fleet/base\n      actions: [{type: None}]\n    units:\n    - name: hearth-broken.service\n      actions:\n      - type: DaemonReload\n      - type: Restart\n        restart:\n          serviceName: hearth-broken.service\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("20-base.yaml"),
            mc(
                "20-base",
                "      - path: /etc/hearth-fleet/base/motd\n        contents:\n          source: data:,base%0A\n",
            ),
        )
        .unwrap();
        let c = fleet.cli();
        c.ok(&["apply", "-f", dir.to_str().unwrap()]);

        let token = std::fs::read_to_string(st.join("tokens/worker.token")).unwrap();
        let ca = st.join("pki/ca.crt");
        let opts = || HostOptions {
            network: net.host_network(),
            ..HostOptions::default()
        };
        let hosts: Vec<SystemdHost> = std::thread::scope(|s| {
            let handles: Vec<_> = NODES
                .iter()
                .map(|_| s.spawn(|| SystemdHost::boot_with(opts()).expect("boot a node")))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (host, name) in hosts.into_iter().zip(NODES) {
            install(&host, &agent, "/usr/bin/hearth-agent");
            install(&host, &ca, "/etc/hearth/ca.crt");
            put(
                &host,
                "/etc/hearth/agent.env",
                &format!(
                    "HEARTH_SERVER={SERVER}\nHEARTH_CA=/etc/hearth/ca.crt\nHEARTH_BOOTSTRAP_TOKEN={}\nHEARTH_NODE_NAME={name}\n",
                    token.trim()
                ),
            );
            put(
                &host,
                "/etc/systemd/system/hearth-agent.service",
                &agent_unit(),
            );
            put(&host, "/etc/systemd/system/boot-log.service", BOOT_LOG_UNIT);
            host.exec_ok(&["systemctl", "daemon-reload"]).unwrap();
            host.exec_ok(&[
                "systemctl",
                "enable",
                "--now",
                "boot-log.service",
                "hearth-agent.service",
            ])
            .unwrap();
            fleet.nodes.push(supervise(name, host));
        }
        fleet.wait_converged("all three nodes Done in the first config", None);
        fleet
    }

    fn cli(&self) -> Cli {
        let st = self.state.path();
        Cli {
            net: self.net.clone(),
            bin: self.cli.clone(),
            ca: st.join("pki/ca.crt"),
            token: std::fs::read_to_string(st.join("admin.token"))
                .unwrap()
                .trim()
                .to_string(),
        }
    }

    /// Waits until every node is Done in its pool's target (and, if given, that target is not
    /// `not`); returns the target.
    fn wait_converged(&self, what: &str, not: Option<&str>) -> String {
        let c = self.cli();
        let mut target = String::new();
        wait_for(what, Duration::from_secs(120), || {
            let Some(nodes) = c.nodes() else {
                return false;
            };
            let targets: Vec<&Value> = nodes.values().map(|n| &n["status"]["target"]).collect();
            let Some(t) = targets.first().and_then(|t| t.as_str()) else {
                return false;
            };
            target = t.to_string();
            nodes.len() == NODES.len()
                && Some(t) != not
                && nodes.values().all(|n| {
                    let st = &n["status"];
                    st["state"] == "Done" && st["current"] == t && st["desired"] == t
                })
        });
        target
    }

    /// Applies one manifest with the CLI.
    fn apply(&self, name: &str, text: &str) {
        let path = self.state.path().join("manifests").join(name);
        std::fs::write(&path, text).unwrap();
        self.cli().ok(&["apply", "-f", path.to_str().unwrap()]);
    }

    /// Every reboot of every node as (node, start, end): from the containers' boot logs and
    /// from the test machine's view of nspawn exiting and booting again.
    fn reboots(&self) -> (Vec<Interval>, Vec<Interval>) {
        let mut inside = Vec::new();
        let mut outside = Vec::new();
        for n in &self.nodes {
            inside.extend(
                n.boot_log_intervals()
                    .into_iter()
                    .map(|(a, b)| (n.name.clone(), a, b)),
            );
            outside.extend(
                n.reboots
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|&(a, b)| (n.name.clone(), a, b)),
            );
        }
        (inside, outside)
    }

    fn server_log(&self) -> String {
        std::fs::read_to_string(self.state.path().join("server.log")).unwrap_or_default()
    }
}

/// Starts the supervisor of one node: whenever its nspawn exits (a reboot inside), boot it
/// again and record the interval.
fn supervise(name: &str, host: SystemdHost) -> Node {
    let host = Arc::new(Mutex::new(host));
    let reboots = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let (h, r, s, n) = (
        host.clone(),
        reboots.clone(),
        stop.clone(),
        name.to_string(),
    );
    let supervisor = std::thread::spawn(move || {
        while !s.load(Ordering::SeqCst) {
            {
                let mut host = h.lock().unwrap_or_else(|e| e.into_inner());
                if !host.is_running() {
                    let down = unix_nanos();
                    match host.wait_for_reboot(Duration::from_secs(60)) {
                        Ok(_) => r.lock().unwrap().push((down, unix_nanos())),
                        Err(e) => {
                            eprintln!("{n}: did not come back: {e:#}");
                            return;
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    Node {
        name: name.to_string(),
        host,
        reboots,
        stop,
        supervisor: Some(supervisor),
    }
}

/// No two intervals of different nodes overlap.
fn assert_no_overlap(what: &str, mut intervals: Vec<Interval>) {
    intervals.sort_by_key(|i| i.1);
    for w in intervals.windows(2) {
        assert!(
            w[0].2 < w[1].1,
            "{what}: the reboots of {} and {} overlap: {intervals:?}",
            w[0].0,
            w[1].0
        );
    }
}

/// Checks the samples: never more than one node unavailable or holding a slot; the updated
/// count of `hearth get mcp` only grows, from 0 to 3. Returns the distinct `get mcp` outputs.
fn check_samples(samples: &[Sample], target: &str) -> Vec<String> {
    assert!(!samples.is_empty());
    let mut updated_seen = Vec::new();
    let mut tables = Vec::new();
    for s in samples {
        assert!(s.slots.len() <= 1, "more than one reboot slot held: {s:?}");
        assert!(
            s.unavailable.len() <= 1,
            "more than one node unavailable: {s:?}"
        );
        if let Some((text, row)) = s.mcp.as_ref().filter(|(_, r)| r["TARGET"] == target) {
            assert_eq!(row["MACHINECOUNT"], "3", "{text}");
            let u: u32 = row["UPDATEDMACHINECOUNT"].parse().unwrap();
            if updated_seen.last() != Some(&u) {
                updated_seen.push(u);
                tables.push(text.clone());
            }
        }
    }
    assert!(
        updated_seen.windows(2).all(|w| w[0] <= w[1]),
        "UPDATEDMACHINECOUNT went back: {updated_seen:?}\n{}",
        tables.join("\n")
    );
    assert_eq!(updated_seen.first(), Some(&0), "{}", tables.join("\n"));
    assert_eq!(updated_seen.last(), Some(&3), "{}", tables.join("\n"));
    tables
}

fn reboot_mc(content: &str) -> String {
    mc(
        "60-reboot",
        &format!("      - path: {REBOOT_MC_FILE}\n        contents:\n          source: data:,{content}%0A\n"),
    )
}

#[test]
fn a_reboot_rollout_reaches_three_nodes_one_at_a_time() {
    let fleet = Fleet::start();
    let cli = fleet.cli();
    let before = fleet.wait_converged("the first config", None);
    let sampler = Sampler::start(&cli);
    fleet.apply("60-reboot.yaml", &reboot_mc("one"));
    let after = fleet.wait_converged("all three nodes Done in the new config", Some(&before));
    let samples = sampler.finish();
    let tables = check_samples(&samples, &after);
    println!(
        "hearth get mcp while the rollout ran:\n{}",
        tables.join("\n")
    );
    for n in &fleet.nodes {
        assert_eq!(n.read(REBOOT_MC_FILE), "one\n", "{}", n.name);
        assert_eq!(n.host().boot_count(), 2, "{} rebooted once", n.name);
    }
    // Every node held the slot at some point, one after another.
    let holders: Vec<&String> = samples.iter().flat_map(|s| s.slots.iter()).collect();
    assert!(
        NODES.iter().all(|n| holders.iter().any(|h| h == n)),
        "{holders:?}"
    );
    let (inside, outside) = fleet.reboots();
    assert_eq!(inside.len(), 3, "{inside:?}");
    assert_eq!(outside.len(), 3, "{outside:?}");
    assert_no_overlap("boot logs in the containers", inside);
    assert_no_overlap("nspawn exits and boots", outside);
    let pool = cli.pool();
    assert_eq!(pool["status"]["configuration"]["name"], after.as_str());
    assert_eq!(pool["status"]["updatedMachineCount"], 3);
    let text = cli.ok(&["get", "mcp"]);
    assert!(text.contains(&after), "{text}");
}

#[test]
fn a_unit_that_cannot_start_degrades_one_node_and_halts_the_rollout() {
    let fleet = Fleet::start();
    let cli = fleet.cli();
    let before = fleet.wait_converged("the first config", None);
    fleet.apply(
        "70-broken.yaml",
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 70-broken\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    systemd:\n      units:\n      - name: hearth-broken.service\n        enabled: true\n        contents: |\n          [Unit]\n          Description=a unit that cannot start\n          [Service]\n          Type=oneshot\n          ExecStart=/bin/false\n          [Install]\n          WantedBy=multi-user.target\n",
    );
    wait_for("node-0 Degraded", Duration::from_secs(60), || {
        cli.nodes()
            .is_some_and(|n| n["node-0"]["status"]["state"] == "Degraded")
    });
    let pool = cli.pool();
    assert_eq!(pool["status"]["degradedMachineCount"], 1, "{pool:#}");
    assert_eq!(pool["status"]["rolloutHaltedBy"], "node-0", "{pool:#}");
    let target = pool["spec"]["configuration"]["name"].as_str().unwrap();
    assert_ne!(target, before);
    // The halt: the others keep running the old config and are not handed the new one.
    let nodes = cli.nodes().unwrap();
    for n in ["node-1", "node-2"] {
        let st = &nodes[n]["status"];
        assert_eq!(st["state"], "Done", "{n}: {st:#}");
        assert_eq!(st["desired"], before.as_str(), "{n}: {st:#}");
        assert_eq!(st["current"], before.as_str(), "{n}: {st:#}");
    }
    let (_, row) = cli.mcp_row().unwrap();
    assert_eq!(row["DEGRADEDMACHINECOUNT"], "1");
    assert_eq!(row["DEGRADED"], "True");
    assert_eq!(row["MACHINECOUNT"], "3");
    let describe = cli.ok(&["describe", "node", "node-0"]);
    println!("{describe}");
    assert!(describe.contains("Degraded"), "{describe}");
    assert!(describe.contains("hearth-broken.service"), "{describe}");
    assert!(describe.contains("failed"), "{describe}");
    // The change was undone on the node (nothing of it left).
    assert!(fleet.nodes[0]
        .read("/etc/systemd/system/hearth-broken.service")
        .is_empty());
    let status = cli.run(&["rollout", "status", "worker"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("node-0"), "{text}");
}

#[test]
fn the_server_killed_mid_rollout_resumes_it_after_a_restart() {
    let mut fleet = Fleet::start();
    let cli = fleet.cli();
    let before = fleet.wait_converged("the first config", None);
    let enrolled: BTreeMap<String, Value> = cli
        .nodes()
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, v["status"]["enrolledAt"].clone()))
        .collect();
    let credentials: Vec<String> = fleet
        .nodes
        .iter()
        .map(|n| n.read("/var/lib/hearth/server.json"))
        .collect();
    fleet.apply("60-reboot.yaml", &reboot_mc("two"));
    // Kill it once the first node runs the new config, before the others do.
    wait_for("the first node updated", Duration::from_secs(90), || {
        cli.nodes().is_some_and(|nodes| {
            nodes.values().any(|n| {
                let st = &n["status"];
                st["state"] == "Done"
                    && st["current"] == st["target"]
                    && st["target"] != before.as_str()
            })
        })
    });
    let mut server = fleet.server.take().unwrap();
    server.kill().unwrap(); // SIGKILL
    server.wait().unwrap();
    assert!(cli.mcp_row().is_none(), "the server still answers");
    // The agents go on without it for a while.
    std::thread::sleep(Duration::from_secs(3));
    fleet.server = Some(spawn_server(&fleet.net, fleet.state.path(), &[]));
    let sampler = Sampler::start(&cli);
    let after = fleet.wait_converged("the rollout completed after the restart", Some(&before));
    let samples = sampler.finish();
    for s in &samples {
        assert!(s.slots.len() <= 1, "{s:?}");
        assert!(s.unavailable.len() <= 1, "{s:?}");
        if let Some((text, row)) = &s.mcp {
            assert_eq!(row["MACHINECOUNT"], "3", "{text}");
        }
    }
    for n in &fleet.nodes {
        assert_eq!(n.read(REBOOT_MC_FILE), "two\n", "{}", n.name);
    }
    // Nobody lost, nobody twice, nobody enrolled again, the same credentials.
    let nodes = cli.nodes().unwrap();
    assert_eq!(
        nodes.keys().collect::<Vec<_>>(),
        NODES.iter().collect::<Vec<_>>()
    );
    for (name, n) in &nodes {
        assert_eq!(n["status"]["enrolledAt"], enrolled[name], "{name}");
        assert_eq!(n["status"]["target"], after.as_str());
    }
    for (n, before) in fleet.nodes.iter().zip(&credentials) {
        let now = n.read("/var/lib/hearth/server.json");
        let cred =
            |s: &str| -> Value { serde_json::from_str::<Value>(s).unwrap()["credential"].clone() };
        assert_eq!(cred(&now), cred(before), "{} kept its credential", n.name);
    }
    let (text, row) = cli.mcp_row().unwrap();
    assert_eq!(row["MACHINECOUNT"], "3", "{text}");
    assert_eq!(row["UPDATEDMACHINECOUNT"], "3", "{text}");
    let (inside, outside) = fleet.reboots();
    assert_eq!(inside.len(), 3, "{inside:?}");
    assert_no_overlap("boot logs in the containers", inside);
    assert_no_overlap("nspawn exits and boots", outside);
    let log = fleet.server_log();
    assert!(!log.contains("panicked"), "{log}");
}

/// 2026-01-03 was a Saturday; this is its 00:00 UTC.
const SATURDAY: u64 = 1_767_398_400;

fn windowed_pool() -> String {
    "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\n  annotations:\n    hearth.io/maintenance-windows: \"Sat 02:00-06:00 UTC\"\nspec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n  maxUnavailable: 1\n".into()
}

#[test]
fn a_reboot_waits_for_the_maintenance_window_then_rolls_out() {
    // The server's window clock starts on a Saturday at 01:00:30 UTC (the hidden test flag);
    // the pool may reboot Saturdays 02:00-06:00.
    let clock = |t: u64| vec!["--window-clock-start".to_string(), t.to_string()];
    let mut fleet = Fleet::start_with(&clock(SATURDAY + 3600 + 30));
    let cli = fleet.cli();
    let before = fleet.wait_converged("the first config", None);
    fleet.apply("00-pool.yaml", &windowed_pool());
    // A change that needs no reboot still rolls out.
    fleet.apply(
        "30-no-reboot.yaml",
        &mc(
            "30-no-reboot",
            "      - path: /etc/hearth-fleet/base/extra\n        contents:\n          source: data:,extra%0A\n",
        ),
    );
    let base = fleet.wait_converged("the change without reboot", Some(&before));
    for n in &fleet.nodes {
        assert_eq!(n.read("/etc/hearth-fleet/base/extra"), "extra\n");
    }
    // One that needs a reboot waits: nobody is handed it, everybody says why.
    fleet.apply("60-reboot.yaml", &reboot_mc("windowed"));
    let waiting = "waiting for the maintenance window Sat 02:00-06:00 UTC, opens in";
    let wide = cli.ok(&["get", "mcp", "-o", "wide"]);
    println!("{wide}");
    let row = wide.lines().find(|l| l.starts_with("worker ")).unwrap();
    assert!(row.contains(waiting), "{wide}");
    let nodes = cli.ok(&["get", "nodes", "-o", "wide"]);
    println!("{nodes}");
    assert_eq!(
        nodes.lines().filter(|l| l.contains(waiting)).count(),
        3,
        "{nodes}"
    );
    let describe = cli.ok(&["describe", "mcp", "worker"]);
    assert!(describe.contains("MaintenanceWindow"), "{describe}");
    let status = cli.run(&["rollout", "status", "worker"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains(waiting),
        "{status:?}"
    );
    let target = cli.pool()["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(target, base);
    // The agents keep polling; a few seconds later still nobody has it or rebooted.
    std::thread::sleep(Duration::from_secs(3));
    let now = cli.nodes().unwrap();
    for (name, n) in &now {
        assert_eq!(n["status"]["desired"], base.as_str(), "{name}");
        assert_eq!(n["status"]["state"], "Done", "{name}");
    }
    for n in &fleet.nodes {
        assert_eq!(n.host().boot_count(), 1, "{}", n.name);
        assert_eq!(n.read(REBOOT_MC_FILE), "", "{}", n.name);
    }
    // The window opens (the server restarts with its clock at 02:00:30): one node at a time.
    let mut server = fleet.server.take().unwrap();
    server.kill().unwrap();
    server.wait().unwrap();
    fleet.server = Some(spawn_server(
        &fleet.net,
        fleet.state.path(),
        &clock(SATURDAY + 2 * 3600 + 30),
    ));
    let sampler = Sampler::start(&cli);
    let after = fleet.wait_converged("the rollout in the window", Some(&base));
    assert_eq!(after, target);
    let samples = sampler.finish();
    check_samples(&samples, &after);
    for n in &fleet.nodes {
        assert_eq!(n.read(REBOOT_MC_FILE), "windowed\n", "{}", n.name);
        assert_eq!(n.host().boot_count(), 2, "{}", n.name);
    }
    let (inside, _) = fleet.reboots();
    assert_no_overlap("boot logs in the containers", inside);
    let wide = cli.ok(&["get", "mcp", "-o", "wide"]);
    let row = wide.lines().find(|l| l.starts_with("worker ")).unwrap();
    // MAINTENANCE, then NOTE (the pool has nodes: "-").
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[cells.len() - 2..], ["open", "-"], "{wide}");
}
