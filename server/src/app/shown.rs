//! What a node's view shows of its last report: the whole report (history, drift, actions,
//! progress). The server keeps a report's JSON only until the store has it
//! ([`crate::report::Report::release`]), so it is read back from the store here: one read per
//! node for a few nodes, one list of every report for more.

use super::App;
use crate::error::ApiError;
use crate::fleet::Rec;
use crate::records::NodeRecord;
use crate::report::Report;
use crate::store::{Kind, Store};
use hearth_api::AgentStatus;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};

/// Up to this many nodes to show, their reports are read one by one; for more, all at once.
const GETS_AT_MOST: usize = 16;

/// A node's last report as its view shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ShownReport {
    /// The whole report.
    pub status: AgentStatus,
    /// When it arrived.
    pub report_at: Option<u64>,
    /// The store revision it was written at (0: not stored yet).
    pub revision: u64,
}

/// A stored report, as [`crate::records::ReportRecord`] encodes it, decoded in full (not into
/// a [`crate::report::Report`]: it is shown, not kept).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    report: AgentStatus,
    #[serde(default)]
    report_at: Option<u64>,
}

impl<S: Store> App<S> {
    /// The last report of each of `nodes` that has one, by node name: from memory when it is
    /// still there, else from the store. The store may have a newer one than `nodes` (another
    /// replica's commit, or one since the snapshot): that one is shown, with its revision.
    pub async fn shown_reports(
        &self,
        nodes: &[&Rec<NodeRecord>],
    ) -> Result<HashMap<String, ShownReport>, ApiError> {
        let mut out = HashMap::with_capacity(nodes.len());
        let mut stored: Vec<(&NodeRecord, &Report)> = Vec::new();
        for rec in nodes {
            let n = &rec.value;
            let Some(r) = &n.report else { continue };
            match r.full() {
                Some(status) => {
                    out.insert(
                        n.name.clone(),
                        ShownReport {
                            status,
                            report_at: n.report_at,
                            revision: n.report_revision,
                        },
                    );
                }
                None => stored.push((n, r)),
            }
        }
        if stored.is_empty() {
            return Ok(out);
        }
        let mut read: HashMap<String, ShownReport> = HashMap::with_capacity(stored.len());
        if stored.len() <= GETS_AT_MOST {
            for (n, _) in &stored {
                if let Some(v) = self.store.get(Kind::Report, &n.name).await? {
                    if let Some(shown) = decode(&n.name, &v.value, v.mod_revision) {
                        read.insert(n.name.clone(), shown);
                    }
                }
            }
        } else {
            let wanted: HashSet<&str> = stored.iter().map(|(n, _)| n.name.as_str()).collect();
            // Consumed as it is decoded: each stored document is dropped once decoded.
            for (name, v) in self.store.list(Kind::Report).await? {
                if wanted.contains(name.as_str()) {
                    if let Some(shown) = decode(&name, &v.value, v.mod_revision) {
                        read.insert(name, shown);
                    }
                }
            }
        }
        for (n, r) in stored {
            let shown = match read.remove(&n.name) {
                Some(s) if s.revision >= n.report_revision => s,
                // Gone from the store, unreadable, or older than what the node has (none of
                // which a commit leaves): what memory has, its summary.
                _ => {
                    tracing::warn!(node = %n.name, revision = n.report_revision, "a node's stored report could not be read back; showing its summary only");
                    ShownReport {
                        status: r.summary_only(),
                        report_at: n.report_at,
                        revision: n.report_revision,
                    }
                }
            };
            out.insert(n.name.clone(), shown);
        }
        Ok(out)
    }
}

fn decode(name: &str, value: &[u8], revision: u64) -> Option<ShownReport> {
    match serde_json::from_slice::<Stored>(value) {
        Ok(s) => Some(ShownReport {
            status: s.report,
            report_at: s.report_at,
            revision,
        }),
        Err(e) => {
            tracing::warn!(node = %name, error = %e, "a stored report is unreadable");
            None
        }
    }
}
