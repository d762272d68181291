//! `hearth get`: list or show MachineConfigs, pools and nodes as a table, JSON, YAML or names.
//!
//! Tables of pools and nodes read the server's answers as `hearth_api`'s views; `-o json` and
//! `-o yaml` print the server's documents as they came (so a field a newer v1 server adds is
//! not lost), made safe for the terminal.

use super::conn::{enc, typed, Client, Conn};
use super::state::node_state;
use super::table::{age, age_of, items, opt, s, table, text, yes};
use super::{kind_name, kind_path, Kind, Output};
use crate::term::{escape, json_safe};
use clap::Args;
use hearth_api::views::{Maintenance, NodeView, PoolView, WindowState};
use serde_json::{json, Value};

/// `hearth get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// mc, mcp or nodes.
    #[arg(value_enum)]
    kind: Kind,
    /// One object.
    name: Option<String>,
    /// Output format (default: a table).
    #[arg(short = 'o', long = "output", value_enum)]
    output: Option<Output>,
    #[command(flatten)]
    conn: Conn,
}

/// `hearth get`.
pub fn get(a: &GetArgs) -> anyhow::Result<()> {
    let c = Client::new(&a.conn)?;
    let mut objects: Vec<Value> = match (&a.name, a.kind) {
        (Some(n), k) => vec![c.get(&format!("/api/v1/{}/{}", kind_path(k), enc(n)))?],
        (None, Kind::Mc) => {
            let mut v = items(&c.get("/api/v1/machineconfigs")?);
            v.extend(items(&c.get("/api/v1/renderedconfigs")?));
            v.sort_by(|x, y| s(&x["metadata"]["name"]).cmp(&s(&y["metadata"]["name"])));
            v
        }
        (None, k) => items(&c.get(&format!("/api/v1/{}", kind_path(k)))?),
    };
    match a.output {
        Some(Output::Json) => {
            let v = if a.name.is_some() {
                objects.remove(0)
            } else {
                json!({"apiVersion": "v1", "kind": "List", "items": objects})
            };
            crate::outln!("{}", json_safe(&serde_json::to_string_pretty(&v)?));
        }
        Some(Output::Yaml) => {
            let v = if a.name.is_some() {
                objects.remove(0)
            } else {
                json!({"apiVersion": "v1", "kind": "List", "items": objects})
            };
            crate::out!("{}", crate::yaml::to_string(&v));
        }
        Some(Output::Name) => {
            for o in &objects {
                crate::outln!("{}/{}", kind_name(a.kind), s(&o["metadata"]["name"]));
            }
        }
        None | Some(Output::Wide) => {
            let wide = a.output == Some(Output::Wide);
            if objects.is_empty() {
                eprintln!("No resources found");
                return Ok(());
            }
            match a.kind {
                Kind::Mcp => {
                    let mut header = vec![
                        "NAME",
                        "CONFIG",
                        "UPDATED",
                        "UPDATING",
                        "DEGRADED",
                        "MACHINECOUNT",
                        "READYMACHINECOUNT",
                        "UPDATEDMACHINECOUNT",
                        "DEGRADEDMACHINECOUNT",
                        "AGE",
                    ];
                    if wide {
                        header.extend(["PAUSED", "MAXUNAVAILABLE", "TARGET", "MAINTENANCE"]);
                    }
                    let pools: Vec<PoolView> = typed(Value::Array(objects), "/api/v1/pools")?;
                    let condition = |p: &PoolView, t: &str| {
                        p.status
                            .condition(t)
                            .map(text)
                            .unwrap_or_else(|| "Unknown".into())
                    };
                    let rows: Vec<Vec<String>> = pools
                        .iter()
                        .map(|p| {
                            let st = &p.status;
                            let mut r = vec![
                                text(&p.metadata.name),
                                opt(st.configuration.name.as_deref()),
                                condition(p, "Updated"),
                                condition(p, "Updating"),
                                condition(p, "Degraded"),
                                st.machine_count.to_string(),
                                st.ready_machine_count.to_string(),
                                st.updated_machine_count.to_string(),
                                st.degraded_machine_count.to_string(),
                                age_of(p.metadata.creation_timestamp.as_deref()),
                            ];
                            if wide {
                                r.push(yes(p.spec.paused));
                                r.push(s(&json!(p.spec.max_unavailable)));
                                r.push(text(p.spec.configuration.name.as_deref().unwrap_or("")));
                                r.push(maintenance_cell(st.maintenance.as_ref()));
                            }
                            r
                        })
                        .collect();
                    table(&header, &rows);
                }
                Kind::Mc => {
                    let mut header =
                        vec!["NAME", "GENERATEDBYCONTROLLER", "IGNITIONVERSION", "AGE"];
                    if wide {
                        header.push("ROLE");
                    }
                    let rows: Vec<Vec<String>> = objects
                        .iter()
                        .map(|m| {
                            let mut r = vec![
                                s(&m["metadata"]["name"]),
                                s(&m["metadata"]["annotations"]
                                    ["machineconfiguration.openshift.io/generated-by-controller-version"]),
                                s(&m["spec"]["config"]["ignition"]["version"]),
                                age(&m["metadata"]["creationTimestamp"]),
                            ];
                            if wide {
                                r.push(s(&m["metadata"]["labels"]["machineconfiguration.openshift.io/role"]));
                            }
                            r
                        })
                        .collect();
                    table(&header, &rows);
                }
                Kind::Node => {
                    let mut header = vec![
                        "NAME", "POOL", "STATE", "READY", "CURRENT", "DESIRED", "AGE",
                    ];
                    if wide {
                        header.extend(["LASTREPORT", "REASON"]);
                    }
                    let nodes: Vec<NodeView> = typed(Value::Array(objects), "/api/v1/nodes")?;
                    let rows: Vec<Vec<String>> = nodes
                        .iter()
                        .map(|n| {
                            let st = &n.status;
                            let state = node_state(st);
                            let mut r = vec![
                                text(&n.metadata.name),
                                opt(st.pool.as_deref()),
                                state.to_string(),
                                yes(st.ready),
                                opt(st.current.as_deref()),
                                opt(st.desired.as_deref()),
                                age_of(n.metadata.creation_timestamp.as_deref()),
                            ];
                            if wide {
                                r.push(match &st.last_report {
                                    None => "-".into(),
                                    Some(t) => age_of(Some(t)),
                                });
                                let reason =
                                    st.reason.as_deref().or(st.error.as_deref()).unwrap_or("-");
                                r.push(text(reason));
                            }
                            r
                        })
                        .collect();
                    table(&header, &rows);
                }
            }
        }
    }
    Ok(())
}

/// The `MAINTENANCE` cell of `get mcp -o wide`: `-` (no windows), `open`, or what the pool
/// waits for.
fn maintenance_cell(m: Option<&Maintenance>) -> String {
    let Some(m) = m else {
        return "-".into();
    };
    match (m.state, m.waiting.as_deref()) {
        (_, Some(w)) => escape(w).into_owned(),
        (WindowState::Open, _) => "open".into(),
        (WindowState::Closed, _) => format!("closed ({})", text(&m.message)),
        (WindowState::Invalid, _) => text(&m.message),
    }
}
