//! Objects the Kubernetes tests apply: a pool as the MCO ships its worker pool, and a worker
//! Node.

/// A MachineConfigPool `name` selecting MachineConfigs with the role label `name` and Nodes
/// with the label `node-role.kubernetes.io/<name>` (JSON, for `KubeCluster::apply`).
pub fn pool(name: &str, max_unavailable: u32) -> String {
    serde_json::json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": name}},
            "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
            "maxUnavailable": max_unavailable,
        }
    })
    .to_string()
}

/// A Node `name` with the label `node-role.kubernetes.io/<role>` (no kubelet: the object only).
pub fn node(name: &str, role: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {format!("node-role.kubernetes.io/{role}"): ""}},
    })
    .to_string()
}
