//! Logging of the server, set up as the agent's (`hearth_daemon::logging`): under systemd (and
//! when the journal socket exists) logs go to the journal through `tracing-journald` with
//! structured fields, otherwise to stderr (coloured only on a terminal). Every event the server
//! commits (`hearth get events`) is also logged with a `MESSAGE_ID`, its reason and object, so
//! `journalctl MESSAGE_ID=…` finds a fleet's warnings without the API. The periodic tick feeds
//! systemd's watchdog (`hearth_daemon::Notifier`, `WatchdogSec=` in
//! `units/hearth-server.service`): a server whose runtime or reconcile loop hangs is restarted.

use crate::records::EventRecord;
use crate::store::{Kind, Op};
use hearth_api::text::escape;

/// `MESSAGE_ID` of a committed `Normal` event.
pub const MSG_EVENT: &str = "7b3e2d1c9a8f4e6db5c4a3f2e1d0c9b0";
/// `MESSAGE_ID` of a committed `Warning` event (a degraded node, a halted rollout, a failed
/// render, ...).
pub const MSG_EVENT_WARNING: &str = "7b3e2d1c9a8f4e6db5c4a3f2e1d0c9b1";
/// `MESSAGE_ID` of "the server is serving".
pub const MSG_STARTED: &str = "7b3e2d1c9a8f4e6db5c4a3f2e1d0c9b2";

pub use hearth_daemon::logging::init;

/// Logs the events a successful commit wrote (the `Event` puts among its ops).
pub fn committed_events(ops: &[Op]) {
    for op in ops {
        let Op::Put {
            kind: Kind::Event,
            value,
            ..
        } = op
        else {
            continue;
        };
        let Ok(e) = serde_json::from_slice::<EventRecord>(value) else {
            continue;
        };
        // A node's words (its reason) reach a terminal through journalctl: escaped.
        let (object, message) = (escape(&e.object), escape(&e.message));
        if e.kind == "Warning" {
            tracing::warn!(
                MESSAGE_ID = MSG_EVENT_WARNING,
                REASON = %escape(&e.reason),
                OBJECT = %object,
                "{object}: {message}"
            );
        } else {
            tracing::info!(
                MESSAGE_ID = MSG_EVENT,
                REASON = %escape(&e.reason),
                OBJECT = %object,
                "{object}: {message}"
            );
        }
    }
}
