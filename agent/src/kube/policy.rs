//! The node-disruption policy of a Kubernetes cluster: the `operator.openshift.io/v1`
//! `MachineConfiguration` named `cluster` (`spec.nodeDisruptionPolicy`), as the MCO's daemon
//! reads it, read by hearth's manifest reader (pure logic; `client.rs` fetches it).

use hearth_config::manifest::read_str;
use hearth_config::model::DisruptionPolicies;

/// The policy object's API path.
pub const POLICY_PATH: &str = "/apis/operator.openshift.io/v1/machineconfigurations/cluster";

/// The policies of the cluster's `MachineConfiguration` (its JSON from the API server), then
/// those of the `--policy` files (`local`), added after them as `--policy` files are added
/// after each other. A policy hearth refuses is an error that names the object and the field.
pub fn merged(json: &[u8], local: &DisruptionPolicies) -> Result<DisruptionPolicies, String> {
    let text = std::str::from_utf8(json)
        .map_err(|e| format!("machineconfiguration/cluster: not UTF-8 text: {e}"))?;
    let (manifests, diags) = read_str("machineconfiguration/cluster", text);
    let errors: Vec<String> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.to_string())
        .collect();
    if !errors.is_empty() {
        return Err(format!(
            "the node-disruption policy is refused; fix it (kubectl edit machineconfiguration cluster): {}",
            errors.join("; ")
        ));
    }
    let mut out = manifests.disruption_policies();
    out.files.extend(local.files.iter().cloned());
    out.units.extend(local.units.iter().cloned());
    if local.ssh_key.is_some() {
        out.ssh_key = local.ssh_key.clone();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: &str = r#"{"apiVersion":"operator.openshift.io/v1","kind":"MachineConfiguration",
      "metadata":{"name":"cluster","uid":"1","resourceVersion":"7","generation":1},
      "spec":{"nodeDisruptionPolicy":{"files":[{"path":"/etc/demo","actions":[{"type":"None"}]}]}}}"#;

    #[test]
    fn the_cluster_policy_comes_first_then_the_local_files() {
        let local = DisruptionPolicies::default();
        let p = merged(CLUSTER.as_bytes(), &local).unwrap();
        assert_eq!(p.files.len(), 1);
        assert_eq!(p.files[0].path, "/etc/demo");
        let twice = merged(CLUSTER.as_bytes(), &p).unwrap();
        assert_eq!(twice.files.len(), 2);
    }

    #[test]
    fn a_refused_policy_names_the_object_and_field() {
        let bad = r#"{"apiVersion":"operator.openshift.io/v1","kind":"MachineConfiguration",
          "metadata":{"name":"cluster"},
          "spec":{"nodeDisruptionPolicy":{"files":[{"path":"/etc/demo","actions":[{"type":"Explode"}]}]}}}"#;
        let e = merged(bad.as_bytes(), &DisruptionPolicies::default()).unwrap_err();
        assert!(e.contains("machineconfiguration/cluster"), "{e}");
        assert!(e.contains("Explode") || e.contains("type"), "{e}");
    }
}
