//! The HTTP API (see `docs/api.md`): the router and the request observer. The handlers live
//! in one file per concept:
//!
//! - `auth`: who is calling (bearer token, admin client certificate, metrics token).
//! - `admin`: the admin API (manifests, pools, nodes, rendered configs, events).
//! - `agent`: the agent API (enroll, desired-config long-poll, status reports, reboot slots).
//! - `firstboot`: `/config/{pool}`, the Ignition config for first-booting nodes.
//! - `fleetlock`: the FleetLock protocol (`/v1/pre-reboot`, `/v1/steady-state`).
//! - `ostree`: the files of the served ostree repository.
//! - `detach`: changes run in tasks of their own, to their end when the client hangs up.
//! - `routes`: the routes' paths, media types and headers, and the handlers' state type.
//! - `limits`: the one layer before routing (`front`): what a client may send, and when.
//! - `status`: error answers as `Status` documents.
//!
//! Plus `/healthz` and `/metrics`, here.

mod admin;
mod agent;
mod auth;
mod dashboard;
mod detach;
mod firstboot;
mod fleetlock;
pub mod limits;
mod ostree;
mod routes;
pub mod status;

pub use auth::{Admin, Auth, MetricsReader};
use routes::AppState;
pub use routes::{
    Peer, APPLY_MEDIA_TYPE, APPLY_ROUTE, DESIRED_HEADER, DESIRED_ROUTE, ENROLL_ROUTE,
    FLEETLOCK_ROUTES, NODE_ROUTES, SLOT_ROUTE, STATUS_ROUTE, WAITING_ROUTES,
};

use crate::app::App;
use crate::error::ApiError;
use crate::pki::ClientIdentity;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;
use std::time::Instant;

/// The router.
pub fn router(app: Arc<App>) -> Router {
    let api = Router::new()
        .route("/metrics", get(metrics))
        .route(
            APPLY_ROUTE,
            post(admin::apply).layer(DefaultBodyLimit::max(limits::MAX_APPLY_BODY)),
        )
        .route("/api/v1/machineconfigs", get(admin::list_mcs))
        .route(
            "/api/v1/machineconfigs/{name}",
            get(admin::get_mc).delete(admin::delete_mc),
        )
        .route("/api/v1/pools", get(admin::list_pools))
        .route(
            "/api/v1/pools/{name}",
            get(admin::get_pool).delete(admin::delete_pool),
        )
        .route("/api/v1/pools/{name}/pause", post(admin::pause))
        .route("/api/v1/pools/{name}/resume", post(admin::resume))
        .route("/api/v1/pools/{name}/rollback", post(admin::rollback_pool))
        .route(
            "/api/v1/pools/{name}/bootstrap-token",
            post(admin::bootstrap_token),
        )
        .route("/api/v1/nodes", get(admin::list_nodes))
        .route(
            "/api/v1/nodes/{name}",
            get(admin::get_node).delete(admin::delete_node),
        )
        .route("/api/v1/nodes/{name}/labels", post(admin::label_node))
        .route(
            "/api/v1/nodes/{name}/reset-credential",
            post(admin::reset_credential),
        )
        .route(
            "/api/v1/nodes/{name}/pin",
            post(admin::pin_node).delete(admin::unpin_node),
        )
        .route(
            "/api/v1/nodes/{name}/exclude",
            post(admin::exclude_node).delete(admin::include_node),
        )
        .route("/api/v1/nodes/{name}/force", post(admin::force_node))
        .route(
            "/api/v1/nodes/{name}/restore-file",
            post(admin::restore_file),
        )
        .route("/api/v1/renderedconfigs", get(admin::list_rendered))
        .route("/api/v1/renderedconfigs/{name}", get(admin::get_rendered))
        .route("/api/v1/events", get(admin::events))
        .route("/api/v1/version", get(admin::version))
        .route("/api/v1/watch", get(dashboard::watch))
        .route("/api/v1/renderedconfigs/{name}/diff", get(dashboard::diff))
        .route("/api/v1/viewer-tokens", post(dashboard::new_viewer_token))
        .route(
            "/api/v1/viewer-tokens/{name}",
            axum::routing::delete(dashboard::delete_viewer_token),
        )
        .route("/ui", get(dashboard::index_redirect))
        .route("/ui/", get(dashboard::index))
        .route("/ui/app.js", get(dashboard::app_js))
        .route("/ui/style.css", get(dashboard::style_css))
        .route(ENROLL_ROUTE, post(agent::enroll))
        .route(DESIRED_ROUTE, get(agent::desired))
        .route(STATUS_ROUTE, post(agent::report))
        .route(SLOT_ROUTE, post(agent::reboot_slot))
        .route(
            "/config/{pool}",
            get(firstboot::first_boot).layer(axum::Extension(Arc::new(
                crate::firstboot_cache::FirstBootCache::default(),
            ))),
        )
        .route("/firstboot/bin/{name}", get(firstboot::agent_binary))
        .route(FLEETLOCK_ROUTES[0], post(fleetlock::fleetlock_pre_reboot))
        .route(FLEETLOCK_ROUTES[1], post(fleetlock::fleetlock_steady_state))
        .route("/ostree/repo/{*path}", get(ostree::ostree_file))
        .route("/healthz", get(healthz))
        .route_layer(middleware::from_fn_with_state(app.clone(), observe))
        .fallback(not_found)
        // Before routing: headers bounded; bodies read in full (bounded in size and time)
        // before anything else looks at the request, kept only for a caller who authenticated
        // (`auth::Gate`); every error a Status document.
        .layer(middleware::from_fn_with_state(
            auth::Gate::new(app.clone()),
            limits::front::<auth::Gate>,
        ));
    api.with_state(app)
}

async fn observe(State(app): AppState, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    let cert = req
        .extensions()
        .get::<ClientIdentity>()
        .map(|i| i.name.clone());
    let started = Instant::now();
    let cut_off = app.cut_off().filter(|_| needs_the_store(&route));
    let finish = {
        let app = app.clone();
        move |resp: &Response| record(&app, &method, &route, cert, started, resp.status().as_u16())
    };
    match cut_off {
        // A replica cut off from etcd serves nothing from its view, which may be old: the
        // client (agent, CLI, load balancer) asks another replica.
        Some(why) => {
            let resp = ApiError::replica_unavailable(why).into_response();
            finish(&resp);
            resp
        }
        // A change runs on, and is recorded, if its client hangs up (`detach`); called here
        // rather than as a layer of its own, which would add a boxed future to every waiting
        // long-poll.
        None => detach::changes(&app.background, req, next, finish).await,
    }
}

/// What `observe` records of a request once answered: its metric, the log line naming an
/// admin's certificate for a change, the request's own log line.
fn record(
    app: &App,
    method: &axum::http::Method,
    route: &str,
    cert: Option<String>,
    started: Instant,
    status: u16,
) {
    let took = started.elapsed();
    let timed = (!WAITING_ROUTES.contains(&route)).then_some(took);
    app.metrics.request(method.as_str(), route, status, timed);
    if let Some(cert) = cert.filter(|_| method != axum::http::Method::GET) {
        // Changes made with a client certificate name its holder.
        tracing::info!(%method, route, status, admin = %cert, "request with a client certificate");
    }
    let ms = took.as_millis() as u64;
    if route == DESIRED_ROUTE || route == "/healthz" || status < 400 {
        tracing::debug!(%method, route, status, ms, "request");
    } else {
        tracing::info!(%method, route, status, ms, "request");
    }
}

/// Whether a route answers from the fleet (everything but health, metrics, the version, the
/// dashboard's files and the served agent binaries).
fn needs_the_store(route: &str) -> bool {
    !(route == "/healthz"
        || route == "/metrics"
        || route == "/api/v1/version"
        || route.starts_with("/ui")
        || route.starts_with("/firstboot/bin/"))
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint; see docs/api.md")
}

/// `ok` (200); on etcd also this replica's part (`controller`, or the holder of the role), and
/// 503 with the reason when the replica is cut off from etcd (so that a load balancer or an agent
/// moves on).
async fn healthz(State(app): AppState) -> Response {
    if let Some(why) = app.cut_off() {
        return (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")).into_response();
    }
    match app.role() {
        None => "ok\n".into_response(),
        Some(r) if r.held => "ok\nreplica: controller\n".into_response(),
        Some(r) => format!(
            "ok\nreplica: serving; controller: {}\n",
            hearth_api::text::escape(r.holder.as_deref().unwrap_or("being elected"))
        )
        .into_response(),
    }
}

async fn metrics(State(app): AppState, _: MetricsReader) -> Result<Response, ApiError> {
    let body = app.metrics.render(&app.snapshot());
    Ok((
        [(
            header::CONTENT_TYPE,
            crate::telemetry::metrics::CONTENT_TYPE,
        )],
        body,
    )
        .into_response())
}
