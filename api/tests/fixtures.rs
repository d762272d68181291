//! Every wire type has a realistic example in `api/fixtures/<Type>.json` and its JSON Schema in
//! `docs/schema/<Type>.schema.json`. Each fixture reads into its type and writes back to the
//! same text (nothing lost, nothing added, same field order) and is valid against its schema.
//! That each checked-in schema equals the one its type generates is checked by `cargo xtask
//! generate --check` (`xtask/tests/generated.rs`); `cargo xtask generate` rewrites them (never
//! the fixtures: a fixture is what a peer of the current version sends).

use hearth_api::admin::*;
use hearth_api::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// The fixture `name` reads into `T` and writes back to the same text.
fn lossless<T: Serialize + DeserializeOwned>(name: &str) -> T {
    let path = root().join("fixtures").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let value: T = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} does not read as {name}: {e}", path.display()));
    let again = serde_json::to_string_pretty(&value).unwrap() + "\n";
    assert_eq!(
        again,
        text,
        "{} does not write back unchanged as {name} (left: written back, right: the fixture)",
        path.display()
    );
    value
}

#[test]
fn every_fixture_reads_into_its_type_and_writes_back_unchanged() {
    let e: EnrollRequest = lossless("EnrollRequest");
    assert_eq!(e.node, "worker-0.example.com");
    let e: EnrollResponse = lossless("EnrollResponse");
    assert_eq!(e.pool, "worker");
    let d: DesiredConfig = lossless("DesiredConfig");
    assert!(d.name.starts_with("rendered-worker-"));
    assert_eq!(d.spec.config.storage.files.len(), 1);
    assert_eq!(d.policies.units.len(), 1);
    assert_eq!(d.trial.map(|t| t.seconds), Some(120));
    let s: AgentStatus = lossless("AgentStatus");
    assert_eq!(s.state, NodeState::Degraded);
    assert_eq!(s.history.len(), 2);
    let r: SlotRequest = lossless("SlotRequest");
    assert_eq!(r.action, SlotAction::Acquire);
    let a: SlotAnswer = lossless("SlotAnswer");
    assert!(!a.granted);
    let n: NodeView = lossless("NodeView");
    assert_eq!(n.status.state, Some(NodeState::Rebooting));
    assert_eq!(n.status.reboot_slot_holders, [SlotHolder::Agent]);
    let p: PoolView = lossless("PoolView");
    assert_eq!(p.status.condition("Updated"), Some("False"));
    assert_eq!(
        p.status.maintenance.map(|m| m.state),
        Some(WindowState::Open)
    );
    let l: List<EventView> = lossless("EventList");
    assert_eq!(l.items.len(), 2);
    let r: ApplyRequest = lossless("ApplyRequest");
    assert_eq!(r.files.len(), 1);
    let o: ApplyOutcome = lossless("ApplyOutcome");
    assert_eq!(o.warnings[0].severity, Severity::Warning);
    let st: Status = lossless("Status");
    assert_eq!(st.diagnostics[0].line, Some(9));
    let t: TokenRequest = lossless("TokenRequest");
    assert_eq!(t.ttl_seconds, Some(3600));
    let t: TokenAnswer = lossless("TokenAnswer");
    assert!(t.expires_at.is_some());
    let v: ViewerTokenRequest = lossless("ViewerTokenRequest");
    assert_eq!(v.ttl_seconds, Some(86400));
    let v: ViewerTokenAnswer = lossless("ViewerTokenAnswer");
    assert!(v.token.starts_with("hearth-viewer-"));
    let l: LabelRequest = lossless("LabelRequest");
    assert_eq!(l.remove.len(), 1);
    let l: LabelAnswer = lossless("LabelAnswer");
    assert_eq!(l.labels.len(), 2);
    let p: PauseAnswer = lossless("PauseAnswer");
    assert!(p.changed);
    let d: DeleteAnswer = lossless("DeleteAnswer");
    assert_eq!(d.kind, "MachineConfigPool");
    let c: CredentialReset = lossless("CredentialReset");
    let p: PinRequest = lossless("PinRequest");
    assert!(p.config.starts_with("rendered-worker-"));
    let h: HoldAnswer = lossless("HoldAnswer");
    assert_eq!(h.action, "pinned");
    let r: RollbackAnswer = lossless("RollbackAnswer");
    assert_ne!(r.to, r.from);
    assert!(c.credential_revoked);
    let v: VersionInfo = lossless("VersionInfo");
    assert_eq!(v.commit.len(), 40);
    let f: RestoreFileRequest = lossless("RestoreFileRequest");
    assert!(f.path.starts_with('/'));
    let q: RequestAnswer = lossless("RequestAnswer");
    assert_eq!(q.action, RequestAction::RestoreFile);
}

/// Every fixture has its schema and every wire type (`hearth_api::schemas`) its fixture; that
/// the schemas in `docs/schema/` are the ones the types generate is `cargo xtask generate
/// --check`'s (`xtask/tests/generated.rs`).
#[test]
fn every_wire_type_has_a_fixture() {
    let fixtures: std::collections::BTreeSet<String> = std::fs::read_dir(root().join("fixtures"))
        .unwrap()
        .map(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".json")
                .to_string()
        })
        .collect();
    let schemas: std::collections::BTreeSet<String> = hearth_api::schemas()
        .into_iter()
        .map(|(n, _)| n.to_string())
        .collect();
    assert_eq!(
        fixtures, schemas,
        "api/fixtures/ and hearth_api::schemas() name the same types"
    );
}

/// Documents of an older v1 peer (only the required fields) still read: everything added
/// within v1 has a default.
#[test]
fn minimal_v1_documents_still_read() {
    let s: AgentStatus = serde_json::from_str(r#"{"state": "Done"}"#).unwrap();
    assert!(s.drift.is_empty() && s.history.is_empty() && !s.pending_reboot);
    assert!(s.requests_done == 0 && s.request_results.is_empty());
    let a: SlotAnswer = serde_json::from_str(r#"{"granted": true}"#).unwrap();
    assert_eq!(a.retry_after_seconds, 0);
    let n: NodeView = serde_json::from_str(
        r#"{"apiVersion": "hearth.io/v1", "kind": "Node", "metadata": {"name": "w0"}, "status": {}}"#,
    )
    .unwrap();
    assert_eq!(n.status.state, None);
    let e: EnrollResponse =
        serde_json::from_str(r#"{"node": "w0", "pool": "worker", "credential": "c"}"#).unwrap();
    assert!(e.labels.is_empty());
}

/// Checks `v` against `schema` (the subset of JSON Schema 2020-12 the schemas in `docs/schema/`
/// use); returns what does not match, by JSON path. A keyword it does not know is a test
/// failure, so no part of a schema goes unchecked.
fn check(schema: &Value, v: &Value, defs: &Value, at: &str, out: &mut Vec<String>) {
    let s = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => return out.push(format!("{at}: nothing is allowed here")),
        Value::Object(s) => s,
        other => panic!("{at}: not a schema: {other}"),
    };
    for (k, want) in s {
        match k.as_str() {
            "$schema" | "title" | "description" | "default" | "format" | "$defs" => {}
            "$ref" => {
                let name = want
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .unwrap_or_else(|| panic!("{at}: unknown $ref {want}"));
                check(&defs[name], v, defs, at, out);
            }
            "type" => {
                let types: Vec<&str> = match want {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => panic!("{at}: bad type {want}"),
                };
                let ok = types.iter().any(|t| match *t {
                    "object" => v.is_object(),
                    "array" => v.is_array(),
                    "string" => v.is_string(),
                    "boolean" => v.is_boolean(),
                    "null" => v.is_null(),
                    "integer" => v.is_i64() || v.is_u64(),
                    "number" => v.is_number(),
                    t => panic!("{at}: unknown type {t}"),
                });
                if !ok {
                    out.push(format!("{at}: {v} is not {types:?}"));
                }
            }
            "properties" => {
                if let (Some(props), Some(obj)) = (want.as_object(), v.as_object()) {
                    for (name, sub) in props {
                        if let Some(x) = obj.get(name) {
                            check(sub, x, defs, &format!("{at}.{name}"), out);
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let Some(obj) = v.as_object() {
                    let known = s.get("properties").and_then(Value::as_object);
                    for (name, x) in obj {
                        if !known.is_some_and(|p| p.contains_key(name)) {
                            check(want, x, defs, &format!("{at}.{name}"), out);
                        }
                    }
                }
            }
            "required" => {
                if let Some(obj) = v.as_object() {
                    for name in want
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                    {
                        if !obj.contains_key(name) {
                            out.push(format!("{at}: {name} is required"));
                        }
                    }
                }
            }
            "items" => {
                for (i, x) in v.as_array().into_iter().flatten().enumerate() {
                    check(want, x, defs, &format!("{at}[{i}]"), out);
                }
            }
            "enum" => {
                if !want.as_array().is_some_and(|e| e.contains(v)) {
                    out.push(format!("{at}: {v} is not one of {want}"));
                }
            }
            "const" => {
                if v != want {
                    out.push(format!("{at}: {v} is not {want}"));
                }
            }
            "minimum" => {
                if v.as_f64().zip(want.as_f64()).is_some_and(|(x, m)| x < m) {
                    out.push(format!("{at}: {v} is below {want}"));
                }
            }
            "maximum" => {
                if v.as_f64().zip(want.as_f64()).is_some_and(|(x, m)| x > m) {
                    out.push(format!("{at}: {v} is above {want}"));
                }
            }
            "pattern" => {
                assert_eq!(want, "^[0-9]+%$", "{at}: the check knows only this pattern");
                if let Some(t) = v.as_str() {
                    let digits = t.strip_suffix('%').unwrap_or("");
                    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                        out.push(format!("{at}: {t:?} is not a percentage"));
                    }
                }
            }
            "anyOf" | "oneOf" => {
                let alternatives = want.as_array().expect("a list of schemas");
                let matching = alternatives
                    .iter()
                    .filter(|alt| {
                        let mut o = Vec::new();
                        check(alt, v, defs, at, &mut o);
                        o.is_empty()
                    })
                    .count();
                let ok = if k == "oneOf" {
                    matching == 1
                } else {
                    matching > 0
                };
                if !ok {
                    out.push(format!(
                        "{at}: {v} matches {matching} of the {k} alternatives"
                    ));
                }
            }
            other => panic!("{at}: the check does not know the keyword {other:?}"),
        }
    }
}

fn problems(name: &str, v: &Value) -> Vec<String> {
    let path = root()
        .parent()
        .expect("api/ is in the workspace")
        .join(format!("docs/schema/{name}.schema.json"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut out = Vec::new();
    check(&schema, v, &schema["$defs"], name, &mut out);
    out
}

fn fixture(name: &str) -> Value {
    let path = root().join("fixtures").join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn every_fixture_is_valid_against_its_schema() {
    for (name, _) in hearth_api::schemas() {
        let p = problems(name, &fixture(name));
        assert!(p.is_empty(), "{name}:\n{}", p.join("\n"));
    }
}

/// The schema check above can fail: documents the types refuse are refused by the schemas.
#[test]
fn the_schemas_refuse_what_the_types_refuse() {
    let mut bad = Vec::new();
    let mut v = fixture("AgentStatus");
    v["state"] = "Sleeping".into();
    bad.push(("AgentStatus", v));
    let mut v = fixture("AgentStatus");
    v.as_object_mut().unwrap().remove("state");
    bad.push(("AgentStatus", v));
    let mut v = fixture("NodeView");
    v["status"]["drift"] = json!("one line");
    bad.push(("NodeView", v));
    let mut v = fixture("PoolView");
    v["spec"]["maxUnavailable"] = json!("half");
    bad.push(("PoolView", v));
    let mut v = fixture("SlotRequest");
    v["action"] = json!("steal");
    bad.push(("SlotRequest", v));
    let mut v = fixture("DesiredConfig");
    v["policies"]["units"][0]["actions"][0]["type"] = json!("Explode");
    bad.push(("DesiredConfig", v));
    let mut v = fixture("Status");
    v["diagnostics"][0]["severity"] = json!("fatal");
    bad.push(("Status", v));
    for (name, v) in bad {
        assert!(!problems(name, &v).is_empty(), "{name} schema allows {v}");
        let read = match name {
            "AgentStatus" => serde_json::from_value::<AgentStatus>(v.clone()).is_ok(),
            "NodeView" => serde_json::from_value::<NodeView>(v.clone()).is_ok(),
            "PoolView" => serde_json::from_value::<PoolView>(v.clone()).is_ok(),
            "SlotRequest" => serde_json::from_value::<SlotRequest>(v.clone()).is_ok(),
            "DesiredConfig" => serde_json::from_value::<DesiredConfig>(v.clone()).is_ok(),
            "Status" => serde_json::from_value::<Status>(v.clone()).is_ok(),
            _ => unreachable!(),
        };
        assert!(!read, "the type {name} reads {v}");
    }
}
