//! The commands that talk to hearth-server: `login`, `apply`, `delete`, `get`, `describe`,
//! `label`, `pause`, `resume`, `bootstrap-token`.
//!
//! Where the server is: `--server`, `--ca`, `--token` (or `--client-cert` and `--client-key`, an
//! admin client certificate) on the command line, else the environment (`HEARTH_SERVER`,
//! `HEARTH_CA`, `HEARTH_TOKEN`, `HEARTH_CLIENT_CERT`, `HEARTH_CLIENT_KEY`), else the file `hearth login` writes
//! (`$HEARTH_CONFIG`, or `$XDG_CONFIG_HOME/hearth/config.json`, or
//! `~/.config/hearth/config.json`, mode 0600). The server's certificate is checked against that
//! CA only. Exit codes as for the offline commands: 0 success, 1 invalid input or an error from
//! the server (the message is printed), 2 usage.
//!
//! One file per concept: `conn` (flags, login file, HTTPS client), `failover` (sending to one
//! of several servers), `change` (the commands that
//! change the fleet), `get` (with `select`, label selectors, and `watch`, `get -w`), `describe`,
//! `rollout`, `version`, `state` (a node's state, named once for all of them), `table` (output
//! helpers). Here: the object
//! kinds and output formats they share.

mod change;
mod conn;
mod describe;
mod describe_actions;
mod failover;
mod get;
mod pages;
mod rollout;
mod select;
mod state;
mod table;
mod version;
mod viewer;
mod watch;

pub use change::{
    apply, bootstrap_token, delete, label, node, pause, rollback, ApplyArgs, DeleteArgs, LabelArgs,
    NodeArgs, PauseArgs, RollbackArgs, TokenArgs,
};
pub use conn::{config_path, login, Conn, LoginArgs};
pub use describe::{describe, DescribeArgs};
pub use get::{get, GetArgs, GetKind};
pub use rollout::{rollout, RolloutArgs};
pub use table::{human_age, parse_time};
pub use version::{client_version, version, VersionArgs};
pub use viewer::{viewer_token, ViewerArgs};
pub use watch::WATCH_INTERVAL;

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

fn kind_path(kind: Kind) -> &'static str {
    match kind {
        Kind::Mc => "machineconfigs",
        Kind::Mcp => "pools",
        Kind::Node => "nodes",
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Mc => "machineconfig",
        Kind::Mcp => "machineconfigpool",
        Kind::Node => "node",
    }
}
