//! Object metadata: the name (checked as Kubernetes checks it), labels and annotations; the
//! fields Kubernetes sets are accepted and ignored. Nodes are read here too: hearth's stand-in
//! for a Node is nothing but its metadata.

use super::paths::{join, line_of};
use super::read::Reader;
use crate::de::decode_all;
use crate::diag::Diagnostic;
use crate::model::{NodeInfo, ObjectMeta, Sourced};
use crate::node::Node;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaWire {
    name: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, Option<String>>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, Option<String>>>,
    // Set by Kubernetes or by `oc get -o yaml`; accepted and ignored.
    #[serde(default)]
    creation_timestamp: Option<serde_json::Value>,
    #[serde(default)]
    namespace: Option<serde_json::Value>,
    #[serde(default)]
    uid: Option<serde_json::Value>,
    #[serde(default)]
    resource_version: Option<serde_json::Value>,
    #[serde(default)]
    generation: Option<serde_json::Value>,
    #[serde(default)]
    owner_references: Option<serde_json::Value>,
    #[serde(default)]
    managed_fields: Option<serde_json::Value>,
    #[serde(default)]
    finalizers: Option<serde_json::Value>,
    #[serde(default)]
    self_link: Option<serde_json::Value>,
    #[serde(default)]
    generate_name: Option<serde_json::Value>,
    #[serde(default)]
    deletion_timestamp: Option<serde_json::Value>,
    #[serde(default)]
    deletion_grace_period_seconds: Option<serde_json::Value>,
}

impl Reader<'_> {
    pub(super) fn metadata(
        &mut self,
        doc: &Node,
        base: &str,
        object: &Option<String>,
    ) -> Option<ObjectMeta> {
        let path = join(base, "metadata");
        let Some(node) = doc.get("metadata") else {
            self.diags.push(
                Diagnostic::error(
                    self.file,
                    Some(doc.line),
                    &path,
                    "metadata is missing; every object needs metadata.name",
                )
                .with_object(object.clone()),
            );
            return None;
        };
        let mut warnings = Vec::new();
        let wire: MetaWire = match decode_all(node, &path, &mut warnings) {
            Ok(w) => w,
            Err(errors) => {
                self.decode_errors(errors, object);
                return None;
            }
        };
        self.push_warnings(object, warnings);
        let _ = (
            wire.creation_timestamp,
            wire.namespace,
            wire.uid,
            wire.resource_version,
            wire.generation,
            wire.owner_references,
            wire.managed_fields,
            wire.finalizers,
            wire.self_link,
            wire.generate_name,
            wire.deletion_timestamp,
            wire.deletion_grace_period_seconds,
        );
        let name = wire.name.unwrap_or_default();
        if let Some(msg) = check_object_name(&name) {
            self.diags.push(
                Diagnostic::error(
                    self.file,
                    Some(line_of(node, "name")),
                    &join(&path, "name"),
                    msg,
                )
                .with_object(object.clone()),
            );
            return None;
        }
        let flatten = |m: Option<BTreeMap<String, Option<String>>>| -> BTreeMap<String, String> {
            m.unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.unwrap_or_default()))
                .collect()
        };
        Some(ObjectMeta {
            name,
            labels: flatten(wire.labels),
            annotations: flatten(wire.annotations),
        })
    }

    pub(super) fn node(&mut self, doc: &Node, base: &str, object: Option<String>) {
        let Some(metadata) = self.metadata(doc, base, &object) else {
            return;
        };
        let origin = self.origin(doc);
        self.out.nodes.push(Sourced {
            item: NodeInfo { metadata },
            origin,
        });
    }
}

/// Checks an object name as Kubernetes does (a DNS-1123 subdomain).
pub fn check_object_name(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("metadata.name is missing or empty".to_string());
    }
    if name.len() > 253 {
        return Some(format!(
            "name is {} characters long; at most 253 are allowed",
            name.len()
        ));
    }
    let ok = name.split('.').all(|label| {
        !label.is_empty()
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    });
    if !ok {
        return Some(format!(
            "name {name:?} is not valid: use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
        ));
    }
    None
}
