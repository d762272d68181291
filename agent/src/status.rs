//! The agent's status for `hearth-agent status` (text for people, the versioned JSON document
//! also reported to hearth-server) and the one-line status given to systemd.

use crate::journal::Journal;
use crate::state::State;

pub(crate) fn status_line(j: &Journal) -> String {
    let desired = j.desired.as_ref().map(|d| d.name.as_str()).unwrap_or("-");
    match &j.reason {
        Some(r) => format!("{} {desired}: {r}", j.state),
        None => format!("{} {desired}", j.state),
    }
}

/// The status document (versioned).
pub fn status_json(j: &Journal) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "hearth.io/v1",
        "kind": "AgentStatus",
        "state": j.state,
        "reason": j.reason,
        "lastTransition": j.last_transition,
        "current": j.current.as_ref().map(|c| &c.name),
        "desired": j.desired.as_ref().map(|d| &d.name),
        "pendingReboot": j.state == State::Rebooting,
        "progress": j.progress,
        "drift": j.drift,
        "history": j.history,
    })
}

/// The status for people.
pub fn status_text(j: &Journal) -> String {
    let dash = |s: Option<&str>| s.unwrap_or("-").to_string();
    let mut out = String::new();
    out.push_str(&format!("State:           {}\n", j.state));
    out.push_str(&format!("Reason:          {}\n", dash(j.reason.as_deref())));
    out.push_str(&format!("Last transition: {}\n", j.last_transition));
    out.push_str(&format!(
        "Current config:  {}\n",
        dash(j.current.as_ref().map(|c| c.name.as_str()))
    ));
    out.push_str(&format!(
        "Desired config:  {}\n",
        dash(j.desired.as_ref().map(|d| d.name.as_str()))
    ));
    out.push_str(&format!(
        "Pending reboot:  {}\n",
        if j.state == State::Rebooting {
            "yes"
        } else {
            "no"
        }
    ));
    if let Some(os) = j.progress.as_ref().and_then(|p| p.os.as_ref()) {
        out.push_str(&format!("OS change:       {}\n", os.change));
        if let Some(d) = &os.expect.deployment {
            let what = if os.rollback.is_some() {
                "rolling back to"
            } else {
                "staged"
            };
            out.push_str(&format!("OS deployment:   {what} {d}\n"));
        }
    }
    if let Some(failed) = &j.failed_os {
        out.push_str(&format!(
            "Failed OS:       {failed} (not staged again until a new config or {})\n",
            crate::apply::FORCE_FILE
        ));
    }
    if j.drift.is_empty() {
        out.push_str("Drift:           none\n");
    } else {
        out.push_str("Drift:\n");
        for d in &j.drift {
            out.push_str(&format!("  - {d}\n"));
        }
    }
    out
}
