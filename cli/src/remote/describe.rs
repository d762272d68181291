//! `hearth describe`: one object in detail, with its conditions, nodes and recent events.

use super::conn::{enc, Client, Conn};
use super::table::{age, dash, items, s};
use super::Kind;
use crate::term::{escape, escape_keep_newlines};
use clap::Args;
use serde_json::Value;

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
            c.get(&format!("/api/v1/nodes/{}", enc(&a.name)))?,
            format!("Node/{}", a.name),
        ),
        Kind::Mcp => (
            c.get(&format!("/api/v1/pools/{}", enc(&a.name)))?,
            format!("MachineConfigPool/{}", a.name),
        ),
        Kind::Mc => {
            let v = c.get(&format!("/api/v1/machineconfigs/{}", enc(&a.name)))?;
            print!("{}", crate::yaml::to_string(&v));
            return Ok(());
        }
    };
    let events = c.get(&format!("/api/v1/events?object={}&limit=20", enc(&object)))?;
    let mut out = String::new();
    let field = |out: &mut String, k: &str, v: String| {
        out.push_str(&format!("{:<16}{v}\n", format!("{k}:")))
    };
    let labels = |v: &Value| -> String {
        v.as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{}={}", escape(k), escape(v.as_str().unwrap_or(""))))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "<none>".into())
    };
    field(&mut out, "Name", a.name.clone());
    match a.kind {
        Kind::Node => {
            let st = &obj["status"];
            field(&mut out, "Pool", dash(&st["pool"]));
            field(&mut out, "Labels", labels(&obj["metadata"]["labels"]));
            let state = if st["state"].is_null() {
                "Unknown (no report yet)".to_string()
            } else {
                s(&st["state"])
            };
            field(&mut out, "State", state);
            field(&mut out, "Reason", dash(&st["reason"]));
            if let Some(p) = st["progress"].as_object() {
                let phase = escape(p.get("phase").and_then(Value::as_str).unwrap_or("?"));
                let step = p.get("step").and_then(Value::as_u64).unwrap_or(0);
                let total = p.get("total").and_then(Value::as_u64).unwrap_or(0);
                let mut text = format!("{phase}, step {} of {total}", step + 1);
                if let Some(f) = p.get("failure").and_then(Value::as_str) {
                    text.push_str(&format!(" (undoing: {})", escape(f)));
                }
                field(&mut out, "Progress", text);
            }
            field(&mut out, "Current config", dash(&st["current"]));
            field(&mut out, "Desired config", dash(&st["desired"]));
            if st["agentDesired"] != st["desired"] && !st["agentDesired"].is_null() {
                field(&mut out, "Agent working on", dash(&st["agentDesired"]));
            }
            field(&mut out, "Target config", dash(&st["target"]));
            field(&mut out, "Ready", s(&st["ready"]));
            field(
                &mut out,
                "Pending reboot",
                if st["pendingReboot"] == true {
                    "yes".into()
                } else {
                    "no".into()
                },
            );
            field(
                &mut out,
                "Reboot slot",
                if st["rebootSlot"].is_null() {
                    "none".into()
                } else {
                    format!("held since {}", s(&st["rebootSlot"]))
                },
            );
            field(
                &mut out,
                "Enrolled",
                if st["enrolled"] == true {
                    dash(&st["enrolledAt"])
                } else {
                    "no".into()
                },
            );
            field(
                &mut out,
                "Last report",
                if st["lastReport"].is_null() {
                    "never".into()
                } else {
                    format!("{} ({} ago)", s(&st["lastReport"]), age(&st["lastReport"]))
                },
            );
            if let Some(e) = st["error"].as_str() {
                field(&mut out, "Server problem", escape(e).into_owned());
            }
            let drift = st["drift"].as_array().cloned().unwrap_or_default();
            if drift.is_empty() {
                field(&mut out, "Drift", "none".into());
            } else {
                out.push_str("Drift:\n");
                for d in drift {
                    out.push_str(&format!("  - {}\n", s(&d)));
                }
            }
            let history = st["history"].as_array().cloned().unwrap_or_default();
            if !history.is_empty() {
                out.push_str("History:\n");
                let mut rows = vec![vec![
                    "TIME".to_string(),
                    "STATE".into(),
                    "DESIRED".into(),
                    "REASON".into(),
                ]];
                for h in history {
                    rows.push(vec![
                        s(&h["time"]),
                        s(&h["state"]),
                        dash(&h["desired"]),
                        dash(&h["reason"]),
                    ]);
                }
                out.push_str(&indent_table(&rows));
            }
        }
        _ => {
            let st = &obj["status"];
            field(&mut out, "Paused", s(&obj["spec"]["paused"]));
            field(
                &mut out,
                "MaxUnavailable",
                s(&obj["spec"]["maxUnavailable"]),
            );
            field(
                &mut out,
                "Target config",
                dash(&obj["spec"]["configuration"]["name"]),
            );
            field(
                &mut out,
                "Current config",
                dash(&st["configuration"]["name"]),
            );
            let sources: Vec<String> = st["configuration"]["source"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|x| s(&x["name"]))
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
            if !st["maintenance"].is_null() {
                let m = &st["maintenance"];
                field(
                    &mut out,
                    "Maintenance",
                    format!("{} ({})", s(&m["windows"]), s(&m["message"])),
                );
                if let Some(w) = m["waiting"].as_str() {
                    field(&mut out, "Waiting", escape(w).into_owned());
                }
            }
            field(
                &mut out,
                "Machines",
                format!(
                    "{} total, {} ready, {} updated, {} degraded, {} unavailable",
                    s(&st["machineCount"]),
                    s(&st["readyMachineCount"]),
                    s(&st["updatedMachineCount"]),
                    s(&st["degradedMachineCount"]),
                    s(&st["unavailableMachineCount"])
                ),
            );
            out.push_str("Conditions:\n");
            let mut rows = vec![vec![
                "TYPE".to_string(),
                "STATUS".into(),
                "REASON".into(),
                "MESSAGE".into(),
            ]];
            for cnd in st["conditions"].as_array().into_iter().flatten() {
                rows.push(vec![
                    s(&cnd["type"]),
                    s(&cnd["status"]),
                    dash(&cnd["reason"]),
                    dash(&cnd["message"]),
                ]);
            }
            out.push_str(&indent_table(&rows));
        }
    }
    let events = items(&events);
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
                s(&e["time"]),
                s(&e["type"]),
                s(&e["reason"]),
                s(&e["message"]),
            ]);
        }
        out.push_str(&indent_table(&rows));
    }
    // Every field above is escaped; this second guard keeps only the lines composed here.
    print!("{}", escape_keep_newlines(&out));
    Ok(())
}

fn indent_table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::from("  ");
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
