//! `/config/{pool}`: the Ignition config for first-booting nodes, with the bootstrap
//! (server URL, CA, pool, token) added, in the Ignition version the node asks for.

use super::auth::bearer;
use super::routes::AppState;
use crate::app::Caller;
use crate::error::ApiError;
use crate::firstboot::{self, Bootstrap, Negotiated, IGNITION_MEDIA_TYPE};
use crate::firstboot_cache::{FirstBootCache, Key};
use crate::pki::ClientIdentity;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::sync::Arc;

#[derive(Debug, Deserialize)]
pub(super) struct ConfigQuery {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    node: Option<String>,
}

pub(super) async fn first_boot(
    State(app): AppState,
    Path(pool): Path<String>,
    Query(q): Query<ConfigQuery>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    cert: Option<axum::Extension<ClientIdentity>>,
    cache: axum::Extension<Arc<FirstBootCache>>,
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
    // Whose config: the pool's, or one node's own (its pool's plus its overlays) for a token
    // bound to that node. `?node=` with a pool-wide token is refused, not answered with the
    // pool's config: a node whose addresses are in its overlay would boot without them.
    let (embed, for_node) =
        match caller {
            Caller::Admin => (None, q.node),
            Caller::Bootstrap {
                pool: p,
                token,
                node,
            } if p == pool => match (node, q.node) {
                (Some(bound), Some(asked)) if bound != asked => {
                    return Err(ApiError::forbidden(format!(
                        "this bootstrap token is bound to node {bound}, not {asked:?}"
                    )))
                }
                (Some(bound), _) => (Some(token), Some(bound)),
                (None, Some(asked)) => {
                    return Err(ApiError::forbidden(format!(
                    "a node's own first-boot config (?node={asked:?}) needs a token bound to that \
                     node: `hearth bootstrap-token {pool} --node NAME`; this is the pool's token"
                )))
                }
                (None, None) => (Some(token), None),
            },
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
            // A first-boot config holds a bootstrap token's worth of access: not for viewers.
            Caller::Viewer => return Err(ApiError::forbidden(
                "a viewer token cannot fetch first-boot configs: use the pool's bootstrap token",
            )),
        };
    let f = app.snapshot();
    let p = f
        .pools
        .get(&pool)
        .ok_or_else(|| ApiError::not_found(format!("MachineConfigPool {pool:?} not found")))?;
    let target = match &for_node {
        None => p.value.status.target.clone().ok_or_else(|| {
            ApiError::unavailable(format!(
                "pool {pool} has no rendered config yet{}",
                p.value
                    .status
                    .render_error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ))
        })?,
        Some(name) => {
            let n = f.nodes.get(name).ok_or_else(|| {
                ApiError::not_found(format!(
                    "node {name:?} is not known: `hearth bootstrap-token {pool} --node {name}` \
                     registers it"
                ))
            })?;
            if n.value.pool.as_deref() != Some(pool.as_str()) {
                return Err(ApiError::conflict(format!(
                    "node {name} is in pool {}, not {pool}",
                    n.value.pool.as_deref().unwrap_or("none")
                )));
            }
            n.value.target.clone().ok_or_else(|| {
                ApiError::unavailable(format!(
                    "node {name} has no rendered config yet{}",
                    n.value
                        .error
                        .as_deref()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                ))
            })?
        }
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
    let urls = match app.options.advertise_urls.is_empty() {
        false => app.options.advertise_urls.clone(),
        true => {
            // HTTP/1.1 sends Host; HTTP/2 sends the authority in the request's URI instead.
            let host = headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .or_else(|| uri.authority().map(|a| a.to_string()))
                .unwrap_or_else(|| "localhost".to_string());
            vec![format!("https://{host}")]
        }
    };
    // Everything the answer depends on is in the key (see crate::firstboot_cache); the checks
    // above ran for this request.
    let key = Key {
        rendered: target.clone(),
        version: version.to_string(),
        token: embed.clone(),
        node: for_node.clone(),
        url: urls.join(","),
    };
    let body = cache.get_or_encode(key, || {
        let config = firstboot::with_bootstrap(
            &rendered.value.spec.config,
            &Bootstrap {
                server_urls: &urls,
                ca_pem: &app.ca_pem,
                pool: &pool,
                bootstrap_token: embed.as_deref(),
                node: for_node.as_deref(),
                rendered: &target,
                agent: app.options.served_agent.as_deref(),
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
        serde_json::to_vec(&value).map_err(|e| ApiError::internal(e.to_string()))
    })?;
    tracing::info!(pool = %pool, node = for_node.as_deref().unwrap_or(""), config = %target, version = %version, "first-boot config served");
    Ok((
        [(
            header::CONTENT_TYPE,
            format!("{IGNITION_MEDIA_TYPE};version={version}"),
        )],
        body,
    )
        .into_response())
}

/// `GET /firstboot/bin/{name}`: a binary of `--serve-agent DIR`, which first-boot configs
/// fetch with its sha512 (public: it carries no secret; see [`crate::served_agent`]).
pub(super) async fn agent_binary(
    State(app): AppState,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let Some(served) = &app.options.served_agent else {
        return Err(ApiError::not_found(
            "this server serves no agent binaries (start it with --serve-agent DIR)",
        ));
    };
    let Some(binary) = served.get(&name) else {
        return Err(ApiError::not_found(format!(
            "no served binary {name:?}: {}",
            served
                .binaries
                .iter()
                .map(|b| b.name)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    Ok((
        [(header::CONTENT_TYPE, "application/octet-stream")],
        binary.bytes.clone(),
    )
        .into_response())
}
