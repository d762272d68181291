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
    /// The server (`https://127.0.0.1:22623`).
    #[arg(long, value_name = "URL")]
    pub(crate) server: String,
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
    /// hearth-server's pid, to read its memory from /proc.
    #[arg(long, value_name = "PID")]
    pub(crate) server_pid: Option<u32>,
    /// Once every agent runs its first config, run this shell command (e.g. `hearth apply -f
    /// new.yaml`) and measure until every agent has seen and reported the config it brings.
    #[arg(long, value_name = "CMD")]
    pub(crate) apply: Option<String>,
    /// Without --apply: once every agent runs its first config, wait this long for an apply
    /// made by someone else (measured from the first agent that sees it).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub(crate) hold: u64,
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

/// Raises the soft limit of open files to the hard limit; returns the new soft limit.
pub(crate) fn raise_nofile() -> u64 {
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

pub(crate) fn secret(arg: &str) -> Result<String> {
    match arg.strip_prefix('@') {
        Some(path) => Ok(std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {path}"))?
            .trim()
            .to_string()),
        None => Ok(arg.trim().to_string()),
    }
}
