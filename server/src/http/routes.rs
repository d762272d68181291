//! The API's routes, media types and headers as the handlers and the router name them, and the
//! state every handler is given.

use crate::app::App;
use axum::extract::State;
use std::sync::Arc;

/// The media type of a multi-file apply (`{"files":[{"name":..,"text":..}]}`).
pub const APPLY_MEDIA_TYPE: &str = "application/vnd.hearth.apply+json";
/// The header that names the desired config in long-poll answers.
pub use hearth_api::DESIRED_HEADER;

/// The client's address (the TCP peer), set on each request by the listener: for what a refusal
/// records of where a request came from.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub std::net::SocketAddr);

/// What every handler is given: the server's state.
pub(super) type AppState = State<Arc<App>>;

/// The agents' long-poll for their desired config.
pub const DESIRED_ROUTE: &str = "/api/v1/agent/desired";
/// Routes whose answer waits on purpose (a long-poll, an event stream): not in the request
/// duration histogram ([`crate::telemetry::metrics::Metrics::request`]).
pub const WAITING_ROUTES: [&str; 2] = [DESIRED_ROUTE, "/api/v1/watch"];
/// Enrollment, whose credential (the bootstrap token) may travel in its body.
pub const ENROLL_ROUTE: &str = "/api/v1/enroll";
/// An agent's status report.
pub const STATUS_ROUTE: &str = "/api/v1/agent/status";
/// An agent's reboot slot.
pub const SLOT_ROUTE: &str = "/api/v1/agent/reboot-slot";
/// FleetLock's two calls.
pub const FLEETLOCK_ROUTES: [&str; 2] = ["/v1/pre-reboot", "/v1/steady-state"];
/// The routes that take a node's body (kept within the budget of nodes' bodies).
pub const NODE_ROUTES: [&str; 5] = [
    ENROLL_ROUTE,
    STATUS_ROUTE,
    SLOT_ROUTE,
    FLEETLOCK_ROUTES[0],
    FLEETLOCK_ROUTES[1],
];
/// An admin's apply of manifests (the largest body).
pub const APPLY_ROUTE: &str = "/api/v1/manifests";
