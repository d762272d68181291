//! What hearth's daemons share about running on a host, so that hearth-agent and
//! hearth-server behave alike under systemd:
//!
//! - [`logging`]: the journal (structured fields, `MESSAGE_ID`s) under systemd, stderr
//!   otherwise;
//! - [`notify`]: `sd_notify` (`READY=1`, `STATUS=`, `STOPPING=1`, `WATCHDOG=1`);
//! - [`memory`]: the allocator of a long-lived daemon whose work comes in bursts.

pub mod logging;
pub mod memory;
pub mod notify;

pub use notify::Notifier;
