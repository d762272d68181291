//! Following hearth-server: enroll once with the pool's bootstrap token, then long-poll the
//! desired config, apply it, report every state, and take a reboot slot before rebooting (given
//! back after the node booted and verified). When the server is unreachable the agent keeps
//! working from its journal (resuming, reporting drift) and catches up when it returns.
//! The loop itself (`hearth-agent run --server`) is `Daemon::follow`, at the end of this file;
//! the server's address and the credential the agent keeps are [`crate::enrolment`]'s.

use crate::apply::{Agent, Options, Outcome};
use crate::daemon::Daemon;
use crate::enrolment::{connect, enroll, through_all, Server, ServerState};
use crate::journal::{Journal, Phase, Summary};
use crate::remote::{DesiredConfigExt, Remote, RemoteError};
use crate::state::State;
use crate::status::status_line;
use anyhow::Result;
use hearth_api::RequestAction;
use hearth_hostops::fs::Root;
use std::process::ExitCode;
use std::time::Duration;

/// Runs `apply` with the acknowledgement of its config, `ack`: first when the answer asked for
/// nothing (`at` is `None`); else at `at`, while the apply goes on, and not at all when the
/// apply is over by then (the report after it, held until `at` too, says where the node is).
async fn acknowledged<T>(
    at: Option<tokio::time::Instant>,
    ack: impl std::future::Future<Output = ()>,
    apply: impl std::future::Future<Output = T>,
) -> T {
    let Some(at) = at else {
        ack.await;
        return apply.await;
    };
    tokio::pin!(apply);
    tokio::select! {
        // An apply that ends in the same poll as the wait needs no acknowledgement.
        biased;
        done = &mut apply => done,
        _ = tokio::time::sleep_until(at) => tokio::join!(ack, &mut apply).1,
    }
}

/// Reports the journal's status after `wait` (a report the server asked for later), as the
/// follow loop would have then; bounded by `bound` (as the loop's own report, through every
/// server).
async fn report_later(remote: Remote, root: std::path::PathBuf, wait: Duration, bound: Duration) {
    tokio::time::sleep(wait).await;
    let doc = match Root::open(&root).map(|r| Journal::load(&r)) {
        Ok(Ok(j)) => {
            let mut doc = crate::status::status_document(&j);
            crate::os_pull::attach(&mut doc, &root);
            doc
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot read the journal to report");
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot open the root to report");
            return;
        }
    };
    match tokio::time::timeout(bound, remote.report(&doc)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "cannot report status"),
        Err(_) => tracing::warn!("no answer to a status report within {bound:?}"),
    }
}

/// How often the follow loop looks at an OS image pull in progress, and reports it when it moved
/// (while an apply runs, the loop's own reports wait for its end).
const PULL_REPORT_EVERY: Duration = Duration::from_secs(10);

/// While an apply runs: reports the node's status (through `report`) each time an OS image
/// pull in progress moved ([`crate::os_pull`]), at most every [`PULL_REPORT_EVERY`] and not
/// before `from` (the time the server asked the reports for), each bounded by `bound`. Returns
/// when `stop` turns true, never in the middle of a report (so the report after the apply is
/// the last one the server gets).
async fn report_pull_progress<F, Fut>(
    report: F,
    root: &std::path::Path,
    bound: Duration,
    from: Option<tokio::time::Instant>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) where
    F: Fn(hearth_api::AgentStatus) -> Fut,
    Fut: std::future::Future<Output = Result<(), RemoteError>>,
{
    let mut last: Option<hearth_hostops::os::PullProgress> = None;
    let mut next = tokio::time::Instant::now() + PULL_REPORT_EVERY;
    if let Some(from) = from {
        next = next.max(from);
    }
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = stop.wait_for(|stop| *stop) => return,
        }
        next = tokio::time::Instant::now() + PULL_REPORT_EVERY;
        let pull = crate::os_pull::read(root);
        if pull.is_none() || pull == last {
            continue;
        }
        let doc = match Root::open(root).map(|r| Journal::load(&r)) {
            Ok(Ok(j)) => {
                let mut doc = crate::status::status_document(&j);
                crate::os_pull::attach(&mut doc, root);
                doc
            }
            _ => continue,
        };
        match tokio::time::timeout(bound, report(doc)).await {
            Ok(Ok(())) => last = pull,
            Ok(Err(e)) => tracing::debug!(error = %e, "cannot report the pull's progress"),
            Err(_) => tracing::debug!("no answer to a progress report within {bound:?}"),
        }
    }
}

/// How long is left until `at` (none for `None` or a time past).
fn left(at: Option<tokio::time::Instant>) -> Duration {
    at.map(|at| at.saturating_duration_since(tokio::time::Instant::now()))
        .unwrap_or_default()
}

/// The longest the agent waits for the server to take its acknowledgement of a new config
/// before applying it anyway.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(10);

/// One turn of the reboot-slot dance: a node waiting to reboot takes a slot, then reboots; a
/// node that holds a slot and is no longer waiting gives it back. Returns how long to wait before
/// asking again when the slot was not granted.
pub async fn reboot_with_slot(
    agent: &Agent,
    remote: &Remote,
    state: &mut ServerState,
) -> anyhow::Result<Option<Duration>> {
    let j = Journal::load(agent.root())?;
    let waiting = j.state == State::Rebooting
        && j.progress
            .as_ref()
            .is_some_and(|p| p.phase == Phase::Rebooting);
    if waiting {
        if !state.slot_held {
            let answer = remote.reboot_slot(true).await?;
            if !answer.granted {
                tracing::info!(
                    retry_after = answer.retry_after_seconds,
                    reason = answer.reason.as_deref().unwrap_or("all slots taken"),
                    "no reboot slot yet"
                );
                return Ok(Some(Duration::from_secs(answer.retry_after_seconds.max(1))));
            }
            state.slot_held = true;
            state.save(agent.root())?;
        }
        match agent.reboot_now().await? {
            Outcome::Rebooting {
                inhibited: Some(why),
                ..
            } => tracing::warn!(%why, "reboot blocked"),
            other => tracing::info!(?other, "reboot"),
        }
    } else if state.slot_held && j.state != State::Working {
        remote.reboot_slot(false).await?;
        state.slot_held = false;
        state.save(agent.root())?;
        tracing::info!("reboot slot given back");
    }
    Ok(None)
}

/// Applies a desired config from the server (never rebooting by itself: reboots wait for a
/// slot), then acts on the admin's requests it carries that this node has not acted on yet, in
/// id order (`apply/request.rs`). A force request is itself the apply of the config, so with one
/// the config is not applied a second time. `None`: only restore requests were acted on.
pub async fn apply(
    agent: &Agent,
    mut desired: crate::remote::DesiredConfig,
    drift: &crate::drift_policy::DriftPolicies,
) -> anyhow::Result<Option<Outcome>> {
    let requests = std::mem::take(&mut desired.requests);
    let trial = desired.trial;
    let (config, policies) = desired.into_parts();
    let mut config = config;
    config.spec.source_version = None;
    let opts = Options {
        force: false,
        no_reboot: true,
        drift: drift.clone(),
        force_request: None,
        trial,
    };
    let j = Journal::load(agent.root())?;
    let requests = crate::apply::new_requests(&j, requests);
    let known = j.desired.as_ref().is_some_and(|d| d.name == config.name);
    drop(j);
    let forced = requests.iter().any(|r| r.action == RequestAction::Force);
    let mut outcome = if forced || (known && !requests.is_empty()) {
        // Only requests: the config is the one the node has.
        None
    } else {
        Some(agent.sync(config.clone(), policies.clone(), &opts).await?)
    };
    for r in requests {
        match (r.action, r.path.as_deref()) {
            (RequestAction::Force, _) => {
                outcome = Some(
                    agent
                        .force(r.id, config.clone(), policies.clone(), &opts)
                        .await?,
                );
            }
            (RequestAction::RestoreFile, Some(path)) => agent.restore_file(r.id, path)?,
            (RequestAction::RestoreFile, None) => {
                tracing::warn!(request = r.id, "a restore request without a path: ignored");
            }
        }
    }
    Ok(outcome)
}

impl Daemon<'_> {
    /// The daemon following hearth-server.
    pub(crate) async fn follow(&self, server: Server) -> Result<ExitCode> {
        let notify = crate::logging::Notifier::new();
        // Ready first: see `Daemon::watch`.
        notify.ready(&Summary::load(self.agent.root())?.status_line());
        self.resume().await?;
        let (drift, mut drift_events) = self.start_drift()?;
        let (mut remote, mut state) = connect(self.agent.root(), &server).await?;
        notify.status(&Summary::load(self.agent.root())?.status_line());
        let mut backoff = Duration::from_secs(1);
        // When the server asked for the next report (an answer in a burst, `Answer::report_after`).
        let mut hold: Option<tokio::time::Instant> = None;
        // The report the server asked for later, and when it goes.
        let mut held_report: Option<(tokio::time::Instant, tokio::task::JoinHandle<()>)> = None;
        loop {
            crate::watchdog::beat();
            // A force request whose apply a crash interrupted (finished by the resume) or
            // whose reboot is now done.
            if let Err(e) = self.agent.settle_requests() {
                tracing::warn!(error = %e, "cannot record a finished request");
            }
            // What this turn needs of the journal; the configs are not kept while waiting.
            let (doc, known, done, trial) = {
                let j = Journal::load(self.agent.root())?;
                self.metrics.set_state(j.state);
                self.metrics.set_server(remote.servers(), remote.base_url());
                notify.status(&status_line(&j));
                let known = j.desired.as_ref().map(|d| d.name.clone());
                let done = j.requests_done.max(j.forcing.unwrap_or(0));
                let trial = crate::apply::trial_window(&j);
                let mut doc = crate::status::status_document(&j);
                crate::os_pull::attach(&mut doc, &self.root_path);
                (doc, known, done, trial)
            };
            if let Some(window) = trial {
                // On trial: a report of the trial the server accepts keeps the change; none
                // before the deadline undoes it. No long-poll meanwhile.
                // The drift monitor waits too: it watches the current config, which the trial's
                // outcome decides.
                if !drift.is_paused() {
                    let control = drift.clone();
                    tokio::task::spawn_blocking(move || control.pause()).await?;
                }
                // A trial's reports decide whether the change stays: they never wait.
                hold = None;
                if let Some((_, t)) = held_report.take() {
                    t.abort();
                }
                if self.trial_turn(&server, &remote, &doc, window).await? {
                    drift.set_expected(self.expected());
                    drift.resume();
                }
                continue;
            }
            // A report and a reboot-slot call take up to 30 s each per server tried.
            let talking = crate::watchdog::busy(
                "reporting to the server",
                through_all(&server, Duration::from_secs(60)),
            );
            // An answer in a burst asked for this report later (at most
            // `hearth_api::MAX_REPORT_AFTER`): it goes then, from what the journal says then,
            // while the loop goes on (a newer config, a fix, still arrives at once). Until it
            // went, the loop's turns report nothing: it will.
            let held = left(hold.take());
            if !held.is_zero() {
                tracing::debug!(?held, "reporting when the server asked to");
                let task = tokio::spawn(report_later(
                    remote.clone(),
                    self.agent.root().path().to_path_buf(),
                    held,
                    through_all(&server, Duration::from_secs(30)),
                ));
                held_report = Some((tokio::time::Instant::now() + held, task));
            }
            let pending = held_report
                .as_ref()
                .filter(|(_, t)| !t.is_finished())
                .map(|(at, _)| *at);
            if pending.is_none() {
                held_report = None;
                if let Err(e) = remote.report(&doc).await {
                    tracing::warn!(error = %e, "cannot report status");
                }
            }
            // Waiting for a reboot slot does not stop the long-poll: a newer config (a fix)
            // still arrives at once; the slot is asked for again when the poll returns. After a
            // held report, the poll waits that much longer: the agents answered in one burst
            // then report their next turns in the schedule's order, not all at once.
            let wait = match reboot_with_slot(self.agent, &remote, &mut state).await {
                Ok(Some(retry)) => retry.min(server.wait),
                Ok(None) => server.wait + left(pending),
                Err(e) => {
                    tracing::warn!(error = %e, "reboot slot");
                    server.wait
                }
            };
            drop(talking);
            drop(doc);
            // Idle in the long-poll (its own timeout is wait + 30 s per server tried), or in
            // the back-off after it: the watchdog is fed meanwhile.
            let idle = crate::watchdog::busy(
                "waiting for the server's next config",
                through_all(&server, wait + Duration::from_secs(30)) + backoff,
            );
            tokio::select! {
                r = remote.desired_and_requests(known.as_deref(), Some(done), wait) => match r {
                    Ok(Some(answer)) => {
                        drop(idle);
                        backoff = Duration::from_secs(1);
                        let desired = answer.config;
                        let name = desired.name.clone();
                        hold = answer
                            .report_after
                            .map(|after| tokio::time::Instant::now() + after);
                        // A new answer: what was held is its acknowledgement's or its report's
                        // to say now.
                        if let Some((_, t)) = held_report.take() {
                            t.abort();
                        }
                        let control = drift.clone();
                        let root = self.root_path.clone();
                        let bound = through_all(&server, Duration::from_secs(30));
                        let applying = async {
                            tokio::task::spawn_blocking(move || control.pause()).await?;
                            // The pull of an OS image can take minutes: its progress is
                            // reported as it goes.
                            let (stop, stopped) = tokio::sync::watch::channel(false);
                            let apply = async {
                                let outcome = apply(self.agent, desired, &self.drift).await;
                                let _ = stop.send(true);
                                outcome
                            };
                            let reporting = report_pull_progress(
                                |doc| {
                                    let remote = &remote;
                                    async move { remote.report(&doc).await }
                                },
                                &root,
                                bound,
                                hold,
                                stopped,
                            );
                            let (outcome, ()) = tokio::join!(apply, reporting);
                            Ok::<_, anyhow::Error>(outcome)
                        };
                        let outcome =
                            acknowledged(hold, self.acknowledge(&remote, &name), applying).await?;
                        if !matches!(outcome, Ok(Some(Outcome::Trial(_)))) {
                            drift.set_expected(self.expected());
                            drift.resume();
                        }
                        if let Some(outcome) = outcome? {
                            self.count(&name, &outcome);
                        }
                    }
                    Ok(None) => backoff = Duration::from_secs(1),
                    Err(e) if e.needs_enrollment() => {
                        drop(idle);
                        tracing::warn!(error = %e, "the server no longer knows this node's credential; enrolling again");
                        if let Some((_, t)) = held_report.take() {
                            t.abort();
                        }
                        (remote, state) = enroll(self.agent.root(), &server).await?;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, retry_in = ?backoff, "cannot reach the server; working from the journal");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(60));
                    }
                },
                ev = drift_events.recv() => {
                    if let Some(ev) = ev {
                        self.record_drift(ev)?;
                    }
                }
            }
            hearth_daemon::memory::trim_heap();
        }
    }

    /// Tells the server that the answer naming `name` arrived: before applying, or at the time
    /// the answer gave for reports (see [`acknowledged`]). A new config:
    /// `Working` on it, as the MCO's daemon says when it starts an update, so the fleet shows
    /// the node working while it applies (which may take minutes). An answer that only carries
    /// requests (force, restore-file) for the config the node has: its status unchanged, so a
    /// `Degraded` node stays `Degraded` (and its pool's rollout halted) until the request's
    /// outcome says otherwise. Either way the server, which keeps only so many answers
    /// unacknowledged (`server/src/pace.rs`), hands the next one out at once rather than when
    /// this apply ends. Bounded by [`ACK_TIMEOUT`]: a server that does not answer delays the
    /// apply by that much at most, and the report after the apply says where the node is.
    /// An answer that asked for the reports later (`Answer::report_after`) is acknowledged at
    /// that time, while the apply runs, and not at all when the apply is over by then.
    async fn acknowledge(&self, remote: &Remote, name: &str) {
        let doc = match Journal::load(self.agent.root()) {
            Ok(j) => crate::status::acknowledgement(&j, name),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the journal to acknowledge a config");
                return;
            }
        };
        crate::watchdog::beat();
        let _busy = crate::watchdog::busy(
            "acknowledging a config",
            ACK_TIMEOUT + Duration::from_secs(10),
        );
        match tokio::time::timeout(ACK_TIMEOUT, remote.report(&doc)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, config = name, "cannot acknowledge a config"),
            Err(_) => tracing::warn!(
                config = name,
                "no answer to the acknowledgement of a config within {ACK_TIMEOUT:?}"
            ),
        }
    }

    /// One turn of a trial: report it (bounded by the time left); accepted, the change is kept;
    /// not, and the deadline passed, it is undone; else wait a little and try again. Returns
    /// whether the trial ended.
    ///
    /// A report counts only once the change had [`TRIAL_SETTLE_SECS`] to take effect (a network
    /// reloads asynchronously), and goes over a new connection: a new name lookup, TCP
    /// connection and TLS handshake, as any client after the change would make; a connection
    /// kept open from before the change (which a firewall allowing established connections
    /// lets through) proves nothing.
    async fn trial_turn(
        &self,
        server: &Server,
        remote: &Remote,
        doc: &hearth_api::AgentStatus,
        (started, deadline): (i64, i64),
    ) -> Result<bool> {
        let now = crate::apply::unix_now();
        let left = Duration::from_secs(u64::try_from(deadline.saturating_sub(now)).unwrap_or(0));
        let settle = Duration::from_secs(
            u64::try_from(
                started
                    .saturating_add(TRIAL_SETTLE_SECS)
                    .saturating_sub(now),
            )
            .unwrap_or(0),
        );
        if !settle.is_zero() && settle < left {
            let _idle = crate::watchdog::busy(
                "letting the change on trial take effect",
                settle + Duration::from_secs(10),
            );
            tokio::time::sleep(settle).await;
            return Ok(false);
        }
        let left = Duration::from_secs(
            u64::try_from(deadline.saturating_sub(crate::apply::unix_now())).unwrap_or(0),
        );
        let remote = remote.fresh(&server.ca_pem);
        let _busy = crate::watchdog::busy(
            "reporting the trial to the server",
            TRIAL_REPORT_TIMEOUT + TRIAL_RETRY + Duration::from_secs(10),
        );
        let accepted = match remote {
            _ if left.is_zero() => false,
            Err(e) => {
                tracing::warn!(error = %e, "on trial: cannot make a connection to the server");
                false
            }
            Ok(remote) => {
                match tokio::time::timeout(left.min(TRIAL_REPORT_TIMEOUT), remote.report(doc)).await
                {
                    Ok(Ok(())) => true,
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "on trial: cannot reach the server");
                        false
                    }
                    Err(_) => {
                        tracing::warn!("on trial: no answer from the server");
                        false
                    }
                }
            }
        };
        let name = doc.desired.clone().unwrap_or_default();
        if accepted {
            if let Some(outcome) = self.agent.confirm_trial()? {
                self.count(&name, &outcome);
            }
            return Ok(true);
        }
        match self.agent.expire_trial(&self.drift).await? {
            Some(outcome) => {
                self.count(&name, &outcome);
                Ok(true)
            }
            None => {
                tokio::time::sleep(left.min(TRIAL_RETRY)).await;
                Ok(false)
            }
        }
    }
}

/// How long a change on trial has to take effect before a report may confirm it (seconds;
/// the shortest trial, `hearth_config::trial::MIN_SECONDS`, leaves 5 s to report).
const TRIAL_SETTLE_SECS: i64 = 5;

/// How long one status report during a trial may take (bounded further by the time left).
const TRIAL_REPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the agent waits between two reports during a trial.
const TRIAL_RETRY: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::{acknowledged, report_pull_progress, PULL_REPORT_EVERY};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use tokio::time::Instant;

    /// What happened, and when (paused time, from the start).
    type Log = Arc<Mutex<Vec<(&'static str, Duration)>>>;

    fn note(log: &Log, start: Instant, what: &'static str) {
        log.lock().unwrap().push((what, start.elapsed()));
    }

    /// The order of the acknowledgement and the apply: at once and before it when nothing is
    /// held; when the server asked for the reports at 1 s, none for an apply of 200 ms or of
    /// exactly 1 s, and at 1 s for an apply of 3 s, which goes on meanwhile.
    #[tokio::test(start_paused = true)]
    async fn a_held_acknowledgement_goes_at_its_time_and_only_while_applying() {
        let run = |hold: Option<Duration>, takes: Duration| async move {
            let log: Log = Arc::default();
            let start = Instant::now();
            let ack = {
                let log = log.clone();
                async move { note(&log, start, "ack") }
            };
            let apply = {
                let log = log.clone();
                async move {
                    note(&log, start, "apply starts");
                    tokio::time::sleep(takes).await;
                    note(&log, start, "apply ends");
                    7
                }
            };
            assert_eq!(acknowledged(hold.map(|h| start + h), ack, apply).await, 7);
            let log = log.lock().unwrap().clone();
            log
        };
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        assert_eq!(
            run(None, s(3)).await,
            [("ack", s(0)), ("apply starts", s(0)), ("apply ends", s(3))]
        );
        assert_eq!(
            run(Some(s(1)), ms(200)).await,
            [("apply starts", s(0)), ("apply ends", ms(200))]
        );
        assert_eq!(
            run(Some(s(1)), s(3)).await,
            [("apply starts", s(0)), ("ack", s(1)), ("apply ends", s(3))]
        );
        // Over at the very time: no acknowledgement.
        assert_eq!(
            run(Some(s(1)), s(1)).await,
            [("apply starts", s(0)), ("apply ends", s(1))]
        );
    }

    /// While an apply pulls an OS image, its progress is reported when it moved (and only
    /// then), with the pull in the status document's progress.
    #[tokio::test(start_paused = true)]
    async fn a_pull_in_progress_is_reported_as_it_moves() {
        use hearth_hostops::os::{PullPhase, PullProgress};
        let dir = tempfile::tempdir().unwrap();
        let root = hearth_hostops::fs::Root::open(dir.path()).unwrap();
        let j = crate::journal::Journal {
            progress: Some(
                serde_json::from_value(
                    serde_json::json!({"phase": "applying", "step": 2, "total": 3}),
                )
                .unwrap(),
            ),
            ..crate::journal::Journal::default()
        };
        j.save(&root).unwrap();
        let sent: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        // The server asked for the reports in 25 s (an answer in a burst): none before.
        let from = tokio::time::Instant::now() + Duration::from_secs(25);
        let reporter = {
            let sent = sent.clone();
            let path = dir.path().to_path_buf();
            tokio::spawn(async move {
                report_pull_progress(
                    |doc| {
                        let sent = sent.clone();
                        async move {
                            sent.lock().unwrap().push(doc.progress.unwrap_or_default());
                            Ok(())
                        }
                    },
                    &path,
                    Duration::from_secs(30),
                    Some(from),
                    stopped,
                )
                .await
            })
        };
        let pull = |bytes: u64| PullProgress {
            image: "registry.example/os@sha256:ab".into(),
            phase: PullPhase::Fetching,
            layers_done: 0,
            layers_total: 2,
            bytes_done: bytes,
            bytes_total: 100,
        };
        let tick = || tokio::time::sleep(PULL_REPORT_EVERY + Duration::from_millis(1));
        // Nothing is pulled: nothing reported.
        tick().await;
        assert!(sent.lock().unwrap().is_empty());
        crate::os_pull::sink(dir.path())(&pull(10));
        tick().await; // 20 s: not before the time the server asked for
        assert!(sent.lock().unwrap().is_empty());
        tokio::time::sleep(Duration::from_secs(6)).await; // 26 s
        assert_eq!(sent.lock().unwrap().len(), 1);
        tick().await; // unchanged: not again
        crate::os_pull::sink(dir.path())(&pull(60));
        tick().await;
        // The apply ends: the reporter stops (between reports).
        stop.send(true).unwrap();
        reporter.await.unwrap();
        let sent = sent.lock().unwrap().clone();
        assert_eq!(sent.len(), 2, "{sent:?}");
        assert_eq!(sent[0]["osPull"]["bytesDone"], 10);
        assert_eq!(sent[1]["osPull"]["bytesDone"], 60);
        assert_eq!(sent[1]["step"], 2);
    }
}
