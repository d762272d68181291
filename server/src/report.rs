//! A node's last status report as the server holds it ([`crate::records::NodeRecord::report`]).
//!
//! A real agent's report is mostly its history (its newest 50 transitions), drift lines and
//! run-once action records: some 9 KiB of JSON, some 11 KiB and 150 allocations decoded. The
//! server's decisions read none of that; it stores it and shows it. So a [`Report`] keeps what
//! the decisions read decoded (its [`Summary`]) and the whole report as JSON: the very bytes the
//! store is given ([`Report::json`]), decoded again only to be shown ([`Report::full`]).
//! At 100,000 nodes that is some 430 MiB less with every agent waiting, and some 40% off the
//! peak of an apply's burst (docs/performance.md, "100,000 agents with real reports").

use hearth_api::{AgentStatus, NodeState, RequestResult};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::sync::Arc;

/// A node's last report: cheap to clone (shared), compared by its JSON.
#[derive(Clone)]
pub struct Report(Arc<Held>);

struct Held {
    summary: Summary,
    /// The whole report, as `serde_json::to_vec` encodes it (no spare capacity).
    json: bytes::Bytes,
}

/// What the server's decisions read of a report: the [`AgentStatus`] fields that are not lists
/// of history, drift or actions (nor the progress document).
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The state.
    pub state: NodeState,
    /// Why.
    pub reason: Option<String>,
    /// When the state last changed (RFC 3339, UTC).
    pub last_transition: Option<String>,
    /// The config the host is verified to be in.
    pub current: Option<String>,
    /// The config the agent works towards.
    pub desired: Option<String>,
    /// A reboot is pending.
    pub pending_reboot: bool,
    /// The highest id of an admin's request the agent has acted on.
    pub requests_done: u64,
    /// The outcomes of the last requests it acted on (at most
    /// [`crate::bounds::MAX_REQUEST_RESULTS`]).
    pub request_results: Vec<RequestResult>,
}

impl Report {
    /// Keeps `status` (already bounded: [`crate::bounds::status_report`]) as a report.
    pub fn new(status: AgentStatus) -> Report {
        // Encoding cannot fail: the document's only map (`progress`) has string keys, and a
        // `Vec` takes every byte.
        let json = serde_json::to_vec(&status)
            .expect("an AgentStatus always encodes")
            // Without the spare capacity of the encoder's doubling (up to half the allocation).
            .into_boxed_slice();
        Report(Arc::new(Held {
            summary: Summary {
                state: status.state,
                reason: status.reason,
                last_transition: status.last_transition,
                current: status.current,
                desired: status.desired,
                pending_reboot: status.pending_reboot,
                requests_done: status.requests_done,
                request_results: status.request_results,
            },
            json: bytes::Bytes::from(json),
        }))
    }

    /// The report's JSON (what is stored, and what [`Report::full`] decodes).
    pub fn json(&self) -> &bytes::Bytes {
        &self.0.json
    }

    /// The whole report, decoded (to be shown).
    pub fn full(&self) -> AgentStatus {
        match serde_json::from_slice(&self.0.json) {
            Ok(s) => s,
            // Not expected: the bytes were encoded from an `AgentStatus`. The summary then.
            Err(e) => {
                tracing::error!(error = %e, "a report kept in memory does not decode; showing its summary");
                let s = &self.0.summary;
                AgentStatus {
                    api_version: None,
                    kind: None,
                    state: s.state,
                    reason: s.reason.clone(),
                    last_transition: s.last_transition.clone(),
                    current: s.current.clone(),
                    desired: s.desired.clone(),
                    pending_reboot: s.pending_reboot,
                    progress: None,
                    drift: Vec::new(),
                    history: Vec::new(),
                    requests_done: s.requests_done,
                    request_results: s.request_results.clone(),
                    actions: Vec::new(),
                }
            }
        }
    }

    /// The report with `f` applied to it (for tests: the server never changes a report).
    pub fn edited(&self, f: impl FnOnce(&mut AgentStatus)) -> Report {
        let mut s = self.full();
        f(&mut s);
        Report::new(s)
    }

    /// Whether both are the same report in memory (not only equal).
    pub fn ptr_eq(a: &Report, b: &Report) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl std::ops::Deref for Report {
    type Target = Summary;

    fn deref(&self) -> &Summary {
        &self.0.summary
    }
}

impl From<AgentStatus> for Report {
    fn from(status: AgentStatus) -> Report {
        Report::new(status)
    }
}

impl PartialEq for Report {
    fn eq(&self, other: &Report) -> bool {
        Report::ptr_eq(self, other) || self.0.json == other.0.json
    }
}

impl fmt::Debug for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Report")
            .field("summary", &self.0.summary)
            .field("json_bytes", &self.0.json.len())
            .finish()
    }
}

impl Serialize for Report {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.full().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Report {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Report, D::Error> {
        AgentStatus::deserialize(d).map(Report::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status() -> AgentStatus {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "hearth.io/v1", "kind": "AgentStatus",
            "state": "Working", "reason": "step 2 of 7 \"quoted\" ✓", "current": "rendered-a",
            "desired": "rendered-b", "pendingReboot": true, "lastTransition": "2026-11-25T09:00:00Z",
            "progress": {"phase": "files", "step": 1, "total": 7},
            "drift": ["/etc/a: content differs"],
            "history": [{"time": "2026-11-25T08:59:00Z", "state": "Done", "desired": "rendered-a"}],
            "requestsDone": 3,
            "requestResults": [{"id": 3, "action": "restoreFile", "path": "/etc/a", "ok": true, "message": "restored"}],
        }))
        .unwrap()
    }

    /// The JSON kept is what serde encodes, without spare capacity; the whole report decodes
    /// back from it; the summary holds what the server decides on.
    #[test]
    fn a_report_keeps_its_summary_decoded_and_the_whole_as_its_encoding() {
        let s = status();
        let r = Report::new(s.clone());
        assert_eq!(&r.json()[..], &serde_json::to_vec(&s).unwrap()[..]);
        assert_eq!(r.full(), s);
        assert_eq!(r.state, NodeState::Working);
        assert_eq!(r.reason, s.reason);
        assert_eq!(r.current.as_deref(), Some("rendered-a"));
        assert_eq!(r.desired.as_deref(), Some("rendered-b"));
        assert!(r.pending_reboot);
        assert_eq!(r.last_transition, s.last_transition);
        assert_eq!(r.requests_done, 3);
        assert_eq!(r.request_results, s.request_results);
        // Stored and read back (a replica, a restart): the same report.
        let back: Report = serde_json::from_slice(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert!(!Report::ptr_eq(&back, &r));
    }

    /// Equal reports are equal whatever their allocation; a change to any part, history
    /// included, makes them differ.
    #[test]
    fn reports_compare_by_their_whole_content() {
        let a = Report::new(status());
        assert_eq!(a, Report::new(status()));
        assert_eq!(a, a.clone());
        assert!(Report::ptr_eq(&a, &a.clone()));
        let b = a.edited(|s| s.history[0].time = "2026-11-25T08:59:01Z".into());
        assert_ne!(a, b);
        assert_eq!(b.state, a.state);
        let c = a.edited(|s| s.state = NodeState::Done);
        assert_eq!(c.state, NodeState::Done);
        assert_ne!(a, c);
    }
}
