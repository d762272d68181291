//! `/config/{pool}`: the Ignition config for first-booting nodes, with the bootstrap
//! (server URL, CA, pool, token) added, in the Ignition version the node asks for.

use super::auth::bearer;
use super::AppState;
use crate::app::Caller;
use crate::error::ApiError;
use crate::firstboot::{self, Bootstrap, Negotiated, IGNITION_MEDIA_TYPE};
use crate::pki::ClientIdentity;
use crate::store::Store;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub(super) struct ConfigQuery {
    #[serde(default)]
    token: Option<String>,
}

pub(super) async fn first_boot<S: Store>(
    State(app): AppState<S>,
    Path(pool): Path<String>,
    Query(q): Query<ConfigQuery>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    cert: Option<axum::Extension<ClientIdentity>>,
) -> Result<Response, ApiError> {
    let caller = match bearer(&headers).or(q.token) {
        Some(token) => app.authenticate(&token)?,
        // An admin's client certificate, as for the admin endpoints.
        None if cert.as_ref().is_some_and(|c| c.admin) => Caller::Admin,
        None => {
            return Err(ApiError::unauthorized(
                "missing credentials: send the pool's bootstrap token as Authorization: Bearer or ?token=",
            ))
        }
    };
    let embed = match caller {
        Caller::Admin => None,
        Caller::Bootstrap { pool: p, token } if p == pool => Some(token),
        Caller::Bootstrap { pool: p, .. } => {
            return Err(ApiError::forbidden(format!(
                "this bootstrap token is for pool {p}, not {pool}"
            )))
        }
        Caller::Node(n) => {
            return Err(ApiError::forbidden(format!(
                "node {n} has enrolled: it reads its desired config from /api/v1/agent/desired"
            )))
        }
    };
    let f = app.snapshot();
    let p = f
        .pools
        .get(&pool)
        .ok_or_else(|| ApiError::not_found(format!("MachineConfigPool {pool:?} not found")))?;
    let Some(target) = p.value.status.target.clone() else {
        return Err(ApiError::unavailable(format!(
            "pool {pool} has no rendered config yet{}",
            p.value
                .status
                .render_error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        )));
    };
    let rendered = f
        .rendered
        .get(&target)
        .ok_or_else(|| ApiError::internal(format!("rendered config {target} is missing")))?;
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let version = match firstboot::negotiate(accept) {
        Negotiated::Version(v) => v,
        Negotiated::Unsupported(asked) => {
            return Err(ApiError::not_acceptable(format!(
                "Ignition spec version {asked} is not supported; hearth serves {}",
                hearth_config::ignition::SpecVersion::supported_list()
            )))
        }
    };
    let url = match &app.options.advertise_url {
        Some(u) => u.clone(),
        None => {
            // HTTP/1.1 sends Host; HTTP/2 sends the authority in the request's URI instead.
            let host = headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .or_else(|| uri.authority().map(|a| a.to_string()))
                .unwrap_or_else(|| "localhost".to_string());
            format!("https://{host}")
        }
    };
    let config = firstboot::with_bootstrap(
        &rendered.value.spec.config,
        &Bootstrap {
            server_url: &url,
            ca_pem: &app.ca_pem,
            pool: &pool,
            bootstrap_token: embed.as_deref(),
        },
    );
    let value = config.to_version(version).map_err(|errors| {
        ApiError::not_acceptable(format!(
            "the config of pool {pool} ({target}) cannot be expressed in Ignition {version}: {}",
            errors
                .iter()
                .map(|e| format!("{}: {}", e.path, e.message))
                .collect::<Vec<_>>()
                .join("; ")
        ))
    })?;
    tracing::info!(pool = %pool, config = %target, version = %version, "first-boot config served");
    let body = serde_json::to_vec(&value).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok((
        [(
            header::CONTENT_TYPE,
            format!("{IGNITION_MEDIA_TYPE};version={version}"),
        )],
        body,
    )
        .into_response())
}
