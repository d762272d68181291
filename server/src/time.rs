//! Times: Unix seconds inside, RFC 3339 (UTC) on the wire (shared with the agent).

pub use hearth_config::time::{now, rfc3339};
