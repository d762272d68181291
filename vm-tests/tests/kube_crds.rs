//! The shipped CRDs and RBAC (`config/kubernetes/`) against a real kube-apiserver 1.20 with
//! Debian's kubectl (hearth_vm_tests::kube): they install, take hearth's fixtures and the MCO's
//! own end-to-end manifests, print like `oc get mc` / `oc get mcp`, keep pool status behind the status
//! subresource, refuse wrongly typed fields naming them, and keep a node to its own objects.
//!
//! The first run on a machine builds the binaries (images/build-kube.sh, 5-10 minutes,
//! needs root and the Debian archive); a failed build fails the tests.

use std::path::{Path, PathBuf};

use hearth_vm_tests::kube::{manifests_dir, KubeCluster};

fn start() -> KubeCluster {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let cluster = KubeCluster::start().expect("the test cluster starts");
    cluster.install_crds().expect("the shipped CRDs install");
    cluster
}

/// The column names of a `kubectl get` table's header line.
fn header(table: &str) -> Vec<String> {
    table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// The cells of the table row whose first cell is `name`.
fn row(table: &str, name: &str) -> Vec<String> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|cells| cells.first().map(String::as_str) == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_cluster_serves_the_shipped_crds_and_rbac() {
    let cluster = start();
    cluster.install_rbac().unwrap();
    let kube = manifests_dir();
    for dir in ["crds", "rbac"] {
        let dir = kube.join(dir);
        // `kubectl diff` exits 0 only when the server's objects equal the files.
        cluster
            .kubectl(&["diff", "-f", &dir.to_string_lossy()])
            .unwrap_or_else(|e| panic!("{} differs from the cluster: {e:#}", dir.display()));
    }
    let shipped = cluster
        .kubectl(&[
            "apply",
            "--dry-run=client",
            "-o",
            "name",
            "-f",
            &kube.join("crds").to_string_lossy(),
        ])
        .unwrap();
    let mut shipped: Vec<&str> = shipped.lines().collect();
    shipped.sort();
    let served = cluster.kubectl(&["get", "crd", "-o", "name"]).unwrap();
    let mut served: Vec<&str> = served.lines().collect();
    served.sort();
    assert_eq!(served, shipped);
    assert_eq!(
        shipped,
        [
            "customresourcedefinition.apiextensions.k8s.io/machineconfignodes.machineconfiguration.openshift.io",
            "customresourcedefinition.apiextensions.k8s.io/machineconfigpools.machineconfiguration.openshift.io",
            "customresourcedefinition.apiextensions.k8s.io/machineconfigs.machineconfiguration.openshift.io",
            "customresourcedefinition.apiextensions.k8s.io/machineconfigurations.operator.openshift.io",
        ]
    );
}

/// `kubectl auth can-i` as `user` in `group` (the admin impersonates): true for "yes", false for
/// "no", a panic for anything else.
fn can_i(cluster: &KubeCluster, user: &str, group: &str, args: &[&str]) -> bool {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let as_user = format!("--as={user}");
    let as_group = format!("--as-group={group}");
    all.push(&as_user);
    all.push(&as_group);
    match cluster.kubectl(&all) {
        Ok(out) if out == "yes" => true,
        Err(e) if format!("{e:#}").contains("--- stdout ---\nno") => false,
        other => panic!("kubectl {}: {other:?}", all.join(" ")),
    }
}

#[test]
fn the_shipped_roles_grant_what_docs_kubernetes_md_says() {
    let cluster = start();
    cluster.install_rbac().unwrap();
    cluster.grant_node("node-a").unwrap();
    let node = |args: &[&str]| can_i(&cluster, "system:node:node-a", "system:nodes", args);
    assert!(node(&[
        "list",
        "machineconfigs.machineconfiguration.openshift.io"
    ]));
    assert!(node(&[
        "watch",
        "machineconfigpools.machineconfiguration.openshift.io"
    ]));
    assert!(node(&[
        "get",
        "machineconfigurations.operator.openshift.io/cluster"
    ]));
    assert!(node(&[
        "patch",
        "machineconfignodes.machineconfiguration.openshift.io/node-a",
        "--subresource=status"
    ]));
    assert!(!node(&[
        "patch",
        "machineconfignodes.machineconfiguration.openshift.io/node-b",
        "--subresource=status"
    ]));
    assert!(!node(&[
        "create",
        "machineconfigs.machineconfiguration.openshift.io"
    ]));
    assert!(!node(&[
        "delete",
        "machineconfignodes.machineconfiguration.openshift.io/node-a"
    ]));
    assert!(!node(&[
        "update",
        "machineconfigpools.machineconfiguration.openshift.io/worker",
        "--subresource=status"
    ]));

    let sa = "system:serviceaccount:hearth-system:hearth-controller";
    let controller = |args: &[&str]| can_i(&cluster, sa, "system:serviceaccounts", args);
    assert!(controller(&[
        "create",
        "pods",
        "--subresource=eviction",
        "-n",
        "default"
    ]));
    assert!(controller(&["list", "poddisruptionbudgets.policy", "-A"]));
    assert!(controller(&["patch", "nodes"]));
    assert!(controller(&[
        "create",
        "machineconfigs.machineconfiguration.openshift.io"
    ]));
    assert!(controller(&[
        "update",
        "machineconfigpools.machineconfiguration.openshift.io",
        "--subresource=status"
    ]));
    assert!(!controller(&["delete", "nodes"]));
    assert!(!controller(&["delete", "pods", "-n", "default"]));
    assert!(!controller(&["get", "secrets", "-A"]));
}

#[test]
fn manifests_apply_and_print_like_oc() {
    // Every fixture is accepted by `kubectl apply` except the one whose template left a string
    // where the MCO's schema has a boolean (`fips: ${{FIPS}}`): refused naming the field, as the
    // MCO's CRD does.
    apply_and_print_like_oc(
        &hearth_testdata::manifests_dir(),
        "fips-from-template.yaml",
        "iommu-kernel-arguments",
        None,
    );
}

#[test]
#[ignore = "needs the MCO e2e corpus: HEARTH_SHARED=DIR or ../shared beside the clone (.ci/run runs it)"]
fn mco_corpus_manifests_apply_and_print_like_oc() {
    // Every MachineConfig and MachineConfigPool of the MCO's end-to-end tests likewise, and one
    // too big for client-side apply.
    apply_and_print_like_oc(
        &hearth_testdata::mco_corpus_dir(),
        "change-fips.yaml",
        "add-ignition-kernel-arguments",
        Some("bz1866117-add-dummy-files.yaml"),
    );
}

/// `kubectl apply` of every YAML file in `dir`: only `fips` is refused (naming the field), and
/// `big`, which client-side apply refuses and server-side apply takes; then `kubectl get mc|mcp`
/// print the MCO's columns (`v34`: a MachineConfig of Ignition 3.4.0 among them).
fn apply_and_print_like_oc(dir: &Path, fips: &str, v34: &str, big: Option<&str>) {
    let cluster = start();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{}: {files:?}", dir.display());
    let mut names = Vec::new();
    let mut refused = Vec::new();
    for f in &files {
        match cluster.kubectl(&["apply", "-f", &f.to_string_lossy(), "-o", "name"]) {
            Ok(out) => names.extend(out.lines().map(str::to_string)),
            Err(e) => refused.push((
                f.file_name().unwrap().to_string_lossy().into_owned(),
                format!("{e:#}"),
            )),
        }
    }
    let refused_files: Vec<&str> = refused.iter().map(|(f, _)| f.as_str()).collect();
    let mut want: Vec<&str> = big.into_iter().chain([fips]).collect();
    want.sort();
    assert_eq!(refused_files, want, "{refused:#?}");
    let fips = &refused.iter().find(|(f, _)| f == fips).unwrap().1;
    assert!(fips.contains("spec.fips"), "{fips}");
    assert!(fips.contains("boolean"), "{fips}");
    if let Some(big) = big {
        // The big one (1.2 MB) is refused only by client-side apply, which keeps a copy of
        // the object in an annotation limited to 256 KiB; server-side apply takes it.
        let msg = &refused.iter().find(|(f, _)| f == big).unwrap().1;
        assert!(msg.contains("metadata.annotations: Too long"), "{msg}");
        let out = cluster
            .kubectl(&[
                "apply",
                "--server-side",
                "-f",
                &dir.join(big).to_string_lossy(),
                "-o",
                "name",
            ])
            .unwrap();
        names.extend(out.lines().map(str::to_string));
    }
    assert_eq!(names.len(), files.len() - 1, "{names:?}");

    // `oc get mc` and `oc get mcp` headers.
    let mc = cluster.kubectl(&["get", "mc"]).unwrap();
    assert_eq!(
        header(&mc),
        words("NAME GENERATEDBYCONTROLLER IGNITIONVERSION AGE")
    );
    let r = row(&mc, v34);
    assert_eq!(r[1], "3.4.0", "{r:?}"); // no controller annotation: the column is empty
    let listed = mc.lines().count() - 1;
    let mc_files = names
        .iter()
        .filter(|n| n.contains("machineconfig."))
        .count();
    assert_eq!(listed, mc_files, "{mc}");

    let mcp = cluster.kubectl(&["get", "mcp"]).unwrap();
    assert_eq!(
        header(&mcp),
        words(
            "NAME CONFIG UPDATED UPDATING DEGRADED MACHINECOUNT READYMACHINECOUNT \
             UPDATEDMACHINECOUNT DEGRADEDMACHINECOUNT AGE"
        )
    );
}

#[test]
fn pool_status_is_written_through_the_status_subresource_and_shown() {
    let cluster = start();
    for pool in ["worker", "infra"] {
        cluster
            .apply(&format!(
                r#"{{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfigPool",
                    "metadata":{{"name":"{pool}"}},
                    "spec":{{"machineConfigSelector":{{"matchLabels":{{"machineconfiguration.openshift.io/role":"{pool}"}}}},
                             "nodeSelector":{{"matchLabels":{{"node-role.kubernetes.io/{pool}":""}}}},
                             "maxUnavailable":"25%","paused":false}},
                    "status":{{"machineCount":99}}}}"#
            ))
            .unwrap();
    }
    // Status sent with the object is dropped: only the subresource writes it.
    let before = cluster
        .kubectl(&["get", "mcp", "worker", "-o", "jsonpath={.status}"])
        .unwrap();
    assert!(!before.contains("99"), "{before}");

    let status = serde_json::json!({
        "observedGeneration": 1,
        "configuration": {"name": "rendered-worker-0123abc"},
        "machineCount": 3, "readyMachineCount": 2, "updatedMachineCount": 1,
        "degradedMachineCount": 1, "unavailableMachineCount": 1,
        "conditions": [
            {"type": "Updated", "status": "False", "lastTransitionTime": "2026-01-02T03:04:05Z"},
            {"type": "Updating", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"},
            {"type": "Degraded", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z",
             "reason": "NodeDegraded", "message": "1 node is reporting degraded status"}]
    });
    cluster
        .replace_status_as(
            cluster.kubeconfig(),
            "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker",
            status,
        )
        .unwrap();
    // The spec is untouched by the status write.
    assert_eq!(
        cluster
            .kubectl(&[
                "get",
                "mcp",
                "worker",
                "-o",
                "jsonpath={.spec.maxUnavailable}"
            ])
            .unwrap(),
        "25%"
    );

    let table = cluster.kubectl(&["get", "mcp"]).unwrap();
    let worker = row(&table, "worker");
    assert_eq!(
        worker[..9],
        words("worker rendered-worker-0123abc False True True 3 2 1 1")[..],
        "{table}"
    );
    // The other pool has no status yet: the MCO's columns are empty, not zero.
    let infra = row(&table, "infra");
    assert_eq!(infra.len(), 2, "{table}"); // NAME and AGE only

    // Zero values are values: an empty pool's status is all zeros and empty strings, and the
    // pool's `paused: false` is kept (a validator that took them for null refused them).
    cluster
        .replace_status_as(
            cluster.kubeconfig(),
            "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/infra",
            serde_json::json!({
                "configuration": {"name": "rendered-infra-0"},
                "machineCount": 0, "readyMachineCount": 0, "updatedMachineCount": 0,
                "degradedMachineCount": 0, "unavailableMachineCount": 0,
                "conditions": [{"type": "Updated", "status": "True", "reason": "", "message": "",
                                "lastTransitionTime": "2026-01-02T03:04:05Z"}]
            }),
        )
        .unwrap();
    let table = cluster.kubectl(&["get", "mcp", "infra"]).unwrap();
    assert_eq!(
        row(&table, "infra")[..7],
        words("infra rendered-infra-0 True 0 0 0 0")[..],
        "{table}"
    );
    assert_eq!(
        cluster
            .kubectl(&["get", "mcp", "infra", "-o", "jsonpath={.spec.paused}"])
            .unwrap(),
        "false"
    );
}

/// Issue 31: kustomize patch fragments (metadata and labels, no spec), which the MCO's CRDs
/// take, were refused by `kubectl apply` because hearth's CRDs made `spec` required.
#[test]
fn objects_without_a_spec_apply_as_with_the_mcos_crds() {
    let cluster = start();
    for kind in ["MachineConfig", "MachineConfigPool"] {
        let name = format!("fragment-{}", kind.to_ascii_lowercase());
        cluster
            .apply(&format!(
                r#"{{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"{kind}",
                    "metadata":{{"name":"{name}","labels":{{"site":"edge"}}}}}}"#
            ))
            .unwrap_or_else(|e| panic!("{kind} without a spec: {e:#}"));
        let labels = cluster
            .kubectl(&[
                "get",
                &kind.to_ascii_lowercase(),
                &name,
                "-o",
                "jsonpath={.metadata.labels.site}",
            ])
            .unwrap();
        assert_eq!(labels, "edge", "{kind}");
    }
}

#[test]
fn wrongly_typed_fields_are_refused_naming_the_field() {
    let cluster = start();
    let err = cluster
        .apply(
            r#"{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig",
                "metadata":{"name":"99-bad-kargs"},
                "spec":{"config":{"ignition":{"version":"3.4.0"}},"kernelArguments":"nosmt"}}"#,
        )
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("spec.kernelArguments"), "{msg}");
    assert!(msg.contains("99-bad-kargs"), "{msg}");
    assert!(
        cluster.kubectl(&["get", "mc", "99-bad-kargs"]).is_err(),
        "a refused object must not exist"
    );

    // The node-disruption policy: an unknown action and a unit name without a unit type.
    let err = cluster
        .apply(
            r#"{"apiVersion":"operator.openshift.io/v1","kind":"MachineConfiguration",
                "metadata":{"name":"cluster"},
                "spec":{"nodeDisruptionPolicy":{"units":[
                  {"name":"chronyd","actions":[{"type":"Explode"}]}]}}}"#,
        )
        .unwrap_err();
    let msg = format!("{err:#}");
    // Kubernetes 1.20 names list items without their index.
    assert!(
        msg.contains("spec.nodeDisruptionPolicy.units.name"),
        "{msg}"
    );
    assert!(msg.contains(r#""chronyd""#), "{msg}");
    assert!(
        msg.contains("spec.nodeDisruptionPolicy.units.actions.type"),
        "{msg}"
    );
    assert!(msg.contains(r#""Explode""#), "{msg}");
    // And a valid one is taken.
    cluster
        .apply(
            r#"{"apiVersion":"operator.openshift.io/v1","kind":"MachineConfiguration",
                "metadata":{"name":"cluster"},
                "spec":{"nodeDisruptionPolicy":{
                  "files":[{"path":"/etc/chrony.conf","actions":[{"type":"Restart","restart":{"serviceName":"chronyd.service"}}]}],
                  "units":[{"name":"chronyd.service","actions":[{"type":"None"}]}],
                  "sshkey":{"actions":[{"type":"None"}]}}}}"#,
        )
        .unwrap();
}

#[test]
fn nodes_read_configs_and_write_only_their_own_machineconfignode() {
    let cluster = start();
    cluster.install_rbac().unwrap();
    for n in ["node-a", "node-b"] {
        cluster.grant_node(n).unwrap();
        cluster
            .apply(&format!(
                r#"{{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfigNode",
                    "metadata":{{"name":"{n}"}},
                    "spec":{{"node":{{"name":"{n}"}},"pool":{{"name":"worker"}},
                             "configVersion":{{"desired":"rendered-worker-1"}}}}}}"#
            ))
            .unwrap();
    }
    cluster
        .apply(&hearth_testdata::manifest("iommu-kernel-arguments.yaml"))
        .unwrap();
    let a = cluster.node_kubeconfig("node-a").unwrap();

    // Reads every MachineConfig, writes none.
    let mcs = cluster
        .kubectl_as(&a, &["get", "mc", "-o", "name"])
        .unwrap();
    assert!(
        mcs.contains("machineconfig.machineconfiguration.openshift.io/iommu-kernel-arguments"),
        "{mcs}"
    );
    let err = cluster
        .kubectl_as(&a, &["label", "mc", "iommu-kernel-arguments", "x=y"])
        .unwrap_err();
    assert!(format!("{err:#}").contains("Forbidden"), "{err:#}");

    // Writes its own MachineConfigNode's status, through the status subresource ...
    let put = |kubeconfig: &std::path::Path, n: &str| {
        cluster.replace_status_as(
            kubeconfig,
            &format!("/apis/machineconfiguration.openshift.io/v1/machineconfignodes/{n}"),
            serde_json::json!({
                "observedGeneration": 1,
                "configVersion": {"current": "rendered-worker-0", "desired": "rendered-worker-1"},
                "conditions": [{"type": "Updated", "status": "False", "reason": "Updating",
                                "message": "applying", "lastTransitionTime": "2026-01-02T03:04:05Z"}]
            }),
        )
    };
    put(&a, "node-a").unwrap();
    let table = cluster.kubectl(&["get", "machineconfignodes"]).unwrap();
    assert_eq!(
        header(&table),
        words("NAME POOLNAME DESIREDCONFIG CURRENTCONFIG UPDATED AGE")
    );
    let wide = cluster
        .kubectl(&["get", "machineconfignodes", "-o", "wide"])
        .unwrap();
    assert_eq!(
        header(&wide),
        words(
            "NAME POOLNAME DESIREDCONFIG CURRENTCONFIG UPDATED AGE UPDATEPREPARED UPDATEEXECUTED \
             UPDATEPOSTACTIONCOMPLETE UPDATECOMPLETE RESUMED UPDATEDFILESANDOS CORDONEDNODE \
             DRAINEDNODE REBOOTEDNODE UNCORDONEDNODE"
        )
    );
    assert_eq!(
        row(&table, "node-a")[..5],
        words("node-a worker rendered-worker-1 rendered-worker-0 False")[..],
        "{table}"
    );

    // ... and not another node's.
    let err = put(&a, "node-b").unwrap_err();
    assert!(format!("{err:#}").contains("Forbidden"), "{err:#}");
    assert_eq!(row(&table, "node-b").len(), 4, "{table}"); // no CURRENTCONFIG, UPDATED
    let b_status = cluster
        .kubectl(&[
            "get",
            "machineconfignode",
            "node-b",
            "-o",
            "jsonpath={.status}",
        ])
        .unwrap();
    assert_eq!(b_status, "", "node-b's status must be untouched");
}
