//! The flags of the two subcommands, and what both need: the open-file limit, secrets from
//! files.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub(crate) struct Common {
    /// The fleet CA (the server's `pki/ca.crt`); the server's certificate is checked against it.
    #[arg(long, value_name = "FILE")]
    pub(crate) ca: PathBuf,
    /// Print one JSON document instead of the summary.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct AgentsArgs {
    /// The server (`https://127.0.0.1:22623`), or several (replicas of one fleet),
    /// comma-separated or repeated: agent i talks to server i mod n (agents that share a
    /// connection, to the same one). At most 16.
    #[arg(long, value_name = "URL", value_delimiter = ',', required = true, num_args = 1..)]
    pub(crate) server: Vec<String>,
    /// The pool's bootstrap token, or `@FILE` to read it from a file.
    #[arg(long, value_name = "TOKEN|@FILE")]
    pub(crate) bootstrap_token: String,
    /// How many agents.
    #[arg(long, short = 'n', default_value_t = 10_000)]
    pub(crate) agents: usize,
    /// Enrollments (connection + TLS handshake + enroll) in flight at once.
    #[arg(long, default_value_t = 64)]
    pub(crate) enroll_concurrency: usize,
    /// The long-poll's `wait` in seconds.
    #[arg(long, default_value_t = 120)]
    pub(crate) wait: u64,
    /// Node names are PREFIX-00000, PREFIX-00001, ...
    #[arg(long, default_value = "loadgen")]
    pub(crate) prefix: String,
    /// hearth-server's pid, to read its memory from /proc (several, comma-separated: the
    /// replicas, whose memory is added up).
    #[arg(long, value_name = "PID", value_delimiter = ',')]
    pub(crate) server_pid: Vec<u32>,
    /// Once every agent runs its first config, run this shell command (e.g. `hearth apply -f
    /// new.yaml`) and measure until every agent has seen and reported the config it brings.
    #[arg(long, value_name = "CMD")]
    pub(crate) apply: Option<String>,
    /// Without --apply: once every agent runs its first config, wait this long for an apply
    /// made by someone else (measured from the first agent that sees it).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub(crate) hold: u64,
    /// Connect from these local addresses, agent by agent in turn (`127.0.0.2-127.0.0.6` or
    /// `127.0.0.2,127.0.0.3`): one source address has about 28,000 ephemeral ports towards
    /// one server address, so 100,000 agents on loopback need four or more. At most
    /// 256 addresses. Default: the system picks (one address).
    #[arg(long, value_name = "LIST", value_parser = parse_sources)]
    pub(crate) source_addresses: Option<Sources>,
    /// Agents per connection: 1 (default) gives each agent its own HTTP/1.1 connection, as
    /// real agents have; K > 1 lets K agents share one HTTP/2 connection (at most 128, the
    /// server's concurrent streams), to load a fleet larger than the open-files limit allows
    /// connections (the server's per-node work is the same; its per-connection memory is not).
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=128))]
    pub(crate) agents_per_connection: u16,
    /// After the apply (or once all run their first config), go on this many seconds with
    /// every agent long-polling and reporting each turn, as hearth-agent does: the reports of
    /// a fleet between changes (`status report, every turn`; use a short --wait).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub(crate) steady: u64,
    /// How long each agent takes to apply the new config of the apply, between its `Working`
    /// and its `Done` report (real agents write files, restart units, stage OS images): 0, the
    /// default, applies in no time.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub(crate) apply_ms: u64,
    /// History items in each status report (a real agent sends its newest 50, some 5 KiB): 0,
    /// the default, sends none.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=50))]
    pub(crate) history: u16,
    /// Ask for answers without waiting and hold the reports until the server's time
    /// (`defer=true`, as hearth-agent does); with it off, agents are paced by turns, as agents
    /// before deferred reports were.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub(crate) defer: bool,
    /// Give up on a phase after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 900)]
    pub(crate) timeout: u64,
    #[command(flatten)]
    pub(crate) common: Common,
}

#[derive(Debug, Args)]
pub(crate) struct ThroughputArgs {
    /// The URL to GET (https only).
    #[arg(long, value_name = "URL")]
    pub(crate) url: String,
    /// Send `Authorization: Bearer TOKEN` (or `@FILE`).
    #[arg(long, value_name = "TOKEN|@FILE")]
    pub(crate) token: Option<String>,
    /// Enroll one node with this bootstrap token (or `@FILE`) first and send its credential:
    /// for `/api/v1/agent/desired`.
    #[arg(long, value_name = "TOKEN|@FILE", conflicts_with = "token")]
    pub(crate) enroll_with: Option<String>,
    /// Concurrent clients, each on its own keep-alive connection.
    #[arg(long, short = 'c', default_value_t = 64)]
    pub(crate) concurrency: usize,
    /// Seconds to run.
    #[arg(long, short = 'd', default_value_t = 10)]
    pub(crate) duration: u64,
    /// A label for the output.
    #[arg(long, default_value = "")]
    pub(crate) label: String,
    #[command(flatten)]
    pub(crate) common: Common,
}

/// The local addresses to connect from (`--source-addresses`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sources(pub(crate) Vec<std::net::IpAddr>);

/// The most addresses `--source-addresses` takes.
pub(crate) const MAX_SOURCES: usize = 256;

/// `A`, `A-B` (IPv4, B ≥ A) or a comma-separated list of those.
pub(crate) fn parse_sources(s: &str) -> Result<Sources, String> {
    use std::net::{IpAddr, Ipv4Addr};
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            None => out.push(
                part.parse::<IpAddr>()
                    .map_err(|_| format!("{part:?} is not an IP address"))?,
            ),
            Some((a, b)) => {
                let parse = |x: &str| {
                    x.trim()
                        .parse::<Ipv4Addr>()
                        .map(u32::from)
                        .map_err(|_| format!("{x:?} is not an IPv4 address (ranges are IPv4 only)"))
                };
                let (a, b) = (parse(a)?, parse(b)?);
                if b < a {
                    return Err(format!("{part:?}: the range ends before it starts"));
                }
                if (b - a) as usize >= MAX_SOURCES {
                    return Err(format!("{part:?}: more than {MAX_SOURCES} addresses"));
                }
                out.extend((a..=b).map(|x| IpAddr::V4(Ipv4Addr::from(x))));
            }
        }
        if out.len() > MAX_SOURCES {
            return Err(format!("more than {MAX_SOURCES} addresses"));
        }
    }
    if out.is_empty() {
        return Err("no address given".into());
    }
    Ok(Sources(out))
}

/// Raises the open-files limit to at least `want` when it can (the hard limit too, which
/// takes root), else the soft limit to the hard limit; returns the new soft limit.
pub(crate) fn raise_nofile(want: u64) -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) => {
            if want > hard && setrlimit(Resource::RLIMIT_NOFILE, want, want).is_ok() {
                want
            } else if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                hard
            } else {
                soft
            }
        }
        Err(_) => 0,
    }
}

pub(crate) fn secret(arg: &str) -> Result<String> {
    match arg.strip_prefix('@') {
        Some(path) => Ok(std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {path}"))?
            .trim()
            .to_string()),
        None => Ok(arg.trim().to_string()),
    }
}
