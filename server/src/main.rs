//! The `hearth-server` binary: parses the flags, initialises logging, builds the runtime and
//! calls the library ([`hearth_server::cli`]), as bootc's main does.

use clap::Parser;
use hearth_server::cli::{self, Cli};
use std::process::ExitCode;

/// jemalloc, not glibc's allocator: an apply to a large fleet is a burst of short-lived
/// allocations on every core (reports decoded, TLS records, store pages), and glibc's malloc
/// and free were more than half of the server's CPU in it at 100,000 agents, searching bins
/// fragmented by the long-lived records between them (docs/performance.md, "100,000 agents with
/// real reports": every agent `Done` 1.6-1.7 times sooner there, less memory at the burst's
/// peak, 2-4 KiB more per waiting agent; docs/server.md, "Memory: the allocator").
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    hearth_server::telemetry::logging::init();
    if let Some(command) = &cli.command {
        return match cli::run_command(&cli.state_dir, command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(1)
            }
        };
    }
    // Pages freed by a burst go back to the system while the server idles (jemalloc otherwise
    // purges them only when it allocates again): its threads, one per core at most.
    #[cfg(feature = "jemalloc")]
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
        tracing::warn!(error = %e, "jemalloc's background purging is off: memory freed after a burst stays resident until the next");
    }
    cli::raise_nofile();
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
    match rt.block_on(cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
