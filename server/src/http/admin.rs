//! The admin API: apply and delete manifests; read MachineConfigs, pools, nodes, rendered
//! configs and events; pause, resume, bootstrap tokens, labels, credential resets, pins and
//! exclusions of nodes, force and restore-file requests.

use super::auth::{Admin, AdminId, Reader};
use super::routes::{AppState, APPLY_MEDIA_TYPE};
use crate::app::{App, ApplyFile, HoldChange};
use crate::error::ApiError;
use crate::views;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap};
use axum::Json;
use hearth_api::admin::{
    ApplyOutcome, ApplyRequest, CredentialReset, DeleteAnswer, HoldAnswer, LabelAnswer,
    LabelRequest, PauseAnswer, PinRequest, RollbackAnswer, TokenAnswer, TokenRequest,
};
use hearth_api::views::{EventView, List, NodeView, PoolView};
use hearth_api::VersionInfo;
use hearth_api::{RequestAction, RequestAnswer, RestoreFileRequest};
use hearth_config::manifest::FieldValidation;
use serde::Deserialize;
use serde_json::Value;

fn list<T>(items: Vec<T>) -> Json<List<T>> {
    Json(List::new(items))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ApplyQuery {
    #[serde(default)]
    file: Option<String>,
    #[serde(default)]
    dry_run: bool,
    /// What an unknown field is: `Strict`, `Warn` (the default, as the Kubernetes API's, and
    /// what clients before this parameter got) or `Ignore`. `hearth apply` sends `Strict` unless
    /// told otherwise.
    #[serde(default)]
    field_validation: Option<String>,
}

pub(super) async fn apply(
    State(app): AppState,
    Admin(id): Admin,
    Query(q): Query<ApplyQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<ApplyOutcome>, ApiError> {
    // Admin by certificate (no token sent): its CN goes into the events.
    let by = match id {
        AdminId::Certificate(name) => Some(name),
        AdminId::Token => None,
    };
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let files = if ctype.starts_with(APPLY_MEDIA_TYPE) {
        let env: ApplyRequest = serde_json::from_slice(&body)
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
    let validation = match q.field_validation.as_deref() {
        None => FieldValidation::Warn,
        Some(v) => v.parse().map_err(|e: String| {
            ApiError::bad_request(format!("{e} (the query's fieldValidation)"))
        })?,
    };
    let outcome = app
        .apply_as(&files, q.dry_run, validation, by.as_deref())
        .await?;
    for r in &outcome.results {
        if r.action != "unchanged" {
            tracing::info!(kind = %r.kind, name = %r.name, action = %r.action, dry_run = q.dry_run, "applied");
        }
    }
    Ok(Json(outcome))
}

pub(super) async fn list_mcs(
    State(app): AppState,
    _: Reader,
) -> Result<Json<List<Value>>, ApiError> {
    let f = app.snapshot();
    Ok(list(
        f.mcs.values().map(|r| views::machine_config(r)).collect(),
    ))
}

pub(super) async fn get_mc(
    State(app): AppState,
    _: Reader,
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

pub(super) async fn delete_mc(
    State(app): AppState,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<DeleteAnswer>, ApiError> {
    if app.snapshot().rendered.contains_key(&name) {
        return Err(ApiError::conflict(format!(
            "{name} is a rendered config: the server keeps it while anything refers to it and collects it afterwards"
        )));
    }
    app.delete_machine_config(&name).await?;
    tracing::info!(name, "MachineConfig deleted");
    Ok(Json(DeleteAnswer {
        kind: "MachineConfig".into(),
        name,
        action: "deleted".into(),
    }))
}

fn pool_view(app: &App, f: &crate::fleet::Fleet, name: &str) -> Option<PoolView> {
    let rec = f.pools.get(name)?;
    let counts = views::pool_counts(f, name, &|n| app.is_fresh(n));
    let halted = crate::controller::halted_by(f, name);
    let now = app.options.settings.window_clock.now();
    Some(views::pool(rec, &counts, halted.as_deref(), now))
}

pub(super) async fn list_pools(
    State(app): AppState,
    _: Reader,
) -> Result<Json<List<PoolView>>, ApiError> {
    let f = app.snapshot();
    Ok(list(
        f.pools
            .keys()
            .filter_map(|n| pool_view(&app, &f, n))
            .collect(),
    ))
}

pub(super) async fn get_pool(
    State(app): AppState,
    _: Reader,
    Path(name): Path<String>,
) -> Result<Json<PoolView>, ApiError> {
    let f = app.snapshot();
    pool_view(&app, &f, &name)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("MachineConfigPool {name:?} not found")))
}

#[derive(Debug, Deserialize)]
pub(super) struct DeletePoolQuery {
    /// Delete a pool that has nodes.
    #[serde(default)]
    force: bool,
}

pub(super) async fn delete_pool(
    State(app): AppState,
    _: Admin,
    Path(name): Path<String>,
    Query(q): Query<DeletePoolQuery>,
) -> Result<Json<DeleteAnswer>, ApiError> {
    let what = app.delete_pool(&name, q.force).await?;
    Ok(Json(DeleteAnswer {
        kind: "MachineConfigPool".into(),
        name,
        action: what.to_string(),
    }))
}

pub(super) async fn pause(
    State(app): AppState,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<PauseAnswer>, ApiError> {
    let changed = app.set_paused(&name, true).await?;
    Ok(Json(PauseAnswer {
        kind: "MachineConfigPool".into(),
        name,
        paused: true,
        changed,
    }))
}

pub(super) async fn resume(
    State(app): AppState,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<PauseAnswer>, ApiError> {
    let changed = app.set_paused(&name, false).await?;
    Ok(Json(PauseAnswer {
        kind: "MachineConfigPool".into(),
        name,
        paused: false,
        changed,
    }))
}

pub(super) async fn bootstrap_token(
    State(app): AppState,
    Admin(by): Admin,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<TokenAnswer>, ApiError> {
    let req: TokenRequest = if body.is_empty() {
        TokenRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(e.to_string()))?
    };
    // No ttlSeconds: the server's default (--bootstrap-token-ttl); 0: never expires.
    let ttl = match req.ttl_seconds {
        None => app.options.bootstrap_ttl,
        Some(0) => None,
        Some(s) => Some(crate::bounds::token_ttl(s)?),
    };
    if let Some(node) = req.node {
        let (token, expires) = app
            .new_node_bootstrap_token(&name, &node, ttl, &by.to_string())
            .await?;
        tracing::info!(pool = %name, node = %node, by = %by, "new first-boot token for a node");
        return Ok(Json(TokenAnswer {
            pool: name,
            node: Some(node),
            token,
            expires_at: expires.map(crate::time::rfc3339),
            replaced: false,
        }));
    }
    let (token, expires, replaced) = app.new_bootstrap_token(&name, ttl).await?;
    tracing::info!(pool = %name, replaced, "new bootstrap token");
    Ok(Json(TokenAnswer {
        pool: name,
        node: None,
        token,
        expires_at: expires.map(crate::time::rfc3339),
        replaced,
    }))
}

#[derive(Debug, Deserialize)]
pub(super) struct NodeListQuery {
    #[serde(default)]
    pool: Option<String>,
    /// At most this many nodes (0 or none: every one; capped at [`MAX_NODE_PAGE`]).
    #[serde(default)]
    limit: Option<usize>,
    /// The nodes after this name (a page's `metadata.continue`).
    #[serde(default, rename = "continue")]
    continue_from: Option<String>,
    /// `summary`: each node without its history, drift lines and action runs, answered from
    /// memory (no store read); `full` (the default): whole.
    #[serde(default)]
    view: NodeListView,
}

/// How much of each node a list shows (`GET /api/v1/nodes?view=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum NodeListView {
    /// Whole: its last report read back from the store.
    #[default]
    Full,
    /// What the server holds in memory: no history, drift lines or action runs (`driftCount`
    /// says how many drift lines), so no store read.
    Summary,
}

/// The most nodes one page of `GET /api/v1/nodes?limit=` holds.
pub const MAX_NODE_PAGE: usize = 1000;

fn node_view(
    app: &App,
    rec: &crate::fleet::Rec<crate::store::records::NodeRecord>,
    report: Option<crate::app::ShownReport>,
) -> NodeView {
    views::node(
        rec,
        report,
        app.last_seen(&rec.value),
        app.is_fresh(&rec.value),
        app.options.settings.window_clock.now(),
    )
}

/// Nodes of the whole list answered at once are read and written this many at a time.
const STREAMED_PAGE: usize = 500;

/// Up to `limit` nodes after `from` (by name; all from the first without it), of `pool` when
/// given, as views; and the last one's name when more follow.
async fn node_page(
    app: &App,
    f: &crate::fleet::Fleet,
    pool: Option<&str>,
    from: Option<&str>,
    limit: usize,
    view: NodeListView,
) -> Result<(Vec<NodeView>, Option<String>), ApiError> {
    use std::ops::Bound;
    let from = match from {
        Some(c) => Bound::Excluded(c),
        None => Bound::Unbounded,
    };
    let mut matching = f
        .nodes
        .range::<_, str>((from, Bound::Unbounded))
        .map(|(_, n)| &**n)
        .filter(|n| pool.is_none() || n.value.pool.as_deref() == pool);
    let nodes: Vec<_> = matching.by_ref().take(limit).collect();
    let more = nodes.len() == limit && matching.next().is_some();
    let next = more
        .then(|| nodes.last().map(|n| n.value.name.clone()))
        .flatten();
    // A summary is what memory holds: `views::node` makes it when given no report.
    let mut reports = match view {
        NodeListView::Full => app.shown_reports(&nodes, f.nodes.len()).await?,
        NodeListView::Summary => Default::default(),
    };
    let views = nodes
        .into_iter()
        .map(|n| node_view(app, n, reports.remove(&n.value.name)))
        .collect();
    Ok((views, next))
}

pub(super) async fn list_nodes(
    State(app): AppState,
    _: Reader,
    Query(q): Query<NodeListQuery>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    use futures_util::StreamExt;
    let f = app.snapshot();
    let (pool, from) = (q.pool.as_deref(), q.continue_from.as_deref());
    if let Some(limit) = q.limit.filter(|l| *l > 0) {
        // A page, as of this snapshot: a node added or deleted between two pages is listed or
        // not as its name falls.
        let (views, next) =
            node_page(&app, &f, pool, from, limit.min(MAX_NODE_PAGE), q.view).await?;
        return Ok(Json(List::page(views, next)).into_response());
    }
    // Every node: written a page at a time from one snapshot, so that the server never holds
    // more than a page's reports and views (a large fleet's whole list is some 10 KiB a node).
    // The first page is read before answering, so that a store that cannot be read is a 503.
    let (first, next) = node_page(&app, &f, pool, from, STREAMED_PAGE, q.view).await?;
    let state = Streamed {
        app,
        fleet: f,
        pool: q.pool,
        view: q.view,
        page: Some((first, next)),
        after: None,
        begun: false,
    };
    // Each poll writes one page, and reads the next only when polled again (once the client
    // took this one): one page of views and reports at a time.
    let body = futures_util::stream::unfold(Some(state), |state| async move {
        let mut st = state?;
        let (views, next) = match (st.page.take(), st.after.take()) {
            (Some(page), _) => page,
            (None, Some(after)) => match node_page(
                &st.app,
                &st.fleet,
                st.pool.as_deref(),
                Some(&after),
                STREAMED_PAGE,
                st.view,
            )
            .await
            {
                Ok(page) => page,
                Err(e) => {
                    // The answer has begun: it ends cut short; the client sees it incomplete.
                    tracing::warn!(error = %e.message, after = %after, "a list of nodes ended early");
                    return Some((Err(std::io::Error::other(e.message)), None));
                }
            },
            (None, None) => return None,
        };
        let mut chunk = Vec::new();
        for v in &views {
            chunk.push(if st.begun { b',' } else { b'[' });
            st.begun = true;
            if let Err(e) = serde_json::to_writer(&mut chunk, v) {
                return Some((Err(std::io::Error::other(e)), None));
            }
        }
        match next {
            Some(after) => st.after = Some(after),
            None => {
                chunk.extend_from_slice(if st.begun { b"]}" } else { b"[]}" });
                return Some((Ok(Bytes::from(chunk)), None));
            }
        }
        Some((Ok(Bytes::from(chunk)), Some(st)))
    });
    // The document's head, then the items as they are read.
    let head = futures_util::stream::once(async {
        Ok::<_, std::io::Error>(Bytes::from_static(
            br#"{"apiVersion":"v1","kind":"List","items":"#,
        ))
    });
    let body = head.chain(body);
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        axum::body::Body::from_stream(body),
    )
        .into_response())
}

/// Where the whole list of nodes is, as it is written.
struct Streamed {
    app: std::sync::Arc<App>,
    fleet: std::sync::Arc<crate::fleet::Fleet>,
    pool: Option<String>,
    view: NodeListView,
    /// The first page, read before the answer began (with where the next starts).
    page: Option<(Vec<NodeView>, Option<String>)>,
    /// The name after which the next page starts.
    after: Option<String>,
    /// Whether `[` (and an item) was written.
    begun: bool,
}

pub(super) async fn get_node(
    State(app): AppState,
    _: Reader,
    Path(name): Path<String>,
) -> Result<Json<NodeView>, ApiError> {
    let f = app.snapshot();
    let n = f
        .nodes
        .get(&name)
        .ok_or_else(|| ApiError::not_found(format!("node {name:?} not found")))?;
    let report = app.shown_reports(&[n], f.nodes.len()).await?.remove(&name);
    Ok(Json(node_view(&app, n, report)))
}

pub(super) async fn delete_node(
    State(app): AppState,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<DeleteAnswer>, ApiError> {
    app.delete_node(&name).await?;
    tracing::info!(node = %name, "node deleted");
    Ok(Json(DeleteAnswer {
        kind: "Node".into(),
        name,
        action: "deleted".into(),
    }))
}

pub(super) async fn reset_credential(
    State(app): AppState,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<CredentialReset>, ApiError> {
    let (revoked, warning) = app.reset_credential(&name).await?;
    tracing::info!(node = %name, revoked, warning = warning.as_deref().unwrap_or(""), "node credential reset");
    Ok(Json(CredentialReset {
        kind: "Node".into(),
        name,
        credential_revoked: revoked,
        warning,
    }))
}

pub(super) async fn pin_node(
    State(app): AppState,
    Admin(by): Admin,
    Path(name): Path<String>,
    Json(req): Json<PinRequest>,
) -> Result<Json<HoldAnswer>, ApiError> {
    hold(&app, &name, HoldChange::Pin(req.config), &by).await
}

pub(super) async fn unpin_node(
    State(app): AppState,
    Admin(by): Admin,
    Path(name): Path<String>,
) -> Result<Json<HoldAnswer>, ApiError> {
    hold(&app, &name, HoldChange::Unpin, &by).await
}

pub(super) async fn exclude_node(
    State(app): AppState,
    Admin(by): Admin,
    Path(name): Path<String>,
) -> Result<Json<HoldAnswer>, ApiError> {
    hold(&app, &name, HoldChange::Exclude, &by).await
}

pub(super) async fn include_node(
    State(app): AppState,
    Admin(by): Admin,
    Path(name): Path<String>,
) -> Result<Json<HoldAnswer>, ApiError> {
    hold(&app, &name, HoldChange::Include, &by).await
}

pub(super) async fn rollback_pool(
    State(app): AppState,
    Admin(by): Admin,
    Path(name): Path<String>,
) -> Result<Json<RollbackAnswer>, ApiError> {
    let answer = app.rollback_pool(&name, &by.to_string()).await?;
    tracing::info!(pool = %name, to = %answer.to, from = %answer.from, by = %by, "pool rolled back");
    Ok(Json(answer))
}

pub(super) async fn force_node(
    State(app): AppState,
    Admin(by): Admin,
    Path(name): Path<String>,
) -> Result<Json<RequestAnswer>, ApiError> {
    request(&app, &name, RequestAction::Force, None, &by).await
}

pub(super) async fn restore_file(
    State(app): AppState,
    Admin(by): Admin,
    Path(name): Path<String>,
    Json(req): Json<RestoreFileRequest>,
) -> Result<Json<RequestAnswer>, ApiError> {
    request(&app, &name, RequestAction::RestoreFile, Some(req.path), &by).await
}

async fn request(
    app: &App,
    name: &str,
    action: RequestAction,
    path: Option<String>,
    by: &AdminId,
) -> Result<Json<RequestAnswer>, ApiError> {
    let by = by.to_string();
    let answer = app.request_node(name, action, path, &by).await?;
    tracing::info!(node = %name, %action, path = answer.path.as_deref().unwrap_or(""), id = answer.id, outcome = %answer.outcome, %by, "node request");
    Ok(Json(answer))
}

async fn hold(
    app: &App,
    name: &str,
    change: HoldChange,
    by: &AdminId,
) -> Result<Json<HoldAnswer>, ApiError> {
    let by = by.to_string();
    let answer = app.hold_node(name, change, &by).await?;
    tracing::info!(node = %name, action = %answer.action, %by, "node hold");
    Ok(Json(answer))
}

pub(super) async fn label_node(
    State(app): AppState,
    _: Admin,
    Path(name): Path<String>,
    Json(req): Json<LabelRequest>,
) -> Result<Json<LabelAnswer>, ApiError> {
    let labels = app
        .label_node(&name, &req.set, &req.remove, req.overwrite)
        .await?;
    Ok(Json(LabelAnswer {
        kind: "Node".into(),
        name,
        labels,
    }))
}

pub(super) async fn list_rendered(
    State(app): AppState,
    _: Reader,
) -> Result<Json<List<Value>>, ApiError> {
    let f = app.snapshot();
    Ok(list(
        f.rendered.values().map(|r| views::rendered(r)).collect(),
    ))
}

pub(super) async fn get_rendered(
    State(app): AppState,
    _: Reader,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let f = app.snapshot();
    f.rendered
        .get(&name)
        .map(|r| Json(views::rendered(r)))
        .ok_or_else(|| ApiError::not_found(format!("rendered config {name:?} not found")))
}

#[derive(Debug, Deserialize)]
pub(super) struct EventQuery {
    #[serde(default)]
    object: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    /// `Normal` or `Warning`.
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

pub(super) async fn events(
    State(app): AppState,
    _: Reader,
    Query(q): Query<EventQuery>,
) -> Result<Json<List<EventView>>, ApiError> {
    if let Some(k) = q
        .kind
        .as_deref()
        .filter(|k| !matches!(*k, "Normal" | "Warning"))
    {
        return Err(ApiError::bad_request(format!(
            "type {:?}: give Normal or Warning",
            crate::text::cut(k, 64)
        )));
    }
    let f = app.snapshot();
    let mut items: Vec<EventView> = f
        .events
        .newest_first()
        .filter(|e| q.object.as_deref().is_none_or(|o| e.object == o))
        .filter(|e| q.kind.as_deref().is_none_or(|k| e.kind == k))
        .take(q.limit.unwrap_or(200))
        .map(views::event)
        .collect();
    items.reverse();
    Ok(list(items))
}

/// `GET /api/v1/version`: this server's version and commit (admins only, like the rest of the
/// admin API: which build runs is of use to an attacker too).
pub(super) async fn version(_: Admin) -> Json<VersionInfo> {
    Json(views::version_info())
}
