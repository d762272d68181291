//! Failures: a failed transaction, an unreachable daemon, another client's transaction.

use hearth_config::model::KernelType;
use hearth_hostops::os::{
    OsBackend, OsChange, OsError, RpmOstreeBackend, NOT_OSTREE_REASON, RPM_OSTREE_REASON,
};

use super::rpmostree_standin::{PrivateBus, Standin};
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_a_failed_transaction_carries_the_daemon_message() {
    let e = env(vec![fcos(&["rw"])]).await;
    let daemon_msg = "Importing: Unable to pull quay.io/x/y@sha256:00: manifest unknown";
    e.standin.fail_next("UpdateDeployment", daemon_msg);
    let image = format!("quay.io/x/y@sha256:{}", "0".repeat(64));
    let err = e
        .backend
        .stage(&OsChange {
            os_image: Some(image),
            kargs_append: s(&["nosmt"]),
            ..Default::default()
        })
        .await
        .unwrap_err();
    let recorded = e.standin.calls_of("UpdateDeployment")[0]
        .transaction
        .clone()
        .unwrap();
    match &err {
        OsError::RpmOstree {
            method,
            transaction,
            message,
        } => {
            assert_eq!(method, "UpdateDeployment");
            assert_eq!(transaction.as_deref(), Some(recorded.as_str()));
            assert!(message.starts_with(daemon_msg), "{message}");
        }
        other => panic!("expected an rpm-ostree error, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("UpdateDeployment"), "{text}");
    assert!(text.contains(&recorded), "{text}");
    assert!(text.contains("manifest unknown"), "{text}");
    // Nothing was staged, and KernelArgs was not attempted.
    assert_eq!(transactions(&e.standin), ["UpdateDeployment"]);
    assert_eq!(e.standin.deployments().len(), 1);

    // The second transaction fails: the half-made deployment is removed, and the error says so.
    e.standin.clear_calls();
    e.standin
        .fail_next("KernelArgs", "Failed to write bootloader configuration");
    let err = e
        .backend
        .stage(&OsChange {
            kernel_type: Some((KernelType::Default, KernelType::Realtime)),
            kargs_append: s(&["nosmt"]),
            ..Default::default()
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("KernelArgs"), "{err}");
    assert!(
        err.contains("Failed to write bootloader configuration"),
        "{err}"
    );
    assert!(
        err.contains("removed with Cleanup(pending-deploy)"),
        "{err}"
    );
    assert_eq!(
        transactions(&e.standin),
        ["UpdateDeployment", "KernelArgs", "Cleanup"]
    );
    let ds = e.standin.deployments();
    assert_eq!(ds.len(), 1, "no pending deployment is left: {ds:#?}");
    assert!(e.backend.status().await.unwrap().pending.is_none());

    // The daemon dies in the middle of a transaction: the connection closes without Finished.
    e.standin.clear_calls();
    e.standin.crash_next("KernelArgs");
    let err = e
        .backend
        .stage(&kargs_change(&[], &["nosmt"]))
        .await
        .unwrap_err();
    let recorded = e.standin.calls_of("KernelArgs")[0]
        .transaction
        .clone()
        .unwrap();
    match &err {
        OsError::RpmOstree {
            method,
            transaction,
            message,
        } => {
            assert_eq!(method, "KernelArgs");
            assert_eq!(transaction.as_deref(), Some(recorded.as_str()));
            assert!(
                message.contains("closed the transaction's connection before Finished"),
                "{message}"
            );
        }
        other => panic!("expected an rpm-ostree error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_unreachable_daemon_is_a_clear_error() {
    init_logging();
    let root = rpm_ostree_root();
    // No bus at that address.
    let dir = tempfile::tempdir().unwrap();
    let nowhere = format!("unix:path={}/no-bus-here", dir.path().display());
    let b = OsBackend::detect_on_bus(root.path(), &nowhere)
        .await
        .unwrap();
    assert_eq!(b.kind(), "none");
    let reason = b.unsupported_reason().unwrap();
    assert!(
        reason.contains("cannot be reached") && reason.contains(&nowhere),
        "{reason}"
    );
    assert!(reason.contains("org.projectatomic.rpmostree1"), "{reason}");
    let err = b.status().await.unwrap_err().to_string();
    assert!(err.contains("cannot be reached"), "{err}");

    // A real bus without the daemon on it.
    let bus = PrivateBus::start();
    let b = OsBackend::detect_on_bus(root.path(), &bus.address)
        .await
        .unwrap();
    let reason = b.unsupported_reason().unwrap();
    assert!(reason.contains("is not on this bus"), "{reason}");
    let direct = RpmOstreeBackend::new(root.path(), &bus.address);
    let err = direct.status().await.unwrap_err();
    match &err {
        OsError::RpmOstree {
            method, message, ..
        } => {
            assert_eq!(method, "Sysroot.RegisterClient");
            assert!(
                message.contains("org.projectatomic.rpmostree1"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }

    // The daemon goes away between detection and use.
    let standin = Standin::start(&bus.address, vec![fcos(&["rw"])]).await;
    let b = OsBackend::detect_on_bus(root.path(), &bus.address)
        .await
        .unwrap();
    assert_eq!(b.kind(), "rpm-ostree");
    standin.stop().await;
    let err = b
        .stage(&kargs_change(&[], &["nosmt"]))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("RegisterClient") && err.contains("not on this bus"),
        "{err}"
    );

    // Detection without a bus is unchanged; a host that is not an ostree host stays one.
    let b = OsBackend::detect(root.path()).unwrap();
    assert_eq!(b.unsupported_reason(), Some(RPM_OSTREE_REASON));
    let plain = tempfile::tempdir().unwrap();
    let b = OsBackend::detect_on_bus(plain.path(), &bus.address)
        .await
        .unwrap();
    assert_eq!(b.unsupported_reason(), Some(NOT_OSTREE_REASON));
}

/// Another client's transaction (zincati, an admin) makes the daemon refuse methods with
/// "Transaction in progress": hearth waits for it, up to a limit, then reports it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_waits_while_another_transaction_runs() {
    let e = env(vec![fcos(&["rw"])]).await;
    e.standin.busy_next("KernelArgs", 2);
    let staged = e
        .backend
        .stage(&kargs_change(&[], &["nosmt"]))
        .await
        .unwrap();
    assert_eq!(staged.deployment.kernel_args, s(&["rw", "nosmt"]));
    let attempts = e.standin.calls_of("KernelArgs");
    assert_eq!(attempts.len(), 3, "two refused, the third started");
    assert!(attempts[0].transaction.is_none() && attempts[1].transaction.is_none());
    assert!(attempts[2].transaction.is_some());

    // Busy for longer than the backend waits: the daemon's message, and how long it waited.
    e.standin.reboot();
    e.standin.clear_calls();
    e.standin.busy_next("KernelArgs", u32::MAX);
    let impatient = OsBackend::RpmOstree(
        RpmOstreeBackend::new(e.root.path(), &e._bus.address)
            .with_busy_wait(std::time::Duration::from_millis(700)),
    );
    let err = impatient
        .stage(&kargs_change(&[], &["quiet"]))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("rpm-ostree KernelArgs: Transaction in progress: upgrade"),
        "{err}"
    );
    assert!(err.contains("waited 0 s for it to end"), "{err}");
    assert!(e.standin.calls_of("KernelArgs").len() >= 2, "it retried");
    assert!(transactions(&e.standin).is_empty());
}
