//! The drains' side of the controller's loop: one step of each drain the rollout waits for,
//! and the end of those that are over; each transition logged and posted as an Event.

use super::annotations::{self, DESIRED_CONFIG};
use super::drain::{self, Drainer, OnTimeout, Progress, Todo};
use super::events::Recorder;
use super::resources::CALL_TIMEOUT;
use crate::store::records::EventRecord;
use anyhow::Result;
use serde_json::Value;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often a node's drain is tried again (evictions a budget refused, pods terminating).
pub(super) const DRAIN_RETRY: Duration = Duration::from_secs(5);

/// One step of each drain in `todo` (each node at most every [`DRAIN_RETRY`]); the nodes handed
/// their config because their drain is over (or skipped).
pub(super) async fn drain_nodes(
    drainer: &Drainer,
    recorder: &Recorder,
    todo: &[Todo],
    nodes: &[Value],
    last: &mut HashMap<String, Instant>,
    now: u64,
) -> Vec<(String, String)> {
    let mut set = Vec::new();
    for t in todo {
        if last.get(&t.node).is_some_and(|i| i.elapsed() < DRAIN_RETRY) {
            continue;
        }
        last.insert(t.node.clone(), Instant::now());
        match tokio::time::timeout(CALL_TIMEOUT, drain_one(drainer, recorder, t, nodes, now)).await
        {
            Ok(Ok(true)) => set.push((t.node.clone(), t.config.clone())),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => tracing::warn!(node = %t.node, error = %format!("{e:#}"), "drain"),
            Err(_) => {
                tracing::warn!(node = %t.node, "a drain step took longer than {CALL_TIMEOUT:?}; trying again")
            }
        }
    }
    set
}

/// One step of one drain; true when the node was handed its config.
async fn drain_one(
    drainer: &Drainer,
    recorder: &Recorder,
    t: &Todo,
    nodes: &[Value],
    now: u64,
) -> Result<bool> {
    let event = |warning: bool, reason: &str, message: String| {
        let object = format!("Node/{}", t.node);
        if warning {
            EventRecord::warning(now, object, reason, message)
        } else {
            EventRecord::normal(now, object, reason, message)
        }
    };
    // A pool's unreadable drain settings: the defaults (said once, when the drain starts).
    if let (Err(e), None) = (&t.policy, t.started) {
        tracing::warn!(node = %t.node, "{e}; the default drain settings apply");
    }
    let policy = t.policy.clone().unwrap_or_default();
    let node = &t.node;
    let started = match t.started {
        Some(s) => s,
        None => {
            let cordoned_already = nodes
                .iter()
                .find(|n| n["metadata"]["name"] == node.as_str())
                .is_some_and(|n| n["spec"]["unschedulable"] == true);
            let mut marks = vec![
                (annotations::DRAIN_FOR, Some(t.config.clone())),
                (annotations::DRAIN_STARTED, Some(crate::time::rfc3339(now))),
                (annotations::DRAINED_FOR, None),
                (annotations::DRAIN_BLOCKED, None),
            ];
            if !cordoned_already {
                marks.push((annotations::CORDONED, Some("true".into())));
            }
            drainer
                .mark(node, &marks, (!cordoned_already).then_some(true))
                .await?;
            tracing::info!(node, config = %t.config, "cordoned; draining before the update");
            recorder
                .record(&[event(
                    false,
                    "Cordoned",
                    format!(
                        "draining before the update to {} (it needs a reboot)",
                        t.config
                    ),
                )])
                .await;
            now
        }
    };
    // Drained (or skipped): the node gets its config, and the drain is remembered as done.
    let hand_over = [
        (annotations::DRAINED_FOR, Some(t.config.clone())),
        (annotations::DRAIN_BLOCKED, None),
        (DESIRED_CONFIG, Some(t.config.clone())),
    ];
    match drainer.step(node).await? {
        Progress::Drained => {
            drainer.mark(node, &hand_over, None).await?;
            tracing::info!(node, config = %t.config, "drained; desired config set");
            recorder
                .record(&[event(
                    false,
                    "Drained",
                    format!("drained; desired config {}", t.config),
                )])
                .await;
            Ok(true)
        }
        Progress::Waiting(why) => {
            let over = now.saturating_sub(started) >= policy.timeout.as_secs();
            match (over, policy.on_timeout) {
                (true, OnTimeout::Skip) => {
                    drainer.mark(node, &hand_over, None).await?;
                    tracing::warn!(node, config = %t.config, "drain past its timeout, skipped as the pool says: {why}");
                    recorder
                        .record(&[event(
                            true,
                            "DrainSkipped",
                            format!("past its timeout, the update to {} goes on as the pool says ({}: skip): {why}", t.config, annotations::ON_TIMEOUT_ANNOTATION),
                        )])
                        .await;
                    Ok(true)
                }
                (true, OnTimeout::Fail) => {
                    drainer
                        .mark(
                            node,
                            &[
                                (annotations::DRAIN_FAILED, Some(why.clone())),
                                (annotations::DRAIN_BLOCKED, Some(why.clone())),
                                (annotations::DRAIN_FOR, None),
                                (annotations::DRAIN_STARTED, None),
                            ],
                            None,
                        )
                        .await?;
                    tracing::warn!(node, config = %t.config, "drain past its timeout, failed as the pool says: {why}");
                    recorder
                        .record(&[event(
                            true,
                            "DrainFailed",
                            format!("past its timeout, the node counts as Degraded as the pool says ({}: fail): {why}", annotations::ON_TIMEOUT_ANNOTATION),
                        )])
                        .await;
                    Ok(false)
                }
                _ => {
                    if t.blocked.as_deref() != Some(why.as_str()) {
                        drainer
                            .mark(
                                node,
                                &[(annotations::DRAIN_BLOCKED, Some(why.clone()))],
                                None,
                            )
                            .await?;
                        tracing::warn!(node, config = %t.config, "drain waits: {why}");
                        recorder
                            .record(&[event(true, "DrainBlocked", why.clone())])
                            .await;
                    }
                    Ok(false)
                }
            }
        }
    }
}

/// Ends the drains that are over ([`drain::finished`]): their annotations go, and the nodes the
/// controller cordoned are uncordoned.
pub(super) async fn end_drains(
    drainer: &Drainer,
    recorder: &Recorder,
    nodes: &[Value],
    todo: &[Todo],
) {
    for (node, cordoned) in drain::finished(nodes, todo) {
        let clear: Vec<(&str, Option<String>)> = [
            annotations::DRAIN_FOR,
            annotations::DRAIN_STARTED,
            annotations::DRAINED_FOR,
            annotations::DRAIN_BLOCKED,
            annotations::CORDONED,
        ]
        .into_iter()
        .map(|k| (k, None))
        .collect();
        match drainer.mark(&node, &clear, cordoned.then_some(false)).await {
            Ok(()) if cordoned => {
                tracing::info!(node, "uncordoned: its update is done");
                recorder
                    .record(&[EventRecord::normal(
                        crate::time::now(),
                        format!("Node/{node}"),
                        "Uncordoned",
                        "its update is done".into(),
                    )])
                    .await;
            }
            Ok(()) => {}
            Err(e) => tracing::warn!(node, error = %format!("{e:#}"), "cannot end the drain"),
        }
    }
}
