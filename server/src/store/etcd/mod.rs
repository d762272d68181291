//! The store on etcd v3: [`EtcdStore`] implements [`Store`] with `etcd-client`.
//!
//! - Objects live at `<prefix><kind>/<name>` (prefix `/hearth/` unless configured); the value is
//!   the document itself, so `etcdctl get --prefix /hearth/` shows them as they are.
//! - The store revision is etcd's revision, and an object's `create_revision`/`mod_revision`
//!   are etcd's own.
//! - A commit is one etcd transaction whose compares are the preconditions (`Absent`:
//!   `create_revision == 0`; `Revision(r)`: `mod_revision == r`); on failure the transaction
//!   reads the keys back and the commit reports the [`StoreError::Conflict`] it found. Each commit
//!   also writes this store's commit marker (`<prefix>_commits/<instance>`, compared on its
//!   `mod_revision`), which makes it exactly-once: a commit whose answer was lost is sent again,
//!   and the marker tells whether the first attempt was applied (`commit.rs`).
//! - [`Store::watch`] follows an etcd prefix watch, so it ticks on commits made by any client
//!   (`watcher.rs`, started by its first caller); a compaction or a dropped stream restarts it
//!   from the last revision seen. A replica follows the decoded changes instead
//!   ([`Store::changes`], `changes.rs`), which also move the revision on.
//! - Every member is a separate connection with a health probe (`endpoints.rs`): a dead member
//!   in the endpoint list costs no failed request.
//! - What is read from etcd is bounded: [`MAX_VALUE_BYTES`] per object, [`MAX_LIST_OBJECTS`]
//!   and [`MAX_LIST_BYTES`] per kind, [`MAX_RESPONSE_BYTES`] per answer.

pub mod changes;
mod commit;
mod endpoints;
mod error;
mod keys;
pub mod session;
#[cfg(test)]
pub(crate) mod test_cluster;
mod watcher;

pub use endpoints::{Endpoints, CALL_TIMEOUT, MAX_ATTEMPTS, PROBE_INTERVAL};
pub use error::EtcdError;
use keys::{prefix_end, to_u64, PAGE_KEYS};
pub use keys::{
    DEFAULT_PREFIX, MAX_LIST_BYTES, MAX_LIST_OBJECTS, MAX_RESPONSE_BYTES, MAX_VALUE_BYTES,
};

use crate::store::{Kind, Listed, Op, Store, StoreError, Versioned};
use etcd_client::{Certificate, ConnectOptions, GetOptions, Identity, KeyValue, TlsOptions};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How to reach etcd.
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    /// Client URLs (`http://` or `https://`), one per member.
    pub endpoints: Vec<String>,
    /// Key prefix; must start and end with `/`.
    pub prefix: String,
    /// TLS: the CA that signs the members' certificates (PEM) and a client certificate and key.
    pub tls: Option<EtcdTls>,
}

/// TLS to etcd.
#[derive(Clone, Default)]
pub struct EtcdTls {
    /// CA certificates (PEM) that sign the members' serving certificates (required: no system
    /// roots are used).
    pub ca_pem: Option<Vec<u8>>,
    /// Client certificate chain and private key (PEM), for members that require client certs.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for EtcdTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdTls")
            .field("ca", &self.ca_pem.is_some())
            .field("client_cert", &self.identity.is_some())
            .finish()
    }
}

/// Errors of the etcd backend.
/// The store on etcd.
pub struct EtcdStore {
    endpoints: Endpoints,
    prefix: String,
    commits: Arc<commit::Marker>,
    tx: Arc<watch::Sender<u64>>,
    /// The revision watch behind [`Store::watch`], started by its first caller (a replica's
    /// follower feeds the revision from its own stream instead: one watch per replica).
    watcher: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.endpoints.urls())
            .field("prefix", &self.prefix)
            .field("revision", &*self.tx.borrow())
            .finish()
    }
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        if let Some(w) = self
            .watcher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            w.abort();
        }
    }
}

impl EtcdStore {
    /// Connects (a member that is down does not fail this as long as one answers), reads the
    /// current revision and starts following the prefix.
    pub async fn connect(config: &EtcdConfig) -> Result<EtcdStore, EtcdError> {
        let prefix = &config.prefix;
        if !prefix.starts_with('/') || !prefix.ends_with('/') || prefix.len() > 256 {
            return Err(EtcdError::Config(format!(
                "the key prefix {prefix:?} must start and end with '/' (e.g. {DEFAULT_PREFIX}) and be at most 256 bytes"
            )));
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(2))
            .with_keep_alive(Duration::from_secs(5), Duration::from_secs(3))
            .with_keep_alive_while_idle(true)
            // A member cut off from the others answers "no leader" at once instead of
            // serving stale reads or holding a watch that never fires.
            .with_require_leader(true);
        if let Some(tls) = &config.tls {
            let mut t = TlsOptions::new();
            if let Some(ca) = &tls.ca_pem {
                t = t.ca_certificate(Certificate::from_pem(ca));
            }
            if let Some((cert, key)) = &tls.identity {
                t = t.identity(Identity::from_pem(cert, key));
            }
            options = options.with_tls(t);
            if let Some(u) = config.endpoints.iter().find(|u| !u.starts_with("https://")) {
                return Err(EtcdError::Config(format!(
                    "{u}: with TLS options the endpoints must be https:// URLs"
                )));
            }
        }
        let has_ca = config.tls.as_ref().is_some_and(|t| t.ca_pem.is_some());
        if let Some(u) = config.endpoints.iter().find(|u| u.starts_with("https://")) {
            if !has_ca {
                return Err(EtcdError::Config(format!(
                    "{u}: an https:// endpoint needs the CA that signs the members' certificates (--etcd-ca)"
                )));
            }
        }
        for u in &config.endpoints {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                return Err(EtcdError::Config(format!(
                    "{u}: an etcd endpoint is an http:// or https:// URL (e.g. https://10.0.0.1:2379)"
                )));
            }
        }
        let endpoints = Endpoints::connect(&config.endpoints, options).await?;
        let key = format!("{prefix}{}", commit::MARKERS);
        let revision = {
            let key = key.clone();
            let resp = endpoints
                .call("read the revision", move |mut c| {
                    let key = key.clone();
                    async move { c.get(key, Some(GetOptions::new().with_count_only())).await }
                })
                .await?;
            to_u64(resp.header().map(|h| h.revision()).unwrap_or(0))
        };
        let tx = Arc::new(watch::channel(revision).0);
        let watcher = std::sync::Mutex::new(None);
        Ok(EtcdStore {
            commits: Arc::new(commit::Marker::new(prefix)?),
            endpoints,
            prefix: prefix.clone(),
            tx,
            watcher,
        })
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// This store's commit marker.
    pub(crate) fn marker(&self) -> Arc<commit::Marker> {
        self.commits.clone()
    }

    /// The members.
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    fn key(&self, kind: Kind, name: &str) -> String {
        format!("{}{}/{name}", self.prefix, kind.as_str())
    }

    fn versioned(&self, kv: &KeyValue) -> Result<Versioned, EtcdError> {
        if kv.value().len() > MAX_VALUE_BYTES {
            return Err(EtcdError::Bound(format!(
                "{} holds {} bytes, more than the {MAX_VALUE_BYTES} an object may have",
                String::from_utf8_lossy(kv.key()),
                kv.value().len()
            )));
        }
        Ok(Versioned {
            value: kv.value().to_vec(),
            create_revision: to_u64(kv.create_revision()),
            mod_revision: to_u64(kv.mod_revision()),
        })
    }

    /// Records a revision seen in an answer (the watch may not have delivered it yet).
    fn saw(&self, revision: u64) {
        self.tx.send_if_modified(|r| {
            if revision > *r {
                *r = revision;
                true
            } else {
                false
            }
        });
    }

    /// Deletes the commit markers that older servers wrote without a lease (markers written
    /// with a replica's session lease go with it).
    pub async fn remove_stale_markers(&self) -> Result<(), EtcdError> {
        self.commits.remove_unleased(&self.endpoints).await
    }

    /// From now on, commits write this store's marker with `lease` (a replica's session): a new
    /// marker, since the old one went with its lease (or had none).
    pub async fn use_lease(&self, lease: i64) -> Result<(), EtcdError> {
        self.commits.renew(lease).await
    }
}

impl Store for EtcdStore {
    async fn get(&self, kind: Kind, name: &str) -> Result<Option<Versioned>, StoreError> {
        let key = self.key(kind, name);
        let resp = self
            .endpoints
            .call("get", move |c| {
                let key = key.clone();
                async move {
                    c.kv_client()
                        .max_decoding_message_size(MAX_RESPONSE_BYTES)
                        .get(key, None)
                        .await
                }
            })
            .await?;
        Ok(match resp.kvs().first() {
            Some(kv) => Some(self.versioned(kv)?),
            None => None,
        })
    }

    async fn list_each(
        &self,
        kind: Kind,
        each: &mut (dyn FnMut(Listed) -> Result<(), StoreError> + Send),
    ) -> Result<(), StoreError> {
        let start = format!("{}{}/", self.prefix, kind.as_str());
        let end = prefix_end(start.as_bytes());
        // What one pass read: bounded.
        let (mut count, mut bytes) = (0usize, 0usize);
        let mut from = start.clone().into_bytes();
        // Every page is read at the revision of the first, so the list is one snapshot.
        let mut at: i64 = 0;
        let mut page = PAGE_KEYS;
        let mut restarts = 0;
        loop {
            let (key, end2) = (from.clone(), end.clone());
            let got = self
                .endpoints
                .call("list", move |c| {
                    let (key, end) = (key.clone(), end2.clone());
                    async move {
                        let mut o = GetOptions::new().with_range(end).with_limit(page);
                        if at > 0 {
                            o = o.with_revision(at);
                        }
                        c.kv_client()
                            .max_decoding_message_size(MAX_RESPONSE_BYTES)
                            .get(key, Some(o))
                            .await
                    }
                })
                .await;
            let resp = match got {
                Ok(r) => r,
                // One page over the answer limit: smaller pages.
                Err(EtcdError::Request { message, .. })
                    if message.contains("message length too large") && page > 1 =>
                {
                    page /= 2;
                    continue;
                }
                // The snapshot's revision was compacted between two pages: start again at the
                // current revision (a few times; then the error is returned).
                Err(EtcdError::Request { message, .. })
                    if message.contains("compacted") && at > 0 && restarts < 3 =>
                {
                    restarts += 1;
                    (count, bytes, at) = (0, 0, 0);
                    each(Listed::Again)?;
                    from = start.clone().into_bytes();
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            if at == 0 {
                at = resp.header().map(|h| h.revision()).unwrap_or(0);
            }
            for kv in resp.kvs() {
                let name = kv.key()[start.len()..].to_vec();
                let name = String::from_utf8(name).map_err(|_| {
                    EtcdError::Bound(format!(
                        "a key under {start} is not UTF-8: {}",
                        String::from_utf8_lossy(kv.key())
                    ))
                })?;
                bytes += kv.value().len();
                count += 1;
                if count > MAX_LIST_OBJECTS || bytes > MAX_LIST_BYTES {
                    return Err(EtcdError::Bound(format!(
                        "{kind}: more than {MAX_LIST_OBJECTS} objects or {MAX_LIST_BYTES} bytes under {start}"
                    ))
                    .into());
                }
                each(Listed::Object(name, self.versioned(kv)?))?;
            }
            match resp.kvs().last() {
                Some(last) if resp.more() => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => break,
            }
        }
        self.saw(to_u64(at));
        Ok(())
    }

    async fn commit(&self, ops: Vec<Op>) -> Result<u64, StoreError> {
        if ops.is_empty() {
            return Ok(self.revision());
        }
        let revision = self.commits.commit(&self.endpoints, ops, None).await?;
        self.saw(revision);
        Ok(revision)
    }

    async fn commit_fenced(&self, ops: Vec<Op>, based_on: u64) -> Result<u64, StoreError> {
        if ops.is_empty() {
            return Ok(self.revision());
        }
        let revision = self
            .commits
            .commit(&self.endpoints, ops, Some(based_on))
            .await?;
        self.saw(revision);
        Ok(revision)
    }

    fn revision(&self) -> u64 {
        *self.tx.borrow()
    }

    fn watch(&self) -> watch::Receiver<u64> {
        let mut w = self.watcher.lock().unwrap_or_else(|e| e.into_inner());
        if w.is_none() {
            *w = Some(tokio::spawn(watcher::follow(
                self.endpoints.clone(),
                self.prefix.clone(),
                *self.tx.borrow(),
                Arc::downgrade(&self.tx),
            )));
        }
        self.tx.subscribe()
    }

    /// The changes under the prefix after revision `from`, decoded, in revision order, and the
    /// state of that stream's link to etcd; the stream also moves [`Store::revision`] on.
    fn changes(&self, from: u64) -> Option<crate::store::Changes> {
        Some(changes::spawn(
            self.endpoints.clone(),
            self.prefix.clone(),
            from,
            Arc::downgrade(&self.tx),
        ))
    }
}
