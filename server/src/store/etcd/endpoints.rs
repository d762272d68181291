//! The etcd members a store talks to: one `etcd-client` connection per endpoint (never its
//! balanced channel, which keeps sending to a dead member), a health probe that keeps a list of
//! which members answer, and [`Endpoints::call`], which runs a request on a healthy member and
//! retries it on the next one when the failure says the member (not the request) was at fault.

use super::error::EtcdError;
use etcd_client::{Client, ConnectOptions};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The longest one request to one member may take before the next member is tried.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How often every member is probed (`Maintenance/Status`).
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// How long a probe may take before its member counts as unhealthy.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// How many times one call is tried in all (over every member) before its error is returned.
pub const MAX_ATTEMPTS: usize = 8;
/// The pause after a failed attempt grows by this much per attempt (no more than 1 s).
const BACKOFF_STEP: Duration = Duration::from_millis(100);

/// One member.
struct Member {
    url: String,
    client: Client,
    healthy: AtomicBool,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("url", &self.url)
            .field("healthy", &self.healthy)
            .finish()
    }
}

/// The members and which of them answer.
#[derive(Debug, Clone)]
pub struct Endpoints {
    members: Arc<Vec<Member>>,
    /// The member requests go to first.
    preferred: Arc<AtomicUsize>,
}

impl Endpoints {
    /// Connects to each endpoint (lazily: a dead member does not fail this) and starts probing.
    pub async fn connect(urls: &[String], options: ConnectOptions) -> Result<Self, EtcdError> {
        if urls.is_empty() {
            return Err(EtcdError::Config("no etcd endpoint given".into()));
        }
        let mut members = Vec::new();
        for url in urls {
            let client = Client::connect([url.as_str()], Some(options.clone()))
                .await
                .map_err(|e| EtcdError::Config(format!("etcd endpoint {url}: {e}")))?;
            members.push(Member {
                url: url.clone(),
                client,
                // Until the first probe says otherwise.
                healthy: AtomicBool::new(true),
            });
        }
        let endpoints = Endpoints {
            members: Arc::new(members),
            preferred: Arc::new(AtomicUsize::new(0)),
        };
        endpoints.probe_all().await;
        let weak = Arc::downgrade(&endpoints.members);
        let preferred = endpoints.preferred.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PROBE_INTERVAL).await;
                // Stops when the store is dropped.
                let Some(members) = weak.upgrade() else {
                    return;
                };
                Endpoints {
                    members,
                    preferred: preferred.clone(),
                }
                .probe_all()
                .await;
            }
        });
        Ok(endpoints)
    }

    /// Probes every member at once and records which answer.
    async fn probe_all(&self) {
        let mut probes = tokio::task::JoinSet::new();
        for i in 0..self.members.len() {
            let members = self.members.clone();
            probes.spawn(async move {
                let m = &members[i];
                let mut c = m.client.clone();
                let ok = matches!(
                    tokio::time::timeout(PROBE_TIMEOUT, c.status()).await,
                    Ok(Ok(_))
                );
                let was = m.healthy.swap(ok, Ordering::Relaxed);
                if was != ok {
                    if ok {
                        tracing::info!(endpoint = %m.url, "etcd member answers again");
                    } else {
                        tracing::warn!(endpoint = %m.url, "etcd member does not answer: requests go to the others");
                    }
                }
            });
        }
        while probes.join_next().await.is_some() {}
        let p = self.preferred.load(Ordering::Relaxed);
        if !self.members[p].healthy.load(Ordering::Relaxed) {
            self.advance(p);
        }
    }

    /// Moves the preferred member past `from` to the next healthy one (or the next one when
    /// none is healthy).
    fn advance(&self, from: usize) {
        let n = self.members.len();
        let next = (1..=n)
            .map(|i| (from + i) % n)
            .find(|&i| self.members[i].healthy.load(Ordering::Relaxed))
            .unwrap_or((from + 1) % n);
        let _ = self
            .preferred
            .compare_exchange(from, next, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The endpoints' URLs, healthy or not.
    pub fn urls(&self) -> Vec<String> {
        self.members.iter().map(|m| m.url.clone()).collect()
    }

    /// How many members the last probe found healthy.
    pub fn healthy(&self) -> usize {
        self.members
            .iter()
            .filter(|m| m.healthy.load(Ordering::Relaxed))
            .count()
    }

    /// A client for the preferred member (for streams, which the caller restarts itself).
    pub fn client(&self) -> (usize, Client) {
        let i = self.preferred.load(Ordering::Relaxed) % self.members.len();
        (i, self.members[i].client.clone())
    }

    /// Reports that member `i` failed a stream: the next call goes elsewhere.
    pub fn failed(&self, i: usize) {
        self.members[i].healthy.store(false, Ordering::Relaxed);
        self.advance(i);
    }

    /// Runs `f` on the preferred member; when it fails in a way a retry can help with (the
    /// member or the connection failed, or no answer within [`CALL_TIMEOUT`]), marks the member
    /// unhealthy and tries the next, up to [`MAX_ATTEMPTS`] times in all.
    ///
    /// A request may thus be sent more than once, so `f` must be idempotent: reads are; a commit
    /// is made so by its marker (`commit.rs`); a lease grant whose answer was lost leaves a lease
    /// nobody keeps alive, which expires by itself.
    pub async fn call<T, F, Fut>(&self, what: &str, mut f: F) -> Result<T, EtcdError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let mut last = String::new();
        for attempt in 0..MAX_ATTEMPTS {
            let (i, client) = self.client();
            let url = &self.members[i].url;
            match tokio::time::timeout(CALL_TIMEOUT, f(client)).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if !retryable(&e) => {
                    return Err(EtcdError::Request {
                        what: what.to_string(),
                        endpoint: url.clone(),
                        message: e.to_string(),
                    })
                }
                Ok(Err(e)) => {
                    last = format!("{url}: {e}");
                    tracing::debug!(endpoint = %url, attempt, error = %e, "{what}: retrying on another member");
                }
                Err(_) => {
                    last = format!("{url}: no answer within {} s", CALL_TIMEOUT.as_secs());
                    tracing::debug!(endpoint = %url, attempt, "{what}: timed out, retrying on another member");
                }
            }
            self.failed(i);
            tokio::time::sleep((BACKOFF_STEP * (attempt as u32 + 1)).min(Duration::from_secs(1)))
                .await;
        }
        Err(EtcdError::Unavailable {
            what: what.to_string(),
            attempts: MAX_ATTEMPTS,
            last,
        })
    }
}

/// Whether an error says the member or the connection failed (retry elsewhere), rather than
/// the request being wrong (retrying cannot help).
pub fn retryable(e: &etcd_client::Error) -> bool {
    use etcd_client::Error as E;
    use tonic::Code;
    match e {
        E::TransportError(_) | E::IoError(_) => true,
        E::GRpcStatus(s) => match s.code() {
            // Connection refused or reset, leader changed, no leader, request timed out.
            Code::Unavailable | Code::DeadlineExceeded | Code::Aborted | Code::Cancelled => true,
            // A stream cut mid-way ("transport error", "h2 protocol error").
            Code::Unknown | Code::Internal => {
                let m = s.message();
                m.contains("transport") || m.contains("h2") || m.contains("connection")
            }
            // "too many requests": the member is overloaded.
            Code::ResourceExhausted => s.message().contains("too many requests"),
            _ => false,
        },
        E::WatchError(_) | E::LeaseKeepAliveError(_) => true,
        _ => false,
    }
}
