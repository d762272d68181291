//! `/ostree/repo/{*path}`: the files of the ostree repository served with `--ostree-repo`.

use super::auth::Auth;
use super::routes::AppState;
use crate::app::Caller;
use crate::error::ApiError;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

/// A file of the ostree repository (`--ostree-repo`), for libostree's pulls: enrolled nodes
/// (their credential as a bearer token, which the agent passes to libostree) and admins.
pub(super) async fn ostree_file(
    State(app): AppState,
    Auth(c): Auth,
    Path(path): Path<String>,
) -> Result<Response, ApiError> {
    if c == Caller::Viewer {
        return Err(ApiError::forbidden(
            "a viewer token reads the fleet's state, not the ostree repository",
        ));
    }
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
    // Pieces of 64 KiB: hyper queues at most `limits::HTTP1_MAX_BUF_BYTES` (8 KiB) of a body
    // before it writes, so ReaderStream's 4-KiB pieces would be written two or three at a time.
    let body =
        axum::body::Body::from_stream(tokio_util::io::ReaderStream::with_capacity(f, 64 * 1024));
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
