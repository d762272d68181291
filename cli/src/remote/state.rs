//! How a node's state is named: one function, [`node_state`], used by `get nodes`,
//! `describe node` and `rollout status`, so the three never disagree; and [`progress`], the one
//! way an apply in progress is written.

use crate::term::escape;
use hearth_api::views::NodeStatus;
use serde_json::Value;

/// The state of a node with no credential and no report: known from a Node manifest, its
/// agent never contacted the server. (A node whose credential was reset keeps the state it
/// last reported.)
pub const NOT_ENROLLED: &str = "NotEnrolled";

/// The state of a node that enrolled but has not reported yet.
pub const NO_REPORT: &str = "Enrolled";

/// A node's state, as every command shows it: the state its agent reported (`Done`, `Working`,
/// `Degraded`, `Unreconcilable`, `Rebooting`, `Trial`), else [`NO_REPORT`] or [`NOT_ENROLLED`].
pub fn node_state(st: &NodeStatus) -> &'static str {
    match st.state {
        Some(state) => state.as_str(),
        None if st.enrolled => NO_REPORT,
        None => NOT_ENROLLED,
    }
}

/// Why a node has no reported state, for `describe`; none when it reported one.
pub fn no_state_reason(st: &NodeStatus) -> Option<&'static str> {
    match st.state {
        Some(_) => None,
        None if st.enrolled => Some("enrolled, no status report yet"),
        None => Some("never enrolled: its agent has not contacted the server"),
    }
}

/// The apply in progress as its agent reported it (`phase`, 0-based `step`, `total`, `failure`),
/// for people: `applying, step 3 of 7`, `rebooting, 7 of 7 steps done`,
/// `rolling back, step 3 of 7 (undoing: ...)`. A step at or past the total (an agent that has
/// run every step and reboots) never shows as "step 8 of 7". None without a progress object.
/// Escaped: it comes from a node.
pub fn progress(st: &NodeStatus) -> Option<String> {
    let p = st.progress.as_ref()?.as_object()?;
    let phase = match p.get("phase").and_then(Value::as_str) {
        Some("applying") => "applying".to_string(),
        Some("rollingBack") => "rolling back".to_string(),
        Some("rebooting") => "rebooting".to_string(),
        Some("trial") => "on trial".to_string(),
        Some(other) => escape(other).into_owned(),
        None => "in progress".to_string(),
    };
    let step = p.get("step").and_then(Value::as_u64);
    let total = p.get("total").and_then(Value::as_u64).unwrap_or(0);
    let mut out = match step {
        _ if total == 0 => phase,
        Some(s) if s < total => format!("{phase}, step {} of {total}", s + 1),
        _ => format!("{phase}, {total} of {total} steps done"),
    };
    if let Some(f) = p.get("failure").and_then(Value::as_str) {
        out.push_str(&format!(" (undoing: {})", escape(f)));
    }
    if let Some(pull) = st
        .progress
        .as_ref()
        .and_then(hearth_api::OsPull::from_progress)
    {
        out.push_str(&format!(", {}", escape(&pull.describe())));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_api::NodeState;
    use serde_json::json;

    fn status(state: Option<NodeState>, enrolled: bool, progress: Option<Value>) -> NodeStatus {
        NodeStatus {
            state,
            enrolled,
            progress,
            ..NodeStatus::default()
        }
    }

    #[test]
    fn states_are_named_from_the_view() {
        assert_eq!(node_state(&status(None, false, None)), "NotEnrolled");
        assert_eq!(node_state(&status(None, true, None)), "Enrolled");
        assert_eq!(
            node_state(&status(Some(NodeState::Rebooting), true, None)),
            "Rebooting"
        );
        assert!(no_state_reason(&status(Some(NodeState::Done), true, None)).is_none());
    }

    #[test]
    fn progress_never_goes_past_its_total() {
        let p = |v: Value| progress(&status(Some(NodeState::Working), true, Some(v)));
        assert_eq!(
            p(json!({"phase": "applying", "step": 2, "total": 7})).as_deref(),
            Some("applying, step 3 of 7")
        );
        assert_eq!(
            p(json!({"phase": "rebooting", "step": 7, "total": 7})).as_deref(),
            Some("rebooting, 7 of 7 steps done")
        );
        assert_eq!(
            p(json!({"phase": "rebooting", "step": 9, "total": 7})).as_deref(),
            Some("rebooting, 7 of 7 steps done")
        );
        assert_eq!(
            p(json!({"phase": "trial", "step": 0, "total": 0, "deadline": 1})).as_deref(),
            Some("on trial")
        );
        assert_eq!(
            p(json!({"phase": "rollingBack", "step": 2, "total": 7, "failure": "EIO"})).as_deref(),
            Some("rolling back, step 3 of 7 (undoing: EIO)")
        );
        assert_eq!(
            p(json!({"phase": "applying", "total": 0})).as_deref(),
            Some("applying")
        );
        assert_eq!(
            p(json!({"phase": "\u{1b}[2J", "step": 0, "total": 1})).as_deref(),
            Some("\\x1b[2J, step 1 of 1")
        );
        assert_eq!(progress(&status(None, true, None)), None);
        assert_eq!(
            p(
                json!({"phase": "applying", "step": 6, "total": 7, "osPull": {
                "image": "registry.example/os@sha256:ab", "phase": "fetching",
                "layersDone": 1, "layersTotal": 2,
                "bytesDone": 1048576, "bytesTotal": 3145728}})
            )
            .as_deref(),
            Some(
                "applying, step 7 of 7, fetching registry.example/os@sha256:ab: 1 of 2 layers, \
                 1.0 MiB of 3.0 MiB"
            )
        );
    }
}
