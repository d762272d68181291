//! The dashboard and what it reads beyond the admin API: the page and its assets (embedded in
//! the binary: the site has no internet), the live watch (server-sent events), the diff of two
//! rendered configs, and viewer tokens (the read-only role).
//!
//! The page itself is public and holds no data; everything it shows comes from the API with the
//! token the user gives it (kept in the tab's `sessionStorage`). It is served with a strict
//! Content-Security-Policy (its own script and style only, no inline code, no other origin) and
//! writes every text with `textContent`, never as HTML: what a node says cannot run in it.

use super::auth::{Admin, Reader};
use super::routes::AppState;
use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hearth_api::admin::{ViewerTokenAnswer, ViewerTokenRequest};
use serde::Deserialize;
use std::time::Duration;

const INDEX_HTML: &str = include_str!("../../ui/index.html");
const APP_JS: &str = include_str!("../../ui/app.js");
const STYLE_CSS: &str = include_str!("../../ui/style.css");

/// The page's Content-Security-Policy.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                       connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                       form-action 'none'; frame-ancestors 'none'";

/// How often the watch says "something changed" at most (a busy fleet commits many times a
/// second; the page re-reads at most this often).
pub const WATCH_MIN_INTERVAL: Duration = Duration::from_secs(1);
/// A comment line this often keeps proxies from closing an idle watch.
pub const WATCH_HEARTBEAT: Duration = Duration::from_secs(15);
/// A watch ends after this long; the page opens a new one (credentials are checked again).
pub const WATCH_LIFETIME: Duration = Duration::from_secs(3600);
/// The diff of two rendered configs gives up after this long (it is line-based and bounded by
/// the configs' own limits, but a pathological pair must not hold a thread).
pub const DIFF_TIMEOUT: Duration = Duration::from_secs(2);

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut resp = (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    resp
}

/// `GET /ui/`.
pub(super) async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

/// `GET /ui` → `/ui/`.
pub(super) async fn index_redirect() -> Response {
    (StatusCode::PERMANENT_REDIRECT, [(header::LOCATION, "/ui/")]).into_response()
}

/// `GET /ui/app.js`.
pub(super) async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

/// `GET /ui/style.css`.
pub(super) async fn style_css() -> Response {
    asset("text/css; charset=utf-8", STYLE_CSS)
}

/// `GET /api/v1/watch`: server-sent events (axum's `Sse`), `event: change` with the store
/// revision at once and whenever something was committed (at most once per
/// [`WATCH_MIN_INTERVAL`]), a keep-alive comment every [`WATCH_HEARTBEAT`], for at most
/// [`WATCH_LIFETIME`].
pub(super) async fn watch(
    State(app): AppState,
    _: Reader,
) -> Sse<impl futures_util::Stream<Item = Result<Event, std::convert::Infallible>>> {
    let end = tokio::time::Instant::now() + WATCH_LIFETIME;
    let changes = futures_util::stream::unfold(
        (app.revision_watch(), true),
        move |(mut rx, first)| async move {
            if !first {
                tokio::select! {
                    _ = tokio::time::sleep_until(end) => return None,
                    changed = rx.changed() => changed.ok()?,
                }
                tokio::time::sleep(WATCH_MIN_INTERVAL).await;
            }
            let revision = *rx.borrow_and_update();
            let event = Event::default().event("change").data(revision.to_string());
            Some((Ok(event), (rx, false)))
        },
    );
    Sse::new(changes).keep_alive(KeepAlive::new().interval(WATCH_HEARTBEAT).text("alive"))
}

#[derive(Debug, Deserialize)]
pub(super) struct DiffQuery {
    to: String,
}

/// `GET /api/v1/renderedconfigs/{name}/diff?to=OTHER`: a unified diff (text) of the two rendered
/// configs as the API shows them (JSON, pretty, without their names' metadata churn).
pub(super) async fn diff(
    State(app): AppState,
    _: Reader,
    Path(name): Path<String>,
    Query(q): Query<DiffQuery>,
) -> Result<Response, ApiError> {
    let f = app.snapshot();
    let text = |n: &str| -> Result<String, ApiError> {
        let r = f
            .rendered
            .get(n)
            .ok_or_else(|| ApiError::not_found(format!("rendered config {n:?} not found")))?;
        let v = crate::views::rendered(r);
        serde_json::to_string_pretty(&v["spec"]).map_err(|e| ApiError::internal(e.to_string()))
    };
    let (a, b) = (text(&name)?, text(&q.to)?);
    let out = tokio::task::spawn_blocking(move || {
        similar::TextDiff::configure()
            .timeout(DIFF_TIMEOUT)
            .diff_lines(&a, &b)
            .unified_diff()
            .context_radius(3)
            .header(&name, &q.to)
            .to_string()
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], out).into_response())
}

/// `POST /api/v1/viewer-tokens`.
pub(super) async fn new_viewer_token(
    State(app): AppState,
    Admin(by): Admin,
    body: Bytes,
) -> Result<Json<ViewerTokenAnswer>, ApiError> {
    let req: ViewerTokenRequest = if body.is_empty() {
        ViewerTokenRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(e.to_string()))?
    };
    let ttl = match req.ttl_seconds.filter(|s| *s > 0) {
        Some(s) => Some(crate::bounds::token_ttl(s)?),
        None => None,
    };
    let (name, token, expires) = app.new_viewer_token(ttl, &by.to_string()).await?;
    tracing::info!(name = %name, by = %by, "new viewer token");
    Ok(Json(ViewerTokenAnswer {
        name,
        token,
        expires_at: expires.map(crate::time::rfc3339),
    }))
}

/// `DELETE /api/v1/viewer-tokens/{name}`.
pub(super) async fn delete_viewer_token(
    State(app): AppState,
    Admin(by): Admin,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    app.delete_viewer_token(&name, &by.to_string()).await?;
    Ok(StatusCode::NO_CONTENT)
}
