//! The agent's client of hearth-server: enroll with a pool's bootstrap token, long-poll the
//! desired config, report status, take and give back reboot slots. Over HTTPS, trusting only
//! the fleet CA (never the system roots). Over one server or several (the replicas of one site):
//! one at a time, moving to the next when one fails as a replica fails ([`RemoteError::moves_on`]).
//!
//! This module is self-contained; persisting the credential and driving the calls belong to the
//! agent's `run` loop. The wire types are `hearth_api`'s, the ones the server reads and writes;
//! they are re-exported here.
//!
//! ```no_run
//! # async fn demo() -> Result<(), hearth_agent::remote::RemoteError> {
//! use hearth_agent::remote::Remote;
//! use std::time::Duration;
//! let ca = std::fs::read("/etc/hearth/ca.crt").unwrap();
//! let remote = Remote::enroll("https://hearth:22623", &ca, "hearth-bootstrap-...", "worker-0",
//!     &Default::default()).await?;
//! // Persist remote.credential() in the agent's state directory, then:
//! let mut known: Option<String> = None;
//! loop {
//!     if let Some(d) = remote.desired(known.as_deref(), Duration::from_secs(60)).await? {
//!         known = Some(d.name.clone());
//!         // apply d.spec with d.policies, then remote.report(&status_document).await?
//!     }
//! }
//! # }
//! ```

use hearth_config::model::DisruptionPolicies;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::journal::NamedConfig;

pub use hearth_api::{
    AgentStatus, DesiredConfig, EnrollRequest, EnrollResponse, SlotAction, SlotAnswer, SlotRequest,
};

/// What the agent makes of a [`DesiredConfig`].
pub trait DesiredConfigExt {
    /// The config and the policies, as `Agent::sync` takes them.
    fn into_parts(self) -> (NamedConfig, DisruptionPolicies);
}

impl DesiredConfigExt for DesiredConfig {
    fn into_parts(self) -> (NamedConfig, DisruptionPolicies) {
        (
            NamedConfig {
                name: self.name,
                spec: self.spec,
            },
            self.policies,
        )
    }
}

/// Errors talking to the server.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The credential (or bootstrap token) is unknown, expired or revoked: enroll again.
    #[error("hearth-server refused the credentials: {0}")]
    Unauthorized(String),
    /// The credentials are valid but not for this.
    #[error("hearth-server refused the request: {0}")]
    Forbidden(String),
    /// Any other error answer.
    #[error("hearth-server answered {status}: {message}")]
    Status {
        /// HTTP status.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// The server could not be reached, or TLS failed (a wrong CA ends here).
    #[error("cannot reach hearth-server at {url}: {message}")]
    Transport {
        /// The URL.
        url: String,
        /// Why.
        message: String,
    },
    /// The CA or an answer could not be read.
    #[error("{0}")]
    Invalid(String),
    /// Several servers were given and none of them answered (each one's reason, in the order
    /// they were tried).
    #[error("no hearth-server answered: {}", tried.iter().map(|(u, why)| format!("{u}: {why}")).collect::<Vec<_>>().join("; "))]
    NoServer {
        /// Each server tried, with why it did not do.
        tried: Vec<(String, String)>,
    },
}

impl RemoteError {
    /// True when the agent should enroll again (its credential no longer works).
    pub fn needs_enrollment(&self) -> bool {
        matches!(self, RemoteError::Unauthorized(_))
    }

    /// True when this says something about the replica that answered (or did not), not about
    /// the fleet: the server could not be reached, TLS failed, the answer did not come in time
    /// or broke off, or the server answered 5xx (a replica cut off from its store says 503).
    /// The same request then goes to the next server. A 4xx answer (401, 403, 409, ...) is the
    /// fleet's answer and is the same on every replica: never retried elsewhere.
    pub fn moves_on(&self) -> bool {
        match self {
            RemoteError::Transport { .. } => true,
            RemoteError::Status { status, .. } => *status >= 500,
            _ => false,
        }
    }
}

/// A connection to hearth-server as one enrolled node, over one or several servers (the
/// replicas of one site, which share their store): one at a time, sticky, moving to the next
/// when one fails as [`RemoteError::moves_on`] says.
#[derive(Debug, Clone)]
pub struct Remote {
    servers: Servers,
    client: reqwest::Client,
    credential: String,
    /// The node's pool, when known (from enrollment).
    pub pool: Option<String>,
}

/// An HTTPS client that trusts only `ca_pem`.
pub fn client(ca_pem: &[u8]) -> Result<reqwest::Client, RemoteError> {
    let certs = reqwest::Certificate::from_pem_bundle(ca_pem)
        .map_err(|e| RemoteError::Invalid(format!("the CA is not a PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(RemoteError::Invalid(
            "the CA file holds no certificate".into(),
        ));
    }
    reqwest::Client::builder()
        .tls_certs_only(certs)
        .connect_timeout(crate::limits::CONNECT_TIMEOUT)
        .user_agent(concat!("hearth-agent/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| RemoteError::Invalid(format!("cannot set up HTTPS: {e}")))
}

fn transport(url: &str, e: reqwest::Error) -> RemoteError {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    RemoteError::Transport {
        url: url.to_string(),
        message,
    }
}

/// The body of an answer, at most `max` bytes (see [`crate::limits`]).
async fn read_capped(
    url: &str,
    resp: reqwest::Response,
    max: u64,
    what: &'static str,
    timeout: Duration,
) -> Result<Vec<u8>, RemoteError> {
    crate::limits::read_body(resp, max, what, timeout)
        .await
        .map_err(|e| match e {
            crate::limits::BodyError::Read(message) => RemoteError::Transport {
                url: url.to_string(),
                message,
            },
            too_large => RemoteError::Invalid(format!("{url}: {too_large}")),
        })
}

/// A desired-config answer, and when the server asks for the next status report.
#[derive(Debug)]
pub struct Answer {
    /// The desired config.
    pub config: DesiredConfig,
    /// Hold the next status report until this long after the answer
    /// (`hearth_api::REPORT_AFTER_HEADER`, at most `hearth_api::MAX_REPORT_AFTER`); `None`:
    /// report at once.
    pub report_after: Option<Duration>,
}

/// The wait an answer asks for before the next report (`hearth_api::desired::report_after`
/// of its `x-hearth-report-after` header); `None` when absent or not a wait (then the agent
/// reports at once, as to an older server).
fn report_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    hearth_api::desired::report_after(
        headers
            .get(hearth_api::REPORT_AFTER_HEADER)?
            .to_str()
            .ok()?,
    )
}

/// [`read_capped`], read as `T`: `what` (e.g. "an enrollment answer") names it in an error.
async fn read_json<T: serde::de::DeserializeOwned>(
    url: &str,
    resp: reqwest::Response,
    max: u64,
    what: &'static str,
    timeout: Duration,
) -> Result<T, RemoteError> {
    let bytes = read_capped(url, resp, max, what, timeout).await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        RemoteError::Invalid(format!(
            "{url}: {what} that hearth-server does not send: {e}"
        ))
    })
}

async fn error_from(resp: reqwest::Response) -> RemoteError {
    let status = resp.status().as_u16();
    let text = crate::limits::read_body(
        resp,
        crate::limits::MAX_ERROR_BYTES,
        "an error answer",
        Duration::from_secs(30),
    )
    .await
    .map(|b| String::from_utf8_lossy(&b).into_owned())
    .unwrap_or_default();
    let message = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or(text);
    match status {
        401 => RemoteError::Unauthorized(message),
        403 => RemoteError::Forbidden(message),
        _ => RemoteError::Status { status, message },
    }
}

/// The servers' base URLs and which one is in use (shared by the clones of one [`Remote`]).
#[derive(Debug, Clone)]
struct Servers {
    urls: Arc<[String]>,
    current: Arc<AtomicUsize>,
}

impl Servers {
    fn new(urls: &[String]) -> Result<Servers, RemoteError> {
        if urls.is_empty() {
            return Err(RemoteError::Invalid("no server URL".into()));
        }
        Ok(Servers {
            urls: urls
                .iter()
                .map(|u| u.trim_end_matches('/').to_string())
                .collect(),
            current: Arc::new(AtomicUsize::new(0)),
        })
    }

    fn current(&self) -> &str {
        &self.urls[self.current.load(Ordering::Relaxed) % self.urls.len()]
    }

    /// Runs `call` against the current server, then, while it fails in a way that
    /// [`RemoteError::moves_on`], against the next ones, each once, in order; the one that
    /// answers stays current. Every move is logged with both URLs and the reason. One server:
    /// its error as it is; several that all failed: [`RemoteError::NoServer`] with each reason.
    async fn call<T, F, Fut>(&self, what: &str, mut call: F) -> Result<T, RemoteError>
    where
        F: FnMut(String) -> Fut,
        Fut: std::future::Future<Output = Result<T, RemoteError>>,
    {
        let n = self.urls.len();
        let start = self.current.load(Ordering::Relaxed) % n;
        let mut tried = Vec::new();
        for i in 0..n {
            let at = (start + i) % n;
            let base = &self.urls[at];
            match call(base.clone()).await {
                Err(e) if e.moves_on() && n > 1 => {
                    let next = (at + 1) % n;
                    if i + 1 < n {
                        tracing::warn!(
                            from = %base,
                            to = %self.urls[next],
                            reason = %e,
                            request = what,
                            "moving to the next hearth-server"
                        );
                    }
                    self.current.store(next, Ordering::Relaxed);
                    tried.push((base.clone(), e.to_string()));
                }
                other => return other,
            }
        }
        Err(RemoteError::NoServer { tried })
    }
}

impl Remote {
    /// A connection with a credential the agent already has.
    pub fn new(base_url: &str, ca_pem: &[u8], credential: &str) -> Result<Remote, RemoteError> {
        Self::with_servers(&[base_url.to_string()], ca_pem, credential)
    }

    /// [`Remote::new`] over several servers (tried in this order, starting with the first).
    pub fn with_servers(
        urls: &[String],
        ca_pem: &[u8],
        credential: &str,
    ) -> Result<Remote, RemoteError> {
        Ok(Remote {
            servers: Servers::new(urls)?,
            client: client(ca_pem)?,
            credential: credential.trim().to_string(),
            pool: None,
        })
    }

    /// The same servers, starting with the current one, and credential over a new HTTPS client:
    /// new connections (a new name lookup, TCP connection and TLS handshake).
    pub fn fresh(&self, ca_pem: &[u8]) -> Result<Remote, RemoteError> {
        let mut again = Self::with_servers(&self.servers.urls, ca_pem, &self.credential)?;
        again.servers.current.store(
            self.servers.current.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        again.pool = self.pool.clone();
        Ok(again)
    }

    /// Enrolls `node_name` with its pool's bootstrap token; the returned connection holds the
    /// node's new credential ([`Remote::credential`]), which the caller persists.
    pub async fn enroll(
        base_url: &str,
        ca_pem: &[u8],
        bootstrap_token: &str,
        node_name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Remote, RemoteError> {
        Self::enroll_proving(
            &[base_url.to_string()],
            ca_pem,
            bootstrap_token,
            node_name,
            labels,
            None,
        )
        .await
    }

    /// [`Remote::enroll`] for a node that is already enrolled: the server enrolls a name that
    /// holds a credential again only when that credential comes along (as
    /// `Authorization: Bearer`); without it the answer is 409 (a bootstrap token alone cannot
    /// take over an enrolled node).
    pub async fn enroll_again(
        base_url: &str,
        ca_pem: &[u8],
        bootstrap_token: &str,
        node_name: &str,
        labels: &BTreeMap<String, String>,
        credential: &str,
    ) -> Result<Remote, RemoteError> {
        Self::enroll_proving(
            &[base_url.to_string()],
            ca_pem,
            bootstrap_token,
            node_name,
            labels,
            Some(credential),
        )
        .await
    }

    /// [`Remote::enroll`] (with `credential`: [`Remote::enroll_again`]) over several servers,
    /// failing over between them as every call does.
    pub async fn enroll_with(
        urls: &[String],
        ca_pem: &[u8],
        bootstrap_token: &str,
        node_name: &str,
        labels: &BTreeMap<String, String>,
        credential: Option<&str>,
    ) -> Result<Remote, RemoteError> {
        Self::enroll_proving(urls, ca_pem, bootstrap_token, node_name, labels, credential).await
    }

    async fn enroll_proving(
        urls: &[String],
        ca_pem: &[u8],
        bootstrap_token: &str,
        node_name: &str,
        labels: &BTreeMap<String, String>,
        credential: Option<&str>,
    ) -> Result<Remote, RemoteError> {
        let client = client(ca_pem)?;
        let servers = Servers::new(urls)?;
        let body = serde_json::to_vec(&EnrollRequest {
            node: node_name.to_string(),
            labels: labels.clone(),
            bootstrap_token: Some(bootstrap_token.trim().to_string()),
        })
        .map_err(|e| RemoteError::Invalid(e.to_string()))?;
        let answer = servers
            .call("enroll", |base| {
                let url = format!("{base}/api/v1/enroll");
                let mut req = client
                    .post(&url)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.clone())
                    .timeout(Duration::from_secs(60));
                if let Some(c) = credential {
                    req = req.bearer_auth(c.trim());
                }
                async move {
                    let resp = req.send().await.map_err(|e| transport(&url, e))?;
                    if !resp.status().is_success() {
                        return Err(error_from(resp).await);
                    }
                    read_json::<EnrollResponse>(
                        &url,
                        resp,
                        crate::limits::MAX_ANSWER_BYTES,
                        "an enrollment answer",
                        Duration::from_secs(60),
                    )
                    .await
                }
            })
            .await?;
        Ok(Remote {
            servers,
            client,
            credential: answer.credential,
            pool: Some(answer.pool),
        })
    }

    /// The node's credential.
    pub fn credential(&self) -> &str {
        &self.credential
    }

    /// The URL of the server in use (the one that answered last).
    pub fn base_url(&self) -> &str {
        self.servers.current()
    }

    /// Every server's URL, in the order they are tried.
    pub fn servers(&self) -> &[String] {
        &self.servers.urls
    }

    /// The desired config if it is not `known`; otherwise waits up to `wait` for it to change
    /// and returns `None` if it did not.
    pub async fn desired(
        &self,
        known: Option<&str>,
        wait: Duration,
    ) -> Result<Option<DesiredConfig>, RemoteError> {
        Ok(self
            .fetch_desired(known, None, wait, false)
            .await?
            .map(|a| a.config))
    }

    /// [`Remote::desired`], also asking for the admin's requests to this node with an id above
    /// `done` (`DesiredConfig::requests`): the answer comes at once (not 304) while there is
    /// one. The agent holds its reports when the answer asks it to ([`Answer::report_after`]),
    /// so the server sends it the config at once in a burst instead of when it has room for
    /// the report (`hearth_api::DEFER_PARAM`).
    pub async fn desired_and_requests(
        &self,
        known: Option<&str>,
        done: Option<u64>,
        wait: Duration,
    ) -> Result<Option<Answer>, RemoteError> {
        self.fetch_desired(known, done, wait, true).await
    }

    async fn fetch_desired(
        &self,
        known: Option<&str>,
        done: Option<u64>,
        wait: Duration,
        defer: bool,
    ) -> Result<Option<Answer>, RemoteError> {
        let timeout = wait + Duration::from_secs(30);
        self.servers
            .call("desired config", |base| async move {
                let mut url = reqwest::Url::parse(&format!("{base}/api/v1/agent/desired"))
                    .map_err(|e| RemoteError::Invalid(format!("bad server URL: {e}")))?;
                {
                    let mut q = url.query_pairs_mut();
                    if let Some(k) = known {
                        q.append_pair("known", k);
                    }
                    if let Some(done) = done {
                        q.append_pair("done", &done.to_string());
                    }
                    q.append_pair("wait", &wait.as_secs().to_string());
                    if defer {
                        q.append_pair(hearth_api::DEFER_PARAM, "true");
                    }
                }
                let shown = url.to_string();
                let resp = self
                    .client
                    .get(url)
                    .bearer_auth(&self.credential)
                    .timeout(timeout)
                    .send()
                    .await
                    .map_err(|e| transport(&shown, e))?;
                match resp.status().as_u16() {
                    304 => Ok(None),
                    200 => {
                        let report_after = report_after(resp.headers());
                        read_json(
                            &shown,
                            resp,
                            crate::limits::MAX_CONFIG_BYTES,
                            "a desired config",
                            timeout,
                        )
                        .await
                        .map(|config| {
                            Some(Answer {
                                config,
                                report_after,
                            })
                        })
                    }
                    _ => Err(error_from(resp).await),
                }
            })
            .await
    }

    /// Reports the agent's status document (`hearth-agent status -o json`). A report whose
    /// answer was lost goes to the next server as any other call: reports are idempotent (the
    /// server keeps the newest).
    pub async fn report(&self, status: &AgentStatus) -> Result<(), RemoteError> {
        let body = serde_json::to_vec(status).map_err(|e| RemoteError::Invalid(e.to_string()))?;
        self.post(
            "status report",
            "/api/v1/agent/status",
            body,
            |_url, _resp| async { Ok(()) },
        )
        .await
    }

    /// Takes (`acquire`) or gives back a reboot slot.
    pub async fn reboot_slot(&self, acquire: bool) -> Result<SlotAnswer, RemoteError> {
        let body = serde_json::to_vec(&SlotRequest {
            action: if acquire {
                SlotAction::Acquire
            } else {
                SlotAction::Release
            },
        })
        .map_err(|e| RemoteError::Invalid(e.to_string()))?;
        self.post(
            "reboot slot",
            "/api/v1/agent/reboot-slot",
            body,
            |url, resp| async move {
                read_json(
                    &url,
                    resp,
                    crate::limits::MAX_ANSWER_BYTES,
                    "a reboot-slot answer",
                    Duration::from_secs(30),
                )
                .await
            },
        )
        .await
    }

    /// `POST path` with the node's credential and a JSON `body` (30 s), through the failover;
    /// a success answer is read by `read`.
    async fn post<T, R, Fut>(
        &self,
        what: &str,
        path: &str,
        body: Vec<u8>,
        read: R,
    ) -> Result<T, RemoteError>
    where
        R: Fn(String, reqwest::Response) -> Fut,
        Fut: std::future::Future<Output = Result<T, RemoteError>>,
    {
        self.servers
            .call(what, |base| {
                let url = format!("{base}{path}");
                let req = self
                    .client
                    .post(&url)
                    .bearer_auth(&self.credential)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.clone())
                    .timeout(Duration::from_secs(30));
                let read = &read;
                async move {
                    let resp = req.send().await.map_err(|e| transport(&url, e))?;
                    if !resp.status().is_success() {
                        return Err(error_from(resp).await);
                    }
                    read(url, resp).await
                }
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What moves a request to the next server: the replica failing, never the fleet's answer.
    #[test]
    fn only_a_replicas_failure_moves_on() {
        let transport = RemoteError::Transport {
            url: "https://a:1".into(),
            message: "connection refused".into(),
        };
        assert!(transport.moves_on());
        for status in [500, 502, 503, 504] {
            let e = RemoteError::Status {
                status,
                message: String::new(),
            };
            assert!(e.moves_on(), "{status}");
        }
        for status in [400, 404, 409, 413, 429] {
            let e = RemoteError::Status {
                status,
                message: String::new(),
            };
            assert!(!e.moves_on(), "{status}");
        }
        assert!(!RemoteError::Unauthorized(String::new()).moves_on());
        assert!(!RemoteError::Forbidden(String::new()).moves_on());
        assert!(!RemoteError::Invalid(String::new()).moves_on());
    }

    /// Every server failing: one error naming each with its reason, and no server at all is
    /// refused.
    #[tokio::test]
    async fn all_failing_names_each_server() {
        let servers = Servers::new(&["https://a:1/".into(), "https://b:2".into()]).unwrap();
        let mut asked = Vec::new();
        let e = servers
            .call("test", |base| {
                asked.push(base.clone());
                async move {
                    Err::<(), _>(RemoteError::Transport {
                        url: base,
                        message: "refused".into(),
                    })
                }
            })
            .await
            .unwrap_err();
        assert_eq!(asked, ["https://a:1", "https://b:2"]);
        assert_eq!(
            e.to_string(),
            "no hearth-server answered: https://a:1: cannot reach hearth-server at https://a:1: refused; https://b:2: cannot reach hearth-server at https://b:2: refused"
        );
        assert!(Servers::new(&[]).is_err());
    }

    /// The server's wait before the next report: milliseconds, bounded by
    /// `MAX_REPORT_AFTER`; anything else (absent, zero, not a number) is no wait.
    #[test]
    fn report_after_is_bounded_and_optional() {
        use reqwest::header::{HeaderMap, HeaderValue};
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                hearth_api::REPORT_AFTER_HEADER,
                HeaderValue::from_str(v).unwrap(),
            );
            report_after(&h)
        };
        assert_eq!(with("1500"), Some(Duration::from_millis(1500)));
        assert_eq!(with("86400000"), Some(hearth_api::MAX_REPORT_AFTER));
        for none in ["0", "-5", "soon", "1.5", ""] {
            assert_eq!(with(none), None, "{none:?}");
        }
        assert_eq!(report_after(&HeaderMap::new()), None);
    }
}
