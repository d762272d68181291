//! The vocabulary the commands share: the object kinds ([`Kind`]) with their API paths and
//! names, and the output formats of `get` ([`Output`]).

use clap::ValueEnum;

/// The kinds of object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// MachineConfigs (and rendered configs).
    #[value(name = "mc", alias = "machineconfig", alias = "machineconfigs")]
    Mc,
    /// MachineConfigPools.
    #[value(
        name = "mcp",
        alias = "machineconfigpool",
        alias = "machineconfigpools",
        alias = "pool",
        alias = "pools"
    )]
    Mcp,
    /// Nodes.
    #[value(name = "node", alias = "nodes", alias = "no")]
    Node,
}

/// Output formats of `get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// More columns.
    Wide,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
    /// `kind/name` per line.
    Name,
}

/// The path of a kind's objects under `/api/v1/`.
pub(super) fn kind_path(kind: Kind) -> &'static str {
    match kind {
        Kind::Mc => "machineconfigs",
        Kind::Mcp => "pools",
        Kind::Node => "nodes",
    }
}

/// A kind's name in `kind/name` (`-o name`, the lines the changing commands print).
pub(super) fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Mc => "machineconfig",
        Kind::Mcp => "machineconfigpool",
        Kind::Node => "node",
    }
}
