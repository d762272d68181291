//! `hearth version`: this client's version and commit, and the server's (`GET
//! /api/v1/version`, which needs the admin credentials like the rest of the API).

use super::conn::{Client, Conn};
use crate::term::{escape, json_safe};
use clap::Args;
use hearth_api::VersionInfo;

/// `hearth version`.
#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Only the client's version (no server needed).
    #[arg(long)]
    client: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = crate::usage::Format::Text)]
    output: crate::usage::Format,
    #[command(flatten)]
    conn: Conn,
}

/// This binary's build (`cli/build.rs` records the commit).
pub fn client_version() -> VersionInfo {
    VersionInfo {
        version: env!("CARGO_PKG_VERSION").into(),
        commit: env!("HEARTH_BUILD_COMMIT").into(),
    }
}

/// `hearth version [--client] [-o json]`. Without `--client`, a server that cannot be reached
/// is an error (exit 1); the text form prints the client's line first, as `kubectl version`
/// does.
pub fn version(a: &VersionArgs) -> anyhow::Result<()> {
    let client = client_version();
    let server =
        || -> anyhow::Result<VersionInfo> { Client::new(&a.conn)?.get_as("/api/v1/version") };
    match a.output {
        crate::usage::Format::Text => {
            crate::outln!(
                "Client Version: {} (commit {})",
                client.version,
                client.commit
            );
            if !a.client {
                let s = server()?;
                crate::outln!(
                    "Server Version: {} (commit {})",
                    escape(&s.version),
                    escape(&s.commit)
                );
            }
        }
        crate::usage::Format::Json => {
            let mut v = serde_json::json!({ "clientVersion": client });
            if !a.client {
                v["serverVersion"] = serde_json::to_value(server()?)?;
            }
            crate::outln!("{}", json_safe(&serde_json::to_string_pretty(&v)?));
        }
    }
    Ok(())
}
