//! hearth-server serving an ostree repository (`--ostree-repo`) behind its authentication, and
//! a real ostree host pivoting to an image pulled from it: the OS backend (libostree, from
//! outside on the container's live root) with the fleet CA and the node's credential as in
//! `/etc/hearth/os.json`, then the reboot into the new deployment. libostree runs in the
//! workspace's `hearth-ostree-helper`, as on a node.

use crate::common;

use common::*;
use hearth_hostops::os::{OsBackend, OsChange, OsConfig, OsError};
use hearth_vm_tests::ostree::{refs, OstreeHost};
use reqwest::StatusCode;

fn put(host: &OstreeHost, path: &str, content: &[u8]) {
    let p = host.live_path(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, content).unwrap();
}

/// The OS backend at the container's live root, with the workspace's helper process.
fn os_backend(host: &OstreeHost, config: OsConfig) -> OsBackend {
    let helper =
        hearth_vm_tests::qemu::workspace_binary("hearth-ostree-helper", "hearth-ostree-helper")
            .unwrap();
    match OsBackend::detect_with_config(&host.live_root(), config) {
        OsBackend::Ostree(o) => OsBackend::Ostree(o.with_helper(helper)),
        other => panic!("not an ostree host: {other:?}"),
    }
}

fn config(port: u16, with_token: bool) -> OsConfig {
    let mut remote = serde_json::json!({
        "name": "hearth",
        "url": format!("https://127.0.0.1:{port}/ostree/repo"),
        "tlsCaPath": "/etc/hearth/ca.crt",
    });
    if with_token {
        remote["bearerTokenFile"] = "/var/lib/hearth/node-token".into();
    }
    serde_json::from_value(serde_json::json!({ "remote": remote })).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_pivots_to_an_image_served_by_hearth_server_with_its_credential() {
    let mut host = tokio::task::block_in_place(|| {
        OstreeHost::boot().expect("boot an ostree deployment (needs root, systemd-nspawn, ostree)")
    });
    let dir = tempfile::tempdir().unwrap();
    let running = start(
        dir.path(),
        hearth_server::app::Options {
            ostree_repo: Some(host.images().repo.clone()),
            ..options(5)
        },
    )
    .await;
    let port = running.addr.port();
    let admin = Api::admin(&running);
    let node = admin
        .enroll(
            &bootstrap_token(&running, "worker"),
            "node-a",
            serde_json::json!({}),
        )
        .await;

    // The endpoint: admins and nodes read it; bootstrap tokens and strangers do not; paths stay
    // inside the repository.
    assert_eq!(node.get("/ostree/repo/config").await.status, StatusCode::OK);
    assert_eq!(
        admin.get("/ostree/repo/config").await.status,
        StatusCode::OK
    );
    let boot = admin.with_token(&bootstrap_token(&running, "worker"));
    assert_eq!(
        boot.get("/ostree/repo/config").await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        admin.with_token("").get("/ostree/repo/config").await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        node.get("/ostree/repo/objects/..%2F..%2Fconfig")
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        node.get("/ostree/repo/nope").await.status,
        StatusCode::NOT_FOUND
    );

    put(
        &host,
        "/etc/hearth/ca.crt",
        &std::fs::read(dir.path().join("pki/ca.crt")).unwrap(),
    );
    let change = OsChange {
        os_image: Some(refs::V2.into()),
        ..Default::default()
    };

    // Without the node's credential libostree's pull is refused (HTTP 401), with a wrong one
    // too; nothing is staged.
    let backend = os_backend(&host, config(port, false));
    let e = backend.stage(&change).await.unwrap_err();
    assert!(matches!(e, OsError::Pull { .. }), "{e}");
    assert!(e.to_string().contains("401"), "{e}");
    put(&host, "/var/lib/hearth/node-token", b"not-a-credential\n");
    let backend = os_backend(&host, config(port, true));
    let e = backend.stage(&change).await.unwrap_err();
    assert!(e.to_string().contains("401"), "{e}");

    // With it (as the agent writes it when it enrolls): pulled over TLS from the server.
    put(
        &host,
        "/var/lib/hearth/node-token",
        format!("{}\n", node.token).as_bytes(),
    );
    let staged = backend.stage(&change).await.unwrap();
    assert_eq!(staged.deployment.image, refs::V2);
    assert!(
        staged.pulled.is_some(),
        "pulled from the server: {staged:?}"
    );
    tokio::task::block_in_place(|| {
        host.reboot(std::time::Duration::from_secs(120)).unwrap();
        assert_eq!(
            host.exec_ok(&["cat", "/usr/lib/hearth-image-version"])
                .unwrap(),
            "v2\n"
        );
    });
    // A new boot: a new live root.
    let backend = os_backend(&host, config(port, true));
    assert!(backend
        .verify_booted(&staged.expectation())
        .await
        .unwrap()
        .is_empty());
    running.shutdown().await;
    tokio::task::block_in_place(|| host.shutdown().unwrap());
}
