//! The `hearth-agent` command line: `apply --once-from`, `run`, `status`.
//!
//! Exit codes of `apply`: 0 the host is in the desired config (verified); 1 the apply failed
//! (Degraded, Unreconcilable), was refused (a daemon runs, a limit), or the agent could not run;
//! 2 usage error; 3 the config is applied and a reboot is pending (requested, inhibited, or
//! `--no-reboot`); 4 the config is applied but the host differs from it (drift).

use crate::apply::{Agent, Options, Outcome, SYSTEM_BUS};
use crate::daemon::Daemon;
use crate::drift_policy::DriftPolicies;
use crate::journal::{Journal, Summary};
use crate::recheck::FileId;
use crate::source;
use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use hearth_config::manifest::read_str;
use hearth_config::model::DisruptionPolicies;
use hearth_hostops::drift::DriftPolicy;
use hearth_hostops::fs::Root;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

pub use crate::status::{status_document, status_json, status_text};

/// Command line of `hearth-agent`.
#[derive(Debug, Parser)]
#[command(
    name = "hearth-agent",
    version,
    about = "Keeps this host in its desired MachineConfig"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct Target {
    /// The host's root directory. Without --bus, an offline image root: files, units and keys
    /// only, enablement through symlinks, no OS-level changes.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// The system bus of the host's systemd (default: the system bus when --root is /).
    #[arg(long, value_name = "ADDRESS")]
    bus: Option<String>,
}

impl Target {
    fn bus(&self) -> Option<String> {
        match &self.bus {
            Some(b) => Some(b.clone()),
            None if self.root == Path::new("/") => Some(SYSTEM_BUS.to_string()),
            None => None,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply a config once and exit: 0 when the host is in it, 3 when a reboot is pending, 4
    /// when it differs from it (drift).
    Apply {
        /// A MachineConfig file, or an http(s) URL serving one.
        #[arg(long, value_name = "FILE|URL")]
        once_from: String,
        #[command(flatten)]
        target: Target,
        /// MachineConfiguration manifests with node-disruption policies.
        #[arg(long, value_name = "FILE")]
        policy: Vec<PathBuf>,
        /// Re-apply everything even if the host already has this config.
        #[arg(long)]
        force: bool,
        /// Never reboot: leave the reboot pending (exit 3).
        #[arg(long)]
        no_reboot: bool,
        /// What a managed file changed by hand means for this apply: report it (exit 4 when the
        /// host differs from the config), revert it (put it back), ignore it.
        #[arg(long, value_enum, default_value_t = DriftArg::Report)]
        drift_policy: DriftArg,
        /// A per-path drift policy, PATH=report|revert|ignore (the longest match wins).
        /// Repeatable.
        #[arg(long = "drift", value_name = "PATH=POLICY")]
        drift: Vec<String>,
    },
    /// Run as a daemon: finish any interrupted apply, then apply every new config that appears
    /// at the watched file or directory (the newest *.yaml/*.yml/*.json of a directory).
    Run {
        /// File or directory to watch for the desired config (when not following a server).
        #[arg(long, value_name = "PATH", default_value = "/etc/hearth/desired")]
        watch: PathBuf,
        /// Follow hearth-server at this URL instead of watching a path. Several servers (the
        /// replicas of one site): repeat the flag or separate URLs with commas (at most 16); the
        /// agent uses one at a time and moves to the next when it cannot be reached, times out
        /// or answers 5xx.
        #[arg(
            long,
            value_name = "URL[,URL...]",
            env = "HEARTH_SERVER",
            value_delimiter = ','
        )]
        server: Vec<String>,
        /// Follow this node's Node on a Kubernetes API server instead: apply the rendered
        /// MachineConfig its `machineconfiguration.openshift.io/desiredConfig` annotation names
        /// and write back `currentConfig`, `state` and `reason` as the MCO's daemon does (and
        /// the node's MachineConfigNode status). In-cluster (the service account) unless
        /// --kubeconfig is given. HEARTH_KUBERNETES: true, 1, yes or on.
        #[arg(
            long,
            env = "HEARTH_KUBERNETES",
            value_parser = clap::builder::BoolishValueParser::new(),
            conflicts_with = "server"
        )]
        kubernetes: bool,
        /// The kubeconfig to reach the API server with (with --kubernetes).
        #[arg(
            long,
            value_name = "FILE",
            env = "HEARTH_KUBECONFIG",
            requires = "kubernetes"
        )]
        kubeconfig: Option<PathBuf>,
        /// The fleet CA (PEM) that signs the server's certificate.
        #[arg(
            long,
            value_name = "FILE",
            env = "HEARTH_CA",
            default_value = "/etc/hearth/ca.crt"
        )]
        ca: PathBuf,
        /// A file holding the pool's bootstrap token, for the first enrollment.
        #[arg(long, value_name = "FILE", env = "HEARTH_BOOTSTRAP_TOKEN_FILE")]
        bootstrap_token_file: Option<PathBuf>,
        /// The pool's bootstrap token itself (as the first-boot config writes it into
        /// /etc/hearth/agent.env).
        #[arg(
            long,
            value_name = "TOKEN",
            env = "HEARTH_BOOTSTRAP_TOKEN",
            hide_env_values = true
        )]
        bootstrap_token: Option<String>,
        /// This node's name (default: the host name).
        #[arg(long, value_name = "NAME", env = "HEARTH_NODE_NAME")]
        node_name: Option<String>,
        /// A label to enroll with, KEY=VALUE (repeatable).
        #[arg(long = "label", value_name = "KEY=VALUE")]
        labels: Vec<String>,
        #[command(flatten)]
        target: Target,
        /// MachineConfiguration manifests with node-disruption policies.
        #[arg(long, value_name = "FILE")]
        policy: Vec<PathBuf>,
        /// How often to look for a new config.
        #[arg(long, value_name = "SECONDS", default_value_t = 5)]
        interval: u64,
        /// What to do when a managed file is changed by hand: report (the MCO's behaviour),
        /// revert (put it back), ignore.
        #[arg(long, value_enum, default_value_t = DriftArg::Report)]
        drift_policy: DriftArg,
        /// A per-path drift policy, PATH=report|revert|ignore; PATH is a file or a directory
        /// (the longest match wins). Repeatable.
        #[arg(long = "drift", value_name = "PATH=POLICY")]
        drift: Vec<String>,
        /// Serve Prometheus metrics on a local address (127.0.0.1:9701) or unix:/path.
        #[arg(long, value_name = "ADDRESS")]
        metrics: Option<String>,
    },
    /// Show the node's state: current and desired config, state, reason, pending reboot, drift.
    Status {
        /// The host's root directory.
        #[arg(long, value_name = "DIR", default_value = "/")]
        root: PathBuf,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Text)]
        output: Format,
    },
    /// Put ostree's boot entries on the ESP for systemd-boot, a new deployment's with a boot
    /// counter ("bootCounting" in /etc/hearth/os.json; hearth-boot-entries.service runs this
    /// at boot and at shutdown). Does nothing when boot counting is off.
    BootEntries {
        /// The host's root directory.
        #[arg(long, value_name = "DIR", default_value = "/")]
        root: PathBuf,
    },
    /// Wait for the agent's verdict on this boot (hearth-boot-complete.service, ordered before
    /// boot-complete.target): exit 0 when the booted deployment is good, 1 when it is not or
    /// when no verdict came within the health check's timeout (plus 2 minutes).
    BootComplete {
        /// The host's root directory.
        #[arg(long, value_name = "DIR", default_value = "/")]
        root: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DriftArg {
    Report,
    Revert,
    Ignore,
}

impl From<DriftArg> for DriftPolicy {
    fn from(d: DriftArg) -> DriftPolicy {
        match d {
            DriftArg::Report => DriftPolicy::Report,
            DriftArg::Revert => DriftPolicy::Revert,
            DriftArg::Ignore => DriftPolicy::Ignore,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

/// Runs the command line; returns the exit code.
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    hearth_daemon::memory::tune_allocator();
    crate::logging::init();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn load_policies(paths: &[PathBuf]) -> Result<DisruptionPolicies> {
    let mut out = DisruptionPolicies::default();
    for p in paths {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
        let (m, diags) = read_str(&p.display().to_string(), &text);
        if let Some(e) = diags.iter().find(|d| d.is_error()) {
            anyhow::bail!("{e}");
        }
        let pol = m.disruption_policies();
        out.files.extend(pol.files);
        out.units.extend(pol.units);
        if pol.ssh_key.is_some() {
            out.ssh_key = pol.ssh_key;
        }
    }
    Ok(out)
}

async fn run(cli: Cli) -> Result<ExitCode> {
    // Fed from its own thread while the agent makes progress (see `watchdog`).
    crate::watchdog::start();
    match cli.command {
        Command::Apply {
            once_from,
            target,
            policy,
            force,
            no_reboot,
            drift_policy,
            drift,
        } => {
            let policies = load_policies(&policy)?;
            let drift = DriftPolicies::parse(drift_policy.into(), &drift)?;
            // Refused while `hearth-agent run` keeps this host in its own desired config.
            let root = Root::open(&target.root)?;
            let _one_keeper = crate::daemon_lock::for_apply(&root)?;
            // The same config again on a host verified in it: checked against the compact
            // index, without parsing it (anything else takes the full path below); a local file
            // whose identity the index recorded is not even read.
            // Opened once: its identity and its content from the same open file.
            let local = source::local_path(&once_from).and_then(|p| std::fs::File::open(p).ok());
            let file_id = local.as_ref().and_then(FileId::of_open);
            if !force
                && file_id
                    .as_ref()
                    .is_some_and(|id| crate::recheck::quick_done_by_file(&root, id, &drift))
            {
                return Ok(report(&Outcome::Done));
            }
            let bytes = match local {
                Some(file) => source::read_open(&once_from, file)?,
                None => source::fetch_bytes(&once_from).await?,
            };
            if !force && crate::recheck::quick_done(&root, &bytes, &drift) {
                crate::recheck::record_source_file(&root, &bytes, file_id);
                return Ok(report(&Outcome::Done));
            }
            let desired = source::parse_bytes(&once_from, bytes.clone())?;
            let agent = Agent::new(&target.root, target.bus().as_deref()).await?;
            let opts = Options {
                force,
                no_reboot,
                drift,
                force_request: None,
                trial: None,
            };
            let config = desired.spec.config.clone();
            let desired_for_index = desired.clone();
            let mut outcome = agent.sync(desired.clone(), policies.clone(), &opts).await?;
            if matches!(outcome, Outcome::Drifted(_)) && opts.drift.revert(agent.root(), &config) {
                // Paths under `revert` were put back: verify again.
                outcome = agent.sync(desired, policies, &opts).await?;
            }
            if outcome == Outcome::Done {
                crate::recheck::record(agent.root(), &bytes, file_id, &desired_for_index);
                // Steps that were skipped (a unit the built-in policies name that this host does
                // not have) are in the reason: say so.
                if let Some(reason) = Summary::load(agent.root())?.reason {
                    eprintln!("{reason}");
                }
            }
            Ok(report(&outcome))
        }
        Command::Run {
            watch,
            server,
            kubernetes,
            kubeconfig,
            ca,
            bootstrap_token_file,
            bootstrap_token,
            node_name,
            labels,
            target,
            policy,
            interval,
            drift_policy,
            drift,
            metrics,
        } => {
            let policies = load_policies(&policy)?;
            let drift = DriftPolicies::parse(drift_policy.into(), &drift)?;
            let servers = if server.is_empty() {
                None
            } else {
                Some(hearth_api::servers::parse(
                    "--server (or HEARTH_SERVER)",
                    &server,
                )?)
            };
            let kube_node = kubernetes
                .then(|| node_name.clone().map_or_else(host_name, Ok))
                .transpose()?;
            let following = match (&servers, &kube_node) {
                (Some(urls), _) => format!("following {}", urls.join(",")),
                (None, Some(node)) => format!("following Kubernetes Node {node}"),
                (None, None) => format!("watching {}", watch.display()),
            };
            let _one_keeper =
                crate::daemon_lock::for_daemon(&Root::open(&target.root)?, &following)?;
            let agent = Agent::new(&target.root, target.bus().as_deref()).await?;
            let counters = Arc::new(crate::metrics::Metrics::default());
            if let Some(listen) = &metrics {
                crate::metrics::serve(listen, counters.clone())
                    .await
                    .with_context(|| format!("cannot serve metrics on {listen}"))?;
            }
            let source = match servers {
                Some(urls) => {
                    let ca_pem = std::fs::read(&ca)
                        .with_context(|| format!("cannot read the fleet CA {}", ca.display()))?;
                    let bootstrap_token = match &bootstrap_token_file {
                        None if bootstrap_token.is_some() => bootstrap_token,
                        Some(f) => Some(
                            std::fs::read_to_string(f)
                                .with_context(|| format!("cannot read {}", f.display()))?
                                .trim()
                                .to_string(),
                        ),
                        None => None,
                    };
                    let node = node_name.map_or_else(host_name, Ok)?;
                    let mut label_map = std::collections::BTreeMap::new();
                    for l in &labels {
                        let (k, v) = l
                            .split_once('=')
                            .ok_or_else(|| anyhow::anyhow!("--label {l:?}: expected KEY=VALUE"))?;
                        label_map.insert(k.to_string(), v.to_string());
                    }
                    Source::Server(crate::enrolment::Server {
                        urls,
                        ca_pem,
                        bootstrap_token,
                        node,
                        labels: label_map,
                        wait: Duration::from_secs(30),
                    })
                }
                None => match kube_node {
                    Some(node) => Source::Kubernetes(Box::new(
                        crate::kube::Kube::connect(kubeconfig.as_deref(), &node).await?,
                    )),
                    None => Source::Watch(watch),
                },
            };
            let daemon = Daemon {
                agent: &agent,
                root_path: target.root.clone(),
                policies,
                drift,
                metrics: counters,
            };
            match source {
                Source::Watch(path) => {
                    daemon
                        .watch(&path, Duration::from_secs(interval.max(1)))
                        .await
                }
                Source::Server(server) => daemon.follow(server).await,
                Source::Kubernetes(kube) => daemon.follow_kubernetes(*kube).await,
            }
        }
        Command::BootEntries { root } => boot_entries(&root),
        Command::BootComplete { root } => boot_complete(&root),
        Command::Status { root: path, output } => {
            let root = Root::open(&path)?;
            let j = Journal::load(&root)?;
            let text = match output {
                Format::Json => {
                    let mut doc = status_document(&j);
                    crate::os_pull::attach(&mut doc, &path);
                    serde_json::to_string_pretty(&doc)? + "\n"
                }
                Format::Text => {
                    let mut text = status_text(&j);
                    if j.progress.is_some() {
                        if let Some(p) = crate::os_pull::read(&path) {
                            text.push_str(&format!(
                                "OS pull:         {}\n",
                                crate::os_pull::to_wire(&p).describe()
                            ));
                        }
                    }
                    text
                }
            };
            write_stdout(&text)
        }
    }
}

/// `hearth-agent boot-entries`.
fn boot_entries(root: &Path) -> Result<ExitCode> {
    use hearth_hostops::os::{bootcount, OsConfig, CONFIG_PATH};
    let config = OsConfig::load(root)?;
    let Some(counting) = config.boot_counting else {
        println!("boot counting is off (no bootCounting in {CONFIG_PATH}): nothing to do");
        return Ok(ExitCode::SUCCESS);
    };
    let report = bootcount::sync(root, &counting)?;
    tracing::info!(?report, "boot entries synced to the ESP");
    println!(
        "boot entries on {}: {} written, {} removed, {} files copied, {} pruned; new with a \
         boot counter of {}: {}",
        counting.esp,
        report.written.len(),
        report.removed.len(),
        report.copied.len(),
        report.pruned.len(),
        counting.tries,
        if report.counted.is_empty() {
            "none".to_string()
        } else {
            report.counted.join(", ")
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `hearth-agent boot-complete`.
fn boot_complete(root: &Path) -> Result<ExitCode> {
    use hearth_hostops::os::OsConfig;
    let config = OsConfig::load(root)?;
    if config.boot_counting.is_none() {
        println!("boot counting is off: nothing to wait for");
        return Ok(ExitCode::SUCCESS);
    }
    let timeout = Duration::from_secs(config.health.timeout_seconds + 120);
    match crate::boot_verdict::wait(root, timeout) {
        Ok(crate::boot_verdict::Verdict::Good) => {
            println!("the agent judged this boot good");
            Ok(ExitCode::SUCCESS)
        }
        Ok(crate::boot_verdict::Verdict::Bad(why)) => {
            eprintln!("the agent judged this boot bad: {why}");
            Ok(ExitCode::from(1))
        }
        Err(why) => {
            eprintln!("{why}");
            Ok(ExitCode::from(1))
        }
    }
}

/// The exit status of a program killed by `SIGPIPE` (128 + 13).
const BROKEN_PIPE_STATUS: u8 = 141;

/// Writes `text` to standard output. A reader that went away (`hearth-agent status | head`)
/// ends the command quietly with status 141, as a program killed by `SIGPIPE` does, instead of
/// a panic; another write error is an error.
fn write_stdout(text: &str) -> Result<ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            Ok(ExitCode::from(BROKEN_PIPE_STATUS))
        }
        Err(e) => Err(e).context("writing to standard output"),
    }
}

/// One line of `apply`'s result on standard output; a closed pipe or another write error is
/// not worth more than the exit code, which says the same.
fn say(line: &str) {
    let _ = write_stdout(&format!("{line}\n"));
}

/// The exit code of `apply` for how it ended, with what it prints.
fn report(outcome: &Outcome) -> ExitCode {
    match outcome {
        Outcome::Done => {
            say("Done: the host is in the desired config");
            ExitCode::SUCCESS
        }
        Outcome::Drifted(drift) => {
            eprintln!(
                "Drifted: the config is applied, but the host differs from it in {} place(s) this apply did not write:",
                drift.len()
            );
            for d in drift {
                eprintln!("  - {d}");
            }
            eprintln!(
                "Put them back with --drift PATH=revert (or --force to re-apply everything), or exempt them with --drift PATH=ignore."
            );
            ExitCode::from(4)
        }
        Outcome::Rebooting {
            requested,
            inhibited,
        } => {
            match (requested, inhibited) {
                (true, _) => say("Rebooting: the config is applied; the reboot was requested"),
                (false, Some(why)) => say(&format!("Rebooting: the config is applied; {why}")),
                (false, None) => {
                    say("Rebooting: the config is applied; reboot pending (not requested)")
                }
            }
            ExitCode::from(3)
        }
        Outcome::Degraded(reason) => {
            eprintln!("Degraded: {reason}");
            ExitCode::from(1)
        }
        Outcome::Unreconcilable(reason) => {
            eprintln!("Unreconcilable: {reason}");
            ExitCode::from(1)
        }
        Outcome::Trial(reason) => {
            say(&format!("Trial: {reason}"));
            ExitCode::from(5)
        }
    }
}

/// Where the daemon gets its desired config.
enum Source {
    /// A watched file or directory.
    Watch(PathBuf),
    /// hearth-server.
    Server(crate::enrolment::Server),
    /// This node's Node on a Kubernetes API server.
    Kubernetes(Box<crate::kube::Kube>),
}

/// This host's name (the default node name).
fn host_name() -> Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/hostname")
        .context("cannot read the host name; give --node-name")?
        .trim()
        .to_string())
}
