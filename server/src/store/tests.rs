//! What every store promises, run against the embedded store and a real etcd, and the stores
//! the other modules' tests use.

use super::*;
use tokio::sync::watch;

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
    let cluster = crate::store::etcd::test_cluster::Cluster::start(1);
    cluster.wait_leader().await;
    let s = crate::store::etcd::EtcdStore::connect(&crate::store::etcd::EtcdConfig {
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
