//! Merging MachineConfigs in order into one spec ([`merge`]): spec fields by the MCO's rules,
//! top-level keyed lists by key, a file, directory or link path of one kind only, units never
//! both masked and enabled; then the MCO's fixes and validation of the merged config.

use super::error::RenderError;
use super::value_merge::{merge_into, merge_value, IndexCache};
use crate::ignition::{Config, SpecVersion};
use crate::model::{KernelType, MachineConfig, MachineConfigSpec};
use indexmap::IndexMap;
use serde_json::{Map, Value};
use std::collections::HashSet;

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
    let mut action_names: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for mc in configs {
        let s = &mc.spec;
        // Actions run in config order, each once: a name is one action in the whole render.
        for a in &s.actions {
            if let Some(first) = action_names.insert(a.name.as_str(), mc.name()) {
                return Err(RenderError::ActionConflict {
                    name: a.name.clone(),
                    first_config: first.to_string(),
                    second_config: mc.name().to_string(),
                });
            }
            spec.actions.push(a.clone());
        }
        spec.kernel_arguments
            .extend(s.kernel_arguments.iter().cloned());
        spec.fips |= s.fips;
        if s.kernel_type != KernelType::Default {
            spec.kernel_type = s.kernel_type;
        }
        if !s.os_image_url.is_empty() {
            // A tag hearth-server resolved when the config was applied deploys pinned.
            spec.os_image_url =
                crate::container::effective_os_image(&s.os_image_url, &mc.metadata.annotations)
                    .to_string();
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
    if spec.actions.len() > crate::actions::MAX_ACTIONS {
        return Err(RenderError::Invalid(vec![format!(
            "spec.actions: the configs declare {} actions together; a rendered config may have at most {}: merge scripts",
            spec.actions.len(),
            crate::actions::MAX_ACTIONS
        )]));
    }
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
