//! The Kubernetes test harness itself (`hearth_vm_tests::kube`): a real etcd, kube-apiserver
//! and kube-controller-manager on loopback, Debian's kubectl as the client, node identities
//! that the Node authorizer and NodeRestriction treat as nodes.
//!
//! The first run on a machine builds the binaries (images/build-kube.sh, 10-15 minutes, needs
//! root and the Debian archive); a failed build fails the test.

use std::time::Duration;

use hearth_vm_tests::kube::KubeCluster;

fn node(name: &str) -> String {
    format!("{{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{{\"name\":\"{name}\"}}}}")
}

#[test]
fn cluster_starts_and_nodes_are_confined_to_themselves() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let mut cluster = KubeCluster::start().expect("the test cluster starts");

    // Ready, as the real client sees it.
    assert_eq!(cluster.kubectl(&["get", "--raw", "/readyz"]).unwrap(), "ok");
    let version = cluster.kubectl(&["version", "-o", "json"]).unwrap();
    let version: serde_json::Value = serde_json::from_str(&version).unwrap();
    assert_eq!(
        version["serverVersion"]["gitVersion"]
            .as_str()
            .unwrap()
            .get(..6),
        Some("v1.20.")
    );

    cluster.apply(&node("node-a")).unwrap();
    cluster.apply(&node("node-b")).unwrap();
    let a = cluster.node_kubeconfig("node-a").unwrap();

    // node-a reads its own Node ...
    assert_eq!(
        cluster
            .kubectl_as(&a, &["get", "node", "node-a", "-o", "name"])
            .unwrap(),
        "node/node-a"
    );
    // ... may label itself ...
    cluster
        .kubectl_as(&a, &["label", "node", "node-a", "hearth.test/self=yes"])
        .unwrap();
    assert_eq!(
        cluster
            .kubectl(&[
                "get",
                "node",
                "node-a",
                "-o",
                "jsonpath={.metadata.labels.hearth\\.test/self}"
            ])
            .unwrap(),
        "yes"
    );
    // ... and is refused when it patches another node (NodeRestriction), which stays as it was.
    let err = cluster
        .kubectl_as(&a, &["label", "node", "node-b", "hearth.test/by=node-a"])
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("Forbidden") || msg.contains("forbidden"),
        "{msg}"
    );
    assert!(msg.contains("node-b"), "{msg}");
    assert_eq!(
        cluster
            .kubectl(&["get", "node", "node-b", "-o", "jsonpath={.metadata.labels}"])
            .unwrap(),
        ""
    );
    // The admin can do what the node cannot.
    cluster
        .kubectl(&["label", "node", "node-b", "hearth.test/by=admin"])
        .unwrap();

    // The controller manager runs the disruption controller: a PodDisruptionBudget gets a
    // status (what the Eviction API checks) that only it writes.
    cluster
        .kubectl(&["create", "namespace", "hearth-test"])
        .unwrap();
    cluster
        .apply(
            r#"{"apiVersion":"policy/v1beta1","kind":"PodDisruptionBudget",
                "metadata":{"name":"guard","namespace":"hearth-test"},
                "spec":{"minAvailable":1,"selector":{"matchLabels":{"app":"guard"}}}}"#,
        )
        .unwrap();
    cluster
        .kubectl_until(
            &[
                "get",
                "pdb",
                "-n",
                "hearth-test",
                "guard",
                "-o",
                "jsonpath={.status.observedGeneration}",
            ],
            Duration::from_secs(60),
            |out| out == "1",
        )
        .unwrap();
    cluster.check_running().unwrap();
}
