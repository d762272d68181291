//! Limits on what a client may send, and error answers that are always a `Status` document.
//!
//! Every request goes through [`front`], one layer before routing, which does three things:
//!
//! - headers over [`MAX_HEADER_BYTES`] are 431. (Over HTTP/1.1 hyper refuses a head over
//!   [`HTTP1_MAX_BUF_BYTES`], the same size, with a bare 431 before any of this runs; over
//!   HTTP/2 it refuses a header list over [`H2_MAX_HEADER_LIST_BYTES`].)
//! - every request body is read in full before any handler sees the request, within
//!   [`BODY_READ_TIMEOUT`] and up to the route's limit ([`Screen::body_limit`]): too big is 413
//!   (the excess is read and dropped, up to [`MAX_DRAIN`], so that the client gets to read the
//!   answer), too slow 408. Refusing a request only after its body has been read is what lets
//!   an HTTP/2 client see the refusal (401, 403...) instead of a reset stream. But who sent it
//!   is told first, from its headers alone ([`Screen::sender`]): the body of a request whose
//!   credential does not authenticate, or whose caller the route does not serve, is read and
//!   dropped, never kept (the handler refuses it on its credential); nodes' bodies are kept
//!   within one server-wide budget ([`NODE_BODIES_BYTES`]), enrollments whose token is in the
//!   body within another ([`ENROLL_BODIES_BYTES`]), 503 beyond them ([`Held`]); an admin's as
//!   they come.
//! - an error answer that is not JSON (axum's own rejections: 405, a body that is not the JSON
//!   expected, a bad query or path, ...) becomes the documented `Status` document, keeping its
//!   status and its text as the message. Every answer says `X-Content-Type-Options: nosniff`.
//!
//! The connection-level limits (header read timeout, HTTP/2 streams and header list size) are
//! set in [`crate::serve`] from the constants here. See docs/security.md.

use super::status::status_answer;
use crate::error::ApiError;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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
/// The largest apply (`POST /api/v1/manifests`): the largest document the store keeps.
pub const MAX_APPLY_BODY: usize = crate::store::MAX_DOCUMENT_BYTES;
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

/// The largest enrollment body (`POST /api/v1/enroll`: a name, at most 64 labels, a token).
pub const MAX_ENROLL_BODY: usize = 64 << 10;
pub use crate::app::{ENROLL_BODIES_BYTES, NODE_BODIES_BYTES};
/// What an answer of 503 for a full budget asks the client to wait, in seconds.
const BUSY_RETRY_AFTER_SECS: u64 = 5;

/// Who sent a request, told from its headers alone, before any of its body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    /// No credential that authenticates, or a caller that no route taking a body serves but
    /// an admin's: the body is read and dropped, never kept.
    Unknown,
    /// An admin (token or client certificate): the body is kept.
    Admin,
    /// A node (or a bootstrap token) on a route for nodes: the body is kept within the budget
    /// of nodes' bodies.
    Node,
    /// An enrollment whose credential is in its body: kept within the budget of enrollments.
    Enrolling,
}

/// A budget of bytes for the bodies being held of one kind of [`Sender`].
#[derive(Debug, Clone)]
pub struct Budget {
    bytes: usize,
    held: Arc<Semaphore>,
}

impl Budget {
    /// A budget of `bytes`.
    pub fn new(bytes: usize) -> Budget {
        let bytes = bytes.clamp(1, Semaphore::MAX_PERMITS);
        Budget {
            bytes,
            held: Arc::new(Semaphore::new(bytes)),
        }
    }

    /// Holds `want` bytes (at most the whole budget), if they are free now.
    fn try_hold(&self, want: usize) -> Option<Held> {
        let want = u32::try_from(want.clamp(1, self.bytes)).unwrap_or(u32::MAX);
        self.held
            .clone()
            .try_acquire_many_owned(want)
            .ok()
            .map(|permit| Held(Arc::new(permit)))
    }
}

/// What a kept body holds of its budget. It travels with the request as an extension to
/// whatever answers it, a change's own task too (`http::detach`), and is given back when that is
/// done.
#[derive(Debug, Clone)]
pub struct Held(#[allow(dead_code)] Arc<OwnedSemaphorePermit>);

/// What [`front`] asks of the layer that knows the credentials and routes (`http::auth::Gate`).
pub trait Screen: Clone + Send + Sync + 'static {
    /// Who sent the request, from its headers and the connection's client certificate.
    fn sender(&self, req: &Request) -> Sender;
    /// The largest body the request's route takes.
    fn body_limit(&self, req: &Request) -> usize;
    /// The budget the bodies of `sender` are held in, if any.
    fn budget(&self, sender: Sender) -> Option<&Budget>;
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
        status_answer(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "RequestHeaderFieldsTooLarge", format!(
                "the request line and headers are {size} bytes; the limit is {MAX_HEADER_BYTES}: send fewer or shorter headers"
            ))
    })
}

/// Reads the whole body (bounded in size and time) before the request goes on; keeps it only
/// for a sender who authenticated, and a sender other than an admin only within the budget.
async fn read_body<C: Screen>(screen: &C, req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    let limit = screen.body_limit(&req);
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
    // What this body may take of its budget (its declared length, else its route's limit); a
    // body whose budget is full is read and dropped like an unknown sender's, then refused.
    let want = declared.map_or(limit, |n| (n as usize).min(limit));
    let (held, full) = match screen.budget(sender) {
        Some(budget) => match budget.try_hold(want) {
            Some(held) => (Some(held), false),
            None => (None, true),
        },
        None => (None, false),
    };
    let keep = !full && sender != Sender::Unknown;
    let (mut parts, mut body) = req.into_parts();
    let read = async {
        let mut buf = Vec::with_capacity(if keep && declared.is_some() { want } else { 0 });
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
        Ok(Ok(_)) if full => busy(),
        Ok(Ok((buf, total))) if total <= limit => {
            // A dropped body goes on empty: the handler refuses the request on its credential
            // (the Gate reads credentials as the extractors do), before it looks at a body.
            let body = if keep {
                Body::from(Bytes::from(buf))
            } else {
                Body::empty()
            };
            if let Some(held) = held {
                parts.extensions.insert(held);
            }
            next.run(Request::from_parts(parts, body)).await
        }
        Ok(Ok(_)) | Ok(Err(None)) => too_large(limit),
        Ok(Err(Some(e))) => {
            ApiError::bad_request(format!("cannot read the request body: {e}")).into_response()
        }
        Err(_) => status_answer(
            StatusCode::REQUEST_TIMEOUT,
            "RequestTimeout",
            format!(
                "the request body did not arrive within {} s",
                BODY_READ_TIMEOUT.as_secs()
            ),
        ),
    }
}

/// 503: the bodies of the sender's kind already hold their budget.
fn busy() -> Response {
    let mut resp = status_answer(
        StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        format!(
            "the server holds as many request bodies of nodes (or of enrollments) as it takes at \
             once; retry in {BUSY_RETRY_AFTER_SECS} s"
        ),
    );
    resp.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(BUSY_RETRY_AFTER_SECS),
    );
    resp
}

fn too_large(limit: usize) -> Response {
    status_answer(
        StatusCode::PAYLOAD_TOO_LARGE,
        "RequestEntityTooLarge",
        format!("the request body is over the limit of {limit} bytes for this endpoint"),
    )
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
    let mut out = status_answer(status, reason_word(status), message);
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
