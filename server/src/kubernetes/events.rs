//! What the controller does, as Kubernetes Events (`kubectl get events`, `kubectl describe
//! node|mcp`): the reconcile's events (rendered, desired config changed, render failed, …) and
//! the drain's (cordoned, blocked, drained, uncordoned). Events of cluster-scoped objects go to
//! the namespace `default`, as Kubernetes' own controllers put them.

use crate::store::records::EventRecord;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};

/// The longest message an Event gets (Kubernetes itself cuts notes at 1 KiB).
const MAX_MESSAGE: usize = 1024;
/// The component named as the Events' source.
pub const COMPONENT: &str = "hearth-controller";

/// The `involvedObject` of a hearth object name (`Node/w0`, `MachineConfigPool/worker`).
pub fn involved(object: &str) -> Option<Value> {
    let (kind, name) = object.split_once('/')?;
    let api_version = match kind {
        "Node" => "v1",
        "MachineConfigPool" | "MachineConfig" => hearth_config::model::MCO_API_VERSION,
        _ => return None,
    };
    Some(json!({"apiVersion": api_version, "kind": kind, "name": name}))
}

/// The Event for `e` (none for objects Kubernetes has no kind for).
pub fn event(e: &EventRecord, now: &str) -> Option<Value> {
    let involved = involved(&e.object)?;
    let name = format!(
        "{}.{}",
        involved["name"].as_str().unwrap_or_default(),
        // Unique enough and sortable: the time in nanoseconds, as kubectl's events are named.
        jiff::Timestamp::now().as_nanosecond()
    );
    Some(json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": involved,
        "reason": e.reason,
        "message": crate::text::cut(&e.message, MAX_MESSAGE),
        "type": if e.kind == "Warning" { "Warning" } else { "Normal" },
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }))
}

/// Posts Events; one that cannot be posted is logged (the controller's work does not wait on
/// its Events).
#[derive(Clone)]
pub struct Recorder {
    api: Api<DynamicObject>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recorder")
    }
}

impl Recorder {
    /// A recorder on `client`.
    pub fn new(client: Client) -> Recorder {
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Event"), "events");
        Recorder {
            api: Api::namespaced_with(client, "default", &ar),
        }
    }

    /// Posts one Event per record.
    pub async fn record(&self, events: &[EventRecord]) {
        let now = crate::time::rfc3339(crate::time::now());
        for e in events {
            let Some(v) = event(e, &now) else { continue };
            let Ok(obj) = serde_json::from_value::<DynamicObject>(v) else {
                continue;
            };
            if let Err(err) = self.api.create(&PostParams::default(), &obj).await {
                tracing::warn!(object = %e.object, reason = %e.reason, error = %err, "cannot post the event");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_and_pools_get_events_with_bounded_messages() {
        let e = EventRecord::warning(0, "Node/w0".into(), "DrainBlocked", "x".repeat(5000));
        let v = event(&e, "2026-11-24T10:00:00Z").unwrap();
        assert_eq!(v["involvedObject"]["kind"], "Node");
        assert_eq!(v["involvedObject"]["name"], "w0");
        assert_eq!(v["type"], "Warning");
        assert!(v["message"].as_str().unwrap().len() < MAX_MESSAGE + 64);
        let p = EventRecord::normal(0, "MachineConfigPool/worker".into(), "Rendered", "r".into());
        assert_eq!(
            event(&p, "t").unwrap()["involvedObject"]["apiVersion"],
            hearth_config::model::MCO_API_VERSION
        );
        assert!(event(
            &EventRecord::normal(0, "RenderedConfigs".into(), "Pruned", "p".into()),
            "t"
        )
        .is_none());
    }
}
