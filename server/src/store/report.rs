//! A node's last status report as the server holds it ([`crate::store::records::NodeRecord::report`]).
//!
//! A real agent's report is mostly its history (its newest 50 transitions), drift lines and
//! run-once action records: some 9 KiB of JSON, some 11 KiB and 150 allocations decoded. The
//! server's decisions read none of that; it stores it and shows it. So a [`Report`] keeps what
//! the decisions read decoded (its [`Summary`]), a SHA-256 of the whole (what reports compare
//! by), and the whole report as JSON only until the store has it: the very bytes the store is
//! given ([`Report::json`]). Once they are committed ([`Report::release`], called by
//! [`crate::fleet::Fleet::stamp`] and for every report read from the store), the report's
//! history, drift and actions are read back from the store when a node is shown
//! (`crate::app::shown`), the only place that reads them.
//!
//! At 100,000 nodes with a real agent's reports, decoding only the summary saved some 430 MiB
//! with every agent waiting; not keeping the JSON saves some 1 GiB more
//! (docs/performance.md, "100,000 agents with real reports").

use hearth_api::{AgentStatus, BootedOs, NodeState, RequestResult};
use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

/// A node's last report: cheap to clone (shared), compared by its content's SHA-256.
#[derive(Clone)]
pub struct Report(Arc<Held>);

struct Held {
    summary: Summary,
    /// SHA-256 of the whole report's JSON.
    sha256: [u8; 32],
    /// The whole report, until it is stored ([`Report::release`]): as `serde_json::to_vec`
    /// encodes it (no spare capacity), or as it was read from the store (the same bytes).
    /// What [`Report::full`] decodes.
    json: Mutex<Option<bytes::Bytes>>,
}

/// What the server's decisions read of a report, and what a list's summary view shows
/// (`GET /api/v1/nodes?view=summary`): the [`AgentStatus`] fields that are not lists of
/// history, drift or actions, the progress document as JSON, and how many drift lines there
/// are.
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
    /// The apply in progress, as JSON ([`summary_progress`]: at most
    /// [`MAX_SUMMARY_PROGRESS`] bytes, where the report may hold up to
    /// [`crate::bounds::MAX_PROGRESS`]; none between applies, which is most of the time).
    pub progress: Option<Box<str>>,
    /// How many drift lines the report holds: at most [`crate::bounds::MAX_DRIFT_LINES`] of
    /// the node's, and then one of the server's saying how many more it did not keep.
    pub drift_lines: u32,
    /// The booted OS (boxed: a pointer's worth for nodes without one).
    pub os: Option<Box<BootedOs>>,
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
        let sha256 = Sha256::digest(&json).into();
        let progress = status
            .progress
            .as_ref()
            .map(|p| summary_progress(&p.to_string()));
        let drift_lines = u32::try_from(status.drift.len()).unwrap_or(u32::MAX);
        Report(Arc::new(Held {
            sha256,
            summary: Summary {
                state: status.state,
                reason: status.reason,
                last_transition: status.last_transition,
                current: status.current,
                desired: status.desired,
                pending_reboot: status.pending_reboot,
                requests_done: status.requests_done,
                request_results: status.request_results,
                progress,
                drift_lines,
                os: status.os.map(Box::new),
            },
            json: Mutex::new(Some(bytes::Bytes::from(json))),
        }))
    }

    /// A report as it was stored: `json` is what [`Report::json`] held when it was stored
    /// (within a node's stored report document). Only the summary is decoded (history, drift
    /// lines and action runs are passed over, not kept), and its SHA-256 is that of these very
    /// bytes, so nothing is encoded again: loading 100,000 reports at a start costs their
    /// reading. What is passed over is checked only when it is shown (`crate::app::shown`).
    /// `json` itself is kept (until [`Report::release`]).
    pub fn from_json(json: bytes::Bytes) -> Result<Report, serde_json::Error> {
        let s: StoredSummary = serde_json::from_slice(&json)?;
        let summary = Summary {
            state: s.state,
            reason: s.reason,
            last_transition: s.last_transition,
            current: s.current,
            desired: s.desired,
            pending_reboot: s.pending_reboot,
            requests_done: s.requests_done,
            request_results: s.request_results,
            progress: s.progress.map(|p| summary_progress(p.get())),
            drift_lines: s.drift.0,
            os: s.os.map(Box::new),
        };
        Ok(Report(Arc::new(Held {
            sha256: Sha256::digest(&json).into(),
            summary,
            json: Mutex::new(Some(json)),
        })))
    }

    fn json_slot(&self) -> MutexGuard<'_, Option<bytes::Bytes>> {
        // Held only to clone or take a `Bytes`: nothing can panic while it is held.
        self.0.json.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The report's JSON (what is stored, and what [`Report::full`] decodes), until it is
    /// stored: then `None`, and the store has it.
    pub fn json(&self) -> Option<bytes::Bytes> {
        self.json_slot().clone()
    }

    /// Forgets the JSON: the store has it now (at the node's `report_revision`), and a node's
    /// view reads it from there. Every clone of this report forgets it.
    pub fn release(&self) {
        self.json_slot().take();
    }

    /// The whole report, decoded (to be shown), while it is in memory ([`Report::json`]).
    /// None, too, for one that does not decode whole (a node document written by an older
    /// server may hold one whose history or actions are not an agent's): its summary is what
    /// can be shown of it.
    pub fn full(&self) -> Option<AgentStatus> {
        let json = self.json()?;
        match serde_json::from_slice(&json) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "a report kept in memory does not decode whole; showing its summary");
                None
            }
        }
    }

    /// The report as far as its summary goes: its progress, no drift lines (see
    /// [`Summary::drift_lines`]), history or actions.
    pub fn summary_only(&self) -> AgentStatus {
        let s = &self.0.summary;
        // JSON, as serde_json encoded or read it (`summary_progress`): it decodes.
        let progress = s
            .progress
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok());
        AgentStatus {
            api_version: None,
            kind: None,
            state: s.state,
            reason: s.reason.clone(),
            last_transition: s.last_transition.clone(),
            current: s.current.clone(),
            desired: s.desired.clone(),
            pending_reboot: s.pending_reboot,
            progress,
            drift: Vec::new(),
            history: Vec::new(),
            requests_done: s.requests_done,
            request_results: s.request_results.clone(),
            actions: Vec::new(),
            os: s.os.as_deref().cloned(),
        }
    }

    /// The report with `f` applied to it (for tests: the server never changes a report); of a
    /// report no longer in memory, its summary.
    #[cfg(test)]
    pub fn edited(&self, f: impl FnOnce(&mut AgentStatus)) -> Report {
        let mut s = self.full().unwrap_or_else(|| self.summary_only());
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
        Report::ptr_eq(self, other) || self.0.sha256 == other.0.sha256
    }
}

impl fmt::Debug for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Report")
            .field("summary", &self.0.summary)
            .field("json_bytes", &self.json().map(|j| j.len()))
            .finish()
    }
}

impl Serialize for Report {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.full() {
            Some(full) => full.serialize(s),
            None => Err(serde::ser::Error::custom(
                "the report is stored and no longer in memory",
            )),
        }
    }
}

impl<'de> Deserialize<'de> for Report {
    /// [`Report::from_json`] of the report's bytes as serde_json reads them (a stored document,
    /// or a `serde_json::Value`). It needs serde_json's own deserializer: another format, or
    /// serde's buffering around a `Report` (`#[serde(flatten)]`, untagged or internally tagged
    /// enums), cannot give it a `RawValue` and fails.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Report, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        // The bytes as read, kept without a copy.
        let json = bytes::Bytes::from(Box::<str>::from(raw).into_boxed_bytes());
        Report::from_json(json).map_err(serde::de::Error::custom)
    }
}

/// The most of a progress document a node's summary keeps in memory (the report itself may
/// hold [`crate::bounds::MAX_PROGRESS`]): 100,000 nodes' summaries hold at most some 50 MiB of
/// progress, however large their agents make it.
pub const MAX_SUMMARY_PROGRESS: usize = 512;

/// A report's progress document `json` as its summary keeps it: itself when it is at most
/// [`MAX_SUMMARY_PROGRESS`] bytes (a real agent's: `phase`, `step`, `total`, `failure`), else
/// the `phase`, `step` and `total` it has and its `failure`, cut short, with `cut` saying so;
/// never more than [`MAX_SUMMARY_PROGRESS`] bytes.
pub fn summary_progress(json: &str) -> Box<str> {
    if json.len() <= MAX_SUMMARY_PROGRESS {
        return json.into();
    }
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    let text = |key: &str, max: usize| {
        v.get(key)
            .and_then(serde_json::Value::as_str)
            .map(|s| serde_json::Value::from(crate::text::cut(s, max)))
    };
    let number = |key: &str| {
        v.get(key)
            .and_then(serde_json::Value::as_u64)
            .map(serde_json::Value::from)
    };
    let note = format!(
        "the progress document is {} bytes; a node's own view shows it whole",
        json.len()
    );
    // Whatever escaping makes of the strings, the least kept fits: the note and two numbers.
    let mut fields = vec![
        ("cut", Some(serde_json::Value::from(note))),
        ("step", number("step")),
        ("total", number("total")),
        ("phase", text("phase", 48)),
        (hearth_api::OS_PULL_KEY, os_pull(&v)),
        ("failure", text("failure", 160)),
    ];
    loop {
        let kept: serde_json::Map<String, serde_json::Value> = fields
            .iter()
            .filter_map(|(k, v)| Some((k.to_string(), v.clone()?)))
            .collect();
        let out = serde_json::Value::Object(kept).to_string();
        if out.len() <= MAX_SUMMARY_PROGRESS || fields.len() <= 3 {
            return out.into_boxed_str();
        }
        fields.pop();
    }
}

/// An OS image pull in progress ([`hearth_api::OsPull`]), its image cut short: what a list
/// shows of it.
fn os_pull(progress: &serde_json::Value) -> Option<serde_json::Value> {
    let mut pull = hearth_api::OsPull::from_progress(progress)?;
    pull.phase = crate::text::cut(&pull.phase, 16);
    pull.image = crate::text::cut(&pull.image, 120);
    serde_json::to_value(pull).ok()
}

/// What [`Report::from_json`] decodes of a report: the summary's fields of an [`AgentStatus`]
/// (their names and defaults as there), the progress document as it is written, and how many
/// drift lines there are.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredSummary<'a> {
    state: NodeState,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    last_transition: Option<String>,
    #[serde(default)]
    current: Option<String>,
    #[serde(default)]
    desired: Option<String>,
    #[serde(default)]
    pending_reboot: bool,
    #[serde(default)]
    requests_done: u64,
    #[serde(default)]
    request_results: Vec<RequestResult>,
    #[serde(default, borrow)]
    progress: Option<&'a RawValue>,
    #[serde(default)]
    drift: Count,
    #[serde(default)]
    os: Option<BootedOs>,
}

/// The length of a JSON array, its items passed over.
#[derive(Default)]
struct Count(u32);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
        struct Counter;
        impl<'de> Visitor<'de> for Counter {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                let mut n = 0u32;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n = n.saturating_add(1);
                }
                Ok(Count(n))
            }
        }
        d.deserialize_seq(Counter)
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
        assert_eq!(&r.json().unwrap()[..], &serde_json::to_vec(&s).unwrap()[..]);
        assert_eq!(r.full(), Some(s.clone()));
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

    /// A report read back from its stored JSON is the same report, its summary (progress and
    /// the count of drift lines included) decoded from the very bytes, which it keeps; whatever
    /// the summary does not hold is passed over (checked only when shown).
    #[test]
    fn a_report_read_back_from_its_json_is_the_same_report() {
        for s in [
            status(),
            AgentStatus {
                progress: None,
                drift: Vec::new(),
                history: Vec::new(),
                request_results: Vec::new(),
                ..status()
            },
        ] {
            let r = Report::new(s.clone());
            let json = r.json().unwrap();
            let back = Report::from_json(json.clone()).unwrap();
            assert_eq!(back, r);
            assert!(!Report::ptr_eq(&back, &r));
            assert_eq!(*back, *r, "the summaries");
            assert_eq!(back.json().as_deref(), Some(&json[..]));
            assert_eq!(back.full(), Some(s));
        }
        assert_eq!(Report::new(status()).drift_lines, 1);
        let from = |s: &'static [u8]| Report::from_json(bytes::Bytes::from_static(s));
        assert!(from(b"{\"state\": \"Done\"").is_err());
        assert!(from(b"{\"state\": \"Sleeping\"}").is_err());
        let r = from(br#"{"state": "Done", "history": [{"unexpected": true}], "drift": [1, 2]}"#)
            .unwrap();
        assert_eq!((r.state, r.drift_lines), (NodeState::Done, 2));
    }

    /// A summary keeps a small progress document as it is, and of a large one what a person
    /// reads (phase, step, total, the failure cut short) in at most 512 bytes, whatever
    /// escaping its strings need; the report itself keeps it whole.
    #[test]
    fn a_summary_keeps_at_most_512_bytes_of_progress() {
        let small = r#"{"phase":"applying","step":2,"total":7}"#;
        assert_eq!(&*summary_progress(small), small);
        let big = serde_json::json!({
            "phase": "rollingBack", "step": 3, "total": 7,
            "failure": "x".repeat(3000), "extra": "y".repeat(500),
        });
        let r = Report::new(AgentStatus {
            progress: Some(big.clone()),
            ..status()
        });
        let kept = r.progress.as_deref().unwrap();
        assert!(kept.len() <= MAX_SUMMARY_PROGRESS, "{}", kept.len());
        let shown = r.summary_only().progress.unwrap();
        assert_eq!(
            (&shown["phase"], &shown["step"], &shown["total"]),
            (&big["phase"], &big["step"], &big["total"])
        );
        assert!(shown["failure"].as_str().unwrap().starts_with("xxx"));
        assert!(shown["cut"].as_str().unwrap().contains("bytes"), "{shown}");
        assert!(shown.get("extra").is_none());
        assert_eq!(r.full().unwrap().progress, Some(big));
        // A pull in progress stays, its image cut short.
        let pulling = serde_json::json!({
            "phase": "applying", "step": 6, "total": 7, "os": {"change": "z".repeat(600)},
            "osPull": {"image": format!("registry.example/{}", "o".repeat(400)),
                       "phase": "fetching", "layersDone": 1, "layersTotal": 2,
                       "bytesDone": 5, "bytesTotal": 9},
        });
        let kept: serde_json::Value =
            serde_json::from_str(&summary_progress(&pulling.to_string())).unwrap();
        assert_eq!(kept["osPull"]["bytesDone"], 5);
        assert_eq!(kept["osPull"]["layersTotal"], 2);
        assert!(
            kept["osPull"]["image"].as_str().unwrap().len() < 200,
            "{kept}"
        );
        assert!(kept.get("os").is_none());
        // Strings that escaping makes six times longer.
        let hostile = serde_json::json!({
            "phase": "\u{1}".repeat(400), "step": 1, "total": 2, "failure": "\u{2}".repeat(400),
        })
        .to_string();
        let kept = summary_progress(&hostile);
        assert!(kept.len() <= MAX_SUMMARY_PROGRESS, "{}", kept.len());
        let kept: serde_json::Value = serde_json::from_str(&kept).unwrap();
        assert_eq!((&kept["step"], &kept["total"]), (&1.into(), &2.into()));
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

    /// Once stored, a report keeps its summary and still compares by its whole content, but
    /// holds no JSON: it is not shown or encoded from memory any more, in any of its clones.
    #[test]
    fn a_released_report_keeps_its_summary_and_identity_but_not_its_json() {
        let a = Report::new(status());
        let shared = a.clone();
        let edited = a.edited(|s| s.drift.push("/etc/b: missing".into()));
        a.release();
        assert_eq!(shared.json(), None);
        assert_eq!(shared.full(), None);
        assert!(serde_json::to_vec(&shared).is_err());
        assert_eq!(a.state, NodeState::Working);
        assert_eq!(a.requests_done, 3);
        assert_eq!(a.current.as_deref(), Some("rendered-a"));
        // Equal to the same report still in memory, and not to another.
        assert_eq!(a, Report::new(status()));
        assert_ne!(a, edited);
        let shown = a.summary_only();
        assert_eq!(
            (shown.state, shown.reason),
            (NodeState::Working, status().reason)
        );
        assert!(shown.history.is_empty() && shown.drift.is_empty());
        // The progress and the count of drift lines stay in the summary.
        assert_eq!(shown.progress, status().progress);
        assert_eq!(a.drift_lines, 1);
        assert_eq!(edited.drift_lines, 2);
        assert_eq!(
            a.edited(|s| s.progress = None).summary_only().progress,
            None
        );
    }
}
