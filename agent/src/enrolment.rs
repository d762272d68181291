//! The agent's server and its credential: where the agent keeps them ([`SERVER_STATE`],
//! [`NODE_TOKEN`]), enrolling once with the pool's bootstrap token ([`enroll`]), and connecting
//! with the credential it was given ([`connect`]).

use crate::remote::{Remote, RemoteError};
use hearth_hostops::fs::Root;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Where the agent keeps its server credential (0600).
pub const SERVER_STATE: &str = "/var/lib/hearth/server.json";

/// The node's credential alone (0600): what `/etc/hearth/os.json` names as the remote's
/// `bearerTokenFile` to pull OS images from hearth-server.
pub const NODE_TOKEN: &str = "/var/lib/hearth/node-token";

/// What the agent remembers about its server.
///
/// `url` is the first server (the only field an agent before the list had, which still reads
/// it); `servers` the whole list, absent in a file such an agent wrote ([`ServerState::urls`]
/// reads both).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerState {
    /// The first server's URL.
    pub url: String,
    /// Every server's URL, in order (the replicas of one site, which share their store).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
    /// This node's name.
    pub node: String,
    /// The pool the server put it in.
    pub pool: String,
    /// The node's own credential (a bearer token).
    pub credential: String,
    /// Whether this node holds a reboot slot (given back after a verified boot).
    #[serde(default)]
    pub slot_held: bool,
}

impl ServerState {
    /// The servers, in order: `servers`, or `url` alone in a file written before the list.
    pub fn urls(&self) -> Vec<String> {
        if self.servers.is_empty() {
            vec![self.url.clone()]
        } else {
            self.servers.clone()
        }
    }

    /// Sets the list (and `url`, its first entry).
    pub fn set_urls(&mut self, urls: &[String]) {
        self.url = urls.first().cloned().unwrap_or_default();
        self.servers = urls.to_vec();
    }

    /// Reads the saved state, if any.
    pub fn load(root: &Root) -> Option<ServerState> {
        root.read(SERVER_STATE)
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice(&b).ok())
    }

    /// Saves it atomically, readable by root only; the credential also goes to [`NODE_TOKEN`]
    /// (for libostree's pulls from hearth-server's ostree repository).
    pub fn save(&self, root: &Root) -> anyhow::Result<()> {
        root.write_atomic(SERVER_STATE, &serde_json::to_vec_pretty(self)?, 0o600, None)?;
        let token = format!("{}\n", self.credential);
        if root.read(NODE_TOKEN).ok().flatten().as_deref() != Some(token.as_bytes()) {
            root.write_atomic(NODE_TOKEN, token.as_bytes(), 0o600, None)?;
        }
        Ok(())
    }
}

/// How to reach the server.
#[derive(Debug, Clone)]
pub struct Server {
    /// The servers' URLs, e.g. `https://hearth.example:22623` (one, or the replicas of one
    /// site: `hearth_api::servers::parse` reads them, at most `MAX_SERVERS`).
    pub urls: Vec<String>,
    /// The fleet CA (PEM).
    pub ca_pem: Vec<u8>,
    /// The pool's bootstrap token, for the first enrollment.
    pub bootstrap_token: Option<String>,
    /// This node's name.
    pub node: String,
    /// Labels to enroll with.
    pub labels: BTreeMap<String, String>,
    /// How long one long-poll waits.
    pub wait: Duration,
}

/// The connection to the server: the saved state, or a new enrollment (retried until it works,
/// so a node that boots before its server comes up simply waits).
///
/// The servers are the ones given now (`--server`): a list that differs from the saved one
/// replaces it (the admin moved the servers, or added replicas), and the node keeps its
/// credential, which every replica of the site knows (they share the store). A server that
/// does not know it answers 401, and the agent enrolls there ([`enroll`]).
pub async fn connect(root: &Root, server: &Server) -> anyhow::Result<(Remote, ServerState)> {
    if let Some(mut state) = ServerState::load(root).filter(|s| !s.credential.is_empty()) {
        if state.urls() != server.urls {
            tracing::info!(
                was = %state.urls().join(","),
                now = %server.urls.join(","),
                "the server list changed; keeping this node's credential"
            );
            state.set_urls(&server.urls);
            state.save(root)?;
        }
        let remote = Remote::with_servers(&server.urls, &server.ca_pem, &state.credential)?;
        return Ok((remote, state));
    }
    enroll(root, server).await
}

/// How long one call may take when it goes through every server of the list (`each` per
/// server, at most `hearth_api::servers::MAX_SERVERS` of them), and a margin of 10 s: the bound
/// of the watchdog's `busy` around it.
pub(crate) fn through_all(server: &Server, each: Duration) -> Duration {
    let n = server.urls.len().clamp(1, hearth_api::servers::MAX_SERVERS);
    each * u32::try_from(n).unwrap_or(1) + Duration::from_secs(10)
}

/// Enrolls with the bootstrap token and saves the credential.
///
/// A node that already holds a credential for its name (saved by an earlier enrollment, with
/// these server URLs or others) sends it along: the server enrolls an enrolled name again
/// only with its current credential, so that a bootstrap token alone cannot take a node over.
/// A stale credential does no harm (the server ignores it when it holds none for the node).
/// Without a valid one the answer is 409 until an admin runs `hearth node reset-credential`,
/// and the agent retries with back-off, so a reinstalled machine joins once that is done.
pub async fn enroll(root: &Root, server: &Server) -> anyhow::Result<(Remote, ServerState)> {
    let token = server.bootstrap_token.as_deref().ok_or_else(|| {
        anyhow::anyhow!("this node is not enrolled with {} and has no bootstrap token (give --bootstrap-token-file)", server.urls.join(","))
    })?;
    let saved = ServerState::load(root)
        .filter(|s| s.node == server.node && !s.credential.is_empty())
        .map(|s| s.credential);
    let mut delay = Duration::from_secs(1);
    loop {
        // Each server may take up to its 60 s.
        let _asking = crate::watchdog::busy(
            "enrolling with the server",
            through_all(server, Duration::from_secs(60)),
        );
        let attempt = Remote::enroll_with(
            &server.urls,
            &server.ca_pem,
            token,
            &server.node,
            &server.labels,
            saved.as_deref(),
        )
        .await;
        match attempt {
            Ok(remote) => {
                let mut state = ServerState {
                    url: String::new(),
                    servers: Vec::new(),
                    node: server.node.clone(),
                    pool: String::new(),
                    credential: remote.credential().to_string(),
                    slot_held: false,
                };
                state.set_urls(&server.urls);
                state.save(root)?;
                tracing::info!(server = %remote.base_url(), node = %server.node, "enrolled");
                return Ok((remote, state));
            }
            Err(e @ (RemoteError::Unauthorized(_) | RemoteError::Forbidden(_))) => {
                return Err(anyhow::anyhow!("enrollment refused: {e}"));
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?delay, "cannot enroll yet");
                let _idle = crate::watchdog::busy(
                    "waiting to enroll again",
                    delay + Duration::from_secs(10),
                );
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(60));
            }
        }
    }
}
