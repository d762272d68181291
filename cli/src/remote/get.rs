//! `hearth get`: list or show MachineConfigs, pools, nodes and events as a table, JSON, YAML or
//! names; `-l` selects by label, `--no-headers` drops the header line. With `-w`, `watch.rs`
//! goes on from the list printed here, asking again with this file's [`fetch`] and [`rows`]
//! (the dispatch is `remote::get`, in `mod.rs`).
//!
//! Tables of pools, nodes and events read the server's answers as `hearth_api`'s views;
//! `-o json` and `-o yaml` print the server's documents as they came (so a field a newer v1
//! server adds is not lost), made safe for the terminal.

use super::conn::{enc, typed, Client, Conn};
use super::kind::{kind_name, kind_path, Kind, Output};
use super::select::Selector;
use super::state::node_state;
use super::table::{age, age_of, items, opt, s, text, yes, Table};
use crate::term::{escape, json_safe};
use crate::usage::Usage;
use clap::{Args, ValueEnum};
use hearth_api::views::{EventView, Maintenance, NodeView, PoolView, WindowState};
use serde_json::{json, Value};

/// What `get` lists: the object kinds ([`Kind`], their names and aliases written once there),
/// and events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetKind {
    /// MachineConfigs, pools or nodes.
    Object(Kind),
    /// Events (the newest 200, oldest first; `--for` one object's).
    Events,
}

impl ValueEnum for GetKind {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            GetKind::Object(Kind::Mc),
            GetKind::Object(Kind::Mcp),
            GetKind::Object(Kind::Node),
            GetKind::Events,
        ]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        match self {
            GetKind::Object(k) => k.to_possible_value(),
            GetKind::Events => Some(
                clap::builder::PossibleValue::new("events")
                    .aliases(["event", "ev"])
                    .help("Events (the newest 200, oldest first; `--for` one object's)"),
            ),
        }
    }
}

impl GetKind {
    fn object_kind(self) -> Option<Kind> {
        match self {
            GetKind::Object(k) => Some(k),
            GetKind::Events => None,
        }
    }
}

/// `hearth get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// mc, mcp, nodes or events.
    #[arg(value_enum)]
    pub(super) kind: GetKind,
    /// One object (not for events).
    name: Option<String>,
    /// Output format (default: a table).
    #[arg(short = 'o', long = "output", value_enum)]
    output: Option<Output>,
    /// Only objects whose labels match: `key=value`, `key!=value`, `key`, `!key`, separated by
    /// commas (all must match).
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    selector: Option<String>,
    /// Events: only those of one object, `node/NAME` or `pool/NAME` (`mcp/NAME`).
    #[arg(long = "for", value_name = "KIND/NAME")]
    for_object: Option<String>,
    /// Events: only those of one type (`warning` lists what went wrong: degraded nodes,
    /// halted rollouts, failed renders, admins' exclusions).
    #[arg(long = "type", value_enum, value_name = "TYPE", ignore_case = true)]
    event_type: Option<EventType>,
    /// Tables: leave out the header line.
    #[arg(long)]
    no_headers: bool,
    /// After the list, print each row that changes (or, for events, each new event) until
    /// interrupted; the server is asked every 2 seconds.
    #[arg(short = 'w', long)]
    pub(super) watch: bool,
    #[command(flatten)]
    conn: Conn,
}

/// The type of an event (`--type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum EventType {
    /// Routine.
    Normal,
    /// Something went wrong.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// The `involvedObject` of `--for`: `node/worker-0` is `Node/worker-0`.
fn event_object(spec: &str) -> Result<String, Usage> {
    let (kind, name) = spec.split_once('/').unwrap_or(("", ""));
    let kind = match kind.to_ascii_lowercase().as_str() {
        "node" | "nodes" | "no" => "Node",
        "pool" | "pools" | "mcp" | "machineconfigpool" | "machineconfigpools" => {
            "MachineConfigPool"
        }
        _ => "",
    };
    if kind.is_empty() || name.is_empty() {
        return Err(Usage(format!(
            "--for {:?}: give node/NAME or pool/NAME",
            escape(spec)
        )));
    }
    Ok(format!("{kind}/{name}"))
}

/// What `a` asks for that cannot be: a usage error.
fn check(a: &GetArgs) -> Result<(), Usage> {
    let events = a.kind == GetKind::Events;
    if events && a.name.is_some() {
        return Err(Usage(
            "events have no names: `hearth get events --for node/NAME` lists one node's".into(),
        ));
    }
    if events && a.selector.is_some() {
        return Err(Usage(
            "events have no labels: -l does not apply; use --for".into(),
        ));
    }
    if events && a.output == Some(Output::Name) {
        return Err(Usage("events have no names: -o name does not apply".into()));
    }
    if a.name.is_some() && a.selector.is_some() {
        return Err(Usage("give a name or a selector (-l), not both".into()));
    }
    if !events && a.for_object.is_some() {
        return Err(Usage("--for applies to `get events` only".into()));
    }
    if !events && a.event_type.is_some() {
        return Err(Usage("--type applies to `get events` only".into()));
    }
    if a.watch && matches!(a.output, Some(Output::Json | Output::Yaml)) {
        return Err(Usage(
            "-w prints table rows (or names): it does not go with -o json or -o yaml".into(),
        ));
    }
    Ok(())
}

/// The objects `a` asks for, as the server's documents, filtered by `sel`.
pub(super) fn fetch(c: &Client, a: &GetArgs, sel: &Selector) -> anyhow::Result<Vec<Value>> {
    let mut objects = match (a.kind.object_kind(), &a.name) {
        (None, _) => {
            let mut query = Vec::new();
            if let Some(f) = &a.for_object {
                query.push(format!("object={}", enc(&event_object(f)?)));
            }
            if let Some(t) = a.event_type {
                query.push(format!("type={}", t.as_str()));
            }
            let path = if query.is_empty() {
                "/api/v1/events".to_string()
            } else {
                format!("/api/v1/events?{}", query.join("&"))
            };
            items(&c.get(&path)?)
        }
        (Some(k), Some(n)) => vec![c.get(&format!("/api/v1/{}/{}", kind_path(k), enc(n)))?],
        // In pages; for a table or names, the summary view (without what only `-o json` and
        // `-o yaml` show: history, drift lines, action runs).
        (Some(Kind::Node), None) => {
            let view = match a.output {
                Some(Output::Json | Output::Yaml) => super::pages::View::Full,
                _ => super::pages::View::Summary,
            };
            let mut all = Vec::new();
            super::pages::nodes(c, None, view, |page| {
                all.extend(page);
                Ok(())
            })?;
            all
        }
        (Some(Kind::Mc), None) => {
            let mut v = items(&c.get("/api/v1/machineconfigs")?);
            v.extend(items(&c.get("/api/v1/renderedconfigs")?));
            v.sort_by(|x, y| s(&x["metadata"]["name"]).cmp(&s(&y["metadata"]["name"])));
            v
        }
        (Some(k), None) => items(&c.get(&format!("/api/v1/{}", kind_path(k)))?),
    };
    objects.retain(|o| sel.matches(o));
    Ok(objects)
}

/// The `-o name` line of an object.
pub(super) fn name_line(kind: GetKind, o: &Value) -> String {
    let k = kind.object_kind().map(kind_name).unwrap_or("event");
    format!("{k}/{}", s(&o["metadata"]["name"]))
}

/// The table of `objects`: its header and one row per object (the first cell names it).
pub(super) fn rows(
    kind: GetKind,
    objects: &[Value],
    wide: bool,
) -> anyhow::Result<(Vec<&'static str>, Vec<Vec<String>>)> {
    Ok(match kind {
        GetKind::Object(Kind::Mcp) => {
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
                header.extend(["PAUSED", "MAXUNAVAILABLE", "TARGET", "MAINTENANCE", "NOTE"]);
            }
            let pools: Vec<PoolView> = typed(Value::Array(objects.to_vec()), "/api/v1/pools")?;
            let condition = |p: &PoolView, t: &str| {
                p.status
                    .condition(t)
                    .map(text)
                    .unwrap_or_else(|| "Unknown".into())
            };
            let rows = pools
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
                        r.push(if st.machine_count == 0 {
                            hearth_api::views::SELECTS_NO_NODE.into()
                        } else {
                            "-".into()
                        });
                    }
                    r
                })
                .collect();
            (header, rows)
        }
        GetKind::Object(Kind::Mc) => {
            let mut header = vec!["NAME", "GENERATEDBYCONTROLLER", "IGNITIONVERSION", "AGE"];
            if wide {
                header.push("ROLE");
            }
            let rows = objects
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
                        r.push(s(
                            &m["metadata"]["labels"]["machineconfiguration.openshift.io/role"]
                        ));
                    }
                    r
                })
                .collect();
            (header, rows)
        }
        GetKind::Object(Kind::Node) => {
            let mut header = vec![
                "NAME", "POOL", "STATE", "READY", "CURRENT", "DESIRED", "AGE",
            ];
            if wide {
                header.extend(["LASTREPORT", "DRIFT", "IMAGE", "REASON"]);
            }
            let nodes: Vec<NodeView> = typed(Value::Array(objects.to_vec()), "/api/v1/nodes")?;
            let rows = nodes
                .iter()
                .map(|n| {
                    let st = &n.status;
                    let mut r = vec![
                        text(&n.metadata.name),
                        opt(st.pool.as_deref()),
                        node_state(st).to_string(),
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
                        // How many paths differ from the config (`describe node` lists them).
                        r.push(st.drift_count.to_string());
                        r.push(text(&image_column(st.os.as_ref())));
                        // Its reason; else why the rollout passes it by (an admin's hold).
                        let hold = match (&st.excluded, &st.pinned) {
                            (Some(_), _) => Some("excluded from rollouts".to_string()),
                            (None, Some(p)) => Some(format!("pinned to {}", p.config)),
                            (None, None) => None,
                        };
                        let reason = st
                            .reason
                            .as_deref()
                            .or(st.error.as_deref())
                            .or(hold.as_deref())
                            .unwrap_or("-");
                        r.push(text(reason));
                    }
                    r
                })
                .collect();
            (header, rows)
        }
        GetKind::Events => {
            let header = vec!["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"];
            let events: Vec<EventView> = typed(Value::Array(objects.to_vec()), "/api/v1/events")?;
            let rows = events
                .iter()
                .map(|e| {
                    vec![
                        age_of(Some(&e.time)),
                        text(&e.kind),
                        text(&e.reason),
                        text(&e.object),
                        text(&e.message),
                    ]
                })
                .collect();
            (header, rows)
        }
    })
}

/// What the list printed by [`list`] leaves for `-w` to go on from.
pub(super) struct Listed {
    /// The client the list was read with.
    pub(super) client: Client,
    /// The selector (`-l`) the list was filtered by.
    pub(super) sel: Selector,
    /// The objects printed.
    pub(super) objects: Vec<Value>,
    /// The table the rows were printed in and whether it is `-o wide`; none when names (or
    /// documents) were printed.
    pub(super) table: Option<(Table, bool)>,
}

/// The list `hearth get` prints: checks the arguments, reads the objects and prints them; with
/// `-w`, `remote::get` goes on from what this returns.
pub(super) fn list(a: &GetArgs) -> anyhow::Result<Listed> {
    check(a)?;
    let sel = match &a.selector {
        Some(t) => Selector::parse(t)?,
        None => Selector::default(),
    };
    let c = Client::new(&a.conn)?;
    let mut objects = fetch(&c, a, &sel)?;
    let mut table = None;
    let list = |objects: Vec<Value>| json!({"apiVersion": "v1", "kind": "List", "items": objects});
    match a.output {
        Some(Output::Json) => {
            let v = if a.name.is_some() {
                objects.remove(0)
            } else {
                list(std::mem::take(&mut objects))
            };
            crate::outln!("{}", json_safe(&serde_json::to_string_pretty(&v)?));
        }
        Some(Output::Yaml) => {
            let v = if a.name.is_some() {
                objects.remove(0)
            } else {
                list(std::mem::take(&mut objects))
            };
            crate::out!("{}", crate::yaml::to_string(&v));
        }
        Some(Output::Name) => {
            for o in &objects {
                crate::outln!("{}", name_line(a.kind, o));
            }
        }
        None | Some(Output::Wide) => {
            let wide = a.output == Some(Output::Wide);
            if objects.is_empty() && !a.watch {
                eprintln!("No resources found");
            } else {
                let (header, rows) = rows(a.kind, &objects, wide)?;
                let mut t = Table::new(&header, &rows);
                if !a.no_headers {
                    t.print(&header);
                }
                for r in &rows {
                    t.print(r);
                }
                table = Some((t, wide));
            }
        }
    }
    Ok(Listed {
        client: c,
        sel,
        objects,
        table,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_names_an_object() {
        assert_eq!(event_object("node/w0").unwrap(), "Node/w0");
        assert_eq!(
            event_object("pool/worker").unwrap(),
            "MachineConfigPool/worker"
        );
        assert_eq!(
            event_object("mcp/worker").unwrap(),
            "MachineConfigPool/worker"
        );
        for bad in ["w0", "node/", "mc/x", "/w0"] {
            assert!(event_object(bad).is_err(), "{bad}");
        }
    }
}

/// The IMAGE column of `get nodes -o wide`: the booted image with its digest cut to 12 hex
/// digits (`describe node` has it whole); `-` for a node without an OS backend.
fn image_column(os: Option<&hearth_api::BootedOs>) -> String {
    let Some(os) = os else {
        return "-".into();
    };
    let Some(digest) = &os.image_digest else {
        return os.image.clone();
    };
    let short = match digest.split_once(':') {
        Some((alg, hex)) => format!("{alg}:{}", hex.chars().take(12).collect::<String>()),
        None => digest.clone(),
    };
    match os.image.strip_suffix(digest.as_str()) {
        Some(name) => format!("{name}{short}"),
        None => format!("{}@{short}", os.image),
    }
}

#[cfg(test)]
mod image_column_tests {
    use super::image_column;

    #[test]
    fn digests_are_cut_and_named_once() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let os = |image: String| hearth_api::BootedOs {
            deployment: "rhcos/x.0".into(),
            image,
            image_digest: Some(digest.clone()),
            version: None,
        };
        assert_eq!(
            image_column(Some(&os(format!("quay.io/os@{digest}")))),
            "quay.io/os@sha256:abababababab"
        );
        assert_eq!(
            image_column(Some(&os("quay.io/os:4.16".into()))),
            "quay.io/os:4.16@sha256:abababababab"
        );
        let plain = hearth_api::BootedOs {
            image: "hearth/debian/v2".into(),
            image_digest: None,
            ..os(String::new())
        };
        assert_eq!(image_column(Some(&plain)), "hearth/debian/v2");
        assert_eq!(image_column(None), "-");
    }
}
