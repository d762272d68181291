//! Why rendering failed ([`RenderError`]): no pool or two custom pools for a node, unknown
//! names, duplicate configs, contradicting configs.

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
    /// Two configs of one render declare an action of the same name.
    #[error("action {name:?} is declared by MachineConfig {first_config:?} and by MachineConfig {second_config:?}; action names must be unique across the configs of a pool (and a node's overlays): rename one")]
    ActionConflict {
        /// The action's name.
        name: String,
        /// The earlier config.
        first_config: String,
        /// The later config.
        second_config: String,
    },
    /// The merged config is not valid (valid configs that contradict each other once merged).
    #[error("the merged config is not valid: {}", .0.join("; "))]
    Invalid(Vec<String>),
}
