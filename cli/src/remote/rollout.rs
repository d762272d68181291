//! `hearth rollout status`: how far a pool's rollout is, once or followed with `--watch`.

use super::conn::{enc, typed, Client, Conn};
use super::state::{node_state, progress};
use super::table::{opt, table, text};
use crate::term::escape;
use crate::usage::InvalidInput;
use anyhow::anyhow;
use clap::Args;
use hearth_api::views::{ExcludedNodes, NodeView, PoolView};
use hearth_api::NodeState;
use serde_json::Value;
use std::io::Write;
use std::time::Duration;

/// `hearth rollout`.
#[derive(Debug, Args)]
pub struct RolloutArgs {
    #[command(subcommand)]
    command: RolloutCommand,
}

#[derive(Debug, clap::Subcommand)]
enum RolloutCommand {
    /// How far a pool's rollout is: per node, and the pool's counts; exit 1 when it is halted
    /// by a degraded node. With --watch, follow it until every node runs the target (exit 0),
    /// it halts on a degraded node or --timeout passes (exit 1).
    Status {
        /// The pool.
        pool: String,
        /// Follow the rollout.
        #[arg(short, long)]
        watch: bool,
        /// With --watch: give up after this many seconds.
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<u64>,
        /// Leave out the header line of the node table.
        #[arg(long)]
        no_headers: bool,
        #[command(flatten)]
        conn: Conn,
    },
}

/// `hearth rollout status POOL [--watch]`.
pub fn rollout(a: &RolloutArgs) -> anyhow::Result<()> {
    let RolloutCommand::Status {
        pool,
        watch,
        timeout,
        no_headers,
        conn,
    } = &a.command;
    let c = Client::new(conn)?;
    let started = std::time::Instant::now();
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut last_line = String::new();
    loop {
        let p: PoolView = c.get_as(&format!("/api/v1/pools/{}", enc(pool)))?;
        let st = &p.status;
        let target = text(p.spec.configuration.name.as_deref().unwrap_or(""));
        let total = st.machine_count;
        let updated = st.updated_machine_count;
        let degraded = st.degraded_machine_count;
        let unavailable = st.unavailable_machine_count;
        let done = st.condition("Updated") == Some("True");
        let halted = st.rollout_halted_by.clone();
        let paused = p.spec.paused;
        if !*watch {
            // The table's nodes, read before anything is printed (a failed read prints nothing):
            // the pool's nodes in the summary view (nothing read back from the server's store).
            let mut nodes: Vec<NodeView> = Vec::new();
            super::pages::nodes(&c, Some(pool), super::pages::View::Summary, |page| {
                nodes.extend(typed::<Vec<NodeView>>(Value::Array(page), "/api/v1/nodes")?);
                Ok(())
            })?;
            crate::outln!(
                "pool {pool}: {updated} of {total} node(s) run {} ({unavailable} updating, {degraded} degraded){}",
                if target.is_empty() { "no config yet" } else { &target },
                if paused { ", paused" } else { "" }
            );
            if let Some(n) = &halted {
                let n = escape(n);
                crate::outln!("rollout halted: node {n} is degraded (hearth describe node {n})");
            }
            // A halted rollout is a failure to a script, with --watch or without.
            let exit = if halted.is_some() {
                Err(InvalidInput.into())
            } else {
                Ok(())
            };
            if let Some(w) = st.maintenance.as_ref().and_then(|m| m.waiting.as_deref()) {
                crate::outln!("reboots {}", escape(w));
            }
            if let Some(x) = excluded_line(&st.excluded) {
                crate::outln!("{x}");
            }
            let rows: Vec<Vec<String>> = nodes
                .iter()
                .map(|n| {
                    let ns = &n.status;
                    let on_target = !target.is_empty()
                        && ns.current == ns.target
                        && ns.state == Some(NodeState::Done);
                    vec![
                        text(&n.metadata.name),
                        node_state(ns).to_string(),
                        if on_target && ns.pinned.is_some() {
                            "yes (pinned)".into()
                        } else if on_target {
                            "yes".into()
                        } else if ns.excluded.is_some() {
                            "excluded".into()
                        } else if ns.desired == ns.target {
                            "in progress".into()
                        } else {
                            "waiting".into()
                        },
                        progress(ns).unwrap_or_else(|| "-".into()),
                        opt(ns.reason.as_deref()),
                    ]
                })
                .collect();
            if !rows.is_empty() {
                table(
                    &["NODE", "STATE", "UPDATED", "PROGRESS", "REASON"],
                    &rows,
                    *no_headers,
                );
            }
            return exit;
        }
        let width = 30usize;
        let filled = if total == 0 {
            width
        } else {
            (updated as usize * width) / total as usize
        };
        // What the rollout waits for, when it is not the nodes themselves.
        let waits = if paused {
            format!(" (paused: `hearth resume mcp {}` goes on)", escape(pool))
        } else if let Some(w) = st.maintenance.as_ref().and_then(|m| m.waiting.as_deref()) {
            format!(" (reboots {})", escape(w))
        } else {
            String::new()
        };
        let line = format!(
            "[{}{}] {updated}/{total} updated, {unavailable} updating, {degraded} degraded{waits}",
            "#".repeat(filled),
            "-".repeat(width - filled),
        );
        if line != last_line {
            if tty {
                crate::out!("\r{line}\x1b[K");
                let _ = std::io::stdout().flush();
            } else {
                crate::outln!("{line}");
            }
            last_line = line;
        }
        if done {
            if tty {
                crate::outln!();
            }
            crate::outln!("pool {pool}: every node runs {target}");
            return Ok(());
        }
        // Only nodes an admin excluded are left: the rollout is over without them.
        let excluded = st.excluded.count;
        if !paused && halted.is_none() && excluded > 0 && updated + excluded >= total {
            if tty {
                crate::outln!();
            }
            crate::outln!("pool {pool}: every node in the rollout runs {target}");
            if let Some(x) = excluded_line(&st.excluded) {
                crate::outln!("{x}");
            }
            return Ok(());
        }
        if let Some(n) = halted {
            if tty {
                crate::outln!();
            }
            // The watch reads the pool's counts alone; the halting node is read once, here.
            let reason = match c.get_as::<NodeView>(&format!("/api/v1/nodes/{}", enc(&n))) {
                Ok(node) => opt(node.status.reason.as_deref()),
                Err(e) => format!("(its reason could not be read: {e:#})"),
            };
            eprintln!(
                "error: the rollout of pool {pool} halted: node {} is degraded: {reason}",
                escape(&n)
            );
            return Err(InvalidInput.into());
        }
        if let Some(t) = timeout {
            if started.elapsed() >= Duration::from_secs(*t) {
                if tty {
                    crate::outln!();
                }
                return Err(anyhow!(
                    "timed out after {t} s: {updated} of {total} node(s) updated"
                ));
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The pool's excluded nodes that do not run its target, and how one comes back.
fn excluded_line(x: &ExcludedNodes) -> Option<String> {
    if x.is_none() {
        return None;
    }
    let names: Vec<String> = x.names.iter().map(|n| escape(n).into_owned()).collect();
    let more = x.count.saturating_sub(names.len() as u64);
    Some(format!(
        "excluded from rollouts, not updated: {}{} (`hearth node include NODE` takes one back)",
        names.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    ))
}
