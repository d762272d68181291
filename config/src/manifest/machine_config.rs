//! MachineConfigs: the spec's own fields (kernel arguments and type, FIPS, OS image,
//! extensions), the Ignition config decoded by its spec version (2.x translated to the internal
//! model), and validation of the whole spec, reported at the line of each field.

use super::paths::{join, line_of};
use super::read::Reader;
use crate::actions::RunOnceAction;
use crate::de::{decode_all, decode_partial, is_within, DecodeWarning};
use crate::diag::Diagnostic;
use crate::ignition::{Config, SpecVersion, V2Config};
use crate::model::{KernelType, MachineConfig, MachineConfigSpec, Sourced};
use crate::node::{Node, NodeValue};
use crate::validate;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct McSpecWire {
    #[serde(default)]
    kernel_arguments: Option<Vec<String>>,
    #[serde(default)]
    kernel_type: Option<String>,
    #[serde(default)]
    fips: Option<bool>,
    #[serde(default, rename = "osImageURL")]
    os_image_url: Option<String>,
    #[serde(default)]
    extensions: Option<Vec<String>>,
    #[serde(default, rename = "baseOSExtensionsContainerImage")]
    base_os_extensions_container_image: Option<String>,
    #[serde(default)]
    actions: Option<Vec<RunOnceAction>>,
}

impl Reader<'_> {
    pub(super) fn machine_config(&mut self, doc: &Node, base: &str, object: Option<String>) {
        // Every part is checked even when an earlier one failed, so that all problems of the
        // object are reported at once; the object is left out if any failed.
        let metadata = self.metadata(doc, base, &object);
        let mut failed = metadata.is_none();
        let spec_path = join(base, "spec");
        let empty = Node {
            value: NodeValue::Map(Vec::new()),
            line: doc.line,
            col: doc.col,
        };
        let spec_node = match doc.get("spec") {
            Some(n) if n.is_null() => &empty,
            Some(n) => n,
            None => &empty,
        };
        // Decode everything but `config`, which depends on its Ignition version.
        let without_config = match &spec_node.value {
            NodeValue::Map(entries) => Node {
                value: NodeValue::Map(
                    entries
                        .iter()
                        .filter(|(k, _)| k != "config")
                        .cloned()
                        .collect(),
                ),
                line: spec_node.line,
                col: spec_node.col,
            },
            _ => {
                self.diags.push(
                    Diagnostic::error(
                        self.file,
                        Some(spec_node.line),
                        &spec_path,
                        format!("expected a mapping, found {}", spec_node.kind_name()),
                    )
                    .with_object(object),
                );
                return;
            }
        };
        let mut warnings = Vec::new();
        self.failed_paths.clear();
        let (wire, errors) =
            decode_partial::<McSpecWire>(&without_config, &spec_path, &mut warnings);
        if !errors.is_empty() {
            // The fields that decoded (placeholders elsewhere) are still validated below.
            self.decode_errors(errors, &object);
            failed = true;
        }
        let kernel_type = match wire.as_ref().and_then(|w| w.kernel_type.as_deref()) {
            None => KernelType::Default,
            Some(t) => match KernelType::parse(t) {
                Some(k) => k,
                None => {
                    self.diags.push(
                        Diagnostic::error(
                            self.file,
                            Some(line_of(spec_node, "kernelType")),
                            &join(&spec_path, "kernelType"),
                            format!("unknown kernelType {t:?}; expected one of: default, realtime, 64k-pages"),
                        )
                        .with_object(object.clone()),
                    );
                    failed = true;
                    KernelType::Default
                }
            },
        };
        if wire
            .as_ref()
            .is_some_and(|w| w.base_os_extensions_container_image.is_some())
        {
            self.diags.push(
                Diagnostic::warning(
                    self.file,
                    Some(line_of(spec_node, "baseOSExtensionsContainerImage")),
                    &join(&spec_path, "baseOSExtensionsContainerImage"),
                    "not used by hearth (extensions come from the host's OS backend); ignored",
                )
                .with_object(object.clone()),
            );
        }

        let (config, source_version) = match spec_node.get("config") {
            None => (Config::default(), None),
            Some(n) if n.is_null() => (Config::default(), None),
            Some(cfg) => {
                match self.ignition(cfg, &join(&spec_path, "config"), &object, &mut warnings) {
                    Some(r) => {
                        failed |= !self.failed_paths.is_empty();
                        r
                    }
                    None => {
                        failed = true;
                        (Config::default(), None)
                    }
                }
            }
        };
        self.push_warnings(&object, warnings);

        // Kernel arguments are kept as written, as the MCO keeps them ("a=1 b=2" stays one entry);
        // planning splits them as the kernel does (see `kargs`).
        let wire = wire.unwrap_or(McSpecWire {
            kernel_arguments: None,
            kernel_type: None,
            fips: None,
            os_image_url: None,
            extensions: None,
            base_os_extensions_container_image: None,
            actions: None,
        });
        let kernel_arguments: Vec<String> = wire.kernel_arguments.unwrap_or_default();
        let spec = MachineConfigSpec {
            config,
            source_version,
            kernel_arguments,
            kernel_type,
            fips: wire.fips.unwrap_or(false),
            os_image_url: wire.os_image_url.unwrap_or_default(),
            extensions: wire.extensions.unwrap_or_default(),
            actions: wire.actions.unwrap_or_default(),
        };
        let mut findings = Vec::new();
        validate::validate_spec(&spec, &mut findings);
        for f in findings {
            let rel = f.path.strip_prefix("spec.").unwrap_or(&f.path);
            let line = line_of(spec_node, rel);
            let path = join(base, &f.path);
            if self.failed_paths.iter().any(|p| is_within(&path, p)) {
                // About a placeholder: the decoding error there was reported.
                continue;
            }
            let d = if f.is_error {
                failed = true;
                Diagnostic::error(self.file, Some(line), &path, f.message)
            } else {
                Diagnostic::warning(self.file, Some(line), &path, f.message)
            };
            self.diags.push(d.with_object(object.clone()));
        }
        let Some(metadata) = metadata.filter(|_| !failed) else {
            return;
        };
        let origin = self.origin(doc);
        self.out.machine_configs.push(Sourced {
            item: MachineConfig { metadata, spec },
            origin,
        });
    }

    fn ignition(
        &mut self,
        cfg: &Node,
        path: &str,
        object: &Option<String>,
        warnings: &mut Vec<DecodeWarning>,
    ) -> Option<(Config, Option<SpecVersion>)> {
        let version_path = format!("{path}.ignition.version");
        let version_node = cfg.get("ignition").and_then(|i| i.get("version"));
        let version = match version_node {
            Some(Node {
                value: NodeValue::Scalar { text, .. },
                ..
            }) => match SpecVersion::parse(text) {
                Some(v) => v,
                None => {
                    self.diags.push(
                        Diagnostic::error(
                            self.file,
                            version_node.map(|n| n.line),
                            &version_path,
                            format!(
                                "unsupported Ignition spec version {text:?}; hearth reads {}",
                                SpecVersion::supported_list()
                            ),
                        )
                        .with_object(object.clone()),
                    );
                    return None;
                }
            },
            Some(n) => {
                self.diags.push(
                    Diagnostic::error(
                        self.file,
                        Some(n.line),
                        &version_path,
                        format!("the Ignition spec version is required, found {}; set it, e.g. version: {}", n.kind_name(), SpecVersion::LATEST),
                    )
                    .with_object(object.clone()),
                );
                return None;
            }
            None => {
                self.diags.push(
                    Diagnostic::error(
                        self.file,
                        Some(cfg.line),
                        &version_path,
                        format!("the Ignition spec version is missing; add ignition: {{version: {}}} to spec.config", SpecVersion::LATEST),
                    )
                    .with_object(object.clone()),
                );
                return None;
            }
        };
        if version.is_v2() {
            let v2: V2Config = match decode_all(cfg, path, warnings) {
                Ok(c) => c,
                Err(errors) => {
                    self.decode_errors(errors, object);
                    return None;
                }
            };
            match v2.into_v3() {
                Ok(c) => Some((c, Some(version))),
                Err(errors) => {
                    for e in errors {
                        let full = format!("{path}.{}", e.path);
                        let line = line_of(cfg, &e.path);
                        self.diags.push(
                            Diagnostic::error(self.file, Some(line), &full, e.message)
                                .with_object(object.clone()),
                        );
                    }
                    None
                }
            }
        } else {
            // MCO-generated 3.x configs carry an empty 2.x `networkd: {}`: drop it quietly, but
            // refuse a non-empty one (it would be lost).
            let filtered;
            let cfg = match cfg.get("networkd") {
                Some(n) => {
                    let empty =
                        n.is_null() || matches!(&n.value, NodeValue::Map(e) if e.is_empty());
                    if !empty {
                        self.diags.push(
                            Diagnostic::error(
                                self.file,
                                Some(n.line),
                                &format!("{path}.networkd"),
                                "networkd exists only in Ignition 2.x; in 3.x write networkd units as files under /etc/systemd/network/",
                            )
                            .with_object(object.clone()),
                        );
                        return None;
                    }
                    filtered = Node {
                        value: match &cfg.value {
                            NodeValue::Map(entries) => NodeValue::Map(
                                entries
                                    .iter()
                                    .filter(|(k, _)| k != "networkd")
                                    .cloned()
                                    .collect(),
                            ),
                            other => other.clone(),
                        },
                        line: cfg.line,
                        col: cfg.col,
                    };
                    &filtered
                }
                None => cfg,
            };
            match decode_partial::<Config>(cfg, path, warnings) {
                (Some(c), errors) if errors.is_empty() => Some((c, Some(version))),
                (partial, errors) => {
                    self.decode_errors(errors, object);
                    // Validated for the parts that were right; the object is refused anyway.
                    partial.map(|c| (c, Some(version)))
                }
            }
        }
    }
}
