//! The MCO's node annotations, with the MCO's names (`pkg/daemon/constants/constants.go` of
//! openshift/machine-config-operator): the controller writes `desiredConfig`, the agent writes
//! `currentConfig`, `state` and `reason`, so that tooling that reads them reads hearth's nodes
//! as it reads the MCO's. Written once here for the agent and the server's Kubernetes mode.

/// The rendered config the node runs (written by the agent once it is verified).
pub const CURRENT_CONFIG: &str = "machineconfiguration.openshift.io/currentConfig";
/// The rendered config the node should run (written by the controller, or by an admin).
pub const DESIRED_CONFIG: &str = "machineconfiguration.openshift.io/desiredConfig";
/// `Done`, `Working`, `Degraded` or `Unreconcilable` (written by the agent).
pub const STATE: &str = "machineconfiguration.openshift.io/state";
/// Why the node is `Degraded` or `Unreconcilable`, empty otherwise (written by the agent).
pub const REASON: &str = "machineconfiguration.openshift.io/reason";
