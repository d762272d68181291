//! The commands that talk to hearth-server: `login`, `apply`, `delete`, `get`, `describe`,
//! `label`, `pause`, `resume`, `bootstrap-token`.
//!
//! Where the server is: `--server`, `--ca`, `--token` (or `--client-cert` and `--client-key`, an
//! admin client certificate) on the command line, else the environment (`HEARTH_SERVER`,
//! `HEARTH_CA`, `HEARTH_TOKEN`, `HEARTH_CLIENT_CERT`, `HEARTH_CLIENT_KEY`), else the file `hearth login` writes
//! (`$HEARTH_CONFIG`, or `$XDG_CONFIG_HOME/hearth/config.json`, or
//! `~/.config/hearth/config.json`, mode 0600). The server's certificate is checked against that
//! CA only. Exit codes as for the offline commands: 0 success, 1 invalid input or an error from
//! the server (the message is printed), 2 usage.

use super::{manifest_files, read_text, InvalidInput, Usage};
use crate::term::{escape, escape_keep_newlines, json_safe};
use anyhow::{anyhow, Context};
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How to reach the server (overrides the environment and the login file).
#[derive(Debug, Clone, Default, Args)]
pub struct Conn {
    /// The server's URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file.
    #[arg(long, value_name = "URL")]
    server: Option<String>,
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
    /// The server's URL.
    #[arg(long, value_name = "URL")]
    server: String,
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

/// `hearth apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// Manifest files or directories (*.yaml, *.yml, *.json); `-` is stdin. All are applied
    /// together: if any is invalid, nothing is applied.
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true)]
    files: Vec<PathBuf>,
    /// Check and report what would change, store nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    conn: Conn,
}

/// The kinds of object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// MachineConfigs (and rendered configs).
    #[value(name = "mc", alias = "machineconfig", alias = "machineconfigs")]
    Mc,
    /// MachineConfigPools.
    #[value(
        name = "mcp",
        alias = "machineconfigpool",
        alias = "machineconfigpools",
        alias = "pool",
        alias = "pools"
    )]
    Mcp,
    /// Nodes.
    #[value(name = "node", alias = "nodes", alias = "no")]
    Node,
}

/// Output formats of `get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// More columns.
    Wide,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
    /// `kind/name` per line.
    Name,
}

/// `hearth get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// mc, mcp or nodes.
    #[arg(value_enum)]
    kind: Kind,
    /// One object.
    name: Option<String>,
    /// Output format (default: a table).
    #[arg(short = 'o', long = "output", value_enum)]
    output: Option<Output>,
    #[command(flatten)]
    conn: Conn,
}

/// `hearth delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// mc, mcp or node.
    #[arg(value_enum)]
    kind: Kind,
    /// The objects.
    #[arg(required = true)]
    names: Vec<String>,
    #[command(flatten)]
    conn: Conn,
}

/// `hearth describe`.
#[derive(Debug, Args)]
pub struct DescribeArgs {
    /// node or mcp.
    #[arg(value_enum)]
    kind: Kind,
    /// The object.
    name: String,
    #[command(flatten)]
    conn: Conn,
}

/// `hearth label`.
#[derive(Debug, Args)]
pub struct LabelArgs {
    /// node.
    #[arg(value_enum)]
    kind: Kind,
    /// The node.
    name: String,
    /// `key=value` to set, `key-` to remove.
    #[arg(required = true, value_name = "KEY=VALUE|KEY-")]
    labels: Vec<String>,
    /// Change a label that already has another value.
    #[arg(long)]
    overwrite: bool,
    #[command(flatten)]
    conn: Conn,
}

/// `hearth pause` / `hearth resume`.
#[derive(Debug, Args)]
pub struct PauseArgs {
    /// mcp.
    #[arg(value_enum)]
    kind: Kind,
    /// The pool.
    name: String,
    #[command(flatten)]
    conn: Conn,
}

/// `hearth node`.
#[derive(Debug, Args)]
pub struct NodeArgs {
    #[command(subcommand)]
    command: NodeCommand,
}

#[derive(Debug, clap::Subcommand)]
enum NodeCommand {
    /// Revoke a node's credential (a reinstalled machine that lost it) so that it can enroll
    /// again with its pool's bootstrap token; its labels, status and reboot slot are kept.
    ResetCredential {
        /// The node.
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
}

/// `hearth node reset-credential NODE`.
pub fn node(a: &NodeArgs) -> anyhow::Result<()> {
    let NodeCommand::ResetCredential { name, conn } = &a.command;
    let c = Client::new(conn)?;
    let out = c.post(
        &format!("/api/v1/nodes/{}/reset-credential", enc(name)),
        &json!({}),
    )?;
    if out["credentialRevoked"] == true {
        println!("node/{name} credential revoked: the node may enroll again with its pool's bootstrap token");
    } else {
        println!("node/{name} had no credential: it may enroll with its pool's bootstrap token");
    }
    Ok(())
}

/// `hearth bootstrap-token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The pool the token enrolls nodes into.
    pool: String,
    /// Validity in seconds (default: the server's --bootstrap-token-ttl, 24 h; 0: no expiry).
    #[arg(long, value_name = "SECONDS")]
    ttl: Option<u64>,
    #[command(flatten)]
    conn: Conn,
}

/// `hearth rollout`.
#[derive(Debug, Args)]
pub struct RolloutArgs {
    #[command(subcommand)]
    command: RolloutCommand,
}

#[derive(Debug, clap::Subcommand)]
enum RolloutCommand {
    /// How far a pool's rollout is: per node, and the pool's counts. With --watch, follow it
    /// until every node runs the target (exit 0), it halts on a degraded node or --timeout
    /// passes (exit 1).
    Status {
        /// The pool.
        pool: String,
        /// Follow the rollout.
        #[arg(short, long)]
        watch: bool,
        /// With --watch: give up after this many seconds.
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<u64>,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoginFile {
    server: String,
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

struct Client {
    base: String,
    http: reqwest::blocking::Client,
    /// Empty when a client certificate authenticates.
    token: String,
}

/// An error answer from the server.
#[derive(Debug)]
struct ServerError {
    status: u16,
    body: Value,
    text: String,
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

fn error_chain(e: &dyn std::error::Error) -> String {
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
    fn new(conn: &Conn) -> anyhow::Result<Client> {
        let file: Option<LoginFile> = config_path()
            .filter(|p| p.exists())
            .map(|p| -> anyhow::Result<LoginFile> {
                let text = std::fs::read_to_string(&p)
                    .with_context(|| format!("cannot read {}", p.display()))?;
                serde_json::from_str(&text)
                    .with_context(|| format!("{} is not a hearth login file", p.display()))
            })
            .transpose()?;
        let server = conn
            .server
            .clone()
            .or_else(|| env("HEARTH_SERVER"))
            .or_else(|| file.as_ref().map(|f| f.server.clone()))
            .ok_or_else(|| {
                Usage("no server: run `hearth login`, set HEARTH_SERVER or give --server".into())
            })?;
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
            base: server.trim_end_matches('/').to_string(),
            http: https_client(&pem, identity)?,
            token: token.unwrap_or_default().trim().to_string(),
        })
    }

    fn send(&self, req: reqwest::blocking::RequestBuilder) -> anyhow::Result<Value> {
        let req = if self.token.is_empty() {
            req
        } else {
            req.bearer_auth(&self.token)
        };
        let resp = req
            .send()
            .map_err(|e| anyhow!("cannot reach {}: {}", self.base, error_chain(&e)))?;
        let status = resp.status().as_u16();
        let text = resp.text().unwrap_or_default();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            Ok(body)
        } else {
            Err(ServerError { status, body, text }.into())
        }
    }

    fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(self.http.get(format!("{}{path}", self.base)))
    }

    fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.send(
            self.http
                .post(format!("{}{path}", self.base))
                .header("content-type", "application/json")
                .body(serde_json::to_vec(body)?),
        )
    }

    fn delete(&self, path: &str) -> anyhow::Result<Value> {
        self.send(self.http.delete(format!("{}{path}", self.base)))
    }
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
        server: Some(a.server.clone()),
        ca: Some(ca.clone()),
        token: a.token.clone(),
        client_cert: client_cert.clone(),
        client_key: client_key.clone(),
    };
    let c = Client::new(&conn)?;
    let pools = c.get("/api/v1/pools")?;
    let path = config_path().ok_or_else(|| anyhow!("no home directory: set HEARTH_CONFIG"))?;
    let file = LoginFile {
        server: c.base.clone(),
        ca,
        token: c.token.clone(),
        client_cert,
        client_key,
    };
    write_private(&path, &serde_json::to_vec_pretty(&file)?)?;
    let n = pools["items"].as_array().map(Vec::len).unwrap_or(0);
    println!(
        "Logged in to {} ({n} pool(s)); settings saved in {}",
        c.base,
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

/// `hearth apply -f`.
pub fn apply(a: &ApplyArgs) -> anyhow::Result<()> {
    let mut paths = Vec::new();
    for p in &a.files {
        manifest_files(p, &mut paths)?;
    }
    if paths.is_empty() {
        return Err(Usage("no manifest files (*.yaml, *.yml, *.json) found".into()).into());
    }
    let mut files = Vec::new();
    for p in &paths {
        files.push(json!({"name": p.display().to_string(), "text": read_text(p)?}));
    }
    let c = Client::new(&a.conn)?;
    let url = format!(
        "{}/api/v1/manifests{}",
        c.base,
        if a.dry_run { "?dryRun=true" } else { "" }
    );
    let result = c.send(
        c.http
            .post(url)
            .header("content-type", "application/vnd.hearth.apply+json")
            .body(serde_json::to_vec(&json!({ "files": files }))?),
    );
    let out = match result {
        Ok(v) => v,
        Err(e) => {
            if let Some(se) = e.downcast_ref::<ServerError>() {
                if let Some(diags) = se.body.get("diagnostics").and_then(Value::as_array) {
                    print_diagnostics(diags);
                    eprintln!(
                        "error: {}",
                        escape(se.body["message"].as_str().unwrap_or("invalid manifests"))
                    );
                    return Err(InvalidInput.into());
                }
            }
            return Err(e);
        }
    };
    if let Some(w) = out["warnings"].as_array() {
        print_diagnostics(w);
    }
    let suffix = if a.dry_run { " (dry run)" } else { "" };
    for r in out["results"].as_array().into_iter().flatten() {
        println!(
            "{}/{} {}{suffix}",
            s(&r["kind"]).to_ascii_lowercase(),
            s(&r["name"]),
            s(&r["action"])
        );
    }
    for p in out["pools"].as_array().into_iter().flatten() {
        if let Some(e) = p["renderError"].as_str() {
            eprintln!(
                "warning: machineconfigpool/{}: {}",
                s(&p["name"]),
                escape(e)
            );
        }
    }
    Ok(())
}

fn print_diagnostics(diags: &[Value]) {
    let mut err = std::io::stderr().lock();
    for d in diags {
        let mut line = String::new();
        line.push_str(&escape(d["file"].as_str().unwrap_or("-")));
        if let Some(l) = d["line"].as_u64() {
            line.push_str(&format!(":{l}"));
        }
        line.push_str(&format!(
            ": {}: ",
            escape(d["severity"].as_str().unwrap_or("error"))
        ));
        if let Some(o) = d["object"].as_str() {
            line.push_str(&format!("{}: ", escape(o)));
        }
        if let Some(p) = d["path"].as_str().filter(|p| !p.is_empty()) {
            line.push_str(&format!("{}: ", escape(p)));
        }
        line.push_str(&escape(d["message"].as_str().unwrap_or("")));
        let _ = writeln!(err, "{line}");
    }
}

fn kind_path(kind: Kind) -> &'static str {
    match kind {
        Kind::Mc => "machineconfigs",
        Kind::Mcp => "pools",
        Kind::Node => "nodes",
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Mc => "machineconfig",
        Kind::Mcp => "machineconfigpool",
        Kind::Node => "node",
    }
}

/// `hearth delete`.
pub fn delete(a: &DeleteArgs) -> anyhow::Result<()> {
    let c = Client::new(&a.conn)?;
    for name in &a.names {
        let out = c.delete(&format!("/api/v1/{}/{}", kind_path(a.kind), enc(name)))?;
        println!(
            "{}/{name} {}",
            kind_name(a.kind),
            out["action"].as_str().unwrap_or("deleted")
        );
    }
    Ok(())
}

/// Percent-encodes a path segment (names are DNS names; this is a safety net).
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Seconds since the epoch of an RFC 3339 UTC time as the server writes it
/// (`2026-11-22T08:00:00Z`).
pub fn parse_time(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (h, mi, se) = (n(11..13)?, n(14..16)?, n(17..19)?);
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + h * 3600 + mi * 60 + se).ok()
}

/// `kubectl`'s way of showing an age.
pub fn human_age(secs: u64) -> String {
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86_400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        format!("{m}m{}s", secs % 60)
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        format!("{h}h{}m", m % 60)
    } else if d < 2 {
        format!("{h}h")
    } else if d < 8 {
        format!("{d}d{}h", h % 24)
    } else if d < 365 * 2 {
        format!("{d}d")
    } else {
        format!("{}y{}d", d / 365, d % 365)
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn age(v: &Value) -> String {
    v.as_str()
        .and_then(parse_time)
        .map(|t| human_age(now().saturating_sub(t)))
        .unwrap_or_else(|| "<unknown>".into())
}

/// A scalar for a table cell or a line of text, with control characters escaped (see
/// [`crate::term`]): strings here come from the server, and through it from nodes.
fn s(v: &Value) -> String {
    match v {
        Value::String(s) if !s.is_empty() => escape(s).into_owned(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

fn dash(v: &Value) -> String {
    let t = s(v);
    if t.is_empty() {
        "-".into()
    } else {
        t
    }
}

/// Prints rows as `kubectl` does: left-aligned columns, three spaces apart.
fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                out.push_str(&format!("{c:<w$}   ", w = widths[i]));
            }
        }
        println!("{}", escape(out.trim_end()));
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

fn condition(p: &Value, t: &str) -> String {
    p["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .map(|c| s(&c["status"]))
        .unwrap_or_else(|| "Unknown".into())
}

fn items(v: &Value) -> Vec<Value> {
    v["items"].as_array().cloned().unwrap_or_default()
}

/// `hearth get`.
pub fn get(a: &GetArgs) -> anyhow::Result<()> {
    let c = Client::new(&a.conn)?;
    let mut objects: Vec<Value> = match (&a.name, a.kind) {
        (Some(n), k) => vec![c.get(&format!("/api/v1/{}/{}", kind_path(k), enc(n)))?],
        (None, Kind::Mc) => {
            let mut v = items(&c.get("/api/v1/machineconfigs")?);
            v.extend(items(&c.get("/api/v1/renderedconfigs")?));
            v.sort_by(|x, y| s(&x["metadata"]["name"]).cmp(&s(&y["metadata"]["name"])));
            v
        }
        (None, k) => items(&c.get(&format!("/api/v1/{}", kind_path(k)))?),
    };
    match a.output {
        Some(Output::Json) => {
            let v = if a.name.is_some() {
                objects.remove(0)
            } else {
                json!({"apiVersion": "v1", "kind": "List", "items": objects})
            };
            println!("{}", json_safe(&serde_json::to_string_pretty(&v)?));
        }
        Some(Output::Yaml) => {
            let v = if a.name.is_some() {
                objects.remove(0)
            } else {
                json!({"apiVersion": "v1", "kind": "List", "items": objects})
            };
            print!("{}", crate::yaml::to_string(&v));
        }
        Some(Output::Name) => {
            for o in &objects {
                println!("{}/{}", kind_name(a.kind), s(&o["metadata"]["name"]));
            }
        }
        None | Some(Output::Wide) => {
            let wide = a.output == Some(Output::Wide);
            if objects.is_empty() {
                eprintln!("No resources found");
                return Ok(());
            }
            match a.kind {
                Kind::Mcp => {
                    let mut header = vec![
                        "NAME",
                        "CONFIG",
                        "UPDATED",
                        "UPDATING",
                        "DEGRADED",
                        "MACHINECOUNT",
                        "READYMACHINECOUNT",
                        "UPDATEDMACHINECOUNT",
                        "DEGRADEDMACHINECOUNT",
                        "AGE",
                    ];
                    if wide {
                        header.extend(["PAUSED", "MAXUNAVAILABLE", "TARGET", "MAINTENANCE"]);
                    }
                    let rows: Vec<Vec<String>> = objects
                        .iter()
                        .map(|p| {
                            let st = &p["status"];
                            let mut r = vec![
                                s(&p["metadata"]["name"]),
                                dash(&st["configuration"]["name"]),
                                condition(p, "Updated"),
                                condition(p, "Updating"),
                                condition(p, "Degraded"),
                                s(&st["machineCount"]),
                                s(&st["readyMachineCount"]),
                                s(&st["updatedMachineCount"]),
                                s(&st["degradedMachineCount"]),
                                age(&p["metadata"]["creationTimestamp"]),
                            ];
                            if wide {
                                r.push(s(&p["spec"]["paused"]));
                                r.push(s(&p["spec"]["maxUnavailable"]));
                                r.push(s(&p["spec"]["configuration"]["name"]));
                                r.push(maintenance_cell(&st["maintenance"]));
                            }
                            r
                        })
                        .collect();
                    table(&header, &rows);
                }
                Kind::Mc => {
                    let mut header =
                        vec!["NAME", "GENERATEDBYCONTROLLER", "IGNITIONVERSION", "AGE"];
                    if wide {
                        header.push("ROLE");
                    }
                    let rows: Vec<Vec<String>> = objects
                        .iter()
                        .map(|m| {
                            let mut r = vec![
                                s(&m["metadata"]["name"]),
                                s(&m["metadata"]["annotations"]
                                    ["machineconfiguration.openshift.io/generated-by-controller-version"]),
                                s(&m["spec"]["config"]["ignition"]["version"]),
                                age(&m["metadata"]["creationTimestamp"]),
                            ];
                            if wide {
                                r.push(s(&m["metadata"]["labels"]["machineconfiguration.openshift.io/role"]));
                            }
                            r
                        })
                        .collect();
                    table(&header, &rows);
                }
                Kind::Node => {
                    let mut header = vec![
                        "NAME", "POOL", "STATE", "READY", "CURRENT", "DESIRED", "AGE",
                    ];
                    if wide {
                        header.extend(["LASTREPORT", "REASON"]);
                    }
                    let rows: Vec<Vec<String>> = objects
                        .iter()
                        .map(|n| {
                            let st = &n["status"];
                            let state = if st["state"].is_null() {
                                if st["enrolled"] == true {
                                    "Unknown"
                                } else {
                                    "NotEnrolled"
                                }
                                .to_string()
                            } else {
                                s(&st["state"])
                            };
                            let mut r = vec![
                                s(&n["metadata"]["name"]),
                                dash(&st["pool"]),
                                state,
                                s(&st["ready"]),
                                dash(&st["current"]),
                                dash(&st["desired"]),
                                age(&n["metadata"]["creationTimestamp"]),
                            ];
                            if wide {
                                r.push(if st["lastReport"].is_null() {
                                    "-".into()
                                } else {
                                    age(&st["lastReport"])
                                });
                                let reason = st["reason"]
                                    .as_str()
                                    .or(st["error"].as_str())
                                    .unwrap_or("-");
                                r.push(escape(reason).into_owned());
                            }
                            r
                        })
                        .collect();
                    table(&header, &rows);
                }
            }
        }
    }
    Ok(())
}

/// The `MAINTENANCE` cell of `get mcp -o wide`: `-` (no windows), `open`, or what the pool
/// waits for.
fn maintenance_cell(m: &Value) -> String {
    if m.is_null() {
        return "-".into();
    }
    match (m["state"].as_str(), m["waiting"].as_str()) {
        (_, Some(w)) => escape(w).into_owned(),
        (Some("Open"), _) => "open".into(),
        (Some("Closed"), _) => format!("closed ({})", s(&m["message"])),
        _ => s(&m["message"]),
    }
}

/// `hearth describe node|mcp NAME`.
pub fn describe(a: &DescribeArgs) -> anyhow::Result<()> {
    let c = Client::new(&a.conn)?;
    let (obj, object) = match a.kind {
        Kind::Node => (
            c.get(&format!("/api/v1/nodes/{}", enc(&a.name)))?,
            format!("Node/{}", a.name),
        ),
        Kind::Mcp => (
            c.get(&format!("/api/v1/pools/{}", enc(&a.name)))?,
            format!("MachineConfigPool/{}", a.name),
        ),
        Kind::Mc => {
            let v = c.get(&format!("/api/v1/machineconfigs/{}", enc(&a.name)))?;
            print!("{}", crate::yaml::to_string(&v));
            return Ok(());
        }
    };
    let events = c.get(&format!("/api/v1/events?object={}&limit=20", enc(&object)))?;
    let mut out = String::new();
    let field = |out: &mut String, k: &str, v: String| {
        out.push_str(&format!("{:<16}{v}\n", format!("{k}:")))
    };
    let labels = |v: &Value| -> String {
        v.as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{}={}", escape(k), escape(v.as_str().unwrap_or(""))))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "<none>".into())
    };
    field(&mut out, "Name", a.name.clone());
    match a.kind {
        Kind::Node => {
            let st = &obj["status"];
            field(&mut out, "Pool", dash(&st["pool"]));
            field(&mut out, "Labels", labels(&obj["metadata"]["labels"]));
            let state = if st["state"].is_null() {
                "Unknown (no report yet)".to_string()
            } else {
                s(&st["state"])
            };
            field(&mut out, "State", state);
            field(&mut out, "Reason", dash(&st["reason"]));
            if let Some(p) = st["progress"].as_object() {
                let phase = escape(p.get("phase").and_then(Value::as_str).unwrap_or("?"));
                let step = p.get("step").and_then(Value::as_u64).unwrap_or(0);
                let total = p.get("total").and_then(Value::as_u64).unwrap_or(0);
                let mut text = format!("{phase}, step {} of {total}", step + 1);
                if let Some(f) = p.get("failure").and_then(Value::as_str) {
                    text.push_str(&format!(" (undoing: {})", escape(f)));
                }
                field(&mut out, "Progress", text);
            }
            field(&mut out, "Current config", dash(&st["current"]));
            field(&mut out, "Desired config", dash(&st["desired"]));
            if st["agentDesired"] != st["desired"] && !st["agentDesired"].is_null() {
                field(&mut out, "Agent working on", dash(&st["agentDesired"]));
            }
            field(&mut out, "Target config", dash(&st["target"]));
            field(&mut out, "Ready", s(&st["ready"]));
            field(
                &mut out,
                "Pending reboot",
                if st["pendingReboot"] == true {
                    "yes".into()
                } else {
                    "no".into()
                },
            );
            field(
                &mut out,
                "Reboot slot",
                if st["rebootSlot"].is_null() {
                    "none".into()
                } else {
                    format!("held since {}", s(&st["rebootSlot"]))
                },
            );
            field(
                &mut out,
                "Enrolled",
                if st["enrolled"] == true {
                    dash(&st["enrolledAt"])
                } else {
                    "no".into()
                },
            );
            field(
                &mut out,
                "Last report",
                if st["lastReport"].is_null() {
                    "never".into()
                } else {
                    format!("{} ({} ago)", s(&st["lastReport"]), age(&st["lastReport"]))
                },
            );
            if let Some(e) = st["error"].as_str() {
                field(&mut out, "Server problem", escape(e).into_owned());
            }
            let drift = st["drift"].as_array().cloned().unwrap_or_default();
            if drift.is_empty() {
                field(&mut out, "Drift", "none".into());
            } else {
                out.push_str("Drift:\n");
                for d in drift {
                    out.push_str(&format!("  - {}\n", s(&d)));
                }
            }
            let history = st["history"].as_array().cloned().unwrap_or_default();
            if !history.is_empty() {
                out.push_str("History:\n");
                let mut rows = vec![vec![
                    "TIME".to_string(),
                    "STATE".into(),
                    "DESIRED".into(),
                    "REASON".into(),
                ]];
                for h in history {
                    rows.push(vec![
                        s(&h["time"]),
                        s(&h["state"]),
                        dash(&h["desired"]),
                        dash(&h["reason"]),
                    ]);
                }
                out.push_str(&indent_table(&rows));
            }
        }
        _ => {
            let st = &obj["status"];
            field(&mut out, "Paused", s(&obj["spec"]["paused"]));
            field(
                &mut out,
                "MaxUnavailable",
                s(&obj["spec"]["maxUnavailable"]),
            );
            field(
                &mut out,
                "Target config",
                dash(&obj["spec"]["configuration"]["name"]),
            );
            field(
                &mut out,
                "Current config",
                dash(&st["configuration"]["name"]),
            );
            let sources: Vec<String> = st["configuration"]["source"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|x| s(&x["name"]))
                .collect();
            field(
                &mut out,
                "Rendered from",
                if sources.is_empty() {
                    "-".into()
                } else {
                    sources.join(", ")
                },
            );
            if !st["maintenance"].is_null() {
                let m = &st["maintenance"];
                field(
                    &mut out,
                    "Maintenance",
                    format!("{} ({})", s(&m["windows"]), s(&m["message"])),
                );
                if let Some(w) = m["waiting"].as_str() {
                    field(&mut out, "Waiting", escape(w).into_owned());
                }
            }
            field(
                &mut out,
                "Machines",
                format!(
                    "{} total, {} ready, {} updated, {} degraded, {} unavailable",
                    s(&st["machineCount"]),
                    s(&st["readyMachineCount"]),
                    s(&st["updatedMachineCount"]),
                    s(&st["degradedMachineCount"]),
                    s(&st["unavailableMachineCount"])
                ),
            );
            out.push_str("Conditions:\n");
            let mut rows = vec![vec![
                "TYPE".to_string(),
                "STATUS".into(),
                "REASON".into(),
                "MESSAGE".into(),
            ]];
            for cnd in st["conditions"].as_array().into_iter().flatten() {
                rows.push(vec![
                    s(&cnd["type"]),
                    s(&cnd["status"]),
                    dash(&cnd["reason"]),
                    dash(&cnd["message"]),
                ]);
            }
            out.push_str(&indent_table(&rows));
        }
    }
    let events = items(&events);
    if events.is_empty() {
        out.push_str("Events:         <none>\n");
    } else {
        out.push_str("Events:\n");
        let mut rows = vec![vec![
            "TIME".to_string(),
            "TYPE".into(),
            "REASON".into(),
            "MESSAGE".into(),
        ]];
        for e in events {
            rows.push(vec![
                s(&e["time"]),
                s(&e["type"]),
                s(&e["reason"]),
                s(&e["message"]),
            ]);
        }
        out.push_str(&indent_table(&rows));
    }
    // Every field above is escaped; this second guard keeps only the lines composed here.
    print!("{}", escape_keep_newlines(&out));
    Ok(())
}

fn indent_table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::from("  ");
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `hearth label node NAME k=v k2-`.
pub fn label(a: &LabelArgs) -> anyhow::Result<()> {
    if a.kind != Kind::Node {
        return Err(Usage(
            "only nodes can be labelled (label MachineConfigs and pools in their manifests)".into(),
        )
        .into());
    }
    let mut set = BTreeMap::new();
    let mut remove = Vec::new();
    for l in &a.labels {
        if let Some((k, v)) = l.split_once('=') {
            set.insert(k.to_string(), v.to_string());
        } else if let Some(k) = l.strip_suffix('-') {
            remove.push(k.to_string());
        } else {
            return Err(Usage(format!("{l:?}: expected KEY=VALUE or KEY-")).into());
        }
    }
    let c = Client::new(&a.conn)?;
    c.post(
        &format!("/api/v1/nodes/{}/labels", enc(&a.name)),
        &json!({"set": set, "remove": remove, "overwrite": a.overwrite}),
    )?;
    println!("node/{} labeled", a.name);
    Ok(())
}

/// `hearth pause|resume mcp POOL`.
pub fn pause(a: &PauseArgs, paused: bool) -> anyhow::Result<()> {
    if a.kind != Kind::Mcp {
        return Err(Usage("only pools (mcp) can be paused and resumed".into()).into());
    }
    let c = Client::new(&a.conn)?;
    let verb = if paused { "pause" } else { "resume" };
    let out = c.post(
        &format!("/api/v1/pools/{}/{verb}", enc(&a.name)),
        &json!({}),
    )?;
    let what = if paused { "paused" } else { "resumed" };
    if out["changed"] == true {
        println!("machineconfigpool/{} {what}", a.name);
    } else {
        println!("machineconfigpool/{} already {what}", a.name);
    }
    Ok(())
}

/// `hearth bootstrap-token POOL`: a new bootstrap token (the old one stops working).
pub fn bootstrap_token(a: &TokenArgs) -> anyhow::Result<()> {
    let c = Client::new(&a.conn)?;
    let body = match a.ttl {
        Some(t) => json!({"ttlSeconds": t}),
        None => json!({}),
    };
    let out = c.post(
        &format!("/api/v1/pools/{}/bootstrap-token", enc(&a.pool)),
        &body,
    )?;
    println!("{}", out["token"].as_str().unwrap_or(""));
    match out["expiresAt"].as_str() {
        Some(e) => eprintln!(
            "bootstrap token for pool {} (expires {e}); the previous one no longer works",
            a.pool
        ),
        None => eprintln!(
            "bootstrap token for pool {} (no expiry); the previous one no longer works",
            a.pool
        ),
    }
    Ok(())
}

/// `hearth rollout status POOL [--watch]`.
pub fn rollout(a: &RolloutArgs) -> anyhow::Result<()> {
    let RolloutCommand::Status {
        pool,
        watch,
        timeout,
        conn,
    } = &a.command;
    let c = Client::new(conn)?;
    let started = std::time::Instant::now();
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut last_line = String::new();
    loop {
        let p = c.get(&format!("/api/v1/pools/{}", enc(pool)))?;
        let nodes = items(&c.get(&format!("/api/v1/nodes?pool={}", enc(pool)))?);
        let st = &p["status"];
        let target = s(&p["spec"]["configuration"]["name"]);
        let total = st["machineCount"].as_u64().unwrap_or(0);
        let updated = st["updatedMachineCount"].as_u64().unwrap_or(0);
        let degraded = st["degradedMachineCount"].as_u64().unwrap_or(0);
        let unavailable = st["unavailableMachineCount"].as_u64().unwrap_or(0);
        let done = condition(&p, "Updated") == "True";
        let halted = st["rolloutHaltedBy"].as_str().map(str::to_string);
        let paused = p["spec"]["paused"] == true;
        if !*watch {
            println!(
                "pool {pool}: {updated} of {total} node(s) run {} ({unavailable} updating, {degraded} degraded){}",
                if target.is_empty() { "no config yet" } else { &target },
                if paused { ", paused" } else { "" }
            );
            if let Some(n) = &halted {
                let n = escape(n);
                println!("rollout halted: node {n} is degraded (hearth describe node {n})");
            }
            if let Some(w) = st["maintenance"]["waiting"].as_str() {
                println!("reboots {}", escape(w));
            }
            let rows: Vec<Vec<String>> = nodes
                .iter()
                .map(|n| {
                    let ns = &n["status"];
                    let progress = ns["progress"]
                        .as_object()
                        .map(|pr| {
                            format!(
                                "step {} of {}",
                                pr.get("step").and_then(Value::as_u64).unwrap_or(0) + 1,
                                pr.get("total").and_then(Value::as_u64).unwrap_or(0)
                            )
                        })
                        .unwrap_or_else(|| "-".into());
                    let on_target = !target.is_empty()
                        && ns["current"].as_str() == ns["target"].as_str()
                        && ns["state"] == "Done";
                    vec![
                        s(&n["metadata"]["name"]),
                        if ns["state"].is_null() {
                            "-".into()
                        } else {
                            s(&ns["state"])
                        },
                        if on_target {
                            "yes".into()
                        } else if ns["desired"] == ns["target"] {
                            "in progress".into()
                        } else {
                            "waiting".into()
                        },
                        progress,
                        dash(&ns["reason"]),
                    ]
                })
                .collect();
            if !rows.is_empty() {
                table(&["NODE", "STATE", "UPDATED", "PROGRESS", "REASON"], &rows);
            }
            return Ok(());
        }
        let width = 30usize;
        let filled = if total == 0 {
            width
        } else {
            (updated as usize * width) / total as usize
        };
        let line = format!(
            "[{}{}] {updated}/{total} updated, {unavailable} updating, {degraded} degraded{}",
            "#".repeat(filled),
            "-".repeat(width - filled),
            if paused { " (paused)" } else { "" }
        );
        if line != last_line {
            if tty {
                print!("\r{line}\x1b[K");
                let _ = std::io::stdout().flush();
            } else {
                println!("{line}");
            }
            last_line = line;
        }
        if done {
            if tty {
                println!();
            }
            println!("pool {pool}: every node runs {target}");
            return Ok(());
        }
        if let Some(n) = halted {
            if tty {
                println!();
            }
            let reason = nodes
                .iter()
                .find(|x| x["metadata"]["name"] == n.as_str())
                .map(|x| dash(&x["status"]["reason"]))
                .unwrap_or_default();
            eprintln!(
                "error: the rollout of pool {pool} halted: node {} is degraded: {reason}",
                escape(&n)
            );
            return Err(InvalidInput.into());
        }
        if let Some(t) = timeout {
            if started.elapsed() >= Duration::from_secs(*t) {
                if tty {
                    println!();
                }
                return Err(anyhow!(
                    "timed out after {t} s: {updated} of {total} node(s) updated"
                ));
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_ages() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_time("2000-02-29T00:00:00Z"), Some(951_782_400));
        assert_eq!(
            parse_time("2026-11-22T01:01:01Z"),
            Some(1_795_305_600 + 3661)
        );
        assert_eq!(parse_time("yesterday"), None);
        assert_eq!(human_age(5), "5s");
        assert_eq!(human_age(300), "5m0s");
        assert_eq!(human_age(3600), "60m");
        assert_eq!(human_age(5 * 3600 + 60), "5h1m");
        assert_eq!(human_age(3 * 86_400), "3d0h");
        assert_eq!(human_age(30 * 86_400), "30d");
    }
}
