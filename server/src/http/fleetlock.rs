//! FleetLock (https://coreos.github.io/zincati/development/fleetlock/protocol/): the same
//! reboot slots, for FleetLock clients on enrolled nodes (`/v1/pre-reboot`, `/v1/steady-state`).

use super::auth::{basic_password, bearer};
use super::routes::AppState;
use crate::api::SlotAction;
use crate::app::{App, Caller};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

#[derive(Debug, Deserialize)]
struct FleetLockBody {
    client_params: FleetLockParams,
}

#[derive(Debug, Deserialize)]
struct FleetLockParams {
    #[serde(default)]
    id: String,
    #[serde(default)]
    group: String,
}

/// A FleetLock error: a non-2xx status with `{"kind": ..., "value": ...}`.
fn fleetlock_error(status: StatusCode, kind: &str, value: impl Into<String>) -> Response {
    (status, Json(json!({"kind": kind, "value": value.into()}))).into_response()
}

async fn fleetlock(app: &App, headers: &HeaderMap, body: &[u8], action: SlotAction) -> Response {
    let protocol = headers
        .get("fleet-lock-protocol")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !protocol {
        return fleetlock_error(
            StatusCode::BAD_REQUEST,
            "missing_header",
            "the header fleet-lock-protocol: true is required",
        );
    }
    let Some(token) = bearer(headers).or_else(|| basic_password(headers)) else {
        let mut r = fleetlock_error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "send the node's credential: https://node:<credential>@host/ or Authorization: Bearer",
        );
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"hearth\""),
        );
        return r;
    };
    let node = match app.authenticate(&token) {
        Ok(Caller::Node(n)) => n,
        Ok(_) => {
            return fleetlock_error(
                StatusCode::FORBIDDEN,
                "forbidden",
                "FleetLock takes a node's credential",
            )
        }
        Err(e) => return fleetlock_error(super::status::status_of(&e), "unauthorized", e.message),
    };
    let params = match serde_json::from_slice::<FleetLockBody>(body) {
        Ok(b) => b.client_params,
        Err(e) => {
            return fleetlock_error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("expected {{\"client_params\": {{\"id\": ..., \"group\": ...}}}}: {e}"),
            )
        }
    };
    if params.id.len() > crate::bounds::MAX_FLEETLOCK_FIELD
        || params.group.len() > crate::bounds::MAX_FLEETLOCK_FIELD
    {
        return fleetlock_error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!(
                "client_params.id and .group are at most {} bytes",
                crate::bounds::MAX_FLEETLOCK_FIELD
            ),
        );
    }
    let pool = app
        .snapshot()
        .nodes
        .get(&node)
        .and_then(|n| n.value.pool.clone());
    if !params.group.is_empty() && params.group != "default" && Some(&params.group) != pool.as_ref()
    {
        return fleetlock_error(
            StatusCode::FORBIDDEN,
            "wrong_group",
            format!(
                "node {node} is in pool {}; use group \"default\" or its pool",
                pool.as_deref().unwrap_or("-")
            ),
        );
    }
    match app
        .reboot_slot(&node, action, crate::store::records::SlotHolder::FleetLock)
        .await
    {
        Ok(answer) if action == SlotAction::Release || answer.granted => {
            // The id is the client's word (logged escaped); the slot is the credential's node.
            tracing::info!(node = %node, id = ?params.id, ?action, "FleetLock");
            (StatusCode::OK, Json(json!({}))).into_response()
        }
        Ok(answer) => fleetlock_error(
            StatusCode::CONFLICT,
            "failed_lock",
            format!(
                "{}; retry in {} s",
                answer.reason.clone().unwrap_or_else(|| format!(
                    "all reboot slots of pool {} are taken",
                    pool.as_deref().unwrap_or("-")
                )),
                answer.retry_after_seconds
            ),
        ),
        Err(e) => fleetlock_error(super::status::status_of(&e), "error", e.message),
    }
}

pub(super) async fn fleetlock_pre_reboot(
    State(app): AppState,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    fleetlock(&app, &headers, &body, SlotAction::Acquire).await
}

pub(super) async fn fleetlock_steady_state(
    State(app): AppState,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    fleetlock(&app, &headers, &body, SlotAction::Release).await
}
