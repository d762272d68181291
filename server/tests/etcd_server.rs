//! The built `hearth-server` binary on a real etcd (`--etcd-endpoints`): it serves apply, enroll
//! and desired end to end with everything kept in etcd (no database file), a second server on
//! the same prefix waits longer than the lock's lease, then refuses to start and names the one
//! that holds it; after the first stops (SIGTERM releases its lock at once) a server with another
//! state directory starts on the same prefix and finds the fleet, and after a SIGKILL its
//! restart waits for the dead lock to expire and serves again.

mod common;

#[path = "../src/etcd/test_cluster.rs"]
mod test_cluster;

use common::binary::{self, api_for, Server};
use common::*;
use reqwest::StatusCode;
use serde_json::json;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use test_cluster::Cluster;

fn command(state: &Path, endpoints: &[String]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hearth-server"));
    cmd.arg("--state-dir")
        .arg(state)
        .args(["--listen", "127.0.0.1:0", "--san", "127.0.0.1"])
        .arg("--etcd-endpoints")
        .arg(endpoints.join(","))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped());
    cmd
}

/// Starts the binary on etcd.
fn spawn(state: &Path, endpoints: &[String]) -> Server {
    binary::spawn(command(state, endpoints))
}

fn names(v: &serde_json::Value) -> Vec<String> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_on_etcd_serves_and_a_second_one_is_refused() {
    let cluster = Cluster::start(3);
    cluster.wait_leader().await;
    let endpoints = cluster.endpoints();
    let dir = tempfile::tempdir().unwrap();
    let (state_a, state_b) = (dir.path().join("a"), dir.path().join("b"));

    let server = spawn(&state_a, &endpoints);
    let api = api_for(&state_a, server.port);
    let a = api.apply(&example_files()).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let token = std::fs::read_to_string(state_a.join("tokens/worker.token"))
        .unwrap()
        .trim()
        .to_string();
    let node = api.enroll(&token, "worker-0", json!({})).await;
    let first = node.desired_name().await.expect("a desired config");
    let fleet = names(&api.get("/api/v1/nodes").await.json);
    assert!(fleet.contains(&"worker-0".to_string()), "{fleet:?}");
    node.report("Done", Some(&first), Some(&first), None).await;
    // A change reaches the node's long-poll.
    let waiting = {
        let node = node.clone();
        let known = first.clone();
        tokio::spawn(async move {
            node.get(&format!("/api/v1/agent/desired?wait=60&known={known}"))
                .await
        })
    };
    let a = api
        .apply_text("late.yaml", &worker_mc("99-late", "late"))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let woke = waiting.await.unwrap();
    assert_eq!(woke.status, StatusCode::OK, "{}", woke.text);
    let second = woke.json["name"].as_str().unwrap().to_string();
    assert_ne!(second, first);

    // Everything is in etcd under /hearth/; the state directory holds no database.
    let mut etcd = etcd_client::Client::connect(&endpoints, None)
        .await
        .unwrap();
    let got = etcd.get("/hearth/nodes/worker-0", None).await.unwrap();
    assert_eq!(got.kvs().len(), 1);
    let mc = etcd
        .get("/hearth/machineconfigs/99-late", None)
        .await
        .unwrap();
    assert_eq!(mc.kvs().len(), 1);
    let db_files: Vec<_> = std::fs::read_dir(&state_a)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("redb") || n.ends_with(".db"))
        .collect();
    assert!(db_files.is_empty(), "{db_files:?}");

    // A second server on the same prefix refuses, says why and who holds it.
    let mut second_server = command(&state_b, &endpoints)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut status = None;
    for _ in 0..600 {
        if let Some(s) = second_server.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Some(status) = status else {
        let _ = second_server.kill();
        panic!("a second server on the same prefix did not refuse to start");
    };
    let mut stderr = String::new();
    second_server
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("replicas are not supported yet"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("pid {}", server.child.id())),
        "the message names the holder: {stderr}"
    );
    assert!(stderr.contains("/hearth/"), "{stderr}");
    // It wrote nothing: the fleet is as the first server left it.
    assert_eq!(names(&api.get("/api/v1/nodes").await.json), fleet);

    // SIGTERM: the first server gives its lock up as it stops; another starts on the prefix
    // (with its own state directory) and serves the same fleet.
    let pid = nix::unistd::Pid::from_raw(server.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut server = server;
    assert!(server.child.wait().unwrap().success());
    let other = spawn(&state_b, &endpoints);
    let api_b = api_for(&state_b, other.port);
    assert_eq!(names(&api_b.get("/api/v1/nodes").await.json), fleet);
    assert_eq!(
        api_b.get("/api/v1/machineconfigs/99-late").await.status,
        StatusCode::OK
    );
    let node_b = Api {
        base: api_b.base.clone(),
        client: api_b.client.clone(),
        token: node.token.clone(),
    };
    assert_eq!(node_b.desired_name().await, Some(second.clone()));

    // SIGKILL: the lock stays until its lease expires; a restart at once waits for it and
    // serves the same fleet.
    let mut other = other;
    other.child.kill().unwrap();
    other.child.wait().unwrap();
    drop(other);
    let again = spawn(&state_b, &endpoints);
    let api_b = api_for(&state_b, again.port);
    assert_eq!(names(&api_b.get("/api/v1/nodes").await.json), fleet);
    let node_b = Api {
        base: api_b.base.clone(),
        ..node_b
    };
    assert_eq!(node_b.desired_name().await, Some(second));
}

/// etcd out of reach for longer than the lock's lease: the server cannot know whether another
/// has taken the prefix, so it stops (non-zero, saying why) instead of writing on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_loses_its_lock_stops() {
    let mut cluster = Cluster::start(1);
    cluster.wait_leader().await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut child = command(&state, &cluster.endpoints())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a line").expect("readable");
    assert!(first.contains("listening on"), "{first}");
    std::thread::spawn(move || for _ in lines {});
    cluster.kill(0);
    // The lease is 10 s; the bound here only keeps a broken server from hanging the test.
    let mut status = None;
    for _ in 0..1200 {
        if let Some(s) = child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Some(status) = status else {
        let _ = child.kill();
        panic!("the server went on running without its lock");
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("lock's lease"), "{stderr}");
    assert!(stderr.contains("stopping"), "{stderr}");
}
