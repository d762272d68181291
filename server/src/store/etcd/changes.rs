//! The changes under the prefix, decoded, for a replica's fleet in memory to follow
//! ([`crate::app::App::start_following`]): every put and delete of an object, in revision order, a
//! revision's changes always together (the watch is opened without fragments, so etcd never
//! splits a revision; one answer may be as large as the largest transaction etcd accepts).
//!
//! A dropped stream (a member died, a network cut) is opened again on another member from the
//! last revision delivered; the link's state is published ([`Link`]) so that a replica cut off
//! from etcd says so. A compaction past that revision (the changes are gone) asks for a reload
//! ([`Batch::Reload`]).

use super::endpoints::Endpoints;
use super::keys::{to_u64, MAX_RESPONSE_BYTES, MAX_VALUE_BYTES};
use crate::store::{Batch, Change, Kind, Link, Versioned};
use etcd_client::{EventType, WatchOptions};
use std::sync::Weak;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// The pause before the stream is opened again after it failed.
const REOPEN_PAUSE: Duration = Duration::from_millis(200);
/// Batches waiting for the follower (the watch waits when it falls behind).
const QUEUE: usize = 64;

/// The object a key names, if it is one (the fence, markers and election keys are not).
fn object(prefix: &str, key: &[u8]) -> Option<(Kind, String)> {
    let rest = std::str::from_utf8(key.strip_prefix(prefix.as_bytes())?).ok()?;
    let (kind, name) = rest.split_once('/')?;
    let kind = Kind::ALL.into_iter().find(|k| k.as_str() == kind)?;
    Some((kind, name.to_string()))
}

/// Starts following the prefix after revision `from`; the receiver gets the batches and the
/// link's state. The task ends when the receiver is dropped.
pub fn spawn(
    endpoints: Endpoints,
    prefix: String,
    from: u64,
    revision: Weak<watch::Sender<u64>>,
) -> (mpsc::Receiver<Batch>, watch::Receiver<Link>) {
    let (tx, rx) = mpsc::channel(QUEUE);
    let (link_tx, link_rx) = watch::channel(Link::Up);
    tokio::spawn(follow(endpoints, prefix, from, tx, link_tx, revision));
    (rx, link_rx)
}

/// Moves the store's revision on (it only grows).
fn saw(revision: &Weak<watch::Sender<u64>>, r: u64) {
    if let Some(tx) = revision.upgrade() {
        tx.send_if_modified(|v| {
            let newer = r > *v;
            if newer {
                *v = r;
            }
            newer
        });
    }
}

fn down(link: &watch::Sender<Link>, reason: String) {
    link.send_if_modified(|l| match l {
        Link::Up => {
            tracing::warn!(reason = %reason, "the etcd watch is down; reopening");
            *l = Link::Down {
                since: crate::time::now(),
                reason,
            };
            true
        }
        Link::Down { reason: r, .. } => {
            *r = reason;
            false
        }
    });
}

async fn follow(
    endpoints: Endpoints,
    prefix: String,
    mut last: u64,
    tx: mpsc::Sender<Batch>,
    link: watch::Sender<Link>,
    revision: Weak<watch::Sender<u64>>,
) {
    loop {
        if tx.is_closed() {
            return;
        }
        let (member, client) = endpoints.client();
        let opened = client
            .watch_client()
            .max_decoding_message_size(MAX_RESPONSE_BYTES.saturating_mul(2))
            .watch(
                prefix.clone(),
                Some(
                    WatchOptions::new()
                        .with_prefix()
                        .with_start_revision(i64::try_from(last + 1).unwrap_or(i64::MAX)),
                ),
            )
            .await;
        let mut stream = match opened {
            Ok(s) => s,
            Err(e) => {
                down(&link, format!("cannot watch etcd: {e}"));
                endpoints.failed(member);
                tokio::time::sleep(REOPEN_PAUSE).await;
                continue;
            }
        };
        loop {
            let message = tokio::select! {
                m = stream.message() => m,
                // The follower is gone (the server stops).
                () = tx.closed() => return,
            };
            match message {
                Ok(Some(resp)) => {
                    if resp.canceled() {
                        if resp.compact_revision() > 0 {
                            tracing::info!(
                                from = last,
                                compacted = resp.compact_revision(),
                                "etcd: the changes since the last one seen were compacted away; reading everything again"
                            );
                            if tx.send(Batch::Reload).await.is_err() {
                                return;
                            }
                            // The reload reads at the current revision; follow from there.
                            last = last.max(to_u64(resp.compact_revision()).saturating_sub(1));
                        } else {
                            down(
                                &link,
                                format!("etcd cancelled the watch: {}", resp.cancel_reason()),
                            );
                        }
                        break;
                    }
                    if resp.created() || !resp.events().is_empty() {
                        // The watch answers: the member is reachable and has a leader (the
                        // connection requires one). (Not the probes' view: an idle watch may
                        // answer nothing more for a long time after it is created.)
                        link.send_if_modified(|l| {
                            let was = *l != Link::Up;
                            *l = Link::Up;
                            was
                        });
                    }
                    let mut changes = Vec::with_capacity(resp.events().len());
                    let mut newest = last;
                    for e in resp.events() {
                        let Some(kv) = e.kv() else { continue };
                        let revision = to_u64(kv.mod_revision());
                        newest = newest.max(revision);
                        let Some((kind, name)) = object(&prefix, kv.key()) else {
                            continue;
                        };
                        let value = match e.event_type() {
                            EventType::Delete => None,
                            EventType::Put if kv.value().len() > MAX_VALUE_BYTES => {
                                tracing::error!(%kind, %name, bytes = kv.value().len(), "etcd: an object over the size limit was written under the prefix; ignored");
                                continue;
                            }
                            EventType::Put => Some(Versioned {
                                value: kv.value().to_vec(),
                                create_revision: to_u64(kv.create_revision()),
                                mod_revision: revision,
                            }),
                        };
                        changes.push(Change {
                            kind,
                            name,
                            value,
                            revision,
                        });
                    }
                    if newest > last {
                        last = newest;
                        saw(&revision, newest);
                        let batch = Batch::Changes {
                            revision: newest,
                            changes,
                        };
                        if tx.send(batch).await.is_err() {
                            return;
                        }
                    }
                }
                Ok(None) => {
                    down(&link, "the etcd watch ended".into());
                    endpoints.failed(member);
                    break;
                }
                Err(e) => {
                    down(&link, format!("the etcd watch failed: {e}"));
                    endpoints.failed(member);
                    break;
                }
            }
        }
        tokio::time::sleep(REOPEN_PAUSE).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_objects_are_changes() {
        assert_eq!(
            object("/h/", b"/h/nodes/n1"),
            Some((Kind::Node, "n1".into()))
        );
        assert_eq!(
            object("/h/", b"/h/reports/n1"),
            Some((Kind::Report, "n1".into()))
        );
        assert_eq!(object("/h/", b"/h/_fence"), None);
        assert_eq!(object("/h/", b"/h/_commits/abc"), None);
        assert_eq!(object("/h/", b"/h/_server/123"), None);
        assert_eq!(object("/h/", b"/other/nodes/n1"), None);
        assert_eq!(object("/h/", b"/h/unknown/n1"), None);
    }
}
