//! The annotations the controller reads and writes: the MCO's on nodes (shared with the agent,
//! [`hearth_api::annotations`]), and hearth's own for drains, on nodes and pools.

pub use hearth_api::annotations::{CURRENT_CONFIG, DESIRED_CONFIG, REASON, STATE};

/// The config a drain is for (set when it starts).
pub const DRAIN_FOR: &str = "hearth.io/drain-for";
/// When the drain started (RFC 3339).
pub const DRAIN_STARTED: &str = "hearth.io/drain-started";
/// The config the node was drained for (the drain is over).
pub const DRAINED_FOR: &str = "hearth.io/drained-for";
/// Why the drain cannot go on (the pod and the budget).
pub const DRAIN_BLOCKED: &str = "hearth.io/drain-blocked";
/// Set when a drain ran past its timeout with `on-drain-timeout: fail`.
pub const DRAIN_FAILED: &str = "hearth.io/drain-failed";
/// Set when the controller cordoned the node (so it uncordons only what it cordoned).
pub const CORDONED: &str = "hearth.io/cordoned";
/// The pool annotation: how long a drain may take.
pub const TIMEOUT_ANNOTATION: &str = "hearth.io/drain-timeout";
/// The pool annotation: what happens after that.
pub const ON_TIMEOUT_ANNOTATION: &str = "hearth.io/on-drain-timeout";
