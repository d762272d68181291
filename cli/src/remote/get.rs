//! `hearth get`: list or show MachineConfigs, pools and nodes as a table, JSON, YAML or names.

use super::conn::{enc, Client, Conn};
use super::table::{age, condition, dash, items, s, table};
use super::{kind_name, kind_path, Kind, Output};
use crate::term::{escape, json_safe};
use clap::Args;
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
            println!("{}", json_safe(&serde_json::to_string_pretty(&v)?));
        }
        Some(Output::Yaml) => {
            let v = if a.name.is_some() {
                objects.remove(0)
            } else {
                json!({"apiVersion": "v1", "kind": "List", "items": objects})
            };
            print!("{}", crate::yaml::to_string(&v));
        }
        Some(Output::Name) => {
            for o in &objects {
                println!("{}/{}", kind_name(a.kind), s(&o["metadata"]["name"]));
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
                    let rows: Vec<Vec<String>> = objects
                        .iter()
                        .map(|p| {
                            let st = &p["status"];
                            let mut r = vec![
                                s(&p["metadata"]["name"]),
                                dash(&st["configuration"]["name"]),
                                condition(p, "Updated"),
                                condition(p, "Updating"),
                                condition(p, "Degraded"),
                                s(&st["machineCount"]),
                                s(&st["readyMachineCount"]),
                                s(&st["updatedMachineCount"]),
                                s(&st["degradedMachineCount"]),
                                age(&p["metadata"]["creationTimestamp"]),
                            ];
                            if wide {
                                r.push(s(&p["spec"]["paused"]));
                                r.push(s(&p["spec"]["maxUnavailable"]));
                                r.push(s(&p["spec"]["configuration"]["name"]));
                                r.push(maintenance_cell(&st["maintenance"]));
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
                    let rows: Vec<Vec<String>> = objects
                        .iter()
                        .map(|n| {
                            let st = &n["status"];
                            let state = if st["state"].is_null() {
                                if st["enrolled"] == true {
                                    "Unknown"
                                } else {
                                    "NotEnrolled"
                                }
                                .to_string()
                            } else {
                                s(&st["state"])
                            };
                            let mut r = vec![
                                s(&n["metadata"]["name"]),
                                dash(&st["pool"]),
                                state,
                                s(&st["ready"]),
                                dash(&st["current"]),
                                dash(&st["desired"]),
                                age(&n["metadata"]["creationTimestamp"]),
                            ];
                            if wide {
                                r.push(if st["lastReport"].is_null() {
                                    "-".into()
                                } else {
                                    age(&st["lastReport"])
                                });
                                let reason = st["reason"]
                                    .as_str()
                                    .or(st["error"].as_str())
                                    .unwrap_or("-");
                                r.push(escape(reason).into_owned());
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
fn maintenance_cell(m: &Value) -> String {
    if m.is_null() {
        return "-".into();
    }
    match (m["state"].as_str(), m["waiting"].as_str()) {
        (_, Some(w)) => escape(w).into_owned(),
        (Some("Open"), _) => "open".into(),
        (Some("Closed"), _) => format!("closed ({})", s(&m["message"])),
        _ => s(&m["message"]),
    }
}
