//! `throughput`: K clients fetching one URL as fast as they can.

use crate::agents::{enroll_one, Shared};
use crate::args::{raise_nofile, secret, ThroughputArgs};
use crate::conn::{Fail, Target, Via};
use crate::stats::Stats;
use anyhow::{anyhow, Result};
use hyper::{Method, StatusCode};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) async fn throughput(a: ThroughputArgs) -> Result<()> {
    let nofile = raise_nofile(a.concurrency as u64 + 64);
    let target = Arc::new(Target::new(&a.url, &a.common.ca)?);
    let token = match (&a.token, &a.enroll_with) {
        (Some(t), _) => Some(secret(t)?),
        (None, Some(b)) => {
            let shared = Shared::new(0);
            // A name of its own per run: a node enrolled already cannot enroll again without its
            // credential (409), and the script runs several rounds.
            let name = format!("loadgen-throughput-{}", std::process::id());
            let (_, cred) = enroll_one(&target, &shared, &Via::Own(None), &name, &secret(b)?)
                .await
                .map_err(|f| anyhow!("cannot enroll the throughput node: {f}"))?;
            Some(cred)
        }
        _ => None,
    };
    let token = Arc::new(token);
    let stats = Arc::new(Stats::default());
    let bytes = Arc::new(AtomicUsize::new(0));
    let ok = Arc::new(AtomicUsize::new(0));
    let duration = Duration::from_secs(a.duration);
    let start = Instant::now() + Duration::from_millis(200);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..a.concurrency.max(1) {
        let (target, token, stats, bytes, ok) = (
            target.clone(),
            token.clone(),
            stats.clone(),
            bytes.clone(),
            ok.clone(),
        );
        tasks.spawn(async move {
            let mut conn = None;
            tokio::time::sleep_until(start.into()).await;
            while start.elapsed() < duration {
                if conn.is_none() {
                    match target.connect(None).await {
                        Ok(c) => conn = Some(c),
                        Err(f) => {
                            stats.error("connect", &f);
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    }
                }
                let Some(c) = conn.as_mut() else { continue };
                let t = Instant::now();
                match c
                    .request(
                        Method::GET,
                        &target.path,
                        token.as_deref(),
                        None,
                        Duration::from_secs(30),
                    )
                    .await
                {
                    Ok(r) if r.status == StatusCode::OK => {
                        if start.elapsed() < duration {
                            stats.record("GET", t.elapsed());
                            bytes.fetch_add(r.body.len(), Ordering::Relaxed);
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Ok(r) => stats.error("GET", &Fail::Status(r.status.as_u16())),
                    Err(f) => {
                        stats.error("GET", &f);
                        conn = None;
                    }
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let n = ok.load(Ordering::Relaxed);
    let b = bytes.load(Ordering::Relaxed);
    let secs_run = duration.as_secs_f64();
    let summary = stats.summary();
    let report = json!({
        "mode": "throughput",
        "label": a.label,
        "url": a.url,
        "concurrency": a.concurrency,
        "seconds": a.duration,
        "requests": n,
        "requestsPerSecond": (n as f64 / secs_run).round(),
        "bodyBytes": b.checked_div(n).unwrap_or(0),
        "MiBPerSecond": ((b as f64 / secs_run / 1048576.0) * 10.0).round() / 10.0,
        "latencyMs": summary["latencyMs"]["GET"],
        "errors": summary["errors"],
        "openFilesLimit": nofile,
    });
    if a.common.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{}: {} req/s ({} requests, {} bytes each, {} MiB/s) with {} clients for {} s; latency ms {}; errors {}",
            if a.label.is_empty() { &a.url } else { &a.label },
            report["requestsPerSecond"],
            n,
            report["bodyBytes"],
            report["MiBPerSecond"],
            a.concurrency,
            a.duration,
            report["latencyMs"],
            report["errors"]
        );
    }
    Ok(())
}
