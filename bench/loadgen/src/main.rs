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

use clap::{Parser, Subcommand};

mod agents;
mod args;
mod conn;
mod stats;
#[cfg(test)]
mod tests;
mod throughput;

use args::{AgentsArgs, ThroughputArgs};

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
            Command::Agents(a) => agents::agents(a).await,
            Command::Throughput(a) => throughput::throughput(a).await,
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
