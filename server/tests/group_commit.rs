//! Many agents at once against a real server (in-process, real TLS): concurrent enrollments and
//! status reports are committed in groups, and none is lost or mixed up; a long-poll wakes for
//! its own node's change and not for other nodes' enrollments.

use crate::common;

use common::{metric, start, worker_mc, Api, ALL_AT_ONCE};
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

const NODES: usize = 120;

/// A server with `options`, the worker pool updating every node at once with a first config,
/// its admin and the pool's bootstrap token.
async fn worker_pool_at_once(
    dir: &std::path::Path,
    options: hearth_server::app::Options,
) -> (hearth_server::serve::Running, Api, String) {
    let running = start(dir, options).await;
    let admin = Api::admin(&running);
    apply_ok(&admin, "mc.yaml", &worker_mc("a", "one")).await;
    apply_ok(&admin, "pool.yaml", ALL_AT_ONCE).await;
    let bootstrap = common::bootstrap_token(&running, "worker");
    (running, admin, bootstrap)
}

/// Applies one file, which must be accepted.
async fn apply_ok(admin: &Api, name: &str, text: &str) {
    let a = admin.apply_text(name, text).await;
    assert_eq!(a.status, StatusCode::OK, "{name}: {}", a.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_enrollments_and_reports_all_land() {
    let d = tempfile::tempdir().unwrap();
    let running = start(d.path(), common::options(5)).await;
    let admin = Api::admin(&running);
    apply_ok(&admin, "mc.yaml", &worker_mc("a", "one")).await;
    // All at once to the new config when it changes.
    apply_ok(&admin, "pool.yaml", ALL_AT_ONCE).await;
    let bootstrap = std::fs::read_to_string(d.path().join("tokens/worker.token")).unwrap();
    let bootstrap = bootstrap.trim().to_string();

    // A node that waits from before the others enroll: their enrollments do not answer it.
    let early = admin.enroll(&bootstrap, "early", json!({})).await;
    let first = early.desired_name().await.expect("a desired config");
    let waiting = {
        let early = early.clone();
        let first = first.clone();
        tokio::spawn(async move {
            early
                .get(&format!("/api/v1/agent/desired?known={first}&wait=60"))
                .await
        })
    };

    let mut tasks = Vec::new();
    for i in 0..NODES {
        let (admin, bootstrap) = (admin.clone(), bootstrap.clone());
        tasks.push(tokio::spawn(async move {
            let node = admin
                .enroll(&bootstrap, &format!("node-{i:03}"), json!({}))
                .await;
            let name = node.desired_name().await.expect("a desired config");
            node.report("Working", None, Some(&name), None).await;
            node.report("Done", Some(&name), Some(&name), None).await;
            (node, name)
        }));
    }
    let mut nodes = Vec::new();
    for t in tasks {
        nodes.push(t.await.unwrap());
    }
    assert!(nodes.iter().all(|(_, n)| *n == first));
    assert!(
        !waiting.is_finished(),
        "the early node's long-poll was answered by other nodes' enrollments"
    );

    // Every report landed on its own node.
    let list = admin.get("/api/v1/nodes?pool=worker").await;
    assert_eq!(list.status, StatusCode::OK);
    let items = list.json["items"].as_array().unwrap();
    assert_eq!(items.len(), NODES + 1);
    let p = admin.get("/api/v1/pools/worker").await;
    assert_eq!(p.json["status"]["machineCount"], NODES + 1, "{}", p.json);
    assert_eq!(p.json["status"]["updatedMachineCount"], NODES, "{}", p.json);

    // A change: the early node's long-poll is answered, and all nodes report concurrently.
    apply_ok(&admin, "mc2.yaml", &worker_mc("b", "two")).await;
    let answer = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the early node's long-poll is answered after the apply")
        .unwrap();
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    let second = answer.json["name"].as_str().unwrap().to_string();
    assert_ne!(second, first);
    let mut tasks = Vec::new();
    for (node, old) in nodes {
        let second = second.clone();
        tasks.push(tokio::spawn(async move {
            assert_eq!(node.desired_name().await.as_deref(), Some(second.as_str()));
            node.report("Working", Some(&old), Some(&second), None)
                .await;
            node.report("Done", Some(&second), Some(&second), None)
                .await;
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    early
        .report("Done", Some(&second), Some(&second), None)
        .await;
    let p = admin.get("/api/v1/pools/worker").await;
    assert_eq!(
        p.json["status"]["updatedMachineCount"],
        NODES + 1,
        "{}",
        p.json
    );
    assert_eq!(
        p.json["status"]["configuration"]["name"],
        second.as_str(),
        "{}",
        p.json
    );
    let list = admin.get("/api/v1/nodes?pool=worker").await;
    for n in list.json["items"].as_array().unwrap() {
        assert_eq!(n["status"]["state"], "Done", "{n}");
        assert_eq!(n["status"]["current"], second.as_str(), "{n}");
    }
    running.shutdown().await;
}

/// With one turn (`--desired-answers-at-once 1`) and a lease of an hour, an apply's answers go
/// out one at a time: the other woken long-polls wait for the turn, which only the answered
/// node's report ends; every node is answered, none without a turn, none by a lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_answers_woken_nodes_a_turn_at_a_time() {
    let d = tempfile::tempdir().unwrap();
    let options = hearth_server::app::Options {
        desired_answers_at_once: 1,
        pace_lease: Duration::from_secs(3600),
        ..common::options(5)
    };
    let (running, admin, bootstrap) = worker_pool_at_once(d.path(), options).await;
    let mut polls = Vec::new();
    let mut first = None;
    for name in ["n1", "n2", "n3", "n4"] {
        let node = admin.enroll(&bootstrap, name, json!({})).await;
        let known = node.desired_name().await.expect("a desired config");
        node.report("Done", Some(&known), Some(&known), None).await;
        first = Some(known.clone());
        polls.push(tokio::spawn(async move {
            let a = node
                .get(&format!("/api/v1/agent/desired?known={known}&wait=60"))
                .await;
            // The answered node reports at once, as hearth-agent does after applying: the
            // next node's turn.
            if let Some(name) = a.json["name"].as_str() {
                node.report("Done", Some(name), Some(name), None).await;
            }
            a
        }));
    }
    let waited_before = metric(&admin, "hearth_server_desired_answers_waited_total").await;
    apply_ok(&admin, "mc2.yaml", &worker_mc("b", "two")).await;
    for p in polls {
        let a = tokio::time::timeout(Duration::from_secs(30), p)
            .await
            .expect("every woken long-poll is answered")
            .unwrap();
        assert_eq!(a.status, StatusCode::OK, "{}", a.text);
        assert_ne!(a.json["name"].as_str(), first.as_deref());
    }
    // Four woken at once, one turn: the others waited for it (all three, unless a node's
    // report ended a turn before another woken long-poll asked); none went without.
    let waited = metric(&admin, "hearth_server_desired_answers_waited_total").await - waited_before;
    assert!((1..=3).contains(&waited), "{waited} answers waited");
    for none in [
        "hearth_server_desired_answers_gave_up_total",
        "hearth_server_desired_turns_expired_total",
    ] {
        assert_eq!(metric(&admin, none).await, 0, "{none}");
    }
    running.shutdown().await;
}

/// Agents that hold their reports (`defer=true`, as hearth-agent) take no turn: with one turn,
/// a lease of an hour and no node reporting, an apply still answers all four woken long-polls
/// at once, each but the first told to report one interval (here a second) after the one
/// before (`x-hearth-report-after`). An agent that does not say it defers takes the turn,
/// and is told nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_answers_agents_that_defer_at_once_with_a_time_to_report() {
    let d = tempfile::tempdir().unwrap();
    let options = hearth_server::app::Options {
        desired_answers_at_once: 1,
        deferred_reports_per_second: 1,
        pace_lease: Duration::from_secs(3600),
        pace_wait_limit: Duration::from_secs(3600),
        ..common::options(5)
    };
    let (running, admin, bootstrap) = worker_pool_at_once(d.path(), options).await;
    let mut polls = Vec::new();
    for name in ["n1", "n2", "n3", "n4", "old"] {
        let node = admin.enroll(&bootstrap, name, json!({})).await;
        let known = node.desired_name().await.expect("a desired config");
        node.report("Done", Some(&known), Some(&known), None).await;
        let defer = if name == "old" { "" } else { "&defer=true" };
        polls.push(tokio::spawn(async move {
            node.get(&format!(
                "/api/v1/agent/desired?known={known}&wait=60{defer}"
            ))
            .await
        }));
    }
    let old = polls.pop().unwrap();
    common::long_polls_waiting(&admin, 5).await;
    let deferred_before = metric(&admin, "hearth_server_desired_answers_deferred_total").await;
    apply_ok(&admin, "mc2.yaml", &worker_mc("b", "two")).await;
    let mut afters = Vec::new();
    for p in polls {
        // No node reports, and a turn lasts an hour: only answers that need no turn come.
        let a = tokio::time::timeout(Duration::from_secs(30), p)
            .await
            .expect("an agent that defers is answered without a turn")
            .unwrap();
        assert_eq!(a.status, StatusCode::OK, "{}", a.text);
        afters.push(
            a.headers
                .get("x-hearth-report-after")
                .map(|v| v.to_str().unwrap().parse::<u64>().unwrap()),
        );
    }
    // Counted: the three told to wait.
    assert_eq!(
        metric(&admin, "hearth_server_desired_answers_deferred_total").await - deferred_before,
        3
    );
    // One report a second from the first answer: the first at once (no header), the k-th
    // within the second before k seconds (the answers go out within that second).
    afters.sort();
    assert_eq!(afters[0], None, "{afters:?}");
    let later: Vec<u64> = afters[1..].iter().map(|a| a.expect("a time")).collect();
    for (k, ms) in later.iter().enumerate() {
        let slot = 1000 * (k as u64 + 1);
        assert!(*ms <= slot && *ms > slot - 1000, "{later:?}");
    }
    // The agent that does not defer took the one turn (free: deferred answers take none).
    let a = tokio::time::timeout(Duration::from_secs(30), old)
        .await
        .expect("the turn was free")
        .unwrap();
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert!(a.headers.get("x-hearth-report-after").is_none());
    running.shutdown().await;
}
