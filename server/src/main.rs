//! The `hearth-server` binary.

use clap::Parser;
use hearth_server::app::Options;
use hearth_server::controller::Settings;
use hearth_server::{pki, serve};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Command line of `hearth-server`.
#[derive(Debug, Parser)]
#[command(
    name = "hearth-server",
    version,
    about = "Stores MachineConfigs and pools, renders them, serves Ignition and desired configs over TLS"
)]
struct Cli {
    /// Where the store, the CA, the certificates and the tokens live.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/hearth-server")]
    state_dir: PathBuf,
    /// Address to listen on (22623 is the MCO's config server port).
    #[arg(long, value_name = "ADDR", default_value = "[::]:22623")]
    listen: SocketAddr,
    /// A DNS name or IP address for the serving certificate (repeatable). Default: localhost,
    /// 127.0.0.1, ::1 and the host name.
    #[arg(long = "san", value_name = "NAME")]
    sans: Vec<String>,
    /// The URL first-booting nodes are told to reach the server at. Default: https:// and the
    /// Host the node's request used.
    #[arg(long, value_name = "URL")]
    advertise_url: Option<String>,
    /// How many of the newest rendered configs of each pool (and of each node with overlays)
    /// are kept; those in use are always kept.
    #[arg(long, value_name = "N", default_value_t = 5)]
    retention: usize,
    /// The longest an agent's long-poll may wait.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    max_wait: u64,
    /// A node not heard from for this long is not ready, and counts as unavailable in
    /// rollouts (agents long-poll, so a live one is heard from every --max-wait at least).
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    stale_after: u64,
    /// Serve this ostree repository (archive mode) to enrolled nodes and admins under
    /// /ostree/repo/, for OS image pivots in disconnected sites.
    #[arg(long, value_name = "DIR", env = "HEARTH_OSTREE_REPO")]
    ostree_repo: Option<PathBuf>,
    /// For tests only (hidden): judge maintenance windows as if the clock read this many Unix
    /// seconds at start (and ran on from there). Nothing else uses this clock.
    #[arg(long, value_name = "UNIX_SECONDS", hide = true)]
    window_clock_start: Option<u64>,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
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
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let sans = if cli.sans.is_empty() {
        pki::default_sans()
    } else {
        cli.sans.clone()
    };
    let config = serve::Config {
        state_dir: cli.state_dir.clone(),
        listen: cli.listen,
        sans: sans.clone(),
        options: Options {
            settings: {
                let settings = Settings {
                    retention: cli.retention,
                    ..Settings::default()
                };
                if let Some(t) = cli.window_clock_start {
                    tracing::warn!(
                        now = %hearth_server::time::rfc3339(t),
                        "--window-clock-start: maintenance windows are judged by a test clock"
                    );
                    settings.window_clock.set_now(t);
                }
                settings
            },
            advertise_url: cli.advertise_url.clone(),
            max_wait: Duration::from_secs(cli.max_wait),
            stale_after: Duration::from_secs(cli.stale_after),
            tick: Duration::from_secs(10),
            ostree_repo: cli.ostree_repo.clone(),
        },
    };
    if let Some(repo) = &cli.ostree_repo {
        hearth_server::ostree_repo::check(repo).map_err(anyhow::Error::msg)?;
    }
    let running = serve::start(config).await?;
    let url = cli.advertise_url.clone().unwrap_or_else(|| {
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
    tracing::info!(addr = %running.addr, first_start = running.first_start, "hearth-server started");
    let _ = libsystemd::daemon::notify(
        false,
        &[
            libsystemd::daemon::NotifyState::Ready,
            libsystemd::daemon::NotifyState::Status(format!("serving on {}", running.addr)),
        ],
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("stopping");
    let _ = libsystemd::daemon::notify(false, &[libsystemd::daemon::NotifyState::Stopping]);
    running.shutdown().await;
    Ok(())
}
