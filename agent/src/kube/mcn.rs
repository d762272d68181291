//! The node's MachineConfigNode (`machineconfiguration.openshift.io/v1`, named as the node):
//! its status as conditions that name the state and, when the node is `Degraded` or
//! `Unreconcilable`, the whole reason (the failing step, the object it acted on and the cause),
//! which the `reason` annotation holds cut to 1 KiB. Pure logic; `client.rs` writes it.

use super::annotations::{McoState, Wanted};
use serde_json::{json, Value};

/// The MachineConfigNode's API path prefix.
pub const MCN_PATH: &str = "/apis/machineconfiguration.openshift.io/v1/machineconfignodes";

/// The longest condition message written: 32 KiB (what `metav1.Condition` allows).
pub const MAX_MESSAGE_BYTES: usize = 32 << 10;

/// The pool a rendered config belongs to, from its name (`rendered-<pool>-<hash>`), else
/// `unknown` (a config named otherwise: set by an admin).
pub fn pool_of(desired: &str) -> String {
    desired
        .strip_prefix("rendered-")
        .and_then(|rest| rest.rsplit_once('-'))
        .map(|(pool, _)| pool.to_string())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

/// A new MachineConfigNode for `node`, desired `desired` (the spec; the status is written
/// through the status subresource by [`status_patch`]).
pub fn object(node: &str, desired: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigNode",
        "metadata": {"name": node},
        "spec": {
            "node": {"name": node},
            "pool": {"name": pool_of(desired)},
            "configVersion": {"desired": desired},
        },
    })
}

/// The spec patch when the desired config changed: the desired config only. The pool is the
/// controller's to say (it knows it from the pool's node selector; a name such as
/// `rendered-<pool>-<node>-<hash>` of a node with its own overlays does not tell it), so an
/// agent names it only in a MachineConfigNode it creates itself.
pub fn spec_patch(desired: &str) -> Value {
    json!({"spec": {"configVersion": {"desired": desired}}})
}

fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// The status merge patch: `configVersion` and two conditions, `Updated` (True once the node is
/// verified in its desired config) and `NodeDegraded` (True when `Degraded` or
/// `Unreconcilable`, its message the whole reason). `since` is when the state last changed
/// (RFC 3339), `generation` the object's `metadata.generation`.
pub fn status_patch(want: &Wanted, desired: &str, since: &str, generation: Option<i64>) -> Value {
    let updated = want.state == McoState::Done && want.current.as_deref() == Some(desired);
    let degraded = matches!(want.state, McoState::Degraded | McoState::Unreconcilable);
    let message = cut(&want.reason, MAX_MESSAGE_BYTES);
    let updated_message = if updated {
        format!("the node is in {desired}")
    } else {
        format!(
            "{}: {desired} is {}",
            want.state.as_str(),
            match want.state {
                McoState::Working => "being applied",
                McoState::Done => "not yet taken in",
                McoState::Degraded => "not applied: it failed",
                McoState::Unreconcilable => "not applied: it cannot be applied to this node",
            }
        )
    };
    let (updated_status, degraded_status) = (truth(updated), truth(degraded));
    let (degraded_reason, degraded_message) = if degraded {
        (want.state.as_str(), message)
    } else {
        // Never an empty message: the 1.20 API server reads "" in a merge patch as null,
        // which the CRD's schema refuses.
        ("AsExpected", "the node is not degraded".to_string())
    };
    let mut status = json!({
        "configVersion": {"desired": desired},
        "conditions": [
            {
                "type": "Updated",
                "status": updated_status,
                "reason": want.state.as_str(),
                "message": updated_message,
                "lastTransitionTime": since,
            },
            {
                "type": "NodeDegraded",
                "status": degraded_status,
                "reason": degraded_reason,
                "message": degraded_message,
                "lastTransitionTime": since,
            },
        ],
    });
    // No current config yet (a fresh node): left out, as an empty name is not a name.
    if let Some(current) = &want.current {
        status["configVersion"]["current"] = json!(current);
    }
    if let Some(g) = generation {
        status["observedGeneration"] = json!(g);
    }
    json!({"status": status})
}

/// A condition's status.
fn truth(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_come_from_rendered_names() {
        assert_eq!(pool_of("rendered-worker-0123abcd"), "worker");
        assert_eq!(pool_of("rendered-infra-gpu-0123abcd"), "infra-gpu");
        assert_eq!(pool_of("my-config"), "unknown");
        assert_eq!(pool_of("rendered--x"), "unknown");
    }

    #[test]
    fn degraded_status_carries_the_whole_reason() {
        let reason = format!(
            "step 2 of 2 (start unit bad.service) failed: {}; every change was undone",
            "x".repeat(3000)
        );
        let want = Wanted {
            current: Some("rendered-worker-1".into()),
            state: McoState::Degraded,
            reason: reason.clone(),
        };
        let s = status_patch(&want, "rendered-worker-2", "2026-01-01T00:00:00Z", Some(3));
        let conds = s["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds[0]["type"], "Updated");
        assert_eq!(conds[0]["status"], "False");
        assert_eq!(conds[1]["type"], "NodeDegraded");
        assert_eq!(conds[1]["status"], "True");
        assert_eq!(conds[1]["message"], reason.as_str());
        assert_eq!(s["status"]["configVersion"]["current"], "rendered-worker-1");
        assert_eq!(s["status"]["configVersion"]["desired"], "rendered-worker-2");
        assert_eq!(s["status"]["observedGeneration"], 3);
    }

    #[test]
    fn done_status_is_updated_and_not_degraded() {
        let want = Wanted {
            current: Some("rendered-worker-2".into()),
            state: McoState::Done,
            reason: String::new(),
        };
        let s = status_patch(&want, "rendered-worker-2", "2026-01-01T00:00:00Z", None);
        let conds = s["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds[0]["status"], "True");
        assert_eq!(conds[1]["status"], "False");
        assert_eq!(conds[1]["reason"], "AsExpected");
        assert_eq!(conds[1]["message"], "the node is not degraded");
        assert_eq!(conds[0]["message"], "the node is in rendered-worker-2");
        assert!(s["status"].get("observedGeneration").is_none());
    }

    #[test]
    fn messages_are_bounded() {
        let want = Wanted {
            current: None,
            state: McoState::Unreconcilable,
            reason: "é".repeat(MAX_MESSAGE_BYTES),
        };
        let s = status_patch(&want, "x", "2026-01-01T00:00:00Z", None);
        let m = s["status"]["conditions"][1]["message"].as_str().unwrap();
        assert!(m.len() <= MAX_MESSAGE_BYTES && !m.is_empty());
        assert!(s["status"]["configVersion"].get("current").is_none());
    }
}
