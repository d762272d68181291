//! An agent given several server URLs (`--server A,B`: the replicas of one site) fails over
//! between them: the built `hearth-server` and `hearth-agent` binaries, the agent following with
//! `--root` on a directory (an offline image root: files only, no systemd), real TLS.
//!
//! - [closed port, server]: it enrolls through the second and reaches Done (and a 401 is not
//!   retried at another server);
//! - [P1, P2], after Done the server is killed and started again on the same state directory on
//!   P2: the agent moves to P2 by itself, with the same credential (not enrolled twice), and
//!   reaches Done in a change applied there.

use crate::common;

use common::binary::{self, api_for, Server};
use common::hosts::{binary as sibling, wait_for};
use common::*;
use reqwest::StatusCode;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Starts the server binary with its state in `state`, listening on `listen`.
fn spawn(state: &Path, listen: &str) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hearth-server"));
    cmd.arg("--state-dir")
        .arg(state)
        .args(["--listen", listen, "--san", "127.0.0.1"])
        .env("RUST_LOG", "warn");
    binary::spawn(cmd)
}

/// A loopback port nothing listens on (bound, then closed again).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn url(port: u16) -> String {
    format!("https://127.0.0.1:{port}")
}

/// `hearth-agent run --server <servers>` as node `w0` of the worker pool, its log in `log`;
/// killed when dropped.
struct Agent {
    child: Child,
    root: tempfile::TempDir,
    log: PathBuf,
    /// Its `--metrics` address.
    metrics: String,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Agent {
    fn start(state: &Path, servers: &[String]) -> Agent {
        let root = tempfile::tempdir().unwrap();
        let log = root.path().join("agent.log");
        let token = std::fs::read_to_string(state.join("tokens/worker.token")).unwrap();
        let metrics = format!("127.0.0.1:{}", free_port());
        let child = Command::new(sibling("hearth-agent", "hearth-agent"))
            .arg("run")
            .arg("--root")
            .arg(root.path())
            .arg("--server")
            .arg(servers.join(","))
            .arg("--ca")
            .arg(state.join("pki/ca.crt"))
            .args(["--bootstrap-token", token.trim(), "--node-name", "w0"])
            .args(["--metrics", &metrics])
            .env_remove("HEARTH_SERVER")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("hearth-agent starts");
        Agent {
            child,
            root,
            log,
            metrics,
        }
    }

    /// `hearth-agent status -o json` of its root.
    fn status(&self) -> Value {
        let out = Command::new(sibling("hearth-agent", "hearth-agent"))
            .args(["status", "-o", "json", "--root"])
            .arg(self.root.path())
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// Waits until the node is Done in `config` (and has written `file` with `content`).
    fn wait_done(&self, config: &str, file: &str, content: &str) {
        wait_for(&format!("the agent Done in {config}"), TIMEOUT, || {
            let st = self.status();
            st["state"] == "Done" && st["current"] == config
        });
        let written = std::fs::read_to_string(self.root.path().join(file)).unwrap();
        assert_eq!(written, content);
    }

    fn saved(&self) -> Value {
        let bytes = std::fs::read(self.root.path().join("var/lib/hearth/server.json")).unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

const TIMEOUT: Duration = Duration::from_secs(90);

/// The worker pool's rendered config.
async fn rendered(api: &Api) -> Option<String> {
    let p = pool(api, "worker").await;
    p["spec"]["configuration"]["name"]
        .as_str()
        .map(str::to_string)
}

/// Applies a worker MachineConfig `name` and returns the pool's rendered config once it is in.
async fn rendered_with(api: &Api, name: &str) -> String {
    let before = rendered(api).await;
    let a = api
        .apply_text(&format!("{name}.yaml"), &worker_mc(name, name))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    for _ in 0..300 {
        match rendered(api).await {
            Some(now) if Some(&now) != before.as_ref() => return now,
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    panic!("the worker pool never rendered {name}");
}

/// The names of the server's nodes.
async fn nodes(api: &Api) -> Vec<String> {
    let a = api.get("/api/v1/nodes").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    a.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_given_a_closed_port_first_enrolls_through_the_next_server() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let server = spawn(&state, "127.0.0.1:0");
    let api = api_for(&state, server.port);
    let rendered = rendered_with(&api, "one").await;
    let closed = url(free_port());
    let live = url(server.port);

    let agent = Agent::start(&state, &[closed.clone(), live.clone()]);
    agent.wait_done(&rendered, "etc/hearth-test-one", "one");
    assert_eq!(nodes(&api).await, ["w0"]);
    // The saved state keeps the list, and its first entry as `url` for an older agent.
    let saved = agent.saved();
    assert_eq!(saved["servers"], serde_json::json!([closed, live]));
    assert_eq!(saved["url"], closed);
    // The move was logged with both URLs.
    let log = agent.log();
    assert!(
        log.lines()
            .any(|l| l.contains("moving to the next hearth-server")
                && l.contains(&closed)
                && l.contains(&live)),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_follows_its_server_to_another_address_mid_follow() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (p1, p2) = (free_port(), free_port());
    let server = spawn(&state, &format!("127.0.0.1:{p1}"));
    let api = api_for(&state, p1);
    let first = rendered_with(&api, "one").await;

    let agent = Agent::start(&state, &[url(p1), url(p2)]);
    agent.wait_done(&first, "etc/hearth-test-one", "one");
    let credential = agent.saved()["credential"].clone();

    // The server goes away (in the middle of the agent's long-poll) and comes back elsewhere,
    // on the same store: another replica, as the agent sees it.
    drop(server);
    let _server = spawn(&state, &format!("127.0.0.1:{p2}"));
    let api = api_for(&state, p2);
    let second = rendered_with(&api, "two").await;
    assert_ne!(first, second);
    agent.wait_done(&second, "etc/hearth-test-two", "two");

    // Through P2, with the credential it had: one node, enrolled once.
    assert_eq!(agent.saved()["credential"], credential);
    assert_eq!(nodes(&api).await, ["w0"]);
    let mut reported = Value::Null;
    for _ in 0..300 {
        reported = api.get("/api/v1/nodes/w0").await.json;
        if reported["status"]["state"] == "Done" && reported["status"]["current"] == second {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(reported["status"]["current"], second, "{reported:#}");
    // Its metrics say which server it follows (the report above came after they were set).
    let metrics = reqwest::get(format!("http://{}/metrics", agent.metrics))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!("hearth_agent_server{{url=\"{}\"}} 1", url(p2)))
            && metrics.contains(&format!("hearth_agent_server{{url=\"{}\"}} 0", url(p1))),
        "{metrics}"
    );
    let log = agent.log();
    assert!(
        log.lines()
            .any(|l| l.contains("moving to the next hearth-server")
                && l.contains(&url(p1))
                && l.contains(&url(p2))),
        "{log}"
    );
    assert!(!log.contains("enrolling again"), "{log}");
}
