//! `hearth describe`: one object in detail, with its conditions, nodes and recent events.

use super::conn::{enc, Client, Conn};
use super::kind::Kind;
use super::state::{no_state_reason, node_state, progress};
use super::table::{age_of, indent_table, opt, text, yes};
use crate::term::{escape, escape_keep_newlines};
use clap::Args;
use hearth_api::views::{EventView, List, NodeView, PoolView, SELECTS_NO_NODE};
use hearth_api::NodeState;
use serde_json::json;
use std::collections::BTreeMap;

/// The object `describe` shows.
enum Object {
    Node(Box<NodeView>),
    Pool(Box<PoolView>),
}

/// `hearth describe`.
#[derive(Debug, Args)]
pub struct DescribeArgs {
    /// node or mcp.
    #[arg(value_enum)]
    kind: Kind,
    /// The object.
    name: String,
    #[command(flatten)]
    conn: Conn,
}

/// `hearth describe node|mcp NAME`.
pub fn describe(a: &DescribeArgs) -> anyhow::Result<()> {
    let c = Client::new(&a.conn)?;
    let (obj, object) = match a.kind {
        Kind::Node => (
            Object::Node(c.get_as(&format!("/api/v1/nodes/{}", enc(&a.name)))?),
            format!("Node/{}", a.name),
        ),
        Kind::Mcp => (
            Object::Pool(c.get_as(&format!("/api/v1/pools/{}", enc(&a.name)))?),
            format!("MachineConfigPool/{}", a.name),
        ),
        Kind::Mc => {
            let v = c.get(&format!("/api/v1/machineconfigs/{}", enc(&a.name)))?;
            crate::out!("{}", crate::yaml::to_string(&v));
            return Ok(());
        }
    };
    let events: List<EventView> =
        c.get_as(&format!("/api/v1/events?object={}&limit=20", enc(&object)))?;
    let mut out = String::new();
    let field = |out: &mut String, k: &str, v: String| {
        out.push_str(&format!("{:<16}{v}\n", format!("{k}:")))
    };
    let labels = |m: &BTreeMap<String, String>| -> String {
        if m.is_empty() {
            return "<none>".into();
        }
        m.iter()
            .map(|(k, v)| format!("{}={}", escape(k), escape(v)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    field(&mut out, "Name", a.name.clone());
    match obj {
        Object::Node(n) => {
            let st = &n.status;
            field(&mut out, "Pool", opt(st.pool.as_deref()));
            field(&mut out, "Labels", labels(&n.metadata.labels));
            field(&mut out, "State", node_state(st).to_string());
            field(
                &mut out,
                "Reason",
                match no_state_reason(st) {
                    Some(why) if st.reason.is_none() => why.to_string(),
                    _ => opt(st.reason.as_deref()),
                },
            );
            if let Some(next) = next_step(st.state, &a.name) {
                field(&mut out, "Next step", next);
            }
            if let Some(p) = progress(st) {
                field(&mut out, "Progress", p);
            }
            field(&mut out, "Current config", opt(st.current.as_deref()));
            field(&mut out, "Desired config", opt(st.desired.as_deref()));
            if st.agent_desired.is_some() && st.agent_desired != st.desired {
                field(
                    &mut out,
                    "Agent working on",
                    opt(st.agent_desired.as_deref()),
                );
            }
            field(&mut out, "Target config", opt(st.target.as_deref()));
            if let Some(p) = &st.pinned {
                field(
                    &mut out,
                    "Pinned",
                    format!(
                        "to {} by {} since {}",
                        escape(&p.config),
                        escape(&p.by),
                        escape(&p.since)
                    ),
                );
            }
            if let Some(h) = &st.excluded {
                field(
                    &mut out,
                    "Excluded",
                    format!(
                        "from rollouts by {} since {}",
                        escape(&h.by),
                        escape(&h.since)
                    ),
                );
            }
            field(&mut out, "Ready", yes(st.ready));
            field(
                &mut out,
                "Pending reboot",
                if st.pending_reboot { "yes" } else { "no" }.into(),
            );
            field(
                &mut out,
                "Reboot slot",
                match &st.reboot_slot {
                    None => "none".into(),
                    Some(t) => format!("held since {}", text(t)),
                },
            );
            field(
                &mut out,
                "Enrolled",
                if st.enrolled {
                    opt(st.enrolled_at.as_deref())
                } else {
                    "no".into()
                },
            );
            field(
                &mut out,
                "Last report",
                match &st.last_report {
                    None => "never".into(),
                    Some(t) => format!("{} ({} ago)", text(t), age_of(Some(t))),
                },
            );
            if let Some(e) = &st.error {
                field(&mut out, "Server problem", text(e));
            }
            if let Some(os) = &st.os {
                field(&mut out, "OS image", text(&os.image));
                if let Some(d) = &os.image_digest {
                    field(&mut out, "Image digest", text(d));
                }
                let version = os
                    .version
                    .as_deref()
                    .map(|v| format!(" (version {})", text(v)))
                    .unwrap_or_default();
                field(
                    &mut out,
                    "OS deployment",
                    format!("{}{version}", text(&os.deployment)),
                );
            }
            if st.drift.is_empty() {
                field(&mut out, "Drift", "none".into());
            } else {
                out.push_str("Drift:\n");
                for d in &st.drift {
                    out.push_str(&format!("  - {}\n", text(d)));
                }
            }
            if !st.requests.is_empty() {
                out.push_str("Requests:\n");
                let mut rows = vec![vec![
                    "ID".to_string(),
                    "ACTION".into(),
                    "STATE".into(),
                    "BY".into(),
                    "REQUESTED".into(),
                    "OUTCOME".into(),
                ]];
                for r in &st.requests {
                    let action = match &r.path {
                        Some(p) => format!("{} {}", r.action, text(p)),
                        None => r.action.to_string(),
                    };
                    rows.push(vec![
                        r.id.to_string(),
                        action,
                        text(&r.state),
                        text(&r.by),
                        text(&r.requested_at),
                        opt(r.message.as_deref()),
                    ]);
                }
                out.push_str(&indent_table(&rows));
            }
            if !st.actions.is_empty() {
                out.push_str(&super::describe_actions::actions(&st.actions));
            }
            if !st.history.is_empty() {
                out.push_str("History:\n");
                let mut rows = vec![vec![
                    "TIME".to_string(),
                    "STATE".into(),
                    "DESIRED".into(),
                    "REASON".into(),
                ]];
                for h in &st.history {
                    rows.push(vec![
                        text(&h.time),
                        h.state.to_string(),
                        opt(h.desired.as_deref()),
                        opt(h.reason.as_deref()),
                    ]);
                }
                out.push_str(&indent_table(&rows));
            }
        }
        Object::Pool(p) => {
            let st = &p.status;
            field(&mut out, "Paused", yes(p.spec.paused));
            field(
                &mut out,
                "MaxUnavailable",
                super::table::s(&json!(p.spec.max_unavailable)),
            );
            field(
                &mut out,
                "Target config",
                opt(p.spec.configuration.name.as_deref()),
            );
            field(
                &mut out,
                "Current config",
                opt(st.configuration.name.as_deref()),
            );
            if let Some(rb) = &st.rollback {
                field(
                    &mut out,
                    "Rolled back",
                    format!(
                        "to {} from {} by {} since {} (until the pool's configs change)",
                        escape(&rb.to),
                        escape(&rb.from),
                        escape(&rb.by),
                        escape(&rb.since)
                    ),
                );
            }
            let sources: Vec<String> = st
                .configuration
                .source
                .iter()
                .map(|x| text(&x.name))
                .collect();
            field(
                &mut out,
                "Rendered from",
                if sources.is_empty() {
                    "-".into()
                } else {
                    sources.join(", ")
                },
            );
            if let Some(m) = &st.maintenance {
                field(
                    &mut out,
                    "Maintenance",
                    format!(
                        "{} ({})",
                        text(m.windows.as_deref().unwrap_or("")),
                        text(&m.message)
                    ),
                );
                if let Some(w) = &m.waiting {
                    field(&mut out, "Waiting", text(w));
                }
            }
            field(
                &mut out,
                "Machines",
                if st.machine_count == 0 {
                    format!("none: {SELECTS_NO_NODE} (it updates nothing; Updated stays True)")
                } else {
                    format!(
                        "{} total, {} ready, {} updated, {} degraded, {} unavailable",
                        st.machine_count,
                        st.ready_machine_count,
                        st.updated_machine_count,
                        st.degraded_machine_count,
                        st.unavailable_machine_count
                    )
                },
            );
            out.push_str("Conditions:\n");
            let mut rows = vec![vec![
                "TYPE".to_string(),
                "STATUS".into(),
                "REASON".into(),
                "MESSAGE".into(),
            ]];
            for cnd in &st.conditions {
                rows.push(vec![
                    text(&cnd.kind),
                    text(&cnd.status),
                    opt(Some(&cnd.reason)),
                    opt(Some(&cnd.message)),
                ]);
            }
            out.push_str(&indent_table(&rows));
        }
    }
    let events = events.items;
    if events.is_empty() {
        out.push_str("Events:         <none>\n");
    } else {
        out.push_str("Events:\n");
        let mut rows = vec![vec![
            "TIME".to_string(),
            "TYPE".into(),
            "REASON".into(),
            "MESSAGE".into(),
        ]];
        for e in events {
            rows.push(vec![
                text(&e.time),
                text(&e.kind),
                text(&e.reason),
                text(&e.message),
            ]);
        }
        out.push_str(&indent_table(&rows));
    }
    // Every field above is escaped; this second guard keeps only the lines composed here.
    crate::out!("{}", escape_keep_newlines(&out));
    Ok(())
}

/// What an admin does about a node that failed, once the reason is read.
fn next_step(state: Option<NodeState>, node: &str) -> Option<String> {
    match state? {
        NodeState::Degraded => Some(format!(
            "fix what the reason names (on the node, or in the config), then `hearth node force \
             {}` applies the same config again; a corrected config reaches it through the \
             rollout",
            escape(node)
        )),
        NodeState::Unreconcilable => Some(
            "this config cannot be applied to this node: change the config (the reason names \
             the field), or move the node to a pool whose config it can run"
                .into(),
        ),
        _ => None,
    }
}
