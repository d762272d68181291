//! Prometheus metrics in the text exposition format (`GET /metrics`).

use crate::api::NodeState;
use crate::fleet::Fleet;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

/// The server's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    long_polls_waiting: AtomicI64,
    long_polls: AtomicU64,
    desired_served: AtomicU64,
    applies: AtomicU64,
    commits: AtomicU64,
    conflicts: AtomicU64,
    plans_under_lock: AtomicU64,
}

/// Decrements the waiting long-polls when dropped.
#[derive(Debug)]
pub struct Waiting<'a>(&'a Metrics);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.long_polls_waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    /// Counts a request by method, route template and status.
    pub fn request(&self, method: &str, route: &str, status: u16) {
        if let Ok(mut m) = self.requests.lock() {
            *m.entry((method.to_string(), route.to_string(), status))
                .or_default() += 1;
        }
    }

    /// A long-poll starts waiting; it stops when the guard is dropped.
    pub fn waiting(&self) -> Waiting<'_> {
        self.long_polls.fetch_add(1, Ordering::Relaxed);
        self.long_polls_waiting.fetch_add(1, Ordering::Relaxed);
        Waiting(self)
    }

    /// A desired config was sent.
    pub fn desired_served(&self) {
        self.desired_served.fetch_add(1, Ordering::Relaxed);
    }

    /// An apply.
    pub fn apply(&self) {
        self.applies.fetch_add(1, Ordering::Relaxed);
    }

    /// A store commit.
    pub fn commit(&self) {
        self.commits.fetch_add(1, Ordering::Relaxed);
    }

    /// Reboot plans (maintenance windows) that had to be made under the writer lock.
    pub fn plans_under_lock(&self, n: u64) {
        self.plans_under_lock.fetch_add(n, Ordering::Relaxed);
    }

    /// A store conflict.
    pub fn conflict(&self) {
        self.conflicts.fetch_add(1, Ordering::Relaxed);
    }

    /// The text exposition.
    pub fn render(&self, fleet: &Fleet) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP hearth_server_http_requests_total HTTP requests by method, route and status.\n# TYPE hearth_server_http_requests_total counter"
        );
        if let Ok(m) = self.requests.lock() {
            for ((method, route, status), n) in m.iter() {
                let _ = writeln!(
                    out,
                    "hearth_server_http_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {n}",
                    route.replace('\\', "\\\\").replace('"', "\\\"")
                );
            }
        }
        let gauge = |out: &mut String, name: &str, help: &str, kind: &str, v: i64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
            );
        };
        gauge(
            &mut out,
            "hearth_server_long_polls_waiting",
            "Agent long-polls waiting for a change.",
            "gauge",
            self.long_polls_waiting.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "hearth_server_long_polls_total",
            "Agent long-polls that waited.",
            "counter",
            self.long_polls.load(Ordering::Relaxed) as i64,
        );
        gauge(
            &mut out,
            "hearth_server_desired_configs_served_total",
            "Desired configs sent to agents.",
            "counter",
            self.desired_served.load(Ordering::Relaxed) as i64,
        );
        gauge(
            &mut out,
            "hearth_server_applies_total",
            "Manifest applies.",
            "counter",
            self.applies.load(Ordering::Relaxed) as i64,
        );
        gauge(
            &mut out,
            "hearth_server_store_commits_total",
            "Store commits.",
            "counter",
            self.commits.load(Ordering::Relaxed) as i64,
        );
        gauge(
            &mut out,
            "hearth_server_store_conflicts_total",
            "Store commits refused by a compare-and-swap precondition.",
            "counter",
            self.conflicts.load(Ordering::Relaxed) as i64,
        );
        gauge(
            &mut out,
            "hearth_server_reboot_plans_under_lock_total",
            "Plans (does an update need a reboot, for maintenance windows) made under the writer lock, which status reports wait for; the rest are made outside it.",
            "counter",
            self.plans_under_lock.load(Ordering::Relaxed) as i64,
        );
        gauge(
            &mut out,
            "hearth_server_store_revision",
            "The store revision the server serves.",
            "gauge",
            fleet.revision as i64,
        );
        gauge(
            &mut out,
            "hearth_server_rendered_configs",
            "Rendered configs kept.",
            "gauge",
            fleet.rendered.len() as i64,
        );
        let _ = writeln!(
            out,
            "# HELP hearth_server_nodes Nodes by pool and reported state (Unknown: no report yet).\n# TYPE hearth_server_nodes gauge"
        );
        let mut counts: BTreeMap<(String, String), u64> = BTreeMap::new();
        for n in fleet.nodes.values() {
            let pool = n.value.pool.clone().unwrap_or_default();
            let state = n
                .value
                .state()
                .map(NodeState::as_str)
                .unwrap_or("Unknown")
                .to_string();
            *counts.entry((pool, state)).or_default() += 1;
        }
        for p in fleet.pools.keys() {
            for s in NodeState::ALL.iter().map(|s| s.as_str()).chain(["Unknown"]) {
                counts.entry((p.clone(), s.to_string())).or_default();
            }
        }
        for ((pool, state), n) in counts {
            let _ = writeln!(
                out,
                "hearth_server_nodes{{pool=\"{pool}\",state=\"{state}\"}} {n}"
            );
        }
        out
    }
}
