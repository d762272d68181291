//! Limits on what a client may send, and error answers that are always a `Status` document.
//!
//! Every request goes through [`front`], one layer before routing, which does three things:
//!
//! - headers over [`MAX_HEADER_BYTES`] are 431. (Over HTTP/1.1 hyper refuses a head over
//!   [`HTTP1_MAX_BUF_BYTES`], the same size, with a bare 431 before any of this runs; over
//!   HTTP/2 it refuses a header list over [`H2_MAX_HEADER_LIST_BYTES`].)
//! - every request body is read in full before any handler sees the request, within
//!   [`BODY_READ_TIMEOUT`] and up to the route's limit ([`body_limit`]): too big is 413 (the
//!   excess is read and dropped, up to [`MAX_DRAIN`], so that the client gets to read the
//!   answer), too slow 408. Refusing a request only after its body has been read is what lets an
//!   HTTP/2 client see the refusal (401, 403...) instead of a reset stream. But who sent it is
//!   told first, from its headers alone ([`Screen::sender`]): the body of a request whose
//!   credential does not authenticate is read and dropped, never kept (the handler refuses it
//!   on its credential, with an empty body); the bodies of callers other than admins are kept
//!   within one server-wide budget ([`Options::untrusted_bodies`](crate::app::Options)), 503
//!   beyond it; an admin's as they come.
//! - an error answer that is not JSON (axum's own rejections: 405, a body that is not the JSON
//!   expected, a bad query or path, ...) becomes the documented `Status` document, keeping its
//!   status and its text as the message. Every answer says `X-Content-Type-Options: nosniff`.
//!
//! The connection-level limits (header read timeout, HTTP/2 streams and header list size) are
//! set in [`crate::serve`] from the constants here. See docs/security.md.

use crate::error::ApiError;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Request line and headers (names and values, all together) the API answers; 431 above.
/// hearth's own clients send a few hundred bytes (a token is 70 characters).
pub const MAX_HEADER_BYTES: usize = 8 * 1024;
/// What hyper buffers of an HTTP/1.1 connection's input (`max_buf_size`, hyper's smallest): a
/// request head over it is 431 from hyper itself (no body) and the connection ends; a body is
/// read in pieces of at most this. (It also bounds what hyper queues of a response's body before
/// writing it: a streamed body should come in pieces larger than this, as `http::ostree`'s do.)
/// Larger, hyper's read buffer grows with the largest read the connection made, up to this
/// limit, and stays that large as long as the connection is open:
/// at 1 MiB, 300 connections that each sent one body of 1 MB and then waited pinned 124 MB
/// (12 MB at 8 KiB), and agents whose reports carry their history (9 KiB) held 8 KiB more each
/// while they waited (docs/performance.md, "Buffers that do not grow").
pub const HTTP1_MAX_BUF_BYTES: usize = 8 * 1024;
/// The header list hyper takes on an HTTP/2 stream (`SETTINGS_MAX_HEADER_LIST_SIZE`): above it,
/// HTTP/2's 431 and a refused stream; below it and over [`MAX_HEADER_BYTES`], the API's 431.
pub const H2_MAX_HEADER_LIST_BYTES: u32 = 1024 * 1024;
/// The largest apply (`POST /api/v1/manifests`).
pub const MAX_APPLY_BODY: usize = 64 << 20;
/// The largest body of every other request.
pub const MAX_BODY: usize = 1 << 20;
/// What is read beyond a body's limit (and dropped) so that a client still sending it gets
/// to read the 413; a body even bigger sees its connection end instead.
pub const MAX_DRAIN: usize = 8 << 20;
/// A request's body must arrive within this (no slow-loris on bodies).
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// A client's time to send a request's headers over HTTP/1.1.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The TLS handshake must finish within this.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Concurrent HTTP/2 streams per connection.
pub const H2_MAX_CONCURRENT_STREAMS: u32 = 128;

/// The default of what the bodies of callers other than admins (nodes, bootstrap tokens,
/// viewers) may hold of the server's memory at once, all together (`Options::untrusted_bodies`).
/// hearth's own agents send reports of some KiB: 100,000 agents reporting at the default pace
/// hold a few MiB at a time.
pub const UNTRUSTED_BODIES_BYTES: usize = 256 << 20;
/// What an answer of 503 for a full budget asks the client to wait, in seconds.
const BUSY_RETRY_AFTER_SECS: u64 = 5;

/// Who sent a request, told from its headers alone, before any of its body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    /// No credential that authenticates: the body is read and dropped, never kept.
    Unknown,
    /// An admin (token or client certificate): the body is kept.
    Admin,
    /// Anyone else who authenticated (a node, a bootstrap token, a viewer), and an enrollment,
    /// whose credential is in its body: the body is kept within the budget all such bodies
    /// share.
    Other,
}

/// What [`front`] asks of the layer that knows the credentials (`http::auth::Gate`).
pub trait Screen: Clone + Send + Sync + 'static {
    /// Who sent the request, from its headers and the connection's client certificate.
    fn sender(&self, req: &Request) -> Sender;
    /// The budget, in bytes, of the bodies of [`Sender::Other`] requests being held.
    fn untrusted_bodies(&self) -> &Arc<Semaphore>;
}

/// The body limit of a path.
pub fn body_limit(path: &str) -> usize {
    if path == "/api/v1/manifests" {
        MAX_APPLY_BODY
    } else {
        MAX_BODY
    }
}

/// What every request goes through first, as one layer: headers bounded (431 over
/// [`MAX_HEADER_BYTES`]), then the body read in full, kept only for a caller who authenticated
/// ([`read_body`]), then every error answer made a `Status` document ([`as_status`]) and every
/// answer marked `nosniff`. One layer, not three: each `from_fn` layer boxes the request's
/// future once more, which a long-poll holds while it waits (some 1.5 KiB per waiting agent
/// each, measured with heaptrack).
pub async fn front<C: Screen>(State(screen): State<C>, req: Request, next: Next) -> Response {
    let resp = match oversized_headers(&req) {
        Some(refusal) => refusal,
        None => read_body(&screen, req, next).await,
    };
    let mut resp = as_status(resp).await;
    // Browsers must not read an answer (a node's reason, a manifest) as another type than the
    // one it says.
    resp.headers_mut()
        .entry(header::X_CONTENT_TYPE_OPTIONS)
        .or_insert(HeaderValue::from_static("nosniff"));
    resp
}

/// 431 when the request line and headers are over [`MAX_HEADER_BYTES`].
fn oversized_headers(req: &Request) -> Option<Response> {
    let size: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum::<usize>()
        + req.uri().to_string().len();
    (size > MAX_HEADER_BYTES).then(|| {
        ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "RequestHeaderFieldsTooLarge",
            format!(
                "the request line and headers are {size} bytes; the limit is {MAX_HEADER_BYTES}: send fewer or shorter headers"
            ),
        )
        .into_response()
    })
}

/// Reads the whole body (bounded in size and time) before the request goes on; keeps it only
/// for a sender who authenticated, and a sender other than an admin only within the budget.
async fn read_body<C: Screen>(screen: &C, req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    let limit = body_limit(req.uri().path());
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > (limit + MAX_DRAIN) as u64) {
        // Not worth reading only to refuse it.
        return too_large(limit);
    }
    let sender = screen.sender(&req);
    // Held until the request is answered: what this body may take of the budget.
    let _held = match sender {
        Sender::Other => {
            let want = declared.map_or(limit, |n| (n as usize).min(limit)).max(1);
            let permits = u32::try_from(want).unwrap_or(u32::MAX);
            match screen
                .untrusted_bodies()
                .clone()
                .try_acquire_many_owned(permits)
            {
                Ok(held) => Some(held),
                Err(_) => return busy(),
            }
        }
        Sender::Unknown | Sender::Admin => None,
    };
    let keep = sender != Sender::Unknown;
    let (parts, mut body) = req.into_parts();
    let read = async {
        let mut buf = Vec::new();
        let mut total = 0usize;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| Some(e.to_string()))?;
            if let Ok(data) = frame.into_data() {
                total += data.len();
                if total <= limit {
                    if keep {
                        buf.extend_from_slice(&data);
                    }
                } else if total > limit + MAX_DRAIN {
                    // Too much to read only to refuse it: the client sees the connection end.
                    return Err(None::<String>);
                }
                // Over the limit: read on (up to MAX_DRAIN more) and drop it, so that the
                // client, still sending, gets to read the 413.
            }
        }
        Ok((buf, total))
    };
    match tokio::time::timeout(BODY_READ_TIMEOUT, read).await {
        Ok(Ok((buf, total))) if total <= limit => {
            next.run(Request::from_parts(parts, Body::from(Bytes::from(buf))))
                .await
        }
        Ok(Ok(_)) | Ok(Err(None)) => too_large(limit),
        Ok(Err(Some(e))) => {
            ApiError::bad_request(format!("cannot read the request body: {e}")).into_response()
        }
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "RequestTimeout",
            format!(
                "the request body did not arrive within {} s",
                BODY_READ_TIMEOUT.as_secs()
            ),
        )
        .into_response(),
    }
}

/// 503: the bodies of callers other than admins already hold the server's budget for them.
fn busy() -> Response {
    let mut resp = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        format!(
            "the server holds as many request bodies of nodes and other callers than admins as it \
             takes at once; retry in {BUSY_RETRY_AFTER_SECS} s"
        ),
    )
    .into_response();
    resp.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(BUSY_RETRY_AFTER_SECS),
    );
    resp
}

fn too_large(limit: usize) -> Response {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "RequestEntityTooLarge",
        format!("the request body is over the limit of {limit} bytes for this endpoint"),
    )
    .into_response()
}

/// Turns an error answer that is not JSON into a `Status` document.
async fn as_status(resp: Response) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let message = if text.is_empty() {
        match status {
            StatusCode::METHOD_NOT_ALLOWED => {
                "this endpoint does not take this method; see docs/api.md".to_string()
            }
            s => s.canonical_reason().unwrap_or("error").to_string(),
        }
    } else {
        text
    };
    let mut out = ApiError::new(status, reason_word(status), message).into_response();
    if let Some(allow) = parts.headers.get(header::ALLOW) {
        out.headers_mut().insert(header::ALLOW, allow.clone());
    }
    out
}

/// The CamelCase reason of a status (`Status.reason`).
pub fn reason_word(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        408 => "RequestTimeout",
        409 => "Conflict",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        431 => "RequestHeaderFieldsTooLarge",
        503 => "ServiceUnavailable",
        s if s >= 500 => "InternalError",
        _ => "BadRequest",
    }
}
