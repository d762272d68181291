//! [`Registry`]: a container registry for the OS-image tests: Debian's `docker-registry`
//! (distribution 2.8) on the test machine's loopback, with TLS (a CA made for it with rcgen)
//! and htpasswd authentication (bcrypt), its storage in a directory of its own; images pushed
//! to it with skopeo. A booted container reaches it through [`relay_into`](crate::relay_into)
//! on the same port, so one reference (`127.0.0.1:PORT/...`) names an image on both sides.
//!
//! [`SigningKey`]: a GnuPG key in a keyring of its own, for images signed with
//! `skopeo copy --sign-by` into a lookaside signature store (`signing.rs`).

mod signing;

pub use signing::{lookaside_config, SigningKey};

use std::fs;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use base64::Engine;
use tracing::info;

use crate::util;

/// The user the registry accepts.
pub const REGISTRY_USER: &str = "hearth";

/// A running registry; stopped (killed) on drop, its directory removed.
#[derive(Debug)]
pub struct Registry {
    child: Option<Child>,
    dir: tempfile::TempDir,
    port: u16,
    password: String,
}

impl Registry {
    /// Starts a registry on a free port of the loopback and waits until it answers.
    pub fn start() -> Result<Registry> {
        let binary = util::require_program("docker-registry", "docker-registry")?;
        let htpasswd = util::require_program("htpasswd", "apache2-utils")?;
        let dir = tempfile::Builder::new()
            .prefix("hearth-registry-")
            .tempdir()
            .context("creating the registry's directory")?;
        let d = dir.path();
        make_certificates(d)?;
        let password = util::random_hex32()?;
        let out = Command::new(&htpasswd)
            .args(["-Bbn", REGISTRY_USER, &password])
            .output()
            .context("running htpasswd")?;
        if !out.status.success() {
            bail!("htpasswd failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        fs::write(d.join("htpasswd"), &out.stdout)?;
        let port = TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port();
        let config = format!(
            "version: 0.1\n\
             log:\n  level: info\n  formatter: json\n\
             storage:\n  filesystem:\n    rootdirectory: {root}/data\n  delete:\n    enabled: true\n\
             http:\n  addr: 127.0.0.1:{port}\n  tls:\n    certificate: {root}/server.crt\n    key: {root}/server.key\n\
             auth:\n  htpasswd:\n    realm: hearth-test\n    path: {root}/htpasswd\n",
            root = d.display()
        );
        fs::write(d.join("config.yml"), config)?;
        let log = fs::File::create(d.join("registry.log"))?;
        let child = Command::new(binary)
            .arg("serve")
            .arg(d.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting docker-registry")?;
        let mut registry = Registry {
            child: Some(child),
            dir,
            port,
            password,
        };
        registry.wait_ready()?;
        info!(addr = %registry.host(), "registry started");
        Ok(registry)
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if TcpStream::connect(self.addr()).is_ok() {
                return Ok(());
            }
            if let Some(child) = &mut self.child {
                if let Some(status) = child.try_wait()? {
                    bail!(
                        "docker-registry exited ({status}):\n{}",
                        util::tail(&self.dir.path().join("registry.log"), 20)
                    );
                }
            }
            if Instant::now() > deadline {
                bail!("docker-registry does not answer on {}", self.host());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `127.0.0.1:PORT`: the registry part of its image references.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The CA certificate (PEM) that signed its serving certificate.
    pub fn ca_pem(&self) -> Result<String> {
        Ok(fs::read_to_string(self.dir.path().join("ca.crt"))?)
    }

    /// A containers auth file (`auth.json`) with its credentials.
    pub fn auth_json(&self) -> String {
        self.auth_json_for(&self.host())
    }

    /// `HOST:PORT` as a QEMU guest reaches it ([`HOST_FROM_GUEST`](crate::qemu::HOST_FROM_GUEST)).
    pub fn host_from_guest(&self) -> String {
        format!("{}:{}", crate::qemu::HOST_FROM_GUEST, self.port)
    }

    /// A containers auth file with its credentials for the registry named `host`.
    pub fn auth_json_for(&self, host: &str) -> String {
        let token = base64::engine::general_purpose::STANDARD
            .encode(format!("{REGISTRY_USER}:{}", self.password));
        serde_json::json!({"auths": {host: {"auth": token}}}).to_string()
    }

    /// `skopeo copy [--all] SRC docker://HOST/DEST` with its credentials and CA, optionally
    /// signed; returns the pushed reference.
    pub fn push(&self, src: &str, dest: &str, sign: Option<&SigningKey>) -> Result<String> {
        let target = format!("{}/{dest}", self.host());
        let mut c = Command::new("skopeo");
        if let Some(key) = sign {
            c.arg("--registries.d")
                .arg(key.registries_d_for(&self.host())?);
            c.env("GNUPGHOME", key.home());
        }
        c.arg("copy")
            .arg("--all")
            .arg("--retry-times")
            .arg("2")
            .arg("--dest-creds")
            .arg(format!("{REGISTRY_USER}:{}", self.password))
            .arg("--dest-cert-dir")
            .arg(self.dir.path().join("certs"));
        if let Some(key) = sign {
            c.arg("--sign-by").arg(key.fingerprint());
        }
        c.arg(src).arg(format!("docker://{target}"));
        let out = c.output().context("running skopeo copy")?;
        if !out.status.success() {
            bail!(
                "skopeo copy {src} docker://{target}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(target)
    }

    /// Where the registry stores a blob's data (`…/blobs/sha256/ab/abcd…/data`).
    pub fn blob_data(&self, digest: &str) -> Result<PathBuf> {
        let hex = digest
            .strip_prefix("sha256:")
            .ok_or_else(|| anyhow!("not a sha256 digest: {digest}"))?;
        Ok(self
            .dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data"))
    }

    /// The blobs the registry has served so far (GETs answered 200), by digest, oldest first:
    /// what clients really downloaded, from its own request log.
    pub fn blobs_served(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| {
                v["msg"] == "response completed"
                    && v["http.request.method"] == "GET"
                    && v["http.response.status"] == 200
            })
            .filter_map(|v| {
                let uri = v["http.request.uri"].as_str()?;
                let (_, digest) = uri.split_once("/blobs/")?;
                Some(digest.to_string())
            })
            .collect()
    }

    /// The registry's log.
    pub fn log(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = fs::File::open(self.dir.path().join("registry.log")) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Stops it (connections are refused from then on).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A CA, and a serving certificate for 127.0.0.1 and 10.0.2.2 it signed (the Kubernetes tier's test PKI):
/// `ca.crt`, `server.crt`, `server.key`, and `certs/ca.crt` (the directory skopeo's
/// `--dest-cert-dir` reads).
fn make_certificates(dir: &Path) -> Result<()> {
    let pki = crate::kube::pki::Pki::new_ca(dir, "hearth test registry CA")?;
    // 127.0.0.1 for the host and its containers, 10.0.2.2 for QEMU guests (their view of it).
    pki.sign_serving_for(
        "server",
        "hearth test registry",
        &["127.0.0.1", "localhost", crate::qemu::HOST_FROM_GUEST],
    )?;
    fs::create_dir_all(dir.join("certs"))?;
    fs::copy(pki.ca_cert(), dir.join("certs/ca.crt"))?;
    Ok(())
}
