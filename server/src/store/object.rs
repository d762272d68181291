//! What a store holds: objects of a [`Kind`], each a document with its revisions
//! ([`Versioned`]), none larger than [`MAX_DOCUMENT_BYTES`].

use std::fmt;

/// The largest document a store keeps (64 MiB): an apply's body is bounded by it
/// ([`crate::http::limits::MAX_APPLY_BODY`]), and etcd's reads by it and an envelope.
pub const MAX_DOCUMENT_BYTES: usize = 64 << 20;

/// The kinds of object the server stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// MachineConfigs as applied (name → [`crate::store::records::McRecord`]).
    MachineConfig,
    /// MachineConfigPools with their status.
    Pool,
    /// Nodes: labels, credential hash, desired config.
    Node,
    /// Nodes' last status reports (name: the node's), apart from the nodes.
    Report,
    /// Rendered configs (immutable, content-addressed).
    Rendered,
    /// Node-disruption policies (the MCO's `MachineConfiguration`).
    Policies,
    /// Token hashes: the admin token and the pools' bootstrap tokens.
    Token,
    /// Events.
    Event,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 8] = [
        Kind::MachineConfig,
        Kind::Pool,
        Kind::Node,
        Kind::Report,
        Kind::Rendered,
        Kind::Policies,
        Kind::Token,
        Kind::Event,
    ];

    /// The key prefix (`machineconfigs`, `pools`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::MachineConfig => "machineconfigs",
            Kind::Pool => "pools",
            Kind::Node => "nodes",
            Kind::Report => "reports",
            Kind::Rendered => "rendered",
            Kind::Policies => "policies",
            Kind::Token => "tokens",
            Kind::Event => "events",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored object with its revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// The document (JSON).
    pub value: Vec<u8>,
    /// The revision of the commit that created the object.
    pub create_revision: u64,
    /// The revision of the commit that last changed it.
    pub mod_revision: u64,
}
