//! After staging: verifying the boot after a simulated reboot, and rollback.

use hearth_config::model::KernelType;
use hearth_hostops::os::{OsChange, OsError, RollbackOutcome};
use serde_json::json;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_verify_booted_after_a_simulated_reboot() {
    let e = env(vec![fcos(&["rw"])]).await;
    let staged = e
        .backend
        .stage(&OsChange {
            kernel_type: Some((KernelType::Default, KernelType::Realtime)),
            kargs_append: s(&["hugepages=32"]),
            ..Default::default()
        })
        .await
        .unwrap();
    let expected = staged.expectation();
    // Before the reboot: another deployment is booted, and the staged one is still staged.
    let diffs = e.backend.verify_booted(&expected).await.unwrap();
    assert!(
        diffs.iter().any(|d| d.contains("is still staged")),
        "{diffs:?}"
    );
    assert!(
        diffs.iter().any(|d| d.contains("hugepages=32 is missing")),
        "{diffs:?}"
    );
    // After it, the host booted exactly what was staged.
    e.standin.reboot();
    let diffs = e.backend.verify_booted(&expected).await.unwrap();
    assert!(diffs.is_empty(), "{diffs:?}");
    let status = e.backend.status().await.unwrap();
    assert_eq!(status.booted.id, staged.deployment.id);
    assert_eq!(status.booted.kernel_type, KernelType::Realtime);
    assert_eq!(status.rollback.unwrap().id, staged.from);
    // On a real boot the running kernel's command line is checked too (missing arguments).
    let cmdline = e.root.path().join("proc/cmdline");
    std::fs::create_dir_all(cmdline.parent().unwrap()).unwrap();
    std::fs::write(
        &cmdline,
        "BOOT_IMAGE=(hd0,gpt3)/ostree/x/vmlinuz ostree=/ostree/boot.1/rhcos/x/0 rw\n",
    )
    .unwrap();
    let diffs = e.backend.verify_booted(&expected).await.unwrap();
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert!(
        diffs[0].starts_with("kernel argument hugepages=32 is missing from /proc/cmdline"),
        "{diffs:?}"
    );
    std::fs::write(
        &cmdline,
        "BOOT_IMAGE=(hd0,gpt3)/ostree/x/vmlinuz ostree=/ostree/boot.1/rhcos/x/0 rw hugepages=32\n",
    )
    .unwrap();
    assert!(e.backend.verify_booted(&expected).await.unwrap().is_empty());
    std::fs::remove_file(&cmdline).unwrap();

    // An expectation of another deployment is reported as such.
    let mut wrong = expected.clone();
    wrong.deployment = Some(staged.from.clone());
    let diffs = e.backend.verify_booted(&wrong).await.unwrap();
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert!(diffs[0].contains("not the staged deployment"), "{diffs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standin_rollback_drops_pending_then_rolls_back() {
    let e = env(vec![fcos(&["rw"])]).await;
    // Only one deployment: nothing to roll back to.
    let err = e.backend.rollback().await.unwrap_err();
    assert!(matches!(err, OsError::NoRollback(_)), "{err}");
    assert!(err.to_string().contains("only deployment"), "{err}");

    let staged = e
        .backend
        .stage(&kargs_change(&[], &["nosmt"]))
        .await
        .unwrap();
    // A pending deployment: rollback drops it.
    e.standin.clear_calls();
    let out = e.backend.rollback().await.unwrap();
    assert_eq!(
        out,
        RollbackOutcome::CancelledPending {
            dropped: staged.deployment.id.clone()
        }
    );
    assert_eq!(transactions(&e.standin), ["Cleanup"]);
    assert_eq!(e.standin.deployments().len(), 1);

    // Booted into a new deployment: rollback makes the previous one the default.
    let staged = e
        .backend
        .stage(&kargs_change(&[], &["nosmt"]))
        .await
        .unwrap();
    e.standin.reboot();
    e.standin.clear_calls();
    let out = e.backend.rollback().await.unwrap();
    assert_eq!(
        out,
        RollbackOutcome::RolledBack {
            from: staged.deployment.id.clone(),
            to: staged.from.clone()
        }
    );
    assert_eq!(transactions(&e.standin), ["Rollback"]);
    assert_eq!(
        e.standin.calls_of("Rollback")[0].args,
        json!({"options": {}})
    );
    e.standin.reboot();
    let status = e.backend.status().await.unwrap();
    assert_eq!(status.booted.id, staged.from);
    assert_eq!(status.booted.kernel_args, s(&["rw"]));

    // A failed Rollback transaction carries the daemon's message.
    e.standin
        .fail_next("Rollback", "Transaction in progress: upgrade");
    // The deployment with nosmt is now the rollback one.
    let err = e.backend.rollback().await.unwrap_err().to_string();
    assert!(
        err.contains("Rollback") && err.contains("Transaction in progress: upgrade"),
        "{err}"
    );
}
