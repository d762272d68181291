//! The server's hold on its prefix: hearth-server keeps its fleet in memory and assumes it is
//! the only writer, so a server on etcd wins an etcd election (`<prefix>_server`, backed by a
//! lease of [`LOCK_TTL`] seconds kept alive while it runs) before it serves. A second server on
//! the same prefix waits [`CAMPAIGN_WAIT`] (so that a crashed server's lock expires and its
//! restart goes through) and then refuses to start, naming the one that holds it. Replicas are
//! not supported yet.

use super::endpoints::{retryable, Endpoints, MAX_ATTEMPTS};
use super::{EtcdError, EtcdStore};
use etcd_client::{GetOptions, SortOrder, SortTarget};
use std::time::Duration;
use tokio::sync::watch;

/// The lock's lease time: a crashed server's lock is released this long after it died.
pub const LOCK_TTL: i64 = 10;
/// How long a start waits for the lock before it refuses: a little longer than the lease, so
/// that the lock of a server that crashed (SIGKILL, power cut) has expired by then and a restart
/// goes through, while a live holder keeps it.
pub const CAMPAIGN_WAIT: Duration = Duration::from_secs(LOCK_TTL as u64 + 2);

/// A held lock. Dropping it stops the keep-alive (the lock goes away within [`LOCK_TTL`]);
/// [`ServerLock::release`] gives it up at once.
#[derive(Debug)]
pub struct ServerLock {
    endpoints: Endpoints,
    lease: i64,
    lost: watch::Receiver<Option<String>>,
    keeper: tokio::task::JoinHandle<()>,
}

impl Drop for ServerLock {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

/// The election's name.
pub fn election_name(prefix: &str) -> String {
    format!("{prefix}_server")
}

/// Who holds the election (the value of its oldest candidate), if anyone.
async fn holder(endpoints: &Endpoints, name: &str) -> Result<Option<String>, EtcdError> {
    let key = format!("{name}/");
    let resp = endpoints
        .call("read the server lock", move |mut c| {
            let key = key.clone();
            async move {
                c.get(
                    key,
                    Some(
                        GetOptions::new()
                            .with_prefix()
                            .with_sort(SortTarget::Create, SortOrder::Ascend)
                            .with_limit(1),
                    ),
                )
                .await
            }
        })
        .await?;
    Ok(resp.kvs().first().map(|kv| {
        let v = String::from_utf8_lossy(kv.value());
        // It is shown to people: printable and short.
        v.chars()
            .filter(|c| !c.is_control())
            .take(512)
            .collect::<String>()
    }))
}

impl ServerLock {
    /// Takes the lock on `store`'s prefix for `who` (a description shown to a second server), or
    /// fails with [`EtcdError::Held`] naming the holder.
    pub async fn acquire(store: &EtcdStore, who: &str) -> Result<ServerLock, EtcdError> {
        let endpoints = store.endpoints().clone();
        let prefix = store.prefix().to_string();
        let name = election_name(&prefix);
        let held = |holder: String| EtcdError::Held {
            prefix: prefix.clone(),
            holder,
            ttl: LOCK_TTL,
        };
        if let Some(h) = holder(&endpoints, &name).await? {
            tracing::warn!(
                holder = %h,
                "etcd prefix {prefix} is held: waiting up to {} s for the lock (a crashed server's expires within {LOCK_TTL} s)",
                CAMPAIGN_WAIT.as_secs()
            );
        }
        let lease = endpoints
            .call("grant the lock's lease", |mut c| async move {
                c.lease_grant(LOCK_TTL, None).await
            })
            .await?
            .id();
        let (lost_tx, lost) = watch::channel(None);
        let keeper = tokio::spawn(keep_alive(endpoints.clone(), lease, lost_tx));
        let lock = ServerLock {
            endpoints: endpoints.clone(),
            lease,
            lost,
            keeper,
        };
        let mut last = String::new();
        for _ in 0..MAX_ATTEMPTS {
            let (member, mut client) = endpoints.client();
            match tokio::time::timeout(
                CAMPAIGN_WAIT,
                client.campaign(name.clone(), who.to_string(), lease),
            )
            .await
            {
                Ok(Ok(_)) => return Ok(lock),
                Ok(Err(e)) if retryable(&e) => {
                    last = e.to_string();
                    endpoints.failed(member);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Ok(Err(e)) => {
                    lock.release().await;
                    return Err(EtcdError::Request {
                        what: "take the server lock".into(),
                        endpoint: endpoints.urls()[member].clone(),
                        message: e.to_string(),
                    });
                }
                Err(_) => {
                    // Somebody else holds it and is alive.
                    lock.release().await;
                    let h = holder(&endpoints, &name)
                        .await?
                        .unwrap_or_else(|| "another server (it has just stopped)".into());
                    return Err(held(h));
                }
            }
        }
        lock.release().await;
        Err(EtcdError::Unavailable {
            what: "take the server lock".into(),
            attempts: MAX_ATTEMPTS,
            last,
        })
    }

    /// Resolves when the lock is lost (its lease expired: etcd was out of reach for longer than
    /// [`LOCK_TTL`]), with the reason.
    pub fn lost(&self) -> watch::Receiver<Option<String>> {
        self.lost.clone()
    }

    /// Gives the lock up now (revokes its lease).
    pub async fn release(self) {
        self.keeper.abort();
        let lease = self.lease;
        let _ = self
            .endpoints
            .call("release the server lock", move |mut c| async move {
                c.lease_revoke(lease).await
            })
            .await;
    }
}

/// Keeps the lease alive (every third of its time) on whichever member answers; reports when
/// the lease is gone or could not be renewed for its whole time.
async fn keep_alive(endpoints: Endpoints, lease: i64, lost: watch::Sender<Option<String>>) {
    let every = Duration::from_secs((LOCK_TTL as u64 / 3).max(1));
    let mut renewed = tokio::time::Instant::now();
    loop {
        let (member, mut client) = endpoints.client();
        let stream = tokio::time::timeout(every, client.lease_keep_alive(lease)).await;
        let (mut keeper, mut answers) = match stream {
            Ok(Ok(s)) => s,
            _ => {
                endpoints.failed(member);
                if renewed.elapsed() > Duration::from_secs(LOCK_TTL as u64) {
                    let _ = lost.send(Some(format!(
                        "the etcd lock's lease could not be renewed for {LOCK_TTL} s"
                    )));
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        loop {
            let sent = keeper.keep_alive().await;
            let answer = match sent {
                Ok(()) => tokio::time::timeout(every, answers.message()).await,
                Err(_) => break,
            };
            match answer {
                Ok(Ok(Some(a))) if a.ttl() > 0 => renewed = tokio::time::Instant::now(),
                Ok(Ok(Some(_))) => {
                    let _ = lost.send(Some(format!(
                        "the etcd lock's lease {lease:x} expired (etcd was out of reach for more than {LOCK_TTL} s)"
                    )));
                    return;
                }
                _ => break,
            }
            tokio::time::sleep(every).await;
        }
        endpoints.failed(member);
        if renewed.elapsed() > Duration::from_secs(LOCK_TTL as u64) {
            let _ = lost.send(Some(format!(
                "the etcd lock's lease could not be renewed for {LOCK_TTL} s"
            )));
            return;
        }
    }
}
