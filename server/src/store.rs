//! The store: every object the server keeps, behind a small trait so that the embedded database
//! used today and an etcd backend later are interchangeable.
//!
//! The model is etcd's: objects are JSON documents addressed by kind and name; every commit
//! increments one store-wide **revision**; each object remembers the revision that created it and
//! the one that last changed it. A commit is a list of puts and deletes applied atomically, each
//! with an optional precondition on the object's revision (compare-and-swap), so that two writers
//! never silently overwrite each other. [`Store::watch`] yields the revision after each commit, so
//! that waiters (long-polls, other replicas' caches) wake up.
//!
//! The one implementation is [`RedbStore`]: a single file written by `redb`, a pure-Rust embedded
//! database with ACID transactions (copy-on-write B-trees, checksummed commits, fsync on each
//! commit), so a `kill -9` or a power cut leaves either the old or the new state, never a mix.

use redb::{Database, ReadableTable, TableDefinition};
use std::fmt;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use tokio::sync::watch;

/// The kinds of object the server stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// MachineConfigs as applied (name → [`crate::records::McRecord`]).
    MachineConfig,
    /// MachineConfigPools with their status.
    Pool,
    /// Nodes: labels, credential hash, desired config.
    Node,
    /// Nodes' last status reports (name: the node's), apart from the nodes.
    Report,
    /// Rendered configs (immutable, content-addressed).
    Rendered,
    /// Node-disruption policies (the MCO's `MachineConfiguration`).
    Policies,
    /// Token hashes: the admin token and the pools' bootstrap tokens.
    Token,
    /// Events.
    Event,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 8] = [
        Kind::MachineConfig,
        Kind::Pool,
        Kind::Node,
        Kind::Report,
        Kind::Rendered,
        Kind::Policies,
        Kind::Token,
        Kind::Event,
    ];

    /// The key prefix (`machineconfigs`, `pools`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::MachineConfig => "machineconfigs",
            Kind::Pool => "pools",
            Kind::Node => "nodes",
            Kind::Report => "reports",
            Kind::Rendered => "rendered",
            Kind::Policies => "policies",
            Kind::Token => "tokens",
            Kind::Event => "events",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored object with its revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// The document (JSON).
    pub value: Vec<u8>,
    /// The revision of the commit that created the object.
    pub create_revision: u64,
    /// The revision of the commit that last changed it.
    pub mod_revision: u64,
}

/// A precondition on one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// None.
    Any,
    /// The object must not exist.
    Absent,
    /// The object must exist with this `mod_revision`.
    Revision(u64),
}

/// One write of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Create or replace an object.
    Put {
        /// Kind.
        kind: Kind,
        /// Name.
        name: String,
        /// The document (shared: a commit's ops are cloned for a retry or a log without
        /// copying their documents; an apply to 100,000 nodes writes some 100 MB).
        value: bytes::Bytes,
        /// Precondition.
        expect: Expect,
    },
    /// Delete an object (deleting a missing object under [`Expect::Any`] is not an error).
    Delete {
        /// Kind.
        kind: Kind,
        /// Name.
        name: String,
        /// Precondition.
        expect: Expect,
    },
}

impl Op {
    fn target(&self) -> (Kind, &str, Expect) {
        match self {
            Op::Put {
                kind, name, expect, ..
            }
            | Op::Delete { kind, name, expect } => (*kind, name, *expect),
        }
    }
}

/// Store errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A precondition failed: someone else changed the object first.
    #[error("conflict on {kind}/{name}: expected {expected:?}, found revision {found:?}")]
    Conflict {
        /// Kind.
        kind: Kind,
        /// Name.
        name: String,
        /// The precondition.
        expected: Expect,
        /// The object's revision (`None`: absent).
        found: Option<u64>,
    },
    /// The fleet changed since the revision a fenced commit was computed on
    /// ([`Store::commit_fenced`]): catch up with `revision` and compute the change again.
    #[error(
        "the fleet changed at revision {revision}, after the revision this change was computed on"
    )]
    Behind {
        /// The revision of the newer change.
        revision: u64,
    },
    /// The backend failed (I/O, corruption, a lock held by another process).
    #[error("store: {0}")]
    Backend(String),
}

/// A stream of a shared store's changes and the state of its link ([`Store::changes`]).
pub type Changes = (
    tokio::sync::mpsc::Receiver<crate::etcd::changes::Batch>,
    watch::Receiver<crate::etcd::changes::Link>,
);

/// What [`Store::list_each`] gives its callback.
#[derive(Debug)]
pub enum Listed {
    /// The next object: its name and document.
    Object(String, Versioned),
    /// The list starts again from its first object, at a newer snapshot: what was given before
    /// is to be forgotten.
    Again,
}

/// The store interface. Small on purpose: get, list, an atomic commit with compare-and-swap,
/// the current revision and a watch, which is what etcd offers too.
pub trait Store: Send + Sync + 'static {
    /// One object.
    fn get(
        &self,
        kind: Kind,
        name: &str,
    ) -> impl Future<Output = Result<Option<Versioned>, StoreError>> + Send;

    /// Every object of a kind, by name, in one list.
    fn list(
        &self,
        kind: Kind,
    ) -> impl Future<Output = Result<Vec<(String, Versioned)>, StoreError>> + Send {
        async move {
            let mut out: Vec<(String, Versioned)> = Vec::new();
            self.list_each(kind, &mut |listed| {
                match listed {
                    Listed::Object(name, v) => out.push((name, v)),
                    Listed::Again => out.clear(),
                }
                Ok(())
            })
            .await?;
            Ok(out)
        }
    }

    /// Every object of a kind, by name, given to `each` one at a time as it is read: nothing is
    /// held but the one `each` has (a kind may be large: 100,000 nodes' reports are some 1 GB).
    /// One snapshot; on etcd, a snapshot compacted between two pages of the list starts it
    /// again from the first at a newer one: `each` is then told so ([`Listed::Again`]) and must
    /// forget what it was given before (objects deleted meanwhile are not given again). An
    /// error from `each` ends the list with it.
    fn list_each(
        &self,
        kind: Kind,
        each: &mut (dyn FnMut(Listed) -> Result<(), StoreError> + Send),
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Applies every op atomically if every precondition holds; returns the new revision (the
    /// `mod_revision` of everything written). An empty commit returns the current revision.
    fn commit(&self, ops: Vec<Op>) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// [`Store::commit`], and only if no other fenced commit was made after revision
    /// `based_on` (the revision of the snapshot the change was computed from), else
    /// [`StoreError::Behind`]. Where one process is the only writer (the embedded store) this
    /// is `commit`; on etcd, several servers share the store and this is what makes their
    /// decisions as if one server made them in turn.
    fn commit_fenced(
        &self,
        ops: Vec<Op>,
        based_on: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        let _ = based_on;
        self.commit(ops)
    }

    /// The revision of the last commit.
    fn revision(&self) -> u64;

    /// Yields the revision after each commit.
    fn watch(&self) -> watch::Receiver<u64>;

    /// Where other processes write to the same store (etcd): the decoded changes after revision
    /// `from`, whoever made them, and the state of the link they come over. `None` where this
    /// process is the only writer (the embedded store).
    fn changes(&self, from: u64) -> Option<Changes> {
        let _ = from;
        None
    }
}

/// redb's page cache. Its default, 1 GiB, fills with every page a commit writes; but the server
/// reads the store only when it starts (every read is answered from the fleet in memory,
/// `crate::fleet`), so the cache only holds the B-tree pages a commit walks to write.
const CACHE_BYTES: usize = 32 << 20;

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const REVISION_KEY: &str = "revision";
const HEADER: usize = 16;

fn key(kind: Kind, name: &str) -> String {
    format!("{}/{name}", kind.as_str())
}

fn encode(value: &[u8], create: u64, modified: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + value.len());
    out.extend_from_slice(&create.to_le_bytes());
    out.extend_from_slice(&modified.to_le_bytes());
    out.extend_from_slice(value);
    out
}

fn decode(bytes: &[u8]) -> Result<Versioned, StoreError> {
    if bytes.len() < HEADER {
        return Err(StoreError::Backend("a stored object is truncated".into()));
    }
    let mut a = [0u8; 8];
    let mut b = [0u8; 8];
    a.copy_from_slice(&bytes[..8]);
    b.copy_from_slice(&bytes[8..16]);
    Ok(Versioned {
        value: bytes[HEADER..].to_vec(),
        create_revision: u64::from_le_bytes(a),
        mod_revision: u64::from_le_bytes(b),
    })
}

fn backend(e: impl fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

/// The embedded store: one `redb` database file.
pub struct RedbStore {
    db: Arc<Database>,
    tx: watch::Sender<u64>,
}

impl fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedbStore")
            .field("revision", &*self.tx.borrow())
            .finish()
    }
}

impl RedbStore {
    /// Opens (or creates) the database file. Fails when another process holds it.
    pub fn open(path: &Path) -> Result<RedbStore, StoreError> {
        // Every MachineConfig is in it, in clear: mode 0600 whatever the umask, also for a
        // database an older version created with the umask's mode.
        {
            use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(path)
                .map_err(|e| {
                    StoreError::Backend(format!("cannot open the database {}: {e}", path.display()))
                })?;
            f.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(|e| {
                    StoreError::Backend(format!(
                        "cannot make the database {} private: {e}",
                        path.display()
                    ))
                })?;
        }
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(path)
            .map_err(|e| {
                StoreError::Backend(format!("cannot open the database {}: {e}", path.display()))
            })?;
        let txn = db.begin_write().map_err(backend)?;
        let revision = {
            txn.open_table(OBJECTS).map_err(backend)?;
            let meta = txn.open_table(META).map_err(backend)?;
            let r = meta
                .get(REVISION_KEY)
                .map_err(backend)?
                .map(|v| v.value())
                .unwrap_or(0);
            r
        };
        txn.commit().map_err(backend)?;
        let (tx, _) = watch::channel(revision);
        Ok(RedbStore {
            db: Arc::new(db),
            tx,
        })
    }

    fn commit_blocking(db: &Database, ops: &[Op]) -> Result<u64, StoreError> {
        let txn = db.begin_write().map_err(backend)?;
        let revision;
        {
            let mut objects = txn.open_table(OBJECTS).map_err(backend)?;
            let mut meta = txn.open_table(META).map_err(backend)?;
            let current = meta
                .get(REVISION_KEY)
                .map_err(backend)?
                .map(|v| v.value())
                .unwrap_or(0);
            revision = current + 1;
            for op in ops {
                let (kind, name, expect) = op.target();
                let k = key(kind, name);
                let existing = match objects.get(k.as_str()).map_err(backend)? {
                    Some(v) => Some(decode(v.value())?),
                    None => None,
                };
                let found = existing.as_ref().map(|v| v.mod_revision);
                let ok = match expect {
                    Expect::Any => true,
                    Expect::Absent => existing.is_none(),
                    Expect::Revision(r) => found == Some(r),
                };
                if !ok {
                    return Err(StoreError::Conflict {
                        kind,
                        name: name.to_string(),
                        expected: expect,
                        found,
                    });
                }
                match op {
                    Op::Put { value, .. } => {
                        let create = existing.map(|v| v.create_revision).unwrap_or(revision);
                        objects
                            .insert(k.as_str(), encode(value, create, revision).as_slice())
                            .map_err(backend)?;
                    }
                    Op::Delete { .. } => {
                        objects.remove(k.as_str()).map_err(backend)?;
                    }
                }
            }
            meta.insert(REVISION_KEY, revision).map_err(backend)?;
        }
        txn.commit().map_err(backend)?;
        Ok(revision)
    }
}

impl Store for RedbStore {
    async fn get(&self, kind: Kind, name: &str) -> Result<Option<Versioned>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(OBJECTS).map_err(backend)?;
        match table.get(key(kind, name).as_str()).map_err(backend)? {
            Some(v) => Ok(Some(decode(v.value())?)),
            None => Ok(None),
        }
    }

    async fn list_each(
        &self,
        kind: Kind,
        each: &mut (dyn FnMut(Listed) -> Result<(), StoreError> + Send),
    ) -> Result<(), StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(OBJECTS).map_err(backend)?;
        // Keys are "kind/name": the range ["kind/", "kind0") holds exactly that kind.
        let start = format!("{}/", kind.as_str());
        let end = format!("{}0", kind.as_str());
        for entry in table.range(start.as_str()..end.as_str()).map_err(backend)? {
            let (k, v) = entry.map_err(backend)?;
            let name = k.value()[start.len()..].to_string();
            each(Listed::Object(name, decode(v.value())?))?;
        }
        Ok(())
    }

    async fn commit(&self, ops: Vec<Op>) -> Result<u64, StoreError> {
        if ops.is_empty() {
            return Ok(self.revision());
        }
        let db = self.db.clone();
        let revision = tokio::task::spawn_blocking(move || Self::commit_blocking(&db, &ops))
            .await
            .map_err(backend)??;
        self.tx.send_replace(revision);
        Ok(revision)
    }

    fn revision(&self) -> u64 {
        *self.tx.borrow()
    }

    fn watch(&self) -> watch::Receiver<u64> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn put(kind: Kind, name: &str, value: &str, expect: Expect) -> Op {
        Op::Put {
            kind,
            name: name.into(),
            value: value.as_bytes().to_vec().into(),
            expect,
        }
    }

    /// The names `s` lists of `kind`.
    async fn names<S: Store>(s: &S, kind: Kind) -> Vec<String> {
        let listed = s.list(kind).await.unwrap();
        listed.into_iter().map(|(n, _)| n).collect()
    }

    fn conflict(e: StoreError) -> (Kind, String, Expect, Option<u64>) {
        match e {
            StoreError::Conflict {
                kind,
                name,
                expected,
                found,
            } => (kind, name, expected, found),
            e => panic!("expected a conflict, got {e}"),
        }
    }

    /// What every store promises (run against the embedded store and against a real etcd):
    /// revisions grow with each commit and are the objects' revisions, preconditions are
    /// checked atomically and a failed one changes nothing and says what it found, kinds do not
    /// leak into each other, deletes, and the watch ticks on commits.
    pub(crate) async fn contract<S: Store>(s: &S) {
        let base = s.revision();
        let mut w = s.watch();
        w.borrow_and_update();
        let r1 = s
            .commit(vec![
                put(Kind::Node, "a", "1", Expect::Absent),
                put(Kind::Pool, "a", "p", Expect::Any),
            ])
            .await
            .unwrap();
        assert!(r1 > base, "{r1} > {base}");
        assert!(s.revision() >= r1);
        assert!(w.has_changed().unwrap());
        assert!(*w.borrow_and_update() >= r1);
        let a = s.get(Kind::Node, "a").await.unwrap().unwrap();
        assert_eq!(
            (a.value.as_slice(), a.create_revision, a.mod_revision),
            (&b"1"[..], r1, r1)
        );
        // A failed precondition changes nothing, and says what it found.
        let e = s
            .commit(vec![
                put(Kind::Node, "b", "x", Expect::Any),
                put(Kind::Node, "a", "2", Expect::Absent),
            ])
            .await
            .unwrap_err();
        assert_eq!(
            conflict(e),
            (Kind::Node, "a".into(), Expect::Absent, Some(r1))
        );
        assert!(s.get(Kind::Node, "b").await.unwrap().is_none());
        let r2 = s
            .commit(vec![put(Kind::Node, "a", "2", Expect::Revision(r1))])
            .await
            .unwrap();
        assert!(r2 > r1);
        let a = s.get(Kind::Node, "a").await.unwrap().unwrap();
        assert_eq!(
            (a.value.as_slice(), a.create_revision, a.mod_revision),
            (&b"2"[..], r1, r2)
        );
        // A stale revision, and a revision on a missing object.
        let e = s
            .commit(vec![put(Kind::Node, "a", "3", Expect::Revision(r1))])
            .await
            .unwrap_err();
        assert_eq!(
            conflict(e),
            (Kind::Node, "a".into(), Expect::Revision(r1), Some(r2))
        );
        let e = s
            .commit(vec![Op::Delete {
                kind: Kind::Node,
                name: "c".into(),
                expect: Expect::Revision(r2),
            }])
            .await
            .unwrap_err();
        assert_eq!(
            conflict(e),
            (Kind::Node, "c".into(), Expect::Revision(r2), None)
        );
        assert_eq!(s.get(Kind::Node, "a").await.unwrap().unwrap().value, b"2");
        // Kinds do not leak into each other's listing; names come back whole and sorted.
        s.commit(vec![
            put(Kind::Node, "b", "3", Expect::Any),
            put(Kind::Node, "a.b-c", "4", Expect::Absent),
        ])
        .await
        .unwrap();
        assert_eq!(names(s, Kind::Node).await, ["a", "a.b-c", "b"]);
        let pools = s.list(Kind::Pool).await.unwrap();
        assert_eq!(pools.len(), 1);
        assert_eq!(pools[0].1.value, b"p");
        assert!(s.list(Kind::Event).await.unwrap().is_empty());
        // One at a time: the same objects in the same order; an error from `each` ends it.
        let mut each = Vec::new();
        s.list_each(Kind::Node, &mut |listed| {
            if let Listed::Object(n, v) = listed {
                each.push((n, v.value));
            }
            Ok(())
        })
        .await
        .unwrap();
        let whole: Vec<(String, Vec<u8>)> = s
            .list(Kind::Node)
            .await
            .unwrap()
            .into_iter()
            .map(|(n, v)| (n, v.value))
            .collect();
        assert_eq!(each, whole);
        let mut calls = 0;
        let e = s
            .list_each(Kind::Node, &mut |_| {
                calls += 1;
                Err(StoreError::Backend("enough".into()))
            })
            .await
            .unwrap_err();
        assert_eq!((calls, e.to_string().contains("enough")), (1, true));
        // Deletes: a missing object under Any is not an error.
        let before = s.revision();
        let r3 = s
            .commit(vec![
                Op::Delete {
                    kind: Kind::Node,
                    name: "b".into(),
                    expect: Expect::Any,
                },
                Op::Delete {
                    kind: Kind::Node,
                    name: "never".into(),
                    expect: Expect::Any,
                },
            ])
            .await
            .unwrap();
        assert!(r3 > before);
        assert!(s.get(Kind::Node, "b").await.unwrap().is_none());
        assert_eq!(s.list(Kind::Node).await.unwrap().len(), 2);
        // An empty commit changes nothing.
        assert_eq!(s.commit(Vec::new()).await.unwrap(), s.revision());
        assert!(*w.borrow_and_update() >= r3);
    }

    /// A real store whose lists of one kind start again once partway, after two objects, as an
    /// etcd list does when its snapshot is compacted between two pages (which cannot be timed
    /// against a real etcd); `between` is committed before the list starts again.
    pub(crate) struct StartsAgain {
        pub store: RedbStore,
        pub kind: Kind,
        pub between: std::sync::Mutex<Vec<Op>>,
    }

    impl Store for StartsAgain {
        async fn get(&self, kind: Kind, name: &str) -> Result<Option<Versioned>, StoreError> {
            self.store.get(kind, name).await
        }
        async fn list_each(
            &self,
            kind: Kind,
            each: &mut (dyn FnMut(Listed) -> Result<(), StoreError> + Send),
        ) -> Result<(), StoreError> {
            if kind != self.kind {
                return self.store.list_each(kind, each).await;
            }
            let mut first = 0;
            let _ = self
                .store
                .list_each(kind, &mut |listed| {
                    first += 1;
                    if first > 2 {
                        return Err(StoreError::Backend("compacted".into()));
                    }
                    each(listed)
                })
                .await;
            let between = std::mem::take(&mut *self.between.lock().unwrap());
            self.store.commit(between).await?;
            each(Listed::Again)?;
            self.store.list_each(kind, each).await
        }
        async fn commit(&self, ops: Vec<Op>) -> Result<u64, StoreError> {
            self.store.commit(ops).await
        }
        fn revision(&self) -> u64 {
            self.store.revision()
        }
        fn watch(&self) -> watch::Receiver<u64> {
            self.store.watch()
        }
    }

    /// A list that starts again partway holds the last pass only: each object once, and none
    /// deleted before it started again, whether the last pass starts with the same first name,
    /// after the names the first pass gave, or is empty.
    #[tokio::test]
    async fn a_list_started_again_holds_the_last_pass_only() {
        let delete = |names: &[&str]| -> Vec<Op> {
            names
                .iter()
                .map(|n| Op::Delete {
                    kind: Kind::Node,
                    name: n.to_string(),
                    expect: Expect::Any,
                })
                .collect()
        };
        for (between, expected) in [
            (Vec::new(), vec!["a", "b", "c", "d"]),
            (delete(&["a", "b", "c"]), vec!["d"]),
            (delete(&["a", "b", "c", "d"]), vec![]),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let s = StartsAgain {
                store: RedbStore::open(&dir.path().join("db.redb")).unwrap(),
                kind: Kind::Node,
                between: std::sync::Mutex::new(between),
            };
            let ops = ["a", "b", "c", "d"]
                .map(|n| put(Kind::Node, n, n, Expect::Absent))
                .to_vec();
            s.commit(ops).await.unwrap();
            assert_eq!(names(&s, Kind::Node).await, expected);
        }
    }

    #[tokio::test]
    async fn contract_embedded() {
        let dir = tempfile::tempdir().unwrap();
        let s = RedbStore::open(&dir.path().join("db.redb")).unwrap();
        contract(&s).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn contract_etcd() {
        let cluster = crate::etcd::test_cluster::Cluster::start(1);
        cluster.wait_leader().await;
        let s = crate::etcd::EtcdStore::connect(&crate::etcd::EtcdConfig {
            endpoints: cluster.endpoints(),
            prefix: "/contract/".into(),
            tls: None,
        })
        .await
        .unwrap();
        contract(&s).await;
        // Nothing outside the prefix but the commit markers.
        let mut c = etcd_client::Client::connect(cluster.endpoints(), None)
            .await
            .unwrap();
        let all = c
            .get("", Some(etcd_client::GetOptions::new().with_all_keys()))
            .await
            .unwrap();
        for kv in all.kvs() {
            let k = String::from_utf8_lossy(kv.key());
            assert!(
                k.starts_with("/contract/nodes/")
                    || k.starts_with("/contract/pools/")
                    || k.starts_with("/contract/_commits/"),
                "{k}"
            );
        }
    }

    #[tokio::test]
    async fn revisions_and_persistence() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.redb");
        {
            let s = RedbStore::open(&path).unwrap();
            assert_eq!(s.revision(), 0);
            let r1 = s
                .commit(vec![put(Kind::Node, "a", "1", Expect::Absent)])
                .await
                .unwrap();
            assert_eq!(r1, 1);
            s.commit(vec![
                put(Kind::Node, "b", "2", Expect::Any),
                put(Kind::Pool, "p", "3", Expect::Any),
            ])
            .await
            .unwrap();
            s.commit(vec![Op::Delete {
                kind: Kind::Node,
                name: "b".into(),
                expect: Expect::Any,
            }])
            .await
            .unwrap();
        }
        let s = RedbStore::open(&path).unwrap();
        assert_eq!(s.revision(), 3);
        assert_eq!(s.list(Kind::Node).await.unwrap().len(), 1);
        assert!(s.get(Kind::Node, "b").await.unwrap().is_none());
    }
}
