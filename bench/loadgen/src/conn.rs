//! Connections to the server: the target URL and its TLS setup, one HTTP/1.1 connection per
//! simulated client, and the kinds of failure counted.

use anyhow::{anyhow, bail, Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
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
            path,
        })
    }

    /// A new connection, from `source` when given (the port is the system's choice).
    pub(crate) async fn connect(&self, source: Option<IpAddr>) -> Result<Conn, Fail> {
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
        let tls = TlsConnector::from(self.tls.clone())
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| Fail::Tls(short(&e.to_string())))?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| Fail::Http(short(&e.to_string())))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            send,
            host: self.host.clone(),
        })
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

pub(crate) struct Conn {
    pub(crate) send: SendRequest<Full<Bytes>>,
    pub(crate) host: String,
}

pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) desired: Option<String>,
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
            self.send
                .ready()
                .await
                .map_err(|e| Fail::Http(short(&e.to_string())))?;
            let mut b = Request::builder()
                .method(method)
                .uri(path)
                .header(hyper::header::HOST, &self.host)
                .header(hyper::header::USER_AGENT, "hearth-loadgen");
            if let Some(t) = token {
                b = b.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
            }
            if body.is_some() {
                b = b.header(hyper::header::CONTENT_TYPE, "application/json");
            }
            let req = b
                .body(Full::new(Bytes::from(body.unwrap_or_default())))
                .map_err(|e| Fail::Http(short(&e.to_string())))?;
            let resp = self
                .send
                .send_request(req)
                .await
                .map_err(|e| Fail::Http(short(&e.to_string())))?;
            let status = resp.status();
            let desired = resp
                .headers()
                .get("x-hearth-desired")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| Fail::Http(short(&e.to_string())))?
                .to_bytes();
            Ok(Answer {
                status,
                desired,
                body,
            })
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| Fail::Timeout)?
    }
}
