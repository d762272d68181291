//! `hearth viewer-token create [--ttl SECONDS]` and `hearth viewer-token delete NAME`: the
//! read-only tokens of the dashboard (`https://<server>:22623/ui/`) and of scripts that only read.

use super::conn::{enc, Client, Conn};
use crate::term::escape;
use clap::{Args, Subcommand};
use hearth_api::admin::{ViewerTokenAnswer, ViewerTokenRequest};

/// `hearth viewer-token`.
#[derive(Debug, Args)]
pub struct ViewerArgs {
    #[command(subcommand)]
    action: ViewerAction,
    #[command(flatten)]
    conn: Conn,
}

#[derive(Debug, Subcommand)]
enum ViewerAction {
    /// Make a read-only token and print it (shown once); its name goes to stderr.
    Create {
        /// Validity in seconds (default: until revoked).
        #[arg(long, value_name = "SECONDS")]
        ttl: Option<u64>,
    },
    /// Revoke a viewer token by its name (`viewer-…`).
    Delete {
        /// The name `create` printed.
        name: String,
    },
}

/// Runs `hearth viewer-token ...`.
pub fn viewer_token(a: &ViewerArgs) -> anyhow::Result<()> {
    let c = Client::new(&a.conn)?;
    match &a.action {
        ViewerAction::Create { ttl } => {
            let out: ViewerTokenAnswer = c.post_as(
                "/api/v1/viewer-tokens",
                &ViewerTokenRequest { ttl_seconds: *ttl },
            )?;
            crate::outln!("{}", escape(&out.token));
            let server = &c.servers[c.current.get() % c.servers.len()];
            eprintln!(
                "viewer token {} ({}): it reads pools, nodes, configs and events, and changes \
                 nothing; open the dashboard at {}/ui/ and paste it (a browser must trust the \
                 fleet's CA, <state-dir>/pki/ca.crt: see docs/operations.md, \"The dashboard\")",
                escape(&out.name),
                match out.expires_at.as_deref() {
                    Some(e) => format!("expires {}", escape(e)),
                    None => "until revoked".into(),
                },
                escape(server.trim_end_matches('/'))
            );
        }
        ViewerAction::Delete { name } => {
            c.delete(&format!("/api/v1/viewer-tokens/{}", enc(name)))?;
            crate::outln!("viewer token {} revoked", escape(name));
        }
    }
    Ok(())
}
