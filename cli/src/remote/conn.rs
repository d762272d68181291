//! Reaching the server: the connection flags ([`Conn`]), the login file (`hearth login`), and
//! the HTTPS client that sends requests and turns the server's Status documents into errors.

use crate::term::escape;
use crate::usage::Usage;
use anyhow::{anyhow, Context};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How to reach the server (overrides the environment and the login file).
#[derive(Debug, Clone, Default, Args)]
pub struct Conn {
    /// The server's URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file.
    /// Several servers (the replicas of one site): repeat the flag or separate URLs with commas
    /// (at most 16).
    #[arg(long, value_name = "URL[,URL...]", value_delimiter = ',')]
    server: Vec<String>,
    /// The server's CA certificate; default `$HEARTH_CA` or the login file.
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
    /// The admin token; default `$HEARTH_TOKEN` or the login file.
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a
    /// token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key.
    #[arg(long, value_name = "FILE")]
    client_cert: Option<PathBuf>,
    /// The client certificate's key (PEM); default `$HEARTH_CLIENT_KEY` or the login file.
    #[arg(long, value_name = "FILE")]
    client_key: Option<PathBuf>,
}

/// `hearth login`.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The server's URL; several (the replicas of one site): repeat the flag or separate URLs
    /// with commas (at most 16).
    #[arg(
        long,
        value_name = "URL[,URL...]",
        env = "HEARTH_SERVER",
        hide_env_values = true,
        value_delimiter = ',',
        required = true
    )]
    server: Vec<String>,
    /// The server's CA certificate (the server prints its path at first start).
    #[arg(long, value_name = "FILE")]
    ca: PathBuf,
    /// The admin token (`admin.token` in the server's state directory).
    #[arg(long, value_name = "TOKEN", required_unless_present = "client_cert")]
    token: Option<String>,
    /// Or an admin client certificate (`hearth-server issue-admin-cert`); the login file
    /// keeps its path.
    #[arg(
        long,
        value_name = "FILE",
        requires = "client_key",
        conflicts_with = "token"
    )]
    client_cert: Option<PathBuf>,
    /// The client certificate's key; the login file keeps its path.
    #[arg(long, value_name = "FILE", requires = "client_cert")]
    client_key: Option<PathBuf>,
}

/// The login file. `server` is the first server (the only field a CLI before server lists had,
/// which still reads it); `servers` the whole list when there are several.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoginFile {
    server: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    servers: Vec<String>,
    ca: PathBuf,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_cert: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_key: Option<PathBuf>,
}

/// The login file's path.
pub fn config_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HEARTH_CONFIG") {
        return Some(PathBuf::from(p));
    }
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(x).join("hearth/config.json"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/hearth/config.json"))
}

impl LoginFile {
    /// The servers, in order: `servers`, or `server` alone in a file written before the list.
    fn urls(&self) -> Vec<String> {
        if self.servers.is_empty() {
            vec![self.server.clone()]
        } else {
            self.servers.clone()
        }
    }
}

pub(super) struct Client {
    /// The servers, in the order they are tried (see `failover`).
    pub(super) servers: Vec<String>,
    /// The one in use (sticky: the last that answered).
    pub(super) current: std::cell::Cell<usize>,
    pub(super) http: reqwest::blocking::Client,
    /// Empty when a client certificate authenticates.
    pub(super) token: String,
}

/// An error answer from the server.
#[derive(Debug)]
pub(super) struct ServerError {
    pub(super) status: u16,
    pub(super) body: Value,
    pub(super) text: String,
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let msg = self
            .body
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or(self.text.as_str());
        let reason = self
            .body
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or("");
        write!(
            f,
            "{} (HTTP {} {})",
            escape(msg),
            self.status,
            escape(reason)
        )
    }
}

impl std::error::Error for ServerError {}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|s| !s.is_empty())
}

fn https_client(
    ca_pem: &[u8],
    identity: Option<reqwest::Identity>,
) -> anyhow::Result<reqwest::blocking::Client> {
    let certs = reqwest::Certificate::from_pem_bundle(ca_pem)
        .map_err(|e| anyhow!("the CA is not a PEM certificate: {e}"))?;
    if certs.is_empty() {
        return Err(anyhow!("the CA file holds no certificate"));
    }
    let mut b = reqwest::blocking::Client::builder();
    if let Some(id) = identity {
        b = b.identity(id);
    }
    b.tls_certs_only(certs)
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(120))
        .user_agent(concat!("hearth/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| anyhow!("cannot set up HTTPS: {e}"))
}

pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        src = s.source();
    }
    out
}

impl Client {
    pub(super) fn new(conn: &Conn) -> anyhow::Result<Client> {
        let file: Option<LoginFile> = config_path()
            .filter(|p| p.exists())
            .map(|p| -> anyhow::Result<LoginFile> {
                let text = std::fs::read_to_string(&p)
                    .with_context(|| format!("cannot read {}", p.display()))?;
                serde_json::from_str(&text)
                    .with_context(|| format!("{} is not a hearth login file", p.display()))
            })
            .transpose()?;
        let servers = if !conn.server.is_empty() {
            hearth_api::servers::parse("--server", &conn.server)
        } else if let Some(list) = env("HEARTH_SERVER") {
            hearth_api::servers::parse("HEARTH_SERVER", &[list])
        } else if let (Some(f), Some(p)) = (&file, config_path()) {
            hearth_api::servers::parse(&p.display().to_string(), &f.urls())
        } else {
            return Err(Usage(
                "no server: run `hearth login`, set HEARTH_SERVER or give --server".into(),
            )
            .into());
        }
        .map_err(|e| Usage(e.to_string()))?;
        let ca = conn
            .ca
            .clone()
            .or_else(|| env("HEARTH_CA").map(PathBuf::from))
            .or_else(|| file.as_ref().map(|f| f.ca.clone()))
            .ok_or_else(|| Usage("no CA: run `hearth login`, set HEARTH_CA or give --ca".into()))?;
        // A token or a client certificate, whichever is found first (command line,
        // environment, login file).
        let cert_pair = |cert: Option<PathBuf>, key: Option<PathBuf>, from: &str| match (cert, key)
        {
            (Some(c), Some(k)) => Ok(Some((c, k))),
            (None, None) => Ok(None),
            _ => Err(Usage(format!(
                "{from}: a client certificate needs both the certificate and its key"
            ))),
        };
        let token = conn.token.clone().filter(|t| !t.trim().is_empty());
        let cli_cert = cert_pair(
            conn.client_cert.clone(),
            conn.client_key.clone(),
            "--client-cert/--client-key",
        )?;
        let env_cert = cert_pair(
            env("HEARTH_CLIENT_CERT").map(PathBuf::from),
            env("HEARTH_CLIENT_KEY").map(PathBuf::from),
            "HEARTH_CLIENT_CERT/HEARTH_CLIENT_KEY",
        )?;
        let file_token = file
            .as_ref()
            .map(|f| f.token.clone())
            .filter(|t| !t.is_empty());
        let file_cert = file
            .as_ref()
            .and_then(|f| f.client_cert.clone().zip(f.client_key.clone()));
        let (token, cert) = if token.is_some() || cli_cert.is_some() {
            (token, cli_cert)
        } else if let Some(t) = env("HEARTH_TOKEN") {
            (Some(t), None)
        } else if env_cert.is_some() {
            (None, env_cert)
        } else {
            (file_token, file_cert)
        };
        if token.is_none() && cert.is_none() {
            return Err(Usage(
                "no credentials: run `hearth login`, set HEARTH_TOKEN (or HEARTH_CLIENT_CERT and HEARTH_CLIENT_KEY) or give --token (or --client-cert and --client-key)".into(),
            )
            .into());
        }
        let identity = match &cert {
            Some((c, k)) => {
                let mut pem = std::fs::read(c).with_context(|| {
                    format!("cannot read the client certificate {}", c.display())
                })?;
                pem.push(b'\n');
                pem.extend(
                    std::fs::read(k)
                        .with_context(|| format!("cannot read the client key {}", k.display()))?,
                );
                Some(reqwest::Identity::from_pem(&pem).map_err(|e| {
                    anyhow!(
                        "{} and {} are not a PEM certificate and its key: {e}",
                        c.display(),
                        k.display()
                    )
                })?)
            }
            None => None,
        };
        let pem =
            std::fs::read(&ca).with_context(|| format!("cannot read the CA {}", ca.display()))?;
        Ok(Client {
            servers,
            current: std::cell::Cell::new(0),
            http: https_client(&pem, identity)?,
            token: token.unwrap_or_default().trim().to_string(),
        })
    }

    pub(super) fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.request(reqwest::Method::GET, path, None)
    }

    /// `GET path`, read as the wire type `T` (`hearth_api`).
    pub(super) fn get_as<T: serde::de::DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        typed(self.get(path)?, path)
    }

    /// `POST path` with `body`, the answer read as the wire type `T` (`hearth_api`).
    pub(super) fn post_as<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> anyhow::Result<T> {
        typed(self.post(path, body)?, path)
    }

    /// `DELETE path`, the answer read as the wire type `T` (`hearth_api`).
    pub(super) fn delete_as<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
    ) -> anyhow::Result<T> {
        typed(self.delete(path)?, path)
    }

    pub(super) fn post(&self, path: &str, body: &impl Serialize) -> anyhow::Result<Value> {
        self.request(
            reqwest::Method::POST,
            path,
            Some(("application/json", serde_json::to_vec(body)?)),
        )
    }

    pub(super) fn delete(&self, path: &str) -> anyhow::Result<Value> {
        self.request(reqwest::Method::DELETE, path, None)
    }
}

/// A server's answer to `path` read as the wire type `T`; an answer that is not one is an
/// error naming the request (a server of another API version, or not hearth-server).
pub(super) fn typed<T: serde::de::DeserializeOwned>(v: Value, path: &str) -> anyhow::Result<T> {
    serde_json::from_value(v)
        .with_context(|| format!("unexpected answer from hearth-server to {}", escape(path)))
}

/// `hearth login`: checks the server, the CA and the token, then writes the login file (0600).
pub fn login(a: &LoginArgs) -> anyhow::Result<()> {
    let ca =
        std::fs::canonicalize(&a.ca).with_context(|| format!("cannot read {}", a.ca.display()))?;
    let abs = |p: &PathBuf| {
        std::fs::canonicalize(p).with_context(|| format!("cannot read {}", p.display()))
    };
    let client_cert = a.client_cert.as_ref().map(abs).transpose()?;
    let client_key = a.client_key.as_ref().map(abs).transpose()?;
    let conn = Conn {
        server: a.server.clone(),
        ca: Some(ca.clone()),
        token: a.token.clone(),
        client_cert: client_cert.clone(),
        client_key: client_key.clone(),
    };
    let c = Client::new(&conn)?;
    // The login is saved only once the server answered as a hearth-server (a pool list).
    let pools: hearth_api::List<hearth_api::PoolView> = c.get_as("/api/v1/pools")?;
    let path = config_path().ok_or_else(|| anyhow!("no home directory: set HEARTH_CONFIG"))?;
    let file = LoginFile {
        server: c.servers[0].clone(),
        servers: if c.servers.len() > 1 {
            c.servers.clone()
        } else {
            Vec::new()
        },
        ca,
        token: c.token.clone(),
        client_cert,
        client_key,
    };
    write_private(&path, &serde_json::to_vec_pretty(&file)?)?;
    // The others are checked too, so that a mistyped URL shows now and not at the first
    // failover; one that is down is not a reason to refuse the login.
    for (url, why) in c.unanswered("/api/v1/pools") {
        eprintln!("warning: {url} did not answer ({why}); it stays in the list");
    }
    let n = pools.items.len();
    crate::outln!(
        "Logged in to {} ({n} pool(s)); settings saved in {}",
        c.servers.join(", "),
        path.display()
    );
    Ok(())
}

fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let dir = path
        .parent()
        .ok_or_else(|| anyhow!("bad path {}", path.display()))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = dir.join(format!(".config.json.tmp-{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Percent-encodes a path segment (names are DNS names; this is a safety net).
pub(super) fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
