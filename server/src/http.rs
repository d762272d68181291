//! The HTTP API (see `docs/api.md`): routes, authentication, handlers.

use crate::api::{AgentStatus, EnrollRequest, SlotAction, SlotRequest};
use crate::app::{App, ApplyFile, Caller};
use crate::error::ApiError;
use crate::firstboot::{self, Bootstrap, Negotiated, IGNITION_MEDIA_TYPE};
use crate::limits;
use crate::pki::ClientIdentity;
use crate::store::Store;
use crate::views;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequestParts, MatchedPath, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The media type of a multi-file apply (`{"files":[{"name":..,"text":..}]}`).
pub const APPLY_MEDIA_TYPE: &str = "application/vnd.hearth.apply+json";
/// The header that names the desired config in long-poll answers.
pub const DESIRED_HEADER: &str = "x-hearth-desired";

type AppState<S> = State<Arc<App<S>>>;

/// The router.
pub fn router<S: Store>(app: Arc<App<S>>) -> Router {
    let api = Router::new()
        .route("/metrics", get(metrics::<S>))
        .route(
            "/api/v1/manifests",
            post(apply::<S>).layer(DefaultBodyLimit::max(limits::MAX_APPLY_BODY)),
        )
        .route("/api/v1/machineconfigs", get(list_mcs::<S>))
        .route(
            "/api/v1/machineconfigs/{name}",
            get(get_mc::<S>).delete(delete_mc::<S>),
        )
        .route("/api/v1/pools", get(list_pools::<S>))
        .route(
            "/api/v1/pools/{name}",
            get(get_pool::<S>).delete(delete_pool::<S>),
        )
        .route("/api/v1/pools/{name}/pause", post(pause::<S>))
        .route("/api/v1/pools/{name}/resume", post(resume::<S>))
        .route(
            "/api/v1/pools/{name}/bootstrap-token",
            post(bootstrap_token::<S>),
        )
        .route("/api/v1/nodes", get(list_nodes::<S>))
        .route(
            "/api/v1/nodes/{name}",
            get(get_node::<S>).delete(delete_node::<S>),
        )
        .route("/api/v1/nodes/{name}/labels", post(label_node::<S>))
        .route(
            "/api/v1/nodes/{name}/reset-credential",
            post(reset_credential::<S>),
        )
        .route("/api/v1/renderedconfigs", get(list_rendered::<S>))
        .route("/api/v1/renderedconfigs/{name}", get(get_rendered::<S>))
        .route("/api/v1/events", get(events::<S>))
        .route("/api/v1/enroll", post(enroll::<S>))
        .route("/api/v1/agent/desired", get(desired::<S>))
        .route("/api/v1/agent/status", post(report::<S>))
        .route("/api/v1/agent/reboot-slot", post(reboot_slot::<S>))
        .route("/config/{pool}", get(first_boot::<S>))
        .route("/v1/pre-reboot", post(fleetlock_pre_reboot::<S>))
        .route("/v1/steady-state", post(fleetlock_steady_state::<S>))
        .route("/ostree/repo/{*path}", get(ostree_file::<S>))
        .route("/healthz", get(healthz))
        .route_layer(middleware::from_fn_with_state(app.clone(), observe::<S>))
        .fallback(not_found)
        // Outermost last: every error a Status document; headers bounded; bodies read in full
        // (bounded in size and time) before anything else looks at the request.
        .layer(middleware::from_fn(limits::read_body))
        .layer(middleware::from_fn(limits::header_limit))
        .layer(middleware::from_fn(limits::status_errors));
    api.with_state(app)
}

async fn observe<S: Store>(State(app): AppState<S>, req: Request, next: Next) -> Response {
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
    let resp = next.run(req).await;
    let status = resp.status().as_u16();
    app.metrics.request(method.as_str(), &route, status);
    if let Some(cert) = cert.filter(|_| method != axum::http::Method::GET) {
        // Changes made with a client certificate name its holder.
        tracing::info!(%method, route, status, admin = %cert, "request with a client certificate");
    }
    let ms = started.elapsed().as_millis() as u64;
    if route == "/api/v1/agent/desired" || route == "/healthz" || status < 400 {
        tracing::debug!(%method, route, status, ms, "request");
    } else {
        tracing::info!(%method, route, status, ms, "request");
    }
    resp
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint; see docs/api.md")
}

/// A file of the ostree repository (`--ostree-repo`), for libostree's pulls: enrolled nodes
/// (their credential as a bearer token, which the agent passes to libostree) and admins.
async fn ostree_file<S: Store>(
    State(app): AppState<S>,
    Auth(c): Auth,
    Path(path): Path<String>,
) -> Result<Response, ApiError> {
    if let Caller::Bootstrap { pool, .. } = &c {
        return Err(ApiError::forbidden(format!(
            "a bootstrap token (pool {pool}) may only enroll nodes and fetch /config/{pool}; \
             the ostree repository needs the node's credential"
        )));
    }
    let Some(repo) = &app.options.ostree_repo else {
        return Err(ApiError::not_found(
            "this server serves no ostree repository (start it with --ostree-repo DIR)",
        ));
    };
    let file = crate::ostree_repo::resolve(repo, &path)?;
    let f = tokio::fs::File::open(&file)
        .await
        .map_err(|e| ApiError::internal(format!("{}: {e}", file.display())))?;
    let len = f
        .metadata()
        .await
        .map_err(|e| ApiError::internal(format!("{}: {e}", file.display())))?
        .len();
    let body = axum::body::Body::from_stream(tokio_util::io::ReaderStream::new(f));
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
            (header::CONTENT_LENGTH, HeaderValue::from(len)),
        ],
        body,
    )
        .into_response())
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// The bearer token of a request, if any.
fn bearer(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// The password of `Authorization: Basic` (FleetLock clients such as Zincati can only put
/// credentials into the URL: `https://node:<credential>@hearth:22623/`).
fn basic_password(headers: &HeaderMap) -> Option<String> {
    use base64::Engine as _;
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, b64) = v.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (_, password) = text.split_once(':')?;
    Some(password.to_string()).filter(|p| !p.is_empty())
}

/// An authenticated caller (from `Authorization: Bearer`, or an admin client certificate).
#[derive(Debug)]
pub struct Auth(pub Caller);

impl<S: Store> FromRequestParts<Arc<App<S>>> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App<S>>,
    ) -> Result<Self, Self::Rejection> {
        // A token decides when one is sent (nodes always send theirs); otherwise an admin
        // client certificate, verified against the fleet CA during the TLS handshake.
        if let Some(token) = bearer(&parts.headers) {
            return app.authenticate(&token).map(Auth);
        }
        match parts.extensions.get::<ClientIdentity>() {
            Some(id) if id.admin => Ok(Auth(Caller::Admin)),
            Some(id) => Err(ApiError::forbidden(format!(
                "the client certificate of {:?} was not issued for an admin (see hearth-server issue-admin-cert)",
                id.name
            ))),
            None => Err(ApiError::unauthorized(
                "missing credentials: send Authorization: Bearer <token> or an admin client certificate",
            )),
        }
    }
}

/// An authenticated admin (an [`Auth`] whose caller is an admin; anyone else is 403 with the
/// reason): for handlers that need nothing else of the caller.
#[derive(Debug)]
pub struct Admin;

impl<S: Store> FromRequestParts<Arc<App<S>>> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App<S>>,
    ) -> Result<Self, Self::Rejection> {
        let Auth(caller) = Auth::from_request_parts(parts, app).await?;
        admin(&caller).map(|()| Admin)
    }
}

fn admin(caller: &Caller) -> Result<(), ApiError> {
    match caller {
        Caller::Admin => Ok(()),
        Caller::Node(n) => Err(ApiError::forbidden(format!(
            "node {n} may read only its own desired config"
        ))),
        Caller::Bootstrap { pool, .. } => Err(ApiError::forbidden(format!(
            "a bootstrap token (pool {pool}) may only enroll nodes and fetch /config/{pool}"
        ))),
    }
}

fn node(caller: &Caller) -> Result<&str, ApiError> {
    match caller {
        Caller::Node(n) => Ok(n),
        _ => Err(ApiError::forbidden(
            "this endpoint is for enrolled nodes: use the node's credential",
        )),
    }
}

fn list(items: Vec<Value>) -> Json<Value> {
    Json(json!({"apiVersion": "v1", "kind": "List", "items": items}))
}

/// The metrics token (`<state-dir>/metrics.token`, for Prometheus), or an admin.
#[derive(Debug)]
pub struct MetricsReader;

impl<S: Store> FromRequestParts<Arc<App<S>>> for MetricsReader {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App<S>>,
    ) -> Result<Self, Self::Rejection> {
        let metrics = app.options.metrics_token_sha256.as_deref();
        if let Some(token) = bearer(&parts.headers) {
            if metrics == Some(crate::pki::token_hash(&token).as_str()) {
                return Ok(MetricsReader);
            }
        }
        Admin::from_request_parts(parts, app)
            .await
            .map(|Admin| MetricsReader)
    }
}

async fn metrics<S: Store>(
    State(app): AppState<S>,
    _: MetricsReader,
) -> Result<Response, ApiError> {
    let body = app.metrics.render(&app.snapshot());
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApplyQuery {
    #[serde(default)]
    file: Option<String>,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Debug, Deserialize)]
struct ApplyEnvelope {
    files: Vec<ApplyFile>,
}

async fn apply<S: Store>(
    State(app): AppState<S>,
    Auth(c): Auth,
    Query(q): Query<ApplyQuery>,
    headers: HeaderMap,
    cert: Option<axum::Extension<ClientIdentity>>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    admin(&c)?;
    // Admin by certificate (no token sent): its CN goes into the events.
    let by = cert
        .filter(|c| c.admin && bearer(&headers).is_none())
        .map(|c| c.0.name);
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let files = if ctype.starts_with(APPLY_MEDIA_TYPE) {
        let env: ApplyEnvelope = serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("bad {APPLY_MEDIA_TYPE} body: {e}")))?;
        env.files
    } else {
        let text = String::from_utf8(body.to_vec())
            .map_err(|_| ApiError::bad_request("the manifests are not UTF-8 text"))?;
        vec![ApplyFile {
            name: q.file.clone().unwrap_or_else(|| "request".into()),
            text,
        }]
    };
    let outcome = app.apply_as(&files, q.dry_run, by.as_deref()).await?;
    for r in &outcome.results {
        if r.action != "unchanged" {
            tracing::info!(kind = %r.kind, name = %r.name, action = %r.action, dry_run = q.dry_run, "applied");
        }
    }
    Ok(Json(serde_json::to_value(outcome).unwrap_or_default()))
}

async fn list_mcs<S: Store>(State(app): AppState<S>, _: Admin) -> Result<Json<Value>, ApiError> {
    let f = app.snapshot();
    Ok(list(
        f.mcs.values().map(|r| views::machine_config(r)).collect(),
    ))
}

async fn get_mc<S: Store>(
    State(app): AppState<S>,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let f = app.snapshot();
    if let Some(r) = f.mcs.get(&name) {
        return Ok(Json(views::machine_config(r)));
    }
    if let Some(r) = f.rendered.get(&name) {
        return Ok(Json(views::rendered(r)));
    }
    Err(ApiError::not_found(format!(
        "MachineConfig {name:?} not found"
    )))
}

async fn delete_mc<S: Store>(
    State(app): AppState<S>,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if app.snapshot().rendered.contains_key(&name) {
        return Err(ApiError::conflict(format!(
            "{name} is a rendered config: the server keeps it while anything refers to it and collects it afterwards"
        )));
    }
    app.delete_machine_config(&name).await?;
    tracing::info!(name, "MachineConfig deleted");
    Ok(Json(
        json!({"kind": "MachineConfig", "name": name, "action": "deleted"}),
    ))
}

fn pool_json<S: Store>(app: &App<S>, f: &crate::fleet::Fleet, name: &str) -> Option<Value> {
    let rec = f.pools.get(name)?;
    let counts = views::pool_counts(f, name, &|n| app.is_fresh(n));
    let halted = crate::controller::halted_by(f, name);
    let now = app.options.settings.window_clock.now();
    Some(views::pool(rec, &counts, halted.as_deref(), now))
}

async fn list_pools<S: Store>(State(app): AppState<S>, _: Admin) -> Result<Json<Value>, ApiError> {
    let f = app.snapshot();
    Ok(list(
        f.pools
            .keys()
            .filter_map(|n| pool_json(&app, &f, n))
            .collect(),
    ))
}

async fn get_pool<S: Store>(
    State(app): AppState<S>,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let f = app.snapshot();
    pool_json(&app, &f, &name)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("MachineConfigPool {name:?} not found")))
}

async fn delete_pool<S: Store>(
    State(app): AppState<S>,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let what = app.delete_pool(&name).await?;
    Ok(Json(
        json!({"kind": "MachineConfigPool", "name": name, "action": what}),
    ))
}

async fn pause<S: Store>(
    State(app): AppState<S>,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let changed = app.set_paused(&name, true).await?;
    Ok(Json(
        json!({"kind": "MachineConfigPool", "name": name, "paused": true, "changed": changed}),
    ))
}

async fn resume<S: Store>(
    State(app): AppState<S>,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let changed = app.set_paused(&name, false).await?;
    Ok(Json(
        json!({"kind": "MachineConfigPool", "name": name, "paused": false, "changed": changed}),
    ))
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TokenRequest {
    #[serde(default)]
    ttl_seconds: Option<u64>,
}

async fn bootstrap_token<S: Store>(
    State(app): AppState<S>,
    _: Admin,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: TokenRequest = if body.is_empty() {
        TokenRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(e.to_string()))?
    };
    // No ttlSeconds: the server's default (--bootstrap-token-ttl); 0: never expires.
    let ttl = match req.ttl_seconds {
        None => app.options.bootstrap_ttl,
        Some(0) => None,
        Some(s) => Some(Duration::from_secs(s)),
    };
    let (token, expires) = app.new_bootstrap_token(&name, ttl).await?;
    tracing::info!(pool = %name, "new bootstrap token");
    Ok(Json(json!({
        "pool": name,
        "token": token,
        "expiresAt": expires.map(crate::time::rfc3339),
    })))
}

#[derive(Debug, Deserialize)]
struct NodeListQuery {
    #[serde(default)]
    pool: Option<String>,
}

fn node_json<S: Store>(app: &App<S>, rec: &crate::fleet::Rec<crate::records::NodeRecord>) -> Value {
    views::node(
        rec,
        app.last_seen(&rec.value),
        app.is_fresh(&rec.value),
        app.options.settings.window_clock.now(),
    )
}

async fn list_nodes<S: Store>(
    State(app): AppState<S>,
    _: Admin,
    Query(q): Query<NodeListQuery>,
) -> Result<Json<Value>, ApiError> {
    let f = app.snapshot();
    Ok(list(
        f.nodes
            .values()
            .filter(|n| q.pool.is_none() || n.value.pool == q.pool)
            .map(|n| node_json(&app, n))
            .collect(),
    ))
}

async fn get_node<S: Store>(
    State(app): AppState<S>,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let f = app.snapshot();
    f.nodes
        .get(&name)
        .map(|n| Json(node_json(&app, n)))
        .ok_or_else(|| ApiError::not_found(format!("node {name:?} not found")))
}

async fn delete_node<S: Store>(
    State(app): AppState<S>,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    app.delete_node(&name).await?;
    tracing::info!(node = %name, "node deleted");
    Ok(Json(
        json!({"kind": "Node", "name": name, "action": "deleted"}),
    ))
}

async fn reset_credential<S: Store>(
    State(app): AppState<S>,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let revoked = app.reset_credential(&name).await?;
    tracing::info!(node = %name, revoked, "node credential reset");
    Ok(Json(
        json!({"kind": "Node", "name": name, "credentialRevoked": revoked}),
    ))
}

#[derive(Debug, Deserialize)]
struct LabelRequest {
    #[serde(default)]
    set: BTreeMap<String, String>,
    #[serde(default)]
    remove: Vec<String>,
    #[serde(default)]
    overwrite: bool,
}

async fn label_node<S: Store>(
    State(app): AppState<S>,
    _: Admin,
    Path(name): Path<String>,
    Json(req): Json<LabelRequest>,
) -> Result<Json<Value>, ApiError> {
    let labels = app
        .label_node(&name, &req.set, &req.remove, req.overwrite)
        .await?;
    Ok(Json(
        json!({"kind": "Node", "name": name, "labels": labels}),
    ))
}

async fn list_rendered<S: Store>(
    State(app): AppState<S>,
    _: Admin,
) -> Result<Json<Value>, ApiError> {
    let f = app.snapshot();
    Ok(list(
        f.rendered.values().map(|r| views::rendered(r)).collect(),
    ))
}

async fn get_rendered<S: Store>(
    State(app): AppState<S>,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let f = app.snapshot();
    f.rendered
        .get(&name)
        .map(|r| Json(views::rendered(r)))
        .ok_or_else(|| ApiError::not_found(format!("rendered config {name:?} not found")))
}

#[derive(Debug, Deserialize)]
struct EventQuery {
    #[serde(default)]
    object: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

async fn events<S: Store>(
    State(app): AppState<S>,
    _: Admin,
    Query(q): Query<EventQuery>,
) -> Result<Json<Value>, ApiError> {
    let f = app.snapshot();
    let mut items: Vec<Value> = f
        .events
        .values()
        .rev()
        .filter(|e| q.object.as_deref().is_none_or(|o| e.value.object == o))
        .take(q.limit.unwrap_or(200))
        .map(|e| views::event(&e.value))
        .collect();
    items.reverse();
    Ok(list(items))
}

async fn enroll<S: Store>(
    State(app): AppState<S>,
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
        Caller::Bootstrap { pool, .. } => pool,
        _ => {
            return Err(ApiError::forbidden(
                "nodes enroll with their pool's bootstrap token",
            ))
        }
    };
    crate::bounds::labels(&req.labels)?;
    let old_credential = header_token.filter(|t| *t != token);
    let resp = app.enroll(&pool, &req, old_credential.as_deref()).await?;
    tracing::info!(node = %resp.node, pool = %resp.pool, "node enrolled");
    Ok(Json(serde_json::to_value(resp).unwrap_or_default()))
}

#[derive(Debug, Deserialize)]
struct DesiredQuery {
    #[serde(default)]
    known: Option<String>,
    #[serde(default)]
    wait: Option<u64>,
    #[serde(default)]
    node: Option<String>,
}

fn not_modified(known: Option<&str>) -> Response {
    let mut resp = StatusCode::NOT_MODIFIED.into_response();
    if let Some(k) = known.and_then(|k| HeaderValue::from_str(k).ok()) {
        resp.headers_mut().insert(DESIRED_HEADER, k);
    }
    resp
}

async fn desired<S: Store>(
    State(app): AppState<S>,
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
    let wait = Duration::from_secs(q.wait.unwrap_or(0)).min(app.options.max_wait);
    let deadline = tokio::time::Instant::now() + wait;
    // Subscribed before looking, so that a change between the look and the wait is not missed;
    // a request that will not wait needs no channel.
    let mut rx = (!wait.is_zero()).then(|| app.node_desired_watch(&me));
    let mut waiting = None;
    let mut first = true;
    loop {
        if let Some(rx) = rx.as_mut() {
            rx.borrow_and_update();
        }
        // Woken: the credential may have been revoked (a reset, a new enrollment).
        if !first && app.authenticate(&token)? != Caller::Node(me.clone()) {
            return Err(ApiError::unauthorized(format!(
                "the credential of node {me} was revoked; enroll again"
            )));
        }
        first = false;
        if let Some((name, body)) = app.desired_body(&me)? {
            if q.known.as_deref() != Some(name.as_str()) {
                app.metrics.desired_served();
                let mut resp = (
                    [(header::CONTENT_TYPE, "application/json")],
                    body.as_ref().clone(),
                )
                    .into_response();
                if let Ok(v) = HeaderValue::from_str(&name) {
                    resp.headers_mut().insert(DESIRED_HEADER, v);
                }
                return Ok(resp);
            }
        }
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

async fn report<S: Store>(
    State(app): AppState<S>,
    Auth(c): Auth,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let me = node(&c)?.to_string();
    let status: AgentStatus = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("not an agent status document: {e}")))?;
    let status = crate::bounds::status_report(status)?;
    app.report(&me, status).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn reboot_slot<S: Store>(
    State(app): AppState<S>,
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
        .reboot_slot(&me, req.action, crate::records::SlotHolder::Agent)
        .await?;
    Ok(Json(serde_json::to_value(answer).unwrap_or_default()))
}

#[derive(Debug, Deserialize)]
struct ConfigQuery {
    #[serde(default)]
    token: Option<String>,
}

async fn first_boot<S: Store>(
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

// ---------------------------------------------------------------------------------------------
// FleetLock (https://coreos.github.io/zincati/development/fleetlock/protocol/): the same reboot
// slots, for FleetLock clients on enrolled nodes.

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

async fn fleetlock<S: Store>(
    app: &App<S>,
    headers: &HeaderMap,
    body: &[u8],
    action: SlotAction,
) -> Response {
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
        Err(e) => return fleetlock_error(e.status, "unauthorized", e.message),
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
        .reboot_slot(&node, action, crate::records::SlotHolder::FleetLock)
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
        Err(e) => fleetlock_error(e.status, "error", e.message),
    }
}

async fn fleetlock_pre_reboot<S: Store>(
    State(app): AppState<S>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    fleetlock(&app, &headers, &body, SlotAction::Acquire).await
}

async fn fleetlock_steady_state<S: Store>(
    State(app): AppState<S>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    fleetlock(&app, &headers, &body, SlotAction::Release).await
}
