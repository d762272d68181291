//! Desired-config answers handed out as fast as the agents take them.
//!
//! An apply to a whole pool wakes every waiting long-poll of the pool at once: at 10,000 agents,
//! 10,000 answers go out in the same instant, and 10,000 status reports come back in the next,
//! each waiting behind all the others (a p99 of most of a second on two cores). The [`Pacer`]
//! keeps at most N answers *unacknowledged*: an answer takes a turn, and the turn ends when its
//! node is next heard from (a status report or its next long-poll), or after [`LEASE`] at the
//! latest. The others wait for a turn, first come first served. The server's work is the same;
//! answers no longer run ahead of what the server can take back, so reports do not queue
//! behind thousands of others.
//!
//! **Deferred reports.** An agent that says it can (`defer=true`, hearth-agent does) takes no
//! turn: its answer goes at once, with the time it waits before its next status report
//! (`x-hearth-report-after`), taken from a schedule of `--deferred-reports-per-second`. It
//! applies the config meanwhile. So an apply to 100,000 nodes reaches every agent as fast as the
//! answers can be written, and the reports still come back no faster than the schedule, and
//! not before the burst's answers are out (`Pacer::defer`). The schedule looks at most
//! [`hearth_api::MAX_REPORT_AFTER`] ahead; an answer beyond that waits for a turn as an older
//! agent's does.
//!
//! Bounds: a node holds at most one turn (its other answers go without one, and only its own
//! requests end its turn); a turn ends between [`LEASE`] and 1.5 × [`LEASE`] after it was taken
//! at the latest (a sweep every half lease); an answer waits at most [`WAIT_LIMIT`] for a turn and
//! then goes without one. So the slowest the pacer can make an apply is N answers per 1.5 ×
//! [`LEASE`], when no node is heard from in time (agents that report only after applying, a
//! server too loaded to answer a report within the lease).

use crate::telemetry::metrics::PaceMetrics;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Unacknowledged answers per core by default (`--desired-answers-at-once`: this times the
/// cores). Chosen on the 2-core benchmark machine (docs/performance.md) with reports of a real
/// agent's size (50 history items): at 10,000 agents 64 turns gave a p99 of 44-47 ms, 128 gave
/// 76-105 ms (with the generator's empty reports 128 gave 22 ms, 256 56 ms, 512 81 ms); that it
/// scales with the cores is a guess, not a measurement.
pub const TURNS_PER_CORE: usize = 32;

/// How long a turn lasts without its node being heard from (it ends within half as long again).
pub const LEASE: Duration = Duration::from_millis(250);

/// The longest an answer waits for a turn; after it the answer goes without one. Below the
/// 30 s that hearth-agent allows a long-poll beyond its `wait` (`agent/src/remote.rs`), so an
/// answer held back this long still reaches the agent.
pub const WAIT_LIMIT: Duration = Duration::from_secs(20);

/// Deferred reports per second per core by default (`--deferred-reports-per-second`: this
/// times the cores). Chosen on the 2-core benchmark machine (docs/performance.md, "Answers at
/// once, reports on a schedule"), where the server took some 5,000 reports of a real agent's
/// size a second while the load generator shared its cores: the schedule is open loop (report
/// times are handed out before any report comes back), so a stall of the server queues the
/// reports due meanwhile, and they drain at what the server takes beyond the schedule. At
/// 10,000 agents 3,000 a second kept the burst's reports within 50 ms in every run, 4,000 did
/// not in two runs of eight.
pub const DEFERRED_REPORTS_PER_CORE: u32 = 1_500;

/// Desired-config answers a second per core the server is taken to send in a burst, for the
/// wait before a burst's deferred reports ([`Pacer::woke`]). On the 2-core benchmark machine,
/// with the load generator beside it, 10,000 answers went in 0.55-0.75 s and 100,000 in
/// 4.1-7.2 s: 6,700-12,000 a second per core; the lower figure, less a margin, so that the
/// reports rather come a little late than into the burst.
pub const ANSWERS_PER_CORE: u32 = 6_000;

/// The shortest wait an agent is told (the header counts whole milliseconds); a shorter one is
/// none: the agent reports at once, and the answer is not counted as deferred.
const SHORTEST_REPORT_AFTER: Duration = Duration::from_millis(1);

/// Who answers next (one per server).
#[derive(Debug)]
pub struct Pacer {
    /// How many turns there are (0: no pacing).
    size: usize,
    turns: Arc<Semaphore>,
    /// The nodes holding a turn, since when.
    held: Mutex<HashMap<String, (Instant, OwnedSemaphorePermit)>>,
    lease: Duration,
    wait_limit: Duration,
    /// Deferred reports: the time between two of them (`None`: no deferral), and the
    /// schedule.
    deferral: Option<(Duration, Mutex<Schedule>)>,
    /// Answers a second taken to go out in a burst ([`ANSWERS_PER_CORE`] per core).
    answers_per_second: f64,
    metrics: PaceMetrics,
}

/// How an answer got to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// It took a turn; `waited`: not at once.
    Taken {
        /// Whether all turns were held when it asked.
        waited: bool,
    },
    /// At once, without a turn: pacing is off, or the node already holds a turn.
    Unpaced,
    /// At once, without a turn; the agent reports after this long (a deferred report).
    Deferred(Duration),
    /// Without a turn, after waiting the wait limit.
    GaveUp,
}

/// A turn taken for an answer: given back when dropped, unless [`Turned::keep`] says the answer
/// went (then it lasts until the node is heard from, or its lease ends).
#[derive(Debug)]
#[must_use = "a turn dropped at once is given back at once"]
pub struct Turned<'a> {
    pacer: &'a Pacer,
    node: &'a str,
    /// How it went.
    turn: Turn,
    kept: bool,
}

impl Turned<'_> {
    /// Whether the answer had to wait for its turn (then what it answers is looked at again).
    pub fn waited(&self) -> bool {
        matches!(self.turn, Turn::Taken { waited: true } | Turn::GaveUp)
    }

    /// How long the agent is asked to wait before its next report (a deferred report of at
    /// least a millisecond).
    pub fn report_after(&self) -> Option<Duration> {
        match self.turn {
            Turn::Deferred(d) if d >= SHORTEST_REPORT_AFTER => Some(d),
            _ => None,
        }
    }

    /// The answer went: the turn lasts until the node is heard from.
    pub fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for Turned<'_> {
    fn drop(&mut self) {
        if !self.kept && matches!(self.turn, Turn::Taken { .. }) {
            self.pacer.heard_from(self.node);
        }
    }
}

impl Pacer {
    /// At most `turns` unacknowledged answers (0: no pacing), each turn about `lease` long at
    /// most; an answer waits at most `wait_limit` for a turn. Agents that can wait
    /// ([`Pacer::turn`] with `defers`) are asked for at most `deferred_per_second` reports a
    /// second instead (0: no deferral). Inside a Tokio runtime (the
    /// server's `App::new` is async), a task ends the turns that outlive their lease; it stops
    /// when the pacer is dropped. Outside one nothing ends them but their nodes (tests only).
    pub fn new(
        turns: usize,
        lease: Duration,
        wait_limit: Duration,
        deferred_per_second: u32,
        metrics: PaceMetrics,
    ) -> Arc<Self> {
        let turns = turns.min(Semaphore::MAX_PERMITS);
        let pacer = Arc::new(Pacer {
            size: turns,
            turns: Arc::new(Semaphore::new(turns)),
            held: Mutex::new(HashMap::new()),
            lease,
            wait_limit,
            deferral: (deferred_per_second > 0 && turns > 0).then(|| {
                (
                    (Duration::from_secs(1) / deferred_per_second).max(Duration::from_nanos(1)),
                    Mutex::new(Schedule {
                        next: Instant::now(),
                        answers_out: Instant::now(),
                        nodes: HashMap::new(),
                    }),
                )
            }),
            answers_per_second: f64::from(ANSWERS_PER_CORE) * cores() as f64,
            metrics,
        });
        if turns > 0 {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(expire(Arc::downgrade(&pacer), lease));
            }
        }
        pacer
    }

    /// The default for this machine: [`TURNS_PER_CORE`] per core.
    pub fn turns_for_this_machine() -> usize {
        TURNS_PER_CORE * cores()
    }

    /// The default for this machine: [`DEFERRED_REPORTS_PER_CORE`] per core.
    pub fn deferred_reports_for_this_machine() -> u32 {
        DEFERRED_REPORTS_PER_CORE.saturating_mul(cores() as u32)
    }

    /// A change is about to give up to `nodes` nodes a new answer (it counts the nodes it
    /// changed, waiting on this server or not): the answers that may follow at once, out by
    /// [`ANSWERS_PER_CORE`] (after those of a change before it still going out; at most a
    /// quarter of the horizon from now in all).
    pub fn woke(&self, nodes: usize) {
        let Some((_, schedule)) = self.deferral.as_ref() else {
            return;
        };
        let takes = Duration::from_secs_f64(nodes as f64 / self.answers_per_second)
            .min(hearth_api::MAX_REPORT_AFTER / 4);
        let now = Instant::now();
        let mut s = schedule.lock().unwrap_or_else(|e| e.into_inner());
        s.answers_out =
            (s.answers_out.max(now) + takes).min(now + hearth_api::MAX_REPORT_AFTER / 4);
    }

    /// The next deferred report's time from now, taken from the schedule; `None` when the
    /// schedule is full up to [`hearth_api::MAX_REPORT_AFTER`] (or there is none).
    ///
    /// An answer while the schedule is idle reports at once. An answer within an interval of
    /// the one before is part of a burst (an apply waking many long-polls at once): its report
    /// comes one interval after the one before, and not before the answers of the changes
    /// behind the burst may be out ([`Pacer::woke`]): a report that comes while the burst's
    /// answers still go out waits behind them. Answers that come no faster than the schedule
    /// (enrollments) report at once. A node answered again before its report time keeps that
    /// time (a node cannot fill the schedule); the times handed out are forgotten when the
    /// schedule is idle again.
    fn defer(&self, node: &str) -> Option<Duration> {
        let (every, schedule) = self.deferral.as_ref()?;
        let now = Instant::now();
        let mut s = schedule.lock().unwrap_or_else(|e| e.into_inner());
        if s.next <= now {
            s.next = now + *every;
            s.nodes.clear();
            return Some(Duration::ZERO);
        }
        if let Some(at) = s.nodes.get(node).filter(|at| **at > now) {
            return Some(*at - now);
        }
        let at = s.next.max(s.answers_out);
        if at - now > hearth_api::MAX_REPORT_AFTER {
            return None;
        }
        s.next = at + *every;
        s.nodes.insert(node.to_string(), at);
        if at - now >= SHORTEST_REPORT_AFTER {
            self.metrics.deferred.inc();
        }
        Some(at - now)
    }

    fn held(&self) -> MutexGuard<'_, HashMap<String, (Instant, OwnedSemaphorePermit)>> {
        // Nothing panics while holding it; a poisoned map is still a consistent one.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for `node`'s turn to answer. An agent that `defers` its reports gets none: it
    /// goes at once with the time of its next report, while the schedule has one.
    pub async fn turn<'a>(&'a self, node: &'a str, defers: bool) -> Turned<'a> {
        let turned = |turn| Turned {
            pacer: self,
            node,
            turn,
            kept: false,
        };
        if self.size == 0 || self.held().contains_key(node) {
            return turned(Turn::Unpaced);
        }
        if let Some(after) = defers.then(|| self.defer(node)).flatten() {
            return turned(Turn::Deferred(after));
        }
        let (permit, waited) = match self.turns.clone().try_acquire_owned() {
            Ok(p) => (p, false),
            Err(_) => {
                self.metrics.waiting.inc();
                let r =
                    tokio::time::timeout(self.wait_limit, self.turns.clone().acquire_owned()).await;
                self.metrics.waiting.dec();
                match r {
                    Ok(Ok(p)) => {
                        self.metrics.waited.inc();
                        (p, true)
                    }
                    Ok(Err(_)) => return turned(Turn::Unpaced),
                    Err(_) => {
                        self.metrics.gave_up.inc();
                        return turned(Turn::GaveUp);
                    }
                }
            }
        };
        let mut held = self.held();
        if held.contains_key(node) {
            // The node took a turn meanwhile (another of its requests): this one goes without.
            return turned(Turn::Unpaced);
        }
        held.insert(node.to_string(), (Instant::now(), permit));
        turned(Turn::Taken { waited })
    }

    /// `node` was heard from (a status report, a long-poll): its turn, if any, ends.
    pub fn heard_from(&self, node: &str) {
        if self.size > 0 {
            self.held().remove(node);
        }
    }

    /// `node` is being heard from: its turn ends when the guard is dropped (when the server
    /// has answered it, so that what the server has yet to answer stays within the turns).
    pub fn hearing<'a>(&'a self, node: &'a str) -> Hearing<'a> {
        Hearing { pacer: self, node }
    }

    /// Ends the turns older than the lease; returns how many.
    fn expire(&self) -> usize {
        let mut held = self.held();
        let before = held.len();
        held.retain(|_, (since, _)| since.elapsed() < self.lease);
        let expired = before - held.len();
        self.metrics.expired.inc_by(expired as u64);
        expired
    }
}

/// When the next deferred report may come.
#[derive(Debug)]
struct Schedule {
    /// The next free time.
    next: Instant,
    /// When the answers of the changes that woke long-polls may be out ([`Pacer::woke`]).
    answers_out: Instant,
    /// The report times handed out since the schedule was last idle, by node.
    nodes: HashMap<String, Instant>,
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Ends a node's turn when dropped ([`Pacer::hearing`]).
#[derive(Debug)]
pub struct Hearing<'a> {
    pacer: &'a Pacer,
    node: &'a str,
}

impl Drop for Hearing<'_> {
    fn drop(&mut self) {
        self.pacer.heard_from(self.node);
    }
}

/// Ends the turns that outlived their lease, every half lease, while the pacer lives.
async fn expire(pacer: Weak<Pacer>, lease: Duration) {
    let mut tick = tokio::time::interval(lease / 2);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(p) = pacer.upgrade() else { return };
        let expired = p.expire();
        if expired > 0 {
            tracing::debug!(expired, "desired-config turns ended by their lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacer(turns: usize, lease: Duration, wait_limit: Duration) -> Arc<Pacer> {
        deferring(turns, lease, wait_limit, 0)
    }

    fn deferring(
        turns: usize,
        lease: Duration,
        wait_limit: Duration,
        per_second: u32,
    ) -> Arc<Pacer> {
        Pacer::new(turns, lease, wait_limit, per_second, PaceMetrics::default())
    }

    /// The report times told to deferring `nodes` answered one after the other (each answer
    /// kept).
    async fn report_times(p: &Pacer, nodes: &[&str]) -> Vec<Option<Duration>> {
        let mut afters = Vec::new();
        for node in nodes {
            let t = p.turn(node, true).await;
            afters.push(t.report_after());
            t.keep();
        }
        afters
    }

    /// Takes `node`'s turn and keeps it (as an answer that went).
    async fn answer(p: &Pacer, node: &str) -> Turn {
        let t = p.turn(node, false).await;
        let turn = t.turn;
        t.keep();
        turn
    }

    /// Two turns: a third node waits until a node is heard from; a node never holds two; only
    /// the node itself ends its turn; a turn dropped without an answer is given back; a wait
    /// ends at the limit.
    #[tokio::test]
    async fn answers_wait_for_a_turn_until_a_node_is_heard_from() {
        let p = pacer(2, Duration::from_secs(3600), Duration::from_millis(300));
        assert_eq!(answer(&p, "a").await, Turn::Taken { waited: false });
        // The same node again: without a turn, at once.
        assert_eq!(answer(&p, "a").await, Turn::Unpaced);
        assert_eq!(answer(&p, "b").await, Turn::Taken { waited: false });
        // c waits: both turns are held. Hearing from a node holding none changes nothing.
        let waiter = p.clone();
        let c = tokio::spawn(async move { answer(&waiter, "c").await });
        p.heard_from("x");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!c.is_finished(), "c got a turn while both were held");
        assert_eq!(p.metrics.waiting.get(), 1);
        // a's report is answered: c goes.
        drop(p.hearing("a"));
        assert_eq!(c.await.unwrap(), Turn::Taken { waited: true });
        assert_eq!(p.metrics.waiting.get(), 0);
        // Nobody reports: d gives up at the limit and goes without.
        assert_eq!(answer(&p, "d").await, Turn::GaveUp);
        p.heard_from("b");
        // A turn taken for an answer that did not go is given back at once.
        drop(p.turn("e", false).await);
        assert_eq!(answer(&p, "d").await, Turn::Taken { waited: false });
        assert_eq!(p.metrics.waited.get(), 1);
        assert_eq!(p.metrics.gave_up.get(), 1);
        assert_eq!(p.metrics.expired.get(), 0);
    }

    /// A node that is not heard from holds its turn for the lease (no upper bound is checked:
    /// this machine's scheduling is not).
    #[tokio::test]
    async fn a_turn_ends_with_its_lease() {
        let lease = Duration::from_millis(100);
        let p = pacer(1, lease, Duration::from_secs(10));
        assert_eq!(answer(&p, "silent").await, Turn::Taken { waited: false });
        let started = Instant::now();
        assert_eq!(answer(&p, "next").await, Turn::Taken { waited: true });
        let waited = started.elapsed();
        assert!(waited >= lease - Duration::from_millis(5), "{waited:?}");
        assert_eq!(p.metrics.expired.get(), 1);
    }

    #[tokio::test]
    async fn zero_turns_is_no_pacing() {
        let p = deferring(0, LEASE, WAIT_LIMIT, 1000);
        assert_eq!(answer(&p, "a").await, Turn::Unpaced);
        assert_eq!(answer(&p, "b").await, Turn::Unpaced);
        let t = p.turn("c", true).await;
        assert_eq!((t.turn, t.report_after()), (Turn::Unpaced, None));
    }

    /// Agents that defer their reports take no turn, however many answers are out: each goes
    /// at once, told to report one interval after the one before (the first at once), until the
    /// schedule is full [`hearth_api::MAX_REPORT_AFTER`] ahead; after that an answer waits for
    /// a turn. A node answered again keeps its time. An agent that does not defer is paced by
    /// the turns, as before.
    #[tokio::test(start_paused = true)]
    async fn deferred_reports_follow_the_schedule_up_to_its_horizon() {
        // 10 a second: 100 ms apart; one turn.
        let p = deferring(1, Duration::from_secs(3600), Duration::from_millis(300), 10);
        let afters = report_times(&p, &["n0", "n1", "n2", "n3", "n4"]).await;
        let ms = |n| Some(Duration::from_millis(n));
        assert_eq!(afters, vec![None, ms(100), ms(200), ms(300), ms(400)]);
        // Counted: the answers told to wait.
        assert_eq!(p.metrics.deferred.get(), 4);
        // n3 asks again (a loop, another answer): the same time, no other taken.
        let t = p.turn("n3", true).await;
        assert_eq!(t.report_after(), ms(300));
        t.keep();
        // No turn was taken: an agent that does not defer takes the one turn at once.
        assert_eq!(answer(&p, "old").await, Turn::Taken { waited: false });
        // Time passes: the schedule's next time is now 500 ms from its start, 200 from now.
        tokio::time::advance(Duration::from_millis(300)).await;
        let t = p.turn("n5", true).await;
        assert_eq!(t.report_after(), ms(200));
        t.keep();
        // Idle past the schedule's end: at once again.
        tokio::time::advance(Duration::from_secs(5)).await;
        let t = p.turn("n6", true).await;
        assert_eq!(
            (t.turn, t.report_after()),
            (Turn::Deferred(Duration::ZERO), None)
        );
        t.keep();
        // Fill the schedule to its horizon, 100 ms apart from the next interval on: the answer
        // after the last one that fits waits for a turn (held by "old": it gives up at the wait
        // limit), and is told nothing.
        let fits = (hearth_api::MAX_REPORT_AFTER.as_millis() / 100) as u64;
        for i in 0..fits {
            let node = format!("f{i}");
            let t = p.turn(&node, true).await;
            assert_eq!(t.report_after(), ms(100 * (i + 1)), "{node}");
            t.keep();
        }
        assert_eq!(p.metrics.deferred.get(), 5 + fits);
        let t = p.turn("beyond", true).await;
        assert_eq!((t.turn, t.report_after()), (Turn::GaveUp, None));
        t.keep();
        assert_eq!(p.metrics.deferred.get(), 5 + fits);
    }

    /// The first answer reports at once; an answer right behind it is in a burst: it reports
    /// once the answers its change may bring are out, and the burst's next ones an
    /// interval apart from there; that wait is at most a quarter of the horizon for a change,
    /// two changes' waits add up, and a change's wait is over when its time has passed.
    /// Answers no faster than the schedule report at once.
    #[tokio::test(start_paused = true)]
    async fn a_burst_reports_once_its_answers_are_out() {
        let p = deferring(1, Duration::from_secs(3600), Duration::from_millis(300), 10);
        // A change woke two seconds' worth of answers.
        let two_seconds = (2.0 * p.answers_per_second) as usize;
        p.woke(two_seconds);
        let afters = report_times(&p, &["a", "b", "c"]).await;
        let ms = |n| Some(Duration::from_millis(n));
        assert_eq!(afters, vec![None, ms(2000), ms(2100)]);
        // Idle again: answers no faster than the schedule (one every 150 ms here) report at
        // once, however many answers the last change may bring.
        tokio::time::advance(Duration::from_secs(10)).await;
        for node in ["d", "e", "f"] {
            let t = p.turn(node, true).await;
            assert_eq!(t.report_after(), None, "{node}");
            t.keep();
            tokio::time::advance(Duration::from_millis(150)).await;
        }
        // Changes waking more than the horizon allows: a quarter of it, however many.
        tokio::time::advance(Duration::from_secs(10)).await;
        p.woke(1_000 * two_seconds);
        p.woke(1_000 * two_seconds);
        let t = p.turn("g", true).await;
        assert_eq!(t.report_after(), None);
        t.keep();
        let t = p.turn("h", true).await;
        assert_eq!(t.report_after(), Some(hearth_api::MAX_REPORT_AFTER / 4));
        t.keep();
        // A change to three nodes among many waiting: no wait worth the name.
        tokio::time::advance(Duration::from_secs(60)).await;
        p.woke(3);
        let afters = report_times(&p, &["i", "j", "k"]).await;
        assert_eq!(afters, vec![None, ms(100), ms(200)]);
        // Two changes back to back: their answers' times add up.
        tokio::time::advance(Duration::from_secs(60)).await;
        p.woke(two_seconds);
        p.woke(two_seconds);
        let afters = report_times(&p, &["l", "m"]).await;
        assert_eq!(afters, vec![None, ms(4000)]);
        // A change whose answers' time has passed delays nothing.
        tokio::time::advance(Duration::from_secs(60)).await;
        p.woke(two_seconds);
        tokio::time::advance(Duration::from_secs(3)).await;
        let afters = report_times(&p, &["n", "o"]).await;
        assert_eq!(afters, vec![None, ms(100)]);
    }
}
