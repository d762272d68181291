//! Starting the server: the state directory, the store, the TLS listener.

use crate::app::{App, Options};
use crate::http;
use crate::http::limits;
use crate::pki::{self, Layout};
use crate::store::backend::Backend;
use crate::store::etcd::session::Session;
use crate::store::etcd::{EtcdConfig, EtcdStore};
use crate::store::RedbStore;
use anyhow::{Context, Result};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// How to start.
#[derive(Debug, Clone)]
pub struct Config {
    /// The state directory.
    pub state_dir: PathBuf,
    /// Where to listen.
    pub listen: SocketAddr,
    /// Names and addresses for the serving certificate.
    pub sans: Vec<String>,
    /// Everything else.
    pub options: Options,
    /// Keep the store on etcd instead of the embedded database (`--etcd-endpoints`).
    pub etcd: Option<EtcdConfig>,
}

/// How long a stopping server waits for the changes it has read (and the group commits under
/// way) to be committed.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(20);

/// A running server.
#[derive(Debug)]
pub struct Running {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// Its state.
    pub app: Arc<App>,
    /// Where its files are.
    pub layout: Layout,
    /// True when this start created the CA (first start).
    pub first_start: bool,
    /// Pools whose bootstrap token was created by this start.
    pub new_bootstrap_tokens: Vec<String>,
    /// The fleet CA's sha256 fingerprint.
    pub ca_fingerprint: String,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    session: Option<Session>,
    follower: Option<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// The URL clients use (`https://<first SAN>:<port>` unless advertised otherwise).
    pub fn url(&self) -> String {
        if let Some(u) = self.app.options.advertise_urls.first() {
            return u.clone();
        }
        format!("https://localhost:{}", self.addr.port())
    }

    /// Stops accepting, cuts open connections, lets the changes already read finish (at most
    /// [`DRAIN_LIMIT`]) and closes the store (on etcd: ends the replica's session at once, so
    /// that the controller role passes without waiting for its lease).
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
        self.app.background.drain(DRAIN_LIMIT).await;
        // What the log left out since it last said so, the drained changes' included.
        self.app.node_event_log.say_left_out_now();
        if let Some(f) = self.follower {
            f.abort();
        }
        if let Some(session) = self.session {
            session.end().await;
        }
    }

    /// How to use this server, for people (printed at first start).
    pub fn instructions(&self, url: &str) -> String {
        let l = &self.layout;
        let mut out = String::new();
        out.push_str(&format!(
            "hearth-server: listening on {} ({url})\n",
            self.addr
        ));
        if self.first_start {
            out.push_str(&format!(
                "First start: created a CA, a serving certificate and an admin token in {}.\n",
                l.dir.display()
            ));
        }
        out.push_str(&format!(
            "CA certificate: {} (sha256 {})\n",
            l.ca_cert().display(),
            self.ca_fingerprint
        ));
        out.push_str("\nPoint the CLI at this server:\n");
        out.push_str(&format!(
            "  hearth login --server {url} --ca {} --token \"$(cat {})\"\n",
            l.ca_cert().display(),
            l.admin_token().display()
        ));
        out.push_str(&format!(
            "  (or set HEARTH_SERVER={url} HEARTH_CA={} HEARTH_TOKEN=...)\n",
            l.ca_cert().display()
        ));
        out.push_str("\nEnroll a node (first boot): point Ignition at the pool's config with its bootstrap token, e.g.\n");
        out.push_str(&format!(
            "  ignition.config.url={url}/config/worker?token=$(cat {})\n",
            l.bootstrap_token("worker").display()
        ));
        out.push_str("  with the CA above in the pointer config's ignition.security.tls.certificateAuthorities.\n");
        out.push_str("  (or, better, send it as a header: the pointer config's ignition.config.merge[].httpHeaders\n   with Authorization: Bearer <token>; a URL ends up in logs and the kernel command line)\n");
        out.push_str(&format!(
            "  Bootstrap tokens: {}/<pool>.token (master, worker); they expire ({}); `hearth bootstrap-token POOL` makes a new one for any pool\n  (the old one stops working, the file is updated).\n",
            l.dir.join("tokens").display(),
            match self.app.options.bootstrap_ttl {
                Some(d) => format!("valid for {} s after they are made, --bootstrap-token-ttl", d.as_secs()),
                None => "never: --bootstrap-token-ttl 0".to_string(),
            }
        ));
        out.push_str(&format!(
            "\nPrometheus: /metrics with the read-only token in {}\n",
            l.metrics_token().display()
        ));
        out
    }
}

/// Starts the server: sets up the state directory, opens the store, binds, serves.
pub async fn start(config: Config) -> Result<Running> {
    let layout = Layout {
        dir: config.state_dir.clone(),
    };
    let init = pki::init(&layout, &config.sans)?;
    // Bound before the tokens are written: whoever sees the token files can connect (requests
    // wait in the backlog until the server accepts).
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let addr = listener.local_addr()?;
    let (store, session) = match &config.etcd {
        None => (
            Backend::Embedded(RedbStore::open(&layout.database())?),
            None,
        ),
        Some(etcd) => {
            let store = EtcdStore::connect(etcd).await?;
            let who = format!(
                "hearth-server pid {} on {}, listening on {addr}, state directory {}, since {}",
                std::process::id(),
                pki::hostname(),
                layout.dir.display(),
                crate::time::rfc3339(crate::time::now())
            );
            let session = Session::start(&store, who).await?;
            store.remove_stale_markers().await?;
            tracing::info!(endpoints = ?etcd.endpoints, prefix = %etcd.prefix, "the store is on etcd; this server is one of its replicas");
            (Backend::Etcd(store), Some(session))
        }
    };
    let mut options = config.options.clone();
    options.token_dir = Some(layout.dir.join("tokens"));
    options.metrics_token_sha256 = Some(pki::token_hash(&pki::metrics_token(&layout)?));
    let app = Arc::new(
        App::new(store, options, init.tls.ca_pem.clone())
            .await
            .context("cannot load the store")?,
    );
    // On etcd: the fleet follows every replica's changes from here on.
    let follower = session
        .as_ref()
        .and_then(|s| app.start_following(s.state(), s.role()));
    let new_bootstrap_tokens = app.ensure_defaults(&layout, &init.admin_token).await?;

    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    // Client certificates are optional; one that is presented must be signed by the fleet CA,
    // be valid now and be meant for client authentication, or the handshake fails.
    let mut roots = rustls::RootCertStore::empty();
    {
        use rustls::pki_types::pem::PemObject;
        let ca = rustls::pki_types::CertificateDer::from_pem_slice(init.tls.ca_pem.as_bytes())
            .context("the fleet CA certificate is not PEM")?;
        roots
            .add(ca)
            .context("the fleet CA certificate is not usable as a trust anchor")?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .context("TLS client-certificate setup")?;
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS setup")?
        .with_client_cert_verifier(verifier)
        .with_single_cert(init.tls.chain.clone(), init.tls.key.clone_key())
        .context("the serving certificate does not match its key")?;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(tls));

    let router = http::router(app.clone());
    let (shutdown, mut stop) = tokio::sync::watch::channel(false);
    let ticker = {
        let app = app.clone();
        let every = config.options.tick.max(Duration::from_millis(100));
        let mut stop = shutdown.subscribe();
        let notifier = hearth_daemon::Notifier::new();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = tokio::time::sleep(every) => {
                        // An apply to a large pool makes every agent's long-poll answer and
                        // both its reports at once: tens of thousands of short-lived buffers
                        // over the allocator's per-thread arenas, whose free pages glibc keeps
                        // (RSS some 18 KiB per agent above idle after each apply at 10,000
                        // agents, docs/performance.md). Each tick gives them back: all of them
                        // when glibc is the allocator (built without the `jemalloc` feature);
                        // with jemalloc, those of the C libraries (TLS), while jemalloc's
                        // background threads purge its own (main.rs).
                        let took = hearth_daemon::memory::trim_heap();
                        tracing::debug!(took_ms = took.as_millis() as u64, "heap trimmed");
                        // The node events the log left out since it last said so.
                        app.node_event_log.say_left_out(std::time::Instant::now());
                        // On etcd, the periodic work is the controller replica's alone.
                        if !app.is_controller() {
                            notifier.watchdog();
                            continue;
                        }
                        if let Err(e) = app.tick().await {
                            tracing::warn!(error = %e, "periodic reconcile failed");
                        }
                        // The tick ran (even when it failed: the store's trouble is logged, and
                        // a restart would not mend it): the runtime and the write path are alive.
                        notifier.watchdog();
                    }
                }
            }
        })
    };
    let task = tokio::spawn(async move {
        let mut conns = JoinSet::new();
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
                accepted = listener.accept() => {
                    let (tcp, peer) = match accepted {
                        Ok(x) => x,
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let _ = tcp.set_nodelay(true);
                    let acceptor = acceptor.clone();
                    let router = router.clone();
                    conns.spawn(async move {
                        let tls = match tokio::time::timeout(limits::TLS_HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                tracing::debug!(%peer, "TLS handshake timed out");
                                return;
                            }
                        };
                        // A verified client certificate names its holder for the whole connection.
                        let identity = tls
                            .get_ref()
                            .1
                            .peer_certificates()
                            .and_then(|c| c.first())
                            .and_then(|c| pki::client_identity(c.as_ref()));
                        let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                            let mut req = req.map(axum::body::Body::new);
                            if let Some(id) = &identity {
                                req.extensions_mut().insert(id.clone());
                            }
                            req.extensions_mut().insert(crate::http::Peer(peer));
                            router.clone().oneshot(req)
                        });
                        let mut builder = auto::Builder::new(TokioExecutor::new());
                        // A client gets 30 s to send a request's headers (no slow-loris);
                        // heads are bounded, and so is the buffer of a connection's input,
                        // which hyper never shrinks while the connection is open (limits.rs).
                        builder
                            .http1()
                            .timer(TokioTimer::new())
                            .header_read_timeout(limits::HEADER_READ_TIMEOUT)
                            .max_buf_size(limits::HTTP1_MAX_BUF_BYTES);
                        builder
                            .http2()
                            .timer(TokioTimer::new())
                            .keep_alive_interval(Duration::from_secs(60))
                            .keep_alive_timeout(Duration::from_secs(20))
                            .max_concurrent_streams(limits::H2_MAX_CONCURRENT_STREAMS)
                            .max_header_list_size(limits::H2_MAX_HEADER_LIST_BYTES);
                        if let Err(e) = builder
                            .serve_connection(TokioIo::new(tls), service)
                            .await
                        {
                            tracing::debug!(%peer, error = %e, "connection ended");
                        }
                    });
                }
            }
        }
        conns.abort_all();
        while conns.join_next().await.is_some() {}
        let _ = ticker.await;
    });

    Ok(Running {
        addr,
        app,
        layout,
        first_start: init.created_ca,
        new_bootstrap_tokens,
        ca_fingerprint: init.tls.ca_fingerprint.clone(),
        shutdown,
        task,
        session,
        follower,
    })
}
