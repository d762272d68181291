//! hearth's wire types: what the agent, the server and the CLI say to each other over HTTPS.
//!
//! One definition per type, used by all three (and by `bench/loadgen`), so a change to the
//! protocol is one change here and the compiler finds every side. Serde only: no I/O, no HTTP
//! client or server. Field names are camelCase JSON.
//!
//! - [`enroll`]: `POST /api/v1/enroll` ([`EnrollRequest`], [`EnrollResponse`]).
//! - [`firstboot`]: the paths of the files a first-boot config writes for the agent.
//! - [`text`]: what a node said, escaped for a terminal (not a wire type: the one rule the CLI
//!   and the server's journal entries share).
//! - [`desired`]: `GET /api/v1/agent/desired` ([`DesiredConfig`]).
//! - [`status`]: `POST /api/v1/agent/status`, the agent's status document ([`AgentStatus`],
//!   [`NodeState`], [`HistoryItem`]).
//! - [`slot`]: `POST /api/v1/agent/reboot-slot` ([`SlotRequest`], [`SlotAnswer`]).
//! - [`views`]: what the admin API shows: [`NodeView`], [`PoolView`], [`EventView`] and the
//!   [`List`] around them.
//! - [`request`]: an admin's one-off requests to a node (force, restore-file): asked for on the
//!   admin API ([`RestoreFileRequest`], [`RequestAnswer`]), carried in [`DesiredConfig`], reported
//!   in [`AgentStatus`], shown in [`NodeView`].
//! - [`admin`]: the admin API's other requests and answers (apply, pause, bootstrap tokens,
//!   labels, deletes, credential resets, pins and exclusions) and the [`admin::Status`]
//!   document of every error.
//! - [`version`]: `GET /api/v1/version` ([`VersionInfo`]).
//! - [`annotations`]: the MCO's node annotations, as the agent and the Kubernetes controller
//!   read and write them (not a wire type of hearth's API: the Kubernetes API's).
//! - [`servers`]: the list of server URLs the agent and the CLI take (not a wire type: the one
//!   rule both read `--server` and `HEARTH_SERVER` by).
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
//! schema differs from the one the type generates ([`schemas`]; `cargo xtask generate` rewrites
//! them with the rest of what is generated from the code).

pub mod admin;
pub mod annotations;
pub mod desired;
pub mod enroll;
pub mod firstboot;
pub mod request;
pub mod servers;
pub mod slot;
pub mod status;
pub mod text;
pub mod version;
pub mod views;

pub use desired::{
    DesiredConfig, DEFER_PARAM, DESIRED_HEADER, MAX_REPORT_AFTER, REPORT_AFTER_HEADER,
};
pub use enroll::{EnrollRequest, EnrollResponse};
pub use request::{
    NodeRequest, RequestAction, RequestAnswer, RequestResult, RequestView, RestoreFileRequest,
};
pub use slot::{SlotAction, SlotAnswer, SlotRequest};
pub use status::{
    ActionFailurePolicy, ActionOutcome, ActionRun, ActionWhen, AgentStatus, BootedOs, HistoryItem,
    NodeState, OsPull, OS_PULL_KEY,
};
pub use version::VersionInfo;
pub use views::{
    Condition, ConfigRef, EventView, HoldView, List, ListMeta, Maintenance, NodeMeta, NodeStatus,
    NodeView, PinView, PoolConfiguration, PoolMeta, PoolSpec, PoolStatus, PoolView, RollbackView,
    SlotHolder, SourceRef, WindowState,
};

/// The path every v1 endpoint starts with.
pub const API_PREFIX: &str = "/api/v1";

/// The `apiVersion` of hearth's own documents (the agent's status, a node).
pub const HEARTH_API_VERSION: &str = "hearth.io/v1";

/// Every wire type's JSON Schema with the name of its file: `docs/schema/<name>.schema.json`
/// holds it (written by `cargo xtask generate`, checked by `api/tests/fixtures.rs`). A new wire
/// type is added here.
pub fn schemas() -> Vec<(&'static str, schemars::Schema)> {
    use admin::*;
    use schemars::schema_for;
    vec![
        ("EnrollRequest", schema_for!(EnrollRequest)),
        ("EnrollResponse", schema_for!(EnrollResponse)),
        ("DesiredConfig", schema_for!(DesiredConfig)),
        ("AgentStatus", schema_for!(AgentStatus)),
        ("SlotRequest", schema_for!(SlotRequest)),
        ("SlotAnswer", schema_for!(SlotAnswer)),
        ("NodeView", schema_for!(NodeView)),
        ("PoolView", schema_for!(PoolView)),
        ("EventList", schema_for!(List<EventView>)),
        ("ApplyRequest", schema_for!(ApplyRequest)),
        ("ApplyOutcome", schema_for!(ApplyOutcome)),
        ("Status", schema_for!(Status)),
        ("TokenRequest", schema_for!(TokenRequest)),
        ("TokenAnswer", schema_for!(TokenAnswer)),
        ("LabelRequest", schema_for!(LabelRequest)),
        ("LabelAnswer", schema_for!(LabelAnswer)),
        ("PauseAnswer", schema_for!(PauseAnswer)),
        ("DeleteAnswer", schema_for!(DeleteAnswer)),
        ("CredentialReset", schema_for!(CredentialReset)),
        ("PinRequest", schema_for!(PinRequest)),
        ("HoldAnswer", schema_for!(HoldAnswer)),
        ("RollbackAnswer", schema_for!(RollbackAnswer)),
        ("VersionInfo", schema_for!(VersionInfo)),
        ("RestoreFileRequest", schema_for!(RestoreFileRequest)),
        ("RequestAnswer", schema_for!(RequestAnswer)),
        ("ViewerTokenRequest", schema_for!(ViewerTokenRequest)),
        ("ViewerTokenAnswer", schema_for!(ViewerTokenAnswer)),
    ]
}

/// A schema as `docs/schema/` holds it: pretty JSON and a final newline.
pub fn schema_text(schema: &schemars::Schema) -> String {
    serde_json::to_string_pretty(schema).expect("a schema serialises") + "\n"
}
