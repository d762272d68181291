//! Follows an etcd prefix watch and publishes the revision of each change under the prefix,
//! whichever client made it. A dropped stream (a member died) is opened again on another member
//! from the last revision seen; a compaction past that revision (the events are gone) publishes
//! the current revision, so waiters wake and read again, and watches on from there.

use super::endpoints::Endpoints;
use super::keys::{to_u64, MAX_RESPONSE_BYTES};
use etcd_client::{GetOptions, WatchOptions};
use std::sync::Weak;
use std::time::Duration;
use tokio::sync::watch;

/// The pause before a watch is opened again after it failed.
const REOPEN_PAUSE: Duration = Duration::from_millis(200);

fn publish(tx: &watch::Sender<u64>, revision: u64) {
    tx.send_if_modified(|r| {
        if revision > *r {
            *r = revision;
            true
        } else {
            false
        }
    });
}

/// Runs until the store (the sender's owner) is dropped.
pub async fn follow(
    endpoints: Endpoints,
    prefix: String,
    mut last: u64,
    tx: Weak<watch::Sender<u64>>,
) {
    loop {
        let (member, client) = endpoints.client();
        let opened = client
            .watch_client()
            .max_decoding_message_size(MAX_RESPONSE_BYTES)
            .watch(
                prefix.clone(),
                Some(
                    WatchOptions::new()
                        .with_prefix()
                        // A large commit's events come in pieces no larger than etcd's request
                        // limit, never in one answer over MAX_RESPONSE_BYTES (which would fail
                        // the stream at the same revision again and again).
                        .with_fragment()
                        .with_start_revision(i64::try_from(last + 1).unwrap_or(i64::MAX)),
                ),
            )
            .await;
        let mut stream = match opened {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "etcd watch: cannot open, trying another member");
                endpoints.failed(member);
                tokio::time::sleep(REOPEN_PAUSE).await;
                continue;
            }
        };
        loop {
            match stream.message().await {
                Ok(Some(resp)) => {
                    let Some(tx) = tx.upgrade() else { return };
                    if resp.canceled() {
                        if resp.compact_revision() > 0 {
                            // The events since `last` were compacted away: catch up with the
                            // current revision (waiters read the store again) and go on.
                            tracing::info!(
                                from = last,
                                compacted = resp.compact_revision(),
                                "etcd watch: history compacted, resynchronising"
                            );
                            if let Ok(current) = current_revision(&endpoints, &prefix).await {
                                last = last.max(current);
                                publish(&tx, last);
                            }
                        } else {
                            tracing::debug!(reason = resp.cancel_reason(), "etcd watch cancelled");
                        }
                        break;
                    }
                    let newest = resp
                        .events()
                        .iter()
                        .filter_map(|e| e.kv().map(|kv| to_u64(kv.mod_revision())))
                        .max();
                    if let Some(r) = newest {
                        last = last.max(r);
                        publish(&tx, last);
                    }
                }
                Ok(None) | Err(_) => {
                    if tx.strong_count() == 0 {
                        return;
                    }
                    tracing::debug!(from = last, "etcd watch: stream ended, reopening");
                    endpoints.failed(member);
                    break;
                }
            }
        }
        tokio::time::sleep(REOPEN_PAUSE).await;
    }
}

async fn current_revision(
    endpoints: &Endpoints,
    prefix: &str,
) -> Result<u64, super::error::EtcdError> {
    let key = prefix.to_string();
    let resp = endpoints
        .call("read the revision", move |mut c| {
            let key = key.clone();
            async move { c.get(key, Some(GetOptions::new().with_count_only())).await }
        })
        .await?;
    Ok(to_u64(resp.header().map(|h| h.revision()).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::etcd::test_cluster::Cluster;
    use std::sync::Arc;

    /// A watch that starts behind a compaction (as one does when it reopens after a long
    /// disconnection) publishes the current revision, then goes on ticking on new commits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_watch_behind_a_compaction_catches_up_and_goes_on() {
        let cluster = Cluster::start(1);
        cluster.wait_leader().await;
        let mut c = etcd_client::Client::connect(cluster.endpoints(), None)
            .await
            .unwrap();
        for i in 0..5 {
            c.put(format!("/w/nodes/n{i}"), "x", None).await.unwrap();
        }
        let current = c
            .get("/w/", None)
            .await
            .unwrap()
            .header()
            .unwrap()
            .revision();
        c.compact(current, None).await.unwrap();
        let endpoints =
            Endpoints::connect(&cluster.endpoints(), etcd_client::ConnectOptions::new())
                .await
                .unwrap();
        let tx = Arc::new(watch::channel(1u64).0);
        let mut rx = tx.subscribe();
        let task = tokio::spawn(follow(endpoints, "/w/".into(), 1, Arc::downgrade(&tx)));
        let wait = |rx: &mut watch::Receiver<u64>, r: u64| {
            let mut rx = rx.clone();
            async move {
                tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|v| *v >= r))
                    .await
                    .expect("the watch reaches the revision")
                    .map(|v| *v)
                    .unwrap()
            }
        };
        assert_eq!(wait(&mut rx, to_u64(current)).await, to_u64(current));
        let next = c.put("/w/nodes/later", "y", None).await.unwrap();
        let next = to_u64(next.header().unwrap().revision());
        assert!(wait(&mut rx, next).await >= next);
        drop(tx);
        task.abort();
    }
}
