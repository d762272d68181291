//! Connections to the server: the target URL and its TLS setup, one HTTP/1.1 connection per
//! simulated client, and the kinds of failure counted.

use anyhow::{anyhow, bail, Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::{http1, http2};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;

#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) addr: SocketAddr,
    pub(crate) host: String,
    pub(crate) server_name: ServerName<'static>,
    pub(crate) tls: Arc<rustls::ClientConfig>,
    /// The same, offering only HTTP/2 (`--agents-per-connection` above 1).
    pub(crate) tls_h2: Arc<rustls::ClientConfig>,
    /// The path of the URL (`/` when none).
    pub(crate) path: String,
}

impl Target {
    pub(crate) fn new(url: &str, ca: &std::path::Path) -> Result<Target> {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| anyhow!("{url}: only https:// URLs are supported"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        let (host, port) = if let Some(h) = authority.strip_prefix('[') {
            let (h, p) = h
                .split_once(']')
                .ok_or_else(|| anyhow!("{url}: bad IPv6 address"))?;
            (
                h.to_string(),
                p.strip_prefix(':').unwrap_or("443").to_string(),
            )
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p.to_string()),
                None => (authority.to_string(), "443".to_string()),
            }
        };
        let port: u16 = port
            .parse()
            .map_err(|_| anyhow!("{url}: bad port {port:?}"))?;
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {host}"))?
            .next()
            .ok_or_else(|| anyhow!("{host} has no address"))?;
        let pem = std::fs::read(ca).with_context(|| format!("cannot read {}", ca.display()))?;
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&pem) {
            roots
                .add(c.map_err(|e| anyhow!("{}: {e}", ca.display()))?)
                .map_err(|e| anyhow!("{}: {e}", ca.display()))?;
        }
        if roots.is_empty() {
            bail!("{} holds no certificate", ca.display());
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut tls_h2 = tls.clone();
        tls_h2.alpn_protocols = vec![b"h2".to_vec()];
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let server_name = ServerName::try_from(host.clone())
            .map_err(|e| anyhow!("{host} is not a valid server name: {e}"))?;
        Ok(Target {
            addr,
            host: if port == 443 {
                host.clone()
            } else if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            },
            server_name,
            tls: Arc::new(tls),
            tls_h2: Arc::new(tls_h2),
            path,
        })
    }

    /// A new HTTP/1.1 connection, from `source` when given (the port is the system's choice).
    pub(crate) async fn connect(&self, source: Option<IpAddr>) -> Result<Conn, Fail> {
        let tls = self.tls_over_tcp(source, &self.tls).await?;
        let (send, conn) = http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| Fail::Http(short(&e.to_string())))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            send: Sender::H1(send),
            host: self.host.clone(),
        })
    }

    /// A new HTTP/2 connection (ALPN `h2`), which several simulated agents share.
    pub(crate) async fn connect_h2(&self, source: Option<IpAddr>) -> Result<Conn, Fail> {
        let tls = self.tls_over_tcp(source, &self.tls_h2).await?;
        if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Err(Fail::Http("the server did not agree to HTTP/2".into()));
        }
        let (send, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .map_err(|e| Fail::Http(short(&e.to_string())))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            send: Sender::H2(send),
            host: self.host.clone(),
        })
    }

    async fn tls_over_tcp(
        &self,
        source: Option<IpAddr>,
        config: &Arc<rustls::ClientConfig>,
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, Fail> {
        let fail = |e: std::io::Error| Fail::Connect(e.kind().to_string());
        let tcp = match source {
            None => TcpStream::connect(self.addr).await.map_err(fail)?,
            Some(ip) => {
                let socket = if ip.is_ipv4() {
                    TcpSocket::new_v4()
                } else {
                    TcpSocket::new_v6()
                }
                .map_err(fail)?;
                socket.bind(SocketAddr::new(ip, 0)).map_err(fail)?;
                socket.connect(self.addr).await.map_err(fail)?
            }
        };
        let _ = tcp.set_nodelay(true);
        TlsConnector::from(config.clone())
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| Fail::Tls(short(&e.to_string())))
    }
}

pub(crate) fn short(s: &str) -> String {
    s.chars().take(80).collect()
}

/// Why a request failed (the error kinds counted).
#[derive(Debug, Clone)]
pub(crate) enum Fail {
    Connect(String),
    Tls(String),
    Http(String),
    Timeout,
    Status(u16),
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fail::Connect(e) => write!(f, "connect: {e}"),
            Fail::Tls(e) => write!(f, "tls: {e}"),
            Fail::Http(e) => write!(f, "http: {e}"),
            Fail::Timeout => write!(f, "timeout"),
            Fail::Status(s) => write!(f, "status {s}"),
        }
    }
}

pub(crate) enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

pub(crate) struct Conn {
    pub(crate) send: Sender,
    pub(crate) host: String,
}

impl Conn {
    /// Another handle on the same connection: HTTP/2 only (HTTP/1.1 has one request at a time).
    pub(crate) fn share(&self) -> Option<Conn> {
        match &self.send {
            Sender::H1(_) => None,
            Sender::H2(s) if !s.is_closed() => Some(Conn {
                send: Sender::H2(s.clone()),
                host: self.host.clone(),
            }),
            Sender::H2(_) => None,
        }
    }
}

/// How an agent gets its connection: its own (HTTP/1.1, as a real agent), or a share of one
/// HTTP/2 connection per group of agents (`--agents-per-connection`).
pub(crate) enum Via {
    Own(Option<IpAddr>),
    Shared(Arc<H2Group>),
}

/// One HTTP/2 connection for a group of agents, made again when it breaks.
pub(crate) struct H2Group {
    pub(crate) source: Option<IpAddr>,
    pub(crate) conn: tokio::sync::Mutex<Option<Conn>>,
}

impl Via {
    pub(crate) async fn connect(&self, target: &Target) -> Result<Conn, Fail> {
        match self {
            Via::Own(source) => target.connect(*source).await,
            Via::Shared(g) => {
                let mut conn = g.conn.lock().await;
                if let Some(c) = conn.as_ref().and_then(Conn::share) {
                    return Ok(c);
                }
                let c = target.connect_h2(g.source).await?;
                let shared = c.share();
                *conn = Some(c);
                shared.ok_or_else(|| Fail::Http("the new HTTP/2 connection closed".into()))
            }
        }
    }
}

pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) desired: Option<String>,
    /// When the server asked for the next report (`x-hearth-report-after`, at most
    /// `hearth_api::MAX_REPORT_AFTER`), as hearth-agent reads it.
    pub(crate) report_after: Option<Duration>,
    pub(crate) body: Bytes,
}

impl Conn {
    pub(crate) async fn request(
        &mut self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<Answer, Fail> {
        let work = async {
            let ready = match &mut self.send {
                Sender::H1(s) => s.ready().await,
                Sender::H2(s) => s.ready().await,
            };
            ready.map_err(|e| Fail::Http(short(&e.to_string())))?;
            let mut b = Request::builder().method(method);
            b = match &self.send {
                Sender::H1(_) => b.uri(path).header(hyper::header::HOST, &self.host),
                // HTTP/2 carries the authority in the URI (`:authority`), not in Host.
                Sender::H2(_) => b.uri(format!("https://{}{path}", self.host)),
            };
            b = b.header(hyper::header::USER_AGENT, "hearth-loadgen");
            if let Some(t) = token {
                b = b.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
            }
            if body.is_some() {
                b = b.header(hyper::header::CONTENT_TYPE, "application/json");
            }
            let req = b
                .body(Full::new(Bytes::from(body.unwrap_or_default())))
                .map_err(|e| Fail::Http(short(&e.to_string())))?;
            let resp = match &mut self.send {
                Sender::H1(s) => s.send_request(req).await,
                Sender::H2(s) => s.send_request(req).await,
            }
            .map_err(|e| Fail::Http(short(&e.to_string())))?;
            let status = resp.status();
            let desired = resp
                .headers()
                .get(hearth_api::DESIRED_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let report_after = resp
                .headers()
                .get(hearth_api::REPORT_AFTER_HEADER)
                .and_then(|v| v.to_str().ok())
                .and_then(hearth_api::desired::report_after);
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| Fail::Http(short(&e.to_string())))?
                .to_bytes();
            Ok(Answer {
                status,
                desired,
                report_after,
                body,
            })
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| Fail::Timeout)?
    }
}
