//! `sd_notify`, for a `Type=notify` service with `WatchdogSec=`.

use libsystemd::daemon::{self, NotifyState};

/// Tells systemd (or whatever set `NOTIFY_SOCKET`: a container engine's `--sdnotify`) how the
/// service is doing; does nothing without `NOTIFY_SOCKET`.
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
            enabled: std::env::var_os("NOTIFY_SOCKET").is_some(),
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

    /// `STOPPING=1`.
    pub fn stopping(&self) {
        self.send(&[NotifyState::Stopping]);
    }

    /// `WATCHDOG=1`: the service is alive (systemd restarts it when this stops coming for
    /// `WatchdogSec=`).
    pub fn watchdog(&self) {
        self.send(&[NotifyState::Watchdog]);
    }
}
