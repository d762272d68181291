//! A replica's session with etcd and its campaign for the controller role.
//!
//! - **Session**: a lease of [`SESSION_TTL`] seconds kept alive on whichever member answers.
//!   The replica's commit marker is written with it (a replica that is gone leaves no marker
//!   behind). When the lease is lost (etcd out of reach for longer than its time), the replica
//!   says so, takes a new lease as soon as etcd answers again and starts a new marker.
//! - **Controller role**: every replica campaigns in the election `<prefix>_controller` with its
//!   session's lease; the one elected holds the role (the periodic reconcile: silent nodes,
//!   maintenance windows opening, garbage collection) until its lease goes, when the next
//!   candidate is elected: within [`SESSION_TTL`] of a replica's death.
//!
//! Replicas do not need the role to be correct: every change is a fenced commit
//! ([`crate::store::Store::commit_fenced`]). The role only keeps the periodic work to one replica.

use super::endpoints::{retryable, Endpoints};
use super::error::EtcdError;
use super::EtcdStore;
use etcd_client::{GetOptions, SortOrder, SortTarget};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The session lease's time: a dead replica's marker and candidacy go this long after it died.
pub const SESSION_TTL: i64 = 10;

/// The session's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionState {
    /// Held: the lease id.
    Live(i64),
    /// No lease (etcd out of reach): why, since when (Unix seconds).
    Lost {
        /// Why.
        reason: String,
        /// Since when.
        since: u64,
    },
}

/// What this replica knows of the controller role.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Role {
    /// Whether this replica holds it.
    pub held: bool,
    /// Who holds it, as that replica describes itself (None: unknown).
    pub holder: Option<String>,
}

/// A replica's session and campaign; dropping it stops both (the lease then expires).
#[derive(Debug)]
pub struct Session {
    state: watch::Receiver<SessionState>,
    role: watch::Receiver<Role>,
    endpoints: Endpoints,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The election's name.
pub fn election_name(prefix: &str) -> String {
    format!("{prefix}_controller")
}

async fn grant(endpoints: &Endpoints) -> Result<i64, EtcdError> {
    Ok(endpoints
        .call("grant the session's lease", |mut c| async move {
            c.lease_grant(SESSION_TTL, None).await
        })
        .await?
        .id())
}

impl Session {
    /// Takes a lease (failing if etcd does not answer), points `store`'s commit marker at it and
    /// starts keeping it and campaigning for the controller role as `who`.
    pub async fn start(store: &EtcdStore, who: String) -> Result<Session, EtcdError> {
        let endpoints = store.endpoints().clone();
        let lease = grant(&endpoints).await?;
        store.use_lease(lease).await?;
        let (state_tx, state) = watch::channel(SessionState::Live(lease));
        let (role_tx, role) = watch::channel(Role::default());
        let marker = store.marker();
        let keeper = tokio::spawn(keep(endpoints.clone(), lease, state_tx, marker));
        let campaign = tokio::spawn(campaign(
            endpoints.clone(),
            election_name(store.prefix()),
            who,
            state.clone(),
            role_tx,
        ));
        Ok(Session {
            state,
            role,
            endpoints,
            tasks: vec![keeper, campaign],
        })
    }

    /// The session's state, as it changes.
    pub fn state(&self) -> watch::Receiver<SessionState> {
        self.state.clone()
    }

    /// The controller role, as it changes.
    pub fn role(&self) -> watch::Receiver<Role> {
        self.role.clone()
    }

    /// Ends the session now: the lease is revoked, so the role passes at once.
    pub async fn end(mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
        if let SessionState::Live(lease) = *self.state.borrow() {
            let _ = self
                .endpoints
                .call("revoke the session's lease", move |mut c| async move {
                    c.lease_revoke(lease).await
                })
                .await;
        }
    }
}

/// Keeps the lease alive (every third of its time); when it is lost, says so and takes a new
/// one once etcd answers again.
async fn keep(
    endpoints: Endpoints,
    mut lease: i64,
    state: watch::Sender<SessionState>,
    marker: Arc<super::commit::Marker>,
) {
    loop {
        let reason = keep_alive(&endpoints, lease).await;
        tracing::error!(reason = %reason, "etcd session lost: this replica gives up the controller role and commits nothing until it has a new session");
        let _ = state.send(SessionState::Lost {
            reason,
            since: crate::time::now(),
        });
        loop {
            match grant(&endpoints).await {
                Ok(l) => {
                    lease = l;
                    break;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "etcd session: no new lease yet");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
        // The new marker (only its random id can fail: tried again until it works).
        while let Err(e) = marker.renew(lease).await {
            tracing::error!(error = %e, "etcd session: cannot start a new commit marker; trying again");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        tracing::info!(lease = format!("{lease:x}"), "etcd session taken again");
        let _ = state.send(SessionState::Live(lease));
    }
}

/// Keeps `lease` alive until it is lost; returns why.
async fn keep_alive(endpoints: &Endpoints, lease: i64) -> String {
    let ttl = Duration::from_secs(SESSION_TTL as u64);
    let every = Duration::from_secs((SESSION_TTL as u64 / 3).max(1));
    let mut renewed = tokio::time::Instant::now();
    loop {
        let (member, mut client) = endpoints.client();
        let stream = tokio::time::timeout(every, client.lease_keep_alive(lease)).await;
        if let Ok(Ok((mut keeper, mut answers))) = stream {
            loop {
                let answer = match keeper.keep_alive().await {
                    Ok(()) => tokio::time::timeout(every, answers.message()).await,
                    Err(_) => break,
                };
                match answer {
                    Ok(Ok(Some(a))) if a.ttl() > 0 => renewed = tokio::time::Instant::now(),
                    Ok(Ok(Some(_))) => {
                        return format!(
                            "the session's lease {lease:x} expired (etcd was out of reach for more than {SESSION_TTL} s)"
                        )
                    }
                    _ => break,
                }
                tokio::time::sleep(every).await;
            }
        }
        endpoints.failed(member);
        if renewed.elapsed() > ttl {
            return format!("the session's lease could not be renewed for {SESSION_TTL} s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Who holds the election (the value of its oldest candidate), if anyone.
pub async fn holder(endpoints: &Endpoints, name: &str) -> Result<Option<String>, EtcdError> {
    let key = format!("{name}/");
    let resp = endpoints
        .call("read the controller election", move |mut c| {
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
        // It is shown to people: printable and short.
        String::from_utf8_lossy(kv.value())
            .chars()
            .filter(|c| !c.is_control())
            .take(512)
            .collect::<String>()
    }))
}

/// Campaigns with the live lease, holds the role while that lease lives, campaigns again with
/// the next one.
async fn campaign(
    endpoints: Endpoints,
    name: String,
    who: String,
    mut state: watch::Receiver<SessionState>,
    role: watch::Sender<Role>,
) {
    loop {
        let now = state.borrow_and_update().clone();
        let lease = match now {
            SessionState::Live(l) => l,
            SessionState::Lost { .. } => {
                if state.changed().await.is_err() {
                    return;
                }
                continue;
            }
        };
        let holder_now = holder(&endpoints, &name).await.ok().flatten();
        role.send_replace(Role {
            held: false,
            holder: holder_now,
        });
        let (member, mut client) = endpoints.client();
        let outcome = {
            let attempt = client.campaign(name.clone(), who.clone(), lease);
            tokio::pin!(attempt);
            loop {
                tokio::select! {
                    r = &mut attempt => break Some(r),
                    // The lease went while waiting: campaign again with the next one.
                    _ = state.changed() => break None,
                    // Refresh who holds the role now and then while waiting (for /healthz),
                    // without leaving the queue.
                    _ = tokio::time::sleep(Duration::from_secs(SESSION_TTL as u64)) => {
                        let holder_now = holder(&endpoints, &name).await.ok().flatten();
                        role.send_replace(Role { held: false, holder: holder_now });
                    }
                }
            }
        };
        match outcome {
            None => {}
            Some(Ok(_)) => {
                tracing::info!("this replica holds the controller role");
                role.send_replace(Role {
                    held: true,
                    holder: Some(who.clone()),
                });
                // Held until the lease goes.
                loop {
                    if state.changed().await.is_err() {
                        return;
                    }
                    if *state.borrow() != SessionState::Live(lease) {
                        break;
                    }
                }
                tracing::warn!(
                    "this replica no longer holds the controller role (its session ended)"
                );
                role.send_replace(Role {
                    held: false,
                    holder: None,
                });
            }
            Some(Err(e)) => {
                if retryable(&e) {
                    endpoints.failed(member);
                }
                tracing::debug!(error = %e, "campaign for the controller role failed; again");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}
