//! How the daemon is reached: transactions served by GLib's `GDBusServer`, and D-Bus
//! activation on the first call.

use hearth_hostops::os::{OsBackend, OsChange};
use serde_json::json;

use super::rpmostree_standin::{self, PrivateBus};
use super::*;

/// The transaction endpoint served by GLib's `GDBusServer` (what rpm-ostreed uses), not by zbus:
/// hearth's peer-to-peer client authenticates, starts, and reads the signals of a GLib server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_transactions_served_by_glib_gdbusserver() {
    let e = env(vec![fcos(&["rw"])]).await;
    e.standin.use_glib_transactions();
    let image = format!("quay.io/fedora/fedora-coreos@sha256:{}", "ef".repeat(32));
    let staged = e
        .backend
        .stage(&OsChange {
            os_image: Some(image.clone()),
            kargs_append: s(&["nosmt"]),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(staged.deployment.image, image);
    assert_eq!(staged.deployment.kernel_args, s(&["rw", "nosmt"]));
    assert_eq!(transactions(&e.standin), ["UpdateDeployment", "KernelArgs"]);
    let starts: Vec<_> = e
        .standin
        .calls()
        .into_iter()
        .filter(|c| c.method == "Start")
        .map(|c| c.args)
        .collect();
    assert_eq!(
        starts,
        vec![
            json!({"for": "UpdateDeployment", "server": "GDBusServer"}),
            json!({"for": "KernelArgs", "server": "GDBusServer"})
        ]
    );

    // A failure's message arrives through GLib's Finished signal too.
    e.standin
        .fail_next("Rollback", "Transaction in progress: upgrade");
    e.standin.reboot();
    let err = e.backend.rollback().await.unwrap_err().to_string();
    assert!(err.contains("Rollback (transaction unix:path="), "{err}");
    assert!(err.contains("Transaction in progress: upgrade"), "{err}");
}

async fn name_has_owner(address: &str) -> bool {
    let conn = zbus::connection::Builder::address(address)
        .build()
        .await
        .unwrap();
    conn.call_method(
        Some("org.freedesktop.DBus"),
        "/org/freedesktop/DBus",
        Some("org.freedesktop.DBus"),
        "NameHasOwner",
        &(rpmostree_standin::BUS_NAME,),
    )
    .await
    .unwrap()
    .body()
    .deserialize::<bool>()
    .unwrap()
}

/// On a real host rpm-ostreed is D-Bus-activated: nothing runs until a client sends it a
/// message. Here dbus-daemon activates the stand-in (this test binary) on hearth's first call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_the_first_call_activates_the_daemon() {
    init_logging();
    let exe = std::env::current_exe().unwrap();
    let bus = PrivateBus::start_activatable(
        &exe,
        &[
            "--exact",
            "standin_activated_service_entry",
            "--test-threads=1",
        ],
        &[(ACTIVATED_ENV, "rw console=ttyS0 activated=1")],
    );
    assert!(
        !name_has_owner(&bus.address).await,
        "nothing owns the name before the first call"
    );
    let root = rpm_ostree_root();
    let b = OsBackend::detect_on_bus(root.path(), &bus.address)
        .await
        .unwrap();
    assert_eq!(b.kind(), "rpm-ostree", "{:?}", b.unsupported_reason());
    assert!(name_has_owner(&bus.address).await, "activated");
    let status = b.status().await.unwrap();
    assert_eq!(
        status.booted.kernel_args,
        s(&["rw", "console=ttyS0", "activated=1"]),
        "the activated process answers"
    );
    let staged = b.stage(&kargs_change(&[], &["nosmt"])).await.unwrap();
    assert_eq!(
        staged.deployment.kernel_args,
        s(&["rw", "console=ttyS0", "activated=1", "nosmt"])
    );
}
