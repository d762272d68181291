//! A real Kubernetes control plane on loopback for tests: [`KubeCluster`].
//!
//! One etcd (the binary of the `etcd-bin-vendored` crate, or `$HEARTH_ETCD_BIN`), a
//! `kube-apiserver` and a `kube-controller-manager` running the disruption controller (it
//! computes PodDisruptionBudget status, which the Eviction API checks), all 1.20.2 built from
//! Debian's `kubernetes` source by `images/build-kube.sh` and cached (see [`cached_kube`]);
//! clients use Debian's `kubectl` of the same version.
//!
//! ```no_run
//! use hearth_vm_tests::kube::KubeCluster;
//!
//! # fn main() -> anyhow::Result<()> {
//! let cluster = KubeCluster::start()?; // ~5-10 s once the binaries are cached
//! assert_eq!(cluster.kubectl(&["get", "--raw", "/readyz"])?, "ok");
//! let node = cluster.node_kubeconfig("node-a")?; // system:node:node-a in system:nodes
//! let out = cluster.kubectl_as(&node, &["get", "node", "node-a", "-o", "name"]);
//! # let _ = out;
//! # Ok(()) }
//! ```
//!
//! - **Authentication**: `--token-auth-file` with the admin (`hearth-admin`, group
//!   `system:masters`) and the controller manager's identity; nodes authenticate with client
//!   certificates signed by the cluster's CA (CN `system:node:<name>`, O `system:nodes`), so
//!   node identities can be added while the server runs ([`KubeCluster::node_kubeconfig`]).
//! - **Authorization**: `--authorization-mode=Node,RBAC` and the `NodeRestriction` admission
//!   plugin, as on a real cluster: a node can read Nodes and change only its own.
//! - **Files**: everything (certificates, tokens, kubeconfigs, etcd data, logs) is in a
//!   temporary directory removed on drop, where the processes are killed too.
//! - **Missing binaries**: the first cluster of a machine builds them (under the cache lock),
//!   which needs root and the Debian archive; when that fails, [`KubeCluster::start`] fails
//!   saying why. Tests never skip.

mod build;
pub mod fixtures;
mod host;
pub(crate) mod pki;
mod procs;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

pub use build::{cached_kube, kube_key, KubeBinaries, BUILD_KUBE_SCRIPT};
pub use pki::{MASTERS_GROUP, NODES_GROUP};

use crate::exec;
use pki::{Credential, Pki, StaticToken};
use procs::{free_port, Proc};

/// The admin's user name (in `system:masters`).
pub const ADMIN_USER: &str = "hearth-admin";
/// Where [`KubeCluster::connect_host`] (`host.rs`) puts the node's kubeconfig inside the
/// container.
pub const HOST_KUBECONFIG: &str = "/etc/hearth/kube/kubeconfig";

/// How long the API server may take to answer `/readyz` with `ok`.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How many times [`KubeCluster::start`] tries when a port it picked was taken meanwhile.
pub const START_ATTEMPTS: u32 = 3;
/// How long one `kubectl` call may take.
const KUBECTL_TIMEOUT: Duration = Duration::from_secs(120);

/// A running etcd + kube-apiserver + kube-controller-manager; stopped on drop.
#[derive(Debug)]
pub struct KubeCluster {
    bins: KubeBinaries,
    pki: Pki,
    port: u16,
    admin: StaticToken,
    admin_kubeconfig: PathBuf,
    // Dropped in this order: the controller manager, the API server, etcd, then the files.
    controller_manager: Option<Proc>,
    apiserver: Proc,
    etcd: Proc,
    dir: tempfile::TempDir,
}

impl KubeCluster {
    /// Starts a fresh cluster and waits until `/readyz` answers `ok`. Builds the binaries
    /// first when the cache does not have them (see [`cached_kube`]).
    ///
    /// Ports are picked free just before the programs bind them; when another process took
    /// one in between ("address already in use" in a log), the cluster is started again on
    /// new ports, at most [`START_ATTEMPTS`] times.
    pub fn start() -> Result<KubeCluster> {
        let bins = cached_kube()?;
        let mut attempt = 1;
        loop {
            match Self::start_once(bins.clone()) {
                Err(e) if attempt < START_ATTEMPTS && is_port_clash(&e) => {
                    tracing::warn!(attempt, "a port of the test cluster was taken: {e:#}");
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    fn start_once(bins: KubeBinaries) -> Result<KubeCluster> {
        let dir = tempfile::Builder::new()
            .prefix("hearth-kube-")
            .tempdir()
            .context("creating the cluster's directory")?;
        let d = dir.path();
        let pki = Pki::create(&d.join("pki"))?;

        // etcd.
        let etcd_client = free_port()?;
        let etcd_peer = free_port()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_client}");
        let mut cmd = Command::new(etcd_bin()?);
        cmd.arg("--name")
            .arg("kube")
            .arg("--data-dir")
            .arg(d.join("etcd"))
            .args(["--listen-client-urls", &etcd_url])
            .args(["--advertise-client-urls", &etcd_url])
            .args([
                "--listen-peer-urls",
                &format!("http://127.0.0.1:{etcd_peer}"),
            ])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{etcd_peer}"),
            ])
            .args([
                "--initial-cluster",
                &format!("kube=http://127.0.0.1:{etcd_peer}"),
            ])
            .args(["--log-level", "warn"]);
        let etcd = Proc::spawn("etcd", cmd, &d.join("etcd.log"))?;

        // kube-apiserver.
        let admin = StaticToken::new(ADMIN_USER, &[MASTERS_GROUP])?;
        let kcm = StaticToken::new("system:kube-controller-manager", &[MASTERS_GROUP])?;
        let tokens = d.join("tokens.csv");
        pki::write(&tokens, &pki::token_file(&[admin.clone(), kcm.clone()]))?;
        let port = free_port()?;
        let (crt, key) = pki.serving();
        let (sa_key, sa_pub) = pki.sa_keys();
        let mut cmd = Command::new(&bins.apiserver);
        cmd.args(["--etcd-servers", &etcd_url])
            .args(["--bind-address", "127.0.0.1"])
            .args(["--advertise-address", "127.0.0.1"])
            .args(["--secure-port", &port.to_string()])
            .arg("--cert-dir")
            .arg(d.join("apiserver-certs"))
            .arg("--tls-cert-file")
            .arg(&crt)
            .arg("--tls-private-key-file")
            .arg(&key)
            .arg("--client-ca-file")
            .arg(pki.ca_cert())
            .arg("--token-auth-file")
            .arg(&tokens)
            .args(["--authorization-mode", "Node,RBAC"])
            .args(["--enable-admission-plugins", "NodeRestriction"])
            .arg("--service-account-key-file")
            .arg(&sa_pub)
            .arg("--service-account-signing-key-file")
            .arg(&sa_key)
            .args([
                "--service-account-issuer",
                "https://kubernetes.default.svc.cluster.local",
            ])
            .args(["--service-cluster-ip-range", "10.96.0.0/16"])
            .arg("--profiling=false");
        let apiserver = Proc::spawn("kube-apiserver", cmd, &d.join("kube-apiserver.log"))?;
        let server = format!("https://127.0.0.1:{port}");
        let admin_kubeconfig = d.join("admin.kubeconfig");
        pki::write(
            &admin_kubeconfig,
            &pki::kubeconfig(&server, &pki.ca_cert(), Credential::Token(&admin.token)),
        )?;
        let kcm_kubeconfig = d.join("kube-controller-manager.kubeconfig");
        pki::write(
            &kcm_kubeconfig,
            &pki::kubeconfig(&server, &pki.ca_cert(), Credential::Token(&kcm.token)),
        )?;

        // kube-controller-manager: the disruption controller only (PDB status); no serving.
        let mut cmd = Command::new(&bins.controller_manager);
        cmd.arg("--kubeconfig")
            .arg(&kcm_kubeconfig)
            .args(["--controllers", "disruption"])
            .arg("--leader-elect=false")
            .arg("--use-service-account-credentials=false")
            .args(["--secure-port", "0"])
            .args(["--port", "0"]);
        // Started after the API server is ready (below), so its first discovery succeeds.
        let mut cluster = KubeCluster {
            bins,
            pki,
            port,
            admin,
            admin_kubeconfig,
            controller_manager: None,
            apiserver,
            etcd,
            dir,
        };
        cluster.wait_ready()?;
        cluster.controller_manager = Some(Proc::spawn(
            "kube-controller-manager",
            cmd,
            &cluster.dir.path().join("kube-controller-manager.log"),
        )?);
        Ok(cluster)
    }

    fn wait_ready(&mut self) -> Result<()> {
        let started = Instant::now();
        let mut last: String;
        loop {
            self.etcd.check_running()?;
            self.apiserver.check_running()?;
            match self.kubectl(&["get", "--raw", "/readyz"]) {
                Ok(out) if out == "ok" => {
                    tracing::info!(
                        seconds = started.elapsed().as_secs_f64(),
                        "kube-apiserver ready"
                    );
                    return Ok(());
                }
                Ok(out) => last = out,
                Err(e) => last = format!("{e:#}"),
            }
            if started.elapsed() > READY_TIMEOUT {
                bail!(
                    "kube-apiserver was not ready within {READY_TIMEOUT:?}: {last}\n\
                     last lines of its log:\n{}",
                    self.apiserver.log_tail(30)
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// An error naming the program (with the tail of its log) when one of the cluster's
    /// programs has exited.
    pub fn check_running(&mut self) -> Result<()> {
        self.etcd.check_running()?;
        self.apiserver.check_running()?;
        if let Some(kcm) = self.controller_manager.as_mut() {
            kcm.check_running()?;
        }
        Ok(())
    }

    /// Runs `kubectl` as the admin until `done` accepts its output, at most `timeout`; the
    /// last output or error otherwise. For what controllers do asynchronously (PDB status).
    pub fn kubectl_until(
        &mut self,
        args: &[&str],
        timeout: Duration,
        done: impl Fn(&str) -> bool,
    ) -> Result<String> {
        let started = Instant::now();
        loop {
            self.check_running()?;
            let last = self.kubectl(args);
            if let Ok(out) = &last {
                if done(out) {
                    return Ok(out.clone());
                }
            }
            if started.elapsed() > timeout {
                let last = match last {
                    Ok(out) => format!("last output: {out:?}"),
                    Err(e) => format!("last error: {e:#}"),
                };
                bail!(
                    "kubectl {} did not give the expected output within {timeout:?} ({last})",
                    args.join(" ")
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The API server's URL (`https://127.0.0.1:<port>`).
    pub fn server(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The CA certificate (PEM file) that signs the serving and client certificates.
    pub fn ca_cert(&self) -> PathBuf {
        self.pki.ca_cert()
    }

    /// The admin's bearer token (user [`ADMIN_USER`], group `system:masters`).
    pub fn admin_token(&self) -> &str {
        &self.admin.token
    }

    /// The admin's kubeconfig file.
    pub fn kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// The binaries the cluster runs.
    pub fn binaries(&self) -> &KubeBinaries {
        &self.bins
    }

    /// The cluster's directory (logs: `kube-apiserver.log`, `kube-controller-manager.log`,
    /// `etcd.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A kubeconfig for node `name`: a client certificate for user `system:node:<name>` in
    /// group `system:nodes`, which the Node authorizer and NodeRestriction know. The Node
    /// object itself is not created. Can be called any time, also more than once.
    pub fn node_kubeconfig(&self, name: &str) -> Result<PathBuf> {
        check_node_name(name)?;
        self.user_kubeconfig(
            &format!("node-{name}"),
            &format!("system:node:{name}"),
            &[NODES_GROUP],
        )
    }

    /// The controller's kubeconfig: a client certificate for the service account
    /// `hearth-system/hearth-controller` that `config/kubernetes/rbac/` binds.
    pub fn controller_kubeconfig(&self) -> Result<PathBuf> {
        self.user_kubeconfig(
            "hearth-controller",
            "system:serviceaccount:hearth-system:hearth-controller",
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:hearth-system",
            ],
        )
    }

    /// A kubeconfig for any identity: a client certificate for `user` in `groups` (e.g. a
    /// service account's user name, `system:serviceaccount:<namespace>:<name>`, which RBAC
    /// bindings to that service account match). Written as `<file>.kubeconfig`.
    pub fn user_kubeconfig(&self, file: &str, user: &str, groups: &[&str]) -> Result<PathBuf> {
        check_node_name(file)?;
        let (crt, key) = self.pki.client_cert(file, user, groups)?;
        let path = self.dir.path().join(format!("{file}.kubeconfig"));
        pki::write(
            &path,
            &pki::kubeconfig(
                &self.server(),
                &self.pki.ca_cert(),
                Credential::Cert(&crt, &key),
            ),
        )?;
        Ok(path)
    }

    /// Runs Debian's `kubectl` as the admin; its stdout (trimmed) on success, otherwise an
    /// error with its stderr.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        self.kubectl_as(&self.admin_kubeconfig, args)
    }

    /// Runs `kubectl` with another kubeconfig (e.g. [`KubeCluster::node_kubeconfig`]).
    pub fn kubectl_as(&self, kubeconfig: &Path, args: &[&str]) -> Result<String> {
        let mut cmd = Command::new(&self.bins.kubectl);
        cmd.arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("kubectl-cache"))
            .args(args)
            .env_remove("KUBECONFIG");
        let what = format!("kubectl {}", args.join(" "));
        let out = exec::run(cmd, KUBECTL_TIMEOUT, &what)?;
        if !out.success() {
            bail!("{what} failed: {}", out);
        }
        Ok(out.stdout_trimmed().to_string())
    }

    /// Writes `status` into the object at `path` (its API path, e.g.
    /// `/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker`) through its
    /// status subresource, as `kubeconfig`'s user: reads the object, sets its `status` and PUTs
    /// it to `<path>/status` with the resourceVersion read (kubectl 1.20 has no
    /// `--subresource`). Returns the server's answer.
    pub fn replace_status_as(
        &self,
        kubeconfig: &Path,
        path: &str,
        status: serde_json::Value,
    ) -> Result<String> {
        let current = self.kubectl_as(kubeconfig, &["get", "--raw", path])?;
        let mut object: serde_json::Value = serde_json::from_str(&current)
            .with_context(|| format!("{path} did not answer with JSON"))?;
        object["status"] = status;
        let file = tempfile::Builder::new()
            .prefix("status-")
            .suffix(".json")
            .tempfile_in(self.dir.path())?;
        fs::write(file.path(), serde_json::to_vec(&object)?)?;
        self.kubectl_as(
            kubeconfig,
            &[
                "replace",
                "--raw",
                &format!("{path}/status"),
                "-f",
                &file.path().to_string_lossy(),
            ],
        )
    }

    /// Applies manifest text (YAML or JSON) as the admin (`kubectl apply -f`).
    pub fn apply(&self, manifest: &str) -> Result<String> {
        let file = tempfile::Builder::new()
            .prefix("apply-")
            .suffix(".yaml")
            .tempfile_in(self.dir.path())?;
        fs::write(file.path(), manifest)?;
        let path = file.path().to_string_lossy().into_owned();
        self.kubectl(&["apply", "-f", &path])
    }
}

/// The repository's Kubernetes manifests (`config/kubernetes`: `crds/`, `rbac/`), which the
/// tests apply as shipped.
pub fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/kubernetes")
}

impl KubeCluster {
    /// Applies the shipped CRDs (`config/kubernetes/crds/`) and waits until every one is
    /// Established (served).
    pub fn install_crds(&self) -> Result<()> {
        let dir = manifests_dir().join("crds");
        let dir = dir.to_string_lossy();
        self.kubectl(&["apply", "-f", &dir])?;
        self.kubectl(&[
            "wait",
            "--for",
            "condition=Established",
            "--timeout",
            "60s",
            "-f",
            &dir,
        ])?;
        Ok(())
    }

    /// Applies the shipped RBAC manifests (`config/kubernetes/rbac/`, not the per-node
    /// template: see [`KubeCluster::grant_node`]).
    pub fn install_rbac(&self) -> Result<()> {
        let dir = manifests_dir().join("rbac");
        self.kubectl(&["apply", "-f", &dir.to_string_lossy()])?;
        Ok(())
    }

    /// Applies the shipped per-node grant (`rbac/per-node/agent-node.yaml`) for node `name`:
    /// the template with `NODE_NAME` replaced, as docs/kubernetes.md tells operators to do.
    pub fn grant_node(&self, name: &str) -> Result<()> {
        check_node_name(name)?;
        let path = manifests_dir().join("rbac/per-node/agent-node.yaml");
        let template =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        self.apply(&template.replace("NODE_NAME", name))?;
        Ok(())
    }
}

/// Whether a start failed because a program could not bind its port.
fn is_port_clash(e: &anyhow::Error) -> bool {
    format!("{e:#}").contains("address already in use")
}

/// Node names become file names here: DNS subdomain characters only.
fn check_node_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && !name.starts_with(['-', '.']);
    if !ok {
        bail!("node name {name:?} is not a DNS subdomain (a-z, 0-9, '-', '.', at most 253)");
    }
    Ok(())
}

/// The etcd binary: `$HEARTH_ETCD_BIN`, or the one the `etcd-bin-vendored` crate ships.
fn etcd_bin() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("HEARTH_ETCD_BIN") {
        return Ok(PathBuf::from(p));
    }
    Ok(etcd_bin_vendored::etcd_bin_path()
        .context("etcd-bin-vendored ships no etcd for this platform: set HEARTH_ETCD_BIN")?
        .to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_port_is_told_from_other_failures() {
        let clash = anyhow::anyhow!(
            "E1124 run.go:74] failed to listen on 127.0.0.1:36629: listen tcp 127.0.0.1:36629: bind: address already in use"
        )
        .context("kube-apiserver exited (exit status: 1)");
        assert!(is_port_clash(&clash));
        let other = anyhow::anyhow!("error reading public key file sa.pub")
            .context("kube-apiserver exited (exit status: 1)");
        assert!(!is_port_clash(&other));
    }

    #[test]
    fn node_names_are_dns_subdomains() {
        assert!(check_node_name("node-a.example").is_ok());
        for bad in ["", "../x", "A", "a b", "-a", "a/b"] {
            assert!(check_node_name(bad).is_err(), "{bad:?}");
        }
    }
}
