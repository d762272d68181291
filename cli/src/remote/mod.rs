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
//! One file per concept: `kind` (the object kinds and output formats the commands share),
//! `conn` (flags, login file, HTTPS client), `failover` (sending to one of several servers),
//! `change` (the commands that change the fleet), `get` (with `select`, label selectors, and
//! `watch`, `get -w`), `describe` (with `describe_actions`), `rollout`, `version`, `state` (a
//! node's state, named once for all of them), `table` (output helpers). Here: the module list,
//! the re-exports, and [`get()`], which prints the list (`get.rs`) and with `-w` follows it
//! (`watch.rs`).

mod change;
mod conn;
mod describe;
mod describe_actions;
mod failover;
mod get;
mod kind;
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
pub use get::{GetArgs, GetKind};
pub use kind::{Kind, Output};
pub use rollout::{rollout, RolloutArgs};
pub use table::{human_age, parse_time};
pub use version::{client_version, version, VersionArgs};
pub use viewer::{viewer_token, ViewerArgs};
pub use watch::WATCH_INTERVAL;

/// `hearth get`: the list, then with `-w` each change until interrupted (or an error).
pub fn get(a: &GetArgs) -> anyhow::Result<()> {
    let listed = get::list(a)?;
    if a.watch {
        watch::follow(a, listed)?;
    }
    Ok(())
}
