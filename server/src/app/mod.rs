//! The server's state and its operations: every change goes through [`App::mutate`], which
//! changes a copy of the fleet, reconciles it, commits the difference to the store in one
//! transaction and only then publishes the copy. Reads use the published snapshot.
//!
//! `state` holds the state ([`App`], [`Options`], [`Caller`], `Replica`), start-up and
//! authentication; the operations live in one file per concept: `commit` (the commit path),
//! `admin`, `agent`, `holds` (an admin's pins and exclusions of nodes), `rollback` (a pool back to
//! its previous rendered config), `requests` (an admin's force and restore-file requests to a
//! node), `liveness` (last seen, stale nodes, the tick), `manifests` (reading an apply),
//! `follow` (a replica's fleet following the shared store), `node_token`, `viewer`, `shown`,
//! `background`, `claims` (machines refused a node's name). This file only names them.

mod admin;
mod agent;
mod background;
mod claims;
mod commit;
mod follow;
mod holds;
mod liveness;
mod manifests;
mod node_token;
mod requests;
mod rollback;
mod shown;
mod state;
mod viewer;

pub use background::{Background, MAX_DETACHED};
pub use hearth_api::admin::{ApplyFile, ApplyOutcome, ApplyResult, PoolTarget};
pub use holds::HoldChange;
pub(crate) use manifests::apply_manifests;
pub use manifests::read_manifests;
pub use requests::{MAX_FINISHED_REQUESTS, MAX_PENDING_REQUESTS, MAX_REQUEST_PATH};
pub use shown::ShownReport;
pub use state::{
    format_labels, App, Caller, DesiredBody, Options, DEFAULT_BOOTSTRAP_TTL, ENROLL_BODIES_BYTES,
    NODE_BODIES_BYTES, UNKNOWN_TOKEN,
};
