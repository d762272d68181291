//! `hearth-loadgen`: load for hearth-server from one process.
//!
//! - `agents`: N simulated agents speaking the agent protocol with `hearth_api`'s types (enroll
//!   with the pool's bootstrap token, long-poll `GET /api/v1/agent/desired?known=..&wait=..`,
//!   report `Working` then `Done` on every new desired config), each over its own TLS
//!   connection as a real agent has. Measures request latencies, errors by kind, the server's
//!   memory (with `--server-pid`) and, around an apply (`--apply CMD`, or one made by someone
//!   else while it holds), the time until every agent has seen the new desired config.
//! - `throughput`: K clients fetching one URL as fast as they can for D seconds (the first-boot
//!   `/config/<pool>`, an agent's desired config without waiting, or any URL such as nginx
//!   serving the same bytes).
//!
//! See `bench/server-load.sh` and `docs/performance.md`.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use hearth_api::{AgentStatus, DesiredConfig, EnrollRequest, EnrollResponse, NodeState};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

#[derive(Debug, Parser)]
#[command(
    name = "hearth-loadgen",
    version,
    about = "Load generator for hearth-server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Simulate N agents: enroll, long-poll, report; measure an apply reaching all of them.
    Agents(AgentsArgs),
    /// K concurrent clients GETting one URL for D seconds.
    Throughput(ThroughputArgs),
}

#[derive(Debug, Args)]
struct Common {
    /// The fleet CA (the server's `pki/ca.crt`); the server's certificate is checked against it.
    #[arg(long, value_name = "FILE")]
    ca: PathBuf,
    /// Print one JSON document instead of the summary.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct AgentsArgs {
    /// The server (`https://127.0.0.1:22623`).
    #[arg(long, value_name = "URL")]
    server: String,
    /// The pool's bootstrap token, or `@FILE` to read it from a file.
    #[arg(long, value_name = "TOKEN|@FILE")]
    bootstrap_token: String,
    /// How many agents.
    #[arg(long, short = 'n', default_value_t = 10_000)]
    agents: usize,
    /// Enrollments (connection + TLS handshake + enroll) in flight at once.
    #[arg(long, default_value_t = 64)]
    enroll_concurrency: usize,
    /// The long-poll's `wait` in seconds.
    #[arg(long, default_value_t = 120)]
    wait: u64,
    /// Node names are PREFIX-00000, PREFIX-00001, ...
    #[arg(long, default_value = "loadgen")]
    prefix: String,
    /// hearth-server's pid, to read its memory from /proc.
    #[arg(long, value_name = "PID")]
    server_pid: Option<u32>,
    /// Once every agent runs its first config, run this shell command (e.g. `hearth apply -f
    /// new.yaml`) and measure until every agent has seen and reported the config it brings.
    #[arg(long, value_name = "CMD")]
    apply: Option<String>,
    /// Without --apply: once every agent runs its first config, wait this long for an apply
    /// made by someone else (measured from the first agent that sees it).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    hold: u64,
    /// Give up on a phase after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 900)]
    timeout: u64,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct ThroughputArgs {
    /// The URL to GET (https only).
    #[arg(long, value_name = "URL")]
    url: String,
    /// Send `Authorization: Bearer TOKEN` (or `@FILE`).
    #[arg(long, value_name = "TOKEN|@FILE")]
    token: Option<String>,
    /// Enroll one node with this bootstrap token (or `@FILE`) first and send its credential:
    /// for `/api/v1/agent/desired`.
    #[arg(long, value_name = "TOKEN|@FILE", conflicts_with = "token")]
    enroll_with: Option<String>,
    /// Concurrent clients, each on its own keep-alive connection.
    #[arg(long, short = 'c', default_value_t = 64)]
    concurrency: usize,
    /// Seconds to run.
    #[arg(long, short = 'd', default_value_t = 10)]
    duration: u64,
    /// A label for the output.
    #[arg(long, default_value = "")]
    label: String,
    #[command(flatten)]
    common: Common,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let r = rt.block_on(async {
        match cli.command {
            Command::Agents(a) => agents(a).await,
            Command::Throughput(a) => throughput(a).await,
        }
    });
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Plumbing: one TLS config, one connection per client.

/// Raises the soft limit of open files to the hard limit; returns the new soft limit.
fn raise_nofile() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) => {
            if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                hard
            } else {
                soft
            }
        }
        Err(_) => 0,
    }
}

fn secret(arg: &str) -> Result<String> {
    match arg.strip_prefix('@') {
        Some(path) => Ok(std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {path}"))?
            .trim()
            .to_string()),
        None => Ok(arg.trim().to_string()),
    }
}

#[derive(Debug, Clone)]
struct Target {
    addr: SocketAddr,
    host: String,
    server_name: ServerName<'static>,
    tls: Arc<rustls::ClientConfig>,
    /// The path of the URL (`/` when none).
    path: String,
}

impl Target {
    fn new(url: &str, ca: &std::path::Path) -> Result<Target> {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| anyhow!("{url}: only https:// URLs are supported"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        let (host, port) = if let Some(h) = authority.strip_prefix('[') {
            let (h, p) = h
                .split_once(']')
                .ok_or_else(|| anyhow!("{url}: bad IPv6 address"))?;
            (
                h.to_string(),
                p.strip_prefix(':').unwrap_or("443").to_string(),
            )
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p.to_string()),
                None => (authority.to_string(), "443".to_string()),
            }
        };
        let port: u16 = port
            .parse()
            .map_err(|_| anyhow!("{url}: bad port {port:?}"))?;
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {host}"))?
            .next()
            .ok_or_else(|| anyhow!("{host} has no address"))?;
        let pem = std::fs::read(ca).with_context(|| format!("cannot read {}", ca.display()))?;
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&pem) {
            roots
                .add(c.map_err(|e| anyhow!("{}: {e}", ca.display()))?)
                .map_err(|e| anyhow!("{}: {e}", ca.display()))?;
        }
        if roots.is_empty() {
            bail!("{} holds no certificate", ca.display());
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let server_name = ServerName::try_from(host.clone())
            .map_err(|e| anyhow!("{host} is not a valid server name: {e}"))?;
        Ok(Target {
            addr,
            host: if port == 443 {
                host.clone()
            } else if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            },
            server_name,
            tls: Arc::new(tls),
            path,
        })
    }

    async fn connect(&self) -> Result<Conn, Fail> {
        let tcp = TcpStream::connect(self.addr)
            .await
            .map_err(|e| Fail::Connect(e.kind().to_string()))?;
        let _ = tcp.set_nodelay(true);
        let tls = TlsConnector::from(self.tls.clone())
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| Fail::Tls(short(&e.to_string())))?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| Fail::Http(short(&e.to_string())))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            send,
            host: self.host.clone(),
        })
    }
}

fn short(s: &str) -> String {
    s.chars().take(80).collect()
}

/// Why a request failed (the error kinds counted).
#[derive(Debug, Clone)]
enum Fail {
    Connect(String),
    Tls(String),
    Http(String),
    Timeout,
    Status(u16),
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fail::Connect(e) => write!(f, "connect: {e}"),
            Fail::Tls(e) => write!(f, "tls: {e}"),
            Fail::Http(e) => write!(f, "http: {e}"),
            Fail::Timeout => write!(f, "timeout"),
            Fail::Status(s) => write!(f, "status {s}"),
        }
    }
}

struct Conn {
    send: SendRequest<Full<Bytes>>,
    host: String,
}

struct Answer {
    status: StatusCode,
    desired: Option<String>,
    body: Bytes,
}

impl Conn {
    async fn request(
        &mut self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<Answer, Fail> {
        let work = async {
            self.send
                .ready()
                .await
                .map_err(|e| Fail::Http(short(&e.to_string())))?;
            let mut b = Request::builder()
                .method(method)
                .uri(path)
                .header(hyper::header::HOST, &self.host)
                .header(hyper::header::USER_AGENT, "hearth-loadgen");
            if let Some(t) = token {
                b = b.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
            }
            if body.is_some() {
                b = b.header(hyper::header::CONTENT_TYPE, "application/json");
            }
            let req = b
                .body(Full::new(Bytes::from(body.unwrap_or_default())))
                .map_err(|e| Fail::Http(short(&e.to_string())))?;
            let resp = self
                .send
                .send_request(req)
                .await
                .map_err(|e| Fail::Http(short(&e.to_string())))?;
            let status = resp.status();
            let desired = resp
                .headers()
                .get("x-hearth-desired")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| Fail::Http(short(&e.to_string())))?
                .to_bytes();
            Ok(Answer {
                status,
                desired,
                body,
            })
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| Fail::Timeout)?
    }
}

// ---------------------------------------------------------------------------------------------
// Measurements.

#[derive(Default)]
struct Stats {
    latencies: Mutex<BTreeMap<&'static str, Vec<u32>>>,
    errors: Mutex<BTreeMap<String, u64>>,
    counts: Mutex<BTreeMap<&'static str, u64>>,
}

impl Stats {
    fn record(&self, what: &'static str, d: Duration) {
        let us = d.as_micros().min(u32::MAX as u128) as u32;
        if let Ok(mut m) = self.latencies.lock() {
            m.entry(what).or_default().push(us);
        }
    }
    fn error(&self, what: &str, f: &Fail) {
        if let Ok(mut m) = self.errors.lock() {
            *m.entry(format!("{what}: {f}")).or_default() += 1;
        }
    }
    fn count(&self, what: &'static str) {
        if let Ok(mut m) = self.counts.lock() {
            *m.entry(what).or_default() += 1;
        }
    }
    fn summary(&self) -> Value {
        let lat = self.latencies.lock().map(|m| m.clone()).unwrap_or_default();
        let mut out = serde_json::Map::new();
        for (k, v) in lat {
            out.insert(k.to_string(), percentiles(v));
        }
        json!({
            "latencyMs": out,
            "errors": self.errors.lock().map(|m| m.clone()).unwrap_or_default(),
            "counts": self.counts.lock().map(|m| m.clone()).unwrap_or_default(),
        })
    }
}

fn percentiles(mut v: Vec<u32>) -> Value {
    if v.is_empty() {
        return json!({"n": 0});
    }
    v.sort_unstable();
    let p = |q: f64| {
        let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
        v[i] as f64 / 1000.0
    };
    json!({"n": v.len(), "p50": p(0.50), "p90": p(0.90), "p99": p(0.99), "max": p(1.0)})
}

/// VmRSS and VmHWM of a process, in KiB.
fn memory(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn mem_json(pid: Option<u32>) -> Value {
    match pid.and_then(memory) {
        Some((rss, hwm)) => json!({"rssMiB": mib(rss), "hwmMiB": mib(hwm)}),
        None => Value::Null,
    }
}

fn mib(kib: u64) -> f64 {
    (kib as f64 / 1024.0 * 10.0).round() / 10.0
}

// ---------------------------------------------------------------------------------------------
// `agents`.

struct Shared {
    stats: Stats,
    stop: AtomicBool,
    enrolled: AtomicUsize,
    /// Agents that reported Done in their first desired config.
    ready: AtomicUsize,
    /// The configs the agents ran before the apply.
    baseline: OnceLock<HashSet<String>>,
    /// When the apply started (or the first agent saw a new config).
    apply_start: OnceLock<Instant>,
    /// Per agent: time from the apply to seeing the new config, and to reporting Done in it.
    seen: Mutex<Vec<Duration>>,
    done: Mutex<Vec<Duration>>,
    seen_count: AtomicUsize,
    done_count: AtomicUsize,
    wait: u64,
    /// The first configs the agents received.
    firsts: Mutex<HashSet<String>>,
}

impl Shared {
    fn new(wait: u64) -> Shared {
        Shared {
            stats: Stats::default(),
            stop: AtomicBool::new(false),
            enrolled: AtomicUsize::new(0),
            ready: AtomicUsize::new(0),
            baseline: OnceLock::new(),
            apply_start: OnceLock::new(),
            seen: Mutex::new(Vec::new()),
            done: Mutex::new(Vec::new()),
            seen_count: AtomicUsize::new(0),
            done_count: AtomicUsize::new(0),
            wait,
            firsts: Mutex::new(HashSet::new()),
        }
    }
}

fn status_doc(state: NodeState, current: Option<&str>, desired: &str) -> Vec<u8> {
    serde_json::to_vec(&AgentStatus {
        api_version: Some(hearth_api::HEARTH_API_VERSION.into()),
        kind: Some("AgentStatus".into()),
        state,
        reason: None,
        last_transition: None,
        current: current.map(str::to_string),
        desired: Some(desired.to_string()),
        pending_reboot: false,
        progress: None,
        drift: Vec::new(),
        history: Vec::new(),
    })
    .unwrap_or_default()
}

async fn enroll_one(
    target: &Target,
    shared: &Shared,
    name: &str,
    token: &str,
) -> Result<(Conn, String), Fail> {
    let t = Instant::now();
    let mut conn = target.connect().await?;
    shared.stats.record("connect+TLS", t.elapsed());
    let body = serde_json::to_vec(&EnrollRequest {
        node: name.to_string(),
        labels: Default::default(),
        bootstrap_token: Some(token.to_string()),
    })
    .unwrap_or_default();
    let t = Instant::now();
    let a = conn
        .request(
            Method::POST,
            "/api/v1/enroll",
            None,
            Some(body),
            Duration::from_secs(300),
        )
        .await?;
    if a.status != StatusCode::OK {
        return Err(Fail::Status(a.status.as_u16()));
    }
    shared.stats.record("enroll", t.elapsed());
    let answer: EnrollResponse =
        serde_json::from_slice(&a.body).map_err(|e| Fail::Http(short(&e.to_string())))?;
    Ok((conn, answer.credential))
}

async fn report(conn: &mut Conn, shared: &Shared, cred: &str, doc: Vec<u8>) -> Result<(), Fail> {
    let t = Instant::now();
    let a = conn
        .request(
            Method::POST,
            "/api/v1/agent/status",
            Some(cred),
            Some(doc),
            Duration::from_secs(120),
        )
        .await?;
    if !a.status.is_success() {
        return Err(Fail::Status(a.status.as_u16()));
    }
    shared.stats.record("status report", t.elapsed());
    Ok(())
}

/// One simulated agent: enroll, then long-poll and report until told to stop.
async fn agent(
    target: Arc<Target>,
    shared: Arc<Shared>,
    sem: Arc<tokio::sync::Semaphore>,
    name: String,
    token: Arc<String>,
) {
    let (mut conn, cred) = loop {
        let permit = sem.acquire().await;
        let r = enroll_one(&target, &shared, &name, &token).await;
        drop(permit);
        match r {
            Ok(x) => break x,
            Err(f) => {
                shared.stats.error("enroll", &f);
                if shared.stop.load(Ordering::Relaxed) {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    shared.enrolled.fetch_add(1, Ordering::Relaxed);
    let mut current: Option<String> = None;
    let mut broken = false;
    while !shared.stop.load(Ordering::Relaxed) {
        if broken {
            match target.connect().await {
                Ok(c) => {
                    conn = c;
                    broken = false;
                    shared.stats.count("reconnects");
                }
                Err(f) => {
                    shared.stats.error("reconnect", &f);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            }
        }
        let path = match &current {
            Some(k) => format!("/api/v1/agent/desired?known={k}&wait={}", shared.wait),
            None => format!("/api/v1/agent/desired?wait={}", shared.wait),
        };
        let t = Instant::now();
        let a = match conn
            .request(
                Method::GET,
                &path,
                Some(&cred),
                None,
                Duration::from_secs(shared.wait + 60),
            )
            .await
        {
            Ok(a) => a,
            Err(f) => {
                shared.stats.error("long-poll", &f);
                broken = true;
                continue;
            }
        };
        match a.status {
            StatusCode::NOT_MODIFIED => {
                shared.stats.count("long-polls answered 304 after wait");
                continue;
            }
            StatusCode::OK => {}
            s => {
                shared.stats.error("long-poll", &Fail::Status(s.as_u16()));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        }
        let Some(name) = a.desired.clone() else {
            shared.stats.error(
                "long-poll",
                &Fail::Http("no x-hearth-desired header".into()),
            );
            continue;
        };
        // A real agent decodes the config before applying it.
        if serde_json::from_slice::<DesiredConfig>(&a.body).is_err() {
            shared.stats.error(
                "long-poll",
                &Fail::Http("the answer is not a desired config".into()),
            );
        }
        let first = current.is_none();
        let is_new = shared.baseline.get().is_some_and(|b| !b.contains(&name));
        if first {
            shared
                .stats
                .record("desired (first, immediate)", t.elapsed());
            if let Ok(mut f) = shared.firsts.lock() {
                f.insert(name.clone());
            }
        } else if is_new {
            let start = *shared.apply_start.get_or_init(Instant::now);
            if let Ok(mut v) = shared.seen.lock() {
                v.push(start.elapsed());
            }
            shared.seen_count.fetch_add(1, Ordering::Relaxed);
        }
        // Apply: Working, then Done in the new config.
        let r = async {
            report(
                &mut conn,
                &shared,
                &cred,
                status_doc(NodeState::Working, current.as_deref(), &name),
            )
            .await?;
            report(
                &mut conn,
                &shared,
                &cred,
                status_doc(NodeState::Done, Some(&name), &name),
            )
            .await
        }
        .await;
        if let Err(f) = r {
            shared.stats.error("status report", &f);
            broken = true;
            continue;
        }
        current = Some(name);
        if first {
            shared.ready.fetch_add(1, Ordering::Relaxed);
        } else if is_new {
            if let (Some(start), Ok(mut v)) = (shared.apply_start.get(), shared.done.lock()) {
                v.push(start.elapsed());
            }
            shared.done_count.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn wait_until(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> (usize, usize),
) -> Result<Duration> {
    let start = Instant::now();
    let mut last_print = Instant::now();
    loop {
        let (have, want) = f();
        if have >= want {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            bail!(
                "{what}: only {have} of {want} after {} s",
                timeout.as_secs()
            );
        }
        if last_print.elapsed() > Duration::from_secs(5) {
            eprintln!(
                "  {what}: {have}/{want} ({:.0} s)",
                start.elapsed().as_secs_f64()
            );
            last_print = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn agents(a: AgentsArgs) -> Result<()> {
    let nofile = raise_nofile();
    if (nofile as usize) < a.agents + 64 {
        eprintln!(
            "warning: the open-files limit is {nofile}, fewer than {} agents need",
            a.agents + 64
        );
    }
    let target = Arc::new(Target::new(&a.server, &a.common.ca)?);
    let token = Arc::new(secret(&a.bootstrap_token)?);
    let shared = Arc::new(Shared::new(a.wait));
    let mem_start = mem_json(a.server_pid);
    let timeout = Duration::from_secs(a.timeout);
    eprintln!(
        "hearth-loadgen: {} agents against {} (enroll concurrency {}, wait {} s)",
        a.agents, a.server, a.enroll_concurrency, a.wait
    );
    let sem = Arc::new(tokio::sync::Semaphore::new(a.enroll_concurrency.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    let started = Instant::now();
    for i in 0..a.agents {
        tasks.spawn(agent(
            target.clone(),
            shared.clone(),
            sem.clone(),
            format!("{}-{i:05}", a.prefix),
            token.clone(),
        ));
    }
    let n = a.agents;
    let enroll_time = wait_until("enrolled", timeout, || {
        (shared.enrolled.load(Ordering::Relaxed), n)
    })
    .await?;
    eprintln!("  all {n} enrolled in {:.1} s", enroll_time.as_secs_f64());
    let ready_time = wait_until("running their first config", timeout, || {
        (shared.ready.load(Ordering::Relaxed), n)
    })
    .await?;
    eprintln!(
        "  all {n} running their first config after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Who runs what now.
    let firsts = shared.firsts.lock().map(|s| s.clone()).unwrap_or_default();
    let _ = shared.baseline.set(firsts);
    // Let the long-polls settle, then measure the idle server.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mem_idle = mem_json(a.server_pid);
    let own_idle = mem_json(Some(std::process::id()));

    let mut apply = Value::Null;
    if let Some(cmd) = &a.apply {
        eprintln!("  applying: {cmd}");
        let _ = shared.apply_start.set(Instant::now());
        let t = Instant::now();
        let out = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .output()
            .await
            .with_context(|| format!("cannot run {cmd}"))?;
        let cmd_time = t.elapsed();
        if !out.status.success() {
            bail!(
                "the apply command failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        apply = measure_apply(&shared, n, timeout, Some(cmd_time)).await?;
    } else if a.hold > 0 {
        eprintln!("  holding {} s for an apply", a.hold);
        let hold = Duration::from_secs(a.hold);
        let t = Instant::now();
        while t.elapsed() < hold && shared.apply_start.get().is_none() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if shared.apply_start.get().is_some() {
            apply = measure_apply(&shared, n, timeout, None).await?;
        }
    }
    let mem_end = mem_json(a.server_pid);
    shared.stop.store(true, Ordering::Relaxed);
    tasks.abort_all();

    let report = json!({
        "mode": "agents",
        "server": a.server,
        "agents": n,
        "enrollConcurrency": a.enroll_concurrency,
        "waitSeconds": a.wait,
        "enrollSeconds": secs(enroll_time),
        "allRunningFirstConfigSeconds": secs(ready_time),
        "apply": apply,
        "serverMemory": {"start": mem_start, "idleWithAllWaiting": mem_idle, "end": mem_end},
        "loadgenMemory": own_idle,
        "openFilesLimit": nofile,
        "stats": shared.stats.summary(),
    });
    if a.common.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_agents(&report);
    }
    Ok(())
}

async fn measure_apply(
    shared: &Shared,
    n: usize,
    timeout: Duration,
    cmd_time: Option<Duration>,
) -> Result<Value> {
    wait_until("seen the new config", timeout, || {
        (shared.seen_count.load(Ordering::Relaxed), n)
    })
    .await?;
    wait_until("reported Done in the new config", timeout, || {
        (shared.done_count.load(Ordering::Relaxed), n)
    })
    .await?;
    let to_ms = |v: &Mutex<Vec<Duration>>| -> Vec<u32> {
        v.lock()
            .map(|v| v.iter().map(|d| d.as_micros() as u32).collect())
            .unwrap_or_default()
    };
    let seen = to_ms(&shared.seen);
    let done = to_ms(&shared.done);
    let all_seen = seen.iter().max().copied().unwrap_or(0) as f64 / 1e6;
    let all_done = done.iter().max().copied().unwrap_or(0) as f64 / 1e6;
    eprintln!("  apply → all {n} agents saw the new config: {all_seen:.3} s; all reported Done: {all_done:.3} s");
    Ok(json!({
        "applyCommandSeconds": cmd_time.map(secs),
        "measuredFrom": if cmd_time.is_some() { "the start of the apply command" } else { "the first agent seeing the new config" },
        "allSeenSeconds": all_seen,
        "allDoneSeconds": all_done,
        "seenMs": percentiles(seen),
        "doneMs": percentiles(done),
    }))
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

fn print_agents(r: &Value) {
    println!(
        "hearth-loadgen agents: {} agents against {}",
        r["agents"], r["server"]
    );
    println!(
        "  enrolled in {} s (concurrency {}); all running their first config after {} s",
        r["enrollSeconds"], r["enrollConcurrency"], r["allRunningFirstConfigSeconds"]
    );
    if !r["apply"].is_null() {
        let a = &r["apply"];
        println!(
            "  apply → every agent saw the new config: {} s, reported Done: {} s (from {}; apply command {} s)",
            a["allSeenSeconds"], a["allDoneSeconds"], a["measuredFrom"].as_str().unwrap_or(""), a["applyCommandSeconds"]
        );
        println!(
            "    per agent, ms after the apply: seen {}  done {}",
            a["seenMs"], a["doneMs"]
        );
    }
    let m = &r["serverMemory"];
    println!(
        "  server memory: start {}, idle with all long-polls waiting {}, end {}",
        m["start"], m["idleWithAllWaiting"], m["end"]
    );
    println!("  load generator memory: {}", r["loadgenMemory"]);
    println!("  latency (ms):");
    if let Some(l) = r["stats"]["latencyMs"].as_object() {
        for (k, v) in l {
            println!(
                "    {k:<28} n={:<7} p50={:<8} p90={:<8} p99={:<8} max={}",
                v["n"], v["p50"], v["p90"], v["p99"], v["max"]
            );
        }
    }
    println!("  counts: {}", r["stats"]["counts"]);
    let errors = &r["stats"]["errors"];
    if errors.as_object().is_some_and(|e| !e.is_empty()) {
        println!("  errors:");
        for (k, v) in errors.as_object().into_iter().flatten() {
            println!("    {v:>7}  {k}");
        }
    } else {
        println!("  errors: none");
    }
}

// ---------------------------------------------------------------------------------------------
// `throughput`.

async fn throughput(a: ThroughputArgs) -> Result<()> {
    let nofile = raise_nofile();
    let target = Arc::new(Target::new(&a.url, &a.common.ca)?);
    let token = match (&a.token, &a.enroll_with) {
        (Some(t), _) => Some(secret(t)?),
        (None, Some(b)) => {
            let shared = Shared::new(0);
            let (_, cred) = enroll_one(&target, &shared, "loadgen-throughput", &secret(b)?)
                .await
                .map_err(|f| anyhow!("cannot enroll the throughput node: {f}"))?;
            Some(cred)
        }
        _ => None,
    };
    let token = Arc::new(token);
    let stats = Arc::new(Stats::default());
    let bytes = Arc::new(AtomicUsize::new(0));
    let ok = Arc::new(AtomicUsize::new(0));
    let duration = Duration::from_secs(a.duration);
    let start = Instant::now() + Duration::from_millis(200);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..a.concurrency.max(1) {
        let (target, token, stats, bytes, ok) = (
            target.clone(),
            token.clone(),
            stats.clone(),
            bytes.clone(),
            ok.clone(),
        );
        tasks.spawn(async move {
            let mut conn = None;
            tokio::time::sleep_until(start.into()).await;
            while start.elapsed() < duration {
                if conn.is_none() {
                    match target.connect().await {
                        Ok(c) => conn = Some(c),
                        Err(f) => {
                            stats.error("connect", &f);
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    }
                }
                let Some(c) = conn.as_mut() else { continue };
                let t = Instant::now();
                match c
                    .request(
                        Method::GET,
                        &target.path,
                        token.as_deref(),
                        None,
                        Duration::from_secs(30),
                    )
                    .await
                {
                    Ok(r) if r.status == StatusCode::OK => {
                        if start.elapsed() < duration {
                            stats.record("GET", t.elapsed());
                            bytes.fetch_add(r.body.len(), Ordering::Relaxed);
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Ok(r) => stats.error("GET", &Fail::Status(r.status.as_u16())),
                    Err(f) => {
                        stats.error("GET", &f);
                        conn = None;
                    }
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let n = ok.load(Ordering::Relaxed);
    let b = bytes.load(Ordering::Relaxed);
    let secs_run = duration.as_secs_f64();
    let summary = stats.summary();
    let report = json!({
        "mode": "throughput",
        "label": a.label,
        "url": a.url,
        "concurrency": a.concurrency,
        "seconds": a.duration,
        "requests": n,
        "requestsPerSecond": (n as f64 / secs_run).round(),
        "bodyBytes": b.checked_div(n).unwrap_or(0),
        "MiBPerSecond": ((b as f64 / secs_run / 1048576.0) * 10.0).round() / 10.0,
        "latencyMs": summary["latencyMs"]["GET"],
        "errors": summary["errors"],
        "openFilesLimit": nofile,
    });
    if a.common.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{}: {} req/s ({} requests, {} bytes each, {} MiB/s) with {} clients for {} s; latency ms {}; errors {}",
            if a.label.is_empty() { &a.url } else { &a.label },
            report["requestsPerSecond"],
            n,
            report["bodyBytes"],
            report["MiBPerSecond"],
            a.concurrency,
            a.duration,
            report["latencyMs"],
            report["errors"]
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_list() {
        let v: Vec<u32> = (1..=100).rev().map(|ms| ms * 1000).collect();
        let p = percentiles(v);
        assert_eq!(p["n"], 100);
        assert_eq!(p["p50"], 50.0);
        assert_eq!(p["p99"], 99.0);
        assert_eq!(p["max"], 100.0);
        assert_eq!(percentiles(Vec::new())["n"], 0);
    }

    #[test]
    fn urls_other_than_https_are_refused_with_the_reason() {
        let e =
            Target::new("http://127.0.0.1:80/", std::path::Path::new("/nonexistent")).unwrap_err();
        assert!(e.to_string().contains("only https://"), "{e}");
        let e =
            Target::new("https://127.0.0.1:x/", std::path::Path::new("/nonexistent")).unwrap_err();
        assert!(e.to_string().contains("bad port"), "{e}");
    }

    #[test]
    fn secrets_from_files_are_trimmed() {
        let d = std::env::temp_dir().join(format!("loadgen-secret-{}", std::process::id()));
        std::fs::write(&d, "hearth-bootstrap-abc\n").unwrap();
        assert_eq!(
            secret(&format!("@{}", d.display())).unwrap(),
            "hearth-bootstrap-abc"
        );
        assert_eq!(secret(" t ").unwrap(), "t");
        let _ = std::fs::remove_file(&d);
        assert!(secret("@/nonexistent/token").is_err());
    }
}
