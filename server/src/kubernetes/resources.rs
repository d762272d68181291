//! The API server's resources the controller reads and writes, and how long one call may take.

use kube::api::{ApiResource, GroupVersionKind};
use std::time::Duration;

/// How long one call to the API server may take.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(30);

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// The MachineConfig resource.
pub fn machine_configs() -> ApiResource {
    resource(
        "machineconfiguration.openshift.io",
        "v1",
        "MachineConfig",
        "machineconfigs",
    )
}

/// The MachineConfigPool resource.
pub fn pools() -> ApiResource {
    resource(
        "machineconfiguration.openshift.io",
        "v1",
        "MachineConfigPool",
        "machineconfigpools",
    )
}

/// The MCO's node-disruption `MachineConfiguration` resource.
pub fn configurations() -> ApiResource {
    resource(
        "operator.openshift.io",
        "v1",
        "MachineConfiguration",
        "machineconfigurations",
    )
}

/// MachineConfigNodes.
pub fn machine_config_nodes() -> ApiResource {
    resource(
        "machineconfiguration.openshift.io",
        "v1",
        "MachineConfigNode",
        "machineconfignodes",
    )
}

/// Nodes.
pub fn nodes() -> ApiResource {
    resource("", "v1", "Node", "nodes")
}
