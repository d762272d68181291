//! The command line of `hearth-server` and its start-up: the flags, the `issue-admin-cert`
//! subcommand, and [`run`], which starts the server and serves until SIGINT or SIGTERM.
//! `main.rs` only parses, initialises logging, builds the runtime and calls in here.

use crate::app::Options;
use crate::controller::Settings;
use crate::{pki, serve};
use clap::Parser;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Command line of `hearth-server`.
#[derive(Debug, Parser)]
#[command(
    name = "hearth-server",
    version,
    about = "Stores MachineConfigs and pools, renders them, serves Ignition and desired configs over TLS"
)]
pub struct Cli {
    /// Where the store, the CA, the certificates and the tokens live.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "/var/lib/hearth-server",
        global = true
    )]
    pub state_dir: PathBuf,
    /// Address to listen on (22623 is the MCO's config server port).
    #[arg(long, value_name = "ADDR", default_value = "[::]:22623")]
    pub listen: SocketAddr,
    /// A DNS name or IP address for the serving certificate (repeatable). Default: localhost,
    /// 127.0.0.1, ::1 and the host name.
    #[arg(long = "san", value_name = "NAME")]
    pub sans: Vec<String>,
    /// The URL first-booting nodes are told to reach the server at; with replicas, all of
    /// them (comma-separated or repeated, at most 16: the agent fails over between them; the
    /// first also serves the agent's binaries). Default: https:// and the Host the node's
    /// request used.
    #[arg(long, value_name = "URL[,URL...]")]
    pub advertise_url: Vec<String>,
    /// How many of the newest rendered configs of each pool (and of each node with overlays)
    /// are kept; those in use are always kept.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub retention: usize,
    /// The longest an agent's long-poll may wait.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub max_wait: u64,
    /// A node not heard from for this long is not ready, and counts as unavailable in
    /// rollouts (agents long-poll, so a live one is heard from every --max-wait at least).
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub stale_after: u64,
    /// How many desired-config answers may be unacknowledged at once: an answer's turn ends
    /// when its node is next heard from, or 250 to 375 ms after it was taken; the others wait
    /// for a turn (at most 20 s). An apply to a large pool then goes out as fast as the agents
    /// take it, and their reports do not queue behind thousands of others. 0: no pacing (also
    /// while agents older than their acknowledgement remain). Default: 32 per core.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=1_000_000), conflicts_with = "kubernetes")]
    pub desired_answers_at_once: Option<u32>,
    /// How many status reports a second are asked of the agents answered in a burst, for
    /// agents that can hold their reports (hearth-agent can): such an agent takes no turn; its
    /// answer goes at once with the time it reports after (at most 60 s ahead; beyond, it waits
    /// for a turn). The agent applies at once, so an apply reaches a large pool as fast as the
    /// answers can be sent, and its reports come back no faster than this. 0: no deferral (every
    /// agent is paced by turns). Default: 1,500 per core. No effect with
    /// --desired-answers-at-once 0.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=10_000_000), conflicts_with = "kubernetes")]
    pub deferred_reports_per_second: Option<u32>,
    /// Serve this ostree repository (archive mode) to enrolled nodes and admins under
    /// /ostree/repo/, for OS image pivots in disconnected sites.
    #[arg(long, value_name = "DIR", env = "HEARTH_OSTREE_REPO")]
    pub ostree_repo: Option<PathBuf>,
    /// Credentials for resolving MachineConfigs' tagged osImageURLs (`registry/os:tag`) to
    /// digests when they are applied: a containers auth file (`{"auths": {"registry:5000":
    /// {"auth": "<base64 user:password>"}}}`, the format of /etc/ostree/auth.json).
    #[arg(long, value_name = "FILE", env = "HEARTH_REGISTRY_AUTH")]
    pub registry_auth: Option<PathBuf>,
    /// CA certificates (PEM) trusted for those registries, besides the system's.
    #[arg(long, value_name = "FILE", env = "HEARTH_REGISTRY_CA")]
    pub registry_ca: Option<PathBuf>,
    /// For tests only (hidden): judge maintenance windows as if the clock read this many Unix
    /// seconds at start (and ran on from there). Nothing else uses this clock.
    #[arg(long, value_name = "UNIX_SECONDS", hide = true)]
    pub window_clock_start: Option<u64>,
    /// How long a bootstrap token is valid unless told otherwise: the built-in pools' tokens
    /// made at first start, and `hearth bootstrap-token POOL` without --ttl. 0: never expires.
    #[arg(long, value_name = "SECONDS", default_value_t = 86400)]
    pub bootstrap_token_ttl: u64,
    /// Serve the agent to first-booting machines: DIR holds `hearth-agent` (and, for ostree
    /// hosts, `hearth-ostree-helper`); every first-boot config writes them to /usr/local/bin,
    /// checked against their sha512, with the agent's unit. A stock OS image then needs only
    /// the pointer Ignition config. Read at start: restart the server to serve new binaries.
    #[arg(long, value_name = "DIR")]
    pub serve_agent: Option<PathBuf>,
    /// For tests only (hidden): while DIR/hold exists, every render writes DIR/rendering and
    /// waits (to prove that nothing else waits for a render).
    #[arg(long, value_name = "DIR", hide = true)]
    pub test_render_gate: Option<PathBuf>,
    /// Keep the store on etcd v3 instead of the embedded database: the members' client URLs
    /// (http:// or https://), comma-separated or repeated. One member that is down does not fail
    /// requests. Several servers on the same --etcd-prefix are equal replicas (each serves
    /// everything; one at a time, elected, does the periodic controller work).
    #[arg(
        long,
        value_name = "URL[,URL...]",
        value_delimiter = ',',
        env = "HEARTH_ETCD_ENDPOINTS"
    )]
    pub etcd_endpoints: Vec<String>,
    /// The CA certificate (PEM) that signs the etcd members' certificates: needed for https://
    /// endpoints (TLS), which every endpoint then must be.
    #[arg(long, value_name = "FILE", requires = "etcd_endpoints")]
    pub etcd_ca: Option<PathBuf>,
    /// A client certificate (PEM) for etcd members that require one (with --etcd-key).
    #[arg(long, value_name = "FILE", requires_all = ["etcd_endpoints", "etcd_key"])]
    pub etcd_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires_all = ["etcd_endpoints", "etcd_cert"])]
    pub etcd_key: Option<PathBuf>,
    /// The key prefix of everything this server keeps in etcd (starts and ends with '/').
    #[arg(long, value_name = "PREFIX", default_value = crate::store::etcd::DEFAULT_PREFIX)]
    pub etcd_prefix: String,
    /// Kubernetes mode: no store, no HTTP service; the controller follows a Kubernetes API
    /// server's MachineConfigs, MachineConfigPools and Nodes (the CRDs of
    /// config/kubernetes/crds/), renders pools into rendered MachineConfigs and sets nodes'
    /// desiredConfig under maxUnavailable, pause and maintenance windows (docs/kubernetes.md).
    /// Run one at a time.
    #[arg(long, conflicts_with_all = ["etcd_endpoints", "serve_agent", "ostree_repo"])]
    pub kubernetes: bool,
    /// The kubeconfig of --kubernetes. Default: the in-cluster service account, $KUBECONFIG or
    /// ~/.kube/config.
    #[arg(long, value_name = "FILE", requires = "kubernetes")]
    pub kubeconfig: Option<PathBuf>,
    /// The Lease (NAMESPACE/NAME) that elects one controller of --kubernetes: the others
    /// wait and take over when its holder stops renewing it.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME",
        default_value = "hearth-system/hearth-controller",
        requires = "kubernetes"
    )]
    pub kube_lease: String,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The etcd settings from the flags (`None`: the embedded store).
pub fn etcd_config(cli: &Cli) -> anyhow::Result<Option<crate::store::etcd::EtcdConfig>> {
    use anyhow::Context;
    if cli.etcd_endpoints.is_empty() {
        return Ok(None);
    }
    let read = |p: &PathBuf, what: &str| {
        std::fs::read(p).with_context(|| format!("cannot read {what} {}", p.display()))
    };
    let tls = if cli.etcd_ca.is_some() || cli.etcd_cert.is_some() {
        Some(crate::store::etcd::EtcdTls {
            ca_pem: cli
                .etcd_ca
                .as_ref()
                .map(|p| read(p, "--etcd-ca"))
                .transpose()?,
            identity: match (&cli.etcd_cert, &cli.etcd_key) {
                (Some(c), Some(k)) => Some((read(c, "--etcd-cert")?, read(k, "--etcd-key")?)),
                _ => None,
            },
        })
    } else {
        None
    };
    Ok(Some(crate::store::etcd::EtcdConfig {
        endpoints: cli
            .etcd_endpoints
            .iter()
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty())
            .collect(),
        prefix: cli.etcd_prefix.clone(),
        tls,
    }))
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Issue an admin client certificate from the fleet CA (in --state-dir): NAME.crt and
    /// NAME.key (mode 0600) in --out. Use it with `hearth login --client-cert --client-key`.
    /// The server need not be stopped; it keeps no copy.
    IssueAdminCert {
        /// The admin's name: the certificate's CN, shown in the server's logs.
        #[arg(long)]
        name: String,
        /// Where to write NAME.crt and NAME.key (created with mode 0700 if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Validity in days.
        #[arg(long, default_value_t = pki::ADMIN_CERT_DAYS)]
        days: i64,
    },
}

/// Runs a subcommand (which needs no runtime and no raised limits).
pub fn run_command(state_dir: &Path, command: &Command) -> anyhow::Result<()> {
    match command {
        Command::IssueAdminCert { name, out, days } => {
            issue_admin_cert(state_dir, name, out, *days)
        }
    }
}

/// Each waiting agent holds a connection: raise the soft limit of open files to the hard one.
pub fn raise_nofile() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => tracing::info!(from = soft, to = hard, "raised the open-files limit"),
            Err(e) => tracing::warn!(soft, hard, error = %e, "cannot raise the open-files limit"),
        },
        Ok((soft, _)) => tracing::debug!(limit = soft, "open-files limit"),
        Err(e) => tracing::warn!(error = %e, "cannot read the open-files limit"),
    }
}

fn issue_admin_cert(state_dir: &Path, name: &str, out: &Path, days: i64) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if days <= 0 {
        anyhow::bail!("--days must be at least 1");
    }
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        anyhow::bail!(
            "--name {name:?} must be a plain name (it names the files NAME.crt and NAME.key)"
        );
    }
    let layout = pki::Layout {
        dir: state_dir.to_path_buf(),
    };
    let cert = pki::issue_admin_cert(&layout, name, days)?;
    if !out.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(out)
            .with_context(|| format!("cannot create {}", out.display()))?;
    }
    let write = |file: PathBuf, text: &str| -> anyhow::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&file)
            .with_context(|| {
                format!(
                    "cannot create {} (an existing file is not overwritten)",
                    file.display()
                )
            })?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        Ok(())
    };
    let (crt, key) = (
        out.join(format!("{name}.crt")),
        out.join(format!("{name}.key")),
    );
    write(key.clone(), &cert.key_pem)?;
    write(crt.clone(), &cert.cert_pem)?;
    println!(
        "Issued an admin certificate for {name} (valid {days} days): {} and {}\n  hearth login --server URL --ca {} --client-cert {} --client-key {}",
        crt.display(),
        key.display(),
        layout.ca_cert().display(),
        crt.display(),
        key.display()
    );
    Ok(())
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let settings = {
        let settings = Settings {
            retention: cli.retention,
            ..Settings::default()
        };
        if let Some(t) = cli.window_clock_start {
            tracing::warn!(
                now = %crate::time::rfc3339(t),
                "--window-clock-start: maintenance windows are judged by a test clock"
            );
            settings.window_clock.set_now(t);
        }
        settings
    };
    if cli.kubernetes {
        let Some((namespace, name)) = cli.kube_lease.split_once('/') else {
            anyhow::bail!("--kube-lease {:?}: give NAMESPACE/NAME", cli.kube_lease);
        };
        crate::kubernetes::check_name("--kube-lease namespace", namespace)?;
        crate::kubernetes::check_name("--kube-lease name", name)?;
        return crate::kubernetes::run(crate::kubernetes::KubeOptions {
            kubeconfig: cli.kubeconfig.clone(),
            settings,
            lease: (namespace.to_string(), name.to_string()),
        })
        .await;
    }
    let sans = if cli.sans.is_empty() {
        pki::default_sans()
    } else {
        cli.sans.clone()
    };
    let served_agent = match &cli.serve_agent {
        Some(dir) => {
            let served = crate::served_agent::ServedAgent::load(dir).map_err(anyhow::Error::msg)?;
            for b in &served.binaries {
                tracing::info!(binary = b.name, bytes = b.bytes.len(), sha512 = %b.sha512, "served to first-booting machines");
            }
            Some(std::sync::Arc::new(served))
        }
        None => None,
    };
    // With replicas, every one of them (the agent fails over between them).
    let advertised = if cli.advertise_url.is_empty() {
        Vec::new()
    } else {
        hearth_api::servers::parse("--advertise-url", &cli.advertise_url)
            .map_err(|e| anyhow::anyhow!("{e}"))?
    };
    let config = serve::Config {
        state_dir: cli.state_dir.clone(),
        listen: cli.listen,
        sans: sans.clone(),
        options: Options {
            settings,
            advertise_urls: advertised.clone(),
            max_wait: Duration::from_secs(cli.max_wait),
            stale_after: Duration::from_secs(cli.stale_after),
            desired_answers_at_once: cli
                .desired_answers_at_once
                .map_or_else(crate::pace::Pacer::turns_for_this_machine, |n| n as usize),
            deferred_reports_per_second: cli
                .deferred_reports_per_second
                .unwrap_or_else(crate::pace::Pacer::deferred_reports_for_this_machine),
            pace_lease: crate::pace::LEASE,
            pace_wait_limit: crate::pace::WAIT_LIMIT,
            node_events_budget: Options::default().node_events_budget,
            tick: Duration::from_secs(10),
            ostree_repo: cli.ostree_repo.clone(),
            registry: Some(std::sync::Arc::new(
                crate::registry::Resolver::new(
                    cli.registry_auth.as_deref(),
                    cli.registry_ca.as_deref(),
                )
                .map_err(anyhow::Error::msg)?,
            )),
            served_agent,
            render_gate: cli.test_render_gate.clone(),
            bootstrap_ttl: (cli.bootstrap_token_ttl > 0)
                .then(|| Duration::from_secs(cli.bootstrap_token_ttl)),
            token_dir: None,
            metrics_token_sha256: None,
            node_bodies: crate::http::limits::NODE_BODIES_BYTES,
            enroll_bodies: crate::http::limits::ENROLL_BODIES_BYTES,
        },
        etcd: etcd_config(&cli)?,
    };
    if let Some(repo) = &cli.ostree_repo {
        crate::ostree_repo::check(repo).map_err(anyhow::Error::msg)?;
    }
    let running = serve::start(config).await?;
    let url = advertised.first().cloned().unwrap_or_else(|| {
        let host = sans
            .iter()
            .find(|s| *s != "localhost" && s.parse::<std::net::IpAddr>().is_err())
            .or(sans.first())
            .cloned()
            .unwrap_or_else(|| "localhost".into());
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        format!("https://{host}:{}", running.addr.port())
    });
    // Instructions go to stdout (and the journal) on every start; they hold paths, not secrets.
    println!("{}", running.instructions(&url));
    tracing::info!(MESSAGE_ID = crate::telemetry::logging::MSG_STARTED, addr = %running.addr, first_start = running.first_start, "hearth-server started");
    let notifier = hearth_daemon::Notifier::new();
    notifier.ready(&format!("serving on {}", running.addr));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("stopping");
    notifier.stopping();
    running.shutdown().await;
    Ok(())
}
