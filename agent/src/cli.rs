//! The `hearth-agent` command line: `apply --once-from`, `run`, `status`.
//!
//! Exit codes of `apply`: 0 the host is in the desired config (verified); 1 the apply failed
//! (Degraded, Unreconcilable), was refused (a daemon runs, a limit), or the agent could not run;
//! 2 usage error; 3 the config is applied and a reboot is pending (requested, inhibited, or
//! `--no-reboot`); 4 the config is applied but the host differs from it (drift).

use crate::apply::{Agent, Options, Outcome, SYSTEM_BUS};
use crate::drift_policy::DriftPolicies;
use crate::journal::{Journal, NamedConfig, Phase, Summary};
use crate::source;
use crate::state::State;
use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use hearth_config::manifest::read_str;
use hearth_config::model::DisruptionPolicies;
use hearth_hostops::drift::{DriftControl, DriftEvent, DriftMonitor, DriftPolicy, ManagedPath};
use hearth_hostops::fs::Root;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

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
        /// Follow hearth-server at this URL instead of watching a path.
        #[arg(long, value_name = "URL", env = "HEARTH_SERVER")]
        server: Option<String>,
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
    crate::memory::tune_allocator();
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
            let _one_keeper = crate::daemon_lock::for_apply(&Root::open(&target.root)?)?;
            let desired = source::fetch(&once_from).await?;
            let agent = Agent::new(&target.root, target.bus().as_deref()).await?;
            let opts = Options {
                force,
                no_reboot,
                drift,
            };
            let config = desired.spec.config.clone();
            let mut outcome = agent.sync(desired.clone(), policies.clone(), &opts).await?;
            if matches!(outcome, Outcome::Drifted(_)) && opts.drift.revert(agent.root(), &config) {
                // Paths under `revert` were put back: verify again.
                outcome = agent.sync(desired, policies, &opts).await?;
            }
            if outcome == Outcome::Done {
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
            let following = match &server {
                Some(url) => format!("following {url}"),
                None => format!("watching {}", watch.display()),
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
            let source = match server {
                Some(url) => {
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
                    let node = match node_name {
                        Some(n) => n,
                        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
                            .context("cannot read the host name; give --node-name")?
                            .trim()
                            .to_string(),
                    };
                    let mut label_map = std::collections::BTreeMap::new();
                    for l in &labels {
                        let (k, v) = l
                            .split_once('=')
                            .ok_or_else(|| anyhow::anyhow!("--label {l:?}: expected KEY=VALUE"))?;
                        label_map.insert(k.to_string(), v.to_string());
                    }
                    Source::Server(crate::follow::Server {
                        url,
                        ca_pem,
                        bootstrap_token,
                        node,
                        labels: label_map,
                        wait: Duration::from_secs(30),
                    })
                }
                None => Source::Watch(watch),
            };
            let daemon = Daemon {
                agent: &agent,
                root_path: target.root.clone(),
                policies,
                drift,
                metrics: counters,
            };
            daemon
                .run(source, Duration::from_secs(interval.max(1)))
                .await
        }
        Command::Status { root, output } => {
            let root = Root::open(&root)?;
            let j = Journal::load(&root)?;
            match output {
                Format::Json => println!("{}", serde_json::to_string_pretty(&status_json(&j))?),
                Format::Text => print!("{}", status_text(&j)),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The exit code of `apply` for how it ended, with what it prints.
fn report(outcome: &Outcome) -> ExitCode {
    match outcome {
        Outcome::Done => {
            println!("Done: the host is in the desired config");
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
                (true, _) => println!("Rebooting: the config is applied; the reboot was requested"),
                (false, Some(why)) => println!("Rebooting: the config is applied; {why}"),
                (false, None) => {
                    println!("Rebooting: the config is applied; reboot pending (not requested)")
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
    }
}

/// Where the daemon gets its desired config.
enum Source {
    /// A watched file or directory.
    Watch(PathBuf),
    /// hearth-server.
    Server(crate::follow::Server),
}

struct Daemon<'a> {
    agent: &'a Agent,
    root_path: PathBuf,
    policies: DisruptionPolicies,
    drift: DriftPolicies,
    metrics: Arc<crate::metrics::Metrics>,
}

impl Daemon<'_> {
    /// The options of the daemon's applies.
    fn options(&self) -> Options {
        Options {
            drift: self.drift.clone(),
            ..Options::default()
        }
    }

    /// The managed paths of the current config.
    fn expected(&self) -> Vec<ManagedPath> {
        match Journal::load_current(self.agent.root()) {
            Ok(current) => current
                .map(|c| self.drift.managed(self.agent.root(), &c.spec.config))
                .unwrap_or_default(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the current config to watch for drift");
                Vec::new()
            }
        }
    }

    /// Finishes an apply that was interrupted (a crash, a reboot); the journal it read is not
    /// kept.
    async fn resume(&self) -> Result<()> {
        let mut j = Journal::default();
        if let Some(outcome) = self.agent.resume(&mut j, &self.options()).await? {
            tracing::info!(?outcome, "finished an interrupted apply");
        }
        Ok(())
    }

    /// Starts the drift monitor on a thread of its own; its events arrive on the channel.
    fn start_drift(
        &self,
    ) -> Result<(
        DriftControl,
        tokio::sync::mpsc::UnboundedReceiver<DriftEvent>,
    )> {
        let root = Root::open(&self.root_path)?;
        let mut monitor = DriftMonitor::new(&root, self.expected())?;
        let control = monitor.control();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("hearth-drift".into())
            .spawn(move || {
                // Drift that happened while the agent was not running.
                for ev in monitor.check_all() {
                    if tx.send(ev).is_err() {
                        return;
                    }
                }
                loop {
                    match monitor.next_event(Duration::from_secs(1)) {
                        Ok(Some(ev)) => {
                            if tx.send(ev).is_err() {
                                return;
                            }
                        }
                        Ok(None) => {
                            if tx.is_closed() {
                                return;
                            }
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "the drift monitor stopped");
                            return;
                        }
                    }
                }
            })?;
        Ok((control, rx))
    }

    fn record_drift(&self, ev: DriftEvent) -> Result<()> {
        self.metrics.drift(ev.reverted);
        if ev.reverted {
            tracing::warn!(message_id = crate::logging::MSG_DRIFT, path = %ev.path, "drift: {}: {}", ev.path, ev.what);
        } else {
            tracing::error!(message_id = crate::logging::MSG_DRIFT, path = %ev.path, "drift: {}: {}", ev.path, ev.what);
        }
        Journal::record_drift(self.agent.root(), &ev.path, &ev.what)?;
        Ok(())
    }

    async fn run(&self, source: Source, interval: Duration) -> Result<ExitCode> {
        let watch = match source {
            Source::Watch(path) => path,
            Source::Server(server) => return self.follow(server).await,
        };
        let watch = watch.as_path();
        let notify = crate::logging::Notifier::new();
        // Ready before finishing an interrupted apply: after a reboot into a new OS deployment
        // the agent waits for the boot to finish (its health check), which it never would while
        // this service is still starting.
        notify.ready(&Summary::load(self.agent.root())?.status_line());
        self.resume().await?;
        let (drift, mut drift_events) = self.start_drift()?;
        let summary = Summary::load(self.agent.root())?;
        self.metrics.set_state(summary.state);
        notify.status(&summary.status_line());
        crate::memory::trim_heap();
        let mut last_seen: Option<(PathBuf, std::time::SystemTime)> = None;
        loop {
            crate::watchdog::beat();
            match source::watched_file(watch) {
                Ok(Some(path)) => {
                    let mtime = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
                    let key = mtime.map(|t| (path.clone(), t));
                    let force = self
                        .agent
                        .root()
                        .stat(crate::apply::FORCE_FILE)
                        .ok()
                        .flatten()
                        .is_some();
                    if key != last_seen || force {
                        match std::fs::read_to_string(&path)
                            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
                            .and_then(|t| {
                                source::parse(&path.display().to_string(), &t).map_err(Into::into)
                            }) {
                            Ok(desired) => {
                                let control = drift.clone();
                                tokio::task::spawn_blocking(move || control.pause()).await?;
                                let result = self.apply_logged(desired).await;
                                drift.set_expected(self.expected());
                                drift.resume();
                                crate::memory::trim_heap();
                                result?;
                            }
                            Err(e) => tracing::error!("{e:#}"),
                        }
                        last_seen = key;
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::error!("{e}"),
            }
            let summary = Summary::load(self.agent.root())?;
            let summary = if summary.state == State::Rebooting
                && summary
                    .progress
                    .as_ref()
                    .is_some_and(|p| p.phase == Phase::Rebooting)
            {
                // A reboot that was blocked (or not yet asked for): try again.
                let mut j = Journal::default();
                let _ = self.agent.resume(&mut j, &self.options()).await?;
                drop(j);
                Summary::load(self.agent.root())?
            } else {
                summary
            };
            self.metrics.set_state(summary.state);
            notify.status(&summary.status_line());
            // Wait for the next look, recording drift as it comes (idle, not hung: the
            // watchdog is fed meanwhile).
            let deadline = tokio::time::Instant::now() + interval;
            let _idle = crate::watchdog::busy(
                "waiting for the next look at the desired config",
                interval + Duration::from_secs(10),
            );
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => break,
                    ev = drift_events.recv() => match ev {
                        Some(ev) => self.record_drift(ev)?,
                        None => {
                            tokio::time::sleep_until(deadline).await;
                            break;
                        }
                    },
                }
            }
        }
    }

    /// The daemon following hearth-server.
    async fn follow(&self, server: crate::follow::Server) -> Result<ExitCode> {
        use crate::follow;
        let notify = crate::logging::Notifier::new();
        // Ready first: see `run`.
        notify.ready(&Summary::load(self.agent.root())?.status_line());
        self.resume().await?;
        let (drift, mut drift_events) = self.start_drift()?;
        let (mut remote, mut state) = follow::connect(self.agent.root(), &server).await?;
        notify.status(&Summary::load(self.agent.root())?.status_line());
        let mut backoff = Duration::from_secs(1);
        loop {
            crate::watchdog::beat();
            // What this turn needs of the journal; the configs are not kept while waiting.
            let (doc, known) = {
                let j = Journal::load(self.agent.root())?;
                self.metrics.set_state(j.state);
                notify.status(&status_line(&j));
                let known = j.desired.as_ref().map(|d| d.name.clone());
                (follow::report_document(&j, &state.node), known)
            };
            if let Err(e) = remote.report(&doc).await {
                tracing::warn!(error = %e, "cannot report status");
            }
            // Waiting for a reboot slot does not stop the long-poll: a newer config (a fix)
            // still arrives at once; the slot is asked for again when the poll returns.
            let wait = match follow::reboot_with_slot(self.agent, &remote, &mut state).await {
                Ok(Some(retry)) => retry.min(server.wait),
                Ok(None) => server.wait,
                Err(e) => {
                    tracing::warn!(error = %e, "reboot slot");
                    server.wait
                }
            };
            drop(doc);
            // Idle in the long-poll (its own timeout is wait + 30 s), or in the back-off after
            // it: the watchdog is fed meanwhile.
            let idle = crate::watchdog::busy(
                "waiting for the server's next config",
                wait + backoff + Duration::from_secs(40),
            );
            tokio::select! {
                r = remote.desired(known.as_deref(), wait) => match r {
                    Ok(Some(desired)) => {
                        drop(idle);
                        backoff = Duration::from_secs(1);
                        let name = desired.name.clone();
                        let control = drift.clone();
                        tokio::task::spawn_blocking(move || control.pause()).await?;
                        let outcome = follow::apply(self.agent, desired, &self.drift).await;
                        drift.set_expected(self.expected());
                        drift.resume();
                        self.count(&name, &outcome?);
                    }
                    Ok(None) => backoff = Duration::from_secs(1),
                    Err(e) if e.needs_enrollment() => {
                        drop(idle);
                        tracing::warn!(error = %e, "the server no longer knows this node's credential; enrolling again");
                        (remote, state) = follow::enroll(self.agent.root(), &server).await?;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, retry_in = ?backoff, "cannot reach the server; working from the journal");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(60));
                    }
                },
                ev = drift_events.recv() => {
                    if let Some(ev) = ev {
                        self.record_drift(ev)?;
                    }
                }
            }
            crate::memory::trim_heap();
        }
    }

    fn count(&self, name: &str, outcome: &Outcome) {
        use crate::metrics::ApplyResult;
        match outcome {
            Outcome::Done => {
                self.metrics.applied(ApplyResult::Done);
                tracing::info!(message_id = crate::logging::MSG_DONE, config = %name, "Done")
            }
            Outcome::Drifted(drift) => {
                self.metrics.applied(ApplyResult::Done);
                tracing::warn!(message_id = crate::logging::MSG_DONE, config = %name, drift = %drift.join("; "), "Done, with drift")
            }
            Outcome::Rebooting { .. } => {
                self.metrics.applied(ApplyResult::Rebooting);
                tracing::info!(message_id = crate::logging::MSG_REBOOTING, config = %name, "Rebooting")
            }
            Outcome::Degraded(r) => {
                self.metrics.applied(ApplyResult::Degraded);
                tracing::error!(message_id = crate::logging::MSG_DEGRADED, config = %name, reason = %r, "Degraded")
            }
            Outcome::Unreconcilable(r) => {
                self.metrics.applied(ApplyResult::Unreconcilable);
                tracing::error!(message_id = crate::logging::MSG_UNRECONCILABLE, config = %name, reason = %r, "Unreconcilable")
            }
        }
    }

    async fn apply_logged(&self, desired: NamedConfig) -> Result<()> {
        let name = desired.name.clone();
        let outcome = self
            .agent
            .sync(desired, self.policies.clone(), &self.options())
            .await?;
        self.count(&name, &outcome);
        Ok(())
    }
}

fn status_line(j: &Journal) -> String {
    let desired = j.desired.as_ref().map(|d| d.name.as_str()).unwrap_or("-");
    match &j.reason {
        Some(r) => format!("{} {desired}: {r}", j.state),
        None => format!("{} {desired}", j.state),
    }
}

/// The status document (versioned).
pub fn status_json(j: &Journal) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "hearth.io/v1",
        "kind": "AgentStatus",
        "state": j.state,
        "reason": j.reason,
        "lastTransition": j.last_transition,
        "current": j.current.as_ref().map(|c| &c.name),
        "desired": j.desired.as_ref().map(|d| &d.name),
        "pendingReboot": j.state == State::Rebooting,
        "progress": j.progress,
        "drift": j.drift,
        "history": j.history,
    })
}

/// The status for people.
pub fn status_text(j: &Journal) -> String {
    let dash = |s: Option<&str>| s.unwrap_or("-").to_string();
    let mut out = String::new();
    out.push_str(&format!("State:           {}\n", j.state));
    out.push_str(&format!("Reason:          {}\n", dash(j.reason.as_deref())));
    out.push_str(&format!("Last transition: {}\n", j.last_transition));
    out.push_str(&format!(
        "Current config:  {}\n",
        dash(j.current.as_ref().map(|c| c.name.as_str()))
    ));
    out.push_str(&format!(
        "Desired config:  {}\n",
        dash(j.desired.as_ref().map(|d| d.name.as_str()))
    ));
    out.push_str(&format!(
        "Pending reboot:  {}\n",
        if j.state == State::Rebooting {
            "yes"
        } else {
            "no"
        }
    ));
    if let Some(os) = j.progress.as_ref().and_then(|p| p.os.as_ref()) {
        out.push_str(&format!("OS change:       {}\n", os.change));
        if let Some(d) = &os.expect.deployment {
            let what = if os.rollback.is_some() {
                "rolling back to"
            } else {
                "staged"
            };
            out.push_str(&format!("OS deployment:   {what} {d}\n"));
        }
    }
    if let Some(failed) = &j.failed_os {
        out.push_str(&format!(
            "Failed OS:       {failed} (not staged again until a new config or {})\n",
            crate::apply::FORCE_FILE
        ));
    }
    if j.drift.is_empty() {
        out.push_str("Drift:           none\n");
    } else {
        out.push_str("Drift:\n");
        for d in &j.drift {
            out.push_str(&format!("  - {d}\n"));
        }
    }
    out
}
