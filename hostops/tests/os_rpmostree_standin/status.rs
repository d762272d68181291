//! Status: deployments, their boot configurations, containers and kernel types as the
//! backend reads them.

use hearth_config::model::KernelType;
use hearth_hostops::os::rpmostree::{DEFAULT_KERNEL_PACKAGES, REALTIME_KERNEL_PACKAGES};
use serde_json::json;

use super::rpmostree_standin::Deployment;
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_status_reads_deployments_and_boot_configs() {
    let mut rollback = Deployment::booted(OS, FCOS, "39.20231201.3.0", &["rw", "quiet"]);
    rollback.booted = false;
    rollback.base_checksum = "1".repeat(64);
    rollback.checksum = "1".repeat(64);
    rollback.pinned = true;
    let booted = fcos(&["rw", "quiet", "mitigations=auto,nosmt"]);
    let e = env(vec![booted.clone(), rollback.clone()]).await;

    let status = e.backend.status().await.unwrap();
    assert_eq!(status.backend, "rpm-ostree");
    assert_eq!(status.deployments.len(), 2);
    let b = &status.booted;
    assert_eq!(b.id.osname, OS);
    assert_eq!(b.id.checksum, booted.checksum);
    assert_eq!(b.id.serial, 0);
    assert_eq!(b.index, 0);
    assert!(b.booted && !b.staged && !b.pinned);
    assert_eq!(b.refspec.as_deref(), Some(FCOS));
    assert_eq!(b.image, FCOS);
    assert_eq!(b.version.as_deref(), Some("39.20240101.3.0"));
    assert_eq!(b.kernel_type, KernelType::Default);
    // From GetDeploymentBootConfig's `options`, without ostree=.
    assert_eq!(b.kernel_args, s(&["rw", "quiet", "mitigations=auto,nosmt"]));
    assert_eq!(b.boot_checksum, booted.boot_csum);
    assert!(status.pending.is_none());
    let r = status.rollback.as_ref().expect("a rollback deployment");
    assert_eq!(r.id.checksum, "1".repeat(64));
    assert!(r.pinned && !r.booted);
    assert_eq!(r.kernel_args, s(&["rw", "quiet"]));

    // What was sent: a registered client, one boot config per deployment (by index).
    let calls = e.standin.calls();
    assert_eq!(calls[0].method, "RegisterClient");
    assert_eq!(calls[0].args, json!({"options": {"id": "hearth"}}));
    let configs: Vec<_> = calls
        .iter()
        .filter(|c| c.method == "GetDeploymentBootConfig")
        .map(|c| c.args.clone())
        .collect();
    assert_eq!(
        configs,
        vec![
            json!({"deployid": "0", "is_pending": false}),
            json!({"deployid": "1", "is_pending": false})
        ]
    );
    assert_eq!(calls.last().unwrap().method, "UnregisterClient");
    assert!(e.standin.clients().is_empty(), "the client unregistered");
    assert!(
        transactions(&e.standin).is_empty(),
        "status starts no transaction"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_status_of_a_container_booted_realtime_host() {
    let image = format!(
        "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{}",
        "ab".repeat(32)
    );
    let mut d = Deployment::booted(
        OS,
        &format!("ostree-unverified-registry:{image}"),
        "416.94.202405291527-0",
        &["rw"],
    );
    d.requested_packages = s(&REALTIME_KERNEL_PACKAGES);
    d.requested_base_removals = s(&DEFAULT_KERNEL_PACKAGES);
    let e = env(vec![d]).await;
    let b = e.backend.status().await.unwrap().booted;
    assert_eq!(b.image, image, "the transport is not part of the image");
    let digest = format!("sha256:{}", "ab".repeat(32));
    assert_eq!(b.image_digest.as_deref(), Some(digest.as_str()));
    assert_eq!(
        b.refspec.as_deref(),
        Some(format!("ostree-unverified-registry:{image}").as_str())
    );
    assert_eq!(b.kernel_type, KernelType::Realtime);
}
