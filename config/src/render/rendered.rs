//! Rendering a pool ([`render_pool`]) or a node ([`render_node`]): the configs selected and
//! merged into a rendered MachineConfig named by its content (`rendered-<pool>-<hash>`) and
//! annotated with its pool, node and sources.

use super::error::RenderError;
use super::hash::spec_hash;
use super::merge::merge;
use super::pools::{configs_for_pool, overlays_for_node, pool_for_node};
use crate::model::{
    MachineConfig, MachineConfigPool, MachineConfigSpec, NodeInfo, ObjectMeta,
    RENDERED_FROM_ANNOTATION, RENDERED_NODE_ANNOTATION, RENDERED_POOL_ANNOTATION, ROLE_LABEL,
};
use std::collections::BTreeMap;

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
