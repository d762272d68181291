//! Enrollment: `POST /api/v1/enroll`, a node trading its pool's bootstrap token for its own
//! credential.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `POST /api/v1/enroll` request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnrollRequest {
    /// The node's name (a DNS-1123 subdomain, usually its host name).
    pub node: String,
    /// Labels for a node the server does not know yet (ignored for a known node, whose labels
    /// the admin owns). Empty: the pool's `nodeSelector.matchLabels`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The pool's bootstrap token (may also be sent as `Authorization: Bearer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_token: Option<String>,
}

/// `POST /api/v1/enroll` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnrollResponse {
    /// The node's name.
    pub node: String,
    /// Its pool.
    pub pool: String,
    /// The node's labels as the server keeps them.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The node's own credential: send it as `Authorization: Bearer` from now on (keep it
    /// secret, mode 0600). The server keeps only its sha256; a new enrollment replaces it.
    pub credential: String,
}
