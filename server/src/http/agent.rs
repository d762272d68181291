//! The agent API: enroll, the desired-config long-poll, status reports, reboot slots.

use super::auth::{bearer, node, Auth};
use super::routes::{AppState, Peer, DESIRED_HEADER};
use crate::api::{AgentStatus, EnrollRequest, SlotRequest};
use crate::app::Caller;
use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hearth_api::REPORT_AFTER_HEADER;
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

pub(super) async fn enroll(
    State(app): AppState,
    peer: Option<axum::Extension<Peer>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    // Read whatever the Content-Type says (the token may be in the body).
    let req: EnrollRequest = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(format!(
            "expected {{\"node\": NAME, \"labels\": {{...}}, \"bootstrapToken\": TOKEN}}: {e}"
        ))
    })?;
    // The bootstrap token in the body (or as the bearer token); a node enrolling again sends
    // its current credential as the bearer token.
    let header_token = bearer(&headers);
    let token = req
        .bootstrap_token
        .clone()
        .or_else(|| header_token.clone())
        .ok_or_else(|| {
            ApiError::unauthorized(
                "missing bootstrap token: send bootstrapToken or Authorization: Bearer",
            )
        })?;
    let pool = match app.authenticate(&token)? {
        Caller::Bootstrap {
            node: Some(bound), ..
        } if bound != req.node => {
            return Err(ApiError::forbidden(format!(
                "this bootstrap token is bound to node {bound}: it cannot enroll {:?}",
                req.node
            )))
        }
        Caller::Bootstrap { pool, .. } => pool,
        _ => {
            return Err(ApiError::forbidden(
                "nodes enroll with their pool's bootstrap token",
            ))
        }
    };
    crate::bounds::labels(&req.labels)?;
    let old_credential = header_token.filter(|t| *t != token);
    let from = peer.map(|axum::Extension(Peer(addr))| addr.ip().to_string());
    let resp = app
        .enroll(&pool, &req, old_credential.as_deref(), from.as_deref())
        .await?;
    tracing::info!(node = %resp.node, pool = %resp.pool, "node enrolled");
    Ok(Json(serde_json::to_value(resp).unwrap_or_default()))
}

#[derive(Debug, Deserialize)]
pub(super) struct DesiredQuery {
    #[serde(default)]
    known: Option<String>,
    #[serde(default)]
    wait: Option<u64>,
    #[serde(default)]
    node: Option<String>,
    /// The highest request id the agent acted on (it takes requests).
    #[serde(default)]
    done: Option<u64>,
    /// The agent holds its reports when asked (`hearth_api::DEFER_PARAM`).
    #[serde(default)]
    defer: bool,
}

fn not_modified(known: Option<&str>) -> Response {
    let mut resp = StatusCode::NOT_MODIFIED.into_response();
    if let Some(k) = known.and_then(|k| HeaderValue::from_str(k).ok()) {
        resp.headers_mut().insert(DESIRED_HEADER, k);
    }
    resp
}

pub(super) async fn desired(
    State(app): AppState,
    Auth(c): Auth,
    Query(q): Query<DesiredQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let me = node(&c)?.to_string();
    let token = bearer(&headers).unwrap_or_default();
    if let Some(other) = q.node.as_deref().filter(|n| *n != me) {
        return Err(ApiError::forbidden(format!(
            "node {me} may not read the desired config of node {other}"
        )));
    }
    app.seen(&me);
    // Its next long-poll: the node took its last answer.
    app.pacer.heard_from(&me);
    let wait = spread(Duration::from_secs(q.wait.unwrap_or(0)).min(app.options.max_wait));
    let deadline = tokio::time::Instant::now() + wait;
    // Subscribed before looking, so that a change between the look and the wait is not missed;
    // a request that will not wait needs no channel.
    let mut rx = (!wait.is_zero()).then(|| app.node_desired_watch(&me));
    let mut waiting = None;
    let mut first = true;
    let mut turn = None;
    loop {
        if let Some(rx) = rx.as_mut() {
            rx.borrow_and_update();
        }
        // Woken: the replica may be cut off from etcd now (the agent asks another), or the
        // credential revoked (a reset, a new enrollment).
        if !first {
            app.check_linked()?;
        }
        if !first && app.authenticate(&token)? != Caller::Node(me.clone()) {
            return Err(ApiError::unauthorized(format!(
                "the credential of node {me} was revoked; enroll again"
            )));
        }
        first = false;
        if let Some(((name, body), requests)) = app.desired_body(&me, q.done)? {
            if requests || q.known.as_deref() != Some(name.as_str()) {
                if turn.is_none() {
                    // A turn first (`crate::pace`); after a wait, look again: the answer or
                    // the credential may have changed meanwhile.
                    let t = app.pacer.turn(&me, q.defer).await;
                    let waited = t.waited();
                    turn = Some(t);
                    if waited {
                        continue;
                    }
                }
                app.metrics.desired_served();
                // The encoded answer is shared, not copied: after an apply, thousands of
                // long-polls answer with the same bytes at once.
                let mut resp = (
                    [(header::CONTENT_TYPE, "application/json")],
                    Bytes::from_owner(SharedBody(body)),
                )
                    .into_response();
                if let Ok(v) = HeaderValue::from_str(&name) {
                    resp.headers_mut().insert(DESIRED_HEADER, v);
                }
                if let Some(after) = turn.as_ref().and_then(|t| t.report_after()) {
                    resp.headers_mut().insert(
                        REPORT_AFTER_HEADER,
                        HeaderValue::from(hearth_api::desired::report_after_value(after)),
                    );
                }
                // The turn lasts until the node is heard from; on any other way out of this
                // loop it is given back at once.
                if let Some(t) = turn.take() {
                    t.keep();
                }
                return Ok(resp);
            }
        }
        // Nothing to answer after all: no turn is held while waiting.
        turn = None;
        let Some(rx) = rx
            .as_mut()
            .filter(|_| tokio::time::Instant::now() < deadline)
        else {
            return Ok(not_modified(q.known.as_deref()));
        };
        if waiting.is_none() {
            waiting = Some(app.metrics.waiting());
        }
        tokio::select! {
            r = rx.changed() => if r.is_err() { return Ok(not_modified(q.known.as_deref())) },
            _ = tokio::time::sleep_until(deadline) => return Ok(not_modified(q.known.as_deref())),
        }
    }
}

/// An encoded desired config shared by the answers that send it.
struct SharedBody(std::sync::Arc<Vec<u8>>);

impl AsRef<[u8]> for SharedBody {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// A long-poll's wait less up to a tenth of it, at random. Agents that took a change together
/// (an apply to a whole pool) start their next long-poll together; answered "no change" at the
/// same instant turn after turn, they would report together, thousands in the same second,
/// forever. Spread, their turns drift apart within a few turns.
fn spread(wait: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    // `RandomState` is seeded at random (and differs from one instance to the next): enough
    // for a jitter, without a random-number crate.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    let fraction = (h.finish() >> 11) as f64 / (1u64 << 53) as f64;
    wait.saturating_sub((wait / 10).mul_f64(fraction))
}

pub(super) async fn report(
    State(app): AppState,
    Auth(c): Auth,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let me = node(&c)?.to_string();
    // The node took its last answer: its turn ends once this report is answered
    // (`crate::pace`).
    let _heard = app.pacer.hearing(&me);
    let status: AgentStatus = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("not an agent status document: {e}")))?;
    // Not held while the report waits for its commit: in the burst of an apply, thousands do.
    drop(body);
    let status = crate::bounds::status_report(status)?;
    app.report(&me, status).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn reboot_slot(
    State(app): AppState,
    Auth(c): Auth,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let me = node(&c)?.to_string();
    let req: SlotRequest = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(format!(
            "expected {{\"action\": \"acquire\"|\"release\"}}: {e}"
        ))
    })?;
    let answer = app
        .reboot_slot(&me, req.action, crate::store::records::SlotHolder::Agent)
        .await?;
    Ok(Json(serde_json::to_value(answer).unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait is cut by at most a tenth, and not by the same amount every time.
    #[test]
    fn long_poll_waits_are_spread_within_a_tenth() {
        let wait = Duration::from_secs(300);
        let waits: std::collections::BTreeSet<Duration> = (0..100).map(|_| spread(wait)).collect();
        assert!(waits.iter().all(|w| *w <= wait && *w >= wait - wait / 10));
        assert!(waits.len() > 50, "spread: {waits:?}");
        assert_eq!(spread(Duration::ZERO), Duration::ZERO);
    }
}
