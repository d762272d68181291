//! Pools and rendering: which pool a node belongs to, which MachineConfigs a pool takes, and how
//! they merge into one rendered MachineConfig with a content-addressed name.
//!
//! The rules follow the MCO (see `docs/config-model.md`):
//! - a node's pool is chosen by the pools' `nodeSelector`s; `master` wins over anything else, a
//!   custom pool beats `worker`, two matching custom pools are an error;
//! - a pool takes the MachineConfigs its `machineConfigSelector` selects; they merge in order:
//!   `worker`-role configs by name, then all others by name, so a custom pool that selects
//!   `worker` and its own role overrides the worker configs it inherits;
//! - Ignition content merges as Ignition merges configs (files and links by path, units and
//!   drop-ins and users by name, field by field, later wins), except that a file's `contents` is
//!   replaced as a whole (never a new `source` with a stale `compression` or hash);
//! - kernel arguments concatenate in order (duplicates kept), `fips` is OR-ed, `kernelType` is the
//!   last non-default one, `osImageURL` the last non-empty one, extensions are a union;
//! - per-node overlays (configs labelled [`NODE_LABEL`](crate::model::NODE_LABEL)) are never part of a pool; they merge
//!   after the pool's configs for their node only.

use crate::ignition::{Config, SpecVersion};
use crate::model::{
    KernelType, MachineConfig, MachineConfigPool, MachineConfigSpec, NodeInfo, ObjectMeta,
    RENDERED_FROM_ANNOTATION, RENDERED_NODE_ANNOTATION, RENDERED_POOL_ANNOTATION, ROLE_LABEL,
};
use indexmap::IndexMap;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Why rendering failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// No pool selects the node.
    #[error("node {node:?} matches no pool's nodeSelector (labels: {labels}); label it, e.g. node-role.kubernetes.io/worker=\"\"")]
    NoPool {
        /// Node name.
        node: String,
        /// The node's labels, for the message.
        labels: String,
    },
    /// Two custom pools select the node.
    #[error("node {node:?} matches more than one custom pool ({pools}); a node may belong to one custom pool only: remove a label or narrow a nodeSelector")]
    TwoCustomPools {
        /// Node name.
        node: String,
        /// The pools.
        pools: String,
    },
    /// The pool does not exist.
    #[error("no pool named {0:?}")]
    UnknownPool(String),
    /// The node does not exist.
    #[error("no node named {0:?} (give its Node manifest with -f)")]
    UnknownNode(String),
    /// Two MachineConfigs share a name.
    #[error("two MachineConfigs are named {0:?}; names must be unique")]
    DuplicateName(String),
    /// The pool selects no MachineConfigs.
    #[error("pool {0:?} selects no MachineConfigs; check its machineConfigSelector and the configs' role labels")]
    NoConfigs(String),
    /// The merged config cannot be represented (should not happen for validated inputs).
    #[error("merging failed: {0}")]
    Merge(String),
    /// Two configs define the same path as different kinds (a file and a directory, say).
    #[error("{path:?} is a {first_kind} in MachineConfig {first_config:?} and a {second_kind} in MachineConfig {second_config:?}; a path can be only one of file, directory or link")]
    PathConflict {
        /// The path.
        path: String,
        /// Kind in the earlier config.
        first_kind: &'static str,
        /// The earlier config.
        first_config: String,
        /// Kind in the later config.
        second_kind: &'static str,
        /// The later config.
        second_config: String,
    },
    /// The merged config is not valid (valid configs that contradict each other once merged).
    #[error("the merged config is not valid: {}", .0.join("; "))]
    Invalid(Vec<String>),
}

/// The pools of a fleet: the given ones plus the MCO's built-in `master` and `worker` when they
/// are not given.
pub fn with_builtin_pools(pools: &[MachineConfigPool]) -> Vec<MachineConfigPool> {
    let mut out = pools.to_vec();
    for role in ["master", "worker"] {
        if !out.iter().any(|p| p.name() == role) {
            out.push(MachineConfigPool::builtin(role));
        }
    }
    out
}

/// The pool a node belongs to, by the MCO's rules. An empty `nodeSelector` selects no node (as
/// in the MCO).
pub fn pool_for_node<'a>(
    pools: &'a [MachineConfigPool],
    node: &NodeInfo,
) -> Result<&'a MachineConfigPool, RenderError> {
    let labels = &node.metadata.labels;
    let matching: Vec<&MachineConfigPool> = pools
        .iter()
        .filter(|p| {
            let s = &p.node_selector;
            !(s.match_labels.is_empty() && s.match_expressions.is_empty()) && s.matches(labels)
        })
        .collect();
    if let Some(master) = matching.iter().find(|p| p.name() == "master") {
        return Ok(master);
    }
    let custom: Vec<&&MachineConfigPool> =
        matching.iter().filter(|p| p.name() != "worker").collect();
    match custom.len() {
        0 => matching
            .iter()
            .find(|p| p.name() == "worker")
            .copied()
            .ok_or_else(|| RenderError::NoPool {
                node: node.metadata.name.clone(),
                labels: format_labels(labels),
            }),
        1 => Ok(custom[0]),
        _ => {
            let mut names: Vec<&str> = custom.iter().map(|p| p.name()).collect();
            names.sort_unstable();
            Err(RenderError::TwoCustomPools {
                node: node.metadata.name.clone(),
                pools: names.join(", "),
            })
        }
    }
}

fn format_labels(labels: &BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return "none".to_string();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The MachineConfigs a pool renders, in merge order: `worker`-role configs by name, then the
/// others by name. Per-node overlays are excluded.
pub fn configs_for_pool<'a>(
    pool: &MachineConfigPool,
    configs: &'a [MachineConfig],
) -> Vec<&'a MachineConfig> {
    let selector = pool.machine_config_selector.compile();
    let mut selected: Vec<&MachineConfig> = configs
        .iter()
        .filter(|mc| mc.overlay_node().is_none())
        .filter(|mc| selector.matches(&mc.metadata.labels))
        .collect();
    selected.sort_by(|a, b| {
        let wa = a.role() != Some("worker");
        let wb = b.role() != Some("worker");
        (wa, a.name()).cmp(&(wb, b.name()))
    });
    selected
}

/// The per-node overlays of `node`, by name.
pub fn overlays_for_node<'a>(node: &str, configs: &'a [MachineConfig]) -> Vec<&'a MachineConfig> {
    let mut out: Vec<&MachineConfig> = configs
        .iter()
        .filter(|mc| mc.overlay_node() == Some(node))
        .collect();
    out.sort_by(|a, b| a.name().cmp(b.name()));
    out
}

fn check_unique(configs: &[MachineConfig]) -> Result<(), RenderError> {
    let mut names: Vec<&str> = configs.iter().map(MachineConfig::name).collect();
    names.sort_unstable();
    for w in names.windows(2) {
        if w[0] == w[1] {
            return Err(RenderError::DuplicateName(w[0].to_string()));
        }
    }
    Ok(())
}

/// Renders `pool` from `configs`.
pub fn render_pool(
    pool: &MachineConfigPool,
    configs: &[MachineConfig],
) -> Result<MachineConfig, RenderError> {
    check_unique(configs)?;
    let selected = configs_for_pool(pool, configs);
    if selected.is_empty() {
        return Err(RenderError::NoConfigs(pool.name().to_string()));
    }
    let spec = merge(&selected)?;
    Ok(rendered(pool.name(), None, &selected, spec))
}

/// The result of rendering one node.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedNode {
    /// The node's pool.
    pub pool: String,
    /// The rendered config: the pool's render when the node has no overlays, else its own.
    pub config: MachineConfig,
}

/// Renders the config of `node_name`: its pool's configs, then its overlays.
pub fn render_node(
    pools: &[MachineConfigPool],
    configs: &[MachineConfig],
    nodes: &[NodeInfo],
    node_name: &str,
) -> Result<RenderedNode, RenderError> {
    check_unique(configs)?;
    let node = nodes
        .iter()
        .find(|n| n.metadata.name == node_name)
        .ok_or_else(|| RenderError::UnknownNode(node_name.to_string()))?;
    let pool = pool_for_node(pools, node)?;
    let mut selected = configs_for_pool(pool, configs);
    if selected.is_empty() {
        return Err(RenderError::NoConfigs(pool.name().to_string()));
    }
    let overlays = overlays_for_node(node_name, configs);
    let node_part = if overlays.is_empty() {
        None
    } else {
        Some(node_name)
    };
    selected.extend(overlays);
    let spec = merge(&selected)?;
    Ok(RenderedNode {
        pool: pool.name().to_string(),
        config: rendered(pool.name(), node_part, &selected, spec),
    })
}

fn rendered(
    pool: &str,
    node: Option<&str>,
    sources: &[&MachineConfig],
    spec: MachineConfigSpec,
) -> MachineConfig {
    let hash = spec_hash(&spec);
    let name = match node {
        Some(n) => format!("rendered-{pool}-{n}-{}", &hash[..32]),
        None => format!("rendered-{pool}-{}", &hash[..32]),
    };
    let mut annotations = BTreeMap::new();
    annotations.insert(RENDERED_POOL_ANNOTATION.to_string(), pool.to_string());
    if let Some(n) = node {
        annotations.insert(RENDERED_NODE_ANNOTATION.to_string(), n.to_string());
    }
    annotations.insert(
        RENDERED_FROM_ANNOTATION.to_string(),
        sources
            .iter()
            .map(|m| m.name())
            .collect::<Vec<_>>()
            .join(","),
    );
    let mut labels = BTreeMap::new();
    labels.insert(ROLE_LABEL.to_string(), pool.to_string());
    MachineConfig {
        metadata: ObjectMeta {
            name,
            labels,
            annotations,
        },
        spec,
    }
}

/// The sha256 (hex) of the canonical serialisation of a spec: the content address of a rendered
/// config. The same spec gives the same hash on any machine.
pub fn spec_hash(spec: &MachineConfigSpec) -> String {
    let mut value = serde_json::to_value(spec).unwrap_or(Value::Null);
    if let Some(ign) = value
        .get_mut("config")
        .and_then(|c| c.get_mut("ignition"))
        .and_then(Value::as_object_mut)
    {
        ign.insert(
            "version".to_string(),
            Value::String(SpecVersion::LATEST.as_str().to_string()),
        );
    }
    let mut hasher = HashWriter(Sha256::new());
    write_canonical(&value, &mut hasher);
    hex::encode(hasher.0.finalize())
}

/// Feeds the canonical serialisation straight into the hash, without building the string.
struct HashWriter(Sha256);

impl CanonicalSink for HashWriter {
    fn put(&mut self, s: &str) {
        self.0.update(s.as_bytes());
    }
}

impl CanonicalSink for String {
    fn put(&mut self, s: &str) {
        self.push_str(s);
    }
}

/// Where canonical JSON goes.
trait CanonicalSink {
    fn put(&mut self, s: &str);
}

fn write_canonical(value: &Value, out: &mut impl CanonicalSink) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.put("{");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.put(",");
                }
                write_json_string(k, out);
                out.put(":");
                write_canonical(&map[k], out);
            }
            out.put("}");
        }
        Value::Array(items) => {
            out.put("[");
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.put(",");
                }
                write_canonical(v, out);
            }
            out.put("]");
        }
        Value::String(s) => write_json_string(s, out),
        other => out.put(&other.to_string()),
    }
}

/// A JSON string literal, escaped exactly as serde_json escapes it.
fn write_json_string(s: &str, out: &mut impl CanonicalSink) {
    out.put("\"");
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let esc: Option<String> = match c {
            '"' => Some("\\\"".into()),
            '\\' => Some("\\\\".into()),
            '\n' => Some("\\n".into()),
            '\r' => Some("\\r".into()),
            '\t' => Some("\\t".into()),
            '\u{8}' => Some("\\b".into()),
            '\u{c}' => Some("\\f".into()),
            c if (c as u32) < 0x20 => Some(format!("\\u{:04x}", c as u32)),
            _ => None,
        };
        if let Some(e) = esc {
            out.put(&s[start..i]);
            out.put(&e);
            start = i + c.len_utf8();
        }
    }
    out.put(&s[start..]);
    out.put("\"");
}

/// Writes `value` as JSON with object keys sorted and no white space.
pub fn canonical_json(value: &Value, out: &mut String) {
    write_canonical(value, out);
}

/// Keyed lists of the Ignition config: list path → key field.
struct Acc {
    lists: IndexMap<&'static str, IndexMap<String, Value>>,
    rest: Value,
}

/// Top-level keyed lists: (section, list, key fields in order of preference).
const KEYED: [(&str, &str, &str); 10] = [
    ("storage", "files", "path"),
    ("storage", "directories", "path"),
    ("storage", "links", "path"),
    ("storage", "disks", "device"),
    ("storage", "filesystems", "device"),
    ("storage", "luks", "name"),
    ("storage", "raid", "name"),
    ("systemd", "units", "name"),
    ("passwd", "users", "name"),
    ("passwd", "groups", "name"),
];

/// Merges MachineConfigs in the given order into one spec.
pub fn merge(configs: &[&MachineConfig]) -> Result<MachineConfigSpec, RenderError> {
    let mut acc = Acc {
        lists: KEYED
            .iter()
            .map(|(_, l, _)| (*l, IndexMap::new()))
            .collect(),
        rest: Value::Object(Map::new()),
    };
    let mut spec = MachineConfigSpec::default();
    let mut extensions: HashSet<&str> = HashSet::new();
    let mut cache = IndexCache::default();
    let mut path_kinds: std::collections::HashMap<String, (&'static str, String)> =
        std::collections::HashMap::new();
    for mc in configs {
        let s = &mc.spec;
        spec.kernel_arguments
            .extend(s.kernel_arguments.iter().cloned());
        spec.fips |= s.fips;
        if s.kernel_type != KernelType::Default {
            spec.kernel_type = s.kernel_type;
        }
        if !s.os_image_url.is_empty() {
            spec.os_image_url = s.os_image_url.clone();
        }
        for e in &s.extensions {
            if extensions.insert(e.as_str()) {
                spec.extensions.push(e.clone());
            }
        }
        let mut value =
            serde_json::to_value(&s.config).map_err(|e| RenderError::Merge(e.to_string()))?;
        if let Value::Object(top) = &mut value {
            if let Some(mut ign) = top.remove("ignition") {
                if let Value::Object(o) = &mut ign {
                    o.remove("version");
                }
                merge_into(&mut acc.rest, "ignition", ign, &mut cache);
            }
            for (section, list, key) in KEYED {
                let Some(Value::Object(sec)) = top.get_mut(section) else {
                    continue;
                };
                let Some(Value::Array(items)) = sec.remove(list) else {
                    continue;
                };
                let target = acc
                    .lists
                    .get_mut(list)
                    .expect("all keyed lists are present");
                for item in items {
                    let k = item.get(key).map(|v| v.to_string()).unwrap_or_default();
                    if section == "storage" && matches!(list, "files" | "directories" | "links") {
                        let kind: &'static str = match list {
                            "files" => "file",
                            "directories" => "directory",
                            _ => "link",
                        };
                        match path_kinds.get(&k) {
                            Some((first_kind, first_config)) if *first_kind != kind => {
                                return Err(RenderError::PathConflict {
                                    path: item
                                        .get(key)
                                        .and_then(Value::as_str)
                                        .unwrap_or_default()
                                        .to_string(),
                                    first_kind,
                                    first_config: first_config.clone(),
                                    second_kind: kind,
                                    second_config: mc.name().to_string(),
                                });
                            }
                            Some(_) => {}
                            None => {
                                path_kinds.insert(k.clone(), (kind, mc.name().to_string()));
                            }
                        }
                    }
                    match target.get_mut(&k) {
                        Some(existing) => {
                            if list == "units" {
                                resolve_mask(existing, &item);
                            }
                            merge_value(existing, item, &mut format!("{list}/{k}"), &mut cache)
                        }
                        None => {
                            target.insert(k, item);
                        }
                    }
                }
            }
            for (k, v) in std::mem::take(top) {
                merge_into(&mut acc.rest, &k, v, &mut cache);
            }
        }
    }
    // Reassemble.
    let mut out = acc.rest;
    for (section, list, _) in KEYED {
        let items: Vec<Value> = acc
            .lists
            .swap_remove(list)
            .unwrap_or_default()
            .into_values()
            .collect();
        if items.is_empty() {
            continue;
        }
        if let Value::Object(top) = &mut out {
            let sec = top
                .entry(section.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(sec) = sec {
                sec.insert(list.to_string(), Value::Array(items));
            }
        }
    }
    let mut config: Config =
        serde_json::from_value(out).map_err(|e| RenderError::Merge(e.to_string()))?;
    config.ignition.version = Some(SpecVersion::LATEST.as_str().to_string());
    // The MCO's merge: `overwrite: true` where unset (or new nodes fail their first boot on a
    // file the image has), each SSH key once, no kernel-devel with a non-default kernel.
    crate::mco::default_file_overwrite(&mut config);
    crate::mco::dedup_users_ssh_keys(&mut config.passwd.users);
    crate::mco::check_merged(configs, &spec).map_err(|e| RenderError::Invalid(vec![e]))?;
    // Valid configs can still contradict each other once merged: refuse the result rather than
    // hand a node a config it would refuse.
    let mut findings = Vec::new();
    crate::validate::validate_structure("spec.config", &config, &mut findings);
    crate::validate::check_contents_total("spec.config", &config, &mut findings);
    let errors: Vec<String> = findings
        .into_iter()
        .filter(|f| f.is_error)
        .map(|f| format!("{}: {}", f.path, f.message))
        .collect();
    if !errors.is_empty() {
        return Err(RenderError::Invalid(errors));
    }
    spec.config = config;
    spec.source_version = Some(SpecVersion::LATEST);
    Ok(spec)
}

/// A unit cannot be both masked and enabled: the later config's choice wins. A later `mask:
/// true` drops an earlier `enabled`; a later `enabled: true` drops an earlier mask.
fn resolve_mask(existing: &mut Value, later: &Value) {
    let Some(obj) = existing.as_object_mut() else {
        return;
    };
    if later.get("mask") == Some(&Value::Bool(true)) {
        obj.remove("enabled");
    }
    if later.get("enabled") == Some(&Value::Bool(true)) && later.get("mask").is_none() {
        obj.remove("mask");
    }
}

fn merge_into(target: &mut Value, key: &str, value: Value, cache: &mut IndexCache) {
    if let Value::Object(map) = target {
        let mut path = format!("rest/{key}");
        match map.get_mut(key) {
            Some(existing) => merge_value(existing, value, &mut path, cache),
            None => {
                cache.forget(&path);
                map.insert(key.to_string(), value);
            }
        }
    }
}

/// Fields replaced as a whole rather than merged field by field: a file's contents (never a
/// new source with a stale compression or hash) and owners (an owner by id must not pick up an
/// earlier owner's name).
const ATOMIC: [&str; 5] = ["contents", "clevis", "cex", "user", "group"];

/// Ignition's merge of a child value into a parent value: objects field by field (a null or
/// absent child field keeps the parent's), keyed lists by key, lists of plain values as an
/// ordered union, anything else replaced. `path` is the parent's place in the merged config
/// (`units/a.service/dropins`), under which `cache` keeps the indexes of its lists.
fn merge_value(parent: &mut Value, child: Value, path: &mut String, cache: &mut IndexCache) {
    match (parent, child) {
        (Value::Object(p), Value::Object(c)) => {
            for (k, cv) in c {
                if cv.is_null() {
                    continue;
                }
                let len = path.len();
                path.push('/');
                path.push_str(&k);
                if ATOMIC.contains(&k.as_str()) {
                    cache.forget(path);
                    p.insert(k, cv);
                } else {
                    match p.get_mut(&k) {
                        Some(pv) => merge_value(pv, cv, path, cache),
                        None => {
                            cache.forget(path);
                            p.insert(k, cv);
                        }
                    }
                }
                path.truncate(len);
            }
        }
        (Value::Array(p), Value::Array(c)) => {
            // Indexes of the parent's entries (by each key field they have, and by value), kept
            // across configs: merging is linear in the entries merged.
            let mut index = match cache.0.remove(path.as_str()) {
                Some(index) if index.len == p.len() => index,
                _ => {
                    let mut index = ListIndex::default();
                    for (i, e) in p.iter().enumerate() {
                        index.add(e, i);
                    }
                    index.len = p.len();
                    index
                }
            };
            for item in c {
                match list_key(&item) {
                    Some((field, key)) => match index.find(p, field, key) {
                        Some(i) => {
                            let len = path.len();
                            path.push_str(&format!("#{i}"));
                            merge_value(&mut p[i], item, path, cache);
                            path.truncate(len);
                            // A secondary key field may have changed: index its new value too.
                            index.add(&p[i], i);
                        }
                        None => {
                            index.add(&item, p.len());
                            p.push(item);
                        }
                    },
                    None => {
                        if index.plain.insert(canonical(&item)) {
                            p.push(item);
                        }
                    }
                }
            }
            index.len = p.len();
            cache.0.insert(path.clone(), index);
        }
        (p, c) => {
            cache.forget(path);
            *p = c;
        }
    }
}

/// The indexes of the lists being merged, by their place in the merged config, kept across the
/// configs of a merge so that merging many configs into one list (a drop-in each into the same
/// unit, say) does not index the list again for each config.
#[derive(Default)]
struct IndexCache(BTreeMap<String, ListIndex>);

impl IndexCache {
    /// Forgets the indexes at or under `path`, whose value was replaced (and, harmlessly, those
    /// of siblings whose names start with the same text: they are rebuilt when next needed).
    fn forget(&mut self, path: &str) {
        let stale: Vec<String> = self
            .0
            .range::<str, _>((std::ops::Bound::Included(path), std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(path))
            .map(|(k, _)| k.clone())
            .collect();
        for k in stale {
            self.0.remove(&k);
        }
    }
}

/// Where the entries of a list are, for [`merge_value`].
#[derive(Default)]
struct ListIndex {
    /// The length of the list when it was last indexed (a list replaced since is indexed anew).
    len: usize,
    /// First entry with this value of this key field.
    keyed: HashMap<(&'static str, String), usize>,
    /// Canonical JSON of every entry.
    plain: HashSet<String>,
}

const KEY_FIELDS: [&str; 6] = ["name", "path", "device", "number", "label", "source"];

fn canonical(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

impl ListIndex {
    fn add(&mut self, e: &Value, i: usize) {
        if let Some(obj) = e.as_object() {
            for field in KEY_FIELDS {
                if let Some(v) = obj.get(field).filter(|v| !v.is_null()) {
                    self.keyed.entry((field, canonical(v))).or_insert(i);
                }
            }
        }
        self.plain.insert(canonical(e));
    }

    /// The first entry of `p` whose `field` is `key`. Every value a key field has had is
    /// indexed; an entry whose secondary key field changed while merging may still be indexed
    /// under its old value, and then the list is searched as a whole (same answer).
    fn find(&self, p: &[Value], field: &'static str, key: &Value) -> Option<usize> {
        let matches = |e: &Value| e.get(field).is_some_and(|v| v == key);
        match self.keyed.get(&(field, canonical(key))) {
            Some(&i) if matches(&p[i]) => Some(i),
            Some(_) => p.iter().position(matches),
            None => None,
        }
    }
}

/// The key of an entry in a nested keyed list (drop-ins, partitions, headers, resources).
fn list_key(item: &Value) -> Option<(&'static str, &Value)> {
    let obj = item.as_object()?;
    for field in KEY_FIELDS {
        if let Some(v) = obj.get(field).filter(|v| !v.is_null()) {
            return Some((field, v));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ignition::{Dropin, File, Resource, Unit, User};
    use crate::model::{LabelSelector, SelectorOperator, SelectorRequirement, NODE_LABEL};

    fn mc(name: &str, role: &str) -> MachineConfig {
        let mut m = MachineConfig::default();
        m.metadata.name = name.into();
        m.metadata.labels.insert(ROLE_LABEL.into(), role.into());
        m
    }

    fn file(path: &str, src: &str) -> File {
        File {
            path: path.into(),
            contents: Resource {
                source: Some(src.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
        let mut n = NodeInfo::default();
        n.metadata.name = name.into();
        for (k, v) in labels {
            n.metadata.labels.insert((*k).into(), (*v).into());
        }
        n
    }

    fn infra_pool() -> MachineConfigPool {
        MachineConfigPool {
            metadata: ObjectMeta {
                name: "infra".into(),
                ..Default::default()
            },
            machine_config_selector: LabelSelector {
                match_expressions: vec![SelectorRequirement {
                    key: ROLE_LABEL.into(),
                    operator: SelectorOperator::In,
                    values: vec!["worker".into(), "infra".into()],
                }],
                ..Default::default()
            },
            node_selector: LabelSelector::label("node-role.kubernetes.io/infra", ""),
            ..Default::default()
        }
    }

    #[test]
    fn pool_choice_follows_the_mco() {
        let pools = with_builtin_pools(&[infra_pool()]);
        let w = node("w", &[("node-role.kubernetes.io/worker", "")]);
        assert_eq!(pool_for_node(&pools, &w).unwrap().name(), "worker");
        let i = node(
            "i",
            &[
                ("node-role.kubernetes.io/worker", ""),
                ("node-role.kubernetes.io/infra", ""),
            ],
        );
        assert_eq!(pool_for_node(&pools, &i).unwrap().name(), "infra");
        let m = node(
            "m",
            &[
                ("node-role.kubernetes.io/master", ""),
                ("node-role.kubernetes.io/infra", ""),
            ],
        );
        assert_eq!(pool_for_node(&pools, &m).unwrap().name(), "master");
        let none = node("n", &[]);
        assert!(matches!(
            pool_for_node(&pools, &none),
            Err(RenderError::NoPool { .. })
        ));
        let mut other = infra_pool();
        other.metadata.name = "gpu".into();
        let pools = with_builtin_pools(&[infra_pool(), other]);
        assert!(matches!(
            pool_for_node(&pools, &i),
            Err(RenderError::TwoCustomPools { .. })
        ));
    }

    #[test]
    fn custom_pool_inherits_and_overrides_worker() {
        let mut a = mc("50-infra", "infra");
        a.spec
            .config
            .storage
            .files
            .push(file("/etc/x", "data:,infra"));
        let mut b = mc("99-worker", "worker");
        b.spec
            .config
            .storage
            .files
            .push(file("/etc/x", "data:,worker"));
        b.spec
            .config
            .storage
            .files
            .push(file("/etc/y", "data:,worker"));
        let r = render_pool(&infra_pool(), &[a, b]).unwrap();
        let files = &r.spec.config.storage.files;
        assert_eq!(files.len(), 2);
        let x = files.iter().find(|f| f.path == "/etc/x").unwrap();
        assert_eq!(x.contents.source.as_deref(), Some("data:,infra"));
        assert!(r.name().starts_with("rendered-infra-"));
        assert_eq!(r.name().len(), "rendered-infra-".len() + 32);
    }

    #[test]
    fn field_by_field_merge_but_contents_atomic() {
        let mut a = mc("00-a", "worker");
        let mut f = file("/etc/x", "data:;base64,H4sI");
        f.contents.compression = Some("gzip".into());
        f.mode = Some(0o600);
        a.spec.config.storage.files.push(f);
        a.spec.config.systemd.units.push(Unit {
            name: "a.service".into(),
            enabled: Some(true),
            dropins: vec![Dropin {
                name: "1.conf".into(),
                contents: Some("x".into()),
            }],
            ..Default::default()
        });
        a.spec.config.passwd.users.push(User {
            name: "core".into(),
            ssh_authorized_keys: vec!["k1".into()],
            ..Default::default()
        });
        let mut b = mc("10-b", "worker");
        b.spec
            .config
            .storage
            .files
            .push(file("/etc/x", "data:,plain"));
        b.spec.config.systemd.units.push(Unit {
            name: "a.service".into(),
            dropins: vec![Dropin {
                name: "2.conf".into(),
                contents: Some("y".into()),
            }],
            ..Default::default()
        });
        b.spec.config.passwd.users.push(User {
            name: "core".into(),
            ssh_authorized_keys: vec!["k2".into(), "k1".into()],
            ..Default::default()
        });
        let spec = merge(&[&a, &b]).unwrap();
        let f = &spec.config.storage.files[0];
        assert_eq!(f.mode, Some(0o600), "mode kept from the earlier config");
        assert_eq!(f.contents.source.as_deref(), Some("data:,plain"));
        assert_eq!(f.contents.compression, None, "contents replaced whole");
        let u = &spec.config.systemd.units[0];
        assert_eq!(u.enabled, Some(true));
        assert_eq!(u.dropins.len(), 2);
        assert_eq!(
            spec.config.passwd.users[0].ssh_authorized_keys,
            ["k1", "k2"]
        );
    }

    #[test]
    fn spec_level_merge_rules() {
        let mut a = mc("00-a", "worker");
        a.spec.kernel_arguments = vec!["y=0".into(), "z=4".into()];
        a.spec.kernel_type = KernelType::Realtime;
        a.spec.os_image_url = "a".into();
        a.spec.extensions = vec!["usbguard".into()];
        let mut b = mc("10-b", "worker");
        b.spec.kernel_arguments = vec!["y=1".into(), "z=4".into()];
        b.spec.fips = true;
        b.spec.extensions = vec!["usbguard".into(), "kerberos".into()];
        let spec = merge(&[&a, &b]).unwrap();
        assert_eq!(spec.kernel_arguments, ["y=0", "z=4", "y=1", "z=4"]);
        assert_eq!(spec.kernel_type, KernelType::Realtime);
        assert_eq!(spec.os_image_url, "a");
        assert!(spec.fips);
        assert_eq!(spec.extensions, ["usbguard", "kerberos"]);
    }

    #[test]
    fn node_overlays_apply_to_their_node_only() {
        let pools = with_builtin_pools(&[]);
        let base = mc("00-worker", "worker");
        let mut ov = mc("50-static-ip-w1", "worker");
        ov.metadata.labels.insert(NODE_LABEL.into(), "w1".into());
        ov.spec
            .config
            .storage
            .files
            .push(file("/etc/ip", "data:,10.0.0.1"));
        let configs = vec![base, ov];
        let nodes = vec![
            node("w1", &[("node-role.kubernetes.io/worker", "")]),
            node("w2", &[("node-role.kubernetes.io/worker", "")]),
        ];
        let r1 = render_node(&pools, &configs, &nodes, "w1").unwrap();
        let r2 = render_node(&pools, &configs, &nodes, "w2").unwrap();
        assert_eq!(r1.config.spec.config.storage.files.len(), 1);
        assert!(r1.config.name().starts_with("rendered-worker-w1-"));
        assert!(r2.config.spec.config.storage.files.is_empty());
        let pool = render_pool(&pools[1], &configs).unwrap();
        assert_eq!(pool.name(), r2.config.name(), "w2 gets the pool's render");
    }

    #[test]
    fn owners_and_masks_take_the_later_choice_and_kinds_cannot_collide() {
        use crate::ignition::{Directory, NodeOwner};
        let mut a = mc("00-a", "worker");
        let mut f = file("/etc/x", "data:,a");
        f.user = NodeOwner {
            id: Some(0),
            name: None,
        };
        a.spec.config.storage.files.push(f);
        a.spec.config.systemd.units.push(Unit {
            name: "a.service".into(),
            enabled: Some(true),
            ..Default::default()
        });
        a.spec.config.systemd.units.push(Unit {
            name: "b.service".into(),
            mask: Some(true),
            ..Default::default()
        });
        let mut b = mc("10-b", "worker");
        let mut f = file("/etc/x", "data:,b");
        f.user = NodeOwner {
            id: None,
            name: Some("root".into()),
        };
        b.spec.config.storage.files.push(f);
        b.spec.config.systemd.units.push(Unit {
            name: "a.service".into(),
            mask: Some(true),
            ..Default::default()
        });
        b.spec.config.systemd.units.push(Unit {
            name: "b.service".into(),
            enabled: Some(true),
            ..Default::default()
        });
        let spec = merge(&[&a, &b]).unwrap();
        let f = &spec.config.storage.files[0];
        assert_eq!(
            f.user,
            NodeOwner {
                id: None,
                name: Some("root".into())
            }
        );
        let ua = spec
            .config
            .systemd
            .units
            .iter()
            .find(|u| u.name == "a.service")
            .unwrap();
        assert_eq!((ua.mask, ua.enabled), (Some(true), None));
        let ub = spec
            .config
            .systemd
            .units
            .iter()
            .find(|u| u.name == "b.service")
            .unwrap();
        assert_eq!((ub.mask, ub.enabled), (None, Some(true)));

        let mut c = mc("20-c", "worker");
        c.spec.config.storage.directories.push(Directory {
            path: "/etc/x".into(),
            ..Default::default()
        });
        let err = merge(&[&a, &c]).unwrap_err();
        assert!(matches!(err, RenderError::PathConflict { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("\"00-a\"") && msg.contains("\"20-c\"") && msg.contains("directory"),
            "{msg}"
        );
    }

    #[test]
    fn duplicate_names_are_refused() {
        let configs = vec![mc("a", "worker"), mc("a", "worker")];
        assert_eq!(
            render_pool(&MachineConfigPool::builtin("worker"), &configs),
            Err(RenderError::DuplicateName("a".into()))
        );
    }
}

#[cfg(test)]
mod golden {
    use super::*;
    use crate::ignition::{File, Resource, Unit};

    /// The content address must never change for the same spec: rendered names are stored by
    /// servers and nodes. This pins the hash of a fixed spec.
    #[test]
    fn spec_hash_is_stable() {
        let mut spec = MachineConfigSpec {
            kernel_arguments: vec!["nosmt".into(), "hugepages=32".into()],
            kernel_type: KernelType::Realtime,
            extensions: vec!["usbguard".into()],
            ..Default::default()
        };
        spec.config.storage.files.push(File {
            path: "/etc/chrony.conf".into(),
            mode: Some(0o644),
            contents: Resource {
                source: Some("data:,server%20a%0A".into()),
                ..Default::default()
            },
            ..Default::default()
        });
        spec.config.systemd.units.push(Unit {
            name: "a.service".into(),
            enabled: Some(true),
            contents: Some("[Service]\nExecStart=/bin/true\n".into()),
            ..Default::default()
        });
        assert_eq!(
            spec_hash(&spec),
            "3962cd1aa27d919cc4071b46086a23b4af88f8d688df3cd00f023a529af0e045"
        );
    }
}
