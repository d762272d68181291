//! Prometheus metrics (opt-in): counters of applies, failures and drift, and the current state,
//! served in the text exposition format on a local TCP address or a unix socket.

use crate::state::State;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The agent's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    applies_done: AtomicU64,
    applies_rebooting: AtomicU64,
    applies_degraded: AtomicU64,
    applies_unreconcilable: AtomicU64,
    drift_events: AtomicU64,
    drift_reverted: AtomicU64,
    state: Mutex<Option<State>>,
}

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
        let c = match r {
            ApplyResult::Done => &self.applies_done,
            ApplyResult::Rebooting => &self.applies_rebooting,
            ApplyResult::Degraded => &self.applies_degraded,
            ApplyResult::Unreconcilable => &self.applies_unreconcilable,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a drift event.
    pub fn drift(&self, reverted: bool) {
        self.drift_events.fetch_add(1, Ordering::Relaxed);
        if reverted {
            self.drift_reverted.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records the state.
    pub fn set_state(&self, s: State) {
        if let Ok(mut g) = self.state.lock() {
            *g = Some(s);
        }
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP hearth_agent_applies_total Applies, by how they ended."
        );
        let _ = writeln!(out, "# TYPE hearth_agent_applies_total counter");
        for (label, c) in [
            ("done", &self.applies_done),
            ("rebooting", &self.applies_rebooting),
            ("degraded", &self.applies_degraded),
            ("unreconcilable", &self.applies_unreconcilable),
        ] {
            let _ = writeln!(
                out,
                "hearth_agent_applies_total{{result=\"{label}\"}} {}",
                c.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(out, "# HELP hearth_agent_apply_failures_total Applies that ended Degraded or Unreconcilable.");
        let _ = writeln!(out, "# TYPE hearth_agent_apply_failures_total counter");
        let failures = self.applies_degraded.load(Ordering::Relaxed)
            + self.applies_unreconcilable.load(Ordering::Relaxed);
        let _ = writeln!(out, "hearth_agent_apply_failures_total {failures}");
        let _ = writeln!(
            out,
            "# HELP hearth_agent_drift_events_total Managed paths found changed by hand."
        );
        let _ = writeln!(out, "# TYPE hearth_agent_drift_events_total counter");
        let _ = writeln!(
            out,
            "hearth_agent_drift_events_total {}",
            self.drift_events.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP hearth_agent_drift_reverted_total Drifted paths put back."
        );
        let _ = writeln!(out, "# TYPE hearth_agent_drift_reverted_total counter");
        let _ = writeln!(
            out,
            "hearth_agent_drift_reverted_total {}",
            self.drift_reverted.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP hearth_agent_state The node's state (1 for the current one)."
        );
        let _ = writeln!(out, "# TYPE hearth_agent_state gauge");
        let current = self.state.lock().ok().and_then(|g| *g);
        for s in [
            State::Done,
            State::Working,
            State::Degraded,
            State::Unreconcilable,
            State::Rebooting,
            State::Trial,
        ] {
            let v = u8::from(current == Some(s));
            let _ = writeln!(out, "hearth_agent_state{{state=\"{s}\"}} {v}");
        }
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

async fn respond<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut stream: S,
    metrics: Arc<Metrics>,
) {
    let mut buf = [0u8; 1024];
    // Read the request head (any path answers with the metrics).
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), stream.read(&mut buf)).await;
    let body = metrics.render();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[tokio::test]
    async fn served_on_a_unix_socket() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("m.sock");
        let m = Arc::new(Metrics::default());
        m.applied(ApplyResult::Rebooting);
        serve(&format!("unix:{}", sock.display()), m).await.unwrap();
        let mut s = tokio::net::UnixStream::connect(&sock).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK"));
        assert!(out.contains("hearth_agent_applies_total{result=\"rebooting\"} 1"));
    }
}
