//! Who is calling: the bearer token (or Basic password, for FleetLock), an admin client
//! certificate, or the metrics token; the extractors [`Auth`], [`Admin`], [`MetricsReader`], and
//! [`Gate`], which tells who sent a request before its body is read.

use super::routes::{APPLY_ROUTE, ENROLL_ROUTE, FLEETLOCK_ROUTES, NODE_ROUTES};
use crate::app::{App, Caller};
use crate::error::ApiError;
use crate::http::limits::{self, Budget, Screen, Sender};
use crate::pki::ClientIdentity;
use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use std::sync::Arc;

/// Who sent a request, from its headers, for `limits::front` before any of its body is read:
/// the same credentials, in the same order, as the extractors below and FleetLock's take; and
/// which bodies a route keeps (an admin's anywhere; a node's on the routes for nodes).
pub(super) struct Gate {
    app: Arc<App>,
    nodes: Budget,
    enrollments: Budget,
}

impl Gate {
    pub(super) fn new(app: Arc<App>) -> Self {
        Gate {
            nodes: Budget::new(app.options.node_bodies),
            enrollments: Budget::new(app.options.enroll_bodies),
            app,
        }
    }
}

impl Clone for Gate {
    fn clone(&self) -> Self {
        Gate {
            app: self.app.clone(),
            nodes: self.nodes.clone(),
            enrollments: self.enrollments.clone(),
        }
    }
}

impl Screen for Gate {
    fn sender(&self, req: &Request) -> Sender {
        let path = req.uri().path();
        let headers = req.headers();
        // A token decides when one is sent, as in `Auth`; FleetLock's routes also take the
        // Basic password (as `fleetlock` does), no other route does.
        let fleetlock = FLEETLOCK_ROUTES.contains(&path);
        let caller =
            caller_of(&self.app, headers, req.extensions(), fleetlock).and_then(Result::ok);
        match caller {
            Some(Caller::Admin) => Sender::Admin,
            Some(Caller::Node(_) | Caller::Bootstrap { .. }) if NODE_ROUTES.contains(&path) => {
                Sender::Node
            }
            // Enrollment's credential, the bootstrap token, may be in its body.
            _ if path == ENROLL_ROUTE => Sender::Enrolling,
            _ => Sender::Unknown,
        }
    }

    fn body_limit(&self, req: &Request) -> usize {
        match req.uri().path() {
            APPLY_ROUTE => limits::MAX_APPLY_BODY,
            ENROLL_ROUTE => limits::MAX_ENROLL_BODY,
            _ => limits::MAX_BODY,
        }
    }

    fn budget(&self, sender: Sender) -> Option<&Budget> {
        match sender {
            Sender::Node => Some(&self.nodes),
            Sender::Enrolling => Some(&self.enrollments),
            Sender::Admin | Sender::Unknown => None,
        }
    }
}

/// The bearer token of a request, if any.
pub(super) fn bearer(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// The password of `Authorization: Basic` (FleetLock clients such as Zincati can only put
/// credentials into the URL: `https://node:<credential>@hearth:22623/`).
pub(super) fn basic_password(headers: &HeaderMap) -> Option<String> {
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

impl FromRequestParts<Arc<App>> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App>,
    ) -> Result<Self, Self::Rejection> {
        match caller_of(app, &parts.headers, &parts.extensions, false) {
            Some(caller) => caller.map(Auth),
            None => Err(ApiError::unauthorized(
                "missing credentials: send Authorization: Bearer <token> or an admin client certificate",
            )),
        }
    }
}

/// The caller a request's credentials name, read in one place for the extractors and the
/// [`Gate`]: a token decides when one is sent (nodes always send theirs; FleetLock's Basic
/// password too when `basic`); otherwise an admin client certificate, verified against the
/// fleet CA during the TLS handshake. `None`: no credential at all.
fn caller_of(
    app: &App,
    headers: &HeaderMap,
    extensions: &axum::http::Extensions,
    basic: bool,
) -> Option<Result<Caller, ApiError>> {
    let token = bearer(headers).or_else(|| basic.then(|| basic_password(headers)).flatten());
    if let Some(token) = token {
        return Some(app.authenticate(&token));
    }
    extensions.get::<ClientIdentity>().map(|id| {
        if id.admin {
            Ok(Caller::Admin)
        } else {
            Err(ApiError::forbidden(format!(
                "the client certificate of {:?} was not issued for an admin (see hearth-server issue-admin-cert)",
                id.name
            )))
        }
    })
}

/// How an admin authenticated; events name the admin by it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminId {
    /// The admin token.
    Token,
    /// An admin client certificate (no token sent), by its CN.
    Certificate(String),
}

impl std::fmt::Display for AdminId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdminId::Token => f.write_str("the admin token"),
            AdminId::Certificate(name) => write!(f, "admin certificate {name}"),
        }
    }
}

/// An authenticated admin (an [`Auth`] whose caller is an admin; anyone else is 403 with the
/// reason), and how they authenticated.
#[derive(Debug)]
pub struct Admin(pub AdminId);

impl FromRequestParts<Arc<App>> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App>,
    ) -> Result<Self, Self::Rejection> {
        let Auth(caller) = Auth::from_request_parts(parts, app).await?;
        admin(&caller)?;
        // A token decides when one is sent (as in `Auth`); otherwise it was the certificate.
        let id = match parts.extensions.get::<ClientIdentity>() {
            Some(cert) if bearer(&parts.headers).is_none() => {
                AdminId::Certificate(cert.name.clone())
            }
            _ => AdminId::Token,
        };
        Ok(Admin(id))
    }
}

pub(super) fn admin(caller: &Caller) -> Result<(), ApiError> {
    match caller {
        Caller::Admin => Ok(()),
        Caller::Viewer => Err(ApiError::forbidden(
            "a viewer token reads the fleet and changes nothing: this needs an admin",
        )),
        Caller::Node(n) => Err(ApiError::forbidden(format!(
            "node {n} may read only its own desired config"
        ))),
        Caller::Bootstrap { pool, .. } => Err(ApiError::forbidden(format!(
            "a bootstrap token (pool {pool}) may only enroll nodes and fetch /config/{pool}"
        ))),
    }
}

pub(super) fn node(caller: &Caller) -> Result<&str, ApiError> {
    match caller {
        Caller::Node(n) => Ok(n),
        _ => Err(ApiError::forbidden(
            "this endpoint is for enrolled nodes: use the node's credential",
        )),
    }
}

/// A caller who may read what an admin reads: an admin or a viewer (the dashboard's read-only
/// role). Nodes and bootstrap tokens are 403 with the reason.
#[derive(Debug)]
pub struct Reader;

impl FromRequestParts<Arc<App>> for Reader {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App>,
    ) -> Result<Self, Self::Rejection> {
        let Auth(caller) = Auth::from_request_parts(parts, app).await?;
        match caller {
            Caller::Viewer => Ok(Reader),
            other => admin(&other).map(|_| Reader),
        }
    }
}

/// The metrics token (`<state-dir>/metrics.token`, for Prometheus), or an admin.
#[derive(Debug)]
pub struct MetricsReader;

impl FromRequestParts<Arc<App>> for MetricsReader {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App>,
    ) -> Result<Self, Self::Rejection> {
        let metrics = app.options.metrics_token_sha256.as_deref();
        if let Some(token) = bearer(&parts.headers) {
            if metrics == Some(crate::pki::token_hash(&token).as_str()) {
                return Ok(MetricsReader);
            }
        }
        Admin::from_request_parts(parts, app)
            .await
            .map(|_| MetricsReader)
    }
}
