//! The typed objects hearth works with: MachineConfigs, pools, nodes and node-disruption
//! policies, as read from manifests and as produced by rendering.

use crate::ignition::{Config, SpecVersion};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The API group and version of MachineConfig and MachineConfigPool objects.
pub const MCO_API_VERSION: &str = "machineconfiguration.openshift.io/v1";
/// The label that gives a MachineConfig its role (`worker`, `master`, a custom pool's name).
pub const ROLE_LABEL: &str = "machineconfiguration.openshift.io/role";
/// The label that makes a MachineConfig a per-node overlay: its value is the node's name. Such a
/// config is never part of a pool's render; it is merged after the pool's configs for that node.
pub const NODE_LABEL: &str = "hearth.io/node";
/// Annotation on rendered configs listing the configs they were rendered from.
pub const RENDERED_FROM_ANNOTATION: &str = "hearth.io/rendered-from";
/// Annotation on rendered configs naming the pool.
pub const RENDERED_POOL_ANNOTATION: &str = "hearth.io/pool";
/// Annotation on rendered configs naming the node, for per-node renders.
pub const RENDERED_NODE_ANNOTATION: &str = "hearth.io/node";

/// Where an object was read from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Origin {
    /// File name (or `-` for standard input, or a URL).
    pub file: String,
    /// 1-based index of the YAML document in the file.
    pub document: usize,
    /// 1-based line where the object starts.
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// An object with the place it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Sourced<T> {
    /// The object.
    pub item: T,
    /// Where it was read.
    pub origin: Origin,
}

/// Object metadata: the parts hearth uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectMeta {
    /// Name.
    pub name: String,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The kernel a node runs.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub enum KernelType {
    /// The image's default kernel (`default`, or empty).
    #[default]
    #[serde(rename = "default")]
    Default,
    /// `realtime`.
    #[serde(rename = "realtime")]
    Realtime,
    /// `64k-pages` (aarch64).
    #[serde(rename = "64k-pages")]
    Pages64k,
}

impl KernelType {
    /// Parses the MCO's spelling; the empty string is `default`.
    pub fn parse(text: &str) -> Option<KernelType> {
        match text {
            "" | "default" => Some(KernelType::Default),
            "realtime" => Some(KernelType::Realtime),
            "64k-pages" => Some(KernelType::Pages64k),
            _ => None,
        }
    }

    /// The MCO's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            KernelType::Default => "default",
            KernelType::Realtime => "realtime",
            KernelType::Pages64k => "64k-pages",
        }
    }
}

impl fmt::Display for KernelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The spec of a MachineConfig, with its Ignition config translated to the internal model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigSpec {
    /// The Ignition config (internal model). Configs without one hold an empty config.
    pub config: Config,
    /// The Ignition spec version the config was written in (`None` when it had none).
    #[serde(skip)]
    pub source_version: Option<SpecVersion>,
    /// Kernel arguments, in order, duplicates kept.
    pub kernel_arguments: Vec<String>,
    /// Kernel type.
    pub kernel_type: KernelType,
    /// FIPS mode.
    pub fips: bool,
    /// OS image (an ostree ref or commit, or a container image on rpm-ostree hosts). Empty: keep.
    #[serde(rename = "osImageURL")]
    pub os_image_url: String,
    /// RHCOS extensions.
    pub extensions: Vec<String>,
    /// Run-once actions (a hearth extension, `spec.actions`; see [`crate::actions`]). Left out
    /// of the serialised form when empty, so that configs without actions keep their hash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<crate::actions::RunOnceAction>,
}

/// A MachineConfig.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MachineConfig {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: MachineConfigSpec,
}

impl MachineConfig {
    /// Name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// The role label's value, if any.
    pub fn role(&self) -> Option<&str> {
        self.metadata.labels.get(ROLE_LABEL).map(String::as_str)
    }

    /// The node this config is an overlay for, if it is one.
    pub fn overlay_node(&self) -> Option<&str> {
        self.metadata.labels.get(NODE_LABEL).map(String::as_str)
    }

    /// The manifest form (`apiVersion`, `kind`, `metadata`, `spec`) with the Ignition config in
    /// the newest spec version.
    pub fn to_manifest(&self) -> serde_json::Value {
        let mut config = self.spec.config.clone();
        config.ignition.version = Some(SpecVersion::LATEST.as_str().to_string());
        let mut manifest = serde_json::json!({
            "apiVersion": MCO_API_VERSION,
            "kind": "MachineConfig",
            "metadata": self.metadata,
            "spec": {
                "config": config,
                "extensions": self.spec.extensions,
                "fips": self.spec.fips,
                "kernelArguments": self.spec.kernel_arguments,
                "kernelType": self.spec.kernel_type,
                "osImageURL": self.spec.os_image_url,
            }
        });
        // hearth's extension appears only where it is used: an MCO config stays as it was.
        if !self.spec.actions.is_empty() {
            manifest["spec"]["actions"] = serde_json::json!(self.spec.actions);
        }
        manifest
    }
}

/// `matchExpressions[].operator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelectorOperator {
    /// The label's value is one of `values`.
    In,
    /// The label is absent or its value is none of `values`.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectorRequirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub operator: SelectorOperator,
    /// Values (required for In/NotIn, forbidden for Exists/DoesNotExist).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// A Kubernetes label selector. An empty selector matches everything, as in Kubernetes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Exact label matches.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Expressions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<SelectorRequirement>,
}

impl LabelSelector {
    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let value = labels.get(&r.key);
                match r.operator {
                    SelectorOperator::In => value.is_some_and(|v| r.values.contains(v)),
                    SelectorOperator::NotIn => !value.is_some_and(|v| r.values.contains(v)),
                    SelectorOperator::Exists => value.is_some(),
                    SelectorOperator::DoesNotExist => value.is_none(),
                }
            })
    }

    /// The selector with its `In`/`NotIn` values in hash sets: [`LabelSelector::matches`] is
    /// linear in the number of values, so a selector used for many label sets (a pool's
    /// `machineConfigSelector` against every MachineConfig) is compiled once.
    pub fn compile(&self) -> CompiledSelector<'_> {
        CompiledSelector {
            selector: self,
            values: self
                .match_expressions
                .iter()
                .map(|r| r.values.iter().map(String::as_str).collect())
                .collect(),
        }
    }

    /// A selector of one exact label.
    pub fn label(key: &str, value: &str) -> LabelSelector {
        LabelSelector {
            match_labels: BTreeMap::from([(key.to_string(), value.to_string())]),
            match_expressions: Vec::new(),
        }
    }
}

/// A [`LabelSelector`] ready to match many label sets (see [`LabelSelector::compile`]).
#[derive(Debug, Clone)]
pub struct CompiledSelector<'a> {
    selector: &'a LabelSelector,
    values: Vec<std::collections::HashSet<&'a str>>,
}

impl CompiledSelector<'_> {
    /// Whether `labels` satisfy every requirement (as [`LabelSelector::matches`]).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector
            .match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self
                .selector
                .match_expressions
                .iter()
                .zip(&self.values)
                .all(|(r, values)| {
                    let value = labels.get(&r.key).map(String::as_str);
                    match r.operator {
                        SelectorOperator::In => value.is_some_and(|v| values.contains(v)),
                        SelectorOperator::NotIn => !value.is_some_and(|v| values.contains(v)),
                        SelectorOperator::Exists => value.is_some(),
                        SelectorOperator::DoesNotExist => value.is_none(),
                    }
                })
    }
}

/// `maxUnavailable`: a count or a percentage of the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MaxUnavailable {
    /// A number of nodes.
    Count(u32),
    /// A percentage (0-100) of the pool's nodes, rounded down, at least 1.
    #[serde(with = "percent")]
    Percent(u32),
}

mod percent {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(p: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{p}%"))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let s = String::deserialize(d)?;
        s.strip_suffix('%')
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| serde::de::Error::custom(format!("{s:?} is not a percentage")))
    }
}

impl Default for MaxUnavailable {
    fn default() -> Self {
        MaxUnavailable::Count(1)
    }
}

impl MaxUnavailable {
    /// How many of `pool_size` nodes may be unavailable at once (at least 1 for a non-empty pool).
    pub fn resolve(self, pool_size: usize) -> usize {
        let n = match self {
            MaxUnavailable::Count(c) => c as usize,
            MaxUnavailable::Percent(p) => pool_size * p as usize / 100,
        };
        n.max(1).min(pool_size.max(1))
    }
}

/// A MachineConfigPool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MachineConfigPool {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Which MachineConfigs the pool renders.
    pub machine_config_selector: LabelSelector,
    /// Which nodes belong to the pool.
    pub node_selector: LabelSelector,
    /// Whether rollouts are paused; `None` when the manifest does not say (a new pool is not
    /// paused; applying a manifest that does not name the field keeps a pool's pause as it is,
    /// as `kubectl apply` keeps a field set by `kubectl patch`).
    pub paused: Option<bool>,
    /// How many nodes may update at once.
    pub max_unavailable: MaxUnavailable,
}

impl MachineConfigPool {
    /// Name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// The MCO's built-in pool for `role` (`master` or `worker`): configs with that role label,
    /// nodes with `node-role.kubernetes.io/<role>`.
    pub fn builtin(role: &str) -> MachineConfigPool {
        MachineConfigPool {
            metadata: ObjectMeta {
                name: role.to_string(),
                ..Default::default()
            },
            machine_config_selector: LabelSelector::label(ROLE_LABEL, role),
            node_selector: LabelSelector::label(&format!("node-role.kubernetes.io/{role}"), ""),
            paused: None,
            max_unavailable: MaxUnavailable::default(),
        }
    }
}

/// A node as hearth knows it offline: a name and labels (a stand-in for a Kubernetes Node).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeInfo {
    /// Metadata (name, labels).
    pub metadata: ObjectMeta,
}

/// What a node must do for a change to take effect (a node-disruption policy action).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum PolicyAction {
    /// Nothing.
    None,
    /// `systemctl daemon-reload`.
    DaemonReload,
    /// Reload a service.
    Reload {
        /// The service to reload.
        #[serde(rename = "serviceName")]
        service: String,
    },
    /// Restart a service.
    Restart {
        /// The service to restart.
        #[serde(rename = "serviceName")]
        service: String,
    },
    /// Drain the node (meaningful in Kubernetes mode; recorded otherwise).
    Drain,
    /// The MCO's special handling of `/etc/containers/registries.conf` (reload crio).
    Special,
    /// Reboot.
    Reboot,
}

/// A rule for changes to files under a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilePolicy {
    /// A file or directory path: the longest matching rule wins.
    pub path: String,
    /// Actions, in order.
    pub actions: Vec<PolicyAction>,
}

/// A rule for changes to one unit (or drop-in of it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitPolicy {
    /// Unit name (exact match).
    pub name: String,
    /// Actions, in order.
    pub actions: Vec<PolicyAction>,
}

/// Node-disruption policies: what each kind of change needs. User rules are read from the MCO's
/// own `MachineConfiguration` object (`operator.openshift.io/v1`,
/// `spec.nodeDisruptionPolicy`) and take precedence over the MCO's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisruptionPolicies {
    /// File rules.
    pub files: Vec<FilePolicy>,
    /// Unit rules.
    pub units: Vec<UnitPolicy>,
    /// Actions for SSH key changes (`None` by default).
    pub ssh_key: Option<Vec<PolicyAction>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compiled_selector_matches_as_the_selector_does() {
        let req = |key: &str, operator, values: &[&str]| SelectorRequirement {
            key: key.into(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
        };
        let selectors = [
            LabelSelector::default(),
            LabelSelector::label("role", "worker"),
            LabelSelector {
                match_labels: BTreeMap::from([("a".into(), "1".into())]),
                match_expressions: vec![
                    req("role", SelectorOperator::In, &["worker", "infra"]),
                    req("zone", SelectorOperator::NotIn, &["z1"]),
                    req("gpu", SelectorOperator::Exists, &[]),
                    req("old", SelectorOperator::DoesNotExist, &[]),
                ],
            },
        ];
        let label_sets: Vec<BTreeMap<String, String>> = [
            vec![],
            vec![("role", "worker")],
            vec![("a", "1"), ("role", "infra"), ("gpu", "")],
            vec![("a", "1"), ("role", "infra"), ("gpu", ""), ("zone", "z1")],
            vec![("a", "1"), ("role", "infra"), ("gpu", ""), ("zone", "z2")],
            vec![("a", "1"), ("role", "master"), ("gpu", "")],
            vec![("a", "1"), ("role", "infra"), ("gpu", ""), ("old", "x")],
        ]
        .iter()
        .map(|l| {
            l.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect();
        for s in &selectors {
            let c = s.compile();
            for labels in &label_sets {
                assert_eq!(c.matches(labels), s.matches(labels), "{s:?} {labels:?}");
            }
        }
    }
}
