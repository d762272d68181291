//! hearth's wire types: what the agent, the server and the CLI say to each other over HTTPS.
//!
//! One definition per type, used by all three (and by `bench/loadgen`), so a change to the
//! protocol is one change here and the compiler finds every side. Serde only: no I/O, no HTTP
//! client or server. Field names are camelCase JSON.
//!
//! - [`enroll`]: `POST /api/v1/enroll` ([`EnrollRequest`], [`EnrollResponse`]).
//! - [`desired`]: `GET /api/v1/agent/desired` ([`DesiredConfig`]).
//! - [`status`]: `POST /api/v1/agent/status`, the agent's status document ([`AgentStatus`],
//!   [`NodeState`], [`HistoryItem`]).
//! - [`slot`]: `POST /api/v1/agent/reboot-slot` ([`SlotRequest`], [`SlotAnswer`]).
//! - [`views`]: what the admin API shows: [`NodeView`], [`PoolView`], [`EventView`] and the
//!   [`List`] around them.
//! - [`admin`]: the admin API's other requests and answers (apply, pause, bootstrap tokens,
//!   labels, deletes, credential resets) and the [`admin::Status`] document of every error.
//!
//! # Versioning
//!
//! The API is `/api/v1` ([`API_PREFIX`]). Within v1 only additive changes are allowed: a new
//! field is optional, read with `#[serde(default)]`, so an older peer's documents still read and
//! a newer peer's extra fields are ignored. Renaming or removing a field, changing its type or
//! meaning, or making it required is a breaking change: it goes into a `v2` module and path beside
//! v1, which stays served until no agent speaks it.
//!
//! Each type has a realistic example in `api/fixtures/<type>.json` and its JSON Schema in
//! `docs/schema/<type>.schema.json`; `api/tests/fixtures.rs` reads every fixture into its type
//! and writes it back unchanged, checks it against its schema, and fails when a checked-in
//! schema differs from the one the type generates (`HEARTH_BLESS=1 cargo test -p hearth-api` rewrites them).

pub mod admin;
pub mod desired;
pub mod enroll;
pub mod slot;
pub mod status;
pub mod views;

pub use desired::DesiredConfig;
pub use enroll::{EnrollRequest, EnrollResponse};
pub use slot::{SlotAction, SlotAnswer, SlotRequest};
pub use status::{AgentStatus, HistoryItem, NodeState};
pub use views::{
    Condition, ConfigRef, EventView, List, Maintenance, NodeMeta, NodeStatus, NodeView,
    PoolConfiguration, PoolMeta, PoolSpec, PoolStatus, PoolView, SlotHolder, SourceRef,
    WindowState,
};

/// The path every v1 endpoint starts with.
pub const API_PREFIX: &str = "/api/v1";

/// The `apiVersion` of hearth's own documents (the agent's status, a node).
pub const HEARTH_API_VERSION: &str = "hearth.io/v1";
