//! What the CLI's tests against a real hearth-server share: the server (in-process on
//! 127.0.0.1:0, real TLS with its generated CA), the real `hearth` binary run with the test's
//! login file, and a node's side of the API (enrol, report, desired).

#![allow(dead_code)]

use hearth_server::serve::{self, Running};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Output};

pub struct Env {
    pub _rt: tokio::runtime::Runtime,
    pub server: Running,
    pub dir: tempfile::TempDir,
    pub url: String,
}

pub fn setup() -> Env {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = rt
        .block_on(serve::start(serve::Config {
            state_dir: dir.path().join("state"),
            listen: "127.0.0.1:0".parse().unwrap(),
            sans: vec!["localhost".into(), "127.0.0.1".into()],
            options: Default::default(),
            etcd: None,
        }))
        .unwrap();
    let url = format!("https://127.0.0.1:{}", server.addr.port());
    Env {
        _rt: rt,
        server,
        dir,
        url,
    }
}

impl Env {
    pub fn state(&self, f: &str) -> PathBuf {
        self.dir.path().join("state").join(f)
    }

    pub fn token(&self) -> String {
        std::fs::read_to_string(self.state("admin.token"))
            .unwrap()
            .trim()
            .to_string()
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("home/config.json")
    }

    /// Runs `hearth` with the login file of this test (and no HEARTH_* from outside).
    pub fn hearth(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_hearth"))
            .args(args)
            .env("HEARTH_CONFIG", self.config())
            .env_remove("HEARTH_SERVER")
            .env_remove("HEARTH_CA")
            .env_remove("HEARTH_TOKEN")
            .env_remove("HEARTH_CLIENT_CERT")
            .env_remove("HEARTH_CLIENT_KEY")
            .output()
            .unwrap()
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.hearth(args);
        assert!(
            o.status.success(),
            "hearth {args:?}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    pub fn login(&self) {
        let ca = self.state("pki/ca.crt");
        let out = self.ok(&[
            "login",
            "--server",
            &self.url,
            "--ca",
            ca.to_str().unwrap(),
            "--token",
            &self.token(),
        ]);
        assert!(out.contains("Logged in"), "{out}");
    }

    /// Applies `10-a`, a worker MachineConfig with nothing in it, so that the worker pool has a
    /// rendered config for nodes to enroll into.
    pub fn apply_worker_mc(&self) {
        let file = self.dir.path().join("mc.yaml");
        std::fs::write(&file, "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 10-a\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n").unwrap();
        self.ok(&["apply", "-f", file.to_str().unwrap()]);
    }

    /// A blocking HTTPS client for acting as a node.
    pub fn http(&self) -> reqwest::blocking::Client {
        let pem = std::fs::read(self.state("pki/ca.crt")).unwrap();
        reqwest::blocking::Client::builder()
            .tls_certs_only(reqwest::Certificate::from_pem_bundle(&pem).unwrap())
            .build()
            .unwrap()
    }

    pub fn enroll(&self, node: &str) -> String {
        let token = std::fs::read_to_string(self.state("tokens/worker.token")).unwrap();
        let r: Value = self
            .http()
            .post(format!("{}/api/v1/enroll", self.url))
            .header("content-type", "application/json")
            .body(json!({"node": node, "bootstrapToken": token.trim()}).to_string())
            .send()
            .unwrap()
            .json_value();
        r["credential"].as_str().unwrap().to_string()
    }

    pub fn report(&self, credential: &str, body: Value) {
        let r = self
            .http()
            .post(format!("{}/api/v1/agent/status", self.url))
            .bearer_auth(credential)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 204);
    }

    pub fn desired(&self, credential: &str) -> String {
        let r: Value = self
            .http()
            .get(format!("{}/api/v1/agent/desired", self.url))
            .bearer_auth(credential)
            .send()
            .unwrap()
            .json_value();
        r["name"].as_str().unwrap().to_string()
    }
}

pub trait JsonValue {
    fn json_value(self) -> Value;
}

impl JsonValue for reqwest::blocking::Response {
    fn json_value(self) -> Value {
        serde_json::from_str(&self.text().unwrap()).unwrap()
    }
}

pub fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/fleet")
}

pub fn columns(table: &str, name: &str) -> Vec<String> {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
        .split_whitespace()
        .map(str::to_string)
        .collect()
}
