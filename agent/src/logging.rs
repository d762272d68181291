//! Logging and service notification.
//!
//! Under systemd (and when the journal socket exists) logs go to the journal through
//! `tracing-journald` with structured fields (config names, steps, `MESSAGE_ID`s for state
//! changes); otherwise to stderr. `Notifier` speaks `sd_notify`: `READY=1`, `STATUS=` with the
//! state, and `WATCHDOG=1`.

use libsystemd::daemon::{self, NotifyState};
use tracing_subscriber::prelude::*;
use tracing_subscriber::EnvFilter;

/// `MESSAGE_ID` of "the node reached Done".
pub const MSG_DONE: &str = "5a0f1c0e7a9d4c7e9b6d2f1a3c4e5d60";
/// `MESSAGE_ID` of "the node is rebooting into a config".
pub const MSG_REBOOTING: &str = "5a0f1c0e7a9d4c7e9b6d2f1a3c4e5d61";
/// `MESSAGE_ID` of "the node is degraded".
pub const MSG_DEGRADED: &str = "5a0f1c0e7a9d4c7e9b6d2f1a3c4e5d62";
/// `MESSAGE_ID` of "the desired config is unreconcilable".
pub const MSG_UNRECONCILABLE: &str = "5a0f1c0e7a9d4c7e9b6d2f1a3c4e5d63";

/// `MESSAGE_ID` of "a managed file drifted".
pub const MSG_DRIFT: &str = "5a0f1c0e7a9d4c7e9b6d2f1a3c4e5d64";

/// Sets up logging once: journald under systemd, stderr otherwise (coloured only when stderr is
/// a terminal, so pipes and log files never get ANSI escape codes). `RUST_LOG` filters.
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

/// `sd_notify` when running as a `Type=notify` service; does nothing otherwise.
#[derive(Debug)]
pub struct Notifier {
    enabled: bool,
}

impl Default for Notifier {
    fn default() -> Self {
        Self::new()
    }
}

impl Notifier {
    /// A notifier for this process.
    pub fn new() -> Notifier {
        Notifier {
            enabled: daemon::booted() && std::env::var_os("NOTIFY_SOCKET").is_some(),
        }
    }

    fn send(&self, states: &[NotifyState]) {
        if self.enabled {
            if let Err(e) = daemon::notify(false, states) {
                tracing::debug!(error = %e, "sd_notify failed");
            }
        }
    }

    /// `READY=1` with a status line.
    pub fn ready(&self, status: &str) {
        self.send(&[NotifyState::Ready, NotifyState::Status(status.to_string())]);
    }

    /// `STATUS=...`.
    pub fn status(&self, status: &str) {
        self.send(&[NotifyState::Status(status.to_string())]);
    }

    /// `WATCHDOG=1`.
    pub fn watchdog(&self) {
        self.send(&[NotifyState::Watchdog]);
    }
}
