//! Prometheus metrics (`GET /metrics`) through `prometheus-client`, in the OpenMetrics text
//! format (which Prometheus reads): request counters, long-polls, applies, store commits and
//! conflicts, and gauges of the fleet (nodes by pool and state) taken at each scrape.

use crate::api::NodeState;
use crate::fleet::Fleet;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;

/// The media type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the pacer counts ([`crate::pace`]), shown under `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct PaceMetrics {
    /// Answers that went at once with a time to report after (deferred reports).
    pub deferred: Counter,
    /// Answers that waited for a turn.
    pub waited: Counter,
    /// Answers that went without a turn after waiting the limit.
    pub gave_up: Counter,
    /// Turns ended by their lease, not by their node.
    pub expired: Counter,
    /// Answers waiting for a turn now.
    pub waiting: Gauge,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

/// The upper bounds of the request-duration buckets, in seconds: 1 ms to 30 s.
const DURATION_BUCKETS: [f64; 14] = [
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stage: String,
}

/// The upper bounds of the commit-duration buckets, in seconds: 0.1 ms to 5 s.
const COMMIT_BUCKETS: [f64; 14] = [
    0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 5.0,
];

/// The upper bounds of the group-size buckets (changes committed together).
const GROUP_BUCKETS: [f64; 12] = [
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0,
];

/// The type of an event (`Normal`, `Warning`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventTypeLabels {
    /// `Normal` or `Warning`.
    pub event_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    pool: String,
    state: String,
}

/// The server's counters (cheap clones of `prometheus-client` metrics, shared by the
/// registry each scrape builds).
#[derive(Debug)]
pub struct Metrics {
    requests: Family<RequestLabels, Counter>,
    durations: Family<RouteLabels, Histogram, fn() -> Histogram>,
    long_polls_waiting: Gauge,
    admin_changes_waiting: Gauge,
    long_polls: Counter,
    desired_served: Counter,
    pace: PaceMetrics,
    events_not_logged: Family<EventTypeLabels, Counter>,
    applies: Counter,
    commits: Counter,
    commit_stages: Family<StageLabels, Histogram, fn() -> Histogram>,
    group_sizes: Histogram,
    conflicts: Counter,
    plans_under_lock: Counter,
    reports_read_back: Counter,
}

/// Decrements the waiting long-polls when dropped.
#[derive(Debug)]
pub struct Waiting<'a>(&'a Metrics);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.long_polls_waiting.dec();
    }
}

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

fn commit_histogram() -> Histogram {
    Histogram::new(COMMIT_BUCKETS)
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Family::default(),
            durations: Family::new_with_constructor(duration_histogram),
            long_polls_waiting: Gauge::default(),
            admin_changes_waiting: Gauge::default(),
            long_polls: Counter::default(),
            desired_served: Counter::default(),
            pace: PaceMetrics::default(),
            events_not_logged: Family::default(),
            applies: Counter::default(),
            commits: Counter::default(),
            commit_stages: Family::new_with_constructor(commit_histogram),
            group_sizes: Histogram::new(GROUP_BUCKETS),
            conflicts: Counter::default(),
            plans_under_lock: Counter::default(),
            reports_read_back: Counter::default(),
        }
    }
}

impl Metrics {
    /// Counts a request by method, route template and status, and how long the server took to
    /// answer it (from the routed request to the response): `None` for a route whose answer
    /// waits on purpose (a long-poll, an event stream), whose duration says how long nothing
    /// changed, not how fast the server is.
    pub fn request(
        &self,
        method: &str,
        route: &str,
        status: u16,
        took: Option<std::time::Duration>,
    ) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method.to_string(),
                route: route.to_string(),
                status: status.to_string(),
            })
            .inc();
        if let Some(took) = took {
            self.durations
                .get_or_create(&RouteLabels {
                    method: method.to_string(),
                    route: route.to_string(),
                })
                .observe(took.as_secs_f64());
        }
    }

    /// The admins' changes waiting for their turn (`App::admin_turn`), shared with it.
    pub fn admin_changes_waiting(&self) -> Gauge {
        self.admin_changes_waiting.clone()
    }

    /// A long-poll starts waiting; it stops when the guard is dropped.
    pub fn waiting(&self) -> Waiting<'_> {
        self.long_polls.inc();
        self.long_polls_waiting.inc();
        Waiting(self)
    }

    /// A desired config was sent.
    pub fn desired_served(&self) {
        self.desired_served.inc();
    }

    /// The pacer's own counters (shared: cheap clones of the same metrics).
    pub fn pace(&self) -> PaceMetrics {
        self.pace.clone()
    }

    /// The nodes' events the log left out, by type (shared with
    /// [`crate::telemetry::logging::NodeEventLog`]).
    pub fn events_not_logged(&self) -> Family<EventTypeLabels, Counter> {
        self.events_not_logged.clone()
    }

    /// An apply.
    pub fn apply(&self) {
        self.applies.inc();
    }

    /// A store commit: how long deciding it took (the change, the reconcile and the diff,
    /// under the writer lock) and how long the store took to make it durable.
    pub fn commit(&self, decide: std::time::Duration, store: std::time::Duration) {
        self.commits.inc();
        for (stage, took) in [("decide", decide), ("store", store)] {
            self.commit_stages
                .get_or_create(&StageLabels {
                    stage: stage.to_string(),
                })
                .observe(took.as_secs_f64());
        }
    }

    /// A group commit of `changes` changes (status reports, enrollments) was made.
    pub fn group(&self, changes: usize) {
        self.group_sizes.observe(changes as f64);
    }

    /// Reboot plans (maintenance windows) that had to be made under the writer lock.
    pub fn plans_under_lock(&self, n: u64) {
        self.plans_under_lock.inc_by(n);
    }

    /// A store conflict.
    pub fn conflict(&self) {
        self.conflicts.inc();
    }

    /// Nodes' reports read back from the store to be shown (a node's view, a list's full view).
    pub fn reports_read_back(&self, n: u64) {
        self.reports_read_back.inc_by(n);
    }

    /// The exposition (OpenMetrics text).
    pub fn render(&self, fleet: &Fleet) -> String {
        let mut r = Registry::default();
        r.register(
            "hearth_server_http_requests",
            "HTTP requests by method, route and status",
            self.requests.clone(),
        );
        r.register(
            "hearth_server_http_request_duration_seconds",
            "Time from the routed request to its response, by method and route (long-polls and event streams not counted: they wait on purpose); time a request spent queued before the server read it is not in it",
            self.durations.clone(),
        );
        r.register(
            "hearth_server_long_polls_waiting",
            "Agent long-polls waiting for a change",
            self.long_polls_waiting.clone(),
        );
        r.register(
            "hearth_server_admin_changes_waiting",
            "Admins' changes waiting for the ones that arrived before them (applies, deletes, labels, pauses...): one that stays up means a change before them takes long (a render)",
            self.admin_changes_waiting.clone(),
        );
        r.register(
            "hearth_server_long_polls",
            "Agent long-polls that waited",
            self.long_polls.clone(),
        );
        r.register(
            "hearth_server_desired_configs_served",
            "Desired configs sent to agents",
            self.desired_served.clone(),
        );
        r.register(
            "hearth_server_desired_answers_deferred",
            "Desired-config answers sent at once to an agent told to report later (X-Hearth-Report-After; --deferred-reports-per-second)",
            self.pace.deferred.clone(),
        );
        r.register(
            "hearth_server_desired_answers_waited",
            "Desired-config answers that waited for a turn (--desired-answers-at-once)",
            self.pace.waited.clone(),
        );
        r.register(
            "hearth_server_desired_answers_gave_up",
            "Desired-config answers sent without a turn after waiting the limit (20 s)",
            self.pace.gave_up.clone(),
        );
        r.register(
            "hearth_server_desired_answers_waiting_for_turn",
            "Desired-config answers waiting for a turn now",
            self.pace.waiting.clone(),
        );
        r.register(
            "hearth_server_desired_turns_expired",
            "Turns of desired-config answers ended by their lease: the node was not heard from within 250 ms (agents that report only after applying)",
            self.pace.expired.clone(),
        );
        r.register(
            "hearth_server_node_events_not_logged",
            "Nodes' events not logged one by one (over the log's budget of 50 a second of each type, after a burst of 1,000); GET /api/v1/events lists the last 1,000 of each",
            self.events_not_logged.clone(),
        );
        r.register(
            "hearth_server_applies",
            "Manifest applies",
            self.applies.clone(),
        );
        r.register(
            "hearth_server_store_commits",
            "Store commits",
            self.commits.clone(),
        );
        r.register(
            "hearth_server_commit_duration_seconds",
            "Time per store commit by stage: decide (the change, the reconcile and the difference to write, under the writer lock) and store (until the store has it durably)",
            self.commit_stages.clone(),
        );
        r.register(
            "hearth_server_group_commit_changes",
            "Changes (status reports, enrollments) committed together in one group commit",
            self.group_sizes.clone(),
        );
        r.register(
            "hearth_server_store_conflicts",
            "Store commits refused by a compare-and-swap precondition",
            self.conflicts.clone(),
        );
        r.register(
            "hearth_server_reboot_plans_under_lock",
            "Plans (does an update need a reboot, for maintenance windows) made under the writer lock, which status reports wait for; the rest are made outside it",
            self.plans_under_lock.clone(),
        );
        r.register(
            "hearth_server_reports_read_back",
            "Nodes' last reports read back from the store to be shown whole (a node's view, a list's full view; a list's summary view reads none)",
            self.reports_read_back.clone(),
        );
        let revision = Gauge::<i64>::default();
        revision.set(fleet.revision as i64);
        r.register(
            "hearth_server_store_revision",
            "The store revision the server serves",
            revision,
        );
        let rendered = Gauge::<i64>::default();
        rendered.set(fleet.rendered.len() as i64);
        r.register(
            "hearth_server_rendered_configs",
            "Rendered configs kept",
            rendered,
        );
        let mut counts: BTreeMap<(String, String), i64> = BTreeMap::new();
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
        let nodes = Family::<NodeLabels, Gauge>::default();
        for ((pool, state), n) in counts {
            nodes.get_or_create(&NodeLabels { pool, state }).set(n);
        }
        r.register(
            "hearth_server_nodes",
            "Nodes by pool and reported state (Unknown: no report yet)",
            nodes,
        );
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &r);
        out
    }
}
