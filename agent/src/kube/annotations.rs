//! The Node annotations the MCO's daemon reads and writes, and what hearth writes into them:
//! pure logic, no I/O.
//!
//! The agent reads `desiredConfig` (set by the controller, or for now by an admin) and writes
//! `currentConfig`, `state` and `reason`, with the MCO's names and values
//! (`pkg/daemon/constants/constants.go` of openshift/machine-config-operator), so that tooling
//! that reads them reads hearth's nodes as it reads the MCO's.

use crate::journal::Journal;
use crate::state::State;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub use hearth_api::annotations::{CURRENT_CONFIG, DESIRED_CONFIG, REASON, STATE};

/// The longest `reason` annotation written: 1 KiB. A longer reason is cut at a character
/// boundary and says so; the whole of it is in the MachineConfigNode's status.
pub const MAX_REASON_BYTES: usize = 1024;

/// The MCO daemon's states (`MachineConfigDaemonState*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McoState {
    /// In the desired config.
    Done,
    /// Applying it (a reboot included).
    Working,
    /// It failed.
    Degraded,
    /// It cannot be applied to this node.
    Unreconcilable,
}

impl McoState {
    /// The annotation's value.
    pub fn as_str(self) -> &'static str {
        match self {
            McoState::Done => "Done",
            McoState::Working => "Working",
            McoState::Degraded => "Degraded",
            McoState::Unreconcilable => "Unreconcilable",
        }
    }
}

/// What the agent's annotations on its Node should say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// `currentConfig`: the config the host is verified in (left alone when unknown).
    pub current: Option<String>,
    /// `state`.
    pub state: McoState,
    /// `reason`, whole (bounded only when written, see [`bounded`]).
    pub reason: String,
}

/// A desired config the agent could not take in (the MachineConfig could not be fetched, or
/// hearth refuses it): kept by the loop while `desiredConfig` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The desired config's name.
    pub desired: String,
    /// `Degraded` (it could not be fetched: tried again) or `Unreconcilable` (refused).
    pub state: McoState,
    /// Why, naming the object and what to do.
    pub reason: String,
    /// When it was refused (RFC 3339).
    pub since: String,
}

/// What the annotations should say, from the journal (and a refusal of the desired config the
/// journal does not know of). `None` for a node that has no config and was asked for none.
///
/// - `Done` with drift found since the config was applied (and not put back) is `Degraded`, as
///   the MCO's daemon reports a file whose content differs from the config ("unexpected on-disk
///   state").
/// - `Rebooting` and `Trial` are `Working` (the MCO stays `Working` through its reboot).
pub fn wanted(j: &Journal, refusal: Option<&Refusal>) -> Option<Wanted> {
    let current = j.current.as_ref().map(|c| c.name.clone());
    if let Some(r) = refusal {
        return Some(Wanted {
            current,
            state: r.state,
            reason: r.reason.clone(),
        });
    }
    if current.is_none() && j.desired.is_none() {
        return None;
    }
    let reason = j.reason.clone().unwrap_or_default();
    // Drift the monitor put back (`--drift PATH=revert`) left the host in its config.
    let drift: Vec<&str> = j
        .drift
        .iter()
        .map(String::as_str)
        .filter(|d| !d.ends_with("; reverted"))
        .collect();
    let (state, reason) = match j.state {
        State::Done if !drift.is_empty() => (
            McoState::Degraded,
            format!(
                "unexpected on-disk state validating against {}: {}",
                current.as_deref().unwrap_or("-"),
                drift.join("; ")
            ),
        ),
        // Steps skipped on this host (a unit it does not have) are in a Done node's reason:
        // the MCO's Done has none; they stay in the MachineConfigNode's status.
        State::Done => (McoState::Done, String::new()),
        State::Working | State::Rebooting | State::Trial => (McoState::Working, reason),
        State::Degraded => (McoState::Degraded, reason),
        State::Unreconcilable => (McoState::Unreconcilable, reason),
    };
    Some(Wanted {
        current,
        state,
        reason,
    })
}

/// Whether the desired config `desired` is one to apply now: the journal has not been asked
/// for it yet (its last desired config is another one), or the force file asks for a re-apply.
/// A desired config that failed (`Degraded`, `Unreconcilable`) is not tried again until
/// `desiredConfig` names another one or the force file is written: no retry loop.
pub fn needs_apply(desired: &str, j: &Journal, force: bool) -> bool {
    force || j.desired.as_ref().map(|d| d.name.as_str()) != Some(desired)
}

/// Refuses a `desiredConfig` that is not an object name (a DNS subdomain: `a-z`, `0-9`, `-`,
/// `.`, at most 253 bytes, alphanumeric at both ends), before anything is fetched: an empty one
/// would name the whole collection.
pub fn check_name(desired: &str) -> Result<(), String> {
    let ok = !desired.is_empty()
        && desired.len() <= 253
        && desired
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && desired.starts_with(|c: char| c.is_ascii_alphanumeric())
        && desired.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        return Ok(());
    }
    let shown: String = desired.chars().take(64).collect();
    Err(format!(
        "{DESIRED_CONFIG} {shown:?}{} is not a MachineConfig name (a-z, 0-9, '-', '.', at most 253 bytes): set it to the name of a rendered MachineConfig",
        if shown.len() < desired.len() { " …" } else { "" }
    ))
}

/// `reason` cut to at most [`MAX_REASON_BYTES`] at a character boundary, saying that it was cut
/// and where the rest is.
pub fn bounded(reason: &str) -> String {
    if reason.len() <= MAX_REASON_BYTES {
        return reason.to_string();
    }
    let note = " … (cut; the whole reason is in the MachineConfigNode's status)";
    let mut end = MAX_REASON_BYTES - note.len();
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{note}", &reason[..end])
}

/// The JSON merge patch of `metadata.annotations` that makes `have` say `want`, or `None` when
/// it already does (so that the agent's own patches do not wake it again and again).
pub fn patch(have: &BTreeMap<String, String>, want: &Wanted) -> Option<Value> {
    let mut changes = Map::new();
    let mut set = |key: &str, value: &str| {
        if have.get(key).map(String::as_str) != Some(value) {
            changes.insert(key.to_string(), Value::String(value.to_string()));
        }
    };
    if let Some(current) = &want.current {
        set(CURRENT_CONFIG, current);
    }
    set(STATE, want.state.as_str());
    set(REASON, &bounded(&want.reason));
    (!changes.is_empty()).then(|| json!({"metadata": {"annotations": changes}}))
}

/// `state=Working` with an empty reason: written before an apply starts.
pub fn working(have: &BTreeMap<String, String>, current: Option<String>) -> Option<Value> {
    patch(
        have,
        &Wanted {
            current,
            state: McoState::Working,
            reason: String::new(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::NamedConfig;

    fn named(name: &str) -> NamedConfig {
        NamedConfig {
            name: name.into(),
            spec: Default::default(),
        }
    }

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_fresh_node_asked_for_nothing_writes_nothing() {
        assert_eq!(wanted(&Journal::default(), None), None);
    }

    #[test]
    fn done_writes_current_and_an_empty_reason() {
        let j = Journal {
            current: Some(named("rendered-worker-1")),
            desired: Some(named("rendered-worker-1")),
            reason: Some("skipped: restart of x.service (not on this host)".into()),
            ..Default::default()
        };
        let w = wanted(&j, None).unwrap();
        assert_eq!(w.current.as_deref(), Some("rendered-worker-1"));
        assert_eq!(w.state, McoState::Done);
        assert_eq!(w.reason, "");
        let p = patch(&annotations(&[(DESIRED_CONFIG, "rendered-worker-1")]), &w).unwrap();
        assert_eq!(
            p,
            json!({"metadata": {"annotations": {
                CURRENT_CONFIG: "rendered-worker-1", STATE: "Done", REASON: ""
            }}})
        );
        // Already said: no patch (no event loop on the agent's own writes).
        let have = annotations(&[
            (CURRENT_CONFIG, "rendered-worker-1"),
            (STATE, "Done"),
            (REASON, ""),
        ]);
        assert_eq!(patch(&have, &w), None);
    }

    #[test]
    fn states_map_to_the_mco_states() {
        let mut j = Journal {
            current: Some(named("a")),
            desired: Some(named("b")),
            ..Default::default()
        };
        for (state, mco) in [
            (State::Working, McoState::Working),
            (State::Rebooting, McoState::Working),
            (State::Degraded, McoState::Degraded),
            (State::Unreconcilable, McoState::Unreconcilable),
        ] {
            j.state = state;
            j.reason = Some("why".into());
            let w = wanted(&j, None).unwrap();
            assert_eq!((w.state, w.reason.as_str()), (mco, "why"), "{state:?}");
            // currentConfig stays the verified config while another is applied or failed.
            assert_eq!(w.current.as_deref(), Some("a"));
        }
    }

    #[test]
    fn drift_on_a_done_node_is_degraded_as_the_mco_says_it() {
        let j = Journal {
            current: Some(named("rendered-worker-1")),
            drift: vec!["/etc/x: content differs".into()],
            ..Default::default()
        };
        let w = wanted(&j, None).unwrap();
        assert_eq!(w.state, McoState::Degraded);
        assert_eq!(
            w.reason,
            "unexpected on-disk state validating against rendered-worker-1: /etc/x: content differs"
        );
    }

    #[test]
    fn drift_put_back_is_not_degraded() {
        let j = Journal {
            current: Some(named("rendered-worker-1")),
            drift: vec!["/etc/x: content changed: expected sha256 a, found b; reverted".into()],
            ..Default::default()
        };
        assert_eq!(wanted(&j, None).unwrap().state, McoState::Done);
    }

    #[test]
    fn a_refusal_overrides_the_journal() {
        let j = Journal {
            current: Some(named("a")),
            ..Default::default()
        };
        let r = Refusal {
            desired: "b".into(),
            state: McoState::Unreconcilable,
            reason: "MachineConfig b: spec.kernelType: ...".into(),
            since: "2026-01-01T00:00:00Z".into(),
        };
        let w = wanted(&j, Some(&r)).unwrap();
        assert_eq!(w.state, McoState::Unreconcilable);
        assert_eq!(w.current.as_deref(), Some("a"));
        assert!(w.reason.starts_with("MachineConfig b"));
    }

    #[test]
    fn applies_a_new_desired_config_once() {
        let mut j = Journal::default();
        assert!(needs_apply("a", &j, false));
        j.desired = Some(named("a"));
        j.state = State::Degraded;
        assert!(
            !needs_apply("a", &j, false),
            "a failed config is not retried in a loop"
        );
        assert!(needs_apply("a", &j, true), "the force file retries it");
        assert!(needs_apply("b", &j, false));
    }

    #[test]
    fn desired_names_are_object_names() {
        assert!(check_name("rendered-worker-0123abcd").is_ok());
        for bad in [
            "",
            "-x",
            "x-",
            "A",
            "a/b",
            "../nodes",
            "a b",
            &"a".repeat(254),
        ] {
            let e = check_name(bad).unwrap_err();
            assert!(e.contains("is not a MachineConfig name"), "{bad:?}: {e}");
        }
        assert!(check_name("\u{1b}[2J").unwrap_err().contains("\\u{1b}"));
    }

    #[test]
    fn long_reasons_are_cut_at_a_character_boundary() {
        let long = "é".repeat(2000);
        let b = bounded(&long);
        assert!(b.len() <= MAX_REASON_BYTES, "{}", b.len());
        assert!(b.ends_with("the whole reason is in the MachineConfigNode's status)"));
        assert_eq!(bounded("short"), "short");
        let exact = "x".repeat(MAX_REASON_BYTES);
        assert_eq!(bounded(&exact), exact);
    }

    #[test]
    fn working_keeps_the_current_config() {
        let have = annotations(&[(STATE, "Done"), (CURRENT_CONFIG, "a"), (REASON, "")]);
        assert_eq!(
            working(&have, Some("a".into())),
            Some(json!({"metadata": {"annotations": {STATE: "Working"}}}))
        );
    }
}
