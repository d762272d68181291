//! One document: what kind of object it is (each kind is read by its own file), `kind: List`
//! and its items, and unsubstituted OpenShift Template parameters (`${{NAME}}`), reported as
//! such instead of as type errors.

use super::paths::join;
use super::read::Reader;
use crate::de::{closest, DecodeWarning};
use crate::diag::Diagnostic;
use crate::model::MCO_API_VERSION;
use crate::node::{Node, NodeValue};

impl Reader<'_> {
    pub(super) fn object(&mut self, doc: &Node, base: &str) {
        if doc.is_null() {
            return;
        }
        let describe = |kind: Option<&str>| -> Option<String> {
            let name = doc
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Node::as_str);
            match (kind, name) {
                (Some(k), Some(n)) => Some(format!("{k}/{n}")),
                (Some(k), None) => Some(format!("{k} (document {})", self.document)),
                _ => Some(format!("document {}", self.document)),
            }
        };
        let prefix = |p: &str| {
            if base.is_empty() {
                p.to_string()
            } else {
                format!("{base}.{p}")
            }
        };
        if !matches!(doc.value, NodeValue::Map(_)) {
            self.diags.push(
                Diagnostic::error(
                    self.file,
                    Some(doc.line),
                    base,
                    format!("expected a Kubernetes object (a mapping with apiVersion and kind), found a {}", doc.kind_name()),
                )
                .with_object(describe(None)),
            );
            return;
        }
        let kind = doc.get("kind").and_then(Node::as_str);
        let api = doc.get("apiVersion").and_then(Node::as_str).unwrap_or("");
        let object = describe(kind);

        // Unsubstituted OpenShift Template parameters: say so instead of a type error.
        let mut template_errors = Vec::new();
        find_template_params(doc, &prefix(""), &mut template_errors);
        if !template_errors.is_empty() {
            for (path, line, text) in template_errors {
                self.diags.push(
                    Diagnostic::error(
                        self.file,
                        Some(line),
                        path.trim_start_matches('.'),
                        format!("{text} is an unsubstituted OpenShift Template parameter; instantiate the template first (oc process) or write the value"),
                    )
                    .with_object(object.clone()),
                );
            }
            return;
        }

        self.top_level_keys(doc, base, kind, &object);

        let Some(kind) = kind else {
            self.diags.push(
                Diagnostic::error(self.file, Some(doc.line), &prefix("kind"), "kind is missing; expected MachineConfig, MachineConfigPool, Node, MachineConfiguration or List")
                    .with_object(object),
            );
            return;
        };
        match kind {
            "MachineConfig" | "MachineConfigPool" if api != MCO_API_VERSION => {
                self.diags.push(
                    Diagnostic::error(
                        self.file,
                        Some(doc.get("apiVersion").unwrap_or(doc).line),
                        &prefix("apiVersion"),
                        format!("apiVersion {api:?} is not supported for {kind}; use {MCO_API_VERSION}"),
                    )
                    .with_object(object),
                );
            }
            "MachineConfig" => self.machine_config(doc, base, object),
            "MachineConfigPool" => self.pool(doc, base, object),
            "Node" => self.node(doc, base, object),
            "MachineConfiguration" => self.machine_configuration(doc, base, object),
            k if k.ends_with("List") => match doc.get("items") {
                Some(Node {
                    value: NodeValue::Seq(items),
                    ..
                }) => {
                    for (i, item) in items.iter().enumerate() {
                        self.object(item, &prefix(&format!("items[{i}]")));
                    }
                }
                Some(n) if n.is_null() => {}
                _ => self.diags.push(
                    Diagnostic::error(self.file, Some(doc.line), &prefix("items"), "a List needs an items list")
                        .with_object(object),
                ),
            },
            other => self.diags.push(
                Diagnostic::warning(
                    self.file,
                    Some(doc.get("kind").unwrap_or(doc).line),
                    &prefix("kind"),
                    format!("kind {other:?} is not something hearth manages; skipped (hearth reads MachineConfig, MachineConfigPool, Node, MachineConfiguration and List)"),
                )
                .with_object(object),
            ),
        }
    }
}

/// The keys a document of every kind may have at its top (what `oc get -o yaml` prints included).
const TOP_LEVEL: &[&str] = &["apiVersion", "kind", "metadata", "spec", "status"];
/// A List's.
const LIST_TOP_LEVEL: &[&str] = &["apiVersion", "kind", "metadata", "items"];

impl Reader<'_> {
    /// A key at a document's top that no kind has (`spce:`) is an unknown field like any other
    /// (its validation applies); a List's items are read as documents of their own.
    fn top_level_keys(
        &mut self,
        doc: &Node,
        base: &str,
        kind: Option<&str>,
        object: &Option<String>,
    ) {
        let NodeValue::Map(entries) = &doc.value else {
            return;
        };
        let known = match kind {
            Some(k) if k.ends_with("List") => LIST_TOP_LEVEL,
            Some("MachineConfig" | "MachineConfigPool" | "Node" | "MachineConfiguration")
            | None => TOP_LEVEL,
            // Kinds hearth skips: their keys are theirs.
            Some(_) => return,
        };
        let warnings: Vec<DecodeWarning> = entries
            .iter()
            .filter(|(key, _)| !known.contains(&key.as_str()))
            .map(|(key, value)| DecodeWarning {
                path: join(base, key),
                line: value.line,
                message: "unknown field, ignored".to_string(),
                did_you_mean: closest(key, known),
            })
            .collect();
        self.push_warnings(object, warnings);
    }
}

fn find_template_params(node: &Node, path: &str, out: &mut Vec<(String, usize, String)>) {
    match &node.value {
        NodeValue::Scalar { text, plain: true } => {
            let t = text.trim();
            if t.starts_with("${{") && t.ends_with("}}") && t.len() > 5 {
                out.push((path.to_string(), node.line, t.to_string()));
            }
        }
        NodeValue::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                find_template_params(item, &format!("{path}[{i}]"), out);
            }
        }
        NodeValue::Map(entries) => {
            for (k, v) in entries {
                find_template_params(v, &format!("{path}.{k}"), out);
            }
        }
        _ => {}
    }
}
