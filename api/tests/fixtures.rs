//! Every wire type has a realistic example in `api/fixtures/<Type>.json` and its JSON Schema in
//! `docs/schema/<Type>.schema.json`. Each fixture reads into its type and writes back to the
//! same text (nothing lost, nothing added, same field order); each checked-in schema equals the
//! one the type generates, so a protocol change that forgets the schema fails here.
//! `HEARTH_BLESS=1 cargo test -p hearth-api --test fixtures` rewrites the schemas (never the
//! fixtures: a fixture is what a peer of the current version sends).

use hearth_api::*;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
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

/// The schema checked in for `name` is the one `T` generates.
fn schema<T: JsonSchema>(name: &str) -> Result<(), String> {
    let docs = root()
        .parent()
        .expect("api/ is in the workspace")
        .join("docs");
    let path = docs.join("schema").join(format!("{name}.schema.json"));
    let generated = serde_json::to_string_pretty(&schemars::schema_for!(T)).unwrap() + "\n";
    if std::env::var_os("HEARTH_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
        return Ok(());
    }
    match std::fs::read_to_string(&path) {
        Ok(text) if text == generated => Ok(()),
        Ok(_) => Err(format!(
            "{} differs from the schema {name} generates",
            path.display()
        )),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
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
}

#[test]
fn every_schema_in_docs_is_the_one_its_type_generates() {
    let problems: Vec<String> = [
        schema::<EnrollRequest>("EnrollRequest"),
        schema::<EnrollResponse>("EnrollResponse"),
        schema::<DesiredConfig>("DesiredConfig"),
        schema::<AgentStatus>("AgentStatus"),
        schema::<SlotRequest>("SlotRequest"),
        schema::<SlotAnswer>("SlotAnswer"),
        schema::<NodeView>("NodeView"),
        schema::<PoolView>("PoolView"),
        schema::<List<EventView>>("EventList"),
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect();
    assert!(
        problems.is_empty(),
        "{}\nIf the change to the wire types is intended (additive within v1, see the \
         hearth_api module documentation), rewrite the schemas with \
         `HEARTH_BLESS=1 cargo test -p hearth-api --test fixtures` and commit them.",
        problems.join("\n")
    );
}

/// Documents of an older v1 peer (only the required fields) still read: everything added
/// within v1 has a default.
#[test]
fn minimal_v1_documents_still_read() {
    let s: AgentStatus = serde_json::from_str(r#"{"state": "Done"}"#).unwrap();
    assert!(s.drift.is_empty() && s.history.is_empty() && !s.pending_reboot);
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
