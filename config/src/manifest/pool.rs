//! MachineConfigPools: both selectors (required; their expressions checked), `paused`,
//! `maxUnavailable` (a count or a percentage) and the maintenance-window annotation.

use super::paths::{join, line_of};
use super::read::Reader;
use crate::de::decode_all;
use crate::diag::Diagnostic;
use crate::model::{LabelSelector, MachineConfigPool, MaxUnavailable, SelectorOperator, Sourced};
use crate::node::Node;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PoolSpecWire {
    #[serde(default)]
    machine_config_selector: Option<LabelSelector>,
    #[serde(default)]
    node_selector: Option<LabelSelector>,
    #[serde(default)]
    paused: Option<bool>,
    #[serde(default)]
    max_unavailable: Option<serde_json::Value>,
    // Written by the MCO into pools it manages; accepted and ignored.
    #[serde(default)]
    configuration: Option<serde_json::Value>,
    #[serde(default)]
    os_image_stream: Option<serde_json::Value>,
    // The MCO's pinned images (a feature gate of its own); hearth pins no images.
    #[serde(default)]
    pinned_image_sets: Option<serde_json::Value>,
}

impl Reader<'_> {
    pub(super) fn pool(&mut self, doc: &Node, base: &str, object: Option<String>) {
        let Some(metadata) = self.metadata(doc, base, &object) else {
            return;
        };
        let spec_path = join(base, "spec");
        let Some(spec_node) = doc.get("spec").filter(|n| !n.is_null()) else {
            self.diags.push(
                Diagnostic::error(
                    self.file,
                    Some(doc.line),
                    &spec_path,
                    "a MachineConfigPool needs a spec with machineConfigSelector and nodeSelector",
                )
                .with_object(object),
            );
            return;
        };
        let mut warnings = Vec::new();
        let wire: PoolSpecWire = match decode_all(spec_node, &spec_path, &mut warnings) {
            Ok(w) => w,
            Err(errors) => {
                self.decode_errors(errors, &object);
                return;
            }
        };
        self.push_warnings(&object, warnings);
        let _ = (wire.configuration, wire.pinned_image_sets);
        if wire.os_image_stream.is_some() {
            self.diags.push(
                Diagnostic::warning(
                    self.file,
                    Some(line_of(spec_node, "osImageStream")),
                    &join(&spec_path, "osImageStream"),
                    "osImageStream is not supported by hearth; set osImageURL in a MachineConfig instead. Ignored",
                )
                .with_object(object.clone()),
            );
        }
        let mut failed = false;
        let mut selector = |field: &str,
                            sel: Option<LabelSelector>,
                            this: &mut Self|
         -> LabelSelector {
            let Some(sel) = sel else {
                this.diags.push(
                    Diagnostic::error(
                        this.file,
                        Some(spec_node.line),
                        &join(&spec_path, field),
                        format!("{field} is required (an empty selector {{}} selects everything)"),
                    )
                    .with_object(object.clone()),
                );
                failed = true;
                return LabelSelector::default();
            };
            for (i, r) in sel.match_expressions.iter().enumerate() {
                let p = format!("{field}.matchExpressions[{i}]");
                let needs_values =
                    matches!(r.operator, SelectorOperator::In | SelectorOperator::NotIn);
                if needs_values == r.values.is_empty() {
                    let msg = if needs_values {
                        format!("operator {:?} needs a non-empty values list", r.operator)
                    } else {
                        format!("operator {:?} takes no values", r.operator)
                    };
                    this.diags.push(
                        Diagnostic::error(
                            this.file,
                            Some(line_of(spec_node, &p)),
                            &join(&spec_path, &p),
                            msg,
                        )
                        .with_object(object.clone()),
                    );
                    failed = true;
                }
            }
            sel
        };
        let machine_config_selector =
            selector("machineConfigSelector", wire.machine_config_selector, self);
        let node_selector = selector("nodeSelector", wire.node_selector, self);
        let max_unavailable = match &wire.max_unavailable {
            None => MaxUnavailable::default(),
            Some(v) => match parse_max_unavailable(v) {
                Some(m) => m,
                None => {
                    self.diags.push(
                        Diagnostic::error(
                            self.file,
                            Some(line_of(spec_node, "maxUnavailable")),
                            &join(&spec_path, "maxUnavailable"),
                            format!("{v} is not a count (1) or a percentage (\"25%\") between 1 and 100%"),
                        )
                        .with_object(object.clone()),
                    );
                    failed = true;
                    MaxUnavailable::default()
                }
            },
        };
        if let Some(Err(e)) = crate::window::Windows::of(&metadata.annotations) {
            let line = doc
                .get("metadata")
                .and_then(|m| m.get("annotations"))
                .map(|a| a.get(crate::window::ANNOTATION).map_or(a.line, |n| n.line))
                .unwrap_or(doc.line);
            self.diags.push(
                Diagnostic::error(
                    self.file,
                    Some(line),
                    crate::window::FIELD,
                    format!(
                        "MachineConfigPool {:?}: the maintenance windows cannot be read: {e}",
                        metadata.name
                    ),
                )
                .with_object(object.clone()),
            );
            failed = true;
        }
        if let Err(e) = crate::trial::TrialPolicy::of(&metadata.annotations) {
            let key = match e {
                crate::trial::TrialError::Mode(_) => crate::trial::ANNOTATION,
                crate::trial::TrialError::Seconds(_) => crate::trial::SECONDS_ANNOTATION,
            };
            let line = doc
                .get("metadata")
                .and_then(|m| m.get("annotations"))
                .map(|a| a.get(key).map_or(a.line, |n| n.line))
                .unwrap_or(doc.line);
            self.diags.push(
                Diagnostic::error(
                    self.file,
                    Some(line),
                    &format!("metadata.annotations[{key}]"),
                    format!("MachineConfigPool {:?}: {e}", metadata.name),
                )
                .with_object(object.clone()),
            );
            failed = true;
        }
        if failed {
            return;
        }
        let origin = self.origin(doc);
        self.out.pools.push(Sourced {
            item: MachineConfigPool {
                metadata,
                machine_config_selector,
                node_selector,
                paused: wire.paused,
                max_unavailable,
            },
            origin,
        });
    }
}

fn parse_max_unavailable(v: &serde_json::Value) -> Option<MaxUnavailable> {
    match v {
        serde_json::Value::Number(n) => n
            .as_u64()
            .filter(|n| *n >= 1 && *n <= u32::MAX as u64)
            .map(|n| MaxUnavailable::Count(n as u32)),
        serde_json::Value::String(s) => {
            let p: u32 = s.strip_suffix('%')?.trim().parse().ok()?;
            (1..=100).contains(&p).then_some(MaxUnavailable::Percent(p))
        }
        _ => None,
    }
}
