//! Logging and service notification, set up as the server's (`hearth_daemon`).
//!
//! Under systemd (and when the journal socket exists) logs go to the journal through
//! `tracing-journald` with structured fields (config names, steps, the `MESSAGE_ID`s below for
//! state changes); otherwise to stderr. `Notifier` speaks `sd_notify`: `READY=1`, `STATUS=` with
//! the state, and `WATCHDOG=1`.

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

pub use hearth_daemon::logging::init;
pub use hearth_daemon::Notifier;
