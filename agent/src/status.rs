//! The agent's status for `hearth-agent status` (text for people, the versioned JSON document
//! also reported to hearth-server) and the one-line status given to systemd.

use crate::journal::Journal;
use crate::state::State;
use hearth_api::AgentStatus;

pub(crate) fn status_line(j: &Journal) -> String {
    let desired = j.desired.as_ref().map(|d| d.name.as_str()).unwrap_or("-");
    match &j.reason {
        Some(r) => format!("{} {desired}: {r}", j.state),
        None => format!("{} {desired}", j.state),
    }
}

/// The status document (`hearth_api::AgentStatus`, versioned): what `status -o json` prints
/// and what the agent reports to hearth-server.
pub fn status_document(j: &Journal) -> AgentStatus {
    AgentStatus {
        api_version: Some(hearth_api::HEARTH_API_VERSION.into()),
        kind: Some("AgentStatus".into()),
        state: j.state,
        reason: j.reason.clone(),
        last_transition: Some(j.last_transition.clone()),
        current: j.current.as_ref().map(|c| c.name.clone()),
        desired: j.desired.as_ref().map(|d| d.name.clone()),
        pending_reboot: j.state == State::Rebooting,
        progress: j
            .progress
            .as_ref()
            .and_then(|p| serde_json::to_value(p).ok()),
        drift: j.drift.clone(),
        history: j.history.clone(),
        requests_done: j.requests_done,
        request_results: j.request_results.clone(),
        actions: j.actions.clone(),
        os: j.os.clone(),
    }
}

/// The reason of the report that acknowledges a new config.
pub const ACK_REASON: &str = "config received; applying";

/// The report that acknowledges an answer naming `desired`, sent before acting on it (or, when
/// the answer asked for the reports later, at that time if the apply still runs). A new
/// config (not the journal's desired one): the journal's status with the node `Working` towards
/// `desired` (the journal itself changes only when the apply starts; `drift`, `history` and
/// `actions` are still those of the current config). The config the node already has (an
/// answer carrying requests): the status unchanged, so that a `Degraded` node does not look
/// mended, and lift its pool's halt, before the request's outcome is known.
pub fn acknowledgement(j: &Journal, desired: &str) -> AgentStatus {
    let mut doc = status_document(j);
    if j.desired.as_ref().is_some_and(|d| d.name == desired) {
        return doc;
    }
    doc.state = State::Working;
    doc.desired = Some(desired.to_string());
    doc.reason = Some(ACK_REASON.to_string());
    doc.last_transition = Some(crate::journal::now_rfc3339());
    doc.pending_reboot = false;
    doc.progress = None;
    doc
}

/// [`status_document`] as JSON.
pub fn status_json(j: &Journal) -> serde_json::Value {
    serde_json::to_value(status_document(j)).unwrap_or_default()
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
    if let Some(os) = &j.os {
        let digest = os
            .image_digest
            .as_deref()
            .filter(|d| !os.image.ends_with(d))
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        out.push_str(&format!("OS image:        {}{digest}\n", os.image));
        out.push_str(&format!("OS deployment:   {} (booted)\n", os.deployment));
    }
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
    if let Some(deadline) = crate::apply::trial_deadline(j) {
        out.push_str(&format!(
            "Trial deadline:  {} (kept once the server answers, else undone)\n",
            hearth_config::time::rfc3339(u64::try_from(deadline).unwrap_or(0))
        ));
    }
    if let Some(failed) = &j.failed_trial {
        out.push_str(&format!(
            "Failed trial:    {failed} (not applied again until a new config or hearth node force)\n"
        ));
    }
    if let Some(failed) = &j.failed_os {
        out.push_str(&format!(
            "Failed OS:       {failed} (not staged again until a new config or {})\n",
            crate::apply::FORCE_FILE
        ));
    }
    if !j.actions.is_empty() {
        out.push_str("Actions:\n");
        for a in &j.actions {
            out.push_str(&format!("  - {}\n", action_line(a)));
        }
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

/// One run of a run-once action in one line: name, config, outcome, exit status, when and how
/// long (the output's tail is in `status -o json`).
fn action_line(a: &hearth_api::ActionRun) -> String {
    let mut line = format!("{} ({:?}, {}): {}", a.name, a.when, a.config, a.outcome);
    if let Some(code) = a.exit_status {
        line.push_str(&format!(", exit status {code}"));
    }
    if let Some(sig) = a.signal {
        line.push_str(&format!(", signal {sig}"));
    }
    line.push_str(&format!(", started {}", a.started_at));
    if let Some(ms) = a.duration_ms {
        line.push_str(&format!(", {}.{:03} s", ms / 1000, ms % 1000));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Journal;

    fn journal(state: State, desired: &str) -> Journal {
        Journal {
            state,
            reason: Some("step 2 of 3 (write file /etc/x): No space left on device".into()),
            desired: Some(crate::journal::NamedConfig {
                name: desired.into(),
                spec: Default::default(),
            }),
            ..Journal::default()
        }
    }

    /// A new config is acknowledged as `Working` on it; the config the node has (an answer
    /// that carries requests) leaves a `Degraded` node `Degraded`, with its reason.
    #[test]
    fn a_new_config_is_acknowledged_working_and_a_request_leaves_the_state_alone() {
        let j = journal(State::Degraded, "rendered-worker-old");
        let ack = acknowledgement(&j, "rendered-worker-new");
        assert_eq!(ack.state, State::Working);
        assert_eq!(ack.desired.as_deref(), Some("rendered-worker-new"));
        assert_eq!(ack.reason.as_deref(), Some(ACK_REASON));

        let same = acknowledgement(&j, "rendered-worker-old");
        assert_eq!(same.state, State::Degraded);
        assert_eq!(same.desired.as_deref(), Some("rendered-worker-old"));
        assert_eq!(same.reason, j.reason);
    }
}
