//! For tests only: a real etcd cluster on loopback, from the `etcd` binary that the
//! `etcd-bin-vendored` dev-dependency ships (or `HEARTH_ETCD_BIN`, e.g. Debian's
//! `/usr/bin/etcd`). Used by the store's unit tests and, through `#[path]`, by
//! `server/tests/etcd.rs`. Depends on nothing of the crate's.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// TLS for the members' client URLs: serving certificate, key and the CA that signs client
/// certificates (which are then required).
#[derive(Debug, Clone)]
pub struct MemberTls {
    /// Serving certificate (PEM file).
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
    /// The CA of client certificates (PEM file).
    pub client_ca: PathBuf,
}

/// One member.
#[derive(Debug)]
pub struct Member {
    /// `m0`, `m1`, ...
    pub name: String,
    /// Client port.
    pub client_port: u16,
    /// Peer port.
    pub peer_port: u16,
    child: Option<Child>,
}

/// A cluster; every member is killed on drop.
#[derive(Debug)]
pub struct Cluster {
    /// The members.
    pub members: Vec<Member>,
    dir: tempfile::TempDir,
    tls: Option<MemberTls>,
    /// Another address the members take clients on.
    also: Option<String>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// The etcd binary.
pub fn etcd_bin() -> PathBuf {
    if let Ok(p) = std::env::var("HEARTH_ETCD_BIN") {
        return PathBuf::from(p);
    }
    etcd_bin_vendored::etcd_bin_path()
        .expect("etcd-bin-vendored ships no etcd for this platform: set HEARTH_ETCD_BIN")
        .to_path_buf()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Cluster {
    /// Starts `n` members (plain http).
    pub fn start(n: usize) -> Cluster {
        Self::start_with(n, None)
    }

    /// Starts `n` members, with TLS and client-certificate authentication on the client URLs
    /// when `tls` is given.
    pub fn start_with(n: usize, tls: Option<MemberTls>) -> Cluster {
        Self::start_full(n, tls, None)
    }

    /// Starts `n` members (plain http) that also take clients on `also` (an address of this
    /// machine, e.g. the host side of a network namespace's link).
    pub fn start_also_on(n: usize, also: &str) -> Cluster {
        Self::start_full(n, None, Some(also.to_string()))
    }

    fn start_full(n: usize, tls: Option<MemberTls>, also: Option<String>) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let members = (0..n)
            .map(|i| Member {
                name: format!("m{i}"),
                client_port: free_port(),
                peer_port: free_port(),
                child: None,
            })
            .collect();
        let mut c = Cluster {
            members,
            dir,
            tls,
            also,
        };
        for i in 0..n {
            c.spawn(i, "new");
        }
        c
    }

    fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    fn spawn(&mut self, i: usize, state: &str) {
        let initial: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect();
        let m = &self.members[i];
        let client = format!("{}://127.0.0.1:{}", self.scheme(), m.client_port);
        let listen = match &self.also {
            Some(ip) => format!("{client},{}://{ip}:{}", self.scheme(), m.client_port),
            None => client.clone(),
        };
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let data = self.dir.path().join(&m.name);
        let mut cmd = Command::new(etcd_bin());
        cmd.arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(&data)
            .args(["--listen-client-urls", &listen])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &initial.join(",")])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", "hearth-test"])
            // What docs/operations.md asks of a production etcd for hearth.
            .args(["--max-txn-ops", "10000"])
            .args(["--max-request-bytes", "33554432"])
            .args(["--log-level", "error"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(t) = &self.tls {
            cmd.arg("--cert-file")
                .arg(&t.cert)
                .arg("--key-file")
                .arg(&t.key)
                .arg("--trusted-ca-file")
                .arg(&t.client_ca)
                .arg("--client-cert-auth");
        }
        let child = cmd.spawn().expect("etcd starts");
        self.members[i].child = Some(child);
    }

    /// The client URLs of every member (dead or alive).
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("{}://127.0.0.1:{}", self.scheme(), m.client_port))
            .collect()
    }

    /// The client URLs of every member on the extra address of [`Cluster::start_also_on`].
    pub fn endpoints_on(&self, ip: &str) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("{}://{ip}:{}", self.scheme(), m.client_port))
            .collect()
    }

    /// Kills member `i` (SIGKILL).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// Starts member `i` again after [`Cluster::kill`], rejoining the cluster.
    pub fn restart(&mut self, i: usize) {
        self.spawn(i, "existing");
    }

    /// Where the members keep their data.
    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Waits until the live members (plain http only) agree on a leader; returns its index.
    pub async fn wait_leader(&self) -> usize {
        assert!(
            self.tls.is_none(),
            "wait_leader speaks plain http; with TLS use a store to wait"
        );
        for _ in 0..600 {
            let mut leader = None;
            for (i, m) in self.members.iter().enumerate() {
                if m.child.is_none() {
                    continue;
                }
                let url = format!("http://127.0.0.1:{}", m.client_port);
                let Ok(mut c) = etcd_client::Client::connect(
                    [url],
                    Some(
                        etcd_client::ConnectOptions::new()
                            .with_connect_timeout(Duration::from_millis(500))
                            .with_timeout(Duration::from_secs(1)),
                    ),
                )
                .await
                else {
                    continue;
                };
                if let Ok(s) = c.status().await {
                    let me = s.header().map(|h| h.member_id());
                    if s.leader() != 0 && Some(s.leader()) == me {
                        leader = Some(i);
                    }
                }
            }
            if let Some(i) = leader {
                return i;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the etcd cluster elected no leader within a minute");
    }
}
