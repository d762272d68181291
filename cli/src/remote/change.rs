//! The commands that change the fleet: `apply`, `delete`, `label`, `pause`, `resume`,
//! `bootstrap-token`, `node reset-credential|pin|unpin|exclude|include|force|restore-file`,
//! `rollback`.

use super::conn::{enc, typed, Client, Conn, ServerError};
use super::kind::{kind_name, kind_path, Kind};
use crate::term::escape;
use crate::usage::{read_text, InvalidInput, Usage};
use clap::Args;
use hearth_api::admin::{
    ApplyFile, ApplyOutcome, ApplyRequest, CredentialReset, DeleteAnswer, Diagnostic, HoldAnswer,
    LabelAnswer, LabelRequest, PauseAnswer, PinRequest, RollbackAnswer, Severity, Status,
    TokenAnswer, TokenRequest,
};
use hearth_api::{RequestAnswer, RestoreFileRequest};
use hearth_config::manifest::{read_str_with, FieldValidation};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

/// `hearth apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A manifest file, a directory (its *.yaml, *.yml and *.json files) or `-` (stdin);
    /// repeat -f for several. All are applied together: if any is invalid, nothing is applied.
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true)]
    files: Vec<PathBuf>,
    /// Also read the subdirectories of -f directories.
    #[arg(short = 'R', long)]
    recursive: bool,
    /// Check and report what would change, store nothing.
    #[arg(long)]
    dry_run: bool,
    /// What a field no schema has is (a typo, most often): `strict`, an error naming the field it
    /// likely misspells, nothing applied; `warn`, a warning, the field ignored; `ignore`,
    /// nothing (the server's `?fieldValidation=`).
    #[arg(long, value_name = "MODE", default_value = "strict")]
    validate: FieldValidation,
    #[command(flatten)]
    conn: Conn,
}

/// `hearth apply -f`.
pub fn apply(a: &ApplyArgs) -> anyhow::Result<()> {
    let paths = crate::files::manifest_files(&a.files, a.recursive)?;
    if paths.is_empty() {
        return Err(Usage("no manifest files (*.yaml, *.yml, *.json) found".into()).into());
    }
    let mut files = Vec::new();
    for p in &paths {
        files.push(ApplyFile {
            name: p.display().to_string(),
            text: read_text(p)?,
        });
    }
    let c = Client::new(&a.conn)?;
    // The unknown fields, checked here too: a server from before `fieldValidation` ignores it
    // and reads them with a warning.
    if a.validate == FieldValidation::Strict {
        let unknown: Vec<hearth_config::diag::Diagnostic> = files
            .iter()
            .flat_map(|f| read_str_with(&f.name, &f.text, FieldValidation::Strict).1)
            .filter(|d| d.is_error() && d.message.starts_with("unknown field"))
            .collect();
        if !unknown.is_empty() {
            let shown: Vec<_> = unknown.iter().map(Into::into).collect();
            print_diagnostics(&shown);
            eprintln!(
                "error: {} unknown field(s) in the manifests; nothing was applied",
                unknown.len()
            );
            return Err(InvalidInput.into());
        }
    }
    let path = format!(
        "/api/v1/manifests?fieldValidation={}{}",
        a.validate,
        if a.dry_run { "&dryRun=true" } else { "" }
    );
    let body = Some((
        "application/vnd.hearth.apply+json",
        serde_json::to_vec(&ApplyRequest { files })?,
    ));
    // Not idempotent as a whole (the answer says what was created), so a change whose answer
    // was lost is not sent again elsewhere; a dry run stores nothing and is.
    let result = if a.dry_run {
        c.request_changing_nothing(reqwest::Method::POST, &path, body)
    } else {
        c.request(reqwest::Method::POST, &path, body)
    };
    let out: ApplyOutcome = match result {
        Ok(v) => typed(v, "/api/v1/manifests")?,
        Err(e) => {
            if let Some(se) = e.downcast_ref::<ServerError>() {
                let status = serde_json::from_value::<Status>(se.body.clone()).ok();
                if let Some(st) = status.filter(|st| !st.diagnostics.is_empty()) {
                    print_diagnostics(&st.diagnostics);
                    eprintln!("error: {}", escape(&st.message));
                    return Err(InvalidInput.into());
                }
            }
            return Err(e);
        }
    };
    print_diagnostics(&out.warnings);
    let suffix = if a.dry_run { " (dry run)" } else { "" };
    for r in &out.results {
        let note = r
            .note
            .as_deref()
            .map(|n| format!(" ({})", escape(n)))
            .unwrap_or_default();
        crate::outln!(
            "{}/{} {}{note}{suffix}",
            escape(&r.kind).to_ascii_lowercase(),
            escape(&r.name),
            escape(&r.action)
        );
    }
    for p in &out.pools {
        if let Some(e) = &p.render_error {
            eprintln!(
                "warning: machineconfigpool/{}: {}",
                escape(&p.name),
                escape(e)
            );
        }
    }
    Ok(())
}

fn print_diagnostics(diags: &[Diagnostic]) {
    let mut err = std::io::stderr().lock();
    for d in diags {
        let mut line = String::new();
        line.push_str(&escape(&d.file));
        if let Some(l) = d.line {
            line.push_str(&format!(":{l}"));
        }
        line.push_str(match d.severity {
            Severity::Error => ": error: ",
            Severity::Warning => ": warning: ",
        });
        if let Some(o) = &d.object {
            line.push_str(&format!("{}: ", escape(o)));
        }
        if !d.path.is_empty() {
            line.push_str(&format!("{}: ", escape(&d.path)));
        }
        line.push_str(&escape(&d.message));
        let _ = writeln!(err, "{line}");
    }
}

/// `hearth delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// mc, mcp or node.
    #[arg(value_enum)]
    kind: Kind,
    /// The objects.
    #[arg(required = true)]
    names: Vec<String>,
    /// Delete a pool even though nodes are in it (they go to the pool their labels select
    /// without it; its bootstrap token stops working).
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    conn: Conn,
}

/// `hearth delete`.
pub fn delete(a: &DeleteArgs) -> anyhow::Result<()> {
    let c = Client::new(&a.conn)?;
    let query = if a.force { "?force=true" } else { "" };
    for name in &a.names {
        let out: DeleteAnswer = c.delete_as(&format!(
            "/api/v1/{}/{}{query}",
            kind_path(a.kind),
            enc(name)
        ))?;
        crate::outln!("{}/{name} {}", kind_name(a.kind), escape(&out.action));
    }
    Ok(())
}

/// `hearth label`.
#[derive(Debug, Args)]
pub struct LabelArgs {
    /// node.
    #[arg(value_enum)]
    kind: Kind,
    /// The node.
    name: String,
    /// `key=value` to set, `key-` to remove.
    #[arg(required = true, value_name = "KEY=VALUE|KEY-")]
    labels: Vec<String>,
    /// Change a label that already has another value.
    #[arg(long)]
    overwrite: bool,
    #[command(flatten)]
    conn: Conn,
}

/// `hearth label node NAME k=v k2-`.
pub fn label(a: &LabelArgs) -> anyhow::Result<()> {
    if a.kind != Kind::Node {
        return Err(Usage(
            "only nodes can be labelled (label MachineConfigs and pools in their manifests)".into(),
        )
        .into());
    }
    let mut set = BTreeMap::new();
    let mut remove = Vec::new();
    for l in &a.labels {
        if let Some((k, v)) = l.split_once('=') {
            set.insert(k.to_string(), v.to_string());
        } else if let Some(k) = l.strip_suffix('-') {
            remove.push(k.to_string());
        } else {
            return Err(Usage(format!("{l:?}: expected KEY=VALUE or KEY-")).into());
        }
    }
    let c = Client::new(&a.conn)?;
    let _: LabelAnswer = c.post_as(
        &format!("/api/v1/nodes/{}/labels", enc(&a.name)),
        &LabelRequest {
            set,
            remove,
            overwrite: a.overwrite,
        },
    )?;
    crate::outln!("node/{} labeled", a.name);
    Ok(())
}

/// `hearth pause` / `hearth resume`.
#[derive(Debug, Args)]
pub struct PauseArgs {
    /// mcp.
    #[arg(value_enum)]
    kind: Kind,
    /// The pool.
    name: String,
    #[command(flatten)]
    conn: Conn,
}

/// `hearth pause|resume mcp POOL`.
pub fn pause(a: &PauseArgs, paused: bool) -> anyhow::Result<()> {
    if a.kind != Kind::Mcp {
        return Err(Usage("only pools (mcp) can be paused and resumed".into()).into());
    }
    let c = Client::new(&a.conn)?;
    let verb = if paused { "pause" } else { "resume" };
    let out: PauseAnswer = c.post_as(
        &format!("/api/v1/pools/{}/{verb}", enc(&a.name)),
        &serde_json::json!({}),
    )?;
    let what = if paused { "paused" } else { "resumed" };
    if out.changed {
        crate::outln!("machineconfigpool/{} {what}", a.name);
    } else {
        crate::outln!("machineconfigpool/{} already {what}", a.name);
    }
    Ok(())
}

/// `hearth bootstrap-token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The pool the token enrolls nodes into.
    pool: String,
    /// Validity in seconds (default: the server's --bootstrap-token-ttl, 24 h; 0: no expiry).
    #[arg(long, value_name = "SECONDS")]
    ttl: Option<u64>,
    /// A first-boot token bound to this one node (not yet enrolled): `/config/POOL` with it
    /// serves the node's own config (its pool's plus its overlays, e.g. static addresses), and
    /// it enrolls only this name. The pool's token stays valid.
    #[arg(long, value_name = "NAME")]
    node: Option<String>,
    #[command(flatten)]
    conn: Conn,
}

/// `hearth bootstrap-token POOL [--node NAME]`: a new bootstrap token (the pool's replaces the
/// pool's previous one; a node's, that node's previous one).
pub fn bootstrap_token(a: &TokenArgs) -> anyhow::Result<()> {
    let c = Client::new(&a.conn)?;
    let out: TokenAnswer = c.post_as(
        &format!("/api/v1/pools/{}/bootstrap-token", enc(&a.pool)),
        &TokenRequest {
            ttl_seconds: a.ttl,
            node: a.node.clone(),
        },
    )?;
    crate::outln!("{}", escape(&out.token));
    if let Some(node) = &out.node {
        let expiry = match out.expires_at.as_deref() {
            Some(e) => format!("expires {}", escape(e)),
            None => "no expiry".into(),
        };
        eprintln!(
            "first-boot token for node {} in pool {} ({expiry}); point its Ignition at \
             /config/{} with it; the pool's token still works",
            escape(node),
            escape(&a.pool),
            escape(&a.pool)
        );
        return Ok(());
    }
    let expiry = match out.expires_at.as_deref() {
        Some(e) => format!("expires {}", escape(e)),
        None => "no expiry".into(),
    };
    eprintln!(
        "bootstrap token for pool {} ({expiry}){}",
        escape(&a.pool),
        if out.replaced {
            "; the previous one no longer works"
        } else {
            ": the pool's first"
        }
    );
    Ok(())
}

/// `hearth rollback`.
#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// mcp.
    #[arg(value_enum)]
    kind: Kind,
    /// The pool: its target becomes the rendered config before the current one, rolled out like
    /// any change (maxUnavailable, pause, maintenance windows), until its configs change.
    /// Again while rolled back: one further back. Recorded as an event with your identity.
    name: String,
    #[command(flatten)]
    conn: Conn,
}

/// `hearth rollback mcp POOL`.
pub fn rollback(a: &RollbackArgs) -> anyhow::Result<()> {
    if a.kind != Kind::Mcp {
        return Err(Usage("only pools (mcp) can be rolled back".into()).into());
    }
    let c = Client::new(&a.conn)?;
    let out: RollbackAnswer = c.post_as(
        &format!("/api/v1/pools/{}/rollback", enc(&a.name)),
        &serde_json::json!({}),
    )?;
    crate::outln!(
        "machineconfigpool/{} rolled back to {} (from {}); `hearth rollout status {}` follows it",
        a.name,
        escape(&out.to),
        escape(&out.from),
        a.name
    );
    Ok(())
}

/// `hearth node`.
#[derive(Debug, Args)]
pub struct NodeArgs {
    #[command(subcommand)]
    command: NodeCommand,
}

#[derive(Debug, clap::Subcommand)]
enum NodeCommand {
    /// Revoke a node's credential (a reinstalled machine that lost it) so that it can enroll
    /// again with its pool's bootstrap token; its labels, status and reboot slot are kept.
    ResetCredential {
        /// The node.
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Hold a node on one rendered config of its pool, whatever the pool renders later (it is
    /// moved there under the pool's rollout rules if it runs another). Recorded as an event with
    /// your identity; `hearth node unpin` lets it follow its pool again.
    Pin {
        /// The node.
        name: String,
        /// A rendered config of the node's pool (`rendered-<pool>-<hash>`; `hearth get mc`).
        config: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Let a pinned node follow its pool again.
    Unpin {
        /// The node.
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Take a node out of rollouts (hardware under repair): it gets no new desired config, and
    /// neither its state nor its silence holds up or halts its pool's rollout. Recorded as an
    /// event with your identity; `hearth node include` puts it back.
    Exclude {
        /// The node.
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Put an excluded node back into rollouts.
    Include {
        /// The node.
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Make a node re-apply its config in full over drift, once (the MCO's force file,
    /// remotely), through its journal-guarded apply. Recorded as an event with your identity;
    /// `hearth describe node` shows the request and, once the node reported it, its outcome.
    Force {
        /// The node.
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Put one drifted file back as the node's current config has it, once. Refused for a path
    /// the config does not write (its files, unit files and drop-ins). Recorded as an event
    /// with your identity; `hearth describe node` shows the outcome.
    RestoreFile {
        /// The node.
        name: String,
        /// The file's absolute path, as the config names it.
        path: String,
        #[command(flatten)]
        conn: Conn,
    },
}

/// `hearth node reset-credential|pin|unpin|exclude|include|force|restore-file NODE`.
pub fn node(a: &NodeArgs) -> anyhow::Result<()> {
    match &a.command {
        NodeCommand::ResetCredential { name, conn } => {
            let c = Client::new(conn)?;
            let out: CredentialReset = c.post_as(
                &format!("/api/v1/nodes/{}/reset-credential", enc(name)),
                &serde_json::json!({}),
            )?;
            if let Some(w) = &out.warning {
                eprintln!("warning: {}", escape(w));
            }
            if out.credential_revoked {
                crate::outln!("node/{name} credential revoked: the node may enroll again with its pool's bootstrap token");
            } else {
                crate::outln!(
                    "node/{name} had no credential: it may enroll with its pool's bootstrap token"
                );
            }
        }
        NodeCommand::Pin { name, config, conn } => {
            let c = Client::new(conn)?;
            let out: HoldAnswer = c.post_as(
                &format!("/api/v1/nodes/{}/pin", enc(name)),
                &PinRequest {
                    config: config.clone(),
                },
            )?;
            print_hold(name, &out);
        }
        NodeCommand::Unpin { name, conn } => {
            let c = Client::new(conn)?;
            let out: HoldAnswer = c.delete_as(&format!("/api/v1/nodes/{}/pin", enc(name)))?;
            print_hold(name, &out);
        }
        NodeCommand::Exclude { name, conn } => {
            let c = Client::new(conn)?;
            let out: HoldAnswer = c.post_as(
                &format!("/api/v1/nodes/{}/exclude", enc(name)),
                &serde_json::json!({}),
            )?;
            print_hold(name, &out);
        }
        NodeCommand::Include { name, conn } => {
            let c = Client::new(conn)?;
            let out: HoldAnswer = c.delete_as(&format!("/api/v1/nodes/{}/exclude", enc(name)))?;
            print_hold(name, &out);
        }
        NodeCommand::Force { name, conn } => {
            let c = Client::new(conn)?;
            let out: RequestAnswer = c.post_as(
                &format!("/api/v1/nodes/{}/force", enc(name)),
                &serde_json::json!({}),
            )?;
            print_request(name, &out);
        }
        NodeCommand::RestoreFile { name, path, conn } => {
            let c = Client::new(conn)?;
            let out: RequestAnswer = c.post_as(
                &format!("/api/v1/nodes/{}/restore-file", enc(name)),
                &RestoreFileRequest { path: path.clone() },
            )?;
            print_request(name, &out);
        }
    }
    Ok(())
}

/// One line: the request, its id, and where to see its outcome. Nothing is done yet: the node
/// acts on it when it next hears from the server.
fn print_request(name: &str, out: &RequestAnswer) {
    let what = match &out.path {
        Some(p) => format!("restore of {}", escape(p)),
        None => "re-apply in full (force)".into(),
    };
    let state = if out.outcome == "unchanged" {
        "already requested"
    } else {
        "requested"
    };
    crate::outln!(
        "node/{name} {what} {state} (request {}): the node acts on it once; `hearth describe node {name}` shows its outcome",
        out.id
    );
}

/// One line: what changed, and where the node stands now.
fn print_hold(name: &str, out: &HoldAnswer) {
    let pinned = match &out.pinned {
        Some(c) => format!("pinned to {}", escape(c)),
        None => "follows its pool".into(),
    };
    let rollouts = if out.excluded {
        "excluded from rollouts"
    } else {
        "in rollouts"
    };
    crate::outln!("node/{name} {}: {pinned}, {rollouts}", escape(&out.action));
}
