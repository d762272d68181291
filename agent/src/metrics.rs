//! Prometheus metrics (opt-in): counters of applies, failures and drift, and the current state,
//! served in the text exposition format on a local TCP address or a unix socket.

use crate::state::State;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{header, Method, Request, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::Arc;

/// The media type of the exposition (OpenMetrics text, which Prometheus reads).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabel {
    url: String,
}

/// The agent's counters, in a `prometheus-client` registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    applies: Family<ResultLabel, Counter>,
    failures: Counter,
    drift_events: Counter,
    drift_reverted: Counter,
    state: Family<StateLabel, Gauge>,
    server: Family<ServerLabel, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let applies = Family::<ResultLabel, Counter>::default();
        let failures = Counter::default();
        let drift_events = Counter::default();
        let drift_reverted = Counter::default();
        let state = Family::<StateLabel, Gauge>::default();
        let server = Family::<ServerLabel, Gauge>::default();
        registry.register(
            "hearth_agent_applies",
            "Applies, by how they ended",
            applies.clone(),
        );
        registry.register(
            "hearth_agent_apply_failures",
            "Applies that ended Degraded or Unreconcilable",
            failures.clone(),
        );
        registry.register(
            "hearth_agent_drift_events",
            "Managed paths found changed by hand",
            drift_events.clone(),
        );
        registry.register(
            "hearth_agent_drift_reverted",
            "Drifted paths put back",
            drift_reverted.clone(),
        );
        registry.register(
            "hearth_agent_state",
            "The node's state (1 for the current one)",
            state.clone(),
        );
        registry.register(
            "hearth_agent_server",
            "The servers followed (1 for the one in use, 0 for the others of the list)",
            server.clone(),
        );
        for r in ["done", "rebooting", "degraded", "unreconcilable"] {
            let _ = applies.get_or_create(&ResultLabel { result: r });
        }
        for s in STATES {
            let _ = state.get_or_create(&StateLabel { state: s.as_str() });
        }
        Metrics {
            registry,
            applies,
            failures,
            drift_events,
            drift_reverted,
            state,
            server,
        }
    }
}

const STATES: [State; 6] = [
    State::Done,
    State::Working,
    State::Degraded,
    State::Unreconcilable,
    State::Rebooting,
    State::Trial,
];

/// How an apply ended, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyResult {
    /// Done.
    Done,
    /// Rebooting.
    Rebooting,
    /// Degraded.
    Degraded,
    /// Unreconcilable.
    Unreconcilable,
}

impl Metrics {
    /// Counts an apply.
    pub fn applied(&self, r: ApplyResult) {
        let result = match r {
            ApplyResult::Done => "done",
            ApplyResult::Rebooting => "rebooting",
            ApplyResult::Degraded => "degraded",
            ApplyResult::Unreconcilable => "unreconcilable",
        };
        self.applies.get_or_create(&ResultLabel { result }).inc();
        if matches!(r, ApplyResult::Degraded | ApplyResult::Unreconcilable) {
            self.failures.inc();
        }
    }

    /// Counts a drift event.
    pub fn drift(&self, reverted: bool) {
        self.drift_events.inc();
        if reverted {
            self.drift_reverted.inc();
        }
    }

    /// Records the state.
    pub fn set_state(&self, current: State) {
        for s in STATES {
            self.state
                .get_or_create(&StateLabel { state: s.as_str() })
                .set(i64::from(s == current));
        }
    }

    /// Records the servers followed (at most `hearth_api::servers::MAX_SERVERS` labels) and the
    /// one in use.
    pub fn set_server(&self, servers: &[String], current: &str) {
        for url in servers {
            self.server
                .get_or_create(&ServerLabel { url: url.clone() })
                .set(i64::from(url == current));
        }
    }

    /// The exposition (OpenMetrics text).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Serves `metrics` on `listen`: `unix:/path/to/socket` or `HOST:PORT` (keep it local).
pub async fn serve(listen: &str, metrics: Arc<Metrics>) -> std::io::Result<()> {
    if let Some(path) = listen.strip_prefix("unix:") {
        let _ = std::fs::remove_file(path);
        if let Some(parent) = std::path::Path::new(path).parent() {
            std::fs::create_dir_all(parent)?;
        }
        let listener = tokio::net::UnixListener::bind(path)?;
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                spawn_bounded(respond(stream, metrics.clone()));
            }
        });
    } else {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                spawn_bounded(respond(stream, metrics.clone()));
            }
        });
    }
    Ok(())
}

/// At most [`METRICS_MAX_CONNECTIONS`] scrapes at once (a further one is closed at once), each
/// given at most [`METRICS_EXCHANGE_TIMEOUT`] in all.
fn spawn_bounded(exchange: impl std::future::Future<Output = ()> + Send + 'static) {
    static SLOTS: tokio::sync::Semaphore =
        tokio::sync::Semaphore::const_new(METRICS_MAX_CONNECTIONS);
    let Ok(permit) = SLOTS.try_acquire() else {
        return;
    };
    tokio::spawn(async move {
        let _ = tokio::time::timeout(METRICS_EXCHANGE_TIMEOUT, exchange).await;
        drop(permit);
    });
}

/// How many metrics scrapes are answered at once.
pub const METRICS_MAX_CONNECTIONS: usize = 16;
/// How long one scrape (read the request head, write the answer) may take.
pub const METRICS_EXCHANGE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

async fn respond<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    metrics: Arc<Metrics>,
) {
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let metrics = metrics.clone();
        async move { Ok::<_, std::convert::Infallible>(answer(&req, &metrics)) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
        .await;
}

/// `GET /metrics` (or `HEAD`): the exposition; another method 405, another path 404.
fn answer(req: &Request<Incoming>, metrics: &Metrics) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, text: &'static str| {
        let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
        *r.status_mut() = status;
        r
    };
    if req.uri().path() != "/metrics" {
        return plain(StatusCode::NOT_FOUND, "the agent serves /metrics only\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD\n");
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let body = if req.method() == Method::HEAD {
        Bytes::new()
    } else {
        Bytes::from(metrics.render())
    };
    let mut r = Response::new(Full::new(body));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(CONTENT_TYPE),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn exposition_counts() {
        let m = Metrics::default();
        m.applied(ApplyResult::Done);
        m.applied(ApplyResult::Degraded);
        m.drift(true);
        m.set_state(State::Degraded);
        let text = m.render();
        assert!(text.contains("hearth_agent_applies_total{result=\"done\"} 1"));
        assert!(text.contains("hearth_agent_apply_failures_total 1"));
        assert!(text.contains("hearth_agent_drift_reverted_total 1"));
        assert!(text.contains("hearth_agent_state{state=\"Degraded\"} 1"));
        assert!(text.contains("hearth_agent_state{state=\"Done\"} 0"));
        m.set_server(&["https://a:1".into(), "https://b:2".into()], "https://b:2");
        let text = m.render();
        assert!(
            text.contains("hearth_agent_server{url=\"https://a:1\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("hearth_agent_server{url=\"https://b:2\"} 1"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn served_on_a_unix_socket() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("m.sock");
        let m = Arc::new(Metrics::default());
        m.applied(ApplyResult::Rebooting);
        serve(&format!("unix:{}", sock.display()), m).await.unwrap();
        let mut s = tokio::net::UnixStream::connect(&sock).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        assert!(out.contains("hearth_agent_applies_total{result=\"rebooting\"} 1"));
        assert!(out.trim_end().ends_with("# EOF"), "{out}");
        // Another path is 404, another method 405.
        for (req, status) in [
            ("GET /other HTTP/1.1\r\nHost: x\r\n\r\n", "404"),
            (
                "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
                "405",
            ),
        ] {
            let mut s = tokio::net::UnixStream::connect(&sock).await.unwrap();
            s.write_all(req.as_bytes()).await.unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            assert!(out.starts_with(&format!("HTTP/1.1 {status}")), "{out}");
        }
    }
}
