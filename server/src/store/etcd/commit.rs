//! A commit as one etcd transaction, exactly once.
//!
//! The compares are the ops' preconditions and one more: this store's commit marker
//! (`<prefix>_commits/<instance>`) still has the `mod_revision` its last commit gave it. The
//! transaction writes the ops and a new marker value (a commit id). When the answer is lost (a
//! member died, a timeout), the same transaction is sent again, to another member: if the first
//! attempt was applied, the marker compare fails and the marker holds this commit's id, so the
//! commit is reported done at the revision the marker records; if not, the retry applies it. A
//! late copy of the first attempt can never apply after that, since the marker moved.
//!
//! Each server (replica) has its own marker, attached to its session's lease once it has one
//! ([`Marker::renew`]): the markers of replicas that are gone disappear with their leases.
//!
//! A fenced commit ([`crate::store::Store::commit_fenced`]) also compares and writes the fence
//! key (`<prefix>_fence`): it applies only if no fenced commit was made after the revision its
//! change was computed on, so replicas decide in turn as one server would.

use super::endpoints::Endpoints;
use super::error::{hint, EtcdError};
use super::keys::{to_u64, MAX_VALUE_BYTES};
use crate::store::{Expect, Op, StoreError};
use etcd_client::{
    Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse,
    TxnResponse,
};
use tokio::sync::Mutex;

/// Where the markers live, under the prefix.
pub const MARKERS: &str = "_commits/";
/// The fence key, under the prefix.
pub const FENCE: &str = "_fence";

/// What a marker is at one time.
#[derive(Debug)]
pub(super) struct MarkerState {
    pub(super) key: String,
    pub(super) instance: String,
    /// The marker's `mod_revision` after this store's last commit (0: not written yet).
    pub(super) rev: i64,
    /// The number of commit ids used.
    pub(super) count: u64,
    /// The lease the marker is written with (0: none).
    lease: i64,
}

/// This store's marker.
#[derive(Debug)]
pub struct Marker {
    prefix: String,
    /// Held across a commit, so one store commits one at a time.
    pub(super) state: Mutex<MarkerState>,
}

fn new_instance(prefix: &str) -> Result<(String, String), EtcdError> {
    let instance = crate::pki::new_token("")
        .map_err(|e| EtcdError::Config(format!("cannot make an instance id: {e}")))?;
    let instance = instance[..24].to_string();
    Ok((format!("{prefix}{MARKERS}{instance}"), instance))
}

impl Marker {
    /// A new marker with a random instance id.
    pub fn new(prefix: &str) -> Result<Marker, EtcdError> {
        let (key, instance) = new_instance(prefix)?;
        Ok(Marker {
            prefix: prefix.to_string(),
            state: Mutex::new(MarkerState {
                key,
                instance,
                rev: 0,
                count: 0,
                lease: 0,
            }),
        })
    }

    /// Starts a new marker (a new instance id) written with `lease` from the next commit on:
    /// after a session's lease was granted, or granted again after it expired (the old marker
    /// went with the old lease).
    pub async fn renew(&self, lease: i64) -> Result<(), EtcdError> {
        let (key, instance) = new_instance(&self.prefix)?;
        let mut state = self.state.lock().await;
        *state = MarkerState {
            key,
            instance,
            rev: 0,
            count: 0,
            lease,
        };
        Ok(())
    }

    /// Deletes the markers written without a lease under the prefix (by servers before
    /// replicas: markers with a lease go with it), except this store's own.
    pub async fn remove_unleased(&self, endpoints: &Endpoints) -> Result<(), EtcdError> {
        let own = self.state.lock().await.key.clone();
        let dir = format!("{}{MARKERS}", self.prefix);
        let end = super::keys::prefix_end(dir.as_bytes());
        let resp = {
            let (dir, end) = (dir.clone(), end.clone());
            endpoints
                .call("list commit markers", move |mut c| {
                    let (dir, end) = (dir.clone(), end.clone());
                    async move {
                        c.get(
                            dir,
                            Some(GetOptions::new().with_range(end).with_limit(10_000)),
                        )
                        .await
                    }
                })
                .await?
        };
        let stale: Vec<(Vec<u8>, i64)> = resp
            .kvs()
            .iter()
            .filter(|kv| kv.lease() == 0 && kv.key() != own.as_bytes())
            .map(|kv| (kv.key().to_vec(), kv.mod_revision()))
            .collect();
        for (key, rev) in stale {
            // Only if it did not change meanwhile.
            endpoints
                .call("remove an old commit marker", move |c| {
                    let txn = Txn::new()
                        .when([Compare::mod_revision(key.clone(), CompareOp::Equal, rev)])
                        .and_then([TxnOp::delete(key.clone(), None::<DeleteOptions>)]);
                    async move { c.kv_client().txn(txn).await }
                })
                .await?;
        }
        Ok(())
    }

    /// Commits `ops` (not empty); returns the revision. With `fence`, only if no fenced commit
    /// was made after that revision ([`StoreError::Behind`] otherwise).
    pub async fn commit(
        &self,
        endpoints: &Endpoints,
        ops: Vec<Op>,
        fence: Option<u64>,
    ) -> Result<u64, StoreError> {
        let prefix = &self.prefix;
        let key =
            |kind: crate::store::Kind, name: &str| format!("{prefix}{}/{name}", kind.as_str());
        let fence_key = format!("{prefix}{FENCE}");
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
                    then.push(TxnOp::put(key(*kind, name), value.to_vec(), None));
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
        if let Some(based_on) = fence {
            // No fenced commit after `based_on`: the fence key's last change is at or before it.
            compares.push(Compare::mod_revision(
                fence_key.clone(),
                CompareOp::Less,
                i64::try_from(based_on.saturating_add(1)).unwrap_or(i64::MAX),
            ));
        }
        let mut state = self.state.lock().await;
        // Two rounds: the second only after adopting the marker of an earlier commit of this
        // store that was applied although its caller got an error (every attempt lost).
        for round in 0..2 {
            // The id is used up whatever happens: an attempt whose outcome is unknown must never
            // share its id with a later commit.
            state.count += 1;
            let (marker_rev, marker_key, lease) = (state.rev, state.key.clone(), state.lease);
            let id = format!("{}-{}", state.instance, state.count);
            let mut when = compares.clone();
            when.push(Compare::mod_revision(
                marker_key.clone(),
                CompareOp::Equal,
                marker_rev,
            ));
            let mut and_then = then.clone();
            let put_options = (lease != 0).then(|| PutOptions::new().with_lease(lease));
            and_then.push(TxnOp::put(marker_key.clone(), id.clone(), put_options));
            if fence.is_some() {
                and_then.push(TxnOp::put(fence_key.clone(), id.clone(), None));
            }
            let mut otherwise = vec![
                TxnOp::get(marker_key.clone(), None),
                TxnOp::get(fence_key.clone(), Some(GetOptions::new().with_keys_only())),
            ];
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
                        message: if message.contains("requested lease not found") {
                            format!("{message} (this server's etcd session expired: it was cut off from etcd for longer than the session's lease; it takes a new one and the change can be made again)")
                        } else {
                            hint(message)
                        },
                    },
                    e => e,
                })?;
            let revision = to_u64(resp.header().map(|h| h.revision()).unwrap_or(0));
            if resp.succeeded() {
                state.rev = i64::try_from(revision).unwrap_or(i64::MAX);
                return Ok(revision);
            }
            let mut answers = resp.op_responses().into_iter();
            let mut next_kv = || match answers.next() {
                Some(TxnOpResponse::Get(g)) => Some(g.kvs().first().cloned()),
                _ => None,
            };
            let marker = next_kv().flatten();
            let fenced_at = next_kv().flatten().map(|kv| to_u64(kv.mod_revision()));
            let mut adopted = false;
            if let Some(m) = &marker {
                if m.value() == id.as_bytes() {
                    // An earlier attempt of this very commit was applied; its answer was lost.
                    state.rev = m.mod_revision();
                    return Ok(to_u64(m.mod_revision()));
                }
                if m.value()
                    .starts_with(format!("{}-", state.instance).as_bytes())
                {
                    // An earlier commit of this store was applied after all.
                    state.rev = m.mod_revision();
                    adopted = true;
                }
            }
            if let (Some(based_on), Some(at)) = (fence, fenced_at) {
                if at > based_on {
                    return Err(StoreError::Behind { revision: at });
                }
            }
            for (kind, name, expect) in &checks {
                let found = next_kv().flatten().map(|kv| to_u64(kv.mod_revision()));
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
                    "etcd: the commit marker {marker_key} was changed or removed by someone else (found revision {:?}, expected {marker_rev}): another process writes with this server's marker, or the marker's lease expired",
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
    use crate::store::etcd::test_cluster::Cluster;
    use crate::store::etcd::{EtcdConfig, EtcdStore};
    use crate::store::{Kind, Store};

    fn put(name: &str, expect: Expect) -> Op {
        Op::Put {
            kind: Kind::Node,
            name: name.into(),
            value: bytes::Bytes::from_static(b"v"),
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
        let (lost_id, marker_key) = {
            let mut state = store.commits.state.lock().await;
            state.count += 1;
            (
                format!("{}-{}", state.instance, state.count),
                state.key.clone(),
            )
        };
        let mut c = etcd_client::Client::connect(cluster.endpoints(), None)
            .await
            .unwrap();
        let txn = Txn::new().and_then([
            TxnOp::put(marker_key.clone(), lost_id, None),
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
        c.put(marker_key.clone(), "stranger-1", None).await.unwrap();
        let e = store
            .commit(vec![put("c", Expect::Absent)])
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("changed or removed by someone else"),
            "{e}"
        );
        assert!(store.get(Kind::Node, "c").await.unwrap().is_none());
    }

    /// Two stores on one prefix (two replicas) decide on the same revision: the first fenced
    /// commit applies, the second is told it is behind (even though it writes another object),
    /// and applies once computed again on the newer revision.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fenced_commit_made_on_an_old_revision_is_behind() {
        let cluster = Cluster::start(1);
        cluster.wait_leader().await;
        let config = EtcdConfig {
            endpoints: cluster.endpoints(),
            prefix: "/f/".into(),
            tls: None,
        };
        let (a, b) = (
            EtcdStore::connect(&config).await.unwrap(),
            EtcdStore::connect(&config).await.unwrap(),
        );
        let base = a
            .commit_fenced(vec![put("x", Expect::Absent)], 0)
            .await
            .unwrap();
        let first = a
            .commit_fenced(vec![put("a", Expect::Absent)], base)
            .await
            .unwrap();
        let e = b
            .commit_fenced(vec![put("b", Expect::Absent)], base)
            .await
            .unwrap_err();
        assert!(
            matches!(e, StoreError::Behind { revision } if revision == first),
            "{e}"
        );
        assert!(b.get(Kind::Node, "b").await.unwrap().is_none());
        b.commit_fenced(vec![put("b", Expect::Absent)], first)
            .await
            .unwrap();
        // Unfenced commits (a single server's) do not take part.
        a.commit(vec![put("c", Expect::Absent)]).await.unwrap();
    }
}
