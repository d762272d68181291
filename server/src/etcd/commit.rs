//! A commit as one etcd transaction, exactly once.
//!
//! The compares are the ops' preconditions and one more: this store's commit marker
//! (`<prefix>_commits/<instance>`) still has the `mod_revision` its last commit gave it. The
//! transaction writes the ops and a new marker value (a commit id). When the answer is lost (a
//! member died, a timeout), the same transaction is sent again, to another member: if the first
//! attempt was applied, the marker compare fails and the marker holds this commit's id, so the
//! commit is reported done at the revision the marker records; if not, the retry applies it. A
//! late copy of the first attempt can never apply after that, since the marker moved.

use super::endpoints::Endpoints;
use super::{hint, to_u64, EtcdError, MAX_VALUE_BYTES};
use crate::store::{Expect, Op, StoreError};
use etcd_client::{
    Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp, TxnOpResponse, TxnResponse,
};
use tokio::sync::Mutex;

/// Where the markers live, under the prefix.
pub const MARKERS: &str = "_commits/";

/// This store's marker.
#[derive(Debug)]
pub struct Marker {
    key: String,
    instance: String,
    /// The marker's `mod_revision` after this store's last commit (0: not written yet) and the
    /// number of commits made; held across a commit, so one store commits one at a time.
    state: Mutex<(i64, u64)>,
}

impl Marker {
    /// A new marker with a random instance id.
    pub fn new(prefix: &str) -> Result<Marker, EtcdError> {
        let instance = crate::pki::new_token("")
            .map_err(|e| EtcdError::Config(format!("cannot make an instance id: {e}")))?;
        let instance = instance[..24].to_string();
        Ok(Marker {
            key: format!("{prefix}{MARKERS}{instance}"),
            instance,
            state: Mutex::new((0, 0)),
        })
    }

    /// Deletes every other marker under the prefix.
    pub async fn remove_others(&self, endpoints: &Endpoints) -> Result<(), EtcdError> {
        let dir = self.key[..self.key.len() - self.instance.len()].to_string();
        let own = self.key.clone();
        let end = super::prefix_end(dir.as_bytes());
        // Below our key and above it: two ranges, one transaction.
        let mut after = own.clone().into_bytes();
        after.push(0);
        endpoints
            .call("remove old commit markers", move |c| {
                let txn = Txn::new().and_then([
                    TxnOp::delete(
                        dir.clone(),
                        Some(DeleteOptions::new().with_range(own.clone())),
                    ),
                    TxnOp::delete(
                        after.clone(),
                        Some(DeleteOptions::new().with_range(end.clone())),
                    ),
                ]);
                async move { c.kv_client().txn(txn).await }
            })
            .await?;
        Ok(())
    }

    /// Commits `ops` (not empty); returns the revision.
    pub async fn commit(
        &self,
        endpoints: &Endpoints,
        prefix: &str,
        ops: Vec<Op>,
    ) -> Result<u64, StoreError> {
        let key =
            |kind: crate::store::Kind, name: &str| format!("{prefix}{}/{name}", kind.as_str());
        let mut compares = Vec::new();
        let mut then = Vec::new();
        let mut checks = Vec::new();
        for op in &ops {
            let (kind, name, expect) = match op {
                Op::Put {
                    kind,
                    name,
                    value,
                    expect,
                } => {
                    if value.len() > MAX_VALUE_BYTES {
                        return Err(StoreError::Backend(format!(
                            "{kind}/{name} is {} bytes, more than the {MAX_VALUE_BYTES} an object may have",
                            value.len()
                        )));
                    }
                    then.push(TxnOp::put(key(*kind, name), value.clone(), None));
                    (*kind, name, *expect)
                }
                Op::Delete { kind, name, expect } => {
                    then.push(TxnOp::delete(key(*kind, name), None));
                    (*kind, name, *expect)
                }
            };
            match expect {
                Expect::Any => continue,
                Expect::Absent => compares.push(Compare::create_revision(
                    key(kind, name),
                    CompareOp::Equal,
                    0,
                )),
                Expect::Revision(r) => compares.push(Compare::mod_revision(
                    key(kind, name),
                    CompareOp::Equal,
                    i64::try_from(r).unwrap_or(i64::MAX),
                )),
            }
            checks.push((kind, name.clone(), expect));
        }
        let mut state = self.state.lock().await;
        // Two rounds: the second only after adopting the marker of an earlier commit of this
        // store that was applied although its caller got an error (every attempt lost).
        for round in 0..2 {
            // The id is used up whatever happens: an attempt whose outcome is unknown must never
            // share its id with a later commit.
            state.1 += 1;
            let (marker_rev, count) = *state;
            let id = format!("{}-{count}", self.instance);
            let mut when = compares.clone();
            when.push(Compare::mod_revision(
                self.key.clone(),
                CompareOp::Equal,
                marker_rev,
            ));
            let mut and_then = then.clone();
            and_then.push(TxnOp::put(self.key.clone(), id.clone(), None));
            let mut otherwise = vec![TxnOp::get(self.key.clone(), None)];
            for (kind, name, _) in &checks {
                otherwise.push(TxnOp::get(
                    key(*kind, name),
                    Some(GetOptions::new().with_keys_only()),
                ));
            }
            let txn = Txn::new().when(when).and_then(and_then).or_else(otherwise);
            let resp: TxnResponse = endpoints
                .call("commit", move |c| {
                    let txn = txn.clone();
                    async move { c.kv_client().txn(txn).await }
                })
                .await
                .map_err(|e| match e {
                    EtcdError::Request {
                        what,
                        endpoint,
                        message,
                    } => EtcdError::Request {
                        what,
                        endpoint,
                        message: hint(message),
                    },
                    e => e,
                })?;
            let revision = to_u64(resp.header().map(|h| h.revision()).unwrap_or(0));
            if resp.succeeded() {
                state.0 = i64::try_from(revision).unwrap_or(i64::MAX);
                return Ok(revision);
            }
            let mut answers = resp.op_responses().into_iter();
            let marker = match answers.next() {
                Some(TxnOpResponse::Get(g)) => g.kvs().first().cloned(),
                _ => None,
            };
            let mut adopted = false;
            if let Some(m) = &marker {
                if m.value() == id.as_bytes() {
                    // An earlier attempt of this very commit was applied; its answer was lost.
                    state.0 = m.mod_revision();
                    return Ok(to_u64(m.mod_revision()));
                }
                if m.value()
                    .starts_with(format!("{}-", self.instance).as_bytes())
                {
                    // An earlier commit of this store was applied after all.
                    state.0 = m.mod_revision();
                    adopted = true;
                }
            }
            for (kind, name, expect) in &checks {
                let found = match answers.next() {
                    Some(TxnOpResponse::Get(g)) => {
                        g.kvs().first().map(|kv| to_u64(kv.mod_revision()))
                    }
                    _ => None,
                };
                let ok = match expect {
                    Expect::Any => true,
                    Expect::Absent => found.is_none(),
                    Expect::Revision(r) => found == Some(*r),
                };
                if !ok {
                    return Err(StoreError::Conflict {
                        kind: *kind,
                        name: name.clone(),
                        expected: *expect,
                        found,
                    });
                }
            }
            if !(adopted && round == 0) {
                return Err(StoreError::Backend(format!(
                    "etcd: the commit marker {} was changed or removed by someone else (found revision {:?}, expected {marker_rev}): another hearth-server has taken this prefix",
                    self.key,
                    marker.map(|m| m.mod_revision())
                )));
            }
        }
        Err(StoreError::Backend(
            "etcd: the commit marker moved twice under one commit".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etcd::test_cluster::Cluster;
    use crate::etcd::{EtcdConfig, EtcdStore};
    use crate::store::{Kind, Store};

    fn put(name: &str, expect: Expect) -> Op {
        Op::Put {
            kind: Kind::Node,
            name: name.into(),
            value: b"v".to_vec(),
            expect,
        }
    }

    /// A commit whose caller got an error but which etcd applied (every answer lost) leaves the
    /// marker ahead of what the store knows: the next commit recognises the marker as its own
    /// store's and goes through, and a precondition it breaks is still reported as a conflict.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_applied_behind_the_stores_back_is_adopted() {
        let cluster = Cluster::start(1);
        cluster.wait_leader().await;
        let store = EtcdStore::connect(&EtcdConfig {
            endpoints: cluster.endpoints(),
            prefix: "/m/".into(),
            tls: None,
        })
        .await
        .unwrap();
        store.commit(vec![put("a", Expect::Absent)]).await.unwrap();
        // What an applied commit with a lost answer leaves: its id used up, the marker and its
        // object written.
        let lost_id = {
            let mut state = store.commits.state.lock().await;
            state.1 += 1;
            format!("{}-{}", store.commits.instance, state.1)
        };
        let mut c = etcd_client::Client::connect(cluster.endpoints(), None)
            .await
            .unwrap();
        let txn = Txn::new().and_then([
            TxnOp::put(store.commits.key.clone(), lost_id, None),
            TxnOp::put("/m/nodes/lost", "v", None),
        ]);
        c.txn(txn).await.unwrap();
        // Breaks a precondition: a conflict, not a backend error.
        let e = store
            .commit(vec![put("lost", Expect::Absent)])
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Conflict { .. }), "{e}");
        // Breaks none: applied.
        let r = store.commit(vec![put("b", Expect::Absent)]).await.unwrap();
        assert_eq!(
            store
                .get(Kind::Node, "b")
                .await
                .unwrap()
                .unwrap()
                .mod_revision,
            r
        );
        // Someone else's marker value (another process on the prefix): refused, nothing written.
        c.put(store.commits.key.clone(), "stranger-1", None)
            .await
            .unwrap();
        let e = store
            .commit(vec![put("c", Expect::Absent)])
            .await
            .unwrap_err();
        assert!(e.to_string().contains("another hearth-server"), "{e}");
        assert!(store.get(Kind::Node, "c").await.unwrap().is_none());
    }
}
