//! The fleet in memory: every stored object, decoded, with its revisions.
//!
//! The server answers reads from a [`Fleet`] (an immutable snapshot behind an `Arc`) and never
//! from the store, so a long-poll or a `get` costs a map lookup. A change is made on a copy (cheap:
//! the maps hold `Arc`s, and only changed entries are replaced), the controller reconciles the
//! copy, [`diff`] turns the difference into one atomic store commit with a compare-and-swap
//! precondition per object, and only after the commit succeeds does the copy become the snapshot.

pub mod events;
mod map;

use map::diff_kind;
pub use map::{put, update, Map, Rec};

use crate::store::records::Record;
use crate::store::records::{
    EventRecord, McRecord, NodeRecord, PoliciesRecord, PoolRecord, RenderedRecord, ReportRecord,
    TokenRecord,
};
use crate::store::{Expect, Kind, Listed, Op, Store, StoreError};
use events::EventLog;
use imbl::ordmap::DiffItem;
use map::{encode, stamp_one};
use std::collections::HashMap;
use std::sync::Arc;

/// Everything the server stores, decoded.
#[derive(Debug, Clone, Default)]
pub struct Fleet {
    /// MachineConfigs.
    pub mcs: Map<McRecord>,
    /// Pools.
    pub pools: Map<PoolRecord>,
    /// Nodes.
    pub nodes: Map<NodeRecord>,
    /// Rendered configs.
    pub rendered: Map<RenderedRecord>,
    /// Node-disruption policies (at most one object, `cluster`).
    pub policies: Map<PoliciesRecord>,
    /// Tokens.
    pub tokens: Map<TokenRecord>,
    /// Events, kept by class ([`EventLog`]).
    pub events: EventLog,
    /// Node credential hash → node name.
    pub credentials: Arc<HashMap<String, String>>,
    /// The store revision this snapshot reflects.
    pub revision: u64,
}

/// The name of the policies object.
pub const POLICIES_NAME: &str = "cluster";

impl Fleet {
    /// Reads everything from the store.
    pub async fn load<S: Store>(store: &S) -> Result<Fleet, StoreError> {
        let revision = store.revision();
        let mut fleet = Fleet {
            mcs: load_kind(store, Kind::MachineConfig).await?,
            pools: load_kind(store, Kind::Pool).await?,
            nodes: load_nodes(store).await?,
            rendered: load_kind(store, Kind::Rendered).await?,
            policies: load_kind(store, Kind::Policies).await?,
            tokens: load_kind(store, Kind::Token).await?,
            events: EventLog::from_stored(
                load_kind::<S, EventRecord>(store, Kind::Event)
                    .await?
                    .into_iter()
                    .map(|(name, rec)| (name, Arc::unwrap_or_clone(rec))),
            ),
            credentials: Arc::default(),
            revision,
        };
        fleet.index_credentials();
        Ok(fleet)
    }

    /// Rebuilds the credential index.
    pub fn index_credentials(&mut self) {
        let index: HashMap<String, String> = self
            .nodes
            .values()
            .filter_map(|n| {
                n.value
                    .credential_sha256
                    .clone()
                    .map(|h| (h, n.value.name.clone()))
            })
            .collect();
        self.credentials = Arc::new(index);
    }

    /// The node-disruption policies in force.
    pub fn policies(&self) -> hearth_config::model::DisruptionPolicies {
        self.policies
            .get(POLICIES_NAME)
            .map(|p| p.value.policies.clone())
            .unwrap_or_default()
    }

    /// Appends events ([`EventLog::record`]: each class keeps its last ones).
    pub fn record_events(&mut self, events: Vec<EventRecord>) {
        self.events.record(events);
    }

    /// The store ops that turn `old` into `self`, each guarded by the object's revision in
    /// `old`.
    pub fn diff(&self, old: &Fleet) -> Result<Vec<Op>, StoreError> {
        let mut ops = Vec::new();
        diff_kind(Kind::MachineConfig, &old.mcs, &self.mcs, &mut ops)?;
        diff_kind(Kind::Pool, &old.pools, &self.pools, &mut ops)?;
        diff_nodes(&old.nodes, &self.nodes, &mut ops)?;
        diff_kind(Kind::Rendered, &old.rendered, &self.rendered, &mut ops)?;
        diff_kind(Kind::Policies, &old.policies, &self.policies, &mut ops)?;
        diff_kind(Kind::Token, &old.tokens, &self.tokens, &mut ops)?;
        self.events.diff(&old.events, &mut ops)?;
        Ok(ops)
    }

    /// After `ops` were committed at `revision`: records the new revisions. (The credential
    /// index is the caller's: see [`Fleet::index_credentials`].)
    pub fn stamp(&mut self, ops: &[Op], revision: u64) {
        for op in ops {
            if let Op::Delete {
                kind: Kind::Report,
                name,
                ..
            } = op
            {
                update(&mut self.nodes, name, |n| n.report_revision = 0);
            }
            if let Op::Put { kind, name, .. } = op {
                match kind {
                    Kind::MachineConfig => stamp_one(&mut self.mcs, name, revision),
                    Kind::Pool => stamp_one(&mut self.pools, name, revision),
                    Kind::Node => stamp_one(&mut self.nodes, name, revision),
                    Kind::Report => {
                        update(&mut self.nodes, name, |n| n.report_revision = revision);
                        // The store has it now: its JSON need not be kept in memory.
                        if let Some(r) = self.nodes.get(name).and_then(|n| n.value.report.as_ref())
                        {
                            r.release();
                        }
                    }
                    Kind::Rendered => stamp_one(&mut self.rendered, name, revision),
                    Kind::Policies => stamp_one(&mut self.policies, name, revision),
                    Kind::Token => stamp_one(&mut self.tokens, name, revision),
                    Kind::Event => stamp_one(self.events.map_mut(name), name, revision),
                }
            }
        }
        self.revision = revision;
    }
}

/// The nodes, each with its last report (stored apart; a node document written before that
/// carries its own, which a stored report replaces). The reports are read one at a time, each
/// kept as its summary: 100,000 nodes' reports are some 1 GB stored.
async fn load_nodes<S: Store>(store: &S) -> Result<Map<NodeRecord>, StoreError> {
    let documents: Map<NodeRecord> = load_kind(store, Kind::Node).await?;
    // A copy shares the map (`imbl`): what the list starts again from, if it does.
    let mut nodes = documents.clone();
    store
        .list_each(Kind::Report, &mut |listed| {
            let (name, v) = match listed {
                Listed::Object(name, v) => (name, v),
                Listed::Again => {
                    nodes = documents.clone();
                    return Ok(());
                }
            };
            // A report is the node's status, not configuration: one that cannot be read (or
            // whose node is gone) is left out, said, and replaced by the node's next report.
            match serde_json::from_slice::<ReportRecord>(&v.value) {
                Ok(r) => {
                    if !update(&mut nodes, &name, |n| n.take_report(r, v.mod_revision)) {
                        tracing::warn!(node = %name, "a stored report has no node; left out");
                    }
                }
                Err(e) => {
                    tracing::warn!(node = %name, error = %e, "a stored report is unreadable; left out until the node reports again");
                }
            }
            Ok(())
        })
        .await?;
    Ok(nodes)
}

async fn load_kind<S: Store, T: Record>(store: &S, kind: Kind) -> Result<Map<T>, StoreError> {
    let mut out = Map::new();
    for (name, v) in store.list(kind).await? {
        let value: T = serde_json::from_slice(&v.value)
            .map_err(|e| StoreError::Backend(format!("{kind}/{name} is unreadable: {e}")))?;
        out.insert(
            name,
            Arc::new(Rec {
                value,
                create_revision: v.create_revision,
                mod_revision: v.mod_revision,
            }),
        );
    }
    Ok(out)
}

/// [`diff_kind`] for nodes: a node's document and its report are two objects
/// ([`NodeRecord::report`]), each written only when it changed; a node document from before
/// reports were apart is written with its report, so that the report is not lost with it.
fn diff_nodes(
    old: &Map<NodeRecord>,
    new: &Map<NodeRecord>,
    ops: &mut Vec<Op>,
) -> Result<(), StoreError> {
    // The node's report as it is now: put, or deleted when it has none (any more).
    let put_report = |name: &String, n: &NodeRecord, ops: &mut Vec<Op>| {
        let Some(report) = &n.report else {
            if n.report_revision != 0 {
                ops.push(Op::Delete {
                    kind: Kind::Report,
                    name: name.clone(),
                    expect: Expect::Any,
                });
            }
            return Ok::<(), StoreError>(());
        };
        // A report no longer in memory is the one stored
        // ([`crate::store::report::Report::release`]): nothing to write.
        let Some(json) = report.json() else {
            if n.report_revision == 0 {
                tracing::error!(node = %name, "a report to store is no longer in memory and was never stored");
                return Err(StoreError::Backend(format!(
                    "the report of node {name} is no longer in memory and was never stored; it is written with the node's next report"
                )));
            }
            return Ok(());
        };
        ops.push(Op::Put {
            kind: Kind::Report,
            name: name.clone(),
            value: report_document(&json, n.report_at),
            // Whatever is stored: a report is the node's alone, written only with its node's
            // changes, which the writer lock (or etcd's fence) already orders; a revision to
            // compare with could only be stale (a report left by a deleted node, one a replica
            // could not read) and would fail every later report of the node.
            expect: Expect::Any,
        });
        Ok(())
    };
    for item in old.diff(new) {
        match item {
            DiffItem::Add(name, rec) => {
                ops.push(Op::Put {
                    kind: Kind::Node,
                    name: name.clone(),
                    value: encode(Kind::Node, name, &rec.value)?,
                    expect: Expect::Absent,
                });
                put_report(name, &rec.value, ops)?;
            }
            DiffItem::Remove(name, o) => {
                ops.push(Op::Delete {
                    kind: Kind::Node,
                    name: name.clone(),
                    expect: Expect::Revision(o.mod_revision),
                });
                ops.push(Op::Delete {
                    kind: Kind::Report,
                    name: name.clone(),
                    expect: Expect::Any,
                });
            }
            DiffItem::Update {
                old: (_, o),
                new: (name, rec),
            } => {
                let document = !o.value.same_document(&rec.value);
                if document {
                    ops.push(Op::Put {
                        kind: Kind::Node,
                        name: name.clone(),
                        value: encode(Kind::Node, name, &rec.value)?,
                        expect: Expect::Revision(o.mod_revision),
                    });
                }
                if !o.value.same_report(&rec.value) || (document && rec.value.report_revision == 0)
                {
                    put_report(name, &rec.value, ops)?;
                }
            }
        }
    }
    Ok(())
}

/// The stored document of a report, from the report's JSON kept in memory
/// ([`crate::store::report::Report::json`]): what [`encode`] makes of a [`ReportRecord`] (its fields
/// in order, compact), without encoding the report again.
fn report_document(report: &[u8], report_at: Option<u64>) -> bytes::Bytes {
    let mut doc = Vec::with_capacity(report.len() + 40);
    doc.extend_from_slice(b"{\"report\":");
    doc.extend_from_slice(report);
    if let Some(t) = report_at {
        doc.extend_from_slice(format!(",\"reportAt\":{t}").as_bytes());
    }
    doc.push(b'}');
    doc.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every group commit starts from a copy of the snapshot: at 10,000 nodes a `BTreeMap`
    /// copy allocated 10,000 keys, and dropping the old snapshot freed them (docs/performance.md,
    /// "One server for 100,000 agents"). The copy must share the map and a change must share
    /// every entry it does not touch.
    #[test]
    fn a_copy_of_a_large_map_shares_it_and_a_change_shares_the_untouched_entries() {
        let mut old: Map<u64> = Map::new();
        for i in 0..10_000u64 {
            put(&mut old, &format!("node-{i:05}"), i);
        }
        let mut new = old.clone();
        assert!(new.ptr_eq(&old), "the copy is the same tree, not a new one");
        assert!(update(&mut new, "node-04242", |v| *v += 1));
        assert!(!new.ptr_eq(&old));
        assert_eq!(
            old["node-04242"].value, 4242,
            "the old snapshot is unchanged"
        );
        assert_eq!(new["node-04242"].value, 4243);
        let shared = old
            .iter()
            .zip(new.iter())
            .filter(|((_, a), (_, b))| Arc::ptr_eq(a, b))
            .count();
        assert_eq!(shared, 9_999, "only the changed entry is new");
    }

    /// A commit writes what changed and nothing else: an added, a changed and a removed
    /// object in a large map that shares the rest; a record copied or re-stamped with the same
    /// document is not written.
    #[test]
    fn the_diff_of_two_snapshots_is_what_changed() {
        let mut old: Map<u64> = Map::new();
        for i in 0..10_000u64 {
            put(&mut old, &format!("n{i:05}"), i);
        }
        stamp_one(&mut old, "n04242", 9);
        let mut new = old.clone();
        update(&mut new, "n00007", |n| *n = 1);
        new.remove("n00100");
        put(&mut new, "n99999", 5);
        // The same document in a new record, and a re-stamped one: no write.
        let same = new["n00200"].value;
        put(&mut new, "n00200", same);
        stamp_one(&mut new, "n00300", 5);
        let mut ops = Vec::new();
        diff_kind(Kind::Token, &old, &new, &mut ops).unwrap();
        let described: Vec<String> = ops
            .iter()
            .map(|op| match op {
                Op::Put { name, expect, .. } => format!("put {name} {expect:?}"),
                Op::Delete { name, expect, .. } => format!("delete {name} {expect:?}"),
            })
            .collect();
        assert_eq!(
            described,
            [
                "put n00007 Revision(0)",
                "delete n00100 Revision(0)",
                "put n99999 Absent"
            ]
        );
        let mut none = Vec::new();
        diff_kind(Kind::Token, &old, &old.clone(), &mut none).unwrap();
        assert!(none.is_empty());
    }

    /// A node's report is an object of its own: a change of the report writes the report only,
    /// a change of the node (an apply's desired config) the node only; both read back together
    /// after a restart; a node document from before (its report inside) is read with it, and
    /// written with its report apart the first time it changes; a deleted node takes its
    /// report with it.
    #[tokio::test]
    async fn a_nodes_report_is_stored_apart_and_read_back_with_it() {
        use crate::api::NodeState;
        use crate::store::RedbStore;
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(&dir.path().join("fleet.redb")).unwrap();
        let kinds = |ops: &[Op]| -> Vec<String> {
            ops.iter()
                .map(|op| match op {
                    Op::Put {
                        kind, name, expect, ..
                    } => format!("put {kind}/{name} {expect:?}"),
                    Op::Delete { kind, name, .. } => format!("delete {kind}/{name}"),
                })
                .collect()
        };
        let commit = |old: Fleet, mut new: Fleet| {
            let store = &store;
            async move {
                let ops = new.diff(&old).unwrap();
                let revision = store.commit(ops.clone()).await.unwrap();
                new.stamp(&ops, revision);
                (new, kinds(&ops))
            }
        };
        let status = |state: NodeState| -> crate::store::report::Report {
            crate::store::report::Report::new(
                serde_json::from_value(serde_json::json!({
                    "state": state.as_str(), "current": "rendered-a", "desired": "rendered-a",
                }))
                .unwrap(),
            )
        };

        // A node enrolls, then reports: the report alone is written.
        let mut new = Fleet::default();
        let n = NodeRecord {
            name: "n1".into(),
            desired: Some("rendered-a".into()),
            ..Default::default()
        };
        put(&mut new.nodes, "n1", n);
        let (f, ops) = commit(Fleet::default(), new).await;
        assert_eq!(ops, ["put nodes/n1 Absent"]);
        let mut new = f.clone();
        update(&mut new.nodes, "n1", |n| {
            n.report = Some(status(NodeState::Done));
            n.report_at = Some(7);
        });
        let (f, ops) = commit(f, new).await;
        assert_eq!(ops, ["put reports/n1 Any"]);
        let report_revision = f.nodes["n1"].value.report_revision;
        assert_eq!(report_revision, f.revision);

        // The node's desired config changes (an apply): the node alone; then a new report: the
        // report alone, over its stored revision.
        let mut new = f.clone();
        update(&mut new.nodes, "n1", |n| {
            n.desired = Some("rendered-b".into())
        });
        let (f, ops) = commit(f, new).await;
        assert_eq!(ops.len(), 1, "{ops:?}");
        assert!(ops[0].starts_with("put nodes/n1 Revision("), "{ops:?}");
        let mut new = f.clone();
        update(&mut new.nodes, "n1", |n| {
            n.report = Some(status(NodeState::Working));
            n.report_at = Some(8);
        });
        let (f, ops) = commit(f, new).await;
        assert_eq!(ops, ["put reports/n1 Any"]);

        // Read back: the node with its last report.
        let loaded = Fleet::load(&store).await.unwrap();
        let n = &loaded.nodes["n1"].value;
        assert_eq!(n.desired.as_deref(), Some("rendered-b"));
        assert_eq!(n.report.as_ref().unwrap().state, NodeState::Working);
        assert_eq!(n.report_at, Some(8));
        assert_eq!(n.report_revision, f.nodes["n1"].value.report_revision);
        assert!(n.same_document(&f.nodes["n1"].value) && n.same_report(&f.nodes["n1"].value));

        // A node document written before reports were apart: its report is read from it, and
        // written apart (with the node) the first time the node changes.
        let legacy = serde_json::json!({
            "name": "n2", "createdAt": 1, "desired": "rendered-a",
            "report": status(NodeState::Done), "reportAt": 5,
        });
        store
            .commit(vec![Op::Put {
                kind: Kind::Node,
                name: "n2".into(),
                value: serde_json::to_vec(&legacy).unwrap().into(),
                expect: Expect::Absent,
            }])
            .await
            .unwrap();
        let f = Fleet::load(&store).await.unwrap();
        let n2 = &f.nodes["n2"].value;
        assert_eq!(n2.report.as_ref().unwrap().state, NodeState::Done);
        assert_eq!((n2.report_at, n2.report_revision), (Some(5), 0));
        let mut new = f.clone();
        update(&mut new.nodes, "n2", |n| {
            n.desired = Some("rendered-b".into())
        });
        let (f, ops) = commit(f, new).await;
        assert_eq!(ops.len(), 2, "{ops:?}");
        assert_eq!(ops[1], "put reports/n2 Any");
        let stored = store.get(Kind::Node, "n2").await.unwrap().unwrap();
        assert!(
            !String::from_utf8_lossy(&stored.value).contains("report"),
            "the node document no longer carries it"
        );
        let loaded = Fleet::load(&store).await.unwrap();
        assert_eq!(loaded.nodes["n2"].value.report_at, Some(5));

        // Deleted: the report goes with the node.
        let mut new = f.clone();
        new.nodes.remove("n1");
        let (_, ops) = commit(f, new).await;
        assert_eq!(ops[1], "delete reports/n1");
        assert!(store.get(Kind::Report, "n1").await.unwrap().is_none());
    }

    /// A start whose list of reports starts again partway (etcd, a compaction between two
    /// pages) holds the reports of the last pass only: a report deleted before it started again
    /// is not kept.
    #[tokio::test]
    async fn a_start_whose_list_of_reports_starts_again_keeps_the_last_pass() {
        use crate::store::tests::StartsAgain;
        use crate::store::RedbStore;
        let dir = tempfile::tempdir().unwrap();
        let put = |kind: Kind, name: &str, value: serde_json::Value| Op::Put {
            kind,
            name: name.into(),
            value: serde_json::to_vec(&value).unwrap().into(),
            expect: Expect::Any,
        };
        let store = StartsAgain {
            store: RedbStore::open(&dir.path().join("fleet.redb")).unwrap(),
            kind: Kind::Report,
            between: std::sync::Mutex::new(vec![Op::Delete {
                kind: Kind::Report,
                name: "a".into(),
                expect: Expect::Any,
            }]),
        };
        let mut ops = Vec::new();
        for n in ["a", "b", "c", "d"] {
            ops.push(put(
                Kind::Node,
                n,
                serde_json::json!({"name": n, "createdAt": 1}),
            ));
            ops.push(put(
                Kind::Report,
                n,
                serde_json::json!({"report": {"state": "Done"}, "reportAt": 5}),
            ));
        }
        store.commit(ops).await.unwrap();
        let f = Fleet::load(&store).await.unwrap();
        let reported: Vec<&str> = f
            .nodes
            .values()
            .filter(|n| n.value.report.is_some())
            .map(|n| n.value.name.as_str())
            .collect();
        assert_eq!(reported, ["b", "c", "d"]);
        assert_eq!(f.nodes.len(), 4);
    }

    /// A report is stored as its JSON kept in memory, in the document serde would make of its
    /// [`ReportRecord`].
    #[test]
    fn a_report_is_stored_as_the_document_serde_makes_of_it() {
        let report = crate::store::report::Report::new(
            serde_json::from_value(serde_json::json!({
                "state": "Done", "current": "rendered-a", "desired": "rendered-a",
                "reason": "quote \" and ✓", "history": [{"time": "t", "state": "Working"}],
            }))
            .unwrap(),
        );
        for report_at in [Some(1_764_000_000), None] {
            let mut new = Fleet::default();
            put(
                &mut new.nodes,
                "n1",
                NodeRecord {
                    name: "n1".into(),
                    report: Some(report.clone()),
                    report_at,
                    ..Default::default()
                },
            );
            let stored: Vec<_> = new
                .diff(&Fleet::default())
                .unwrap()
                .into_iter()
                .filter_map(|op| match op {
                    Op::Put {
                        kind: Kind::Report,
                        value,
                        ..
                    } => Some(value),
                    _ => None,
                })
                .collect();
            let serde = serde_json::to_vec(&ReportRecord {
                report: report.clone(),
                report_at,
            })
            .unwrap();
            assert_eq!(stored, [serde], "{report_at:?}");
        }
    }
}
