//! Logging of the server, set up as the agent's (`hearth_daemon::logging`): under systemd (and
//! when the journal socket exists) logs go to the journal through `tracing-journald` with
//! structured fields, otherwise to stderr (coloured only on a terminal). Every event the server
//! commits (`hearth get events`) is also logged with a `MESSAGE_ID`, its reason and object, so
//! `journalctl MESSAGE_ID=…` finds a fleet's warnings without the API. The periodic tick feeds
//! systemd's watchdog (`hearth_daemon::Notifier`, `WatchdogSec=` in
//! `units/hearth-server.service`): a server whose runtime or reconcile loop hangs is restarted.

use crate::fleet::events::{Class, Recorded, KEPT_ASIDE};
use crate::telemetry::metrics::EventTypeLabels;
use hearth_api::text::escape;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `MESSAGE_ID` of a committed `Normal` event.
pub const MSG_EVENT: &str = "7b3e2d1c9a8f4e6db5c4a3f2e1d0c9b0";
/// `MESSAGE_ID` of a committed `Warning` event (a degraded node, a halted rollout, a failed
/// render, ...).
pub const MSG_EVENT_WARNING: &str = "7b3e2d1c9a8f4e6db5c4a3f2e1d0c9b1";
/// `MESSAGE_ID` of "the server is serving".
pub const MSG_STARTED: &str = "7b3e2d1c9a8f4e6db5c4a3f2e1d0c9b2";

pub use hearth_daemon::logging::init;

/// `MESSAGE_ID` of "events not logged one by one": nodes' (how many of each type, at most once a
/// second) or a change's beyond the first 1,000 of the fleet's (an apply of many Node
/// manifests).
pub const MSG_EVENTS_NOT_LOGGED: &str = "7b3e2d1c9a8f4e6db5c4a3f2e1d0c9b3";

/// A node's events of each type (`Normal`, `Warning`) logged one by one per second, on average;
/// the fleet's own events (pools, configs, admins' changes) are always logged.
pub const NODE_EVENTS_PER_SECOND: f64 = 50.0;
/// ... and at once, after a quiet time: as many as a change keeps aside for the log.
pub const NODE_EVENTS_BURST: f64 = KEPT_ASIDE as f64;

/// The log's budget for nodes' events: for each type, a token bucket of
/// [`NODE_EVENTS_PER_SECOND`] with bursts of [`NODE_EVENTS_BURST`]. An apply to a large pool
/// makes three events per node; logged one by one they would be hundreds of thousands of lines,
/// and journald, which keeps at most 10,000 messages of a service per 30 s by default
/// (`RateLimitBurst=`), would then drop the lines that matter with them. Warnings have a bucket
/// of their own, so that routine events never crowd them out (nor a node that keeps reporting
/// new failures the routine ones), and the fleet's events have none. What a bucket leaves out
/// is counted and said in one line at most once a second ([`MSG_EVENTS_NOT_LOGGED`]); the API
/// lists the last of them (`crate::fleet::events`).
#[derive(Debug)]
pub struct NodeEventLog {
    state: Mutex<Buckets>,
    /// `hearth_server_node_events_not_logged_total`, by type.
    not_logged: Family<EventTypeLabels, Counter>,
}

#[derive(Debug)]
struct Buckets {
    /// The burst and the rate a second ([`NODE_EVENTS_BURST`], [`NODE_EVENTS_PER_SECOND`]).
    burst: f64,
    rate: f64,
    /// `Normal`, `Warning`.
    tokens: [f64; 2],
    refilled: Instant,
    /// Left out since the last line that said so, of each type.
    left_out: [u64; 2],
    last_said: Instant,
}

/// The bucket of a class of events (`None`: the fleet's, always logged).
fn bucket(class: Class) -> Option<usize> {
    match class {
        Class::Fleet => None,
        Class::Node => Some(0),
        Class::NodeWarning => Some(1),
    }
}

/// The label of a bucket's type.
const TYPES: [&str; 2] = ["Normal", "Warning"];

impl NodeEventLog {
    /// Full buckets at `now`, counting what they leave out in `not_logged`.
    pub fn new(now: Instant, not_logged: Family<EventTypeLabels, Counter>) -> Self {
        // Both series from the start (at 0), so that an alert on them has something to read.
        for event_type in TYPES {
            let _ = not_logged.get_or_create(&EventTypeLabels { event_type });
        }
        NodeEventLog {
            state: Mutex::new(Buckets {
                burst: NODE_EVENTS_BURST,
                rate: NODE_EVENTS_PER_SECOND,
                tokens: [NODE_EVENTS_BURST; 2],
                refilled: now,
                left_out: [0; 2],
                last_said: now,
            }),
            not_logged,
        }
    }

    /// With another burst and rate (full buckets).
    pub fn with_budget(self, burst: f64, rate: f64) -> Self {
        {
            let mut b = self.state.lock().unwrap_or_else(|e| e.into_inner());
            (b.burst, b.rate, b.tokens) = (burst, rate, [burst; 2]);
        }
        self
    }

    /// How many of `n` node events of `class` may be logged one by one at `now` (the first
    /// ones); counts the rest, and `left_out_before` (left out before they reached the log).
    pub fn admit(&self, class: Class, n: usize, left_out_before: u64, now: Instant) -> usize {
        let Some(i) = bucket(class) else {
            return n;
        };
        let mut b = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = now.saturating_duration_since(b.refilled).as_secs_f64();
        b.refilled = b.refilled.max(now);
        let (rate, burst) = (b.rate, b.burst);
        for t in &mut b.tokens {
            *t = (*t + elapsed * rate).min(burst);
        }
        let k = (b.tokens[i].floor() as usize).min(n);
        b.tokens[i] -= k as f64;
        let left_out = (n - k) as u64 + left_out_before;
        b.left_out[i] += left_out;
        if left_out > 0 {
            self.not_logged
                .get_or_create(&EventTypeLabels {
                    event_type: TYPES[i],
                })
                .inc_by(left_out);
        }
        k
    }

    /// How many `Normal` and `Warning` events were left out since it was last said, if any and
    /// if it was said at least `every` before `now` (then it counts as said).
    pub fn to_say(&self, now: Instant, every: Duration) -> Option<[u64; 2]> {
        let mut b = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if b.left_out == [0; 2] || now.saturating_duration_since(b.last_said) < every {
            return None;
        }
        b.last_said = now;
        Some(std::mem::take(&mut b.left_out))
    }

    /// Logs the line saying how many node events were left out, when it is due (once a second
    /// at most).
    pub fn say_left_out(&self, now: Instant) {
        self.say(now, Duration::from_secs(1));
    }

    /// Logs the line saying how many node events were left out, if any (the server stops).
    pub fn say_left_out_now(&self) {
        self.say(Instant::now(), Duration::ZERO);
    }

    fn say(&self, now: Instant, every: Duration) {
        if let Some([normal, warning]) = self.to_say(now, every) {
            tracing::warn!(
                MESSAGE_ID = MSG_EVENTS_NOT_LOGGED,
                NORMAL = normal,
                WARNING = warning,
                "node events not logged one by one (over a burst of {NODE_EVENTS_BURST}, then {NODE_EVENTS_PER_SECOND} of a type a second): {normal} Normal, {warning} Warning; `hearth get events` lists the last {} of each",
                crate::fleet::events::KEPT_PER_CLASS
            );
        }
    }
}

/// Logs the events of a committed change: every fleet event, and the nodes' events that the
/// budget admits.
pub fn committed_events(recorded: &Recorded, budget: &NodeEventLog) {
    let now = Instant::now();
    let mut admitted = [Class::Fleet, Class::NodeWarning, Class::Node].map(|class| {
        let n = recorded
            .events
            .iter()
            .filter(|e| Class::of(e) == class)
            .count();
        (class, budget.admit(class, n, recorded.left_out(class), now))
    });
    for e in &recorded.events {
        let class = Class::of(e);
        let Some((_, left)) = admitted.iter_mut().find(|(c, _)| *c == class) else {
            continue;
        };
        if *left == 0 {
            continue;
        }
        *left -= 1;
        // A node's words (its reason) reach a terminal through journalctl: escaped.
        let (object, message) = (escape(&e.object), escape(&e.message));
        if e.kind == "Warning" {
            tracing::warn!(
                MESSAGE_ID = MSG_EVENT_WARNING,
                REASON = %escape(&e.reason),
                OBJECT = %object,
                "{object}: {message}"
            );
        } else {
            tracing::info!(
                MESSAGE_ID = MSG_EVENT,
                REASON = %escape(&e.reason),
                OBJECT = %object,
                "{object}: {message}"
            );
        }
    }
    let fleet = recorded.left_out(Class::Fleet);
    if fleet > 0 {
        tracing::info!(
            MESSAGE_ID = MSG_EVENTS_NOT_LOGGED,
            FLEET = fleet,
            "{fleet} more events of the fleet in this change, not logged one by one; `hearth get events` lists the last {}",
            crate::fleet::events::KEPT_PER_CLASS
        );
    }
    budget.say_left_out(now);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The budget: a burst at once, then the rate, for each type apart; the fleet's events are
    /// never held back; what it leaves out is counted, and said at most once a second.
    #[test]
    fn node_events_are_logged_at_a_bounded_rate_and_the_rest_counted() {
        const SECOND: Duration = Duration::from_secs(1);
        let t0 = Instant::now();
        let counted = Family::<EventTypeLabels, Counter>::default();
        let log = NodeEventLog::new(t0, counted.clone());
        let burst = NODE_EVENTS_BURST as usize;
        assert_eq!(log.admit(Class::Node, burst + 10, 5, t0), burst);
        assert_eq!(log.admit(Class::Fleet, 100_000, 0, t0), 100_000);
        assert_eq!(
            log.admit(Class::NodeWarning, 3, 0, t0),
            3,
            "routine events do not spend the warnings' budget"
        );
        assert_eq!(log.to_say(t0, SECOND), None, "said at most once a second");
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(log.to_say(t1, SECOND), Some([15, 0]));
        assert_eq!(
            log.to_say(t1 + Duration::from_secs(5), SECOND),
            None,
            "nothing new"
        );
        // Two seconds refill twice the rate (from the state at t0, all spent).
        let rate = NODE_EVENTS_PER_SECOND as usize;
        assert_eq!(log.admit(Class::Node, 10_000, 0, t1), 2 * rate);
        // A long quiet time refills up to the burst, not beyond.
        let later = t1 + Duration::from_secs(3600);
        assert_eq!(log.admit(Class::Node, 10 * burst, 0, later), burst);
        assert_eq!(log.admit(Class::Node, 1, 0, later), 0);
        assert_eq!(log.admit(Class::NodeWarning, burst + 1, 2, later), burst);
        let normal = (10_000 - 2 * rate + 9 * burst + 1) as u64;
        assert_eq!(log.to_say(later, SECOND), Some([normal, 3]));
        // Before the server stops: said at once.
        assert_eq!(log.admit(Class::Node, 1, 0, later), 0);
        assert_eq!(log.to_say(later, Duration::ZERO), Some([1, 0]));
        // The metric counts all of them (15 said at t1 among them), and goes on counting.
        let metric = |t| {
            counted
                .get_or_create(&EventTypeLabels { event_type: t })
                .get()
        };
        assert_eq!((metric("Normal"), metric("Warning")), (15 + normal + 1, 3));
    }
}
