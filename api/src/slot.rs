//! Reboot slots: `POST /api/v1/agent/reboot-slot`, taken before a reboot and given back after
//! the boot was verified, so a pool's `maxUnavailable` and maintenance windows hold.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `POST /api/v1/agent/reboot-slot` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SlotRequest {
    /// Acquire or release.
    pub action: SlotAction,
}

/// What to do with the reboot slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SlotAction {
    /// Take a slot before rebooting.
    Acquire,
    /// Give it back after the boot was verified.
    Release,
}

/// `POST /api/v1/agent/reboot-slot` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SlotAnswer {
    /// Whether the node holds a slot now (always false after a release).
    pub granted: bool,
    /// When not granted: ask again after this many seconds.
    #[serde(default)]
    pub retry_after_seconds: u64,
    /// When not granted: why (all slots taken, or outside the pool's maintenance window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
