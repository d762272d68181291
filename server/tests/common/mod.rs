//! Helpers for the server's tests: a real server (in-process on 127.0.0.1:0, or the built
//! binary), a real TLS client that trusts the server's generated CA.
#![allow(dead_code)]

pub mod binary;
pub mod hosts;
pub mod replicas;

use hearth_server::app::Options;
use hearth_server::controller::Settings;
use hearth_server::serve::{self, Running};
use reqwest::{Client, StatusCode};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Held by each test that boots a fleet of containers or several servers on a real etcd
/// (`fleet`, `fleet_replicas`, `etcd_partition`): one such test at a time in the test binary, as
/// when each file was a binary of its own, so their timing (samples 50 ms apart, leases) is not
/// shared with another of them on two cores.
pub fn one_fleet_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The repository's `examples/fleet`.
pub fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/fleet")
}

/// Server options for tests.
pub fn options(retention: usize) -> Options {
    Options {
        settings: Settings {
            retention,
            ..Settings::default()
        },
        ..Options::default()
    }
}

/// The worker pool updating every node at once (`maxUnavailable: 100%`).
pub const ALL_AT_ONCE: &str = r#"apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
spec:
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: worker
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/worker: ""
  maxUnavailable: "100%"
"#;

/// Starts a server in-process on 127.0.0.1:0 with its state in `dir`.
pub async fn start(dir: &Path, options: Options) -> Running {
    serve::start(serve::Config {
        state_dir: dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        sans: vec!["localhost".into(), "127.0.0.1".into()],
        options,
        etcd: None,
    })
    .await
    .expect("server starts")
}

/// An HTTPS client trusting only `ca_pem`.
pub fn client(ca_pem: &[u8]) -> Client {
    Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(ca_pem).unwrap())
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// A caller of the API with one token.
#[derive(Debug, Clone)]
pub struct Api {
    /// `https://127.0.0.1:PORT`.
    pub base: String,
    /// The client.
    pub client: Client,
    /// The bearer token (empty: none).
    pub token: String,
}

/// An answer: status and JSON body (Null when empty or not JSON).
#[derive(Debug)]
pub struct Answer {
    /// Status.
    pub status: StatusCode,
    /// Body.
    pub json: Value,
    /// Raw body.
    pub text: String,
    /// Headers.
    pub headers: reqwest::header::HeaderMap,
}

impl Api {
    /// A FleetLock request (`/v1/pre-reboot`, `/v1/steady-state`) to this server from `node`,
    /// with its credential as Basic password (what Zincati sends, the credential in the URL),
    /// for machine `id` in `group`.
    pub fn fleetlock(
        &self,
        node: &Api,
        path: &str,
        id: &str,
        group: &str,
    ) -> reqwest::RequestBuilder {
        self.client
            .post(format!("{}{path}", self.base))
            .basic_auth("node", Some(node.token.clone()))
            .header("fleet-lock-protocol", "true")
            .body(serde_json::json!({"client_params": {"id": id, "group": group}}).to_string())
    }

    /// For `running` with its admin token.
    pub fn admin(running: &Running) -> Api {
        let dir = &running.layout.dir;
        Api {
            base: format!("https://127.0.0.1:{}", running.addr.port()),
            client: client(&std::fs::read(dir.join("pki/ca.crt")).unwrap()),
            token: std::fs::read_to_string(dir.join("admin.token"))
                .unwrap()
                .trim()
                .to_string(),
        }
    }

    /// The same server with another token.
    pub fn with_token(&self, token: &str) -> Api {
        Api {
            token: token.to_string(),
            ..self.clone()
        }
    }

    fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.client.request(method, format!("{}{path}", self.base));
        if self.token.is_empty() {
            r
        } else {
            r.bearer_auth(&self.token)
        }
    }

    /// Sends a request.
    pub async fn send(&self, r: reqwest::RequestBuilder) -> Answer {
        let resp = r.send().await.expect("request");
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap_or_default();
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        Answer {
            status,
            json,
            text,
            headers,
        }
    }

    /// GET.
    pub async fn get(&self, path: &str) -> Answer {
        self.send(self.req(reqwest::Method::GET, path)).await
    }

    /// GET with headers.
    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Answer {
        let mut r = self.req(reqwest::Method::GET, path);
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        self.send(r).await
    }

    /// POST JSON.
    pub async fn post(&self, path: &str, body: &Value) -> Answer {
        self.send(
            self.req(reqwest::Method::POST, path)
                .header("content-type", "application/json")
                .body(serde_json::to_vec(body).unwrap()),
        )
        .await
    }

    /// DELETE.
    pub async fn delete(&self, path: &str) -> Answer {
        self.send(self.req(reqwest::Method::DELETE, path)).await
    }

    /// Applies files (name, text) in one request.
    pub async fn apply(&self, files: &[(String, String)]) -> Answer {
        let body = serde_json::json!({
            "files": files.iter().map(|(n, t)| serde_json::json!({"name": n, "text": t})).collect::<Vec<_>>()
        });
        self.send(
            self.req(reqwest::Method::POST, "/api/v1/manifests")
                .header("content-type", "application/vnd.hearth.apply+json")
                .body(serde_json::to_vec(&body).unwrap()),
        )
        .await
    }

    /// Applies one YAML text.
    pub async fn apply_text(&self, name: &str, text: &str) -> Answer {
        self.apply(&[(name.to_string(), text.to_string())]).await
    }

    /// Enrolls a node with a bootstrap token; returns an Api acting as the node.
    pub async fn enroll(&self, bootstrap: &str, node: &str, labels: Value) -> Api {
        let a = self
            .with_token("")
            .post(
                "/api/v1/enroll",
                &serde_json::json!({"node": node, "labels": labels, "bootstrapToken": bootstrap}),
            )
            .await;
        assert_eq!(a.status, StatusCode::OK, "enroll {node}: {}", a.text);
        self.with_token(a.json["credential"].as_str().unwrap())
    }

    /// Reports a status as a node.
    pub async fn report(
        &self,
        state: &str,
        current: Option<&str>,
        desired: Option<&str>,
        reason: Option<&str>,
    ) {
        self.post_status(&serde_json::json!({
            "apiVersion": "hearth.io/v1", "kind": "AgentStatus",
            "state": state, "current": current, "desired": desired, "reason": reason,
            "lastTransition": "2026-01-01T00:00:00Z", "pendingReboot": false,
            "progress": null, "drift": [], "history": [],
        }))
        .await;
    }

    /// Posts `status` (an `AgentStatus` document) as a node's report; the server takes it.
    pub async fn post_status(&self, status: &Value) {
        let a = self.post("/api/v1/agent/status", status).await;
        assert_eq!(a.status, StatusCode::NO_CONTENT, "report: {}", a.text);
    }

    /// Enrolls `node` into the bootstrap token's pool and reports it `Done` in the config it is
    /// handed; returns an Api acting as the node.
    pub async fn enroll_done(&self, bootstrap: &str, node: &str) -> Api {
        let n = self.enroll(bootstrap, node, serde_json::json!({})).await;
        let d = n.desired_name().await.unwrap();
        n.report("Done", Some(&d), Some(&d), None).await;
        n
    }

    /// The events of `object` (`Node/w0`, `MachineConfigPool/worker`) as `(reason, message)`.
    pub async fn events(&self, object: &str) -> Vec<(String, String)> {
        let r = self.get(&format!("/api/v1/events?object={object}")).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        r.json["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["reason"].as_str().unwrap_or("").to_string(),
                    e["message"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    /// The desired config's name (no wait).
    pub async fn desired_name(&self) -> Option<String> {
        let a = self.get("/api/v1/agent/desired?wait=0").await;
        match a.status {
            StatusCode::OK => a.json["name"].as_str().map(str::to_string),
            StatusCode::NOT_MODIFIED => None,
            s => panic!("desired: {s} {}", a.text),
        }
    }
}

/// The text of a worker MachineConfig writing `/etc/hearth-test` with `content`.
pub fn worker_mc(name: &str, content: &str) -> String {
    format!(
        r#"apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: {name}
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
      - path: /etc/hearth-test-{name}
        mode: 0644
        contents:
          source: "data:,{content}"
"#
    )
}

/// The example fleet's files.
pub fn example_files() -> Vec<(String, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(examples())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            (
                format!(
                    "examples/fleet/{}",
                    p.file_name().unwrap().to_string_lossy()
                ),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

/// How many `method` requests to `route` the server answered with `status`, from its
/// `/metrics` text.
pub fn requests_answered(metrics: &str, method: &str, route: &str, status: u16) -> u64 {
    let labels = [
        format!(r#"method="{method}""#),
        format!(r#"route="{route}""#),
        format!(r#"status="{status}""#),
    ];
    metrics
        .lines()
        .filter(|l| l.starts_with("hearth_server_http_requests_total{"))
        .filter(|l| labels.iter().all(|label| l.contains(label.as_str())))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The value of a metric without labels (`hearth_server_applies_total`), read from the
/// server's `/metrics`.
pub async fn metric(api: &Api, name: &str) -> u64 {
    let m = api.get("/metrics").await;
    assert_eq!(m.status, reqwest::StatusCode::OK, "{}", m.text);
    let prefix = format!("{name} ");
    m.text
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {}", m.text))
}

/// Waits (30 s at most) until the server's `hearth_server_long_polls_waiting` reaches `n`: the
/// long-polls started are waiting, so that an apply's answers go out together.
pub async fn long_polls_waiting(api: &Api, n: u64) {
    let waiting = async {
        while metric(api, "hearth_server_long_polls_waiting").await < n {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), waiting)
        .await
        .unwrap_or_else(|_| panic!("{n} long-polls waiting"));
}

/// A pool from `get mcp`.
pub async fn pool(api: &Api, name: &str) -> Value {
    let a = api.get(&format!("/api/v1/pools/{name}")).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    a.json
}

/// The status counts of a pool: (machine, ready, updated, degraded).
pub async fn counts(api: &Api, name: &str) -> (u64, u64, u64, u64) {
    let p = pool(api, name).await;
    let s = &p["status"];
    (
        s["machineCount"].as_u64().unwrap(),
        s["readyMachineCount"].as_u64().unwrap(),
        s["updatedMachineCount"].as_u64().unwrap(),
        s["degradedMachineCount"].as_u64().unwrap(),
    )
}

/// The bootstrap token of a built-in pool from the state directory.
pub fn bootstrap_token(running: &Running, pool: &str) -> String {
    std::fs::read_to_string(running.layout.bootstrap_token(pool))
        .unwrap()
        .trim()
        .to_string()
}
