//! Logging: under systemd (and when the journal socket exists) to the journal through
//! `tracing-journald`, with the events' fields as journal fields (`MESSAGE_ID`, config names,
//! steps...); otherwise to stderr, coloured only when stderr is a terminal (pipes and log files
//! never get ANSI escape codes). `RUST_LOG` filters; `info` by default.

use tracing_subscriber::prelude::*;
use tracing_subscriber::EnvFilter;

/// Sets up logging once (later calls do nothing).
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let under_systemd =
        std::env::var_os("INVOCATION_ID").is_some() || std::env::var_os("JOURNAL_STREAM").is_some();
    if under_systemd {
        if let Ok(layer) = tracing_journald::layer() {
            let _ = tracing_subscriber::registry()
                .with(filter)
                .with(layer.with_field_prefix(None))
                .try_init();
            return;
        }
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
