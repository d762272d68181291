//! Reading manifests as `oc apply -f` reads them: YAML (several documents, `kind: List`) or
//! JSON, holding MachineConfigs, MachineConfigPools, Nodes (a stand-in with name and labels for
//! offline rendering) and the MCO's `MachineConfiguration` (for node-disruption policies).
//!
//! Every problem becomes a [`Diagnostic`] naming the file, the line, the object and the field.
//! An object with an error is left out of the result; the others are kept, so one bad manifest
//! never hides the problems of the next one.

use crate::de::{decode_all, decode_partial, is_within, DecodeError, DecodeWarning};
use crate::diag::Diagnostic;
use crate::ignition::{Config, SpecVersion, V2Config};
use crate::model::{
    DisruptionPolicies, FilePolicy, KernelType, LabelSelector, MachineConfig, MachineConfigPool,
    MachineConfigSpec, MaxUnavailable, NodeInfo, ObjectMeta, Origin, PolicyAction,
    SelectorOperator, Sourced, UnitPolicy, MCO_API_VERSION,
};
use crate::node::{parse_documents, Node, NodeValue};
use crate::validate;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The largest manifest file (or request body) read: the server's limit on an apply body.
pub const MAX_MANIFEST_BYTES: usize = 64 << 20;

/// The largest single MachineConfig read by [`read_machine_config`] (a rendered config, which
/// merges many manifests): room for the most contents a config may hold
/// ([`crate::validate::MAX_CONFIG_CONTENTS_BYTES`], 256 MiB) written percent-encoded (three
/// characters a byte) and the rest of the config.
pub const MAX_RENDERED_BYTES: usize = 1 << 30;

/// Everything read from a set of inputs.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    /// MachineConfigs.
    pub machine_configs: Vec<Sourced<MachineConfig>>,
    /// MachineConfigPools.
    pub pools: Vec<Sourced<MachineConfigPool>>,
    /// Nodes.
    pub nodes: Vec<Sourced<NodeInfo>>,
    /// Node-disruption policies (from `MachineConfiguration` objects).
    pub policies: Vec<Sourced<DisruptionPolicies>>,
}

impl Manifests {
    /// The disruption policies of all `MachineConfiguration` objects read, concatenated.
    pub fn disruption_policies(&self) -> DisruptionPolicies {
        let mut out = DisruptionPolicies::default();
        for p in &self.policies {
            out.files.extend(p.item.files.iter().cloned());
            out.units.extend(p.item.units.iter().cloned());
            if p.item.ssh_key.is_some() {
                out.ssh_key = p.item.ssh_key.clone();
            }
        }
        out
    }

    /// Adds everything from `other`.
    pub fn extend(&mut self, other: Manifests) {
        self.machine_configs.extend(other.machine_configs);
        self.pools.extend(other.pools);
        self.nodes.extend(other.nodes);
        self.policies.extend(other.policies);
    }
}

/// Reads every object in `text` (the contents of `file`). Objects with errors are left out and
/// reported in the returned diagnostics, together with warnings.
pub fn read_str(file: &str, text: &str) -> (Manifests, Vec<Diagnostic>) {
    read_str_limited(file, text, MAX_MANIFEST_BYTES, "manifests")
}

fn read_str_limited(
    file: &str,
    text: &str,
    max_bytes: usize,
    what: &str,
) -> (Manifests, Vec<Diagnostic>) {
    let mut out = Manifests::default();
    let mut diags = Vec::new();
    if text.len() > max_bytes {
        diags.push(Diagnostic::error(
            file,
            None,
            "",
            format!(
                "the file is {} bytes; hearth reads {what} of at most {} MiB: split it into several files",
                text.len(),
                max_bytes >> 20
            ),
        ));
        return (out, diags);
    }
    let docs = match parse_documents(text) {
        Ok(d) => d,
        Err(e) if e.limit => {
            diags.push(Diagnostic::error(
                file,
                Some(e.line),
                "",
                format!("refused at column {}: {}", e.col, e.message),
            ));
            return (out, diags);
        }
        Err(e) => {
            diags.push(Diagnostic::error(
                file,
                Some(e.line),
                "",
                format!(
                    "not valid YAML or JSON at column {}: {} (check the indentation of this line and the ones before it)",
                    e.col, e.message
                ),
            ));
            return (out, diags);
        }
    };
    for (i, doc) in docs.iter().enumerate() {
        let mut reader = Reader {
            file,
            document: i + 1,
            out: &mut out,
            diags: &mut diags,
            failed_paths: Vec::new(),
        };
        reader.object(doc, "");
    }
    (out, diags)
}

/// Reads a single MachineConfig from `text` (a rendered config file, for example), refusing
/// anything else.
pub fn read_machine_config(
    file: &str,
    text: &str,
) -> Result<(MachineConfig, Vec<Diagnostic>), Vec<Diagnostic>> {
    let (m, diags) = read_str_limited(file, text, MAX_RENDERED_BYTES, "rendered configs");
    if diags.iter().any(Diagnostic::is_error) {
        return Err(diags);
    }
    let count = m.machine_configs.len();
    if count != 1 || !m.pools.is_empty() || !m.nodes.is_empty() {
        return Err(vec![Diagnostic::error(
            file,
            None,
            "",
            format!("expected exactly one MachineConfig, found {count} MachineConfig(s) and {} other object(s)", m.pools.len() + m.nodes.len() + m.policies.len()),
        )]);
    }
    let mc = m
        .machine_configs
        .into_iter()
        .next()
        .map(|s| s.item)
        .unwrap_or_default();
    Ok((mc, diags))
}

struct Reader<'a> {
    file: &'a str,
    document: usize,
    out: &'a mut Manifests,
    diags: &'a mut Vec<Diagnostic>,
    /// Field paths of the decoding errors of the object being read: validation findings there
    /// (about the placeholders decoding went on with) are not reported.
    failed_paths: Vec<String>,
}

/// Finds the node at a field path like `spec.config.storage.files[2].path` (for line numbers).
pub fn node_at<'n>(root: &'n Node, path: &str) -> Option<&'n Node> {
    let mut node = root;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, indexes) = match part.find('[') {
            Some(pos) => (&part[..pos], &part[pos..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            node = node.get(name)?;
        }
        for idx in indexes.split('[').filter(|s| !s.is_empty()) {
            let i: usize = idx.trim_end_matches(']').parse().ok()?;
            match &node.value {
                NodeValue::Seq(items) => node = items.get(i)?,
                _ => return None,
            }
        }
    }
    Some(node)
}

/// The line of the deepest existing node on `path`.
fn line_of(root: &Node, path: &str) -> usize {
    let mut p = path.to_string();
    loop {
        if let Some(n) = node_at(root, &p) {
            return n.line;
        }
        match p.rfind(['.', '[']) {
            Some(pos) => p.truncate(pos),
            None => return root.line,
        }
    }
}

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
}

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
}

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
}

#[derive(Deserialize)]
struct ServiceRef {
    #[serde(rename = "serviceName")]
    service_name: String,
}

#[derive(Deserialize)]
struct ActionWire {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    reload: Option<ServiceRef>,
    #[serde(default)]
    restart: Option<ServiceRef>,
}

#[derive(Deserialize)]
struct FilePolicyWire {
    path: String,
    actions: Vec<ActionWire>,
}

#[derive(Deserialize)]
struct UnitPolicyWire {
    name: String,
    actions: Vec<ActionWire>,
}

#[derive(Deserialize)]
struct SshPolicyWire {
    actions: Vec<ActionWire>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeDisruptionPolicyWire {
    #[serde(default)]
    files: Vec<FilePolicyWire>,
    #[serde(default)]
    units: Vec<UnitPolicyWire>,
    #[serde(default)]
    sshkey: Option<SshPolicyWire>,
}

/// Rewrites `DecodeError`s raised while decoding `base` into diagnostics.
fn decode_diag(file: &str, e: DecodeError) -> Diagnostic {
    Diagnostic::error(file, e.line, &e.path, e.message)
}

impl Reader<'_> {
    /// Reports every decoding error of an object, remembering where they are (see
    /// `Reader::failed_paths`).
    fn decode_errors(&mut self, errors: Vec<DecodeError>, object: &Option<String>) {
        for e in errors {
            self.failed_paths.push(e.path.clone());
            self.diags
                .push(decode_diag(self.file, e).with_object(object.clone()));
        }
    }
}

impl Reader<'_> {
    fn origin(&self, node: &Node) -> Origin {
        Origin {
            file: self.file.to_string(),
            document: self.document,
            line: node.line,
        }
    }

    fn push_warnings(&mut self, object: &Option<String>, warnings: Vec<DecodeWarning>) {
        for w in warnings {
            let message = if w.path.ends_with(".filesystem") && w.path.contains(".storage.") {
                "`filesystem` is an Ignition 2.x field; Ignition 3 places files by their path alone. Ignored".to_string()
            } else {
                w.message
            };
            self.diags.push(
                Diagnostic::warning(self.file, Some(w.line), &w.path, message)
                    .with_object(object.clone()),
            );
        }
    }

    fn object(&mut self, doc: &Node, base: &str) {
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

    fn metadata(&mut self, doc: &Node, base: &str, object: &Option<String>) -> Option<ObjectMeta> {
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

    fn machine_config(&mut self, doc: &Node, base: &str, object: Option<String>) {
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

    fn pool(&mut self, doc: &Node, base: &str, object: Option<String>) {
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
        let _ = wire.configuration;
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
        if failed {
            return;
        }
        let origin = self.origin(doc);
        self.out.pools.push(Sourced {
            item: MachineConfigPool {
                metadata,
                machine_config_selector,
                node_selector,
                paused: wire.paused.unwrap_or(false),
                max_unavailable,
            },
            origin,
        });
    }

    fn node(&mut self, doc: &Node, base: &str, object: Option<String>) {
        let Some(metadata) = self.metadata(doc, base, &object) else {
            return;
        };
        let origin = self.origin(doc);
        self.out.nodes.push(Sourced {
            item: NodeInfo { metadata },
            origin,
        });
    }

    fn machine_configuration(&mut self, doc: &Node, base: &str, object: Option<String>) {
        if let Some(n) = doc
            .get("spec")
            .and_then(|s| s.get(crate::mco::OVERRIDES_FIELD))
            .filter(|n| crate::mco::asks_for_something(n))
        {
            self.diags.push(
                Diagnostic::error(
                    self.file,
                    Some(n.line),
                    &join(base, &format!("spec.{}", crate::mco::OVERRIDES_FIELD)),
                    crate::mco::OVERRIDES_REFUSED,
                )
                .with_object(object.clone()),
            );
        }
        let path = join(base, "spec.nodeDisruptionPolicy");
        let Some(node) = doc
            .get("spec")
            .and_then(|s| s.get("nodeDisruptionPolicy"))
            .filter(|n| !n.is_null())
        else {
            return;
        };
        let mut warnings = Vec::new();
        let wire: NodeDisruptionPolicyWire = match decode_all(node, &path, &mut warnings) {
            Ok(w) => w,
            Err(errors) => {
                self.decode_errors(errors, &object);
                return;
            }
        };
        self.push_warnings(&object, warnings);
        let mut failed = false;
        let mut convert = |field: String,
                           actions: Vec<ActionWire>,
                           this: &mut Self|
         -> Vec<PolicyAction> {
            let mut out = Vec::new();
            for (i, a) in actions.into_iter().enumerate() {
                let p = format!("{field}.actions[{i}]");
                let action = match (a.kind.as_str(), a.reload, a.restart) {
                    ("None", _, _) => Some(PolicyAction::None),
                    ("Reboot", _, _) => Some(PolicyAction::Reboot),
                    ("Drain", _, _) => Some(PolicyAction::Drain),
                    ("DaemonReload", _, _) => Some(PolicyAction::DaemonReload),
                    ("Special", _, _) => Some(PolicyAction::Special),
                    ("Reload", Some(r), _) => Some(PolicyAction::Reload {
                        service: r.service_name,
                    }),
                    ("Restart", _, Some(r)) => Some(PolicyAction::Restart {
                        service: r.service_name,
                    }),
                    ("Reload" | "Restart", _, _) => {
                        this.diags.push(
                            Diagnostic::error(
                                this.file,
                                Some(line_of(node, &p)),
                                &join(&path, &p),
                                format!(
                                    "a {} action needs {}: {{serviceName: ...}}",
                                    a.kind,
                                    a.kind.to_lowercase()
                                ),
                            )
                            .with_object(object.clone()),
                        );
                        None
                    }
                    (other, _, _) => {
                        this.diags.push(
                            Diagnostic::error(this.file, Some(line_of(node, &p)), &join(&path, &format!("{p}.type")), format!("unknown action type {other:?}; expected one of: None, Reboot, Drain, Reload, Restart, DaemonReload, Special"))
                                .with_object(object.clone()),
                        );
                        None
                    }
                };
                match action {
                    Some(a) => out.push(a),
                    None => failed = true,
                }
            }
            out
        };
        let mut policies = DisruptionPolicies::default();
        for (i, f) in wire.files.into_iter().enumerate() {
            let actions = convert(format!("files[{i}]"), f.actions, self);
            policies.files.push(FilePolicy {
                path: f.path,
                actions,
            });
        }
        for (i, u) in wire.units.into_iter().enumerate() {
            let actions = convert(format!("units[{i}]"), u.actions, self);
            policies.units.push(UnitPolicy {
                name: u.name,
                actions,
            });
        }
        if let Some(s) = wire.sshkey {
            policies.ssh_key = Some(convert("sshkey".to_string(), s.actions, self));
        }
        for (i, f) in policies.files.iter().enumerate() {
            if let Some(msg) = crate::mco::check_policy_path(&f.path) {
                let p = format!("files[{i}].path");
                self.diags.push(
                    Diagnostic::error(self.file, Some(line_of(node, &p)), &join(&path, &p), msg)
                        .with_object(object.clone()),
                );
                failed = true;
            }
        }
        if failed {
            return;
        }
        let origin = self.origin(doc);
        self.out.policies.push(Sourced {
            item: policies,
            origin,
        });
    }
}

fn join(base: &str, field: &str) -> String {
    if base.is_empty() {
        field.to_string()
    } else {
        format!("{base}.{field}")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_000_script_is_read_with_octal_mode() {
        let text = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  creationTimestamp: null
  labels:
    machineconfiguration.openshift.io/role: worker
  name: 99-kubeinit-extra-config-worker
spec:
  osImageURL: ''
  config:
    ignition:
      config:
        replace:
          verification: {}
      security:
        tls: {}
      timeouts: {}
      version: 2.2.0
    networkd: {}
    passwd: {}
    storage:
      files:
      - contents:
          source: data:text/plain;charset=utf-8;base64,aGk=
          verification: {}
        filesystem: root
        mode: 0755
        path: /usr/local/bin/script
"#;
        let (m, diags) = read_str("seed.yaml", text);
        assert!(diags.is_empty(), "{diags:?}");
        let mc = &m.machine_configs[0].item;
        assert_eq!(mc.name(), "99-kubeinit-extra-config-worker");
        assert_eq!(mc.role(), Some("worker"));
        let f = &mc.spec.config.storage.files[0];
        assert_eq!(f.mode, Some(0o755));
        assert_eq!(f.path, "/usr/local/bin/script");
        assert_eq!(mc.spec.source_version, Some(SpecVersion::V2_2));
    }

    #[test]
    fn null_path_is_an_error_with_line_and_object() {
        let text = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: x\nspec:\n  config:\n    ignition:\n      version: 3.5.0\n    storage:\n      files:\n      - path: null\n        contents:\n          source: data:,\n";
        let (m, diags) = read_str("x.yaml", text);
        assert!(m.machine_configs.is_empty());
        let d = &diags[0];
        assert_eq!(d.path, "spec.config.storage.files[0].path");
        assert_eq!(d.line, Some(11));
        assert_eq!(d.object.as_deref(), Some("MachineConfig/x"));
        assert_eq!(
            d.to_string(),
            "x.yaml:11: error: MachineConfig/x: spec.config.storage.files[0].path: expected a string, found null"
        );
    }

    #[test]
    fn unreadable_maintenance_windows_refuse_the_pool_with_file_line_and_field() {
        let pool = |w: &str| {
            format!("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\n  annotations:\n    hearth.io/maintenance-windows: \"{w}\"\nspec:\n  machineConfigSelector: {{}}\n  nodeSelector: {{}}\n")
        };
        let (m, diags) = read_str(
            "pools.yaml",
            &pool("Sat 02:00-06:00 UTC; Mon-Fri 23:00-01:00 +01:00"),
        );
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(m.pools.len(), 1);
        let (m, diags) = read_str("pools.yaml", &pool("Caturday 02:00-06:00"));
        assert!(m.pools.is_empty());
        assert_eq!(diags.len(), 1, "{diags:?}");
        let d = &diags[0];
        assert!(d.is_error());
        assert_eq!(d.path, crate::window::FIELD);
        assert_eq!(d.line, Some(6));
        assert!(d.message.contains("\"worker\""), "{}", d.message);
        assert!(d.message.contains("Caturday"), "{}", d.message);
    }

    #[test]
    fn lists_and_json() {
        let text = r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}}},
            {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig", "metadata": {"name": "a"}, "spec": {"kernelArguments": ["nosmt"]}}
        ]}"#;
        let (m, diags) = read_str("l.json", text);
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(m.nodes.len(), 1);
        assert_eq!(m.machine_configs[0].item.spec.kernel_arguments, ["nosmt"]);
    }

    #[test]
    fn template_parameters_are_named() {
        let text = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: change-fips\nspec:\n  fips: ${{FIPS}}\n";
        let (_, diags) = read_str("t.yaml", text);
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].path, "spec.fips");
        assert!(diags[0].message.contains("${{FIPS}}"), "{}", diags[0]);
    }

    #[test]
    fn pool_selectors_are_checked() {
        let text = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: infra\nspec:\n  machineConfigSelector:\n    matchExpressions:\n    - {key: machineconfiguration.openshift.io/role, operator: In}\n  nodeSelector: {}\n";
        let (m, diags) = read_str("p.yaml", text);
        assert!(m.pools.is_empty());
        assert_eq!(
            diags[0].path,
            "spec.machineConfigSelector.matchExpressions[0]"
        );
        assert_eq!(diags[0].line, Some(8));
    }

    #[test]
    fn oversized_files_are_refused_before_parsing() {
        let text = " ".repeat(MAX_MANIFEST_BYTES + 1);
        let (_, diags) = read_str("big.yaml", &text);
        assert_eq!(diags.len(), 1);
        assert!(diags[0].message.contains("at most 64 MiB"), "{}", diags[0]);
        // Rendered configs (read_machine_config) may be larger; the same check, another limit.
        let mc = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: a}\n";
        assert!(read_machine_config("r.yaml", mc).is_ok());
        let (_, diags) = read_str_limited("r.yaml", mc, 10, "rendered configs");
        assert!(
            diags[0].message.contains("rendered configs of at most"),
            "{}",
            diags[0]
        );
    }

    #[test]
    fn node_at_walks_indexes() {
        let docs = parse_documents("a:\n  b:\n  - x\n  - c: 1\n").unwrap();
        assert_eq!(node_at(&docs[0], "a.b[1].c").unwrap().line, 4);
        assert!(node_at(&docs[0], "a.b[5]").is_none());
    }
}
