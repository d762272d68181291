//! `agents`: N simulated agents (enroll, long-poll, report), and the time an apply takes to
//! reach them all.

use crate::args::{raise_nofile, secret, AgentsArgs};
use crate::conn::{short, Conn, Fail, H2Group, Target, Via};
use crate::stats::{mem_json, mem_sum_json, percentiles, Stats};
use anyhow::{bail, Context, Result};
use hearth_api::{AgentStatus, DesiredConfig, EnrollRequest, EnrollResponse, NodeState};
use hyper::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub(crate) struct Shared {
    pub(crate) stats: Stats,
    pub(crate) stop: AtomicBool,
    pub(crate) enrolled: AtomicUsize,
    /// Agents that reported Done in their first desired config.
    pub(crate) ready: AtomicUsize,
    /// The configs the agents ran before the apply.
    pub(crate) baseline: OnceLock<HashSet<String>>,
    /// When the apply started (or the first agent saw a new config).
    pub(crate) apply_start: OnceLock<Instant>,
    /// Per agent: time from the apply to seeing the new config, and to reporting Done in it.
    pub(crate) seen: Mutex<Vec<Duration>>,
    pub(crate) done: Mutex<Vec<Duration>>,
    pub(crate) seen_count: AtomicUsize,
    pub(crate) done_count: AtomicUsize,
    pub(crate) wait: u64,
    /// How long an agent takes to apply the apply's config (`--apply-ms`).
    pub(crate) apply_time: Duration,
    /// History items in each report.
    pub(crate) history: usize,
    /// Asks for deferred reports (`--defer`).
    pub(crate) defer: bool,
    /// The first configs the agents received.
    pub(crate) firsts: Mutex<HashSet<String>>,
}

impl Shared {
    pub(crate) fn new(wait: u64) -> Shared {
        Shared {
            stats: Stats::default(),
            stop: AtomicBool::new(false),
            enrolled: AtomicUsize::new(0),
            ready: AtomicUsize::new(0),
            baseline: OnceLock::new(),
            apply_start: OnceLock::new(),
            seen: Mutex::new(Vec::new()),
            done: Mutex::new(Vec::new()),
            seen_count: AtomicUsize::new(0),
            done_count: AtomicUsize::new(0),
            wait,
            apply_time: Duration::ZERO,
            history: 0,
            defer: true,
            firsts: Mutex::new(HashSet::new()),
        }
    }
}

/// A status report; with `history` items of history, as a real agent's carries (its newest 50).
pub(crate) fn status_doc(
    state: NodeState,
    current: Option<&str>,
    desired: &str,
    history: usize,
) -> Vec<u8> {
    let history = (0..history)
        .map(|i| hearth_api::HistoryItem {
            time: format!("2026-11-25T09:{:02}:{:02}Z", i / 60 % 60, i % 60),
            state: if i % 2 == 0 {
                NodeState::Working
            } else {
                NodeState::Done
            },
            reason: Some(format!(
                "step {} of 7 (write file /etc/hearth-loadgen/{i}.conf)",
                i % 7 + 1
            )),
            desired: Some(desired.to_string()),
        })
        .collect();
    serde_json::to_vec(&AgentStatus {
        api_version: Some(hearth_api::HEARTH_API_VERSION.into()),
        kind: Some("AgentStatus".into()),
        state,
        reason: None,
        last_transition: None,
        current: current.map(str::to_string),
        desired: Some(desired.to_string()),
        pending_reboot: false,
        progress: None,
        drift: Vec::new(),
        history,
        requests_done: 0,
        request_results: Vec::new(),
        actions: Vec::new(),
        // What an RHCOS node reports: the same image (and deployment) for a whole pool.
        os: Some(hearth_api::BootedOs {
            deployment: format!("rhcos/{}.0", "5e".repeat(32)),
            image: format!(
                "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{}",
                "3f".repeat(32)
            ),
            image_digest: Some(format!("sha256:{}", "3f".repeat(32))),
            version: Some("416.94.202405291527-0".into()),
        }),
    })
    .unwrap_or_default()
}

pub(crate) async fn enroll_one(
    target: &Target,
    shared: &Shared,
    via: &Via,
    name: &str,
    token: &str,
) -> Result<(Conn, String), Fail> {
    let t = Instant::now();
    let mut conn = via.connect(target).await?;
    shared.stats.record("connect+TLS", t.elapsed());
    let body = serde_json::to_vec(&EnrollRequest {
        node: name.to_string(),
        labels: Default::default(),
        bootstrap_token: Some(token.to_string()),
    })
    .unwrap_or_default();
    let t = Instant::now();
    let a = conn
        .request(
            Method::POST,
            "/api/v1/enroll",
            None,
            Some(body),
            Duration::from_secs(300),
        )
        .await?;
    if a.status != StatusCode::OK {
        return Err(Fail::Status(a.status.as_u16()));
    }
    shared.stats.record("enroll", t.elapsed());
    let answer: EnrollResponse =
        serde_json::from_slice(&a.body).map_err(|e| Fail::Http(short(&e.to_string())))?;
    Ok((conn, answer.credential))
}

/// Which phase a report belongs to, for its own latency line next to the overall one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Taking the first config, while the fleet enrolls.
    First,
    /// Taking the applied config: every agent of the pool at once (`maxUnavailable: 100%`).
    Apply,
    /// A turn without a change (the long-poll's wait ran out): hearth-agent reports every
    /// turn, so this is a fleet's steady load.
    Turn,
}

impl Phase {
    fn label(self) -> &'static str {
        match self {
            Phase::First => "status report, first config",
            Phase::Apply => "status report, apply burst",
            Phase::Turn => "status report, every turn",
        }
    }
}

pub(crate) async fn report(
    conn: &mut Conn,
    shared: &Shared,
    cred: &str,
    doc: Vec<u8>,
    phase: Phase,
) -> Result<(), Fail> {
    let t = Instant::now();
    let a = conn
        .request(
            Method::POST,
            "/api/v1/agent/status",
            Some(cred),
            Some(doc),
            Duration::from_secs(120),
        )
        .await?;
    if !a.status.is_success() {
        return Err(Fail::Status(a.status.as_u16()));
    }
    shared.stats.record("status report", t.elapsed());
    shared.stats.record(phase.label(), t.elapsed());
    Ok(())
}

/// One simulated agent: enroll, then long-poll and report until told to stop.
pub(crate) async fn agent(
    target: Arc<Target>,
    shared: Arc<Shared>,
    sem: Arc<tokio::sync::Semaphore>,
    via: Via,
    name: String,
    token: Arc<String>,
) {
    let (mut conn, cred) = loop {
        let permit = sem.acquire().await;
        let r = enroll_one(&target, &shared, &via, &name, &token).await;
        drop(permit);
        match r {
            Ok(x) => break x,
            Err(f) => {
                shared.stats.error("enroll", &f);
                if shared.stop.load(Ordering::Relaxed) {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    shared.enrolled.fetch_add(1, Ordering::Relaxed);
    let mut current: Option<String> = None;
    let mut broken = false;
    while !shared.stop.load(Ordering::Relaxed) {
        if broken {
            match via.connect(&target).await {
                Ok(c) => {
                    conn = c;
                    broken = false;
                    shared.stats.count("reconnects");
                }
                Err(f) => {
                    shared.stats.error("reconnect", &f);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            }
        }
        let mut path = match &current {
            Some(k) => format!("/api/v1/agent/desired?known={k}&wait={}", shared.wait),
            None => format!("/api/v1/agent/desired?wait={}", shared.wait),
        };
        if shared.defer {
            path.push_str(&format!("&{}=true", hearth_api::DEFER_PARAM));
        }
        let t = Instant::now();
        let a = match conn
            .request(
                Method::GET,
                &path,
                Some(&cred),
                None,
                Duration::from_secs(shared.wait + 60),
            )
            .await
        {
            Ok(a) => a,
            Err(f) => {
                shared.stats.error("long-poll", &f);
                broken = true;
                continue;
            }
        };
        match a.status {
            StatusCode::NOT_MODIFIED => {
                shared.stats.count("long-polls answered 304 after wait");
                // hearth-agent reports at every turn, a change or not.
                if let Some(c) = &current {
                    let doc = status_doc(NodeState::Done, Some(c), c, shared.history);
                    if let Err(f) = report(&mut conn, &shared, &cred, doc, Phase::Turn).await {
                        shared.stats.error("status report", &f);
                        broken = true;
                    }
                }
                continue;
            }
            StatusCode::OK => {}
            s => {
                shared.stats.error("long-poll", &Fail::Status(s.as_u16()));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        }
        let Some(name) = a.desired.clone() else {
            shared.stats.error(
                "long-poll",
                &Fail::Http("no x-hearth-desired header".into()),
            );
            continue;
        };
        // A real agent decodes the config before applying it.
        if serde_json::from_slice::<DesiredConfig>(&a.body).is_err() {
            shared.stats.error(
                "long-poll",
                &Fail::Http("the answer is not a desired config".into()),
            );
        }
        let first = current.is_none();
        let is_new = shared.baseline.get().is_some_and(|b| !b.contains(&name));
        if first {
            shared
                .stats
                .record("desired (first, immediate)", t.elapsed());
            if let Ok(mut f) = shared.firsts.lock() {
                f.insert(name.clone());
            }
        } else if is_new {
            let start = *shared.apply_start.get_or_init(Instant::now);
            if let Ok(mut v) = shared.seen.lock() {
                v.push(start.elapsed());
            }
            shared.seen_count.fetch_add(1, Ordering::Relaxed);
        }
        // Apply: Working, then Done in the new config. Asked to report later, as hearth-agent:
        // the apply runs at once; at the server's time a report says where it is (`Done` when
        // the apply is over by then, else `Working` and `Done` when it ends).
        let phase = if first { Phase::First } else { Phase::Apply };
        let apply_time = if is_new {
            shared.apply_time
        } else {
            Duration::ZERO
        };
        // How long before the first report, whether it is a `Working` one, and how long
        // from it to `Done`.
        let (first_wait, working, then) = match a.report_after {
            None => (Duration::ZERO, true, apply_time),
            Some(after) if after < apply_time => (after, true, apply_time - after),
            Some(after) => (after, false, Duration::ZERO),
        };
        let r = async {
            if !first_wait.is_zero() {
                tokio::time::sleep(first_wait).await;
            }
            if working {
                let doc = status_doc(
                    NodeState::Working,
                    current.as_deref(),
                    &name,
                    shared.history,
                );
                report(&mut conn, &shared, &cred, doc, phase).await?;
            }
            if !then.is_zero() {
                tokio::time::sleep(then).await;
            }
            let doc = status_doc(NodeState::Done, Some(&name), &name, shared.history);
            report(&mut conn, &shared, &cred, doc, phase).await
        }
        .await;
        if let Err(f) = r {
            shared.stats.error("status report", &f);
            broken = true;
            continue;
        }
        current = Some(name);
        if first {
            shared.ready.fetch_add(1, Ordering::Relaxed);
        } else if is_new {
            if let (Some(start), Ok(mut v)) = (shared.apply_start.get(), shared.done.lock()) {
                v.push(start.elapsed());
            }
            shared.done_count.fetch_add(1, Ordering::Relaxed);
        }
    }
}

pub(crate) async fn wait_until(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> (usize, usize),
) -> Result<Duration> {
    let start = Instant::now();
    let mut last_print = Instant::now();
    loop {
        let (have, want) = f();
        if have >= want {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            bail!(
                "{what}: only {have} of {want} after {} s",
                timeout.as_secs()
            );
        }
        if last_print.elapsed() > Duration::from_secs(5) {
            eprintln!(
                "  {what}: {have}/{want} ({:.0} s)",
                start.elapsed().as_secs_f64()
            );
            last_print = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

pub(crate) async fn agents(a: AgentsArgs) -> Result<()> {
    let conns = a.agents.div_ceil(usize::from(a.agents_per_connection));
    let nofile = raise_nofile(conns as u64 + 1024);
    if (nofile as usize) < conns + 64 {
        eprintln!(
            "warning: the open-files limit is {nofile}, fewer than the {} these agents need",
            conns + 64
        );
    }
    if a.server.len() > 16 {
        bail!("--server: at most 16 servers");
    }
    let targets = a
        .server
        .iter()
        .map(|s| Target::new(s, &a.common.ca).map(Arc::new))
        .collect::<Result<Vec<_>>>()?;
    let token = Arc::new(secret(&a.bootstrap_token)?);
    let shared = Arc::new(Shared {
        apply_time: Duration::from_millis(a.apply_ms),
        history: usize::from(a.history),
        defer: a.defer,
        ..Shared::new(a.wait)
    });
    let mem_start = mem_sum_json(&a.server_pid);
    let timeout = Duration::from_secs(a.timeout);
    eprintln!(
        "hearth-loadgen: {} agents against {} (enroll concurrency {}, wait {} s, {} source address(es))",
        a.agents,
        a.server.join(", "),
        a.enroll_concurrency,
        a.wait,
        a.source_addresses.as_ref().map_or(1, |s| s.0.len())
    );
    let sem = Arc::new(tokio::sync::Semaphore::new(a.enroll_concurrency.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    let started = Instant::now();
    let per_conn = usize::from(a.agents_per_connection);
    let mut group: Option<Arc<H2Group>> = None;
    for i in 0..a.agents {
        let source = a.source_addresses.as_ref().map(|s| s.0[i % s.0.len()]);
        let via = if per_conn > 1 {
            if i % per_conn == 0 {
                group = Some(Arc::new(H2Group {
                    source,
                    conn: tokio::sync::Mutex::new(None),
                }));
            }
            match &group {
                Some(g) => Via::Shared(g.clone()),
                None => Via::Own(source),
            }
        } else {
            Via::Own(source)
        };
        // Agents that share a connection share its server.
        let target = targets[(i / per_conn) % targets.len()].clone();
        tasks.spawn(agent(
            target,
            shared.clone(),
            sem.clone(),
            via,
            format!("{}-{i:05}", a.prefix),
            token.clone(),
        ));
    }
    let n = a.agents;
    let enroll_time = wait_until("enrolled", timeout, || {
        (shared.enrolled.load(Ordering::Relaxed), n)
    })
    .await?;
    eprintln!("  all {n} enrolled in {:.1} s", enroll_time.as_secs_f64());
    let ready_time = wait_until("running their first config", timeout, || {
        (shared.ready.load(Ordering::Relaxed), n)
    })
    .await?;
    eprintln!(
        "  all {n} running their first config after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Who runs what now.
    let firsts = shared.firsts.lock().map(|s| s.clone()).unwrap_or_default();
    let _ = shared.baseline.set(firsts);
    // Let the long-polls settle, then measure the idle server.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mem_idle = mem_sum_json(&a.server_pid);
    let own_idle = mem_json(Some(std::process::id()));

    let mut apply = Value::Null;
    if let Some(cmd) = &a.apply {
        eprintln!("  applying: {cmd}");
        let _ = shared.apply_start.set(Instant::now());
        let t = Instant::now();
        let out = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .output()
            .await
            .with_context(|| format!("cannot run {cmd}"))?;
        let cmd_time = t.elapsed();
        if !out.status.success() {
            bail!(
                "the apply command failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        apply = measure_apply(&shared, n, timeout, Some(cmd_time)).await?;
    } else if a.hold > 0 {
        eprintln!("  holding {} s for an apply", a.hold);
        let hold = Duration::from_secs(a.hold);
        let t = Instant::now();
        while t.elapsed() < hold && shared.apply_start.get().is_none() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if shared.apply_start.get().is_some() {
            apply = measure_apply(&shared, n, timeout, None).await?;
        }
    }
    if a.steady > 0 {
        // The fleet as it runs between changes: every agent long-polls and reports each turn.
        eprintln!(
            "  steady: {} s of long-polls ({} s wait) and a report every turn",
            a.steady, a.wait
        );
        tokio::time::sleep(Duration::from_secs(a.steady)).await;
    }
    let mem_end = mem_sum_json(&a.server_pid);
    shared.stop.store(true, Ordering::Relaxed);
    tasks.abort_all();

    let report = json!({
        "mode": "agents",
        "server": a.server,
        "agents": n,
        "enrollConcurrency": a.enroll_concurrency,
        "waitSeconds": a.wait,
        "steadySeconds": a.steady,
        "agentsPerConnection": a.agents_per_connection,
        "sourceAddresses": a.source_addresses.as_ref().map(|s| s.0.iter().map(|ip| ip.to_string()).collect::<Vec<_>>()),
        "enrollSeconds": secs(enroll_time),
        "allRunningFirstConfigSeconds": secs(ready_time),
        "apply": apply,
        "serverMemory": {"start": mem_start, "idleWithAllWaiting": mem_idle, "end": mem_end},
        "loadgenMemory": own_idle,
        "openFilesLimit": nofile,
        "stats": shared.stats.summary(),
    });
    if a.common.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_agents(&report);
    }
    Ok(())
}

pub(crate) async fn measure_apply(
    shared: &Shared,
    n: usize,
    timeout: Duration,
    cmd_time: Option<Duration>,
) -> Result<Value> {
    wait_until("seen the new config", timeout, || {
        (shared.seen_count.load(Ordering::Relaxed), n)
    })
    .await?;
    wait_until("reported Done in the new config", timeout, || {
        (shared.done_count.load(Ordering::Relaxed), n)
    })
    .await?;
    let to_ms = |v: &Mutex<Vec<Duration>>| -> Vec<u32> {
        v.lock()
            .map(|v| v.iter().map(|d| d.as_micros() as u32).collect())
            .unwrap_or_default()
    };
    let seen = to_ms(&shared.seen);
    let done = to_ms(&shared.done);
    let all_seen = seen.iter().max().copied().unwrap_or(0) as f64 / 1e6;
    let all_done = done.iter().max().copied().unwrap_or(0) as f64 / 1e6;
    eprintln!("  apply → all {n} agents saw the new config: {all_seen:.3} s; all reported Done: {all_done:.3} s");
    Ok(json!({
        "applyCommandSeconds": cmd_time.map(secs),
        "measuredFrom": if cmd_time.is_some() { "the start of the apply command" } else { "the first agent seeing the new config" },
        "allSeenSeconds": all_seen,
        "allDoneSeconds": all_done,
        "seenMs": percentiles(seen),
        "doneMs": percentiles(done),
    }))
}

pub(crate) fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

pub(crate) fn print_agents(r: &Value) {
    println!(
        "hearth-loadgen agents: {} agents against {}",
        r["agents"], r["server"]
    );
    println!(
        "  enrolled in {} s (concurrency {}); all running their first config after {} s",
        r["enrollSeconds"], r["enrollConcurrency"], r["allRunningFirstConfigSeconds"]
    );
    if !r["apply"].is_null() {
        let a = &r["apply"];
        println!(
            "  apply → every agent saw the new config: {} s, reported Done: {} s (from {}; apply command {} s)",
            a["allSeenSeconds"], a["allDoneSeconds"], a["measuredFrom"].as_str().unwrap_or(""), a["applyCommandSeconds"]
        );
        println!(
            "    per agent, ms after the apply: seen {}  done {}",
            a["seenMs"], a["doneMs"]
        );
    }
    let m = &r["serverMemory"];
    println!(
        "  server memory: start {}, idle with all long-polls waiting {}, end {}",
        m["start"], m["idleWithAllWaiting"], m["end"]
    );
    println!("  load generator memory: {}", r["loadgenMemory"]);
    println!("  latency (ms):");
    if let Some(l) = r["stats"]["latencyMs"].as_object() {
        for (k, v) in l {
            println!(
                "    {k:<28} n={:<7} p50={:<8} p90={:<8} p99={:<8} max={}",
                v["n"], v["p50"], v["p90"], v["p99"], v["max"]
            );
        }
    }
    println!("  counts: {}", r["stats"]["counts"]);
    let errors = &r["stats"]["errors"];
    if errors.as_object().is_some_and(|e| !e.is_empty()) {
        println!("  errors:");
        for (k, v) in errors.as_object().into_iter().flatten() {
            println!("    {v:>7}  {k}");
        }
    } else {
        println!("  errors: none");
    }
}
