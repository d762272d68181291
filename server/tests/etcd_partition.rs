//! A network partition of one hearth-server replica from etcd, with a real network namespace:
//! replica A runs in a namespace of its own, linked to this machine by a veth pair; replica B and
//! a three-member etcd run here. A blackhole route in A's namespace cuts A from etcd while its
//! clients still reach it. A stops serving what needs the store and says why (503 naming the
//! cut, on `/healthz`, a change and a long-poll, also one that was already waiting; a change's
//! refusal says `ReplicaUnavailable`, so the CLI given both sends it on to B); B serves
//! and holds the controller role; once the route is gone, A serves again, with what was
//! committed through B meanwhile. Needs root (`ip netns`), as the container tests do.

use crate::common;

use crate::test_cluster;

use common::binary::{self, api_for, Server};
use common::replicas::{eventually, healthz, ip, replica_dir};
use common::*;
use reqwest::StatusCode;
use serde_json::json;
use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use test_cluster::Cluster;

/// A network namespace linked to this machine: `host` here, `inner` there, and `client`, a
/// second address here that the test's requests come from (so that cutting `host` in the
/// namespace leaves them alone): the test's own clients bind it, and a route makes it the source
/// of any other connection from here to `inner` (the CLI's). Removed when dropped.
struct Netns {
    name: String,
    prefix: String,
}

impl Netns {
    fn new() -> Netns {
        let id = std::process::id();
        let name = format!("hearth-part-{id}");
        let (outer, inner) = (
            format!("hph{}", id % 100_000),
            format!("hpn{}", id % 100_000),
        );
        let prefix = format!("10.231.{}", 20 + id % 200);
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        ip(&["netns", "add", &name]);
        let ns = Netns { name, prefix };
        ip(&[
            "link", "add", &outer, "type", "veth", "peer", "name", &inner,
        ]);
        ip(&["link", "set", &inner, "netns", &ns.name]);
        ip(&["addr", "add", &format!("{}/24", ns.host()), "dev", &outer]);
        ip(&["addr", "add", &format!("{}/24", ns.client()), "dev", &outer]);
        ip(&["link", "set", &outer, "up"]);
        ip(&[
            "route",
            "add",
            &format!("{}/32", ns.inner()),
            "dev",
            &outer,
            "src",
            &ns.client(),
        ]);
        ns.exec(&[
            "ip",
            "addr",
            "add",
            &format!("{}/24", ns.inner()),
            "dev",
            &inner,
        ]);
        ns.exec(&["ip", "link", "set", &inner, "up"]);
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        ns
    }
    fn host(&self) -> String {
        format!("{}.1", self.prefix)
    }
    fn inner(&self) -> String {
        format!("{}.2", self.prefix)
    }
    fn client(&self) -> String {
        format!("{}.3", self.prefix)
    }
    fn exec(&self, args: &[&str]) {
        let mut all = vec!["netns", "exec", &self.name];
        all.extend_from_slice(args);
        ip(&all);
    }
    /// Cuts the namespace from `host` (etcd) or mends the cut.
    fn cut(&self, cut: bool) {
        let host = format!("{}/32", self.host());
        self.exec(&[
            "ip",
            "route",
            if cut { "add" } else { "del" },
            "blackhole",
            &host,
        ]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // The veth pair goes with the namespace.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// `hearth` with `--server` listing `servers` in order, the replicas' CA and `token`, a login
/// file of its own.
fn cli_with(
    servers: &[&str],
    state: &Path,
    token: &str,
) -> impl Fn(&[&str]) -> std::process::Output {
    let hearth = common::hosts::binary("hearth-cli", "hearth");
    let (servers, ca, token) = (
        servers.join(","),
        state.join("pki/ca.crt"),
        token.to_string(),
    );
    let config = state.join("cli-login.json");
    move |args: &[&str]| {
        Command::new(&hearth)
            .args(args)
            .arg("--server")
            .arg(&servers)
            .arg("--ca")
            .arg(&ca)
            .args(["--token", &token])
            .env("HEARTH_CONFIG", &config)
            .env_remove("HEARTH_SERVER")
            .output()
            .unwrap()
    }
}

fn server(netns: Option<&Netns>, state: &Path, listen: &str, endpoints: &[String]) -> Server {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &ns.name])
                .arg(env!("CARGO_BIN_EXE_hearth-server"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_hearth-server")),
    };
    cmd.arg("--state-dir")
        .arg(state)
        .args(["--listen", &format!("{listen}:0"), "--san", listen])
        .arg("--etcd-endpoints")
        .arg(endpoints.join(","))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped());
    binary::spawn(cmd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The guard serializes whole tests, each on a runtime of its own: nothing in this runtime waits
// for it.
#[allow(clippy::await_holding_lock)]
async fn a_replica_partitioned_from_etcd_stops_writing_says_why_and_recovers() {
    let _one = common::one_fleet_at_a_time();
    let netns = Netns::new();
    let cluster = Cluster::start_also_on(3, &netns.host());
    cluster.wait_leader().await;
    let dir = tempfile::tempdir().unwrap();
    let (state_a, state_b) = (dir.path().join("a"), dir.path().join("b"));

    let a = server(
        Some(&netns),
        &state_a,
        &netns.inner(),
        &cluster.endpoints_on(&netns.host()),
    );
    replica_dir(&state_a, &state_b);
    let b = server(None, &state_b, "127.0.0.1", &cluster.endpoints());
    let api_b = api_for(&state_b, b.port);
    // A's clients come from the second address.
    let client: IpAddr = netns.client().parse().unwrap();
    let api_a = Api {
        base: format!("https://{}:{}", netns.inner(), a.port),
        client: reqwest::Client::builder()
            .tls_certs_only(
                reqwest::Certificate::from_pem_bundle(
                    &std::fs::read(state_a.join("pki/ca.crt")).unwrap(),
                )
                .unwrap(),
            )
            .local_address(client)
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap(),
        token: api_b.token.clone(),
    };
    let r = api_a.apply(&example_files()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let token = std::fs::read_to_string(state_a.join("tokens/worker.token"))
        .unwrap()
        .trim()
        .to_string();
    let node = api_a.enroll(&token, "worker-0", json!({})).await;
    let first = node.desired_name().await.expect("a desired config");
    node.report("Done", Some(&first), Some(&first), None).await;
    // A holds the controller role (it started first).
    let (_, text) = healthz(&api_a).await.unwrap();
    assert!(text.contains("replica: controller"), "{text}");

    // A long-poll waiting on A when the cut comes.
    let waiting = {
        let node = node.clone();
        let known = first.clone();
        tokio::spawn(async move {
            node.get(&format!("/api/v1/agent/desired?wait=120&known={known}"))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    netns.cut(true);

    eventually("A says it is cut off", 90, || async {
        matches!(healthz(&api_a).await, Some((StatusCode::SERVICE_UNAVAILABLE, t)) if t.contains("etcd"))
    })
    .await;
    let (_, why) = healthz(&api_a).await.unwrap();
    assert!(
        why.contains("cut off from etcd since") || why.contains("lost its etcd session"),
        "{why}"
    );
    // The waiting long-poll ended with the reason; new ones and changes are refused with it.
    let woke = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the waiting long-poll ends once A is cut off")
        .unwrap();
    assert_eq!(
        woke.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        woke.text
    );
    assert!(woke.text.contains("etcd"), "{}", woke.text);
    // Reads too: its view may be old (the CLI asks another replica).
    let read = api_a.get("/api/v1/nodes").await;
    assert_eq!(
        read.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        read.text
    );
    let refused = api_a
        .apply_text("cut.yaml", &worker_mc("99-cut", "cut"))
        .await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.text
    );
    assert!(refused.text.contains("etcd"), "{}", refused.text);
    let status: serde_json::Value = serde_json::from_str(&refused.text).unwrap();
    assert_eq!(status["reason"], "ReplicaUnavailable", "{}", refused.text);

    // The CLI given both replicas, A first: A answers that it did not act, so the change goes
    // to B (before, a change answered 503 was not sent elsewhere). A's own count of refused
    // applies shows that the CLI reached A and was refused there, not that it failed to
    // connect (its `/metrics` answers while it is cut off).
    let refused_applies = || async {
        let text = api_a.get("/metrics").await.text;
        requests_answered(&text, "POST", "/api/v1/manifests", 503)
    };
    let refused_before = refused_applies().await;
    let cli = cli_with(&[&api_a.base, &api_b.base], &state_b, &api_b.token);
    let file = dir.path().join("moved.yaml");
    std::fs::write(&file, worker_mc("99-moved", "moved")).unwrap();
    let out = cli(&["apply", "-f", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("99-moved"), "{said}");
    assert_eq!(refused_applies().await, refused_before + 1);
    let r = api_b.get("/api/v1/machineconfigs/99-moved").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    // B serves meanwhile and takes the controller role once A's lease is gone.
    let r = api_b
        .apply_text("late.yaml", &worker_mc("99-late", "late"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    eventually("B holds the controller role", 90, || async {
        matches!(healthz(&api_b).await, Some((StatusCode::OK, t)) if t.contains("replica: controller"))
    })
    .await;
    let node_b = Api {
        base: api_b.base.clone(),
        ..node.clone()
    };
    let second = node_b.desired_name().await.expect("the new config via B");
    assert_ne!(second, first);

    // The cut mends: A serves again, with what B committed meanwhile.
    netns.cut(false);
    eventually("A serves again", 90, || async {
        matches!(healthz(&api_a).await, Some((StatusCode::OK, _)))
    })
    .await;
    eventually("A's view has B's change", 90, || async {
        api_a.get("/api/v1/machineconfigs/99-late").await.status == StatusCode::OK
    })
    .await;
    assert_eq!(node.desired_name().await, Some(second));
    let r = api_a
        .apply_text("after.yaml", &worker_mc("99-after", "after"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    eventually("B sees A's change", 90, || async {
        api_b.get("/api/v1/machineconfigs/99-after").await.status == StatusCode::OK
    })
    .await;
    // B stays controller: one at a time.
    let (_, text) = healthz(&api_a).await.unwrap();
    assert!(!text.contains("replica: controller"), "{text}");
}
