//! What a node's view shows of its last report: the whole report (history, drift, actions,
//! progress). The server keeps a report's JSON only until the store has it
//! ([`crate::store::report::Report::release`]), so it is read back from the store here: one read per
//! node for a few nodes or a page of a list (at most [`CONCURRENT_GETS`] at once), one list of
//! every report for a larger share of the fleet.

use super::state::App;
use crate::error::ApiError;
use crate::fleet::Rec;
use crate::store::records::NodeRecord;
use crate::store::report::Report;
use crate::store::{Kind, Listed, Store};
use futures_util::StreamExt;
use hearth_api::AgentStatus;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};

/// Up to this many nodes to show, their reports are read one by one (also up to a quarter of
/// the fleet: a page of a list); for more, all at once.
const GETS_AT_MOST: usize = 16;
/// Reads of single reports under way at once (on etcd, each is a request).
const CONCURRENT_GETS: usize = 32;

/// A node's last report as its view shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ShownReport {
    /// The whole report.
    pub status: AgentStatus,
    /// When it arrived.
    pub report_at: Option<u64>,
    /// The store revision it was written at (0: not stored yet).
    pub revision: u64,
    /// How many drift lines it holds (those of `status`, unless it is a summary).
    pub drift_lines: usize,
}

/// A stored report, as [`crate::store::records::ReportRecord`] encodes it, decoded in full (not into
/// a [`crate::store::report::Report`]: it is shown, not kept).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    report: AgentStatus,
    #[serde(default)]
    report_at: Option<u64>,
}

impl ShownReport {
    /// `status` as `n`'s report from memory (its time and revision as the node has them).
    pub fn of_node(n: &NodeRecord, status: AgentStatus) -> ShownReport {
        ShownReport {
            drift_lines: status.drift.len(),
            status,
            report_at: n.report_at,
            revision: n.report_revision,
        }
    }

    /// The summary of `n`'s report `r` (a list's summary view; or what memory has when the
    /// store does not): no history, drift lines or actions, only how many drift lines.
    pub fn summary(n: &NodeRecord, r: &Report) -> ShownReport {
        ShownReport {
            status: r.summary_only(),
            report_at: n.report_at,
            revision: n.report_revision,
            drift_lines: r.drift_lines as usize,
        }
    }
}

impl App {
    /// The last report of each of `nodes` that has one, by node name: from memory when it is
    /// still there, else from the store. The store may have a newer one than `nodes` (another
    /// replica's commit, or one since the snapshot): that one is shown, with its revision.
    /// `fleet`: how many nodes there are (whether to read one by one or all at once).
    pub async fn shown_reports(
        &self,
        nodes: &[&Rec<NodeRecord>],
        fleet: usize,
    ) -> Result<HashMap<String, ShownReport>, ApiError> {
        let mut out = HashMap::with_capacity(nodes.len());
        let mut stored: Vec<(&NodeRecord, &Report)> = Vec::new();
        for rec in nodes {
            let n = &rec.value;
            let Some(r) = &n.report else { continue };
            match r.full() {
                Some(status) => {
                    out.insert(n.name.clone(), ShownReport::of_node(n, status));
                }
                None => stored.push((n, r)),
            }
        }
        if stored.is_empty() {
            return Ok(out);
        }
        let mut read: HashMap<String, ShownReport> = HashMap::with_capacity(stored.len());
        if stored.len() <= GETS_AT_MOST || stored.len().saturating_mul(4) <= fleet {
            // Owned names: a future that borrows from the list's elements is not `Send` enough
            // for a handler.
            let names: Vec<String> = stored.iter().map(|(n, _)| n.name.clone()).collect();
            let mut gets = futures_util::stream::iter(names.into_iter().map(|name| {
                let store = &self.store;
                async move {
                    let got = store.get(Kind::Report, &name).await;
                    (name, got)
                }
            }))
            .buffer_unordered(CONCURRENT_GETS);
            while let Some((name, got)) = gets.next().await {
                if let Some(v) = got? {
                    self.metrics.reports_read_back(1);
                    if let Some(shown) = decode(&name, &v.value, v.mod_revision) {
                        read.insert(name, shown);
                    }
                }
            }
        } else {
            let wanted: HashSet<String> = stored.iter().map(|(n, _)| n.name.clone()).collect();
            // One at a time: each stored document is dropped once decoded (or passed over).
            let mut seen = 0u64;
            let listed = self
                .store
                .list_each(Kind::Report, &mut |listed| {
                    let (name, v) = match listed {
                        Listed::Object(name, v) => (name, v),
                        Listed::Again => {
                            read.clear();
                            return Ok(());
                        }
                    };
                    seen += 1;
                    if wanted.contains(name.as_str()) {
                        if let Some(shown) = decode(&name, &v.value, v.mod_revision) {
                            read.insert(name, shown);
                        }
                    }
                    Ok(())
                })
                .await;
            self.metrics.reports_read_back(seen);
            listed?;
        }
        for (n, r) in stored {
            let shown = match read.remove(&n.name) {
                Some(s) if s.revision >= n.report_revision => s,
                // Gone from the store, unreadable, or older than what the node has (none of
                // which a commit leaves): what memory has, its summary.
                _ => {
                    tracing::warn!(node = %n.name, revision = n.report_revision, "a node's stored report could not be read back; showing its summary only");
                    ShownReport::summary(n, r)
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
            drift_lines: s.report.drift.len(),
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
