//! Pools: the built-in `master` and `worker`, the pool a node belongs to (the MCO's rules), the
//! MachineConfigs a pool takes in merge order, and a node's own overlays.

use super::error::RenderError;
use crate::model::{MachineConfig, MachineConfigPool, NodeInfo};
use std::collections::BTreeMap;

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
