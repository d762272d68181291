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

/// A MachineConfig `name` (with the role label `role`, for a pool to select it; none: a
/// config named by hand, e.g. as a node's `desiredConfig`) writing `/etc/demo/hello` with
/// `file` (a `data:` URL's text), `more` raw YAML items of `storage.files` after it, and a
/// oneshot unit `unit` running `exec`, enabled.
pub fn demo_machine_config(
    name: &str,
    role: Option<&str>,
    file: &str,
    unit: &str,
    exec: &str,
    more: &str,
) -> String {
    let labels = role
        .map(|r| format!("  labels:\n    machineconfiguration.openshift.io/role: {r}\n"))
        .unwrap_or_default();
    format!(
        r#"apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: {name}
{labels}spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/demo/hello
        mode: 420
        contents:
          source: data:,{file}
{more}    systemd:
      units:
      - name: {unit}
        enabled: true
        contents: |
          [Service]
          Type=oneshot
          RemainAfterExit=yes
          ExecStart={exec}
          [Install]
          WantedBy=multi-user.target
"#
    )
}

/// The first row of a `kubectl get` table as column name → cell (cells without spaces, as
/// `kubectl get mcp` prints them); a column the table lacks is `""`.
pub fn first_row(table: &str) -> std::collections::BTreeMap<String, String> {
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default().split_whitespace();
    let row = lines.next().unwrap_or_default().split_whitespace();
    header
        .map(str::to_string)
        .zip(row.map(str::to_string))
        .collect()
}
